"""Every autograd error (and the one warning) the doctor diagnoses: one table, a Kind per error, with torch's
wordings of it across releases. The wording only tells which kind an error is; what the diagnosis says comes from
the doctor's records of what happened (the journal), never from the message. tests/doctor/test_catalogue.py
raises each kind on the torch installed and checks that its message is recognised as that kind and no other, and
that every wording stored here is recognised as its own kind only."""
import re
from dataclasses import dataclass

from gan_lessons.i18n import N_


@dataclass(frozen=True, slots=True)
class Wording:
    """One of torch's wordings of an error: `text` is the message's start as torch writes it, with `{}` where torch
    puts a name, shape or number; `versions` the releases that write it (read from each release's own files, and
    raised on the torch the tests run on). What torch fills in changes between releases (a node named
    SigmoidBackward0 to 2.12, Sigmoid from 2.13); the fixed words recognise the kind."""
    text: str
    versions: str

    def pattern(self) -> re.Pattern:
        """What recognises it: its longest part with nothing of torch's filled in, as it is written."""
        return re.compile(re.escape(max(self.text.split("{}"), key=len).strip()))

    def example(self) -> str:
        """The wording with each `{}` filled as torch could fill it."""
        return self.text.replace("{}", "0")


@dataclass(frozen=True, slots=True)
class Kind:
    """An error autograd raises: its key (Diagnosis.kind of its diagnosis), what it means in one line, and torch's
    wordings of it."""
    key: str
    meaning: str                 # in the doctor's words (marked for translation: N_)
    wordings: tuple


CATALOGUE = (
    Kind("view_inplace", N_("an in-place write into a view autograd cannot rebase (made under no_grad or inference "
                            "mode, by a custom Function or a full backward hook, or one of several views one op "
                            "returned)"), (
        Wording("Output {} of {} is a view and is being modified inplace. This view is the output of a function that "
                "returns multiple views.", "2.1-2.15 (the node as SplitBackward0 to 2.12, Split from 2.13)"),
        Wording("Output {} of {} is a view and its base or another view of its base has been modified inplace.",
                "2.1-2.15"),
        Wording("Output {} of {} is a view and is being modified inplace. This view was created inside a custom "
                "Function (or because an input was returned as-is)", "2.1-2.15 (FBackward to 2.12, F from 2.13)"),
        Wording("A view was created in no_grad mode and is being modified inplace with grad mode enabled.",
                "2.1-2.15"),
        Wording("A view was created in no_grad mode and its base or another view of its base has been modified "
                "inplace with grad mode enabled.", "2.1-2.15"),
        Wording("Output {} of {} is a view of a view which was created in no_grad mode and is being modified inplace "
                "with grad mode enabled.", "2.1-2.15"),
        Wording("A view was created in inference mode and is being modified inplace in normal mode.", "2.1-2.15"))),
    Kind("version", N_("a tensor a backward needs was changed in place after the forward saved it"), (
        Wording("one of the variables needed for gradient computation has been modified by an inplace operation: "
                "[{}], which is output {} of {}, is at version {}; expected version {} instead. Hint: enable anomaly "
                "detection to find the operation that failed to compute its gradient, with "
                "torch.autograd.set_detect_anomaly(True).", "2.1-2.10 (the node as SigmoidBackward0)"),
        Wording("one of the variables needed for gradient computation has been modified by an inplace operation: "
                "[{}] is at version {}; expected version {} instead. Hint: enable anomaly detection to find the "
                "operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True, "
                "check_nan=False).", "2.11-2.15 (with ', which is output N of Sigmoid,' from 2.13 where known)"),
        Wording("one of the variables needed for gradient computation has been modified by an inplace operation: "
                "[{}] is at version {}; expected version {} instead. Hint: the backtrace further above shows the "
                "operation that failed to compute its gradient.", "2.1-2.15, under anomaly mode"))),
    Kind("freed", N_("a backward through a graph whose saved tensors an earlier backward freed"), (
        Wording("Trying to backward through the graph a second time (or directly access saved tensors after they "
                "have already been freed).", "2.1-2.15"),)),
    Kind("leaf_inplace", N_("an in-place op on a leaf that requires grad (or a view of one) while autograd records"), (
        Wording("a leaf Variable that requires grad is being used in an in-place operation.", "2.1-2.15"),
        Wording("a view of a leaf Variable that requires grad is being used in an in-place operation.", "2.1-2.15"),
        Wording("a leaf Variable that requires grad has been used in an in-place operation.",
                "2.1-2.15 (ctx.mark_dirty on a leaf)"))),
    Kind("grad_input", N_("torch.autograd.grad asked for the gradient of an input that does not require grad"), (
        Wording("One of the differentiated Tensors does not require grad", "2.1-2.15"),)),
    Kind("unused_input", N_("torch.autograd.grad asked for the gradient of an input the outputs do not reach"), (
        Wording("One of the differentiated Tensors appears to not have been used in the graph. Set "
                "allow_unused=True if this is the desired behavior.", "2.1-2.12"),
        Wording("The differentiated Tensor at index {} appears to not have been used in the graph. Set "
                "allow_unused=True if this is the desired behavior.", "2.13-2.15"))),
    Kind("nonscalar", N_("a gradient of a non-scalar output asked for without grad_outputs"), (
        Wording("grad can be implicitly created only for scalar outputs", "2.1-2.15"),
        Wording("grad can be implicitly created only for real scalar outputs but got {}", "2.1-2.15"))),
    Kind("no_graph", N_("backward on a tensor with no graph"), (
        Wording("element {} of tensors does not require grad and does not have a grad_fn", "2.1-2.15"),)),
    Kind("inference_saved", N_("a tensor made under torch.inference_mode() used where autograd must save it"), (
        Wording("Inference tensors cannot be saved for backward. To work around you can make a clone to get a normal "
                "tensor and use it in autograd.", "2.1-2.8"),
        Wording("Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode "
                "in computation tracked by autograd.", "2.9-2.15"))),
    Kind("inference_inplace", N_("an in-place write into a tensor made under torch.inference_mode(), outside it"), (
        Wording("Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get "
                "a normal tensor before doing inplace update.", "2.1-2.15"),
        Wording("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.",
                "2.1-2.15"))),
    Kind("out_grad", N_("an out= call given tensors that require grad, which autograd cannot record"), (
        Wording("{}(): functions with out=... arguments don't support automatic differentiation, but one of the "
                "arguments requires grad.", "2.1-2.15"),)),
    Kind("nonleaf_flag", N_("requires_grad changed on a tensor an op computed (not a leaf)"), (
        Wording("you can only change requires_grad flags of leaf variables.", "2.1-2.15"),)),
    Kind("numpy_grad", N_("numpy() on a tensor that requires grad"), (
        Wording("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.",
                "2.1-2.15"),)),
    Kind("function_gradient", N_("a custom autograd.Function's backward returned gradients of the wrong shape or "
                                 "number"), (
        Wording("Function {} returned an invalid gradient at index {} - got {} but expected shape compatible with {}",
                "2.1-2.15"),
        Wording("function {} returned an incorrect number of gradients (expected {}, got {})", "2.1-2.15"))),
    Kind("hook_no_grad", N_("a gradient hook registered on a tensor that does not require grad"), (
        Wording("cannot register a hook on a tensor that doesn't require gradient", "2.1-2.15"),)),
    Kind("ddp_unused", N_("DistributedDataParallel found parameters that took no part in the last loss"), (
        Wording("Expected to have finished reduction in the prior iteration before starting a new one.",
                "2.1-2.15"),)),
)

# warnings torch gives where a diagnosis helps (shown where python shows them; the doctor adds its own reading)
WARNINGS = (
    Kind("checkpoint_no_grad", N_("torch.utils.checkpoint (reentrant) given inputs none of which requires grad: the "
         "checkpointed block's parameters get no gradient"), (
             Wording("None of the inputs have requires_grad=True. Gradients will be None", "2.1-2.15"),)),
)

_PATTERNS = [(kind, wording.pattern()) for kind in CATALOGUE for wording in kind.wordings]


def recognise(message: str):
    """The Kind of an error's message, or None for one the doctor does not diagnose. The first kind that matches
    wins (the view errors before the version error: both can speak of an in-place write)."""
    return next((kind for kind, pattern in _PATTERNS if pattern.search(message)), None)


def kind(key: str) -> Kind:
    return next(k for k in CATALOGUE + WARNINGS if k.key == key)
