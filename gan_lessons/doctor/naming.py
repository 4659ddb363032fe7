"""Names, resolved when a diagnosis needs them: from doctor(...), the live namespace, objects and lists inside it,
the running and failing functions' locals, and class names for modules the hooks saw."""
import ast
import collections
import re
import sys
import types
import weakref
from dataclasses import dataclass
from functools import partial

import torch

from gan_lessons import graphs
from gan_lessons.doctor.frames import is_user
from gan_lessons.i18n import _

_PLAIN = (type, types.ModuleType, types.FunctionType, types.MethodType, int, float, str, bytes, list, tuple, dict,
          set)


def _candidates(namespace: dict, depth=3):
    """(name, object) for the modules, optimizers and tensors of a namespace, and, up to `depth` steps inside
    other objects and lists, for their modules, optimizers and tensors (`agent.critic`, `maddpg.agents[0].actor`,
    `model.fake_B`, `laterals[0]`)."""
    for k, v in list(namespace.items()):
        if not k.startswith("_") and k.isidentifier():      # not pytest's rewritten asserts' `@py_assert1`
            yield from _inside(k, v, depth, top=True)


def _inside(name, v, depth, top=False):
    if isinstance(v, (torch.nn.Module, torch.optim.Optimizer, torch.Tensor)):
        yield name, v
        if isinstance(v, torch.nn.Module) and depth > 0:      # plain tensor attributes (model.hidden, an LSTM's (h, c))
            for a, w in list(vars(v).items()):
                if a.startswith("__") or isinstance(w, torch.nn.Parameter):
                    continue
                if isinstance(w, (torch.Tensor, torch.optim.Optimizer)):     # BigGAN's `D.optim`, a `self._cache`
                    yield f"{name}.{a}", w
                elif not a.startswith("_") and isinstance(w, _SEQUENCES + (dict,)) and len(w) <= 8:
                    yield from ((f"{name}.{a}[{k!r}]", t) for k, t in _items(w) if isinstance(t, torch.Tensor))
    elif depth <= 0:
        return
    elif isinstance(v, _SEQUENCES + (dict,)) and len(v) <= 64:
        for k, w in _items(v):
            yield from _inside(f"{name}[{k!r}]", w, depth - 1)
    elif not isinstance(v, _PLAIN) and hasattr(v, "__dict__") and not _doctors(v):   # not a doctor or one of its
        # parts: its records hold the modules it saw, which would be named through it (`doc.stack[0]`)
        try:
            inside = list(vars(v).items())
        except TypeError:
            return
        for a, w in inside:          # a private tensor too (`self._fake`), not a private object's insides
            if not a.startswith("_") or (isinstance(w, torch.Tensor) and not a.startswith("__")):
                yield from _inside(f"{name}.{a}", w, depth - 1)


_SEQUENCES = (list, tuple, collections.deque)


def _items(container):
    """(index or key, element) of a list, tuple, deque or dict (a dict's keys: numbers and strings only)."""
    if isinstance(container, dict):
        return [(k, w) for k, w in list(container.items()) if isinstance(k, (int, str))]
    return list(enumerate(container))


def _add_module(top, module, modules, params, variables):
    """Name a module found as `top`, its submodules, parameters and buffers, and the plain tensors they keep."""
    for sub_name, sub in module.named_modules():
        path = f"{top}.{sub_name}" if sub_name else top
        modules.setdefault(sub, path)
        for a, w in list(vars(sub).items()):     # a tensor a submodule keeps: `model.layers.0.cache_k`, and the
            if a.startswith("__") or isinstance(w, torch.nn.Parameter):      # tensors of a short list it keeps (a
                continue                                                      # feature bank: `unet.mid.0.bank[0]`)
            if isinstance(w, torch.Tensor):
                variables.setdefault(f"{path}.{a}", w)
            elif not a.startswith("_") and isinstance(w, _SEQUENCES + (dict,)) and len(w) <= 8:
                for k, t in _items(w):
                    if isinstance(t, torch.Tensor):
                        variables.setdefault(f"{path}.{a}[{k!r}]", t)
    for p_name, p in (*module.named_parameters(), *module.named_buffers()):
        params.setdefault(p, f"{top}.{p_name}")
        if p.grad_fn is not None:         # a buffer reassigned to a result with a graph: `G.w_avg`
            variables.setdefault(f"{top}.{p_name}", p)


def _doctors(v) -> bool:
    return type(v).__module__.startswith("gan_lessons.doctor")


_CELL = re.compile(r"<cell line: \d+>")


def _top_level(code) -> bool:
    """Is this a module's or a notebook cell's own code, not a function's? Python and today's IPython name it
    `<module>`; IPython 7.x (Colab's 7.34) names a cell `<cell line: N>`. Its names are globals: taken for a running
    function's locals, they would be searched before the failing function's own and hide its `x_fake` behind an
    earlier cell's."""
    return code.co_name == "<module>" or _CELL.fullmatch(code.co_name) is not None


_DISCRIMINATOR = re.compile(r"((net|model)_?)?[dD](isc\w*)?(_\w+)?|dis([A-Z0-9_]\w*)?|m[ps]d|"
                            r"\w*(critic|[dD]iscriminator)\w*")


def looks_like_gan(name) -> bool:
    """Whether a parameter's (or a module's) name names a GAN's discriminator or a critic: `D.0.weight`, `netD`,
    `model_d`, `disA`, `self.image_discriminator.fc.weight`, `trainer.D.conv1.bias`, HiFi-GAN's `mpd` (any module
    on the way, not the parameter itself)."""
    parts = (name or "").split(".")
    modules = parts[:-1] if len(parts) > 1 else parts
    return any(_DISCRIMINATOR.fullmatch(part) for part in modules)


def looks_like_generator(net: str) -> bool:
    """Whether a net's module path names a GAN's generator: `G`, `netG`, `self.generator`, `gen_a`."""
    return any(re.fullmatch(r"(net)?[gG](en\w*)?(_\w+)?", part) for part in net.split("."))


def net_of(names: list) -> str:
    """The module path the names of one optimizer's parameters share: `t.D` for `t.D.0.weight` and `t.D.2.bias`;
    the first name's top module when they share none."""
    paths = [n.split(".")[:-1] or n.split(".") for n in names]
    shared = []
    for parts in zip(*paths):
        if len(set(parts)) != 1:
            break
        shared.append(parts[0])
    return ".".join(shared) or (names[0].split(".")[0] if names else "")


def rebound(code: str) -> list:
    """The names a line both assigns and reads, in the order they are assigned: `h` in `output, h = rnn(x, h)`,
    `self.hidden` in `out, self.hidden = self.lstm(x, self.hidden)`: a state each pass makes from the last one."""
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return []
    def named(node):
        return ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    stored = [n for node in ast.walk(tree) if isinstance(getattr(node, "ctx", None), ast.Store) and (n := named(node))]
    loaded = {n for node in ast.walk(tree) if isinstance(getattr(node, "ctx", None), ast.Load) and (n := named(node))}
    return [n for n in stored if n in loaded]


def _rebinding(info) -> list:
    """The last part of each name the line that made a node both reads and makes (`self.mean_w = ... self.mean_w`)."""
    code = info.inside.code if info.inside is not None else (info.where.code if info.where else "")
    return [name.rsplit(".", 1)[-1] for name in rebound(code or "")]


@dataclass(slots=True)
class Names:
    """What names() resolved, each by what a diagnosis looks up."""
    modules: dict                # {module: name}
    params: dict                 # {parameter, buffer or tensor named to doctor(...): name}
    optimizers: dict             # {id(optimizer): name}
    variables: dict              # {name: a tensor a variable, a module or an object holds}


class Namer:
    """The doctor's namer: names for what a diagnosis or a warning mentions, resolved when asked, from the names given
    to doctor(...), the namespaces it reads (`namespaces`, a callable; by default the frame that entered the doctor)
    and what the journal saw run (modules, optimizers, nodes)."""

    def __init__(self, journal, named, namespaces=None):
        self.journal, self.named, self.namespaces = journal, named, namespaces
        self.frame, self.error_spaces = None, []     # the frame that entered the doctor; a failing error's frames
        self.optimizer_objects = weakref.WeakValueDictionary()   # id: every optimizer names() found
        self._names = self._names_key = self._known_names = self._known_key = None

    def forget(self):
        """Let go of the names resolved so far (they hold the student's modules and tensors) and of the frames."""
        self._names = self._names_key = self._known_names = self._known_key = None
        self.frame, self.error_spaces = None, []

    def names(self, extra=()):
        """Names, resolved now (a Names: modules, parameters, optimizers, variables). First come the
        names given to doctor(...), then the live namespace (variables, and modules one attribute inside other
        objects: `agent.critic`), then `extra` namespaces (an error's frames), then a class-based name for every
        module the hooks saw that is still unnamed (`Discriminator.net.7.weight`)."""
        spaces = [self.named] + [ns for ns in self.spaces()] + list(extra)
        found = [(n, o) for ns in spaces for n, o in _candidates(ns)]
        key = (tuple((n, id(o)) for n, o in found), len(self.journal.seen_modules), len(self.journal.seen_optimizers))
        if key == self._names_key:
            return self._names
        modules, params, optimizers, variables = {}, {}, {}, {}
        add_module = partial(_add_module, modules=modules, params=params, variables=variables)
        for n, o in found:
            if isinstance(o, torch.nn.Module):
                add_module(n, o)
            elif isinstance(o, torch.optim.Optimizer):
                optimizers.setdefault(id(o), n)
                self.optimizer_objects[id(o)] = o        # every optimizer in sight, stepped yet or not
            elif isinstance(o, torch.Tensor) and self.named.get(n) is o:
                params.setdefault(o, n)
            elif isinstance(o, torch.Tensor):
                variables.setdefault(n, o)
        trained = {id(p) for opt in [*self.optimizer_objects.values(), *self.journal.seen_optimizers]
                   for g in opt.param_groups for p in g["params"]}
        for n, o in variables.items():    # a tensor an optimizer holds, kept in a plain variable (`v`, no module)
            if id(o) in trained and "." not in n and "[" not in n:
                params.setdefault(o, n)
        seen = list(self.journal.seen_modules)
        inner = {sub for m in seen for sub in m.modules() if sub is not m}
        used = {}
        for m in sorted((m for m in seen if m not in modules and m not in inner), key=lambda m: type(m).__name__):
            base = type(m).__name__
            used[base] = used.get(base, 0) + 1
            add_module(base if used[base] == 1 else f"{base}#{used[base]}", m)
        for opt in list(self.journal.seen_optimizers):
            if id(opt) not in optimizers:
                tops = sorted({params.get(p, "?").split(".")[0] for g in opt.param_groups for p in g["params"]})
                optimizers[id(opt)] = f"{type(opt).__name__}({', '.join(tops)})"
        self._names, self._names_key = Names(modules, params, optimizers, variables), key
        return self._names

    def spaces(self):
        """The namespaces names are read from, in order: the block's (or the notebook's), the student's functions
        running now, the failing error's frames, the globals of code run inside the block."""
        spaces = list(self.namespaces()) if self.namespaces is not None else \
            [self.frame.f_locals, self.frame.f_globals] if self.frame is not None else []
        frame, stack, outer = sys._getframe(1), [], []   # the student's functions running now: their local names;
        while frame is not None:                 # last, the globals of code run inside the block (exec, runpy)
            if is_user(frame) and not _top_level(frame.f_code):
                stack.append(frame.f_locals)
            elif is_user(frame) and not any(frame.f_globals is space for space in spaces + outer):
                outer.append(frame.f_globals)
            frame = frame.f_back
        return spaces + stack + self.error_spaces + outer

    @property
    def params(self):
        return self.names().params

    def known(self):
        """names() as of the last module or optimizer the hooks saw for the first time: for the hooks that run at
        every step, where resolving every name again (every namespace walked) would cost more than the step."""
        key = (len(self.journal.seen_modules), len(self.journal.seen_optimizers))
        if key != self._known_key:
            self._known_names, self._known_key = self.names(), key
        return self._known_names

    def untrained(self, opt, missing):
        """Of the parameters with no .grad at this step, those no other optimizer in sight holds (InfoGAN's heads: D's
        loss leaves them to the info optimizer) and whose module ran a forward (an embedding never called is unused,
        not cut off)."""
        optimizers = list(self.optimizer_objects.values()) + list(self.journal.seen_optimizers)
        others = {id(q) for o in optimizers if o is not opt
                  for g in o.param_groups for q in g["params"]}
        modules = self.known().modules
        unused = {id(p) for m in modules if m not in self.journal.seen_modules for p in m.parameters(recurse=False)}
        return [p for p in missing if id(p) not in others and id(p) not in unused]

    def module_name(self, module):
        return None if module is None else self.names().modules.get(module, type(module).__name__)

    def optimizer_name(self, opt):
        return self.known().optimizers.get(id(opt)) or type(opt).__name__

    def variable(self, ptr, shape):
        """The name of a live variable (not a parameter) whose storage is `ptr`: the `h` a ReLU changed,
        `laterals[0]`."""
        params = self.params
        held = [(k, v) for k, v in self.names().variables.items()
                if v not in params and v.untyped_storage().data_ptr() == ptr]
        return next((k for k, v in held if tuple(v.shape) == tuple(shape)), None) or \
            next((k for k, v in held if v._base is None), None)      # the whole tensor a saved view is part of

    def variables_made_by(self, serials, since=None):
        """Names of live variables (not parameters) whose tensor was made by one of these nodes: `fake`. A tensor an
        object keeps across calls (`G.w_avg`, `model.hidden`) whose graph reaches them comes first: it is what
        carries an old graph into a new pass, even where a plain variable of the old pass is still alive; but not
        one an object keeps only as a record of this pass, made since `since` (a node serial) by a later
        node than those (`loss_module.last_loss`), where a variable these nodes made is alive."""
        variables = self.names().variables
        nodes = self.journal.nodes
        made = [k for k, v in variables.items() if (info := nodes.get(v.grad_fn)) and info.serial in serials]
        if any("." in k or "[" in k for k in made):       # kept by an object and made by the old graph
            return sorted(made, key=lambda k: "." not in k and "[" not in k)[:3]
        held = [(d, k) for k, v in variables.items() if k not in made and ("." in k or "[" in k)
                and (d := self.distance(v.grad_fn, serials)) is not None]
        if made and since is not None:
            held = [(d, k) for d, k in held if not ((info := nodes.get(variables[k].grad_fn)) and info.serial > since
                                                    and k.rsplit(".", 1)[-1] not in _rebinding(info))]
        if made:
            return ([k for _, k in sorted(held)] + made)[:3]
        reached = []                      # a carried state: rebound since, its new value still reaches the old graph
        for k, v in variables.items():
            distance = self.distance(v.grad_fn, serials)
            if distance is not None:
                reached.append((distance, k))
        if held:
            return [k for _, k in sorted(held)][:3]
        return [k for d, k in sorted(reached) if d == min(reached)[0]][:3] if reached else []

    def distance(self, fn, serials, limit=200):
        """Steps from `fn` back to the nearest node whose serial is in `serials`, or None. Each step further back
        is taken only while fewer than `limit` nodes have been looked at."""
        looked, level = 0, -1
        for f, distance in graphs.breadth_first([fn]):
            if distance > level:
                if looked >= limit:
                    return None
                level = distance
            if (info := self.journal.nodes.get(f)) and info.serial in serials:
                return distance
            looked += 1
        return None

    def name(self, tensor):
        if tensor in self.params:
            return self.params[tensor]
        info = self.journal.nodes.get(tensor.grad_fn) if tensor.grad_fn is not None else None
        if info:
            module = self.module_name(info.module)
            return (_("the output of {op} in {module} at {where}") if module else
                    _("the output of {op} at {where}")).format(op=info.op, module=module, where=info.where)
        return (_("an nn.Parameter of shape {shape}") if isinstance(tensor, torch.nn.Parameter) else
                _("a tensor of shape {shape}")).format(shape=tuple(tensor.shape))

    def optimizer_state(self):
        """(name, optimizer, tensor) for every tensor in the state of the optimizers in sight, named by optimizer,
        parameter and key: `opt_D.state[D.0.weight].exp_avg_sq`."""
        names = self.names()
        found = []
        for opt in self.known_optimizers():
            opt_name = names.optimizers.get(id(opt)) or type(opt).__name__
            for p, state in list(opt.state.items()):
                for key, t in state.items():
                    if isinstance(t, torch.Tensor) and t.dim() > 0:
                        found.append((f"{opt_name}.state[{names.params.get(p, '?')}].{key}", opt, t))
        return found

    def label(self, tensor):
        """`x_hat` for a live variable (the failing function's locals included), else what name() says."""
        name = next((k for k, v in self.names().variables.items() if v is tensor), None)
        return f"`{name}`" if name else self.name(tensor)

    def owner_of(self, opt, leaves):
        """The one optimizer other than `opt` that holds every one of these leaves, if there is one."""
        ids = {id(p) for p in leaves}
        owners = [o for o in self.known_optimizers() if o is not opt
                  and ids <= {id(q) for g in o.param_groups for q in g["params"]}]
        return owners[0] if len(owners) == 1 else None

    def known_optimizers(self):
        """Every optimizer seen stepping or in sight in a namespace."""
        known = {id(o): o for o in self.journal.seen_optimizers}
        for ns in [self.named] + self.spaces():
            for _name, o in _candidates(ns):
                if isinstance(o, torch.optim.Optimizer):
                    known.setdefault(id(o), o)
        return known.values()
