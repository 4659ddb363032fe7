"""Benchmark seed 000's MNIST GAN training step on whatever device is here.

For each strategy and mode (eager; fast = torch.compile when --fast is given) it reports steady-state steps/s and
images/s (median of --repeats timed windows, warm-up and compile time reported separately), peak memory, and
the distance from the ~35 us/step floor of this model. --quality also trains strategy d_first_reuse_fake from
scratch until it reaches the MNIST-FID that the shipped generator's run recorded after 20 epochs, and reports the
training time that took (evaluation not counted).
Writes benchmarks/results/<date>_<device>.json.

    python benchmarks/bench.py [--fast] [--quality] [--steps 200] [--repeats 5]"""
import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from gan_lessons import costs, data, metrics, strategies, training

FLOOR_US = 35.0   # memory/launch floor for this model at batch 64 (3.3 M parameters, Adam moves ~92 MB per step)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_strategy(name, fast, device, steps, repeats, batch=64):
    cfg = training.TrainConfig(strategy=name, device=str(device), fast=fast, batch_size=batch,
                               out=f"runs/bench_{name}_{'fast' if fast else 'eager'}")
    trainer = training.Trainer(cfg)
    x = [data.to_unit_range(trainer.images[i * batch:(i + 1) * batch]) for i in range(steps)]
    step = trainer.step_fn
    args = (trainer.G, trainer.D, trainer.opt_G, trainer.opt_D)
    started = time.perf_counter()
    for i in range(10):                                    # warm-up (and compilation, in fast mode)
        step(*args, x[i % steps], trainer.noise)
    sync(device)
    warmup_s = time.perf_counter() - started
    rates = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        for i in range(steps):
            step(*args, x[i], trainer.noise)
        sync(device)
        rates.append(steps / (time.perf_counter() - t0))
    rate = statistics.median(rates)
    return {"strategy": name, "mode": "fast" if fast else "eager", "steps_per_s": round(rate, 1),
            "images_per_s": round(rate * batch), "us_per_step": round(1e6 / rate, 1),
            "x_floor": round(1e6 / rate / FLOOR_US, 1), "warmup_and_compile_s": round(warmup_s, 2),
            "rates": [round(r, 1) for r in rates]}


def peak_memory(name, device):
    c = costs.measure(name, *costs.fresh_gan(device=device), steps=3)
    return {"peak_mib": round(c.peak_mib, 2), "memory_measure": c.memory}


def quality(device, bar=None, max_epochs=30, n=2000, limit=None):
    """Time to the quality bar: train strategy 3 (d_first_reuse_fake) from scratch, score n samples after every
    epoch (not timed), and stop once the MNIST-FID is at or below `bar`. The default bar is the score the shipped
    generator's own run recorded after its 20th epoch (same n, same noise)."""
    record = json.loads((metrics.ASSETS / "generator.json").read_text())
    if bar is None:
        bar = record["eval_each_epoch"][-1]["mnist_fid"]
    net, scores = metrics.load_classifier(), []

    class Reached(Exception):
        pass

    def on_epoch(trainer):
        fakes = training.generate(trainer.G, n, seed=0)         # the noise the CLI's --eval-each uses
        scores.append({"epoch": trainer.epoch, "seconds": trainer.history[-1]["seconds"],
                       "mnist_fid": metrics.evaluate(fakes, net=net)["mnist_fid"]})
        if scores[-1]["mnist_fid"] <= bar:
            raise Reached

    cfg = training.TrainConfig(epochs=max_epochs, device=str(device), out="runs/bench_quality", limit=limit)
    try:
        training.train(cfg, on_epoch=on_epoch)
    except Reached:
        pass
    reached = scores[-1]["mnist_fid"] <= bar
    return {"strategy": cfg.strategy, "bar_mnist_fid": bar, "bar_from": f"gan_lessons/assets/generator.json "
            f"(epoch {len(record['eval_each_epoch'])}, {record['device']})", "n": n, "reached": reached,
            "epochs": len(scores), "train_seconds": round(sum(e["seconds"] for e in scores), 1) if reached else None,
            "per_epoch": scores}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fast", action="store_true", help="also measure torch.compile mode")
    p.add_argument("--quality", action="store_true",
                   help="also time a fresh run to the shipped generator's 20-epoch MNIST-FID")
    p.add_argument("--steps", type=int, default=None, help="steps per timed window (default: 200 GPU, 20 CPU)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="auto")
    a = p.parse_args()
    device = training.resolve_device(a.device)
    steps = a.steps or (200 if device.type == "cuda" else 20)
    names = [n for n in strategies.STRATEGIES if n != "retain_graph_seed003"]
    rows = []
    for fast in ([False, True] if a.fast else [False]):
        for name in names:
            row = time_strategy(name, fast, device, steps, a.repeats)
            row.update(peak_memory(name, device))
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
              "device_type": device.type, "cpu_threads": torch.get_num_threads(), "torch": torch.__version__,
              "python": sys.version.split()[0], "batch_size": 64, "steps_per_window": steps,
              "repeats": a.repeats, "floor_us": FLOOR_US, "rows": rows}
    if a.quality:
        result["quality"] = quality(device)
    out = Path(__file__).parent / "results" / f"{result['date'][:10]}_{result['device_type']}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
