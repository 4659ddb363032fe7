"""Classroom mode: slide metadata, student copies that still run, instructor notes."""
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
import build_notebook  # noqa: E402
import student  # noqa: E402


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_cell_carries_slide_metadata_from_the_template(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        assert cell.metadata["slideshow"]["slide_type"] == build_notebook.slide_type(cell)
    assert nb.cells[0].metadata["slideshow"]["slide_type"] == "slide"


def test_blanking_keeps_the_code_and_removes_only_answers():
    assert student.blank('prediction = "freed"  # SOLUTION: which?') == "prediction = ...  # SOLUTION: which?"
    assert student.blank("x = 3  # a comment") == "x = 3  # a comment"


def test_student_copy_runs_under_nbval_and_shows_not_solved_yet(tmp_path):
    source = ROOT / "notebooks" / "01_leaf_tensors.ipynb"
    student.student_copy(source, tmp_path)
    copy = tmp_path / source.name
    answers = sum(line.rstrip().endswith("# SOLUTION") or "# SOLUTION:" in line
                  for cell in nbformat.read(source, as_version=4).cells if cell.cell_type == "code"
                  for line in cell.source.splitlines())
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                             "--nbval-current-env", "-o", "addopts=", "-o", "testpaths=", str(copy)],
                            capture_output=True, text=True, cwd=ROOT / "notebooks")
    assert result.returncode == 0, result.stdout[-2000:]
    nb = nbformat.read(copy, as_version=4)
    NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert printed.count("not solved yet") == answers > 0
    assert "✓" not in printed and "✗" not in printed


def test_instructor_notes_cover_every_lesson():
    notes = (ROOT / "notebooks" / "README.md").read_text()
    for path in NOTEBOOKS:
        assert path.name in notes
    assert "make train" in notes and "jupyterlab-rise" in notes
