"""A checker's hint for an error the student's code raised says what happened, never what to change: a hint that
proposes a fix gives the student's work away, and can propose one its own grader rejects (a detach that trains the
wrong thing). Every hint table of the checkers, in both languages' source (the English message; its translation
says the same), read for a fix: an instruction at the start of a clause, or the code of one."""
import ast
import importlib
import pkgutil
import re
from pathlib import Path

import gan_lessons.exercises as exercises
from gan_lessons.exercises.lesson13 import LABS

# An imperative at the start of a clause ("... : call X", "; use Y", ", or detach Z"), or code written out to copy.
INSTRUCTION = re.compile(r"(?:^|[:;,]\s+|\.\s+|\b(?:then|or|and|so)\s+)(call|pass|reshape|import|use|do|detach|move|"
                         r"add|put|make|set|wrap|take|give|compute|divide|replace|keep|return|ask|check|try|write|"
                         r"clone|zero|step|unscale|update|skip|fill|load|flatten|freeze|let|clip|build|leave|pack|report|clear|"
                         r"remember|unfreeze|restore)\b(?=\s+\S)(?!\s*(?:=|\(\)|ran|was|is)\b)(?!\s*\{)", re.I)
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
                "for each part two of your losses share, ask whether both of them should train it",
                "d's gradients at the second call are those of both calls added up: call d_optimizer.zero_grad() "
                "before d_loss.backward()",
                "G was in eval mode before sample and is in training mode after: remember G.training and put back "
                "that mode",
                "scaler.update() ran 2 times in one call of amp_step: call it once per iteration",
                "{name} did not change either: `p = p - lr * p.grad` makes a new tensor and leaves the parameter as "
                "it was; update it in place (p -= ...)",
                "u's .grad is None: leave such a parameter as it is",
                "D's .grad changed: loss_G's backward went into D's parameters; freeze D before its forward",
                "an error raised inside D's forward did not come out of g_step: let it through (try/finally, not "
                "try/except)",
                "g.norm(2, dim=1) is a norm across the channels at each pixel: flatten each image's gradient first",
                "after load_state, G's or D's weights are not the saved ones: save and load both models' "
                "state_dict()"):
        assert INSTRUCTION.search(old) or CODE.search(old), old
    assert not INSTRUCTION.search("a tensor saved for a backward still to come was changed in place after it was "
                                  "saved, by an optimizer's step or an in-place op (lesson 03)")


# Messages that do tell the student what to write, because they state the exercise, not the fix of a mistake: where
# the answer goes, the form it takes, and what the exercise asks to be written by hand.
THE_EXERCISE = ("a `...` is still in your function", "? {name}: not solved yet. Write the body",
                "✗ {name}: write it as dict(kind=", "on {graph}: it returned {value}; return a list",
                "sample returned {kind}, not the tensor of images", "your function returned {kind}",
                "make_critic returned {kind}, not the critic",
                "it calls strategies.", "your loop ran without an error, so there is nothing to diagnose",
                "check your loss against the exercise's hinge loss", "on {count} one-operation expressions",
                "your engine's `tanh` saves what",
                "✗ {name}: my_answer is not a function but a value", "its source cannot be read")


def checker_messages():
    """Every message a checker prints, as its source writes it (the English msgid of each _() and N_())."""
    root = Path(exercises.__file__).parent
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("_", "N_") and \
                    node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                yield f"{path.relative_to(root)}:{node.lineno}", node.args[0].value


def test_no_checker_message_tells_the_fix():
    """Beyond the hint tables: no message any checker prints instructs a fix, but those that state the exercise."""
    messages = list(checker_messages())
    assert len(messages) > 300
    offending = {where: text for where, text in messages
                 if INSTRUCTION.search(text) and not text.startswith(THE_EXERCISE)}
    assert not offending, offending
