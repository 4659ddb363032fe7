"""The project speaks of itself alone: no tracked file uses the words, kept here only as digests, that would
describe the circumstances of its making rather than the project itself. A word or a two-word phrase of a file is
looked up by its digest, so this file does not spell out what it looks for."""
import hashlib
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# SHA-1 digests (first 16 hex digits) of the words and two-word phrases that no file of the project may use.
UNSAID = {"086c5f3afc996d10", "10c0f4d775813ce9", "12f7e1fe25a2b66e", "167c6e3ef14c8d60", "18f6ff774b8abcdc",
          "37c441ec65040ed8", "3e853d80ad20b2e1", "4a78d263f34ecc39", "5e4fc9a5e1d11202", "96ddd9d6114dfcef",
          "a9ae4b564c79df4e", "b2c9fd9e39274358", "baecc510b130b9c8", "eb453528872eab53", "ef90db3b38081540"}
TEXT = (".py", ".md", ".ipynb", ".toml", ".yml", ".yaml", ".cfg", ".txt", ".po", ".pot", "Makefile", ".sh", "run")


def _digest(phrase: str) -> str:
    return hashlib.sha1(phrase.encode()).hexdigest()[:16]


def unsaid(text: str, digests=UNSAID) -> list:
    """The words and two-word phrases of `text` whose digest is in `digests`."""
    text = text.lower()
    words = re.findall(r"(?<![a-z0-9_-])[a-z][a-z_-]*(?![a-z0-9_-])", text)
    pairs = re.findall(r"(?=(?<![a-z0-9_-])([a-z][a-z_-]* [a-z][a-z_-]*)(?![a-z0-9_-]))", text)   # one space apart
    return [p for p in {*words, *pairs} if _digest(p) in digests]


def _text(path: Path) -> str:
    """What a file says: a notebook's cell sources and text outputs (not its pictures' data)."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return raw
    cells = json.loads(raw)["cells"]
    parts = ["".join(c["source"]) for c in cells]
    for c in cells:
        for out in c.get("outputs", []):
            parts.append("".join(out.get("text", "")))
            parts += ["".join(v) for k, v in out.get("data", {}).items() if k.startswith("text/")]
    return "\n".join(parts)


def test_no_tracked_file_uses_a_word_the_project_does_not_say():
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    files = [ROOT / n for n in names if n.endswith(TEXT) and (ROOT / n).is_file()]
    found = [f"{path.relative_to(ROOT)}: {hit}" for path in files
             for hit in unsaid(_text(path))]
    assert len(files) > 100 and not found, found[:10]


def test_the_lookup_finds_a_planted_word_and_phrase():
    planted = {_digest("gradient"), _digest("saved tensor")}
    assert sorted(unsaid("A saved tensor and its gradient.", planted)) == ["gradient", "saved tensor"]
    assert unsaid("the saved tensors of a graph", planted) == []
