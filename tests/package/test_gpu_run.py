"""tools/gpu.py, the GPU run's preparation: what can be checked without a GPU or a network. The whole
path, carry folder to the three parts, runs in `make gpu-smoke`, which `make test-rest` calls after pytest; here, the
deadline of `run all` with a budget too small for its parts, and the limits on what comes back."""
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import graphviz
import pytest

from gan_lessons import graphs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gpu  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.extended]


def test_a_missing_carry_folder_is_one_line_that_says_what_to_do(tmp_path):
    with pytest.raises(SystemExit) as caught:
        gpu.prepare(tmp_path / "nowhere", tmp_path)
    message = str(caught.value)
    assert "no carry folder" in message and "make gpu-carry" in message and "\n" not in message


def test_an_unknown_part_is_refused_by_make():
    done = subprocess.run(["make", "-s", "gpu-run", "PART=trian"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "make gpu-run PART=all (or train, bench, notebooks)" in done.stdout


def test_the_smoke_environment_sees_what_the_gpu_machine_has_and_what_that_needs():
    have = gpu._closure(gpu.GPU_HAS)
    assert {"torch", "torchvision", "numpy", "pytest", "matplotlib", "tqdm"} <= set(have)
    assert "sympy" in have and "pillow" in have                       # torch's and matplotlib's own needs
    assert not {"nbval", "ipykernel", "torchviz", "jupyter-client"} & set(have)


@pytest.mark.parametrize("failure", ["exit status", "broken pipe"])
def test_a_dot_without_a_png_renderer_still_draws_svg(monkeypatch, failure):
    import torch
    x = torch.ones(2, requires_grad=True)
    graph = graphs.draw({"y": (x * 2).sum()})
    real_pipe = graphviz.Digraph.pipe

    def pipe(self, format=None, **kw):
        if format == "png" and failure == "broken pipe":     # it exited before the graph was written to it
            raise BrokenPipeError(32, "Broken pipe")
        if format == "png":
            raise graphviz.CalledProcessError(1, ["dot", "-Tpng"], stderr=b'Format: "png" not recognized.')
        return real_pipe(self, format=format, **kw)
    monkeypatch.setattr(graphviz.Digraph, "pipe", pipe)
    bundle = graph._repr_mimebundle_()
    assert "image/svg+xml" in bundle and "text/plain" in bundle and "image/png" not in bundle


def test_make_test_rest_runs_the_smoke_after_its_tests():
    recipe = (ROOT / "Makefile").read_text().split("\ntest-rest:", 1)[1].split("\n\n", 1)[0]
    assert recipe.index("-m pytest") < recipe.index("gpu-smoke")


def test_what_breaks_the_folder_limits_is_packed_into_one_archive(tmp_path):
    for name in gpu.KEEP + ["log.txt", "bench.tmp", "extra.txt"]:
        (tmp_path / name).write_text(name)
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "deep.txt").write_text("deep")
    notes = gpu.within_limits(tmp_path)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == sorted(gpu.KEEP + ["more.tar.gz"]) and len(left) <= gpu.MAX_FILES
    with tarfile.open(tmp_path / "more.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["a/b/c/deep.txt", "bench.tmp", "extra.txt", "log.txt"]
    assert notes == ["4 files packed into more.tar.gz"] and not (tmp_path / "a").exists()


def test_a_file_too_large_for_the_folder_is_named_and_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu, "MAX_BYTES", 100)
    (tmp_path / "summary.txt").write_text("short")
    (tmp_path / "generator.pt").write_bytes(b"x" * 200)
    assert gpu.within_limits(tmp_path) == ["generator.pt left out: 0.0 MiB"]
    assert [p.name for p in tmp_path.iterdir()] == ["summary.txt"]


def test_run_all_keeps_its_budget_and_returns_the_parts_it_finished(tmp_path):
    """A budget too small for the three parts, tiny, on this CPU: training finishes and is in the results, what did
    not fit is stopped or not started, the call ends on time with one summary line, and within the file limits."""
    carry = tmp_path / "carry"
    (carry / "wheels").mkdir(parents=True)            # this environment already has the stack: nothing to install
    gpu.carry_mnist(carry)
    (carry / "carry.json").write_text("{}")
    results, budget = tmp_path / "results", 40      # the train part fits (12 s idle); the three parts need ~70 s
    t0 = time.time()
    done = subprocess.run([sys.executable, ROOT / "tools" / "gpu.py", "run", "all", "--smoke", "--budget", str(budget),
                           "--carry", carry, "--results", results], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=budget + 120)
    took = time.time() - t0
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert took < budget + 10, f"{took:.0f} s for a budget of {budget} s"
    lines = (results / "summary.txt").read_text().splitlines()
    assert lines[-1].startswith("gpu-run all (smoke): done in") and done.stdout.strip().splitlines()[-1] == lines[-1]
    assert sum(line.startswith("gpu-run all (smoke): done") for line in lines) == 1
    parts = {line.split(":")[0]: line for line in lines[1:-1]}
    assert set(parts) == {"train", "bench", "notebooks"}, lines
    assert parts["train"].startswith("train: 1 epochs, MNIST-FID")          # the first part fits and is complete
    assert (results / "generator.pt").exists() and (results / "train_metrics.json").exists()
    assert json.loads((results / "generator.json").read_text())["metrics"]["n"] == 200
    unfinished = " ".join(parts[p] for p in ("bench", "notebooks"))
    assert "stopped at the deadline" in unfinished or "not started" in unfinished, lines
    if (results / "notebooks.json").exists():                              # rewritten after each lesson
        assert all(r["outcome"] in ("done", "stopped at the deadline", "not started (deadline)")
                   for r in json.loads((results / "notebooks.json").read_text()))
    files = [p for p in results.rglob("*") if p.is_file()]
    assert len(files) <= gpu.MAX_FILES and all(len(p.relative_to(results).parts) <= 3 for p in files)
