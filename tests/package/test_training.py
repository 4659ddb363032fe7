"""Trainer and command line: one real epoch, exact resume after a killed process, and every bad input."""
import json
import signal
import time

import pytest
import torch

from gan_lessons import __main__ as cli_main
from gan_lessons import data, metrics, training
from gan_lessons.models import Generator
from gan_lessons.training import ConfigError, TrainConfig
from gan_lessons.wording import reword

pytestmark = pytest.mark.slow

DATA = data.DEFAULT_ROOT
QUICK = ["--limit", "640", "--batch-size", "64", "--eval-samples", "0", "--no-progress", "--device", "cpu",
         "--data", DATA]


def _weights(path):
    state = training.load_checkpoint(path)
    return {f"{net}.{k}": v for net in ("G", "D") for k, v in state[net].items()}


def _same_weights(a, b):
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, cli):
    out = tmp_path_factory.mktemp("full")
    result = cli("train", "--epochs", "3", "--out", str(out), "--eval-each", "200", *QUICK)   # the resumed runs
    assert result.returncode == 0, result.stderr                # below do not evaluate: same weights means the
    return out                                                  # evaluation does not disturb training


def test_train_writes_its_outputs(uninterrupted):
    for name in ("last.pt", "grid_001.png", "grid_003.png", "progress.gif", "losses.png", "metrics.json"):
        assert (uninterrupted / name).exists(), name
    assert len(training.load_checkpoint(uninterrupted / "last.pt")["history"]) == 3


def test_eval_each_epoch_is_recorded_and_kept_out_of_the_epoch_times(uninterrupted):
    lines = [json.loads(line) for line in (uninterrupted / "eval.jsonl").read_text().splitlines()]
    record = json.loads((uninterrupted / "metrics.json").read_text())
    assert [e["epoch"] for e in lines] == [1, 2, 3] and all(e["n"] == 200 for e in lines)
    assert record["eval_each_epoch"] == lines
    assert all(set(h) == {"epoch", "loss_D", "loss_G", "seconds"} for h in record["history"])
    assert all(0 <= e["mnist_fid"] and 1 <= e["classifier_score"] <= 10 for e in lines)


def test_tanh_option_is_recorded_and_restored(uninterrupted, tmp_path, cli):
    assert isinstance(Generator(tanh=True).net[-1], torch.nn.Tanh)
    assert not isinstance(Generator().net[-1], torch.nn.Tanh)          # seed 000's G, as written
    state = training.load_checkpoint(uninterrupted / "last.pt")
    assert state["config"]["tanh"] is True
    assert isinstance(training.load_generator(uninterrupted / "last.pt").net[-1], torch.nn.Tanh)
    shipped = metrics.ASSETS / "generator_no_tanh.pt"
    assert training.load_checkpoint(shipped)["config"]["tanh"] is False
    assert not isinstance(training.load_generator(shipped).net[-1], torch.nn.Tanh)
    del state["config"]["tanh"]                                        # a checkpoint from before the option
    training.save_checkpoint(tmp_path / "old.pt", state)
    assert not isinstance(training.load_generator(tmp_path / "old.pt").net[-1], torch.nn.Tanh)
    _one_line_error(cli("train", "--epochs", "4", "--resume", "--no-tanh", "--out", str(uninterrupted), *QUICK),
                    "was trained with tanh=True", "not False")


def _start(cli, out):
    return cli.start("train", "--epochs", "3", "--out", str(out), *QUICK)


def _wait_for_checkpoint(out, proc, timeout=120):
    deadline = time.time() + timeout
    while not (out / "last.pt").exists():
        assert proc.poll() is None and time.time() < deadline, "no checkpoint appeared"
        time.sleep(0.05)


def test_killed_run_resumes_to_the_same_weights(uninterrupted, tmp_path, cli):
    proc = _start(cli, tmp_path)
    _wait_for_checkpoint(tmp_path, proc)
    time.sleep(0.3)                          # somewhere inside epoch 2
    proc.kill()                              # SIGKILL: no chance to clean up
    proc.wait()
    assert training.load_checkpoint(tmp_path / "last.pt")["epoch"] < 3
    result = cli("train", "--epochs", "3", "--out", str(tmp_path), "--resume", *QUICK)
    assert result.returncode == 0, result.stderr
    assert _same_weights(tmp_path / "last.pt", uninterrupted / "last.pt")


def test_ctrl_c_writes_a_checkpoint_mid_epoch_and_resumes_exactly(uninterrupted, tmp_path, cli):
    proc = _start(cli, tmp_path)
    _wait_for_checkpoint(tmp_path, proc)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "continue with --resume" in stderr
    assert "Traceback" not in stderr
    result = cli("train", "--epochs", "3", "--out", str(tmp_path), "--resume", *QUICK)
    assert result.returncode == 0, result.stderr
    assert _same_weights(tmp_path / "last.pt", uninterrupted / "last.pt")


def _one_line_error(result, *words):
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    for word in words:
        assert word in last, last


def test_bad_inputs_get_one_clear_line(tmp_path, cli):
    _one_line_error(cli("train", "--strategy", "nope", "--out", str(tmp_path), *QUICK), "unknown strategy", "g_first")
    _one_line_error(cli("train", "--epochs", "0", *QUICK), "--epochs", "must be positive")
    _one_line_error(cli("train", "--batch-size", "-3", *QUICK), "--batch-size", "must be positive")
    if not torch.cuda.is_available():
        _one_line_error(cli("train", "--out", str(tmp_path), *QUICK[:-4], "--device", "cuda", "--data", DATA),
                        "no CUDA GPU", "--device cpu")
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    _one_line_error(cli("train", "--out", str(blocker / "run"), *QUICK), "cannot write to output folder", "--out")


def test_resume_refuses_other_settings(uninterrupted, cli):
    _one_line_error(cli("train", "--epochs", "4", "--resume", "--strategy", "g_first", "--out", str(uninterrupted),
                        *QUICK), "was trained with strategy='d_first_reuse_fake'", "not 'g_first'")


def test_corrupt_checkpoint_names_the_file(tmp_path, cli):
    bad = tmp_path / "last.pt"
    bad.write_bytes(b"not a checkpoint")
    _one_line_error(cli("train", "--resume", "--out", str(tmp_path), *QUICK), str(bad), "not a readable checkpoint", "without --resume")
    _one_line_error(cli("evaluate", str(bad)), str(bad), "corrupt")
    _one_line_error(cli("sample", str(tmp_path / "missing.pt")), "no checkpoint at")


def test_corrupt_and_missing_dataset(tmp_path, cli):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (raw / name).write_bytes(b"\x00\x00\x08")
    args = ["train", "--out", str(tmp_path / "run"), *QUICK[:-2], "--data"]
    _one_line_error(cli(*args, str(tmp_path)), "corrupt or truncated", "Delete")
    offline = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "PIP_NO_INDEX": "1",
               "PIP_FIND_LINKS": str(tmp_path)}
    _one_line_error(cli(*args, str(tmp_path / "empty"), env=offline), "Connect to the internet")


def test_sample_writes_uint8_images(uninterrupted, tmp_path, cli):
    result = cli("sample", str(uninterrupted / "last.pt"), "-n", "10", "--out", str(tmp_path / "s.pt"))
    assert result.returncode == 0, result.stderr
    images = torch.load(tmp_path / "s.pt", weights_only=True)
    assert images.shape == (10, 28, 28) and images.dtype == torch.uint8
    result = cli("sample", str(uninterrupted / "last.pt"), "-n", "10", "--out", str(tmp_path / "s.npz"))
    assert result.returncode == 0, result.stderr
    import numpy as np
    assert torch.equal(torch.from_numpy(np.load(tmp_path / "s.npz")["images"]), images)   # same images, either format
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.npz", "s.pt"]                # no temporary left behind


def test_config_checks_in_python():
    with pytest.raises(ConfigError, match="retain_graph_seed003"):
        TrainConfig(strategy="retain_graph_seed003").validate()
    with pytest.raises(ConfigError, match="limit"):
        TrainConfig(limit=10).validate()


def test_config_errors_name_the_field_and_the_command_line_says_the_flag(tmp_path):
    """A notebook user who built a TrainConfig never typed --lr-g: the error names lr_G; the command line rewords
    the same error in its flags."""
    with pytest.raises(ConfigError) as raised:
        TrainConfig(lr_G=float("inf")).validate()
    assert str(raised.value) == "lr_G must be a finite number above 0, got inf"
    assert reword(raised.value, cli_main.WORDS) == "--lr-g must be a finite number above 0, got inf"
    with pytest.raises(ConfigError) as raised:
        TrainConfig(limit=10).validate()
    assert str(raised.value) == "limit (10) must be at least batch_size (64)"
    with pytest.raises(ConfigError) as raised:
        training.train(TrainConfig(out=str(tmp_path)), resume=True)
    assert str(raised.value).startswith("resume=True: there is no run to continue") and "--" not in str(raised.value)
    assert reword(raised.value, cli_main.WORDS).startswith("--resume: there is no run to continue")


def test_export_ships_a_small_generator_with_its_metrics(uninterrupted, tmp_path, cli):
    out = tmp_path / "generator.pt"
    result = cli("export", str(uninterrupted), "--out", str(out), "-n", "500", "--data", DATA)
    assert result.returncode == 0, result.stderr
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["command"].startswith("python -m gan_lessons train --epochs 3")
    assert record["metrics"]["n"] == record["baseline"]["n"] == 500
    assert [e["epoch"] for e in record["eval_each_epoch"]] == [1, 2, 3]
    assert record["baseline"]["mnist_fid"] < record["metrics"]["mnist_fid"]
    assert out.stat().st_size < 4_000_000
    G = training.load_generator(out)
    full = training.load_checkpoint(uninterrupted / "last.pt")["G"]
    assert all(torch.allclose(G.state_dict()[k].float(), v.float(), rtol=1e-2, atol=1e-3) for k, v in full.items())


@pytest.mark.parametrize("local, order", [(0, ["fetch", "barrier"]), (1, ["barrier", "fetch"])])
def test_under_several_processes_the_first_on_a_machine_fetches_mnist_while_the_others_wait(monkeypatch, local,
                                                                                             order):
    from gan_lessons import distributed
    seen = []
    monkeypatch.setattr(training.distributed, "barrier", lambda: seen.append("barrier"))
    monkeypatch.setattr(training.data, "mnist_tensors", lambda root, train: (seen.append("fetch"), (1, 2))[1])
    assert training._mnist_once("root", distributed.Ranks(rank=local, world=2, local=local)) == 1
    assert seen == order


def test_a_failed_fetch_still_lets_the_waiting_processes_go_on(monkeypatch):
    from gan_lessons import distributed
    seen = []
    monkeypatch.setattr(training.distributed, "barrier", lambda: seen.append("barrier"))

    def offline(root, train):
        raise training.data.MNISTUnavailable("no route")
    monkeypatch.setattr(training.data, "mnist_tensors", offline)
    with pytest.raises(training.data.MNISTUnavailable):
        training._mnist_once("root", distributed.Ranks(rank=0, world=2, local=0))
    assert seen == ["barrier"]
