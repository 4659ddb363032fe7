"""`python -m gan_lessons doctor SCRIPT [ARGS...]` and `... doctor -m MODULE [ARGS...]`: a whole script under the
doctor, met where it is written, the way `python -m pdb` and `python -m cProfile` run one.

The script runs as `__main__` (runpy) with its own sys.argv and sys.path[0], as `python SCRIPT ARGS` would give
them (sys.argv[0] is the script's absolute path, as `__file__` is), under one doctor that finds names in the
script's globals and in the locals of its running and failing functions. What the command does with the outcome:

- the script ends cleanly: its output and exit status are its own; a SystemExit's code passes through;
- one of the diagnosed errors escapes it: the diagnosis, then the original traceback, exit 1 (any other error: its
  traceback, exit 1, as Python does);
- the doctor warned (once per pattern and line, on stderr): nothing more, unless `strict`, which turns a run that
  would exit 0 into exit 3, so a project can put a one-step dry run under the doctor in its CI;
- no such script, or no such module: one line saying what to do, exit 2 (NotRunnable);
- Ctrl-C: its traceback, then the command ends as python ends on it (by the signal, on POSIX)."""
import importlib.util
import os
import runpy
import sys
import zipfile

from gan_lessons.doctor.frames import DOCTOR_DIR, RUNPY
from gan_lessons.i18n import _

EXIT_ERROR, EXIT_BAD_INPUT, EXIT_STRICT = 1, 2, 3


class NotRunnable(Exception):
    """The script or module cannot be run at all; the message says what to do."""


SHOWN = "_traceback_shown_by_the_doctor"     # set on the script's KeyboardInterrupt once its traceback is shown


def end_quietly(hook=None):
    """sys.excepthook that shows nothing for the script's KeyboardInterrupt whose traceback the command already
    showed, and hands anything else to `hook` (Python's own). The command raises that interrupt on, out of itself,
    so that Python ends it as it ends a script interrupted under `python` (by the signal itself on POSIX: a parent
    sees -2, not an exit status; Python checks for KeyboardInterrupt itself, not a subclass)."""
    hook = hook or sys.excepthook

    def excepthook(kind, value, tb):
        if not getattr(value, SHOWN, False):
            hook(kind, value, tb)
    return excepthook


class _ScriptGlobals:
    """The doctor's `namespaces`: the globals of the module running as `__main__` (runpy's temporary module while
    the script runs). Remembered, since runpy puts the command's own `__main__` back once the script has ended,
    before an escaping error is diagnosed."""

    def __init__(self):
        self.ours, self.found = sys.modules.get("__main__"), None

    def __call__(self):
        main = sys.modules.get("__main__")
        if main is not None and main is not self.ours:
            self.found = vars(main)
        return [self.found] if self.found is not None else []


class _TypedArgv(list):
    """sys.argv for a script: runpy.run_path writes the path it is given (absolute, so that __file__ and the
    traceback name the file as python names them) into argv[0] once, as it starts; python keeps argv[0] as typed.
    That one write is let pass; every later one is the script's own."""

    def __init__(self, values):
        super().__init__(values)
        self.started = False

    def __setitem__(self, index, value):
        if index == 0 and not self.started:
            self.started = True
            return
        super().__setitem__(index, value)


def _check_script(path: str):
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "__main__.py")):
            raise NotRunnable(_("{path} is a folder with no __main__.py: give the path of the script inside "
                                "it").format(path=path))
    elif not os.path.isfile(path):
        dotted = not path.endswith(".py") and all(part.isidentifier() for part in path.split("."))
        raise NotRunnable((_("no file {path}: give the path of a Python script (or -m MODULE for a module); to run "
                             "the module {path}, add -m before it") if dotted else
                           _("no file {path}: give the path of a Python script (or -m MODULE for a module)")).format(
            path=path))


def _check_module(name: str):
    """runpy's checks, made before the doctor starts, each worded as what to do. find_spec imports the parent
    packages of a dotted name, as `python -m` does."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise NotRunnable(_("no module named {name}: check its name, or run the command from the folder that holds "
                            "it (or give a script's path without -m)").format(name=name))
    if spec.submodule_search_locations is not None:
        try:
            main = importlib.util.find_spec(f"{name}.__main__")
        except (ImportError, ValueError):
            main = None
        if main is None:
            raise NotRunnable(_("{name} is a package with no __main__ module: give one of its modules "
                                "(-m {name}.MODULE)").format(name=name))


def _from_the_script(tb):
    """The traceback from the script's first frame on, as `python SCRIPT` shows it: without runpy's frames and
    the doctor's."""
    def plumbing(name):
        return name == RUNPY or name.startswith(DOCTOR_DIR + os.sep)
    while tb is not None and tb.tb_next is not None and plumbing(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def run(target: str, args=(), module=False, strict=False) -> int:
    """Run `target` (a script's path, or a module's name if `module`) with `args` under the doctor; returns the
    exit status (see the module's docstring), or re-raises the script's own SystemExit. Raises NotRunnable before
    anything runs."""
    saved_argv, saved_path = sys.argv, sys.path[:]
    path = None if module else os.path.abspath(target)
    try:
        if not module:
            _check_script(target)
        sys.argv = [target, *args] if module else _TypedArgv([target, *args])   # run_module puts the module's
                                                                                 # file into argv[0], as python -m
        if not getattr(sys.flags, "safe_path", False):  # python -P adds no folder; neither does the doctor then
            if module:
                sys.path[0] = os.getcwd()
            elif path is not None and (os.path.isdir(path) or zipfile.is_zipfile(path)):
                del sys.path[0]                        # run_path puts the folder (or zip) itself first
            elif path is not None:
                sys.path[0] = os.path.dirname(os.path.realpath(path))
        if module:
            _check_module(target)                      # found from the working folder, as python -m finds it
        return _watched(target if module else path, module, strict)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _watched(target, module, strict) -> int:
    from gan_lessons.doctor import doctor
    doc = doctor(namespaces=_ScriptGlobals())
    doc.__enter__()
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as stop:
        doc.__exit__(None, None, None)
        if strict and stop.code in (None, 0) and _warned(doc):
            return EXIT_STRICT
        raise
    except BaseException as error:                    # KeyboardInterrupt too: the doctor lets go first
        if isinstance(error, Exception):
            doc.__exit__(type(error), error, error.__traceback__)   # prints the diagnosis, if any
        else:
            doc.__exit__(None, None, None)
        error.__traceback__ = _from_the_script(error.__traceback__)   # Python's hook prints the error's own
        sys.excepthook(type(error), error, error.__traceback__)
        if isinstance(error, KeyboardInterrupt):
            setattr(error, SHOWN, True)
            raise error
        return EXIT_ERROR
    doc.__exit__(None, None, None)
    return EXIT_STRICT if strict and _warned(doc) else 0


def _warned(doc) -> bool:
    """Did the doctor warn (a DoctorWarning, or a `.grad` read on a non-leaf)? Says so on stderr under strict."""
    warned = [d for d in doc.diagnoses if d.kind in ("suspicious", "nonleaf_grad")]
    if warned:
        print((_("autograd doctor: --strict: {count} warnings above; exit {status}") if len(warned) > 1 else
               _("autograd doctor: --strict: {count} warning above; exit {status}")).format(
            count=len(warned), status=EXIT_STRICT), file=sys.stderr)
    return bool(warned)
