"""Each reference answer has one source: the package's reference is the code of its lesson's solution block, in both
editions (tools/build_notebook.py fills the block and its --check fails on drift); and a checker's known answers are
small edits of that reference (exercises.variants)."""
import shutil
import sys
from pathlib import Path

import pytest

from gan_lessons import exercises
from gan_lessons.exercises.variants import variant

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import build_notebook  # noqa: E402

SOURCES = build_notebook.all_sources("en") + build_notebook.all_sources("zh")


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_solution_block_is_the_code_of_its_reference(source):
    assert build_notebook.solutions(source) == []


def test_every_solution_block_of_a_function_has_one_reference():
    """No answer is written twice: every solution block that is a function's body, in every lesson, is filled from a
    reference in the package (a name written twice, as lesson 12's `_inplace`, from one reference per block)."""
    for source in build_notebook.all_sources("en"):
        references = exercises.SOLUTIONS.get(source.name[:2], {})
        names = [name for name, *_ in build_notebook.solution_blocks(source.read_text().splitlines())]
        for name in set(names):
            assert name in references, (source.name, name)
            listed = references[name]
            assert names.count(name) == (len(listed) if isinstance(listed, list) else 1), (source.name, name)


def test_every_lesson_with_references_names_them_in_both_editions():
    for lesson, references in exercises.SOLUTIONS.items():
        for lang in ("en", "zh"):
            source = next(p for p in build_notebook.all_sources(lang) if p.name.startswith(lesson))
            lines = source.read_text().splitlines()
            assert set(references) <= {name for name, *_ in build_notebook.solution_blocks(lines)}, source


def _edit(path, old, new):
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def test_drift_is_caught_and_a_rebuild_fills_the_block_from_the_reference(tmp_path):
    english = tmp_path / "02_graph_freeing_and_retain_graph.py"
    shutil.copy(ROOT / "notebooks" / "src" / english.name, english)
    original = english.read_text()
    _edit(english, "    c = model3(b.detach())          # l3 stops at model3", "    c = model3(b)")
    problems = build_notebook.solutions(english)
    assert len(problems) == 1 and "chain_step" in problems[0] and "reference_chain_step" in problems[0]
    _edit(english, "    c = model3(b)", "    c = model3(b.detach())")        # the code right, its comment lost
    assert len(build_notebook.solutions(english)) == 1, "the English block is the reference as it is, comments too"
    filled = build_notebook.solutions(english, fill=True)
    assert len(filled) == 1 and "filled" in filled[0]
    assert english.read_text() == original and build_notebook.solutions(english) == []

    chinese = tmp_path / "zh" / english.name
    chinese.parent.mkdir()
    shutil.copy(ROOT / "notebooks" / "zh" / "src" / english.name, chinese)
    _edit(chinese, "# l3 停在 model3", "# 另一句注释")                          # comments are the edition's own
    assert build_notebook.solutions(chinese, lang="zh") == []
    _edit(chinese, "    c = model3(b.detach())", "    c = model3(b)")
    assert len(build_notebook.solutions(chinese, lang="zh")) == 1
    filled = build_notebook.solutions(chinese, fill=True, lang="zh")
    assert "translate its comments" in filled[0] and build_notebook.solutions(chinese, lang="zh") == []
    assert "# l3 stops at model3" in chinese.read_text()


def _step(a, b):
    total = a + b
    total = total * 2
    for k in range(3):
        total = total + k
    return total


def test_variants_leave_out_move_and_rewrite_one_named_statement():
    assert _step(1, 2) == 9
    assert variant(_step, drop="total = total * 2")(1, 2) == 6
    assert variant(_step, replace={"a + b": "a - b"})(1, 2) == 1
    assert variant(_step, move=("total = total * 2", "into the loop"))(1, 2) == 2 * (2 * (2 * 3 + 0) + 1) + 2
    with pytest.raises(UnboundLocalError):                  # doubled before it is made
        variant(_step, move=(["total = total * 2"], "total = a + b"))(1, 2)
    assert _step(1, 2) == 9                                 # the reference itself is left as it was


def _documented(a):
    """Its docstring stays first."""
    a = a + 1
    for _k in range(2):
        a = a * 2
    return a


def test_a_statement_moved_to_the_start_goes_after_the_docstring_and_before_the_loop_before_the_first_loop():
    assert _documented(1) == (1 + 1) * 2 * 2
    assert variant(_documented, move=("a = a * 2", "before the loop"))(1) == (1 + 1) * 2     # the loop is left empty
    first = variant(_documented, move=("a = a * 2", "at the start"))
    assert first(1) == 1 * 2 + 1 and first.__doc__ == _documented.__doc__
    assert variant(_documented, move=("a = a + 1", "at the end"))(1) == 1 * 2 * 2 + 1     # before the final return
    with pytest.raises(ValueError, match="no loop"):
        variant(_step_without_loop, move=("a = a + 1", "before the loop"))


def _step_without_loop(a):
    a = a + 1
    return a


@pytest.mark.parametrize("edit", [{"drop": "total = total * 3"}, {"replace": {"total + k": "k"}, "drop": "x = 1"},
                                  {"move": ("total = total * 2", "return 0")}])
def test_a_variant_that_does_not_name_exactly_one_place_fails_at_once(edit):
    with pytest.raises(ValueError, match="exactly one|no loop"):
        variant(_step, **edit)


def test_an_expression_found_twice_is_refused():
    with pytest.raises(ValueError, match="found 6 times"):
        variant(_step, replace={"total": "0"})
