"""What the doctor knows of each autograd node it saw made: a small record kept in the node's own metadata."""
import itertools
from dataclasses import dataclass

_SERIAL = itertools.count(1)          # one counter for every doctor: a node's serial is never reused


@dataclass(slots=True)
class NodeInfo:
    """What the doctor knows of one autograd node it saw made."""
    op: str                      # the torch function that made it ("mul", "linear"; "compiled forward")
    module: object               # the module running then (the outermost one the student called), or None
    where: object                # the student's line that made it (a Where; for ops inside a module, its call)
    serial: int                  # the order nodes were made in, across every doctor
    inside: object = None        # for an op inside a module: the student's line in that module's code, if any


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
