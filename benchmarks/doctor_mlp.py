"""What the autograd doctor costs on a small MLP GAN, where a step is short and the doctor's fixed cost per torch call
weighs most: a 2-D toy GAN (G: 16 -> 64 -> 64 -> 2, D: 2 -> 64 -> 64 -> 1, Adam, batch 64), one D step then one G
step. Windows of --steps steps alternate, plain and under `doctor()`; each pair gives one ratio (doctor over plain).
Reports the median ms per step of each and the median of the paired ratios, with their spread. A third window in
each round runs under an empty TorchFunctionMode (every torch call passed straight on, nothing recorded): the floor
of any recorder built on one, as the doctor is.

Writes benchmarks/results/<date>_doctor_mlp_<device>.json.

    python benchmarks/doctor_mlp.py [--steps 50] [--pairs 15]"""
import argparse
import datetime
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from gan_lessons.doctor import doctor


def problem(seed=0):
    torch.manual_seed(seed)
    G = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
    D = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
    return G, D, torch.optim.Adam(G.parameters(), 1e-3), torch.optim.Adam(D.parameters(), 1e-3)


def step(G, D, opt_G, opt_D):
    x_real, z = torch.randn(64, 2), torch.randn(64, 16)
    x_fake = G(z)
    opt_D.zero_grad()
    loss_D = F.binary_cross_entropy_with_logits(D(x_real), torch.ones(64, 1)) + \
        F.binary_cross_entropy_with_logits(D(x_fake.detach()), torch.zeros(64, 1))
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    F.binary_cross_entropy_with_logits(D(x_fake), torch.ones(64, 1)).backward()
    opt_G.step()


class _Empty(TorchFunctionMode):
    """Sees every torch call and records nothing."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def window(nets, steps, watched):
    """ms per step over one window; watched: False, True (the doctor) or "empty" (an empty TorchFunctionMode)."""
    t0 = time.perf_counter()
    if watched == "empty":
        with _Empty():
            for _ in range(steps):
                step(*nets)
    elif watched:
        with doctor(G=nets[0], D=nets[1], opt_G=nets[2], opt_D=nets[3]):
            for _ in range(steps):
                step(*nets)
    else:
        for _ in range(steps):
            step(*nets)
    return (time.perf_counter() - t0) / steps * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=50, help="steps per timing window")
    p.add_argument("--pairs", type=int, default=15, help="pairs of windows (plain, doctor)")
    p.add_argument("--out", default=None, help="results file (default: benchmarks/results/<date>_doctor_mlp_cpu.json)")
    a = p.parse_args()
    if a.steps < 1 or a.pairs < 1:
        p.error("--steps and --pairs must be at least 1")
    torch.set_num_threads(1)
    nets = problem()
    for _ in range(2):                                 # warm-up: allocator, Adam's state, the doctor's first names
        window(nets, a.steps, False)
        window(nets, a.steps, True)
    plain, watched, empty = [], [], []
    for _ in range(a.pairs):
        plain.append(window(nets, a.steps, False))
        watched.append(window(nets, a.steps, True))
        empty.append(window(nets, a.steps, "empty"))
    ratios = sorted(w / q for q, w in zip(plain, watched))
    floor = sorted(e / q for q, e in zip(plain, empty))
    record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device_type": "cpu", "torch": torch.__version__, "cpu_threads": 1, "cpu": platform.machine(),
              "load_1min_before": os.getloadavg()[0], "steps_per_window": a.steps, "pairs": a.pairs,
              "ms_plain_median": round(statistics.median(plain), 3),
              "ms_doctor_median": round(statistics.median(watched), 3),
              "ratio_median": round(statistics.median(ratios), 3),
              "ratio_min": round(ratios[0], 3), "ratio_max": round(ratios[-1], 3),
              "ms_empty_mode_median": round(statistics.median(empty), 3),
              "empty_mode_ratio_median": round(statistics.median(floor), 3)}
    out = Path(a.out) if a.out else Path(__file__).parent / "results" / f"{record['date'][:10]}_doctor_mlp_cpu.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
