"""The doctor on a repository of training scripts nobody wrote for it: every training script of CHECKOUT runs twice,
under `python SCRIPT` and under `python -m gan_lessons doctor SCRIPT`, and the two runs are compared.

    python benchmarks/doctor_real.py CHECKOUT [--only GLOB ...] [--skip GLOB ...] [--args GLOB=ARGS ...]
                                     [--batches 2] [--timeout 240] [--inject] [--name NAME]

A training script is a .py file that parses arguments or has a `__main__` block and calls `.backward(`, itself or in
a module of its folder it imports (main.py that runs a trainer class from GAN.py). Each run
starts in a fresh copy of the script's folder (at the same path both times, so printed paths agree), with
benchmarks/doctor_real_shim first on PYTHONPATH: seeds fixed, torchvision's datasets and empty image folders
replaced by small random data, every DataLoader cut to --batches batches on its first pass and none after (the
shim's docstring says exactly what it changes; the scripts themselves are not touched). --args gives a script
extra arguments (a glob of its path inside CHECKOUT, `=`, the arguments).

Per script, the report says whether the two runs agree on
- the exit status;
- stdout, byte for byte (and, if not, whether they agree once numbers on lines about time are masked);
- stderr, once the doctor's own blocks (its diagnoses, warnings and information lines) are taken out, and the
  frames of a traceback that are in torch's own files, with numbers masked on lines about time (a progress bar);
- every file the run wrote or changed (SHA-256 of each; a TensorBoard event file, named by the wall time and
  holding it, by its name with the time masked);
and how many DoctorWarnings and information lines the doctor gave, with the wall time of each run (start-up
included; the ratio's median over the scripts that ran to the end is the whole-command overhead).

--inject then breaks each script that ran cleanly (and each module it imports that calls `.backward(`) in up to
three classic ways, one at a time, and runs the broken copy the same two ways: a `.detach()` taken out of the line
that has one (the fake batch in D's loss), a `zero_grad()` call taken out, `retain_graph=True` taken out of a
backward. A broken copy counts when its run differs from the clean one (it raised, or its final weights differ: the
shim writes their digest at exit); the doctor names the bug when one of its own blocks mentions the changed line
(`line N`, or `GAN.py, line N` in a module) or the name the change touched (the detached tensor, the optimizer). A
change
that leaves the run's final weights as they were (a detach() on a tensor already detached) is counted apart.

Results go to benchmarks/results/<date>_doctor_real_<NAME>.json (NAME: the checkout folder's name by default), or
to --out."""
import argparse
import ast
import datetime
import fnmatch
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHIM = HERE / "doctor_real_shim"
TIMING = re.compile(r"(?i)(time|elapsed|ms/batch|sec|s/it|it/s|eta)")
NUMBER = re.compile(r"\d+(\.\d+)?")


def training_scripts(checkout: Path, only, skip):
    """The training scripts, each with the files its backward calls are in: the script itself and the modules of
    its own folder it imports, directly or through each other (main.py that runs GAN.py's train())."""
    found = {}
    for path in sorted(checkout.rglob("*.py")):
        rel = path.relative_to(checkout).as_posix()
        if any(part.startswith(".") for part in path.relative_to(checkout).parts):
            continue
        if only and not any(fnmatch.fnmatch(rel, g) for g in only) or any(fnmatch.fnmatch(rel, g) for g in skip):
            continue
        text = path.read_text(errors="replace")
        if "parse_args(" not in text and "__main__" not in text:
            continue
        training = [f for f in [path, *local_modules(path)] if ".backward(" in f.read_text(errors="replace")]
        if training:
            found[rel] = [f.relative_to(checkout).as_posix() for f in training]
    return found


def local_modules(script: Path) -> list:
    """The .py files under the script's folder that it imports, directly or through each other (Python puts that
    folder first on sys.path; relative imports are resolved from the importing file's package)."""
    top, seen, queue = script.parent, [], [script]
    while queue:
        path = queue.pop(0)
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [(top, a.name.split(".")) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = top if not node.level else path.parents[node.level - 1]
                parts = (node.module or "").split(".") if node.module else []
                names = [(base, parts)] + [(base, parts + [a.name]) for a in node.names]
            else:
                continue
            for base, parts in names:
                for found in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
                    if parts and found.is_file() and found != script and found not in seen \
                            and top in found.parents:
                        seen.append(found)
                        queue.append(found)
    return seen


def files_of(folder: Path):
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            out[path.relative_to(folder).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return out


def doctor_blocks(stderr: str):
    """(the doctor's own lines, everything else) of a doctor run's stderr: its diagnoses ("autograd doctor..."),
    its information lines, and its DoctorWarnings (header, indented facts and fixes, then the source line)."""
    own, rest, lines, i = [], [], stderr.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        warning = ": DoctorWarning: " in line
        if line.startswith("autograd doctor") or warning:
            own.append(line)
            i += 1
            while i < len(lines) and lines[i].startswith(("  - ", "  fix: ", "  not: ", "    ")):
                own.append(lines[i])
                i += 1
            if warning and i < len(lines) and lines[i].startswith("  "):
                own.append(lines[i])                   # the warned line's source, as Python shows a warning
                i += 1
            continue
        rest.append(line)
        i += 1
    return own, rest


def run_once(command, cwd, root, timeout):
    env = dict(os.environ, DOCTOR_REAL_ROOT=str(root), PYTHONHASHSEED="0",
               PYTHONPATH=os.pathsep.join([str(SHIM), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    t0 = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        status, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as stop:
        status, out, err = "timeout", _text(stop.stdout), _text(stop.stderr)
    return {"status": status, "stdout": out, "stderr": err, "seconds": round(time.perf_counter() - t0, 3)}


def _text(data):
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def both(checkout, rel, args, batches, timeout, work, replaced=None):
    """The plain run and the doctor's run of one script (`replaced`: {a file of its folder: the text it is run
    with})."""
    root = work / "run"
    runs = {}
    for mode in ("plain", "doctor"):
        shutil.rmtree(root, ignore_errors=True)
        folder = root / Path(rel).parent
        shutil.copytree(checkout / Path(rel).parent, folder,
                        ignore=shutil.ignore_patterns("__pycache__", ".git"))
        script = root / rel
        for file, text in (replaced or {}).items():
            (root / file).write_text(text)
        before = files_of(root)
        command = [sys.executable, *(["-m", "gan_lessons", "doctor"] if mode == "doctor" else []), str(script),
                   *args]
        os.environ["DOCTOR_REAL_BATCHES"] = str(batches)
        run = run_once(command, folder, root, timeout)
        after = files_of(root)
        run["files"] = {k: v for k, v in after.items() if before.get(k) != v}
        runs[mode] = run
    return runs


TORCH_FRAME = re.compile(r'^  File ".*[/\\]torch[/\\][^"]*", line \d+')


def without_torch_frames(lines):
    """A traceback without the frames in torch's own files (each frame's File line and the source and caret lines
    under it): with the doctor's module hooks on, torch calls a module's forward through one more of its own
    frames, so only the frames of the script and its libraries are compared."""
    kept, skipping = [], False
    for line in lines:
        if TORCH_FRAME.match(line):
            skipping = True
            continue
        if skipping and line.startswith("    "):
            continue
        skipping = False
        kept.append(line)
    return kept


WALL_TIME_FILE = re.compile(r"events\.out\.tfevents\.\d+")    # TensorBoard's: named by, and holding, the wall time


def by_content(files):
    """{path: digest}, a file named by the wall time it was made at (TensorBoard's event files) under its name with
    the time masked and without its digest: its name and bytes differ between any two runs."""
    return {WALL_TIME_FILE.sub("events.out.tfevents.#", k): None if WALL_TIME_FILE.search(k) else v
            for k, v in files.items()}


def timings_masked(lines):
    """The lines, each number masked on a line about time (a progress bar's elapsed time and rate)."""
    return [NUMBER.sub("#", line) if TIMING.search(line) else line for line in lines]


def compare(runs):
    plain, doc = runs["plain"], runs["doctor"]
    for run in (plain, doc):
        run["files"] = by_content(run["files"])
    own, rest = doctor_blocks(doc["stderr"])
    rest = without_torch_frames(rest)
    masked = [timings_masked(r["stdout"].splitlines()) for r in (plain, doc)]
    plain_err = timings_masked(without_torch_frames(plain["stderr"].splitlines()))
    rest = timings_masked(rest)
    if plain["status"] != 0 or doc["status"] != 0:       # what a failed run's traceback keeps alive differs
        for run in (plain, doc):
            run["files"].pop("doctor_real_weights.txt", None)
    return {
        "status": {"plain": plain["status"], "doctor": doc["status"]},
        "same_status": plain["status"] == doc["status"],
        "same_stdout": plain["stdout"] == doc["stdout"],
        "same_stdout_timings_masked": masked[0] == masked[1],
        "same_stderr_apart_from_the_doctor": rest == plain_err,
        "stderr_differences": [line for line in rest if line not in plain_err][:5]
                              + [line for line in plain_err if line not in rest][:5],
        "same_files": plain["files"] == doc["files"],
        "files_written": len(plain["files"]),
        "files": sorted(plain["files"])[:20],
        "stdout_lines": len(plain["stdout"].splitlines()),
        "file_differences": sorted(k for k in set(plain["files"]) | set(doc["files"])
                                   if plain["files"].get(k) != doc["files"].get(k))[:5],
        "doctor_warnings": sum(": DoctorWarning: " in line for line in own),
        "doctor_information": sum(line.startswith("autograd doctor (information") for line in own),
        "doctor_diagnoses": sum(line.startswith("autograd doctor:") for line in own),
        "doctor_lines": own[:40],
        "seconds": {"plain": plain["seconds"], "doctor": doc["seconds"]},
        "plain_weights": plain["files"].get("doctor_real_weights.txt"),
        "stderr_tail": {"plain": plain["stderr"].splitlines()[-3:], "doctor": doc["stderr"].splitlines()[-3:]},
    }


def identical(result):
    return (result["same_status"] and result["same_stdout_timings_masked"]
            and result["same_stderr_apart_from_the_doctor"] and result["same_files"])


INJECTIONS = [
    ("detach taken out", re.compile(r"([A-Za-z_][\w.]*)\.detach\(\)"), lambda m: m.group(1)),
    ("zero_grad taken out", re.compile(r"^(\s*)([A-Za-z_][\w.]*)\.zero_grad\(\)\s*$"), lambda m: m.group(2)),
    ("retain_graph taken out", re.compile(r",[ \t]*retain_graph[ \t]*=[ \t]*True|retain_graph[ \t]*=[ \t]*True[ \t]*,?[ \t]*"),
     lambda m: None),
]


def injected(text):
    """(kind, line number, name touched, new text) for each classic bug that applies to `text`, on the first line
    (not a comment) each rule matches."""
    lines = text.splitlines(keepends=True)
    for kind, pattern, name in INJECTIONS:
        for i, line in enumerate(lines):
            if line.lstrip().startswith("#"):
                continue
            m = pattern.search(line)
            if not m:
                continue
            if kind == "zero_grad taken out":
                new = m.group(1) + "pass\n"
            else:
                new = line[:m.start()] + (m.group(1) if kind == "detach taken out" else "") + line[m.end():]
            yield kind, i + 1, name(m), "".join(lines[:i] + [new] + lines[i + 1:])
            break


def named(result, line, name, file=None):
    """Whether the doctor's lines name the changed line (in a module the script imports: that file's line) or the
    name the change touched."""
    text = "\n".join(result["doctor_lines"])
    at = rf"\bline {line}\b" if file is None else rf"{re.escape(Path(file).name)}, line {line}\b"
    return bool(re.search(at, text) or (name and re.search(rf"\b{re.escape(name)}\b", text)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--only", action="append", default=[], metavar="GLOB")
    parser.add_argument("--skip", action="append", default=[], metavar="GLOB")
    parser.add_argument("--args", action="append", default=[], metavar="GLOB=ARGS")
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--inject", action="store_true")
    parser.add_argument("--name")
    parser.add_argument("--source", help="where the checkout came from (a URL and commit), for the results file")
    parser.add_argument("--out", type=Path, help="the results file (default: benchmarks/results/<date>_doctor_real_"
                                                 "<NAME>.json)")
    opt = parser.parse_args(argv)
    checkout = opt.checkout.resolve()
    if not checkout.is_dir():
        parser.error(f"{opt.checkout} is not a folder: give the path of a repository checkout")
    extra = [a.split("=", 1) for a in opt.args]
    if any(len(a) != 2 for a in extra):
        parser.error("--args takes GLOB=ARGUMENTS, e.g. --args 'word_language_model/main.py=--epochs 1'")
    scripts = training_scripts(checkout, opt.only, opt.skip)      # {script: the files its backward calls are in}
    if not scripts:
        parser.error(f"no training script in {checkout} (a .py file that parses arguments and calls .backward(, "
                     "itself or in a module it imports)")
    name = opt.name or checkout.name
    out = opt.out or HERE / "results" / f"{datetime.date.today().isoformat()}_doctor_real_{name}.json"
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "checkout": name, "source": opt.source, "torch": importlib.metadata.version("torch"),
              "python": platform.python_version(), "cpu_count": os.cpu_count(),
              "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "batches": opt.batches,
              "timeout_seconds": opt.timeout, "scripts": {}, "injected": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for rel in scripts:
            args = [a for g, a in extra if fnmatch.fnmatch(rel, g) for a in a.split()]
            result = compare(both(checkout, rel, args, opt.batches, opt.timeout, work))
            result["args"] = args
            result["identical"] = identical(result)
            report["scripts"][rel] = result
            print(f"{rel}: exit {result['status']['plain']}/{result['status']['doctor']}, "
                  f"{'identical' if result['identical'] else 'DIFFERENT'}, {result['doctor_warnings']} warnings, "
                  f"{result['seconds']['plain']:.1f}s/{result['seconds']['doctor']:.1f}s", flush=True)
            result["training_files"] = scripts[rel]
            if opt.inject and result["status"]["plain"] == 0 and result["identical"]:
                for file in scripts[rel]:
                    report["injected"] += inject(checkout, rel, file, args, opt, work, result)
            write(report, out)
    write(report, out)
    print(f"wrote {out}")


def inject(checkout, rel, file, args, opt, work, clean):
    """The classic bugs injected into one file a script's training is in (the script or a module it imports), each
    run the two ways."""
    entries = []
    folder = Path(rel).parent
    for kind, line, touched, text in injected((checkout / file).read_text()):
        broken = compare(both(checkout, rel, args, opt.batches, opt.timeout, work, {file: text}))
        changed = broken["status"]["plain"] != 0 or broken["plain_weights"] != clean["plain_weights"]
        module = None if file == rel else file
        entries.append({"script": rel, "file": Path(file).relative_to(folder).as_posix(), "bug": kind,
                        "line": line, "name": touched, "status": broken["status"], "behaviour_changed": changed,
                        "named": named(broken, line, touched, module), "identical": identical(broken),
                        "doctor_lines": broken["doctor_lines"][:8]})
        print(f"  {kind} at {file}:{line}: exit {broken['status']['plain']}, "
              f"{'named' if entries[-1]['named'] else 'NOT NAMED'}", flush=True)
    return entries


def write(report, out):
    ran = [r for r in report["scripts"].values() if r["status"]["plain"] == 0 and r["status"]["doctor"] == 0]
    ratios = [r["seconds"]["doctor"] / r["seconds"]["plain"] for r in ran if r["seconds"]["plain"] > 0]
    broke = [e for e in report["injected"] if e["status"]["plain"] != 0]
    report["summary"] = {
        "scripts": len(report["scripts"]),
        "ran_to_the_end": len(ran),
        "identical": sum(r["identical"] for r in report["scripts"].values()),
        "different": sorted(k for k, r in report["scripts"].items() if not r["identical"]),
        "failed_alike": sorted(k for k, r in report["scripts"].items()
                               if r["status"]["plain"] != 0 and r["identical"]),
        "warnings_on_scripts_that_ran": sum(r["doctor_warnings"] for r in ran),
        "scripts_warned": sorted(k for k, r in report["scripts"].items() if r["doctor_warnings"]),
        "median_wall_ratio": round(statistics.median(ratios), 3) if ratios else None,
        "injected": len(report["injected"]),
        "injected_that_raise": len(broke),
        "injected_that_raise_named": sum(e["named"] for e in broke),
        "injected_silent_that_change_the_weights": sum(e["behaviour_changed"] for e in report["injected"]
                                                       if e["status"]["plain"] == 0),
        "injected_silent_named": sum(e["named"] for e in report["injected"]
                                     if e["status"]["plain"] == 0 and e["behaviour_changed"]),
        "injected_silent_named_without_effect": sum(e["named"] for e in report["injected"]
                                                    if e["status"]["plain"] == 0 and not e["behaviour_changed"]),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
