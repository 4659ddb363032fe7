"""Lesson 05's build exercise, a strategy with n_critic D steps per G step, written whole, that wastes no D gradient:
exercises.check_strategy accepts right answers written differently, names each wrong one's mistake, and says "not
solved yet" to the stub and `...`."""
import pytest
import torch
import torch.nn.functional as F

from gan_lessons import exercises
from gan_lessons.exercises.lesson05 import MISTAKES, reference_strategy
from gan_lessons.exercises.variants import variant


def hinge_D(real_scores, fake_scores):
    return F.relu(1 - real_scores).mean() + F.relu(1 + fake_scores).mean()


# --- right answers, written differently ---------------------------------------------------------------------------
def frozen_D_sliced(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """Chunks by slicing, G's step with D frozen (requires_grad_(False)) instead of backward(inputs=...)."""
    m = len(x_real) // n_critic
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    for k in range(n_critic):
        opt_D.zero_grad()
        loss_D = (F.relu(1 - D(x_real[k * m:(k + 1) * m])).mean() + F.relu(1 + D(x_fake[k * m:(k + 1) * m])).mean()) / 2
        loss_D.backward()
        opt_D.step()
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        loss_G = -D(G(noise(m))).mean()
        loss_G.backward()
        opt_G.step()
    finally:
        D.requires_grad_(True)
    return loss_D, loss_G


def detached_summed_autograd_grad(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """split() instead of chunk(), the fake batch under set_grad_enabled(False) and detached, D's terms summed,
    module zero_grad(), G's gradient from autograd.grad."""
    size = len(x_real) // n_critic
    with torch.set_grad_enabled(False):
        fakes = torch.split(G(noise(len(x_real))).detach(), size)
    for x_chunk, x_fake in zip(torch.split(x_real, size), fakes):
        D.zero_grad()
        loss_D = torch.clamp(1 - D(x_chunk), min=0).mean() + torch.clamp(1 + D(x_fake), min=0).mean()
        loss_D.backward()
        opt_D.step()
    loss_G = -D(G(noise(size))).mean()
    for p, g in zip(G.parameters(), torch.autograd.grad(loss_G, list(G.parameters()))):
        p.grad = g
    opt_G.step()
    return loss_D, loss_G


def zero_grads_at_the_top(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """opt_G.zero_grad() first; D's loop by index."""
    opt_G.zero_grad()
    reals = x_real.chunk(n_critic)
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)
    for k in range(n_critic):
        opt_D.zero_grad()
        loss_D = hinge_D(D(reals[k]), D(fakes[k]))
        loss_D.backward()
        opt_D.step()
    loss_G = -D(G(noise(len(reals[0])))).mean()
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def a_backward_per_term(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """Each of D's two terms has a backward of its own (their gradients add up in .grad); G's step with D frozen."""
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)
    for x_chunk, x_fake in zip(x_real.chunk(n_critic), fakes):
        opt_D.zero_grad()
        real_term, fake_term = F.relu(1 - D(x_chunk)).mean(), F.relu(1 + D(x_fake)).mean()
        real_term.backward()
        fake_term.backward()
        opt_D.step()
    D.requires_grad_(False)
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_chunk)))).mean()
    loss_G.backward()
    opt_G.step()
    D.requires_grad_(True)
    return real_term + fake_term, loss_G


def one_D_forward_for_both(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """Real and fake chunks scored in one forward of D (it has no BatchNorm: the same sums, in another order)."""
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)
    for x_chunk, x_fake in zip(x_real.chunk(n_critic), fakes):
        scores_real, scores_fake = D(torch.cat([x_chunk, x_fake])).split([len(x_chunk), len(x_fake)])
        loss_D = hinge_D(scores_real, scores_fake)
        opt_D.zero_grad()
        loss_D.backward()
        opt_D.step()
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_chunk)))).mean()
    torch.autograd.backward(loss_G, inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


@pytest.mark.parametrize("step", [reference_strategy, frozen_D_sliced, detached_summed_autograd_grad,
                                  zero_grads_at_the_top, a_backward_per_term, one_D_forward_for_both])
def test_right_answers_written_differently_get_one_tick(step, capsys):
    assert exercises.check_strategy(step) is True
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"✓ {step.__name__}:") and "no gradient of D is computed in G's step" in out[0]


# --- wrong answers, as students write them ------------------------------------------------------------------------
def wastes_D_gradient(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """G's plain backward also fills D's .grad."""
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)
    for x_chunk, x_fake in zip(x_real.chunk(n_critic), fakes):
        opt_D.zero_grad()
        loss_D = hinge_D(D(x_chunk), D(x_fake))
        loss_D.backward()
        opt_D.step()
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_chunk)))).mean()
    loss_G.backward()
    opt_G.step()
    return loss_D, loss_G


def zero_grad_before_the_loop(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)
    opt_D.zero_grad()
    for x_chunk, x_fake in zip(x_real.chunk(n_critic), fakes):
        loss_D = hinge_D(D(x_chunk), D(x_fake))
        loss_D.backward()
        opt_D.step()
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_chunk)))).mean()
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def whole_batch_each_time(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    for _k in range(n_critic):
        opt_D.zero_grad()
        loss_D = hinge_D(D(x_real), D(x_fake))
        loss_D.backward()
        opt_D.step()
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_real) // n_critic))).mean()
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def a_G_forward_per_D_step(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """d_first_fresh_fake's D step in a loop: a G forward of its own for each D step."""
    for x_chunk in x_real.chunk(n_critic):
        with torch.no_grad():
            x_fake = G(noise(len(x_chunk)))
        opt_D.zero_grad()
        loss_D = hinge_D(D(x_chunk), D(x_fake))
        loss_D.backward()
        opt_D.step()
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_chunk)))).mean()
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def one_fake_chunk_for_all(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    with torch.no_grad():
        x_fake = G(noise(len(x_real))).chunk(n_critic)[0]
    for x_chunk in x_real.chunk(n_critic):
        opt_D.zero_grad()
        loss_D = hinge_D(D(x_chunk), D(x_fake))
        loss_D.backward()
        opt_D.step()
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_chunk)))).mean()
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def two_critic_steps_always(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """n_critic ignored: always two D steps, on the two halves."""
    return reference_strategy(G, D, opt_G, opt_D, x_real, noise)


def full_size_G_batch(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)
    for x_chunk, x_fake in zip(x_real.chunk(n_critic), fakes):
        opt_D.zero_grad()
        loss_D = hinge_D(D(x_chunk), D(x_fake))
        loss_D.backward()
        opt_D.step()
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_real)))).mean()
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def G_step_first(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """G's whole step first: G answers the D before its steps (and its noise comes first)."""
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_real) // n_critic))).mean()
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)
    for x_chunk, x_fake in zip(x_real.chunk(n_critic), fakes):
        opt_D.zero_grad()
        loss_D = hinge_D(D(x_chunk), D(x_fake))
        loss_D.backward()
        opt_D.step()
    return loss_D, loss_G


def D_steps_train_G(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """No detach and no no_grad for D's fake batch, opt_G.zero_grad() once at the top."""
    opt_G.zero_grad()
    fakes = G(noise(len(x_real))).chunk(n_critic)
    for x_chunk, x_fake in zip(x_real.chunk(n_critic), fakes):
        opt_D.zero_grad()
        loss_D = hinge_D(D(x_chunk), D(x_fake))
        loss_D.backward(retain_graph=True)
        opt_D.step()
    loss_G = -D(G(noise(len(x_chunk)))).mean()
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def reuses_D_forward_from_before_its_step(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """loss_G's D forward made before D's last step: the version error."""
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)
    for k, (x_chunk, x_fake) in enumerate(zip(x_real.chunk(n_critic), fakes)):
        if k == n_critic - 1:
            logits_G = D(G(noise(len(x_chunk))))
        opt_D.zero_grad()
        loss_D = hinge_D(D(x_chunk), D(x_fake))
        loss_D.backward()
        opt_D.step()
    opt_G.zero_grad()
    loss_G = -logits_G.mean()
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


def reuses_fake_made_without_graph(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """G's loss on the last no_grad fake chunk: nothing in loss_G requires grad."""
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)
    for x_chunk, x_fake in zip(x_real.chunk(n_critic), fakes):
        opt_D.zero_grad()
        loss_D = hinge_D(D(x_chunk), D(x_fake))
        loss_D.backward()
        opt_D.step()
    D.requires_grad_(False)
    opt_G.zero_grad()
    loss_G = -D(x_fake).mean()
    try:
        loss_G.backward()
    finally:
        D.requires_grad_(True)
    opt_G.step()
    return loss_D, loss_G


def leaves_D_frozen(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    out = frozen_D_sliced(G, D, opt_G, opt_D, x_real, noise, n_critic)
    D.requires_grad_(False)
    return out


def no_n_critic(G, D, opt_G, opt_D, x_real, noise):
    return reference_strategy(G, D, opt_G, opt_D, x_real, noise)


def scores_reals_for_a_log(G, D, opt_G, opt_D, x_real, noise, n_critic=2):   # a D forward that nothing needs
    with torch.no_grad():
        accuracy = (D(x_real) > 0).float().mean()
    assert 0 <= accuracy <= 1
    return reference_strategy(G, D, opt_G, opt_D, x_real, noise, n_critic)


WRONG = [
    (wastes_D_gradient, ["D's gradient is computed once per step after D's last step, for nothing",
                         "G's backward still fills D's"]),
    (zero_grad_before_the_loop, ["D's second step stepped on its own gradient plus the first one's"]),
    (whole_batch_each_time, ["every D step saw the whole of x_real"]),
    (a_G_forward_per_D_step, ["each D step made its fake batch with a G forward of its own"]),
    (one_fake_chunk_for_all, ["every D step scored the same fake batch"]),
    (two_critic_steps_always, ["with n_critic=3:", "opt_D.step() ran 2 time(s) where the reference steps it 3"]),
    (full_size_G_batch, ["G's fake batch has len(x_real) samples"]),
    (G_step_first, ["G's gradient was taken through D as it was before D's last step"]),
    (D_steps_train_G, ["D's steps train G", "graph back to G"]),
    (reuses_D_forward_from_before_its_step, ["modified by an inplace operation",
                                             "reuses a D forward made before opt_D.step()"]),
    (reuses_fake_made_without_graph, ["does not require grad", "made without a graph"]),
    (leaves_D_frozen, ["D is still frozen after the step", "no longer require grad"]),
    (no_n_critic, ["your step takes no n_critic"]),
    (scores_reals_for_a_log, ["D ran on 56 samples in one step", "40 in all: 16 went through D for nothing"]),
]


@pytest.mark.parametrize("step, words", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_each_wrong_answer_is_told_its_mistake(step, words, capsys):
    assert exercises.check_strategy(step) is False
    out = capsys.readouterr().out
    assert out.startswith("✗") and "✓" not in out
    for w in words:
        assert w in out, (w, out)
    fix_code = [c for c in ("zero_grad()", "torch.no_grad()", ".detach()", "requires_grad_(", "inputs=list(", ".chunk(")
                if c in out]
    assert not fix_code, (fix_code, out)           # the mistake is named; the fix is the student's to write


@pytest.mark.parametrize("k", range(len(MISTAKES)))
def test_each_entry_of_the_checker_s_table_of_mistakes_is_told_its_own_hint(k, capsys):
    """The table's wrong answers are edits of the reference (the ones above are written out by hand)."""
    step, hint = MISTAKES[k]
    assert exercises.check_strategy(step) is False
    assert hint in capsys.readouterr().out


def test_a_wasteful_step_gets_only_the_waste_named(capsys):
    for wasteful in (wastes_D_gradient, scores_reals_for_a_log):
        exercises.check_strategy(wasteful)
        assert len(capsys.readouterr().out.strip().splitlines()) == 1     # its gradients are right: nothing else to say


def test_a_wrong_D_step_is_not_also_blamed_on_G_s_loss(capsys):
    swapped = variant(reference_strategy, replace={"F.relu(1 - D(x_chunk))": "F.relu(1 + D(x_chunk))",
                                                   "F.relu(1 + D(x_fake))": "F.relu(1 - D(x_fake))"})
    exercises.check_strategy(swapped)
    out = capsys.readouterr().out
    assert "opt_D" in out and "G's loss is" not in out, out


# --- not solved yet -------------------------------------------------------------------------------------------------
def test_the_student_copys_stub_and_an_ellipsis_say_not_solved_yet(capsys):
    def my_step(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
        raise NotImplementedError()

    assert exercises.check_strategy(my_step) is False
    assert exercises.check_strategy(...) is False
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 and all(line.startswith("? ") and "not solved yet" in line for line in out)
    assert "raise NotImplementedError()" in out[0] and "my_answer = ..." in out[1]


def test_a_fake_batch_made_with_a_graph_then_detached_is_named_as_lesson_04_names_it(capsys):
    """The same gradients as the reference, but G's forward for D's fake batches saved tensors for nothing: the
    reference with its no_grad block run with a graph and G's output detached (the mutant generator's edit)."""
    from mutants import compiled, mutants
    detached = next(m for m in mutants(reference_strategy) if m.what.startswith("graph made, then detached"))
    assert ".detach().chunk(n_critic)" in detached.source and "no_grad" not in detached.source
    assert exercises.check_strategy(compiled(reference_strategy, detached)) is False
    out = capsys.readouterr().out
    assert "G built a graph once per step that no backward went through" in out
    assert "detach" not in out and "no_grad" not in out          # the symptom, not the fix


def test_a_g_batch_too_large_is_told_once_not_also_as_samples_d_ran_on_for_nothing(capsys):
    assert exercises.check_strategy(full_size_G_batch) is False
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "G's fake batch has len(x_real) samples" in out[0], out


def test_g_s_fakes_sliced_from_a_larger_draw_are_told_the_draws_it_made(capsys):
    """The same gradients (the first rows of a larger draw are a chunk-sized draw), but the step drew more noise
    than the statement's: every later step's noise differs."""
    sliced = variant(reference_strategy, replace={"noise(len(x_chunk))": "noise(len(x_real))[:len(x_chunk)]"})
    assert exercises.check_strategy(sliced) is False
    out = capsys.readouterr().out
    assert "noise draws had sizes 16, 16" in out and out.count("✗") == 1, out
