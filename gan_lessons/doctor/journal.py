"""The doctor's journal: everything it has seen in the block, in one place. The doctor owns it and hands it to its
parts: the recorder writes it, the namer, the checks and the diagnoses read it (and the checks add their
warnings). Each record in it is a small dataclass (nodes.py); the rest are plain sets and dicts keyed by id."""
import weakref
from collections import deque
from dataclasses import dataclass, field

from gan_lessons.doctor.nodes import _Nodes


def _bounded(n):
    return field(default_factory=lambda: deque(maxlen=n))


@dataclass(eq=False)
class Journal:
    """What the doctor knows. Bounded: a long training loop under the doctor must not keep every old graph alive."""
    nodes: _Nodes = field(default_factory=_Nodes)        # a NodeInfo per autograd node seen made (in its metadata)
    inplace: deque = _bounded(1000)                      # InplaceWrite
    backwards: deque = _bounded(50)                      # BackwardCall
    steps: deque = _bounded(50)                          # Step
    foreign: list = field(default_factory=list)         # ForeignStep: judged at the other net's step (checks.py)
    last_leaf_inplace: object = None                     # LeafWrite
    serial: int = 0                                      # the serial of the last node recorded
    first_seq: int = 0           # autograd's own number for the first node this thread made once the block began:
                                 # a node numbered below it was made before (not adopted by the op that reaches it)
    stack: list = field(default_factory=list)           # the modules whose forward is running, outermost first
    sites: list = field(default_factory=list)           # the student's line that called each of them
    modes: set = field(default_factory=set)             # .training of the modules that made the last graph walked
    seen_modules: weakref.WeakSet = field(default_factory=weakref.WeakSet)
    seen_optimizers: weakref.WeakSet = field(default_factory=weakref.WeakSet)
    # `.data` of tracked tensors (id: (weak alias, the tensor)); `.data` changes not yet judged; zeroed .grad versions
    data_aliases: dict = field(default_factory=dict)
    pending_data: dict = field(default_factory=dict)
    zeroed: dict = field(default_factory=dict)
    # gradients from autograd.grad without create_graph, and what is computed from them: constants (checks.py)
    constants: dict = field(default_factory=dict)
    mixed: dict = field(default_factory=dict)
    pending_grad: object = None
    frozen_at: dict = field(default_factory=dict)        # id(parameter): the line that set requires_grad=False
    # (weak module, line, its caller's line) of trainable modules run with gradients off; ids of those running now
    no_grad_forwards: deque = _bounded(20)
    off: set = field(default_factory=set)
    # inside an optimizer's step() (without a closure) its ops are not recorded: the recorder is off torch's mode
    # stack (paused), or skips them (in_step)
    paused: bool = False
    in_step: bool = False
    versions_before: list = field(default_factory=list)  # (tensor, version) of the call being recorded's arguments
    # the torch call that raised last (a CallRecord, which holds its tensors weakly); where tensors were made under
    # inference_mode or made to require grad by requires_grad_ (id: a Made, with a weak reference to the tensor)
    failed: object = None
    entry: object = None                                 # the frame that entered the doctor (while the block runs)
    inference_made: dict = field(default_factory=dict)
    flagged_at: dict = field(default_factory=dict)
    from_values: dict = field(default_factory=dict)      # tensors made from Python values (torch.tensor(x.item()))
    no_graph_outputs: dict = field(default_factory=dict)   # id: (weak output, module) of module outputs with no graph
    # what the doctor says: its diagnoses (warnings and information lines too), the (kind, file, line) it already
    # said something of, and notes on its own bookkeeping
    diagnoses: list = field(default_factory=list)
    warned: set = field(default_factory=set)
    notes: list = field(default_factory=list)

    def note(self, text):
        self.notes.append(text)

    def release(self):
        """Once the block is over: let go of every record that holds the student's tensors, modules or optimizers
        (what the doctor said stays), so that nothing lives longer than it would without the doctor."""
        for records in (self.inplace, self.backwards, self.steps, self.foreign, self.stack, self.sites,
                        self.no_grad_forwards, self.versions_before):
            records.clear()
        for table in (self.data_aliases, self.pending_data, self.zeroed, self.constants, self.mixed,
                      self.frozen_at, self.inference_made, self.flagged_at, self.no_graph_outputs,
                      self.from_values):
            table.clear()
        self.last_leaf_inplace = self.pending_grad = self.failed = self.entry = None

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
