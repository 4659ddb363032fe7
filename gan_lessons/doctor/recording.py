"""What the doctor records while the block runs: every torch call (through a TorchFunctionMode), every module's
forward (global hooks) and every optimizer step (global step hooks)."""
import contextlib
import importlib
import weakref

import torch
from torch.autograd.function import BackwardCFunction
from torch.overrides import TorchFunctionMode, _pop_mode, _push_mode
from torch.overrides import _get_current_function_mode as _current_mode

from gan_lessons import graphs
from gan_lessons.doctor.checks import tensors_in
from gan_lessons.doctor.frames import (
    call_site,
    called_from_user,
    custom_forward,
    optimizer_method,
    outermost_user_frame,
    user_frame,
    user_site,
)
from gan_lessons.doctor.nodes import SERIAL, BackwardCall, CallRecord, InplaceWrite, LeafWrite, Made, NodeInfo, Step
from gan_lessons.doctor.ops import (
    QUIET_CALLS,
    QUIET_GETS,
    compiling,
    frozen_flag,
    grad_fn_of,
    is_inplace,
    version_of,
    written_by,
)
from gan_lessons.doctor.writes import BackwardWrites
from gan_lessons.i18n import _

# the torch functions that make a tensor from Python values: a loss made by one has no graph
_FROM_VALUES = {"tensor", "as_tensor", "scalar_tensor", "from_numpy"}


def _storage(t):
    """The address of a tensor's storage, or None for one without (a FakeTensor while torch.compile traces)."""
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None


def _behind(consumers):
    """{id(parameter): ids of the leaves the backward reaches through the nodes of the module that takes it}, per
    module whose nodes take parameters: the nets a net's input came from (G behind D when D's input is G's output,
    not detached). A loss that sums two nets' separate losses reaches neither through the other."""
    found = {}
    for nodes in consumers.values():
        taken = {id(n.variable) for fn in nodes for n, _ in fn.next_functions if hasattr(n, "variable")}
        reached = {id(fn.variable) for fn, _ in graphs.breadth_first(nodes) if hasattr(fn, "variable")} - taken
        for p in taken:
            found[p] = found.get(p, set()) | reached
    return found


class _Mode(TorchFunctionMode):
    """Sees every torch call in the block and hands it to the recorder."""

    def __init__(self, recorder):
        super().__init__()
        self.recorder, self.journal = recorder, recorder.journal

    def __torch_function__(self, func, types, args=(), kwargs=None):
        journal = self.journal
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "__get__" or name == "__set__":
            attr = getattr(getattr(func, "__self__", None), "__name__", "")
            if attr in QUIET_GETS if name == "__get__" else attr not in ("requires_grad", "grad"):
                return func(*args, **kwargs)    # reads and writes that cannot matter to a diagnosis
        recorder = self.recorder
        if recorder.in_step and name != "backward" or name in QUIET_CALLS or compiling():
            return func(*args, **kwargs)  # an optimizer's own ops, torch.compile tracing: nothing to record
        recorder.in_step = False          # (a backward: a step that raised never reached its post-hook)
        try:
            self.recorder.before(func, name, args, kwargs)
        except Exception as error:  # bookkeeping must never break the student's code
            journal.note(_("doctor bookkeeping failed before {name}: {error}").format(
                name=name, error=repr(error)))
        try:
            if (name == "backward" or name == "grad") and not self.recorder.in_backward:
                with self.recorder.backward_writes():    # what the backward's own code writes (writes.py)
                    out = func(*args, **kwargs)
            else:
                out = func(*args, **kwargs)  # a warning from here is shown at the student's line (WarningsAsPython)
        except BaseException:
            recorder.versions_before = []   # a call that raised: its arguments are not held for the next one
            given = [t for a in (*args, *kwargs.values()) for t in tensors_in(a)]
            journal.failed = CallRecord(name, [weakref.ref(t) for t in given], user_frame(),
                                        [_storage(t) for t in given])
            raise
        try:
            self.recorder.after(name, args, kwargs, out)
        except Exception as error:
            journal.note(_("doctor bookkeeping failed after {name}: {error}").format(
                name=name, error=repr(error)))
        return out


class Recorder:
    """The doctor's recorder: writes into the journal what the block does (each torch call, through its mode; each
    module's forward and optimizer's step, through the global hooks the doctor installs) and tells its subscribers
    (the checks) each event as it starts: on_call and on_result around a torch call, on_grad, on_backward, on_step.
    Its own state is how it is recording: the modules running now and their callers' lines, whether it is paused
    inside an optimizer's step, the versions of the call being recorded's arguments."""

    def __init__(self, journal, namer, subscribers=()) -> None:
        self.journal, self.namer, self.subscribers = journal, namer, list(subscribers)
        self.mode = _Mode(self)
        self.writes = BackwardWrites(journal)
        self.in_backward = False
        self.stack: list = []            # the modules whose forward is running, outermost first
        self.owners: list = []           # for each, the module its ops are told as made by: itself, or for a
                                         # module made inside another's forward (nn.ReLU()(x)), that one's owner
        self.trees: dict = {}            # id(module): (weak module, ids of its submodules), once per module
        self.sites: list = []            # the student's line that called each of them
        self.inputs: list = []           # for each, its first input (weakly), if a tensor that requires grad, and
                                         # its version then
        self.off: set = set()            # ids of the trainable modules running now with gradients off
        self.modes: set = set()          # .training of the modules that made the last graph walked
        self.zeroed: dict = {}           # id(.grad): its version once zero_grad(set_to_none=False) zeroed it
        # inside an optimizer's step() (without a closure) its ops are not recorded: the recorder is off torch's
        # mode stack (paused), or skips them (in_step)
        self.paused = False
        self.in_step = False
        self.versions_before: list = []  # (tensor, version) of the call being recorded's arguments

    def stop(self):
        """Stop recording (the block is over): leave torch's mode stack, unless a step that raised left it already;
        let go of the tensors and modules held while recording."""
        self.versions_before, self.in_step = [], False
        if self.paused:
            self.paused = False
        else:
            self.mode.__exit__(None, None, None)
        for held in (self.stack, self.owners, self.trees, self.sites, self.inputs, self.off, self.zeroed):
            held.clear()

    @contextlib.contextmanager
    def backward_writes(self):
        """While a backward runs: the writes its nodes' code makes, seen at the dispatcher."""
        self.in_backward = True
        try:
            with self.writes:
                yield
        finally:
            self.in_backward = False

    def start(self):
        """Begin recording: note autograd's number for the next node this thread makes (nodes numbered below it were
        made before the block), then enter the mode."""
        try:
            with torch.inference_mode(False), torch.enable_grad():     # (a block entered under inference_mode)
                self.journal.first_seq = torch.ones(1, requires_grad=True).mul(1).grad_fn._sequence_nr() + 1
        except Exception as error:        # no number: every unseen node reached is adopted, as it was
            self.journal.note(_("doctor bookkeeping failed at the start: {error}").format(error=repr(error)))
        # Under a function mode, torch imports torch._dynamo on the first call it makes through one of its
        # dynamo-disabled functions (torch.ones_like inside backward's _make_grads). That import adds a warnings
        # filter, and a change of the filters resets Python's once-per-location registry, so a warning the program
        # had already printed would print again. Imported here, before the program runs, it changes nothing later.
        importlib.import_module("torch._dynamo")
        self.mode.__enter__()

    def before(self, func, name, args, kwargs):
        journal = self.journal
        target = args[0] if args and isinstance(args[0], torch.Tensor) else None
        # a write the call makes inside itself, into a tensor it is given (F.embedding's max_norm renormalises
        # its weight; a library op that updates a buffer): seen by its version afterwards (_after)
        self.versions_before = [] if name in ("__get__", "__set__") or is_inplace(name, kwargs) else \
            [(t, version_of(t)) for t in args if isinstance(t, torch.Tensor)]
        for s in self.subscribers:
            s.on_call(func, name, args, kwargs, target)
        if target is not None and name in ("__get__", "__set__") and \
                getattr(getattr(func, "__self__", None), "__name__", "") == "grad":
            self._grad_attribute(name, target, args[1] if name == "__set__" and len(args) > 1 else None)
        if name in ("zero_", "_foreach_zero_") and args:     # zero_grad(set_to_none=False)
            for t in tensors_in(args[0]) if name == "_foreach_zero_" else [args[0]]:
                self.zeroed[id(t)] = t._version + 1
            if len(self.zeroed) > 10000:
                self.zeroed.clear()
        if frozen_flag(func, name, args, kwargs) and target is not None \
                and not isinstance(target, torch.nn.Parameter):     # requires_grad_(True) on a tensor of the code's
            journal.made(journal.flagged_at, target, Made(weakref.ref(target), *user_site()))
        if target is not None and is_inplace(name, kwargs):
            leaf = target if target.is_leaf else target._base      # a view of a leaf: its base is the leaf
            if leaf is not None and leaf.is_leaf and leaf.requires_grad and torch.is_grad_enabled():
                values = [a for a in (*args[1:], *kwargs.values()) if isinstance(a, torch.Tensor) and a.requires_grad]
                journal.last_leaf_inplace = LeafWrite(leaf, name, user_frame(), leaf is not target, bool(values),
                                                      any(getattr(fn, "variable", None) is leaf for fn, _d in
                                                          graphs.breadth_first(a.grad_fn for a in values)))
        if name == "backward" and target is not None:
            self._record_backward([target], kwargs.get("retain_graph", args[2] if len(args) > 2 else None),
                                  kwargs.get("inputs", args[4] if len(args) > 4 else None))
        elif name == "backward" and func is torch.autograd.backward:     # torch.autograd.backward(loss), which
            retain, create = kwargs.get("retain_graph"), kwargs.get("create_graph")    # torch 2.13 dispatches too
            self._record_backward(tensors_in(args[0] if args else kwargs.get("tensors")),
                                  create if retain is None else retain, kwargs.get("inputs"))
        elif name == "grad" and func is torch.autograd.grad and args:     # autograd.grad, jacobian, hessian
            retain, create = kwargs.get("retain_graph"), kwargs.get("create_graph")
            inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
            leaves = self._record_backward(tensors_in(args[0]), create if retain is None else retain, inputs,
                                           fills_grad=False)
            for s in self.subscribers:
                s.on_grad(leaves, inputs, create)

    def _grad_attribute(self, name, target, value):
        """`.grad` read on a leaf (the code wants its gradient), or assigned a tensor (p.grad = g: what earlier
        backwards left in it is gone; p.grad = None, as zero_grad() does, is no gradient set by hand)."""
        journal = self.journal
        if name == "__get__" and target.is_leaf and called_from_user():
            journal.grads_read[id(target)] = weakref.ref(target)
            if len(journal.grads_read) > 10000:
                journal.grads_read = {k: r for k, r in journal.grads_read.items() if r() is not None}
        elif name == "__set__" and value is None:
            journal.grads_assigned.pop(id(target), None)
        elif name == "__set__":
            journal.grads_assigned[id(target)] = (weakref.ref(target),
                                                  journal.backwards[-1] if journal.backwards else None, id(value))
            if len(journal.grads_assigned) > 10000:
                journal.grads_assigned = {k: v for k, v in journal.grads_assigned.items() if v[0]() is not None}

    def pause(self):
        """Stop recording for an optimizer's step: its ops are not the student's. The recorder leaves torch's mode
        stack (cheaper than skipping a hundred ops one by one); where it is not on top (a mode the student entered
        inside the block, a step run from a backward hook) it stays and skips them."""
        if not self.paused and _current_mode() is self.mode:
            _pop_mode()
            self.paused = True
        else:
            self.in_step = True

    def resume(self):
        self.in_step = False
        if self.paused:
            _push_mode(self.mode)
            self.paused = False

    def _serials(self, roots):
        """The serials of the graph's nodes the doctor saw made; the modes (train, eval) of the modules that made
        them are kept in self.modes."""
        journal = self.journal
        infos = [info for fn in graphs.walk(roots) if (info := journal.nodes.get(fn))]
        weighted = {}                      # a loss module (no parameters) keeps its train mode: not counted
        self.modes = {info.training for info in infos if info.training is not None and weighted.setdefault(
            id(info.module), next(info.module.parameters(), None) is not None)}
        return {info.serial for info in infos}

    def _record_backward(self, roots, retain, inputs, fills_grad=True):
        """Record a backward (or autograd.grad) about to run; returns every leaf its graph reaches."""
        journal = self.journal
        depth, consumers = {}, {}
        for fn, d in graphs.breadth_first(t.grad_fn for t in roots):
            if hasattr(fn, "variable"):
                depth.setdefault(fn.variable, d)
            elif (info := journal.nodes.get(fn)) is not None and info.module is not None:
                consumers.setdefault(id(info.module), []).append(fn)   # a node a module made (one that takes its
                # parameters, or what it computed from them: spectral norm's weight_orig / sigma into the conv)
        leaves = list(depth)
        if inputs is not None:            # backward(inputs=...) fills only these
            keep = set(tensors_in(inputs))
            depth = {p: d for p, d in depth.items() if p in keep}
        nodes = self._serials(roots)
        for s in self.subscribers:
            s.on_backward(roots, nodes, {id(p) for p in depth})
        # weak roots and node serials: a record must not keep a retained or unused graph alive
        journal.backwards.append(BackwardCall(
            [weakref.ref(t) for t in roots], {id(t) for t in roots}, user_frame(), bool(retain), nodes, depth,
            self.modes, {p for p in depth if p.grad is None or self.zeroed.get(id(p.grad)) == p.grad._version},
            behind=_behind(consumers) if len(consumers) > 1 else {}, fills_grad=fills_grad))
        return leaves

    def after(self, name, args, kwargs, out):
        target = args[0] if args and isinstance(args[0], torch.Tensor) else None
        module = self.owners[-1] if self.owners else None
        self._record_made(args, out, name, module)
        written = self._record_writes(name, args, kwargs, module)
        self._record_nodes(name, out, written, module)
        for s in self.subscribers:
            s.on_result(name, args, kwargs, out, target, bool(self.stack))

    def _record_made(self, args, out, name, module):
        """How the call's outputs were made, where it matters later: from Python numbers (and what ops make of
        them), under inference_mode, or as a custom Function's forward (its node is its ctx)."""
        journal = self.journal
        if name in _FROM_VALUES and isinstance(out, torch.Tensor) and out.is_floating_point():
            journal.made(journal.from_values, out, Made(weakref.ref(out), *user_site()))   # a loss rebuilt from
        elif journal.from_values and isinstance(out, torch.Tensor) and out.grad_fn is None:   # numbers, and what
            source = next((r for a in args if isinstance(a, torch.Tensor)                    # ops make of it
                           and (r := journal.made_of(journal.from_values, a)) is not None), None)
            if source is not None:
                journal.made(journal.from_values, out, Made(weakref.ref(out), source.where, source.function,
                                                            source.caller))
        if torch.is_inference_mode_enabled():     # tensors made here cannot be saved for a backward later
            for t in (out if isinstance(out, (tuple, list)) else [out]):
                if isinstance(t, torch.Tensor) and t.is_inference():
                    journal.made(journal.inference_made, t, Made(weakref.ref(t), *user_site()))
        if not torch.is_grad_enabled() and (custom := custom_forward()) is not None and custom[0] not in journal.nodes:
            ctx, inside, where = custom     # a custom Function's forward (grad mode is off inside it): its node
            journal.serial = next(SERIAL)  # is its ctx, made where Function.apply was called
            journal.nodes[ctx] = NodeInfo(f"{type(ctx).__name__.removesuffix('Backward')}.apply", module,
                                          self.sites[-1] if self.sites else where, journal.serial,
                                          inside, getattr(module, "training", None))

    def _record_writes(self, name, args, kwargs, module):
        """The call's in-place writes: into what it writes by its schema (x.add_, out=, foreach), and into any
        tensor it was given whose version moved; returns the first."""
        journal = self.journal
        written, op = written_by(name, args, kwargs)
        for w in written:
            before = node.next_functions if (node := grad_fn_of(w)) is not None else ()
            journal.inplace.append(InplaceWrite(w.untyped_storage().data_ptr(), op, user_frame(), w._version,
                                                tuple(w.shape), journal.serial, module,
                                                journal.nodes.get(before[0][0]) if before else None,   # held before
                                                outermost_user_frame(journal.entry), optimizer_method()))
        given, self.versions_before = self.versions_before, []     # held no longer than the call
        for t, before in given:
            now = version_of(t)
            if before is not None and now is not None and now > before and all(t is not w for w in written):
                journal.inplace.append(InplaceWrite(
                    t.untyped_storage().data_ptr(), _("{op} (writing in place into a tensor it was given)").format(
                        op=name), user_frame(), now, tuple(t.shape), journal.serial, module,
                    outer=outermost_user_frame(journal.entry)))
        return written

    def _record_nodes(self, name, out, written, module):
        """The autograd nodes the call made: its outputs' (an in-place op's new node is its target's) and any it
        made inside (linear: addmm, view), each with the line that made it."""
        journal = self.journal
        where = self.sites[-1] if self.sites else None
        inside = ...                  # the line inside the module, looked up once a node is new
        made = list(out) if isinstance(out, (tuple, list)) else [out]
        for t in made + written:
            todo = [grad_fn_of(t)]
            while todo:
                fn = todo.pop()
                if fn is None or fn in journal.nodes or hasattr(fn, "variable") \
                        or fn._sequence_nr() < journal.first_seq:   # made before the block: not by this op
                    continue
                if where is None:         # outside a hooked module; D.forward(x) is placed where it was called
                    where, direct = call_site()
                    inside = direct if direct is not None else inside
                if inside is ...:
                    inside = user_frame() if self.sites else None
                    # (a compiled forward's frame stands at its `def` line while its graph runs: no line inside)
                    inside = None if inside == where or (inside and inside.code.startswith("def ")) else inside
                journal.serial = next(SERIAL)
                if isinstance(fn, BackwardCFunction) and fn is not grad_fn_of(t):  # a custom Function applied earlier,
                    journal.nodes[fn] = NodeInfo(f"{type(fn).__name__.removesuffix('Backward')}.apply", module,
                                                 None, journal.serial)      # unseen: where it ran is not known
                    todo.extend(f for f, _ in fn.next_functions)
                    continue
                journal.nodes[fn] = NodeInfo(name, module, where, journal.serial, inside,
                                             getattr(module, "training", None))
                todo.extend(f for f, _ in fn.next_functions)

    def pre_forward(self, module, args):
        journal = self.journal
        self.resume()                    # a step that raised never reached its post-hook
        if compiling():
            return
        # ops inside a module are attributed to the student's line that called the outermost module
        site = self.sites[-1] if self.sites else call_site()[0]
        if not torch.is_grad_enabled() and not any(id(m) in self.off for m in self.stack) \
                and any(p.requires_grad for p in module.parameters()):
            # the outermost trainable module run with gradients off (no_grad, a reentrant checkpoint's first
            # forward): its output has no graph, which is what a loss without a grad_fn is then made of
            journal.no_grad_forwards.append((weakref.ref(module), user_frame(), user_frame(nth=2)))
            self.off.add(id(module))
        journal.seen_modules.add(module)
        if not self.stack:
            for s in self.subscribers:
                s.on_forward(module, args)
        self.owners.append(module if not self.owners or self._inside(module, self.owners[-1]) else self.owners[-1])
        self.stack.append(module)
        self.sites.append(site)
        first = args[0] if args and isinstance(args[0], torch.Tensor) and args[0].requires_grad else None
        self.inputs.append((weakref.ref(first), first._version) if first is not None else None)

    def _inside(self, module, owner) -> bool:
        """Whether module is one of owner's submodules (its tree read once per owner)."""
        ref, ids = self.trees.get(id(owner), (None, None))
        if ref is None or ref() is not owner:
            ids = {id(m) for m in owner.modules()}
            self.trees[id(owner)] = (weakref.ref(owner), ids)
        return id(module) in ids

    def post_forward(self, module, args, out):
        journal = self.journal
        if compiling():
            return
        if self.stack:
            self.off.discard(id(self.stack.pop()))
            self.owners.pop()
            where = self.sites.pop()
            given = self.inputs.pop() if self.inputs else None
            if not self.stack:
                if len(journal.net_outputs) > 200:    # what the student's own call of a net returned
                    journal.net_outputs = {k: v for k, v in journal.net_outputs.items() if v[0]() is not None}
                for t in tensors_in(out):             # (a tensor, or each of a tuple's: logits and features)
                    journal.net_outputs[id(t)] = (weakref.ref(t), weakref.ref(module))
                for s in self.subscribers:
                    s.on_forward_end(module, out)
            tensor = given[0]() if given is not None else None
            if tensor is not None and tensor._version > given[1]:
                self._input_written(module, tensor, out)
            if isinstance(out, torch.Tensor) and not out.requires_grad and out.is_floating_point():
                # an output with no graph (a frozen module's): a hook may yet make it a leaf (requires_grad_)
                if len(journal.no_graph_outputs) > 200:
                    journal.no_graph_outputs.clear()
                journal.no_graph_outputs[id(out)] = (weakref.ref(out), module)
            if type(module).__name__ == "OptimizedModule":   # torch.compile's wrapper: its graph runs as one node
                for t in out if isinstance(out, (tuple, list)) else [out]:
                    fn = grad_fn_of(t)
                    if fn is not None and fn not in journal.nodes:
                        journal.serial = next(SERIAL)
                        journal.nodes[fn] = NodeInfo("compiled forward", module, where, journal.serial)

    def _input_written(self, module, given, out):
        """A module's forward wrote, in place, into the tensor its caller gave it (an nn.ReLU(inplace=True) as a
        block's first layer) and returned another tensor: the caller's variable now holds the changed values. The
        in-place write the journal saw last into it says which op and line."""
        ptr = given.untyped_storage().data_ptr()
        if any(isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() == ptr
               for t in (out if isinstance(out, (tuple, list)) else [out])):
            return                        # returned (x = act(x)): what the caller reads next is meant to change
        write = next((w for w in reversed(self.journal.inplace) if w.ptr == ptr), None)
        if write is not None and not write.op.startswith(("copy_", "index", "__setitem__", "fill_", "zero_",
                                                          "scatter", "masked_scatter")):
            for s in self.subscribers:    # (a cache or a buffer filled by its module is meant to change)
                s.on_input_written(module, given, write)

    def pre_step(self, opt, args, kwargs):
        journal = self.journal
        self.pause()                     # the doctor's own reads below are not recorded either
        journal.seen_optimizers.add(opt)
        name = self.namer.optimizer_name(opt)
        params = [p for g in opt.param_groups for p in g["params"]]
        # LBFGS and friends: the closure computes the gradients inside step()
        closure = any(callable(a) and not isinstance(a, torch.optim.Optimizer) for a in (*args, *kwargs.values()))
        contributors = self._contributors(params)
        for s in self.subscribers:
            s.on_step(opt, name, params, contributors, closure)
        if closure:                       # else the step's own ops are not the student's: not seen until its
            self.resume()                # post-hook

    def post_step(self, opt, args, kwargs):
        self.pause()                     # (with a closure: recording until here)
        params = [p for g in opt.param_groups for p in g["params"]]
        for b in self._contributors(params):
            b.used_by.add(id(opt))
        self.journal.steps.append(Step(opt, user_frame(), params, [p._version for p in params], self.journal.serial,
                                       self.journal.backwards[-1] if self.journal.backwards else None))
        self.resume()

    def _contributors(self, params):
        """The backward passes whose gradients the parameters' .grad holds now: walking back from the latest,
        each parameter's stop at the backward that found its .grad empty (after zero_grad)."""
        found, assigned = [], self.journal.grads_assigned
        for p in params:
            if p.grad is None or self.zeroed.get(id(p.grad)) == p.grad._version:   # set to None, or zeroed and not
                continue                  # written since (zero_grad()): nothing of any backward is left
            for b in reversed(self.journal.backwards):
                if b is assigned.get(id(p), (None, None))[1] and assigned[id(p)][0]() is p:
                    break                 # .grad assigned after this backward: none of it, or before, is left
                if b.fills_grad and p in b.depth:
                    if not any(b is f for f in found):
                        found.append(b)
                    if p in b.fresh:
                        break
        return found
