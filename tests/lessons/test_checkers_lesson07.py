"""Lesson 07's checkers: check_seed000_step (seed 000's step, fixed until the doctor finds nothing) and
check_doctor_bug (bring your own bug). Right answers written differently are accepted; each wrong one is answered
with a hint that names its mistake; an unsolved one is "not solved yet"."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons import exercises
from gan_lessons.exercises.variants import variant

bce = F.binary_cross_entropy_with_logits
pytestmark = pytest.mark.filterwarnings("ignore::gan_lessons.doctor.DoctorWarning")   # the loops' own, on purpose


def run(capsys, checker, *args, **kwargs):
    result = checker(*args, **kwargs)
    out = capsys.readouterr()
    return result, out.out


def stub(*args):                                       # the student copy's body, as nbgrader leaves it
    # YOUR CODE HERE
    raise NotImplementedError()


# --- check_seed000_step: right answers written differently ----------------------------------------------------
def averaged(g, d, g_optimizer, d_optimizer, x_real, z):       # D's loss the mean of its two terms (lesson 05)
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)
    d_loss = (bce(d(x_real), real) + bce(d(gz.detach()), fake)) / 2
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(d(gz), real)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def detached_once(g, d, g_optimizer, d_optimizer, x_real, z):  # the fake made once, a detached copy for D
    x_fake = g(z)
    x_fake_for_d = x_fake.detach()
    d.zero_grad(set_to_none=True)
    logits_real, logits_fake = d(x_real), d(x_fake_for_d)
    loss_real = bce(logits_real, torch.ones_like(logits_real))
    loss_fake = bce(logits_fake, torch.zeros_like(logits_fake))
    (loss_real + loss_fake).backward()
    d_optimizer.step()
    g.zero_grad()
    logits = d(x_fake)
    bce(logits, torch.ones_like(logits)).backward()
    g_optimizer.step()


def softplus_form(g, d, g_optimizer, d_optimizer, x_real, z):  # the BCE written as softplus (the non-saturating loss)
    gz = g(z)
    d_loss = F.softplus(-d(x_real)).mean() + F.softplus(d(gz.detach())).mean()
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = F.softplus(-d(gz)).mean()
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def logsigmoid_form(g, d, g_optimizer, d_optimizer, x_real, z):  # -log σ(l) and -log(1 - σ(l)), as logsigmoid
    gz = g(z)
    d_loss = -(F.logsigmoid(d(x_real)).mean() + F.logsigmoid(-d(gz.detach())).mean())
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = -F.logsigmoid(d(gz)).mean()
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


# --- check_seed000_step: wrong answers, each a mistake students make ------------------------------------------
def no_detach(g, d, g_optimizer, d_optimizer, x_real, z):      # D's backward runs into g and frees its graph
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)
    d_loss = bce(d(x_real), real) + bce(d(gz), fake)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(d(gz), real)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def no_detach_retained(g, d, g_optimizer, d_optimizer, x_real, z):   # "fixed" with retain_graph: D's step trains g
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)
    d_loss = bce(d(x_real), real) + bce(d(gz), fake)
    d_optimizer.zero_grad()
    d_loss.backward(retain_graph=True)
    d_optimizer.step()
    g_loss = bce(d(gz), real)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def stale_d_output(g, d, g_optimizer, d_optimizer, x_real, z):  # G's loss on D's output from before its step
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)
    logits_fake = d(gz)
    d_loss = bce(d(x_real), real) + bce(d(gz.detach()), fake)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(logits_fake, real)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def sigmoid_twice(g, d, g_optimizer, d_optimizer, x_real, z):   # the seed's F.sigmoid kept before *_with_logits
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)
    d_loss = bce(torch.sigmoid(d(x_real)), real) + bce(torch.sigmoid(d(gz.detach())), fake)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(torch.sigmoid(d(gz)), real)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def two_g_forwards(g, d, g_optimizer, d_optimizer, x_real, z):  # right gradients, but g runs twice
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    d_loss = bce(d(x_real), real) + bce(d(g(z).detach()), fake)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(d(g(z)), real)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def no_zero_grad_for_d(g, d, g_optimizer, d_optimizer, x_real, z):
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)
    d_loss = bce(d(x_real), real) + bce(d(gz.detach()), fake)
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(d(gz), real)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def g_first(g, d, g_optimizer, d_optimizer, x_real, z):        # the order swapped
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)
    g_loss = bce(d(gz), real)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()
    d_loss = bce(d(x_real), real) + bce(d(gz.detach()), fake)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()


def test_seed000_step_right_answers_written_differently(capsys):
    for right in (exercises.reference_seed000_step, averaged, detached_once, softplus_form, logsigmoid_form):
        ok, out = run(capsys, exercises.check_seed000_step, right)
        assert ok is True and out.startswith("✓") and "the doctor finds nothing" in out, (right.__name__, out)


def test_seed000_step_without_detach_names_the_detach(capsys):
    ok, out = run(capsys, exercises.check_seed000_step, no_detach)
    assert ok is False and "first backward freed it" in out and "not detached" in out and "gz.detach()" not in out
    ok, out = run(capsys, exercises.check_seed000_step, no_detach_retained)
    assert ok is False and "the doctor still notes wasted work: the backward at" in out
    assert "not detached" in out and "ran on through `gz` into g" in out


def both_steps_at_end(g, d, g_optimizer, d_optimizer, x_real, z):   # D's fake detached; G's loss, backpropagated
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))         # before d steps, leaves d's .grad to d's step
    gz = g(z)
    d_optimizer.zero_grad()
    bce(d(x_real), real).add(bce(d(gz.detach()), fake)).backward()
    g_optimizer.zero_grad()
    bce(d(gz), real).backward()
    d_optimizer.step()
    g_optimizer.step()


def test_seed000_step_with_both_steps_at_the_end_is_not_told_its_detached_fake_is_not_detached(capsys):
    ok, out = run(capsys, exercises.check_seed000_step, both_steps_at_end)
    assert ok is False and "one of the two nets trained on the other's loss" in out and "term is not detached" not in out, out


def test_seed000_step_on_d_output_from_before_its_step_names_the_version_error(capsys):
    ok, out = run(capsys, exercises.check_seed000_step, stale_d_output)
    assert ok is False and "the doctor says: d.net.7.weight.T changed in place" in out
    assert "from before d_optimizer.step()" in out and "changed the weights that forward saved" in out
    assert out.count("✗") == 1


def test_seed000_step_with_sigmoid_twice_names_the_sigmoid(capsys):
    ok, out = run(capsys, exercises.check_seed000_step, sigmoid_twice)
    assert ok is False and "a sigmoid is fed into" in out and "applied it twice" in out and "raw logits" not in out


def test_seed000_step_with_two_forwards_of_g_names_them(capsys):
    ok, out = run(capsys, exercises.check_seed000_step, two_g_forwards)
    assert ok is False and "g ran 2 forwards in one call" in out and out.count("✗") == 1


d_cleared_at_the_end = variant(exercises.reference_seed000_step,   # d's .grad emptied after G's step: too late
                               move=("d_optimizer.zero_grad()", "at the end"))


def saturating_g_loss(g, d, g_optimizer, d_optimizer, x_real, z):   # G's loss: minus D's loss on the fakes
    bce = F.binary_cross_entropy_with_logits
    gz = g(z)
    d_loss = bce(d(x_real), torch.ones(len(x_real))) + bce(d(gz.detach()), torch.zeros(len(z)))
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = -bce(d(gz), torch.zeros_like(d(gz)))
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def test_seed000_step_names_the_saturating_g_loss(capsys):
    ok, out = run(capsys, exercises.check_seed000_step, saturating_g_loss)
    assert ok is False and "the saturating one" in out and out.count("✗") == 1, out


def test_seed000_step_names_a_missing_zero_grad_and_the_order(capsys):
    ok, out = run(capsys, exercises.check_seed000_step, no_zero_grad_for_d)
    assert ok is False and "still holds the earlier .grad" in out and "d's gradient" in out and out.count("✗") == 1
    ok, out = run(capsys, exercises.check_seed000_step, d_cleared_at_the_end)
    assert ok is False and "still holds the earlier .grad" in out and out.count("✗") == 1, out
    ok, out = run(capsys, exercises.check_seed000_step, g_first)
    assert ok is False and "G steps first" in out and "D first" in out and out.count("✗") == 1


retained_for_nothing = variant(exercises.reference_seed000_step,   # fixed, but the seed's retain_graph kept
                               replace={"d_loss.backward()": "d_loss.backward(retain_graph=True)"})


def test_seed000_step_names_a_graph_kept_for_nothing(capsys):
    ok, out = run(capsys, exercises.check_seed000_step, retained_for_nothing)
    assert ok is False and "2 backward() call(s) in 2 calls" in out and "stayed alive for nothing" in out, out
    assert out.count("✗") == 1, out


retained_beside_inputs = variant(exercises.reference_seed000_step, replace={   # no detach, D's backward limited to
    "bce(d(gz.detach()), fake_label)": "bce(d(gz), fake_label)",                  # d's parameters: it never runs
    "d_loss.backward()": "d_loss.backward(inputs=list(d.parameters()), retain_graph=True)"})   # g's part, so G's
                                                                                  # later backward needs no retain


def test_a_graph_kept_beside_backward_inputs_is_kept_for_nothing_too(capsys):
    ok, out = run(capsys, exercises.check_seed000_step, retained_beside_inputs)
    assert ok is False and "2 backward() call(s) in 2 calls" in out and "stayed alive for nothing" in out, out


def test_seed000_step_unsolved(capsys):
    ok, out = run(capsys, exercises.check_seed000_step, stub)
    assert ok is False and out.startswith("?") and "not solved yet" in out and "✗" not in out
    ok, out = run(capsys, exercises.check_seed000_step, ...)
    assert ok is False and out.startswith("?") and "not solved yet" in out


# --- check_doctor_bug ----------------------------------------------------------------------------------------
def _small_gan():
    torch.manual_seed(0)
    G, D = nn.Linear(4, 4), nn.Linear(4, 1)
    return G, D, optim.Adam(G.parameters()), optim.Adam(D.parameters())


def freed_bug():                                       # D's loss on the undetached fake frees G's graph
    G, D, opt_G, opt_D = _small_gan()
    x_fake = G(torch.randn(8, 4))
    loss_D = F.softplus(D(x_fake)).mean()
    opt_D.zero_grad(); loss_D.backward(); opt_D.step()  # noqa: E702
    loss_G = F.softplus(-D(x_fake)).mean()
    opt_G.zero_grad(); loss_G.backward(); opt_G.step()  # noqa: E702


def version_bug():                                     # G's loss through D's output from before opt_D.step()
    G, D, opt_G, opt_D = _small_gan()
    x_fake = G(torch.randn(8, 4))
    logits = D(x_fake)
    opt_D.zero_grad(); F.softplus(D(x_fake.detach())).mean().backward(); opt_D.step()  # noqa: E702
    opt_G.zero_grad(); F.softplus(-logits).mean().backward(); opt_G.step()  # noqa: E702


def leaf_bug():                                        # clipping a weight in place outside no_grad
    G, D, opt_G, opt_D = _small_gan()
    D.weight.clamp_(-0.01, 0.01)


def clean_loop():
    G, D, opt_G, opt_D = _small_gan()
    x_fake = G(torch.randn(8, 4))
    opt_D.zero_grad(); F.softplus(D(x_fake.detach())).mean().backward(); opt_D.step()  # noqa: E702
    opt_G.zero_grad(); F.softplus(-D(x_fake)).mean().backward(); opt_G.step()  # noqa: E702


def silent_bug():                                      # a double sigmoid: wrong, but nothing raises
    G, D, opt_G, opt_D = _small_gan()
    x_fake = G(torch.randn(8, 4))
    loss_D = bce(torch.sigmoid(D(x_fake.detach())), torch.zeros(8, 1))
    opt_D.zero_grad(); loss_D.backward(); opt_D.step()  # noqa: E702


def wasted_backward():                                 # D's loss undetached and its graph kept: wasteful, no error
    G, D, opt_G, opt_D = _small_gan()
    x_fake = G(torch.randn(8, 4))
    opt_D.zero_grad(); F.softplus(D(x_fake)).mean().backward(retain_graph=True); opt_D.step()  # noqa: E702
    opt_G.zero_grad(); F.softplus(-D(x_fake)).mean().backward(); opt_G.step()  # noqa: E702


def not_autograd():
    raise ValueError("shapes do not match")


def test_doctor_bug_right_answers(capsys):
    for loop, kind in ((freed_bug, "freed"), (version_bug, "version"), (leaf_bug, "leaf_inplace")):
        ok, out = run(capsys, exercises.check_doctor_bug, loop, kind, quiet=True)
        assert ok is True and out.startswith("✓") and f"diagnosed by the doctor as {kind!r}" in out, (kind, out)
    ok, out = run(capsys, exercises.check_doctor_bug, version_bug, quiet=True)    # no expectation given
    assert ok is True and "'version'" in out


def no_graph_bug():                                   # a loss from a detached output: the doctor's 'no_graph'
    G, D, opt_G, opt_D = _small_gan()
    F.softplus(-D(G(torch.randn(8, 4)).detach()).detach()).mean().backward()


def test_doctor_bug_takes_the_kind_in_any_case_and_a_kind_outside_the_three_is_told_apart(capsys):
    ok, out = run(capsys, exercises.check_doctor_bug, freed_bug, " Freed", quiet=True)
    assert ok is True and "diagnosed by the doctor as 'freed'" in out, out
    ok, out = run(capsys, exercises.check_doctor_bug, no_graph_bug, "freed", quiet=True)
    assert ok is False and "'no_graph' is not one of the kinds this exercise asks for" in out, out
    assert "your expectation" not in out, out


def test_doctor_bug_wrong_answers_are_named(capsys):
    ok, out = run(capsys, exercises.check_doctor_bug, clean_loop, "freed", quiet=True)
    assert ok is False and "ran without an error, so there is nothing to diagnose" in out
    ok, out = run(capsys, exercises.check_doctor_bug, silent_bug, "version", quiet=True)
    assert ok is False and "the doctor only warned" in out and "that bug is silent" in out
    ok, out = run(capsys, exercises.check_doctor_bug, wasted_backward, "freed", quiet=True)
    assert ok is False and "the doctor only noted wasted work" in out and "warned" not in out, out
    ok, out = run(capsys, exercises.check_doctor_bug, freed_bug, "version", quiet=True)
    assert ok is False and "diagnosed 'freed'" in out and "not 'version' as you expected" in out
    ok, out = run(capsys, exercises.check_doctor_bug, not_autograd, "freed", quiet=True)
    assert ok is False and "ValueError" in out and "only the lessons' autograd errors" in out
    ok, out = run(capsys, exercises.check_doctor_bug, freed_bug, "graph freed", quiet=True)
    assert ok is False and "is not a diagnosis kind" in out
    ok, out = run(capsys, exercises.check_doctor_bug, freed_bug, ["freed"], quiet=True)    # a list, not a kind
    assert ok is False and "expected = ['freed'] is not a diagnosis kind" in out, out


def test_doctor_bug_unsolved(capsys):
    for answer, expected in ((..., "freed"), (freed_bug, ...), (stub, "freed")):
        ok, out = run(capsys, exercises.check_doctor_bug, answer, expected, quiet=True)
        assert ok is False and out.startswith("?") and "not solved yet" in out, out


# --- seed 000's step as written and other loops, and the doctor on small loops -------------------------------------
def freed_loop():
    G, D = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
    x_fake = G(torch.randn(8, 4))
    F.softplus(D(x_fake)).mean().backward()
    F.softplus(-D(x_fake)).mean().backward()


def clean_linear_loop():
    G = torch.nn.Linear(4, 4)
    G(torch.randn(8, 4)).sum().backward()


def other_error_loop():
    raise ValueError("not an autograd error")


def test_doctor_bug(capsys):
    ok, out = run(capsys, exercises.check_doctor_bug, freed_loop, quiet=True)
    assert ok is True and "'freed'" in out
    ok, out = run(capsys, exercises.check_doctor_bug, freed_loop, expected="freed", quiet=True)
    assert ok is True
    ok, out = run(capsys, exercises.check_doctor_bug, freed_loop, expected="version", quiet=True)
    assert ok is False and "diagnosed 'freed'" in out and "not 'version'" in out
    ok, out = run(capsys, exercises.check_doctor_bug, freed_loop, expected=..., quiet=True)
    assert ok is False and "not solved yet" in out
    ok, out = run(capsys, exercises.check_doctor_bug, clean_linear_loop, quiet=True)
    assert ok is False and "ran without an error" in out and "Hint" in out
    ok, out = run(capsys, exercises.check_doctor_bug, other_error_loop, quiet=True)
    assert ok is False and "ValueError" in out and "only the lessons' autograd errors" in out


# --- lesson 07: seed 000's step, fixed ---------------------------------------------------------------------
def seed000_as_written(g, d, g_optimizer, d_optimizer, x_real, z):
    gz = g(z)
    dgz = torch.sigmoid(d(gz))
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    g_loss, d_loss = bce(dgz, real), bce(d(x_real), real) + bce(dgz, fake)
    d_optimizer.zero_grad()
    d_loss.backward(retain_graph=True)
    d_optimizer.step()
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def seed000_sigmoid_kept(g, d, g_optimizer, d_optimizer, x_real, z):    # runs; the doctor warns; grads differ
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)
    d_loss = bce(d(x_real), real) + bce(torch.sigmoid(d(gz.detach())), fake)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(torch.sigmoid(d(gz)), real)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def seed000_no_grad_fake(g, d, g_optimizer, d_optimizer, x_real, z):    # right gradients, but g runs twice
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    with torch.no_grad():
        gz = g(z)
    d_loss = bce(d(x_real), real) + bce(d(gz), fake)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(d(g(z)), real)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def seed000_stale_D(g, d, g_optimizer, d_optimizer, x_real, z):         # G's loss from D before its step
    real, fake = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)
    d_loss = bce(d(x_real), real) + bce(d(gz.detach()), fake)
    g_loss = bce(d(gz), real)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def test_seed000_step(capsys):
    for right in (exercises.reference_seed000_step, averaged):
        ok, out = run(capsys, exercises.check_seed000_step, right)
        assert ok is True and out.startswith("✓"), out
    ok, out = run(capsys, exercises.check_seed000_step, seed000_no_grad_fake)
    assert ok is False and "g ran 2 forwards in one call" in out and "gz.detach()" not in out
    ok, out = run(capsys, exercises.check_seed000_step, seed000_as_written)
    assert ok is False and "the doctor says: d.net.7.weight.T changed in place" in out
    ok, out = run(capsys, exercises.check_seed000_step, seed000_sigmoid_kept)
    assert ok is False and out.count("the doctor still warns: a sigmoid is fed into") == 1
    assert "step 1: d_optimizer stepped on gradients" in out
    ok, out = run(capsys, exercises.check_seed000_step, seed000_stale_D)
    assert ok is False and "the doctor says" in out and "changed in place" in out


@pytest.mark.parametrize("step, which", [(stale_d_output, 1), (sigmoid_twice, 2)], ids=["version", "sigmoid"])
def test_seed000_step_gives_the_same_hint_in_chinese(capsys, step, which):
    """The hints match the doctor's English words; a Chinese lesson still gets them (in Chinese)."""
    from gan_lessons.exercises.lesson07 import SEED000_DIAGNOSES
    from gan_lessons.i18n import _, speaking
    with speaking("zh"):
        ok, out = run(capsys, exercises.check_seed000_step, step)
        hint = _(SEED000_DIAGNOSES[which][2])
    assert hint != SEED000_DIAGNOSES[which][2] and ok is False and hint in out, out


def test_the_doctor_reads_the_message_a_cuda_tensor_gives(capsys, monkeypatch):
    from gan_lessons import graphs
    read = graphs.version_error
    monkeypatch.setattr(graphs, "version_error", lambda m: read(m.replace("torch.FloatTensor", "torch.cuda.FloatTensor")))
    ok, out = run(capsys, exercises.check_seed000_step, stale_d_output)
    assert ok is False and "the doctor says: d.net.7.weight.T changed in place" in out
