"""What every checker shares: the feedback lines (✓, ✗, and "not solved yet" through lesson.not_solved) and the
hints for the lessons' autograd errors. The gradients each optimizer steps on are recorded and compared in
steps.py, the one grading engine."""
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode

from gan_lessons.i18n import N_, _, tidy
from gan_lessons.lesson import headline, not_solved

# Hints are marked with N_() where they are written (here, and in each lesson's tables of (pattern, hint)) and
# translated where they are shown: raised() passes every hint through _(). The patterns are PyTorch's own words,
# matched against its messages, and stay as they are.
ELLIPSIS_HINT = N_("a `...` is still in your function: replace it with your code")
YOUR_FUNCTION = N_("your function")      # what a checker names the student's function when its caller does not say


def localized(text: str) -> str:
    """`text` in the language in use, when it is a message the catalog knows (one marked with N_(), or already
    translated by _()); any other text (a name, an identifier, "") comes back as it is."""
    return _(text) if text else text


def unanswered(name, answer, what=YOUR_FUNCTION) -> bool:
    """Whether my_answer is not yet a function to check: still `...` (not solved yet), or a value. Says which."""
    what = localized(what)
    if answer is ...:
        not_solved(name, what, where="my_answer = ...")
        return True
    if not callable(answer):
        print(_("✗ {name}: my_answer is not a function but a value of type {kind}. Point it at {what}, without "
                "calling it (no parentheses).").format(name=name, kind=type(answer).__name__, what=what))
        return True
    return False


def stub_line(name, function=YOUR_FUNCTION) -> str:
    """The one "not solved yet" line for a build exercise whose nbgrader stub (`raise NotImplementedError()`, the
    student copy's blank) is still there."""
    return _("? {name}: not solved yet. Write the body of {function} where it says `# YOUR CODE HERE` (in place of "
             "`raise NotImplementedError()`) and run the cell again.").format(name=name, function=localized(function))


def stub_left(name, error, function=YOUR_FUNCTION) -> bool:
    """Whether the error is nbgrader's stub; if so, says "not solved yet" (stub_line), as for a `...`."""
    if not isinstance(error, NotImplementedError):
        return False
    print(stub_line(name, function))
    return True


def verdict(name, problems, success) -> bool:
    """One "✓ name: success" line when there are no problems, else one "✗" line per problem; whether right.
    `problems` and `success` are shown as given: the caller translates them."""
    if not problems:
        print(tidy(_("✓ {name}: {success}").format(name=name, success=success)))
        return True
    for problem in problems:
        print(tidy(_("✗ {name}: {problem}").format(name=name, problem=problem)))
    return False


def _numbers(value):
    """A returned loss, or a tuple of them, as a tuple of floats; None when it is something else."""
    if isinstance(value, torch.Tensor):
        return (value.detach().double().item(),) if value.numel() == 1 else None
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
        parts = [_numbers(v) for v in value]
        return None if None in parts else tuple(x for part in parts for x in part)
    return None


def returned(name, value, right, what) -> list:
    """What is wrong with what a step returned, where the exercise asks it to return `what` (a loss, or a tuple of
    them) and `right` holds what the accepted answers return on the same problem: [] when it is one of those."""
    got, expected = _numbers(value), [_numbers(r) for r in right]
    if got is None or len(got) != len(expected[0]):
        kind = "None" if value is None else type(value).__name__
        if isinstance(value, (tuple, list)) and value and not all(isinstance(v, torch.Tensor) for v in value):
            kind = _("a {kind} of {items}").format(kind=kind, items=", ".join(type(v).__name__ for v in value))
        return [_("{name} returned {kind}, where the exercise asks it to return {what}").format(
            name=name, kind=kind, what=what)]
    if not any(all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(got, e)) for e in expected):
        return [_("{name} returned {got}, where {what} is {right} on the checker's batch").format(
            name=name, got=", ".join(f"{x:.4g}" for x in got), what=what,
            right=", ".join(f"{x:.4g}" for x in expected[0]))]
    return []


def raised(function_name, error, hints) -> str:
    """One feedback line for an exception from the student's code: its first clause and the hint that fits.
    `hints` is a list of (pattern in PyTorch's message, hint marked with N_()); the hint is translated here."""
    message = str(error)
    hint = ELLIPSIS_HINT if "ellipsis" in message.lower() else next(
        (h for pattern, h in hints if pattern in message), N_("read the message: it names what went wrong"))
    return _("{function} raised {kind}: {message}. Hint: {hint}.").format(
        function=function_name, kind=type(error).__name__, message=headline(message), hint=localized(hint))


# what an accumulation with one backward for all its micro-batches shows (lessons 10 and 14)
ONE_BACKWARD = N_("{count} backward reached D before its step, where each of its accum={accum} micro-batches has a "
                  "backward of its own: one backward of the micro-batches' summed losses keeps all their graphs "
                  "alive at once, the memory accumulation is there to save")

AUTOGRAD_HINTS = [
    ("leaf Variable that requires grad is being used in an in-place operation",
     N_("a parameter that requires grad was changed in place while autograd was recording, which autograd refuses "
        "(lesson 01)")),
    ("backward through the graph a second time",
     N_("a backward went back through a part of the graph that an earlier backward had already freed: two of your "
        "losses share that part (lessons 02 and 04)")),
    ("modified by an inplace operation",
     N_("a tensor saved for a backward still to come was changed in place after it was saved, by an optimizer's "
        "step or an in-place op (lesson 03)")),
]

SCALER_HINTS = [    # the errors a GradScaler raises, each with what it means (lessons 10 and 13)
    ("unscale_() has already been called on this optimizer since the last update()",
     N_("scaler.unscale_ ran twice on one optimizer in one iteration (scaler.step unscales by itself)")),
    ("No inf checks were recorded for this optimizer",
     N_("scaler.step(opt) found no gradient to unscale: every .grad of that optimizer's parameters was None when "
        "it ran")),
    ("Attempted step but _scale is None",
     N_("scaler.step ran before the scaler had scaled any loss: no scaler.scale(...) had gone into a backward yet")),
    ("No inf checks were recorded prior to update",
     N_("scaler.update() ran before any scaler.step of this iteration had checked its gradients for inf")),
]


class _DataUses(TorchFunctionMode):
    """Counts reads of `.data` on tensors that require grad, and assignments to it."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("__get__", "__set__") and \
                getattr(getattr(func, "__self__", None), "__name__", "") == "data" and \
                args and isinstance(args[0], torch.Tensor) and args[0].requires_grad:
            self.count += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def data_uses():
    """Within the block, count every `.data` of a tensor that requires grad, read (`p.data.add_(...)`) or assigned
    (`p.data = ...`): yields the counter, whose `count` is final on exit."""
    with _DataUses() as mode:
        yield mode
