"""The project speaks of itself alone: no word in a tracked file about how it is made (the machines and tools its
authors borrow, their sessions or issue tracker). Public references stay (pytorch/pytorch#22095, a PR of neosr)."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Words that only describe how the project is developed, never what it is or does.
DEVELOPMENT = re.compile(r"\b(?:lent|lend(?:s|ing)?|device tool|device time|budget_left|give_back|can_start_another|"
                         r"subagents?|farm-bench|farm-studio|issues show|closing note)\b|\.library/", re.I)
TEXT = (".py", ".md", ".ipynb", ".toml", ".yml", ".yaml", ".cfg", ".txt", ".po", ".pot", "Makefile", ".sh", "run")


def _tracked():
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    return [ROOT / n for n in names if n.endswith(TEXT) and n != "tests/project/test_project_words.py"]


def test_no_tracked_file_speaks_of_how_the_project_is_developed():
    files = _tracked()
    found = []
    for path in files:
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            found += [f"{path.relative_to(ROOT)}: {m.group()}" for m in DEVELOPMENT.finditer(text)]
    assert len(files) > 100 and not found, found[:10]


def test_the_words_check_can_fail():
    assert DEVELOPMENT.search("run it on the lent GPU") and DEVELOPMENT.search("see .library/env")
    assert not DEVELOPMENT.search("pytorch/pytorch#22095 and a GPU machine's run")
