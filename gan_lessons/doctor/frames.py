"""Which frames are the student's: not torch's, not the doctor's. Also the traceback and warnings the student
sees, with the doctor's own frames taken out."""
import functools
import inspect
import linecache
import os
import re
import runpy
import sys
import types
import warnings

import torch
from torch.autograd.function import BackwardCFunction
from torch.nn.modules import module as nn_module

from gan_lessons.doctor.report import Where

TORCH_DIR = os.path.dirname(torch.__file__)
_OVERRIDES = os.path.join(TORCH_DIR, "overrides.py")
DOCTOR_DIR = os.path.dirname(os.path.abspath(__file__))
_PACKAGE_DIR = os.path.dirname(DOCTOR_DIR)
RUNPY = runpy.run_path.__code__.co_filename    # "<frozen runpy>" from Python 3.11
_KERNEL_CELL = re.compile(r"ipykernel_\d+[/\\]\d+\.py$")


def shown_path(path: str) -> str:
    """How a warning names a file: a notebook cell as <cell>, this package's files from the package name, so that
    no stored output carries a temporary file or a path of the machine that ran it. ("where" quotes the line.)"""
    if _KERNEL_CELL.search(path):
        return "<cell>"
    if path.startswith(_PACKAGE_DIR + os.sep):
        return "gan_lessons/" + os.path.relpath(path, _PACKAGE_DIR).replace(os.sep, "/")
    return path


def user_frame(depth=1, nth=1):
    """The innermost frame that is the student's code: not torch, not this module (nth=2: the student's frame that
    called that one, as `requires_grad(D, False)` calls the `p.requires_grad = flag` inside it); None if none."""
    frame, seen = sys._getframe(depth), 0
    while frame is not None:
        if is_user(frame):
            seen += 1
            if seen == nth:
                name = frame.f_code.co_filename
                return Where(name, frame.f_lineno, linecache.getline(name, frame.f_lineno).strip(), frame.f_lasti)
        frame = frame.f_back
    return None


def call_site():
    """(the student's line that made the torch call being made now, the line inside a module's forward it ran on
    or None). That is the innermost line of the student's, except inside a module's `forward` called by name
    (`D.forward(x)`, which runs no module hooks): the line that called it, as a hooked `D(x)` is placed."""
    frame = sys._getframe(1)
    while frame is not None and not is_user(frame):
        frame = frame.f_back
    inner, outer = frame, frame
    while outer is not None and outer.f_code.co_name == "forward" and outer.f_code.co_argcount \
            and isinstance(outer.f_locals.get(outer.f_code.co_varnames[0]), nn_module.Module):
        caller = outer.f_back
        while caller is not None and not is_user(caller):
            caller = caller.f_back
        if caller is None:
            break
        outer = caller
    if outer is None:
        return None, None
    def where(f):
        return Where(f.f_code.co_filename, f.f_lineno, linecache.getline(f.f_code.co_filename, f.f_lineno).strip())
    return where(outer), None if outer is inner else where(inner)


def outermost_user_frame(entry=None):
    """The outermost frame of the student's code that the block runs, as a Where: of the frames called from `entry`
    (the frame that entered the doctor), the outermost that is the student's, else `entry` itself if it is; None if
    none. (A script's top level under the command; the function a `with doctor():` block called.)"""
    frame, found = sys._getframe(1), None
    while frame is not None and frame is not entry:
        if is_user(frame):
            found = frame
        frame = frame.f_back
    if found is None and frame is not None and is_user(frame):
        found = frame
    return None if found is None else Where(found.f_code.co_filename, found.f_lineno,
                                            linecache.getline(found.f_code.co_filename, found.f_lineno).strip())


def placed(where, outer, method=None):
    """How a diagnosis says where a write happened: the line, and where it is in another file than the student's
    outermost frame (a helper module, a library), that file and the line that led there; in an optimizer's own
    method (`method`, from optimizer_method), that method and the line that called it."""
    from gan_lessons.i18n import _
    if method is not None and where is not None:
        function, caller = method
        inside = where if caller.file == where.file else _("{file}, {where}").format(file=shown_path(where.file),
                                                                                    where=where)
        return _("{where}, in {function}, called from {caller}").format(where=inside, function=function,
                                                                       caller=caller)
    if where is None or outer is None or where.file == outer.file:
        return str(where)
    return _("{file}, {where}, called from {caller}").format(file=shown_path(where.file), where=where, caller=outer)


def optimizer_method():
    """(its qualified name, the student's line that called it) when the student's innermost frame is a method of an
    optimizer other than step(), as SAM's first_step, which moves the weights between two backwards; else None."""
    frame = sys._getframe(1)
    while frame is not None and not is_user(frame):
        frame = frame.f_back
    code = frame.f_code if frame is not None else None
    if code is None or code.co_name == "step" or not code.co_argcount or code.co_varnames[0] != "self" \
            or not isinstance(frame.f_locals.get("self"), torch.optim.Optimizer):
        return None
    caller = frame.f_back
    while caller is not None and not is_user(caller):
        caller = caller.f_back
    if caller is None:
        return None
    name = caller.f_code.co_filename
    return (getattr(code, "co_qualname", code.co_name),
            Where(name, caller.f_lineno, linecache.getline(name, caller.f_lineno).strip()))


def user_site():
    """(the student's innermost line, the name of the function it is in, the student's line that called that
    function or None) for the torch call being made now."""
    frame = sys._getframe(1)
    while frame is not None and not is_user(frame):
        frame = frame.f_back
    if frame is None:
        return None, "?", None
    caller = frame.f_back
    while caller is not None and not is_user(caller):
        caller = caller.f_back
    def where(f):
        return Where(f.f_code.co_filename, f.f_lineno, linecache.getline(f.f_code.co_filename, f.f_lineno).strip())
    return where(frame), getattr(frame.f_code, "co_qualname", frame.f_code.co_name), \
        None if caller is None else where(caller)


_AUTOGRAD_DIR = os.path.join(TORCH_DIR, "autograd") + os.sep


def runs_backward(frame) -> bool:
    """Is this torch's frame that hands a backward to autograd's engine (whose own calls, and the backward code they
    run, come below it)? `_engine_run_backward` from torch 2.4; before, `backward` and `grad` themselves."""
    code = frame.f_code
    return code.co_name == "_engine_run_backward" or (
        code.co_name in ("backward", "grad") and code.co_filename.startswith(_AUTOGRAD_DIR))


def inside_backward_frame():
    """(the line, the function's qualified name) of the innermost frame of the student's (or a library's) code that
    autograd's engine is running: a custom Function's backward, a hook; None when the innermost code is the engine's
    own (a node of torch's, a gradient accumulated), found before the engine's frame is reached."""
    frame = sys._getframe(1)
    while frame is not None:
        if runs_backward(frame):
            return None
        if is_user(frame):
            name = frame.f_code.co_filename
            return (Where(name, frame.f_lineno, linecache.getline(name, frame.f_lineno).strip()),
                    getattr(frame.f_code, "co_qualname", frame.f_code.co_name))
        frame = frame.f_back
    return None


_USER_FILES: dict = {}    # file name: is it the student's? (asked for a dozen frames at every op the doctor records)


def is_user(frame) -> bool:
    name = frame.f_code.co_filename
    user = _USER_FILES.get(name)
    if user is None:
        user = _USER_FILES[name] = not name.startswith(TORCH_DIR) and not name.startswith(DOCTOR_DIR + os.sep) \
            and "contextlib" not in name and name != RUNPY and not name.startswith("<eval_with_key>")
        # (<eval_with_key>: code torch.fx generated for a compiled graph, which nobody wrote: its ops are placed on
        # the line that called the compiled module)
    return user


def traceback_frames(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next




def failing_node(tb):
    """The custom autograd.Function node whose backward raised, read from its frame (`ctx` of the innermost
    backward in the traceback), or None."""
    node = None
    for frame in traceback_frames(tb):
        ctx = frame.tb_frame.f_locals.get("ctx") if frame.tb_frame.f_code.co_name == "backward" else None
        if isinstance(ctx, BackwardCFunction):
            node = ctx
    return node


class WarningsAsPython:
    """While the doctor watches: torch's and Python's own warnings shown as `python` shows them. A warning raised
    inside a torch call the doctor's recorder made is placed, by the stack, on the recorder's line; it is moved to
    the student's line that made the call, and goes through Python's filters there, with that module's
    once-per-location registry. Every other warning is left alone. Nothing resets the filters per call."""

    def __enter__(self):
        self.entry = ("always", None, Warning, re.compile(re.escape(__name__.rsplit(".", 1)[0] + ".recording") + "$"),
                      0)
        warnings.filters.insert(0, self.entry)       # reaches showwarning below, where it is moved and filtered
        # torch warns that its compiled modules fire global module hooks twice: those hooks are the doctor's own,
        # which counts the extra call; under python there are none, and no warning
        self.hooks = ("ignore", re.compile(re.escape("Using `torch.compile(module)` when there are global hooks")),
                      UserWarning, None, 0)
        warnings.filters.insert(0, self.hooks)
        self.shown = warnings.showwarning
        warnings.showwarning = self.show
        return self

    def __exit__(self, *exc):
        if warnings.showwarning == self.show:
            warnings.showwarning = self.shown
        for entry in (self.entry, self.hooks):
            if entry in warnings.filters:
                warnings.filters.remove(entry)
        return False

    def show(self, message, category, filename, lineno, file=None, line=None):
        message = _without_doctor_frames(message)   # a stack torch wrote into its text (anomaly mode's)
        placed = getattr(self, "moving", False) or category.__name__ == "DoctorWarning"   # the doctor's own: where
        target = None if placed else _as_python_places(sys._getframe(1), filename, lineno)   # it says
        if target is None:
            return self.shown(message, category, filename, lineno, file, line)
        self.moving = True                             # the warning, moved, comes back here once: shown as it is
        try:
            warnings.warn_explicit(message, category, target.f_code.co_filename, target.f_lineno,
                                   module=target.f_globals.get("__name__"),
                                   registry=target.f_globals.setdefault("__warningregistry__", {}))
        finally:
            self.moving = False


def _without_doctor_frames(message):
    """A warning whose text quotes a Python stack (anomaly mode's "Traceback of forward call", which torch.compile
    prints while it traces under the doctor) with the doctor's own frames taken out of that stack."""
    text = str(message)
    if DOCTOR_DIR not in text:
        return message
    kept, skipping = [], False
    for row in text.split("\n"):
        if row.startswith("  File "):
            skipping = DOCTOR_DIR in row
        elif not row.startswith("    "):
            skipping = False
        if not skipping:
            kept.append(row)
    cleaned = "\n".join(kept)
    return type(message)(cleaned) if isinstance(message, Warning) else cleaned


def _as_python_places(frame, filename, lineno):
    """The frame `python` would have named for a warning that landed on (filename, lineno), if the doctor's own
    frames shifted it; None if they did not. Python counts `stacklevel` frames out from the one that warned; under
    the doctor, a torch call runs through three more: the torch function that dispatched (its frame calling
    torch.overrides), torch.overrides', and the recorder's. Counted again without those, the same stacklevel lands
    where it lands under python (a C++ warning from an op lands on the recorder's frame: the caller of the op)."""
    stack = []
    while frame is not None:
        if frame.f_code.co_filename not in (warnings.__file__, __file__) or stack:
            stack.append(frame)
        frame = frame.f_back
    landed = next((i for i, f in enumerate(stack) if f.f_code.co_filename == filename and f.f_lineno == lineno), None)
    if landed is None:
        return None
    extra = [_plumbing(f.f_code.co_filename) or (i > 0 and stack[i - 1].f_code.co_filename == _OVERRIDES)
             or _hooks_frame(f, stack[i + 1] if i + 1 < len(stack) else None) for i, f in enumerate(stack)]
    if not any(extra[:landed + 1]):
        return None
    level = landed + 1                                 # python's stacklevel, counted on the doctor's stack
    kept = [f for f, shifted in zip(stack, extra) if not shifted]
    return kept[min(level, len(kept)) - 1] if kept else None


def _hooks_frame(frame, caller) -> bool:
    """Module._call_impl's `inner`, there only because the doctor's global module hooks are: the module has no
    hook of its own, and every global one is the doctor's."""
    if frame.f_code.co_name != "inner" or frame.f_code.co_filename != nn_module.__file__ or caller is None:
        return False
    module = caller.f_locals.get("self")
    own = [getattr(module, a, None) for a in ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks",
                                              "_forward_pre_hooks")]
    every = [nn_module._global_backward_pre_hooks, nn_module._global_backward_hooks,
             nn_module._global_forward_hooks, nn_module._global_forward_pre_hooks]
    return not any(own) and all(_plumbing(inspect.getsourcefile(h) or "") for hooks in every
                                for h in hooks.values())


def _plumbing(path) -> bool:
    return path.startswith(DOCTOR_DIR + os.sep) or path == _OVERRIDES


def clean_traceback(tb):
    """The traceback without this module's and torch.overrides' frames, which are the doctor's own plumbing:
    the student sees the traceback they would see without it."""
    kept = [t for t in traceback_frames(tb) if not _plumbing(t.tb_frame.f_code.co_filename)]
    kept = [t for i, t in enumerate(kept) if i + 1 == len(kept) or kept[i + 1].tb_frame.f_code is not t.tb_frame.f_code]
    for a, b in zip(kept, kept[1:]):
        a.tb_next = b
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else tb


@functools.lru_cache(maxsize=256)
def _saving_line(code) -> int | None:
    """The line of a custom Function's forward that calls ctx.save_for_backward (the first, if several), or None."""
    try:
        lines, start = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return None
    return next((start + k for k, text in enumerate(lines) if "save_for_backward(" in text
                 and not text.lstrip().startswith("#")), None)


def custom_forward():
    """(the custom autograd.Function node whose forward is running, the line in that forward, the line that called
    Function.apply) when the current torch call comes from inside a custom Function's forward; else None. The node is
    the forward's own `ctx`."""
    frame = sys._getframe(1)
    while frame is not None and not is_user(frame):
        frame = frame.f_back
    if frame is None or frame.f_code.co_name != "forward":
        return None
    ctx = frame.f_locals.get("ctx")
    if not isinstance(ctx, BackwardCFunction):
        return None
    line = _saving_line(frame.f_code) or frame.f_lineno          # where the forward saves for its backward
    inside = Where(frame.f_code.co_filename, line, linecache.getline(frame.f_code.co_filename, line).strip())
    caller = frame.f_back
    while caller is not None and not is_user(caller):
        caller = caller.f_back
    where = None if caller is None else Where(caller.f_code.co_filename, caller.f_lineno, linecache.getline(
        caller.f_code.co_filename, caller.f_lineno).strip())
    return ctx, inside, where


def called_from_user() -> bool:
    """Did the student's code make the current torch call directly (not torch's own code, e.g. torch.compile's)?"""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and _plumbing(frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None and is_user(frame)
