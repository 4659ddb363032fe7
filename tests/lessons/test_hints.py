"""A checker's hint for an error the student's code raised says what happened, never what to change: a hint that
proposes a fix gives the student's work away, and can propose one its own grader rejects (a detach that trains the
wrong thing). Every hint table of the checkers, in both languages' source (the English message; its translation
says the same), read for a fix: an instruction at the start of a clause, or the code of one."""
import importlib
import pkgutil
import re

import gan_lessons.exercises as exercises
from gan_lessons.exercises.lesson13 import LABS

# An imperative at the start of a clause ("... : call X", "; use Y", ", or detach Z"), or code written out to copy.
INSTRUCTION = re.compile(r"(?:^|[:;,]\s+|\.\s+|\b(?:then|or|and|so)\s+)(call|pass|reshape|import|use|do|detach|move|"
                         r"add|put|make|set|wrap|take|give|compute|divide|replace|keep|return|ask|check|try|write|"
                         r"clone|zero|step|unscale|scale)\b(?!\s*(?:=|\(\)|ran|was|is)\b)", re.I)
CODE = re.compile(r"\w+ = \w+|\.view\(|\.requires_grad_\(True\)|grad_outputs=torch")


def hint_tables():
    """Every (pattern, hint) of every checker module: module-level lists of pairs of strings, and each lab's."""
    found = {}
    for info in pkgutil.walk_packages(exercises.__path__, exercises.__name__ + "."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, list) and value and all(isinstance(t, tuple) and len(t) == 2 and
                                                         all(isinstance(x, str) for x in t) for t in value):
                for pattern, hint in value:
                    found.setdefault(hint, f"{info.name}.{name} ({pattern[:30]}...)")
    for name, lab in LABS.items():
        for _pattern, hint in lab.hints:
            found.setdefault(hint, f"lab {name}")
    return found


def test_the_hint_tables_are_found():
    hints = hint_tables()
    assert len(hints) >= 25 and all(hint in hints for lab in LABS.values() for _pattern, hint in lab.hints)
    assert any("AUTOGRAD_HINTS" in where for where in hints.values())


def test_no_hint_proposes_a_fix():
    offending = {hint: where for hint, where in hint_tables().items() if INSTRUCTION.search(hint) or CODE.search(hint)}
    assert not offending, offending


def test_the_reading_catches_the_hints_that_used_to_propose_fixes():
    """Hints these checkers once gave, each an instruction or the code of a fix, are caught; a hint that says what
    happened is not."""
    for old in ("a step or an in-place op changed a tensor a pending backward saved: do that backward before the step, "
                "or detach so the backward never needs it (lesson 03)",
                "a first backward freed part of the graph a second loss still needs: detach the shared tensor in the "
                "loss that must not reach it (lessons 02 and 04)",
                "x_real must require grad before D sees it (data never does): x_real = x_real.detach().requires_grad_("
                "True)",
                "D gives one score per image: pass grad_outputs=torch.ones_like(scores) to torch.autograd.grad",
                "the worker processes run your function alone: import what it uses inside the function",
                "for each part two of your losses share, ask whether both of them should train it"):
        assert INSTRUCTION.search(old) or CODE.search(old), old
    assert not INSTRUCTION.search("a tensor saved for a backward still to come was changed in place after it was "
                                  "saved, by an optimizer's step or an in-place op (lesson 03)")
