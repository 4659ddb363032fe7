"""Lesson 04's checkers, check_d_step and check_sample: right answers written differently are accepted, and each
wrong answer a student writes is answered with a hint that names its mistake."""
import pytest
import torch
import torch.nn.functional as F

from gan_lessons import exercises

bce = F.binary_cross_entropy_with_logits


def run(capsys, checker, answer):
    result = checker(answer)
    return result, capsys.readouterr().out


def stub(*args):
    # YOUR CODE HERE
    raise NotImplementedError()


@pytest.mark.parametrize("checker", [exercises.check_d_step, exercises.check_sample])
def test_unanswered_and_the_student_copys_stub_say_not_solved_yet(capsys, checker):
    ok, out = run(capsys, checker, ...)
    assert ok is False and out.startswith("?") and "not solved yet" in out
    ok, out = run(capsys, checker, stub)
    assert ok is False and out.startswith("?") and "not solved yet" in out and "✗" not in out, out


# --- d_step: right answers, written differently (the hinge loss: relu(1 - D(x_real)) and relu(1 + D(fakes))) ------
def d_step_averaged(G, D, opt_D, z, x_real):            # the mean of the two terms, with clamp for relu
    x_fake = G(z).detach()
    opt_D.zero_grad()
    loss_D = ((1 - D(x_real)).clamp(min=0).mean() + (1 + D(x_fake)).clamp(min=0).mean()) / 2
    loss_D.backward()
    opt_D.step()
    return loss_D


def d_step_no_grad(G, D, opt_D, z, x_real):              # the fake batch made without a graph at all
    with torch.no_grad():
        x_fake = G(z)
    loss_D = torch.relu(1.0 - D(x_real)).mean() + torch.relu(1.0 + D(x_fake)).mean()
    D.zero_grad()
    loss_D.backward()
    opt_D.step()
    return loss_D


def d_step_concatenated(G, D, opt_D, z, x_real):         # one batch of reals and fakes, signs as targets
    x = torch.cat([x_real, G(z).detach()])
    y = torch.cat([torch.ones(len(x_real)), -torch.ones(len(z))])
    opt_D.zero_grad()
    loss_D = F.relu(1 - y * D(x)).mean()                  # the mean over 2B: half the sum of the two means
    loss_D.backward()
    opt_D.step()
    return loss_D


def d_step_minimum(G, D, opt_D, z, x_real):              # -min(0, s - 1), as the SAGAN paper writes the hinge
    x_fake = G(z).detach()
    zero = torch.zeros(())
    loss_D = -torch.minimum(zero, D(x_real) - 1).mean() - torch.minimum(zero, -D(x_fake) - 1).mean()
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    return loss_D


@pytest.mark.parametrize("d_step", [exercises.reference_d_step, d_step_averaged, d_step_no_grad, d_step_concatenated,
                                    d_step_minimum])
def test_right_d_steps_are_accepted(capsys, d_step):
    ok, out = run(capsys, exercises.check_d_step, d_step)
    assert ok is True and out.startswith("✓"), out


# --- d_step: wrong answers, each named -------------------------------------------------------------------------
def hinge(real_scores, fake_scores):
    return F.relu(1 - real_scores).mean() + F.relu(1 + fake_scores).mean()


def d_step_undetached(G, D, opt_D, z, x_real):          # the fake batch not detached: loss_D fills G's .grad
    x_fake = G(z)
    loss_D = hinge(D(x_real), D(x_fake))
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def d_step_clears_G_afterwards(G, D, opt_D, z, x_real):  # not detached, G's .grad cleared after the fact
    d_step_undetached(G, D, opt_D, z, x_real)
    G.zero_grad()


def d_step_output_detached(G, D, opt_D, z, x_real):     # detaches D's output: the fake term trains nothing
    loss_D = hinge(D(x_real), D(G(z)).detach())
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def d_step_swapped_signs(G, D, opt_D, z, x_real):
    x_fake = G(z).detach()
    loss_D = F.relu(1 + D(x_real)).mean() + F.relu(1 - D(x_fake)).mean()
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def d_step_no_hinge(G, D, opt_D, z, x_real):            # a Wasserstein critic's loss: no margin
    x_fake = G(z).detach()
    loss_D = D(x_fake).mean() - D(x_real).mean()
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def d_step_no_zero_grad(G, D, opt_D, z, x_real):        # D's .grad still holds the earlier gradient
    x_fake = G(z).detach()
    loss_D = hinge(D(x_real), D(x_fake))
    loss_D.backward()
    opt_D.step()


def d_step_zero_grad_late(G, D, opt_D, z, x_real):      # zero_grad between backward and step
    x_fake = G(z).detach()
    loss_D = hinge(D(x_real), D(x_fake))
    loss_D.backward()
    opt_D.zero_grad()
    opt_D.step()


def d_step_all_no_grad(G, D, opt_D, z, x_real):         # the whole loss under no_grad: nothing to backward
    with torch.no_grad():
        loss_D = hinge(D(x_real), D(G(z)))
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def d_step_bce(G, D, opt_D, z, x_real):                 # section 3's loss, not the exercise's
    x_fake = G(z).detach()
    loss_D = bce(D(x_real), torch.ones(len(x_real))) + bce(D(x_fake), torch.zeros(len(z)))
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def d_step_output_detached_averaged(G, D, opt_D, z, x_real):   # the same slip in an averaged loss
    loss_D = 0.5 * hinge(D(x_real), D(G(z)).detach())
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def d_step_freezes_G(G, D, opt_D, z, x_real):           # G frozen for the step, never thawed
    G.requires_grad_(False)
    d_step_no_grad(G, D, opt_D, z, x_real)


def d_step_real_term_only(G, D, opt_D, z, x_real):      # backward through the real term alone: nothing detached
    x_fake = G(z).detach()
    loss_real, loss_fake = F.relu(1 - D(x_real)).mean(), F.relu(1 + D(x_fake)).mean()
    opt_D.zero_grad()
    loss_real.backward()
    opt_D.step()
    return loss_real + loss_fake


def d_step_G_in_eval(G, D, opt_D, z, x_real):            # the fakes made by G in eval mode
    G.eval()
    with torch.no_grad():
        x_fake = G(z)
    G.train()
    return d_step_no_grad_on(G, D, opt_D, x_fake, x_real)


def d_step_summed(G, D, opt_D, z, x_real):             # each hinge term summed over the batch
    loss_D = F.relu(1 - D(x_real)).sum() + F.relu(1 + D(G(z).detach())).sum()
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    return loss_D


def d_step_steps_first(G, D, opt_D, z, x_real):         # the step, then the backward: .grad is filled too late
    loss_D = F.relu(1 - D(x_real)).mean() + F.relu(1 + D(G(z).detach())).mean()
    opt_D.zero_grad()
    opt_D.step()
    loss_D.backward()
    return loss_D


def d_step_no_grad_on(G, D, opt_D, x_fake, x_real):
    loss_D = F.relu(1 - D(x_real)).mean() + F.relu(1 + D(x_fake)).mean()
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    return loss_D


@pytest.mark.parametrize("d_step, named", [
    (d_step_undetached, ["loss_D reached G", "14 of G's 14 parameters have a .grad", "still joined to G's graph"]),
    (d_step_clears_G_afterwards, ["still ran through G", "still joined to G's graph"]),
    (d_step_output_detached, ["the fake term gives D no gradient", "the real images' term alone"]),
    (d_step_output_detached_averaged, ["the fake term gives D no gradient", "the real images' term alone"]),
    (d_step_real_term_only, ["the fake term gives D no gradient", "the real images' term alone"]),
    (d_step_G_in_eval, ["G's forward ran in eval mode"]),
    (d_step_swapped_signs, ["the signs are swapped"]),
    (d_step_no_hinge, ["however far past its margin", "score by score"]),
    (d_step_no_zero_grad, ["still held an earlier gradient", "nothing cleared it before loss_D.backward()"]),
    (d_step_zero_grad_late, ["cleared after loss_D.backward(), which throws the new gradient away"]),
    (d_step_steps_first, ["opt_D.step() ran before loss_D.backward()", "came after the step"]),
    (d_step_all_no_grad, ["loss_D has no graph", "D's forward ran where no graph was recorded"]),
    (d_step_bce, ["another direction", "the exercise's hinge loss, term by term"]),
    (d_step_summed, ["each term is summed over the batch"]),
    (d_step_freezes_G, ["no longer require grad"]),
])
def test_each_wrong_d_step_is_named(capsys, d_step, named):
    ok, out = run(capsys, exercises.check_d_step, d_step)
    assert ok is False and out.startswith("✗"), out
    for words in named:
        assert words in out, (words, out)
    for fix in ("x_fake.detach()", "D(x_fake.detach())", "relu(1 -", "zero_grad() before"):
        assert fix not in out, (fix, out)                       # the mistake named, not the fix's code printed


def test_an_undetached_step_is_not_also_blamed_for_its_loss(capsys):
    ok, out = run(capsys, exercises.check_d_step, d_step_undetached)
    assert out.count("✗") == 1 and "hinge" not in out, out


# --- sample: right answers, written differently ----------------------------------------------------------------
def sample_right(G, z):
    was_training = G.training
    G.eval()
    with torch.no_grad():
        images = G(z)
    G.train(was_training)
    return images


def sample_inference_mode(G, z):                 # inference tensors are fine for a figure; try/finally restores
    mode = G.training
    try:
        G.eval()
        with torch.inference_mode():
            return G(z)
    finally:
        G.train(mode)


def sample_one_at_a_time(G, z):                  # each image on its own: float32 sums in another order
    was_training = G.training
    G.eval()
    with torch.no_grad():
        images = torch.cat([G(z[k:k + 1]) for k in range(len(z))])
    G.train(was_training)
    return images


@pytest.mark.parametrize("sample", [sample_right, sample_inference_mode, sample_one_at_a_time])
def test_right_samples_are_accepted(capsys, sample):
    ok, out = run(capsys, exercises.check_sample, sample)
    assert ok is True and out.startswith("✓"), out


# --- sample: wrong answers, each named -------------------------------------------------------------------------
def sample_no_grad_only(G, z):                   # the graph is off, BatchNorm still in training mode
    with torch.no_grad():
        return G(z)


def sample_detach(G, z):                         # eval mode, but the forward builds a graph first
    G.eval()
    images = G(z).detach()
    G.train()
    return images


def sample_left_in_eval(G, z):
    G.eval()
    with torch.no_grad():
        return G(z)


def sample_always_train(G, z):                   # puts G in training mode whatever mode it was in
    G.eval()
    with torch.no_grad():
        images = G(z)
    G.train()
    return images


def sample_top_flag_only(G, z):                  # G's own flag put back, its submodules left in eval mode
    was = G.training
    G.eval()
    with torch.no_grad():
        images = G(z)
    G.training = was
    return images


def sample_frozen(G, z):                         # G frozen for the figure and never thawed
    G.requires_grad_(False)
    return sample_right(G, z)


def sample_rescaled(G, z):                       # eval mode, no graph, then mapped to [0, 1] for the figure
    return (sample_right(G, z) + 1) / 2


def sample_clipped(G, z):                        # eval mode, no graph, then cut to [-0.5, 0.5]
    return sample_right(G, z).clamp(-0.5, 0.5)


def sample_grad_left_off(G, z):                  # autograd turned off for the figure and never turned back on
    was = G.training
    G.eval()
    torch.set_grad_enabled(False)
    images = G(z)
    G.train(was)
    return images


def test_autograd_left_off_is_named_and_turned_back_on(capsys):
    ok, out = run(capsys, exercises.check_sample, sample_grad_left_off)
    assert ok is False and "autograd was left off after your sample returned" in out, out
    assert out.count("✗") == 1 and torch.is_grad_enabled()          # the notebook's next cells record again

    def d_step_grad_left_off(G, D, opt_D, z, x_real):             # a right step, then autograd turned off: the
        exercises.reference_d_step(G, D, opt_D, z, x_real)         # checker's own code after it must not fail
        torch.set_grad_enabled(False)
    ok, out = run(capsys, exercises.check_d_step, d_step_grad_left_off)
    assert ok is False and "autograd was left off after your d_step returned" in out and torch.is_grad_enabled()


def test_a_sample_changed_after_an_evaluation_mode_forward_is_not_blamed_on_batchnorm(capsys):
    for changed in (sample_rescaled, sample_clipped):
        ok, out = run(capsys, exercises.check_sample, changed)
        assert ok is False and "BatchNorm" not in out and "running" not in out, out
    ok, out = run(capsys, exercises.check_sample, lambda G, z: sample_right(G, z).clamp(-1, 1))   # tanh's range
    assert ok is True, out


@pytest.mark.parametrize("sample, named", [
    (sample_no_grad_only, ["running statistics changed", "training-mode output"]),
    (sample_rescaled, ["differ from G's evaluation-mode output, by up to 0.9"]),
    (sample_clipped, ["differ from G's evaluation-mode output, by up to 0.4"]),
    (sample_detach, ["saved", "never runs", "does not unsave them"]),
    (sample_top_flag_only, ["G.training is True after sample", "submodule(s) in eval mode"]),
    (sample_frozen, ["no longer require grad after sample"]),
    (sample_left_in_eval, ["left in eval mode"]),
    (sample_always_train, ["was in eval mode before sample", "in training mode after"]),
    (lambda G, z: G(z), ["still require grad"]),
])
def test_each_wrong_sample_is_named(capsys, sample, named):
    ok, out = run(capsys, exercises.check_sample, sample)
    assert ok is False and out.startswith("✗"), out
    for words in named:
        assert words in out, (words, out)


def test_each_wrong_sample_is_blamed_for_its_own_mistake_only(capsys):
    ok, out = run(capsys, exercises.check_sample, sample_no_grad_only)
    assert "saved" not in out, out
    ok, out = run(capsys, exercises.check_sample, sample_detach)
    assert "running statistics" not in out, out
    ok, out = run(capsys, exercises.check_sample, sample_left_in_eval)
    assert out.count("✗") == 1, out
    ok, out = run(capsys, exercises.check_sample, lambda G, z: G(z))
    assert "detached" not in out, out


def test_d_step_must_return_the_loss_it_trained_on(capsys):
    """The exercise asks for `return loss_D`: a right step that returns nothing, or another number, is told so,
    in both languages."""
    from gan_lessons.i18n import speaking

    def silent(G, D, opt_D, z, x_real):
        exercises.reference_d_step(G, D, opt_D, z, x_real)

    def halved(G, D, opt_D, z, x_real):
        return exercises.reference_d_step(G, D, opt_D, z, x_real) / 3

    assert not exercises.check_d_step(silent)
    assert "d_step returned None, where the exercise asks it to return loss_D" in capsys.readouterr().out
    assert not exercises.check_d_step(halved)
    out = capsys.readouterr().out
    assert "d_step returned" in out and "on the checker's batch" in out
    with speaking("zh"):
        assert not exercises.check_d_step(silent)
    assert "d_step 返回的是 None，而练习要求它返回 loss_D" in capsys.readouterr().out


def test_a_d_step_that_leaves_g_in_eval_mode_is_named(capsys):
    def d_step_g_left_in_eval(G, D, opt_D, z, x_real):
        exercises.reference_d_step(G, D, opt_D, z, x_real)
        G.eval()
    ok, out = run(capsys, exercises.check_d_step, d_step_g_left_in_eval)
    assert ok is False and "G is left in eval mode after your step" in out and out.count("✗") == 1, out


def test_a_d_step_with_a_second_g_forward_in_training_mode_is_named_and_one_in_eval_mode_is_not(capsys):
    """A look at the fakes before the step: in training mode it moves G's BatchNorm statistics a second time; in
    eval mode (put back after) it moves nothing, and the step is right."""
    def d_step_looks_first(G, D, opt_D, z, x_real):
        with torch.no_grad():
            G(z)
        return exercises.reference_d_step(G, D, opt_D, z, x_real)

    def d_step_looks_in_eval_mode(G, D, opt_D, z, x_real):
        G.eval()
        with torch.no_grad():
            G(z)
        G.train()
        return exercises.reference_d_step(G, D, opt_D, z, x_real)
    ok, out = run(capsys, exercises.check_d_step, d_step_looks_first)
    assert ok is False and "G ran 2 forwards in training mode in one D step" in out and out.count("✗") == 1, out
    ok, out = run(capsys, exercises.check_d_step, d_step_looks_in_eval_mode)
    assert ok is True, out


_first_images = {}


def sample_cached(G, z):                         # the first call's images, kept and returned for every later z
    if "images" not in _first_images:
        _first_images["images"] = sample_right(G, z)
    return _first_images["images"]


def test_a_sample_that_ignores_the_z_passed_in_is_caught(capsys):
    _first_images.clear()
    ok, out = run(capsys, exercises.check_sample, sample_cached)
    assert ok is False and "called again with another z" in out, out


def test_what_a_d_step_or_a_sample_does_to_the_callers_objects_is_named(capsys):
    """z clamped in place; a z of the step's own, drawn after a reseed; a hook left on G by sample."""
    def d_step_clamps_z(G, D, opt_D, z, x_real):
        z.clamp_(-3, 3)
        return exercises.reference_d_step(G, D, opt_D, z, x_real)

    def d_step_draws_its_own_z(G, D, opt_D, z, x_real):
        torch.manual_seed(0)
        return exercises.reference_d_step(G, D, opt_D, torch.randn_like(z), x_real)

    def sample_leaves_a_hook(G, z):
        G.register_forward_hook(lambda module, args, out: None)
        return sample_right(G, z)
    ok, out = run(capsys, exercises.check_d_step, d_step_clamps_z)
    assert ok is False and "wrote into the caller's z in place" in out and out.count("✗") == 1, out
    ok, out = run(capsys, exercises.check_d_step, d_step_draws_its_own_z)
    assert ok is False and "G's forward ran on another z than the one passed in" in out, out
    ok, out = run(capsys, exercises.check_sample, sample_leaves_a_hook)
    assert ok is False and "left 1 more hook(s) on G" in out and out.count("✗") == 1, out
