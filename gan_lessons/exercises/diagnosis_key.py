"""Lesson 07's predictions, with the doctor as the answer key: before a broken step runs under the doctor, the
student writes down what it will say, `dict(kind=..., tensor=..., line=...)`, and check_diagnosis compares each
part with the diagnosis the doctor then gives.

- kind: the diagnosis kind ("version", "freed", ...), in any case ("Freed" is "freed");
- tensor: the tensor it names: for "version" the stale tensor, or one it names as also stale (`D.weight` and
  `D.net[7].weight` name `D.net.7.weight.T`: the owner and the attribute, without the path between them or the view
  that Linear saves; an index written as the lessons write it, `D[2]`, is the path's `D.2`), for "freed" a tensor
  through which the second loss reaches the freed part;
- line: the line that changed the tensor ("version") or freed the graph ("freed"): its code (a call may leave out
  its arguments: `optimD.step` for `optimD.step()`) or its line number."""
import re

from gan_lessons.i18n import N_, _
from gan_lessons.lesson import not_solved

PARTS = {"kind": N_("the kind"), "tensor": N_("the tensor it names"), "line": N_("the line that changed or freed it")}
# A line as the doctor's facts show it, in either language: its number, then its code in backticks
# ("line 15 (`optimD.step()`)", "第 15 行（`optimD.step()`）").
_LINE = re.compile(r"(\d+)[^\d`]{0,6}`([^`]+)`")
_NAME = re.compile(r"[A-Za-z_][\w.]*")


def answer_key(diagnosis) -> dict:
    """What the doctor said, in the prediction's three parts: the kind, the tensors (any one is right), and the
    lines as (number, code) (any one is right: the op inside a module, or the user's line that called it); None
    where the diagnosis has no such part. Read from the facts whatever the language they are written in."""
    facts = diagnosis.facts
    tensors, lines = [], []
    if diagnosis.kind == "version":
        tensors = [str(facts.get("tensor", "")).split(" ")[0]] + str(facts.get("also stale", "")).split(", ")
        lines = _LINE.findall(str(facts.get("modified by", "")))
    elif diagnosis.kind == "freed":
        shared = str(facts.get("shared part", ""))
        quoted = re.findall(r"`([^`]+)`", shared)
        tensors = [q for q in quoted if _NAME.fullmatch(q)]      # the tensors it goes through, not code lines
        lines = _LINE.findall(str(facts.get("freed by", "")))
    else:
        where = facts.get("where")
        lines = [(where.line, where.code)] if hasattr(where, "line") else []
    return {"kind": diagnosis.kind, "tensor": [t for t in tensors if t] or None,
            "line": [(int(n), code) for n, code in lines] or None}


def _code(text: str) -> str:
    return re.sub(r"\s+", "", str(text).split("#")[0]).strip("`")


def _path(text: str) -> str:
    """A tensor's name as the doctor writes it: `D[2].weight` (how the lessons index a Sequential) is `D.2.weight`."""
    return re.sub(r"\[(\d+)\]", r".\1", _code(text))


def same_tensor(predicted, named: str) -> bool:
    """`D.weight` is `D.net.7.weight.T`: same owner, same attribute, the path between and `.T` left out."""
    want = [p for p in _path(predicted).split(".") if p]
    have = [p for p in named.split(".") if p]
    if have and have[-1] == "T":
        have = have[:-1]
    if want and want[-1] == "T":
        want = want[:-1]
    if not want or not have or want[0] != have[0] or want[-1] != have[-1]:
        return False
    rest = iter(have)
    return all(part in rest for part in want)          # in order: a subsequence of the full name


def same_line(predicted, line) -> bool:
    number, code = line
    if isinstance(predicted, str) and predicted.strip().isdigit():     # "18": the line number, written as text
        predicted = int(predicted)
    if isinstance(predicted, int) and not isinstance(predicted, bool):
        return predicted == number
    want, have = _code(predicted), _code(code)
    if want.endswith("()"):
        want = want[:-2]
    return bool(want) and (want == have or have.startswith(want + "(") or (want + "()") == have)


def check_diagnosis(prediction, diagnosis) -> bool:
    """Print a line per part of the prediction, right or not, with what the doctor said; True if all three are
    right. A prediction left as `...` prints "not solved yet"."""
    name = _("your prediction of the diagnosis")
    if prediction is ...:
        not_solved(name, "dict(kind=..., tensor=..., line=...)")
        return False
    if not isinstance(prediction, dict) or set(prediction) != set(PARTS):
        print(_("✗ {name}: write it as dict(kind=..., tensor=..., line=...), with the three parts (you wrote "
                "{prediction}).").format(name=name, prediction=repr(prediction)))
        return False
    key = answer_key(diagnosis)
    shown = {"kind": repr(key["kind"]),
             "tensor": " / ".join(key["tensor"] or []) or "-",
             "line": " / ".join(_("line {number} (`{code}`)").format(number=n, code=code)
                                for n, code in key["line"] or []) or "-"}
    rights = {"kind": str(prediction["kind"]).strip().strip("'\"").lower() == key["kind"],
              "tensor": any(same_tensor(prediction["tensor"], t) for t in key["tensor"] or []),
              "line": any(same_line(prediction["line"], line) for line in key["line"] or [])}
    for part, label in PARTS.items():
        verdict = _("right") if rights[part] else _("not quite: you predicted {prediction}").format(
            prediction=repr(prediction[part]))
        print(_("{mark} {question} -> {actual} ({verdict})").format(mark="✓" if rights[part] else "✗",
                                                                    question=_(label), actual=shown[part],
                                                                    verdict=verdict))
    return all(rights.values())
