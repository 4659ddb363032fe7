"""Authoring aid: turn a jupytext percent script into a lesson notebook.

The line `#SETUP` becomes the shared setup cell (gan_lessons.lesson.SETUP_CELL).
Usage: python tools/build_notebook.py SRC.py notebooks/NN_name.ipynb   (needs jupytext)
Then execute it: jupyter nbconvert --to notebook --execute --inplace notebooks/NN_name.ipynb"""
import sys

import jupytext
import nbformat

from gan_lessons.lesson import SETUP_CELL


def build(src, dst):
    nb = jupytext.read(src, fmt="py:percent")
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.strip() == "#SETUP":
            cell.source = SETUP_CELL
        cell.metadata.pop("lines_to_next_cell", None)
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                   "language_info": {"name": "python"}}
    nbformat.write(nb, dst)


if __name__ == "__main__":
    build(sys.argv[1], sys.argv[2])
