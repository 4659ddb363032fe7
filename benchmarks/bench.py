"""Benchmark seed 000's MNIST GAN training step on whatever device is here, and write every figure with the machine
it came from to benchmarks/results/<date>_<device>.json.

- machine: CPU model, cores, torch threads, load average before and after, torch, GPU.
- floor: what the step cannot beat here. Its FLOPs are counted with torch.utils.flop_counter (matmuls and
  convolutions only, so the count is a lower bound) and divided by this device's measured float32 matmul rate; Adam's
  parameter traffic (7 float32 reads and writes per parameter) is divided by the measured copy bandwidth. The floor
  is the larger of the two; each row gives its time as a multiple of it.
- eager vs fast (torch.compile, --fast): windows interleaved (eager, fast, fast, eager, ...) so that a change of load
  hits both; each round gives a paired ratio, and the median and range of those ratios are reported.
- trainer vs DCGAN-style: the trainer's own epoch loop against benchmarks/dcgan_style.py (a DataLoader over
  torchvision's MNIST with ToTensor and Normalize) with 0 and with 2 workers, same G, D and strategy, interleaved.
- quality (--quality): time until a fresh run reaches a fixed MNIST-FID (2,000 samples, scored after every epoch
  and not timed), for 3 seeds, for the trainer and for the DCGAN-style loop (2 workers).

With --deadline, nothing new starts after that time; the results file is rewritten after every figure, so a run
stopped at any point keeps what it measured, and --append adds to it later.

    python benchmarks/bench.py [--fast] [--quality] [--steps 20] [--rounds 5] [--deadline UNIX_TIME] [--append]"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).parent))
import dcgan_style

from gan_lessons import costs, data, metrics, strategies, training

QUALITY_FID = 30.0        # MNIST-FID on 2,000 samples; epoch 1 of the default run scores about 150, real digits ~1
NAMES = [n for n in strategies.STRATEGIES if n != "retain_graph_seed003"]


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def machine(device) -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else platform.processor()
    return {"cpu": cpu, "cpu_cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()], "torch": torch.__version__,
            "python": sys.version.split()[0], "device": str(device),
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None}


def best_seconds(fn, repeats=10, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def peak(device, sizes=(1024, 2048, 4096)) -> dict:
    """This device's measured float32 matmul rate (the best of 10 runs at each size, the best size) and copy
    bandwidth (best of 10): what this machine can do at most, for the floor."""
    rates = {}
    for n in sizes:
        a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
        rates[n] = 2 * n**3 / best_seconds(lambda a=a, b=b: (a @ b, sync(device))) / 1e9
    src = torch.randn(64 * 2**20 // 4, device=device)            # 64 MiB
    dst = torch.empty_like(src)
    copy_gb_s = 2 * src.nbytes / best_seconds(lambda: (dst.copy_(src), sync(device))) / 1e9
    return {"matmul_gflops": round(max(rates.values()), 1), "matmul_gflops_by_size": {n: round(r, 1) for n, r in rates.items()},
            "copy_gb_s": round(copy_gb_s, 1)}


def step_flops(name) -> int:
    G, D, x_real, noise = costs.fresh_gan()
    opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
    with FlopCounterMode(display=False) as counter:
        strategies.get(name)(G, D, opt_G, opt_D, x_real, noise)
    return counter.get_total_flops()


def floor_us(flops, n_params, peak_rates) -> dict:
    compute = flops / (peak_rates["matmul_gflops"] * 1e9) * 1e6
    memory = 7 * 4 * n_params / (peak_rates["copy_gb_s"] * 1e9) * 1e6
    return {"step_gflop": round(flops / 1e9, 3), "compute_floor_us": round(compute, 1),
            "adam_memory_floor_us": round(memory, 1), "floor_us": round(max(compute, memory), 1)}


def trainer_for(name, device, fast, out, batch=64, limit=None, seed=0):
    cfg = training.TrainConfig(strategy=name, device=str(device), fast=fast, batch_size=batch, out=out, limit=limit,
                               seed=seed)
    return training.Trainer(cfg)


def step_window(trainer, steps, device):
    """Time `steps` training steps of this trainer on fixed batches (the step alone, no data path)."""
    x = [data.to_unit_range(trainer.images[i * 64:(i + 1) * 64]) for i in range(steps)]
    args = (trainer.G, trainer.D, trainer.opt_G, trainer.opt_D)

    def run():
        for i in range(steps):
            trainer.step_fn(*args, x[i], trainer.noise)
        sync(device)
    return run


def interleaved(windows: dict, rounds) -> dict:
    """Alternate the windows (A B, B A, A B, ...) and give each one's median seconds."""
    names, times = list(windows), {n: [] for n in windows}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            windows[n]()
            times[n].append(time.perf_counter() - t0)
    return times


def eager_vs_fast(name, device, steps, rounds, fast, tmp, floor) -> dict:
    modes = {"eager": trainer_for(name, device, False, f"{tmp}/{name}_eager")}
    if fast:
        modes["fast"] = trainer_for(name, device, True, f"{tmp}/{name}_fast")
    windows, compile_s, row = {}, {}, {"strategy": name}
    for mode, trainer in modes.items():
        windows[mode] = step_window(trainer, steps, device)
        t0 = time.perf_counter()
        try:
            windows[mode]()                                 # warm-up, and compilation in fast mode
        except Exception as error:                          # a strategy fast mode cannot run: recorded, not fatal
            if mode == "eager":
                raise
            row["fast_error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300]}"
            del windows[mode]
            fast = False
            continue
        compile_s[mode] = round(time.perf_counter() - t0, 2)
    times = interleaved(windows, rounds)
    for mode, t in times.items():
        us = statistics.median(t) / steps * 1e6
        row[mode] = {"ms_per_step": round(us / 1000, 2), "images_per_s": round(64 / us * 1e6),
                     "x_floor": round(us / floor["floor_us"], 2), "first_window_s": compile_s[mode],
                     "window_s": [round(s, 3) for s in t]}
    if fast:
        ratios = [f / e for e, f in zip(times["eager"], times["fast"])]
        row["fast_over_eager"] = {"median": round(statistics.median(ratios), 3), "min": round(min(ratios), 3),
                                  "max": round(max(ratios), 3), "fast_faster_in": f"{sum(r < 1 for r in ratios)} of "
                                  f"{len(ratios)} rounds", "ratios": [round(r, 3) for r in ratios]}
    if fast:
        row["fast_loss_gap"] = loss_gap(name, device, tmp)
    row.update(peak_memory(name, device))
    return row


def loss_gap(name, device, tmp, steps=50) -> dict:
    """Fresh eager and fast trainers from the same seed, on the same batches, for `steps` steps: the largest
    difference of their losses (fast mode need not be bit-identical, but must train the same way), and whether fast
    mode recorded the whole step as a CUDA graph."""
    runs = {}
    for mode in ("eager", "fast"):
        trainer = trainer_for(name, device, mode == "fast", f"{tmp}/{name}_{mode}_gap")
        seen = []
        for i in range(steps):
            x = data.to_unit_range(trainer.images[i * 64:(i + 1) * 64])
            loss_D, loss_G = trainer.step_fn(trainer.G, trainer.D, trainer.opt_G, trainer.opt_D, x, trainer.noise)
            seen.append(torch.stack([loss_D.detach(), loss_G.detach()]).float().cpu())
        runs[mode] = (torch.stack(seen), trainer.captured)
    gap = (runs["eager"][0] - runs["fast"][0]).abs()
    return {"steps": steps, "max_abs": round(gap.max().item(), 6), "last_step_abs": round(gap[-1].max().item(), 6),
            "captured_as_cuda_graph": runs["fast"][1]}


def peak_memory(name, device):
    c = costs.measure(name, *costs.fresh_gan(device=device), steps=3)
    return {"peak_mib": round(c.peak_mib, 2), "memory_measure": c.memory}


def versus_dataloader(device, steps, rounds, tmp) -> dict:
    """The trainer's epoch loop (data already on the device as uint8, indexed per batch) against the DCGAN-style loop
    with 0 and 2 DataLoader workers: same models, strategy and batch size, steady state (workers started before)."""
    trainer = trainer_for("d_first_reuse_fake", device, False, f"{tmp}/vs", limit=steps * 64)
    runs = {"trainer": lambda: (trainer.run_epoch(), sync(device))}
    for workers in (0, 2):
        stream, gan = dcgan_style.batches(dcgan_style.make_loader(workers=workers)), dcgan_style.make_gan(device=device)
        runs[f"dcgan_style_{workers}_workers"] = (lambda s=stream, g=gan: (dcgan_style.train_steps(g, s, steps),
                                                                           sync(device)))
    for run in runs.values():
        run()                                               # warm-up: workers started, first batches read
    times = interleaved(runs, rounds)
    base = times["trainer"]
    return {name: {"images_per_s": round(steps * 64 / statistics.median(t)),
                   "time_over_trainer_median": round(statistics.median([x / b for x, b in zip(t, base)]), 3),
                   "window_s": [round(s, 3) for s in t]} for name, t in times.items()}


def quality(device, seeds=(0, 1, 2), bar=QUALITY_FID, max_epochs=8, n=2000, tmp="runs", limit=None) -> dict:
    """Train the default strategy from scratch for each seed, score n samples after every epoch (not timed), and stop
    once the MNIST-FID is at or below the bar."""
    net, runs = metrics.load_classifier(), []

    class Reached(Exception):
        pass

    for seed in seeds:
        scores = []

        def on_epoch(trainer, scores=scores):
            fakes = training.generate(trainer.G, n, seed=0)     # the noise the CLI's --eval-each uses
            scores.append({"epoch": trainer.epoch, "seconds": trainer.history[-1]["seconds"],
                           "mnist_fid": metrics.evaluate(fakes, net=net)["mnist_fid"]})
            if scores[-1]["mnist_fid"] <= bar:
                raise Reached

        cfg = training.TrainConfig(epochs=max_epochs, device=str(device), out=f"{tmp}/quality_{seed}", seed=seed,
                                   limit=limit)
        try:
            training.train(cfg, on_epoch=on_epoch)
        except Reached:
            pass
        reached = scores[-1]["mnist_fid"] <= bar
        runs.append({"seed": seed, "reached": reached, "epochs": len(scores),
                     "train_seconds": round(sum(e["seconds"] for e in scores), 1) if reached else None,
                     "per_epoch": scores})
        print(json.dumps(runs[-1]), flush=True)
    done = [r["train_seconds"] for r in runs if r["reached"]]
    return {"strategy": "d_first_reuse_fake", "bar_mnist_fid": bar, "n": n, "max_epochs": max_epochs,
            "reached": f"{len(done)} of {len(runs)} seeds",
            "median_train_seconds": round(statistics.median(done), 1) if done else None, "runs": runs}


def quality_dcgan_style(device, seeds=(0, 1, 2), bar=QUALITY_FID, max_epochs=8, n=2000, workers=2,
                        limit=None) -> dict:
    """The same bar for the DCGAN-style loop (benchmarks/dcgan_style.py): fresh G and D per seed, one pass of its
    DataLoader an epoch (timed), n samples scored after each (not timed)."""
    net, runs = metrics.load_classifier(), []
    for seed in seeds:
        gan = dcgan_style.make_gan(seed=seed, device=device)
        loader = dcgan_style.make_loader(workers=workers, limit=limit)
        scores, seconds = [], 0.0
        for epoch in range(1, max_epochs + 1):
            t0 = time.perf_counter()
            dcgan_style.train_steps(gan, dcgan_style.batches(loader), len(loader))   # one pass: an epoch
            sync(device)
            seconds += time.perf_counter() - t0
            fid = metrics.evaluate(training.generate(gan[0], n, seed=0), net=net)["mnist_fid"]
            scores.append({"epoch": epoch, "seconds": round(seconds, 2), "mnist_fid": fid})
            if fid <= bar:
                break
        reached = scores[-1]["mnist_fid"] <= bar
        runs.append({"seed": seed, "reached": reached, "epochs": len(scores),
                     "train_seconds": round(seconds, 1) if reached else None, "per_epoch": scores})
        print(json.dumps(runs[-1]), flush=True)
    done = [r["train_seconds"] for r in runs if r["reached"]]
    return {"loop": f"DCGAN-style, {workers} workers", "bar_mnist_fid": bar, "n": n, "max_epochs": max_epochs,
            "reached": f"{len(done)} of {len(runs)} seeds",
            "median_train_seconds": round(statistics.median(done), 1) if done else None, "runs": runs}


def markdown(result) -> str:
    """The benchmark paragraph and tables of docs/training.md, rendered from a results file (tests/project/test_readme.py
    checks the documentation holds exactly this)."""
    m, peak_, floor = result["machine"], result["peak"], result["floor"]
    lines = [f"Machine: {m['cpu']}, {m['cpu_cores']} cores, {m['torch_threads']} torch threads, load average "
             f"{m['load_average_1_5_15'][0]} at the start and {m['load_average_at_end'][0]} at the end; torch "
             f"{m['torch']}; {result['date'][:10]}. Batch {result['batch_size']}; each figure is the median of "
             f"{result['rounds']} interleaved windows of {result['steps_per_window']} steps.",
             "",
             f"**Floor.** One step of `d_first_reuse_fake` is {floor['step_gflop']} GFLOP of matmuls and convolutions "
             f"(counted by `torch.utils.flop_counter`; everything else is left out, so the floor is low). At this "
             f"{'GPU' if m.get('gpu') else 'CPU'}'s "
             f"best measured float32 matmul rate, {peak_['matmul_gflops']} GFLOP/s, that is "
             f"{floor['compute_floor_us'] / 1000:.1f} ms a step; Adam's parameter traffic at the measured "
             f"{peak_['copy_gb_s']} GB/s copy bandwidth is {floor['adam_memory_floor_us'] / 1000:.1f} ms.",
             "",
             "| strategy | GFLOP/step | eager ms/step | × its floor | fast ms/step | fast / eager, paired (median, min–max) | fast faster in | peak MiB (saved tensors) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        e, f, q = r["eager"], r.get("fast"), r.get("fast_over_eager")
        head = f"| `{r['strategy']}` | {r['floor']['step_gflop']} | {e['ms_per_step']} | {e['x_floor']}x | "
        lines.append(head + (f"{f['ms_per_step']} | {q['median']} ({q['min']}–{q['max']}) | {q['fast_faster_in']} | "
                             f"{r['peak_mib']} |" if q else f"– | – | – | {r['peak_mib']} |"))
    v = result.get("versus_dataloader", {})
    labels = {"trainer": "the trainer's epoch loop (`python -m gan_lessons train`)",
              "dcgan_style_0_workers": "DCGAN-style: DataLoader, ToTensor + Normalize, 0 workers",
              "dcgan_style_2_workers": "DCGAN-style: DataLoader, ToTensor + Normalize, 2 workers"}
    if v:
        lines += ["", "| loop (`d_first_reuse_fake`) | images/s | time / the trainer's (paired, median) |",
                  "|---|---|---|"]
        lines += [f"| {labels[k]} | {x['images_per_s']} | {x['time_over_trainer_median']} |" for k, x in v.items()]
    if "quality" in result:
        q = result["quality"]
        runs = "; ".join(f"seed {r['seed']}: " + (f"{r['epochs']} epochs, {r['train_seconds']} s" if r["reached"]
                                                  else f"not within {q['max_epochs']} epochs") for r in q["runs"])
        lines += ["", f"**Time to quality.** `{q['strategy']}` from scratch until MNIST-FID ≤ {q['bar_mnist_fid']:g} "
                      f"on {q['n']:,} samples (scored after every epoch, not timed): {runs}. Reached by {q['reached']}; "
                      f"median {q['median_train_seconds']} s of training over the runs that reached it."]
    if "quality_dcgan_style" in result:
        q = result["quality_dcgan_style"]
        runs = "; ".join(f"seed {r['seed']}: " + (f"{r['epochs']} epochs, {r['train_seconds']} s" if r["reached"]
                                                  else f"not within {q['max_epochs']} epochs") for r in q["runs"])
        lines += ["", f"The {q['loop']}, to the same bar: {runs}. Reached by {q['reached']}; median "
                      f"{q['median_train_seconds']} s of training over the runs that reached it."]
    return "\n".join(lines)


def write(out: Path, result: dict) -> None:
    """The results file, rewritten whole after every figure (a stopped run keeps what it measured)."""
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fast", action="store_true", help="also measure torch.compile mode, interleaved with eager")
    p.add_argument("--quality", action="store_true", help=f"also time 3 fresh runs to MNIST-FID {QUALITY_FID:g}")
    p.add_argument("--steps", type=int, default=None, help="steps per timed window (default: 200 GPU, 20 CPU)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--device", default="auto")
    p.add_argument("--peak-sizes", default="1024,2048,4096", help="matmul sizes for the device's measured rate")
    p.add_argument("--out", type=Path, default=None, help="the results file (default: benchmarks/results/<date>_...json)")
    p.add_argument("--strategies", default=",".join(NAMES))
    p.add_argument("--no-versus", action="store_true", help="leave out the trainer vs DCGAN-style comparison")
    p.add_argument("--append", action="store_true",
                   help="add to the results file at --out: its machine, floor and rows are kept, strategies it has "
                        "are not measured again")
    p.add_argument("--deadline", type=float, default=None,
                   help="a Unix time: nothing new starts after it (what was left out is listed in the file)")
    a = p.parse_args()
    device = training.resolve_device(a.device)
    steps = a.steps or (200 if device.type == "cuda" else 20)
    out = a.out or Path(__file__).parent / "results" / f"{datetime.datetime.now(datetime.timezone.utc).date()}_{device.type}.json"
    n_params = sum(p.numel() for net in costs.fresh_gan()[:2] for p in net.parameters())
    if a.append and out.exists():
        result = json.loads(out.read_text())
    else:
        result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "machine": machine(device), "batch_size": 64, "steps_per_window": steps, "rounds": a.rounds}
        result["peak"] = peak(device, tuple(int(n) for n in a.peak_sizes.split(",")))
        result["floor"] = floor_us(step_flops("d_first_reuse_fake"), n_params, result["peak"])
        result["rows"] = []
        print(json.dumps({k: result[k] for k in ("machine", "peak", "floor")}), flush=True)
    done = {r["strategy"] for r in result["rows"]}
    todo = [("row", n) for n in a.strategies.split(",") if n and n not in done]
    if not a.no_versus and "versus_dataloader" not in result:
        todo.append(("versus_dataloader", None))
    if a.quality:
        todo += [(k, None) for k in ("quality", "quality_dcgan_style") if k not in result]
    result.pop("left_out", None)
    with tempfile.TemporaryDirectory() as tmp:
        for i, (kind, name) in enumerate(todo):
            if a.deadline is not None and time.time() > a.deadline:
                result["left_out"] = [n or k for k, n in todo[i:]]
                print("deadline reached; left out:", ", ".join(result["left_out"]), flush=True)
                break
            if kind == "row":
                floor = floor_us(step_flops(name), n_params, result["peak"])
                result["rows"].append({**eager_vs_fast(name, device, steps, a.rounds, a.fast, tmp, floor),
                                       "floor": floor})
                figure = result["rows"][-1]
            elif kind == "versus_dataloader":
                figure = result[kind] = versus_dataloader(device, steps, a.rounds, tmp)
            elif kind == "quality":
                figure = result[kind] = quality(device, tmp=tmp)
            else:
                figure = result[kind] = quality_dcgan_style(device)
            result["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
            write(out, result)
            print(json.dumps(figure), flush=True)
    result["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    write(out, result)
    print("wrote", out)
    print(markdown(result))


if __name__ == "__main__":
    main()
