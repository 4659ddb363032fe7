"""Lesson 09's checker, check_frozen_g_step, on right answers written differently from the reference (the reference
and seven wrong answers are in tests/test_exercise_checkers.py), and on nbgrader's stub."""
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
