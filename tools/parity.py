"""Holds each Chinese lesson to its English one (tests/translations/test_zh.py runs this on every pair).

Two lessons agree when they have the same cells in the same order: the same cell types, the same tags, a heading
where the other has one, and code that is identical once string literals and comments are set aside (the cells'
parsed code is compared, IPython's magics and `!` commands included). What the tools and nbval read from comments
must agree too: nbval's markers, nbgrader's `### BEGIN/END SOLUTION` and the `# SOLUTION` of a prediction. A verdict
table's rows must state the same verdicts (raises, runs, never, half true: `verdict`).

    python tools/parity.py notebooks/zh/src/01_leaf_tensors.py ...   compare Chinese sources with the English ones
    python tools/parity.py                                           every pair of sources, and every pair of notebooks"""
import ast
import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_notebook

MARKERS = re.compile(r"#\s*(NBVAL_\w+|### (?:BEGIN|END) SOLUTION|SOLUTION\b|YOUR CODE HERE)")


class _Masked(ast.NodeTransformer):
    """Every string literal as "…"; an f-string as the sorted expressions it formats (word order may differ)."""

    def visit_Constant(self, node):
        return ast.copy_location(ast.Constant("…"), node) if isinstance(node.value, str) else node

    def visit_JoinedStr(self, node):
        values = sorted(ast.dump(v.value) for v in node.values if isinstance(v, ast.FormattedValue))
        return ast.copy_location(ast.Constant("f…" + "|".join(values)), node)


def code_shape(source: str) -> str:
    """A code cell's parsed code with literals and comments set aside (IPython syntax turned into Python first)."""
    from IPython.core.inputtransformer2 import TransformerManager
    python = TransformerManager().transform_cell(source)
    try:
        tree = ast.parse(python)
    except SyntaxError as error:
        return f"<syntax error: {error.msg} at line {error.lineno}>"
    return ast.dump(_Masked().visit(tree), include_attributes=False)


def markers(source: str) -> list:
    return [m.group(1) for m in MARKERS.finditer(source)]


def _cells_of(path: Path) -> list:
    path = Path(path)
    if path.suffix == ".ipynb":
        return nbformat.read(path, as_version=4).cells
    return build_notebook.cells(path)


def prose_shape(markdown: str) -> dict:
    """What a prose cell's translation keeps: its table rows (a verdict table's rows), list items, headings and bold
    terms, counted."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "`x`", text)
    return {"table rows": len([line for line in text.splitlines() if line.lstrip().startswith("|")]),
            "list items": len(re.findall(r"^\s*[-*] ", text, re.M)),
            "headings": len(re.findall(r"^#+ ", text, re.M)),
            "bold terms": len([b for b in re.findall(r"\*\*[^*]+\*\*", text) if b not in SECTION_DEVICES])}


# The English lessons open each section with "**Why it matters.**"; the Chinese ones open it as a Chinese textbook
# does, with the reason itself. Neither counts as a bold term.
SECTION_DEVICES = ("**Why it matters.**", "**为什么重要**")


# A verdict table's last column says what a listing does on today's torch. Its first clause (or, in Chinese, the
# whole cell where the first clause has none) is read as one verdict: it raises, it runs (works, is right), never /
# not at all, or half true; a Chinese verdict must be the English one.
VERDICTS = {
    "raises": (r"^(raises?\b|.*\braises\b)", r"报错|引发|抛出|有关的错误"),
    "runs": (r"^(runs?|works?|both (run|work)|correct|right\b(?! only))", r"能运行|(?<!只)能用|正确|与文章所说一致"),
    "never": (r"^(never|none)\b", r"^(绝不|不报错)"),
    "half": (r"^half true", r"^对了一半"),
}


def verdict(cell: str, lang: str):
    """The verdict a table cell states (a key of VERDICTS), or None where it states none of them."""
    text = re.sub(r"`[^`]*`|“[^”]*”|\"[^\"]*\"|「[^」]*」|\*\*", "", cell).strip()
    languages = (0,) if lang == "en" else (1, 0)        # a Chinese cell left in English reads as English
    for part in (re.split(r"[;:；：,，(（]", text, maxsplit=1)[0].strip(), text if lang == "zh" else None):
        if part is None:
            continue
        found = [k for k, patterns in VERDICTS.items() if any(re.search(patterns[i], part, re.I) for i in languages)]
        if "never" in found:
            return "never"
        if found:
            return found[0]
    return None


def verdict_differences(english: str, chinese: str) -> list:
    """For two prose cells' tables, row by row: each row whose last column states another verdict in Chinese."""
    rows = [[line for line in text.splitlines() if line.lstrip().startswith("|") and not re.match(r"\s*\|[-| ]+\|\s*$", line)]
            for text in (english, chinese)]
    found = []
    for a, b in zip(*rows):
        x, y = verdict(a.strip().strip("|").split("|")[-1], "en"), verdict(b.strip().strip("|").split("|")[-1], "zh")
        if x is not None and x != y:                # (a cell that states no verdict, a header: nothing to hold)
            found.append(f"the row {a.strip()[:50]!r} says {x} in English and {y} in Chinese")
    return found


def _label(cell, k) -> str:
    first = cell.source.strip().splitlines()[0][:60] if cell.source.strip() else "(empty)"
    return f"cell {k} ({cell.cell_type}: {first!r})"


def differences(english: Path, chinese: Path) -> list:
    """One line per way the Chinese lesson departs from the English one (empty when they agree)."""
    en, zh = _cells_of(english), _cells_of(chinese)
    lines = []
    if len(en) != len(zh):
        lines.append(f"{Path(chinese).name}: {len(zh)} cells, the English lesson has {len(en)}")
    for k, (a, b) in enumerate(zip(en, zh)):
        where = f"{Path(chinese).name}: {_label(b, k)}, English {_label(a, k)}"
        if a.cell_type != b.cell_type:
            lines.append(f"{where}: a {b.cell_type} cell where English has a {a.cell_type} cell")
            break                      # the cells are out of step from here on; one line says so
        if list(a.metadata.get("tags", [])) != list(b.metadata.get("tags", [])):
            lines.append(f"{where}: tags {b.metadata.get('tags', [])} differ from {a.metadata.get('tags', [])}")
        if a.cell_type == "markdown":
            heads = [re.match(r"#+ ", c.source.lstrip()) for c in (a, b)]
            if [h.group() if h else None for h in heads][0] != [h.group() if h else None for h in heads][1]:
                lines.append(f"{where}: the heading levels differ")
            shapes = prose_shape(a.source), prose_shape(b.source)
            lines += [f"{where}: {shapes[1][k]} {what}, the English cell has {shapes[0][k]}"
                      for k, what in ((k, k) for k in shapes[0]) if shapes[0][k] != shapes[1][k]]
            lines += [f"{where}: {line}" for line in verdict_differences(a.source, b.source)]
            continue
        if code_shape(a.source) != code_shape(b.source):
            lines.append(f"{where}: the code differs (string literals and comments aside)")
        if markers(a.source) != markers(b.source):
            lines.append(f"{where}: markers {markers(b.source)} differ from {markers(a.source)}")
    return lines


def english_of(chinese: Path) -> Path:
    """notebooks/zh/src/NN.py -> notebooks/src/NN.py; notebooks/zh/NN.ipynb -> notebooks/NN.ipynb (and student/)."""
    chinese = Path(chinese).resolve()
    parts = list(chinese.relative_to(build_notebook.NOTEBOOKS).parts)
    parts.remove("zh")
    return build_notebook.NOTEBOOKS.joinpath(*parts)


def main(argv=None) -> int:
    args = [Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    if not args:
        args = build_notebook.all_sources("zh") + sorted((build_notebook.NOTEBOOKS / "zh").glob("[0-9][0-9]_*.ipynb"))
    found = [line for path in args for line in differences(english_of(path), path)]
    print("\n".join(found) if found else f"{len(args)} Chinese lesson(s) agree with their English ones")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
