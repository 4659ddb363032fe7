"""The fixed cost of one training step: what a step costs when its work costs nothing. At a batch of 2, the matmuls
and convolutions are a rounding error, so the step's time is the price of its calls: dispatching each aten op,
autograd's bookkeeping, the optimizers' loops over parameters. This benchmark measures it on any device, a CPU
included, for every strategy the trainer runs:

- aten calls per step: the aten ops a step dispatches, counted by torch.profiler (top-level calls only: an op that
  another aten op calls inside it is not counted again), on the third step of a fresh trainer;
- the batch-2 step time and the batch-64 step time (milliseconds, median of interleaved windows);
- for each, the optimizers as the trainer builds them ("trainer") against plain Adam, torch's default ("plain": a
  foreach loop on the CPU), paired: windows alternate (plain, trainer, trainer, plain, ...) so that a change of load
  hits both, and each round gives a ratio; the median and range of those ratios are reported.

With --fast, fast mode (torch.compile) is measured beside eager for both (its counts are the calls left outside the
compiled graphs plus one call per graph).

    python benchmarks/fixed_cost.py [--fast] [--steps 20] [--rounds 7] [--out FILE]

writes benchmarks/results/<date>_fixed_cost_<device>.json."""
import argparse
import datetime
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench import NAMES, machine, sync, write

from gan_lessons import data, training


def trainer(name, device, fast, batch, tmp, plain):
    cfg = training.TrainConfig(strategy=name, device=str(device), fast=fast, batch_size=batch, out=tmp,
                               limit=max(batch * 40, 256))
    t = training.Trainer(cfg)
    if plain:                       # torch's default Adam (foreach on the CPU), the trainer's settings otherwise
        for key in ("opt_G", "opt_D"):
            old = getattr(t, key)
            setattr(t, key, torch.optim.Adam(old.param_groups[0]["params"], lr=old.defaults["lr"],
                                             betas=old.defaults["betas"]))
    return t


def window(t, steps, device):
    batch = t.cfg.batch_size
    x = [data.to_unit_range(t.images[i * batch:(i + 1) * batch]) for i in range(steps)]
    args = (t.G, t.D, t.opt_G, t.opt_D)

    def run():
        for i in range(steps):
            t.step_fn(*args, x[i % len(x)], t.noise)
        sync(device)
    return run


def aten_calls(run_one) -> int:
    """Top-level aten ops of one call of run_one (run twice before, so that lazy state is built)."""
    run_one()
    run_one()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run_one()
    events = prof.events()
    return sum(1 for e in events if e.name.startswith("aten::") and
               not _has_aten_parent(e))


def _has_aten_parent(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return True
        parent = parent.cpu_parent
    return False


def measure(name, device, batch, fast, steps, rounds, tmp) -> dict:
    runs, calls = {}, {}
    for variant in ("plain", "trainer"):
        t = trainer(name, device, fast, batch, f"{tmp}/{name}_{variant}_{batch}_{fast}", variant == "plain")
        runs[variant] = window(t, steps, device)
        calls[variant] = aten_calls(window(t, 1, device))
        runs[variant]()                                     # warm-up (and compilation in fast mode)
    times = {v: [] for v in runs}
    for r in range(rounds):
        for v in (("plain", "trainer") if r % 2 == 0 else ("trainer", "plain")):
            t0 = time.perf_counter()
            runs[v]()
            times[v].append((time.perf_counter() - t0) / steps * 1000)
    ratios = [b / a for a, b in zip(times["plain"], times["trainer"])]
    return {v: {"aten_calls": calls[v], "ms_per_step": round(statistics.median(times[v]), 2),
                "window_ms": [round(x, 2) for x in times[v]]} for v in runs} | {
        "trainer_over_plain": {"median": round(statistics.median(ratios), 3), "min": round(min(ratios), 3),
                               "max": round(max(ratios), 3),
                               "trainer_faster_in": f"{sum(r < 1 for r in ratios)} of {len(ratios)} rounds"}}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fast", action="store_true", help="also measure fast mode (torch.compile)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--device", default="auto")
    p.add_argument("--strategies", default=",".join(NAMES))
    p.add_argument("--batches", default="2,64")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    device = training.resolve_device(a.device)
    out = a.out or Path(__file__).parent / "results" / (
        f"{datetime.datetime.now(datetime.timezone.utc).date()}_fixed_cost_{device.type}.json")
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(device), "steps_per_window": a.steps, "rounds": a.rounds,
              "rows": []}
    built = trainer("d_first_reuse_fake", device, False, 2, tempfile.mkdtemp(), False).opt_G.defaults
    result["trainer_adam"] = {k: built[k] for k in ("fused", "foreach")}
    modes = [False, True] if a.fast else [False]
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.strategies.split(","):
            row = {"strategy": name}
            for fast in modes:
                for batch in (int(b) for b in a.batches.split(",")):
                    row[f"{'fast' if fast else 'eager'}_batch_{batch}"] = measure(name, device, batch, fast, a.steps,
                                                                                   a.rounds, tmp)
            result["rows"].append(row)
            write(out, result)
            print(json.dumps(row), flush=True)
    print("wrote", out)
    print(markdown(result))


def markdown(result) -> str:
    """The table of docs/training.md's fixed-cost paragraph, from a results file."""
    cols = [k for k in result["rows"][0] if k != "strategy"]
    lines = ["| strategy | " + " | ".join(
        f"{c.replace('_batch_', ', batch ')}: aten calls, plain → trainer | ms/step, plain → trainer | "
        f"trainer / plain (paired median)" for c in cols) + " |",
        "|---|" + "---|---|---|" * len(cols)]
    for r in result["rows"]:
        cells = []
        for c in cols:
            m = r[c]
            cells += [f"{m['plain']['aten_calls']} → {m['trainer']['aten_calls']}",
                      f"{m['plain']['ms_per_step']} → {m['trainer']['ms_per_step']}",
                      f"{m['trainer_over_plain']['median']}"]
        lines.append(f"| `{r['strategy']}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
