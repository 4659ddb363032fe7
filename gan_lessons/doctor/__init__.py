"""The autograd doctor (lesson 07): watch a block of training code and, when one of the lessons' errors escapes
it, say in plain words which tensor, which forward line saved it, and which line or optimizer step changed or
freed it, with the fixes and the lesson that teaches them.

    with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
        ...training code...

It records with public mechanisms only: a TorchFunctionMode (forward ops, in-place ops, backward calls, `.grad`
and `.data` access), global module hooks (which module is running) and the global optimizer step hooks. The
original exception is re-raised unchanged, with `.diagnosis` attached (printed too). The doctor never changes a
result, never swallows an exception, and if its own bookkeeping fails it adds a one-line note instead.

The package, one module per part: recording.py (what is watched; ops.py reads what one torch call does), nodes.py
(the records, small dataclasses: each node, backward call, step and in-place write seen), naming.py
(names, resolved when needed), checks.py (warnings about silent bugs), errors.py (the three errors, diagnosed; the
version error in versions.py, the view errors in views.py), report.py (what a diagnosis says, right and wrong fixes), frames.py (the student's
frames and warnings), extension.py (`%load_ext gan_lessons`), script.py (`python -m gan_lessons doctor SCRIPT`: a
whole script under the doctor)."""
import sys
import weakref
from collections import deque

from torch.nn.modules import module as nn_module
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from gan_lessons.doctor.checks import Checks
from gan_lessons.doctor.errors import Diagnoses
from gan_lessons.doctor.extension import active, load_ipython_extension, unload_ipython_extension
from gan_lessons.doctor.frames import _WarningsAsPython, _clean
from gan_lessons.doctor.naming import Naming
from gan_lessons.doctor.nodes import _Nodes
from gan_lessons.doctor.recording import Recording, _Recorder
from gan_lessons.doctor.report import LESSONS, Diagnosis, DoctorWarning, Where
from gan_lessons.i18n import _

__all__ = ["doctor", "Diagnosis", "DoctorWarning", "Where", "LESSONS", "active", "load_ipython_extension",
           "unload_ipython_extension"]


class doctor(Recording, Naming, Checks, Diagnoses):
    """Context manager. Name what you train, or let the doctor find the names: doctor(G=G, D=D, opt_G=..., opt_D=...)
    or doctor()."""

    def __init__(self, *unnamed, namespaces=None, **named):
        for k, obj in enumerate(unnamed):
            named[f"{type(obj).__name__}{k}"] = obj
        self.named = named
        # where else names come from, read when a name is needed: a callable giving the live namespaces (the
        # extension passes the notebook's); by default the frame that entered the doctor
        self.namespaces, self.frame = namespaces, None
        self.seen_modules, self.seen_optimizers = weakref.WeakSet(), weakref.WeakSet()
        self.optimizer_objects = weakref.WeakValueDictionary()   # id: every optimizer names() found (naming.py)
        self._names, self._names_key, self.error_spaces = None, None, []
        self.nodes = _Nodes()
        # bounded: a long training loop under the doctor must not keep every old graph alive
        self.inplace, self.backwards, self.steps = deque(maxlen=1000), deque(maxlen=50), deque(maxlen=50)
        self.stack, self.sites = [], []
        self.notes, self.diagnoses, self.last_leaf_inplace = [], [], None
        self.warned = set()   # (what, file, line): a line in a loop warns once, not once per pass or parameter
        self.data_aliases = {}
        self.serial, self.pending_data, self.zeroed = 0, {}, {}   # nodes recorded so far; `.data` changes not yet judged
        # gradients from autograd.grad without create_graph, and what is computed from them: constants (checks.py)
        self.constants, self.mixed, self.pending_grad = {}, {}, None
        self.frozen_at = {}   # id(parameter): the line that set its requires_grad to False (checks.py)
        self.foreign = []     # D steps whose backward ran on into another net: judged at that net's step (checks.py)
        self.no_grad_forwards = deque(maxlen=20)   # (module, line, its caller's line) of trainable modules run with
                                                   # gradients off
        self.off = set()      # ids of those modules while their forward runs
        # inside an optimizer's step() (without a closure) its ops are not recorded: the recorder is off torch's
        # mode stack (paused), or skips them (in_step)
        self.paused, self.in_step = False, False
        self.versions_before = []   # (tensor, version) of the arguments of the call being recorded

    def __enter__(self):
        if self.namespaces is None:
            self.frame = sys._getframe(1)
        self.handles = [nn_module.register_module_forward_pre_hook(self._guarded("_pre_forward")),
                        nn_module.register_module_forward_hook(self._guarded("_post_forward")),
                        register_optimizer_step_pre_hook(self._guarded("_pre_step")),
                        register_optimizer_step_post_hook(self._guarded("_post_step"))]
        self.warnings = _WarningsAsPython().__enter__()
        self.mode = _Recorder(self)
        self.mode.__enter__()
        return self

    def __exit__(self, kind, error, tb):
        self.versions_before, self.in_step = [], False
        if self.paused:                   # left inside a step that raised: the recorder is off the stack already
            self.paused = False
        else:
            self.mode.__exit__(None, None, None)
        self.warnings.__exit__(None, None, None)
        for h in self.handles:
            h.remove()
        if error is not None:
            error.__traceback__ = _clean(error.__traceback__)
            self.attach(error)
        self.frame, self.error_spaces = None, []
        return False                      # never swallow

    def _guarded(self, name):
        """The module or optimizer hook of that name, whose own failure becomes a note: it must never break the
        student's code."""
        hook = getattr(self, name)

        def run(*args):
            try:
                hook(*args)
            except Exception as error:
                self.notes.append(_("doctor bookkeeping failed in {hook}: {error}").format(
                    hook=name.strip("_"), error=repr(error)))
                if name == "_post_step":
                    self._resume()
        return run

    def attach(self, error):
        try:
            diagnosis = self.diagnose(error)
        except Exception as failure:      # the original error surfaces anyway
            diagnosis = None
            self.notes.append(_("the doctor could not diagnose this ({failure})").format(failure=repr(failure)))
        if diagnosis is not None:
            self.diagnoses.append(diagnosis)
            error.diagnosis = diagnosis
            print(diagnosis.text(), file=sys.stderr)
        for note in self.notes[-1:]:
            print(_("autograd doctor note: {note}").format(note=note), file=sys.stderr)
        return diagnosis
