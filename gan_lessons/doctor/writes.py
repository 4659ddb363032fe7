"""The writes a backward makes, seen at torch's dispatcher. The recorder's TorchFunctionMode sees every torch call
the block makes in Python, but not what runs inside a backward: autograd's engine calls each node's backward below
the Python API, and a custom autograd.Function's `backward` (a fused-kernel library's, a hand-written one) can write
in place into a tensor another node saved. A TorchDispatchMode sees every aten op, wherever it comes from; the
recorder enters this one for the length of each backward and autograd.grad call, and it records the writes only
(ops whose schema marks an argument as written), each with the line that made it. Outside a backward it is not
entered: the function mode already sees those calls, and a dispatch mode costs a Python call per aten op."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gan_lessons.doctor.frames import inside_backward_frame, outermost_user_frame
from gan_lessons.doctor.nodes import InplaceWrite
from gan_lessons.i18n import _


def written_arguments(func):
    """[(position, name)] of the arguments an aten op writes into (`self` of add_, `out` of an out= overload, every
    tensor of a foreach op's first list); [] for an op that writes nothing. From the op's schema, not its name."""
    return [(k, a.name) for k, a in enumerate(func._schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write]


class BackwardWrites(TorchDispatchMode):
    """Records into the journal each in-place write an aten op makes while a backward runs."""

    def __init__(self, journal):
        super().__init__()
        self.journal = journal
        self.schemas = {}                  # op: its written arguments, read once per op

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        written = self.schemas.get(func)
        if written is None:
            written = self.schemas[func] = written_arguments(func)
        if written:
            try:
                self.record(func, written, args, kwargs)
            except Exception as error:    # bookkeeping must never break the student's backward
                self.journal.note(_("doctor bookkeeping failed inside a backward at {op}: {error}").format(
                    op=func.__name__, error=repr(error)))
        return out

    def record(self, func, written, args, kwargs):
        journal = self.journal
        where = None
        for position, name in written:
            value = args[position] if position < len(args) else kwargs.get(name)
            for t in value if isinstance(value, (list, tuple)) else [value]:
                if not isinstance(t, torch.Tensor) or t.is_inference() or _fake(t):
                    continue
                where = where or inside_backward_frame()
                if where is None:           # autograd's own writes (a gradient accumulated into .grad): not code
                    return                  # anyone wrote
                journal.inplace.append(InplaceWrite(
                    t.untyped_storage().data_ptr(), _("{op} in {function}, run by the backward").format(
                        op=func.__name__.split(".")[0], function=where[1]),
                    where[0], t._version + 1, tuple(t.shape), journal.serial,
                    outer=outermost_user_frame(journal.entry)))   # the dispatcher runs below the
                    # ADInplaceOrView kernel, which moves the version counter once the op returns


def _fake(t) -> bool:
    """A tensor with no data (torch.compile's FakeTensor, a meta tensor): nothing was written."""
    return t.device.type == "meta" or type(t).__name__ in ("FakeTensor", "FunctionalTensor")
