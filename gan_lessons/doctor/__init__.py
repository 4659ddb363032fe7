"""The autograd doctor (lesson 07): watch a block of training code and, when one of the lessons' errors escapes
it, say in plain words which tensor, which forward line saved it, and which line or optimizer step changed or
freed it, with the fixes and the lesson that teaches them.

    with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
        ...training code...

It records with public mechanisms: a TorchFunctionMode (torch calls, in-place ops, backward calls, `.grad` and
`.data` access, the call that raised), global module hooks (which module is running) and the global optimizer step
hooks, and for the length of each backward a TorchDispatchMode that sees the writes the backward's own code makes;
GradScaler's methods and the clip functions are wrapped while it runs (the originals run, unchanged).
The original exception is re-raised unchanged, with `.diagnosis` attached (printed too). The doctor never changes a
result, never swallows an exception, and if its own bookkeeping fails it adds a one-line note instead.

The doctor owns one journal (journal.py: everything seen, as the small dataclasses of nodes.py) and four parts that
share it and nothing else: the recorder (recording.py: writes it; ops.py reads what one torch call does, writes.py
sees a backward's writes), the namer (naming.py: names, resolved when needed), the checks (checks.py: warnings about
silent bugs) and the diagnoser (errors.py: catalogue.py recognises an error's kind, one function per kind
diagnoses it from the records; the version error in versions.py, the view errors in views.py, the others in
misuse.py; kept.py finds the lines that add to a list which keeps an old graph); scaling.py watches GradScaler and
the clip functions (a clip of gradients the scale still multiplies). report.py says what a diagnosis says, with
right and wrong fixes; frames.py finds the student's frames
and shows warnings where python would; extension.py is `%load_ext gan_lessons`; script.py is
`python -m gan_lessons doctor SCRIPT`; ranks.py says each diagnosis once under torchrun."""
import sys
import threading

from torch.nn.modules import module as nn_module
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from gan_lessons.doctor import ranks
from gan_lessons.doctor.checks import Checks
from gan_lessons.doctor.errors import Diagnoser
from gan_lessons.doctor.extension import active, load_ipython_extension, unload_ipython_extension
from gan_lessons.doctor.frames import WarningsAsPython, clean_traceback
from gan_lessons.doctor.journal import Journal
from gan_lessons.doctor.naming import Namer
from gan_lessons.doctor.recording import Recorder
from gan_lessons.doctor.report import LESSONS, Diagnosis, DoctorWarning, Where
from gan_lessons.doctor.scaling import ScalingWatch
from gan_lessons.i18n import _

__all__ = ["doctor", "Diagnosis", "DoctorWarning", "Where", "LESSONS", "active", "load_ipython_extension",
           "unload_ipython_extension"]


class doctor:
    """Context manager. Name what you train, or let the doctor find the names: doctor(G=G, D=D, opt_G=..., opt_D=...)
    or doctor()."""

    def __init__(self, *unnamed, namespaces=None, **named):
        for k, obj in enumerate(unnamed):
            named[f"{type(obj).__name__}{k}"] = obj
        # namespaces: where else names come from, read when a name is needed: a callable giving the live namespaces
        # (the extension passes the notebook's); by default the frame that entered the doctor
        self.journal = Journal()
        self.namer = Namer(self.journal, named, namespaces)
        self.checks = Checks(self.journal, self.namer)
        self.recorder = Recorder(self.journal, self.namer, subscribers=[self.checks])
        self.scaling = ScalingWatch(self.namer, self.checks.suspicious)
        self.diagnoser = Diagnoser(self.journal, self.namer, self.checks.constant_of)

    @property
    def diagnoses(self):
        """What the doctor said: a Diagnosis per error diagnosed, warning and information line."""
        return self.journal.diagnoses

    @property
    def notes(self):
        """Notes on its own bookkeeping (empty unless some of it failed)."""
        return self.journal.notes

    def names(self, extra=()):
        return self.namer.names(extra)

    def __enter__(self):
        self.journal.entry = sys._getframe(1)
        self.journal.threads_at_entry = frozenset(t.ident for t in threading.enumerate())
        if self.namer.namespaces is None:
            self.namer.frame = sys._getframe(1)
        self.handles = [nn_module.register_module_forward_pre_hook(self._guarded("pre_forward")),
                        nn_module.register_module_forward_hook(self._guarded("post_forward")),
                        register_optimizer_step_pre_hook(self._guarded("pre_step")),
                        register_optimizer_step_post_hook(self._guarded("post_step"))]
        self.warnings = WarningsAsPython().__enter__()
        self.scaling.install()
        self.recorder.start()
        ranks.join()                  # under torchrun: one of the run's processes, for the shared folder's clean-up
        return self

    def __exit__(self, kind, error, tb):
        journal = self.journal
        self.recorder.stop()              # (left inside a step that raised: off torch's mode stack already)
        self.scaling.uninstall()
        self.warnings.__exit__(None, None, None)
        for h in self.handles:
            h.remove()

        if error is not None:
            error.__traceback__ = clean_traceback(error.__traceback__)
            self.attach(error)
        journal.release()                 # what the doctor said stays; nothing of the student's is held
        self.checks.release()
        self.namer.forget()
        return False                      # never swallow

    def _guarded(self, name):
        """The module or optimizer hook of that name, whose own failure becomes a note: it must never break the
        student's code."""
        hook = getattr(self.recorder, name)

        def run(*args):
            try:
                hook(*args)
            except Exception as error:
                self.journal.note(_("doctor bookkeeping failed in {hook}: {error}").format(hook=name,
                                                                                         error=repr(error)))
                if name == "post_step":
                    self.recorder.resume()
        return run

    def attach(self, error):
        try:
            diagnosis = self.diagnoser.diagnose(error)
        except Exception as failure:      # the original error surfaces anyway
            diagnosis = None
            self.journal.note(_("the doctor could not diagnose this ({failure})").format(failure=repr(failure)))
        if diagnosis is not None:
            self.diagnoses.append(diagnosis)
            error.diagnosis = diagnosis
            ranks.tell(diagnosis.text())                      # under torchrun: once for all the processes
        for note in self.notes[-1:]:
            ranks.tell(_("autograd doctor note: {note}").format(note=note))
        return diagnosis
