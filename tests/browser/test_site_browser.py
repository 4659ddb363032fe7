"""The website (`make site`) opened in a real browser: every lesson page of both editions loads with every picture
its notebook stored (graphs, figures), lesson 05 shows the widget's stored picture, the Chinese pages draw Chinese
glyphs (not the empty boxes of a missing font), and every internal link leads to a page and, where it names
one, an anchor on it. `make test` builds the site before the tests; run alone, this builds it first."""
import json
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "build" / "site" / "_build" / "html"
CHROMIUM = "/usr/bin/chromium"
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted((ROOT / "notebooks" / "zh").glob(
    "[0-9][0-9]_*.ipynb"))
pytestmark = [pytest.mark.slow, pytest.mark.extended, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium: apt-get install chromium")]


@pytest.fixture(scope="module")
def site():
    if not (HTML / "index.html").exists():
        done = subprocess.run(["make", "--no-print-directory", "site"], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return HTML


@pytest.fixture(scope="module")
def page(site):
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--allow-file-access-from-files"])
        yield browser.new_page(viewport={"width": 1280, "height": 900})
        browser.close()


def _html_of(notebook: Path) -> Path:
    return HTML / notebook.relative_to(ROOT).with_suffix(".html")


def _stored_pictures(notebook: Path) -> int:
    cells = json.loads(notebook.read_text())["cells"]
    return sum(1 for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])
               if any(k in o.get("data", {}) for k in ("image/png", "image/svg+xml")))


# The pictures a page holds itself (the Colab badge is fetched from the web, which the site does not depend on).
IMAGES = """() => Array.from(document.images).filter(i => !/^https?:/.test(i.getAttribute('src')))
                   .map(i => ({complete: i.complete, width: i.naturalWidth, alt: i.alt,
                               shown: i.getBoundingClientRect().width}))"""


@pytest.mark.parametrize("notebook", LESSONS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_every_lesson_page_loads_with_its_pictures(page, notebook):
    page.goto(_html_of(notebook).as_uri())
    page.wait_for_load_state("load")
    assert page.locator("h1").first.inner_text().strip(), "the page has no title"
    images = page.evaluate(IMAGES)
    broken = [i["alt"] for i in images if not i["complete"] or i["width"] == 0]
    assert not broken, f"pictures that did not load: {broken}"
    drawn = [i for i in images if i["width"] > 0]
    assert len(drawn) >= _stored_pictures(notebook), \
        f"the notebook stores {_stored_pictures(notebook)} pictures, the page draws {len(drawn)}"


def test_lesson_05_shows_the_widget_s_stored_picture(page):
    for lesson in ("05_gan_update_strategies", "zh/05_gan_update_strategies"):
        page.goto((HTML / "notebooks" / f"{lesson}.html").as_uri())
        graphs = page.evaluate("""() => Array.from(document.querySelectorAll('.gan-lessons-graph img')).map(
            i => ({alt: i.alt, width: i.naturalWidth, shown: i.getBoundingClientRect().width}))""")
        assert graphs and all(g["width"] > 300 and g["shown"] > 300 and "d_first_reuse_fake" in g["alt"]
                              for g in graphs), graphs


GLYPHS = """(text) => {
  const el = Array.from(document.querySelectorAll('article p')).find(p => /[\\u4e00-\\u9fff]/.test(p.textContent));
  const font = getComputedStyle(el).font;
  const draw = (ch) => { const c = document.createElement('canvas'); c.width = 40; c.height = 40;
    const g = c.getContext('2d'); g.font = font; g.fillText(ch, 4, 30);
    return Array.from(g.getImageData(0, 0, 40, 40).data).join(','); };
  const shapes = Array.from(text).map(draw);
  return {font: font, distinct: new Set(shapes).size, count: shapes.length};
}"""


def test_chinese_pages_draw_chinese_glyphs(page):
    """A missing CJK font draws every character as the same empty box: distinct characters must draw distinctly."""
    for name in ("notebooks/zh/01_leaf_tensors.html", "README.zh-CN.html"):
        page.goto((HTML / name).as_uri())
        seen = page.evaluate(GLYPHS, "梯度计算图张量")
        assert seen["distinct"] == seen["count"], f"{name}: Chinese characters drawn alike with {seen['font']}"


def test_the_glyph_check_can_fail(page):
    page.set_content("<article><p>梯度</p></article>")
    seen = page.evaluate(GLYPHS.replace("getComputedStyle(el).font", "'16px NoSuchFontAtAll, monospace'")
                         .replace("g.fillText(ch, 4, 30)", "g.fillRect(4, 4, 20, 20)"), "梯度")
    assert seen["distinct"] < seen["count"]


def test_every_internal_link_resolves(site):
    pages = sorted(p for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_"))
    ids = {}
    missing = []
    for source in pages:
        for href in re.findall(r'<a class="reference internal" href="([^"]+)"', source.read_text(encoding="utf-8")):
            url = urlparse(urljoin(source.as_uri(), href))
            target = Path(unquote(url.path))
            if not target.exists():
                missing.append(f"{source.relative_to(site)} -> {href}")
                continue
            if url.fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = set(re.findall(r'\bid="([^"]+)"', target.read_text(encoding="utf-8")))
                if unquote(url.fragment) not in ids[target]:
                    missing.append(f"{source.relative_to(site)} -> {href} (no such anchor)")
    assert len(pages) >= len(LESSONS) and not missing, missing[:10]


def test_the_chinese_site_speaks_chinese_and_its_search_finds_a_chinese_word(page, site):
    """At zh/: the pages say lang="zh-CN" (and a Chinese page of the English site too), the interface is Chinese, and
    searching 叶子 (a word inside longer Chinese text, which only a segmenting search finds) lists the Chinese
    lessons that teach it."""
    from urllib.parse import quote
    zh = site / "zh"
    page.goto((zh / "README.zh-CN.html").as_uri())
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    assert page.locator("input[name=q]").first.get_attribute("placeholder") == "搜索本书……"
    page.goto((site / "notebooks" / "zh" / "01_leaf_tensors.html").as_uri())
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    page.goto((site / "notebooks" / "01_leaf_tensors.html").as_uri())
    assert page.locator("html").get_attribute("lang") == "en"
    page.goto((zh / "search.html").as_uri() + "?q=" + quote("叶子"))
    results = page.locator("#search-results li a")
    results.first.wait_for(timeout=30_000)
    found = {urlparse(unquote(a.get_attribute("href") or "")).path.split("/")[-1] for a in results.all()}
    assert {"01_leaf_tensors.html"} <= found, found
    hrefs = [a.get_attribute("href") or "" for a in results.all()]
    assert any("notebooks/zh/01_leaf_tensors" in h for h in hrefs), hrefs


def test_no_page_of_either_site_holds_an_unresolved_reference(site):
    """MyST writes a link it cannot resolve as `<span class="xref myst">`: plain text where a link was meant. The
    build fails on the warning; this reads what it wrote, in both sites."""
    pages = sorted(site.rglob("*.html"))
    assert any("/zh/" in p.as_posix() for p in pages)
    unresolved = [p.relative_to(site).as_posix() for p in pages if 'class="xref myst' in p.read_text(errors="ignore")]
    assert not unresolved, unresolved

