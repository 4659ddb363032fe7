"""Lesson 02's exercise: seed 004's step, fixed (check_seed004_step)."""
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.overrides import TorchFunctionMode

from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, raised, stub_left, unanswered, verdict
from gan_lessons.exercises.steps import compare_steps, recorded_steps, same_steps
from gan_lessons.i18n import N_, _

CALLS = 3


def _seed004_models():
    torch.manual_seed(0)
    model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
    optimizer1 = optim.Adam(model1.parameters(), lr=0.001, betas=(0.5, 0.999))
    optimizer2 = optim.Adam(model2.parameters(), lr=0.001, betas=(0.5, 0.999))
    data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
    return model1, model2, optimizer1, optimizer2, data, label


def reference_seed004_step(model1, model2, optimizer1, optimizer2, data, label):
    """One step of seed 004's loop with the detach fix (lesson 02): l2 stops at model2, so its backward frees
    nothing l1 needs, computes no gradient for model1, and no graph is kept."""
    a = model1(data)
    b = model2(a.detach())
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    optimizer2.zero_grad()
    l2.backward()
    optimizer2.step()
    optimizer1.zero_grad()
    l1.backward()
    optimizer1.step()


class _RetainedBackwards(TorchFunctionMode):
    """Counts the backward() calls made with retain_graph=True."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.backward and (kwargs or {}).get("retain_graph"):
            self.count += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def _watched(model1):
    """Within the block: how many gradients autograd computes for model1.weight, and how many backward() calls
    keep their graph."""
    into_model1 = []
    handle = model1.weight.register_hook(lambda grad: into_model1.append(1))
    try:
        with _RetainedBackwards() as retained:
            yield into_model1, retained
    finally:
        handle.remove()


def _run_seed004(step, calls=CALLS):
    """Run step `calls` times on seed 004's models: the gradients each optimizer steps on, how many gradients reached
    model1.weight, how many backward() calls retained their graph, and the error, if one came out of step."""
    model1, model2, optimizer1, optimizer2, data, label = _seed004_models()
    names = {p: f"model1.{n}" for n, p in model1.named_parameters()}
    names.update({p: f"model2.{n}" for n, p in model2.named_parameters()})
    run = {"error": None}
    with recorded_steps({"optimizer1": optimizer1, "optimizer2": optimizer2}, names) as records:
        with _watched(model1) as (into_model1, retained):
            try:
                for _call in range(calls):
                    step(model1, model2, optimizer1, optimizer2, data, label)
            except Exception as error:  # reported by the checker
                run["error"] = error
    run.update(records=records, into_model1=len(into_model1), retained=retained.count)
    return run


SEED004_HINTS = [
    ("backward through the graph a second time",
     N_("l2.backward() went on into model1 and freed its part of the graph, which l1.backward() still needs: what "
        "model2 is given is still joined to model1's graph (section 4)")),
    ("does not require grad and does not have a grad_fn",
     N_("that loss has no graph at all: a detach() (or torch.no_grad()) cut the very path it must train through; "
        "l1 trains model1 through a itself")),
] + AUTOGRAD_HINTS


def _first_calls_agree(mine, reference) -> bool:
    """Whether each optimizer's first step got the right gradients (so a later difference is carried over)."""
    return all(same_steps(mine.get(k, [])[:1], steps[:1]) for k, steps in reference.items())


def check_seed004_step(fixed_step, calls=CALLS) -> bool:
    """Lesson 02. fixed_step(model1, model2, optimizer1, optimizer2, data, label): one step of seed 004's loop that
    runs, gives every parameter, at its optimizer's step, the gradient the loop means (l1's for model1, l2's for
    model2), and wastes nothing: l2's backward computes no gradient for model1 that optimizer1.zero_grad() would
    throw away, and no backward keeps a graph (retain_graph=True) that no later backward needs."""
    name = "fixed_step"
    if unanswered(name, fixed_step, _("your fixed_step")):
        return False
    reference = _run_seed004(reference_seed004_step, calls)
    run = _run_seed004(fixed_step, calls)
    if run["error"] is not None:
        if stub_left(name, run["error"]):
            return False
        return verdict(name, [raised("fixed_step", run["error"], SEED004_HINTS)], "")
    mine, leaks = run["records"], run["into_model1"] > reference["into_model1"]
    problems = compare_steps(mine, reference["records"], _("l1 alone must train model1, and l2 alone model2, each "
                                                            "after its own zero_grad()"))
    cleared = [k for k, steps in mine.items() if k in reference["records"] and steps and all(
        g is None or not g.any() for step in steps for g in step.values())]
    if problems and cleared:
        problems = [_("at every {optimizer}.step() its parameters' .grad held nothing (None or zeros): they were "
                      "cleared after the backward of its loss and before the step, which then steps on "
                      "nothing").format(optimizer=cleared[0])]
    elif problems and all(len(mine.get(k, [])) == len(v) for k, v in reference["records"].items()):
        if leaks and not same_steps(mine["optimizer1"][:1], reference["records"]["optimizer1"][:1]):
            problems = [_("model1 stepped on l1's gradient plus l2's: l2's backward went on into model1 and nothing "
                          "cleared it before optimizer1.step(), so one loss's gradient is counted in another's step: "
                          "what model2 is given is still joined to model1's graph")]
        elif _first_calls_agree(mine, reference["records"]):
            stale = [k for k, steps in reference["records"].items() if not same_steps(mine[k], steps)]
            problems = [_("the first call is right, the later ones are not: at {optimizer}.step() the .grad still "
                          "held the previous call's gradient, and backward() adds to it (lesson 01); call "
                          "{optimizer}.zero_grad() before the backward of its loss, in every call").format(
                optimizer=stale[0])]
    if not problems and leaks:
        problems.append(_("the gradients are right, but l2's backward went on into model1 and computed a gradient "
                          "there that optimizer1.zero_grad() throws away, and retain_graph=True kept model1's saved "
                          "tensors alive for l1: what model2 is given is still joined to model1's graph, so l2 does "
                          "not stop at model2 (section 4)") if run["retained"] else
                        _("the gradients are right, but l2's backward went on into model1 and computed a gradient "
                          "there that optimizer1.zero_grad() throws away (a second forward of model1 for model2?): "
                          "what model2 is given is still joined to model1's graph, so l2 does not stop at model2 "
                          "(section 4)"))
    elif not problems and run["retained"]:
        problems.append(_("the gradients are right, but {retained} backward() call(s) in {calls} calls of your step "
                          "used retain_graph=True, which keeps every saved tensor of that graph alive (section 3) "
                          "though no later backward goes through it: no graph here is used twice").format(
            retained=run['retained'], calls=calls))
    return verdict(name, problems, _("it runs, all 4 parameters get their own loss's gradient at every optimizer "
                                     "step ({calls} calls), l2 stops at model2, and no graph is kept").format(
        calls=calls))
