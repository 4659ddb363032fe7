"""A build exercise as a declaration: the function the student writes, its reference answer, its checks, and the
problem it runs on. The declarations are what the build tool fills solution blocks from (exercises.SOLUTIONS) and
what a grader's tests judge it by: run any step on the problem, and `outcome` says what it did (the gradient every
optimizer stepped on, the values it left in every parameter and buffer it could reach, and what it returned, or
the error it raised), so a step can be told to do the same as the reference, or not, without the checker's own
words (tests/lessons/test_grader_mutants.py, benchmarks/grader_mutants.py).

Every checker is one call of `grade(exercise, answer)`: it owns what every checker says the same way ("not solved
yet" for a `...` or nbgrader's stub, a value where a function is asked for, an error the answer raised and the hint
that fits it, the ✓ line or one ✗ line per problem); the exercise's own `checks` run the answer and return what is
wrong with it."""
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from gan_lessons.exercises.feedback import localized, raised, stub_left, unanswered, verdict
from gan_lessons.exercises.steps import LEFT_HOOKS, LEFT_OFF, kept_autograd_state
from gan_lessons.i18n import N_, _

TOLERANCE = 1e-4     # two outcomes are the same within this part of the larger value's size (float32 sums in another
                     # order differ by about 1e-7 of it; two training steps can magnify that a hundredfold)


Found = list | tuple[list, dict] | None     # what an exercise's checks return (see Exercise)


class Raised(Exception):
    """An answer raised `error` while a check ran it: grade() reports it as the error `function` raised (named
    `call` where that says more: "r1_term at step 4"), with the first of `hints` (pattern in PyTorch's message,
    hint) that fits, else the exercise's. A check raises it only around the student's own code, so an error of the
    checker itself is never blamed on the student. function "": the exercise's own."""

    def __init__(self, function: str, error: Exception, hints=None, call: str = ""):
        super().__init__(function, error)
        self.function, self.error, self.hints, self.call = function, error, hints, call or function


def attempt(function: str, answer: Callable, *args, hints=None, call: str = "", **kwargs):
    """answer(*args, **kwargs), autograd's mode kept as it was (steps.kept_autograd_state); an error it raises becomes
    Raised(function, error, hints, call)."""
    try:
        with kept_autograd_state():
            return answer(*args, **kwargs)
    except Exception as error:  # the student's code: reported by grade()
        raise Raised(function, error, hints, call) from error


@dataclass(frozen=True)
class Exercise:
    """lesson ("02"), name (the student's function, as the solution block defines it), reference, checks and
    problem. checks(*answers, **options) runs the answers and returns the problems found (each a line, translated),
    or (problems, fields) where the success line has fields to fill, or None once it has said "not solved yet" of
    another argument; it raises Raised for an error of the answer.
    success: the ✓ line's text (marked with N_()). hints: (pattern, hint) for an error an answer raises. answers:
    the names of the functions checks takes, when more than the one the exercise is about (a checkpoint's save and
    its load); around(answer) makes all of them (the references for the others) for a check of this one alone.
    label: the name the feedback lines begin with (by default name; or label(answer)); what: how "not solved yet"
    names the function.
    problem: () -> (the arguments of each call, in order, each a tuple or a function that makes it just before the
    call; the objects whose state is the outcome: modules, tensors, and anything with a state_dict). result: the
    returned value as the outcome compares it (by default as it is). flags: whether the .grad and requires_grad a
    step leaves behind are part of what it must do (by default not: a gradient cleared at the end of a step instead
    of its start trains the same, and so does a network left requiring grad that the next step freezes again).
    forbids: what the exercise's text rules out even where the values come out the same, as the edits that do it
    are named (tests/lessons/mutants.py), e.g. "retain_graph=True" where no graph may be kept for nothing.
    scenario: for a function that is half of something (a checkpoint's save is half of a resumed run), the whole run
    around it instead of calls on the problem: scenario(function) returns the values an outcome compares.
    interface: where the (first) answer is a class, as an engine is, the attributes it has from its first step on,
    which it must have to be checked at all (anything else gets one line that says what was given)."""
    lesson: str
    name: str
    reference: Callable | None                          # None: an exercise with no one right answer
    checks: Callable[..., Any]
    problem: Callable[[], tuple[list, list]] | None      # None: judged by its checks alone
    success: str = ""
    hints: Any = ()
    answers: tuple[str, ...] = ()
    around: Callable[[Callable], tuple] | None = None
    label: str | Callable[[Any], str] = ""
    what: str = ""
    result: Callable[[Any], Any] = lambda value: value
    flags: bool = False
    forbids: tuple[str, ...] = ()
    scenario: Callable[[Callable], Any] | None = None
    interface: tuple[str, ...] = ()

    def check(self, *answers, **options) -> bool:
        """grade(self, ...); given one answer where the exercise takes several, the others are the references."""
        if self.around is not None and len(answers) == 1:
            answers = self.around(answers[0])
        return grade(self, *answers, **options)


def grade(exercise: Exercise, *answers, **options) -> bool:
    """The one grading function: prints the feedback and says whether the answers are right. An answer still `...`,
    a value where a function is asked for, or nbgrader's stub: "not solved yet"; an error an answer raised: that
    error and the hint that fits it; else the problems exercise.checks found, one ✗ line each, or the ✓ line."""
    label = exercise.label(answers[0]) if callable(exercise.label) else localized(exercise.label or exercise.name)
    for k, (name, answer) in enumerate(zip(exercise.answers or (exercise.name,), answers)):
        what = exercise.what if exercise.what and k == 0 else _("your {function}").format(function=name)
        if unanswered(label, answer, what):
            return False
    if exercise.interface and not _is_class_with(label, answers[0], exercise.interface, exercise.what):
        return False
    grad_mode = torch.is_grad_enabled()
    LEFT_OFF.clear()
    LEFT_HOOKS.clear()
    function = exercise.what and localized(exercise.what) or exercise.name
    left_off = _("autograd was left off after {function} returned (torch.is_grad_enabled() is False): every forward "
                 "after it would build no graph, and the next backward would raise").format(function=function)
    hooks_left = _("saved-tensor hooks that {function} entered were still on after it returned: every graph built "
                   "after it would pack its saved tensors through them").format(function=function)
    try:
        with kept_autograd_state():         # the notebook's next cells run as they did before the check
            found = exercise.checks(*answers, **options)
    except Raised as failure:
        if stub_left(label, failure.error, failure.function or exercise.name):
            return False
        if LEFT_HOOKS:                # an earlier call's hooks were taken off: a later call's exit of them
            return verdict(label, [hooks_left], "")         # fails inside torch, and that is the cause
        if grad_mode and True in LEFT_OFF:                                      # an earlier call left it off:
            return verdict(label, [raised(failure.call or exercise.name, failure.error, ()), left_off], "")  # that
        hints = exercise.hints if failure.hints is None else failure.hints            # is the cause, not the hint's
        return verdict(label, [raised(failure.call or exercise.name, failure.error, hints)], "")
    except SystemExit as error:       # sys.exit() in an answer: a line, not the end of the kernel's cell
        return verdict(label, [_("your {function} called sys.exit({code}): an answer returns (or raises) "
                                 "instead").format(function=exercise.name, code=error.code)], "")
    except Exception:
        if grad_mode and True in LEFT_OFF:                  # the checker's own code, run after the answer left
            return verdict(label, [left_off], "")           # autograd off, could not record
        raise
    off = grad_mode and True in LEFT_OFF
    if found is None:                 # the checks said "not solved yet" of an argument themselves
        return False
    problems, fields = found if isinstance(found, tuple) else (found, {})
    if off:
        problems = [*problems, left_off]
    if LEFT_HOOKS:
        problems = [*problems, hooks_left]
    return verdict(label, problems, _(exercise.success).format(**fields) if exercise.success and not problems else "")


def _is_class_with(label, answer, names, what) -> bool:
    """Whether answer is a class with every attribute in names; if not, one line says what it was given."""
    missing = [n for n in names if not hasattr(answer, n)]
    if isinstance(answer, type) and not missing:
        return True
    given = (_("the class {name}, which has no {missing}").format(name=answer.__name__, missing=", ".join(missing))
             if isinstance(answer, type) else _("a {kind}").format(kind=type(answer).__name__))
    print(_("✗ {name}: this check takes {what}, the class itself, and was given {given}.").format(
        name=label, what=localized(what or N_("your Value class")), given=given))
    return False


def backward_through(value):
    """A returned loss term as an outcome compares it: its value, after a backward through it when it has a graph,
    so that the gradients it gives land in the watched modules' .grad (compared with flags=True)."""
    if isinstance(value, torch.Tensor) and value.requires_grad:
        value.backward()
    return value.detach() if isinstance(value, torch.Tensor) else value


@dataclass(frozen=True)
class Outcome:
    """What a step did on an exercise's problem: the error it raised (its type's name), or None and the values."""
    error: str | None
    values: tuple


def _values(thing, flags=False) -> list:
    """Every number `thing` holds, as tensors and plain values, in a fixed order (with each tensor's .grad and
    requires_grad, with flags)."""
    def grad_of(t):
        if not flags:
            return []
        return [t.requires_grad, None if not t.is_leaf or t.grad is None else t.grad.detach().clone()]
    if isinstance(thing, nn.Module):
        out: list = []
        for _name, p in thing.named_parameters():
            out += [p.detach().clone(), *grad_of(p)]
        return out + [b.detach().clone() for _name, b in thing.named_buffers()]
    if isinstance(thing, torch.Tensor):
        return [thing.detach().clone(), *grad_of(thing)]
    if isinstance(thing, dict):
        return [v for key in sorted(thing, key=str) for v in [key, *_values(thing[key], flags)]]
    if isinstance(thing, (list, tuple)):
        return [v for item in thing for v in _values(item, flags)]
    if isinstance(thing, torch.optim.Optimizer):
        return []           # what it did is in the parameters it stepped
    if hasattr(thing, "state_dict"):
        return _values(thing.state_dict(), flags)
    return [thing] if isinstance(thing, (bool, int, float, str, type(None))) else []


def _optimizers(thing, found: list) -> list:
    """The optimizers among a call's arguments (in containers and attributes of modules too), in order, once each."""
    if isinstance(thing, torch.optim.Optimizer):
        if all(thing is not seen for seen in found):
            found.append(thing)
    elif isinstance(thing, (list, tuple)):
        for item in thing:
            _optimizers(item, found)
    elif isinstance(thing, dict):
        for item in thing.values():
            _optimizers(item, found)
    elif isinstance(thing, nn.Module):
        for value in vars(thing).values():
            if isinstance(value, torch.optim.Optimizer):
                _optimizers(value, found)
    return found


def _recorder(stepped: list, number: int):
    """A step pre-hook that notes the optimizer's number and the gradient of each of its parameters."""
    def hook(optimizer, args, kwargs):
        stepped.extend([number, *[None if p.grad is None else p.grad.detach().clone()
                                  for group in optimizer.param_groups for p in group["params"]]])
    return hook


def outcome(exercise: Exercise, step: Callable) -> Outcome:
    """Run `step` on a fresh problem, each call after torch.manual_seed(100 + k) (randomness drawn inside a step
    repeats from run to run). What it did: the gradient every optimizer among the arguments stepped on at each of
    its steps, in the order they ran (what training does with them depends on the optimizer: Adam hides a constant
    factor that plain SGD would not), then the values the objects hold after the last call and what it returned."""
    if exercise.scenario is not None:
        try:
            return Outcome(None, tuple(_values(exercise.scenario(step))))
        except Exception as error:  # an outcome like any other
            return Outcome(type(error).__name__, ())
    assert exercise.problem is not None, exercise.name
    calls, watched = exercise.problem()
    stepped: list = []
    optimizers: list = []
    handles = []
    results = []
    try:
        for k, args in enumerate(calls):
            args = args() if callable(args) else args        # a call's arguments, made just before it
            for opt in _optimizers(args, []):
                if all(opt is not seen for seen in optimizers):
                    optimizers.append(opt)
                    handles.append(opt.register_step_pre_hook(_recorder(stepped, len(optimizers))))
            torch.manual_seed(100 + k)
            with kept_autograd_state():            # a step that leaves autograd off must not turn it off for the next
                results.append(exercise.result(step(*args)))
    except Exception as error:  # an outcome like any other
        return Outcome(type(error).__name__, ())
    finally:
        for handle in handles:
            handle.remove()
    return Outcome(None, tuple(stepped + _values(watched, exercise.flags) + _values(results)))


def _same(a, b, tolerance) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if not a.is_floating_point():
            return torch.equal(a, b)
        finite = a.isfinite() & b.isfinite()
        if not torch.equal(a.isfinite(), b.isfinite()) or \
                not torch.equal(a[~finite].nan_to_num(), b[~finite].nan_to_num()):
            return False                # an inf or nan (an overflow, on purpose) only where the other has the same
        a, b = a[finite], b[finite]
        scale = max(a.abs().max().item(), b.abs().max().item()) if a.numel() else 0.0
        return bool(((a - b).abs() <= tolerance * scale + 1e-6).all())
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= tolerance * max(abs(a), abs(b)) + 1e-6
    return type(a) is type(b) and a == b


def same(a: Outcome, b: Outcome, tolerance: float = TOLERANCE) -> bool:
    """Whether two outcomes are the same: the same error, or every value equal within `tolerance`."""
    if a.error or b.error:
        return a.error == b.error
    return len(a.values) == len(b.values) and all(_same(x, y, tolerance) for x, y in zip(a.values, b.values))
