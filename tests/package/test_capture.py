"""Fast mode on a GPU records the whole step as a CUDA graph (gan_lessons.capture). On the CPU the recording is
stood in for by capture.OnTheCPU, which runs the step where CUDA would replay it: the warm-up, the static batch and
noise, and the losses each replay returns are the GPU's code, and must give the eager run's losses step for step.
On a machine with CUDA, the real recording is compared too."""
import pytest
import torch

from gan_lessons import capture, data, strategies, training

STEPS = 50


def run(name, device="cpu", graphs=None, batch=16):
    """STEPS steps of the trainer's own step function on fixed batches: eager, or captured with `graphs`."""
    cfg = training.TrainConfig(strategy=name, device=device, batch_size=batch, limit=batch * STEPS, seed=0,
                               fast=graphs is not None and device == "cuda")
    trainer = training.Trainer(cfg)
    step = trainer.step_fn
    if graphs is not None and device != "cuda":
        step = capture.CapturedStep(strategies.get(name), cfg.z_dim, graphs=graphs)
    elif graphs is not None:
        assert isinstance(step, capture.CapturedStep)
    seen = []
    for i in range(STEPS):
        x_real = data.to_unit_range(trainer.images[i * batch:(i + 1) * batch])
        loss_D, loss_G = step(trainer.G, trainer.D, trainer.opt_G, trainer.opt_D, x_real, trainer.noise)
        seen.append(torch.stack([loss_D.detach(), loss_G.detach()]).cpu())
    return torch.stack(seen)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # the trainer's default output folder, runs/, lands here


@pytest.mark.parametrize("name", capture.CAPTURABLE)
def test_the_captured_step_gives_the_eager_losses_for_50_steps(name):
    eager, captured = run(name), run(name, graphs=capture.OnTheCPU())
    assert torch.allclose(eager, captured, rtol=1e-5, atol=1e-6), (eager - captured).abs().max()
    assert not torch.equal(captured[-1], captured[-2])              # each replay is a new step, not the last one again


def test_a_recorded_step_replays_without_running_python_again():
    """The recording is made once, after the warm-up; later calls replay it (OnTheCPU counts its replays)."""
    recorded = []

    class Counting(capture.OnTheCPU):
        def record(self, fn):
            recorded.append(fn)
            return super().record(fn)
    run("d_first_reuse_fake", graphs=Counting())
    assert len(recorded) == 1


def test_a_step_that_draws_other_noise_after_its_warm_up_is_refused_in_one_line():
    noise = capture.Noise(z_dim=4, sizes=[8])
    noise.refill(lambda n: torch.zeros(n, 4), torch.device("cpu"))
    with pytest.raises(RuntimeError, match="drew noise of size 6 where its warm-up drew 8"):
        noise.replayed(6)


def test_fast_mode_records_the_step_only_where_it_can():
    assert not training.Trainer(training.TrainConfig(fast=False, limit=128)).captured
    assert not training.Trainer(training.TrainConfig(fast=True, device="cpu", limit=128)).captured
    assert "wgan_gp" not in capture.CAPTURABLE and "retain_graph_seed003" not in capture.CAPTURABLE


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: the real recording")
@pytest.mark.parametrize("name", capture.CAPTURABLE)
def test_on_cuda_the_recorded_step_gives_the_eager_losses_for_50_steps(name):
    eager, captured = run(name, "cuda", batch=64), run(name, "cuda", graphs=capture.CUDAGraphs(), batch=64)
    assert torch.allclose(eager, captured, rtol=1e-3, atol=1e-4), (eager - captured).abs().max()
