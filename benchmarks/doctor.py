"""What the autograd doctor costs, per strategy, on seed 000's GAN (batch 64):

- time: one training step with and without `doctor()`, in alternating windows; medians and their ratio;
- memory: the peak resident memory (VmHWM, Linux) of a fresh process that trains --memory-steps steps, with and
  without the doctor, and their ratio.

Writes benchmarks/results/<date>_doctor_<device>.json.

    python benchmarks/doctor.py [--steps 5] [--repeats 5] [--memory-steps 300]"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from gan_lessons import strategies, training
from gan_lessons.doctor import doctor
from gan_lessons.models import Discriminator, Generator

RUNNABLE = [n for n in strategies.STRATEGIES if n != "retain_graph_seed003"]

MEMORY_RUN = """
import sys, torch
from gan_lessons import strategies
from gan_lessons.doctor import doctor
from gan_lessons.models import Discriminator, Generator
torch.manual_seed(0)
G, D = Generator(), Discriminator()
opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
x_real = torch.rand(64, 1, 28, 28) * 2 - 1
noise = lambda n: torch.randn(n, 64)
step = strategies.get(sys.argv[1])
def train():
    for _ in range(int(sys.argv[2])):
        step(G, D, opt_G, opt_D, x_real, noise)
if sys.argv[3] == "doctor":
    with doctor():
        train()
else:
    train()
# VmHWM: this process's own peak (ru_maxrss would carry over the parent's peak across exec)
print(next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def window(step, args, steps, device, watched):
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    if watched:
        with doctor():
            for _ in range(steps):
                step(*args)
    else:
        for _ in range(steps):
            step(*args)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def peak_rss(name, steps, mode):
    env = dict(os.environ, OMP_NUM_THREADS=str(torch.get_num_threads()))
    out = subprocess.run([sys.executable, "-c", MEMORY_RUN, name, str(steps), mode], env=env, check=True,
                         capture_output=True, text=True).stdout
    return int(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=5, help="steps per timing window")
    p.add_argument("--repeats", type=int, default=5, help="timing windows per mode, alternating")
    p.add_argument("--memory-steps", type=int, default=300, help="steps of each memory run (0: skip memory)")
    p.add_argument("--device", default="auto")
    p.add_argument("--out", type=Path, default=None, help="the results file (default: benchmarks/results/<date>_...json)")
    a = p.parse_args()
    device = training.resolve_device(a.device)
    load_before, rows = os.getloadavg()[0], []
    for name in RUNNABLE:
        torch.manual_seed(0)
        G, D = Generator().to(device), Discriminator().to(device)
        opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
        x_real = torch.rand(64, 1, 28, 28, device=device) * 2 - 1
        args = (G, D, opt_G, opt_D, x_real, lambda n: torch.randn(n, 64, device=device))
        step = strategies.get(name)
        window(step, args, 2, device, False), window(step, args, 2, device, True)          # warm-up
        plain, doctored = [], []
        for _ in range(a.repeats):
            plain.append(window(step, args, a.steps, device, False))
            doctored.append(window(step, args, a.steps, device, True))
        row = {"strategy": name, "ms_per_step_plain": round(statistics.median(plain) * 1e3, 2),
               "ms_per_step_doctor": round(statistics.median(doctored) * 1e3, 2),
               "time_ratio": round(statistics.median(doctored) / statistics.median(plain), 3)}
        if a.memory_steps:
            rss = {mode: peak_rss(name, a.memory_steps, mode) for mode in ("plain", "doctor")}
            row.update({"peak_rss_mib_plain": round(rss["plain"] / 2**20, 1),
                        "peak_rss_mib_doctor": round(rss["doctor"] / 2**20, 1),
                        "rss_ratio": round(rss["doctor"] / rss["plain"], 3)})
        rows.append(row)
        print(json.dumps(row), flush=True)
        result, out = record(a, device, load_before, rows)      # rewritten after every row: a stopped run keeps them
    print(json.dumps({k: v for k, v in result.items() if k != "strategies"}, indent=2))
    print("wrote", out)


def record(a, device, load_before, rows):
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device_type": device.type, "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
              "torch": torch.__version__, "cpu_threads": torch.get_num_threads(),
              "cpu": platform.processor() or platform.machine(), "load_1min_before": load_before,
              "load_1min_after": os.getloadavg()[0],
              "batch_size": 64, "steps_per_window": a.steps, "repeats": a.repeats, "memory_steps": a.memory_steps,
              "strategies": rows,
              "worst_time_ratio": max(r["time_ratio"] for r in rows),
              "worst_rss_ratio": max((r["rss_ratio"] for r in rows if "rss_ratio" in r), default=None)}
    out = a.out or Path(__file__).parent / "results" / f"{result['date'][:10]}_doctor_{device.type}.json"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(out)
    return result, out


if __name__ == "__main__":
    main()
