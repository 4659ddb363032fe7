"""Authoring aid: turn a jupytext percent script into a lesson notebook, with the shared setup cell and slides.

The line `#SETUP` becomes the shared setup cell (gan_lessons.lesson.SETUP_CELL). Every cell gets slide
metadata for jupyterlab-rise (see slide_type).

    python tools/build_notebook.py SRC.py notebooks/NN_name.ipynb     (needs jupytext)
    jupyter nbconvert --to notebook --execute --inplace notebooks/NN_name.ipynb
    python tools/build_notebook.py --slides notebooks/*.ipynb          (re-apply slide metadata and the kernelspec)"""
import sys

import nbformat

from gan_lessons.lesson import SETUP_CELL

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def slide_type(cell) -> str:
    """Titles and sections open a slide; the setup cell is skipped in a talk; the rest follows on."""
    text = cell.source.lstrip()
    if cell.cell_type == "markdown" and text.startswith(("# ", "## ")):
        return "slide"
    if cell.cell_type == "code" and text == SETUP_CELL:
        return "skip"
    return "-"


def add_slides(nb):
    """Slide metadata on every cell, and the kernelspec JupyterLab writes when it opens the notebook (ipykernel's
    own), so that opening a lesson does not mark it modified."""
    for cell in nb.cells:
        cell.metadata["slideshow"] = {"slide_type": slide_type(cell)}
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    return nb


def build(src, dst):
    import jupytext
    nb = jupytext.read(src, fmt="py:percent")
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.strip() == "#SETUP":
            cell.source = SETUP_CELL
        cell.metadata.pop("lines_to_next_cell", None)
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    nbformat.write(add_slides(nb), dst)


if __name__ == "__main__":
    if sys.argv[1] == "--slides":
        for path in sys.argv[2:]:
            nbformat.write(add_slides(nbformat.read(path, as_version=4)), path)
    else:
        build(sys.argv[1], sys.argv[2])
