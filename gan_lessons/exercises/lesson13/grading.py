"""What every lab of lesson 13 shares: a Lab runs a step on the lab's own models and records the gradient every
optimizer steps on; lab_checks compares it with the reference fix's through the grading engine (steps.py), says what
differs, and names a known wrong fix when the run matches it."""
import functools

import torch

from gan_lessons.exercises.exercise import Exercise, Found, Raised
from gan_lessons.exercises.steps import close, first_difference, flat, known_mistake, prefix, recorded_steps
from gan_lessons.i18n import N_, _

# What an error a lab's step raises means, said as what happened, never as what to change: the lab is for finding
# that (lessons 01 to 10's AUTOGRAD_HINTS add the fix; here the fix is the student's to find).
LAB_HINTS = [
    ("leaf Variable that requires grad is being used in an in-place operation",
     N_("a parameter was changed in place while autograd was recording")),
    ("backward through the graph a second time",
     N_("this backward needed tensors that an earlier backward had already freed")),
    ("modified by an inplace operation",
     N_("a tensor saved for this backward was changed in place after the forward that saved it")),
    ("does not currently support double backward",
     N_("the second differentiation (a backward through a gradient that has a graph of its own) went through a "
        "module compiled with an AOT backend (aot_eager, inductor)")),
    ("does not require grad and does not have a grad_fn",
     N_("nothing in that loss requires grad: no parameter it should train is reached from it")),
    ("unscale_() has already been called on this optimizer",
     N_("scaler.unscale_ ran twice on one optimizer in one iteration (scaler.step unscales by itself)")),
    ("Attempted step but _scale is None",
     N_("scaler.step ran before the scaler had scaled any loss: no scaler.scale(...) had gone into a backward yet")),
    ("step() has already been called since the last update()",
     N_("scaler.step ran on an optimizer that it had already stepped in this iteration: no scaler.update() came "
        "between the two calls (the scaler keeps one record per optimizer per iteration, and update() ends it)")),
]


# --- the labs ------------------------------------------------------------------------------------------------------
class Lab:
    """One lab: problem(seed) -> (args for each call, {optimizer name: optimizer}, {parameter: name}, state); the
    reference step; the calls made; known wrong fixes [(step, hint)]; extra(state_mine, state_ref) -> problems, and
    first(...) likewise, judged before the gradients are compared; exact(step) -> problems, judged once the
    gradients match, before extra."""

    def __init__(self, name, title, problem, reference, calls, mistakes=(), extra=None, atol=1e-4, first=None,
                 hints=None, exact=None):
        self.name, self.title, self.problem, self.reference = name, title, problem, reference
        self.hints = (hints or []) + LAB_HINTS   # (pattern, hint) for an error the step raises: this lab's first
        self.calls, self.mistakes, self.extra, self.atol = calls, list(mistakes), extra, atol
        self.first = first          # first(state_mine, state_ref) -> problems, judged before the gradients
        self.exact = exact

    def run(self, step, skip=()):
        args, opts, names, state = self.problem()
        for name in skip:                   # an optimizer whose step() does nothing: what happens without it
            opts[name].step = lambda *a, **k: None
        error = None
        with recorded_steps(opts, names) as records:
            try:
                for k in range(self.calls):
                    torch.manual_seed(100 + k)          # randomness drawn inside a step repeats run to run
                    step(*args(k))
            except Exception as e:  # reported by the checker
                error = e
        return records, state, error


LABS: dict = {}


# --- what a lesson cell measures to check a prediction about a broken step ------------------------------------------
def step_that_clears_the_error(name, step):
    """The optimizer whose step(), made to do nothing, lets `step` run to the end without its error (the step that
    changes what a later backward still needs), or None."""
    lab = LABS[name]
    if lab.run(step)[2] is None:
        return None
    return next((opt for opt in lab.problem()[1] if lab.run(step, skip=(opt,))[2] is None), None)


def first_wrong_step(name, step, optimizer):
    """The first of `optimizer`'s steps (1-based), in the grader's run of `step`, not on the reference's gradients; 0
    when every one is. (After it, the weights differ from the reference's, and so does every later gradient.)"""
    lab = LABS[name]
    mine, ref = lab.run(step)[0][optimizer], lab.run(lab.reference)[0][optimizer]
    return next((k for k, (a, b) in enumerate(zip(mine, ref), 1) if not close(flat(a), flat(b), lab.atol)), 0)


def gradient_ratio(name, step, optimizer, k=1):
    """The norm of the gradient `optimizer` stepped on at its k-th step in the grader's run, over the reference's."""
    lab = LABS[name]
    mine, ref = lab.run(step)[0][optimizer][k - 1], lab.run(lab.reference)[0][optimizer][k - 1]
    return (flat(mine).norm() / flat(ref).norm()).item()


def add_lab(lab):
    LABS[lab.name] = lab
    return lab


def lab_calls(lab):
    """A lab's problem as an exercise declares it: () -> (the arguments of each call, the objects to compare)."""
    def problem():
        args, _optimizers, names, state = lab.problem()
        return [functools.partial(args, k) for k in range(lab.calls)], [list(names), state]
    return problem


def lab_checks(lab, answer) -> Found:
    """What is wrong with a lab's answer: the first optimizer step whose gradients differ from the reference fix's
    (and the known wrong fix the run matches), or what the lab's own checks find."""
    mine, state, error = lab.run(answer)
    if error is not None:
        raise Raised("", error, lab.hints)
    ref, ref_state, ref_error = lab.run(lab.reference)
    assert ref_error is None, ref_error
    before, problems = lab.first(state, ref_state) if lab.first else ({}, [])
    if problems:                # what went wrong first in time: a gradient before that call, or that call's steps
        earlier = first_difference(prefix(mine, before), prefix(ref, before), lab.atol, causes=False)
        return [earlier] if earlier else problems
    wrong = first_difference(mine, ref, lab.atol, causes=False)
    if wrong:
        hint = known_mistake(mine, lab.mistakes, lambda step: lab.run(step)[0], lab.atol)
        if hint:
            hint = _(hint)
            hint = hint[:1].upper() + hint[1:]
        problems.append(_("{problem}. {hint}").format(problem=wrong, hint=hint) if hint else wrong)
    elif lab.exact and (exact := lab.exact(answer)):
        problems += exact
    elif lab.extra:
        problems += lab.extra(state, ref_state)
    return problems


def lab_exercise(name, reference, lab, success) -> Exercise:
    """A lab as an exercise: the student's `name` is graded by lab_checks on `lab`'s problem."""
    return Exercise("13", name, reference, functools.partial(lab_checks, lab), lab_calls(lab), success=success)
