"""Each lesson's text source and its notebook are a jupytext pair (tools/build_notebook.py): the source is exactly
what jupytext writes for the committed notebook, `jupytext --sync` carries an edit from either side to the other, and a
source opened as a notebook runs (its setup cell is the real one)."""
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import build_notebook as bn  # noqa: E402

pytestmark = pytest.mark.slow

SOURCES = bn.all_sources("en") + bn.all_sources("zh")


def _id(path):
    return path.relative_to(ROOT / "notebooks").as_posix()


@pytest.mark.parametrize("source", SOURCES, ids=_id)
def test_the_source_is_what_jupytext_writes_for_its_notebook(source):
    text = source.read_text(encoding="utf-8")
    notebook = nbformat.read(bn.notebook_of(source), as_version=4)
    assert notebook.metadata.get("jupytext") == bn.PAIRING, "the notebook is not paired with its source"
    assert jupytext.reads(text, fmt="py:percent").metadata["jupytext"]["formats"] == bn.PAIRING["formats"]
    synced = bn.source_text(notebook)                  # what syncing the notebook would write
    assert _cells(synced) == _cells(text), "the notebook and its source differ: rebuild or sync the pair"
    assert _cells(jupytext.writes(jupytext.reads(text, fmt="py:percent"), fmt="py:percent")) == _cells(text)
    assert synced == text, "the source is not byte for byte what jupytext writes: python tools/build_notebook.py " \
                           "--export " + bn.notebook_of(source).relative_to(ROOT).as_posix()


@pytest.mark.parametrize("source", SOURCES, ids=_id)
def test_jupytext_sync_after_a_save_in_jupyterlab_leaves_the_source_as_it_is(source, tmp_path):
    """JupyterLab saves a notebook with its cell metadata sorted (`reveals` before `tags`); `jupytext --sync` then
    writes the source from it: the same bytes as the committed source (a regex with Chinese in it stays as
    jupytext writes it, with \\u escapes)."""
    from jupytext.cli import jupytext as jupytext_cli
    nb_path, py_path = _pair(tmp_path, source)
    nbformat.write(nbformat.read(nb_path, as_version=4), nb_path)       # saved again, as an editor saves it
    jupytext_cli(["--sync", "--quiet", str(nb_path)])
    assert py_path.read_text(encoding="utf-8") == source.read_text(encoding="utf-8")


def _cells(text):
    return [(c.cell_type, c.source, bn.kept(c.metadata)) for c in jupytext.reads(text, fmt="py:percent").cells]


def _pair(tmp_path, source):
    """The pair copied into a folder of the same layout (NN.ipynb beside src/NN.py)."""
    (tmp_path / "src").mkdir()
    nb, py = tmp_path / bn.notebook_of(source).name, tmp_path / "src" / source.name
    shutil.copy(bn.notebook_of(source), nb)
    shutil.copy(source, py)
    return nb, py


def _sync(path):
    done = subprocess.run([sys.executable, "-m", "jupytext", "--sync", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_an_edit_on_either_side_reaches_the_other(tmp_path):
    source = bn.all_sources("en")[0]
    nb_path, py_path = _pair(tmp_path, source)
    before = nbformat.read(nb_path, as_version=4)
    # the source edited: the notebook gets the new text, and keeps the outputs of the cells that did not change
    text = py_path.read_text(encoding="utf-8")
    py_path.write_text(text.replace("## 1 · Leaves and non-leaves", "## 1 · Leaves, and what is not one"), encoding="utf-8")
    _sync(py_path)
    after = nbformat.read(nb_path, as_version=4)
    assert any(c.source.startswith("## 1 · Leaves, and what is not one") for c in after.cells)
    assert [c.get("outputs") for c in after.cells if c.cell_type == "code"] == \
           [c.get("outputs") for c in before.cells if c.cell_type == "code"]
    # the notebook edited: the source gets the new text
    last_prose = [c for c in after.cells if c.cell_type == "markdown"][-1]
    last_prose.source += "\n\nOne more line, written in the notebook."
    nbformat.write(after, nb_path)
    _sync(nb_path)
    assert "# One more line, written in the notebook." in py_path.read_text(encoding="utf-8")


@pytest.mark.parametrize("source", [bn.all_sources("en")[0], bn.all_sources("zh")[0]], ids=_id)
def test_a_source_opened_as_a_notebook_runs(source, tmp_path):
    """The first code cells of a source, read as a notebook the way JupyterLab opens it, run in a fresh kernel:
    the setup cell is real, so the lesson's own code finds torch and the helpers."""
    nb = jupytext.read(source)
    code = [c for c in nb.cells if c.cell_type == "code"][:3]
    assert "setup(seed=0" in code[0].source
    nb.cells = code
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(bn.notebook_of(source).parent)}}).execute()
    assert not [o for c in nb.cells for o in c.outputs if o.output_type == "error"]
