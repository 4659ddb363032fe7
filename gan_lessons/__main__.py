"""Command line: python -m gan_lessons {train, sample, evaluate, export, classifier} (lesson 06), and
python -m gan_lessons doctor SCRIPT (lesson 07). The commands; their parser is in gan_lessons/cli.py."""
import json
import signal
import sys
import time
from dataclasses import fields
from pathlib import Path

import torch

from gan_lessons import data, distributed, files, metrics, plots, training
from gan_lessons.cli import MAX_SAMPLES, WORDS, Parser, parser, speaking, split_doctor, words  # noqa: F401 (WORDS: tests)
from gan_lessons.doctor import script
from gan_lessons.i18n import _
from gan_lessons.wording import reword


def check_out(path: Path, flag="--out"):
    """Refuse an output path before any work: a missing folder, a folder, or a run's own file."""
    if not path.parent.is_dir():
        raise training.ConfigError(_("{flag} {path}: the folder {folder} does not exist; create it or choose another "
                                     "{flag}").format(flag=flag, path=path, folder=path.parent))
    if path.is_dir():
        raise training.ConfigError(_("{flag} {path} is a folder; give a file name").format(flag=flag, path=path))
    if path.exists() and files.is_run_file(path):
        raise training.ConfigError(_("{flag} {path} would replace a file of a training run; choose another {flag}")
                                   .format(flag=flag, path=path))


def write_text(path: Path, text: str):
    files.atomic_write(path, lambda tmp: tmp.write_text(text))


def _terminate(signum, frame):
    raise KeyboardInterrupt     # SIGTERM ends a command the way Ctrl-C does: cleanly, with nothing half-written


def _check_out(a, out):
    """The run's folder and --resume / --restart agree, or a ConfigError says what to change."""
    if a.resume and a.restart:
        raise training.ConfigError(_("--resume continues a run and --restart starts it over: choose one"))
    if out.exists() and not out.is_dir():
        raise training.ConfigError(_("--out {out} is a file; give a folder for the run").format(out=out))
    if (out / "last.pt").exists() and not (a.resume or a.restart):
        raise training.ConfigError(_("--out {out} holds a run (last.pt): continue it with --resume, start over with "
                                     "--restart (replaces its files), or choose another --out").format(out=out))


def _clear_run(out):
    """--restart: the files of the run in `out` go, before the new run writes its own."""
    for old in [*out.glob("grid_*.png"), *(out / name for name in files.RUN_FILES)]:
        old.unlink(missing_ok=True)


def _progress_bar(cfg):
    from tqdm.auto import tqdm
    return tqdm(total=cfg.epochs, unit=_("epoch"), dynamic_ncols=True)


def cmd_train(a):
    cfg = training.TrainConfig(**{f.name: getattr(a, f.name) for f in fields(training.TrainConfig) if f.metadata})
    out, clock = Path(cfg.out), {"epoch": time.perf_counter(), "eval": 0.0, "longest": 0.0}
    main = (ranks := distributed.ranks()) is None or ranks.main    # under torchrun, rank 0 alone writes and prints
    cfg.validate()                                   # every setting checked before any file is touched
    if ranks is not None:
        training.check_ranks(cfg, ranks)
    _check_out(a, out)
    if a.restart and main:
        _clear_run(out)
    classifier = metrics.load_classifier() if a.eval_each > 0 and main else None
    if a.eval_each > 0 and not a.resume and main:
        (out / "eval.jsonl").unlink(missing_ok=True)
    bar = _progress_bar(cfg) if not a.no_progress and main else None

    def on_step(trainer, loss_D, loss_G):
        if bar is not None and trainer.batch % 50 == 0:    # .item() syncs: only every 50 steps
            rate = trainer.batch * cfg.batch_size / (time.perf_counter() - clock["epoch"])
            bar.set_postfix(loss_D=f"{loss_D.item():.3f}", loss_G=f"{loss_G.item():.3f}", img_s=f"{rate:.0f}")

    def on_epoch(trainer):
        if main:
            plots.save_grid(trainer.sample(), out / f"grid_{trainer.epoch:03d}.png")
        if a.eval_each > 0 and main:
            t0 = time.perf_counter()
            m = metrics.evaluate(training.generate(trainer.G, a.eval_each, seed=a.seed), cfg.data, classifier)
            with open(out / "eval.jsonl", "a") as f:
                f.write(json.dumps({"epoch": trainer.epoch, **m}) + "\n")
            clock["eval"] += time.perf_counter() - t0
        now = time.perf_counter()
        clock["longest"], clock["epoch"] = max(clock["longest"], now - clock["epoch"]), now
        if bar is not None:
            bar.update(1)
        # the time limit: stop here if one more epoch, as slow as the slowest so far, would end past it
        if a.time_limit is not None and trainer.epoch < cfg.epochs and \
                now - started + clock["longest"] > a.time_limit:
            clock["stopped"] = {"after_epoch": trainer.epoch, "of": cfg.epochs, "time_limit_s": a.time_limit}
            return True

    started = time.perf_counter()
    try:
        trainer = training.train(cfg, resume=a.resume, on_step=on_step, on_epoch=on_epoch)
    finally:
        if bar is not None:
            bar.close()
    if not main:
        distributed.stop()
        return
    if "stopped" in clock:
        print(_("stopped after epoch {epoch} of {epochs}: one more would end past --time-limit {limit:g} s; "
                "continue with --resume").format(epoch=trainer.epoch, epochs=cfg.epochs, limit=a.time_limit))
    try:
        finish_run(a, cfg, trainer, out, time.perf_counter() - started - clock["eval"], clock.get("stopped"))
        distributed.stop()
    except KeyboardInterrupt:
        raise training.Interrupted(_("interrupted after training, before metrics.json was written; {out}/last.pt "
                                     "holds the whole run: run the same command with --resume to finish").format(
                                         out=out)) from None


def finish_run(a, cfg, trainer, out, train_seconds, stopped=None):
    """After the last epoch (or the one the time limit stopped at, `stopped`): the GIF, the loss plot, the final
    evaluation and metrics.json (written last)."""
    plots.save_gif(sorted(out.glob("grid_*.png")), out / "progress.gif")
    plots.save_losses(trainer.history, out / "losses.png")
    epoch_seconds = sum(h["seconds"] for h in trainer.history)
    images = len(trainer.history) * trainer.steps_per_epoch * cfg.batch_size
    launcher = f"torchrun --nproc_per_node={trainer.ranks.world} -m" if trainer.ranks else "python -m"
    record = {"command": f"{launcher} gan_lessons " + " ".join(sys.argv[1:]),
              "config": trainer.state()["config"], "device": str(trainer.device), "torch": torch.__version__,
              **({"gpu": torch.cuda.get_device_name(trainer.device)} if trainer.device.type == "cuda" else {}),
              **({"processes": trainer.ranks.world, "batch_per_process": cfg.batch_size // trainer.ranks.world}
                 if trainer.ranks else {}),
              "history": trainer.history, "train_seconds_this_run": round(train_seconds, 2),
              "images_per_second": round(images / epoch_seconds, 1)}
    if stopped:
        record["stopped_at_time_limit"] = stopped
    if (out / "eval.jsonl").exists() and a.eval_each > 0:
        by_epoch = {e["epoch"]: e for e in map(json.loads, (out / "eval.jsonl").read_text().splitlines())}
        record["eval_each_epoch"] = [by_epoch[k] for k in sorted(by_epoch)]
    if a.eval_samples > 0:
        t0 = time.perf_counter()
        record["metrics"] = metrics.evaluate(training.generate(trainer.G, a.eval_samples, seed=a.seed), cfg.data)
        record["eval_seconds"] = round(time.perf_counter() - t0, 2)
    write_text(out / "metrics.json", json.dumps(record, indent=2) + "\n")
    print(_("wrote {out}/last.pt, grids, progress.gif, losses.png, metrics.json").format(out=out))


def cmd_sample(a):
    out = Path(a.out)
    if out.suffix not in (".npz", ".pt"):
        raise training.ConfigError(_("--out must end in .npz or .pt, got {name}").format(name=out.name))
    check_out(out)
    if a.n > MAX_SAMPLES:
        raise training.ConfigError(_("-n {n} is more than {most:,} images (784 bytes each); sample in parts").format(
            n=a.n, most=MAX_SAMPLES))
    images = training.generate(training.load_generator(a.checkpoint), a.n, seed=a.seed)
    as_bytes = ((images + 1) * 127.5).round().clamp(0, 255).to(torch.uint8).squeeze(1)
    if out.suffix == ".pt":
        files.atomic_write(out, lambda tmp: torch.save(as_bytes, tmp))
    else:
        import numpy as np
        def save_npz(tmp):
            with open(tmp, "wb") as f:              # a file object: given a path, numpy would append ".npz"
                np.savez_compressed(f, images=as_bytes.numpy())
        files.atomic_write(out, save_npz)
    print(_("wrote {n} images (uint8, 28x28) to {out}").format(n=a.n, out=out))


def cmd_evaluate(a):
    if a.n < 2:
        raise training.ConfigError(_("-n {n}: MNIST-FID needs at least 2 samples (2000 or more for a stable "
                                     "figure)").format(n=a.n))
    result = metrics.evaluate(training.generate(training.load_generator(a.checkpoint), a.n, seed=a.seed), a.data)
    print(json.dumps({"checkpoint": a.checkpoint, **result, "real_train_baseline": metrics.baseline(a.data, a.n)},
                     indent=2))


def cmd_export(a):
    run, out = Path(a.run), Path(a.out)
    check_out(out)
    check_out(out.with_suffix(".json"), flag=_("--out (its .json record)"))
    if not (run / "last.pt").is_file():
        raise training.ConfigError(_("{run} holds no run (no last.pt): give a folder written by train").format(
            run=run))
    try:
        trained = json.loads((run / "metrics.json").read_text()) if (run / "metrics.json").exists() else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise training.ConfigError(_("{path} is not valid JSON; restore it, or delete it to export without the "
                                     "run's record").format(path=run / "metrics.json")) from None
    training.export_generator(run / "last.pt", out)
    G = training.load_generator(out)
    record = {"command": trained.get("command"), "device": trained.get("device"), "torch": trained.get("torch"),
              **({"gpu": trained["gpu"]} if "gpu" in trained else {}),
              "config": files.load_checkpoint(out)["config"], "history": trained.get("history"),
              "images_per_second": trained.get("images_per_second"),
              "eval_each_epoch": trained.get("eval_each_epoch"),
              **({"stopped_at_time_limit": trained["stopped_at_time_limit"]} if "stopped_at_time_limit" in trained
                 else {}),
              "metrics": metrics.evaluate(training.generate(G, a.n), a.data), "baseline": metrics.baseline(a.data, a.n)}
    write_text(out.with_suffix(".json"), json.dumps(record, indent=2) + "\n")
    print(_("wrote {out} and {record}").format(out=out, record=out.with_suffix(".json")))


def cmd_classifier(a):
    _net, record = metrics.train_classifier(a.data, epochs=a.epochs)
    print(json.dumps(record, indent=2))


def cmd_doctor(a, script_args):
    if (a.script is None) == (a.module is None):
        Parser(prog="python -m gan_lessons doctor").error(_("give a SCRIPT to run, or -m MODULE"))
    sys.excepthook = script.end_quietly(sys.excepthook)
    try:
        return script.run(a.module or a.script, script_args, module=a.module is not None, strict=a.strict)
    except script.NotRunnable as error:
        print(_("error: {message}").format(message=error), file=sys.stderr)
        return script.EXIT_BAD_INPUT


def main(argv=None):
    argv, script_args = split_doctor(sys.argv[1:] if argv is None else list(argv))
    with speaking():                     # argparse's own words (usage, errors) in the language in use
        args = parser().parse_args(argv)
    if args.command == "doctor":         # before the SIGTERM handler: the script keeps Python's signal handling
        return cmd_doctor(args, script_args)
    command = {"train": cmd_train, "sample": cmd_sample, "evaluate": cmd_evaluate, "export": cmd_export,
               "classifier": cmd_classifier}
    signal.signal(signal.SIGTERM, _terminate)
    try:
        data_root = Path(getattr(args, "data", None) or ".")
        if data_root.exists() and not data_root.is_dir():
            raise training.ConfigError(_("--data {path} is a file; give the folder MNIST is (or will be) kept in")
                                       .format(path=data_root))
        command[args.command](args)
    except training.Interrupted as stop:
        print(_("stopped: {message}").format(message=reword(stop, words())), file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print(_("stopped: {command} interrupted; nothing was written").format(command=args.command), file=sys.stderr)
        return 130
    except (training.NonFinite, training.PeerLost) as error:
        if isinstance(error, training.PeerLost):     # torchrun now stops this process too: it has nothing left to do
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(_("error: {message}").format(message=reword(error, words())), file=sys.stderr)
        return 1
    except (training.ConfigError, files.CheckpointError, data.MNISTUnavailable) as error:
        if (ranks := distributed.ranks()) is None or ranks.main:     # under torchrun, every process meets it: said once
            print(_("error: {message}").format(message=reword(error, words())), file=sys.stderr)
        return 2
    return 0


def run():
    """The `gan-lessons` command (pyproject's [project.scripts]): main()'s exit status as the process's."""
    sys.exit(main())


if __name__ == "__main__":
    run()
