"""Which frames are the student's: not torch's, not the doctor's. Also the traceback and warnings the student
sees, with the doctor's own frames taken out."""
import linecache
import os
import re
import runpy
import sys
import warnings

import torch

from gan_lessons.doctor.report import Where

_TORCH_DIR = os.path.dirname(torch.__file__)
_OVERRIDES = os.path.join(_TORCH_DIR, "overrides.py")
_DOCTOR_DIR = os.path.dirname(os.path.abspath(__file__))
_PACKAGE_DIR = os.path.dirname(_DOCTOR_DIR)
_RUNPY = runpy.run_path.__code__.co_filename    # "<frozen runpy>" from Python 3.11
_KERNEL_CELL = re.compile(r"ipykernel_\d+[/\\]\d+\.py$")


def _shown(path: str) -> str:
    """How a warning names a file: a notebook cell as <cell>, this package's files from the package name, so that
    no stored output carries a temporary file or a path of the machine that ran it. ("where" quotes the line.)"""
    if _KERNEL_CELL.search(path):
        return "<cell>"
    if path.startswith(_PACKAGE_DIR + os.sep):
        return "gan_lessons/" + os.path.relpath(path, _PACKAGE_DIR).replace(os.sep, "/")
    return path


def _user_frame(depth=1, nth=1):
    """The innermost frame that is the student's code: not torch, not this module (nth=2: the student's frame that
    called that one, as `requires_grad(D, False)` calls the `p.requires_grad = flag` inside it); None if none."""
    frame, seen = sys._getframe(depth), 0
    while frame is not None:
        if _is_user(frame):
            seen += 1
            if seen == nth:
                name = frame.f_code.co_filename
                return Where(name, frame.f_lineno, linecache.getline(name, frame.f_lineno).strip())
        frame = frame.f_back
    return None


def _is_user(frame) -> bool:
    name = frame.f_code.co_filename
    return not name.startswith(_TORCH_DIR) and not name.startswith(_DOCTOR_DIR + os.sep) and "contextlib" not in name \
        and name != _RUNPY


def _frames(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


_RECORDING_FILE = os.path.join(_DOCTOR_DIR, "recording.py")


class _WarningsAsPython:
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
        frame = sys._getframe(1)
        if filename == _RECORDING_FILE:
            while frame is not None and frame.f_code.co_filename != _RECORDING_FILE:
                frame = frame.f_back
            while frame is not None and not _is_user(frame):
                frame = frame.f_back
        if filename != _RECORDING_FILE or frame is None:
            return self.shown(message, category, filename, lineno, file, line)
        warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno,
                               module=frame.f_globals.get("__name__"),
                               registry=frame.f_globals.setdefault("__warningregistry__", {}),
                               module_globals=frame.f_globals)


def _plumbing(path) -> bool:
    return path.startswith(_DOCTOR_DIR + os.sep) or path == _OVERRIDES


def _clean(tb):
    """The traceback without this module's and torch.overrides' frames, which are the doctor's own plumbing:
    the student sees the traceback they would see without it."""
    kept = [t for t in _frames(tb) if not _plumbing(t.tb_frame.f_code.co_filename)]
    kept = [t for i, t in enumerate(kept) if i + 1 == len(kept) or kept[i + 1].tb_frame.f_code is not t.tb_frame.f_code]
    for a, b in zip(kept, kept[1:]):
        a.tb_next = b
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else tb


def _called_from_user() -> bool:
    """Did the student's code make the current torch call directly (not torch's own code, e.g. torch.compile's)?"""
    frame = sys._getframe(1)
    while frame is not None and _plumbing(frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None and _is_user(frame)
