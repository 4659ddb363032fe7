"""Student copies of the lessons: every line marked `# SOLUTION` gets its answer replaced by `...`, and outputs
are cleared. A blanked exercise then prints "not solved yet" instead of failing.

    python tools/student.py [notebooks/*.ipynb] [--out build/student]"""
import argparse
import re
from pathlib import Path

import nbformat

SOLUTION = re.compile(r"^(?P<head>\s*[\w.\[\]]+\s*=\s*)(?P<answer>.+?)(?P<tail>\s*# SOLUTION\b.*)$", re.M)


def blank(source: str) -> str:
    return SOLUTION.sub(lambda m: f"{m['head']}...{m['tail']}", source)


def student_copy(path: Path, out: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    blanked = 0
    for cell in nb.cells:
        if cell.cell_type == "code":
            new = blank(cell.source)
            blanked += new != cell.source
            cell.source, cell.outputs, cell.execution_count = new, [], None
    nb.metadata.pop("widgets", None)
    out.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out / path.name)
    return blanked


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("notebooks", nargs="*", default=sorted(Path("notebooks").glob("[0-9][0-9]_*.ipynb")))
    p.add_argument("--out", default="build/student")
    a = p.parse_args(argv)
    for path in map(Path, a.notebooks):
        print(f"{path.name}: {student_copy(path, Path(a.out))} exercise cells blanked -> {a.out}/{path.name}")


if __name__ == "__main__":
    main()
