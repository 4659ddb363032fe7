"""Lesson 05's build exercise, a strategy written whole that wastes no D gradient: exercises.check_strategy accepts
right answers written differently, names each wrong one's mistake, and says "not solved yet" to the stub and `...`."""
import pytest
import torch

from gan_lessons import exercises, strategies
from gan_lessons.exercises.lesson05 import reference_strategy
from gan_lessons.strategies import bce


# --- right answers, written differently ---------------------------------------------------------------------------
def frozen_D(G, D, opt_G, opt_D, x_real, noise):
    """G's step with D frozen (requires_grad_(False)) instead of backward(inputs=...)."""
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        loss_G = bce(D(G(noise(len(x_real)))), 1)
        loss_G.backward()
        opt_G.step()
    finally:
        D.requires_grad_(True)
    return loss_D, loss_G


def detached_summed_autograd_grad(G, D, opt_G, opt_D, x_real, noise):
    """detach() instead of no_grad, D's two terms summed, module zero_grad(), G's gradient from autograd.grad."""
    x_fake = G(noise(len(x_real))).detach()
    D.zero_grad()
    loss_D = bce(D(x_real), 1) + bce(D(x_fake), 0)
    loss_D.backward()
    opt_D.step()
    loss_G = bce(D(G(noise(len(x_real)))), 1)
    for p, g in zip(G.parameters(), torch.autograd.grad(loss_G, list(G.parameters()))):
        p.grad = g
    opt_G.step()
    return loss_D, loss_G


def both_zero_grads_first(G, D, opt_G, opt_D, x_real, noise):
    """Both zero_grad() calls at the top, as one_forward does them."""
    opt_D.zero_grad()
    opt_G.zero_grad()
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    loss_G = bce(D(G(noise(len(x_real)))), 1)
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


@pytest.mark.parametrize("step", [reference_strategy, frozen_D, detached_summed_autograd_grad, both_zero_grads_first])
def test_right_answers_written_differently_get_one_tick(step, capsys):
    assert exercises.check_strategy(step) is True
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"✓ {step.__name__}:") and "once per step" in out[0]


# --- wrong answers, as students write them ------------------------------------------------------------------------
def wastes_D_gradient(G, D, opt_G, opt_D, x_real, noise):
    """d_first_fresh_fake as it stands: G's plain backward also fills D's .grad, as g_first's does."""
    return strategies.d_first_fresh_fake(G, D, opt_G, opt_D, x_real, noise)


def G_through_stale_D(G, D, opt_G, opt_D, x_real, noise):
    """G's backward before D's step (both steps at the end): G's gradient comes from the D before its update."""
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    opt_G.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_G = bce(D(G(noise(len(x_real)))), 1)
    loss_D.backward(inputs=list(D.parameters()))
    loss_G.backward(inputs=list(G.parameters()))
    opt_D.step()
    opt_G.step()
    return loss_D, loss_G


def G_step_first(G, D, opt_G, opt_D, x_real, noise):
    """G's whole step first, its noise drawn first: G answers the D before its step."""
    opt_G.zero_grad()
    loss_G = bce(D(G(noise(len(x_real)))), 1)
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    return loss_D, loss_G


def reuses_D_forward_from_before_its_step(G, D, opt_G, opt_D, x_real, noise):
    """loss_G built from a D forward made before opt_D.step(): the version error."""
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    logits_G = D(G(noise(len(x_real))))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    loss_G = bce(logits_G, 1)
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def D_step_trains_G(G, D, opt_G, opt_D, x_real, noise):
    """No detach and no no_grad for D's fake batch, opt_G.zero_grad() once at the top: D's loss lands in G's .grad."""
    opt_G.zero_grad()
    x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    loss_G = bce(D(G(noise(len(x_real)))), 1)
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def D_loss_reaches_G_but_cleared(G, D, opt_G, opt_D, x_real, noise):
    """No detach, but opt_G.zero_grad() right before G's backward: G's gradient is right, computed twice."""
    x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    loss_G = bce(D(G(noise(len(x_real)))), 1)
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def forgot_D_zero_grad(G, D, opt_G, opt_D, x_real, noise):
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    loss_G = bce(D(G(noise(len(x_real)))), 1)
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def forgot_G_zero_grad(G, D, opt_G, opt_D, x_real, noise):
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    D.requires_grad_(False)
    loss_G = bce(D(G(noise(len(x_real)))), 1)
    loss_G.backward()
    opt_G.step()
    D.requires_grad_(True)
    return loss_D, loss_G


def reuses_fake_made_without_graph(G, D, opt_G, opt_D, x_real, noise):
    """G's loss on the no_grad fake batch, D frozen: nothing in loss_G requires grad."""
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    D.requires_grad_(False)
    opt_G.zero_grad()
    loss_G = bce(D(x_fake), 1)
    loss_G.backward()
    opt_G.step()
    D.requires_grad_(True)
    return loss_D, loss_G


def inputs_never_reach_G(G, D, opt_G, opt_D, x_real, noise):
    """backward(inputs=G's parameters) on the no_grad fake: runs, and G's .grad stays None."""
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    loss_G = bce(D(x_fake), 1)
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def leaves_D_frozen(G, D, opt_G, opt_D, x_real, noise):
    out = frozen_D(G, D, opt_G, opt_D, x_real, noise)
    D.requires_grad_(False)
    return out


WRONG = [
    (wastes_D_gradient, ["D's gradient is computed twice per step, once for nothing", "G's backward still fills D's",
                         "which no step of D uses"]),
    (G_through_stale_D, ["G's gradient was taken through D as it was before opt_D.step()",
                         "G answers the D that has just stepped"]),
    (G_step_first, ["G's gradient was taken through D as it was before opt_D.step()"]),
    (reuses_D_forward_from_before_its_step, ["modified by an inplace operation",
                                             "reuses a D forward made before opt_D.step()"]),
    (D_step_trains_G, ["D's step trains G", "graph back to G"]),
    (D_loss_reaches_G_but_cleared, ["G's gradient is computed twice per step", "D's loss still reaches G"]),
    (forgot_D_zero_grad, ["D's gradient at opt_D.step() still holds the earlier .grad", "nothing emptied D's"]),
    (forgot_G_zero_grad, ["G's gradient at opt_G.step() still holds the earlier .grad", "nothing emptied G's"]),
    (reuses_fake_made_without_graph, ["does not require grad", "made without a graph"]),
    (inputs_never_reach_G, ["opt_G stepped with", "without a gradient", "never reached it"]),
    (strategies.d_first_frozen_D, ["G runs once per step", "fresh G forward for G's loss"]),
    (leaves_D_frozen, ["D is still frozen after the step", "no longer require grad"]),
]


@pytest.mark.parametrize("step, words", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_each_wrong_answer_is_told_its_mistake(step, words, capsys):
    assert exercises.check_strategy(step) is False
    out = capsys.readouterr().out
    assert out.startswith("✗") and "✓" not in out
    for w in words:
        assert w in out, (w, out)
    fix_code = [c for c in ("zero_grad()", "torch.no_grad()", ".detach()", "requires_grad_(", "inputs=list(")
                if c in out]
    assert not fix_code, (fix_code, out)           # the mistake is named; the fix is the student's to write


def test_a_wasteful_step_gets_only_the_waste_named(capsys):
    exercises.check_strategy(wastes_D_gradient)
    assert len(capsys.readouterr().out.strip().splitlines()) == 1     # its gradients are right: nothing else to say


# --- not solved yet -------------------------------------------------------------------------------------------------
def test_the_student_copys_stub_and_an_ellipsis_say_not_solved_yet(capsys):
    def my_step(G, D, opt_G, opt_D, x_real, noise):
        raise NotImplementedError()

    assert exercises.check_strategy(my_step) is False
    assert exercises.check_strategy(...) is False
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 and all(line.startswith("? ") and "not solved yet" in line for line in out)
    assert "raise NotImplementedError()" in out[0] and "my_answer = ..." in out[1]
