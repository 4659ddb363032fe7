"""The doctor's journal: the history of what it has seen in the block, in one place. The doctor owns it and hands
it to its parts: the recorder writes it, the namer, the checks and the diagnoses read it (and the checks add their
warnings). How the recorder is recording, and what the checks wait to judge, are their own. Each record in it is a small dataclass (nodes.py); the rest are plain sets and dicts keyed by id."""
import types
import weakref
from collections import deque
from dataclasses import dataclass, field

from gan_lessons.doctor.nodes import CallRecord, LeafWrite, Nodes


def _bounded(n):
    return field(default_factory=lambda: deque(maxlen=n))


@dataclass(eq=False)
class Journal:
    """What the doctor knows. Bounded: a long training loop under the doctor must not keep every old graph alive."""
    nodes: Nodes = field(default_factory=Nodes)        # a NodeInfo per autograd node seen made (in its metadata)
    inplace: deque = _bounded(1000)                      # InplaceWrite
    backwards: deque = _bounded(50)                      # BackwardCall
    steps: deque = _bounded(50)                          # Step
    last_leaf_inplace: LeafWrite | None = None
    serial: int = 0                                      # the serial of the last node recorded
    first_seq: int = 0           # autograd's own number for the first node this thread made once the block began:
                                 # a node numbered below it was made before (not adopted by the op that reaches it)
    seen_modules: weakref.WeakSet = field(default_factory=weakref.WeakSet)
    seen_optimizers: weakref.WeakSet = field(default_factory=weakref.WeakSet)
    grads_read: dict = field(default_factory=dict)   # id: weak leaf, for each leaf whose .grad the code read
    grads_assigned: dict = field(default_factory=dict)   # id: (weak leaf, the last backward before `p.grad = g`,
                                                         # id(g))
    # (weak module, line, its caller's line) of trainable modules run with gradients off
    no_grad_forwards: deque = _bounded(20)
    # the torch call that raised last (a CallRecord, which holds its tensors weakly); where tensors were made under
    # inference_mode or made to require grad by requires_grad_ (id: a Made, with a weak reference to the tensor)
    failed: CallRecord | None = None
    entry: types.FrameType | None = None                 # the frame that entered the doctor (while the block runs)
    threads_at_entry: frozenset = frozenset()            # the idents of the threads alive when the block began
    inference_made: dict = field(default_factory=dict)
    flagged_at: dict = field(default_factory=dict)
    from_values: dict = field(default_factory=dict)      # tensors made from Python values (torch.tensor(x.item()))
    no_graph_outputs: dict = field(default_factory=dict)   # id: (weak output, module) of module outputs with no graph
    net_outputs: dict = field(default_factory=dict)   # id: (weak output, weak module) of the student's calls of nets
    # what the doctor says: its diagnoses (warnings and information lines too), and notes on its own bookkeeping
    diagnoses: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def note(self, text):
        self.notes.append(text)

    def release(self):
        """Once the block is over: let go of every record that holds the student's tensors, modules or optimizers
        (what the doctor said stays), so that nothing lives longer than it would without the doctor."""
        for records in (self.inplace, self.backwards, self.steps, self.no_grad_forwards):
            records.clear()
        for table in (self.inference_made, self.flagged_at, self.no_graph_outputs, self.net_outputs, self.from_values, self.grads_read,
                      self.grads_assigned):
            table.clear()
        self.last_leaf_inplace = self.failed = self.entry = None

    def made(self, table, tensor, record, limit=1000):
        """Keep `record` (a Made) for `tensor` in one of the tables keyed by id, bounded."""
        if len(table) >= limit:
            for key in [k for k, v in table.items() if v.tensor() is None] or list(table)[:limit // 2]:
                del table[key]
        table[id(tensor)] = record

    def made_of(self, table, tensor):
        """The record a table keeps for this very tensor (not one that died and left its id to it), or None."""
        record = table.get(id(tensor))
        return record if record is not None and record.tensor() is tensor else None
