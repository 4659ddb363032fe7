"""The lesson helpers: quick mode, asserted error demonstrations, exercises."""
import json
import subprocess
import sys
import warnings

import pytest
import torch

from gan_lessons.lesson import (
    ClaimFailed,
    NoErrorRaised,
    check,
    claim,
    describe,
    expect_error,
    expect_warning,
    quick_mode,
)


def test_expect_error_shows_the_real_message(capsys):
    a = torch.tensor([1.0], requires_grad=True)
    with expect_error(RuntimeError, "leaf Variable"):
        a += 1
    out = capsys.readouterr().out
    assert "RuntimeError" in out
    assert "a leaf Variable that requires grad is being used in an in-place operation." in out


def test_expect_error_fails_when_the_error_no_longer_happens():
    a = torch.tensor([1.0], requires_grad=True)
    with pytest.raises(NoErrorRaised, match="ran without it"):
        with expect_error(RuntimeError, "leaf Variable"):
            with torch.no_grad():
                a += 1


def test_expect_error_lets_other_errors_through():
    with pytest.raises(ValueError, match="unrelated"):
        with expect_error(RuntimeError, "leaf Variable"):
            raise ValueError("unrelated")
    with pytest.raises(RuntimeError, match="different message"):
        with expect_error(RuntimeError, "leaf Variable"):
            raise RuntimeError("a different message")


def test_expect_warning_fails_without_the_warning(capsys):
    with pytest.raises(NoErrorRaised):
        with expect_warning(UserWarning, "not a leaf"):
            pass
    x = torch.ones(2, requires_grad=True) * 2
    with expect_warning(UserWarning, "not a leaf"):
        _ = x.grad
    out = capsys.readouterr().out
    assert "retain_grad()" in out and "Triggered internally" not in out


def test_check_gives_feedback_not_an_assert(capsys):
    check("q", True, True, why="because")
    check("q", False, True)
    check("q", ..., True)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("✓") and out[1] == "  why: because"
    assert out[2].startswith("✗") and "you predicted False" in out[2]
    assert "not solved yet" in out[3]


def test_claim_prints_a_true_claim_with_its_evidence(capsys):
    claim("2 + 2 is 4", 2 + 2 == 4, shown="2 + 2 = 4")
    claim("a one-element tensor counts", torch.tensor(True))
    assert capsys.readouterr().out.splitlines() == ["✓ 2 + 2 is 4  (2 + 2 = 4)", "✓ a one-element tensor counts"]


def test_claim_fails_the_cell_when_false():
    with pytest.raises(ClaimFailed, match=r"✗ x is 2: does not hold on torch .*\(x = 3\)"):
        claim("x is 2", 3 == 2, shown="x = 3")


@pytest.mark.parametrize("evidence", ["yes", [False], torch.tensor([True, False]), None, 1])
def test_claim_refuses_evidence_that_is_not_a_bool(evidence):
    """A non-empty string or list is always truthy: a check that could never fail. Refused, with what to do."""
    with pytest.raises(TypeError, match="needs a bool as evidence"):
        claim("anything", evidence)


def test_describe_does_not_read_grad_of_non_leaves(capsys):
    a = torch.ones(2, requires_grad=True)
    b = a * 2
    b.sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        describe(a=a, b=b)
    assert "(not kept: non-leaf)" in capsys.readouterr().out


@pytest.mark.parametrize("value, expected", [("1", True), ("on", True), ("0", False), ("off", False)])
def test_quick_mode_switch(monkeypatch, value, expected):
    monkeypatch.setenv("GAN_LESSONS_QUICK", value)
    assert quick_mode() is expected


def test_quick_mode_defaults(monkeypatch):
    monkeypatch.delenv("GAN_LESSONS_QUICK", raising=False)
    monkeypatch.setenv("CI", "true")
    assert quick_mode() is True
    monkeypatch.delenv("CI")
    assert quick_mode() is (not torch.cuda.is_available())


def test_quick_mode_bad_value_says_what_to_do(monkeypatch):
    monkeypatch.setenv("GAN_LESSONS_QUICK", "maybe")
    with pytest.raises(ValueError, match="set it to 1"):
        quick_mode()


def _notebook(path, source, output):
    cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": source,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": output}]}
    nb = {"cells": [cell], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                      "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))


def _nbval(path):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                           "--nbval-current-env", "-o", "addopts=", "-o", "testpaths=", str(path)],
                          capture_output=True, text=True, cwd=path.parent)


def test_nbval_fails_a_demonstration_whose_error_stopped_happening(tmp_path):
    """nbval#108: a raises-exception cell that no longer raises still passes. Ours does not."""
    message = ("RuntimeError (raised, as the lesson expects):\n"
               "a leaf Variable that requires grad is being used in an in-place operation.\n")
    raising = ("import torch\nfrom gan_lessons.lesson import expect_error\n"
               "a = torch.ones(1, requires_grad=True)\n"
               "with expect_error(RuntimeError, 'leaf Variable'):\n    a += 1")
    _notebook(tmp_path / "still_raises.ipynb", raising, message)
    assert _nbval(tmp_path / "still_raises.ipynb").returncode == 0
    no_longer = raising.replace("    a += 1", "    with torch.no_grad():\n        a += 1")
    _notebook(tmp_path / "stopped.ipynb", no_longer, message)
    result = _nbval(tmp_path / "stopped.ipynb")
    assert result.returncode != 0
    assert "NoErrorRaised" in result.stdout


def test_nbval_fails_a_notebook_whose_claim_stopped_holding(tmp_path):
    """The stored output says ✓; if the claim is false on the torch that runs it, the cell fails, not only differs."""
    true = "import torch\nfrom gan_lessons.lesson import claim\nx = torch.ones(2)\nclaim('x sums to 2', x.sum().item() == 2)"
    _notebook(tmp_path / "holds.ipynb", true, "✓ x sums to 2\n")
    assert _nbval(tmp_path / "holds.ipynb").returncode == 0
    _notebook(tmp_path / "false.ipynb", true.replace("== 2", "== 3"), "✓ x sums to 2\n")
    result = _nbval(tmp_path / "false.ipynb")
    assert result.returncode != 0
    assert "ClaimFailed" in result.stdout


def test_rounded_prints_stable_python_floats():
    from gan_lessons.lesson import rounded
    t = torch.tensor([[0.92119997, 1.0], [2.5, -0.00004]])
    assert rounded(t) == [[0.9212, 1.0], [2.5, -0.0]]
    assert str(rounded(torch.tensor([1.8424999]))) == "[1.8425]"


@pytest.mark.parametrize("prediction, actual", [
    ("moves", "move"), ([512, 1], (512, 1)), ("(512, 1)", (512, 1)), ("[512, 1]", torch.Size([512, 1])),
    ("Tanh", "TanhBackward0"), ("float32", torch.float32), ("torch.float32", torch.float32), ("sgd", "SGD"),
    ("3", 3), (3.0, 3), ("true", True), (" 'both' ", "both"), ("uint8", torch.uint8), ("d", "D"),
    (("a",), ["a"]), ({"a"}, ["a"]), ("a", ["a"]), (["c", "a"], ["a", "c"]), ("a, c", ["a", "c"]),
    ("inference", "inference_mode"), (["inference_mode"], "inference_mode"), ("opt_D", "D"), ("optimizer_g", "G"),
    ("optim.SGD", "SGD"), ("torch.optim.SGD", "SGD"), (torch.tensor(True), True), (torch.tensor(3), 3),
    (__import__("numpy").bool_(False), False), (__import__("numpy").array([4.0, 6.0]), [4.0, 6.0]),
])
def test_check_accepts_a_right_answer_written_another_way(capsys, prediction, actual):
    check("q", prediction, actual)
    assert "(right)" in capsys.readouterr().out


@pytest.mark.parametrize("prediction, actual", [
    (1, True), (0, False), ("yes", True), ("move", "stay"), ([512, 2], (512, 1)), ("Exp", "TanhBackward0"),
    ("float16", torch.float32), ("2", 3), ("a", ["a", "c"]), (["a", "b"], ["a"]), ("True", 1), ("False", 0),
    ("opt_G", "D"), (__import__("numpy").array([4.0, 7.0]), [4.0, 6.0]), (torch.tensor(1), True),
])
def test_check_still_rejects_a_wrong_answer(capsys, prediction, actual):
    check("q", prediction, actual)
    assert "not quite" in capsys.readouterr().out


def test_each_pair_of_same_names_is_one_answer_both_ways(capsys):
    from gan_lessons.lesson import SAME_NAMES, same_answer
    for one, other in SAME_NAMES.items():
        assert same_answer(one, other) and same_answer(other, one), (one, other)
        assert not same_answer(one, "something_else")


def test_a_numpy_array_gets_feedback_not_an_exception(capsys):
    import numpy as np
    check("q", np.array([1, 2]), [1, 2])
    check("q", np.array([[1, 2], [3, 4]]), [1, 2])
    out = capsys.readouterr().out
    assert "(right)" in out and "not quite" in out
