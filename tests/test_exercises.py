"""Lesson 05's build exercise: exercises.check_strategy's verdict and feedback on a right, a wasteful and a
broken step."""
import torch

from gan_lessons import costs, exercises, strategies
from gan_lessons.strategies import bce


def fresh_fake_frozen_D(G, D, opt_G, opt_D, x_real, noise):
    """The right answer: d_first_fresh_fake's order, D frozen during G's step."""
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    D.requires_grad_(False)
    opt_G.zero_grad()
    loss_G = bce(D(G(noise(len(x_real)))), 1)
    loss_G.backward()
    opt_G.step()
    D.requires_grad_(True)
    return loss_D, loss_G


def test_the_right_answer_gets_one_tick(capsys):
    assert exercises.check_strategy(fresh_fake_frozen_D) is True
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("✓ fresh_fake_frozen_D:") and "once per step" in out[0]


def test_the_wasted_D_pass_is_named(capsys):
    assert exercises.check_strategy(strategies.d_first_fresh_fake) is False
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["✗ d_first_fresh_fake: D's gradient is computed twice per step: G's backward still fills D's .grad"]


def test_another_order_is_told_how_it_differs(capsys):
    assert exercises.check_strategy(strategies.d_first_frozen_D) is False
    out = capsys.readouterr().out
    assert "G's gradient differs from d_first_fresh_fake's" in out and "G runs once per step" in out
    assert "D's gradient is computed" not in out


def test_a_step_that_raises_is_reported_not_raised(capsys):
    def broken(G, D, opt_G, opt_D, x_real, noise):
        raise RuntimeError("Trying to backward through the graph a second time")

    assert exercises.check_strategy(broken) is False
    assert capsys.readouterr().out.strip() == (
        "✗ broken: the step raised RuntimeError: Trying to backward through the graph a second time")


def test_a_blanked_answer_says_not_solved_yet(capsys):
    def my_step(G, D, opt_G, opt_D, x_real, noise):
        loss_G = bce(D(G(noise(len(x_real)))), 1)
        grad_inputs = ...
        loss_G.backward(inputs=grad_inputs)

    assert exercises.check_strategy(my_step) is False
    out = capsys.readouterr().out
    assert out.startswith("? my_step: not solved yet") and "✗" not in out


def test_a_D_left_frozen_is_reported(capsys):
    def stays_frozen(G, D, opt_G, opt_D, x_real, noise):
        out = fresh_fake_frozen_D(G, D, opt_G, opt_D, x_real, noise)
        D.requires_grad_(False)
        return out

    assert exercises.check_strategy(stays_frozen) is False
    assert "D is still frozen after the step" in capsys.readouterr().out


def test_measure_takes_a_function_as_well_as_a_name():
    G, D, x_real, noise = costs.fresh_gan(batch=8)
    c = costs.measure(fresh_fake_frozen_D, G, D, x_real, noise, steps=1, warmup=0)
    assert c.strategy == "fresh_fake_frozen_D" and (c.G_forward, c.D_grad_passes) == (2, 1)
