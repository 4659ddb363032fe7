"""Lesson 02's exercise: a chain of three models, each trained by the losses that should train it (check_chain_step).

model1 -> model2 -> model3, each with its loss: l1 trains model1; l2 trains model2 and model1 (model2 is a head on
model1's output); l3 trains model3 alone (a probe that must not change what it reads). The checker records the
gradients each optimizer steps on, splits a wrong one into the losses it came from, and counts what is wasted."""
from contextlib import contextmanager
from itertools import combinations

import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.exercises.exercise import Exercise, Found, Raised
from gan_lessons.exercises.feedback import AUTOGRAD_HINTS
from gan_lessons.exercises.steps import (
    Backwards,
    close,
    compare_steps,
    flat,
    left_as_given,
    parameter_names,
    recorded_steps,
    same_steps,
)
from gan_lessons.i18n import N_, _

CALLS = 3
LOSSES = ("l1", "l2", "l3")
TRAINS = {"optimizer1": ("l1", "l2"), "optimizer2": ("l2",), "optimizer3": ("l3",)}   # what each optimizer steps on
REACHES = {"optimizer1": LOSSES, "optimizer2": ("l2", "l3"), "optimizer3": ("l3",)}    # what could reach its model


def _chain_models():
    """The three models, their optimizers, a batch, and every .grad holding an earlier gradient (as mid-training)."""
    torch.manual_seed(0)
    model1, model2, model3 = nn.Linear(10, 2), nn.Linear(2, 2), nn.Linear(2, 2)
    optimizers = [optim.Adam(m.parameters(), lr=0.001, betas=(0.5, 0.999)) for m in (model1, model2, model3)]
    data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
    model3(model2(model1(torch.randn(4, 10)))).square().mean().backward()
    return model1, model2, model3, *optimizers, data, label


def reference_chain_step(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    """One step of the chain: l3 stops at model3, l2 goes on into model1; one backward for the three losses."""
    a = model1(data)
    b = model2(a)                   # l2 goes on into model1: no cut here
    c = model3(b.detach())          # l3 stops at model3
    loss = F.cross_entropy(a, label) + F.cross_entropy(b, label) + F.cross_entropy(c, label)
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.zero_grad()
    loss.backward()                 # one backward: each loss reaches only what it may
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.step()


@contextmanager
def _watched(models):
    """Within the block: how often each model runs forward, and how often a gradient comes back into model2's
    output (into its part of the graph)."""
    counts = {"forwards": [0] * len(models), "into_model2": 0}

    def arrived(grad):
        counts["into_model2"] += 1

    def forward_hook(k):
        def hook(module, args, output):
            counts["forwards"][k] += 1
            if k == 1 and output.requires_grad:
                output.register_hook(arrived)
        return hook
    handles = [m.register_forward_hook(forward_hook(k)) for k, m in enumerate(models)]
    try:
        with Backwards() as backwards:
            yield counts, backwards
    finally:
        for h in handles:
            h.remove()


def _run_chain(step, calls=CALLS):
    """Run step `calls` times on fresh models: the gradients each optimizer stepped on, the forward and gradient
    counts, the needless retains, and the error, if one came out of step."""
    model1, model2, model3, *optimizers, data, label = _chain_models()
    models = (model1, model2, model3)
    names = parameter_names(model1=model1, model2=model2, model3=model3)
    run = {"error": None}
    with left_as_given("chain_step", dict(zip(("model1", "model2", "model3"), models)),
                       {"data": data, "label": label}) as side_effects:
        with recorded_steps(dict(zip(TRAINS, optimizers)), names) as records:
            with _watched(models) as (counts, backwards):
                try:
                    for _call in range(calls):
                        step(*models, *optimizers, data, label)
                except Exception as error:  # reported by the checker
                    run["error"] = error
    run.update(records=records, needless=backwards.needless_retains(), **counts, side_effects=side_effects)
    return run


def _parts():
    """Each loss's own gradient for each optimizer's parameters, on the fresh models, as if nothing were cut."""
    model1, model2, model3, *optimizers, data, label = _chain_models()
    a = model1(data)
    b = model2(a)
    losses = dict(zip(LOSSES, (F.cross_entropy(a, label), F.cross_entropy(b, label),
                               F.cross_entropy(model3(b), label))))
    parts = {}
    for opt_name, optimizer in zip(TRAINS, optimizers):
        params = [p for group in optimizer.param_groups for p in group["params"]]
        parts[opt_name] = {}
        for loss in REACHES[opt_name]:
            grads = torch.autograd.grad(losses[loss], params, retain_graph=True)
            parts[opt_name][loss] = torch.cat([g.flatten() for g in grads])
    return parts


def _which_losses(got, parts):
    """The set of losses whose gradients add up to `got`, or None when no set of them does."""
    scale = max(v.abs().max().item() for v in parts.values())
    for size in range(len(parts) + 1):
        for chosen in combinations(parts, size):
            total = sum((parts[k] for k in chosen), torch.zeros_like(got))
            if close(got, total, 1e-5, scale):
                return set(chosen)
    return None


def _names(losses):
    return " + ".join(sorted(losses)) if losses else _("no loss")


def _mixed_up(mine):
    """One line per optimizer whose first step took its gradient from other losses than the ones that train it,
    naming them; [] when each first step is right or is no sum of the losses' gradients."""
    parts, problems = _parts(), []
    for opt_name, should in TRAINS.items():
        steps = mine.get(opt_name, [])
        if not steps or any(g is None for g in steps[0].values()):
            continue
        got = _which_losses(flat(steps[0]), parts[opt_name])
        if got is None or got == set(should):
            continue
        why = []
        if "l3" in got:
            why.append(_("l3 must train model3 alone, yet its gradient went on into the models before it"))
        if "l2" in set(should) - got:
            why.append(_("l2 must train model1 too, yet no part of l2's gradient was in model1's .grad at that step"))
        if not why:
            why.append(_("each model steps on the losses named in the exercise, and on those alone"))
        problems.append(_("at its first step, {optimizer} stepped on the gradient of {got}, where it should step on "
                          "that of {should}: {why}").format(optimizer=opt_name, got=_names(got),
                                                            should=_names(should), why="; ".join(why)))
    return problems


HINTS = [
    ("backward through the graph a second time",
     N_("one backward freed a part of the graph that a later backward still goes back through: two of your losses "
        "share that part (sections 4 and 5)")),
    ("does not require grad and does not have a grad_fn",
     N_("that loss has no graph at all: a detach() (or torch.no_grad()) cut the very path it must train through")),
] + AUTOGRAD_HINTS


def _waste(run, calls):
    """What a run whose gradients are right still wastes, one line each."""
    problems = []
    if run["into_model2"] > calls:
        problems.append(_("the gradients are right, but a backward went on from model3 into model2 and computed "
                          "gradients there and in model1 that a zero_grad() then threw away: l3 does not stop at "
                          "model3"))
    extra = [f"model{k + 1}" for k, n in enumerate(run["forwards"]) if n > calls]
    if extra:
        problems.append(_("the gradients are right, but {models} ran more than one forward per call: each model's "
                          "output is computed once and feeds everything that reads it").format(models=", ".join(extra)))
    if run["needless"]:
        problems.append(_("the gradients are right, but {count} backward() call(s) in {calls} calls of your step kept "
                          "their graph (retain_graph=True) though no later backward went through any of it: every "
                          "saved tensor of that graph stayed alive for nothing (section 3)").format(
            count=run["needless"], calls=calls))
    return problems


def chain_checks(chain_step, calls=CALLS) -> Found:
    """Lesson 02. chain_step(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label): one step of
    the chain that runs and gives every model, at its optimizer's step, the gradient of the losses that train it
    (l1 and l2 for model1, l2 for model2, l3 for model3), each step on a fresh gradient, and wastes nothing: no
    gradient of l3 computed in model2 or model1, one forward per model, no graph kept that no backward needs."""
    reference = _run_chain(reference_chain_step, calls)
    run = _run_chain(chain_step, calls)
    if run["error"] is not None:
        raise Raised("chain_step", run["error"])
    if run["side_effects"]:           # told alone: a changed batch changes every gradient after it
        return run["side_effects"], {"calls": calls}
    mine, right = run["records"], reference["records"]
    problems = compare_steps(mine, right)
    if problems:
        counted = all(len(mine.get(k, [])) == len(v) for k, v in right.items())
        cleared = [k for k, steps in mine.items() if steps and all(
            g is None or not g.any() for step in steps for g in step.values())]
        first_right = counted and all(same_steps(mine[k][:1], v[:1]) for k, v in right.items())
        if cleared:
            problems = [_("at every {optimizer}.step() its parameters' .grad held nothing (None or zeros): no "
                          "gradient of this call's losses was in them when it stepped, so it stepped on nothing").format(
                optimizer=cleared[0])]
        elif first_right:
            stale = next(k for k, v in right.items() if not same_steps(mine[k], v))
            problems = [_("the first call is right, the later ones are not: at {optimizer}.step() the .grad still "
                          "held the previous call's gradient, and backward() added to it (lesson 01)").format(
                optimizer=stale)]
        elif counted:
            problems = _mixed_up(mine) or problems
    problems = problems or _waste(run, calls)
    return problems, {"calls": calls}


def _chain_calls():
    args = _chain_models()
    return [args] * CALLS, [args]


CHAIN_STEP = Exercise("02", "chain_step", reference_chain_step, chain_checks, _chain_calls, hints=HINTS,
                      what=N_("your chain_step"), forbids=("retain_graph=True",), success=N_(
                          "it runs, model1 steps on l1 and l2, model2 on l2 and model3 on l3 at every step ({calls} "
                          "calls), l3 stops at model3, each model runs once a call and no graph is kept for nothing"))
check_chain_step = CHAIN_STEP.check
