"""The grading engine every lab of lesson 12 shares: a Lab runs a step on the lab's own models, records the
gradient every optimizer steps on, and compares it with the reference fix's; _check says what differs, and names a
known wrong fix when the run matches it."""
import math

import torch

from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, raised, recorded_steps, stub_left, unanswered, verdict
from gan_lessons.i18n import N_, _

LAB_HINTS = AUTOGRAD_HINTS + [
    ("does not currently support double backward",
     N_("a penalty's create_graph=True gradient cannot go back through a module compiled with an AOT backend "
        "(aot_eager, inductor)")),
    ("does not require grad and does not have a grad_fn",
     N_("nothing in that loss requires grad: is the network that should learn from it frozen, or its input "
        "detached?")),
    ("unscale_() has already been called on this optimizer",
     N_("scaler.step(opt) unscales by itself; call scaler.unscale_(opt) at most once per optimizer per iteration")),
]


# --- the comparison every lab shares ------------------------------------------------------------------------------
def _flat(step):
    return torch.cat([g.flatten() for g in step.values() if g is not None]) if any(
        g is not None for g in step.values()) else torch.zeros(0)


def _close(a, b, rel, scale=None):
    """Equal within `rel` of `scale` (the largest entry of the reference's step, all its parameters; float32 sums in
    another order differ by about 1e-7 of it, and a gradient that is zero in exact arithmetic, a bias before a
    normalisation, by as little)."""
    scale = b.abs().max().item() if scale is None else scale
    return a.shape == b.shape and (a - b).abs().max().item() <= rel * scale + 1e-12


def _what(mine, ref, k, atol, name):
    """How the gradient `name` (an optimizer) stepped on at step k (1-based) differs from the reference's: the
    whole line."""
    g, r = _flat(mine[k - 1]), _flat(ref[k - 1])
    if g.shape != r.shape:
        return _("step {step}: {optimizer} stepped on a different set of gradients (a .grad is None where it should "
                 "hold one, or the other way round)").format(step=k, optimizer=name)
    if k > 1:
        for first in range(1, k):
            earlier = sum(_flat(ref[j - 1]) for j in range(first, k + 1))
            if _close(g, earlier, atol * 10, r.abs().max().item()):
                if first == k - 1:
                    return _("step {step}: {optimizer} stepped on this step's gradient plus step {first}'s, which its "
                             ".grad still held: no zero_grad() between them").format(
                        step=k, optimizer=name, first=first)
                return _("step {step}: {optimizer} stepped on this step's gradient plus those of steps {first} to "
                         "{last}, which its .grad still held: no zero_grad() between them").format(
                    step=k, optimizer=name, first=first, last=k - 1)
    if r.norm() == 0:
        return _("step {step}: {optimizer} stepped on a gradient where the reference's is zero").format(
            step=k, optimizer=name)
    ratio = (g.norm() / r.norm()).item()
    cos = (g @ r / (g.norm() * r.norm() + 1e-30)).item() if g.norm() > 0 else 0.0
    if g.norm() == 0:
        return _("step {step}: {optimizer} stepped on gradients all zero").format(step=k, optimizer=name)
    if cos > 0.999 and _times(ratio) == "1x":
        return _("step {step}: {optimizer} stepped on gradients the size of the reference's and in its direction, yet "
                 "{apart:.2g} of its norm apart: a small part of the reference's gradient is missing or changed, "
                 "hidden under a larger one").format(step=k, optimizer=name, apart=((g - r).norm() / r.norm()).item())
    if cos > 0.999:
        return _("step {step}: {optimizer} stepped on gradients {times} the reference's, in the same "
                 "direction").format(step=k, optimizer=name, times=_times(ratio))
    return _("step {step}: {optimizer} stepped on gradients {times} the reference's norm, in another direction "
             "(cosine {cosine:.2f})").format(step=k, optimizer=name, times=_times(ratio), cosine=cos)


def _times(ratio):
    if ratio >= 100 or ratio <= 0.01:
        p = math.log2(ratio)
        if abs(p - round(p)) < 0.01:
            return f"2^{round(p)} = {ratio:.6g}x"
    return f"{ratio:.3g}x"


def _compare(mine, ref, atol):
    """The first wrong optimizer step (in the order the reference stepped them), in words, or None."""
    for opt_name, ref_steps in ref.items():
        if opt_name == "order":
            continue
        got = mine.get(opt_name, [])
        if len(got) != len(ref_steps):
            return _("{optimizer}.step() ran {runs} time(s) where the reference steps it {expected} time(s)").format(
                optimizer=opt_name, runs=len(got), expected=len(ref_steps))
    order = ref.get("order") or sorted(((k, name) for name, steps in ref.items() for k in range(len(steps))))
    for k, name in order:
        g_step, r_step = mine[name][k], ref[name][k]
        missing = [p for p, r in r_step.items() if r is not None and g_step.get(p) is None]
        if missing:
            return _("step {step}: {optimizer} stepped with {parameter}.grad None ({count} parameter(s) without a "
                     "gradient): the loss that trains it never reached it").format(
                step=k + 1, optimizer=name, parameter=missing[0], count=len(missing))
        if g_step.keys() != r_step.keys():
            return _("step {step}: {optimizer} steps on other parameters than the reference's optimizer").format(
                step=k + 1, optimizer=name)
        scale = max((r.abs().max().item() for r in r_step.values() if r is not None), default=0.0)
        if not all(r is None or _close(g_step[p], r, atol, scale) for p, r in r_step.items()):
            return _what(mine[name], ref[name], k + 1, atol, name)
    return None


def _matches(mine, ref, atol):
    return _compare(mine, ref, atol) is None


# --- the labs ------------------------------------------------------------------------------------------------------
class Lab:
    """One lab: problem(seed) -> (args for each call, {optimizer name: optimizer}, {parameter: name}, state); the
    reference step; the calls made; known wrong fixes [(step, hint)]; extra(state_mine, state_ref) -> problems, and
    first(...) likewise, judged before the gradients are compared."""

    def __init__(self, name, title, problem, reference, calls, mistakes=(), extra=None, atol=1e-4, first=None,
                 hints=None):
        self.name, self.title, self.problem, self.reference = name, title, problem, reference
        self.hints = (hints or []) + LAB_HINTS   # (pattern, hint) for an error the step raises: this lab's first
        self.calls, self.mistakes, self.extra, self.atol = calls, list(mistakes), extra, atol
        self.first = first          # first(state_mine, state_ref) -> problems, judged before the gradients

    def run(self, step, skip=()):
        args, opts, names, state = self.problem()
        for name in skip:                   # an optimizer whose step() does nothing: what happens without it
            opts[name].step = lambda *a, **k: None
        error, order = None, []
        handles = [opt.register_step_pre_hook(lambda o, a, kw, name=name: order.append(
            (sum(n == name for _, n in order), name))) for name, opt in opts.items()]
        with recorded_steps(opts, names) as records:
            try:
                for k in range(self.calls):
                    torch.manual_seed(100 + k)          # randomness drawn inside a step repeats run to run
                    step(*args(k))
            except Exception as e:  # reported by the checker
                error = e
            finally:
                for h in handles:
                    h.remove()
        records["order"] = order
        return records, state, error


LABS = {}


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
    return next((k for k, (a, b) in enumerate(zip(mine, ref), 1) if not _close(_flat(a), _flat(b), lab.atol)), 0)


def gradient_ratio(name, step, optimizer, k=1):
    """The norm of the gradient `optimizer` stepped on at its k-th step in the grader's run, over the reference's."""
    lab = LABS[name]
    mine, ref = lab.run(step)[0][optimizer][k - 1], lab.run(lab.reference)[0][optimizer][k - 1]
    return (_flat(mine).norm() / _flat(ref).norm()).item()


def _lab(lab):
    LABS[lab.name] = lab
    return lab


def _names(**nets):
    return {p: f"{name}.{n}" for name, net in nets.items() for n, p in net.named_parameters()}


def _batches(seed, *shapes, calls):
    g = torch.Generator().manual_seed(seed)
    return [[torch.randn(*s, generator=g) for s in shapes] for _ in range(calls)]



def _prefix(records, counts):
    """Each optimizer's first counts[name] recorded steps, and the order they ran in."""
    return {**{name: records[name][:n] for name, n in counts.items()},
            "order": [(k, name) for k, name in records["order"] if k < counts.get(name, 0)]}


def _check(lab, answer, label, success, extra_problems=None):
    if unanswered(label, answer, _("your {function}").format(function=label)):
        return False
    mine, state, error = lab.run(answer)
    if error is not None:
        if stub_left(label, error, label):
            return False
        return verdict(label, [raised(label, error, lab.hints)], "")
    ref, ref_state, ref_error = lab.run(lab.reference)
    assert ref_error is None, ref_error
    before, problems = lab.first(state, ref_state) if lab.first else ({}, [])
    if problems:                # what went wrong first in time: a gradient before that call, or that call's steps
        earlier = _compare(_prefix(mine, before), _prefix(ref, before), lab.atol)
        return verdict(label, [earlier] if earlier else problems, success)
    wrong = _compare(mine, ref, lab.atol)
    if wrong:
        hint = next((h for step, h in lab.mistakes if _matches(mine, lab.run(step)[0], lab.atol)), None)
        if hint:
            hint = _(hint)
            hint = hint[:1].upper() + hint[1:]
        problems.append(_("{problem}. {hint}").format(problem=wrong, hint=hint) if hint else wrong)
    elif lab.extra:
        problems += lab.extra(state, ref_state)
    problems += extra_problems or []
    return verdict(label, problems, success)


