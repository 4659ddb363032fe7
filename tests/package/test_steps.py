"""The one grading engine (gan_lessons/exercises/steps.py): what it says of a step that differs, on real optimizer
steps of small models, and that every step checker goes through it."""
import ast
import pathlib

import pytest
import torch
from torch import nn

from gan_lessons.exercises import steps

EXERCISES = pathlib.Path(steps.__file__).parent


def _problem():
    torch.manual_seed(0)
    G, D = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)), nn.Sequential(nn.Linear(2, 4), nn.Tanh(),
                                                                                     nn.Linear(4, 1))
    opts = {"opt_D": torch.optim.SGD(D.parameters(), lr=0.1), "opt_G": torch.optim.SGD(G.parameters(), lr=0.1)}
    names = {p: f"{k}.{n}" for k, m in (("G", G), ("D", D)) for n, p in m.named_parameters()}
    z = torch.randn(8, 3, generator=torch.Generator().manual_seed(1))
    x_real = torch.randn(8, 2, generator=torch.Generator().manual_seed(2))
    return G, D, opts, names, z, x_real


def _run(step, calls=2):
    G, D, opts, names, z, x_real = _problem()
    with steps.recorded_steps(opts, names) as records:
        for _ in range(calls):
            step(G, D, opts["opt_G"], opts["opt_D"], z, x_real)
    return records


def right(G, D, opt_G, opt_D, z, x_real, scale_D=1.0, zero_D=True, detach=True, G_first=False, g_scale=1.0):
    def d_step():
        if zero_D:
            opt_D.zero_grad()
        fake = G(z).detach() if detach else G(z)
        loss_D = scale_D * ((D(x_real) - 1).pow(2).mean() + D(fake).pow(2).mean())
        loss_D.backward()
        opt_D.step()

    def g_step():
        opt_G.zero_grad()
        loss_G = g_scale * (D(G(z)) - 1).pow(2).mean()
        loss_G.backward(inputs=list(G.parameters()))          # D's .grad holds D's own steps alone
        opt_G.step()

    for part in ((g_step, d_step) if G_first else (d_step, g_step)):
        part()


def summed_in_another_order(G, D, opt_G, opt_D, z, x_real):
    opt_D.zero_grad()
    loss_D = D(G(z).detach()).pow(2).mean() + (D(x_real) - 1).pow(2).mean()
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    (D(G(z)) - 1).pow(2).mean().backward(inputs=list(G.parameters()))
    opt_G.step()


def test_a_right_step_written_differently_matches():
    assert steps.first_difference(_run(summed_in_another_order), _run(right)) is None
    assert steps.matching(_run(summed_in_another_order), _run(right))


def test_no_zero_grad_is_named_as_a_gradient_still_held_from_an_earlier_step():
    line = steps.first_difference(_run(lambda *a: right(*a, zero_D=False), calls=3), _run(right, calls=3))
    assert line.startswith("step 2: opt_D stepped on this step's gradient plus step 1's, which its .grad still held")
    assert "zero_grad" not in line               # the mistake is named, the fix is not printed


def test_a_scaled_loss_is_named_by_its_ratio_and_direction():
    line = steps.first_difference(_run(lambda *a: right(*a, scale_D=0.5)), _run(right))
    assert line == "step 1: opt_D stepped on gradients 0.5x the reference's, in the same direction"
    line = steps.first_difference(_run(lambda *a: right(*a, g_scale=1024.0)), _run(right))
    assert line.startswith("step 1: opt_G stepped on gradients 2^10 = 1024x the reference's")


def test_a_gradient_where_the_reference_has_none_is_named_with_its_parameter():
    mine, ref = _run(right), _run(right)
    ref["opt_D"][0]["D.0.bias"] = None                  # as where the reference's loss never reaches a frozen part
    line = steps.first_difference(mine, ref)
    assert line.startswith("step 1: opt_D stepped with a gradient in D.0.bias.grad (1 parameter(s))"), line


def test_the_order_of_steps_decides_which_difference_is_first():
    mine, ref = _run(lambda *a: right(*a, G_first=True)), _run(right)
    assert mine.order[0] == (0, "opt_G") and ref.order[0] == (0, "opt_D")
    assert steps.first_difference(mine, ref).startswith("step 1: opt_D stepped on")


def test_only_some_parameters_wrong_are_named():
    mine, ref = _run(right), _run(right)
    mine["opt_D"][0]["D.2.bias"] = mine["opt_D"][0]["D.2.bias"] * 3
    line = steps.first_difference(mine, ref)
    assert line.startswith("step 1: opt_D stepped on") and "(only in D.2.bias; the other 3 are right)" in line


def test_a_missing_gradient_and_a_missing_step_are_named():
    mine, ref = _run(right), _run(right)
    mine["opt_G"][1]["G.0.weight"] = None
    assert steps.first_difference(mine, ref).startswith("step 2: opt_G stepped with G.0.weight.grad None (1 parameter")
    assert steps.compare_steps(mine, ref, "the formula") == [steps.first_difference(mine, ref)]   # no formula
    mine["opt_G"][1]["G.0.weight"] = mine["opt_G"][1]["G.0.bias"].new_zeros(ref["opt_G"][1]["G.0.weight"].shape)
    assert steps.compare_steps(mine, ref, "the formula")[0].endswith(": the formula")      # a gradient off: formula
    mine["opt_G"].pop()
    assert steps.first_difference(mine, ref) == ("opt_G.step() ran 1 time(s) where the reference steps it 2 time(s)")


def test_every_optimizer_that_stepped_too_often_or_too_rarely_is_named():
    mine, ref = _run(right), _run(right)
    mine["opt_D"].append(mine["opt_D"][0])
    mine["opt_G"].clear()
    assert steps.first_difference(mine, ref) == ("opt_D.step() ran 3 time(s) where the reference steps it 2 time(s); "
                                                 "opt_G.step() ran 0 time(s) where the reference steps it 2 time(s)")


def test_a_sign_flipped_loss_is_named_as_the_opposite_direction():
    line = steps.first_difference(_run(lambda *a: right(*a, scale_D=-1.0)), _run(right))
    assert line == ("step 1: opt_D stepped on gradients 1x the reference's, in the opposite direction: the step "
                    "climbs where the reference's descends")


def test_a_grad_the_step_found_full_is_named_from_what_it_held_before_the_call():
    """The .grad an earlier step left (recorded when recording began), added to by a step that never clears it."""
    G, D, opts, names, z, x_real = _problem()
    for p in D.parameters():
        p.grad = torch.full_like(p, 0.01)
    with steps.recorded_steps(opts, names) as mine:
        right(G, D, opts["opt_G"], opts["opt_D"], z, x_real, zero_D=False)
    line = steps.first_difference(mine, _run(right, calls=1))
    assert line.startswith("step 1: opt_D stepped on the gradient its .grad held before the call plus this call's")
    assert steps.compare_steps(mine, _run(right, calls=1), "the formula") == [line]      # no formula after a cause


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_closeness_is_relative_to_the_step_so_any_size_of_gradient_is_judged_alike(scale):
    r = torch.tensor([1.0, -2.0, 0.0]) * scale
    assert steps.close(r + 1e-6 * scale, r)                    # float32 rounding of a sum in another order
    assert not steps.close(r * 1.001, r)


def test_every_step_checker_goes_through_the_one_engine():
    """No module but steps.py hooks an optimizer's step to record gradients or defines its own comparison of them;
    the AMP lab's hook only records the order of the scaler's calls."""
    for path in EXERCISES.rglob("*.py"):
        tree = ast.parse(path.read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        if path.name != "steps.py":
            assert not defined & {"recorded_steps", "compare_steps", "first_difference", "_flat", "_compare",
                                  "matching", "same_steps", "known_mistake"}, path


def test_not_solved_yet_is_worded_in_one_place():
    """A `...` left (lesson.not_solved) and nbgrader's stub left (feedback.stub_line) are the two "not solved yet"
    lines; lesson 11 adds one that names an earlier step still to write. No checker words its own."""
    package = EXERCISES.parent
    wording = {path.relative_to(package).as_posix() for path in package.rglob("*.py")
               if "not solved yet." in path.read_text() or "not solved yet:" in path.read_text()}
    assert wording == {"lesson.py", "exercises/feedback.py", "exercises/lesson11/cases.py"}, wording


def test_a_gradient_zero_in_both_is_not_counted_as_right():
    """A bias right before a BatchNorm gets a zero gradient from any loss: its agreement proves nothing, so a step
    wrong everywhere else is not told it is only partly wrong."""
    mine, ref = _run(right), _run(right)
    for name in mine["opt_D"][0]:
        if name != "D.2.bias":
            mine["opt_D"][0][name] = -mine["opt_D"][0][name]
    ref["opt_D"][0]["D.2.bias"] = torch.zeros_like(ref["opt_D"][0]["D.2.bias"])
    mine["opt_D"][0]["D.2.bias"] = torch.zeros_like(ref["opt_D"][0]["D.2.bias"])
    line = steps.first_difference(mine, ref)
    assert line.startswith("step 1: opt_D stepped on") and "only in" not in line and "right)" not in line, line


def test_a_parameter_whose_right_gradient_is_only_rounding_from_zero_is_not_counted_right():
    """A bias before a BatchNorm: its right gradient is zero but for float noise, so four times it is as close to
    the reference as the reference itself; it says nothing about the step and is not among "the other n"."""
    mine, ref = _run(right), _run(right)
    ref["opt_D"][0]["D.0.bias"] = torch.full_like(ref["opt_D"][0]["D.0.bias"], 1e-12)
    mine["opt_D"][0]["D.0.bias"] = ref["opt_D"][0]["D.0.bias"] * 4
    mine["opt_D"][0]["D.2.bias"] = mine["opt_D"][0]["D.2.bias"] * 3
    line = steps.first_difference(mine, ref)
    assert "(only in D.2.bias; the other 2 are right)" in line, line


def test_a_gradient_within_a_wide_tolerance_but_not_near_the_reference_is_not_called_right():
    """bfloat16's tolerance (2e-2 of the largest entry) passes a gradient 1.5% off: with one parameter off by more,
    the others are not said to be right."""
    mine, ref = _run(right), _run(right)
    for name, grad in mine["opt_D"][0].items():
        mine["opt_D"][0][name] = grad * 1.015
    mine["opt_D"][0]["D.2.bias"] = ref["opt_D"][0]["D.2.bias"] * 3
    line = steps.first_difference(mine, ref, 2e-2)
    assert line.startswith("step 1: opt_D stepped on") and "right)" not in line, line
    mine["opt_D"][0] = {**ref["opt_D"][0], "D.2.bias": ref["opt_D"][0]["D.2.bias"] * 3}
    assert "the other 3 are right)" in steps.first_difference(mine, ref, 2e-2)
