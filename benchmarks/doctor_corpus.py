"""The doctor on a generated fault corpus (tests/doctor/corpus.py, and corpus_more.py's builders, written by another
hand without reading the doctor): for each seed, one program with a fault of a
catalogue kind injected at a random site, and the same program without it. Per fault kind and per context, the
rate at which the doctor names the right kind, tensor and lines, and its false alarms on the fault-free programs.

    python benchmarks/doctor_corpus.py [--seeds 2000] [--first 0] [--compile eager,aot_eager,inductor]
                                       [--label NAME] [--out FILE]

--compile lets the step_between programs wrap their model in torch.compile with those backends (each compiled
program takes seconds). Results go to benchmarks/results/<date>_doctor_corpus[_NAME]_cpu.json, or to --out.
Run it with another checkout of the package first on PYTHONPATH to measure that version of the doctor (the
corpus stays this one's): `PYTHONPATH=/path/to/old/checkout python benchmarks/doctor_corpus.py --label before`."""
import argparse
import collections
import datetime
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "doctor"))

import corpus  # noqa: E402
import corpus_more  # noqa: E402
import torch  # noqa: E402

corpus_more.register()


def markdown(after: dict, before: dict) -> str:
    """The per-kind table docs/doctor.md shows: faults named before and after, and false alarms after (†: a fault
    written by corpus_more.py, without reading the doctor)."""
    rows = ["| fault injected | raises | named before | named after | false alarms after |", "|---|---|---|---|---|"]
    for kind, count in after["per kind"].items():
        was = before["per kind"].get(kind, {})
        mark = " †" if kind in corpus_more.KINDS else ""
        rows.append(f"| {kind.replace('_', ' ')}{mark} | `{corpus.RAISES[kind]}` | {was.get('named', 0)}/{was.get('faulty', 0)} "
                    f"| {count['named']}/{count['faulty']} | {count['false alarms']}/{count['clean']} |")
    total, was = after["total"], before["total"]
    rows.append(f"| all | | {was['named']}/{was['faulty']} | {total['named']}/{total['faulty']} "
                f"| {total['false alarms']}/{total['clean']} |")
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2000, help="programs with a fault (as many without)")
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--compile", default="", help="torch.compile backends, comma-separated")
    parser.add_argument("--label", default="", help="a name for the results file")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    corpus.COMPILE = tuple(b for b in args.compile.split(",") if b)
    import gan_lessons
    per_kind = collections.defaultdict(collections.Counter)
    per_context = collections.defaultdict(collections.Counter)
    misses = collections.defaultdict(list)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(args.first, args.first + args.seeds):
            for faulty in (True, False):
                program = corpus.generate(seed, faulty)
                outcome = corpus.run(program, Path(folder) / str(seed))
                verdict = corpus.judge(program, outcome)
                for table, key in ((per_kind, program.kind), (per_context, program.context)):
                    count = table[key]
                    if faulty:
                        count["faulty"] += 1
                        count["named"] += verdict.named
                    else:
                        count["clean"] += 1
                        count["false alarms"] += verdict.false_alarm
                if (faulty and not verdict.named) or verdict.false_alarm:
                    misses[program.kind + ("" if faulty else " (fault-free)")].append(
                        {"seed": seed, "context": program.context, "missing": verdict.missing[:3]})
    seconds = time.perf_counter() - started

    def rates(table):
        return {key: {**count, "named rate": round(count["named"] / count["faulty"], 4) if count["faulty"] else None}
                for key, count in sorted(table.items())}
    total = {key: sum(c[key] for c in per_kind.values()) for key in ("faulty", "named", "clean", "false alarms")}
    result = {
        "what": "the doctor on generated programs: a fault of a catalogue kind injected at a random site (named: "
                "its kind, tensor and lines), and the same program without it (false alarm: any diagnosis or "
                "warning, or an error)",
        "command": "python benchmarks/doctor_corpus.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": datetime.date.today().isoformat(), "torch": torch.__version__, "python": platform.python_version(),
        "doctor from": str(Path(gan_lessons.__file__).resolve().parent),
        "seeds": [args.first, args.first + args.seeds], "compile backends": list(corpus.COMPILE),
        "seconds": round(seconds, 1),
        "total": {**total, "named rate": round(total["named"] / total["faulty"], 4)},
        "per kind": rates(per_kind), "per context": rates(per_context),
        "misses (first 5 per kind)": {k: v[:5] for k, v in sorted(misses.items())},
    }
    label = f"_{args.label}" if args.label else ""
    out = args.out or ROOT / "benchmarks" / "results" / f"{result['date']}_doctor_corpus{label}_cpu.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"named {total['named']}/{total['faulty']}, false alarms {total['false alarms']}/{total['clean']}, "
          f"{seconds:.0f} s -> {out}")


if __name__ == "__main__":
    main()
