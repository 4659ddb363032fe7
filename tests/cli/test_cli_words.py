"""The command line speaks the lesson's language all the way: in Chinese, argparse's own words (usage, options,
its errors) are Chinese too, every `train` option has a help line, and help text is wrapped by the columns a
terminal gives each character (a Chinese one takes two)."""
import io
import os
import re
from contextlib import redirect_stderr, redirect_stdout

import pytest

from gan_lessons.cli import width, wrap

ARGPARSE_ENGLISH = ("usage", "options", "show this help", "positional arguments", "argument ", "invalid",
                    "unrecognized", "required", "expected")


class _Run:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _run(*args, lang="zh", columns=80):
    """`python -m gan_lessons ARGS` in this process (the parser only: every case here ends in argparse)."""
    from gan_lessons.__main__ import main
    from gan_lessons.i18n import speaking
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in ("GAN_LESSONS_LANG", "COLUMNS")}
    os.environ.update(GAN_LESSONS_LANG=lang, COLUMNS=str(columns))
    try:
        with speaking(lang), redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as stop:
                code = stop.code
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return _Run(code, out.getvalue(), err.getvalue())


@pytest.mark.parametrize("command", ["train", "sample", "evaluate", "export", "classifier", "doctor"])
def test_chinese_help_has_no_english_of_argparse_and_fits_the_terminal(command):
    out = _run(command, "--help").stdout
    assert out.startswith("用法：") and "\n选项：\n" in out and not re.search(r"[\u4e00-\u9fff]:$", out, re.M)
    assert not [w for w in ARGPARSE_ENGLISH if w in out.lower()], out[:400]
    too_wide = [line for line in out.splitlines() if width(line) > 80]
    assert not too_wide, too_wide


def test_every_train_option_has_a_help_line_in_both_languages():
    for lang in ("en", "zh"):
        out = _run("train", "--help", lang=lang, columns=200).stdout
        lines = out.splitlines()
        options = [(i, m) for i, line in enumerate(lines) if (m := re.match(r"^  (--[\w-]+)(?: [A-Z_]+)?(.*)$", line))]
        # a help line beside the option, or (after a long metavar) on the next line, further indented
        bare = [m[1] for i, m in options if not m[2].strip() and not re.match(r"^ {6,}\S", lines[i + 1])]
        assert len(options) >= 20 and not bare, (lang, bare)


@pytest.mark.parametrize("args, said", [
    (["train", "--bogus"], "无法识别的参数"),
    (["train", "--lr-g", "abc"], "不是有效的 float 值"),
    (["train", "--epochs"], "需要一个值"),
    (["sample"], "缺少必需的参数"),
    (["train", "--epochs", "x"], "不是整数"),
])
def test_chinese_errors_of_argparse_are_chinese_and_one_line(args, said):
    run = _run(*args)
    assert run.returncode == 2 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and lines[0].startswith("错误："), run.stderr
    assert not [w for w in ARGPARSE_ENGLISH if w in lines[0].lower()], lines[0]


def test_english_stays_argparse_s_own():
    assert _run("train", "--help", lang="en").stdout.startswith("usage: ")
    assert "unrecognized arguments: --bogus" in _run("train", "--bogus", lang="en").stderr


def test_wrap_counts_a_chinese_character_as_two_columns():
    text = "梯度惩罚的权重，不小于 0（论文用 10）" * 3
    lines = wrap(text, 30)
    assert all(width(line) <= 30 for line in lines) and "".join(lines).replace(" ", "") == text.replace(" ", "")
    assert wrap("a bc def", 5) == ["a bc", "def"] and width("中a") == 3


@pytest.mark.parametrize("columns", [80, 90, 120])
@pytest.mark.parametrize("command", [["--help"], ["train", "--help"], ["doctor", "--help"], ["sample", "--help"],
                                     ["evaluate", "--help"], ["export", "--help"], ["classifier", "--help"]])
def test_chinese_help_never_starts_a_line_with_closing_punctuation(command, columns):
    from gan_lessons.cli import CLOSING, OPENING
    run = _run(*command, columns=columns)
    assert run.returncode == 0, run.stderr
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip()]
    assert lines and not [line for line in lines if line[0] in CLOSING or line[-1] in OPENING]


def test_help_in_this_process_is_the_real_command_s():
    """The help above is printed in this process; the real command prints the same, character for character."""
    import subprocess
    import sys
    env = {**os.environ, "COLUMNS": "90", "GAN_LESSONS_LANG": "zh"}
    real = subprocess.run([sys.executable, "-m", "gan_lessons", "train", "--help"], capture_output=True, text=True,
                          env=env)
    assert real.returncode == 0 and real.stdout == _run("train", "--help", columns=90).stdout


def test_the_wrap_keeps_punctuation_with_its_character():
    lines = wrap("选项（默认 64）：每一步的图像数，（见第 06 课）", 14)
    assert lines == ["选项（默认", "64）：每一步的", "图像数，（见第", "06 课）"] and all(width(line) <= 14 for line in lines)
