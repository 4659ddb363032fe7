"""tools/gpu.py, the GPU run's preparation: what can be checked without a GPU or a network. The whole
path, carry folder to the three parts, runs in `make gpu-smoke`, which `make test` calls after pytest."""
import subprocess
import sys
from pathlib import Path

import graphviz
import pytest

from gan_lessons import graphs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gpu  # noqa: E402


def test_a_missing_carry_folder_is_one_line_that_says_what_to_do(tmp_path):
    with pytest.raises(SystemExit) as caught:
        gpu.prepare(tmp_path / "nowhere", tmp_path)
    message = str(caught.value)
    assert "no carry folder" in message and "make gpu-carry" in message and "\n" not in message


def test_an_unknown_part_is_refused_by_make():
    done = subprocess.run(["make", "-s", "gpu-run", "PART=trian"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "make gpu-run PART=train (or bench, or notebooks)" in done.stdout


def test_the_smoke_environment_sees_what_the_gpu_machine_has_and_what_that_needs():
    have = gpu._closure(gpu.GPU_HAS)
    assert {"torch", "torchvision", "numpy", "pytest", "matplotlib", "tqdm"} <= set(have)
    assert "sympy" in have and "pillow" in have                       # torch's and matplotlib's own needs
    assert not {"nbval", "ipykernel", "torchviz", "jupyter-client"} & set(have)


def test_a_dot_without_a_png_renderer_still_draws_svg(monkeypatch):
    import torch
    x = torch.ones(2, requires_grad=True)
    graph = graphs.draw({"y": (x * 2).sum()})
    real_pipe = graphviz.Digraph.pipe

    def pipe(self, format=None, **kw):
        if format == "png":
            raise graphviz.CalledProcessError(1, ["dot", "-Tpng"], stderr=b'Format: "png" not recognized.')
        return real_pipe(self, format=format, **kw)
    monkeypatch.setattr(graphviz.Digraph, "pipe", pipe)
    bundle = graph._repr_mimebundle_()
    assert "image/svg+xml" in bundle and "text/plain" in bundle and "image/png" not in bundle


def test_make_test_runs_the_smoke():
    recipe = (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "gpu-smoke" in recipe
