"""The doctor's records, each a small dataclass: what it knows of each autograd node it saw made (kept in the node's
own metadata), the last in-place write on a leaf, each backward call, optimizer step and in-place write it saw, and
each D step whose backward ran on into another net."""
import itertools
import weakref
from dataclasses import dataclass, field

import torch

from gan_lessons.doctor.frames import shown_path
from gan_lessons.doctor.report import Where
from gan_lessons.i18n import _

SERIAL = itertools.count(1)          # one counter for every doctor: a node's serial is never reused


@dataclass(slots=True)
class NodeInfo:
    """What the doctor knows of one autograd node it saw made."""
    op: str                      # the torch function that made it ("mul", "linear"; "compiled forward")
    module: torch.nn.Module | None  # the module running then (the outermost one the student called), or None
    where: Where | None          # the student's line that made it (for ops inside a module, its call)
    serial: int                  # the order nodes were made in, across every doctor
    inside: Where | None = None  # for an op inside a module: the student's line in that module's code, if any
    training: bool | None = None  # that module's .training then (False: after model.eval()); None outside modules

    def place(self) -> str:
        """Where it was made, as a diagnosis says it: the line inside the module's code, called from the line
        that called the module (or that line alone)."""
        if self.inside is None or self.where is None:
            return str(self.where)
        inside = self.inside if self.inside.file == self.where.file else _("{file}, {where}").format(
            file=shown_path(self.inside.file), where=self.inside)
        return _("{inside}, called from {where}").format(inside=inside, where=self.where)


@dataclass(slots=True)
class LeafWrite:
    """The last in-place op on a leaf that requires grad (or on a view of one), seen while autograd records."""
    leaf: torch.Tensor           # the leaf tensor
    op: str                      # "sub_", "index_copy_"
    where: Where | None          # the student's line
    view: bool                   # written through a view of the leaf
    carries_grad: bool           # the values written require grad: their gradient must pass through the write
    from_itself: bool = False    # those values were computed from the leaf itself (p.mul_(max_norm / p.norm()))


@dataclass(slots=True, eq=False)
class BackwardCall:
    """A backward (or autograd.grad) the doctor saw start. Weak roots and node serials only: a record must not keep
    a retained or unused graph alive."""
    roots: list                  # weak references to the tensors it ran from
    root_ids: set                # their ids
    where: Where | None          # the student's line
    retain: bool                 # retain_graph (or create_graph) was set
    nodes: set                   # the serials of the graph's nodes the doctor saw made
    depth: dict                  # every leaf it reached: how many nodes from the roots (backward(inputs=...): those)
    modes: set                   # the .training of the modules with parameters that made its nodes
    fresh: set                   # the leaves whose .grad was empty (None, or zeroed) before it
    used_by: set = field(default_factory=set)   # ids of the optimizers that stepped on its gradients since
    behind: dict = field(default_factory=dict)  # id(parameter): ids of the leaves reached through the nodes that
                                                # take it (recording._behind); empty when one module made the graph
    fills_grad: bool = True      # backward() fills .grad; torch.autograd.grad returns the gradients instead


@dataclass(slots=True, eq=False)
class Step:
    """An optimizer step the doctor saw end."""
    optimizer: torch.optim.Optimizer
    where: Where | None          # the student's line
    params: list                 # the parameters it holds
    versions: list               # their versions after it
    serial: int                  # the last node serial before it
    after: BackwardCall | None = None   # the latest backward before it


@dataclass(slots=True, eq=False)
class InplaceWrite:
    """An in-place write the doctor saw (x.add_(...), an out= call, or a write a call made into a tensor it was
    given)."""
    ptr: int                     # the written tensor's storage
    op: str                      # how a diagnosis shows the op
    where: Where | None          # the student's line
    version: int                 # the tensor's version after it
    shape: tuple
    serial: int                  # the last node serial before it
    module: torch.nn.Module | None = None  # the module running then, if any
    made: NodeInfo | None = None  # the NodeInfo of what the tensor held before (an in-place op's input), if known
    outer: Where | None = None   # the student's outermost line then, when `where` is in another file
    method: tuple | None = None  # (name, caller) when written in an optimizer's own method (frames.optimizer_method)


@dataclass(slots=True, eq=False)
class DetachedForward:
    """A net's forward on another net's output detached (D(fake.detach())): the nodes it made are the serials in
    (start, end]. A term through it gives the other net no gradient, only this one."""
    net: weakref.ref             # the net that ran (D)
    source: weakref.ref          # the net whose output was detached (G)
    detached: Where | None       # the line of the detach
    where: Where | None          # the line of the forward
    start: int                   # the last node serial before it
    params: set                  # the ids of the parameters the detached output was computed from
    end: int | None = None       # the last node serial it made, once it returned


@dataclass(slots=True, eq=False)
class ForeignStep:
    """A D step on gradients whose backward ran on into another net: judged at that net's step (checks.py)."""
    backward: BackwardCall
    step: str                    # the optimizer's name
    where: Where | None          # the line of that step
    nets: list                   # the other nets the backward reached
    params: set                  # their parameters it reached


class Nodes:
    """What the doctor knows of each autograd node it saw made (NodeInfo), kept in the node's own `metadata` dict.
    The doctor holds no node, so every graph is freed exactly when it would be without it."""
    KEY = "gan_lessons.doctor"

    def get(self, fn, default=None):
        return default if fn is None else fn.metadata.get(self.KEY, default)

    def __contains__(self, fn):
        return self.KEY in fn.metadata

    def __setitem__(self, fn, info):
        fn.metadata[self.KEY] = info


@dataclass(slots=True, eq=False)
class Made:
    """How a tensor came to be as it is: made under inference_mode, made from Python values (torch.tensor), or made
    to require grad by requires_grad_; where (the student's line, and the function it ran in), and the call site of
    that function."""
    tensor: weakref.ref          # a weak reference to the tensor
    where: Where | None
    function: str                # the function that line is in ("<module>" at a script's top level)
    caller: Where | None = None  # the line that called that function, if it is the student's


@dataclass(slots=True, eq=False)
class CallRecord:
    """The torch call that raised: its name, the tensors it was given (weak references: a call that raised must not
    keep its arguments alive), and the student's line."""
    name: str
    given: list
    where: Where | None
    storages: list = field(default_factory=list)   # the storage of each tensor given (it outlives a temporary)

    @property
    def tensors(self) -> list:
        return [t for ref in self.given if (t := ref()) is not None]
