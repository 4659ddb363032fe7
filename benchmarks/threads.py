"""How many torch threads each test worker should get: time seed 000's training step in two processes at once
(what `pytest -n 2` does), with 1 and with 2 torch threads per process, interleaved over --rounds.
Writes benchmarks/results/<date>_threads.json.

    python benchmarks/threads.py [--rounds 3] [--steps 20]"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

WORKER = """
import statistics, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
from gan_lessons import costs, strategies
G, D, x_real, noise = costs.fresh_gan()
opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
step = strategies.get("d_first_reuse_fake")
for _ in range(3):
    step(G, D, opt_G, opt_D, x_real, noise)
times = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    step(G, D, opt_G, opt_D, x_real, noise)
    times.append(time.perf_counter() - t0)
print(statistics.median(times))
"""


def two_at_once(threads, steps):
    """Median step time (s) of each of two processes started together."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(threads), str(steps)], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    return [float(p.communicate()[0]) for p in procs]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    import torch
    load = os.getloadavg()[0]
    runs = {1: [], 2: []}
    for _ in range(args.rounds):
        for threads in (1, 2):
            runs[threads] += two_at_once(threads, args.steps)
    median = {t: statistics.median(v) for t, v in runs.items()}
    result = {"date": datetime.date.today().isoformat(), "torch": torch.__version__,
              "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
              "load_before": load, "processes": 2, "steps": args.steps, "rounds": args.rounds,
              "step_s": {f"{t}_thread": [round(x, 4) for x in v] for t, v in runs.items()},
              "median_step_s": {f"{t}_thread": round(m, 4) for t, m in median.items()},
              "ratio_2_over_1": round(median[2] / median[1], 2)}
    out = Path(__file__).parent / "results" / f"{result['date']}_threads.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["median_step_s"]), "ratio", result["ratio_2_over_1"], "->", out)


if __name__ == "__main__":
    main()
