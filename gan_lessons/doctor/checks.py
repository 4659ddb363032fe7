"""The silent bugs the doctor warns about: a sigmoid into a *_with_logits loss, a `.data` change a pending graph
saw, steps over parameters without gradients or on gradients from two losses, D stepping on G's loss, a gradient
penalty made from torch.autograd.grad without create_graph=True, and an input a module changed in place that its
caller reads again."""
import itertools
import warnings
import weakref

import torch

from gan_lessons import graphs
from gan_lessons.doctor import ranks
from gan_lessons.doctor.frames import call_site, called_from_user, shown_path, user_frame
from gan_lessons.doctor.naming import looks_like_gan, looks_like_generator, net_of
from gan_lessons.doctor.nodes import DetachedForward, ForeignStep
from gan_lessons.doctor.ops import frozen_flag, is_inplace
from gan_lessons.doctor.report import Diagnosis, DoctorWarning
from gan_lessons.i18n import N_, _

# Ops that only reshape: a sigmoid behind them still feeds its values to the loss (`.view(-1)`, `.squeeze()`).


_RESHAPES = ("View", "UnsafeView", "Reshape", "ReshapeAlias", "AsStrided", "Squeeze", "Unsqueeze", "Flatten",
             "Unflatten", "Permute", "T", "Transpose", "Clone", "Select", "Slice", "Index")


def after_sigmoid(t) -> bool:
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


def double_sigmoid_effect(target) -> str:
    """What an extra sigmoid does to this BCE term: its range depends on the target (lesson 05 checks both)."""
    squashed = {1.0: "[0.31, 0.69]", 0.0: "[0.69, 1.31]"}
    label = target.unique().tolist() if isinstance(target, torch.Tensor) and target.numel() else []
    if len(label) == 1 and label[0] in squashed:
        return _("this loss (target {target:g}) is squashed into {range}, and its gradient shrinks by a factor with no "
                 "upper bound (hundreds of times for a logit 6 on the wrong side of the target), silently").format(
            target=label[0], range=squashed[label[0]])
    return _("this loss sees inputs in (0, 1) only, whatever the model outputs, and its gradient shrinks by a factor "
             "with no upper bound (hundreds of times for a logit 6 on the wrong side of the target), silently")


# Ops that add a number to a loss: a weight gradient reduced to a number and added to a loss is a penalty (a
# gradient-norm or variance penalty); multiplied, it is a weight (VQGAN's adaptive weight), meant as a constant.
_ADDS = {"__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "add", "sub", "add_", "sub_"}


# Autograd nodes through which a constant added before them only shifts a loss: sums, differences, means, products
# with a constant (MulBackward0 and DivBackward0 count where one operand has no graph).
_AFFINE = {"AddBackward0", "AddBackward1", "SubBackward0", "SubBackward1", "RsubBackward0", "RsubBackward1",
           "NegBackward0", "SumBackward0", "SumBackward1", "MeanBackward0", "MeanBackward1", "MulBackward1",
           "DivBackward1", "StackBackward0", "CatBackward0", "ViewBackward0", "UnsqueezeBackward0",
           "SqueezeBackward0", "SqueezeBackward1", "SelectBackward0", "CloneBackward0"}


def tensors_in(x) -> list:
    """The tensors of an op's argument or result: x itself, or those in a list or tuple."""
    return [x] if isinstance(x, torch.Tensor) else [t for t in x if isinstance(t, torch.Tensor)] \
        if isinstance(x, (list, tuple)) else []


class Checks:
    """The doctor's warnings about silent bugs, and its information lines. The checks subscribe to the recorder's
    events (on_call and on_result around each torch call, on_grad, on_backward, on_step) and keep their own state:
    what they wait to judge (`.data` aliases and their writes, constant gradients and what was computed from them,
    where parameters were frozen, D steps judged at G's step) and what they already said. They read the journal's
    history, and add what they say to its diagnoses."""

    def __init__(self, journal, namer) -> None:
        self.journal, self.namer = journal, namer
        self.foreign: list = []           # ForeignStep: judged at the other net's step
        self.warned: set = set()          # (kind, file, line) already said
        # `.data` of tracked tensors (id: (weak alias, the tensor)); `.data` changes not yet judged
        self.data_aliases: dict = {}
        self.pending_data: dict = {}
        # gradients from autograd.grad without create_graph (id: (weak tensor, source)), the serials of nodes that
        # mix one with a tensor that requires grad, and the source of the autograd.grad call running now
        self.constants: dict = {}
        self.mixed: dict = {}
        self.pending_grad = None
        self.pending_detach = None        # the source of a net's output detached by the call that just ran
        # nets' outputs detached outside any module (id: (weak tensor, weak net, line)), the forwards of other nets
        # on them, and the backwards through one of those that stepped the detached net: judged at the other's step
        self.detached_outputs: dict = {}
        self.detached_forwards: list = []
        self.pending_terms: list = []
        self.frozen_at: dict = {}         # id(parameter): the line that set requires_grad=False, and its caller
        # the parameters a gradient taken with create_graph=True went through (a penalty on it reaches only those
        # its input gradient depends on: not D's last bias), and how many backwards had run by then
        self.penalised: tuple = (set(), 0)
        # inputs a module's forward wrote in place and did not return (id: (weak tensor, its version then, the
        # module's name, the InplaceWrite)): judged when the caller reads one again
        self.inputs_written: dict = {}

    def release(self):
        """Once the block is over: let go of what holds the student's tensors (what was said stays)."""
        self.foreign.clear()
        for table in (self.data_aliases, self.pending_data, self.constants, self.mixed, self.frozen_at,
                      self.inputs_written, self.detached_outputs, self.detached_forwards, self.pending_terms):
            table.clear()
        self.pending_grad = None

    # the recorder's events

    def on_call(self, func, name, args, kwargs, target):
        """Before a torch call: `.grad` read on a non-leaf, requires_grad flags set on parameters, a write into
        a `.data` alias, a sigmoid into a *_with_logits loss."""
        if name == "__get__" and getattr(getattr(func, "__self__", None), "__name__", "") == "grad" \
                and target is not None and not target.is_leaf and not target.retains_grad and called_from_user():
            self.nonleaf_grad(target, user_frame())
        if target is None:
            return
        if self.inputs_written and name not in ("__get__", "__set__"):   # its values read, not an attribute
            self.check_input_read(args)
        if name in ("requires_grad_", "__set__") and target.is_leaf and \
                (flag := frozen_flag(func, name, args, kwargs)) is not None:
            if flag:
                self.frozen_at.pop(id(target), None)
            else:                         # where each parameter was frozen, for a step that then trains nothing
                self.frozen_at[id(target)] = user_frame(), user_frame(nth=2)
        if self.data_aliases and is_inplace(name, kwargs):
            alias, alias_of = self.data_aliases.get(id(target), (lambda: None, None))
            if alias() is target:             # the same live alias, not a new tensor that reused its id
                # judged at the next backward: harmless unless a graph made before it saved the tensor
                self.pending_data[id(alias_of)] = (weakref.ref(alias_of), name, user_frame(), self.journal.serial, 5)
        if name == "binary_cross_entropy_with_logits" and after_sigmoid(target):
            effect = double_sigmoid_effect(args[1] if len(args) > 1 else None)
            self.suspicious(_("a sigmoid is fed into binary_cross_entropy_with_logits, which applies its own "
                              "sigmoid"), {"where": user_frame(), "effect": effect},
                            [(N_("pass the raw logits; drop the extra sigmoid"), "05")])

    def on_result(self, name, args, kwargs, out, target, in_module):
        """After a torch call: a `.data` alias made; what a constant gradient's values flow into."""
        if name == "__get__" and isinstance(out, torch.Tensor) and target is not None and target.requires_grad \
                and out.data_ptr() == target.data_ptr() and not out.requires_grad:
            self.data_aliases[id(out)] = (weakref.ref(out), target)   # `.data` of a tracked tensor
            if len(self.data_aliases) > 1000:
                self.data_aliases = {k: v for k, v in self.data_aliases.items() if v[0]() is not None}
        if not in_module and target is not None and isinstance(out, torch.Tensor) and not out.requires_grad \
                and target.requires_grad and target.grad_fn is not None and \
                (name == "detach" or name == "__get__" and out.data_ptr() == target.data_ptr()):
            self.pending_detach = self.detached_source(target, out)    # a net's output cut off: `d(x).detach()`
        if self.detached_outputs and not in_module and name not in ("__get__", "__set__"):
            self.follow_detached(args, kwargs, out)
        if self.constants or name == "grad" or self.pending_detach is not None:   # no cost before either
            self.follow_constants(name, args, kwargs, out, in_module)

    def follow_detached(self, args, kwargs, out):
        """What an op outside any module makes from a net's detached output alone, with no graph (torch.cat with
        the condition, noise added), is that output for a forward of another net on it (on_forward)."""
        entry = next((e for a in (*args, *kwargs.values()) for t in tensors_in(a)
                      if (e := self.detached_outputs.get(id(t))) is not None and e[0]() is t), None)
        if entry is None:
            return
        for t in tensors_in(out):
            if not t.requires_grad and id(t) not in self.detached_outputs:
                self.detached_outputs[id(t)] = (weakref.ref(t), *entry[1:])

    def on_forward(self, module, args):
        """The student's own call of a net: on another net's detached output (D(fake.detach())), it is noted."""
        if not self.detached_outputs:
            return
        for t in args:
            entry = self.detached_outputs.get(id(t)) if isinstance(t, torch.Tensor) else None
            source = entry[1]() if entry is not None and entry[0]() is t else None
            if source is None or source is module or next(module.parameters(), None) is None \
                    or any(m is module for m in source.modules()) or any(m is source for m in module.modules()):
                continue
            self.detached_forwards = self.detached_forwards[-50:] + [DetachedForward(
                weakref.ref(module), weakref.ref(source), entry[2], call_site()[0], self.journal.serial, entry[3])]
            return

    def on_forward_end(self, module, out):
        """That forward returned: the nodes it made end here; where the net was frozen, its output is a constant
        computed from the detached net's parameters (G's adversarial term on D(fake.detach()) with D frozen)."""
        for f in reversed(self.detached_forwards):
            if f.end is None and f.net() is module:
                f.end = self.journal.serial
                if isinstance(out, torch.Tensor) and not out.requires_grad and out.is_floating_point() \
                        and (source := f.source()) is not None:
                    key = id(out)
                    self.constants[key] = (weakref.ref(out, lambda ref, key=key: self._forget_constant(key, ref)), (
                        f.detached, f.params, "detach", _("{net}'s output on {source}'s output").format(
                            net=self.namer.module_name(module), source=self.namer.module_name(source)),
                        {id(p) for p in module.parameters()}))
                return

    def on_input_written(self, module, given, write):
        """A module's forward wrote in place into the tensor its caller gave it, and returned another one."""
        if len(self.inputs_written) > 20:
            self.inputs_written = {k: v for k, v in self.inputs_written.items() if v[0]() is not None}
        self.inputs_written[id(given)] = (weakref.ref(given), given._version, self.namer.module_name(module), write)

    def check_input_read(self, args):
        """The caller reads a tensor a module it called wrote in place (a block's skip connection, out += x, after
        a first nn.ReLU(inplace=True) changed x): it reads the changed values, not those it gave."""
        for t in args:
            entry = self.inputs_written.get(id(t)) if isinstance(t, torch.Tensor) else None
            if entry is None or entry[0]() is not t:
                continue
            del self.inputs_written[id(t)]
            if t._version != entry[1]:
                continue                  # written again since: what is read is not that write's
            _ref, _version, module, write = entry
            self.suspicious(_("{module} wrote in place into the input its caller gave it ({op} at {at}) and returned "
                              "another tensor; the caller reads that input again at {where}, and gets the changed "
                              "values, not those it gave").format(module=module, op=write.op, at=write.where,
                                                                  where=user_frame()),
                            {"where": user_frame(), "input": self.namer.label(t)},
                            [(N_("make that op out of place (nn.ReLU() without inplace=True, x = x + y): an input "
                                 "the caller reads again must come back as it was given"), "03")],
                            key="input written")

    def on_grad(self, leaves, inputs, create):
        """torch.autograd.grad about to run: without create_graph, its result will be a constant."""
        self.pending_grad = None if create else self.constant_source(leaves, inputs)
        if create:
            self.penalised = ({id(p) for p in leaves}, len(self.journal.backwards))

    def on_backward(self, roots, serials, filled):
        """A backward (or autograd.grad) about to run over these node serials, into these parameters (ids)."""
        self.judge_data_mutations(roots)
        if self.mixed:                    # only once an autograd.grad without create_graph fed an op that needs grad
            self.check_constant_gradients(serials, filled, roots)

    def on_step(self, opt, name, params, contributors, closure):
        """An optimizer's step about to run, with the backward passes whose gradients its .grad holds."""
        self.check_missing_gradients(opt, name, params, closure)
        self.check_frozen_step(name, params)
        self.check_leftover_gradients(opt, name, contributors, closure)
        self.judge_foreign_gradients(name, params, contributors)
        self.check_foreign_gradients(name, params, contributors)
        self.check_cleared_for_another(opt, name, params, contributors)
        self.check_cleared_own(name, params, contributors)
        self.check_stepped_twice(opt, name, params, contributors)
        self.check_backward_within(name, contributors)
        if self.detached_forwards:
            self.check_detached_terms(opt, name, params, contributors)

    def constant_of(self, tensor):
        """The source of a constant gradient this tensor is (or was computed from), or None."""
        entry = self.constants.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else None

    # the checks

    def check_missing_gradients(self, opt, name, params, closure):
        """A step while some of its parameters have no .grad (not those another optimizer trains, nor those of a
        module that never ran): the loss does not reach them."""
        journal = self.journal
        missing = [] if closure else [p for p in params if p.grad is None and p.requires_grad]
        if missing and len(missing) < len(params):      # some: not those another optimizer trains, or no forward used
            missing = self.namer.untrained(opt, missing)
        went, since = self.penalised            # a penalty on a gradient (R1, lazily on its own step) cannot reach
        if missing and len(journal.backwards) > since and all(id(p) in went for p in missing):   # what that
            return                               # gradient does not depend on (the output layer's bias)
        assigned = journal.grads_assigned
        present = [p for p in params if p.grad is not None]
        if missing and present and all(id(p) in assigned and assigned[id(p)][0]() is p
                                       and assigned[id(p)][2] == id(p.grad) for p in present):
            return          # every .grad there was set by hand (p.grad = g): the code chose which parameters step
        missing = [self.namer.known().params.get(p, "?") for p in missing]
        if not missing:
            return
        facts = {"where": user_frame(), "parameters": missing[:6]}
        ours = {id(p) for p in params}
        other = [p for p in (journal.backwards[-1].depth if journal.backwards else ()) if id(p) not in ours]
        fixes = [(N_("check that the loss reaches them: a detach() or backward(inputs=...) cuts them off, and a "
                     "copy (copy.deepcopy, a write through .data) gives the loss other leaves than these "
                     "parameters"), "04")]
        if len(missing) == len(params) and other:   # the last backward filled other leaves: copies of these?
            backward = journal.backwards[-1]
            facts["reached instead"] = _("{count} other leaves that require grad, by the backward at {where}: "
                                         "{names}").format(count=len(other), where=backward.where,
                                                           names=", ".join(self.namer.label(p) for p in other[:3]))
            owner = self.namer.owner_of(opt, other)
            if owner is not None:                   # another optimizer's parameters: the step of the wrong one?
                facts["reached instead"] += _("; all of them held by {owner}").format(
                    owner=self.namer.optimizer_name(owner))
                fixes = [(_("step the optimizer that holds what the backward at {where} reached ({owner}.step()): "
                            "{name} holds none of it").format(where=backward.where, name=name,
                                                              owner=self.namer.optimizer_name(owner)), "05")] + fixes
        self.suspicious(_("{name}.step() runs while {missing} of its {total} parameters have no .grad: they "
                          "will not change").format(name=name, missing=len(missing), total=len(params)),
                        facts, fixes, key=("no .grad", id(opt)))

    def check_leftover_gradients(self, opt, name, contributors, closure=False):
        """Gradients left in .grad by another loss's backward (already used by another optimizer's step), added
        to this optimizer's own: a zero_grad() is missing or misplaced. Or gradients this optimizer's own earlier
        step already applied: zero_grad() once before an inner loop of D steps (not with a closure, which makes
        its own gradients inside step())."""
        lines = {(b.where.file, b.where.line) for b in contributors if b.where is not None}
        stale = [b for b in contributors if b.used_by - {id(opt)}]
        if stale and (len(lines) > 1 or len(stale) < len(contributors)) and self._gan_pair(opt, stale):
            # (one line in a loop over optimizers too; one loss meant for two nets, as an encoder's and a decoder's,
            # is no GAN's D stepping on G's loss and is left alone)
            own = next((b for b in contributors if b not in stale),
                       next((b for b in contributors if b is not stale[0]), stale[0]))
            since = contributors[:next(k for k, b in enumerate(contributors) if b in stale)]   # latest first
            first = since[-1] if since else own     # its own loss's first backward after the other's
            self.suspicious(_("{name}.step() adds up gradients from two losses: what the backward at {stale} left "
                               "in .grad (already used by another optimizer's step) and the backward at {own}").format(
                                 name=name, stale=stale[0].where, own=own.where), {"where": user_frame()},
                             [(_("call zero_grad() on this optimizer once, right before the first backward of its own "
                                 "loss (the one at {first}), not between its own backwards").format(first=first.where),
                               "04")],
                             key=("two losses", id(opt)))
        modes = [b for b in contributors if b.modes]         # a whole pass in eval mode, another in train
        evaluated = next((b for b in modes if b.modes == {False}), None)   # mode (not a frozen part in eval
        trained = next((b for b in modes if True in b.modes), None)        # mode in every pass: accumulation)
        if evaluated is not None and trained is not None:
            self.suspicious(_("{name}.step() adds up gradients from a backward through modules in eval mode (the "
                               "backward at {evaluated}: a validation pass?) and one through modules in train mode "
                               "(the backward at {trained}): the step trains on both").format(
                                 name=name, evaluated=evaluated.where, trained=trained.where),
                             {"where": user_frame()},
                             [(N_("no backward in the validation pass (run it under torch.no_grad()), or call "
                                  "zero_grad() after it"), "04")], key="eval and train gradients")
        mine = [b for b in contributors if id(opt) in b.used_by]
        if mine and not closure:
            where = user_frame()
            places = list(dict.fromkeys(str(b.where) for b in sorted(      # each line once, in the file's order
                mine, key=lambda b: (b.where.file, b.where.line) if b.where is not None else ("", 0))))
            summary = (_("{name}.step() applies again gradients its own earlier step already applied: .grad still "
                         "holds what the backward at {where} gave it, because no zero_grad() ran between the steps, "
                         "so each step adds up every earlier pass's gradient") if len(mine) == 1 else
                       _("{name}.step() applies again gradients its own earlier steps already applied: .grad still "
                         "holds what {count} earlier backward passes gave it, at {where}; no zero_grad() ran "
                         "between the steps, so each step adds up every earlier pass's gradient")).format(
                name=name, where=_(", ").join(places[:3]) + (_(", ...") if len(places) > 3 else ""),
                count=len(mine))
            self.suspicious(summary, {"where": where, "passes in .grad": len(contributors)},
                             [(_("call {name}.zero_grad() once per step, before the first backward that step adds "
                                 "up (not once before the loop; with gradient accumulation, not before every backward "
                                 "either)").format(name=name), "01")],
                             key="own gradients again")

    def _gan_pair(self, opt, stale) -> bool:
        """Whether this optimizer, or one that already stepped on a stale backward, trains a GAN's D (or a critic):
        then gradients one left for the other are one net stepping on the other's loss."""
        names = self.namer.known().params
        others = [o for o in self.namer.known_optimizers() if any(id(o) in b.used_by for b in stale)]
        return any(looks_like_gan(names.get(p, "")) for o in [opt, *others]
                   for g in o.param_groups for p in g["params"])

    def check_foreign_gradients(self, name, params, contributors):
        """A GAN's D stepping on gradients from a backward that ran through D on into G (G's loss, or a D loss
        whose fake batch was not detached). Only for a D-like net whose other net has its own optimizer: one
        loss training two nets (an autoencoder, pix2pix's G) is correct."""
        mine = set(params)
        names = self.namer.known().params
        if not params or not contributors or not any(looks_like_gan(names.get(p, "")) for p in params):
            return
        b = contributors[0]
        depth = b.depth
        my_depth = min(d for p, d in depth.items() if p in mine) if mine & depth.keys() else None
        if my_depth is None:
            return
        net: dict = {}  # each trained parameter's net: the module path its optimizer's parameters share (the
        for o in self.namer.known_optimizers():      # narrowest, where two optimizers hold it: InfoGAN's third one
            group = [p for g in o.param_groups for p in g["params"]]     # holds both G and D)
            shared = net_of([names[p] for p in group if p in names])
            net.update({p: shared for p in group if p not in net or shared.count(".") > net[p].count(".")})
        behind = set().union(*(b.behind.get(id(p), ()) for p in mine))   # leaves reached through this net
        deeper = {net[p] for p, d in depth.items()
                  if p not in mine and p in names and p in net
                  and (id(p) in behind if b.behind else d > my_depth)}
        if deeper:      # judged when those nets' optimizer steps: harm only if that backward reaches its step too
            reached = {p for p in depth if p in net and p not in mine and net[p] in deeper}
            before = next((o for o in self.namer.known_optimizers() if id(o) in b.used_by   # it stepped on this
                           and any(p in reached for g in o.param_groups for p in g["params"])), None)  # backward already
            if before is not None:      # the other net already stepped on it: a GAN's G on D's loss is a bug, but
                if any(looks_like_generator(n) for n in deeper):     # a trunk two heads share (an actor-critic's encoder)
                    earlier = next(s.where for s in reversed(self.journal.steps) if s.optimizer is before)  # trains
                    self._both_step(self.namer.optimizer_name(before), name, b, earlier, user_frame())   # on both
                return
            self.foreign.append(ForeignStep(b, name, user_frame(), sorted(deeper), reached))
            del self.foreign[:-20]

    def check_cleared_for_another(self, opt, name, params, contributors):
        """A step on the gradients of a backward that another optimizer's .grad was cleared for and this one's was
        not: an earlier backward filled both nets' .grad, the other's was emptied before this loss (its loss, by
        the code's own zero_grad), and this one's kept, so this net steps on the other's loss as well as its own
        (a VAE's optimizer on its discriminator's loss, a VAE-GAN's encoder on the decoder's)."""
        where = user_frame()
        if self.foreign and self.foreign[-1].where == where:      # judged at the other net's step already
            return
        mine = {id(p) for p in params}
        order = {id(b): i for i, b in enumerate(self.journal.backwards)}
        ran = sorted(contributors, key=lambda b: order.get(id(b), -1))
        for i, c in enumerate(ran):
            if not any(id(p) in mine and p not in c.fresh for p in c.depth):     # it added to what .grad held
                continue
            for o in self.namer.known_optimizers():
                theirs = [p for g in o.param_groups for p in g["params"] if id(p) not in mine]
                if o is opt or not theirs:
                    continue
                earlier = next((b for b in ran[:i] if any(p in b.depth and p in c.fresh and p in c.depth
                                                          for p in theirs)), None)
                if earlier is None:
                    continue
                names = self.namer.known().params
                net = net_of([names[p] for p in theirs if p in names]) or self.namer.optimizer_name(o)
                behind = set().union(*(c.behind.get(id(p), ()) for p in params))     # reached through this net
                through = bool(c.behind) and all(id(p) in behind for p in theirs if p in c.depth)
                fix = (_("backward(inputs=...) with {net}'s parameters for that loss: it reaches {net} only "
                         "through this net, so a detach would cut {net} off too").format(net=net) if through else
                       N_("detach, in that loss, what it takes from this net (D(z.detach()) in the discriminator's "
                          "loss): it then trains its own net alone"))
                self.suspicious(_("{name}.step() steps on the gradients of the backward at {backward} as well as "
                                  "its own: {other}.zero_grad() (or a .grad emptied by hand) cleared {net} for that "
                                  "loss, and this optimizer's .grad was not cleared, so a loss meant for {net} went "
                                  "on into this net (added to what the backward at {earlier} left)").format(
                                    name=name, backward=c.where, other=self.namer.optimizer_name(o), net=net,
                                    earlier=earlier.where),
                                {"where": where}, [(fix, "04")], key="cleared for another")
                return

    def check_cleared_own(self, name, params, contributors):
        """A step that runs without the gradient of a loss that trains this optimizer's net alone: that loss's
        backward filled .grad, then a zero_grad() cleared it before a second loss of the same forward was
        backpropagated, and no optimizer stepped in between (per-net zero_grad() calls left between the backwards
        once they were moved before the steps)."""
        mine = {id(p) for p in params}
        held = {id(p) for o in self.namer.known_optimizers() for g in o.param_groups for p in g["params"]}
        backwards = list(self.journal.backwards)
        for c in contributors:
            if c not in backwards:
                continue
            for b in backwards[:backwards.index(c)]:
                reached = [p for p in b.depth if id(p) in held]
                if b.used_by or not b.fills_grad or not reached or not b.nodes & c.nodes or \
                        any(id(p) not in mine for p in reached) or not all(p in c.fresh for p in reached):
                    continue
                self.suspicious(_("{name}.step() runs without the gradient of the backward at {own}, a loss that "
                                  "reaches this net alone: its .grad was cleared before the backward at {backward}, "
                                  "so the step applies that loss's gradient only").format(
                                    name=name, own=b.where, backward=c.where),
                                {"where": user_frame()},
                                [(N_("clear .grad once, before the first of the losses this step adds up (not "
                                     "between their backwards)"), "04")], key="cleared own")
                return

    def check_stepped_twice(self, opt, name, params, contributors):
        """A parameter two optimizers hold, stepped by both on the same gradients: it moves twice a step (a trunk
        put in each head's optimizer)."""
        mine = {id(p): p for p in params}
        for o in self.namer.known_optimizers():
            if o is opt or not any(id(o) in b.used_by for b in contributors):
                continue
            shared = [p for g in o.param_groups for p in g["params"] if id(p) in mine and p.grad is not None]
            if shared:
                names = self.namer.known().params
                self.suspicious(_("{name}.step() steps {count} parameter(s) that {other}.step() already stepped on "
                                  "the same gradients ({first}, ...): they are in both optimizers, and move twice "
                                  "a step").format(name=name, other=self.namer.optimizer_name(o), count=len(shared),
                                                   first=names.get(shared[0], "?")),
                                {"where": user_frame()},
                                [(N_("give each parameter to one optimizer (the shared part to one of them, or one "
                                     "optimizer over both heads and the trunk)"), "05")], key=("stepped twice", id(opt)))
                return

    def check_backward_within(self, name, contributors):
        """Two backwards a step adds up where the later one's loss is a part of the earlier one's (loss1 = a +
        loss2, then loss1.backward(retain_graph=True) and loss2.backward()): that part's gradient counts twice."""
        nodes = self.journal.nodes
        for later in contributors:
            if not later.fills_grad:
                continue
            tops = {info.serial for ref in later.roots if (t := ref()) is not None
                    and (info := nodes.get(t.grad_fn)) is not None}
            earlier = next((b for b in contributors if b is not later and b.fills_grad and tops and tops <= b.nodes
                            and tops != {max(b.nodes)}), None)
            if earlier is not None:
                self.suspicious(_("{name}.step() adds the gradient of the loss backpropagated at {later} twice: the "
                                  "backward at {earlier} already went through it, as a part of its loss").format(
                                    name=name, later=later.where, earlier=earlier.where),
                                {"where": user_frame()},
                                [(N_("backpropagate each loss once: one backward of the sum, or one of each part, "
                                     "not both"), "02")], key="backward within")
                return

    def _both_step(self, first, name, backward, where, also):
        self.suspicious(_("{first}.step() and {name}.step() both step on the gradients of the backward at "
                           "{backward}: one loss trains both nets, so one of them steps on the other's loss "
                           "(as G's loss runs through D, or D's loss on a fake batch that was not "
                           "detached)").format(first=first, name=name, backward=backward.where),
                         {"where": where, "also stepped at": also},
                         [(N_("call zero_grad() on each optimizer right before its own loss's backward, and "
                              "detach the fake batch in D's loss"), "04")], key="one loss, two nets")

    def judge_foreign_gradients(self, name, params, contributors):
        """At a step of the net a D step's backward ran on into (G): if that backward's gradient is still in G's
        .grad, one loss trains both nets (D stepped on G's loss, or G steps on D's): a warning. If G's .grad was
        cleared in between, the backward into G was only wasted work: an information line, not a warning."""
        mine = set(params)
        for f in [f for f in self.foreign if f.params & mine]:
            self.foreign.remove(f)
            if any(b is f.backward for b in contributors):
                self._both_step(f.step, name, f.backward, f.where, user_frame())
            else:
                self.inform(_("the backward at {backward} went on from {first}'s parameters into {nets}, whose "
                               "gradients were cleared before {name}.step(): harmless, but that part of the backward "
                               "was wasted work").format(backward=f.backward.where, first=f.step,
                                                         nets=", ".join(f.nets), name=name),
                             {"where": f.where}, [(N_("detach the fake batch in D's loss to skip it"), "04")],
                             key="wasted backward")

    def check_detached_terms(self, opt, name, params, contributors):
        """A term that runs a net on another net's detached output (D(fake.detach())) in a loss that steps that other
        net (G's loss): it gives G no gradient, only D one. Right when D's own step uses it (one loss for both nets);
        else judged at D's next step: if that step does not use it (D's .grad was cleared first), the term trained
        nothing."""
        ids = {id(p) for p in params}
        for entry in list(self.pending_terms):      # this step may be D's: did it use that backward's gradient?
            b, f, stepped, stepped_at = entry
            net, source = f.net(), f.source()
            if net is None or source is None:
                self.pending_terms.remove(entry)
            elif any(id(p) in ids for p in net.parameters()):
                self.pending_terms.remove(entry)
                if all(c is not b for c in contributors):
                    net_name, source_name = self.namer.module_name(net), self.namer.module_name(source)
                    self.suspicious(_("the term that runs {net} at {where} on {source}'s output detached at "
                                      "{detached} trained nothing: it gives {source} no gradient ({stepped}.step() at "
                                      "{stepped_at} stepped without it), and what it gave {net} was cleared before "
                                      "{name}.step()").format(net=net_name, where=f.where, source=source_name,
                                                              detached=f.detached, stepped=stepped,
                                                              stepped_at=stepped_at, name=name),
                                    {"where": f.where, "backward": b.where},
                                    [(_("run {net} on {source}'s output itself in that loss, not on a detached copy: "
                                        "the detach belongs in {net}'s own loss").format(net=net_name,
                                                                                        source=source_name), "04")],
                                    key="detached input")
        for f in self.detached_forwards:
            net, source = f.net(), f.source()
            if net is None or source is None or f.end is None or f.end <= f.start \
                    or not any(id(p) in ids for p in source.parameters()):
                continue                # not a step of the net whose output was detached
            own = {id(p) for p in net.parameters()}
            if own & ids:
                continue                # one optimizer for both nets: this very step uses the term
            for b in contributors:
                if not any(s in b.nodes for s in range(f.start + 1, f.end + 1)) \
                        or not any(id(p) in own for p in b.depth) or any(
                            id(o) in b.used_by and any(id(p) in own for g in o.param_groups for p in g["params"])
                            for o in self.journal.seen_optimizers):
                    continue            # not through that forward, or that net's step already used it
                if all(e[0] is not b or e[1] is not f for e in self.pending_terms):
                    self.pending_terms = self.pending_terms[-20:] + [(b, f, name, user_frame())]

    def check_frozen_step(self, name, params):
        """Every parameter of this optimizer frozen (requires_grad=False) when it steps: no backward can have
        reached them, so the step trains nothing (a lazy R1 step run while D was still frozen from G's step)."""
        if not params or any(p.requires_grad for p in params):
            return
        frozen_at = self.frozen_at
        line, caller = next((frozen_at[id(p)] for p in params if id(p) in frozen_at), (None, None))
        frozen = (_("{where}, called from {caller}").format(where=line, caller=caller) if caller is not None
                  else f"{line}") if line else None
        moved = any(p.grad is not None for p in params)
        facts = {"where": user_frame()}
        if frozen is not None:
            facts["frozen at"] = frozen
        summary = (_("{name}.step() runs while all {count} of its parameters are frozen (requires_grad=False): the "
                     "backward before it could not reach them, so this step trains nothing (it moves them only along "
                     "what .grad held from before)") if moved else
                   _("{name}.step() runs while all {count} of its parameters are frozen (requires_grad=False): the "
                     "backward before it could not reach them, so this step trains nothing")).format(
            name=name, count=len(params))
        self.suspicious(summary, facts,
                         [(N_("unfreeze them (requires_grad_(True)) before the forward of this optimizer's loss, and "
                              "put each flag back right after the step that needed it frozen"), "09")],
                         key="frozen step")

    def judge_data_mutations(self, roots):
        """A `.data` change is wrong only if a graph built before it saved the tensor: this backward will then
        use the new values with the old activations. Canonical WGAN clipping (after the step, before the next
        forward) stays quiet."""
        journal = self.journal
        if not self.pending_data:
            return
        oldest = min(v[3] for v in self.pending_data.values())
        old_nodes = [fn for fn in graphs.walk(roots) if getattr(journal.nodes.get(fn), "serial", oldest + 1) <= oldest]
        for key, (ref, op, where, serial, left) in list(self.pending_data.items()):
            tensor = ref()
            nodes = [fn for fn in old_nodes if journal.nodes.get(fn).serial <= serial]
            if tensor is not None and nodes and any(s.param for fn in nodes
                                                    for s in graphs.saved_tensors(fn, {tensor: "x"})):
                self._warn_data_mutation(tensor, op, where)
                del self.pending_data[key]
            elif tensor is None or left <= 1:
                del self.pending_data[key]
            else:
                self.pending_data[key] = (ref, op, where, serial, left - 1)

    def _warn_data_mutation(self, tensor, op, where):
        self.suspicious(_("`.data.{op}` changes {name} behind autograd's back: its version counter does not move, "
                           "so a graph that saved it gives a wrong gradient without any error").format(
                             op=op, name=self.namer.name(tensor)),
                         {"where": where}, [(N_("update under torch.no_grad() instead, or clone()"), "03")],
                         key=f".data.{op}")

    def constant_source(self, leaves, inputs):
        """Before torch.autograd.grad without create_graph=True: (its line, the ids of the parameters its gradient
        depends on, whether it is taken with respect to weights), or None. Its result will be a constant, cut off
        from those parameters. A gradient with respect to weights is often meant as a constant (first-order MAML's
        fast weights, VQGAN's adaptive weight that scales a loss): it counts as a penalty only where, reduced to a
        number, it is added to a loss (_follow_constants)."""
        inputs = set(t for t in (inputs if isinstance(inputs, (tuple, list)) else [inputs])
                     if isinstance(t, torch.Tensor))
        weights = any(isinstance(t, torch.nn.Parameter) for t in inputs)
        params = {id(p) for p in leaves if weights or p not in inputs}
        return (user_frame(), params, weights) if params else None

    def detached_source(self, target, out):
        """A net's output detached (or read through `.data`) outside any module, `D(x).detach()`: noted, for a forward
        of another net on it (on_forward). The source of the constant it is: (the line, the ids of the parameters
        it was computed from, "detach", its name, the ids of the net's own parameters), or None unless it was computed
        from another net's too (D's output on G's fake). A number made from it alone and added to a loss of that
        other net adds nothing to any gradient (_follow_constants)."""
        outputs = self.journal.net_outputs          # the net's output itself, or a view of it (`D(x).view(-1)`)
        base = target if id(target) in outputs else target._base
        output, net = (ref() for ref in outputs.get(id(base), (lambda: None, lambda: None)))
        if output is None or output is not base or net is None:
            return None
        params = {id(fn.variable) for fn, _depth in itertools.islice(graphs.breadth_first([target.grad_fn]), 5000)
                  if isinstance(getattr(fn, "variable", None), torch.nn.Parameter)}
        where = user_frame()
        if len(self.detached_outputs) > 100:
            self.detached_outputs = {k: v for k, v in self.detached_outputs.items() if v[0]() is not None}
        self.detached_outputs[id(out)] = (weakref.ref(out), weakref.ref(net), where, params)
        own = {id(p) for p in net.parameters()}
        return (where, params, "detach", _("{module}'s output").format(module=self.namer.module_name(net)),
                own) if params - own else None

    def follow_constants(self, name, args, kwargs, out, in_module=False):
        """After each op, once autograd.grad has returned a constant gradient: what is computed from it alone is a
        constant too; the op that mixes it with a tensor that requires grad (a penalty added to loss_D) is marked,
        by its node's serial, for the check at backward (_check_constant_gradients). Not inside a module's forward:
        there a constant is the module's input (an FGSM adversarial example, a Langevin sample), rightly so."""
        journal = self.journal
        penalty = True
        if name == "grad" and self.pending_grad is not None:
            source, self.pending_grad = self.pending_grad, None
        elif self.pending_detach is not None:
            source, self.pending_detach = self.pending_detach, None
        else:
            given = [t for a in (*args, *kwargs.values()) for t in (a if isinstance(a, (tuple, list)) else [a])
                     if isinstance(t, torch.Tensor)]
            found = [(t, self.constants[id(t)][1]) for t in given
                     if id(t) in self.constants and self.constants[id(t)][0]() is t]
            if not found:
                return
            source = found[0][1]
            # from weight gradients: a penalty only as a number added to a loss (not to a weight: p - lr * g); from
            # a detached output: only a number added to a number (a term of a loss, not a relativistic offset)
            numbers = name in _ADDS and all(t.numel() == 1 for t, _ in found)
            penalty = (name in _ADDS or name in ("stack", "cat")) and all(t.numel() == 1 for t in given) \
                if source[2] == "detach" else not source[2] or numbers and not any(t.is_leaf for t in given
                                                                                   if t.requires_grad)
        for t in tensors_in(out):
            if not t.requires_grad:
                key = id(t)             # forgotten as soon as the tensor is freed: no cost once none is alive
                self.constants[key] = (weakref.ref(t, lambda ref, key=key: self._forget_constant(key, ref)), source)
            elif penalty and not in_module and \
                    (info := journal.nodes.get(getattr(t, "grad_fn", None))) is not None:
                self.mixed[info.serial] = (*source, user_frame()) if source[2] == "detach" else source
                if len(self.mixed) > 1000:
                    self.mixed = dict(list(self.mixed.items())[-500:])

    def _forget_constant(self, key, ref):
        if self.constants.get(key, (None,))[0] is ref:
            del self.constants[key]

    def check_constant_gradients(self, serials, filled, roots=()):
        """At a backward into `filled` (parameter ids): does its graph hold a constant gradient's penalty, made from
        a gradient of these same parameters? It adds a number to the loss and nothing to any gradient. Or a term
        made from a net's detached output, added where only sums and constant factors lead on to the loss (a
        target inside a squared error, `(target - v) ** 2`, is no such term)?"""
        shifted = None
        for serial in serials & self.mixed.keys():
            where, params = self.mixed[serial][:2]
            if where is not None and self.mixed[serial][2] == "detach":
                if not params & filled or self.mixed[serial][4] & filled:   # a loss of the net that made it: a
                    continue                            # value it keeps (a memory of its outputs), not a term for G
                shifted = self._shifted(roots) if shifted is None else shifted
                if serial not in shifted:
                    continue
                self.suspicious(_("a term added to this loss at {added} is computed from {name}, detached at "
                                  "{where}: it is a constant to this backward, so it changes the loss's value and "
                                  "gives no gradient to the parameters it was computed from").format(
                    added=self.mixed[serial][5], name=self.mixed[serial][3], where=where),
                                {"where": where, "backward": user_frame()},
                                [(N_("if that term is to train through the net that made it (G's adversarial term "
                                     "through D), compute it without .detach(); if it is there to be reported, report "
                                     "it beside the loss, not in it"), "04")],
                                key="detached term")
            elif where is not None and params & filled:
                self.suspicious(_("the penalty built from the gradient at {file}:{line} (`{code}`) is a constant, "
                                   "because torch.autograd.grad was called without create_graph=True: that gradient "
                                   "has no graph back to the parameters, so the penalty adds to the loss but trains "
                                   "nothing").format(file=shown_path(where.file), line=where.line, code=where.code),
                                 {"where": where, "backward": user_frame()},
                                 [(N_("pass create_graph=True to that torch.autograd.grad call"), "08")],
                                 key="constant gradient")

    def _shifted(self, roots) -> set:
        """The serials of the nodes a loss is an affine function of: those reached from its roots through sums,
        means, and products with constants alone. A constant added at one of them shifts the loss and nothing
        else."""
        found: set = set()
        seen: set = set()
        todo = [t.grad_fn for t in roots if getattr(t, "grad_fn", None) is not None]
        while todo:
            fn = todo.pop()
            if fn in seen or len(seen) > 500:
                continue
            seen.add(fn)
            if (info := self.journal.nodes.get(fn)) is not None:
                found.add(info.serial)
            kind = type(fn).__name__
            inputs = [f for f, _ in fn.next_functions]
            if kind in _AFFINE or kind in ("MulBackward0", "DivBackward0") and sum(f is not None for f in inputs) == 1:
                todo.extend(f for f in inputs if f is not None)
        return found

    def _once(self, kind, summary, facts, fixes, key=None):
        """A new Diagnosis of `kind`, recorded; None when one of that key was already given at that line."""
        where = facts.get("where")
        seen = (key or summary, where.file if where else None, where.line if where else None)
        if seen in self.warned:
            return None
        self.warned.add(seen)
        d = Diagnosis(kind, summary, facts, fixes)
        self.journal.diagnoses.append(d)
        return d

    def suspicious(self, summary, facts, fixes, key=None):
        if (d := self._once("suspicious", summary, facts, fixes, key)) is not None and ranks.first_to_say(d.text()):
            where = facts.get("where")
            warnings.warn_explicit(ranks.said(d.text()), DoctorWarning,
                                   shown_path(where.file) if where else "<unknown>", where.line if where else 0)

    def inform(self, summary, facts, fixes, key=None):
        """Not a warning (the training is right): one line of information on stderr, once per kind and line."""
        if (d := self._once("information", summary, facts, fixes, key)) is not None:
            details = d.text().split("\n")[1:]           # the facts and fixes under the summary line
            ranks.tell("\n".join([_("autograd doctor (information, not a warning): {summary}").format(
                summary=d.summary)] + details))

    def nonleaf_grad(self, tensor, where):
        if any(d.kind == "nonleaf_grad" and d.facts["where"] == where for d in self.journal.diagnoses):
            return                        # one diagnosis per line is enough
        d = Diagnosis("nonleaf_grad", _("`.grad` read on {name}, which is not a leaf: it is None").format(
                          name=self.namer.name(tensor)),
                      {"where": where}, [(N_("call .retain_grad() on it before backward(), or read a leaf's .grad"),
                                          "01")])
        self.journal.diagnoses.append(d)
        ranks.tell(d.text())
