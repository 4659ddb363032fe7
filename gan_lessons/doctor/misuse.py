"""The catalogue's other errors, diagnosed (catalogue.py lists them all): each a small function from the diagnoser's
records to a Diagnosis, or None where the records do not tell. What each names comes from what the doctor saw:
the call that raised and the tensors it was given, where a tensor was made under inference_mode, given a new storage
by set_ or made to require grad, and the graph itself (which inputs the outputs reach)."""
import torch
from torch.autograd.function import BackwardCFunction

from gan_lessons import graphs
from gan_lessons.doctor.report import Diagnosis
from gan_lessons.i18n import N_, _

# the fixes: (fix, the lesson that teaches it or None)
INFERENCE_FIXES = [(N_("make it under torch.no_grad() instead of torch.inference_mode(): no_grad tensors are normal "
                        "tensors that autograd can save later"), "04"),
                    (N_("or use a copy made outside inference mode: w = w.clone() (after the inference_mode block), "
                        "and train or differentiate through the copy"), "04")]
INFERENCE_WRONG = [(N_("w.detach() or w.requires_grad_(): a detached inference tensor is still an inference tensor, "
                        "and torch refuses to set requires_grad on one outside inference mode"), None)]
INFERENCE_WRITE_FIXES = [(N_("write into a copy made outside inference mode (w = w.clone(), then w.add_(...)), or "
                              "make the tensor under torch.no_grad() instead of torch.inference_mode()"), "04")]
SET_FIXES = [(N_("replace the values, not the storage: with torch.no_grad(): x.copy_(new) keeps x's gradient "
                  "accumulator, so the graph made before still counts as using x"), "03"),
              (N_("or differentiate after the replacement: rebuild the graph from x once set_ has run"), None)]
SET_WRONG = [(N_("allow_unused=True: the error goes, and the gradient for x comes back None, although the graph "
                  "did use x's old values"), None)]
UNUSED_FIXES = [(N_("compute the outputs from that tensor itself, not from a copy of it (detach(), .data, clone() "
                     "of a detached tensor, a tensor made with torch.tensor(...))"), "04"),
                 (N_("or, where some inputs may rightly not take part, pass allow_unused=True (and "
                     "materialize_grads=True for zeros instead of None)"), None)]
OUT_FIXES = [(N_("write out of place and rebind the name (h = h * 2, not torch.mul(h, 2, out=h)): autograd records "
                  "the new tensor"), "03"),
              (N_("or, where no gradient should flow through it, make the call under torch.no_grad()"), "04")]
PARAMETER_OUT_FIXES = [(N_("copy the values into the parameter under torch.no_grad() (p.copy_(values)), as nn.init "
                            "does: the write is then part of no graph, and the parameter stays the leaf its optimizer "
                            "holds (rebound to a computed tensor, it would no longer be a parameter)"), "01")]
FACTORY_OUT_WRONG = [(N_("the same out= call under torch.no_grad(): a factory such as torch.arange or torch.linspace, "
                         "given out=, then leaves the parameter's requires_grad False, so it stops training and "
                         "nothing tells you"), None)]
FACTORIES = ("arange", "linspace", "logspace", "range")
FLAG_FIXES = [(N_("x.detach(): a new tensor, without a graph, for the part that must not train what made x (in a "
                   "GAN: D(fake.detach()) in D's loss)"), "04")]
FLAG_WRONG = [(N_("x.requires_grad = False inside torch.no_grad(): the flag of a computed tensor cannot be changed "
                   "there either; only detach() makes a tensor without the graph"), None)]
NUMPY_FIXES = [(N_("x.detach().cpu().numpy(): a copy of the values, without the graph (the order: detach, then to "
                    "the CPU)"), "04"),
                (N_("or call numpy() under torch.no_grad(), where torch hands out the values of a tensor that "
                    "requires grad"), "04")]
FUNCTION_FIXES = [(N_("make backward return one gradient per input of forward, each of that input's shape "
                       "(None for an input that needs none, as a flag or a size)"), None)]
HOOK_FIXES = [(N_("register the hook on a tensor that requires grad: the module's output or a parameter, not a "
                   "detached copy or a tensor made under torch.no_grad()"), "04")]
DDP_FIXES = [(N_("make every parameter of the wrapped module take part in each loss, or freeze the ones that do "
                  "not (requires_grad=False) before wrapping it in DistributedDataParallel"), "14"),
              (N_("or DistributedDataParallel(..., find_unused_parameters=True): it looks for them at every backward "
                  "(slower)"), "14")]


def _label(namer, tensor):
    return namer.label(tensor) if tensor is not None else _("a tensor")


def _made(record):
    """Where a Made record says it happened: the line, and the function that line is in with its call site."""
    if record.function in ("<module>", "?") or record.caller is None:
        return str(record.where)
    return _("{where}, in {function}, called from {caller}").format(where=record.where, function=record.function,
                                                                   caller=record.caller)


def _failed_call(diagnoser, error, line_key, pick=None):
    """What the diagnoses of an error raised by one call start from: the tensor that call was given (the first one
    `pick` accepts), its label, the call's name, and the facts: the tensor, and the call's line under `line_key`."""
    failed = diagnoser.journal.failed
    culprit = next((t for t in (failed.tensors if failed else []) if pick is None or pick(t)), None)
    label = _label(diagnoser.namer, culprit)
    facts = {"tensor": f"{label} {list(culprit.shape)}" if culprit is not None else "?",
             line_key: str(failed.where if failed else diagnoser.failing_call(error)[0])}
    return culprit, label, failed.name if failed else "an op", facts


def _inference_made(diagnoser, culprit):
    journal = diagnoser.journal
    made = journal.made_of(journal.inference_made, culprit) if culprit is not None else None
    return _made(made) if made else _("under torch.inference_mode(), before the doctor began watching")


def inference_saved(diagnoser, error):
    """An inference tensor among the arguments of the op that raised: where inference mode made it."""
    culprit, label, op, facts = _failed_call(diagnoser, error, "used", pick=torch.Tensor.is_inference)
    facts = {"tensor": facts["tensor"], "made": _inference_made(diagnoser, culprit), "used": facts["used"]}
    return Diagnosis("inference_saved", _("{label} was made under torch.inference_mode(), and {op} needs to save it "
                                          "for a backward, which autograd refuses for an inference tensor").format(
                                              label=label, op=op), facts, INFERENCE_FIXES, INFERENCE_WRONG)


def inference_inplace(diagnoser, error):
    culprit, label, op, facts = _failed_call(diagnoser, error, "changed", pick=torch.Tensor.is_inference)
    facts = {"tensor": facts["tensor"], "made": _inference_made(diagnoser, culprit), "changed": facts["changed"]}
    return Diagnosis("inference_inplace", _("{label} was made under torch.inference_mode(), and {op} changes it "
                                            "outside inference mode, which torch refuses").format(label=label, op=op),
                     facts, INFERENCE_WRITE_FIXES)


def unused_input(diagnoser, error):
    """The inputs of torch.autograd.grad the outputs' graph does not reach, read from the graph; for a leaf the graph
    holds an accumulator of, but not the one it has now, set_ replaced its storage (and that accumulator) since."""
    namer = diagnoser.namer
    where, frame = diagnoser.failing_call(error)
    if frame is None:
        return None
    inputs = [t for t in frame.f_locals["t_inputs"] if isinstance(t, torch.Tensor)]
    outputs = [t for t in frame.f_locals.get("t_outputs", ()) if isinstance(t, torch.Tensor)]
    reached = set(graphs.walk(outputs))
    accumulated = {id(fn.variable) for fn in reached if hasattr(fn, "variable")}
    def used(t):
        if t.grad_fn is not None:
            return t.grad_fn in reached
        node = _accumulator(t)
        return node in reached if node is not None else id(t) in accumulated    # (a torch without get_gradient_edge)
    unused = [t for t in inputs if not used(t)]
    if not unused:
        return None
    culprit = unused[0]
    label = _label(namer, culprit)
    facts = {"input": f"{label} {list(culprit.shape)}", "call": str(where)}
    if id(culprit) in accumulated:     # the graph holds an accumulator of this very tensor, no longer its own
        facts["graph"] = _("reaches {label}'s former gradient accumulator, not the one {label} has now").format(
            label=label)
        return Diagnosis("unused_input", _("{label}'s gradient accumulator was replaced after the graph used it "
                                           "(set_() replaces it when it gives a tensor a new storage), so the graph's "
                                           "use of the old one no longer counts as {label}").format(label=label),
                         facts, SET_FIXES, SET_WRONG)
    return Diagnosis("unused_input", _("the outputs do not reach {label}: autograd recorded no use of it on the way "
                                       "to them").format(label=label), facts, UNUSED_FIXES)


def _accumulator(t):
    """The node a leaf's gradient goes into now (its gradient accumulator), or None."""
    try:
        return torch.autograd.graph.get_gradient_edge(t).node
    except AttributeError:           # a torch before 2.2: the node a view of it feeds
        with torch.enable_grad():
            return t.view_as(t).grad_fn.next_functions[0][0] if t.requires_grad else None
    except RuntimeError:
        return None


def out_grad(diagnoser, error):
    """The out= call that raised: its output tensor and the arguments that require grad."""
    journal, namer = diagnoser.journal, diagnoser.namer
    failed = journal.failed
    given = failed.tensors if failed else []
    grad = list({id(t): t for t in given if t.requires_grad}.values())
    out = given[-1] if given else None      # the out= tensor comes last among the call's keyword arguments
    facts = {"call": str(failed.where if failed else diagnoser.failing_call(error)[0]),
             "requires grad": ", ".join(f"{_label(namer, t)} {list(t.shape)}" for t in grad[:3]) or "?"}
    return Diagnosis("out_grad", _("{op}(..., out={label}) was given tensors that require grad: autograd records no "
                                   "graph for an out= call").format(op=failed.name if failed else "an op",
                                                                    label=_label(namer, out)), facts,
                     *((PARAMETER_OUT_FIXES, FACTORY_OUT_WRONG if failed and failed.name in FACTORIES else [])
                       if isinstance(out, torch.nn.Parameter) else (OUT_FIXES, [])))


def nonleaf_flag(diagnoser, error):
    culprit, label, _op, facts = _failed_call(diagnoser, error, "where")
    info = diagnoser.journal.nodes.get(culprit.grad_fn) if culprit is not None else None
    if info is not None:
        facts["made by"] = _("{op} at {where}").format(op=info.op, where=info.place())
    return Diagnosis("nonleaf_flag", _("{label} was computed by an op (it has a grad_fn), and requires_grad can be "
                                       "changed only on a leaf").format(label=label), facts, FLAG_FIXES, FLAG_WRONG)


def numpy_grad(diagnoser, error):
    _culprit, label, _op, facts = _failed_call(diagnoser, error, "where")
    return Diagnosis("numpy_grad", _("numpy() on {label}, which requires grad: numpy shares its memory and cannot "
                                     "keep the graph").format(label=label), facts, NUMPY_FIXES)


def function_gradient(diagnoser, error):
    """The custom Function whose backward returned the wrong gradients: the node autograd names, found among the
    nodes the doctor saw made, with where its forward ran."""
    journal = diagnoser.journal
    custom = [fn for fn in graphs.walk(diagnoser.roots_of(error)) if isinstance(fn, BackwardCFunction)
              and (info := journal.nodes.get(fn)) is not None and info.op.endswith(".apply")]
    # several custom Functions in the graph: the one whose node torch names
    fn = custom[0] if len(custom) == 1 else next((fn for fn in custom if type(fn).__name__ in str(error)), None)
    info = journal.nodes.get(fn)
    facts = {"backward": str(diagnoser.failing_call(error)[0])}
    if info is not None:
        facts["function"] = _("{function}, applied at {where}").format(function=info.op.removesuffix(".apply"),
                                                                      where=info.place())
    return Diagnosis("function_gradient", _("a custom autograd.Function's backward returned gradients that do not "
                                            "match its forward's inputs (in number or shape)"), facts,
                     FUNCTION_FIXES)


def hook_no_grad(diagnoser, error):
    _culprit, label, _op, facts = _failed_call(diagnoser, error, "where")
    return Diagnosis("hook_no_grad", _("a gradient hook on {label}, which does not require grad: no gradient will "
                                       "ever reach it").format(label=label), facts, HOOK_FIXES)


def ddp_unused(diagnoser, error):
    """The parameters of the DistributedDataParallel module that the last backward did not reach."""
    from torch.nn.parallel import DistributedDataParallel
    journal, namer = diagnoser.journal, diagnoser.namer
    wrappers = [m for m in namer.names().modules if isinstance(m, DistributedDataParallel)]
    reached = set()
    for b in journal.backwards:
        reached |= {id(p) for p in b.depth}
    missing = [namer.name(p) for m in wrappers for p in m.module.parameters()
               if p.requires_grad and id(p) not in reached] if journal.backwards else []
    facts = {"forward": str(diagnoser.failing_call(error)[0])}
    if missing:
        facts["parameters"] = ", ".join(missing[:6]) + (" ..." if len(missing) > 6 else "")
    return Diagnosis("ddp_unused", (_("{count} parameters of the module DistributedDataParallel wraps took no part "
                                      "in its last backward, and it waits for their gradients before the next "
                                      "forward") if missing else
                                    _("parameters of the module DistributedDataParallel wraps took no part in its "
                                      "last backward, and it waits for their gradients before the next forward")
                                    ).format(count=len(missing)), facts, DDP_FIXES)


def leaf_by_flag(journal, namer, leaf):
    """Why a leaf is one, for a leaf a requires_grad_(True) call made out of a module's output
    with no graph (a frozen embedding's output, flagged by a forward hook as transformers'
    enable_input_require_grads() does), or None for any other leaf (a parameter, a tensor made to be trained)."""
    flagged = journal.made_of(journal.flagged_at, leaf)
    ref, module = journal.no_graph_outputs.get(id(leaf), (lambda: None, None))
    if flagged is None or ref() is not leaf:
        return None
    return _("it is the output of {module}, which has no graph (nothing in it requires grad), and "
             "requires_grad_(True) at {where} made it a leaf").format(module=namer.module_name(module),
                                                                      where=_made(flagged))
