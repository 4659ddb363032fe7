"""The GPU run, prepared here and run there.

The GPU machine this is made for has Python 3.12, torch, torchvision, matplotlib, tqdm, numpy and pytest, and
reaches no package index. Everything else the run needs travels in one git-ignored folder, the carry folder:

    python tools/gpu.py carry [--dir .gpu-carry] [--python-version 3.12]
        wheels of the notebook stack (no torch), graphviz's `dot` from Debian's packages with its libraries, and the
        MNIST IDX files (gzipped); prints its size.
    python3 tools/gpu.py run {all,train,bench,notebooks} [--budget SECONDS] [--carry .gpu-carry] [--results DIR]
        on the GPU machine: installs what is missing from the carry folder (no index), then runs the part and writes
        what it measures into DIR (default gpu-results/) as soon as it is measured; one summary line
        at the end. `all` runs train, bench and notebooks in that order under one deadline (--budget, default 480 s,
        installation included) that each part checks before it starts and while it runs: training stops at an
        epoch boundary, the benchmark and the lessons between two measurements. The results folder holds at most
        8 files, each under 16 MiB (anything more is packed into more.tar.gz).
    python tools/gpu.py smoke
        `all` with tiny sizes on this CPU, in a fresh virtual environment that holds only what the GPU
        machine holds, everything else installed from a carry folder made for this Python.

`make gpu-carry`, `make gpu-run PART=...` and `make gpu-smoke` call these."""
import argparse
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
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


class Clock:
    """One deadline for a whole call: `left()` seconds remain; `None` budget: no deadline."""

    def __init__(self, budget=None):
        self.end = None if budget is None else time.time() + budget

    def left(self) -> float:
        return float("inf") if self.end is None else self.end - time.time()


def call(cmd, env, log: Path, until=None, cwd=None) -> str:
    """Run cmd, its output shown and appended to `log`; stopped (SIGTERM, then SIGKILL 15 s later) at the Unix time
    `until`. Returns "done", "failed (exit N)" or "stopped at the deadline"."""
    print("+", " ".join(str(c) for c in cmd), flush=True)
    with open(log, "a") as f:
        f.write("+ " + " ".join(str(c) for c in cmd) + "\n")
        f.flush()
        proc = subprocess.Popen([str(c) for c in cmd], env=env, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)

        def pump():
            for line in iter(proc.stdout.readline, b""):
                sys.stdout.buffer.write(line)
                sys.stdout.flush()
                f.write(line.decode(errors="replace"))
                f.flush()
        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc = proc.wait(timeout=None if until is None else max(0.0, until - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)          # the trainer checkpoints on SIGTERM
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            reader.join(timeout=5)
            return "stopped at the deadline"
        reader.join(timeout=5)
    return "done" if rc == 0 else f"failed (exit {rc})"


def run_train(env, results: Path, work: Path, smoke: bool, clock: Clock, share=1.0) -> str:
    """The documented full run (20 epochs, MNIST-FID on 2,000 samples after each, 10,000 at the end), exported. Under a
    deadline it trains for at most `share` of the time left, less what the export needs, stopping at an epoch
    boundary (the trainer's --time-limit)."""
    run, log = work / "train", results / "log.txt"
    size = ["--epochs", "1", "--limit", "256", "--eval-samples", "200", "--eval-each", "200", "--device", "cpu"] \
        if smoke else ["--eval-each", "2000"]
    export_s = 10 if smoke else 45                      # the export scores its own samples and the real baseline
    limit = []
    if clock.end is not None:
        limit = ["--time-limit", f"{max(1.0, share * clock.left() - export_s):.0f}"]
    state = call([sys.executable, "-m", "gan_lessons", "train", "--out", run, "--no-progress", "--restart", *size,
                  *limit], env, log, until=None if clock.end is None else clock.end - export_s)
    if not (run / "last.pt").exists():
        return f"train: {state}, no checkpoint"
    if (run / "metrics.json").exists():
        shutil.copy(run / "metrics.json", results / "train_metrics.json")
    export = call([sys.executable, "-m", "gan_lessons", "export", run, "--out", results / "generator.pt",
                   *(["-n", "200"] if smoke else [])], env, log, until=clock.end)
    if export != "done" or not (results / "generator.json").exists():
        return f"train: {state}; export {export}"
    record = json.loads((results / "generator.json").read_text())
    m = record["metrics"]
    epochs = [round(e["mnist_fid"], 1) for e in record.get("eval_each_epoch") or []]
    stopped = record.get("stopped_at_time_limit")
    done = f"{len(record.get('history') or [])} epochs" + (f" of {stopped['of']} (time limit)" if stopped else "")
    return (f"train: {done}, MNIST-FID {m['mnist_fid']}, classifier score {m['classifier_score']} on {m['n']} samples"
            f"{f', per-epoch FID {epochs}' if epochs else ''}, {record.get('images_per_second', '?')} images/s")


FIRST = ["d_first_reuse_fake", "one_forward"]           # the default strategy, and the cheapest one


def run_bench(env, results: Path, work: Path, smoke: bool, clock: Clock, share=1.0) -> str:
    """In this order, while time is left: the fixed cost of a step (aten calls, batch 2 and 64, the trainer's Adam
    against plain Adam) for FIRST; eager and fast for FIRST with the device's floor and the DCGAN-style loop;
    the doctor's overhead; the other strategies; time to quality (full run only). Results are rewritten after each."""
    log, out = results / "log.txt", results / "bench.json"
    until = None if clock.end is None else time.time() + share * clock.left()
    deadline = [] if until is None else ["--deadline", f"{until:.0f}"]
    tiny = ["--steps", "2", "--rounds", "1", "--device", "cpu", "--peak-sizes", "256"] if smoke else ["--fast"]
    bench = [sys.executable, ROOT / "benchmarks" / "bench.py", *tiny, "--out", out, *deadline]
    others = [n for n in strategies_named() if n not in FIRST]
    fixed = [sys.executable, ROOT / "benchmarks" / "fixed_cost.py", "--out", results / "fixed_cost.json",
             *(["--steps", "2", "--rounds", "1", "--device", "cpu", "--strategies", FIRST[0]] if smoke
               else ["--fast", "--strategies", ",".join(FIRST)])]
    steps = [("fixed_cost", fixed), ("bench", [*bench, "--strategies", ",".join(FIRST)]),
             ("doctor", [sys.executable, ROOT / "benchmarks" / "doctor.py", "--out", results / "doctor.json",
                         *(["--steps", "1", "--repeats", "1", "--memory-steps", "0", "--device", "cpu"] if smoke
                           else ["--repeats", "3", "--memory-steps", "0"])]),      # host memory says little here
             ("others", [*bench, "--append", "--no-versus", "--strategies", ",".join(others[:1] if smoke else others)])]
    if not smoke:
        steps.append(("quality", [*bench, "--append", "--no-versus", "--strategies", "", "--quality"]))
    states = []
    for name, cmd in steps:
        if until is not None and time.time() >= until:
            states.append(f"{name} not started")
            continue
        states.append(f"{name} {call(cmd, env, log, until=until)}")
    rows = ""
    if out.exists():
        bench_ = json.loads(out.read_text())
        rows = ", ".join(f"{r['strategy']} " + " / ".join(f"{m} {r[m]['images_per_s']}" for m in ("eager", "fast")
                                                          if m in r) for r in bench_["rows"])
    return f"bench: {'; '.join(states)} | images/s {rows or 'none measured'}"


def strategies_named():
    sys.path.insert(0, str(ROOT))
    from gan_lessons import strategies
    return [n for n in strategies.STRATEGIES if n != "retain_graph_seed003"]


def run_notebooks(env, results: Path, work: Path, smoke: bool, clock: Clock, share=1.0) -> str:
    """Lesson 10 (its CUDA float16 cell), lesson 06 in full mode, then the other lessons in quick mode, each under
    nbval's lax mode with the device required to be CUDA; notebooks.json is rewritten after each."""
    lessons = {int(p.name[:2]): p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
    order = [(10, "quick"), (6, "full")] + [(n, "quick") for n in lessons if n not in (10, 6)]
    if smoke:
        order = [(1, "quick"), (2, "quick")]
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--nbval-lax",
              "--nbval-current-env", "--nbval-cell-timeout", "600"]
    record, out = [], results / "notebooks.json"
    for number, mode in order:
        if clock.left() <= 5:
            record.append({"lesson": lessons[number].name, "mode": mode, "outcome": "not started (deadline)"})
            continue
        lesson_env = dict(env, GAN_LESSONS_QUICK="1" if mode == "quick" else "0")
        if not smoke:
            lesson_env["GAN_LESSONS_REQUIRE_CUDA"] = "1"
        xml, t0 = work / f"notebook{number:02d}.xml", time.time()
        state = call([*pytest, f"--junitxml={xml}", lessons[number]], lesson_env, results / "log.txt",
                     until=None if clock.end is None else clock.end - 2, cwd=ROOT)
        record.append({"lesson": lessons[number].name, "mode": mode, "outcome": state,
                       "seconds": round(time.time() - t0, 1), **junit_counts(xml)})
        write_json(out, record)
    passed = [r for r in record if r["outcome"] == "done"]
    return (f"notebooks: {len(passed)} of {len(record)} lessons passed ("
            + ", ".join(f"{r['lesson'][:2]} {r['mode']}: {r['outcome']}" for r in record) + ")")


def junit_counts(xml: Path) -> dict:
    """Cells run, failed and skipped, from pytest's JUnit report (none when it was not written)."""
    if not xml.exists():
        return {}
    import xml.etree.ElementTree as ET
    suite = ET.parse(xml).getroot()
    suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
    return {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}


def write_json(path: Path, value) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, indent=1) + "\n")
    tmp.replace(path)


# The results folder: at most 8 files, each under 16 MiB, at most two folders deep.
MAX_FILES, MAX_BYTES, MAX_DEPTH = 8, 16 * 2**20, 2
KEEP = ["summary.txt", "generator.pt", "generator.json", "train_metrics.json", "bench.json", "doctor.json",
        "notebooks.json"]


def within_limits(results: Path) -> list:
    """Pack what would break the limits into one archive (more.tar.gz): every file beyond KEEP when there are more
    than MAX_FILES, and any file too deep; a file too large even for that is left out and named. Returns the notes."""
    import tarfile
    all_files = sorted(p for p in results.rglob("*") if p.is_file())
    deep = [p for p in all_files if len(p.relative_to(results).parts) > MAX_DEPTH + 1]
    extra = [p for p in all_files if p.name not in KEEP or p.parent != results] if len(all_files) > MAX_FILES else []
    pack = sorted(set(deep) | set(extra))
    notes = []
    for p in all_files:
        if p.stat().st_size >= MAX_BYTES:
            notes.append(f"{p.relative_to(results)} left out: {p.stat().st_size / 2**20:.1f} MiB")
            p.unlink()
            pack = [q for q in pack if q != p]
    if pack:
        archive = results / "more.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            for p in pack:
                tar.add(p, arcname=str(p.relative_to(results)))
        for p in pack:
            p.unlink()
        for d in sorted((d for d in results.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
            if not any(d.iterdir()):
                d.rmdir()
        notes.append(f"{len(pack)} files packed into more.tar.gz")
    return notes


PART_FUNCTIONS = {"train": run_train, "bench": run_bench, "notebooks": run_notebooks}
# Under PART=all, each part may use this share of the time left when it starts (the last takes the rest).
SHARES = {"train": 0.6, "bench": 0.5, "notebooks": 1.0}
NEEDS = {"train": 60, "bench": 30, "notebooks": 20}     # seconds a part needs to be worth starting (full run)


def run(part: str, folder: Path, results: Path, smoke: bool, budget=None, skip=()) -> str:
    t0 = time.time()
    clock = Clock(budget)
    results = Path(results).resolve()
    results.mkdir(parents=True, exist_ok=True)
    summary = results / ("summary.txt" if part == "all" else f"{part}_summary.txt")
    summary.unlink(missing_ok=True)

    def say(line):
        print(line, flush=True)
        with open(summary, "a") as f:
            f.write(line + "\n")

    with tempfile.TemporaryDirectory(prefix="gan-gpu-") as tmp:
        work = Path(tmp)
        env = prepare(folder, work)
        if not smoke:
            code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: this is the GPU run')"
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
        where = device_line(env)
        say(f"gpu-run {part}{' (smoke)' if smoke else ''} on {where}; dot: {env['DOT_VERSION']}; "
            f"budget {'none' if budget is None else f'{budget:g} s'}; prepared in {time.time() - t0:.0f} s")
        for name in (PARTS if part == "all" else [part]):
            if name in skip:
                say(f"{name}: skipped (--skip)")
                continue
            need = 2 if smoke else NEEDS[name]
            if clock.left() < need:
                say(f"{name}: not started, {max(0, clock.left()):.0f} s left of the budget")
                continue
            try:
                say(PART_FUNCTIONS[name](env, results, work, smoke, clock, SHARES[name] if part == "all" else 1.0))
            except Exception as error:                  # one part's failure does not lose the others
                say(f"{name}: failed: {type(error).__name__}: {error}")
    notes = within_limits(results)
    over = "" if clock.end is None else f", {clock.left():+.0f} s against the budget"
    line = (f"gpu-run {part}{' (smoke)' if smoke else ''}: done in {time.time() - t0:.0f} s{over} | {where} | "
            f"results in {results}{' | ' + '; '.join(notes) if notes else ''}")
    say(line)
    return line


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
        sh(python, __file__, "run", "all", "--carry", folder, "--results", results, "--smoke", "--budget", "900")
    print(f"gpu-smoke: the three parts ran from {folder} in a fresh environment in {time.perf_counter() - t0:.0f} s")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("carry", help="fill the carry folder")
    c.add_argument("--dir", type=Path, default=ROOT / ".gpu-carry")
    c.add_argument("--python-version", default="3.12")
    r = sub.add_parser("run", help="one part of the GPU run")
    r.add_argument("part", choices=[*PARTS, "all"])
    r.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole call, installation included; every part checks it (all: 480)")
    r.add_argument("--skip", default="", help="with all: parts to leave out, comma-separated (e.g. train)")
    r.add_argument("--carry", type=Path, default=ROOT / ".gpu-carry")
    r.add_argument("--results", type=Path, default=ROOT / "gpu-results")
    r.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU")
    s = sub.add_parser("smoke", help="the three parts, tiny, on this CPU, from a carry folder for this Python")
    s.add_argument("--carry", type=Path, default=ROOT / f".gpu-carry-{sys.version_info.major}.{sys.version_info.minor}")
    s.add_argument("--results", type=Path, default=ROOT / "gpu-results" / "smoke")
    a = p.parse_args(argv)
    if a.command == "carry":
        carry(a.dir, a.python_version)
    elif a.command == "run":
        skip = [p for p in a.skip.split(",") if p]
        if any(p not in PARTS for p in skip):
            p.error(f"--skip takes parts among {', '.join(PARTS)}, not {a.skip}")
        run(a.part, a.carry, a.results, a.smoke, a.budget if a.budget or a.part != "all" else 480.0, skip)
    else:
        smoke(a.carry, a.results)


if __name__ == "__main__":
    main()
