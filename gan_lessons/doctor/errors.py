"""The three errors, diagnosed: a saved tensor changed in place (which tensor, which forward saved it, which step
or op changed it), a backward through a freed graph (which backward freed it, what the losses share), and an in-place
op on a leaf; raised by backward() or inside torch.autograd.grad alike. Also a gradient penalty's two own errors: an
input of autograd.grad that does not require grad, and a gradient of a non-scalar output without grad_outputs."""
import linecache
import re
from functools import partial

import torch

from gan_lessons import graphs
from gan_lessons.doctor import kept, misuse
from gan_lessons.doctor.catalogue import recognise
from gan_lessons.doctor.checks import tensors_in
from gan_lessons.doctor.frames import (
    TORCH_DIR,
    failing_node,
    is_user,
    placed,
    runs_backward,
    shown_path,
    traceback_frames,
)
from gan_lessons.doctor.naming import looks_like_generator, rebound
from gan_lessons.doctor.report import (
    ACCUMULATED_FIXES,
    ACCUMULATED_WRONG,
    CACHED_FIXES,
    CACHED_WRONG,
    CARRIED_FIXES,
    CARRIED_WRONG,
    DETACH_WRONG,
    FLAGGED_LEAF_FIXES,
    FREED_FIXES,
    FREED_WRONG,
    GRAD_WRITE_FIXES,
    GRAD_WRITE_WRONG,
    INPUT_LEAF_FIXES,
    INPUT_LEAF_WRONG,
    LEAF_FIXES,
    LEAF_WRONG,
    LOSS_ONCE_FIXES,
    LOSS_ONCE_WRONG,
    RECOMPUTED_FIXES,
    RECOMPUTED_WRONG,
    RESET_IN_PLACE_FIXES,
    REUSED_FIXES,
    REUSED_WRONG,
    SELF_WRITE_FIXES,
    SELF_WRITE_WRONG,
    SKIPPED_FIXES,
    SKIPPED_WRONG,
    SUM_ONCE_FIXES,
    TARGET_FIXES,
    TARGET_WRONG,
    TWICE_FIXES,
    TWICE_WRONG,
    UNREGISTERED_FIXES,
    UNREGISTERED_WRONG,
    UNTRAINED_FIXES,
    UNTRAINED_WRONG,
    Diagnosis,
    Where,
)
from gan_lessons.doctor.versions import VersionErrors
from gan_lessons.doctor.views import ViewErrors
from gan_lessons.i18n import N_, _


def _while_compiling(error) -> bool:
    """Was the error raised while torch.compile compiled a frame (not while compiled code ran)?"""
    return any(tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith("torch/_dynamo/output_graph.py")
               for tb in traceback_frames(error.__traceback__))


def _outside_backward(tb):
    """The traceback's frames up to autograd's engine: the frames below it run inside a backward (a custom
    Function's, a hook), and their locals (`g`, `ctx`) are not names of the student's tensors."""
    for frame in traceback_frames(tb):
        if runs_backward(frame.tb_frame):
            return
        yield frame


# in-place ops a forward runs on its activations (F.relu(x, inplace=True), nn.Dropout(inplace=True)), by name
_ACTIVATIONS = {"relu", "leaky_relu", "elu", "selu", "celu", "hardtanh", "relu6", "sigmoid", "tanh", "dropout",
                "alpha_dropout", "feature_alpha_dropout", "threshold", "silu", "hardswish", "hardsigmoid", "mish",
                "rrelu"}


def _same_line(a, b) -> bool:
    return a is not None and b is not None and (a.file, a.line) == (b.file, b.line)


def _grad_read_later(names, where) -> bool:
    """Whether the file of `where` reads the .grad of one of these named leaves (`w.grad`, after the loop the
    error stopped): the code wants their gradients, whatever optimizer there is."""
    if where is None:
        return False
    source = "".join(linecache.getlines(where.file))
    return any(re.search(rf"(?<![\w.]){re.escape(name.strip('`'))}\.grad\b", source) for name in names)


def _site(info):
    """A node's op and its lines: the call's, and the one inside the module."""
    return (info.op, *((w.file, w.line) if (w := info.where) else (None, None)),
            info.inside.line if info.inside else None)


class Diagnoser:
    """The doctor's diagnoses of an error that escaped the block, read from the journal with the namer's names (the
    version error's in versions.py, the view errors' in views.py)."""

    def __init__(self, journal, namer, constant_of=lambda tensor: None):
        self.journal, self.namer, self.constant_of = journal, namer, constant_of   # (the checks' constant gradients)
        self.versions = VersionErrors(journal, namer, self.roots_of)
        self.views = ViewErrors(journal, namer, self.failing_call)

    def diagnose(self, error) -> Diagnosis | None:
        """The diagnosis of an error that escaped the block: its kind recognised from the message (catalogue.py), then
        the kind's own function, which reads the records; None for an error outside the catalogue."""
        kind = recognise(str(error))
        if kind is None:
            return None
        self.namer.error_spaces = [tb.tb_frame.f_locals for tb in _outside_backward(error.__traceback__)
                                   if is_user(tb.tb_frame)]
        if _while_compiling(error):        # its tensors are FakeTensors, with no data and no history of ours
            return self._compiled(kind, error)
        return self.table()[kind.key](error)

    def _compiled(self, kind, error):
        """An error torch.compile raised while it traced a forward (its backend traces the backward too, on
        FakeTensors): the kind, the call that was being compiled, and how to see the line."""
        where = self.failing_call(error)[0]
        return Diagnosis(kind.key, _("torch.compile raised this while tracing the call at {where}, before running "
                                     "it: {meaning}").format(where=where, meaning=_(kind.meaning)),
                         {"compiled call": str(where)},
                         [(N_("run that call once without torch.compile, under the doctor: the same code then raises "
                              "as it runs, and the doctor names the tensor and the lines"), "10")]
                         + ([(N_("a forward that writes in place into a tensor its backward needs "
                                                   "(a buffer updated in forward): clone it before the write, or make "
                                                   "the update out of place"), "03")]
                            if kind.key == "version" else []))

    def table(self):
        """One function per kind of the catalogue."""
        return {"view_inplace": self.views.diagnose, "version": self.versions.diagnose, "freed": self._freed_error,
                "leaf_inplace": self._leaf_error, "grad_input": self._input_error,
                "nonscalar": self._nonscalar_error,
                "no_graph": lambda error: self._constant_error(error) or self._no_graph_error(error),
                **{key: partial(function, self) for key, function in (
                    ("unused_input", misuse.unused_input), ("inference_saved", misuse.inference_saved),
                    ("inference_inplace", misuse.inference_inplace), ("nonleaf_flag", misuse.nonleaf_flag),
                    ("numpy_grad", misuse.numpy_grad), ("out_grad", misuse.out_grad), ("function_gradient", misuse.function_gradient),
                    ("hook_no_grad", misuse.hook_no_grad), ("ddp_unused", misuse.ddp_unused))}}

    def failing_call(self, error):
        """(the student's line that made the failing call, torch.autograd.grad's frame or None)."""
        user = [tb for tb in traceback_frames(error.__traceback__) if is_user(tb.tb_frame)]
        grad = [tb.tb_frame for tb in traceback_frames(error.__traceback__) if tb.tb_frame.f_code.co_name == "grad"
                and tb.tb_frame.f_code.co_filename.startswith(TORCH_DIR) and "t_inputs" in tb.tb_frame.f_locals]
        where = None
        if user:
            file, line = user[-1].tb_frame.f_code.co_filename, user[-1].tb_lineno
            where = Where(file, line, linecache.getline(file, line).strip())
        return where, grad[-1] if grad else None

    def _input_error(self, error):
        """torch.autograd.grad(outputs, inputs) where an input does not require grad: a gradient penalty's
        interpolates made without requires_grad_(True)."""
        where, frame = self.failing_call(error)
        inputs = list(frame.f_locals["t_inputs"]) if frame is not None else []
        culprit = next((t for t in inputs if isinstance(t, torch.Tensor) and not t.requires_grad), None)
        label = self.namer.label(culprit) if culprit is not None else _("an input")
        facts = {"input": f"{label} {list(culprit.shape)}" if culprit is not None else "?", "call": str(where)}
        fix = (_("{name}.requires_grad_(True) before the forward that uses it (in a gradient penalty: on the "
                 "interpolates x_hat, right after mixing x_real and the detached x_fake)").format(name=label.strip("`"))
               if label.startswith("`") else
               _("the input.requires_grad_(True) before the forward that uses it (in a gradient penalty: on the "
                 "interpolates x_hat, right after mixing x_real and the detached x_fake)"))
        return Diagnosis("grad_input", _("torch.autograd.grad is asked for the gradient with respect to {label}, "
                                         "which does not require grad: autograd recorded nothing for it").format(
                                             label=label), facts, [(fix, "08")])

    def _constant_error(self, error):
        """backward() on a penalty that is a constant, made from autograd.grad without create_graph=True (the loud
        form of the silent bug checks.py warns about); None for any other tensor without a grad_fn."""
        sources = [source for t in self.roots_of(error) if (source := self.constant_of(t)) is not None]
        if not sources or sources[0][0] is None:
            return None
        where = sources[0][0]
        return Diagnosis("constant", _("this penalty is a constant: it is built from the gradient at {where}, and "
                                       "torch.autograd.grad was called there without create_graph=True, so that "
                                       "gradient has no graph back to the parameters").format(where=where),
                         {"where": where, "backward": str(self.failing_call(error)[0])},
                         [(N_("pass create_graph=True to that torch.autograd.grad call"), "08")])

    def _no_graph_error(self, error):
        """backward() on a tensor with no graph: every parameter frozen, a trainable module run with gradients off
        (torch.no_grad(), or torch.utils.checkpoint's reentrant variant on inputs that do not require grad), or a
        loss rebuilt from values (detach, .item(), torch.tensor)."""
        roots = [t for t in self.roots_of(error) if t.grad_fn is None and not t.requires_grad]
        label = self.namer.label(roots[0]) if roots else _("the loss")
        facts = {"backward": str(self.failing_call(error)[0])}
        params = [p for p in self.namer.params if isinstance(p, torch.nn.Parameter)]
        if params and not any(p.requires_grad for p in params):
            return Diagnosis("no_graph", _("{label} has no graph: every parameter the doctor knows of is frozen "
                                           "(requires_grad=False), so no operation recorded anything").format(
                                               label=label), facts,
                             [(N_("set requires_grad=True on the parameters this loss should train (or leave them "
                                  "out of any freezing loop)"), "09")])
        module, where, caller = next(((m(), w, c) for m, w, c in reversed(self.journal.no_grad_forwards)
                                      if m() is not None),
                                     (None, None, None))
        if module is not None:
            facts["where"] = (_("{inside}, called from {where}").format(inside=where, where=caller)
                              if caller is not None and caller != where else where)
            return Diagnosis("no_graph", _("{label} has no graph: {module}, which has parameters that require grad, "
                                           "ran its forward with gradients off (inside torch.no_grad(), or inside "
                                           "torch.utils.checkpoint's reentrant variant, whose output requires grad "
                                           "only if one of its inputs does)").format(
                                               label=label, module=self.namer.module_name(module)), facts,
                             [(N_("run the forward this loss trains outside torch.no_grad()"), "04"),
                              (N_("checkpoint with use_reentrant=False, or make the checkpointed block's input require "
                                  "grad (transformers: model.enable_input_require_grads())"), None)])
        made = next((r for t in roots if (r := self.journal.made_of(self.journal.from_values, t)) is not None), None)
        if made is not None:              # made from numbers: the line that made it, from the recorder
            facts["made from values at"] = str(made.where)
            return Diagnosis("no_graph", _("{label} has no graph: it was made from Python numbers at {where} "
                                           "(torch.tensor of values taken with .item() or float()), and autograd "
                                           "records nothing through numbers").format(label=label, where=made.where),
                             facts, [(N_("keep the loss a tensor from the model's outputs: torch.stack([loss_a, "
                                         "loss_b]).sum(), or total = total + part, not part.item()"), "04")])
        return Diagnosis("no_graph", _("{label} has no graph: it was computed from tensors autograd does not track "
                                       "(a detach(), .data, a number from .item() made a tensor again, or a tensor "
                                       "made with torch.tensor(...))").format(label=label), facts,
                         [(N_("compute the loss from the model's outputs themselves, with torch operations"), "04")])

    def _nonscalar_error(self, error):
        """A gradient of a non-scalar output without grad_outputs: out = D(x_hat) has one score per sample."""
        where, frame = self.failing_call(error)
        roots = self.roots_of(error)
        out = next((t for t in roots if t.numel() != 1), None)
        label = self.namer.label(out) if out is not None else _("the output")
        shape = f" {list(out.shape)}" if out is not None else ""
        facts = {"output": _("{label}{shape}, not a single number").format(label=label, shape=shape),
                 "call": str(where)}
        if frame is not None:
            summary = _("torch.autograd.grad of {label}{shape} without grad_outputs: it is not a single number, so "
                        "autograd cannot tell how to weigh its elements").format(label=label, shape=shape)
            fixes = [(N_("pass grad_outputs=torch.ones_like(out) to torch.autograd.grad (the gradient of out.sum(): "
                         "each sample's own gradient, as a gradient penalty needs)"), "08"),
                     (N_("or differentiate a scalar: torch.autograd.grad(out.sum(), inputs)"), "08")]
        else:
            summary = _("backward() on {label}{shape}: it is not a single number, so autograd cannot tell how to "
                        "weigh its elements").format(label=label, shape=shape)
            fixes = [(N_("reduce it to the loss first: out.mean().backward() (or out.sum())"), None),
                     (N_("or give its gradient: out.backward(torch.ones_like(out))"), None)]
        return Diagnosis("nonscalar", summary, facts, fixes)

    def roots_of(self, error):
        """The tensors whose backward failed: `self` of torch's Tensor.backward frame in the traceback, or the
        outputs of torch.autograd.grad (which jacobian and hessian call)."""
        roots = []
        for tb in traceback_frames(error.__traceback__):
            frame = tb.tb_frame
            if frame.f_code.co_name == "backward" and isinstance(frame.f_locals.get("self"), torch.Tensor):
                roots = [frame.f_locals["self"]]
            elif frame.f_code.co_name == "grad" and frame.f_code.co_filename.startswith(TORCH_DIR) \
                    and "outputs" in frame.f_locals:
                roots = tensors_in(frame.f_locals.get("t_outputs", frame.f_locals["outputs"])) or roots
        last = [r() for r in self.journal.backwards[-1].roots] if self.journal.backwards else []
        return roots or [t for t in last if t is not None]

    def _freed_error(self, error):
        backwards = self.journal.backwards
        roots = self.roots_of(error)
        infos = {info.serial: info for fn in graphs.walk(roots) if (info := self.journal.nodes.get(fn))}
        mine = set(infos)

        def same(b):                       # the very tensors, alive (an id a freed loss had may be reused)
            return b.root_ids == {id(t) for t in roots} and all(any(ref() is t for t in roots) for ref in b.roots)

        earlier = [b for b in list(backwards)[:-1] if not same(b) and not b.retain and b.nodes & mine]
        again = [b for b in list(backwards)[:-1] if same(b) and not b.retain]
        prior = [b for b in list(backwards)[:-1] if not b.retain and b.fills_grad]
        kept = self._extended(roots, prior)
        if kept is not None:       # an earlier loss, with this pass's new terms added to it
            return Diagnosis("freed", _("{names} still holds a loss whose backward already ran at {where}: this "
                                        "pass added its new terms to it instead of starting a new sum, so its "
                                        "backward goes into the freed graph again").format(
                                 names=", ".join(self.namer.label(t) for t in roots[:3]), where=kept.where),
                             {"first backward": str(kept.where), "second backward": str(backwards[-1].where)},
                             ACCUMULATED_FIXES, ACCUMULATED_WRONG)
        if not earlier and again and _same_line(again[-1].where, backwards[-1].where) and \
                again[-1].where.call == backwards[-1].where.call:           # one call, run again: one loss, made before
            return Diagnosis("freed", _("the loss was made once, before the loop, and every pass calls backward() "
                                        "on it: the first pass freed its graph"),
                             {"first backward": str(again[-1].where),
                              "second backward": str(backwards[-1].where)}, LOSS_ONCE_FIXES, LOSS_ONCE_WRONG)
        if not earlier and again:                  # the same loss, backward twice
            return Diagnosis("freed", _("the same loss was differentiated twice (backward() or autograd.grad), and "
                                        "the first call freed its graph"),
                             {"first backward": str(again[-1].where),
                              "second backward": str(backwards[-1].where)}, TWICE_FIXES, TWICE_WRONG)
        if not earlier:
            return Diagnosis("freed", _("this graph was already used by a backward without retain_graph"),
                             {"backward": str(backwards[-1].where) if backwards else "?"}, FREED_FIXES,
                             FREED_WRONG)
        b = earlier[-1]
        walked = set(graphs.walk(roots))
        done = [r for ref in b.roots if b.fills_grad and (r := ref()) is not None and r.grad_fn is not None
                and r.grad_fn in walked]
        if done:                   # the loss being differentiated is made of a loss whose backward already ran
            return Diagnosis("freed", _("this loss is made from {names}, whose backward already ran at {where}: its "
                                        "gradient is in .grad already, and a second backward through it would add "
                                        "it again").format(names=", ".join(self.namer.label(r) for r in done[:3]),
                                                           where=b.where),
                             {"first backward": str(b.where),
                              "second backward": str(backwards[-1].where) if backwards else "?"},
                             TWICE_FIXES[:1], TWICE_WRONG)
        shared = b.nodes & mine
        modules = sorted({self.namer.module_name(infos[n].module).split(".")[0] for n in shared
                          if infos[n].module is not None})
        lines = sorted({str(infos[n].where) for n in shared if infos[n].where})
        losses = [*roots, *(r for ref in b.roots if (r := ref()) is not None)]
        live = self.namer.names().variables
        held = [name for name in self.namer.variables_made_by(shared)      # a loss itself carries nothing to cut
                if not any(live.get(name) is t for t in losses)]
        part = (_("{nodes}, the forward of {modules} from {lines}, part of both losses")
                if modules and lines else
                _("{nodes}, the forward of {modules}, part of both losses") if modules else
                _("{nodes} from {lines}, part of both losses") if lines else
                _("{nodes}, part of both losses")).format(
            nodes=_("one autograd node") if len(shared) == 1 else _("{count} autograd nodes").format(count=len(shared)),
            modules=_(" and ").join(modules), lines=_("; ").join(lines[:3]))
        if held:
            part = _("{part}; it reaches the second loss through {variables}").format(
                part=part, variables=_(", ").join(f"`{v}`" for v in held))
        facts = {"freed by": _("the backward at {where}").format(where=b.where),
                 "shared part": part,
                 "failing backward": str(backwards[-1].where) if backwards else "?"}
        failing = backwards[-1].where if backwards else None
        fixes = self._kept_fixes(held, [b.where, failing] + [w for n in shared for w in (infos[n].where,
                                                                                       infos[n].inside)], facts)
        if failing is not None and self._skipped(roots, shared, infos):
            made = sorted({infos[n].place() for n in shared if infos[n].where})
            facts["made at"] = _("; ").join(made[:3])
            what = _(", ").join(f"`{v}`" for v in held[:3]) if held else _("the shared part")
            return Diagnosis("freed", _("the forward that makes {what} ran in an earlier pass but not in this one: "
                                        "this pass's loss was made from what that pass left, whose graph its "
                                        "backward freed").format(what=what), facts, SKIPPED_FIXES, SKIPPED_WRONG)
        if failing is not None and b.where is not None and (b.where.file, b.where.line) == \
                (failing.file, failing.line):          # the same backward line, one loop pass later
            if self._made_once(roots, shared, infos):     # its graph leads to a leaf that requires grad: no detach
                return self._made_earlier(roots, shared, infos, b, held, facts, fixes)
            return self._carried_over(roots, b, facts, fixes)
        told, wrong = self._order_freed_fixes(self._stepped_between(b, shared, infos), facts)
        if len(held) == 1 and self._only_through(roots, shared) and self._only_through_first(b, roots, shared):
            # one tensor the two losses share, and all either reaches: detached in either, it would train nothing
            told = [fix for fix in told if fix is not FREED_FIXES[0]]
            wrong += DETACH_WRONG
        live = self.namer.names().variables
        distinct = {id(t): name for name in held if isinstance(t := live.get(name), torch.Tensor)}
        if len(distinct) > 1 and FREED_FIXES[0] in told:      # several tensors carry it: each must be cut
            told[told.index(FREED_FIXES[0])] = (_("detach each of {names} in the loss that must not reach the shared "
                                                  "part: it reaches it through every one of them").format(
                names=_(", ").join(f"`{n}`" for n in distinct.values())), "04")
        self._reading_lines(facts, b, roots, shared)
        return Diagnosis("freed", _("two losses share part of one graph, and the first backward freed it"), facts,
                         fixes + told, wrong)

    def _order_freed_fixes(self, changed, facts):
        """(fixes, wrong fixes) for two losses sharing a freed graph, in the order the step between them (if any)
        and the nets of the shared part make likeliest."""
        told, wrong = list(FREED_FIXES), list(FREED_WRONG)
        if changed is not None:       # retain_graph=True would trade this error for the version error: not a fix
            facts["stepped between"] = _("{change}, over weights of {modules} that this graph saved").format(
                change=changed[0], modules=_(" and ").join(changed[1]))
            told = [told[1], told[0]]
            if any(looks_like_generator(m) for m in changed[1]):      # G stepped on the first: the second may be D's
                told = [(_("where the second loss is D's (it reads G's output through D): detach G's output there "
                           "(D(fake.detach())), as a fresh forward of G would send D's loss into G's .grad; where "
                           "it is G's loss again, run a fresh forward of G for it"), "05")] + told
        else:                         # no step between: the two may be terms of one objective (a VAE's, or two
            told.insert(1, SUM_ONCE_FIXES[0])       # of G's: its adversarial loss and a diversity term)
        return told, wrong

    def _reading_lines(self, facts, b, roots, shared):
        """The lines where each of the two losses reads the shared part, as facts (the first loss's only while its
        tensor lives: its graph's nodes outside that part are gone with it)."""
        for fact, loss_roots in (("first loss reads it at", [r for ref in b.roots if (r := ref()) is not None]),
                                 ("second loss reads it at", roots)):
            entries = self._entries(loss_roots, shared)
            if entries:
                facts[fact] = _("; ").join(entries[:3])

    def _entries(self, roots, shared) -> list:
        """Where a loss's graph (from roots) reads the shared part: the lines that made its nodes, outside that part,
        whose inputs are in it (a torch.cat of the fake batch, D's forward on it)."""
        nodes = self.journal.nodes
        places: list = []
        for fn in graphs.walk(roots):
            info = nodes.get(fn)
            if info is None or info.serial in shared or info.where is None:
                continue
            if any(nxt is not None and (i := nodes.get(nxt)) is not None and i.serial in shared
                   for nxt, _input in fn.next_functions):
                place = info.place() if info.inside else str(info.where)
                if place not in places:
                    places.append(place)
        return places

    def _made_earlier(self, roots, shared, infos, b, held, facts, fixes):
        """The same backward line failing one pass later on a part no line of this pass made again: made from what
        no optimizer trains, another net's output kept as a target, a module's kept tensor, or made before the
        loop."""
        untrained, foreign = self._trained_through(roots, shared, b)
        if untrained:          # made from tensors no optimizer holds: nothing needs its gradient
            facts["made from"] = ", ".join(name for name, _parameter in untrained[:3])
            if any(parameter for _name, parameter in untrained):     # an nn.Parameter: made to be trained, and
                return Diagnosis("freed", _("a tensor made once, before the loop, is used by every pass, and "  # left
                                            "the first pass's backward freed its graph; it was made from an "   # out
                                            "nn.Parameter that no optimizer holds"), facts,
                                 UNREGISTERED_FIXES, UNREGISTERED_WRONG)
            return Diagnosis("freed", _("a tensor made once, before the loop, is used by every pass, and "
                                        "the first pass's backward freed its graph; no optimizer trains what "
                                        "it was made from"), facts, UNTRAINED_FIXES, UNTRAINED_WRONG)
        if foreign:            # the first pass went on into a net its optimizer does not step
            facts["went on into"] = ", ".join(foreign[:3])
            targets = [v for v in held if self._made_in(v, foreign)] or held
            return Diagnosis("freed", _("the first pass's backward went on into {nets}, which the optimizer "
                                        "that stepped after it does not train, and freed the graph a later "
                                        "pass needs: {names} served that loss as a target").format(
                                 nets=", ".join(foreign[:3]),
                                 names=", ".join(f"`{v}`" for v in targets[:3])), facts,
                             TARGET_FIXES, TARGET_WRONG)
        module = self._kept_inside(roots, shared, infos)
        if module:             # the call ran again, but the module served what an earlier call made
            return Diagnosis("freed", _("{module} kept a tensor an earlier pass made and served it again in "
                                        "this pass's call instead of making it anew; that pass's backward "
                                        "freed its graph").format(module=module), facts,
                             CACHED_FIXES, CACHED_WRONG)
        return Diagnosis("freed", _("a tensor made once, before the loop, is used by every pass, and the "
                                    "first pass's backward freed its graph"), facts,
                         fixes + REUSED_FIXES, REUSED_WRONG)

    def _stepped_between(self, b, shared, infos):
        """What changed a weight of the shared part since backward `b`: the last optimizer step that stepped on its
        gradients and holds a parameter of a module that made that part (whose weights it saved), as (the step's
        words, the modules it changed); or an in-place write into such a parameter after it (a hand-written update
        under no_grad, SAM's climb); or None."""
        params = {id(p): (self.namer.module_name(m).split(".")[0], p) for n in shared
                  if (m := infos[n].module) is not None for p in m.parameters(recurse=False)}
        step = next((step for step in reversed(self.journal.steps) if id(step.optimizer) in b.used_by
                     and any(id(p) in params for p in step.params)), None)
        if step is not None:
            return (_("{optimizer}.step() at {where}").format(optimizer=self.namer.optimizer_name(step.optimizer),
                                                              where=step.where),
                    sorted({params[id(p)][0] for p in step.params if id(p) in params}))
        last = max(b.nodes, default=0)
        ptrs = {p.untyped_storage().data_ptr(): module for module, p in params.values()}
        writes = [rec for rec in self.journal.inplace if rec.serial >= last and rec.ptr in ptrs]
        if not writes:
            return None
        return (_("{op} at {where}").format(op=writes[-1].op, where=placed(writes[-1].where, writes[-1].outer, writes[-1].method)),
                sorted({ptrs[rec.ptr] for rec in writes}))

    def _trained_through(self, roots, shared, b):
        """(the tensors requiring grad that the shared part was made from and no optimizer in sight holds,
        when that is all of them; the nets whose parameters the shared part reaches that none of the optimizers
        which stepped after backward `b` holds, when another one does): names, for the two ways a tensor made once
        is not a net's output to make again."""
        nodes, namer = self.journal.nodes, self.namer
        leaves = {id(fn.variable): fn.variable for up in graphs.walk(roots)      # the leaves a shared node takes
                  if (info := nodes.get(up)) is not None and info.serial in shared
                  for fn, _ in up.next_functions if fn is not None and hasattr(fn, "variable")}
        if not leaves:
            return [], []
        steps = self.journal.steps
        held = {id(p) for step in steps for p in step.params} | {
            id(p) for opt in namer.known_optimizers() for group in opt.param_groups for p in group["params"]}
        after = {id(p) for step in steps if id(step.optimizer) in b.used_by for p in step.params}
        written = {rec.ptr for rec in self.journal.inplace}        # a leaf updated by hand (w -= lr * w.grad), or
        read = self.journal.grads_read                              # whose .grad the code reads, is trained
        if not any(k in held or t.untyped_storage().data_ptr() in written or read.get(k, lambda: None)() is t
                   for k, t in leaves.items()):
            names = [namer.name(t) if t in namer.params else namer.label(t) for t in leaves.values()]
            if not _grad_read_later(names, b.where):       # (a read of their .grad after the loop: they are wanted)
                return [(name, isinstance(t, torch.nn.Parameter)) for name, t in zip(names, leaves.values())], []
            return [], []
        if not after:
            return [], []
        nets = {}
        for k, t in leaves.items():
            if k in held and k not in after and t in namer.params:
                nets.setdefault(namer.name(t).split(".")[0], t)
        return [], sorted(nets)

    def _made_in(self, variable, nets) -> bool:
        """Whether the live variable's value was made by a forward of one of `nets` (by the module the recorder saw
        make its node)."""
        t = self.namer.names().variables.get(variable)
        info = self.journal.nodes.get(t.grad_fn) if isinstance(t, torch.Tensor) else None
        return info is not None and info.module is not None and \
            self.namer.module_name(info.module).split(".")[0] in nets

    def _only_through_first(self, b, roots, shared) -> bool:
        """Whether every leaf the first backward `b` reached lies under the shared part (as the second loss's graph
        shows it): detaching the shared tensor in the first loss would leave it nothing to train either."""
        nodes = self.journal.nodes
        under = {id(fn.variable) for up in graphs.walk(roots) if (info := nodes.get(up)) is not None
                 and info.serial in shared for fn, _ in graphs.breadth_first([up]) if hasattr(fn, "variable")}
        return all(id(leaf) in under for leaf in b.depth)

    def _only_through(self, roots, shared) -> bool:
        """Whether every leaf the failing backward reaches, it reaches through the shared part: detaching that part
        would leave the second loss nothing to train."""
        return not self._leaf_outside(roots, shared)

    def _leaf_outside(self, roots, serials) -> bool:
        """Whether the roots' graph reaches a leaf along a path that goes through no node of `serials`."""
        nodes = self.journal.nodes
        seen, todo = set(), [t.grad_fn for t in roots if isinstance(t, torch.Tensor)]
        while todo:
            fn = todo.pop()
            if fn is None or fn in seen:
                continue
            seen.add(fn)
            info = nodes.get(fn)
            if info is not None and info.serial in serials:
                continue
            if hasattr(fn, "variable"):
                return True
            todo += [f for f, _ in fn.next_functions]
        return False

    def _kept_fixes(self, held, places, facts):
        """A tensor of the old graph that a list still holds (`past[0]`): the lines that add to that list, as the
        fact "kept by", and the fix at that line (a detached copy)."""
        container = next((c for name in held if (c := kept.container_of(name))), None)
        if container is None:
            return []
        added = kept.added_at(container, [w.file for w in places if w is not None] +
                              [kept.owner_file(container, self.namer.spaces())])
        if not added:
            return []
        home = next((w.file for w in places if w is not None), None)
        facts["kept by"] = _("{lines}, which adds to `{container}`, kept from one pass to the next").format(
            lines=_("; ").join(str(a.where) if a.where.file == home else _("{file}, {where}").format(
                file=shown_path(a.where.file), where=a.where) for a in added[:3]), container=container)
        emptied = (_("or, where `{container}` is meant to hold this pass's tensors only (features one net hands "
                     "another within a step), empty it after each backward: a detached copy would hand the next "
                     "pass the last one's values").format(container=container), "02")
        if len(added) == 1 and added[0].detached:
            return [(_("keep a detached copy in `{container}`: {code} at line {line} (the values, without their "
                       "graph)").format(container=container, code=added[0].detached, line=added[0].where.line),
                     "02"), emptied]
        return [(_("keep detached copies in `{container}` ({where}): the values, without their graph").format(
            container=container, where=added[0].where), "02"), emptied]

    def _extended(self, roots, prior):
        """The earlier backward whose loss the failing one is made from, when the failing one also has terms of its
        own (a leaf reached through nodes no earlier backward went through): a sum `loss += term` kept from one
        pass into the next; or None. (A loss that only adds up losses already backpropagated has no terms of its
        own: that is a second backward of the same losses.)"""
        nodes = self.journal.nodes
        old = set().union(*(b.nodes for b in prior)) if prior else set()
        walked = {info.serial for fn in graphs.walk(roots) if (info := nodes.get(fn))}
        kept = next((b for b in reversed(prior) if b.nodes and max(b.nodes) in walked), None)
        return kept if kept is not None and self._leaf_outside(roots, old) else None

    def _skipped(self, roots, shared, infos) -> bool:
        """Whether the shared part was made inside the loop by a line this pass did not run again: the failing
        backward's line ran before through a graph of its own, made before the shared part (an earlier pass), then
        through the shared part, and this pass's graph has no node from the lines that made it (a forward that
        returned early on a short batch)."""
        backwards = list(self.journal.backwards)
        before = [c for c in backwards[:-1] if _same_line(c.where, backwards[-1].where)]
        first = min(shared)
        return any(c.nodes and max(c.nodes) < first for c in before) and \
            any(c.nodes & shared for c in before) and self._made_once(roots, shared, infos)

    def _kept_inside(self, roots, shared, infos) -> str | None:
        """The module whose call this pass ran again (new nodes from the same call line) while the shared part,
        made inside that module's code by an earlier call, was not made again: a tensor the module kept and served
        (a cache); or None."""
        last, nodes = max(shared), self.journal.nodes
        now = {(w.file, w.line) for fn in graphs.walk(roots) if (info := nodes.get(fn)) and info.serial > last
               and (w := info.where)}
        kept = [infos[n] for n in shared if infos[n].inside is not None and infos[n].module is not None
                and infos[n].where is not None and (infos[n].where.file, infos[n].where.line) in now]
        return self.namer.module_name(kept[0].module).split(".")[0] if kept else None

    def _made_once(self, roots, shared, infos):
        """Whether the shared part was made by lines this pass did not run again (a forward before the loop), where
        a carried tensor's part was made by a line each pass runs (h = rnn(x, h))."""
        last = max(shared)
        nodes = self.journal.nodes
        now = {_site(info) for fn in graphs.walk(roots) if (info := nodes.get(fn)) and info.serial > last}
        return not now & {_site(infos[n]) for n in shared}

    def _carried_over(self, roots, b, facts, fixes):
        """A tensor carried from one pass to the next (the same backward line, one pass later): which one, and a
        reset of it written in place, if the code has one."""
        carrier = self._carrier(roots, b.nodes)
        if carrier:
            facts["carried by"] = carrier
        reset = self._reset_in_place(roots, b.nodes)
        if reset is not None:                # a reset that writes into the old tensor keeps its history
            facts["reset in place at"] = reset
            fixes = fixes + RESET_IN_PLACE_FIXES + CARRIED_FIXES[:1]
        else:
            fixes = fixes + CARRIED_FIXES
        return Diagnosis("freed", _("a tensor carried from one loop pass to the next still holds the previous pass's "
                                    "graph, which that pass's backward freed"), facts, fixes, CARRIED_WRONG)

    def _reset_in_place(self, roots, shared):
        """The line of a reset written into the old tensor itself (state.zero_(), h.fill_(0)) on the way from this
        pass's loss to the previous pass's graph: an in-place op on a tensor with a history records a node on top
        of it, so the old graph stays attached. None if there is none."""
        last, nodes = max(shared), self.journal.nodes
        for fn in graphs.walk(roots):
            info = nodes.get(fn)
            if info is not None and info.serial > last and info.op in ("zero_", "fill_") and any(
                    (old := nodes.get(nxt)) is not None and old.serial <= last for nxt, _input in fn.next_functions):
                return str(info.where)
        return None

    def _carrier(self, roots, shared):
        """Where this pass meets the previous one: the old tensor a new node takes as input, made at a line that
        this pass ran again. The variables that line makes now are the ones that carried the old tensor over (a
        decoder's `next_word` kept from the last batch), even once rebound to this pass's value."""
        last = max(shared)                 # made by then: the previous pass's, used by its loss or not
        nodes = self.journal.nodes
        edge = {_site(info): info for fn in graphs.walk(roots) if (mine := nodes.get(fn)) and mine.serial > last
                for nxt, _ in fn.next_functions if (info := nodes.get(nxt)) and info.serial <= last and info.where}
        for key, made in edge.items():
            now = [k for k, v in self.namer.names().variables.items()
                   if (info := nodes.get(v.grad_fn)) and info.serial > last and _site(info) == key]
            carriers = [k for k in rebound(made.where.code) if k in now]     # read and made again: h = rnn(x, h)
            if carriers:
                return _("the previous pass's {names} from {where}, which this pass read there to make its own: the "
                         "old values kept that pass's graph").format(where=made.place(),
                                                                   names=", ".join(f"`{k}`" for k in carriers[:3]))
            if now:
                return _("the previous pass's output of {where}, the line that makes {names} now: one of them kept "
                         "it for this pass").format(where=made.place(), names=", ".join(f"`{k}`" for k in now[:3]))
        return None

    def _recomputed_leaf(self, error, node):
        """An in-place op on a leaf raised inside a custom Function's backward: reentrant checkpointing's (or a copy of
        it) runs the forward again there on detached copies of its inputs, leaves that require grad, and an in-place op
        at the start of the block writes into one of them. The user's line, the op (from the innermost frame's line) and
        the Function."""
        frames = list(traceback_frames(error.__traceback__))
        engine = next((k for k, tb in enumerate(frames) if runs_backward(tb.tb_frame)), len(frames))
        outside = [tb for tb in frames[:engine] if is_user(tb.tb_frame)]    # the line that called backward()
        inside = [tb for tb in frames[engine:] if is_user(tb.tb_frame)]     # the block's own code, run again
        innermost = linecache.getline(frames[-1].tb_frame.f_code.co_filename, frames[-1].tb_lineno)
        op = re.search(r"(\w+_)\(|([-+*/]=)", innermost)
        op = (op.group(1) or op.group(2)) if op else _("an in-place op")
        function = type(node).__name__.removesuffix("Backward")
        checkpointed = "checkpoint" in function.lower() or any(
            tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith("checkpoint.py") for tb in frames)
        facts = {"backward of": function}
        module = next((m for tb in reversed(frames) if isinstance(m := tb.tb_frame.f_locals.get("self"), torch.nn.Module)
                       and tb.tb_frame.f_code.co_name == "forward"), None)
        if module is not None and getattr(module, "inplace", False):      # nn.ReLU(inplace=True), nn.Dropout(...)
            facts["module"] = f"{self.namer.module_name(module)} ({type(module).__name__}(inplace=True))"
        for key, tb in (("where", inside[-1] if inside else None), ("backward", outside[-1] if outside else None)):
            if tb is not None:
                file, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
                facts[key] = Where(file, line, linecache.getline(file, line).strip())
        return Diagnosis("leaf_inplace", (_("{op} in a block that checkpointing runs again in the backward: there the "
                                            "block's input is a detached copy, a leaf that requires grad")
                                          if checkpointed else
                                          _("{op} inside the backward of {function}, on a leaf that requires grad made "
                                            "there")).format(op=op, function=function), facts,
                         *((RECOMPUTED_FIXES, RECOMPUTED_WRONG) if checkpointed else (FLAGGED_LEAF_FIXES, [])))

    def _leaf_error(self, error):
        node = failing_node(error.__traceback__)
        if node is not None and self.journal.last_leaf_inplace is None:
            return self._recomputed_leaf(error, node)
        if self.journal.last_leaf_inplace is None:
            return Diagnosis("leaf_inplace", _("an in-place op on a leaf that requires grad"), {}, LEAF_FIXES,
                             LEAF_WRONG)
        w = self.journal.last_leaf_inplace
        namer = self.namer
        name = namer.name(w.leaf) if w.leaf in namer.params else namer.label(w.leaf)   # `model.w` before `p`
        facts = {"where": w.where}
        held = isinstance(w.leaf, torch.nn.Parameter) or w.leaf in namer.params or w.leaf.grad is not None \
            or any(p is w.leaf for opt in namer.known_optimizers() for group in opt.param_groups
                   for p in group["params"])
        trained = held or w.op.rstrip("_") not in _ACTIVATIONS      # a weight (updated by hand after a backward
        # filled its .grad), unless a forward's activation wrote into an input
        fixes = (LEAF_FIXES, LEAF_WRONG) if trained else (INPUT_LEAF_FIXES, INPUT_LEAF_WRONG)   # a weight's update,
        flagged = misuse.leaf_by_flag(self.journal, namer, w.leaf)          # or a forward's op on an input
        if flagged is not None:              # not a weight to update: an output made a leaf by requires_grad_(True)
            facts["a leaf because"] = flagged
            fixes = (FLAGGED_LEAF_FIXES, LEAF_WRONG)      # out of place first
        if w.carries_grad and held and w.from_itself:        # a weight scaled by values made from itself: a
            facts["made from"] = _("{name} itself (the values written were computed from it)").format(name=name)
            fixes = (SELF_WRITE_FIXES, SELF_WRITE_WRONG)          # constraint on it, or a clip meant for its .grad
        elif w.carries_grad:                 # the values written require grad: no_grad would lose their gradient
            fixes = (GRAD_WRITE_FIXES, GRAD_WRITE_WRONG)
        return Diagnosis("leaf_inplace", (_("{op} on a view of {name}, a leaf that requires grad, while autograd is "
                                            "recording") if w.view else
                                          _("{op} on {name}, a leaf that requires grad, while autograd is "
                                            "recording")).format(op=w.op, name=name), facts, *fixes)
