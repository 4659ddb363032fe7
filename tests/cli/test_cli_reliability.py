"""What a run survives: a Ctrl-C or SIGTERM during the last checkpoint and during the final evaluation, a run that
goes non-finite, a full disk during a checkpoint write, and MNIST files changed after they were first read. Each
signal is a real one, sent by the process to itself at the named moment."""
import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from gan_lessons import __main__ as cli_main
from gan_lessons import data, training

pytestmark = pytest.mark.slow

DATA = data.DEFAULT_ROOT
QUICK = ["--limit", "256", "--batch-size", "64", "--no-progress", "--device", "cpu", "--data", DATA]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def cli_with_signal(at, sig, *args):
    """The real command line, with `sig` sent to itself when `at` happens: "final checkpoint" (while the last
    epoch's last.pt is being written) or "final evaluation" (the metrics after training). The signal goes to the main
    thread itself (signal.raise_signal), as a terminal's Ctrl-C reaches a process whose other threads are busy in
    torch: os.kill to the whole process may land on any of torch's threads first."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        from gan_lessons import __main__ as cli, metrics, training
        save, evaluate = training.save_checkpoint, metrics.evaluate
        def save_and_signal(path, state):
            if state["epoch"] == {{epochs}} and state["batch"] == 0:
                signal.raise_signal({int(sig)})
            save(path, state)
        def evaluate_and_signal(*a, **k):
            signal.raise_signal({int(sig)})
            return evaluate(*a, **k)
        if {at!r} == "final checkpoint":
            training.save_checkpoint = save_and_signal
        else:
            metrics.evaluate = evaluate_and_signal
        sys.exit(cli.main(sys.argv[1:]))
    """).replace("{epochs}", args[args.index("--epochs") + 1])
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=ENV,
                          timeout=300)


def weights(path):
    state = training.load_checkpoint(path)
    return {f"{net}.{k}": v for net in ("G", "D") for k, v in state[net].items()}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, cli):
    out = tmp_path_factory.mktemp("full") / "run"
    result = cli("train", "--epochs", "2", "--out", str(out), "--eval-samples", "200", *QUICK)
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("at", ["final checkpoint", "final evaluation"])
def test_a_signal_at_the_end_stops_the_run_and_resume_finishes_it_exactly(at, sig, uninterrupted, tmp_path, cli):
    out = tmp_path / "run"
    args = ["train", "--epochs", "2", "--out", str(out), "--eval-samples", "200", *QUICK]
    stopped = cli_with_signal(at, sig, *args)
    lines = stopped.stderr.strip().splitlines()
    assert stopped.returncode == 130, stopped.stderr[-1500:]
    assert "Traceback" not in stopped.stderr and len(lines) == 1 and "--resume" in lines[0], stopped.stderr
    assert training.load_checkpoint(out / "last.pt")["epoch"] == 2       # the checkpoint was completed
    assert not (out / "metrics.json").exists()                          # the run is not reported as finished
    assert not list(out.glob(".*.tmp"))                                 # and nothing is left half-written
    resumed = cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    a, b = weights(out / "last.pt"), weights(uninterrupted / "last.pt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    finished = json.loads((out / "metrics.json").read_text())
    assert finished["metrics"] == json.loads((uninterrupted / "metrics.json").read_text())["metrics"]


def test_a_time_limit_stops_at_an_epoch_boundary_and_resume_finishes_the_same_run(uninterrupted, tmp_path, cli):
    out = tmp_path / "run"
    args = ["train", "--epochs", "2", "--out", str(out), "--eval-samples", "200", *QUICK]
    stopped = cli(*args, "--time-limit", "0.001")     # any epoch passes it: the run stops after the first
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped after epoch 1 of 2" in stopped.stdout and "--resume" in stopped.stdout
    record = json.loads((out / "metrics.json").read_text())
    assert record["stopped_at_time_limit"] == {"after_epoch": 1, "of": 2, "time_limit_s": 0.001}
    assert len(record["history"]) == 1 and training.load_checkpoint(out / "last.pt")["epoch"] == 1
    exported = cli("export", str(out), "--out", str(tmp_path / "g.pt"), "-n", "200", "--data", DATA)
    assert exported.returncode == 0, exported.stderr
    assert json.loads((tmp_path / "g.json").read_text())["stopped_at_time_limit"]["after_epoch"] == 1
    resumed = cli(*args, "--resume", "--time-limit", "3600")
    assert resumed.returncode == 0 and "stopped after" not in resumed.stdout, resumed.stderr
    a, b = weights(out / "last.pt"), weights(uninterrupted / "last.pt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    finished = json.loads((out / "metrics.json").read_text())
    assert "stopped_at_time_limit" not in finished and len(finished["history"]) == 2


def test_a_run_that_goes_non_finite_stops_and_keeps_the_epoch_before(tmp_path):
    kept = {}

    def on_epoch(trainer):
        kept["bytes"] = (tmp_path / "last.pt").read_bytes()

    def poison(trainer, loss_D, loss_G):                    # epoch 2, batch 2: D's last weight becomes NaN
        if trainer.epoch == 1 and trainer.batch == 2:
            with torch.no_grad():
                trainer.D.net[-2].weight[0, 0] = float("nan")

    cfg = training.TrainConfig(epochs=3, limit=256, device="cpu", out=str(tmp_path), data=DATA)
    with pytest.raises(training.NonFinite, match="epoch 2; .*last.pt still holds epoch 1.*lower --lr-g/--lr-d"):
        training.train(cfg, on_step=poison, on_epoch=on_epoch)
    assert (tmp_path / "last.pt").read_bytes() == kept["bytes"]
    assert training.load_checkpoint(tmp_path / "last.pt")["epoch"] == 1


def test_non_finite_learning_is_one_line_and_writes_no_checkpoint(tmp_path, cli):
    result = cli("train", "--epochs", "2", "--out", str(tmp_path / "run"), "--lr-d", "1e10", "--lr-g", "1e10",
                 "--eval-samples", "0", *QUICK)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "went non-finite" in lines[0] and "in epoch 1; no checkpoint was written" in lines[0], lines[0]
    assert not (tmp_path / "run" / "last.pt").exists()


def test_a_full_disk_during_a_checkpoint_is_one_line_and_keeps_the_old_one(uninterrupted, tmp_path, monkeypatch,
                                                                             capsys):
    out = tmp_path / "run"
    shutil.copytree(uninterrupted, out)
    before = (out / "last.pt").read_bytes()
    real_save = torch.save

    def full_disk(obj, f, *a, **k):                        # half the bytes reach the disk, then it is full
        real_save(obj, f, *a, **k)
        Path(f).write_bytes(Path(f).read_bytes()[: len(before) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full_disk)
    code = cli_main.main(["train", "--epochs", "3", "--out", str(out), "--resume", "--eval-samples", "0", *QUICK])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert "No space left on device" in lines[0] and "the old last.pt is unchanged" in lines[0], lines[0]
    assert (out / "last.pt").read_bytes() == before and not list(out.glob(".*.tmp"))


def test_mnist_changed_after_the_first_read_is_caught(tmp_path, cli):
    raw = tmp_path / "MNIST" / "raw"
    shutil.copytree(Path(DATA) / "MNIST" / "raw", raw)
    data.load_mnist(tmp_path)                               # the first read writes the record
    assert set(json.loads((raw / data.RECORD).read_text())) == {n for pair in data.IDX.values() for n in pair}
    images = raw / "train-images-idx3-ubyte"
    body = bytearray(images.read_bytes())
    body[16 + 28 * 14 + 14] ^= 0xFF                         # one pixel of the first digit; the header is intact
    images.write_bytes(bytes(body))
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in raw.iterdir()}
    result = cli("train", "--epochs", "1", "--out", str(tmp_path / "run"), *QUICK[:-1], str(tmp_path))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "train-images-idx3-ubyte" in lines[0] and "changed since it was first read" in lines[0], lines[0]
    assert f"delete the folder {raw}" in lines[0]
    assert before == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in raw.iterdir()}
    assert not (tmp_path / "run").exists()
