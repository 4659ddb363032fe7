"""Lesson 09's checker, check_frozen_g_step, on right answers written differently from the reference (below: the reference and
seven wrong answers, each named), and on nbgrader's stub."""
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F

from gan_lessons import exercises


def g_bce(logits):
    return F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))


def run(capsys, answer):
    ok = exercises.check_frozen_g_step(answer)
    return ok, capsys.readouterr().out


def g_step_dict_inputs(G, D, opt_G, z):
    """Flags saved in a dict by name, D frozen, and backward(inputs=...) on top."""
    flags = {name: p.requires_grad for name, p in D.named_parameters()}
    for p in D.parameters():
        p.requires_grad_(False)
    try:
        opt_G.zero_grad(set_to_none=False)
        loss_G = g_bce(D(G(z)))
        loss_G.backward(inputs=list(G.parameters()))
        opt_G.step()
        return loss_G
    finally:
        for name, p in D.named_parameters():
            p.requires_grad = flags[name]


@contextmanager
def frozen(net):
    """A context manager that freezes net and gives back exactly the flags it found."""
    thawed = [p for p in net.parameters() if p.requires_grad]
    for p in thawed:
        p.requires_grad_(False)
    try:
        yield net
    finally:
        for p in thawed:
            p.requires_grad_(True)


def g_step_context(G, D, opt_G, z):
    """The freeze as a context manager; x_fake made before D is frozen (freezing D does not touch G's graph)."""
    opt_G.zero_grad()
    x_fake = G(z)
    with frozen(D):
        loss_G = F.binary_cross_entropy_with_logits(D(x_fake), torch.full((len(z),), 1.0))
        loss_G.backward()
    opt_G.step()
    return loss_G


def g_step_clears_D(G, D, opt_G, z):
    """D frozen and thawed again, but D's .grad emptied on the way out: G's step wiped what it was not its to touch."""
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        loss_G = g_bce(D(G(z)))
        loss_G.backward()
        opt_G.step()
        return loss_G
    finally:
        D.zero_grad()
        D.requires_grad_(True)


def test_a_G_step_that_clears_D_s_grad_is_not_told_it_went_into_D(capsys):
    ok, out = run(capsys, g_step_clears_D)
    assert ok is False and "D's .grad was emptied" in out and "went into D's parameters" not in out, out


def g_step_stub(G, D, opt_G, z):
    # YOUR CODE HERE
    raise NotImplementedError()


@pytest.mark.parametrize("answer", [g_step_dict_inputs, g_step_context], ids=["dict and inputs=", "context manager"])
def test_right_answers_written_differently(capsys, answer):
    ok, out = run(capsys, answer)
    assert ok is True and out.startswith("✓"), out


def test_the_stub_is_not_solved_yet(capsys):
    ok, out = run(capsys, g_step_stub)
    assert ok is False and out.startswith("?") and "not solved yet" in out and "NotImplementedError" in out


# --- wrong answers, each named, and the reference ------------------------------------------------------------------
def g_step_plain(G, D, opt_G, z):                    # D not frozen: loss_G's backward fills D's .grad
    opt_G.zero_grad()
    g_bce(D(G(z))).backward()
    opt_G.step()


def g_step_detached(G, D, opt_G, z):                 # frozen D and a detached fake: nothing requires grad
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        g_bce(D(G(z).detach())).backward()
        opt_G.step()
    finally:
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)


def g_step_detached_unfrozen(G, D, opt_G, z):        # G gets no gradient at all
    opt_G.zero_grad()
    g_bce(D(G(z).detach())).backward()
    opt_G.step()


def g_step_inputs(G, D, opt_G, z):                   # D's .grad untouched, but D never frozen
    opt_G.zero_grad()
    g_bce(D(G(z))).backward(inputs=list(G.parameters()))
    opt_G.step()


def g_step_all_true(G, D, opt_G, z):                 # unfreezes D's first layer, frozen on purpose
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        g_bce(D(G(z))).backward()
        opt_G.step()
    finally:
        D.requires_grad_(True)


def g_step_no_finally(G, D, opt_G, z):               # an error leaves D frozen
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    opt_G.zero_grad()
    g_bce(D(G(z))).backward()
    opt_G.step()
    for p, flag in zip(D.parameters(), flags):
        p.requires_grad_(flag)


def g_step_swallows(G, D, opt_G, z):                 # flags restored, but the error never reaches the caller
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        g_bce(D(G(z))).backward()
        opt_G.step()
    except Exception:
        pass
    finally:
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)


def g_step_restores_on_exception_only(G, D, opt_G, z):   # a Ctrl-C (no Exception) leaves D frozen
    flags = [p.requires_grad for p in D.parameters()]

    def restore():
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        loss_G = g_bce(D(G(z)))
        loss_G.backward()
        opt_G.step()
    except Exception:
        restore()
        raise
    restore()
    return loss_G


def g_step_rewraps(G, D, opt_G, z):                 # flags restored, the error raised again as another type
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        g_bce(D(G(z))).backward()
        opt_G.step()
    except Exception as error:
        raise ValueError("the G step failed") from error
    finally:
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)


def g_step_ellipsis(G, D, opt_G, z):
    flags = ...
    for p, flag in zip(D.parameters(), flags):
        p.requires_grad_(flag)


def g_step_first_layer_rule(G, D, opt_G, z):        # flags put back by a rule that fits one D: "the first is frozen"
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        g_bce(D(G(z))).backward()
        opt_G.step()
    finally:
        for i, p in enumerate(D.parameters()):
            p.requires_grad_(i >= 2)


def g_step_restores_per_layer(G, D, opt_G, z):     # flags kept one per layer: a layer part-frozen comes back whole
    flags = [any(p.requires_grad for p in m.parameters(recurse=False)) for m in D.net]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        g_bce(D(G(z))).backward()
        opt_G.step()
    finally:
        for m, flag in zip(D.net, flags):
            m.requires_grad_(flag)


def g_step_leaves_D_in_eval(G, D, opt_G, z):        # right gradients and flags, D's mode not put back
    D.eval()
    exercises.reference_frozen_g_step(G, D, opt_G, z)


def g_step_D_under_no_grad(G, D, opt_G, z):       # D's forward under no_grad: no graph from G to the loss at all
    opt_G.zero_grad()
    with torch.no_grad():
        logits = D(G(z))
    loss_G = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits)).requires_grad_()
    loss_G.backward()
    opt_G.step()
    return loss_G.detach()


def test_a_D_forward_under_no_grad_is_not_told_it_saved_activations(capsys):
    ok, out = run(capsys, g_step_D_under_no_grad)
    assert ok is False and "opt_G stepped with G.net.0.weight.grad None" in out, out
    assert "saved activations" not in out and "not frozen" not in out, out


def test_frozen_g_step(capsys):
    ok, out = run(capsys, exercises.reference_frozen_g_step)
    assert ok is True and out.startswith("✓"), out
    ok, out = run(capsys, g_step_plain)
    assert ok is False and "D's .grad changed" in out and "went into D's parameters" in out and "freeze" not in out
    ok, out = run(capsys, g_step_detached)
    assert ok is False and "does not require grad" in out and "loss_G has no graph" in out and "frozen" not in out
    ok, out = run(capsys, g_step_detached_unfrozen)
    assert ok is False and "opt_G stepped with G.net.0.weight.grad None" in out
    ok, out = run(capsys, g_step_inputs)
    assert ok is False and "D was not frozen when its forward ran" in out
    ok, out = run(capsys, g_step_all_true)
    assert ok is False and "after the step, D.net.0.weight requires grad, but it was frozen before" in out
    ok, out = run(capsys, g_step_no_finally)
    assert ok is False and "after an error inside the step" in out and "after a step that raised" in out
    ok, out = run(capsys, g_step_swallows)
    assert ok is False and "did not come out of g_step" in out
    ok, out = run(capsys, g_step_restores_on_exception_only)
    assert ok is False and "after an interruption inside the step, as a Ctrl-C's KeyboardInterrupt" in out, out
    ok, out = run(capsys, g_step_rewraps)
    assert ok is False and "came out of g_step as ValueError" in out and "did not come out" not in out
    ok, out = run(capsys, g_step_ellipsis)
    assert ok is False and "a `...` is still in your function" in out
    ok, out = run(capsys, g_step_first_layer_rule)
    assert ok is False and "after the step, D.net.0.weight does not require grad, but it was trainable before" in out
    ok, out = run(capsys, g_step_restores_per_layer)
    assert ok is False and "after the step, D.net.5.bias requires grad, but it was frozen before" in out, out
    ok, out = run(capsys, g_step_leaves_D_in_eval)
    assert ok is False and "left D in eval mode, where it was given in training mode" in out, out
    ok, out = run(capsys, ...)
    assert ok is False and out.startswith("?") and "not solved yet" in out


def _frozen(loss, zero_grad=True):
    """A G step with D frozen and its flags put back, G's loss given as loss(D, G, z)."""
    def g_step(G, D, opt_G, z):
        flags = [p.requires_grad for p in D.parameters()]
        D.requires_grad_(False)
        try:
            if zero_grad:
                opt_G.zero_grad()
            loss(D, G, z).backward()
            opt_G.step()
        finally:
            for p, flag in zip(D.parameters(), flags):
                p.requires_grad_(flag)
    return g_step


def test_the_saturating_loss_and_a_grad_left_uncleared_are_named_without_the_recipe(capsys):
    saturating = _frozen(lambda D, G, z: torch.log1p(-torch.sigmoid(D(G(z)))).mean())
    ok, out = run(capsys, saturating)
    assert ok is False and "G's loss is the saturating one" in out and "after opt_G.zero_grad()" not in out, out
    ok, out = run(capsys, _frozen(lambda D, G, z: g_bce(D(G(z))), zero_grad=False))
    assert ok is False and "the gradient its .grad held before the call plus this call's" in out, out
    assert "saturating" not in out and "after opt_G.zero_grad()" not in out, out
