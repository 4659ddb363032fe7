"""The one grading engine every step checker uses (lessons 01 to 10 and every lab of lesson 13).

A checker runs the student's step and a right step on the same fresh models, and records, each time an optimizer
steps, the gradient it steps on (`recorded_steps`). `first_difference` compares the two records in the order the
steps ran and says, in words, the first step that differs: which optimizer, which step, which parameters, and how
(None where it should hold a gradient, so many times the right one, the right one plus an earlier step's, another
direction). `matching`, `right_answer` and `known_mistake` tell right answers written differently apart from
known wrong ones; `Backwards` records each backward call, to find a graph kept for nothing.

    with recorded_steps({"opt_G": opt_G, "opt_D": opt_D}, names) as mine:
        step(G, D, opt_G, opt_D, x_real, z)
    line = first_difference(mine, reference)       # None when every step matches"""
import math
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode

from gan_lessons.i18n import _

RTOL = 1e-5      # two gradients are the same within this part of the right step's largest entry (float32 sums in
                 # another order differ by about 1e-7 of it; a gradient zero in exact arithmetic, by as little)


class Steps(dict):
    """{optimizer name: [{parameter name: grad or None} per step() call]}, and `order`: (k, optimizer name) for
    each step() call, the k-th (from 0) of that optimizer, in the order they ran (empty: not recorded)."""

    def __init__(self, steps=(), order=(), before=None):
        super().__init__(steps)
        self.order = list(order)
        self.before = before or {}      # {optimizer name: {parameter name: its .grad when recording began}}


LEFT_OFF: list = []     # one entry per call of an answer that left autograd off (grade() reports it, once)
LEFT_HOOKS: list = []   # one entry per call of an answer that left saved-tensor hooks on (the same)


def _top_hooks():
    """The saved-tensor hooks autograd packs with now (the innermost pack and unpack pair), or None."""
    return torch._C._autograd._top_saved_tensors_default_hooks(False)


def _same_hooks(a, b) -> bool:
    return a is b or a is not None and b is not None and a[0] is b[0] and a[1] is b[1]


@contextmanager
def kept_autograd_state():
    """Around a call of the student's code: autograd's mode and its saved-tensor hooks as they were before the
    call, whatever the code did to them (the checker's own code after it must still record, and pack as it did),
    with the change noted in LEFT_OFF and LEFT_HOOKS."""
    mode = torch.is_grad_enabled()
    hooks = _top_hooks()
    try:
        yield
    finally:
        if torch.is_grad_enabled() != mode:
            LEFT_OFF.append(mode)
            torch.set_grad_enabled(mode)
        if not _same_hooks(_top_hooks(), hooks):
            LEFT_HOOKS.append(True)
            while _top_hooks() is not None and not _same_hooks(_top_hooks(), hooks):
                torch._C._autograd._pop_saved_tensors_default_hooks()   # the hooks entered and never exited


def _tensor_hooks(t) -> int:
    """How many gradient hooks (register_hook, register_post_accumulate_grad_hook) a tensor holds."""
    return len(t._backward_hooks or {}) + len(getattr(t, "_post_accumulate_grad_hooks", None) or {})


def _hooks_on(module) -> int:
    """How many hooks a module's forward or backward runs: its own and its submodules' forward, forward pre- and
    backward hooks, its parameters' gradient hooks, and the hooks registered for every module
    (register_module_forward_hook and the like)."""
    from torch.nn.modules import module as torch_module
    every = sum(len(getattr(torch_module, name)) for name in (
        "_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks", "_global_backward_pre_hooks"))
    return every + sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
                       + len(m._backward_pre_hooks) for m in module.modules()) + sum(
        _tensor_hooks(p) for p in module.parameters())


@contextmanager
def left_as_given(function, nets=None, tensors=None, modes=True):
    """Around a call of the student's `function`: yields a list that, on exit, holds one line per thing the call
    changed in what its caller gave it: a net's mode (train or eval; not with modes=False, where the checker says
    it in its own words) or hooks; a tensor written in place (its version moved, whatever its values came out as)
    or made to require grad. nets and tensors: {name: object}."""
    nets, tensors = nets or {}, tensors or {}
    before = {name: (net.training, _hooks_on(net)) for name, net in nets.items()}
    versions = {name: (t._version, t.requires_grad, _tensor_hooks(t)) for name, t in tensors.items()}
    problems: list = []
    try:
        yield problems
    finally:
        for name, net in nets.items():
            training, hooks = before[name]
            if modes and net.training != training:
                problems.append((_("your {function} left {net} in training mode, where it was given in eval mode")
                                 if net.training else
                                 _("your {function} left {net} in eval mode, where it was given in training mode"))
                                .format(function=function, net=name))
            if _hooks_on(net) > hooks:
                problems.append(_("your {function} left {count} more hook(s) on {net} than it was given with: "
                                  "every later forward or backward of {net} runs them").format(
                    function=function, count=_hooks_on(net) - hooks, net=name))
        written = [name for name, t in tensors.items() if t._version != versions[name][0]]
        if written:
            problems.append(_("your {function} wrote into the caller's {names} in place (the version counter "
                              "moved): the caller's own tensor was changed").format(
                function=function, names=_(" and ").join(written)))
        hooked = [name for name, t in tensors.items() if _tensor_hooks(t) > versions[name][2]]
        if hooked:
            problems.append(_("your {function} left gradient hooks on the caller's {names}: every later backward "
                              "through it runs them").format(function=function, names=_(" and ").join(hooked)))
        flagged = [name for name, t in tensors.items() if t.requires_grad and not versions[name][1]]
        if flagged:
            problems.append(_("your {function} made the caller's {names} require grad: every later backward through "
                              "it computes a gradient for it that nothing uses").format(
                function=function, names=_(" and ").join(flagged)))


@contextmanager
def recorded_steps(optimizers, names):
    """Within the block, record every parameter's .grad (a clone, or None) each time one of `optimizers` steps,
    and the order the steps ran in; the hooks come off on exit, also when the block raises. Yields records:
    records[optimizer name] is a list with one {names[parameter]: grad} per step() call, and
    records.order a list of (k, optimizer name), the k-th step (from 0) of that optimizer, in the order they ran."""
    records = Steps({name: [] for name in optimizers},
                    before={name: {names[p]: None if p.grad is None else p.grad.detach().clone()
                                   for group in opt.param_groups for p in group["params"]}
                            for name, opt in optimizers.items()})
    handles = []
    for opt_name, opt in optimizers.items():
        def hook(optimizer, args, kwargs, opt_name=opt_name):
            records.order.append((len(records[opt_name]), opt_name))
            records[opt_name].append({names[p]: (None if p.grad is None else p.grad.detach().clone())
                                      for group in optimizer.param_groups for p in group["params"]})
        handles.append(opt.register_step_pre_hook(hook))
    try:
        with kept_autograd_state():
            yield records
    finally:
        for h in handles:
            h.remove()


def parameter_names(**nets) -> dict:
    """{parameter: "net.name"} for each keyword's module, as records name them: parameter_names(G=G, D=D)."""
    return {p: f"{name}.{n}" for name, net in nets.items() for n, p in net.named_parameters()}


def reachable(root):
    """The autograd nodes a backward from `root` goes through (parameters' accumulators aside, which every graph
    over the same parameters shares)."""
    seen, todo = set(), [root.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen or type(node).__name__ == "AccumulateGrad":
            continue
        seen.add(node)
        todo.extend(n for n, _i in node.next_functions)
    return seen


def toward(nodes, inputs):
    """Of these nodes, those a backward with inputs=... runs: the ones from which one of the inputs is reached."""
    inputs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
    leaves = {id(t) for t in inputs if t.grad_fn is None}
    ends = {t.grad_fn for t in inputs if t.grad_fn is not None}
    on_way = {n for n in nodes if n in ends or any(
        f is not None and (id(getattr(f, "variable", None)) in leaves) for f, _i in n.next_functions)}
    grew = True
    while grew:
        more = {n for n in nodes - on_way if any(f in on_way for f, _i in n.next_functions)}
        on_way |= more
        grew = bool(more)
    return on_way


class Backwards(TorchFunctionMode):
    """Records each backward call (loss.backward() or torch.autograd.backward(loss)): whether it kept its graph, and
    the nodes it goes through (read before it runs, while the graph is whole); and each torch.autograd.grad call's
    create_graph, in `grads`."""

    def __init__(self):
        super().__init__()
        self.calls, self.grads = [], []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.backward, torch.autograd.backward) and args:
            roots = args[0] if isinstance(args[0], (list, tuple)) else [args[0]]
            nodes = set().union(*(reachable(r) for r in roots if isinstance(r, torch.Tensor) and r.grad_fn))
            if kwargs.get("inputs") is not None:           # backward(inputs=...) runs only the nodes on the way
                nodes = toward(nodes, kwargs["inputs"])    # to them: the rest of the graph is neither run nor freed
            if nodes:
                self.calls.append((bool(kwargs.get("retain_graph")), nodes))
        elif func is torch.autograd.grad:
            self.grads.append(bool(kwargs.get("create_graph", len(args) > 4 and args[4])))
        return func(*args, **kwargs)

    def needless_retains(self) -> int:
        """The backward() calls that kept their graph though no later backward goes through any of it."""
        return sum(retain and not any(nodes & later for _r, later in self.calls[i + 1:])
                   for i, (retain, nodes) in enumerate(self.calls))


def flat(step):
    """One step's gradients (those not None) as one vector."""
    grads = [g.flatten() for g in step.values() if g is not None]
    return torch.cat(grads) if grads else torch.zeros(0)


def close(a, b, rtol=RTOL, scale=None):
    """Equal within `rtol` of `scale` (by default b's largest entry)."""
    scale = b.abs().max().item() if scale is None and b.numel() else (scale or 0.0)
    return a.shape == b.shape and (a - b).abs().max().item() <= rtol * scale + 1e-12


def times(ratio):
    """A ratio in words: "2.5x", or "2^10 = 1024x" for a far-off power of two (a loss scale)."""
    if ratio >= 100 or ratio <= 0.01:
        p = math.log2(ratio)
        if abs(p - round(p)) < 0.01:
            return _("2^{power} = {ratio:.6g}x").format(power=round(p), ratio=ratio)
    return _("{ratio:.3g}x").format(ratio=ratio)


def _which(g_step, r_step, rtol, scale):
    """The parameters whose gradients differ, when only some do: " (only in a, b; the other n are right)". A
    parameter whose gradient is zero in both, or only rounding error from zero (a bias just before a BatchNorm), is
    not counted as right: it says nothing about the step; nor is one within the tolerance but not within a tenth of
    it (where the tolerance is wide, as in bfloat16, a gradient 1.5% off is not called right)."""
    wrong = [p for p, r in r_step.items() if r is not None and not close(g_step[p], r, rtol, scale)]
    right = sum(r is not None and p not in wrong and r.numel() > 0 and r.abs().max().item() > rtol * (scale or 0.0)
                and close(g_step[p], r, rtol / 10, scale) for p, r in r_step.items())
    if not wrong or not right:
        return ""
    shown = ", ".join(wrong[:3]) + (_(" and {count} more").format(count=len(wrong) - 3) if len(wrong) > 3 else "")
    if right == 1:
        return _(" (only in {parameters}; the other one is right)").format(parameters=shown)
    return _(" (only in {parameters}; the other {count} are right)").format(parameters=shown, count=right)


def _how(mine, ref, k, rtol, name, causes=True, before=None, said=None):
    """How the gradient optimizer `name` stepped on at its step k (1-based) differs from the reference's: the
    whole line. causes=False says only what can be measured (sizes, directions), never what made it so: no
    "plus an earlier step's gradient", no ratio written as a power of two. before: the .grad each parameter held
    when recording began (an earlier step's, left there by the problem); said: a list that gets True when the line
    names the cause (a .grad not cleared)."""
    g, r = flat(mine[k - 1]), flat(ref[k - 1])
    if g.shape != r.shape:
        return _("step {step}: {optimizer} stepped on a different set of gradients (a .grad is None where it should "
                 "hold one, or the other way round)").format(step=k, optimizer=name)
    held = flat({p: before.get(p) for p in mine[k - 1]}) if before and causes else None
    if held is not None and held.shape == g.shape and held.any() and close(
            g, held + sum(flat(ref[j]) for j in range(k)), rtol * 10, r.abs().max().item()):
        if said is not None:
            said.append(True)
        return _("step {step}: {optimizer} stepped on the gradient its .grad held before the call plus this call's: "
                 "the earlier gradient was still in .grad when the backward added to it").format(step=k, optimizer=name)
    for first in range(1, k) if causes else ():
        earlier = sum(flat(ref[j - 1]) for j in range(first, k + 1))
        if close(g, earlier, rtol * 10, r.abs().max().item()):
            if said is not None:
                said.append(True)
            if first == k - 1:
                return _("step {step}: {optimizer} stepped on this step's gradient plus step {first}'s, which its "
                         ".grad still held").format(step=k, optimizer=name, first=first)
            return _("step {step}: {optimizer} stepped on this step's gradient plus those of steps {first} to "
                     "{last}, which its .grad still held").format(step=k, optimizer=name, first=first, last=k - 1)
    only = _which(mine[k - 1], ref[k - 1], rtol, r.abs().max().item())
    if r.norm() == 0:
        return _("step {step}: {optimizer} stepped on a gradient where the reference's is zero").format(
            step=k, optimizer=name) + only
    if g.norm() == 0:
        return _("step {step}: {optimizer} stepped on gradients all zero").format(step=k, optimizer=name) + only
    ratio = (g.norm() / r.norm()).item()
    cos = (g @ r / (g.norm() * r.norm())).item()
    if not causes and not (cos > 0.999 and abs(ratio - 1) < 0.01):
        return _("step {step}: {optimizer} stepped on gradients of norm {norm:.3g}, where the reference's have norm "
                 "{reference:.3g}, {direction}").format(
            step=k, optimizer=name, norm=g.norm().item(), reference=r.norm().item(),
            direction=_("in the same direction") if cos > 0.999 else
            _("in another direction (cosine {cosine:.3f})").format(cosine=cos)) + only
    if cos > 0.999 and times(ratio) == "1x":
        return _("step {step}: {optimizer} stepped on gradients the size of the reference's and in its direction, yet "
                 "{apart:.2g} of its norm apart: a small part of the reference's gradient is missing or changed, "
                 "hidden under a larger one").format(step=k, optimizer=name,
                                                     apart=((g - r).norm() / r.norm()).item()) + only
    if cos > 0.999:
        return _("step {step}: {optimizer} stepped on gradients {times} the reference's, in the same "
                 "direction").format(step=k, optimizer=name, times=times(ratio)) + only
    if cos < -0.999:
        return _("step {step}: {optimizer} stepped on gradients {times} the reference's, in the opposite direction: "
                 "the step climbs where the reference's descends").format(step=k, optimizer=name,
                                                                         times=times(ratio)) + only
    return _("step {step}: {optimizer} stepped on gradients {times} the reference's norm, in another direction "
             "(cosine {cosine:.3f})").format(step=k, optimizer=name, times=times(ratio), cosine=cos) + only


def first_difference(mine, ref, rtol=RTOL, causes=True, said=None):
    """The first optimizer step (in the order the reference's steps ran) where the student's gradients differ from
    the reference's, in words, or None when every step matches (causes=False: what was measured only, see _how;
    said: a list that gets True when the line names the cause, "none" when it says a gradient was None)."""
    counts = [_("{optimizer}.step() ran {runs} time(s) where the reference steps it {expected} time(s)").format(
        optimizer=opt_name, runs=len(mine.get(opt_name, [])), expected=len(ref[opt_name]))
        for opt_name in ref if len(mine.get(opt_name, [])) != len(ref[opt_name])]
    if counts:                              # every optimizer that stepped too often or too rarely, not the first
        return "; ".join(counts)
    order = getattr(ref, "order", None) or sorted((k, name) for name in ref for k in range(len(ref[name])))
    for k, name in order:
        g_step, r_step = mine[name][k], ref[name][k]
        missing = [p for p, r in r_step.items() if r is not None and g_step.get(p) is None]
        if missing:
            if said is not None:    # no gradient at all: what the gradient should be is not what went wrong
                said.append("none")
            return _("step {step}: {optimizer} stepped with {parameter}.grad None ({count} parameter(s) without a "
                     "gradient at that step)").format(
                step=k + 1, optimizer=name, parameter=missing[0], count=len(missing))
        extra = [p for p, r in r_step.items() if r is None and g_step.get(p) is not None]
        if g_step.keys() != r_step.keys():
            return _("step {step}: {optimizer} steps on other parameters than the reference's optimizer").format(
                step=k + 1, optimizer=name)
        if extra:
            return _("step {step}: {optimizer} stepped with a gradient in {parameter}.grad ({count} parameter(s)), "
                     "where the reference's is None").format(
                step=k + 1, optimizer=name, parameter=extra[0], count=len(extra))
        scale = max((r.abs().max().item() for r in r_step.values() if r is not None and r.numel()), default=0.0)
        if not all(r is None or close(g_step[p], r, rtol, scale) for p, r in r_step.items()):
            return _how(mine[name], ref[name], k + 1, rtol, name, causes, getattr(mine, "before", {}).get(name),
                        said)
    return None


def compare_steps(mine, reference, hint=None, rtol=RTOL):
    """first_difference as a list of problems (empty when the steps match), with `hint` (translated by the caller)
    after it where the gradients differ (not where an optimizer stepped a different number of times, or with a
    .grad None: the hint says what the gradient is, which is not what went wrong there)."""
    said: list = []
    line = first_difference(mine, reference, rtol, said=said)
    if line is None:
        return []
    counted = all(len(mine.get(name, [])) == len(steps) for name, steps in reference.items())
    return [_("{problem}: {hint}").format(problem=line, hint=hint) if hint and counted and not said else line]


def matching(mine, records, rtol=RTOL):
    """Whether the student's records hold the same gradients at every step of every optimizer as `records`."""
    return mine.keys() == records.keys() and first_difference(mine, records, rtol) is None


def same_steps(got, ref_steps, rtol=RTOL) -> bool:
    """Whether two records of one optimizer's steps hold the same gradients (None where the other is None)."""
    return matching({"opt": got}, {"opt": ref_steps}, rtol)


def right_answer(mine, answers, run, rtol=RTOL):
    """The records of the right answer the student's match (answers: right steps written differently, such as a
    D loss summed or averaged over its two terms), else those of the first; run(step) records a step."""
    with torch.enable_grad():         # as in the notebook, whatever an answer run before left behind
        records = [run(answer) for answer in answers]
    return next((r for r in records if matching(mine, r, rtol)), records[0])


def known_mistake(mine, mistakes, run, rtol=RTOL):
    """The hint of the first known wrong answer whose gradients at every optimizer step are the student's, or
    None. `mistakes` is a list of (wrong_step, hint); run(step) records a step's gradients as for the reference."""
    with torch.enable_grad():
        return next((hint for wrong, hint in mistakes if matching(mine, run(wrong), rtol)), None)


def prefix(records, counts):
    """Each optimizer's first counts[name] recorded steps, and the order they ran in."""
    return Steps({name: records[name][:n] for name, n in counts.items()},
                 [(k, name) for k, name in getattr(records, "order", ()) if k < counts.get(name, 0)])
