"""Computation graphs drawn from live objects: torch's (lessons 01-05), and the engine's of lessons 11 and 12
(draw_engine).

torchviz's make_dot(..., show_saved=True) raises the very errors the lessons teach
once a backward has freed the saved tensors or an in-place op has made them stale.
`draw` walks the same grad_fn graph with graphviz, in torchviz's colours, and marks
each saved tensor as alive, freed or stale instead of raising. Without the `dot`
program every graph shows as a text tree."""
import base64
import collections
import math
import re
from dataclasses import dataclass

import graphviz
import torch

from gan_lessons.i18n import N_, _

STATES = {"alive": "palegreen", "freed": "lightgrey", "stale": "tomato"}
STATE_WORDS = {"alive": N_("alive"), "freed": N_("freed"), "stale": N_("stale")}   # as shown; the keys stay English
_VERSIONS = re.compile(r"is at version (\d+); expected version (\d+)")
SAVED_SHAPE = re.compile(r"\[torch\.[\w.]+ \[([\d, ]*)\]\]")      # torch.FloatTensor, torch.cuda.FloatTensor
_VIEW_FNS = ("TBackward0", "TransposeBackward0", "ViewBackward0", "AsStridedBackward0", "PermuteBackward0")


@dataclass
class Saved:
    """One tensor that an autograd node saved for its backward."""
    node: str    # the grad_fn's class name, e.g. "AddmmBackward0"
    name: str    # the attribute without its prefix, e.g. "mat2"
    state: str   # "alive", "freed" or "stale"
    shape: tuple | None = None
    param: str | None = None       # parameter name when it is one (".T" for a transposed view)
    version_now: int | None = None
    version_saved: int | None = None

    def label(self) -> str:
        what = self.name + (f" = {self.param}" if self.param else "")
        size = f" {tuple(self.shape)}" if self.shape is not None else ""
        if self.state == "stale" and self.version_now is not None:
            return what + size + "\n" + _("stale: version {now}, saved at {saved}").format(
                now=self.version_now, saved=self.version_saved)
        return f"{what}{size}\n{_(STATE_WORDS[self.state])}"


def param_names(*modules, **named) -> dict:
    """{parameter: 'G.net.0.weight'} for modules given as G=..., D=...; tensors map to their own name."""
    names = {}
    for prefix, obj in named.items():
        if isinstance(obj, torch.nn.Module):
            names.update({p: f"{prefix}.{n}" for n, p in obj.named_parameters()})
        else:
            names[obj] = prefix
    return names


def _param_for(tensor, names) -> str | None:
    """Name the parameter a saved tensor is, or is a transposed view of."""
    for p, name in names.items():
        if tensor.data_ptr() == p.data_ptr() and tensor.numel() == p.numel():
            if tensor.shape == p.shape and tensor.stride() == p.stride():
                return name
            if tensor.dim() == 2 and tensor.shape == p.shape[::-1] and tensor.stride() == p.stride()[::-1]:
                return name + ".T"
    return None


def _param_near(fn, shape, names, version=None) -> str | None:
    """For a stale saved tensor (which can no longer be read): the parameter of that shape (and, when given, that
    version) feeding `fn`; else any named tensor of that shape and version (a buffer changed in place), or of that
    many elements and that version (a view of one: a view shares its base's version counter)."""
    stack, seen = [(f, False) for f, _ in fn.next_functions if f is not None], set()
    while stack:
        f, transposed = stack.pop()
        if f in seen:
            continue
        seen.add(f)
        p = getattr(f, "variable", None)
        if p is not None and version is not None and p._version != version:
            p = None
        if p is not None and p in names and p.dim() == 2 and transposed and tuple(p.shape[::-1]) == shape:
            return names[p] + ".T"
        if p is not None and p in names and not transposed and tuple(p.shape) == shape:
            return names[p]
        if type(f).__name__ in _VIEW_FNS:
            flip = type(f).__name__ in ("TBackward0", "TransposeBackward0")
            stack.extend((g, transposed != flip) for g, _ in f.next_functions if g is not None)
    if version is not None:
        return next((n for t, n in names.items() if tuple(t.shape) == shape and t._version == version), None) or \
            next((n for t, n in names.items() if shape is not None and t.numel() == math.prod(shape)
                  and t._version == version), None)      # a view of it (einsum saves a reshaped buffer)
    return None


def version_error(message: str) -> tuple:
    """What torch's version error says ("... modified by an inplace operation: [torch.FloatTensor [512, 1]], which
    is output 0 of AsStridedBackward0, is at version 2; expected version 1 instead"): (the saved tensor's shape,
    (its version now, its version when saved)), each None where the message does not say it."""
    shape, versions = SAVED_SHAPE.search(message), _VERSIONS.search(message)
    return (tuple(int(n) for n in shape.group(1).split(",") if n.strip()) if shape else None,
            (int(versions.group(1)), int(versions.group(2))) if versions else None)


def saved_tensors(fn, names=None) -> list:
    """Every tensor `fn` saved, with its state. Never raises for freed or stale tensors."""
    names, found = names or {}, []
    for attr in sorted(a for a in dir(fn) if a.startswith("_saved_")):
        node = type(fn).__name__
        try:
            value = getattr(fn, attr)
        except RuntimeError as error:
            shape, versions = version_error(str(error))
            if versions:
                param = None if attr.startswith("_saved_result") else _param_near(fn, shape, names, versions[0])
                found.append(Saved(node, attr[7:], "stale", shape, param, *versions))
            else:  # "Trying to backward through the graph a second time ... already been freed"
                found.append(Saved(node, attr[7:], "freed"))
            continue
        for tensor in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(tensor, torch.Tensor):
                found.append(Saved(node, attr[7:], "alive", tuple(tensor.shape), _param_for(tensor, names)))
    return found


class Graph:
    """A drawn graph: shows as SVG where `dot` exists, else as its text tree."""

    def __init__(self, dot: graphviz.Digraph, text: str, saved: list):
        self.dot, self.text, self.saved = dot, text, saved

    def _repr_mimebundle_(self, include=None, exclude=None):
        """SVG for a trusted notebook, the same graph as PNG for everywhere SVG is not shown (an untrusted
        notebook in JupyterLab, some viewers), and the text tree, which nbval compares."""
        try:
            bundle = {"image/svg+xml": self.dot.pipe(format="svg", encoding="utf-8"), "text/plain": self.text}
        except graphviz.ExecutableNotFound:
            return {"text/plain": _("(graphviz 'dot' not found: graph shown as text)") + "\n" + self.text}
        try:
            bundle["image/png"] = base64.b64encode(self.dot.pipe(format="png")).decode("ascii")
        except (graphviz.CalledProcessError, OSError):  # a `dot` without a PNG renderer (a broken pipe if it exits
            # before reading the graph)
            pass
        return bundle

    def __repr__(self):
        return self.text


def breadth_first(fns):
    """(node, steps from the nearest of `fns`) for every autograd node reachable from the nodes `fns`, breadth-first:
    each node once, at its shortest distance. A generator: a caller that stops early walks no further."""
    queue, seen = collections.deque((fn, 0) for fn in fns if fn is not None), set()
    while queue:
        fn, distance = queue.popleft()
        if fn in seen:
            continue
        seen.add(fn)
        yield fn, distance
        queue.extend((f, distance + 1) for f, _ in fn.next_functions if f is not None)


def walk(roots):
    """Breadth-first list of the grad_fn nodes reachable from the roots (tensors)."""
    return [fn for fn, _ in breadth_first(t.grad_fn for t in roots)]


def _node_label(fn, names) -> str:
    if hasattr(fn, "variable"):
        v = fn.variable
        return f"{names.get(v, 'leaf')}\n{tuple(v.shape)}"
    return type(fn).__name__


def draw(outputs: dict, names=None, max_nodes=60, show_saved=True, legend=True, title=None) -> Graph:
    """Draw the graph behind `outputs` ({'loss_D': loss_D, ...}), parameters named by `names`
    (see param_names). Past `max_nodes` autograd nodes the rest collapse into one node."""
    names = names or {}
    order = walk(outputs.values())
    shown = order[:max_nodes]
    ids = {fn: f"n{i}" for i, fn in enumerate(shown)}
    dot = graphviz.Digraph(node_attr=dict(style="filled", shape="box", align="left", fontsize="10",
                                          ranksep="0.1", height="0.2", fontname="monospace"),
                           graph_attr=dict(size="12,12", label=title or "", labelloc="t", fontname="monospace"))
    all_saved = []
    for name, t in outputs.items():
        dot.node(f"out_{name}", f"{name}\n{tuple(t.shape)}", fillcolor="darkolivegreen1")
        if t.grad_fn in ids:
            dot.edge(ids[t.grad_fn], f"out_{name}")
    for fn, node_id in ids.items():
        dot.node(node_id, _node_label(fn, names), fillcolor="lightblue" if hasattr(fn, "variable") else "white")
        for f, _input in fn.next_functions:
            if f is not None:
                dot.edge(ids.get(f, "more"), node_id)
        if show_saved:
            for k, s in enumerate(saved_tensors(fn, names)):
                all_saved.append(s)
                dot.node(f"{node_id}_s{k}", s.label(), fillcolor=STATES[s.state], shape="note")
                dot.edge(f"{node_id}_s{k}", node_id, style="dashed", arrowhead="none")
    if len(order) > len(shown):
        dot.node("more", _("... {n} more autograd nodes\n(raise max_nodes to see them)").format(
            n=len(order) - len(shown)), fillcolor="khaki")
    if legend and show_saved:
        with dot.subgraph(name="cluster_legend") as key:
            key.attr(label=_("saved tensors"), fontsize="10")
            for state, colour in STATES.items():
                key.node(f"legend_{state}", _(STATE_WORDS[state]), fillcolor=colour, shape="note")
    text = text_tree(outputs, names, show_saved)
    return Graph(dot, f"{title}\n{text}" if title else text, all_saved)


def text_tree(outputs: dict, names=None, show_saved=True) -> str:
    """The same graph as indented text, for machines without `dot`."""
    names, lines, seen = names or {}, [], set()

    def visit(fn, depth):
        label = _node_label(fn, names).replace("\n", " ")
        if fn in seen:
            lines.append("  " * depth + _("{label} (shared, see above)").format(label=label))
            return
        seen.add(fn)
        saved = saved_tensors(fn, names) if show_saved else []
        extra = _("  saved: ") + _("; ").join(s.label().replace("\n", " ") for s in saved) if saved else ""
        lines.append("  " * depth + label + extra)
        for f, _input in fn.next_functions:
            if f is not None:
                visit(f, depth + 1)

    for name, t in outputs.items():
        lines.append(f"{name} {tuple(t.shape)}")
        if t.grad_fn is not None:
            visit(t.grad_fn, 1)
    return "\n".join(lines)


def show(dot: graphviz.Digraph, outputs: dict, names=None) -> Graph:
    """Wrap a graph made elsewhere (e.g. torchviz.make_dot) so that it falls back to text."""
    return Graph(dot, text_tree(outputs, names, show_saved=False), [])


def saved_bytes(outputs: dict, exclude=()) -> int:
    """Bytes of the alive saved tensors behind `outputs`, each storage counted once; storages of the
    tensors in `exclude` (e.g. parameters, which live anyway) are left out. Lesson 02 uses it to price
    retain_graph=True."""
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    storages = {}
    for fn in walk(outputs.values()):
        for attr in (a for a in dir(fn) if a.startswith("_saved_")):
            try:
                value = getattr(fn, attr)
            except RuntimeError:  # freed or stale: holds nothing we can count
                continue
            for t in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in skip:
                    storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


# --- an engine's own graph (lessons 11 and 12) ------------------------------------------------------------------
# Drawn from its live Values, in the colours used for torch's (each saved value alive, freed or stale, with its
# versions). It reads only what the lesson's `Value` keeps: `parents`, `_backward`, `_saved` (name -> (value, version
# when saved), None once freed) and `_version`.
def _op(v) -> str:
    """The operation that made v, read from the name of the function its backward was defined in."""
    qualname = getattr(v._backward, "__qualname__", "")
    outer = qualname.split(".<locals>")[0].split(".")[-1] if ".<locals>" in qualname else qualname
    return outer.strip("_") or "?"


def _saved(v, names) -> list:
    """What node v keeps: one Saved per saved value (alive or stale), or one "freed" entry once backward let go."""
    if v._saved is None:
        return [Saved(_op(v), _("everything it saved"), "freed")]
    out = []
    for name, entry in v._saved.items():
        value, version = entry if isinstance(entry, tuple) else (entry, None)
        stale = version is not None and getattr(value, "_version", version) != version
        out.append(Saved(_op(v), name, "stale" if stale else "alive", tuple(value.data.shape),
                         names.get(id(value)), getattr(value, "_version", None), version))
    return out


def _walk(outputs):
    """Every Value reachable from the outputs through `parents`, each once, outputs first."""
    order, seen, todo = [], set(), list(outputs)
    while todo:
        v = todo.pop(0)
        if id(v) not in seen:
            seen.add(id(v))
            order.append(v)
            todo += list(v.parents)
    return order


def _label(v, names) -> str:
    shape = tuple(v.data.shape)
    if not v.parents:
        return f"{names.get(id(v), _('leaf'))}\n{shape}" + ("\nrequires_grad" if v.requires_grad else "")
    return f"{_op(v)}" + (f" = {names[id(v)]}" if id(v) in names else "") + f"\n{shape}"


def draw_engine(outputs: dict, **named) -> Graph:
    """Draw the engine graph behind `outputs` ({'loss': loss}); `named` gives Values names (a=a, b=b)."""
    names = {id(v): n for n, v in {**named, **outputs}.items()}
    order = _walk(outputs.values())
    ids = {id(v): f"v{i}" for i, v in enumerate(order)}
    dot = graphviz.Digraph(node_attr=dict(style="filled", shape="box", fontsize="10", fontname="monospace"),
                           graph_attr=dict(rankdir="BT", fontname="monospace"))
    everything, lines = [], []
    for v in order:
        dot.node(ids[id(v)], _label(v, names), fillcolor="lightblue" if not v.parents else "white")
        for p in v.parents:
            dot.edge(ids[id(p)], ids[id(v)])
        saved = _saved(v, names) if v.parents else []
        for k, s in enumerate(saved):
            dot.node(f"{ids[id(v)]}_s{k}", s.label(), fillcolor=STATES[s.state], shape="note")
            dot.edge(f"{ids[id(v)]}_s{k}", ids[id(v)], style="dashed", arrowhead="none")
        everything += saved
        said = "; ".join(s.label().replace("\n", " ") for s in saved)
        lines.append(_label(v, names).replace("\n", " ") + (_("  saved: ") + said if said else ""))
    with dot.subgraph(name="cluster_legend") as key:
        key.attr(label=_("saved tensors"), fontsize="10")
        for state, colour in STATES.items():
            key.node(f"legend_{state}", _(STATE_WORDS[state]), fillcolor=colour, shape="note")
    return Graph(dot, "\n".join(lines), everything)
