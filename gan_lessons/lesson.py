"""What every notebook's setup cell and exercises use: quick mode, seeding,
asserted error demonstrations and predict-then-check feedback (taught in lesson 01)."""
import base64
import os
import random
import re
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from gan_lessons.i18n import _, choice, set_language, source_in_language, tr

REPO_URL = "https://github.com/gan-lessons/gan-lessons"  # the one place the repository's address is kept

# Every notebook's first code cell is exactly this (tests/lessons/test_notebooks.py checks it), tagged nbval-ignore-output
# (its output names the torch version and the device). Plain Python, no `%pip`: the lessons' text sources
# (notebooks/src/) hold it as it is, and they are Python scripts too.
SETUP_CELL = f"""# Setup, the same in every lesson. On Colab it installs what Colab lacks: torchviz and this package.
import subprocess
import sys
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz", "gan-lessons @ git+{REPO_URL}"],
                   check=True)

import torch
from torch import nn, optim
import torch.nn.functional as F
from gan_lessons.lesson import setup, expect_error, expect_warning, claim, check, describe, rounded, tr

device, QUICK = setup(seed=0, lang="en")"""
# The Chinese lessons' setup cell (notebooks/zh/): the same code, its comment in Chinese, and lang="zh".
SETUP_CELL_ZH = (SETUP_CELL.replace("# Setup, the same in every lesson. On Colab it installs what Colab lacks: torchviz "
                                    "and this package.",
                                    "# 每一课都一样的准备工作。在 Colab 上，它只安装 Colab 没有的两样：torchviz 和本课程的包。")
                 .replace('lang="en"', 'lang="zh"'))
SETUP_CELLS = {"en": SETUP_CELL, "zh": SETUP_CELL_ZH}

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def quick_mode() -> bool:
    """The one quick-mode switch. GAN_LESSONS_QUICK=1/0 decides; otherwise it is on
    under CI (CI is set) and on any machine without a GPU."""
    value = os.environ.get("GAN_LESSONS_QUICK", "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    if value:
        raise ValueError(_("GAN_LESSONS_QUICK={value} is not understood: set it to 1 (quick) or 0 (full).")
                         .format(value=repr(value)))
    return bool(os.environ.get("CI")) or not torch.cuda.is_available()


def set_seed(seed: int = 0) -> None:
    """Seed Python and torch (CPU and every GPU) so printed values repeat."""
    random.seed(seed)
    torch.manual_seed(seed)


def setup(seed: int = 0, lang: str | None = None):
    """Seed, pick the device, read quick mode, speak `lang` ("en" or "zh"; None: GAN_LESSONS_LANG, else English);
    print one line saying what was chosen. Chinese also picks a CJK font for the figures."""
    if lang is not None:
        set_language(lang)
    set_seed(seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if os.environ.get("GAN_LESSONS_REQUIRE_CUDA", "").strip().lower() in _TRUE and device.type != "cuda":
        raise RuntimeError(_("GAN_LESSONS_REQUIRE_CUDA is set but torch sees no CUDA device: run this on the GPU "
                             "machine, or unset it"))
    quick = quick_mode()
    from gan_lessons.plots import use_language_font
    font = use_language_font()
    print(_("torch {version} | device: {device} | quick mode: {quick} | seed: {seed}").format(
        version=torch.__version__, device=device, quick=_("on") if quick else _("off"), seed=seed))
    if font:
        print(font)
    return device, quick


class NoErrorRaised(AssertionError):
    """The demonstrated error did not happen: the lesson's claim is no longer true."""


@dataclass
class Caught:
    """What `with expect_error(...) as caught:` holds once the block has failed: the error (with the doctor's
    `diagnosis` on it, where the doctor watched the block)."""
    error: BaseException | None = None


@contextmanager
def expect_error(kind=RuntimeError, match: str = ""):
    """Run a block that must fail with `kind` whose message matches `match`.

    The student sees PyTorch's own message; "Run All" goes on; and if the error
    ever stops happening, NoErrorRaised fails the cell (and so the test).
    Any other exception passes through untouched."""
    caught = Caught()
    try:
        yield caught
    except kind as error:
        if not re.search(match, str(error)):
            raise
        caught.error = error
        print(_("{kind} (raised, as the lesson expects):").format(kind=type(error).__name__))
        print(str(error).strip())
        doctor = sys.modules.get("gan_lessons.doctor")          # under %load_ext gan_lessons: diagnose it too
        watching = doctor.active() if doctor is not None else None
        if watching is not None and getattr(error, "diagnosis", None) is None:
            watching.attach(error)
        return
    raise NoErrorRaised(_("expected {kind} matching {match}, but the block ran without it").format(
        kind=kind.__name__, match=repr(match)))


@contextmanager
def expect_warning(kind=UserWarning, match: str = ""):
    """Like expect_error, for a warning: show it, and fail if it is not emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    hits = [w for w in caught if issubclass(w.category, kind) and re.search(match, str(w.message))]
    if not hits:
        raise NoErrorRaised(_("expected {kind} matching {match}, but none was emitted").format(
            kind=kind.__name__, match=repr(match)))
    print(_("{kind} (emitted, as the lesson expects):").format(kind=hits[0].category.__name__))
    print(re.sub(r"\s*\(Triggered internally at [^)]*\)", "", str(hits[0].message)).strip())


class ClaimFailed(AssertionError):
    """A lesson's claim does not hold (on this torch, for what it measured, or timed on this machine): the lesson,
    not the student, is wrong."""


def claim(statement: str, holds, shown=None, on: str | None = None) -> None:
    """State a claim a lesson rests on, print it with ✓, and fail the cell if it is false.

    `holds` is the evidence, computed in the cell: a bool (or a one-element tensor). `shown` is what decided
    it (numbers, names), printed beside the claim so a student sees the evidence and not only the verdict. `on` says
    what the evidence is about when it is not torch's behaviour (a shipped run, this package's doctor), so a failure
    names that and not the torch version. A claim about a timing is timing.claim_timing's."""
    if isinstance(holds, torch.Tensor) and holds.numel() == 1:
        holds = bool(holds.item())
    if not isinstance(holds, bool):
        raise TypeError(_("claim({statement}, ...) needs a bool as evidence, not {kind}: compare the measured "
                          "values in the cell (for example `a == b`)").format(statement=repr(statement),
                                                                              kind=type(holds).__name__))
    detail = "" if shown is None else _("  ({shown})").format(shown=shown)
    if not holds:
        if on is not None:
            raise ClaimFailed(_("✗ {statement}: does not hold for {on}{detail}").format(
                statement=statement, on=on, detail=detail))
        raise ClaimFailed(_("✗ {statement}: does not hold on torch {version}{detail}").format(
            statement=statement, version=torch.__version__, detail=detail))
    print(f"✓ {statement}{detail}")


def check(question: str, prediction, actual, why: str = "") -> None:
    """Predict-then-check: compare the student's prediction with the real value, and say why.

    Feedback, not an assert: a wrong prediction prints the right answer and the reason;
    a prediction left as `...` prints "not solved yet"."""
    if prediction is ...:
        not_solved(question, _("your prediction"))
        return
    shown = choice(actual)           # "both" is 两者 in a Chinese lesson, and either is right
    right = same_answer(prediction, actual) or same_answer(prediction, shown)
    verdict = _("right") if right else _("not quite: you predicted {prediction}").format(prediction=repr(prediction))
    print(_("{mark} {question} -> {actual} ({verdict})").format(mark="✓" if right else "✗", question=question,
                                                                actual=repr(shown), verdict=verdict))
    if why:
        print(_("  why: {why}").format(why=why))


# Names that stand for the same answer, once case and torch's decoration are dropped: one table, read both ways
# (tests/package/test_lesson.py checks each pair in both directions).
SAME_NAMES = {"inference_mode": "inference", "opt_d": "d", "opt_g": "g", "optimizer_d": "d", "optimizer_g": "g",
              "no_grad()": "no_grad"}


def _plain_value(value):
    """A tensor or numpy value as Python's own: a one-element tensor or a numpy scalar as its number or truth value,
    anything with more elements as a list."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else value.tolist()
    if type(value).__module__ == "numpy":
        return value.item() if getattr(value, "size", 1) == 1 else value.tolist()
    return value


def _canonical(value):
    """A prediction or an answer as the thing it names, whatever way it is written: a shape as a tuple of ints (list,
    tuple or torch.Size alike), a dtype or a name without torch's decoration or case ("float32" for torch.float32,
    "tanh" for "TanhBackward0", "sgd" for "SGD" or "optim.SGD"), a number or a truth value given as text as the
    number or the value (a truth value stays one: True is not the count 1), a single word without a plural s ("move"
    for "moves"), names in SAME_NAMES as one, and names given as a list, a tuple, a set or "a, b" as the set of them
    ("a", ["a"] and {"a"} alike)."""
    value = _plain_value(value)
    if isinstance(value, bool):
        return ("truth", value)
    if isinstance(value, torch.dtype):
        value = str(value)
    if isinstance(value, (list, tuple, torch.Size)) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                           for v in value):
        return tuple(value)
    if isinstance(value, (list, tuple, set, frozenset)) and value and all(isinstance(v, (str, type)) for v in value):
        return frozenset(_canonical(v) for v in value)
    if isinstance(value, type):
        value = value.__name__
    if not isinstance(value, str):
        return value
    text = value.strip().strip("'\"`").strip()
    lowered = text.lower()
    if lowered in ("true", "false"):
        return ("truth", lowered == "true")
    try:
        number = float(text)
        return int(number) if number.is_integer() else number
    except ValueError:
        pass
    shape = re.fullmatch(r"(?:torch\.size\()?[\[(]\s*(\d+(?:\s*,\s*\d+)*)?\s*,?\s*[\])]\)?", lowered)
    if shape:
        return tuple(int(n) for n in re.findall(r"\d+", shape.group(1) or ""))
    if "," in lowered and re.fullmatch(r"[\w. ()]+(?:\s*,\s*[\w. ()]+)+", lowered):     # "a, b": names
        return frozenset(_canonical(part) for part in lowered.split(","))
    lowered = re.sub(r"^(?:torch\.)?(?:optim\.)?", "", lowered)
    lowered = re.sub(r"backward\d*$", "", lowered)
    lowered = SAME_NAMES.get(lowered, lowered)
    if re.fullmatch(r"[a-z_]+s", lowered) and not lowered.endswith("ss"):
        lowered = lowered[:-1]
    return lowered


def _as_set(value):
    """A single name as the set of it, so that "a" names the same answer as ["a"]."""
    return frozenset([value]) if isinstance(value, str) else value


def same_answer(prediction, actual) -> bool:
    """Whether a prediction names the answer: equal, or equal once both are written the same way (_canonical)."""
    prediction, actual = _plain_value(prediction), _plain_value(actual)
    if isinstance(prediction, bool) != isinstance(actual, bool) and not isinstance(prediction, str):
        return False                    # 1 is not True, as a prediction
    try:
        if prediction == actual:
            return True
    except (TypeError, ValueError):
        pass
    try:
        mine, theirs = _canonical(prediction), _canonical(actual)
        return mine == theirs or _as_set(mine) == _as_set(theirs)
    except (TypeError, ValueError):
        return False



def not_solved(name: str, what: str, where: str = "") -> None:
    """The one "not solved yet" line, for a prediction or an exercise still left as `...`: what replaces the `...`
    and, where the cell has more than one, in which line (e.g. "my_answer = ...")."""
    if where:
        print(_("? {name}: not solved yet. Replace ... in `{where}` with {what} and run the cell again.").format(
            name=name, where=where, what=what))
    else:
        print(_("? {name}: not solved yet. Replace ... with {what} and run the cell again.").format(name=name, what=what))


def hidden(encoded: str, namespace=None, local=None) -> str:
    """check()'s `why=` feedback as a student copy carries it, out of sight until the cell prints it.

    A release (gan_lessons.release) replaces `why=<expression>` with `why=hidden("<base64 of the expression's source>",
    globals(), locals())`; this decodes the source and evaluates it in the cell's namespace, so a plain string
    and an f-string naming the cell's variables give the same text as in the answered lesson."""
    source = base64.b64decode(encoded.encode("ascii")).decode("utf-8")
    return eval(f"(\n{source}\n)", {} if namespace is None else namespace, local)  # our own text, not input


def describe(**tensors) -> None:
    """One row per tensor: requires_grad, is_leaf, grad_fn and .grad (non-leaves say why they have none)."""
    print(f"{tr('name'):<10}{'requires_grad':<15}{'is_leaf':<9}{'grad_fn':<18}grad")
    for name, t in tensors.items():
        fn = type(t.grad_fn).__name__ if t.grad_fn is not None else "None"
        if t.is_leaf or t.retains_grad:
            grad = "None" if t.grad is None else str(rounded(t.grad))
        else:
            grad = _("(not kept: non-leaf)")
        print(f"{name:<10}{str(t.requires_grad):<15}{str(t.is_leaf):<9}{fn:<18}{grad}")


def rounded(t: torch.Tensor, digits: int = 4):
    """A tensor as nested lists of Python floats rounded to `digits`, for stable printing."""
    def walk(v):
        return [walk(x) for x in v] if isinstance(v, list) else round(v, digits)
    return walk(t.detach().cpu().double().tolist())


def headline(message: str) -> str:
    """An error message's first clause, whole: what a table cell can hold without cutting a word."""
    return re.split(r": \[|\. |\.$", message.strip(), maxsplit=1)[0]


def show_source(*objects) -> None:
    """Show each function's or class's source as a Python block, its comments and docstrings in the lesson's
    language (the code itself is the same in every language)."""
    import inspect

    from IPython.display import Markdown, display
    for obj in objects:
        display(Markdown(f"```python\n{source_in_language(inspect.getsource(obj))}```"))

