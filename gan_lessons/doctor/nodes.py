"""What the doctor knows of each autograd node it saw made: a small record kept in the node's own metadata."""
import itertools
from dataclasses import dataclass

from gan_lessons.doctor.frames import _shown
from gan_lessons.i18n import _

_SERIAL = itertools.count(1)          # one counter for every doctor: a node's serial is never reused


@dataclass(slots=True)
class NodeInfo:
    """What the doctor knows of one autograd node it saw made."""
    op: str                      # the torch function that made it ("mul", "linear"; "compiled forward")
    module: object               # the module running then (the outermost one the student called), or None
    where: object                # the student's line that made it (a Where; for ops inside a module, its call)
    serial: int                  # the order nodes were made in, across every doctor
    inside: object = None        # for an op inside a module: the student's line in that module's code, if any
    training: object = None      # that module's .training then (False: after model.eval()); None outside modules

    def place(self) -> str:
        """Where it was made, as a diagnosis says it: the line inside the module's code, called from the line
        that called the module (or that line alone)."""
        if self.inside is None or self.where is None:
            return str(self.where)
        inside = self.inside if self.inside.file == self.where.file else _("{file}, {where}").format(
            file=_shown(self.inside.file), where=self.inside)
        return _("{inside}, called from {where}").format(inside=inside, where=self.where)


@dataclass(slots=True)
class LeafWrite:
    """The last in-place op on a leaf that requires grad (or on a view of one), seen while autograd records."""
    leaf: object                 # the leaf tensor
    op: str                      # "sub_", "index_copy_"
    where: object                # the student's line (a Where)
    view: bool                   # written through a view of the leaf
    carries_grad: bool           # the values written require grad: their gradient must pass through the write


class _Nodes:
    """What the doctor knows of each autograd node it saw made (NodeInfo), kept in the node's own `metadata` dict.
    The doctor holds no node, so every graph is freed exactly when it would be without it."""
    KEY = "gan_lessons.doctor"

    def get(self, fn, default=None):
        return default if fn is None else fn.metadata.get(self.KEY, default)

    def __contains__(self, fn):
        return self.KEY in fn.metadata

    def __setitem__(self, fn, info):
        fn.metadata[self.KEY] = info
