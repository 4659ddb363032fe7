"""WGAN-GP (strategies.wgan_gp) and the two gradient penalties: counted passes, the penalties against hand-computed
values, the silent create_graph=False bug, the n_critic cadence across a resume, and the command line."""
import functools
import io

import pytest
import torch
from torch import nn

from gan_lessons import __main__ as cli_main
from gan_lessons import costs, data, strategies, training
from gan_lessons.wording import reword

pytestmark = pytest.mark.slow


def _cost(n_critic):
    """The passes of one call of wgan_gp, the first on fresh Adam optimizers (opt_D then has 1 step)."""
    step = functools.partial(strategies.wgan_gp, n_critic=n_critic)
    c = costs.measure(step, *costs.fresh_gan(batch=16), steps=1, warmup=0)
    return (c.G_forward, c.G_backward, c.D_forward, c.D_backward, c.G_grad_passes, c.D_grad_passes)


def test_passes_of_a_critic_only_call():
    # n_critic=2 and opt_D's first step: 1 % 2 != 0, so no G step.
    # G forward 1: the fake batch, under no_grad; G backward 0: that output requires no grad, so nothing flows back.
    # D forward 3: D(x_fake), D(x_real), and D(x_hat) inside gradient_penalty.
    # D backward 3 (gradients reaching D's output): D(x_hat)'s in torch.autograd.grad, D(x_fake)'s and D(x_real)'s in
    #   loss_D.backward(). That backward also runs the penalty's double backward (the backward of autograd.grad's own
    #   graph, through D's layers again, down to D's weights), but that never reaches D(x_hat)'s output: the gradient
    #   there was the constant grad_outputs=ones, so the hook does not count it.
    # D grad passes 1: only loss_D.backward() accumulates into D's .grad (autograd.grad returns its gradient instead);
    # G grad passes 0.
    assert _cost(n_critic=2) == (1, 0, 3, 3, 0, 1)


def test_passes_of_a_call_that_also_steps_G():
    # n_critic=1: G steps after every critic step. On top of the critic's passes: one more G forward (fresh noise,
    # with a graph) and its backward; one more D forward, D(G(z)), whose output gets loss_G's gradient; G's .grad is
    # filled once. D is frozen during G's step, so D's .grad is still filled once per call.
    assert _cost(n_critic=1) == (2, 1, 4, 4, 1, 1)


def linear_critic():
    """D(x) = w . x + b on flattened [B, 1, 2, 3] images: grad_x D(x) = w for every x. ||w|| = 13."""
    D = nn.Sequential(nn.Flatten(), nn.Linear(6, 1), nn.Flatten(0))
    with torch.no_grad():
        D[1].weight.copy_(torch.tensor([[3., 4., 0., 0., 0., 12.]]))
        D[1].bias.fill_(0.5)
    return D, D[1].weight


def test_gradient_penalty_of_a_linear_critic_is_computed_by_hand():
    torch.manual_seed(0)
    D, w = linear_critic()
    x_real, x_fake = torch.randn(5, 1, 2, 3), torch.randn(5, 1, 2, 3)
    penalty = strategies.gradient_penalty(D, x_real, x_fake)
    norm = w.detach().norm()                                                  # 13
    assert torch.allclose(penalty, (norm - 1) ** 2)                           # 144, for every eps
    grad_w, = torch.autograd.grad(penalty, w)
    assert torch.allclose(grad_w, 2 * (norm - 1) * w.detach() / norm)         # 2 * 12 * w / 13
    eps = torch.tensor([0., 0.25, 0.5, 0.75, 1.])                             # an eps given: same value
    assert torch.allclose(strategies.gradient_penalty(D, x_real, x_fake, eps=eps), (norm - 1) ** 2)


def test_r1_penalty_of_a_linear_critic_is_computed_by_hand():
    D, w = linear_critic()
    penalty = strategies.r1_penalty(D, torch.randn(5, 1, 2, 3))
    assert torch.allclose(penalty, w.detach().norm() ** 2)                    # 169
    grad_w, = torch.autograd.grad(penalty, w)
    assert torch.allclose(grad_w, 2 * w.detach())


def penalty_without_create_graph(D, x_real, x_fake, eps):
    """gradient_penalty with the silent bug: autograd.grad without create_graph=True."""
    eps = eps.reshape(-1, *[1] * (x_real.dim() - 1))
    x_hat = (eps * x_real + (1 - eps) * x_fake).requires_grad_(True)
    out = D(x_hat)
    grad, = torch.autograd.grad(outputs=out, inputs=x_hat, grad_outputs=torch.ones_like(out))
    return ((grad.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def test_without_create_graph_the_penalty_trains_nothing():
    torch.manual_seed(0)
    D = nn.Sequential(nn.Flatten(), nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1), nn.Flatten(0))
    x_real, x_fake, eps = torch.randn(5, 1, 2, 3), torch.randn(5, 1, 2, 3), torch.rand(5)
    right = strategies.gradient_penalty(D, x_real, x_fake, eps)
    wrong = penalty_without_create_graph(D, x_real, x_fake, eps)
    assert torch.allclose(right, wrong) and right.item() > 0                  # the same value...
    assert right.requires_grad and not wrong.requires_grad                    # ...but a constant
    params = list(D.parameters())
    reached = [D[1].weight, D[1].bias, D[3].weight]          # all but the last bias, which grad_x does not depend on
    assert all(g.abs().sum() > 0 for g in torch.autograd.grad(right, reached, retain_graph=True))
    # added to a loss, the constant changes nothing: D steps on the gradient of the rest of the loss alone

    def wasserstein():
        return D(x_fake).mean() - D(x_real).mean()

    with_bug = torch.autograd.grad(wasserstein() + 10 * wrong, params)
    without_penalty = torch.autograd.grad(wasserstein(), params)
    assert all(torch.equal(a, b) for a, b in zip(with_bug, without_penalty))
    fixed = torch.autograd.grad(wasserstein() + 10 * right, params)
    assert not all(torch.allclose(a, b) for a, b in zip(fixed, without_penalty))


def _gan(seed=0):
    G, D, x_real, _ = costs.fresh_gan(seed, batch=8)
    opt_G = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.9))
    opt_D = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.0, 0.9))
    return G, D, opt_G, opt_D, x_real


def _calls(G, D, opt_G, opt_D, x_real, first, last, n_critic):
    """Calls first..last (1-based, counted over the whole run); returns the calls on which opt_G stepped."""
    stepped, call = [], None
    handle = opt_G.register_step_post_hook(lambda *args: stepped.append(call))
    gen = torch.Generator().manual_seed(first)

    def noise(n):
        return torch.randn(n, G.z_dim, generator=gen)

    for call in range(first, last + 1):
        loss_D, loss_G = strategies.wgan_gp(G, D, opt_G, opt_D, x_real, noise, n_critic=n_critic)
        assert loss_G.requires_grad == (call in stepped)                     # the free loss_G is detached
        assert all(p.requires_grad for p in D.parameters())                  # D unfrozen after G's step
    handle.remove()
    return stepped


def test_G_steps_once_every_n_critic_calls():
    assert _calls(*_gan(), first=1, last=6, n_critic=3) == [3, 6]
    assert _calls(*_gan(), first=1, last=10, n_critic=5) == [5, 10]


def test_a_resume_in_the_middle_keeps_the_cadence():
    G, D, opt_G, opt_D, x_real = _gan()
    assert _calls(G, D, opt_G, opt_D, x_real, first=1, last=4, n_critic=3) == [3]
    buffer = io.BytesIO()                              # a checkpoint, as the trainer writes it: optimizer states too
    torch.save({"G": G.state_dict(), "D": D.state_dict(), "opt_G": opt_G.state_dict(), "opt_D": opt_D.state_dict()},
               buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    G, D, opt_G, opt_D, x_real = _gan(seed=1)           # fresh objects, other weights
    for obj, key in ((G, "G"), (D, "D"), (opt_G, "opt_G"), (opt_D, "opt_D")):
        obj.load_state_dict(state[key])
    assert _calls(G, D, opt_G, opt_D, x_real, first=5, last=9, n_critic=3) == [6, 9]


WGAN = ["--strategy", "wgan_gp", "--lr-g", "1e-4", "--lr-d", "1e-4", "--beta1", "0", "--beta2", "0.9",
        "--limit", "320", "--batch-size", "64", "--eval-samples", "0", "--no-progress", "--device", "cpu",
        "--data", data.DEFAULT_ROOT]


def test_the_command_line_trains_resumes_and_evaluates_wgan_gp(tmp_path, cli):
    run = tmp_path / "run"
    done = cli("train", "--epochs", "1", "--out", str(run), *WGAN)          # 5 critic steps, so 1 G step
    assert done.returncode == 0, done.stderr
    state = training.load_checkpoint(run / "last.pt")
    assert {k: state["config"][k] for k in ("strategy", "n_critic", "gp_weight", "beta1", "beta2")} == \
        {"strategy": "wgan_gp", "n_critic": 5, "gp_weight": 10.0, "beta1": 0.0, "beta2": 0.9}

    def steps(state, opt):
        return int(next(iter(state[opt]["state"].values()))["step"])

    assert (steps(state, "opt_D"), steps(state, "opt_G")) == (5, 1)
    scored = cli("evaluate", str(run / "last.pt"), "-n", "200", "--data", data.DEFAULT_ROOT)
    assert scored.returncode == 0 and '"mnist_fid"' in scored.stdout, scored.stderr

    refused = cli("train", "--epochs", "2", "--resume", "--out", str(run), *WGAN, "--n-critic", "2")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "was trained with n_critic=5, not 2" in refused.stderr.strip().splitlines()[-1]

    for key in ("n_critic", "gp_weight"):                  # a checkpoint from before these options
        del state["config"][key]
    training.save_checkpoint(run / "last.pt", state)
    resumed = cli("train", "--epochs", "2", "--resume", "--out", str(run), *WGAN)
    assert resumed.returncode == 0, resumed.stderr
    state = training.load_checkpoint(run / "last.pt")
    assert (steps(state, "opt_D"), steps(state, "opt_G")) == (10, 2) and state["config"]["n_critic"] == 5


@pytest.mark.parametrize("settings, words", [
    ({"n_critic": 0}, "--n-critic must be a positive whole number"),
    ({"n_critic": 2.5}, "--n-critic must be a positive whole number"),
    ({"gp_weight": -1.0}, "--gp-weight must be a finite number, 0 or above"),
    ({"gp_weight": float("inf")}, "--gp-weight must be a finite number, 0 or above"),
    ({"beta1": 1.0}, "--beta1 must be a number from 0 up to (not including) 1"),
    ({"beta2": float("nan")}, "--beta2 must be a number from 0 up to (not including) 1"),
    ({"strategy": "wgan_gp", "fast": True}, "drop --fast"),
])
def test_config_checks_the_new_settings(settings, words):
    with pytest.raises(training.ConfigError) as raised:
        training.TrainConfig(**settings).validate()
    said = reword(raised.value, cli_main.WORDS)               # as the command line says it: in its flags
    assert words in said and "\n" not in said and "--" not in str(raised.value)
