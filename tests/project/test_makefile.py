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


def _collected(marker):
    """The test ids pytest collects under `-m marker` (the whole suite, as the Makefile runs it)."""
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "-m", marker],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode in (0, 5), run.stdout[-2000:] + run.stderr[-2000:]
    return {line for line in run.stdout.splitlines() if "::" in line}


def test_make_test_and_make_test_rest_split_the_suite_by_marker_and_ci_runs_both():
    """`make test` runs everything but the lessons' other copies (`copies`, set in conftest.py by folder) and the
    tests marked `extended` in their files; `make test-rest` runs exactly those, `make test-all` both, and CI both:
    every test runs in one of the two, none in both. `make quick` leaves out what is marked `slow`, which every
    `extended` test, every lesson and nothing quick is."""
    text = (ROOT / "Makefile").read_text()
    assert '-m "not copies and not extended"' in _recipe(text, "test") and "--ignore" not in _recipe(text, "test")
    assert '-m "copies or extended"' in _recipe(text, "test-rest")
    assert "test-rest" in _recipe(text, "test-all")
    assert "make test\nmake test-rest" in (ROOT / ".ci" / "run").read_text()
    assert '-m "not slow"' in _recipe(text, "quick")
    every, test, rest = _collected(""), _collected("not copies and not extended"), _collected("copies or extended")
    assert test | rest == every and not test & rest and len(every) > 2000
    slow = _collected("slow")
    assert rest <= slow and {t for t in every if ".ipynb::" in t} <= slow
    assert any(t.startswith("notebooks/zh/") for t in rest) and any(t.startswith("notebooks/student/") for t in rest)
    assert any(t.startswith("notebooks/0") for t in test) and any("test_browser" in t for t in rest)
