"""Every lesson notebook follows the conventions: shared setup cell, skeleton, committed executed."""
import json
from pathlib import Path

import pytest

from gan_lessons.lesson import SETUP_CELL

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _cells(path):
    return json.loads(path.read_text())["cells"]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no lesson notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_setup_cell_is_the_shared_template(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    assert "".join(code[0]["source"]) == SETUP_CELL


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_skeleton(path):
    cells = _cells(path)
    first, text = "".join(cells[0]["source"]), ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    assert cells[0]["cell_type"] == "markdown" and first.startswith("# Lesson") and "**Goal.**" in first
    assert any("## Summary" in t for t in text) and any("## Exercises" in t for t in text)
    sections = [t for t in text if t.startswith("## ") and not t.startswith(("## Summary", "## Exercises"))]
    assert sections and all("**Why" in t for t in sections), "every section opens with why"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_executed_and_lean(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    assert all(c["execution_count"] is not None for c in code), "commit the notebook executed"
    assert not any(o.get("output_type") == "error" for c in code for o in c["outputs"])
    assert path.stat().st_size < 2_000_000


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbval_markers_are_spelled_so_nbval_sees_them(path):
    """nbval only honours a marker alone on its comment line; `# NBVAL_IGNORE_OUTPUT (why)` is silently ignored."""
    for cell in _cells(path):
        for line in "".join(cell["source"]).splitlines():
            if "NBVAL_" in line and line.strip().startswith("#"):
                assert line.strip().lstrip("#").strip() in ("NBVAL_IGNORE_OUTPUT", "NBVAL_CHECK_OUTPUT", "NBVAL_SKIP")
