"""Lesson 03's exercise: a saved-tensor probe that reports which saved tensors an in-place op made stale
(check_stale_saved)."""
from collections import Counter

import torch
from torch import nn, optim

from gan_lessons.exercises.exercise import Exercise, Found, Raised
from gan_lessons.exercises.feedback import raised
from gan_lessons.exercises.steps import LEFT_HOOKS, Backwards, kept_autograd_state
from gan_lessons.exercises.variants import variant
from gan_lessons.i18n import N_, _


def _exp_then_add_():
    a = torch.linspace(-1, 1, 5, requires_grad=True)

    def make_loss():
        y = a.exp()                          # exp saves its output y
        y.add_(1)
        return y.sum()
    return make_loss, [a]


def _square_then_step():
    a = torch.linspace(-1, 1, 4, requires_grad=True)

    def make_loss():
        y = a * a                            # saves a twice, as self and as other
        with torch.no_grad():
            a.add_(1)
        return y.sum()
    return make_loss, [a]


def _saved_at_two_versions():
    a = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)

    def make_loss():
        y = a.exp()                          # exp saves y at version 0
        y.add_(1)
        return (y * y).sum()                 # mul saves the same y twice, at version 1: not stale
    return make_loss, [a]


def _same_values_two_writes():
    a = torch.tensor([0.5, -1.0, 2.0, 0.0], requires_grad=True)

    def make_loss():
        y = a.sigmoid()                      # sigmoid saves its output y at version 0
        y.mul_(1)
        y.add_(0)                            # two writes that keep every value: version 2, stale all the same
        return y.sum()
    return make_loss, [a]


def _linear_tanh():
    torch.manual_seed(0)
    layer, x = nn.Linear(16, 32), torch.randn(8, 16, requires_grad=True)
    return (lambda: torch.tanh(layer(x)).sum()), [x, layer.weight]


def _seed001_toy():
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Linear(2, 2)
    opt_D = optim.Adam(D.parameters())
    t = torch.tensor([1.0, 2.0], requires_grad=True)

    def make_loss():
        g = G(t)
        d = D(g)
        opt_D.zero_grad()
        d.sum().backward(retain_graph=True)
        opt_D.step()                         # D.weight changes in place: its saved transpose goes stale
        return (g + d).sum()
    return make_loss, [t, G.weight]


GRAPHS = [(N_("y = a.exp(), then y.add_(1)"), _exp_then_add_),
          (N_("y = a * a, then a.add_(1) under no_grad"), _square_then_step),
          (N_("y = a.exp(), then y.add_(1), then y * y"), _saved_at_two_versions),
          (N_("y = a.sigmoid(), then y.mul_(1) and y.add_(0), which keep its values"), _same_values_two_writes),
          (N_("tanh(Linear(16, 32)(x)), nothing changed"), _linear_tanh),
          (N_("seed 001's toy, optimD.step() between the two backwards"), _seed001_toy)]


def reference_stale_saved(make_loss):
    """Lesson 03: run make_loss() under saved-tensor hooks, then backward through the loss it returns; one
    (shape, version when saved, version at backward) per saved tensor whose version moved in between."""
    stale = []
    def pack(t):
        return t, t._version              # the tensor itself, and its version now
    def unpack(packed):
        t, version = packed
        if t._version != version:
            stale.append((tuple(t.shape), version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = make_loss()
    loss.backward()
    return stale


_packs_a_copy = variant(reference_stale_saved, replace={"(t, t._version)": "(t.clone(), t._version)"})  # never stale
_forward_only = variant(reference_stale_saved, drop="loss.backward()")       # no backward, so no unpack


def _run(probe, graph):
    """Run probe on a fresh copy of graph: (its report or the error it raised, the leaves' gradients, how many times
    it ran make_loss, how many backward calls it made)."""
    make_loss, leaves = graph()
    runs = []

    def counted():
        runs.append(1)
        return make_loss()
    with Backwards() as calls, kept_autograd_state():
        try:
            report = probe(counted)
        except Exception as error:  # reported by the checker
            report = error
    return report, [None if p.grad is None else p.grad.clone() for p in leaves], len(runs), len(calls.calls)


def _same(grads, others):
    return all((g is None) == (o is None) and (g is None or torch.allclose(g, o, atol=1e-6))
               for g, o in zip(grads, others))


def _entries(report):
    """The report as a sorted list of (shape, version when saved, version at backward), or None if malformed."""
    try:
        entries = [(tuple(int(n) for n in shape), int(saved), int(now)) for shape, saved, now in report]
    except (TypeError, ValueError):
        return None
    return sorted(entries)


def _saved_twice(graph):
    """(shape, the versions) of a tensor the graph's forward saves more than once at different versions, or None."""
    make_loss, _leaves = graph()
    seen: dict = {}

    def pack(t):
        seen.setdefault(id(t), (tuple(t.shape), t, set()))[2].add(t._version)
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        make_loss()
    return next(((shape, sorted(versions)) for shape, _t, versions in seen.values() if len(versions) > 1), None)


def _twice_hint(graph):
    """The hint for a report that gets a tensor saved at two versions wrong, where the graph has one."""
    twice = _saved_twice(graph)
    return None if twice is None else _(
        "here one tensor of shape {shape} is saved at two versions, {versions}: each save has its own version when "
        "saved, and your report does not give each its own").format(shape=twice[0],
                                                                    versions=_(" and ").join(map(str, twice[1])))


def _hint(got, right, grads, graph):
    """Why the student's report `got` differs from the right one, named as precisely as the evidence allows."""
    if not got and right:
        if _same(grads, _run(_forward_only, graph)[1]):
            return _("no backward ran, so unpack never did: unpack is called when backward reads the saved tensors")
        if _same(grads, _run(_packs_a_copy, graph)[1]) and not _same(grads, _run(reference_stale_saved, graph)[1]):
            return _("you packed a copy: a clone is never changed in place, so it never looks stale (and backward "
                     "silently reads the forward's values from it)")
        return _twice_hint(graph) or _("you reported nothing, yet backward read a saved tensor whose version had "
                                       "moved")
    if any(saved == now for _shape, saved, now in got):
        return _("you reported saved tensors whose version did not change between pack and unpack")
    if sorted((shape, now, saved) for shape, saved, now in got) == right:
        return _("each entry is (shape, version when saved, version at backward): yours has the two the other way "
                 "round")
    if any(now < saved for _shape, saved, now in got):
        return _("a version went down: you compared the version of a copy (a new tensor starts at 0) with the "
                 "original's")
    if len(got) < len(right) and all(e in right for e in got):
        return _("one entry per saved tensor: `a * a` saves a twice (as self and as other), and backward unpacks "
                 "each one")
    twice = _twice_hint(graph)
    if twice:
        return twice
    extra, missing = list((Counter(got) - Counter(right)).elements()), list((Counter(right) - Counter(got)).elements())
    again = next((e for e in extra if e in right), None)
    if again is not None:
        return _("you reported {entry} {times} times, where {count} saved tensor(s) had those versions").format(
            entry=again, times=got.count(again), count=right.count(again))
    if extra and missing:
        return _("{extra} is not among the stale ones, and {missing} is missing").format(extra=extra, missing=missing)
    if extra:
        return _("{extra} is not stale: no saved tensor had that version when saved and that one at "
                 "backward").format(extra=extra)
    return _("{missing} is missing").format(missing=missing)


def _gradient_problem(grads, right, backwards):
    """How the leaves' gradients after the probe differ from one backward's without it, as measured (with the
    number of backward calls the probe made)."""
    pairs = [(g, r) for g, r in zip(grads, right) if g is not None and r is not None and r.abs().sum() > 0]
    ratios = {round((g.norm() / r.norm()).item(), 3) for g, r in pairs}
    if len(ratios) == 1 and len(pairs) == sum(r is not None for r in right):
        k = ratios.pop()
        if k == round(k) and k >= 2 and all(torch.allclose(g, k * r, atol=1e-5) for g, r in pairs):
            return (_("the report is right, but the leaves' gradients are {k:g} times those of one backward: backward "
                      "ran {k:g} times through the loss") if backwards == k else
                    _("the report is right, but the leaves' gradients are {k:g} times those of one backward through "
                      "the loss make_loss returned")).format(k=k)
    return _("the report is right, but the leaves' gradients differ from those one backward gives without your probe")


PROBE_HINTS = [
    ("modified by an inplace operation",
     N_("that is autograd's own version check: make_loss() ran while your hooks were not on, so autograd saved "
        "and checked the tensors itself")),
    ("unpack_hook expected to be a Tensor",
     N_("your unpack gave autograd something that is not a tensor (the packed pair itself?)")),
    ("NoneType", N_("your pack returned None, so unpack had nothing to read")),
    ("does not require grad and does not have a grad_fn",
     N_("the loss make_loss returned inside your probe has no graph: autograd was not recording when it ran")),
    ("cannot unpack non-iterable", N_("unpack took apart what pack returned, and it was one value, not a pair")),
]


def stale_saved_checks(stale_saved) -> Found:
    """Lesson 03. stale_saved(make_loss) runs make_loss() under torch.autograd.graph.saved_tensors_hooks, runs
    backward through the loss it returns, and returns one (shape, version when saved, version at backward) per
    saved tensor whose version moved in between. Backward must compute what it computes without the probe."""
    failed = []
    for description, graph in GRAPHS:
        got, grads, runs, backwards = _run(stale_saved, graph)
        right, right_grads, _runs, _backwards = _run(reference_stale_saved, graph)
        if isinstance(got, Exception):
            if isinstance(got, NotImplementedError):
                raise Raised("stale_saved", got)
            if LEFT_HOOKS:            # an exit of hooks an earlier call left on (and the checker took off) failed
                return []             # inside torch: grade() says what the cause is
            return [_("on {graph}: {problem}").format(graph=_(description),
                                                      problem=raised("stale_saved", got, PROBE_HINTS))]
        entries = _entries(got) if isinstance(got, (list, tuple, set)) else None
        if entries is None:
            return [_("on {graph}: it returned {value}; return a list with one (shape, version when saved, version "
                      "at backward) per stale saved tensor, [] when none").format(graph=_(description),
                                                                                    value=repr(got))]
        right = sorted(right)
        if runs != 1:
            failed.append((description, _("make_loss ran {runs} times in one call of your probe: it runs once, under "
                                          "the hooks, and the report is of the graph that run built").format(
                runs=runs)))
        elif entries != right:
            failed.append((description, _("you reported {entries}, the stale saved tensors are {right}. Hint: "
                                          "{hint}").format(entries=entries, right=right,
                                                           hint=_hint(entries, right, grads, graph))))
        elif not _same(grads, right_grads) and _same(grads, _run(_forward_only, graph)[1]):
            failed.append((description, _("the report is right, but the leaves' .grad are left empty, where one "
                                          "backward() through the loss fills them")))
        elif not _same(grads, right_grads):
            failed.append((description, _gradient_problem(grads, right_grads, backwards)))
    if not failed:
        return [], {"graphs": len(GRAPHS)}
    (description, problem), more = failed[0], len(failed) - 1
    if more:
        return [_("on {graph}: {problem} (and {more} more of the {graphs} graphs)").format(
            graph=_(description), problem=problem, more=more, graphs=len(GRAPHS))]
    return [_("on {graph}: {problem}").format(graph=_(description), problem=problem)]


def _graph_calls():
    made = [graph() for _description, graph in GRAPHS]
    return [(make_loss,) for make_loss, _leaves in made], [leaves for _make_loss, leaves in made]


STALE_SAVED = Exercise("03", "stale_saved", reference_stale_saved, stale_saved_checks, _graph_calls, result=_entries,
                       what=N_("your stale_saved"), success=N_(
                           "right on all {graphs} graphs, stale or not, and backward computes what it would without your "
                           "probe"))
check_stale_saved = STALE_SAVED.check
