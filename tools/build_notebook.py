"""Lessons are kept as jupytext percent scripts in notebooks/src/; this builds the committed notebooks from them.

The source is what people edit. In it, `# %% [markdown]` opens a prose cell (each line behind `# `), `# %%` a code
cell, `# %% tags=["..."]` a cell with tags; its first code cell is the shared setup cell
(gan_lessons.lesson.SETUP_CELL), as it is. The notebook gets slide metadata for jupyterlab-rise on every cell
(slide_type). Each source and its notebook are paired by jupytext (the source's header, `# ---` / `# jupyter:` ...
`# ---`, and the notebook's `jupytext` metadata: `formats: ipynb,src//py:percent`), so a source opens in JupyterLab
as a runnable notebook, and with jupytext's JupyterLab extension saving either side writes the other (or run
`jupytext --sync notebooks/NN_name.ipynb`). The header may also set Colab's runtime, `accelerator` and `colab`,
which the notebook carries: lesson 06 opens on a GPU runtime in Colab.

    python tools/build_notebook.py notebooks/src/05_gan_update_strategies.py    build and execute one lesson
    python tools/build_notebook.py --all                                         build and execute every lesson
    python tools/build_notebook.py --keep-outputs SRC...   build, keeping each unchanged code cell's stored output
                                                           (for prose edits; nbval in `make test` checks them)
    python tools/build_notebook.py --check [SRC...]        fail if a committed notebook differs from its source
    python tools/build_notebook.py --export NB.ipynb...    write a notebook's source (for a notebook made elsewhere)

A notebook cell keeps its id when its source is unchanged, so a rebuilt notebook's diff shows only what changed.

nbgrader's metadata comes from the source too (gan_lessons.release.grading_metadata): a code cell holding
`### BEGIN SOLUTION` is an autograded answer, a code cell tagged `test` (the checker's call and an `assert`) is a
locked test cell worth one point, named after its checker."""
import argparse
import ast
import difflib
import inspect
import io
import re
import sys
import textwrap
import tokenize
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from gan_lessons.lesson import SETUP_CELLS  # noqa: E402
from gan_lessons.release import add_grading  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"
SOURCES = NOTEBOOKS / "src"
# The Chinese edition mirrors the English one a folder down: notebooks/zh/src/NN_name.py -> notebooks/zh/NN_name.ipynb.
ZH_SOURCES = NOTEBOOKS / "zh" / "src"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
SETUP_MARK = "#SETUP"
SETUP_TAG = "nbval-ignore-output"      # the setup cell's output names the torch version and the device
# What jupytext keeps of a notebook: of a cell only its tags and, on a prediction, what would give its answer away
# (`reveals`: regexes that no cell above it may match; tests/lessons/test_active_lessons.py); of the notebook only what Colab
# reads to pick the runtime (`"accelerator": "GPU"`, `"colab": {"gpuType": "T4", ...}`), in a header where set.
KEPT = ("reveals", "tags")     # in the order a saved notebook holds them (sorted), as `jupytext --sync` writes them
NOTEBOOK_KEPT = ("accelerator", "colab")
# The pairing, as the notebook's `jupytext` metadata holds it and the source's header repeats it.
PAIRING = {"formats": "ipynb,src//py:percent",
           "notebook_metadata_filter": ",".join(("kernelspec", "jupytext", *NOTEBOOK_KEPT)) + ",-all",
           "cell_metadata_filter": "tags,reveals,-all"}
TIMEOUT = 600  # seconds per cell: a widget cell that hangs nbclient (jupyter/nbclient#312) ends as an error


def slide_type(cell) -> str:
    """Titles and sections open a slide; the setup cell is skipped in a talk; the rest follows on."""
    text = cell.source.lstrip()
    if cell.cell_type == "markdown" and text.startswith(("# ", "## ")):
        return "slide"
    if cell.cell_type == "code" and text in SETUP_CELLS.values():
        return "skip"
    return "-"


def add_slides(nb):
    """Slide metadata on every cell, and the kernelspec JupyterLab writes when it opens the notebook (ipykernel's
    own), so that opening a lesson does not mark it modified."""
    for cell in nb.cells:
        cell.metadata["slideshow"] = {"slide_type": slide_type(cell)}
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    return nb


def language_of(path: Path) -> str:
    """"zh" for the Chinese edition's sources and notebooks (under notebooks/zh/), else "en"."""
    path = Path(path).resolve()
    return "zh" if path.is_relative_to(NOTEBOOKS) and "zh" in path.relative_to(NOTEBOOKS).parts else "en"


def source_of(notebook: Path) -> Path:
    return Path(notebook).resolve().parent / "src" / (Path(notebook).stem + ".py")


def notebook_of(source: Path) -> Path:
    return Path(source).resolve().parents[1] / (Path(source).stem + ".ipynb")


def cells(source: Path) -> list:
    """The notebook cells a source stands for: type, text and tags, the setup cell expanded."""
    import jupytext
    out = []
    for cell in jupytext.read(source, fmt="py:percent").cells:
        cell.metadata = kept(cell.metadata)
        if cell.cell_type == "code" and cell.source.strip() == SETUP_MARK:
            cell.source = SETUP_CELLS[language_of(source)]          # the placeholder of older sources
        if cell.source == SETUP_CELLS[language_of(source)] and SETUP_TAG not in cell.metadata.get("tags", []):
            cell.metadata["tags"] = [*cell.metadata.get("tags", []), SETUP_TAG]
        out.append(cell)
    return out


def kept(metadata) -> dict:
    """The part of a cell's metadata a source holds: its tags and a prediction's `reveals`."""
    return {k: list(metadata[k]) for k in KEPT if metadata.get(k)}


def notebook_metadata(source: Path) -> dict:
    """The notebook metadata a source's header sets (Colab's runtime; NOTEBOOK_KEPT), empty for most lessons."""
    import jupytext
    metadata = jupytext.read(source, fmt="py:percent").metadata
    return {k: metadata[k] for k in NOTEBOOK_KEPT if k in metadata}


def key(cell) -> tuple:
    """What must agree between a notebook cell and its source: type, text, tags, reveals, nbgrader's metadata."""
    return (cell.cell_type, cell.source, tuple(cell.metadata.get("tags", [])),
            tuple(cell.metadata.get("reveals", [])), tuple(sorted(cell.metadata.get("nbgrader", {}).items())))


def differences(source: Path, notebook: Path) -> list:
    """One line per cell where the committed notebook and its source disagree (empty when they match)."""
    want = [key(c) for c in assemble(source).cells]
    have = [key(c) for c in nbformat.read(notebook, as_version=4).cells]
    lines = []
    for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, have, want, autojunk=False).get_opcodes():
        if op != "equal":
            cells_nb = f"notebook cells {a0}-{a1 - 1}" if a1 > a0 else f"nothing at notebook cell {a0}"
            cells_src = f"source cells {b0}-{b1 - 1}" if b1 > b0 else f"nothing at source cell {b0}"
            lines.append(f"{notebook.name}: {cells_nb} differ from {cells_src}")
    nb_metadata = nbformat.read(notebook, as_version=4).metadata
    if {k: nb_metadata[k] for k in NOTEBOOK_KEPT if k in nb_metadata} != notebook_metadata(source):
        lines.append(f"{notebook.name}: its notebook metadata ({', '.join(NOTEBOOK_KEPT)}) differs from its source's header")
    if nb_metadata.get("jupytext") != PAIRING:
        lines.append(f"{notebook.name}: not paired with its source (its `jupytext` metadata is not {PAIRING})")
    return lines


def assemble(source: Path, old=None, keep_outputs=False):
    """The notebook for a source. Cells whose type and text are unchanged keep their id (and, with keep_outputs,
    their stored outputs); the others get new ids and no outputs."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.source, metadata=c.metadata) if c.cell_type == "code"
                else nbformat.v4.new_markdown_cell(c.source, metadata=c.metadata) for c in cells(source)]
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}, **notebook_metadata(source),
                   "jupytext": dict(PAIRING)}
    if old is not None:
        before = [(c.cell_type, c.source) for c in old.cells]
        after = [(c.cell_type, c.source) for c in nb.cells]
        for op, a0, a1, b0, _ in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
            if op == "equal":
                for k in range(a1 - a0):
                    was, cell = old.cells[a0 + k], nb.cells[b0 + k]
                    cell.id = was.id
                    if keep_outputs and cell.cell_type == "code":
                        cell.outputs, cell.execution_count = was.outputs, was.execution_count
        if keep_outputs and "widgets" in old.metadata:
            nb.metadata["widgets"] = old.metadata["widgets"]
        if keep_outputs and "language_info" in old.metadata:
            nb.metadata["language_info"] = old.metadata["language_info"]
    return add_grading(add_slides(nb))


def execute(nb, where: Path):
    """Run every cell in a fresh kernel from the notebook's folder, as nbval and JupyterLab do."""
    from nbclient import NotebookClient
    NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(where)}}).execute()
    return nb


# --- solution blocks, filled from the package's reference answers ------------------------------------------------
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def solution_blocks(lines: list) -> list:
    """(function name, first line, end line, indentation) of each solution block that is a function's body: the
    lines between its markers, lines[first:end]."""
    blocks = []
    for k, line in enumerate(lines):
        if line.strip() != BEGIN:
            continue
        indent = line[:len(line) - len(line.lstrip())]
        head = next((re.match(r"(\s*)def (\w+)\(", lines[j]) for j in range(k - 1, -1, -1)
                     if re.match(r"\s*def \w+\(", lines[j])), None)
        end = next(j for j in range(k + 1, len(lines)) if lines[j].strip() == END)
        if head and len(head.group(1)) < len(indent):
            blocks.append((head.group(2), k + 1, end, indent))
    return blocks


def reference_lines(function) -> list:
    """The body of a reference answer, its docstring and the package's `# noqa` marks left out, dedented."""
    source = textwrap.dedent(inspect.getsource(function))
    definition = ast.parse(source).body[0]
    body = definition.body
    first = body[1].lineno if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else \
        body[0].lineno
    lines = [re.sub(r"\s+# noqa\b.*$", "", line) for line in source.splitlines()[first - 1:]]
    return textwrap.dedent("\n".join(lines)).rstrip().splitlines()


def code_tokens(lines: list) -> list:
    """The code's tokens, comments and layout left out: what two editions of one answer must share."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    text = textwrap.dedent("\n".join(lines)) + "\n"
    return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in skip]


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def solutions(source: Path, fill=False, lang=None) -> list:
    """Where a solution block of `source` differs from its reference answer (exercises.SOLUTIONS): one line each.
    The English block must be the reference's body as it is; the Chinese one its code, comments aside. With fill,
    each differing block is written from the reference instead (the Chinese block's comments then to translate)."""
    from gan_lessons.exercises import SOLUTIONS
    references, source = SOLUTIONS.get(source.name[:2], {}), Path(source).resolve()
    lang = lang or language_of(source)
    lines = source.read_text().splitlines()
    problems, found = [], set()
    blocks = solution_blocks(lines)
    for k, (name, first, end, indent) in reversed(list(enumerate(blocks))):
        if name not in references:
            continue
        found.add(name)
        reference = references[name]
        if isinstance(reference, list):             # a name written more than once: its k-th block, k-th reference
            nth = sum(other == name for other, *_rest in blocks[:k])
            if nth >= len(reference):
                problems.append(f"{shown(source)}:{first + 1}: {name}'s solution block {nth + 1} has no reference")
                continue
            reference = reference[nth]
        block = textwrap.dedent("\n".join(lines[first:end])).rstrip().splitlines()
        want = reference_lines(reference)
        same = block == want if lang == "en" else code_tokens(block) == code_tokens(want)
        if same:
            continue
        where = f"{shown(source)}:{first + 1}"
        if fill:
            lines[first:end] = [indent + line if line else line for line in want]
            problems.append(f"{where}: {name}'s solution filled from {reference.__module__}.{reference.__name__}"
                            + ("" if lang == "en" else " (translate its comments)"))
        else:
            problems.append(f"{where}: {name}'s solution is not the code of {reference.__module__}."
                            f"{reference.__name__}; rebuild to fill it from there, or edit the reference")
    problems += [f"{shown(source)}: no solution block for {name}" for name in sorted(set(references) - found)]
    if fill and any("filled" in p for p in problems):
        source.write_text("\n".join(lines) + "\n")
    return problems


def build(source: Path, keep_outputs=False) -> Path:
    source = Path(source)
    for line in solutions(source, fill=True):
        print(line)
    target = notebook_of(source)
    old = nbformat.read(target, as_version=4) if target.exists() else None
    nb = assemble(source, old, keep_outputs)
    if not keep_outputs:
        execute(nb, target.parent)
    nbformat.write(nb, target)
    return target


def source_text(nb) -> str:
    """A notebook's source as jupytext writes it when the pair is synced: its cells' text, tags and `reveals`,
    and a header with the pairing, the kernel and Colab's runtime where set."""
    import jupytext
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        cell.metadata = kept(cell.metadata)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata = {"jupytext": dict(PAIRING), "kernelspec": dict(KERNELSPEC),
                   **{k: nb.metadata[k] for k in NOTEBOOK_KEPT if k in nb.metadata}}
    return jupytext.writes(nb, fmt="py:percent")


def export(notebook: Path) -> Path:
    """Write a notebook's source (source_text)."""
    target = source_of(notebook)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source_text(nbformat.read(notebook, as_version=4)), encoding="utf-8")
    return target


def all_sources(lang: str = "en") -> list:
    return sorted({"en": SOURCES, "zh": ZH_SOURCES}[lang].glob("[0-9][0-9]_*.py"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", type=Path)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--all", action="store_true", help="every lesson in notebooks/src/ and notebooks/zh/src/")
    mode.add_argument("--check", action="store_true", help="write nothing; fail if a notebook differs from its source")
    mode.add_argument("--export", action="store_true", help="write the source of each notebook given")
    p.add_argument("--keep-outputs", action="store_true", help="do not execute; keep unchanged code cells' outputs")
    a = p.parse_args(argv)
    if a.export:
        for path in a.paths:
            print(f"{path} -> {export(path)}")
        return
    sources = a.paths or (all_sources("en") + all_sources("zh") if (a.all or a.check) else [])
    if not sources:
        p.error("name a lesson source (notebooks/src/NN_name.py) or use --all")
    missing = [str(s) for s in sources if not Path(s).is_file()]
    if missing:
        p.error(f"no such source: {', '.join(missing)}")
    if a.check:
        problems = [line for s in sources for line in
                    (differences(s, notebook_of(s)) if notebook_of(s).exists() else [f"{notebook_of(s)} is missing"])]
        problems += [line for s in sources for line in solutions(Path(s))]
        if problems:
            sys.exit("\n".join(problems) + "\nrebuild with `python tools/build_notebook.py SRC` (or --keep-outputs "
                                           "for prose-only edits)")
        print(f"{len(sources)} notebooks match their sources")
        return
    for s in sources:
        print(f"{s} -> {build(s, a.keep_outputs)}{' (outputs kept)' if a.keep_outputs else ' (executed)'}")


if __name__ == "__main__":
    main()
