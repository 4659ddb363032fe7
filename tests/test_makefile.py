"""The Makefile's header lists every target, a line each, and nothing that is not one."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_header_lists_every_target():
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", text, re.M))
    listed = re.findall(r"^#   make ([a-z-]+) ", text, re.M)
    assert len(listed) == len(set(listed)) and set(listed) == targets, sorted(targets ^ set(listed))
