"""What `python -m gan_lessons doctor SCRIPT` costs against `python SCRIPT`, on seed 000's loop fixed (lesson 07's
fixed step: D's step, then G's through the stepped D, one forward of G; batch 64, random images, --steps steps).

Each run is a fresh process, plain and doctor alternating, --repeats of each; per run: the wall time of the whole
command (start-up included), the seconds of the training loop alone (the script prints them), and the peak
resident memory (ru_maxrss of the child, from os.wait4; this process imports no torch, so a child's peak is its
own). Medians and their ratios go to benchmarks/results/<date>_doctor_script_cpu.json.

    python benchmarks/doctor_script.py [--steps 20] [--repeats 5]"""
import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOOP = '''
"""Seed 000's loop, fixed (lesson 07): nothing for the doctor to report."""
import json, sys, time
import torch
import torch.nn.functional as F
from gan_lessons.models import Discriminator, Generator

steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 20
torch.manual_seed(0)
g, d = Generator(), Discriminator()
g_optimizer, d_optimizer = torch.optim.Adam(g.parameters(), lr=1e-3), torch.optim.Adam(d.parameters(), lr=1e-3)
bce = F.binary_cross_entropy_with_logits
x_real = torch.rand(64, 1, 28, 28) * 2 - 1
real_label, fake_label = torch.ones(64), torch.zeros(64)
t0 = time.perf_counter()
for _ in range(steps):
    gz = g(torch.randn(64, g.z_dim))
    d_loss = bce(d(x_real), real_label) + bce(d(gz.detach()), fake_label)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(d(gz), real_label)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()
print(json.dumps({"loop_seconds": time.perf_counter() - t0, "g_loss": round(g_loss.item(), 6)}))
'''


def once(command):
    """(wall seconds, peak RSS bytes, the script's own report) of one run of `command`."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)         # reaped here, with its own resource usage
        wall = time.perf_counter() - t0
        child.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        said, complaints = out.read(), err.read()
    if code != 0 or complaints.strip():                  # a clean run: the doctor must have said nothing
        raise SystemExit(f"{' '.join(command)} exited {code}:\n{complaints[-3000:]}")
    return wall, usage.ru_maxrss * 1024, json.loads(said.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20, help="training steps in each run")
    p.add_argument("--repeats", type=int, default=5, help="runs of each command, alternating")
    p.add_argument("--out", type=Path, default=None, help="the results file (default: benchmarks/results/<date>_...json)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "seed000_fixed.py"
        script.write_text(LOOP)
        commands = {"plain": [sys.executable, str(script), "--steps", str(a.steps)],
                    "doctor": [sys.executable, "-m", "gan_lessons", "doctor", str(script), "--steps", str(a.steps)]}
        load_before, runs = os.getloadavg()[0], {"plain": [], "doctor": []}
        for _ in range(a.repeats):
            for mode, command in commands.items():
                wall, rss, said = once(command)
                runs[mode].append({"wall_seconds": round(wall, 3), "loop_seconds": round(said["loop_seconds"], 3),
                                   "peak_rss_mib": round(rss / 2**20, 1), "g_loss": said["g_loss"]})
                print(mode, json.dumps(runs[mode][-1]), flush=True)
    same = {r["g_loss"] for rs in runs.values() for r in rs}
    median = {mode: {k: round(statistics.median(r[k] for r in rs), 3)
                     for k in ("wall_seconds", "loop_seconds", "peak_rss_mib")} for mode, rs in runs.items()}
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device_type": "cpu", "torch": importlib.metadata.version("torch"),
              "python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
              "cpu_count": os.cpu_count(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
              "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0],
              "command": {"plain": "python SCRIPT --steps N",
                          "doctor": "python -m gan_lessons doctor SCRIPT --steps N"},
              "script": "seed 000's loop, fixed (benchmarks/doctor_script.py LOOP)", "batch_size": 64,
              "steps": a.steps, "repeats": a.repeats, "same_losses_in_every_run": len(same) == 1,
              "median": median,
              "ratio": {k: round(median["doctor"][k] / median["plain"][k], 3) for k in median["plain"]},
              "runs": runs}
    out = a.out or Path(__file__).parent / "results" / f"{result['date'][:10]}_doctor_script_cpu.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("torch", "median", "ratio", "same_losses_in_every_run")}, indent=2))
    print("wrote", out)


if __name__ == "__main__":
    main()
