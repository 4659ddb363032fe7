"""The version error, diagnosed (part of the diagnoser, errors.Diagnoser): which saved tensor changed in
place, which forward saved it, which optimizer step or op changed it, and what a later loss carried across that
step. Also when the graph hides what it saved (a compiled module's backward): the one parameter with the error's
shape and version."""
import dataclasses
import math
import re
import threading

import torch

from gan_lessons import graphs
from gan_lessons.doctor.frames import failing_node, placed
from gan_lessons.doctor.naming import looks_like_gan, rebound
from gan_lessons.doctor.report import (
    BUFFER_FIXES,
    DDP_COPY_FIXES,
    DETACH_WRONG,
    GAN_FIXES,
    GAN_WRONG,
    INPLACE_FIXES,
    INPLACE_WRONG,
    PARAM_WRITE_FIXES,
    SHARED_TERM_FIXES,
    SHARED_TERM_WRONG,
    STATE_FIXES,
    STEP_FIXES,
    STEP_WRONG,
    THROUGH_COPIES_FIXES,
    Diagnosis,
)
from gan_lessons.i18n import _

# Nodes of ordinary ops whose saved tensors autograd shows; any other node with none shown may hide what it saved.
_PLAIN_NODES = {"AccumulateGrad", "SumBackward0", "MeanBackward0", "NegBackward0", "AddBackward0", "SubBackward0",
                "MulBackward0", "DivBackward0", "PowBackward0", "ViewBackward0", "TBackward0", "ExpandBackward0"}


class VersionErrors:
    """The version error's diagnosis and what it reads: the journal, the namer's names, and the tensors whose
    backward failed (the diagnoser's `roots_of`)."""

    def __init__(self, journal, namer, roots_of):
        self.journal, self.namer, self.roots_of = journal, namer, roots_of

    def _stale(self, error, roots):
        """(the stale saved tensors found, as (Saved, node) pairs; the shape and versions the error names): those
        autograd shows, else a custom Function's that failed, else those of nodes that hide what they saved."""
        found = list(self._saved(roots, stale=True))
        shape, versions = graphs.version_error(str(error))
        node = failing_node(error.__traceback__) if not found else None
        if node is not None and (info := self.journal.nodes.get(node)) is not None and info.op.endswith(".apply"):
            # a custom Function's backward could not read what its forward saved
            found = [(graphs.Saved(type(node).__name__, "saved", "stale", shape, None, *versions), node)]
        return found or self._opaque_saved(roots, shape, versions), shape, versions

    def diagnose(self, error):
        roots = self.roots_of(error)
        found, shape, versions = self._stale(error, roots)
        if not found:
            return Diagnosis("version", _("a saved tensor was modified in place, but the doctor could not find it"),
                             {}, STEP_FIXES + INPLACE_FIXES)
        s, fn = next(((s, fn) for s, fn in found if s.shape == shape and (s.version_now, s.version_saved) == versions),
                     next(((s, fn) for s, fn in found if s.shape == shape), found[0]))
        info = self.journal.nodes.get(fn)
        op, module, saved_at = (info.op, info.module, info.where) if info else (s.node, None, None)
        if info is not None and info.inside is not None and info.where is not None:
            saved_at = info.place()
        module = self.namer.module_name(module)
        transposed = bool(s.param and s.param.endswith(".T"))
        modifier, rec, stepped = self._modifier(s, info.serial if info else None, fn)
        param, chosen = self._param_of(s), s
        if rec is not None and (param is None or rec.ptr != param.untyped_storage().data_ptr()):
            # the name was a guess by shape, or none; the write the doctor recorded says which tensor it hit
            written = next(((t, n) for t, n in self.namer.params.items()
                            if t.untyped_storage().data_ptr() == rec.ptr and tuple(t.shape) == tuple(s.shape or ())),
                           None)
            s = dataclasses.replace(s, param=written[1] if written else None)
            param = written[0] if written else None
        variable = None if s.param or rec is None else self.namer.variable(rec.ptr, rec.shape)   # what was written
        if variable is None and not s.param and s.name == "result":     # a node's own output: `y = torch.exp(x)`,
            variable = next((k for k, v in self.namer.names().variables.items()      # written in place since
                             if v._version == s.version_now and tuple(v.shape) == tuple(s.shape or ())
                             and (v.grad_fn is fn or any(f is fn for f, _ in getattr(v.grad_fn, "next_functions",
                                                                                      ())))), None)
        in_state = False
        if variable is None and not s.param and rec is None:     # an optimizer's state, changed by its own step
            state = self._optimizer_state(s, info.serial if info else None)
            if state is not None:
                (variable, modifier), in_state = state, True
        label = s.param or (f"`{variable}`" if variable else self._saved_label(s, op, module, rec))
        linear = s.node.startswith(("Addmm", "Linear")) or op in ("linear", "addmm")
        tensor = (_("{label} {shape} (a transposed view: Linear saves weight.t())") if linear else
                  _("{label} {shape} (a transposed view)")).format(
            label=label, shape=list(s.shape or [])) if transposed else f"{label} {list(s.shape or [])}"
        base = param.shape if param is not None and s.param else rec.shape if variable and rec is not None else None
        if base is not None and not transposed and tuple(base) != tuple(s.shape or ()):
            tensor = _("{label} {base} (saved as a view of shape {shape})").format(
                label=label, shape=list(s.shape or []), base=list(base))
        saved_by = ((_("{node} ({op} in {module}) at {where}") if module else _("{node} ({op}) at {where}"))
                    if saved_at is not None else
                    (_("{node} ({op} in {module})") if module else _("{node} ({op})"))).format(
            node=s.node, op=op, module=module, where=saved_at)
        facts = {"tensor": tensor,
                 "saved by": saved_by,
                 "modified by": modifier,
                 "versions": _("now {now}, saved at {saved}").format(now=s.version_now, saved=s.version_saved)}
        others = self._also_stale(found, fn, (s.param or s.node, chosen.param))
        if others:
            facts["also stale"] = _("; ").join(others[:4]) + (_("; and {count} more").format(count=len(others) - 4)
                                                                if len(others) > 4 else "")
        summary = (_("{label} changed in place after the forward saved it").format(label=label)
                   if s.param or variable else _("a saved tensor changed in place after the forward saved it"))
        if stepped:                        # an optimizer step: reorder or detach, never clone
            several = len({id(step) for x, _fn in found if x.param and (step := self._step_of(x)) is not None}) > 1
            summary, fixes, wrong = self._step_fixes(roots, s, fn, summary, facts, several)
        elif in_state:
            fixes, wrong = STATE_FIXES, []
        elif self._ddp_of(s) is not None:                              # a buffer of a module DDP wraps:
            fixes, wrong = (BUFFER_FIXES if rec is not None else DDP_COPY_FIXES), INPLACE_WRONG   # yours, or DDP's
        elif s.param and rec is not None and isinstance(param, torch.nn.Parameter):   # written by an op, not a
            # step: an EMA, load_state_dict, a copy between models
            fixes, wrong = PARAM_WRITE_FIXES, INPLACE_WRONG
        else:
            fixes, wrong = INPLACE_FIXES, INPLACE_WRONG
        return Diagnosis("version", summary, facts, fixes, wrong)

    def _step_fixes(self, roots, s, fn, summary, facts, several=False):
        """(summary, fixes, wrong fixes) where an optimizer step changed the saved weight: reorder or cut off, never
        clone; a tensor carried across the step is made again (after the reorder, where the steps of several
        optimizers made the graph stale: a fresh forward of one net would still reach another's old weights); a
        term in both losses is left out of the later one."""
        gan = looks_like_gan(s.param)            # D's weights changed by D's step: reordered, D would also step
        fixes = (GAN_FIXES + STEP_FIXES) if gan else STEP_FIXES     # on G's loss; the GAN's order comes first
        wrong = STEP_WRONG + (GAN_WRONG if gan else DETACH_WRONG)
        step = self._step_of(s)
        carried = self._carried(roots, step, fn)
        if carried:
            names, made, renewed = carried
            shown = ", ".join(f"`{name}`" for name in names)
            detached = ", ".join(f"{name}.detach()" for name in names)
            facts["carried"] = (_("{names}, made from its own last value at {where}: each pass's value still "
                                  "holds the graph of the pass before, with the weights as they were") if renewed else
                                _("{names}, made before that step at {where} and used after it: its graph "
                                  "still holds the weights as they were") if made else
                                _("{names}, made before that step and used after it: its graph still holds the "
                                  "weights as they were")).format(names=shown, where=made)
            summary = (_("{summary}; the loss reaches the old weights through {names}, renewed from its own last "
                         "value") if renewed else
                       _("{summary}; the loss reaches the old weights through {names}, computed before the "
                         "step")).format(summary=summary, names=shown)
            outputs = self._net_outputs(names, step.params if step is not None else [])
            if renewed:                # a fresh forward chains onto the old value again: cut the chain where it
                fixes = [(_("keep {detached} where it is renewed (or renew it under torch.no_grad()) when it is a "  # is
                            "running value or a state the next batch continues from; reset it at the start of each "  # made
                            "pass when passes stand alone: a fresh forward alone still chains onto the last "
                            "value").format(detached=detached), "05")] + fixes
            elif outputs:              # another net's own output: detached, it would give that net no gradient
                fixes = [(_("where the later loss must not train the stepped net, detach the input of the forward "
                            "that made {names}, not {names} itself; where it must, make {names} again after the "
                            "step from a fresh forward of the stepped net too: a forward of {nets} alone on the same "
                            "input still reaches the old weights").format(names=shown, nets=_(" and ").join(outputs)),
                          "05")] + fixes
                wrong = wrong + [(_("{detached}: {names} is the output of {nets}, so the later loss would give {nets} "
                                    "no gradient from it").format(
                    detached=", ".join(f"{name}.detach()" for name in names), names=shown,
                    nets=_(" and ").join(outputs)), "04")]
            else:
                again = (_("make {names} again after the step (a fresh forward); or, where it is kept only as a "
                           "value (a running average, a state for the next pass), keep {detached}").format(
                    names=shown, detached=detached), "05")
                fixes = [fixes[0], again] + fixes[1:] if several and fixes[0] == STEP_FIXES[0] else [again] + fixes
        both = self._in_both_losses(roots, self._step_of(s))
        if both:                       # reordered, the step would add that term's gradient twice
            facts["in both losses"] = _("{names}, part of the loss the step stepped on and of this one, and "
                                        "it reaches the stepped weights").format(
                names=", ".join(f"`{n}`" for n in both))
            fixes = SHARED_TERM_FIXES + (GAN_FIXES if gan else []) + STEP_FIXES[1:]
            wrong = wrong + SHARED_TERM_WRONG
        info = self.journal.nodes.get(fn)
        if info is not None and info.op == "grad":      # saved by a gradient taken with create_graph=True
            fixes = fixes + THROUGH_COPIES_FIXES
        return summary, self._wrong_optimizer(step, facts) + fixes, wrong

    def _wrong_optimizer(self, step, facts) -> list:
        """The fix, with its fact, where the step that changed the weights followed a backward that reached none of
        its parameters but only another optimizer's: that other optimizer's step was meant (opt_G.step() after
        loss_D.backward()). [] otherwise."""
        after = step.after if step is not None else None
        if after is None or not after.fills_grad or not after.depth or any(p in after.depth for p in step.params):
            return []
        owner = self.namer.owner_of(step.optimizer, list(after.depth))
        if owner is None or id(owner) in after.used_by:     # that optimizer did step on it: the order is the
            return []                                        # choice of the code, not a slip
        name, owner = self.namer.optimizer_name(step.optimizer), self.namer.optimizer_name(owner)
        facts["stepped after"] = _("the backward at {where}, which reached none of {name}'s parameters: what it "
                                   "reached, {owner} holds").format(where=after.where, name=name, owner=owner)
        return [(_("step {owner} after the backward at {where}, not {name}: that backward gave {name} nothing to "
                   "step on").format(owner=owner, name=name, where=after.where), "05")]

    def _net_outputs(self, names, stepped) -> list:
        """The trained nets (modules with parameters that require grad) other than the one the step trained (none of
        their parameters in `stepped`) whose forward made these variables, each by the shortest name the doctor
        knows it by (`self.D` for a node made in `self.D.net.2`)."""
        live, nodes, nets = self.namer.names().variables, self.journal.nodes, []
        stepped_ids = {id(p) for p in stepped}
        for name in names:
            t = live.get(name)
            info = nodes.get(t.grad_fn) if isinstance(t, torch.Tensor) and t.grad_fn is not None else None
            if info is None or info.module is None or any(id(q) in stepped_ids for q in info.module.parameters()):
                continue                  # the stepped net's own output
            around = sorted(((n, m) for m, n in self.namer.names().modules.items()     # the nets it is part of,
                             if any(sub is info.module for sub in m.modules())         # outermost first
                             and not any(id(q) in stepped_ids for q in m.parameters())), key=lambda e: len(e[0]))
            top = around[0][1] if around else info.module
            if not any(q.requires_grad for q in top.parameters()):
                continue                  # a module with nothing to train
            net = self.namer.module_name(top)
            if net not in nets:
                nets.append(net)
        return nets

    def _also_stale(self, found, fn, named):
        """Every other stale saved tensor than the one named, each with the lines that saved and wrote it (each write
        would raise next, once the first is fixed)."""
        others: list = []
        for x, x_fn in found:
            if x_fn is fn or (x.param and x.param in named):
                continue
            x_info = self.journal.nodes.get(x_fn)
            if x.param or x_info is None or x_info.where is None:
                name = x.param or x.node
            else:
                name = _("{node} at {where}, modified by {modifier}").format(
                    node=x.node, where=x_info.place() if x_info.inside else x_info.where,
                    modifier=self._modifier(x, x_info.serial, x_fn)[0])
            if name not in others and name != named[0]:
                others.append(name)
        return others

    def _opaque_saved(self, roots, shape, versions):
        """[(Saved, node)] for a version error whose graph does not show what it saved (a compiled module's
        backward, a custom autograd.Function's ctx): the one parameter (or its transpose), or tensor kept by a module
        or object, that has the error's shape and version now; among several, the one the latest in-place write of
        that shape and version wrote; else []."""
        if shape is None or versions is None:
            return []
        hidden = [fn for fn in graphs.walk(roots) if not graphs.saved_tensors(fn, self.namer.params)
                  and "Backward" in type(fn).__name__ and not hasattr(fn, "variable")
                  and type(fn).__name__ not in _PLAIN_NODES]
        if not hidden:
            return []
        opaque = next((fn for fn in hidden if not re.search(r"Backward\d+$", type(fn).__name__)), hidden[0])
        # a custom Function's or a compiled graph's node (no number after Backward) before torch's own (cat)
        found = [(p, n) for p, n in self.namer.params.items()
                 if p._version == versions[0] and tuple(p.shape) in (shape, shape[::-1])]
        found += [(t, n) for n, t in self.namer.names().variables.items()   # a tensor a module or object keeps: a cache
                  if t._version == versions[0] and tuple(t.shape) == shape and all(t is not p for p, _ in found)]
        inplace = self.journal.inplace
        if len(found) > 1:             # the one the latest in-place write of that shape and version wrote
            rec = next((r for r in reversed(inplace) if (r.version, r.shape) == (versions[0], shape)), None)
            found = [(t, n) for t, n in found if rec is not None and t.untyped_storage().data_ptr() == rec.ptr]
        if not found:                  # a tensor no name holds (a local of a forward): the write the doctor saw
            rec = next((r for r in reversed(inplace) if (r.version, r.shape) == (versions[0], shape)), None)
            return [(graphs.Saved(type(opaque).__name__, "?", "stale", shape, None, *versions), opaque)] if rec else []
        if len(found) != 1:
            return []
        p, name = found[0]
        label = name if tuple(p.shape) == shape else f"{name}.T"
        return [(graphs.Saved(type(opaque).__name__, "?", "stale", shape, label, *versions), opaque)]

    def _in_both_losses(self, roots, step):
        """The names of a term both the loss behind `step` and the failing loss are made of, when it reaches the
        weights that step changed (an entropy bonus added to both losses): reordering the two backwards before the
        step would make the step count it twice. [] when they share no such term."""
        if step is None:
            return []
        nodes, mine = self.journal.nodes, {id(p) for p in step.params}
        before = next((b for b in reversed(self.journal.backwards) if id(step.optimizer) in b.used_by), None)
        if before is None:
            return []
        shared = [fn for fn in graphs.walk(roots) if (info := nodes.get(fn)) and info.serial in before.nodes]
        if not any(id(getattr(fn, "variable", None)) in mine for fn, _d in graphs.breadth_first(shared)):
            return []
        top = {nodes.get(fn).serial for fn in shared}
        live = self.namer.names().variables      # a term of both losses, made by a node of both: a number, not a
        return [n for n, t in live.items() if isinstance(t, torch.Tensor) and t.numel() == 1   # batch both use
                and (info := nodes.get(t.grad_fn)) is not None and info.serial in top][:3]

    def _step_of(self, s):
        """The latest optimizer step over the parameter a saved tensor is (None for a non-parameter)."""
        name = (s.param or "").removesuffix(".T")
        param = next((p for p, n in self.namer.params.items() if n == name), None)
        return next((step for step in reversed(self.journal.steps) if any(p is param for p in step.params)), None) \
            if param is not None else None

    def _carried(self, roots, step, stale):
        """([names], where it was made) of a tensor made before `step` that a loss made after it still reaches: an
        RL state or a generated batch kept across the step, a running average kept in a module buffer without
        detach; every state one line carries (an LSTM's h and c). None when the loss itself was made before the step
        (then the order of the updates is the bug)."""
        if step is None:
            return None
        latest = max((info.serial for t in roots if (info := self.journal.nodes.get(t.grad_fn))), default=0)
        if latest <= step.serial:
            return None
        # where the new pass meets the old graph: the old nodes that nodes made after the step take as input, on
        # the way to the node that saved the stale tensor
        nodes = self.journal.nodes
        met = {info.serial: info for fn in graphs.walk(roots) if (mine := nodes.get(fn)) and mine.serial > step.serial
               for nxt, _ in fn.next_functions if (info := nodes.get(nxt)) and info.serial <= step.serial
               and any(f is stale for f, _ in graphs.breadth_first([nxt]))}
        edge = set(met)
        if not edge:
            return None
        live = self.namer.names().variables
        for info in (info for info in met.values() if info.where):
            for code in ([info.inside.code] if info.inside else []) + [info.where.code]:
                carried = [name for name in _live(rebound(code), live)   # a state each pass makes from the last (h =
                           if self.namer.distance(live[name].grad_fn, edge) is not None]   # rnn(x, h), self.mean_w =
                if carried:                   # ... self.mean_w ...): rebound since, its new value still reaches the
                    return carried, info.place(), True              # old graph through the old one
        names = self.namer.variables_made_by(edge, since=step.serial)
        if not names:
            return None
        info = self.journal.nodes.get(live[names[0]].grad_fn)
        return names[:1], (info.where if info and info.serial in edge else None), False

    def _optimizer_state(self, s, saved):
        """(name, what changed it) when the one tensor of an optimizer's state with the saved tensor's shape and
        version is what a graph saved (Adam's exp_avg_sq used in a loss), and that optimizer stepped after the node
        that saved it: its step updated the state in place. None otherwise."""
        held = [(name, opt) for name, opt, t in self.namer.optimizer_state()
                if tuple(t.shape) == tuple(s.shape or ()) and t._version == s.version_now]
        if len(held) != 1:
            return None
        name, opt = held[0]
        step = next((step for step in reversed(self.journal.steps) if step.optimizer is opt
                     and (saved is None or step.serial >= saved)), None)
        if step is None:
            return None
        return name, _("{optimizer}.step() at {where}, which updates its state in place").format(
            optimizer=self.namer.optimizer_name(opt), where=step.where)

    def _saved(self, roots, stale=False):
        for fn in graphs.walk(roots):
            for s in graphs.saved_tensors(fn, self.namer.params):
                if not stale or s.state == "stale":
                    yield s, fn

    def _param_of(self, s):
        name = (s.param or "").removesuffix(".T")
        return next((p for p, n in self.namer.params.items() if n == name), None)

    def _saved_label(self, s, op, module, rec=None):
        """A saved tensor no variable holds, named by the node that made it (the op whose output the in-place write
        overwrote), or by the node that saved it: its output (ReLU saves its result), or what it took in."""
        made = rec.made if rec is not None else None
        if made is not None and tuple(rec.shape) == tuple(s.shape or ()):
            name = self.namer.module_name(made.module)
            return (_("the output of {op} in {module} at {where}") if name else _("the output of {op} at {where}")
                    ).format(op=made.op, module=name, where=made.place())
        if s.name == "saved" and op.endswith(".apply"):      # a custom Function's ctx.save_for_backward
            return _("a tensor {function}.forward saved (ctx.save_for_backward)").format(
                function=op.removesuffix(".apply"))
        if s.name == "result":
            return (_("the output of {op} in {module}") if module else _("the output of {op}")).format(op=op,
                                                                                                  module=module)
        return (_("the {name} that {op} in {module} saved") if module else _("the {name} that {op} saved")).format(
            name=s.name, op=op, module=module)

    def _modifier(self, s, saved=None, node=None):
        """(what changed the saved tensor, the in-place record or None, whether an optimizer step did: the first
        says so only in words, in the language in use). `saved`: the serial of the node that saved it; a step or
        write before that node changed nothing it saved (the first write after it is the one named). A stale tensor
        can no longer be read, so a name given by shape and version alone is a guess: when no step or op changed that
        tensor but an op the doctor saw wrote one of that shape up to that version (an out= write into a buffer a
        forward saved, then replaced), that op is the answer. When none did, why not (_unseen)."""
        param = self._param_of(s)
        if param is not None:
            for step in reversed(self.journal.steps):   # a step before the forward that saved it changed nothing saved
                if any(p is param for p in step.params) and (saved is None or step.serial >= saved):
                    return _("{optimizer}.step() at {where} (in place, under no_grad)").format(
                        optimizer=self.namer.optimizer_name(step.optimizer), where=step.where), None, True
            ptr = param.untyped_storage().data_ptr()
            recs = [rec for rec in self.journal.inplace if rec.ptr == ptr and (saved is None or rec.serial >= saved)]
        else:
            recs = []
        recs += [rec for rec in reversed(self.journal.inplace) if (rec.version, rec.shape) == (s.version_now, s.shape)]
        recs += [rec for rec in reversed(self.journal.inplace) if rec.version == s.version_now and s.shape is not None
                 and math.prod(rec.shape) == math.prod(s.shape) and (saved is None or rec.serial >= saved)]
        if saved is not None:          # a part of a larger tensor: a write anywhere in it moved the one version counter
            recs += [rec for rec in reversed(self.journal.inplace) if rec.version == s.version_now
                     and rec.serial >= saved and math.prod(rec.shape) > math.prod(s.shape or (0,))]
            # a write through a view of part of it (h[:, 0].mul_(...)): the view shares the counter too
            recs += [rec for rec in reversed(self.journal.inplace) if rec.version == s.version_now
                     and rec.serial >= saved and math.prod(rec.shape) < math.prod(s.shape or (0,))]
        if saved is not None:        # a write into what the saving node took in (or made, for its own output)
            nodes = self.journal.nodes      # before a write of the same shape and version into another tensor
            inputs = {info.serial for f, _ in getattr(node, "next_functions", ()) if (info := nodes.get(f))}
            mine = inputs | ({saved} if s.name == "result" else set())
            recs.sort(key=lambda rec: rec.made is None or rec.made.serial not in mine)
        for rec in recs:
            writes = self._writes_since_save(rec, s, saved)
            first = writes[0]                       # the write that made the saved value stale; later ones only
            module = self.namer.module_name(first.module)       # moved the counter further
            said = (_("{op} in {module} at {where}") if module else _("{op} at {where}")).format(
                op=first.op, module=module, where=placed(first.where, first.outer, first.method))
            if len(writes) > 1:
                said = _("{first}, the first of {count} in-place writes into it after the save (the last: {last})"
                         ).format(first=said, count=len(writes), last=placed(rec.where, rec.outer, rec.method))
            return said, first, False
        return self._unseen(saved, s), None, False

    def _writes_since_save(self, rec, s, saved):
        """The in-place writes into rec's tensor from the one after the save to rec, in order: [rec] when the
        others are not known (a write from before the node that saved it, or into another storage)."""
        if s.version_saved is None or rec.version is None:
            return [rec]
        writes = {w.version: w for w in self.journal.inplace if w.ptr == rec.ptr and tuple(w.shape) == tuple(rec.shape)
                  and (saved is None or w.serial >= saved) and s.version_saved < w.version <= rec.version}
        chain = [writes.get(v) for v in range(s.version_saved + 1, rec.version + 1)]
        return chain if chain and all(chain) else [rec]

    def _ddp_of(self, s):
        """(the name of the DistributedDataParallel wrapper in sight whose module holds the stale tensor as a buffer,
        the wrapper), or None."""
        from torch.nn.parallel import DistributedDataParallel
        tensor = self._param_of(s)
        if tensor is None:
            return None
        return next(((name, m) for m, name in self.namer.names().modules.items()
                     if isinstance(m, DistributedDataParallel) and any(b is tensor for b in m.module.buffers())), None)

    def _unseen(self, saved, s=None):
        """Why no write the doctor saw changed the tensor, as far as the evidence tells: the doctor watches the torch
        calls its own thread makes in Python, inside its block. A buffer of a module under DDP: DDP's own copy of
        rank 0's buffers before each forward, where this torch counts it as a write."""
        ddp = self._ddp_of(s) if s is not None else None
        if ddp is not None:
            name, wrapper = ddp
            if getattr(wrapper, "broadcast_buffers", False) and not _ddp_keeps_versions():
                return _("{ddp}'s copy of rank 0's buffers into every process at the start of each forward "
                         "(DistributedDataParallel, broadcast_buffers=True), an in-place write made in C++ that the "
                         "doctor does not see: two forwards of {ddp} before one backward meet it").format(ddp=name)
            return _("an in-place write the doctor did not see, made after the forward that saved the tensor: it is a "
                     "buffer of {ddp}, under DistributedDataParallel, whose own copy of rank 0's buffers does not "
                     "count as a write on this torch; so the write is another one below torch's Python API (a C++ "
                     "extension, a compiled region, another thread)").format(ddp=name)
        if saved is None:
            return _("an in-place write the doctor did not see: the forward that saved the tensor ran before the "
                     "doctor began watching (outside the `with doctor()` block, or in an earlier cell), and so may "
                     "the write")
        # the threads started inside the block first: the likelier writers, and named even when many others run
        others = [t.name for t in sorted(threading.enumerate(), key=lambda t: t.ident in self.journal.threads_at_entry)
                  if t is not threading.current_thread()]
        if others:
            return _("an in-place write the doctor did not see, made after the forward that saved the tensor: "
                     "other threads run beside the one that entered the doctor ({names}), and it watches only that "
                     "one").format(names=", ".join(others[:3]))
        return _("an in-place write the doctor did not see, made after the forward that saved the tensor: by code "
                 "it does not watch (another thread that has ended; C++ or CUDA code below torch's Python API, as a "
                 "custom extension or a collective that broadcasts buffers; the inside of a compiled region)")


def _live(names, live) -> list:
    """The live variables a line's names are: `h` itself; `self.mean_w` as the one live name that ends in
    `.mean_w`, inside a module's code."""
    found = []
    for name in names:
        if name in live:
            found.append(name)
        elif name.startswith("self."):
            ends = [k for k in live if k.endswith(name[4:])]      # one tensor, maybe by several paths
            found += ends[:1] if len({id(live[k]) for k in ends}) == 1 else []
    return found


def _ddp_keeps_versions() -> bool:
    """Whether this torch's DDP copies buffers without counting the copy as a write: read from its source (torch
    2.13's wraps the copy in torch.autograd._unsafe_preserve_version_counter; older ones did not)."""
    import inspect

    from torch.nn.parallel import DistributedDataParallel
    try:
        return "_unsafe_preserve_version_counter" in inspect.getsource(DistributedDataParallel._sync_buffers)
    except (AttributeError, OSError, TypeError):
        return False
