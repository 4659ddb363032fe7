"""What a second process buys on one machine: the same training run (seed 000's GAN, --batch-size the global batch)
with one process and under `torchrun --nproc_per_node=2`, in alternating rounds. Each run trains --epochs epochs on
--limit images; a step's time is its epoch's seconds (from metrics.json, the trainer's own clock, evaluation left
out) over the epoch's steps, the first epoch dropped as warm-up. Reports the median ms per step of each and the
median of the paired ratios (two processes over one), with their spread.

On the CPU each process gets one thread (OMP_NUM_THREADS=1), so two processes use two cores where one uses one: the
ratio says what DDP's second process gives there, gradient averaging (gloo) included. On GPUs, one process per GPU.

Writes benchmarks/results/<date>_distributed_<device>.json.

    python benchmarks/distributed.py [--device cpu] [--rounds 3] [--limit 4096] [--epochs 3]"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def run(nproc, device, limit, epochs, batch, folder):
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"] \
        if nproc > 1 else [sys.executable]
    out = Path(folder) / f"run{nproc}"
    subprocess.run([*launcher, "-m", "gan_lessons", "train", "--out", str(out), "--restart", "--epochs", str(epochs),
                    "--limit", str(limit), "--batch-size", str(batch), "--device", device, "--no-progress",
                    "--eval-samples", "0"], check=True, capture_output=True, text=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    history = json.loads((out / "metrics.json").read_text())["history"]
    steps = limit // batch
    return statistics.median(h["seconds"] for h in history[1:]) / steps * 1000


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--limit", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    a = p.parse_args()
    one, two = [], []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(a.rounds):
            one.append(run(1, a.device, a.limit, a.epochs, a.batch_size, folder))
            two.append(run(2, a.device, a.limit, a.epochs, a.batch_size, folder))
    ratios = [t / o for o, t in zip(one, two)]
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device_type": a.device, "torch": torch.__version__, "cpu": platform.machine(),
              "cpu_count": os.cpu_count(), "threads_per_process": 1, "global_batch": a.batch_size,
              "limit": a.limit, "epochs": a.epochs, "rounds": a.rounds,
              "ms_per_step_one_process": [round(x, 2) for x in one],
              "ms_per_step_two_processes": [round(x, 2) for x in two],
              "ms_one_median": round(statistics.median(one), 2), "ms_two_median": round(statistics.median(two), 2),
              "ratio_median": round(statistics.median(ratios), 3), "ratio_min": round(min(ratios), 3),
              "ratio_max": round(max(ratios), 3)}
    path = ROOT / "benchmarks" / "results" / f"{datetime.date.today()}_distributed_{a.device}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
