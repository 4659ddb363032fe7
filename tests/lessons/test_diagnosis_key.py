"""Lesson 07's predictions of a diagnosis, checked against the doctor's own diagnosis (check_diagnosis): every right
answer written another way passes, every wrong part is named, bad input gets one line."""
import pytest
import torch
from torch import nn, optim

from gan_lessons.doctor import doctor
from gan_lessons.exercises import check_diagnosis
from gan_lessons.exercises.diagnosis_key import answer_key, same_line, same_tensor
from gan_lessons.lesson import expect_error

pytestmark = pytest.mark.filterwarnings("ignore")


def _seed001(retain_graph):
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 2))
    optimG, optimD = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    with doctor(G=G, D=D, optimG=optimG, optimD=optimD):
        g = G(torch.tensor([1., 2], requires_grad=True))
        d = D(g)
        lossD = d.sum()
        optimD.zero_grad()
        lossD.backward(retain_graph=retain_graph)
        optimD.step()
        lossG = (g + d).sum()
        optimG.zero_grad()
        lossG.backward()


@pytest.fixture(scope="module")
def freed():
    with expect_error(RuntimeError, "second time") as caught:
        _seed001(False)
    return caught.error.diagnosis


@pytest.fixture(scope="module")
def version():
    with expect_error(RuntimeError, "is at version") as caught:
        _seed001(True)
    return caught.error.diagnosis


def test_expect_error_hands_over_the_error(freed):
    assert freed.kind == "freed"


def test_the_key_is_read_from_the_diagnosis(freed, version):
    key = answer_key(version)
    assert key["kind"] == "version" and key["tensor"][0] == "D.2.weight.T" and key["line"][0][1] == "optimD.step()"
    key = answer_key(freed)
    assert key["kind"] == "freed" and set(key["tensor"]) >= {"d"} and key["line"][0][1].startswith("lossD.backward(")


@pytest.mark.parametrize("prediction", [
    dict(kind="version", tensor="D.weight", line="optimD.step()"),
    dict(kind="version", tensor="D.2.weight", line="optimD.step"),
    dict(kind="'version'", tensor="`D.2.weight.T`", line="  optimD.step( )  # the step"),
    dict(kind="Version", tensor="D[2].weight", line="optimD.step()"),      # the lesson's own way to write the layer
])
def test_right_answers_written_differently_pass(version, prediction, capsys):
    assert check_diagnosis(prediction, version)
    assert capsys.readouterr().out.count("(right)") == 3


def test_a_line_number_is_a_right_line(version, freed, capsys):
    for diagnosis in (version, freed):
        number = answer_key(diagnosis)["line"][0][0]
        right = dict(kind=diagnosis.kind, tensor="d" if diagnosis.kind == "freed" else "D.weight", line=number)
        assert check_diagnosis(right, diagnosis)
        assert not check_diagnosis(dict(right, line=number + 1), diagnosis)


@pytest.mark.parametrize("wrong, part", [
    (dict(kind="freed", tensor="D.weight", line="optimD.step()"), "kind"),
    (dict(kind="version", tensor="G.weight", line="optimD.step()"), "tensor"),
    (dict(kind="version", tensor="weight", line="optimD.step()"), "tensor"),
    (dict(kind="version", tensor="D.bias", line="optimD.step()"), "tensor"),
    (dict(kind="version", tensor="D.weight", line="optimG.step()"), "line"),
    (dict(kind="version", tensor="D.weight", line="lossG.backward()"), "line"),
    (dict(kind="version", tensor="D.weight", line="optimD"), "line"),
])
def test_a_wrong_part_is_named(version, wrong, part, capsys):
    assert not check_diagnosis(wrong, version)
    lines = capsys.readouterr().out.splitlines()
    wrong_lines = [x for x in lines if x.startswith("✗")]
    label = {"kind": "the kind", "tensor": "the tensor it names", "line": "the line that changed or freed it"}[part]
    assert len(wrong_lines) == 1 and wrong_lines[0].startswith(f"✗ {label}") and "you predicted" in wrong_lines[0]


def test_freed_accepts_any_tensor_the_second_loss_goes_through(freed, capsys):
    assert check_diagnosis(dict(kind="freed", tensor="d", line="lossD.backward"), freed)
    assert not check_diagnosis(dict(kind="freed", tensor="lossD", line="lossD.backward"), freed)


@pytest.mark.parametrize("bad", [("version", "D.weight", "optimD.step()"), {"kind": "version"}, "version"])
def test_bad_input_gets_one_line(version, bad, capsys):
    assert not check_diagnosis(bad, version)
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "dict(kind=..., tensor=..., line=...)" in out[0]


def test_unanswered(version, capsys):
    assert not check_diagnosis(..., version)
    assert "not solved yet" in capsys.readouterr().out


def test_name_and_line_matching_alone():
    assert same_tensor("D.weight", "D.net.7.weight.T") and same_tensor("D.net.7.weight", "D.net.7.weight.T")
    assert not same_tensor("D.net.5.weight", "D.net.7.weight.T") and not same_tensor("net.7.weight", "D.net.7.weight")
    assert same_tensor("D.net[7].weight", "D.net.7.weight.T") and not same_tensor("D[5].weight", "D.net.7.weight.T")
    assert same_line("opt_D.step", (3, "opt_D.step()")) and same_line(3, (3, "x"))
    assert not same_line(True, (1, "x")) and not same_line("", (1, "x"))
    assert same_line("18", (18, "l2.backward()")) and same_line(" 3 ", (3, "x")) and not same_line("18", (3, "x"))


@pytest.mark.parametrize("retain_graph, kind", [(False, "freed"), (True, "version")])
def test_the_key_reads_the_chinese_diagnosis_alike(retain_graph, kind):
    """The facts are written in the lesson's language; the key reads the same parts from either."""
    from gan_lessons.i18n import speaking
    keys = []
    for lang in ("en", "zh"):
        with speaking(lang):
            with expect_error(RuntimeError, "second time|is at version") as caught:
                _seed001(retain_graph)
            keys.append(answer_key(caught.error.diagnosis))
    assert keys[0] == keys[1] and keys[0]["kind"] == kind and keys[0]["tensor"] and keys[0]["line"]
