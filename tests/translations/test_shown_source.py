"""The package code a lesson displays (`show_source`) reads in the lesson's language: in a Chinese lesson every
comment and docstring is Chinese, the code is the same code, and in English nothing changes."""
import ast
import inspect
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import messages

from gan_lessons.i18n import source_in_language, source_words, speaking

SHOWN = messages.shown_objects()
CJK = re.compile(r"[\u4e00-\u9fff]")


def _code(source: str) -> str:
    """The code alone: the tree without docstrings (comments are not in the tree)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node):
            node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


def test_the_lessons_show_package_code():
    names = {obj.__name__ for _, obj in SHOWN}
    assert {"one_forward", "retain_graph_seed003", "buffers", "ConditionalD"} <= names, names


@pytest.mark.parametrize("obj", [obj for _, obj in SHOWN], ids=[obj.__name__ for _, obj in SHOWN])
def test_in_chinese_every_comment_and_docstring_is_chinese_and_the_code_is_the_same(obj):
    source = inspect.getsource(obj)
    with speaking("zh"):
        shown = source_in_language(source)
    assert _code(shown) == _code(source)
    english = [text for *_, text in source_words(shown) if not CJK.search(text)]
    assert not english, f"{obj.__name__}: left in English: {english}"
    with speaking("en"):
        assert source_in_language(source) == source


def test_a_translated_comment_keeps_its_column_and_a_docstring_its_indentation(monkeypatch):
    import gan_lessons.i18n as i18n
    source = 'def f(x):\n    """Two lines,\n    of text."""\n    return x  # the same x\n'
    assert [(kind, text) for *_, kind, text in source_words(source)] == [("docstring", "Two lines,\nof text."),
                                                                         ("comment", "the same x")]
    table = {"Two lines,\nof text.": "两行\n文字。", "the same x": "同一个 x"}
    monkeypatch.setattr(i18n, "_", lambda text: table.get(text, text))
    with speaking("zh"):
        shown = source_in_language(source)
    assert shown == 'def f(x):\n    """两行\n    文字。"""\n    return x  # 同一个 x\n'
