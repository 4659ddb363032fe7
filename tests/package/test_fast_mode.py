"""Fast mode (TrainConfig.fast, --fast): compiled G and D; on a GPU also replayed as CUDA graphs. On the
CPU it must train exactly what eager trains; the CUDA-graph path is checked for what it asks of torch."""
import types

import pytest
import torch

from gan_lessons import training

pytestmark = pytest.mark.slow


def _losses(tmp_path, fast, strategy):
    cfg = training.TrainConfig(epochs=1, limit=128, device="cpu", out=str(tmp_path / f"{strategy}_{fast}"),
                               strategy=strategy, fast=fast)
    trainer = training.Trainer(cfg.validate())
    steps = []
    trainer.run_epoch(on_step=lambda t, loss_D, loss_G: steps.append((loss_D.item(), loss_G.item())))
    return torch.tensor(steps), [p.detach().clone() for p in trainer.G.parameters()]


@pytest.mark.parametrize("strategy", ["d_first_reuse_fake", "one_forward"])
def test_fast_mode_trains_what_eager_trains_on_the_cpu(tmp_path, strategy):
    eager, g_eager = _losses(tmp_path, False, strategy)
    fast, g_fast = _losses(tmp_path, True, strategy)
    assert eager.shape == fast.shape == (2, 2)
    assert torch.allclose(eager, fast, atol=1e-4), (eager, fast)
    # Adam moves a weight by about lr a step whatever the gradient's size, so a near-zero gradient whose sign differs
    # by rounding moves it 2 lr the other way: weights agree to 2 lr a step, not to rounding
    bound = 2 * 2 * training.TrainConfig().lr_G
    assert max((a - b).abs().max().item() for a, b in zip(g_eager, g_fast)) <= bound * 1.01


def test_on_a_gpu_fast_mode_asks_for_cuda_graphs_and_marks_each_step(monkeypatch):
    modes, marks = [], []
    monkeypatch.setattr(torch, "compile", lambda module, mode=None: modes.append(mode) or module)
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    trainer = types.SimpleNamespace(device=torch.device("cuda"), G=torch.nn.Linear(1, 1), D=torch.nn.Linear(1, 1),
                                    step_fn=lambda *args: "stepped")
    step = training._compiled_step(trainer)
    assert modes == ["reduce-overhead", "reduce-overhead"]
    assert step(1, 2) == "stepped" and step() == "stepped" and len(marks) == 2
    trainer.device = torch.device("cpu")
    modes.clear()
    assert training._compiled_step(trainer) is trainer.step_fn and modes == [None, None]
