"""The GPU run, prepared here and run there.

The GPU machine this is made for has Python 3.12, torch, torchvision, matplotlib, tqdm, numpy and pytest, and
reaches no package index. Everything else the run needs travels in one git-ignored folder, the carry folder:

    python tools/gpu.py carry [--dir .gpu-carry] [--python-version 3.12]
        wheels of the notebook stack (no torch), graphviz's `dot` from Debian's packages with its libraries, and the
        MNIST IDX files (gzipped); prints its size.
    python3 tools/gpu.py run {train,bench,notebooks} [--carry .gpu-carry] [--results DIR] [--smoke]
        on the GPU machine: installs what is missing from the carry folder (no index), then runs the part and writes
        what it measures into DIR ($OUT when it is set, else gpu-results/); one summary line at the end.
    python tools/gpu.py smoke
        the three parts with tiny sizes on this CPU, in a fresh virtual environment that holds only what the GPU
        machine holds, everything else installed from a carry folder made for this Python.

`make gpu-carry`, `make gpu-run PART=...` and `make gpu-smoke` call these."""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the run installs from the carry folder. torchviz comes without its dependencies (it would pull torch);
# setuptools because torchviz 0.0.3 imports distutils, gone from Python 3.12.
STACK = ["nbval", "nbclient", "nbformat", "ipykernel", "jupyter_client", "ipython", "ipywidgets", "graphviz",
         "setuptools"]
NO_DEPS = ["torchviz"]
# What the GPU machine already has; `smoke` gives its environment only these.
GPU_HAS = ["torch", "torchvision", "matplotlib", "tqdm", "numpy", "pytest"]
# graphviz's dot and the libraries it loads, from Debian's packages; plugins kept: layout and svg/png-free output.
DEBS = ["graphviz", "libgvc6", "libcgraph6", "libcdt5", "libpathplan4", "libltdl7", "libexpat1", "zlib1g"]
PLUGINS = ("libgvplugin_core", "libgvplugin_dot_layout")
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64", "linux_x86_64"]
LIMIT = 64 * 2**20              # what travels to the GPU machine: at most 64 MiB, the working tree included
PARTS = ("train", "bench", "notebooks")


def sh(*cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file() and not p.is_symlink())


# --- carry ---------------------------------------------------------------------------------------------------------
def carry_wheels(folder: Path, python_version: str):
    wheels = folder / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    target = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
              *[x for p in PLATFORMS for x in ("--platform", p)]]
    pip = [sys.executable, "-m", "pip", "download", "-q", "-d", wheels, *target]
    sh(*pip, *STACK)
    sh(*pip, "--no-deps", *NO_DEPS)
    # the GPU machine has these (and the fresh smoke environment too): drop them, keep the folder small
    have = {n.replace("-", "_").lower() for n in GPU_HAS}
    for w in wheels.glob("*.whl"):
        if w.name.split("-")[0].lower() in have:
            w.unlink()


def carry_dot(folder: Path):
    debs, root = folder / "debs", folder / "graphviz"
    shutil.rmtree(debs, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    debs.mkdir(parents=True)
    try:
        sh("apt-get", "download", *DEBS, cwd=debs, stdout=subprocess.DEVNULL)
    except (subprocess.CalledProcessError, FileNotFoundError):
        sh("apt-get", "update", "-qq")
        sh("apt-get", "download", *DEBS, cwd=debs, stdout=subprocess.DEVNULL)
    for deb in sorted(debs.glob("*.deb")):
        sh("dpkg", "-x", deb, root)
    shutil.rmtree(debs)
    for p in list(root.rglob("*")):                       # documentation, man pages, the other programs
        if p.is_dir() and p.name in ("doc", "man", "lintian", "share") and p.parent.name in ("usr", "share"):
            shutil.rmtree(p, ignore_errors=True)
    for p in (root / "usr" / "bin").iterdir():
        if p.name != "dot":
            p.unlink()
    plugins = next(root.rglob("graphviz/libgvplugin_core.so.6")).parent
    for p in plugins.iterdir():
        if not p.name.startswith(PLUGINS):
            p.unlink()


def carry_mnist(folder: Path):
    sys.path.insert(0, str(ROOT))
    from gan_lessons import data
    data.load_mnist(train=True), data.load_mnist(train=False)         # fetched, or unpacked offline, once
    raw = Path(data.DEFAULT_ROOT) / "MNIST" / "raw"
    out = folder / "mnist"
    out.mkdir(parents=True, exist_ok=True)
    for pair in data.IDX.values():
        for name in pair:
            with open(raw / name, "rb") as src, gzip.open(out / f"{name}.gz", "wb", compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)


def carry(folder: Path, python_version: str, need_dot: bool = True) -> Path:
    folder = Path(folder)
    t0 = time.perf_counter()
    carry_wheels(folder, python_version)
    try:
        carry_dot(folder)
    except (subprocess.CalledProcessError, FileNotFoundError, StopIteration) as error:
        if need_dot:
            raise SystemExit(f"gpu-carry: could not get graphviz's dot from Debian's packages ({error}); "
                             "run it on a Debian or Ubuntu machine with apt-get") from None
        print(f"gpu-smoke: no dot from Debian's packages here ({error}); the smoke runs without it")
    carry_mnist(folder)
    (folder / "carry.json").write_text(json.dumps({"python_version": python_version, "stack": STACK + NO_DEPS,
                                                   "debs": DEBS}, indent=1) + "\n")
    total = size(folder)
    print(f"gpu-carry: {folder} holds {total / 2**20:.1f} MiB (limit {LIMIT / 2**20:.0f} MiB with the working tree), "
          f"made in {time.perf_counter() - t0:.0f} s")
    if total > LIMIT:
        raise SystemExit(f"gpu-carry: {folder} is over {LIMIT / 2**20:.0f} MiB: too large to carry")
    return folder


# --- run -----------------------------------------------------------------------------------------------------------
def prepare(folder: Path, work: Path) -> dict:
    """Install what is missing from the carry folder into this Python, and the environment the parts run in."""
    folder = Path(folder).resolve()
    if not (folder / "carry.json").exists():
        raise SystemExit(f"gpu-run: no carry folder at {folder}. Make it first, where there is a network: make gpu-carry")
    sh(sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", folder / "wheels", *STACK)
    sh(sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--find-links", folder / "wheels",
       *NO_DEPS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    env["DOT_VERSION"] = "not carried; graphs print as text trees"
    dot = folder / "graphviz" / "usr" / "bin" / "dot"
    if dot.exists():
        plugins = next((folder / "graphviz").rglob("graphviz/libgvplugin_core.so.6")).parent
        libs = sorted({str(p.parent) for p in (folder / "graphviz").rglob("*.so*")})
        env["PATH"] = f"{dot.parent}{os.pathsep}{env['PATH']}"
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [os.environ.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
        # graphviz reads its plugins from GVBINDIR; `dot -c` writes their configuration there (a copy we can write)
        gvbin = work / "graphviz-plugins"
        shutil.copytree(plugins, gvbin, dirs_exist_ok=True)
        env["GVBINDIR"] = str(gvbin)
        try:
            subprocess.run([dot, "-c"], env=env, check=True)
            env["DOT_VERSION"] = subprocess.run([dot, "-V"], env=env, capture_output=True, text=True,
                                                check=True).stderr.strip()
        except (subprocess.CalledProcessError, OSError) as error:
            env["DOT_VERSION"] = f"unusable here ({error}); graphs print as text trees"
    data = work / "data"
    raw = data / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for gz in (folder / "mnist").glob("*.gz"):
        with gzip.open(gz, "rb") as src, open(raw / gz.stem, "wb") as dst:
            shutil.copyfileobj(src, dst)
    env["GAN_LESSONS_DATA"] = str(data)
    return env


def device_line(env) -> str:
    code = ("import torch; d = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu'; "
            "print(f'{d}, torch {torch.__version__}')")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()


def run_train(env, results: Path, work: Path, smoke: bool) -> str:
    run = work / "train"
    size = ["--epochs", "1", "--limit", "256", "--eval-samples", "200", "--device", "cpu"] if smoke else \
           ["--eval-each", "2000"]
    sh(sys.executable, "-m", "gan_lessons", "train", "--out", run, "--no-progress", "--restart", *size, env=env)
    sh(sys.executable, "-m", "gan_lessons", "export", run, "--out", results / "generator.pt",
       *(["-n", "200"] if smoke else []), env=env)
    shutil.copy(run / "metrics.json", results / "train_metrics.json")
    record = json.loads((results / "generator.json").read_text())
    m = record["metrics"]
    epochs = [round(e["mnist_fid"], 1) for e in record.get("eval_each_epoch") or []]
    return (f"train: MNIST-FID {m['mnist_fid']}, classifier score {m['classifier_score']} on {m['n']} samples"
            f"{f', per-epoch FID {epochs}' if epochs else ''}, {record.get('images_per_second', '?')} images/s")


def run_bench(env, results: Path, work: Path, smoke: bool) -> str:
    args = ["--steps", "2", "--rounds", "1", "--strategies", "d_first_reuse_fake", "--device", "cpu",
                   "--peak-sizes", "256"] if smoke else \
           ["--fast", "--quality"]
    sh(sys.executable, ROOT / "benchmarks" / "bench.py", *args, "--out", results / "bench.json", env=env)
    doctor = ["--steps", "1", "--repeats", "1", "--memory-steps", "0", "--device", "cpu"] if smoke else []
    sh(sys.executable, ROOT / "benchmarks" / "doctor.py", *doctor, "--out", results / "doctor.json", env=env)
    bench = json.loads((results / "bench.json").read_text())
    rows = ", ".join(f"{r['strategy']} " + " / ".join(f"{m} {r[m]['images_per_s']}" for m in ("eager", "fast") if m in r)
                     for r in bench["rows"])
    return f"bench: images/s {rows}"


def run_notebooks(env, results: Path, work: Path, smoke: bool) -> str:
    lessons = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if smoke:
        lessons = lessons[:2]
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--nbval-lax",
              "--nbval-current-env", "--nbval-cell-timeout", "600"]
    quick = dict(env, GAN_LESSONS_QUICK="1")
    if not smoke:
        quick["GAN_LESSONS_REQUIRE_CUDA"] = "1"
    sh(*pytest, f"--junitxml={results / 'notebooks.xml'}", *lessons, env=quick, cwd=ROOT)
    line = f"notebooks: {len(lessons)} lessons passed in quick mode"
    if not smoke:
        full = dict(env, GAN_LESSONS_QUICK="0", GAN_LESSONS_REQUIRE_CUDA="1")
        sh(*pytest, f"--junitxml={results / 'notebook06_full.xml'}", ROOT / "notebooks" / "06_train_mnist_gan.ipynb",
           env=full, cwd=ROOT)
        line += ", lesson 06 in full mode"
    return line


def run(part: str, folder: Path, results: Path, smoke: bool) -> str:
    t0 = time.perf_counter()
    results = Path(results).resolve()
    results.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gan-gpu-") as tmp:
        work = Path(tmp)
        env = prepare(folder, work)
        if not smoke:
            code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: this is the GPU run')"
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
        where = device_line(env)
        line = {"train": run_train, "bench": run_bench, "notebooks": run_notebooks}[part](env, results, work, smoke)
    summary = (f"gpu-run {part}{' (smoke)' if smoke else ''}: {line} | {where} | dot: {env['DOT_VERSION']} | "
               f"{time.perf_counter() - t0:.0f} s | results in {results}")
    (results / f"{part}_summary.txt").write_text(summary + "\n")
    print(summary)
    return summary


# --- smoke ---------------------------------------------------------------------------------------------------------
def _closure(names):
    """The installed distributions `names` need, themselves included (extras left out)."""
    from importlib import metadata
    from packaging.requirements import Requirement
    seen, todo = {}, list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[key] = dist
        for req in dist.requires or []:
            r = Requirement(req)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    return seen


def base_environment(where: Path) -> Path:
    """A fresh virtual environment that sees only the GPU machine's packages (and what they need), linked from this
    one, so that everything else must come from the carry folder."""
    sh(sys.executable, "-m", "venv", "--clear", where)
    python = where / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    farm = where / "gpu-has"
    farm.mkdir()
    for dist in _closure(GPU_HAS).values():
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            src = Path(dist.locate_file(top))
            if src.exists() and not (farm / top).exists() and top != "__pycache__":
                (farm / top).symlink_to(src)
    (site / "gpu-has.pth").write_text(str(farm) + "\n")
    return python


def smoke(folder: Path, results: Path) -> None:
    t0 = time.perf_counter()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    folder = Path(folder)
    if not (folder / "carry.json").exists() or json.loads((folder / "carry.json").read_text())["python_version"] != version:
        carry(folder, version, need_dot=False)
    with tempfile.TemporaryDirectory(prefix="gan-gpu-smoke-") as tmp:
        python = base_environment(Path(tmp) / "env")
        missing = subprocess.run([python, "-c", "import nbval"], capture_output=True).returncode == 0
        if missing:
            raise SystemExit("gpu-smoke: the fresh environment already has nbval; it must come from the carry folder")
        for part in PARTS:
            sh(python, __file__, "run", part, "--carry", folder, "--results", results, "--smoke")
    print(f"gpu-smoke: the three parts ran from {folder} in a fresh environment in {time.perf_counter() - t0:.0f} s")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("carry", help="fill the carry folder")
    c.add_argument("--dir", type=Path, default=ROOT / ".gpu-carry")
    c.add_argument("--python-version", default="3.12")
    r = sub.add_parser("run", help="one part of the GPU run")
    r.add_argument("part", choices=PARTS)
    r.add_argument("--carry", type=Path, default=ROOT / ".gpu-carry")
    r.add_argument("--results", type=Path, default=Path(os.environ.get("OUT") or ROOT / "gpu-results"))
    r.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU")
    s = sub.add_parser("smoke", help="the three parts, tiny, on this CPU, from a carry folder for this Python")
    s.add_argument("--carry", type=Path, default=ROOT / f".gpu-carry-{sys.version_info.major}.{sys.version_info.minor}")
    s.add_argument("--results", type=Path, default=ROOT / "gpu-results" / "smoke")
    a = p.parse_args(argv)
    if a.command == "carry":
        carry(a.dir, a.python_version)
    elif a.command == "run":
        run(a.part, a.carry, a.results, a.smoke)
    else:
        smoke(a.carry, a.results)


if __name__ == "__main__":
    main()
