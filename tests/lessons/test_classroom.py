"""Classroom mode: slide metadata and instructor notes (student copies: tests/lessons/test_student.py)."""
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
import build_notebook  # noqa: E402


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_cell_carries_slide_metadata_from_the_template(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        assert cell.metadata["slideshow"]["slide_type"] == build_notebook.slide_type(cell)
    assert nb.cells[0].metadata["slideshow"]["slide_type"] == "slide"


def test_instructor_notes_cover_every_lesson():
    notes = (ROOT / "notebooks" / "README.md").read_text()
    for path in NOTEBOOKS:
        assert path.name in notes
    assert "make train" in notes and "jupyterlab-rise" in notes
