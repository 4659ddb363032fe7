"""Each build checker's mutation score: every mutant of its reference answer (tests/lessons/mutants.py) is run on
the exercise's problem and classified by what it does (the same values as the reference within tolerance, other
values, or an error), then given to the checker. The engine of lessons 11 and 12 likewise, one method or function at
a time (tests/lessons/engine_mutants.py: what the engine then does beside torch on programs no checker runs). A
checker must reject every mutant that does something else and accept every one that does the same. Writes
benchmarks/results/DATE_grader_mutants.json.

    python benchmarks/grader_mutants.py                    # every exercise in exercises.EXERCISES, every engine step
    python benchmarks/grader_mutants.py --only chain_step  # one (the student's function, or "check_versions: unpack")"""
import argparse
import contextlib
import datetime
import io
import json
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "lessons"))
import engine_mutants  # noqa: E402
from mutants import compiled, mutants  # noqa: E402

from gan_lessons.exercises import EXERCISES  # noqa: E402
from gan_lessons.exercises.exercise import outcome, same  # noqa: E402


def judged(exercise, mutant) -> dict:
    """What the mutant does, and what the checker says of it."""
    function = compiled(exercise.reference, mutant)
    done = outcome(exercise, function)
    kind = "same" if same(done, outcome(exercise, exercise.reference)) else ("raises" if done.error else "differs")
    if kind == "same" and mutant.what.startswith(exercise.forbids):
        kind = "forbidden"          # the values come out the same, but the exercise's text rules it out
    with contextlib.redirect_stdout(io.StringIO()) as said, contextlib.redirect_stderr(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            accepted = bool(exercise.check(function))
        except Exception as error:  # a checker that raises is a checker's bug: recorded as such
            accepted, said = None, io.StringIO(f"the checker raised {type(error).__name__}: {error}")
    return {"what": mutant.what, "does": kind, "error": done.error, "accepted": accepted,
            "said": said.getvalue().strip().splitlines()[:2]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", help="an exercise's name (repeatable); default: all")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                   f"{datetime.date.today().isoformat()}_grader_mutants.json")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    report = {"torch": torch.__version__, "exercises": []}
    judges = [(e.lesson, e.name, lambda e=e: [judged(e, m) for m in mutants(e.reference)]) for e in EXERCISES]
    judges += [(step.lesson, step.name, lambda step=step: [engine_mutants.judged(step, m) for m in
                                                          engine_mutants.engine_mutants(step.reference)])
               for step in engine_mutants.STEPS]
    for lesson, name, judge in judges:
        if a.only and name not in a.only:
            continue
        start = time.perf_counter()
        cases = judge()
        differ = [c for c in cases if c["does"] != "same"]
        alike = [c for c in cases if c["does"] == "same"]
        row = {"lesson": lesson, "name": name, "mutants": len(cases),
               "behaviour_changing": len(differ), "rejected": sum(c["accepted"] is False for c in differ),
               "equivalent": len(alike), "equivalent_rejected": sum(c["accepted"] is not True for c in alike),
               "checker_raised": sum(c["accepted"] is None for c in cases),
               "accepted_wrongly": [c for c in differ if c["accepted"] is not False],
               "rejected_wrongly": [c for c in alike if c["accepted"] is not True],
               "seconds": round(time.perf_counter() - start, 1)}
        row["score"] = round(row["rejected"] / max(1, row["behaviour_changing"]), 3)
        report["exercises"].append(row)
        print(f"{lesson} {name:36} {row['rejected']}/{row['behaviour_changing']} rejected "
              f"({row['score']:.0%}), {row['equivalent_rejected']}/{row['equivalent']} equivalent rejected, "
              f"{row['seconds']} s", flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
