"""The doctor on a repository of training scripts nobody wrote for it: every training script of CHECKOUT runs twice,
under `python SCRIPT` and under `python -m gan_lessons doctor SCRIPT`, and the two runs are compared.

    python benchmarks/doctor_real.py CHECKOUT [--only GLOB ...] [--skip GLOB ...] [--args GLOB=ARGS ...]
                                     [--batches 2] [--timeout 240] [--inject] [--name NAME]

A training script is a .py file that calls `.backward(` and parses arguments or has a `__main__` block. Each run
starts in a fresh copy of the script's folder (at the same path both times, so printed paths agree), with
benchmarks/doctor_real_shim first on PYTHONPATH: seeds fixed, torchvision's datasets and empty image folders
replaced by small random data, every DataLoader cut to --batches batches on its first pass and none after (the
shim's docstring says exactly what it changes; the scripts themselves are not touched). --args gives a script
extra arguments (a glob of its path inside CHECKOUT, `=`, the arguments).

Per script, the report says whether the two runs agree on
- the exit status;
- stdout, byte for byte (and, if not, whether they agree once numbers on lines about time are masked);
- stderr, once the doctor's own blocks (its diagnoses, warnings and information lines) are taken out;
- every file the run wrote or changed (SHA-256 of each);
and how many DoctorWarnings and information lines the doctor gave, with the wall time of each run (start-up
included; the ratio's median over the scripts that ran to the end is the whole-command overhead).

--inject then breaks each script that ran cleanly in up to three classic ways, one at a time, and runs the broken
copy the same two ways: a `.detach()` taken out of the line that has one (the fake batch in D's loss), a
`zero_grad()` call taken out, `retain_graph=True` taken out of a backward. A broken copy counts when its run
differs from the clean one (it raised, or its final weights differ: the shim writes their digest at exit); the doctor names the bug when one of its own blocks
mentions the changed line (`line N`) or the name the change touched (the detached tensor, the optimizer). A change
that leaves the run's final weights as they were (a detach() on a tensor already detached) is counted apart.

Results go to benchmarks/results/<date>_doctor_real_<NAME>.json (NAME: the checkout folder's name by default), or
to --out."""
import argparse
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
    found = []
    for path in sorted(checkout.rglob("*.py")):
        rel = path.relative_to(checkout).as_posix()
        if any(part.startswith(".") for part in path.relative_to(checkout).parts):
            continue
        if only and not any(fnmatch.fnmatch(rel, g) for g in only) or any(fnmatch.fnmatch(rel, g) for g in skip):
            continue
        text = path.read_text(errors="replace")
        if ".backward(" in text and ("parse_args(" in text or "__main__" in text):
            found.append(rel)
    return found


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


def both(checkout, rel, args, batches, timeout, work, source_text=None):
    """The plain run and the doctor's run of one script (its text replaced by `source_text` if given)."""
    root = work / "run"
    runs = {}
    for mode in ("plain", "doctor"):
        shutil.rmtree(root, ignore_errors=True)
        folder = root / Path(rel).parent
        shutil.copytree(checkout / Path(rel).parent, folder,
                        ignore=shutil.ignore_patterns("__pycache__", ".git"))
        script = root / rel
        if source_text is not None:
            script.write_text(source_text)
        before = files_of(root)
        command = [sys.executable, *(["-m", "gan_lessons", "doctor"] if mode == "doctor" else []), str(script),
                   *args]
        os.environ["DOCTOR_REAL_BATCHES"] = str(batches)
        run = run_once(command, folder, root, timeout)
        after = files_of(root)
        run["files"] = {k: v for k, v in after.items() if before.get(k) != v}
        runs[mode] = run
    return runs


def compare(runs):
    plain, doc = runs["plain"], runs["doctor"]
    own, rest = doctor_blocks(doc["stderr"])
    masked = [[NUMBER.sub("#", line) if TIMING.search(line) else line for line in r["stdout"].splitlines()]
              for r in (plain, doc)]
    plain_err = plain["stderr"].splitlines()
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


def named(result, line, name):
    text = "\n".join(result["doctor_lines"])
    return bool(re.search(rf"\bline {line}\b", text) or (name and re.search(rf"\b{re.escape(name)}\b", text)))


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
    scripts = training_scripts(checkout, opt.only, opt.skip)
    if not scripts:
        parser.error(f"no training script in {checkout} (a .py file that calls .backward( and parses arguments)")
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
            if opt.inject and result["status"]["plain"] == 0 and result["identical"]:
                clean = result
                for kind, line, touched, text in injected((checkout / rel).read_text()):
                    broken = compare(both(checkout, rel, args, opt.batches, opt.timeout, work, text))
                    changed = broken["status"]["plain"] != 0 or broken["plain_weights"] != clean["plain_weights"]
                    entry = {"script": rel, "bug": kind, "line": line, "name": touched,
                             "status": broken["status"], "behaviour_changed": changed,
                             "named": named(broken, line, touched), "identical": identical(broken),
                             "doctor_lines": broken["doctor_lines"][:8]}
                    report["injected"].append(entry)
                    print(f"  {kind} at line {line}: exit {broken['status']['plain']}, "
                          f"{'named' if entry['named'] else 'NOT NAMED'}", flush=True)
            write(report, out)
    write(report, out)
    print(f"wrote {out}")


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
