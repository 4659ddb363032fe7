"""The website (`make site`, Jupyter Book 1): its table of contents holds every lesson of both editions and its
student copy, every documentation page and the instructor notes, and nothing it must not (text sources); `make
test-rest` builds it with warnings as errors, so a broken link or page fails the suite."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOC = (ROOT / "site" / "_toc.yml").read_text(encoding="utf-8")
CONFIG = (ROOT / "site" / "_config.yml").read_text(encoding="utf-8")


def test_the_site_holds_every_lesson_of_both_editions_and_every_page():
    files = re.findall(r"^\s*(?:- file|root): (\S+)$", TOC, re.M)
    lessons = [f"notebooks/{p.stem}" for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    zh = [f"notebooks/zh/{p.stem}" for p in sorted((ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))]
    docs = [f"docs/{p.stem}" for p in sorted((ROOT / "docs").glob("*.md"))]
    students = [f.replace("notebooks/", "notebooks/student/", 1) if f.count("/") == 1 else
                f.replace("notebooks/zh/", "notebooks/zh/student/", 1) for f in lessons + zh]
    assert files[0] == "README" and len(files) == len(set(files))
    assert set(lessons + zh + students + docs + ["README.zh-CN", "CONTRIBUTING", "notebooks/README",
                                                 "notebooks/zh/GLOSSARY"]) == set(files[1:])
    assert all(list((ROOT / f).parent.glob(Path(f).name + ".*")) for f in files), "a page the toc names is missing"


def test_the_site_shows_stored_outputs_and_the_widget_s_picture():
    assert 'execute_notebooks: "off"' in CONFIG                       # the committed outputs, never run again
    assert '["html", "application/vnd.jupyter.widget-view+json", null]' in CONFIG   # lesson 05's stored picture
    assert "notebooks/src/**" in CONFIG and "notebooks/zh/src/**" in CONFIG and "student" not in CONFIG


def test_the_site_suppresses_no_warning():
    """Every warning of the build is an error (-W, below), and no category of them is switched off."""
    assert not re.search(r"suppress_warnings:\s*\[\s*[\"']", CONFIG)


def test_make_test_rest_builds_the_site_with_warnings_as_errors():
    text = (ROOT / "Makefile").read_text()
    recipe = text.split("\ntest-rest:", 1)[1].split("\n\n", 1)[0]
    site = text.split("\nsite:", 1)[1].split("\n\n", 1)[0]
    assert "$(MAKE) --no-print-directory site" in recipe
    # built before the tests, so that tests/browser/test_site_browser.py opens this very build
    assert recipe.index("--no-print-directory site") < recipe.index("-m pytest")
    books = text.split("\nsite-en:", 1)[1].split("\n\n", 1)[0] + text.split("\nsite-zh:", 1)[1].split("\n\n", 1)[0]
    assert "-j2 site-en site-zh" in site                              # the two books side by side
    assert "jupyter-book build . --config site/_config.yml --toc site/_toc.yml" in books and books.count(" -W") == 2


def test_publishing_builds_the_same_site_and_deploys_it_to_pages():
    workflow = (ROOT / ".github" / "workflows" / "site.yml").read_text(encoding="utf-8")
    assert "run: make site" in workflow and "path: build/site/_build/html" in workflow
    assert "actions/upload-pages-artifact" in workflow and "actions/deploy-pages" in workflow
    assert re.search(r"pages: write", workflow) and re.search(r"branches: \[main\]", workflow)


def test_the_chinese_site_is_a_book_of_its_own_in_chinese_holding_the_same_pages():
    """site/zh: Chinese as the book's language (its buttons, its search's word splitting), the Chinese edition first,
    and the same pages as the English site, so that no link of a Chinese page leads nowhere."""
    zh_toc = (ROOT / "site" / "zh" / "_toc.yml").read_text(encoding="utf-8")
    zh_config = (ROOT / "site" / "zh" / "_config.yml").read_text(encoding="utf-8")
    pages = lambda toc: re.findall(r"^\s*(?:- file|root): (\S+)$", toc, re.M)   # noqa: E731
    assert pages(zh_toc)[0] == "README.zh-CN" and sorted(pages(zh_toc)) == sorted(pages(TOC))
    assert "language: zh_CN" in zh_config and "language: en" in CONFIG
    assert zh_config.replace("language: zh_CN", "language: en").count("execute_notebooks") == 1
    text = (ROOT / "Makefile").read_text()
    site = text.split("\nsite:", 1)[1].split("\n\n", 1)[0]
    assert "--config site/zh/_config.yml --toc site/zh/_toc.yml" in text.split("\nsite-zh:", 1)[1] and "jieba" in site
    assert "build/site/_build/html/zh" in site                       # published under the English site, at zh/
    # Sphinx's Chinese splitter, with the Latin words it looks up kept in a set (its list made the build quadratic)
    assert "chinese_search: ../_ext" in zh_config and "chinese_search" not in CONFIG


def test_each_page_says_its_own_language():
    import sys
    sys.path.insert(0, str(ROOT / "site" / "_ext"))
    from page_language import page_language
    assert page_language("notebooks/zh/01_leaf_tensors") == page_language("README.zh-CN") == "zh-CN"
    assert page_language("notebooks/01_leaf_tensors") == page_language("docs/setup") == "en"
