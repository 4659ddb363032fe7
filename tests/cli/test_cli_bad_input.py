"""Bad input to the command line, table-driven: each case runs the command against a copy of a finished run, and
must exit 2 with one line that says what to do, no traceback, and every file that existed before byte-for-byte
unchanged. The cases run the command's own entry point, `main(ARGS)` of `python -m gan_lessons`, in this process
(a subprocess would spend most of its time importing torch again); a sample of them, one per subcommand and one of
argparse's own errors, also runs as the real command in a subprocess, which must say the same line."""
import contextlib
import hashlib
import io
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import torch

from gan_lessons import data
from gan_lessons.__main__ import main

pytestmark = pytest.mark.slow

QUICK = ["--limit", "128", "--batch-size", "64", "--eval-samples", "0", "--no-progress", "--device", "cpu",
         "--data", data.DEFAULT_ROOT]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, cli):
    run = tmp_path_factory.mktemp("finished") / "run"
    result = cli("train", "--epochs", "1", "--out", str(run), *QUICK)
    assert result.returncode == 0, result.stderr
    (run / "eval.jsonl").write_text('{"epoch": 1}\n')         # as --eval-each leaves it
    return run


def snapshot(root: Path) -> dict:
    return {p.relative_to(root): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()}


# (name, arguments with RUN, CKPT and TMP placeholders, words the one line must contain)
CASES = [
    ("train over a finished run without --resume", ["train", "--out", "RUN", *QUICK], ["holds a run", "--resume", "--restart"]),
    ("a bad strategy on a run with --eval-each", ["train", "--out", "RUN", "--strategy", "nope", "--eval-each", "10", *QUICK], ["unknown strategy"]),
    ("--resume and --restart together", ["train", "--out", "RUN", "--resume", "--restart", *QUICK], ["choose one"]),
    ("--resume with nothing to resume", ["train", "--out", "TMP/empty", "--resume", *QUICK], ["no run to continue", "drop --resume"]),
    ("--out is a file", ["train", "--out", "RUN/metrics.json", *QUICK], ["is a file"]),
    ("--lr-g inf", ["train", "--out", "TMP/new", "--lr-g", "inf", *QUICK], ["--lr-g", "finite number above 0"]),
    ("--lr-d nan", ["train", "--out", "TMP/new", "--lr-d", "nan", *QUICK], ["--lr-d", "finite number above 0"]),
    ("--lr-g negative", ["train", "--out", "TMP/new", "--lr-g", "-0.001", *QUICK], ["--lr-g", "finite number above 0"]),
    ("--lr-d zero", ["train", "--out", "TMP/new", "--lr-d", "0", *QUICK], ["--lr-d", "finite number above 0"]),
    ("--lr-g not a number", ["train", "--out", "TMP/new", "--lr-g", "fast", *QUICK], ["--lr-g", "invalid float"]),
    ("--beta1 1", ["train", "--out", "TMP/new", "--beta1", "1", *QUICK], ["--beta1", "from 0 up to (not including) 1"]),
    ("--beta2 negative", ["train", "--out", "TMP/new", "--beta2", "-0.1", *QUICK], ["--beta2", "from 0 up to"]),
    ("--beta2 nan", ["train", "--out", "TMP/new", "--beta2", "nan", *QUICK], ["--beta2", "from 0 up to"]),
    ("--beta1 not a number", ["train", "--out", "TMP/new", "--beta1", "high", *QUICK], ["--beta1", "invalid float"]),
    ("--n-critic 0", ["train", "--out", "TMP/new", "--strategy", "wgan_gp", "--n-critic", "0", *QUICK],
     ["--n-critic", "must be positive"]),
    ("--n-critic not whole", ["train", "--out", "TMP/new", "--n-critic", "2.5", *QUICK], ["--n-critic", "not a whole number"]),
    ("--gp-weight negative", ["train", "--out", "TMP/new", "--strategy", "wgan_gp", "--gp-weight", "-1", *QUICK],
     ["--gp-weight", "0 or above"]),
    ("--gp-weight inf", ["train", "--out", "TMP/new", "--gp-weight", "inf", *QUICK], ["--gp-weight", "finite number"]),
    ("--fast with wgan_gp", ["train", "--out", "TMP/new", "--strategy", "wgan_gp", "--fast", *QUICK],
     ["--fast", "double backward", "drop --fast"]),
    ("--resume with another --n-critic", ["train", "--out", "RUN", "--resume", "--n-critic", "3", *QUICK],
     ["was trained with n_critic=5", "not 3"]),
    ("--time-limit 0", ["train", "--out", "TMP/new", "--time-limit", "0", *QUICK], ["--time-limit", "must be positive"]),
    ("--time-limit negative", ["train", "--out", "TMP/new", "--time-limit", "-60", *QUICK], ["--time-limit", "must be positive"]),
    ("--time-limit inf", ["train", "--out", "TMP/new", "--time-limit", "inf", *QUICK], ["--time-limit", "must be positive"]),
    ("--time-limit nan", ["train", "--out", "TMP/new", "--time-limit", "nan", *QUICK], ["--time-limit", "must be positive"]),
    ("--time-limit not a number", ["train", "--out", "TMP/new", "--time-limit", "1h", *QUICK],
     ["--time-limit", "not a number of seconds"]),
    ("--seed 2**70", ["train", "--out", "TMP/new", "--seed", str(2**70), *QUICK], ["--seed", "2**63"]),
    ("--seed negative", ["train", "--out", "TMP/new", "--seed", "-1", *QUICK], ["--seed", "from 0"]),
    ("--batch-size larger than the data", ["train", "--out", "TMP/new", "--limit", "100", "--batch-size", "500",
                                           "--eval-samples", "0", "--no-progress", "--device", "cpu", "--data", data.DEFAULT_ROOT],
     ["--batch-size", "--limit"]),
    ("--batch-size larger than all of MNIST", ["train", "--out", "TMP/new", "--batch-size", "70000", "--eval-samples", "0",
                                               "--no-progress", "--device", "cpu", "--data", data.DEFAULT_ROOT],
     ["--batch-size 70000", "larger than the 60000"]),
    ("--epochs 0", ["train", "--out", "TMP/new", "--epochs", "0", *QUICK], ["--epochs", "must be positive"]),
    ("--device mps", ["train", "--out", "TMP/new", *QUICK, "--device", "mps"], ["--device mps", "cpu or cuda"]),
    ("--device meta", ["train", "--out", "TMP/new", *QUICK, "--device", "meta"], ["--device meta", "cpu or cuda"]),
    ("an unknown subcommand", ["fly"], ["invalid choice", "--help"]),
    ("an unknown option", ["train", "--colour", "red"], ["unrecognized arguments", "--help"]),
    ("sample --out onto the run's checkpoint", ["sample", "CKPT", "--out", "RUN/last.pt"], ["would replace a file of a training run"]),
    ("sample --out onto the run's metrics", ["sample", "CKPT", "--out", "RUN/metrics.json"], ["must end in .npz or .pt"]),
    ("sample --out a .png", ["sample", "CKPT", "--out", "TMP/x.png"], ["must end in .npz or .pt"]),
    ("sample --out in a missing folder", ["sample", "CKPT", "--out", "TMP/missing/x.npz"], ["does not exist"]),
    ("sample --out a folder", ["sample", "CKPT", "--out", "RUN.npz"], ["is a folder"]),
    ("sample -n 0", ["sample", "CKPT", "-n", "0"], ["-n", "must be positive"]),
    ("sample --seed 2**70", ["sample", "CKPT", "--seed", str(2**70)], ["--seed", "2**63"]),
    ("sample of a missing checkpoint", ["sample", "TMP/none.pt", "--out", "TMP/x.npz"], ["no checkpoint"]),
    ("export --out onto the run's checkpoint", ["export", "RUN", "--out", "RUN/last.pt"], ["would replace a file of a training run"]),
    ("export whose .json record would replace the run's metrics", ["export", "RUN", "--out", "RUN/metrics.pt"],
     ["its .json record", "would replace a file of a training run"]),
    ("export --out in a missing folder", ["export", "RUN", "--out", "TMP/missing/g.pt"], ["does not exist"]),
    ("sample -n above the bound", ["sample", "CKPT", "-n", "2000000", "--out", "TMP/x.npz"], ["-n 2000000", "sample in parts"]),
    ("sample of a bare tensor", ["sample", "TMP/tensor.pt", "--out", "TMP/x.npz"], ["holds no generator"]),
    ("sample of a dict without G", ["sample", "TMP/dict.pt", "--out", "TMP/x.npz"], ["holds no generator"]),
    ("evaluate -n 1", ["evaluate", "CKPT", "-n", "1"], ["-n 1", "at least 2"]),
    ("evaluate of a run folder", ["evaluate", "RUN"], ["is a folder", "last.pt"]),
    ("evaluate of a PNG", ["evaluate", "RUN/grid_001.png"], ["not a readable checkpoint", "exported generator"]),
    ("evaluate of a missing checkpoint", ["evaluate", "TMP/none.pt"], ["no checkpoint"]),
    ("resume from an exported generator", ["train", "--out", "TMP/exported", "--resume", *QUICK], ["not a training checkpoint"]),
    ("export of a folder without a run", ["export", "TMP/empty", "--out", "TMP/g.pt"], ["holds no run"]),
    ("export of a run whose metrics.json is corrupt", ["export", "TMP/badrun", "--out", "TMP/g.pt"], ["not valid JSON"]),
    ("train --data is a file", ["train", "--out", "TMP/new", *QUICK[:-1], "RUN/metrics.json"], ["metrics.json"]),
    ("evaluate --seed 2**70", ["evaluate", "CKPT", "--seed", str(2**70)], ["--seed", "2**63"]),
    ("evaluate -n 0", ["evaluate", "CKPT", "-n", "0"], ["-n", "must be positive"]),
]


def in_process(*args) -> subprocess.CompletedProcess:
    """main(args), as `python -m gan_lessons ARGS` calls it, in this process: its exit status and what it wrote.
    argparse's errors exit through SystemExit; the SIGTERM handler main() installs is put back."""
    out, err = io.StringIO(), io.StringIO()
    handler = signal.getsignal(signal.SIGTERM)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit:
            code = exit.code
        finally:
            signal.signal(signal.SIGTERM, handler)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


# run as the real command too: one case of each subcommand, and one of argparse's own errors
IN_A_SUBPROCESS = ["train over a finished run without --resume", "--lr-g not a number", "sample -n 0",
                   "evaluate of a run folder", "export of a folder without a run", "an unknown subcommand"]


def fill(args, root: Path) -> list:
    return [a.replace("RUN", str(root / "run")).replace("CKPT", str(root / "run" / "last.pt"))
            .replace("TMP", str(root)) for a in args]


@pytest.fixture
def work(finished_run, tmp_path) -> Path:
    """A folder holding a copy of the finished run and the odd files the cases point at."""
    root = tmp_path / "work"
    shutil.copytree(finished_run, root / "run")
    (root / "run.npz").mkdir()
    (root / "empty").mkdir()
    torch.save(torch.zeros(3), root / "tensor.pt")
    torch.save({"x": 1}, root / "dict.pt")
    state = torch.load(root / "run" / "last.pt", weights_only=True)
    (root / "exported").mkdir()
    torch.save({"G": state["G"], "config": state["config"]}, root / "exported" / "last.pt")
    (root / "badrun").mkdir()
    shutil.copy(root / "run" / "last.pt", root / "badrun" / "last.pt")
    (root / "badrun" / "metrics.json").write_text("{broken")
    return root


@pytest.mark.parametrize("name, args, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_loses_nothing(name, args, words, work):
    before = snapshot(work)
    result = in_process(*fill(args, work))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stderr[-1500:])
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and all(w in lines[0] for w in words), lines[0]
    assert snapshot(work) == before, "a file that existed before was changed or removed"


@pytest.mark.parametrize("name", IN_A_SUBPROCESS)
def test_the_real_command_says_the_same_line_and_exits_alike(name, work, cli):
    args = fill(dict((c[0], c[1]) for c in CASES)[name], work)
    before = snapshot(work)
    real, here = cli(*args), in_process(*args)
    assert (real.returncode, real.stderr) == (here.returncode, here.stderr)
    assert real.returncode == 2 and "Traceback" not in real.stderr and len(real.stderr.strip().splitlines()) == 1
    assert snapshot(work) == before


def test_restart_replaces_the_run_and_stitches_no_old_grids(finished_run, tmp_path, cli):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    (run / "grid_007.png").write_bytes((run / "grid_001.png").read_bytes())      # a later grid of the old run
    result = cli("train", "--epochs", "1", "--out", str(run), "--restart", *QUICK)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in run.glob("grid_*.png")) == ["grid_001.png"] and not (run / "eval.jsonl").exists()


def test_readme_states_the_number_of_cases():
    training = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    assert f"runs {len(CASES)} such cases" in training
