"""Lesson 12's graphs: an engine's own graph drawn from its live Values, in the colours `gan_lessons.graphs` uses for
torch's (each saved value alive, freed or stale, with its versions). It reads only what the lesson's `Value` keeps:
`parents`, `_backward`, `_saved` (name -> (value, version when saved), None once freed) and `_version`."""
import graphviz

from gan_lessons.graphs import STATE_WORDS, STATES, Graph, Saved
from gan_lessons.i18n import _


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
