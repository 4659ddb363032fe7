"""How much slower is a training step under the autograd doctor?

Times one d_first_reuse_fake step of seed 000's GAN (batch 64) with and without `doctor(...)`, in alternating
windows, and reports the medians and their ratio. Writes benchmarks/results/<date>_doctor_<device>.json.

    python benchmarks/doctor_overhead.py [--steps 10] [--repeats 7]"""
import argparse
import datetime
import json
import statistics
import time
from pathlib import Path

import torch

from gan_lessons import strategies, training
from gan_lessons.doctor import doctor
from gan_lessons.models import Discriminator, Generator


def window(step, args, steps, device, watched=None):
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    if watched is None:
        for _ in range(steps):
            step(*args)
    else:
        with doctor(**watched):
            for _ in range(steps):
                step(*args)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--device", default="auto")
    a = p.parse_args()
    device = training.resolve_device(a.device)
    torch.manual_seed(0)
    G, D = Generator().to(device), Discriminator().to(device)
    opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
    x_real = torch.rand(64, 1, 28, 28, device=device) * 2 - 1
    noise = lambda n: torch.randn(n, 64, device=device)
    args = (G, D, opt_G, opt_D, x_real, noise)
    step = strategies.get("d_first_reuse_fake")
    watched = dict(G=G, D=D, opt_G=opt_G, opt_D=opt_D)
    window(step, args, 3, device), window(step, args, 3, device, watched)          # warm-up
    plain, doctored = [], []
    for _ in range(a.repeats):
        plain.append(window(step, args, a.steps, device))
        doctored.append(window(step, args, a.steps, device, watched))
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device_type": device.type, "torch": torch.__version__, "cpu_threads": torch.get_num_threads(),
              "strategy": "d_first_reuse_fake", "batch_size": 64, "steps_per_window": a.steps, "repeats": a.repeats,
              "ms_per_step_plain": round(statistics.median(plain) * 1e3, 2),
              "ms_per_step_doctor": round(statistics.median(doctored) * 1e3, 2),
              "ratio": round(statistics.median(doctored) / statistics.median(plain), 3)}
    out = Path(__file__).parent / "results" / f"{result['date'][:10]}_doctor_{device.type}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print("wrote", out)


if __name__ == "__main__":
    main()
