"""GAN update strategies: counted passes, equivalent gradients, the seed-003 failure, bad names."""
import pytest
import torch

from gan_lessons import costs, strategies
from gan_lessons.exercises import recorded_steps
from gan_lessons.models import Discriminator, Generator


def _setup(seed=0):
    torch.manual_seed(seed)
    G, D = Generator(), Discriminator()
    x_real = torch.rand(16, 1, 28, 28) * 2 - 1
    gen = torch.Generator().manual_seed(seed + 1)
    return G, D, x_real, (lambda n: torch.randn(n, G.z_dim, generator=gen))


@pytest.fixture(scope="module")
def measured():
    out = {}
    for name in strategies.STRATEGIES:
        G, D, x_real, noise = _setup()
        out[name] = costs.measure(name, G, D, x_real, noise, steps=2, warmup=1)
    return out


@pytest.mark.parametrize("name", ["d_first_reuse_fake", "g_first"])
def test_reuse_strategies_run_G_once_and_D_three_times(measured, name):
    c = measured[name]
    assert (c.G_forward, c.G_backward, c.D_forward, c.D_backward) == (1, 1, 3, 3)
    assert (c.G_grad_passes, c.D_grad_passes) == (1, 2)      # D's grads are computed twice, once wasted


def test_fresh_fake_adds_a_second_G_forward(measured):
    c = measured["d_first_fresh_fake"]
    assert (c.G_forward, c.G_backward, c.D_forward, c.D_backward) == (2, 1, 3, 3)


def test_one_forward_runs_D_forward_twice_and_wastes_no_gradient(measured):
    c = measured["one_forward"]
    assert (c.G_forward, c.D_forward) == (1, 2)
    assert (c.G_grad_passes, c.D_grad_passes) == (1, 1)


@pytest.mark.parametrize("name, parent", [("d_first_frozen_D", "d_first_reuse_fake"), ("g_first_inputs", "g_first")])
def test_freezing_D_or_backward_inputs_removes_the_wasted_D_gradient(measured, name, parent):
    c, p = measured[name], measured[parent]
    assert (c.G_forward, c.G_backward, c.D_forward, c.D_backward) == (p.G_forward, p.G_backward, p.D_forward,
                                                                      p.D_backward)
    assert (c.G_grad_passes, c.D_grad_passes) == (1, 1) != (p.G_grad_passes, p.D_grad_passes)


def test_seed003_strategy_1_raises_the_version_error(measured):
    c = measured["retain_graph_seed003"]
    assert "modified by an inplace operation" in c.error and "[512, 1]" in c.error


def test_every_other_strategy_measures_time_and_memory(measured):
    for name, c in measured.items():
        if name != "retain_graph_seed003":
            assert c.error is None and c.ms_per_step > 0 and c.peak_mib > 0


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown strategy 'd_first'.*one_forward.*g_first"):
        strategies.get("d_first")


def _step_grads(name):
    """The gradients each optimizer steps on, for one step from identical weights and noise."""
    G, D, x_real, noise = _setup()
    opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
    names = {p: n for net in (G, D) for n, p in net.named_parameters()}
    with recorded_steps({"G": opt_G, "D": opt_D}, names) as records:
        strategies.get(name)(G, D, opt_G, opt_D, x_real, noise)
    return {key: list(steps[-1].values()) for key, steps in records.items()}


def _same(a, b):
    return all(torch.allclose(x, y, rtol=1e-5, atol=1e-7) for x, y in zip(a, b))


def test_D_steps_on_the_same_gradients_in_strategies_2_to_7():
    reference = _step_grads("d_first_reuse_fake")["D"]
    for name in ("one_forward", "g_first", "d_first_fresh_fake", "d_first_frozen_D", "g_first_inputs"):
        assert _same(_step_grads(name)["D"], reference), name


@pytest.mark.parametrize("name, parent", [("d_first_frozen_D", "d_first_reuse_fake"), ("g_first_inputs", "g_first")])
def test_the_variants_give_G_the_same_gradient_as_their_parent(name, parent):
    assert _same(_step_grads(name)["G"], _step_grads(parent)["G"])


def test_frozen_D_is_unfrozen_after_the_step():
    G, D, x_real, noise = _setup()
    strategies.d_first_frozen_D(G, D, torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters()), x_real, noise)
    assert all(p.requires_grad for p in D.parameters())


def test_G_gradient_through_the_old_D_matches_between_one_forward_and_g_first():
    assert _same(_step_grads("one_forward")["G"], _step_grads("g_first")["G"])
    # ... and differs from the alternating order, where G sees the updated D
    assert not _same(_step_grads("one_forward")["G"], _step_grads("d_first_reuse_fake")["G"])


def test_cpu_peak_memory_is_reproducible():
    peaks = []
    for _ in range(2):
        G, D, x_real, noise = _setup()
        peaks.append(costs.measure("g_first", G, D, x_real, noise, steps=2, warmup=1).peak_mib)
    assert peaks[0] == peaks[1] > 0
