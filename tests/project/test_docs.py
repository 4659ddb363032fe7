"""The front door: a README short enough to read in five minutes, and documentation pages whose links all lead
somewhere (a file that exists, and a heading in it when the link names one)."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "README.zh-CN.md", ROOT / "CONTRIBUTING.md", ROOT / "notebooks" / "README.md",
         *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"(?m)^#{1,6} (.+)$", text)}


def test_the_readme_is_short():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= 12 * 1024, f"README.md is {size} bytes; the details belong in docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_leads_somewhere(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.relative_to(ROOT)} links to {target}: no such file"
        if anchor and file.suffix == ".md":
            assert anchor in anchors(file), f"{page.relative_to(ROOT)} links to {target}: no such heading"


def test_the_link_check_can_fail(tmp_path, monkeypatch):
    page = tmp_path / "a.md"
    page.write_text("# Title\n\n## One part\n\n[x](#one-part) [y](#two)\n")
    assert "one-part" in anchors(page) and "two" not in anchors(page)
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    with pytest.raises(AssertionError, match="no such heading"):
        test_every_link_leads_somewhere(page)
    page.write_text("[z](missing.md)\n")
    with pytest.raises(AssertionError, match="no such file"):
        test_every_link_leads_somewhere(page)
