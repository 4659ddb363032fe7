"""The autograd doctor (lesson 07): watch a block of training code and, when one of the lessons' errors escapes
it, say in plain words which tensor, which forward line saved it, and which line or optimizer step changed or
freed it, with the fixes and the lesson that teaches them.

    with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
        ...training code...

It records with public mechanisms only: a TorchFunctionMode (forward ops, in-place ops, backward calls, `.grad`
and `.data` access), global module hooks (which module is running) and the global optimizer step hooks. The
original exception is re-raised unchanged, with `.diagnosis` attached (printed too). The doctor never changes a
result, never swallows an exception, and if its own bookkeeping fails it adds a one-line note instead."""
import linecache
import os
import re
import itertools
import sys
import types
import warnings
import weakref
from collections import deque
from dataclasses import dataclass, field

import torch
from torch.nn.modules import module as nn_module
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.overrides import TorchFunctionMode

from gan_lessons import graphs

_TORCH_DIR = os.path.dirname(torch.__file__)
_OVERRIDES = os.path.join(_TORCH_DIR, "overrides.py")
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_KERNEL_CELL = re.compile(r"ipykernel_\d+[/\\]\d+\.py$")
_PLAIN = (type, types.ModuleType, types.FunctionType, types.MethodType, int, float, str, bytes, list, tuple, dict,
          set)
_INPLACE_DUNDERS = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__setitem__", "__ior__", "__iand__"}
LESSONS = {"01": "01_leaf_tensors.ipynb", "02": "02_graph_freeing_and_retain_graph.ipynb",
           "03": "03_inplace_and_versions.ipynb", "04": "04_detach_and_no_grad.ipynb",
           "05": "05_gan_update_strategies.ipynb"}



# Ops that only reshape: a sigmoid behind them still feeds its values to the loss (`.view(-1)`, `.squeeze()`).
_RESHAPES = ("View", "UnsafeView", "Reshape", "ReshapeAlias", "AsStrided", "Squeeze", "Unsqueeze", "Flatten", "Unflatten", "Permute", "T", "Transpose",
             "Clone", "Select", "Slice", "Index")


def _after_sigmoid(t) -> bool:
    """Is `t` a sigmoid's output, perhaps behind reshaping ops (the DCGAN tutorial's `.view(-1)`)?"""
    fn = t.grad_fn
    while fn is not None:
        kind = type(fn).__name__.split("Backward")[0]
        if kind == "Sigmoid":
            return True
        if kind not in _RESHAPES or not fn.next_functions:
            return False
        fn = fn.next_functions[0][0]
    return False


def _double_sigmoid_effect(target) -> str:
    """What an extra sigmoid does to this BCE term: its range depends on the target (lesson 05 checks both)."""
    squashed = {1.0: "[0.31, 0.69]", 0.0: "[0.69, 1.31]"}
    label = target.unique().tolist() if isinstance(target, torch.Tensor) and target.numel() else []
    where = f"this loss (target {label[0]:g}) is squashed into {squashed[label[0]]}" if len(label) == 1 and \
        label[0] in squashed else "this loss sees inputs in (0, 1) only, whatever D says"
    return (f"{where}, and its gradient shrinks by a factor with no upper bound (hundreds of times for a logit 6 on "
            "the wrong side of the target), silently")

class DoctorWarning(UserWarning):
    """A pattern that raises nothing but trains the wrong thing."""


@dataclass
class Where:
    """A line of the student's code."""
    file: str
    line: int
    code: str

    def __str__(self):
        return f"line {self.line} (`{self.code}`)"


@dataclass
class Diagnosis:
    kind: str                      # "version", "freed", "leaf_inplace", "nonleaf_grad", "suspicious"
    summary: str
    facts: dict = field(default_factory=dict)
    fixes: list = field(default_factory=list)   # (fix, lesson number)

    def text(self) -> str:
        lines = [f"autograd doctor: {self.summary}"]
        lines += [f"  - {k}: {v}" for k, v in self.facts.items()]
        lines += [f"  fix: {fix}  (lesson {n}, notebooks/{LESSONS[n]})" for fix, n in self.fixes]
        return "\n".join(lines)


def _shown(path: str) -> str:
    """How a warning names a file: a notebook cell as <cell>, this package's files from the package name, so that
    no stored output carries a temporary file or a path of the machine that ran it. ("where" quotes the line.)"""
    if _KERNEL_CELL.search(path):
        return "<cell>"
    if path.startswith(_PACKAGE_DIR + os.sep):
        return "gan_lessons/" + os.path.relpath(path, _PACKAGE_DIR).replace(os.sep, "/")
    return path


def _user_frame(depth=1):
    """The innermost frame that is the student's code: not torch, not this module."""
    frame = sys._getframe(depth)
    while frame is not None:
        if _is_user(frame):
            name = frame.f_code.co_filename
            return Where(name, frame.f_lineno, linecache.getline(name, frame.f_lineno).strip())
        frame = frame.f_back
    return None


def _is_user(frame) -> bool:
    name = frame.f_code.co_filename
    return not name.startswith(_TORCH_DIR) and name != __file__ and "contextlib" not in name


def _frames(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def _candidates(namespace: dict, depth=3):
    """(name, object) for the modules, optimizers and tensors of a namespace, and, up to `depth` steps inside
    other objects and lists, for their modules, optimizers and tensors (`agent.critic`, `maddpg.agents[0].actor`,
    `model.fake_B`, `laterals[0]`)."""
    for k, v in list(namespace.items()):
        if not k.startswith("_"):
            yield from _inside(k, v, depth, top=True)


def _inside(name, v, depth, top=False):
    if isinstance(v, (torch.nn.Module, torch.optim.Optimizer, torch.Tensor)):
        yield name, v
        if isinstance(v, torch.nn.Module) and depth > 0:      # plain tensor attributes (model.hidden, an LSTM's (h, c))
            for a, w in list(vars(v).items()):
                if a.startswith("_") or isinstance(w, torch.nn.Parameter):
                    continue
                if isinstance(w, torch.Tensor):
                    yield f"{name}.{a}", w
                elif isinstance(w, (list, tuple)) and len(w) <= 8:
                    yield from ((f"{name}.{a}[{i}]", t) for i, t in enumerate(w) if isinstance(t, torch.Tensor))
    elif depth <= 0:
        return
    elif isinstance(v, (list, tuple)) and len(v) <= 64:
        for i, w in enumerate(v):
            yield from _inside(f"{name}[{i}]", w, depth - 1)
    elif not isinstance(v, _PLAIN) and hasattr(v, "__dict__"):
        try:
            inside = list(vars(v).items())
        except TypeError:
            return
        for a, w in inside:
            if not a.startswith("_"):
                yield from _inside(f"{name}.{a}", w, depth - 1)


_compiling = getattr(torch.compiler, "is_compiling", lambda: False)


def _looks_like_gan(name) -> bool:
    return bool(name) and bool(re.fullmatch(r"(net)?[dD](isc\w*)?(_\w+)?|\w*critic\w*", name.split(".")[0]))


def _is_inplace(name, kwargs) -> bool:
    """x.add_(...), x += ..., x[i] = ..., and the functional forms F.relu(x, inplace=True) (which nn.ReLU(inplace=True),
    LeakyReLU, Dropout and the other inplace= modules call)."""
    return name in _INPLACE_DUNDERS or (name.endswith("_") and not name.startswith("__")) \
        or kwargs.get("inplace") is True


def _tensors(x) -> list:
    return [x] if isinstance(x, torch.Tensor) else [t for t in x if isinstance(t, torch.Tensor)] \
        if isinstance(x, (list, tuple)) else []


def _warn_at_user_line(w):
    frame = sys._getframe(2)
    while frame is not None and not _is_user(frame):
        frame = frame.f_back
    if frame is None or w.filename != __file__:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        return
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(w.message, w.category, frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__"), registry=registry)


def _clean(tb):
    """The traceback without this module's and torch.overrides' frames, which are the doctor's own plumbing:
    the student sees the traceback they would see without it."""
    kept = [t for t in _frames(tb) if t.tb_frame.f_code.co_filename not in (__file__, _OVERRIDES)]
    kept = [t for i, t in enumerate(kept) if i + 1 == len(kept) or kept[i + 1].tb_frame.f_code is not t.tb_frame.f_code]
    for a, b in zip(kept, kept[1:]):
        a.tb_next = b
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else tb


def _depths(roots):
    """(node, distance from the roots) in breadth-first order."""
    start = [fn for fn in dict.fromkeys(t.grad_fn for t in roots) if fn is not None]
    order, seen, frontier, d = [], set(start), start, 0
    while frontier:
        order += [(fn, d) for fn in frontier]
        nxt = []
        for fn in frontier:
            for f, _ in fn.next_functions:
                if f is not None and f not in seen:
                    seen.add(f)
                    nxt.append(f)
        frontier, d = nxt, d + 1
    return order


_SERIAL = itertools.count(1)          # one counter for every doctor: a node's serial is never reused


class _Nodes:
    """What the doctor knows of each autograd node it saw made: (op, module, line, serial), kept in the node's own
    `metadata` dict. The doctor holds no node, so every graph is freed exactly when it would be without it."""
    KEY = "gan_lessons.doctor"

    def get(self, fn, default=None):
        return default if fn is None else fn.metadata.get(self.KEY, default)

    def __contains__(self, fn):
        return self.KEY in fn.metadata

    def __setitem__(self, fn, info):
        fn.metadata[self.KEY] = info


class _Recorder(TorchFunctionMode):
    """Sees every torch call in the block and keeps what a diagnosis may need."""

    def __init__(self, doc):
        super().__init__()
        self.doc = doc

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _compiling():                  # torch.compile traces the step: record nothing inside it
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        try:
            self.doc._before(func, name, args, kwargs)
        except Exception as error:  # bookkeeping must never break the student's code
            self.doc.notes.append(f"doctor bookkeeping failed before {name}: {error!r}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = func(*args, **kwargs)
        for w in caught:                # torch's own warnings, pointed at the student's line, not at this file
            _warn_at_user_line(w)
        try:
            self.doc._after(name, args, kwargs, out)
        except Exception as error:
            self.doc.notes.append(f"doctor bookkeeping failed after {name}: {error!r}")
        return out


class doctor:
    """Context manager. Name what you train: doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D)."""

    def __init__(self, *unnamed, namespaces=None, **named):
        for k, obj in enumerate(unnamed):
            named[f"{type(obj).__name__}{k}"] = obj
        self.named = named
        # where else names come from, read when a name is needed: a callable giving the live namespaces (the
        # extension passes the notebook's); by default the frame that entered the doctor
        self.namespaces, self.frame = namespaces, None
        self.seen_modules, self.seen_optimizers = weakref.WeakSet(), weakref.WeakSet()
        self._names, self._names_key, self.error_spaces = None, None, []
        self.nodes = _Nodes()
        # bounded: a long training loop under the doctor must not keep every old graph alive
        self.inplace, self.backwards, self.steps = deque(maxlen=1000), deque(maxlen=50), deque(maxlen=50)
        self.stack, self.sites = [], []
        self.notes, self.diagnoses, self.last_leaf_inplace = [], [], None
        self.warned = set()   # (what, file, line): a line in a loop warns once, not once per pass or parameter
        self.data_aliases = {}
        self.serial, self.pending_data, self.zeroed = 0, {}, {}   # nodes recorded so far; `.data` changes not yet judged

    # --- recording -------------------------------------------------------------------------------------------
    def _before(self, func, name, args, kwargs):
        target = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if name == "__get__" and getattr(getattr(func, "__self__", None), "__name__", "") == "grad" \
                and target is not None and not target.is_leaf and not target.retains_grad:
            self._nonleaf_grad(target, _user_frame())
        if name in ("zero_", "_foreach_zero_") and args:     # zero_grad(set_to_none=False)
            for t in _tensors(args[0]) if name == "_foreach_zero_" else [args[0]]:
                self.zeroed[id(t)] = t._version + 1
            if len(self.zeroed) > 10000:
                self.zeroed.clear()
        if target is not None and _is_inplace(name, kwargs):
            if target.is_leaf and target.requires_grad and torch.is_grad_enabled():
                self.last_leaf_inplace = (target, name, _user_frame())
            alias, alias_of = self.data_aliases.get(id(target), (lambda: None, None))
            if alias() is target:             # the same live alias, not a new tensor that reused its id
                # judged at the next backward: harmless unless a graph made before it saved the tensor
                self.pending_data[id(alias_of)] = (weakref.ref(alias_of), name, _user_frame(), self.serial, 5)
        if name == "backward" and target is not None:
            self._record_backward([target], kwargs.get("retain_graph", args[2] if len(args) > 2 else None),
                                  kwargs.get("inputs", args[4] if len(args) > 4 else None))
        elif name == "grad" and func is torch.autograd.grad and args:     # autograd.grad, jacobian, hessian
            retain = kwargs.get("retain_graph")
            self._record_backward(_tensors(args[0]), kwargs.get("create_graph") if retain is None else retain,
                                  args[1] if len(args) > 1 else kwargs.get("inputs"))
        if name == "binary_cross_entropy_with_logits" and target is not None and _after_sigmoid(target):
            self._suspicious("a sigmoid is fed into binary_cross_entropy_with_logits, which applies its own sigmoid",
                             {"where": _user_frame(), "effect": _double_sigmoid_effect(args[1] if len(args) > 1 else None)},
                             [("pass the raw logits; drop the extra sigmoid", "05")])

    def _serials(self, roots):
        return {info[3] for fn in graphs.walk(roots) if (info := self.nodes.get(fn))}

    def _record_backward(self, roots, retain, inputs):
        depth = {}
        for fn, d in _depths(roots):
            if hasattr(fn, "variable"):
                depth.setdefault(fn.variable, d)
        if inputs is not None:            # backward(inputs=...) fills only these
            keep = set(_tensors(inputs))
            depth = {p: d for p, d in depth.items() if p in keep}
        self._judge_data_mutations(roots)
        # weak roots and node serials: a record must not keep a retained or unused graph alive
        self.backwards.append({"roots": [weakref.ref(t) for t in roots], "root_ids": {id(t) for t in roots},
                               "where": _user_frame(), "retain": bool(retain),
                               "nodes": self._serials(roots), "depth": depth, "used_by": set(),
                               "fresh": {p for p in depth if p.grad is None
                                         or self.zeroed.get(id(p.grad)) == p.grad._version}})

    def _after(self, name, args, kwargs, out):
        target = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if name == "__get__" and isinstance(out, torch.Tensor) and target is not None and target.requires_grad \
                and out.data_ptr() == target.data_ptr() and not out.requires_grad:
            self.data_aliases[id(out)] = (weakref.ref(out), target)   # `.data` of a tracked tensor
            if len(self.data_aliases) > 1000:
                self.data_aliases = {k: v for k, v in self.data_aliases.items() if v[0]() is not None}
        if target is not None and _is_inplace(name, kwargs):
            op = f"{name}(inplace=True)" if kwargs.get("inplace") is True else name
            self.inplace.append({"ptr": target.untyped_storage().data_ptr(), "op": op, "where": _user_frame(),
                                 "version": target._version, "shape": tuple(target.shape),
                                 "module": self.stack[-1] if self.stack else None})  # a module object
        where, module = (self.sites[-1] if self.sites else None), (self.stack[-1] if self.stack else None)
        for t in out if isinstance(out, (tuple, list)) else [out]:
            todo = [getattr(t, "grad_fn", None)]
            while todo:               # the output's node and any nodes the op made inside (linear: addmm, view)
                fn = todo.pop()
                if fn is None or fn in self.nodes or hasattr(fn, "variable"):
                    continue
                where = where or _user_frame()
                self.serial = next(_SERIAL)
                self.nodes[fn] = (name, module, where, self.serial)
                todo.extend(f for f, _ in fn.next_functions)

    def _pre_forward(self, module, args):
        if _compiling():
            return
        # ops inside a module are attributed to the student's line that called the outermost module
        site = self.sites[-1] if self.sites else _user_frame()
        self.seen_modules.add(module)
        self.stack.append(module)
        self.sites.append(site)

    def _post_forward(self, module, args, out):
        if _compiling():
            return
        if self.stack:
            self.stack.pop()
            self.sites.pop()

    def _pre_step(self, opt, args, kwargs):
        self.seen_optimizers.add(opt)
        name = self._optimizer_name(opt)
        params = [p for g in opt.param_groups for p in g["params"]]
        missing = [self.param_names.get(p, "?") for p in params if p.grad is None and p.requires_grad]
        if any(callable(a) and not isinstance(a, torch.optim.Optimizer) for a in (*args, *kwargs.values())):
            missing = []                   # LBFGS and friends: the closure computes the gradients inside step()
        if missing:
            self._suspicious(f"{name}.step() runs while {len(missing)} of its {len(params)} parameters have no "
                             f".grad: they will not change", {"where": _user_frame(), "parameters": missing[:6]},
                             [("check that the loss reaches them: a detach() or backward(inputs=...) cuts them off", "04")])
        contributors = self._contributors(params)
        self._check_leftover_gradients(opt, name, contributors)
        self._check_foreign_gradients(name, params, contributors)

    def _post_step(self, opt, args, kwargs):
        params = [p for g in opt.param_groups for p in g["params"]]
        for b in self._contributors(params):
            b["used_by"].add(id(opt))
        self.steps.append({"optimizer": opt, "where": _user_frame(), "params": params,
                           "versions": [p._version for p in params]})

    def _contributors(self, params):
        """The backward passes whose gradients the parameters' .grad holds now: walking back from the latest,
        each parameter's stop at the backward that found its .grad empty (after zero_grad)."""
        found = []
        for p in params:
            for b in reversed(self.backwards):
                if p in b["depth"]:
                    if not any(b is f for f in found):
                        found.append(b)
                    if p in b["fresh"]:
                        break
        return found

    def _check_leftover_gradients(self, opt, name, contributors):
        """Gradients left in .grad by another loss's backward (already used by another optimizer's step), added
        to this optimizer's own: a zero_grad() is missing or misplaced."""
        lines = {(b["where"].file, b["where"].line) for b in contributors if b["where"] is not None}
        stale = [b for b in contributors if b["used_by"] - {id(opt)}]
        if len(lines) > 1 and stale:
            own = next(b for b in contributors if b not in stale) if len(stale) < len(contributors) else contributors[0]
            self._suspicious(f"{name}.step() adds up gradients from two losses: what the backward at "
                             f"{stale[0]['where']} left in .grad (already used by another optimizer's step) and "
                             f"the backward at {own['where']}", {"where": _user_frame()},
                             [(f"call zero_grad() on this optimizer right before its own loss's backward", "04")])

    def _check_foreign_gradients(self, name, params, contributors):
        """A GAN's D stepping on gradients from a backward that ran through D on into G (G's loss, or a D loss
        whose fake batch was not detached). Only for a D-like net whose other net has its own optimizer: one
        loss training two nets (an autoencoder, pix2pix's G) is correct."""
        mine = set(params)
        names = self.param_names
        if not params or not contributors or not _looks_like_gan(names.get(params[0], "")):
            return
        b = contributors[0]
        depth = b["depth"]
        my_depth = min(d for p, d in depth.items() if p in mine) if mine & depth.keys() else None
        if my_depth is None:
            return
        trained = {p for o in self._known_optimizers() for g in o.param_groups for p in g["params"]}
        deeper = {names[p].split(".")[0] for p, d in depth.items()
                  if p not in mine and p in names and d > my_depth and p in trained}
        if deeper:
            self._suspicious(f"{name}.step() uses gradients from the backward at {b['where']}, whose loss ran "
                             f"through these parameters on into {', '.join(sorted(deeper))}: either that net's "
                             f"loss (as G's loss runs through D), which this step must not use, or this net's "
                             f"own loss on an input that was not detached", {"where": _user_frame()},
                             [("call zero_grad() on this optimizer right before its own loss's backward, and "
                               "detach the fake batch in D's loss", "04")])

    def _known_optimizers(self):
        known = {id(o): o for o in self.seen_optimizers}
        for ns in [self.named] + self._namespaces():
            for _, o in _candidates(ns):
                if isinstance(o, torch.optim.Optimizer):
                    known.setdefault(id(o), o)
        return known.values()

    def _judge_data_mutations(self, roots):
        """A `.data` change is wrong only if a graph built before it saved the tensor: this backward will then
        use the new values with the old activations. Canonical WGAN clipping (after the step, before the next
        forward) stays quiet."""
        if not self.pending_data:
            return
        oldest = min(v[3] for v in self.pending_data.values())
        old_nodes = [fn for fn in graphs.walk(roots) if self.nodes.get(fn, (0, 0, 0, oldest + 1))[3] <= oldest]
        for key, (ref, op, where, serial, left) in list(self.pending_data.items()):
            tensor = ref()
            nodes = [fn for fn in old_nodes if self.nodes.get(fn)[3] <= serial]
            if tensor is not None and nodes and any(s.param for fn in nodes
                                                    for s in graphs.saved_tensors(fn, {tensor: "x"})):
                self._warn_data_mutation(tensor, op, where)
                del self.pending_data[key]
            elif tensor is None or left <= 1:
                del self.pending_data[key]
            else:
                self.pending_data[key] = (ref, op, where, serial, left - 1)

    def _warn_data_mutation(self, tensor, op, where):
        self._suspicious(f"`.data.{op}` changes {self._name(tensor)} behind autograd's back: its version counter "
                         f"does not move, so a graph that saved it gives a wrong gradient without any error",
                         {"where": where}, [("update under torch.no_grad() instead, or clone()", "03")],
                         key=f".data.{op}")

    def _suspicious(self, summary, facts, fixes, key=None):
        where = facts.get("where")
        seen = (key or summary, where.file if where else None, where.line if where else None)
        if seen in self.warned:
            return
        self.warned.add(seen)
        d = Diagnosis("suspicious", summary, facts, fixes)
        self.diagnoses.append(d)
        warnings.warn_explicit(d.text(), DoctorWarning, _shown(where.file) if where else "<unknown>",
                               where.line if where else 0)

    # --- naming ----------------------------------------------------------------------------------------------
    def names(self, extra=()):
        """Names, resolved now: {module: name}, {parameter or tensor: name}, {id(optimizer): name}. First come the
        names given to doctor(...), then the live namespace (variables, and modules one attribute inside other
        objects: `agent.critic`), then `extra` namespaces (an error's frames), then a class-based name for every
        module the hooks saw that is still unnamed (`Discriminator.net.7.weight`)."""
        spaces = [self.named] + [ns for ns in self._namespaces()] + list(extra)
        found = [(n, o) for ns in spaces for n, o in _candidates(ns)]
        key = (tuple((n, id(o)) for n, o in found), len(self.seen_modules), len(self.seen_optimizers))
        if key == self._names_key:
            return self._names
        modules, params, optimizers, variables = {}, {}, {}, {}
        def add_module(top, module):
            for sub_name, sub in module.named_modules():
                modules.setdefault(sub, f"{top}.{sub_name}" if sub_name else top)
            for p_name, p in (*module.named_parameters(), *module.named_buffers()):
                params.setdefault(p, f"{top}.{p_name}")
        for n, o in found:
            if isinstance(o, torch.nn.Module):
                add_module(n, o)
            elif isinstance(o, torch.optim.Optimizer):
                optimizers.setdefault(id(o), n)
            elif isinstance(o, torch.Tensor) and self.named.get(n) is o:
                params.setdefault(o, n)
            elif isinstance(o, torch.Tensor):
                variables.setdefault(n, o)
        seen = list(self.seen_modules)
        inner = {sub for m in seen for sub in m.modules() if sub is not m}
        used = {}
        for m in sorted((m for m in seen if m not in modules and m not in inner), key=lambda m: type(m).__name__):
            base = type(m).__name__
            used[base] = used.get(base, 0) + 1
            add_module(base if used[base] == 1 else f"{base}#{used[base]}", m)
        for opt in list(self.seen_optimizers):
            if id(opt) not in optimizers:
                tops = sorted({params.get(p, "?").split(".")[0] for g in opt.param_groups for p in g["params"]})
                optimizers[id(opt)] = f"{type(opt).__name__}({', '.join(tops)})"
        self._names, self._names_key = (modules, params, optimizers, variables), key
        return self._names

    def _namespaces(self):
        spaces = list(self.namespaces()) if self.namespaces is not None else \
            [self.frame.f_locals, self.frame.f_globals] if self.frame is not None else []
        frame, stack = sys._getframe(1), []      # the student's functions running now: their local names
        while frame is not None:
            if _is_user(frame) and frame.f_code.co_name != "<module>":
                stack.append(frame.f_locals)
            frame = frame.f_back
        return spaces + stack + self.error_spaces

    @property
    def param_names(self):
        return self.names()[1]

    def _module_name(self, module):
        return None if module is None else self.names()[0].get(module, type(module).__name__)

    def _optimizer_name(self, opt):
        return self.names()[2].get(id(opt)) or type(opt).__name__

    def _variable(self, ptr, shape):
        """The name of a live variable (not a parameter) whose storage is `ptr`: the `h` a ReLU changed,
        `laterals[0]`."""
        params = self.param_names
        for k, v in self.names()[3].items():
            if v not in params and tuple(v.shape) == tuple(shape) and v.untyped_storage().data_ptr() == ptr:
                return k
        return None

    def _variables_made_by(self, serials):
        """Names of live variables (not parameters) whose tensor was made by one of these nodes: `fake`."""
        variables = self.names()[3]
        made = [k for k, v in variables.items() if (info := self.nodes.get(v.grad_fn)) and info[3] in serials]
        if made:
            return made[:3]
        reached = []                      # a carried state: rebound since, its new value still reaches the old graph
        for k, v in variables.items():
            distance = self._distance(v.grad_fn, serials)
            if distance is not None:
                reached.append((distance, k))
        return [k for d, k in sorted(reached) if d == min(reached)[0]][:3] if reached else []

    def _distance(self, fn, serials, limit=200):
        """Steps from `fn` back to the nearest node whose serial is in `serials`, or None."""
        frontier, seen, d = [fn] if fn is not None else [], set(), 0
        while frontier and len(seen) < limit:
            nxt = []
            for f in frontier:
                if f in seen:
                    continue
                seen.add(f)
                if (info := self.nodes.get(f)) and info[3] in serials:
                    return d
                nxt.extend(g for g, _ in f.next_functions if g is not None)
            frontier, d = nxt, d + 1
        return None

    def _name(self, tensor):
        if tensor in self.param_names:
            return self.param_names[tensor]
        info = self.nodes.get(tensor.grad_fn) if tensor.grad_fn is not None else None
        if info:
            module = self._module_name(info[1])
            return f"the output of {info[0]}" + (f" in {module}" if module else "") + f" at {info[2]}"
        return f"a tensor of shape {tuple(tensor.shape)}"

    # --- diagnosis -------------------------------------------------------------------------------------------
    def diagnose(self, error) -> Diagnosis | None:
        message = str(error)
        self.error_spaces = [tb.tb_frame.f_locals for tb in _frames(error.__traceback__) if _is_user(tb.tb_frame)]
        if "modified by an inplace operation" in message:
            return self._version_error(error)
        if "backward through the graph a second time" in message:
            return self._freed_error(error)
        if "leaf Variable that requires grad is being used in an in-place operation" in message:
            return self._leaf_error()
        return None

    def _roots_of(self, error):
        """The tensors whose backward failed: `self` of torch's Tensor.backward frame in the traceback, or the
        outputs of torch.autograd.grad (which jacobian and hessian call)."""
        roots = []
        for tb in _frames(error.__traceback__):
            frame = tb.tb_frame
            if frame.f_code.co_name == "backward" and isinstance(frame.f_locals.get("self"), torch.Tensor):
                roots = [frame.f_locals["self"]]
            elif frame.f_code.co_name == "grad" and frame.f_code.co_filename.startswith(_TORCH_DIR) \
                    and "outputs" in frame.f_locals:
                roots = _tensors(frame.f_locals.get("t_outputs", frame.f_locals["outputs"])) or roots
        last = [r() for r in self.backwards[-1]["roots"]] if self.backwards else []
        return roots or [t for t in last if t is not None]

    def _version_error(self, error):
        roots = self._roots_of(error)
        found = list(self._saved(roots, stale=True))
        if not found:
            return Diagnosis("version", "a saved tensor was modified in place, but the doctor could not find it",
                             {}, _STEP_FIXES + _INPLACE_FIXES)
        shape = graphs.SAVED_SHAPE.search(str(error))
        shape = tuple(int(n) for n in shape.group(1).split(",") if n.strip()) if shape else None
        versions = re.search(r"is at version (\d+); expected version (\d+)", str(error))
        versions = (int(versions.group(1)), int(versions.group(2))) if versions else None
        s, fn = next(((s, fn) for s, fn in found if s.shape == shape and (s.version_now, s.version_saved) == versions),
                     next(((s, fn) for s, fn in found if s.shape == shape), found[0]))
        op, module, saved_at, _ = self.nodes.get(fn, (s.node, None, None, 0))
        module = self._module_name(module)
        transposed = " (a transposed view: Linear saves weight.t())" if s.param and s.param.endswith(".T") else ""
        modifier, rec = self._modifier(s)
        variable = None if s.param or rec is None else self._variable(rec["ptr"], s.shape or ())
        label = s.param or (f"`{variable}`" if variable else "a tensor")
        facts = {"tensor": f"{label} {list(s.shape or [])}{transposed}",
                 "saved by": f"{s.node} ({op}{' in ' + module if module else ''}) at {saved_at}",
                 "modified by": modifier,
                 "versions": f"now {s.version_now}, saved at {s.version_saved}"}
        if len(found) > 1:
            facts["also stale"] = ", ".join(sorted({x.param or x.node for x, _ in found} - {s.param or s.node}))
        if ".step() at" in modifier:       # an optimizer step: reorder or detach, never clone
            fixes = _STEP_FIXES + (_GAN_FIXES if _looks_like_gan(s.param) else [])
        else:
            fixes = _INPLACE_FIXES
        return Diagnosis("version", f"{label if s.param or variable else 'a saved tensor'} changed in place after "
                         f"the forward saved it", facts, fixes)

    def _saved(self, roots, stale=False):
        for fn in graphs.walk(roots):
            for s in graphs.saved_tensors(fn, self.param_names):
                if not stale or s.state == "stale":
                    yield s, fn

    def _modifier(self, s):
        name = (s.param or "").removesuffix(".T")
        param = next((p for p, n in self.param_names.items() if n == name), None)
        if param is not None:
            for step in reversed(self.steps):
                if any(p is param for p in step["params"]):
                    return f"{self._optimizer_name(step['optimizer'])}.step() at {step['where']} (in place, under no_grad)", None
        for rec in reversed(self.inplace):
            same = (rec["ptr"] == param.untyped_storage().data_ptr() if param is not None
                    else (rec["version"], rec["shape"]) == (s.version_now, s.shape))
            if same:
                module = self._module_name(rec["module"])
                return f"{rec['op']}" + (f" in {module}" if module else "") + f" at {rec['where']}", rec
        return "an in-place operation the doctor did not see", None

    def _freed_error(self, error):
        roots = self._roots_of(error)
        infos = {info[3]: info for fn in graphs.walk(roots) if (info := self.nodes.get(fn))}
        mine = set(infos)
        same = lambda b: b["root_ids"] == {id(t) for t in roots}
        earlier = [b for b in list(self.backwards)[:-1] if not same(b) and not b["retain"] and b["nodes"] & mine]
        if not earlier:
            return Diagnosis("freed", "this graph was already used by a backward without retain_graph",
                             {"backward": str(self.backwards[-1]["where"]) if self.backwards else "?"}, _FREED_FIXES)
        b = earlier[-1]
        shared = b["nodes"] & mine
        modules = sorted({self._module_name(infos[n][1]).split(".")[0] for n in shared if infos[n][1] is not None})
        lines = sorted({str(infos[n][2]) for n in shared if infos[n][2]})
        held = self._variables_made_by(shared)
        facts = {"freed by": f"the backward at {b['where']}",
                 "shared part": f"{len(shared)} autograd nodes"
                                + (f", the forward of {' and '.join(modules)}" if modules else "")
                                + (f" from {'; '.join(lines[:3])}" if lines else "") + ", part of both losses"
                                + (f"; it reaches the second loss through {', '.join(f'`{v}`' for v in held)}" if held else ""),
                 "failing backward": str(self.backwards[-1]["where"]) if self.backwards else "?"}
        failing = self.backwards[-1]["where"] if self.backwards else None
        if failing is not None and b["where"] is not None and (b["where"].file, b["where"].line) == \
                (failing.file, failing.line):          # the same backward line, one loop pass later
            return Diagnosis("freed", "a tensor carried from one loop pass to the next still holds the previous "
                             "pass's graph, which that pass's backward freed", facts, _CARRIED_FIXES)
        return Diagnosis("freed", "two losses share part of one graph, and the first backward freed it", facts,
                         _FREED_FIXES)

    def _leaf_error(self):
        if self.last_leaf_inplace is None:
            return Diagnosis("leaf_inplace", "an in-place op on a leaf that requires grad", {}, _LEAF_FIXES)
        tensor, op, where = self.last_leaf_inplace
        return Diagnosis("leaf_inplace", f"{op} on {self._name(tensor)}, a leaf that requires grad, while "
                         f"autograd is recording", {"where": where}, _LEAF_FIXES)

    def _nonleaf_grad(self, tensor, where):
        if any(d.kind == "nonleaf_grad" and d.facts["where"] == where for d in self.diagnoses):
            return                        # one diagnosis per line is enough
        d = Diagnosis("nonleaf_grad", f"`.grad` read on {self._name(tensor)}, which is not a leaf: it is None",
                      {"where": where}, [("call .retain_grad() on it before backward(), or read a leaf's .grad", "01")])
        self.diagnoses.append(d)
        print(d.text(), file=sys.stderr)

    # --- context manager -------------------------------------------------------------------------------------
    def __enter__(self):
        if self.namespaces is None:
            self.frame = sys._getframe(1)
        self.handles = [nn_module.register_module_forward_pre_hook(self._pre_forward),
                        nn_module.register_module_forward_hook(self._post_forward),
                        register_optimizer_step_pre_hook(self._pre_step),
                        register_optimizer_step_post_hook(self._post_step)]
        self.mode = _Recorder(self)
        self.mode.__enter__()
        return self

    def __exit__(self, kind, error, tb):
        self.mode.__exit__(None, None, None)
        for h in self.handles:
            h.remove()
        if error is not None:
            error.__traceback__ = _clean(error.__traceback__)
            self.attach(error)
        self.frame, self.error_spaces = None, []
        return False                      # never swallow

    def attach(self, error):
        try:
            diagnosis = self.diagnose(error)
        except Exception as failure:      # the original error surfaces anyway
            diagnosis = None
            self.notes.append(f"the doctor could not diagnose this ({failure!r})")
        if diagnosis is not None:
            self.diagnoses.append(diagnosis)
            error.diagnosis = diagnosis
            print(diagnosis.text(), file=sys.stderr)
        for note in self.notes[-1:]:
            print(f"autograd doctor note: {note}", file=sys.stderr)
        return diagnosis


_STEP_FIXES = [("reorder: run every backward that needs this forward before the optimizer step that changes its "
                "weights, or run a fresh forward after the step", "05"),
               ("if the later loss must not train through this net, cut it off: detach its input, or "
                "backward(inputs=...) for the parameters it should train", "04")]
_GAN_FIXES = [("in a GAN: detach the fake batch in D's loss, and take G's gradient through D before opt_D.step() "
               "or from a fresh D forward after it", "05")]
_INPLACE_FIXES = [("clone() the tensor before changing it in place, or make the op out of place (x = x + 1; "
                   "inplace=False)", "03")]
_CARRIED_FIXES = [("detach the carried tensor at the start of each pass (h = h.detach()): each backward then "
                   "stops at this pass; retain_graph=True would only trade this error for the in-place one at the "
                   "next optimizer step", "02")]
_FREED_FIXES = [("detach the shared tensor in the loss that must not reach it", "04"),
                ("recompute: run a fresh forward for the second loss", "05"),
                ("retain_graph=True on the first backward; it keeps every saved tensor alive until the next "
                 "backward (about the size of the parameters for seed 000's GAN at batch 64)", "02")]
_LEAF_FIXES = [("wrap the update in `with torch.no_grad():`, as optimizers do", "01"),
               ("or operate out of place: x = x + 1 makes a new, non-leaf tensor", "01")]


def load_ipython_extension(ip):
    """%load_ext gan_lessons: every cell runs under a doctor that watches the modules and optimizers in the
    notebook's namespace; these errors get a diagnosis under the usual traceback, others pass untouched."""
    state = {}

    def pre_run_cell(info=None):
        state["doc"] = doctor(namespaces=lambda: [ip.user_ns]).__enter__()
        _active.append(state["doc"])

    def post_run_cell(result=None):
        doc = state.pop("doc", None)
        if doc is not None:
            doc.__exit__(None, None, None)
            _active.remove(doc)

    def on_error(shell, kind, error, tb, tb_offset=None):
        tb = error.__traceback__ = _clean(tb)
        shell.showtraceback((kind, error, tb), tb_offset=tb_offset)
        doc = state.get("doc")
        if doc is not None:
            doc.attach(error)
        return None

    ip.events.register("pre_run_cell", pre_run_cell)
    ip.events.register("post_run_cell", post_run_cell)
    ip.set_custom_exc((RuntimeError,), on_error)
    _installed[id(ip)] = (pre_run_cell, post_run_cell)


_installed = {}
_active = []


def active():
    """The doctor watching the running cell under `%load_ext gan_lessons`, or None. lesson.expect_error asks it to
    diagnose an error the cell catches on purpose, so a lesson can show the extension's diagnosis and go on."""
    return _active[-1] if _active else None


def unload_ipython_extension(ip):
    """%unload_ext gan_lessons: back to plain tracebacks."""
    pre, post = _installed.pop(id(ip), (None, None))
    if pre is not None:
        ip.events.unregister("pre_run_cell", pre)
        ip.events.unregister("post_run_cell", post)
        ip.set_custom_exc((), None)
