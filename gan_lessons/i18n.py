"""The language the package speaks: English (the default) or Simplified Chinese, through gettext.

Every message the package prints or raises for a student is written in English as `_("... {name} ...")` and
filled with `.format(name=...)` after translation, so a catalog can move a placeholder but never lose it. A message
kept in a constant is marked with `N_()` where it is written and translated with `_()` where it is used.

The catalog's source is gan_lessons/locale/zh_CN/LC_MESSAGES/gan_lessons.po; the compiled .mo beside it ships in
the package. `python tools/messages.py` extracts the messages, updates the .po and compiles it (tests/translations/test_zh.py
fails while a message has no translation, a translation loses a placeholder, or the .mo is stale).

A lesson's own words (a table's header, a figure's legend, a label before a value) go through the same catalog with
`tr()`, in the same code in both editions; a prediction answered in words is shown and accepted in the lesson's
language (CHOICES).

A lesson picks its language in the setup cell, `setup(seed=0, lang="zh")`; a script sets GAN_LESSONS_LANG=zh."""
import gettext
import os
import re
import unicodedata
from contextlib import contextmanager
from pathlib import Path

DOMAIN = "gan_lessons"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
LANGUAGES = {"en": None, "zh": "zh_CN"}      # what `lang` accepts -> the catalog's locale (None: the source text)
ENV = "GAN_LESSONS_LANG"

_chosen = None          # set by set_language(); otherwise GAN_LESSONS_LANG decides, then English
_catalogs: dict = {}


def normalize(lang: str) -> str:
    """"zh", "zh_CN", "zh-CN", "zh_CN.UTF-8", "ZH" -> "zh"; "en_US" -> "en". Anything else: one line saying what to
    write instead."""
    code = str(lang).strip().lower().replace("-", "_").split(".")[0]
    base = {"zh_cn": "zh", "zh_hans": "zh", "zh_sg": "zh"}.get(code, code.split("_")[0])
    if base not in LANGUAGES:
        raise ValueError(f"language {lang!r} is not one the lessons speak: use 'en' (English) or 'zh' (简体中文)")
    return base


def set_language(lang: str) -> str:
    """Speak `lang` ("en" or "zh") from now on, in this process and in the commands it starts (a lesson's
    `!python -m gan_lessons ...`); returns the normalized code."""
    global _chosen
    _chosen = normalize(lang)
    os.environ[ENV] = _chosen
    return _chosen


@contextmanager
def speaking(lang: str):
    """Speak `lang` inside the block only (a checker that reads the doctor's English words, whatever the lesson
    speaks); the language before it comes back after."""
    global _chosen
    saved, _chosen = _chosen, normalize(lang)
    try:
        yield
    finally:
        _chosen = saved


def language() -> str:
    """The language in use: what set_language chose, else GAN_LESSONS_LANG, else English."""
    if _chosen is not None:
        return _chosen
    value = os.environ.get(ENV, "").strip()
    if not value:
        return "en"
    try:
        return normalize(value)
    except ValueError as error:
        raise ValueError(f"{ENV}={value!r}: {error}") from None


def catalog(lang: str):
    """The gettext translations for `lang` (NullTranslations for English: the source text)."""
    if lang not in _catalogs:
        locale = LANGUAGES[lang]
        _catalogs[lang] = (gettext.NullTranslations() if locale is None else
                           gettext.translation(DOMAIN, localedir=LOCALE_DIR, languages=[locale]))
    return _catalogs[lang]


def _(message: str) -> str:
    """`message` in the language in use."""
    return catalog(language()).gettext(message)


def N_(message: str) -> str:
    """Marks a message for the catalog where it is written; `_()` translates it where it is used."""
    return message


# Chinese characters and full-width punctuation: between two of them, Chinese text has no space.
_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"


def tidy(text: str) -> str:
    """A filled-in message in the typesetting of its language. In Chinese, a placeholder stands between spaces (for
    a Latin value: `对 x_fake 做了 sub_`); filled with a Chinese value, the spaces between two Chinese characters go
    (`对一个形状为 (4, 8) 的张量做了 sub_`). English is left as it is."""
    if language() != "zh":
        return text
    return re.sub(rf"(?<=[{_CJK}]) +(?=[{_CJK}])", "", text)


def width(text: str) -> int:
    """Columns a terminal gives the text: two for a wide (Chinese) character, one for the rest."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


class Text(str):
    """A translated label that lines up in a table whatever its language: `f"{tr('strategy'):<22}"` pads to 22
    columns of screen, where a Chinese character takes two (str's own padding counts it as one)."""

    def __format__(self, spec: str) -> str:
        aligned = re.fullmatch(r"(.)?([<>^])(\d+)", spec)
        if not aligned:
            return str.__format__(str(self), spec)
        fill, align, columns = aligned.group(1) or " ", aligned.group(2), int(aligned.group(3))
        gap = max(0, columns - width(self))
        left = {"<": 0, ">": gap, "^": gap // 2}[align]
        return fill * left + str(self) + fill * (gap - left)


def tr(message: str, **values) -> Text:
    """A lesson's own words (a table's header, a figure's legend, a label before a value) in the language in use,
    through the same catalog as the package's messages: `tr("{n} of {total} G parameters have a .grad", n=3,
    total=4)`. The lesson's code is the same in both editions; tools/messages.py extracts the messages. The
    translation is filled in as written (no tidy(): a label's spaces may be a table's padding)."""
    return Text(_(message).format(**values) if values else _(message))


# The answers a prediction may name in words: a check shows them, and accepts them, in the lesson's language too.
CHOICES = (N_("both"), N_("neither"), N_("none"), N_("error"), N_("runs"), N_("moves"), N_("stays"),
           N_("far fewer bytes"), N_("about the same"), N_("far more bytes"))


def choice(answer):
    """`answer` in the language in use when it is one of CHOICES, else `answer` itself."""
    return _(answer) if isinstance(answer, str) and answer in CHOICES else answer


# --- a package function's source, shown in a lesson ------------------------------------------------------------------
def source_words(source: str) -> list:
    """What a reader reads in a piece of code besides the code: (first line, last line, column, kind, text) for each
    comment ("# ..." without its mark) and each docstring (cleaned as inspect.cleandoc cleans it), lines counted
    from 1. tools/messages.py extracts these for the catalog; source_in_language translates them."""
    import ast
    import inspect
    import io
    import tokenize
    found = [(t.start[0], t.start[0], t.start[1], "comment", t.string[1:].strip())
             for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and ast.get_docstring(node):
            doc = node.body[0]
            found.append((doc.lineno, doc.end_lineno or doc.lineno, doc.col_offset, "docstring",
                          inspect.cleandoc(doc.value.value)))       # type: ignore[attr-defined]
    return sorted(found)


def source_in_language(source: str) -> str:
    """`source` with each comment and docstring in the language in use, where the catalog translates it (the code is
    the same in every language). A translated docstring keeps its quotes and indentation; a comment its column."""
    if language() == "en":
        return source
    lines = source.splitlines(keepends=True)
    for first, last, column, kind, text in reversed(source_words(source)):
        translated = _(text)
        if translated == text:
            continue
        if kind == "comment":
            line = lines[first - 1]
            start = line.index("#", column)
            lines[first - 1] = line[:start] + "# " + translated + "\n"
        else:
            indent = " " * column
            body = translated.replace("\n", "\n" + indent)
            lines[first - 1:last] = [f'{indent}"""{body}"""\n']
    return "".join(lines)
