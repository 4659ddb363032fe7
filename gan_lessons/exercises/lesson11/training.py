"""Lesson 12, the engine's last build: the student's engine trains a model. A two-layer tanh network fits a smooth
function of two inputs by plain gradient descent, with the student's `tanh` and the student's training loop, and the
losses are compared step by step with the same loop on torch."""
from dataclasses import dataclass

import torch

from gan_lessons.engine import LEAF_IN_PLACE, Value, mine_or_finished, without_text
from gan_lessons.exercises.exercise import Exercise, Found, Raised
from gan_lessons.exercises.lesson11.saving import one_op_problems
from gan_lessons.i18n import N_, _
from gan_lessons.lesson import headline

SAMPLES, HIDDEN = 64, 16
RUNS = [(40, 0.1), (8, 0.3)]              # (steps, lr): two runs, so an lr written into the loop shows

# TRANSLATORS: the name of lesson 12's last build, as its feedback lines show it ("✓ training: ...")
TRAINING_NAME = N_("training")


@dataclass
class Problem:
    """The data and the initial parameters, as plain tensors: x [64, 2], y [64, 1], W1 [2, 16], b1 [16], W2 [16, 1],
    b2 [1]."""
    x: torch.Tensor
    y: torch.Tensor
    params: list


def training_problem(seed=11):
    """The model the lesson trains: a smooth target of two inputs, and parameters initialised as nn.Linear does."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(SAMPLES, 2, generator=generator) * 4 - 2
    y = (1.5 * x[:, :1]).sin() * (0.5 * x[:, 1:]).cos()

    def uniform(*shape, fan_in):
        return (torch.rand(*shape, generator=generator) * 2 - 1) * fan_in ** -0.5
    params = [uniform(2, HIDDEN, fan_in=2), uniform(HIDDEN, fan_in=2), uniform(HIDDEN, 1, fan_in=HIDDEN),
              uniform(1, fan_in=HIDDEN)]
    return Problem(x, y, params)


def torch_fit(problem, steps, lr, reset=True, sign=-1.0):
    """The same loop on torch: the losses, one per step, before that step's update. `reset=False` and `sign=+1` give
    the loops of two slips (gradients that add up over steps, a step along the gradient)."""
    params = [p.clone().requires_grad_(True) for p in problem.params]
    losses = []
    for _step in range(steps):
        W1, b1, W2, b2 = params
        pred = (problem.x @ W1 + b1).tanh() @ W2 + b2
        loss = ((pred - problem.y) * (pred - problem.y)).sum() * (1 / SAMPLES)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p.add_(p.grad * (sign * lr))
                if reset:
                    p.grad = None
        losses.append(loss.item())
    return losses


def _raised(error):
    message = str(error)
    if LEAF_IN_PLACE in message:
        return _("your loop raised the leaf error: it changed a parameter in place while grad mode was on")
    if "backward through the graph a second time" in message:
        return _("your loop raised \"Trying to backward through the graph a second time\": a backward ran through "
                 "nodes an earlier step's backward had freed")
    if "modified by an inplace operation" in message:
        return _("your loop raised the version error: a backward read a parameter its forward had saved, after an "
                 "update had changed it")
    if "NoneType" in message:
        return _("your loop raised {kind}: {error}. A parameter had no gradient at the update").format(
            kind=type(error).__name__, error=headline(message))
    return _("your loop raised {kind}: {error}").format(kind=type(error).__name__, error=str(error)[:200])


def _losses_problem(got, problem, steps, lr, before, params):
    want = torch_fit(problem, steps, lr)
    if not isinstance(got, (list, tuple)) or len(got) != steps:
        return _("with steps={steps} your function returned {what}, where the loop makes {steps} "
                 "losses").format(steps=steps, what=f"{len(got)} values" if isinstance(got, (list, tuple))
                                  else type(got).__name__)
    kinds = sorted({type(v).__name__ for v in got if isinstance(v, bool) or not isinstance(v, (int, float))})
    if kinds:
        return _("with steps={steps} your losses are {kinds}, not numbers: the cells below plot and print them as "
                 "numbers").format(steps=steps, kinds=", ".join(kinds))
    got = torch.tensor([float(v) for v in got])
    unmoved = all(torch.equal(p.data, b) for p, b in zip(params, before))
    if torch.allclose(got, torch.tensor(want), rtol=1e-4, atol=1e-6):
        return None if not unmoved else _(
            "your losses are torch's, but the parameters passed in are where they started after {steps} steps: the "
            "loop moved other values, not them").format(steps=steps)
    if unmoved:
        return _("the parameters are where they started after {steps} steps: the update never reached "
                 "them").format(steps=steps)
    for slip, line in [(dict(reset=False), _("your losses are torch's when no step resets the gradients: each "
                                             "backward added to the .grad of the steps before")),
                       (dict(sign=1.0), _("your loss grows as torch's does when every step moves the parameters "
                                          "along the gradient, not against it"))]:
        head = min(steps, 5)              # a step along the gradient diverges, and rounding with it: the first steps
        if torch.allclose(got[:head], torch.tensor(torch_fit(problem, head, lr, **slip)), rtol=1e-4, atol=1e-6):
            return line
    k = next(i for i, (a, b) in enumerate(zip(got.tolist(), want)) if abs(a - b) > 1e-4 * abs(b) + 1e-6)
    if k == 0:
        return _("with steps={steps}, lr={lr} your loss at the first step is {mine:.5f} where torch's same loop gives "
                 "{theirs:.5f}").format(steps=steps, lr=lr, mine=got[0].item(), theirs=want[0])
    return _("with steps={steps}, lr={lr} your loss at step {k} is {mine:.5f} where torch's same loop gives "
             "{theirs:.5f} (the steps before agree)").format(steps=steps, lr=lr, k=k + 1, mine=got[k].item(),
                                                              theirs=want[k])


def training_checks(engine, fit) -> Found:
    """Lesson 12, the engine's last build. The engine's `tanh` on ten one-operation expressions, then
    fit(params, x, y, steps, lr) on the engine, twice (40 steps at lr 0.1, 8 at lr 0.3), from the same start as the
    same loop on torch: one loss per step, each within 1e-4 of torch's."""
    problems = one_op_problems(_(TRAINING_NAME), engine, ("tanh",), 6)
    if problems is None or problems:
        return problems
    problem = training_problem()
    for steps, lr in RUNS:
        params = [engine(p, requires_grad=True) for p in problem.params]
        before = [p.data.clone() for p in params]
        try:
            got = fit(params, engine(problem.x), engine(problem.y), steps, lr)
        except NotImplementedError as error:
            raise Raised("`fit`", error) from error
        except Exception as error:  # reported
            return [_raised(error)]
        found = _losses_problem(got, problem, steps, lr, before, params)
        if found:
            return [found]
    return [], {"runs": len(RUNS), "steps": sum(s for s, _lr in RUNS)}


def finished_fit(params, x, y, steps, lr):
    """The last step's reference loop (a lesson cell runs on it, without its text, while the student's is not
    solved)."""
    W1, b1, W2, b2 = params
    losses = []
    for _step in range(steps):
        pred = (x @ W1 + b1).tanh() @ W2 + b2
        loss = ((pred - y) * (pred - y)).sum() * (1 / len(y.data))
        loss.backward()
        with Value.no_grad():
            for p in params:
                p.add_(p.grad * -lr)      # an optimizer's step: in place, under no_grad
                p.grad = None             # zero_grad
        losses.append(loss.data.item())
    return losses


def finished_fit_on(engine):
    """The reference loop on another engine: its `Value` (the notebook's own class, where a student writes it) is
    `engine`, whose no_grad it runs its updates under."""
    return without_text(finished_fit, Value=engine)


def fit_or_finished(fit, solved):
    """The student's fit when the last step is solved, else a finished one; says which."""
    return mine_or_finished(fit, solved, finished_fit, "fit")


TRAINING = Exercise("12", "Value", Value, training_checks, None, interface=("no_grad",),
                    label=TRAINING_NAME, answers=("Value", "fit"),
                    what=N_("your Value class"), success=N_(
                        "your engine's `tanh` saves what torch's TanhBackward0 saves, and your loop's losses are "
                        "torch's, step for step, on {runs} runs ({steps} steps in all)"))
check_training = TRAINING.check
