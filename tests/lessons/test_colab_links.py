"""Colab: every lesson and its student copy has an "Open in Colab" link in the README's lesson table, built from
REPO_URL and pointing at a file that exists; lesson 06 (and its copy) carries the notebook metadata that makes Colab
open it on a GPU runtime, set in its text source's header."""
import json
import re
import sys
from pathlib import Path

import pytest

from gan_lessons.lesson import REPO_URL

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
GITHUB = "https://github.com/"
# Colab opens a GitHub file at colab.research.google.com/github/OWNER/REPO/blob/BRANCH/PATH.
COLAB = "https://colab.research.google.com/github/" + REPO_URL.removeprefix(GITHUB) + "/blob/main/"
COLAB_LINK = re.compile(r"\]\((https://colab\.research\.google\.com/(?!assets/)[^)\s]+)\)")  # not the badge
# What Colab reads from a notebook's top-level metadata to open it on a GPU runtime (googlecolab/colabtools'
# own notebooks carry exactly this).
GPU_RUNTIME = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}
ON_A_GPU = {"06_train_mnist_gan.ipynb"}


def lesson_table():
    section = README.split("## What the suite teaches", 1)[1].split("\n## ", 1)[0]
    return {m[1]: m[0] for m in re.finditer(r"^\| \[\d\d · [^\n]*?\]\(notebooks/(\d\d_\w+\.ipynb)\) \|.*$", section,
                                             re.M)}


def test_repo_url_is_a_github_repository():
    assert REPO_URL.startswith(GITHUB) and REPO_URL.count("/") == 4 and not REPO_URL.endswith((".git", "/"))


def test_the_table_has_one_row_per_lesson():
    assert LESSONS and set(lesson_table()) == {p.name for p in LESSONS}


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem[:2])
def test_each_lesson_row_links_the_answered_lesson_and_the_student_copy_in_colab(path):
    row = lesson_table()[path.name]
    assert f"[answered]({COLAB}notebooks/{path.name})" in row, row[:300]
    assert f"[student]({COLAB}notebooks/student/{path.name})" in row, row[:300]


def test_every_colab_link_in_the_readme_is_built_from_repo_url_and_points_at_a_file():
    links = COLAB_LINK.findall(README)
    assert len(links) >= 2 * len(LESSONS)
    for link in links:
        assert link.startswith(COLAB), f"{link} is not built from REPO_URL ({REPO_URL})"
        assert (ROOT / link.removeprefix(COLAB)).is_file(), f"{link} points at no file in the repository"


def test_the_colab_badge_is_shown_once_above_the_table():
    badge = "https://colab.research.google.com/assets/colab-badge.svg"
    section = README.split("## What the suite teaches", 1)[1]
    assert README.count(badge) == 1 and section.index(badge) < section.index("| notebook |")


def _metadata(path):
    return json.loads(path.read_text())["metadata"]


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem[:2])
def test_lesson_06_and_its_student_copy_ask_colab_for_a_gpu_runtime(path):
    student = ROOT / "notebooks" / "student" / path.name
    for notebook in (path, student):
        metadata = _metadata(notebook)
        carried = {k: metadata[k] for k in GPU_RUNTIME if k in metadata}
        if path.name in ON_A_GPU:
            assert carried == GPU_RUNTIME, f"{notebook.relative_to(ROOT)}: {carried}"
        else:                                        # the other lessons run on Colab's default (CPU) runtime
            assert "accelerator" not in metadata, notebook.relative_to(ROOT)


def test_the_gpu_runtime_comes_from_the_source_header_and_drift_is_caught(tmp_path):
    """Lesson 06's text source sets it in its jupytext header; the build carries it into the notebook, and
    build_notebook's check (tests/lessons/test_notebooks.py) reports a notebook that lost it."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_notebook
    import nbformat
    source = build_notebook.SOURCES / "06_train_mnist_gan.py"
    assert build_notebook.notebook_metadata(source) == GPU_RUNTIME
    assert build_notebook.notebook_metadata(build_notebook.SOURCES / "01_leaf_tensors.py") == {}
    nb = nbformat.read(ROOT / "notebooks/06_train_mnist_gan.ipynb", as_version=4)
    assert build_notebook.assemble(source, nb, keep_outputs=True).metadata["accelerator"] == "GPU"
    for key in GPU_RUNTIME:
        nb.metadata.pop(key)
    nbformat.write(nb, tmp_path / "06_train_mnist_gan.ipynb")
    assert build_notebook.differences(source, tmp_path / "06_train_mnist_gan.ipynb")


ALL_LESSONS = LESSONS + sorted((ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", ALL_LESSONS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_each_lesson_opens_itself_in_colab_and_its_student_copy_opens_the_student_copy(path):
    """A badge under the title, so a lesson opened anywhere (GitHub, a download, a course folder) can move to Colab:
    the answered lesson's opens the answered lesson, the student copy's the student copy, never the answers."""
    badge = "https://colab.research.google.com/assets/colab-badge.svg"
    for notebook, target in ((path, path), (path.parent / "student" / path.name, path.parent / "student" / path.name)):
        first = json.loads(notebook.read_text())["cells"][0]
        text = "".join(first["source"])
        links = re.findall(rf"\]\({re.escape(badge)}\)\]\(([^)\s]+)\)", text)
        assert first["cell_type"] == "markdown" and links == [COLAB + target.relative_to(ROOT).as_posix()], \
            f"{notebook.relative_to(ROOT)}: {links}"


def _editions(notebook: Path) -> list:
    """The relative links of a notebook's first cell that lead to another lesson notebook, resolved."""
    first = "".join(json.loads(notebook.read_text())["cells"][0]["source"])
    return [(notebook.parent / target).resolve() for target in re.findall(r"\]\(([^)\s:]+\.ipynb)\)", first)]


@pytest.mark.parametrize("path", ALL_LESSONS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_each_lesson_links_its_other_language_and_its_student_copy_and_a_student_copy_no_answers(path):
    """Under the badge: the lesson in the other language and its student copy; a student copy links the other
    language's student copy and nothing answered."""
    zh = path.parent.name == "zh"
    twin = (path.parent.parent if zh else path.parent / "zh") / path.name
    assert _editions(path) == [twin.resolve(), (path.parent / "student" / path.name).resolve()], _editions(path)
    student = path.parent / "student" / path.name
    assert _editions(student) == [(twin.parent / "student" / path.name).resolve()], _editions(student)
    assert all(target.exists() for target in _editions(path) + _editions(student))
