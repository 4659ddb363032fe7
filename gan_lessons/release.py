"""The lessons as nbgrader assignments: the grading metadata of the answered lessons, and what nbgrader's
`generate_assignment` does to them beyond its own clearing (the repository's nbgrader_config.py adds it).

In an answered lesson (tools/build_notebook.py writes the metadata from the source):
- a build exercise is an autograded answer cell, its reference body between `### BEGIN SOLUTION` and
  `### END SOLUTION`, which nbgrader replaces by its stub (`# YOUR CODE HERE`, `raise NotImplementedError()`);
- the cell after it, tagged `test`, is a locked test cell worth one point: the checker's call and an `assert`, so it
  fails, below the checker's own feedback, while the answer is missing or wrong.

What `StudentCopy` adds to a release, before nbgrader clears the solutions:
- every prediction `name = answer  # SOLUTION: question` becomes `name = ...  # your answer: question` (check()
  then prints "not solved yet");
- every `why=` feedback (check()'s explanation, which often states the answer) is kept out of sight: the expression
  becomes `hidden("<base64 of its source>", globals(), locals())`, which prints the same text once answered;
- every cell tagged `read-after-exercises` (the table of verdicts, the summary) moves to the end, after the exercises
  and the side roads that follow them (it answers their questions too), and a pointer stands in its place;
- test cells are tagged `raises-exception`, so that JupyterLab's "Run All" (and nbval) go on past an unsolved one;
- relative links point from the release's folder, or, where that is not known, to the repository on GitHub.

    from gan_lessons.release import StudentCopy    # in nbgrader_config.py"""
import ast
import base64
import os
import re
from pathlib import Path, PurePosixPath

import nbformat

from gan_lessons.lesson import REPO_URL, SETUP_CELLS

SOLUTION = re.compile(r"^(?P<head>[ \t]*[\w.\[\]]+[ \t]*=[ \t]*)(?P<answer>.+?)[ \t]*# SOLUTION\b:?[ \t]*(?P<question>.*)$",
                      re.M)
SOLUTION_BLOCK = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION[ \t]*\n.*?^[ \t]*### END SOLUTION[ \t]*(?:\n|$)",
                            re.M | re.S)
TEST = "test"                  # the tag of a test cell in a lesson's source
LATER = "read-after-exercises"  # the tag of a cell that answers the exercises: moved after them in a release
FURTHER = {"en": "## Going further", "zh": "## 延伸"}   # side roads after the exercises, outside a lesson's plan
CHECKER = re.compile(r"exercises\.check_(?P<name>\w+)\(")
LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?P<fragment>#[^)\s]*)?\)")
HIDDEN_IMPORT = "from gan_lessons.lesson import hidden  # check() prints its explanation once you have answered"
# What a release says in the lesson's language.
WORDS = {
    "en": {"answer": "your answer", "colon": ": ", "hidden": HIDDEN_IMPORT,
           "later": "{title} (read after the exercises)",
           "what": "The {title}", "verdicts": "The verdicts (read after the exercises)", "table": "A table of verdicts",
           "pointer": "*{what} is at the end of this notebook: read it after the exercises.*"},
    "zh": {"answer": "你的答案", "colon": "：",
           "hidden": "from gan_lessons.lesson import hidden  # 你作答之后，check() 才会显示解释",
           "later": "{title}（做完练习再读）", "what": "“{title}”", "verdicts": "结论（做完练习再读）",
           "table": "结论表", "pointer": "*{what}在本笔记本的末尾：做完练习再读。*"},
}


def language(nb) -> str:
    """"zh" for a lesson whose setup cell is the Chinese one, else "en"."""
    return "zh" if any(c.source == SETUP_CELLS["zh"] for c in nb.cells if c.cell_type == "code") else "en"


def add_grading(nb):
    """nbgrader's metadata on the build exercises and their test cells, named after the checker the test calls:
    `<name>_answer` (autograded answer) and `<name>_test` (locked, one point). A test cell must follow its answer."""
    answer = None
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
        if cell.cell_type != "code":
            continue
        if "### BEGIN SOLUTION" in cell.source:
            answer = cell
        elif TEST in cell.metadata.get("tags", []):
            found = CHECKER.search(cell.source)
            if found is None or answer is None:
                raise ValueError(f"a cell tagged {TEST!r} must call an exercises.check_...() and follow a build "
                                 f"exercise's cell: {cell.source[:80]!r}")
            name = found["name"]
            answer.metadata["nbgrader"] = {"grade": False, "grade_id": f"{name}_answer", "locked": False,
                                           "schema_version": 3, "solution": True, "task": False}
            cell.metadata["nbgrader"] = {"grade": True, "grade_id": f"{name}_test", "locked": True, "points": 1,
                                         "schema_version": 3, "solution": False, "task": False}
            answer = None
    if answer is not None:
        raise ValueError(f"a build exercise has no test cell after it: {answer.source[:80]!r}")
    return nb


def blank(source: str, lang: str = "en") -> str:
    """Every `name = answer  # SOLUTION: question` line as `name = ...  # your answer: question`."""
    def answerless(m):
        question = m["question"].strip()
        words = WORDS[lang]
        return f"{m['head']}...  # {words['answer']}{words['colon'] + question if question else ''}"
    return SOLUTION.sub(answerless, source)


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
    leading = re.match(r"(?:[ \t]*(?:#|%%).*\n)*", source)
    head = leading.end() if leading else 0  # after leading comments (NBVAL markers), cell magics
    return source[:head] + WORDS[lang]["hidden"] + "\n" + source[head:]


def move_after_exercises(nb, lang: str = "en") -> int:
    """Every cell tagged `read-after-exercises` moved to the end, after the exercises and the "Going further" side
    roads that follow them (a side road's questions are among those it answers), under a heading that says so; a
    one-line pointer stands where it was. Returns how many cells moved."""
    moved: list = []
    words = WORDS[lang]
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
    nb.cells.extend(moved)
    return len(moved)


# A lesson's own "Open in Colab" badge: in the student copy it opens the student copy.
COLAB_LESSON = re.compile(r"(\(https://colab\.research\.google\.com/github/[^)\s]*?/blob/main/notebooks/(?:zh/)?)"
                          r"(\d\d_\w+\.ipynb\))")


# A lesson's line of editions, under its badge: the lesson in the other language, and its student copy. A student copy
# points to the other language's student copy alone (never to an answered lesson); the paths are the lesson's.
EDITIONS = re.compile(r"^\[(?P<other>中文版|English)\]\((?P<prefix>zh/|\.\./)(?P<name>\d\d_\w+\.ipynb)\) · "
                      r"\[(?:Student copy|学生版)\]\(student/(?P=name)\)$", re.M)


def student_editions(source: str) -> str:
    """The line of editions as a student copy shows it."""
    return EDITIONS.sub(lambda m: f"[{m['other']}]({m['prefix']}student/{m['name']})", source)


def relink(source: str, lesson_dir, out=None, lang: str = "en") -> str:
    """Relative links, which point from the lesson's folder, pointed from the folder `out` instead; without one
    (a course's release folder, far from the repository), to the file in the repository on GitHub."""
    def moved(m):
        target = m["target"]
        if re.match(r"[a-z][\w+.-]*:", target) or target.startswith("/"):
            return m.group()
        if out is not None and lesson_dir is not None:
            new = Path(os.path.relpath((Path(lesson_dir) / target).resolve(), Path(out).resolve())).as_posix()
        else:
            path = os.path.normpath(PurePosixPath("notebooks", *(["zh"] if lang == "zh" else []), target).as_posix())
            new = f"{REPO_URL}/blob/main/{path}"
        return f"]({new}{m['fragment'] or ''})"
    return LINK.sub(moved, source)


def release(nb, lesson_dir=None, out=None, name: str = "a lesson"):
    """What StudentCopy does to one answered lesson (nbgrader's own preprocessors do the rest)."""
    lang, hidden_used, clash = language(nb), False, None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            if "hidden" in cell.source and clash is None:
                try:
                    clash = i if _binds_hidden(ast.parse(_parseable(cell.source))) else None
                except SyntaxError:
                    pass
            new = hide_feedback(blank(cell.source, lang), f"{name}, cell {i}", lang)
            left = [x for x in new.splitlines() if re.search(r"#\s*SOLUTION\b", x)]
            if left:
                raise ValueError(f"{name}, cell {i}: a `# SOLUTION` line that cannot be blanked (write it as "
                                 f"`name = answer  # SOLUTION: question` on one line): {left[0].strip()}")
            hidden_used |= new != blank(cell.source, lang)
            cell.source = new
            if TEST in cell.metadata.get("tags", []) and "raises-exception" not in cell.metadata["tags"]:
                cell.metadata["tags"] = [*cell.metadata["tags"], "raises-exception"]
        elif cell.cell_type == "markdown":
            cell.source = COLAB_LESSON.sub(r"\1student/\2", relink(student_editions(cell.source), lesson_dir, out,
                                                                     lang))
    if hidden_used and clash is not None:
        raise ValueError(f"{name}, cell {clash} binds the name `hidden`, which the release imports from "
                         "gan_lessons.lesson: rename it")
    move_after_exercises(nb, lang)
    nb.metadata.pop("widgets", None)
    nb.metadata.pop("jupytext", None)          # a student copy is not paired with a text source
    return nb


def _student_copy_class():
    from nbgrader.preprocessors import NbGraderPreprocessor
    from traitlets import Unicode

    class StudentCopy(NbGraderPreprocessor):
        """Blank the predictions, hide the explanations, move what answers the exercises after them (see
        gan_lessons.release). First in GenerateAssignment.preprocessors, before nbgrader clears the solutions."""
        lessons_folder = Unicode("", help="the folder the lessons' relative links point from; with release_folder, "
                                          "links are rewritten for the release's folder").tag(config=True)
        release_folder = Unicode("", help="the folder the release will be read from").tag(config=True)

        def preprocess(self, nb, resources):
            name = resources.get("unique_key") or "a lesson"
            both = self.lessons_folder and self.release_folder
            return release(nb, self.lessons_folder if both else None, self.release_folder if both else None,
                           name), resources

    return StudentCopy


def __getattr__(name):
    """StudentCopy, built on first use: only nbgrader's configuration needs it (and nbgrader)."""
    if name == "StudentCopy":
        cls = globals()["StudentCopy"] = _student_copy_class()
        return cls
    raise AttributeError(name)
