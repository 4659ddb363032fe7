"""Student copies (tools/student.py, which runs nbgrader generate_assignment with the repository's configuration):
free of answers, still running, and committed up to date for Colab.

The committed copies in notebooks/student/ are outside tests/lessons/test_notebooks.py's glob (notebooks/NN_*.ipynb):
those checks are about the answered lessons (executed, outputs stored). The ones that make sense for a copy,
cleared and generated, are here; and pytest's `notebooks` testpath runs every committed copy under nbval."""
import ast
import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from gan_lessons.lesson import SETUP_CELLS, check, hidden

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted(
    (ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))        # English, then Chinese (notebooks/zh/)
# The headings a lesson's skeleton uses (tests/lessons/test_notebooks.py), by language.
HEADINGS = {"en": {"summary": "## Summary", "exercises": "## Exercises", "moved": "### Summary (read after the exercises)"},
            "zh": {"summary": "## 小结", "exercises": "## 练习", "moved": "### 小结（做完练习再读）"}}
from gan_lessons import release as student  # noqa: E402  (what the release does beyond nbgrader's own steps)

pytestmark = pytest.mark.slow

REGENERATE = "run `python tools/student.py`"


def _code(nb):
    return [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def _code_cells(nb):
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def _why_texts(source):
    """The literal text of every `why` feedback in a cell: strings, and the constant parts of f-strings."""
    tree = ast.parse(student._parseable(source))
    for expression in student._feedback(tree):
        for node in ast.walk(expression):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield node.value


@pytest.fixture(scope="module")
def copies():
    """Every lesson and its student copy, as written into the student/ folder beside it (links are made for that
    folder); the name says which edition, e.g. zh/01_leaf_tensors.ipynb."""
    return [(nbformat.read(p, as_version=4), nbformat.read(p.parent / "student" / p.name, as_version=4),
             p.relative_to(ROOT / "notebooks").as_posix()) for p in NOTEBOOKS]


def _lang(name):
    return "zh" if name.startswith("zh/") else "en"


def test_blanking_keeps_the_code_and_the_question_and_removes_the_answer():
    assert (student.blank('prediction = "freed"  # SOLUTION: which?')
            == "prediction = ...  # your answer: which?")
    assert student.blank("    p.x = (512, 1)  # SOLUTION") == "    p.x = ...  # your answer"
    assert student.blank("x = 3  # a comment") == "x = 3  # a comment"


def _moved(cell) -> bool:
    """A cell the release moved after the exercises (its id says so; the pointer left behind keeps the old id)."""
    return cell.id.startswith("student-later-")


def test_no_answer_is_left_in_a_student_copy(copies):
    solution_lines = why_texts = 0
    for answered, copy, name in copies:
        text = nbformat.writes(copy)
        assert "SOLUTION" not in text, f"{name}: the label SOLUTION is left in the student copy"
        cells = [c.source for c in copy.cells]
        by_id = {c.id: c for c in copy.cells}
        for i, source in _code(answered):
            for line in source.splitlines():
                m = student.SOLUTION.match(line)
                if m:
                    solution_lines += 1
                    question = m["question"].strip()
                    words = student.WORDS[_lang(name)]
                    blanked = f"{m['head']}...  # {words['answer']}{words['colon'] + question if question else ''}"
                    assert blanked in by_id[answered.cells[i].id].source.splitlines(), f"{name}, cell {i}: {line!r} not blanked"
            for literal in _why_texts(source):
                for piece in re.split(r"\s*\n\s*", literal):
                    if len(piece) > 20:
                        why_texts += 1
                        leaks = [j for j, c in enumerate(cells) if piece in c]
                        assert not leaks, f"{name}: the why= text {piece!r} is readable in cell(s) {leaks}"
        assert all(c.outputs == [] and c.execution_count is None for c in copy.cells if c.cell_type == "code")
        # the cells tagged read-after-exercises (verdict tables, summaries) state what the exercises ask: they come
        # after the exercises, and nothing before the exercises shows a table of verdicts
        tagged = [c.source for c in answered.cells if student.LATER in c.metadata.get("tags", [])]
        heads = HEADINGS[_lang(name)]
        assert any(t.startswith(heads["summary"]) for t in tagged), f"{name}: its summary is not tagged {student.LATER}"
        exercises = next(i for i, c in enumerate(copy.cells) if c.source.startswith(heads["exercises"]))
        before, after = copy.cells[:exercises], "\n".join(c.source for c in copy.cells[exercises:])
        for text in tagged:
            assert not any(text in c.source for c in before), f"{name}: {text[:60]!r} still comes before the exercises"
            assert text.split("\n", 1)[-1].strip() in after, f"{name}: {text[:60]!r} lost"
        assert not any(re.search(r"^\|.*\| on today's torch \|$", c.source, re.M) for c in before), name
        summary = [c.source for c in copy.cells if c.source.startswith(heads["moved"])]
        assert len(summary) == 1 and not any(heads["summary"] in c.source for c in copy.cells if not _moved(c))
    assert solution_lines > 20 and why_texts > 20  # the search above really searched


def test_a_student_copy_keeps_what_the_lessons_rely_on(copies):
    """tests/lessons/test_notebooks.py's conventions, where they apply to a cleared copy."""
    for answered, copy, name in copies:
        assert _code(copy)[0][1] == SETUP_CELLS[_lang(name)], f"{name}: the setup cell changed"
        moved = sum(student.LATER in c.metadata.get("tags", []) for c in answered.cells)
        assert len(copy.cells) == len(answered.cells) + moved   # each moved cell leaves a pointer in its place
        assert [c.cell_type for c in copy.cells if not _moved(c)] == [c.cell_type for c in answered.cells]
        # the moved cells stand together at the end, after the exercises and the side roads that follow them (a side
        # road's predictions are among what they answer)
        at = [i for i, c in enumerate(copy.cells) if _moved(c)]
        further = [i for i, c in enumerate(copy.cells) if c.source.startswith(student.FURTHER[_lang(name)])]
        assert at == list(range(len(copy.cells) - len(at), len(copy.cells))) and all(i < at[0] for i in further), name
        assert len({c.id for c in copy.cells}) == len(copy.cells)
        for cell in copy.cells:
            for target in re.findall(r"\]\(([^)#\s]+)", cell.source):
                if not target.startswith(("http://", "https://")):
                    folder = ROOT / "notebooks" / Path(name).parent / "student"
                    assert Path(os.path.normpath(folder / target)).exists(), f"{name}: link to a missing file from {folder}"


def test_a_hidden_why_prints_what_the_answered_cell_prints():
    answered = ('prediction = 2  # SOLUTION: how many?\nn = 2\n'
                'check("n", prediction, n, why=f"n is {n}: "\n      "two, as set above.")\n')
    copy = student.hide_feedback(student.blank(answered))
    assert "two, as set above" not in copy and "SOLUTION" not in copy and copy.startswith(student.HIDDEN_IMPORT)

    def printed(source):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(source, {"check": check})
        return out.getvalue()

    assert printed(copy.replace("prediction = ...", "prediction = 2")) == printed(answered)
    assert "why: n is 2: two, as set above." in printed(answered)
    assert "not solved yet" in printed(copy) and "why" not in printed(copy)


def test_hidden_round_trips_a_string_and_an_f_string():
    assert hidden(student.hide('"plain: ✓ ünïcode"')) == "plain: ✓ ünïcode"
    f_string = 'f"G has {count:,} " # a comment\n    "parameters."'
    assert hidden(student.hide(f_string), {"count": 12345}) == "G has 12,345 parameters."
    assert hidden(student.hide('f"{x + y}"'), {"x": 1}, {"y": 2}) == "3"


def test_student_copy_runs_and_each_test_cell_says_not_solved_yet():
    """An unsolved copy runs top to bottom (its test cells are tagged raises-exception, which JupyterLab's Run All,
    nbclient and nbval honour); every test cell prints the checker's "not solved yet" and then fails its assert, as
    nbgrader's autograder needs; no prediction gives its verdict or explanation away."""
    copy = ROOT / "notebooks" / "student" / "01_leaf_tensors.ipynb"
    nb = nbformat.read(copy, as_version=4)
    NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    tests = [c for c in nb.cells if student.TEST in c.metadata.get("tags", [])]
    assert len(tests) == 2
    for cell in tests:
        printed = "".join(o.get("text", "") for o in cell.outputs)
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert "not solved yet" in printed and "✓" not in printed and "✗" not in printed
        assert [e.ename for e in errors] == ["AssertionError"] and "not solved yet" in errors[0].evalue
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "why:" not in printed and "(right)" not in printed and "not quite" not in printed


def test_committed_student_copies_are_up_to_date():
    """notebooks/student/ and notebooks/zh/student/ are what Colab opens: each must be exactly what nbgrader's
    generate_assignment makes from today's lessons with the repository's configuration."""
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "student.py"), "--check"], capture_output=True,
                         text=True, cwd=ROOT)
    assert run.returncode == 0, (run.stdout + run.stderr)[-2000:]
    assert f"{len(NOTEBOOKS)} student copies match" in run.stdout


def test_a_solution_block_becomes_nbgraders_stub():
    from nbgrader.preprocessors import ClearSolutions
    answered = ("def f(x):\n    \"\"\"doc\"\"\"\n    ### BEGIN SOLUTION\n    y = x + 1\n    return y\n    ### END SOLUTION\n\n"
                "my_answer = f  # SOLUTION: point at f\n")
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"language": "python", "name": "python3",
                                                           "display_name": "Python 3"}})
    nb.cells = [nbformat.v4.new_code_cell(answered, metadata={"nbgrader": {
        "grade": False, "grade_id": "f_answer", "locked": False, "schema_version": 3, "solution": True, "task": False}})]
    student.release(nb)
    nb, _ = ClearSolutions().preprocess(nb, {})
    copy = nb.cells[0].source
    assert copy == ("def f(x):\n    \"\"\"doc\"\"\"\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\n"
                    "my_answer = ...  # your answer: point at f\n")
    with pytest.raises(NotImplementedError):
        namespace = {}
        exec(copy.replace("my_answer = ...", "my_answer = f"), namespace)
        namespace["f"](1)


def test_build_exercises_leave_the_whole_body_to_the_student(copies):
    """Every build exercise (a cell with nbgrader solution blocks: one block per function the student writes) holds
    at least 5 reference lines in all, and none of them is left in the copy (a line the lesson also teaches outside
    the block, such as `D.requires_grad_(False)`, may stay where it is taught)."""
    blocks = 0
    for answered, copy, name in copies:
        taught = "\n".join(student.SOLUTION_BLOCK.sub("", c.source) for c in answered.cells)
        text = "\n".join(c.source for c in copy.cells)
        for cell in answered.cells:
            lines = 0
            for m in student.SOLUTION_BLOCK.finditer(cell.source):
                body = [line for line in m.group().splitlines()[1:-1] if line.strip()]
                blocks += 1
                lines += len(body)
                leaked = [line.strip() for line in body
                          if len(line.strip()) > 12 and line.strip() in text and line.strip() not in taught]
                assert not leaked, f"{name}: reference lines left in the student copy: {leaked[:2]}"
            assert lines == 0 or lines >= 5, f"{name}: a build exercise with {lines} reference lines"
    assert blocks >= 1
