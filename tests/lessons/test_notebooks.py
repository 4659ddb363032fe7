"""Every lesson notebook follows the conventions: shared setup cell, skeleton, committed executed."""
import json
import re
import sys
from pathlib import Path

import pytest

from gan_lessons import release
from gan_lessons.lesson import SETUP_CELLS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

LESSONS = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(LESSONS.glob("[0-9][0-9]_*.ipynb")) + sorted((LESSONS / "zh").glob("[0-9][0-9]_*.ipynb"))
# The skeleton's words, by language: title, goal, summary, exercises, and what opens every other section.
SKELETON = {"en": ("# Lesson", "**Goal.**", "## Summary", "## Exercises", "**Why"),
            "zh": ("# 第", "**目标**", "## 小结", "## 练习", None)}   # a Chinese section opens with its reason itself


def _lang(path):
    return "zh" if path.parent.name == "zh" else "en"


def _id(path):
    return path.relative_to(LESSONS).as_posix()


def _cells(path):
    return json.loads(path.read_text())["cells"]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no lesson notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_setup_cell_is_the_shared_template(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    assert "".join(code[0]["source"]) == SETUP_CELLS[_lang(path)]
    # nbval skips its output (the torch version, the device) by a tag, not by a comment the student reads
    assert "nbval-ignore-output" in code[0].get("metadata", {}).get("tags", []) and "NBVAL" not in code[0]["source"][0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_skeleton(path):
    cells = _cells(path)
    title, goal, summary, exercises, why = SKELETON[_lang(path)]
    first, text = "".join(cells[0]["source"]), ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    assert cells[0]["cell_type"] == "markdown" and first.startswith(title) and goal in first
    assert any(summary in t for t in text) and any(exercises in t for t in text)
    further = release.FURTHER[_lang(path)]
    sections = [t for t in text if t.startswith("## ") and not t.startswith((summary, exercises, further))]
    if why is None:                    # the reason, in prose, right under the heading (no fixed label)
        assert sections and all(re.match(r"## [^\n]*\n\s*\n?(?!```)[^\s#|]", t) for t in sections), \
            "every section opens with why"
    else:
        assert sections and all(why in t for t in sections), "every section opens with why"
    headings = [t.split("\n")[0] for t in text if t.startswith("## ")]
    side_roads = [i for i, h in enumerate(headings) if h.startswith(further)]
    assert all(i > headings.index(next(h for h in headings if h.startswith(exercises))) for i in side_roads), \
        f"the side roads ({further}) come after the exercises: they are outside the lesson's plan"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_committed_executed_and_lean(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    assert all(c["execution_count"] is not None for c in code), "commit the notebook executed"
    assert not any(o.get("output_type") == "error" for c in code for o in c["outputs"])
    assert path.stat().st_size < 2_000_000


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_nbval_markers_are_spelled_so_nbval_sees_them(path):
    """nbval only honours a marker alone on its comment line; `# NBVAL_IGNORE_OUTPUT (why)` is silently ignored."""
    for cell in _cells(path):
        for line in "".join(cell["source"]).splitlines():
            if "NBVAL_" in line and line.strip().startswith("#"):
                assert line.strip().lstrip("#").strip() in ("NBVAL_IGNORE_OUTPUT", "NBVAL_CHECK_OUTPUT", "NBVAL_SKIP")


def _stored_text(path):
    """Every stored output as text: streams, tracebacks and every text-like representation."""
    for cell in _cells(path):
        for out in cell.get("outputs", []):
            yield "".join(out.get("text", "")) + "\n".join(out.get("traceback", []))
            for mime, value in out.get("data", {}).items():
                if mime.startswith("text/") or mime.endswith(("+xml", "json")):
                    yield value if isinstance(value, str) else json.dumps(value)


MACHINE_PATH = re.compile(r"(/(work|tmp|root|home|Users|private/var)/|[A-Z]:\\[A-Za-z]|ipykernel_\d+|/site-packages/)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_stored_outputs_carry_no_machine_paths_cut_messages_or_frozen_bars(path):
    for text in _stored_text(path):
        assert not MACHINE_PATH.search(text), f"machine path in a stored output: {MACHINE_PATH.search(text)[0]!r}"
        assert not re.search(r"(?<!\d)0%\|", text), "a progress bar stored at 0%"
        assert not re.search(r"[A-Za-z](\.\.\.|…)(\s|$)", text), "a message cut mid-word"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_no_lesson_points_outside_the_repository(path):
    raw = path.read_text()
    assert "shared/seeds" not in raw and not re.search(r"00[0-4]_[0-9a-f]{16}", raw), "cite the seed, not its file"
    for cell in _cells(path):
        for target in re.findall(r"\]\(([^)#\s]+)", "".join(cell["source"])):
            if not target.startswith(("http://", "https://")):
                assert (path.parent / target).exists(), f"link to a missing file: {target}"


def test_every_seed_a_lesson_names_is_cited():
    named = {m for p in NOTEBOOKS for m in re.findall(r"(?:[Ss]eed|种子) ?(00[0-4])", p.read_text())}
    table = (NOTEBOOKS[0].parent / "README.md").read_text().split("## The seeds", 1)[-1]
    cited = set(re.findall(r"^\| (00[0-4]) \|", table, re.M))
    assert named and named <= cited


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_kernelspec_is_the_one_ipykernel_registers(path):
    """A differing kernelspec makes JupyterLab rewrite it, marking the notebook modified the moment it opens."""
    from ipykernel.kernelspec import get_kernel_dict

    spec = json.loads(path.read_text())["metadata"]["kernelspec"]
    assert spec["name"] == "python3" and spec["display_name"] == get_kernel_dict()["display_name"]


def test_every_lesson_has_a_text_source():
    import build_notebook
    for lang in ("en", "zh"):
        assert {p.stem for p in NOTEBOOKS if _lang(p) == lang} == {p.stem for p in build_notebook.all_sources(lang)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_notebook_matches_its_text_source(path):
    """notebooks/src/NN_name.py is what people edit: the committed notebook's cells (type, text, tags) are its cells."""
    import build_notebook
    problems = build_notebook.differences(build_notebook.source_of(path), path)
    assert not problems, "\n".join(problems) + "\nrebuild: python tools/build_notebook.py " + str(
        build_notebook.source_of(path).relative_to(build_notebook.ROOT))


def test_a_drifted_notebook_is_caught(tmp_path):
    """The check above can fail: one changed line, one extra cell and one changed tag are each reported."""
    import build_notebook
    import nbformat
    source, notebook = build_notebook.source_of(NOTEBOOKS[0]), NOTEBOOKS[0]
    nb = nbformat.read(notebook, as_version=4)
    for change in ("text", "cell", "tag"):
        drifted = nbformat.read(notebook, as_version=4)
        if change == "text":
            drifted.cells[3].source += "\n# edited in the notebook"
        elif change == "cell":
            drifted.cells.append(nbformat.v4.new_markdown_cell("a cell the source lacks"))
        else:
            drifted.cells[2].metadata["tags"] = ["raises-exception"]
        nbformat.write(drifted, tmp_path / notebook.name)
        assert build_notebook.differences(source, tmp_path / notebook.name), change
    nbformat.write(nb, tmp_path / notebook.name)
    assert not build_notebook.differences(source, tmp_path / notebook.name)
