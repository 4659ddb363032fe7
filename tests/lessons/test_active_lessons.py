"""Students predict and build in every lesson.

- A predict-then-check question is a code cell with a `prediction = answer  # SOLUTION: question` line. Its cell is
  tagged `predict` and lists, in its metadata `reveals`, regexes for what would give the answer away (the answer
  put in words, the number it measures). It is asked in its own section, never in the final Exercises; and no cell
  above it, in the lesson (text, code and printed outputs) or in the student copy, matches any of them. Each regex
  must match the answer where it is shown (the cell's own output, or a cell below), so a regex that matches nothing
  cannot pass the check by being empty.
- Every lesson has a build exercise: a reference body of at least 5 lines between nbgrader's solution markers.
- Every lesson fits its slot, measured: a careful student's walkthrough of its student copy
  (benchmarks/walkthrough.py, at the pace it declares, with its cells' measured run times) takes at most 60 minutes,
  a double slot at most 100; the results file is up to date with the lessons, and the instructor notes and the
  README give its minutes."""
import difflib
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

from gan_lessons import release

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))   # the Chinese edition, held alike
# check()'s verdict on a right prediction, and the sections no prediction belongs in, by language
RIGHT = {"en": "(right)", "zh": "（对）"}
NOT_HERE = {"en": ("Exercises", "Summary"), "zh": ("练习", "小结")}

PREDICTION = re.compile(r"^prediction\w*\s*=.*# SOLUTION\b", re.M)


def _outputs(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif "data" in out:
            parts += [out["data"][k] for k in ("text/plain", "text/markdown", "text/html") if k in out["data"]]
    return "\n".join("".join(p) if isinstance(p, list) else p for p in parts)


def _text(cell, outputs=True) -> str:
    return cell.source + ("\n" + _outputs(cell) if outputs and cell.cell_type == "code" else "")


def _section(cells, i) -> str:
    """The `## ` heading the cell i sits under."""
    for cell in reversed(cells[:i]):
        if cell.cell_type == "markdown":
            m = re.match(r"## (.*)", cell.source)
            if m:
                return m[1]
    return ""


def _predictions(nb):
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and PREDICTION.search(c.source)]


def _matches(regexes, text):
    return [r for r in regexes if re.search(r, text, re.I)]


@pytest.fixture(params=NOTEBOOKS + ZH_NOTEBOOKS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def lesson(request):
    path = request.param
    return (path.relative_to(ROOT / "notebooks").as_posix(), nbformat.read(path, as_version=4),
            nbformat.read(path.parent / "student" / path.name, as_version=4))   # nbgrader's release (test_student.py)


def _lang(name):
    return "zh" if name.startswith("zh/") else "en"


def test_every_prediction_is_tagged_and_says_what_would_reveal_it(lesson):
    name, nb, _ = lesson
    tagged = [i for i, c in enumerate(nb.cells) if "predict" in c.metadata.get("tags", [])]
    assert tagged == _predictions(nb), f"{name}: cells with a `prediction = ...  # SOLUTION` line must be " \
                                       f"exactly the cells tagged `predict` ({_predictions(nb)} vs {tagged})"
    for i in tagged:
        reveals = nb.cells[i].metadata.get("reveals")
        assert reveals and all(isinstance(r, str) and re.compile(r) for r in reveals), \
            f"{name}, cell {i}: a prediction needs `reveals`, regexes for what would give its answer away"


def test_predictions_are_asked_in_their_section_and_answered_right(lesson):
    name, nb, _ = lesson
    for i in _predictions(nb):
        section = _section(nb.cells, i)
        assert section and not section.startswith(NOT_HERE[_lang(name)]), \
            f"{name}, cell {i}: a prediction in '{section}'; ask it in the section that measures its answer"
        assert RIGHT[_lang(name)] in _outputs(nb.cells[i]), f"{name}, cell {i}: the lesson's own answer is not judged right"


def _answers_ahead(nb, i, lang) -> set:
    """The cells above prediction i that a student meets after it: for a prediction in a side road ("Going
    further", after the exercises), the exercises' answers (the answered lesson shows them solved, the student copy
    as stubs) and the cells tagged read-after-exercises (the student copy moves them to the end)."""
    if not _section(nb.cells, i).startswith(release.FURTHER[lang][3:]):
        return set()
    exercises = max(j for j, c in enumerate(nb.cells[:i]) if c.cell_type == "markdown"
                    and c.source.startswith("## " + NOT_HERE[lang][0]))
    return {j for j, c in enumerate(nb.cells[:i]) if j > exercises or release.LATER in c.metadata.get("tags", [])}


def test_no_cell_above_a_prediction_answers_it(lesson):
    name, nb, copy = lesson
    for i in _predictions(nb):
        reveals = nb.cells[i].metadata["reveals"]
        ahead = _answers_ahead(nb, i, _lang(name))
        for j, cell in enumerate(nb.cells[:i]):
            hit = [] if j in ahead else _matches(reveals, _text(cell))
            assert not hit, f"{name}: cell {j} gives away the answer to the prediction in cell {i} ({hit})"
        below = "\n".join([_outputs(nb.cells[i])] + [_text(c) for c in nb.cells[i + 1:]])
        unseen = [r for r in reveals if not re.search(r, below, re.I)]
        assert not unseen, f"{name}, cell {i}: `reveals` {unseen} match nothing where the answer is shown"
    ids = [c.id for c in nb.cells]
    for i in _predictions(nb):
        k = [c.id for c in copy.cells].index(ids[i])
        reveals = nb.cells[i].metadata["reveals"]
        for j, cell in enumerate(copy.cells[:k + 1]):
            hit = _matches(reveals, cell.source)
            assert not hit, f"student copy of {name}: cell {j} gives away the answer to the prediction in cell {k}"


def test_the_check_can_fail():
    """A cell above that states the answer is caught (the check above is not vacuous)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("## 1 · Leaves\n\n**Why.** x"),
                nbformat.v4.new_markdown_cell("A detached tensor is a leaf."),
                nbformat.v4.new_code_cell("prediction = True  # SOLUTION: is x.detach() a leaf?",
                                          metadata={"tags": ["predict"], "reveals": [r"detached tensor is a leaf"]})]
    assert _predictions(nb) == [2]
    assert _matches(nb.cells[2].metadata["reveals"], _text(nb.cells[1]))


def test_every_lesson_has_a_build_exercise_with_a_whole_body(lesson):
    name, nb, _ = lesson
    blocks = [m.group() for c in nb.cells if c.cell_type == "code" for m in release.SOLUTION_BLOCK.finditer(c.source)]
    lengths = [len([x for x in b.splitlines()[1:-1] if x.strip()]) for b in blocks]
    assert any(n >= 5 for n in lengths), f"{name}: no build exercise with 5+ reference lines ({lengths})"


# Lessons measured over their slot, each until it is cut or split: the test fails when one of them fits, or another
# does not. None today.
OVER_THE_SLOT: set = set()


def _walkthrough():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import walkthrough
    return walkthrough


def test_the_walkthrough_results_are_up_to_date_with_the_lessons():
    """Every part but the run times is recomputed from the notebooks: a lesson edited since it was measured fails
    here, and `python benchmarks/walkthrough.py` (or `--run`, for a changed code cell) brings the file up to date."""
    walkthrough = _walkthrough()
    results = json.loads(walkthrough.latest().read_text())
    pace = walkthrough.Pace(**results["pace"])
    for lesson in walkthrough.lessons():
        assert not walkthrough.untimed(lesson, results["run_s"][lesson]), f"{lesson}: code cells without a run time"
        parts = walkthrough.walk(lesson, results["run_s"][lesson], pace)
        assert {k: v.rounded() for k, v in parts.items()} == results["lessons"][lesson], f"{lesson} changed"


def test_every_lesson_fits_its_slot_by_the_measured_walkthrough_and_the_notes_say_so():
    walkthrough = _walkthrough()
    results = json.loads(walkthrough.latest().read_text())
    minutes = {lesson: round(parts["slot"]["total"]) for lesson, parts in results["lessons"].items()}
    over = {lesson for lesson, m in minutes.items() if m > walkthrough.limit(lesson)}
    assert over == OVER_THE_SLOT, {lesson: minutes[lesson] for lesson in over ^ OVER_THE_SLOT}
    notes = (ROOT / "notebooks" / "README.md").read_text()
    rows = dict(re.findall(r"^\| \d+ \| `(\d\d)_\w+\.ipynb` \| (\d+) min\b", notes, re.M))
    assert {k: int(v) for k, v in rows.items()} == minutes, "the instructor notes' minutes are the measured ones"
    assert all(f"| `{lesson}_" in notes and "double slot" in notes.split(f"| `{lesson}_", 1)[1].split("\n")[0]
               for lesson in walkthrough.DOUBLE), "a double slot says so"
    readme = (ROOT / "README.md").read_text()
    single = [m for lesson, m in minutes.items() if lesson not in walkthrough.DOUBLE]
    assert f"{min(single)} to {max(single)} minutes" in readme


TRUE_FALSE = re.compile(r"^prediction\w*\s*=\s*(True|False)\s*# SOLUTION\b", re.M)
ANSWER = re.compile(r"^prediction\w*\s*=\s*(.+?)\s*# SOLUTION\b", re.M)


def test_true_and_false_answers_are_balanced(lesson):
    """A student who answers True every time must not pass: at most 60% of a lesson's True/False answers are True."""
    name, nb, _ = lesson
    answers = [m[1] for c in nb.cells if c.cell_type == "code" for m in TRUE_FALSE.finditer(c.source)]
    if answers:
        share = answers.count("True") / len(answers)
        assert share <= 0.6, f"{name}: {answers.count('True')} of {len(answers)} True/False answers are True"


# A True/False question asks whether something happens (raises, changes, saves), never whether it does not: a
# student who knows the fact can answer a negation wrong. These words ask about an absence.
NEGATED = {"en": re.compile(r"\b(skips?|without|stays?|still|unchanged|as it was|allows?|not|never|no longer|"
                            r"remains?|fails? to)\b|\bruns?\?", re.I),
           "zh": re.compile(r"不再|还有|还和|仍然|保持不变|正常运行|能运行|允许|跳过|没有")}
TRUE_FALSE_QUESTION = re.compile(r"^prediction\w*\s*=\s*(?:True|False)\s*# SOLUTION:?(.*)$", re.M)


def test_no_true_false_question_is_asked_as_a_negation(lesson):
    name, nb, _ = lesson
    for cell in nb.cells:
        for question in TRUE_FALSE_QUESTION.findall(cell.source) if cell.cell_type == "code" else []:
            hit = NEGATED[_lang(name)].search(question)
            assert not hit, f"{name}: a True/False question asked as a negation ({hit[0]!r}): {question.strip()}"


def test_the_negation_check_can_fail():
    assert NEGATED["en"].search(" with D frozen, does D's first Conv layer skip saving its input? (True/False)")
    assert NEGATED["en"].search(" does r1_loss(retain_graph=False).backward() run?")
    assert NEGATED["zh"].search(" 冻结 D 之后，D 的第一个 Conv 层就不再为反向传播保存它的输入了吗？")
    assert not NEGATED["en"].search(" does r1_loss(retain_graph=False).backward() raise? (True/False)")


def _shown_forms(value) -> list:
    """The ways a lesson's output would show an answer: a node's name as itself, a shape or list as a list or a
    tuple. (Other names are the question's choices, which a lesson may show.)"""
    if isinstance(value, str):
        return [value] if re.fullmatch(r"\w*Backward\d*", value) else []
    if isinstance(value, (list, tuple)) and len(value) >= 2:
        inner = ", ".join(map(str, value))
        return [f"[{inner}]", f"({inner})"]
    return []


def test_no_output_above_a_prediction_shows_its_answer_by_value(lesson):
    """Beside the `reveals` phrases: the answer itself (a node's or optimizer's name, a shape, a list of values)
    printed by a cell above the question."""
    name, nb, _ = lesson
    for i in _predictions(nb):
        m = ANSWER.search(nb.cells[i].source)
        try:
            value = eval(m[1], {"torch": __import__("torch")})     # the answer as the lesson writes it
        except Exception:
            continue
        forms = _shown_forms(value)
        for j, cell in enumerate(nb.cells[:i]):
            shown = [f for f in forms if cell.cell_type == "code" and f in _outputs(cell)]
            assert not shown, f"{name}: the output of cell {j} shows {shown}, the answer to the prediction in cell {i}"


def _code_lines(text) -> list:
    """Code as lines, each with its whitespace runs made one space, comments and blank lines aside."""
    lines = [re.sub(r"\s+", " ", line.split("#")[0]).strip() for line in text.splitlines()]
    return [line for line in lines if line]


FIX_IT = re.compile(r"^#+ (Fix it|动手修复)\b", re.M)     # a build that fixes a listing shown above it, by design
COPIED = 0.8     # a build's reference and the closest stretch of code above it: difflib's ratio, at most this


def _fixes_a_listing(cells, i) -> bool:
    """Whether the build in cell i sits under a "Fix it" heading."""
    heading = next((c.source for c in reversed(cells[:i]) if c.cell_type == "markdown" and
                    re.search(r"^#+ ", c.source, re.M)), "")
    return bool(FIX_IT.search(heading))


def _closest_stretch(mine, cells) -> tuple:
    """The stretch of code the student has seen in `cells` (their code, an earlier build's reference aside since
    the student writes it, and what they print, a listing shown with show_source included) that is most like
    `mine`, as (difflib's ratio, the stretch): each window of as many lines as `mine`."""
    best = (0.0, [])
    text = "\n".join(mine)
    for cell in cells:
        if cell.cell_type != "code":
            continue
        for seen in (release.SOLUTION_BLOCK.sub("", cell.source), _outputs(cell)):
            lines = _code_lines(seen)
            for start in range(max(1, len(lines) - len(mine) + 1)):
                window = lines[start:start + len(mine)]
                ratio = difflib.SequenceMatcher(None, text, "\n".join(window), autojunk=False).ratio()
                best = max(best, (ratio, window))
    return best


def test_no_build_is_copied_from_the_code_above_it(lesson):
    """A build asks for code the student has not just been shown: no stretch of the code above it (as the student
    sees it) is as close to its reference as a copy with a few names changed (difflib's ratio above COPIED). Builds
    that fix a listing shown above them ("Fix it") are left out, and so is lesson 13, whose labs all do."""
    name, nb, _ = lesson
    if name.endswith("13_debugging_lab.ipynb"):
        return
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or _fixes_a_listing(nb.cells, i):
            continue
        for block in release.SOLUTION_BLOCK.finditer(cell.source):
            mine = _code_lines("\n".join(block.group().splitlines()[1:-1]))
            ratio, stretch = _closest_stretch(mine, nb.cells[:i])
            assert len(mine) < 4 or ratio <= COPIED, \
                f"{name}, cell {i}: the build's reference is {ratio:.2f} like code shown above it ({stretch[:2]})"


def test_the_balance_value_and_copy_checks_can_fail():
    nb = nbformat.v4.new_notebook()
    body = "\n".join(f"    value_number_{k} = compute_something_long(argument_{k})" for k in range(4))
    nb.cells = [nbformat.v4.new_code_cell(body, outputs=[nbformat.v4.new_output("stream", text="TanhBackward0\n")]),
                nbformat.v4.new_code_cell('prediction = "TanhBackward0"  # SOLUTION: which node?'),
                nbformat.v4.new_code_cell("prediction = True  # SOLUTION: a?"),
                nbformat.v4.new_code_cell("prediction_b = True  # SOLUTION: b?"),
                nbformat.v4.new_code_cell(f"def f():\n    ### BEGIN SOLUTION\n{body}\n    ### END SOLUTION\n")]
    with pytest.raises(AssertionError, match="True/False answers are True"):
        test_true_and_false_answers_are_balanced(("x.ipynb", nb, nb))
    with pytest.raises(AssertionError, match="shows"):
        test_no_output_above_a_prediction_shows_its_answer_by_value(("x.ipynb", nb, nb))
    with pytest.raises(AssertionError, match="like code shown above it"):
        test_no_build_is_copied_from_the_code_above_it(("x.ipynb", nb, nb))


def test_the_copy_check_sees_a_near_copy_and_not_the_student_s_own_work():
    shown = "loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2\nopt_D.zero_grad()\nloss_D.backward()\nopt_D.step()"
    near = ("    loss_D = (bce(D(x_chunk), 1) + bce(D(x_fake), 0)) / 2\n    opt_D.zero_grad()\n    loss_D.backward()\n"
            "    opt_D.step()\n    return loss_D")
    build = f"def f():\n    ### BEGIN SOLUTION\n{near}\n    ### END SOLUTION\n"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(shown), nbformat.v4.new_code_cell(build)]
    with pytest.raises(AssertionError, match="the build's reference is 0.89 like"):
        test_no_build_is_copied_from_the_code_above_it(("x.ipynb", nb, nb))
    nb.cells[0] = nbformat.v4.new_code_cell(build.replace("def f", "def g"))      # an earlier build: the student's
    test_no_build_is_copied_from_the_code_above_it(("x.ipynb", nb, nb))
    nb.cells = [nbformat.v4.new_code_cell(shown), nbformat.v4.new_markdown_cell("### Fix it: the listing above"),
                nbformat.v4.new_code_cell(build)]
    test_no_build_is_copied_from_the_code_above_it(("x.ipynb", nb, nb))
    listing = nbformat.v4.new_code_cell("show_source(d_step)", outputs=[nbformat.v4.new_output(
        "display_data", data={"text/markdown": f"```python\ndef d_step():\n{near}\n```"})])
    nb.cells = [listing, nbformat.v4.new_code_cell(build)]                        # a listing printed by a cell
    with pytest.raises(AssertionError, match="like code shown above it"):
        test_no_build_is_copied_from_the_code_above_it(("x.ipynb", nb, nb))
