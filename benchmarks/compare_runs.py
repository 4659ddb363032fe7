"""Compare finished training runs (folders written by `python -m gan_lessons train --eval-each N`) at the same
training time: per-epoch MNIST-FID against cumulative training seconds, and the final metrics. Writes the
comparison as JSON and prints it as a markdown table.

    python benchmarks/compare_runs.py RUN_A RUN_B ... --out benchmarks/results/<date>_<name>.json"""
import argparse
import json
from pathlib import Path


def summary(run: Path) -> dict:
    record = json.loads((run / "metrics.json").read_text())
    seconds, curve = 0.0, []
    for h, e in zip(record["history"], record["eval_each_epoch"]):
        seconds += h["seconds"]
        curve.append({"epoch": h["epoch"], "train_seconds": round(seconds, 1), "mnist_fid": e["mnist_fid"],
                      "classifier_score": e["classifier_score"]})
    return {"run": run.name, "command": record["command"], "strategy": record["config"]["strategy"],
            "torch": record["torch"], "device": record["device"], "curve": curve, "final": record["metrics"]}


def markdown(runs) -> str:
    lines = ["| strategy | epoch | training seconds (cumulative) | MNIST-FID (2,000 samples) | classifier score |",
             "|---|---|---|---|---|"]
    for r in runs:
        lines += [f"| `{r['strategy']}` | {c['epoch']} | {c['train_seconds']} | {c['mnist_fid']} | "
                  f"{c['classifier_score']} |" for c in r["curve"]]
    lines += ["", "| strategy | final MNIST-FID (10,000 samples) | classifier score | rarest digit's share |",
              "|---|---|---|---|"]
    lines += [f"| `{r['strategy']}` | {r['final']['mnist_fid']} | {r['final']['classifier_score']} | "
              f"{min(r['final']['coverage'])} |" for r in runs]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    runs = [summary(run) for run in a.runs]
    a.out.write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    print(markdown(runs))


if __name__ == "__main__":
    main()
