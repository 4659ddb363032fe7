"""What every checker shares: the feedback lines (✓, ✗, and "not solved yet" through lesson.not_solved), the
hints for the lessons' autograd errors, and the gradients each optimizer steps on, recorded and compared with the
right ones."""
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode

from gan_lessons.i18n import N_, _
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


def stub_left(name, error, function=YOUR_FUNCTION) -> bool:
    """Whether the error is nbgrader's stub (`raise NotImplementedError()`, the student copy's blank for a build
    exercise); if so, says "not solved yet", as for a `...`."""
    if not isinstance(error, NotImplementedError):
        return False
    print(_("? {name}: not solved yet. Write the body of {function} where it says `# YOUR CODE HERE` (in place of "
            "`raise NotImplementedError()`) and run the cell again.").format(name=name, function=localized(function)))
    return True


def verdict(name, problems, success) -> bool:
    """One "✓ name: success" line when there are no problems, else one "✗" line per problem; whether right.
    `problems` and `success` are shown as given: the caller translates them."""
    if not problems:
        print(_("✓ {name}: {success}").format(name=name, success=success))
        return True
    for problem in problems:
        print(_("✗ {name}: {problem}").format(name=name, problem=problem))
    return False


def raised(function_name, error, hints) -> str:
    """One feedback line for an exception from the student's code: its first clause and the hint that fits.
    `hints` is a list of (pattern in PyTorch's message, hint marked with N_()); the hint is translated here."""
    message = str(error)
    hint = ELLIPSIS_HINT if "ellipsis" in message.lower() else next(
        (h for pattern, h in hints if pattern in message), N_("read the message: it names what went wrong"))
    return _("{function} raised {kind}: {message}. Hint: {hint}.").format(
        function=function_name, kind=type(error).__name__, message=headline(message), hint=localized(hint))


AUTOGRAD_HINTS = [
    ("leaf Variable that requires grad is being used in an in-place operation",
     N_("an in-place update of a parameter must run under `with torch.no_grad():`, as optimizer.step() does "
        "(lesson 01)")),
    ("backward through the graph a second time",
     N_("a first backward freed part of the graph a second loss still needs: detach the shared tensor in the loss "
        "that must not reach it (lessons 02 and 04)")),
    ("modified by an inplace operation",
     N_("a step or an in-place op changed a tensor a pending backward saved: do that backward before the step, or "
        "detach so the backward never needs it (lesson 03)")),
]


def compare_steps(mine, reference, hint, atol=1e-6, limit=6):
    """Problems, one per parameter (then one summary line), where the student's gradients at each optimizer
    step differ from the reference: a missing step, a .grad that is None, or different values. `hint` is shown as
    given: the caller translates it."""
    problems = []
    for opt_name, ref_steps in reference.items():
        got = mine.get(opt_name, [])
        if len(got) != len(ref_steps):
            problems.append(_("{optimizer}.step() ran {runs} time(s) in {calls} call(s) of your function; it "
                              "should run once per call").format(optimizer=opt_name, runs=len(got),
                                                                 calls=len(ref_steps)))
            continue
        for k, (g_step, r_step) in enumerate(zip(got, ref_steps), 1):
            for pname, ref in r_step.items():
                g = g_step.get(pname)
                if ref is None and g is None:
                    continue
                if g is None:
                    problems.append(_("{parameter}: .grad is None at {optimizer}.step() (call {call}); it should "
                                      "hold a gradient: does the loss that trains it reach it, and did its backward "
                                      "run?").format(parameter=pname, optimizer=opt_name, call=k))
                elif ref is None:
                    problems.append(_("{parameter}: has a .grad at {optimizer}.step() (call {call}); it should be "
                                      "None").format(parameter=pname, optimizer=opt_name, call=k))
                elif g.shape != ref.shape or not torch.allclose(g, ref, atol=atol, rtol=1e-5):
                    gap = (g - ref).abs().max().item() if g.shape == ref.shape else float("nan")
                    problems.append(_("{parameter}: gradient at {optimizer}.step() (call {call}) differs from the "
                                      "right one by up to {gap:.4g}: {hint}").format(
                        parameter=pname, optimizer=opt_name, call=k, gap=gap, hint=hint))
            if problems:
                break            # the first wrong step says enough; later steps follow from it
    if len(problems) > limit:
        problems = problems[:limit] + [_("... and {count} more parameter(s) like these").format(
            count=len(problems) - limit)]
    return problems


def same_steps(got, ref_steps, atol=1e-6) -> bool:
    """Whether two records of one optimizer's steps hold the same gradients (None where the other is None)."""
    return len(got) == len(ref_steps) and all(
        step.keys() == ref.keys() and all((a is None) == (b is None) and (a is None or (
            a.shape == b.shape and torch.allclose(a, b, atol=atol, rtol=1e-5))) for a, b in
            ((step[n], ref[n]) for n in ref)) for step, ref in zip(got, ref_steps))


def matching(mine, records, atol=1e-6):
    """Whether the student's records hold the same gradients at every step of every optimizer as `records`."""
    return mine.keys() == records.keys() and all(same_steps(mine[k], records[k], atol) for k in records)


def right_answer(mine, answers, run, atol=1e-6):
    """The records of the right answer the student's match (answers: right steps written differently, such as a
    D loss summed or averaged over its two terms), else those of the first; run(step) records a step."""
    records = [run(answer) for answer in answers]
    return next((r for r in records if matching(mine, r, atol)), records[0])


def known_mistake(mine, mistakes, run, atol=1e-6):
    """The hint of the first known wrong answer whose gradients at every optimizer step are the student's, or
    None. `mistakes` is a list of (wrong_step, hint); run(step) records a step's gradients as for the reference."""
    for wrong, hint in mistakes:
        if matching(mine, run(wrong), atol):
            return hint
    return None


class _DataReads(TorchFunctionMode):
    """Counts reads of `.data` on tensors that require grad."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "__get__" and \
                getattr(getattr(func, "__self__", None), "__name__", "") == "data" and \
                args and isinstance(args[0], torch.Tensor) and args[0].requires_grad:
            self.count += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def data_reads():
    """Within the block, count every `.data` read of a tensor that requires grad: yields the counter, whose
    `count` is final on exit."""
    with _DataReads() as mode:
        yield mode


@contextmanager
def recorded_steps(optimizers, names):
    """Within the block, record every parameter's .grad (a clone, or None) each time one of `optimizers` steps;
    the hooks come off on exit, also when the block raises. Yields records: records[optimizer name] is a list
    with one {names[parameter]: grad} per step() call.

        with recorded_steps({"G": opt_G, "D": opt_D}, names) as records:
            step(G, D, opt_G, opt_D, x_real, noise)"""
    records = {name: [] for name in optimizers}
    handles = []
    for opt_name, opt in optimizers.items():
        def hook(optimizer, args, kwargs, opt_name=opt_name):
            records[opt_name].append({names[p]: (None if p.grad is None else p.grad.detach().clone())
                                      for group in optimizer.param_groups for p in group["params"]})
        handles.append(opt.register_step_pre_hook(hook))
    try:
        yield records
    finally:
        for h in handles:
            h.remove()
