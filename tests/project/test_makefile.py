"""The Makefile's header lists every target, a line each, and nothing that is not one."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_header_lists_every_target():
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", text, re.M))
    listed = re.findall(r"^#   make ([a-z-]+) ", text, re.M)
    assert len(listed) == len(set(listed)) and set(listed) == targets, sorted(targets ^ set(listed))


def test_lab_opens_a_working_copy_and_keeps_what_is_there(tmp_path):
    """`make lab` runs the lessons from work/, a copy: the committed notebooks are never the ones a student runs,
    and a lesson already copied is not overwritten."""
    import subprocess
    text = (ROOT / "Makefile").read_text()
    recipe = text.split("\nlab:", 1)[1].split("\n\n", 1)[0]
    assert "cp -Rn notebooks/. work/" in recipe and "jupyter lab work/" in recipe
    assert "work/" in (ROOT / ".gitignore").read_text().split()
    (tmp_path / "notebooks" / "zh").mkdir(parents=True)
    (tmp_path / "notebooks" / "01.ipynb").write_text("committed")
    (tmp_path / "notebooks" / "zh" / "01.ipynb").write_text("committed zh")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "01.ipynb").write_text("the student's own run")
    copy = next(line.strip().lstrip("@") for line in recipe.splitlines() if "cp -Rn" in line)
    subprocess.run(["sh", "-c", copy], cwd=tmp_path, check=True)          # the recipe's own line
    assert (tmp_path / "work" / "01.ipynb").read_text() == "the student's own run"
    assert (tmp_path / "work" / "zh" / "01.ipynb").read_text() == "committed zh"


def _recipe(text, target):
    return text.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]


PLUGIN = """
import json, os

import pytest


@pytest.hookimpl(trylast=True)          # after conftest.py has marked the lessons
def pytest_collection_modifyitems(items):
    with open(os.environ["MARKERS_OUT"], "w") as out:
        json.dump({item.nodeid: sorted({m.name for m in item.iter_markers()}) for item in items}, out)
"""


def _markers(tmp_path):
    """Every test id pytest collects (the whole suite, as the Makefile runs it) with the names of its markers, from
    one collection (a plugin writes them down once conftest.py has marked the lessons)."""
    import json
    import os
    import subprocess
    import sys
    (tmp_path / "markers_plugin.py").write_text(PLUGIN)
    out = tmp_path / "markers.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "MARKERS_OUT": str(out)}
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "-p",
                          "markers_plugin"], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return {test: set(marks) for test, marks in json.loads(out.read_text()).items()}


def test_make_test_and_make_test_rest_split_the_suite_by_marker_and_ci_runs_both(tmp_path):
    """`make test` runs everything but the lessons' other copies (`copies`, set in conftest.py by folder) and the
    tests marked `extended` in their files; `make test-rest` runs exactly those, `make test-all` both, and CI both:
    every test runs in one of the two, none in both. `make quick` leaves out what is marked `slow`, which every
    `extended` test and every lesson is."""
    text = (ROOT / "Makefile").read_text()
    assert '-m "not copies and not extended"' in _recipe(text, "test") and "--ignore" not in _recipe(text, "test")
    assert '-m "copies or extended"' in _recipe(text, "test-rest")
    assert "test-rest" in _recipe(text, "test-all")
    assert "make test\nmake test-rest" in (ROOT / ".ci" / "run").read_text()
    assert '-m "not slow"' in _recipe(text, "quick")
    marks = _markers(tmp_path)
    test = {t for t, m in marks.items() if not m & {"copies", "extended"}}
    rest = {t for t, m in marks.items() if m & {"copies", "extended"}}
    assert test | rest == set(marks) and not test & rest and len(marks) > 2000
    assert all("slow" in marks[t] for t in rest) and all("slow" in m for t, m in marks.items() if ".ipynb::" in t)
    assert any(t.startswith("notebooks/zh/") for t in rest) and any(t.startswith("notebooks/student/") for t in rest)
    assert any(t.startswith("notebooks/0") for t in test) and any("test_browser" in t for t in rest)
    assert any("slow" not in m for m in marks.values())            # make quick still runs something
