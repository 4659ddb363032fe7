"""The Chinese edition (notebooks/zh/, the package's zh_CN catalog): held to the English lessons, using one term for
each concept, complete in every message the package prints, and drawing Chinese figures with real glyphs."""
import io
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import build_notebook  # noqa: E402
import messages  # noqa: E402
import parity  # noqa: E402

ZH = ROOT / "notebooks" / "zh"
EN_NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ZH_NOTEBOOKS = sorted(ZH.glob("[0-9][0-9]_*.ipynb"))
GLOSSARY = ZH / "GLOSSARY.md"


# The same lesson in both languages ------------------------------------------------------------------------------

def test_every_english_lesson_has_a_chinese_lesson_source_and_student_copy():
    names = {p.name for p in EN_NOTEBOOKS}
    assert {p.name for p in ZH_NOTEBOOKS} == names
    assert {p.stem for p in build_notebook.all_sources("zh")} == {p.stem for p in build_notebook.all_sources("en")}
    assert {p.name for p in (ZH / "student").glob("*.ipynb")} == names


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name)
def test_chinese_lesson_agrees_with_the_english_one(path):
    """Same cells in the same order, same tags and headings, same parsed code (string literals and comments set
    aside), same markers; for the sources and for the committed notebooks."""
    source = build_notebook.source_of(path)
    problems = parity.differences(parity.english_of(source), source) + parity.differences(parity.english_of(path), path)
    assert not problems, "\n".join(problems)


def test_the_parity_check_catches_a_lesson_changed_in_one_language(tmp_path):
    english = build_notebook.SOURCES / "01_leaf_tensors.py"
    text = english.read_text(encoding="utf-8")
    changed = tmp_path / "changed.py"
    changed.write_text(text.replace("nn.Linear(4, 8)", "nn.Linear(4, 9)", 1), encoding="utf-8")
    assert any("the code differs" in line for line in parity.differences(english, changed))
    dropped = tmp_path / "dropped.py"
    dropped.write_text(text.replace("# %% [markdown]\n", "", 1), encoding="utf-8")  # two cells become one
    assert parity.differences(english, dropped)
    marker = tmp_path / "marker.py"
    marker.write_text(text.replace("# SOLUTION:", "# answer:", 1), encoding="utf-8")
    assert any("markers" in line for line in parity.differences(english, marker))
    rows = [line for line in text.splitlines(keepends=True) if line.startswith("# | ")]
    verdict = tmp_path / "verdict.py"          # a verdict row deleted from a table
    verdict.write_text(text.replace(rows[-1], "", 1), encoding="utf-8")
    assert any("table rows" in line for line in parity.differences(english, verdict))
    unbolded = tmp_path / "unbolded.py"        # a bold term lost in translation
    unbolded.write_text(text.replace("**Goal.**", "Goal.", 1), encoding="utf-8")
    assert any("bold terms" in line for line in parity.differences(english, unbolded))
    translated = tmp_path / "translated.py"   # prose, comments and string literals may change: no difference
    translated.write_text(text.replace('"z does not require grad', '"z 不需要梯度').replace("# a tiny", "# 一个"),
                          encoding="utf-8")
    assert parity.differences(english, translated) == []


def test_the_parity_check_catches_a_verdict_reversed_in_translation(tmp_path):
    """Lesson 03's verdict on `.data` ("never") turned into "can be used", and a listing that works said to raise:
    the same cells, tags and code, but another meaning."""
    source = ZH / "src" / "03_inplace_and_versions.py"
    english = parity.english_of(source)
    text = source.read_text(encoding="utf-8")
    assert "| 绝不要用：" in text and "| 能运行，梯度正确 |" in text
    for original, reversed_ in (("| 绝不要用：", "| 可以放心用："), ("| 能运行，梯度正确 |", "| 报错 |")):
        changed = tmp_path / source.name
        changed.write_text(text.replace(original, reversed_, 1), encoding="utf-8")
        assert any("in English and" in line for line in parity.differences(english, changed)), reversed_
    assert parity.differences(english, source) == []


def _verdicts(path):
    """Per code cell, how many ✓ and ✗ its stored outputs print (what a check or claim decided)."""
    out = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "code":
            text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))
            out.append((text.count("✓"), text.count("✗")))
    return out


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name)
def test_chinese_lesson_reaches_the_same_verdicts(path):
    """The same code gives the same ✓ and ✗ in every cell: no prediction's answer or claim changed in translation."""
    assert _verdicts(path) == _verdicts(parity.english_of(path))


# One term for each concept ---------------------------------------------------------------------------------------

def glossary() -> list:
    """(term, [rival, ...]) for each row of the glossary's table."""
    rows = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 4 and not set(cells[0]) <= set("-") and cells[0] != "English":
            rows.append((cells[1], [r for r in re.split(r"[、，,]\s*", cells[2]) if r]))
    return rows


def prose(path) -> str:
    """A Chinese lesson's own words: markdown and code, without seed quotations (blockquotes and 「」) where a seed's
    author's wording is kept."""
    path, text = Path(path), []
    cells = ([c.source for c in build_notebook.cells(path)] if path.suffix == ".py" else
             ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]])
    for source in cells:
        for line in source.splitlines():
            if not line.lstrip().startswith(">"):
                text.append(re.sub(r"「[^」]*」", "", line))
    return "\n".join(text)


def rivals_in(text: str, words: str = "") -> list:
    """The glossary's "do not use" forms found: a Chinese one anywhere in `text` (not in an ordinal: 第二次 is
    "the second time"; nor in 随机种子, a random seed), an English word only in `words`, the prose outside code
    (a variable may be `scaler`)."""
    found = []
    for term, rivals in glossary():
        for rival in rivals:
            if rival.isascii():
                hit = re.search(rf"(?<![\w.`/-]){re.escape(rival)}(?![\w`])", words)
            else:
                hit = re.search(rf"(?<!第)(?<!随机)(?<!随机数){re.escape(rival)}", text)
            if hit:
                found.append((term, rival))
    return found


def words_of(path) -> str:
    """A Chinese lesson's prose as a reader sees it: markdown only, without seed quotations, inline code, links'
    targets and HTML."""
    path = Path(path)
    cells = build_notebook.cells(path) if path.suffix == ".py" else nbformat.read(path, as_version=4).cells
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    text = re.sub(r"^\s*>.*$", "", text, flags=re.M)
    return re.sub(r"`[^`]*`|\]\([^)]*\)|<[^>]+>|「[^」]*」", " ", text)


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name)
def test_chinese_markdown_renders_its_bold_and_joins_its_lines(path):
    """CommonMark does not close `**` after full-width punctuation when a character follows (`**目标。**本课` shows
    its asterisks): bold phrases end before their punctuation. And a line break between two Chinese characters
    shows as a space in the browser: a paragraph's Chinese lines, and a list item's, are not broken."""
    from markdown_it import MarkdownIt
    md = MarkdownIt()
    for k, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        html = md.render(re.sub(r"`[^`\n]*`", "`x`", source))
        assert "**" not in re.sub(r"<code>.*?</code>", "", html), f"cell {k}: unrendered ** in {source[:80]!r}"
        broken = re.findall(r"[\u4e00-\u9fff，。：；）]\n[ \t]*[\u4e00-\u9fff（]", source)   # a list item's too
        assert not broken, f"cell {k}: a line break between Chinese characters ({broken[:3]})"


def test_the_glossary_lists_terms_and_their_rivals():
    rows = dict(glossary())
    assert len(rows) >= 25 and rows["判别器"] == ["鉴别器", "辨别器"] and rows["原地操作"][0] == "就地操作"


@pytest.mark.parametrize("path", ZH_NOTEBOOKS + sorted((ROOT / "notebooks" / "zh" / "src").glob("*.py")),
                         ids=lambda p: p.name)
def test_chinese_lessons_use_the_glossarys_terms(path):
    found = rivals_in(prose(path), words_of(path))
    assert not found, f"rival terms (glossary term, rival): {found}"


def test_the_chinese_readme_and_glossary_notes_use_the_glossarys_terms():
    text = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    text = re.sub(r"「[^」]*」|^\s*>.*$", " ", text, flags=re.M)        # the posts' own words stay theirs
    found = rivals_in(text, re.sub(r"`[^`]*`|\]\([^)]*\)|<[^>]+>", " ", text))
    assert not found, f"README.zh-CN: rival terms (glossary term, rival): {found}"


def test_the_package_messages_use_the_glossarys_terms():
    from babel.messages.pofile import read_po
    with open(messages.PO, "rb") as f:
        translations = "\n".join(m.string for m in read_po(f) if m.id)
    assert not rivals_in(translations), f"rival terms (glossary term, rival): {rivals_in(translations)}"


def test_the_glossary_check_catches_a_rival_term_but_not_a_seed_quote(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "source": ["我们用鉴别器打分。\n", "> 种子原文：就地操作会报错\n"]}]}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    assert rivals_in(prose(path)) == [("判别器", "鉴别器")]
    assert rivals_in("第二次反向传播") == [] and rivals_in("做二次反向传播") == [("二阶反向传播", "二次反向传播")]
    assert rivals_in("随机种子 0") == [] and rivals_in("种子 000 的循环") == [("原帖", "种子")]
    assert rivals_in("", "绕过 scaler 更新") == [("缩放器", "scaler")] and rivals_in("", "绕过 `scaler` 更新") == []


# Every message in Chinese ---------------------------------------------------------------------------------------

def test_every_package_message_has_a_chinese_translation_with_its_placeholders():
    problems = messages.problems()
    assert not problems, "\n".join(problems[:30]) + f"\n({len(problems)} in all; run python tools/messages.py)"


def test_the_catalog_check_catches_a_lost_placeholder_and_a_missing_translation(tmp_path, monkeypatch):
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po
    po = Catalog(locale="zh_CN")
    template = messages.template()
    ids = [m.id for m in template if m.id and "{" in m.id]
    for message in template:
        if message.id and message.id != ids[1]:
            po.add(message.id, "丢了占位符" if message.id == ids[0] else "译文 " + " ".join(
                "{" + f + "}" for f in messages.fields(message.id)))
    path = tmp_path / "gan_lessons.po"
    with open(path, "wb") as f:
        write_po(f, po)
    monkeypatch.setattr(messages, "PO", path)
    found = messages.problems()
    assert any(line.startswith("placeholders differ") and repr(ids[0]) in line for line in found)
    assert any(line.startswith("no Chinese translation") and repr(ids[1]) in line for line in found)


def test_the_compiled_catalog_is_compared_by_its_messages_not_its_bytes(tmp_path, monkeypatch):
    """A .mo whose bytes differ (another Babel lays the file out otherwise) but whose messages are the .po's passes;
    one translation changed in the .mo is caught."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po
    with open(messages.PO, "rb") as f:
        po = read_po(f, locale="zh_CN")
    same = tmp_path / "same.mo"
    same.write_bytes(messages.MO.read_bytes() + b"\0" * 8)            # other bytes, the same messages
    monkeypatch.setattr(messages, "MO", same)
    assert not [p for p in messages.problems() if "not compiled" in p]
    first = next(m for m in po if m.id and isinstance(m.id, str))
    first.string = "改过的译文"
    changed = tmp_path / "changed.mo"
    with open(changed, "wb") as f:
        write_mo(f, po)
    monkeypatch.setattr(messages, "MO", changed)
    assert [p for p in messages.problems() if "not compiled" in p]


def test_language_is_chosen_by_setup_or_the_environment_and_english_is_the_default():
    code = ("from gan_lessons.i18n import _, language, set_language\n"
            "print(language(), _('right'))\n"
            "set_language('zh_CN.UTF-8'); print(language(), _('right'))\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "GAN_LESSONS_LANG"}
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert plain.stdout.splitlines() == ["en right", "zh 对"]
    chinese = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**env, "GAN_LESSONS_LANG": "zh"})
    assert chinese.stdout.splitlines()[0] == "zh 对"


def test_an_unknown_language_says_what_to_write_instead():
    import os

    from gan_lessons import i18n
    with pytest.raises(ValueError, match=r"^language 'fr' is not one the lessons speak: use 'en' \(English\) or 'zh'"):
        i18n.set_language("fr")
    env = {**os.environ, "GAN_LESSONS_LANG": "klingon"}
    run = subprocess.run([sys.executable, "-c", "from gan_lessons.lesson import setup; setup()"], capture_output=True,
                         text=True, env=env)
    assert run.returncode != 0
    assert run.stderr.strip().splitlines()[-1] == (
        "ValueError: GAN_LESSONS_LANG='klingon': language 'klingon' is not one the lessons speak: use 'en' "
        "(English) or 'zh' (简体中文)")


# Chinese figures that render -------------------------------------------------------------------------------------

def _missing_glyphs(fonts=None) -> list:
    """The "Glyph ... missing from font" warnings of a figure with Chinese title and labels, drawn to PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with matplotlib.rc_context({"font.sans-serif": fonts} if fonts else {}), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, -1], label="判别器的损失")
        ax.set_title("每个迭代周期的损失")
        ax.set_xlabel("迭代周期")
        ax.legend()
        fig.savefig(io.BytesIO(), format="png")
        plt.close(fig)
    return [str(x.message) for x in w if "missing from font" in str(x.message)]


def test_chinese_figures_draw_every_glyph():
    """With the Chinese setup a CJK font is found (make test installs fonts-noto-cjk) and no glyph is missing."""
    import matplotlib.pyplot as plt

    from gan_lessons import i18n, plots
    saved, rc = i18n._chosen, dict(plt.rcParams)
    try:
        i18n.set_language("zh")
        assert plots.use_language_font() == "", "no CJK font: sudo apt-get install fonts-noto-cjk"
        assert _missing_glyphs() == []
    finally:
        i18n._chosen = saved
        i18n.os.environ.pop(i18n.ENV, None)
        plt.rcParams.update(rc)


def test_the_glyph_check_sees_boxes_without_a_cjk_font():
    assert any("missing from font" in m for m in _missing_glyphs(["DejaVu Sans"]))


# No English left where the package speaks --------------------------------------------------------------------------

def english_pieces() -> dict:
    """{piece: message}: the English words of every catalog message between its placeholders, where a piece is long
    enough (three words or more) to be the package's own sentence and not a name or a number."""
    pieces = {}
    code_words = {text for text, _where in messages.shown_words()}   # comments in code, which the doctor quotes as is
    for message in messages.template():
        if not message.id or message.id in code_words:
            continue
        for piece in re.split(r"\{[^{}]*\}", message.id):
            piece = piece.strip(" .,:;()\n`'\"*")
            if len(re.findall(r"\b[a-z]{2,}\b", piece)) >= 3 and len(piece) >= 15:   # prose words, not names
                pieces[piece] = message.id
    return pieces


def printed(path) -> str:
    """Every text output a notebook stores (tests/lessons/test_notebooks.py reads them the same way)."""
    sys.path.insert(0, str(ROOT / "tests" / "lessons"))    # so that this file also runs on its own
    from test_notebooks import _stored_text
    return "\n".join(_stored_text(Path(path)))


def untranslated(text: str, pieces: dict) -> list:
    return sorted({message for piece, message in pieces.items() if piece in text})


def test_english_pieces_are_found_in_english_output_and_not_in_translations():
    """The search below can fail: lesson 01's English outputs hold the package's English, the catalog's translations
    hold none of it."""
    pieces = english_pieces()
    assert len(pieces) > 100
    assert untranslated(printed(ROOT / "notebooks" / "01_leaf_tensors.ipynb"), pieces)
    from babel.messages.pofile import read_po
    with open(messages.PO, "rb") as f:
        translations = "\n".join(m.string for m in read_po(f) if m.id)
    assert untranslated(translations, pieces) == []


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name)
def test_a_chinese_lesson_prints_no_english_message_of_the_package(path):
    """Everything the package printed while the Chinese lesson ran (nbval checks the stored outputs are what the
    cells print today) is Chinese: no catalog message appears in English."""
    found = untranslated(printed(path), english_pieces())
    assert not found, f"English package messages in {path.name}: {found[:5]}"


def lesson_labels(number: str) -> dict:
    """{English piece: label}: the words of each `tr()` label of one English lesson that the catalog translates,
    between its placeholders, where a piece holds an English word (not a name like `x_fake` or a unit)."""
    from babel.messages.pofile import read_po
    with open(messages.PO, "rb") as f:
        po = read_po(f)
    pieces = {}
    for path in (ROOT / "notebooks" / "src").glob(f"{number}_*.py"):
        for _, label in messages.marked_calls(path):
            translated = po.get(label)
            if translated is None or translated.string == label:
                continue
            parts = re.split(r"\{[^{}]*\}", label)
            for piece in parts:
                piece = piece.strip(" .,:;|()\n")
                words = re.findall(r"(?<![\w.])[A-Za-z][a-z]{2,}(?![\w(.])", piece)
                if len(words) >= 2 or (len(parts) == 1 and words):   # a lone word only as a whole label
                    pieces[piece] = label
    return pieces


def _shows(text: str, piece: str) -> bool:
    """The piece as words of its own, not part of code (`strategy=`, `StrategyPanel(strategy`, `x.grad`)."""
    return re.search(rf"(?<![\w.'\"=(/-]){re.escape(piece)}(?![\w('\"=/-])", text) is not None


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name)
def test_a_chinese_lesson_prints_none_of_its_labels_in_english(path):
    """A table's header, a row's label, a label before a value: what the English lesson prints through tr(), the
    Chinese one prints in Chinese."""
    text = printed(path)
    found = sorted({label for piece, label in lesson_labels(path.name[:2]).items() if _shows(text, piece)})
    assert not found, f"{path.name} prints English labels: {found[:6]}"


def spaced_after_full_width(text: str) -> list:
    """A full-width colon, comma or semicolon followed by one space (`快速模式： {...}`: a label printed before its
    value with print's separator); two or more spaces are a table's padding."""
    return re.findall(r"[：，；](?: (?! )\S.{0,12})", text)


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name)
def test_a_chinese_lesson_prints_no_space_after_full_width_punctuation(path):
    found = spaced_after_full_width(printed(path))
    assert not found, f"{path.name}: {found[:5]}"
    assert spaced_after_full_width("快速模式： {'epochs': 4}") and not spaced_after_full_width("快速模式：{'epochs': 4}")


def test_the_label_search_can_fail():
    """Lesson 05's English output holds its labels; a Chinese output with one English header is caught."""
    pieces = lesson_labels("05")
    english = printed(ROOT / "notebooks" / "05_gan_update_strategies.ipynb")
    assert len(pieces) > 10 and sum(_shows(english, piece) for piece in pieces) > 10
    planted = printed(ZH / "05_gan_update_strategies.ipynb") + "\nstrategy               G fwd/bwd"
    assert any(_shows(planted, piece) for piece in pieces)


SEED_000 = '''
import torch
from torch import nn
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
D = nn.Sequential(nn.Linear(4, 512), nn.ReLU(), nn.Linear(512, 1))
opt_G = torch.optim.Adam(G.parameters())
opt_D = torch.optim.Adam(D.parameters())
criterion = nn.BCEWithLogitsLoss()
x_real = torch.randn(16, 4)
z = torch.randn(16, 8)
x_fake = G(z)
loss_D = criterion(D(x_real), torch.ones(16, 1)) + criterion(D(x_fake), torch.zeros(16, 1))
loss_G = criterion(D(x_fake), torch.ones(16, 1))
opt_D.zero_grad()
loss_D.backward(retain_graph=True)
opt_D.step()
opt_G.zero_grad()
loss_G.backward()
opt_G.step()
'''


def test_the_doctors_diagnosis_of_seed_000s_error_is_chinese_with_the_chinese_setup():
    """Seed 000's order (D's step, then G's loss through the D it changed), under `with doctor()` in Chinese: the
    diagnosis names the same tensor as in English, in Chinese sentences, with no English message left."""
    code = ("import sys\nfrom gan_lessons.i18n import set_language\nset_language(sys.argv[1])\n"
            "from gan_lessons.doctor import doctor\n"
            "try:\n    with doctor():\n" + "".join("        " + line + "\n" for line in SEED_000.strip().splitlines())
            + "except RuntimeError as error:\n    print(error.diagnosis.text())\n")
    runs = {lang: subprocess.run([sys.executable, "-c", code, lang], capture_output=True, text=True, timeout=300)
            for lang in ("en", "zh")}
    for lang, run in runs.items():
        assert run.returncode == 0 and run.stdout.strip(), (lang, run.stderr[-2000:])
    english, chinese = runs["en"].stdout, runs["zh"].stdout
    assert "[512, 1]" in english and "[512, 1]" in chinese and "opt_D.step()" in chinese
    assert CJK.search(chinese) and untranslated(chinese, english_pieces()) == []
    assert untranslated(english, english_pieces())          # the same search finds the English diagnosis


CJK = re.compile(r"[\u4e00-\u9fff]")


# README.zh-CN -----------------------------------------------------------------------------------------------------

def test_the_chinese_readme_links_both_ways_lists_every_lesson_and_gives_the_same_two_commands():
    readme, zh = (ROOT / "README.md").read_text(encoding="utf-8"), (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    assert "(README.zh-CN.md)" in readme and "(README.md)" in zh
    commands = [re.findall(r"^make \w+", block, re.M) for block in
                (readme.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0],
                 zh.split("## 快速开始", 1)[1].split("```bash", 1)[1].split("```", 1)[0])]
    assert commands[0] == commands[1] == ["make lab", "make test"]
    for path in ZH_NOTEBOOKS:
        assert f"(notebooks/zh/{path.name})" in zh and f"(notebooks/zh/student/{path.name})" in zh, path.name
    assert "在 Colab 中打开" in zh                        # each notebook carries its own badge (test_colab_links)
    assert len(zh.encode("utf-8")) <= 8 * 1024, "README.zh-CN.md is over 8 KB: move detail into docs/"
    for target in re.findall(r"\]\(([^)#\s]+)", zh):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README.zh-CN links to a missing file: {target}"
    assert "fonts-noto-cjk" in zh.split("## 中文字体", 1)[1].split("**Colab**", 1)[1]   # the font route on Colab


def test_a_chinese_value_in_a_padded_placeholder_loses_the_spaces_a_latin_value_keeps():
    from gan_lessons.i18n import speaking, tidy
    with speaking("zh"):
        assert tidy("对 一个形状为 (4, 8) 的张量 做了 sub_") == "对一个形状为 (4, 8) 的张量做了 sub_"
        assert tidy("对 x_fake 做了 sub_，第 3 行") == "对 x_fake 做了 sub_，第 3 行"
        assert tidy("✗ 检查程序： 还没有作答") == "✗ 检查程序：还没有作答"
    with speaking("en"):
        assert tidy("a  b 中 文") == "a  b 中 文"


def test_the_doctor_s_chinese_diagnosis_has_no_space_between_chinese_characters():
    import torch

    from gan_lessons.doctor import doctor
    from gan_lessons.i18n import speaking
    from gan_lessons.lesson import expect_error
    with speaking("zh"):
        x = torch.ones(4, 8, requires_grad=True)
        with expect_error(RuntimeError, "leaf Variable") as caught:
            with doctor():
                x.sub_(1)
        text = caught.error.diagnosis.text()
    assert "sub_" in text and not re.search(r"[\u4e00-\u9fff] +[\u4e00-\u9fff]", text), text


# Stored figures agree across the two editions --------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w])")


def _numbers(cell) -> list:
    text = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            text.append("".join(out["text"]))
        for key in ("text/plain", "text/markdown"):
            if key in out.get("data", {}):
                text.append("".join(out["data"][key]))
    # a timed claim's count of rounds is not a measurement: it grows until the timing decides (timing.until_decided)
    text = re.sub(r"\d+ rounds|共 \d+ 轮", "", "\n".join(text))
    return [float(n) for n in _NUMBER.findall(text)]


def _far(a: list, b: list, factor: float = 2.0) -> list:
    """Pairs of stored figures further apart than run-to-run noise (a factor of `factor`), and a count mismatch."""
    if len(a) != len(b):
        return [("count", len(a), len(b))]
    return [(x, y) for x, y in zip(a, b) if max(abs(x), abs(y)) > 0 and
            max(abs(x), abs(y)) / max(min(abs(x), abs(y)), 1e-12) > factor]


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name)
def test_a_chinese_lesson_s_stored_measurements_agree_with_the_english_ones(path):
    """The cells whose output nbval does not compare (timings, sizes of a run) hold the same figures in both
    editions, up to run-to-run noise: a Chinese notebook executed long ago, or on another machine, shows."""
    english = json.loads((ROOT / "notebooks" / path.name).read_text(encoding="utf-8"))["cells"]
    chinese = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for k, (en, zh) in enumerate(zip(english, chinese)):
        if en["cell_type"] == "code" and "nbval-ignore-output" in en["metadata"].get("tags", []):
            far = _far(_numbers(en), _numbers(zh))
            assert not far, f"{path.name}, cell {k}: stored figures differ from the English ones: {far[:5]}"


def test_the_figures_check_can_fail():
    assert _far([101.5, 79.0], [100.0, 80.0]) == [] and _far([101.5, 79.0], [30.0, 80.0]) == [(101.5, 30.0)]
    assert _far([1.0], [1.0, 2.0]) == [("count", 1, 2)]


# One typesetting convention --------------------------------------------------------------------------------------

def _unspaced(markdown: str) -> list:
    """Places where Chinese touches Latin letters, digits or inline code without a space (d2l-zh's convention puts
    one there), in a lesson's own prose: seed quotations, links, HTML and addresses left out."""
    text = re.sub(r"^\s*>.*$", "", markdown, flags=re.M)
    text = re.sub(r"「[^」]*」|\]\([^)]*\)|<[^>]+>|https?://\S+", "", text)
    text = re.sub(r"`[^`]*`", "`x`", text)
    return re.findall(r"[\u4e00-\u9fff][A-Za-z0-9`(]|[A-Za-z0-9_`)\]][\u4e00-\u9fff]|[\u4e00-\u9fff]\.[A-Za-z_]", text)


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks" / "zh" / "src").glob("[0-9][0-9]_*.py")),
                         ids=lambda p: p.name)
def test_chinese_prose_puts_a_space_between_chinese_and_latin(path):
    found = [hit for c in build_notebook.cells(path) if c.cell_type == "markdown" for hit in _unspaced(c.source)]
    assert not found, f"{path.name}: no space between Chinese and Latin or code: {found[:8]}"


def _code_text(path) -> list:
    """The Chinese words a lesson's code cells hold: their string literals and comments (a seed's code quoted in
    「」 left out)."""
    import ast

    from IPython.core.inputtransformer2 import TransformerManager
    found = []
    for cell in build_notebook.cells(path):
        if cell.cell_type != "code":
            continue
        tree = ast.parse(TransformerManager().transform_cell(cell.source))
        found += [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        found += [line.split("#", 1)[1] for line in cell.source.splitlines() if "#" in line]
    return [text for text in found if re.search(r"[\u4e00-\u9fff]", text) and "「" not in text]


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks" / "zh" / "src").glob("[0-9][0-9]_*.py")),
                         ids=lambda p: p.name)
def test_chinese_code_strings_and_comments_put_a_space_between_chinese_and_latin(path):
    """What a Chinese lesson's code prints (a claim, a check's reason) and says in comments follows the prose's
    convention too."""
    found = [hit for text in _code_text(path) for hit in _unspaced(text) + re.findall(r"[\u4e00-\u9fff]\[", text)]
    assert not found, f"{path.name}: no space between Chinese and Latin or code in the code cells: {found[:8]}"


def test_the_spacing_check_of_code_can_fail(tmp_path):
    lesson = tmp_path / "99_planted.py"
    lesson.write_text('# %%\nclaim("CPU上的autocast", True)  # G的梯度\nx = "plain English"\n', encoding="utf-8")
    assert [hit for text in _code_text(lesson) for hit in _unspaced(text)] == ["U上", "的a", "G的"]


def test_the_spacing_check_can_fail():
    assert _unspaced("认识到`step()`就是") == ["到`", "`就"] and _unspaced("认识到 `step()` 就是 G 的") == []
    assert _unspaced("对(x + 1).sum()反向，normal_原地，填了.grad") == ["对(", ")反", "_原", "了.g"]
    assert _unspaced("> 原帖照录：backward一样") == [] and _unspaced("（`修法：`）") == []


def test_the_chinese_readme_puts_a_space_between_chinese_and_latin():
    text = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8").replace("php中文网", "")   # a site's own name
    assert not _unspaced(text), _unspaced(text)[:8]


def test_terms_are_introduced_chinese_first():
    """d2l-zh's way: **分类器得分**（classifier score）, never **classifier score**（分类器得分）."""
    english_first = re.compile(r"\*\*[A-Za-z][A-Za-z \-']*\*\*[（(][\u4e00-\u9fff]")
    found = [(p.name, m.group()) for p in sorted((ROOT / "notebooks" / "zh" / "src").glob("[0-9][0-9]_*.py"))
             for c in build_notebook.cells(p) if c.cell_type == "markdown" for m in english_first.finditer(c.source)]
    assert not found, found
    assert english_first.search("**coverage**（覆盖率）") and not english_first.search("**覆盖率**（coverage）")


# Quote marks: 「」 for the posts' titles and words, “” for the course's own (the glossary's convention) --------------

SEEDS = sorted((ROOT.parent / "shared" / "seeds").glob("*.txt"))


def _plain(text: str) -> str:
    """Text as it is compared with the posts: full-width forms folded, whitespace and punctuation dropped."""
    import unicodedata
    return re.sub(r"[\s\W_]+", "", unicodedata.normalize("NFKC", text)).lower()


def _quote_marks_problems(text: str, posts: str) -> list:
    """What breaks the convention in one piece of Chinese prose (inline code and the posts' block quotes aside): a
    「」 that holds words no post has (an elision …… may join pieces that each appear, in order), a “” with Chinese
    text that is a post's words (outside a 「」, where a post's own quotes are kept), marks left unpaired."""
    text = re.sub(r"(?m)^\s*>.*$", "", re.sub(r"`[^`\n]*`", "", text))
    problems = []
    for opened, closed in ("「」", "“”"):
        if text.count(opened) != text.count(closed):
            problems.append(f"{opened} and {closed} unpaired")
    for quote in re.findall(r"「([^」]*)」", text):
        at = 0
        for piece in filter(None, map(_plain, re.split(r"…+|\.\.\.", quote))):
            at = posts.find(piece, at)
            if at < 0:
                problems.append(f"「{quote}」 is not a post's words: the course's own quotes take “”")
                break
    outside = re.sub(r"「[^」]*」", "", text)
    for quote in re.findall(r"“([^”]*)”", outside):
        if CJK.search(quote) and len(_plain(quote)) >= 4 and _plain(quote) in posts:
            problems.append(f"“{quote}” quotes a post: a post's words take 「」")
    return problems


def _chinese_prose():
    for path in ZH_NOTEBOOKS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                yield path.name, "".join(cell["source"])
    yield "README.zh-CN.md", (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")


@pytest.mark.skipif(not SEEDS, reason="the posts (../shared/seeds) are not beside the project")
def test_quote_marks_follow_the_glossary():
    posts = _plain(" ".join(p.read_text(encoding="utf-8") for p in SEEDS))
    problems = [f"{name}: {p}" for name, text in _chinese_prose() for p in _quote_marks_problems(text, posts)]
    assert not problems, "\n".join(problems)


def _inexact_quotes(text: str, posts: str) -> list:
    """Each 「」 of `text` (inline code and block quotes aside) whose words are not in a post as they stand there,
    byte for byte: no space added between Chinese and Latin, no colon made full-width (an elision …… may join
    pieces that each appear)."""
    text = re.sub(r"(?m)^\s*>.*$", "", re.sub(r"`[^`\n]*`", "", text))
    return [f"「{quote}」" for quote in re.findall(r"「([^」]*)」", text)
            if any(piece not in posts for piece in filter(None, re.split(r"…+|\.\.\.", quote)))]


@pytest.mark.skipif(not SEEDS, reason="the posts (../shared/seeds) are not beside the project")
def test_quotations_of_the_posts_are_byte_exact():
    posts = "\n".join(p.read_text(encoding="utf-8") for p in SEEDS)
    found = [f"{name}: {q}" for name, text in _chinese_prose() for q in _inexact_quotes(text, posts)]
    assert not found, "\n".join(found)


def test_the_exact_quote_check_sees_a_space_or_a_colon_added():
    posts = "解决PyTorch GAN训练中的梯度计算错误:inplace操作与计算图分离"
    assert _inexact_quotes("原帖「解决PyTorch GAN训练中的梯度计算错误」与「……计算图分离」", posts) == []
    assert _inexact_quotes("原帖「解决 PyTorch GAN 训练中的梯度计算错误」", posts)
    assert _inexact_quotes("原帖「梯度计算错误：inplace操作」", posts)


def test_the_quote_mark_check_catches_each_kind_of_mistake():
    posts = _plain("解决 PyTorch GAN 训练中的梯度计算错误：inplace 操作与计算图分离。策略一")
    assert _quote_marks_problems("原帖「解决 PyTorch GAN 训练中的梯度计算错误」说", posts) == []
    assert _quote_marks_problems("标题「解决……计算图分离」", posts) == []                # an elision
    assert _quote_marks_problems("代码 `print(“x”)` 与 `「x」` 不算", posts) == []        # inline code aside
    assert "not a post's words" in _quote_marks_problems("我们说「梯度会累加」", posts)[0]
    assert "a post's words take 「」" in _quote_marks_problems("原帖说“操作与计算图分离”", posts)[0]
    assert "unpaired" in _quote_marks_problems("原帖「策略一", posts)[0]
    assert _quote_marks_problems("本课说“梯度会累加”", posts) == []


# A lesson's own labels and word answers, through the catalog --------------------------------------------------

def test_tr_speaks_the_lesson_s_language_and_pads_by_screen_columns():
    from gan_lessons.i18n import speaking, tr
    with speaking("zh"):
        assert tr("both") == "两者"
        assert f"{tr('both'):<6}|" == "两者  |"          # two characters, four columns, two spaces
        assert f"{tr('both'):>6}|" == "  两者|" and f"{tr('both'):^8}|" == "  两者  |"
    with speaking("en"):
        assert f"{tr('both'):<6}|" == "both  |" and tr("a label no catalog has") == "a label no catalog has"
        assert tr("{n} of {total}", n=3, total=4) == "3 of 4"


def test_the_catalog_finds_a_label_inside_an_f_string_and_in_a_lesson_s_shell_cell(tmp_path):
    lesson = tmp_path / "99_planted.py"
    lesson.write_text('# %%\n!python -m gan_lessons --help\nprint(f"{tr(\'strategy\'):<22}{x}")\n'
                      'print(tr("{a} of {b}", a=1, b=2))\n', encoding="utf-8")
    assert messages.marked_calls(lesson) == [(3, "strategy"), (4, "{a} of {b}")]


def test_every_label_of_the_english_lessons_is_in_the_catalog():
    pot = messages.template()
    labels = {label for path in (ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py")
              for _, label in messages.marked_calls(path)}
    assert len(labels) > 50 and all(pot.get(label) is not None for label in labels)
    assert any(f.startswith("notebooks/src/") for m in pot for f, _ in m.locations)


def test_a_word_answer_is_right_in_either_language_and_shown_in_the_lesson_s(capsys):
    from gan_lessons.i18n import speaking
    from gan_lessons.lesson import check
    with speaking("zh"):
        check("哪个网络有 .grad", "两者", "both")
        check("哪个网络有 .grad", "both", "both")
        check("哪个网络有 .grad", "G", "both")
        check("G 会不会变", "会变", "moves")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("✓") and "'两者'" in lines[0] and "both" not in lines[0]
    assert lines[1].startswith("✓")
    assert lines[2].startswith("✗") and "'两者'" in lines[2]
    assert lines[3].startswith("✓")
    with speaking("en"):
        check("nets with .grad", "both", "both")
        check("nets with .grad", "D", "both")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "✓ nets with .grad -> 'both' (right)" and lines[1].startswith("✗")


_LABEL_CALLS = {"print", "title", "xlabel", "ylabel", "suptitle", "set_title", "set_xlabel", "set_ylabel", "text"}
_LABEL_KEYWORDS = {"label", "desc", "description", "title"}
_WORD = re.compile(r"(?<![\w.\-/`'])[A-Za-z][a-z]{2,}(?![\w(./`'])")


def _literal_pieces(node) -> list:
    """The literal text an argument writes itself (a tr() call's text is the catalog's, not counted)."""
    import ast
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    if isinstance(node, ast.BinOp):
        return _literal_pieces(node.left) + _literal_pieces(node.right)
    if isinstance(node, ast.IfExp):
        return _literal_pieces(node.body) + _literal_pieces(node.orelse)
    return []


def untranslated_labels(path) -> list:
    """English words a lesson prints, or puts on a figure, without tr(): words that are not names in its own code
    (`clone`, `logits`, `torch` are code)."""
    import ast

    from IPython.core.inputtransformer2 import TransformerManager
    trees = [ast.parse(TransformerManager().transform_cell(c.source))
             for c in build_notebook.cells(path) if c.cell_type == "code"]
    names = {n.id for t in trees for n in ast.walk(t) if isinstance(n, ast.Name)}
    names |= {n.attr for t in trees for n in ast.walk(t) if isinstance(n, ast.Attribute)}
    names |= {a.name for t in trees for n in ast.walk(t) if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
    found = []
    for tree in trees:
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            name = getattr(call.func, "id", None) or getattr(call.func, "attr", "")
            args = (list(call.args) if name in _LABEL_CALLS else []) + [
                k.value for k in call.keywords if k.arg in _LABEL_KEYWORDS]
            found += [(call.lineno, text) for a in args for text in _literal_pieces(a)
                      if any(w not in names for w in _WORD.findall(text))]
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py")), ids=lambda p: p.name)
def test_an_english_lesson_prints_its_labels_through_tr(path):
    """So the Chinese edition, whose code is the same, prints them from the catalog."""
    assert not untranslated_labels(path), f"{path.name}: labels without tr(): {untranslated_labels(path)[:5]}"


def test_the_untranslated_label_search_can_fail(tmp_path):
    lesson = tmp_path / "99_planted.py"
    lesson.write_text('# %%\nlogits = x.clone()\nprint("logits", logits)\nprint(tr("saved MiB"), 3)\n'
                      'plt.title(f"G after {n} steps")\nplt.plot(x, label="real")\nprint(f"{n:<4} saved MiB")\n',
                      encoding="utf-8")
    assert [text for _, text in untranslated_labels(lesson)] == ["G after ", " steps", "real", " saved MiB"]


def _bold_opening_with_punctuation(text: str) -> list:
    """Bold spans of a markdown line that open with Chinese punctuation (a comma belongs before the **, not in it)."""
    found = []
    for line in text.splitlines():
        parts = re.sub(r"`[^`]*`", "", line).split("**")
        found += [parts[k][:12] for k in range(1, len(parts), 2) if parts[k][:1] and parts[k][0] in "，。；：、）"]
    return found


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name)
def test_no_bold_span_opens_with_punctuation(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = [b for c in cells if c["cell_type"] == "markdown" for b in _bold_opening_with_punctuation("".join(c["source"]))]
    assert not found, found


def test_the_bold_check_sees_a_comma_inside_the_bold():
    assert _bold_opening_with_punctuation("全在里面）**，在设备上**累积") == ["，在设备上"]
    assert _bold_opening_with_punctuation("全在里面），**在设备上**累积；**为什么重要**。") == []


@pytest.mark.parametrize("path", sorted((ZH / "student").glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.name)
def test_a_chinese_student_copy_asks_in_chinese_typesetting_with_answer_words_a_student_can_copy(path):
    """`# 你的答案：` with a full-width colon, and the answer words a question offers in straight quotes: copied into
    the code as they stand, “两者” would be a SyntaxError and "两者" is the string check() accepts."""
    lines = [line for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"
             for line in "".join(c["source"]).splitlines() if "# 你的答案" in line]
    assert not [line for line in lines if "# 你的答案:" in line or "“" in line.partition("# 你的答案")[2]], lines


def test_every_chinese_lesson_s_colab_badge_speaks_chinese():
    for path in sorted((ZH / "src").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "[![在 Colab 中打开](" in text and "Open In Colab" not in text, path.name


def printed_labels(number: str) -> set:
    """The Chinese of every label a lesson can print (its own tr() labels and the package's messages: tables' headers,
    rows' names), each piece between placeholders, as the catalog translates it."""
    from gan_lessons.i18n import catalog
    zh, labels = catalog("zh"), set()
    for message in messages.template():
        if message.id and any(f.startswith((f"notebooks/src/{number}_", "gan_lessons/")) for f, _line in message.locations):
            labels.update(p.strip(" -:：|()（）\n") for p in re.split(r"\{[^{}]*\}", zh.gettext(message.id)))
    return {label for label in labels if re.search(r"[\u4e00-\u9fff]", label) and len(label) <= 14}


def misnamed_labels(markdown: list, labels: set) -> list:
    """Short “quoted” words of the prose that are none of the lesson's printed labels, though one looks like them
    (lesson 05 once said “G 前/反” for the column “G 前向/反向”): (quoted, the label it resembles)."""
    import difflib
    found = []
    for source in markdown:
        for quoted in re.findall(r"“([^”]{1,14})”", source):
            quoted = quoted.strip(" :：")
            if quoted in labels or all(part.strip() in labels for part in quoted.split("/")):
                continue
            close = [label for label in labels if difflib.SequenceMatcher(None, quoted, label).ratio() >= 0.6]
            if close:
                found.append((quoted, close[0]))
    return found


def _markdown(path) -> list:
    return ["".join(c["source"]) for c in json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
            if c["cell_type"] == "markdown"]


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name)
def test_the_labels_the_prose_names_are_the_labels_printed(path):
    found = misnamed_labels(_markdown(path), printed_labels(path.name[:2]))
    assert not found, f"{path.name}: the prose names labels its output does not print: {found}"


def test_the_label_naming_check_sees_a_shortened_column_name():
    path = ZH / "05_gan_update_strategies.ipynb"
    markdown = [m.replace("“G 前向/反向”", "“G 前/反”").replace("“G 梯度遍数”", "“G 梯度”") for m in _markdown(path)]
    assert {q for q, _ in misnamed_labels(markdown, printed_labels("05"))} == {"G 前/反", "G 梯度"}


def _code_spans(text: str) -> set:
    """A prose cell's code spans that are code (not an English phrase set in backticks, not a label the doctor prints
    in the reader's language, such as `not:`)."""
    spans = re.findall(r"(?<!`)`([^`\n]+)`(?!`)", text)
    return {s for s in spans if s.strip() == s and not re.search(r"[A-Za-z]{2,} [A-Za-z]{2,}", s)
            and not re.fullmatch(r"\w[\w ]*:", s)}


def _prose_numbers(text: str) -> set:
    """The numbers a prose cell states (two digits or more, or with a decimal point), without thousands' commas: a
    single digit may be a word in Chinese (第一步)."""
    text = re.sub(r"`[^`\n]*`", "", text)
    return {n.replace(",", "") for n in re.findall(r"(?<![\w.])(?:\d+\.\d+|\d{2,}(?:,\d{3})*|\d+(?:,\d{3})+)(?![\d,])", text)}


def meaning_differences(english: Path, chinese: Path) -> list:
    """Per prose cell: the English cell's code spans and numbers that the Chinese cell leaves out."""
    found = []
    pairs = zip(build_notebook.cells(english), build_notebook.cells(chinese))
    for k, (a, b) in enumerate(pairs):
        if a.cell_type != "markdown":
            continue
        zh_numbers = {n.replace(",", "") for n in re.findall(r"\d[\d,]*(?:\.\d+)?", b.source)}
        missing = sorted(s for s in _code_spans(a.source) if s not in b.source)
        missing += sorted(n for n in _prose_numbers(a.source) if n not in zh_numbers)
        if missing:
            found.append(f"{chinese.name}, cell {k}: {missing}")
    return found


@pytest.mark.parametrize("source", sorted((ZH / "src").glob("[0-9][0-9]_*.py")), ids=lambda p: p.name)
def test_a_chinese_cell_keeps_the_code_and_the_numbers_of_its_english_cell(source):
    found = meaning_differences(parity.english_of(source), source)
    assert not found, found


def test_the_meaning_check_sees_a_number_or_a_code_name_changed(tmp_path):
    source = ZH / "src" / "06_train_mnist_gan.py"
    changed = tmp_path / source.name
    text = source.read_text(encoding="utf-8")
    assert "60,000 张图像" in text and "`z_dim = 64`" in text
    changed.write_text(text.replace("60,000 张图像", "6,000 张图像", 1).replace("`z_dim = 64`", "`z_dim = 32`", 1),
                       encoding="utf-8")
    found = " ".join(meaning_differences(parity.english_of(source), changed))
    assert "60000" in found and "z_dim = 64" in found, found


def section_openers(source: str) -> list:
    """The bold label that opens a section's first paragraph (`## 2 · ...` then `**标签**。...`), for each section."""
    return re.findall(r"^# ## [^\n]*\n#\n# (\*\*[^*\n]{1,20}\*\*)", source, re.M)


def test_chinese_sections_open_with_their_reason_not_a_fixed_label():
    """The English lessons open each section with "**Why it matters.**"; the Chinese ones open it as a Chinese
    textbook does, with the reason itself: no bold label opens more than two sections of the edition."""
    import collections
    openers = collections.Counter(o for p in sorted((ZH / "src").glob("[0-9][0-9]_*.py"))
                                  for o in section_openers(p.read_text(encoding="utf-8")))
    assert not [o for o, n in openers.items() if n > 2], openers.most_common(3)
    english = "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "notebooks" / "src").glob("[0-9]*.py")))
    assert section_openers(english).count("**Why it matters.**") > 50          # the check reads what it should
