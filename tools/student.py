"""Student copies of the lessons, free of answers, that still run:

- every `name = answer  # SOLUTION: question` line becomes `name = ...  # your answer: question`;
- every block between nbgrader's `### BEGIN SOLUTION` and `### END SOLUTION` lines (a build exercise's reference
  body) becomes nbgrader's stub, `# YOUR CODE HERE` and `raise NotImplementedError()` at the block's indentation,
  as `nbgrader generate_assignment` makes it, so instructors who grade with nbgrader can use the lessons as they are;
- every `why=` feedback (check()'s explanation, which often states the answer) is kept out of sight:
  `why=<expression>` becomes `why=hidden("<base64 of the expression's source>", globals(), locals())`, which
  gan_lessons.lesson.hidden evaluates in the cell, so check() prints the same text once the student has answered;
- every cell tagged `read-after-exercises` in the lesson's source (the table of verdicts, the summary: they state
  what the exercises ask) moves to the end, after the exercises, and a pointer stands in its place;
- relative links are rewritten for the copy's folder, and outputs are cleared.

A blanked exercise prints "not solved yet" instead of failing. The committed copies live in notebooks/student/
(Colab opens them from GitHub); tests/test_student.py fails when they differ from what this tool makes.

    python tools/student.py [notebooks/NN_*.ipynb ...] [--out FOLDER] [--check]

Copies go beside their lessons: notebooks/student/ for the English lessons, notebooks/zh/student/ for the Chinese
ones (whose inserted words, such as "# your answer", are Chinese too)."""
import argparse
import ast
import base64
import os
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "notebooks"
STUDENT_DIR = LESSONS / "student"
REGENERATE = "python tools/student.py"

SOLUTION = re.compile(r"^(?P<head>[ \t]*[\w.\[\]]+[ \t]*=[ \t]*)(?P<answer>.+?)[ \t]*# SOLUTION\b:?[ \t]*(?P<question>.*)$",
                      re.M)
SOLUTION_BLOCK = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION[ \t]*\n.*?^[ \t]*### END SOLUTION[ \t]*(?:\n|$)",
                            re.M | re.S)
HIDDEN_IMPORT = "from gan_lessons.lesson import hidden  # check() prints its explanation once you have answered"
# What this tool writes into a copy, in the lesson's language (a Chinese lesson lives under notebooks/zh/).
WORDS = {
    "en": {"answer": "your answer", "hidden": HIDDEN_IMPORT, "later": "{title} (read after the exercises)",
           "what": "The {title}", "verdicts": "The verdicts (read after the exercises)", "table": "A table of verdicts",
           "pointer": "*{what} is at the end of this notebook: read it after the exercises.*"},
    "zh": {"answer": "你的答案", "hidden": "from gan_lessons.lesson import hidden  # 你作答之后，check() 才会显示解释",
           "later": "{title}（做完练习再读）", "what": "“{title}”", "verdicts": "结论（做完练习再读）",
           "table": "结论表", "pointer": "*{what}在本笔记本的末尾：做完练习再读。*"},
}


def language_of(path: Path) -> str:
    """"zh" for a lesson under notebooks/zh/, else "en"."""
    folder = Path(path).resolve().parent
    return "zh" if folder.is_relative_to(LESSONS) and "zh" in folder.relative_to(LESSONS).parts else "en"
# A cell tagged so in the lesson's source answers the exercises (the table of verdicts, the summary): the student copy
# moves it after them and leaves a pointer where it stood.
LATER = "read-after-exercises"
LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?P<fragment>#[^)\s]*)?\)")


def blank(source: str, lang: str = "en") -> str:
    """Every `name = answer  # SOLUTION: question` line as `name = ...  # your answer: question`."""
    def answerless(m):
        question = m["question"].strip()
        return f"{m['head']}...  # {WORDS[lang]['answer']}{': ' + question if question else ''}"
    return SOLUTION.sub(answerless, source)


def stub(source: str) -> str:
    """Every `### BEGIN SOLUTION` ... `### END SOLUTION` block replaced by nbgrader's stub for code cells."""
    def replaced(m):
        end = "\n" if m.group().endswith("\n") else ""
        return f"{m['indent']}# YOUR CODE HERE\n{m['indent']}raise NotImplementedError(){end}"
    return SOLUTION_BLOCK.sub(replaced, source)


def hide(expression: str) -> str:
    """The base64 form of an expression's source, as gan_lessons.lesson.hidden takes it."""
    return base64.b64encode(expression.encode("utf-8")).decode("ascii")


def _parseable(source: str) -> str:
    """The cell with IPython's `%`/`!` lines turned into `pass` (same lines, same columns elsewhere)."""
    return re.sub(r"^([ \t]*)[%!].*$", r"\1pass", source, flags=re.M)


def _feedback(tree) -> list:
    """The `why` expressions: every `why=` keyword, and check()'s fourth positional argument."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found += [k.value for k in node.keywords if k.arg == "why"]
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name == "check" and len(node.args) >= 4:
                found.append(node.args[3])
    return found


def _binds_hidden(tree) -> bool:
    """Whether a cell binds the name `hidden` at the notebook's top level (the import would clash with it)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "hidden":
                return True
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and node.id == "hidden" and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name) == "hidden":
            return True
        todo += ast.iter_child_nodes(node)
    return False


def hide_feedback(source: str, where: str = "a cell", lang: str = "en") -> str:
    """Every `why` expression's source replaced by `hidden("<base64>", globals(), locals())`, and the import added."""
    if "why" not in source:
        return source
    try:
        tree = ast.parse(_parseable(source))
    except SyntaxError as error:
        raise ValueError(f"{where}: cannot parse the cell to hide its why= feedback ({error})") from None
    expressions = _feedback(tree)
    if not expressions:
        return source
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno, col):  # ast columns count UTF-8 bytes
        return starts[lineno - 1] + len(lines[lineno - 1].encode("utf-8")[:col].decode("utf-8"))

    spans = sorted(((offset(e.lineno, e.col_offset), offset(e.end_lineno, e.end_col_offset)) for e in expressions),
                   reverse=True)
    for begin, end in spans:
        source = f'{source[:begin]}hidden("{hide(source[begin:end])}", globals(), locals()){source[end:]}'
    head = re.match(r"(?:[ \t]*(?:#|%%).*\n)*", source).end()  # after leading comments (NBVAL markers), cell magics
    return source[:head] + WORDS[lang]["hidden"] + "\n" + source[head:]


def move_after_exercises(nb, lang: str = "en") -> int:
    """Every cell tagged `read-after-exercises` moved to the end, under a heading that says so; a one-line pointer
    stands where it was. Returns how many cells moved."""
    moved, words = [], WORDS[lang]
    for i, cell in enumerate(nb.cells):
        if LATER not in cell.metadata.get("tags", []):
            continue
        heading = re.match(r"#{1,3} (?P<title>[^\n]*)\n*", cell.source)
        if heading:
            title = heading["title"]
            text = "### " + words["later"].format(title=title) + f"\n\n{cell.source[heading.end():]}"
            what = words["what"].format(title=title.lower() if lang == "en" else title)
        else:
            text, what = f"### {words['verdicts']}\n\n{cell.source}", words["table"]
        later = nbformat.v4.new_markdown_cell(text.rstrip("\n"), metadata={
            "tags": list(cell.metadata["tags"]), "slideshow": {"slide_type": "-"}})  # build_notebook.slide_type's rule
        later.id = f"student-later-{len(moved)}"  # fixed, so that the copy is the same every time it is made
        moved.append(later)
        pointer = nbformat.v4.new_markdown_cell(words["pointer"].format(what=what),
                                                metadata={"slideshow": {"slide_type": "-"}})
        pointer.id = cell.id
        nb.cells[i] = pointer
    nb.cells += moved
    return len(moved)


def relink(source: str, lesson_dir: Path, out: Path) -> str:
    """Relative links, which point from the lesson's folder, pointed from the copy's folder instead."""
    def moved(m):
        target = m["target"]
        if re.match(r"[a-z][\w+.-]*:", target) or target.startswith("/"):
            return m.group()
        new = Path(os.path.relpath((lesson_dir / target).resolve(), out.resolve())).as_posix()
        return f"]({new}{m['fragment'] or ''})"
    return LINK.sub(moved, source)


def student_notebook(path: Path, out: Path = None):
    """The student copy of one lesson, as it will be written into the folder `out` (its own student/ folder)."""
    path = Path(path)
    out, lang = out or path.parent / "student", language_of(path)
    nb = nbformat.read(path, as_version=4)
    hidden_used, clash = False, None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            if "hidden" in cell.source and clash is None:
                try:
                    clash = i if _binds_hidden(ast.parse(_parseable(cell.source))) else None
                except SyntaxError:
                    pass
            new = hide_feedback(blank(stub(cell.source), lang), f"{path.name}, cell {i}", lang)
            if "BEGIN SOLUTION" in new or "END SOLUTION" in new:
                raise ValueError(f"{path.name}, cell {i}: a `### BEGIN SOLUTION` without its `### END SOLUTION` (or "
                                 f"the other way round); each reference body needs both, on lines of their own")
            if "SOLUTION" in new:
                line = next(x for x in new.splitlines() if "SOLUTION" in x)
                raise ValueError(f"{path.name}, cell {i}: a `# SOLUTION` line this tool cannot blank (write it as "
                                 f"`name = answer  # SOLUTION: question` on one line): {line.strip()}")
            hidden_used |= new != blank(stub(cell.source), lang)
            cell.source, cell.outputs, cell.execution_count = new, [], None
        elif cell.cell_type == "markdown":
            cell.source = relink(cell.source, path.parent, Path(out))
    if hidden_used and clash is not None:
        raise ValueError(f"{path.name}, cell {clash} binds the name `hidden`, which the student copy imports "
                         "from gan_lessons.lesson: rename it")
    move_after_exercises(nb, lang)
    nb.metadata.pop("widgets", None)
    return nb


def render(path: Path, out: Path = None) -> str:
    """The student copy's file text, exactly as student_copy writes it."""
    text = nbformat.writes(student_notebook(path, out))
    return text if text.endswith("\n") else text + "\n"


def student_copy(path: Path, out: Path) -> int:
    """Write the student copy into `out`; return how many code cells changed."""
    path, out = Path(path), Path(out)
    before = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    out.mkdir(parents=True, exist_ok=True)
    text = render(path, out)
    (out / path.name).write_text(text, encoding="utf-8")
    after = [c.source for c in nbformat.reads(text, as_version=4).cells if c.cell_type == "code"]
    return sum(a != b for a, b in zip(after, before))


def lessons():
    """Every lesson, English then Chinese."""
    return sorted(LESSONS.glob("[0-9][0-9]_*.ipynb")) + sorted((LESSONS / "zh").glob("[0-9][0-9]_*.ipynb"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("notebooks", nargs="*", type=Path, default=lessons())
    p.add_argument("--out", type=Path, help="the folder for the copies (default: student/ beside each lesson)")
    p.add_argument("--check", action="store_true", help="write nothing; fail if a copy in --out is not up to date")
    a = p.parse_args(argv)
    stale = []
    for path in a.notebooks:
        out = a.out or Path(path).parent / "student"
        if a.check:
            copy = out / path.name
            if not copy.exists() or copy.read_text(encoding="utf-8") != render(path, out):
                stale.append(str(copy))
            continue
        print(f"{path.name}: {student_copy(path, out)} code cells changed -> {out / path.name}")
    if stale:
        sys.exit(f"student copies missing or out of date: {', '.join(stale)}; run `{REGENERATE}`")


if __name__ == "__main__":
    main()
