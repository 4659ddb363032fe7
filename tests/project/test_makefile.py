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


def test_quick_leaves_out_only_modules_that_exist_and_make_test_runs_them():
    text = (ROOT / "Makefile").read_text()
    skip = re.search(r"^QUICK_SKIP := (.*?)(?<!\\)$", text, re.M | re.S).group(1).replace("\\\n", " ").split()
    assert skip and all(len(list((ROOT / "tests").glob(f"*/test_{name}.py"))) == 1 for name in skip), skip
    recipe = text.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "pytest -n 2 --dist loadscope" in recipe and "--ignore" not in recipe     # the whole suite, nothing left out


def test_make_test_leaves_out_only_the_lessons_other_copies_and_make_test_all_runs_them():
    """`make test` runs the English lessons under nbval; the `copies` marker (conftest.py) takes the Chinese edition
    and the student copies to `make test-all`, which CI runs: every notebook runs in one of the two."""
    import subprocess
    import sys
    text = (ROOT / "Makefile").read_text()
    assert '-m "not copies"' in text.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "test-copies" in text.split("\ntest-all:", 1)[1].split("\n\n", 1)[0]
    assert "make test\nmake test-copies" in (ROOT / ".ci" / "run").read_text()

    def notebooks(marker):
        run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "-m", marker,
                              "notebooks"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        return {line.split("::")[0] for line in run.stdout.splitlines() if line.endswith(("]", "::Cell 0"))
                or "::Cell" in line}
    copies, english = notebooks("copies"), notebooks("not copies")
    every = {str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").rglob("*.ipynb")
             if ".ipynb_checkpoints" not in p.parts}
    assert copies | english == every and not copies & english
    assert english == {str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*.ipynb")}
