"""The package's seams: a module's underscore names are its own (no other module imports them), and every module is
named in the maps a reader starts from (gan_lessons/__init__.py, the doctor's and the checkers' package docstrings,
CONTRIBUTING's layout)."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gan_lessons"


def _modules(folder):
    """The modules and packages directly in a folder, by the name a map gives them."""
    return sorted({p.stem for p in folder.glob("*.py") if p.stem != "__init__"} |
                  {p.name for p in folder.iterdir() if (p / "__init__.py").exists()})


def underscore_imports(source: str) -> list:
    """The names a module's source imports from gan_lessons that start with one underscore (`_` is gettext's)."""
    return [f"{node.module}.{a.name}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gan_lessons")
            for a in node.names if a.name.startswith("_") and not a.name.startswith("__") and a.name != "_"]


def test_no_module_imports_another_module_s_underscore_names():
    found = {str(p.relative_to(ROOT)): names for p in PACKAGE.rglob("*.py")
             if (names := underscore_imports(p.read_text()))}
    assert not found, found


def test_the_check_finds_an_underscore_import():
    """The check above can fail: a module that imports a private name is caught, gettext's `_` is not."""
    source = ("from gan_lessons.i18n import _\n"
              "from gan_lessons.exercises.lesson08 import (_grad_at,\n    check_lazy_r1)\n")
    assert underscore_imports(source) == ["gan_lessons.exercises.lesson08._grad_at"]


def test_every_module_is_in_the_package_map_and_contributing_s_layout():
    package_map = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text()))
    mapped = set(re.findall(r"^  (\w+)\s", package_map, re.M))
    modules = set(_modules(PACKAGE)) - {"locale", "assets"}
    assert modules == mapped, (sorted(modules - mapped), sorted(mapped - modules))
    layout = (ROOT / "CONTRIBUTING.md").read_text().split("## Layout", 1)[1].split("```")[1]
    said = {m for m in modules if re.search(rf"^  {re.escape(m)}(\.py|/)\s", layout, re.M)}
    assert said == modules, sorted(modules - said)


def test_every_doctor_and_checker_module_is_in_its_package_s_map():
    for folder in (PACKAGE / "doctor", PACKAGE / "exercises"):
        text = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        missing = [m for m in _modules(folder) if not re.search(rf"\b{m}(\.py)?\b", text)]
        if folder.name == "exercises":    # the lessons' own modules are named as a range (lesson01 ... lesson14)
            missing = [m for m in missing if not re.fullmatch(r"lesson\d\d", m)]
        assert not missing, (folder.name, missing)
    lessons = [m for m in _modules(PACKAGE / "exercises") if re.fullmatch(r"lesson\d\d", m)]
    said = ast.get_docstring(ast.parse((PACKAGE / "exercises" / "__init__.py").read_text()))
    assert f"lesson01 ... {lessons[-1]}" in said, lessons[-1]
