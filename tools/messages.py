"""The package's message catalog (gan_lessons/i18n.py says how messages are written): extract, translate, compile.

    python tools/messages.py                  extract every `_()`/`N_()` message from gan_lessons/, every
                                              `tr()` label of the English lessons (notebooks/src/) and every
                                              comment and docstring of the package code they show
                                              (`show_source`), update the
                                              template (.pot) and the Chinese catalog (.po), compile the .mo
    python tools/messages.py --add FILE.json  also take translations from {"English message": "中文", ...}
    python tools/messages.py --check          list what is wrong and exit 1: a message with no translation, a
                                              translation that loses or adds a placeholder, a stale .pot or .mo

Babel does the extracting, reading, writing and compiling, as its documentation describes."""
import argparse
import ast
import io
import json
import string
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gan_lessons"
LOCALE = PACKAGE / "locale"
POT = LOCALE / "gan_lessons.pot"
PO = LOCALE / "zh_CN" / "LC_MESSAGES" / "gan_lessons.po"
MO = PO.with_suffix(".mo")
LESSONS = ROOT / "notebooks" / "src"
KEYWORDS = {"_": None, "N_": None, "tr": None}
HEADER = dict(project="gan-lessons", version="0.1.0", copyright_holder="gan-lessons", msgid_bugs_address="",
              fuzzy=False)


def marked_calls(path: Path) -> list:
    """[(line, message)] of every `_()`, `N_()` or `tr()` call with a literal message in a file, those inside an
    f-string's braces included (Babel's tokenizer does not look there before Python 3.12); a lesson's IPython syntax
    (`!python ...`) is turned into Python first."""
    source = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        from IPython.core.inputtransformer2 import TransformerManager
        tree = ast.parse(TransformerManager().transform_cell(source))
    return sorted((node.lineno, node.args[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in KEYWORDS
                  and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))


def shown_objects() -> list:
    """The package's functions and classes whose source the English lessons display with `show_source(...)`: each
    call's arguments evaluated with the package's modules they name (`strategies.get(name) for name in (...)`,
    `ddp_lesson.buffers`)."""
    import importlib
    import importlib.util
    import re
    found = []
    for path in sorted(LESSONS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "show_source":
                arguments = ", ".join(ast.unparse(a) for a in node.args)
                modules = {name: importlib.import_module(f"gan_lessons.{name}")
                           for name in set(re.findall(r"\b(\w+)\.", arguments))
                           if importlib.util.find_spec(f"gan_lessons.{name}") is not None}
                found += [(path, obj) for obj in eval(f"[{arguments}]", modules)]     # the lesson's own expression
    return found


def shown_words():
    """(message, (file, line)) for every comment and docstring of the sources the lessons display."""
    import inspect

    from gan_lessons.i18n import source_words
    for _lesson, obj in shown_objects():
        lines, start = inspect.getsourcelines(obj)
        where = Path(inspect.getsourcefile(obj)).resolve().relative_to(ROOT).as_posix()
        for first, _last, _column, _kind, text in source_words("".join(lines)):
            yield text, (where, start + first - 1)


def template() -> Catalog:
    """Every message the package marks and every label the English lessons translate, with where it is written
    (paths relative to the repository)."""
    pot = Catalog(**HEADER)
    for filename, lineno, message, comments, context in extract_from_dir(
            PACKAGE, method_map=[("**.py", "python")], keywords=KEYWORDS, comment_tags=("TRANSLATORS:",)):
        pot.add(message, locations=[(f"gan_lessons/{filename}", lineno)], auto_comments=comments, context=context)
    for path in sorted(PACKAGE.rglob("*.py")) + sorted(LESSONS.glob("*.py")):
        for lineno, message in marked_calls(path):
            where = (path.relative_to(ROOT).as_posix(), lineno)
            if pot.get(message) is None:
                pot.add(message, locations=[where])
            elif where not in pot[message].locations:              # a label both a lesson and the package use
                pot[message].locations.append(where)
    for message, where in shown_words():                       # what show_source displays besides the code
        if pot.get(message) is None:
            pot.add(message, locations=[where], flags=["no-python-format"])
        elif where not in pot[message].locations:
            pot[message].locations.append(where)
    return pot


def _read(path: Path, **kw) -> Catalog:
    with open(path, "rb") as f:
        return read_po(f, **kw)


def _po_bytes(catalog: Catalog, **kw) -> bytes:
    out = io.BytesIO()
    write_po(out, catalog, width=120, sort_output=False, omit_header=False, **kw)
    return out.getvalue()


def _mo_bytes(catalog: Catalog) -> bytes:
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


def _shown(path: Path) -> str:
    """A path as the repository names it, or as it is when it lies elsewhere."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _mo_messages(data: bytes) -> dict:
    """A compiled catalog's messages and their translations: what gettext reads, whatever bytes a Babel version
    writes around them (two versions order or pad the file differently)."""
    from babel.messages.mofile import read_mo
    return {(m.context, m.id if isinstance(m.id, str) else tuple(m.id)):
            m.string if isinstance(m.string, str) else tuple(m.string) for m in read_mo(io.BytesIO(data)) if m.id}


def fields(message: str) -> list:
    """The placeholders of a str.format template, in order: "{name} at {step:d}" -> ["name", "step:d"]."""
    try:
        return sorted(f"{name}:{spec}" if spec else name
                      for _, name, spec, _ in string.Formatter().parse(message) if name is not None)
    except ValueError as error:
        return [f"<unparsable: {error}>"]


def problems() -> list:
    """What keeps the catalog from being complete and shipped: one line each (empty when all is well)."""
    found = []
    pot = template()
    po = _read(PO, locale="zh_CN")
    for message in pot:
        if not message.id:
            continue
        where = ", ".join(f"{f}:{n}" for f, n in message.locations[:2])
        translated = po.get(message.id, context=message.context)
        if translated is None or not translated.string:
            found.append(f"no Chinese translation ({where}): {message.id!r}")
        elif translated.fuzzy:
            found.append(f"translation marked fuzzy, check it ({where}): {message.id!r}")
        elif fields(message.id) != fields(translated.string):
            found.append(f"placeholders differ ({where}): {message.id!r} has {fields(message.id)}, "
                         f"the translation {fields(translated.string)}")
    stale = sorted(m.id for m in po if m.id and pot.get(m.id, context=m.context) is None)
    found += [f"the .po translates a message the package no longer has: {s!r} (run python tools/messages.py)"
              for s in stale]
    if not MO.exists() or _mo_messages(MO.read_bytes()) != _mo_messages(_mo_bytes(po)):
        found.append(f"{_shown(MO)} is not compiled from the .po: run python tools/messages.py")
    if not POT.exists() or {m.id for m in _read(POT) if m.id} != {m.id for m in pot if m.id}:
        found.append(f"{_shown(POT)} is stale: run python tools/messages.py")
    return found


def update(added: dict) -> Catalog:
    """Write the template, bring the .po up to date with it (new messages empty, gone ones dropped, `added`
    translations filled in), and compile the .mo."""
    pot = template()
    POT.parent.mkdir(parents=True, exist_ok=True)
    POT.write_bytes(_po_bytes(pot))
    po = _read(PO, locale="zh_CN") if PO.exists() else Catalog(locale="zh_CN", **HEADER)
    po.update(pot, no_fuzzy_matching=True)
    po.obsolete.clear()
    for message in po:
        if message.id and message.id in added:
            message.string = added[message.id]
            message.flags.discard("fuzzy")
    PO.parent.mkdir(parents=True, exist_ok=True)
    PO.write_bytes(_po_bytes(po))
    MO.write_bytes(_mo_bytes(po))
    return po


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--add", action="append", default=[], type=Path, help="a JSON file of translations")
    parser.add_argument("--check", action="store_true", help="only report what is wrong")
    args = parser.parse_args(argv)
    if not args.check:
        added = {}
        for path in args.add:
            added.update(json.loads(path.read_text(encoding="utf-8")))
        po = update(added)
        unknown = sorted(set(added) - {m.id for m in po})
        for message in unknown:
            print(f"not a message the package has (left out): {message!r}", file=sys.stderr)
    found = problems()
    for line in found:
        print(line)
    print(f"{len(found)} problem(s) in the Chinese catalog" if found else "the Chinese catalog is complete")
    return 1 if found and args.check else 0


if __name__ == "__main__":
    sys.exit(main())

