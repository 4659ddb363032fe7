"""Lesson 08's checkers on answers as students write them: right ones written differently (each accepted), wrong
ones (each answered with a hint that names its mistake), `...` and nbgrader's stub ("not solved yet")."""
import pytest
import torch
from torch.autograd import grad

from gan_lessons import exercises, strategies
from gan_lessons.exercises.lesson08 import reference_r1_term
from gan_lessons.exercises.lesson08_gp import reference_gradient_penalty


def run(capsys, checker, answer):
    result = checker(answer)
    return result, capsys.readouterr().out


def stub(*args):
    # YOUR CODE HERE
    raise NotImplementedError()


# --- gradient_penalty(D, x_cond, x_real, x_fake, eps): images (N, C, H, W), eps of shape (N,) --------------------------
def gp_reference(D, x_cond, x_real, x_fake, eps):
    eps = eps.view(-1, 1, 1, 1)
    x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
    scores = D(x_cond, x_hat)
    g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    norms = g.flatten(1).norm(2, dim=1)
    return ((norms - 1) ** 2).mean()


def gp_sum_sqrt(D, x_cond, x_real, x_fake, eps):             # .sum() instead of grad_outputs, sqrt of the sum of squares
    e = eps[:, None, None, None]
    x_hat = e * x_real.detach() + (1 - e) * x_fake.detach()
    x_hat.requires_grad_()
    g = grad(D(x_cond, x_hat).sum(), x_hat, create_graph=True)[0]
    norm = torch.sqrt((g ** 2).sum(dim=(1, 2, 3)))
    return torch.mean((norm - 1.0) ** 2)


def gp_lerp_linalg(D, x_cond, x_real, x_fake, eps):          # lerp, detach after mixing, linalg.vector_norm
    x_hat = torch.lerp(x_fake, x_real, eps.reshape(-1, *[1] * (x_real.dim() - 1))).detach().requires_grad_(True)
    out = D(x_cond, x_hat)
    (g,) = torch.autograd.grad(outputs=out, inputs=[x_hat], grad_outputs=[torch.ones_like(out)], create_graph=True,
                               retain_graph=True)
    return (torch.linalg.vector_norm(g.flatten(start_dim=1), dim=1) - 1).pow(2).mean()


def gp_written(create_graph=True, detach=True, reshape=True, per_image=True, flatten=True, mean=True,
               first_eps=False, ones=True):
    """A penalty as a student writes it, with one of the usual mistakes switched on."""
    def gradient_penalty(D, x_cond, x_real, x_fake, eps):
        e = eps.view(-1, 1, 1, 1) if reshape else eps
        if first_eps:
            e = eps[0]
        x_hat = e * x_real + (1 - e) * (x_fake.detach() if detach else x_fake)
        x_hat.requires_grad_(True)
        scores = D(x_cond, x_hat)
        g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores) if ones else None, create_graph=create_graph)
        if not per_image:
            return (g.norm(2) - 1) ** 2
        norms = g.flatten(1).norm(2, dim=1) if flatten else g.norm(2, dim=1)
        return ((norms - 1) ** 2).mean() if mean else ((norms - 1) ** 2).sum()
    return gradient_penalty


def gp_weights(D, x_cond, x_real, x_fake, eps):              # the gradient of D's weights, not of its input
    eps = eps.view(-1, 1, 1, 1)
    x_hat = eps * x_real + (1 - eps) * x_fake.detach()
    scores = D(x_cond, x_hat)
    g = grad(scores, list(D.parameters()), grad_outputs=torch.ones_like(scores), create_graph=True)[0]
    return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def gp_weights_unpacked(D, x_cond, x_real, x_fake, eps):     # the same, unpacked as one gradient
    eps = eps.view(-1, 1, 1, 1)
    x_hat = eps * x_real + (1 - eps) * x_fake.detach()
    scores = D(x_cond, x_hat)
    g, = grad(scores, D.parameters(), grad_outputs=torch.ones_like(scores), create_graph=True)
    return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def gp_no_requires_grad(D, x_cond, x_real, x_fake, eps):     # x_hat made from detached tensors, never requires grad
    eps = eps.view(-1, 1, 1, 1)
    x_hat = eps * x_real + (1 - eps) * x_fake.detach()
    scores = D(x_cond, x_hat)
    g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def gp_not_detached(D, x_cond, x_real, x_fake, eps):         # x_hat carries G's graph: runs, and the penalty reaches G
    eps = eps.view(-1, 1, 1, 1)
    x_hat = eps * x_real + (1 - eps) * x_fake
    scores = D(x_cond, x_hat)
    g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def gp_eps_requires_grad(D, x_cond, x_real, x_fake, eps):    # eps made to require grad: x_hat's graph runs into it
    eps = eps.view(-1, 1, 1, 1).requires_grad_(True)
    x_hat = eps * x_real + (1 - eps) * x_fake.detach()
    scores = D(x_cond, x_hat)
    g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def gp_overwrites_x_real(D, x_cond, x_real, x_fake, eps):   # right value, but x_hat written into the caller's x_real
    e = eps.view(-1, 1, 1, 1)
    with torch.no_grad():
        x_real.mul_(e).add_((1 - e) * x_fake)
    x_hat = x_real.detach().requires_grad_(True)
    scores = D(x_cond, x_hat)
    g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def gp_package(D, x_cond, x_real, x_fake, eps):              # not written at all
    return strategies.gradient_penalty(lambda x: D(x_cond, x), x_real, x_fake, eps=eps)


def gp_both_inputs(D, x_cond, x_real, x_fake, eps):  # the gradient of both inputs, one norm over the pair
    eps = eps.view(-1, 1, 1, 1)
    x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
    x_cond = x_cond.detach().requires_grad_(True)
    scores = D(x_cond, x_hat)
    g_cond, g_img = grad(scores, (x_cond, x_hat), grad_outputs=torch.ones_like(scores), create_graph=True)
    g = torch.cat([g_cond.flatten(1), g_img.flatten(1)], dim=1)
    return ((g.norm(2, dim=1) - 1) ** 2).mean()


def gp_swapped_inputs(D, x_cond, x_real, x_fake, eps):   # the image where the condition goes
    eps = eps.view(-1, 1, 1, 1)
    x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
    scores = D(x_hat, x_cond)
    g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def gp_unconditional(D, x_cond, x_real, x_fake, eps):    # D called as section 3's critic, without its condition
    eps = eps.view(-1, 1, 1, 1)
    x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
    scores = D(x_hat)
    g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def gp_image_only_of_two(D, x_cond, x_real, x_fake, eps):   # both inputs require grad, the image's gradient kept
    eps = eps.view(-1, 1, 1, 1)
    x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
    cond = x_cond.clone().requires_grad_(True)
    scores = D(cond, x_hat)
    _, g = grad(scores.sum(), [cond, x_hat], create_graph=True)
    return (g.flatten(1).norm(dim=1).sub(1).square()).mean()


@pytest.mark.parametrize("answer", [gp_reference, gp_sum_sqrt, gp_lerp_linalg, gp_image_only_of_two],
                         ids=lambda f: f.__name__)
def test_gradient_penalty_accepts_right_answers_written_differently(capsys, answer):
    ok, out = run(capsys, exercises.check_gradient_penalty, answer)
    assert ok is True and out.startswith("✓ gradient_penalty"), out


def gp_of_the_mean(D, x_cond, x_real, x_fake, eps):          # the gradient of the scores' mean, not of each score
    e = eps.view(-1, 1, 1, 1)
    x_hat = (e * x_real + (1 - e) * x_fake.detach()).requires_grad_(True)
    g, = torch.autograd.grad(D(x_cond, x_hat).mean(), x_hat, create_graph=True)
    return ((g.flatten(1).norm(dim=1) - 1) ** 2).mean()


def gp_one_sided(D, x_cond, x_real, x_fake, eps):            # norms below 1 left alone
    e = eps.view(-1, 1, 1, 1)
    x_hat = (e * x_real + (1 - e) * x_fake.detach()).requires_grad_(True)
    g, = torch.autograd.grad(D(x_cond, x_hat).sum(), x_hat, create_graph=True)
    return (torch.relu(g.flatten(1).norm(dim=1) - 1) ** 2).mean()


def gp_mixed(weight):
    """A penalty whose x_hat mixes real and fake with weight(eps) of the real images, per image or shared."""
    def gradient_penalty(D, x_cond, x_real, x_fake, eps):
        e = weight(eps)
        e = e.view(-1, 1, 1, 1) if e.dim() else e
        x_hat = (e * x_real + (1 - e) * x_fake.detach()).requires_grad_(True)
        g, = torch.autograd.grad(D(x_cond, x_hat).sum(), x_hat, create_graph=True)
        return ((g.flatten(1).norm(dim=1) - 1) ** 2).mean()
    return gradient_penalty


def gp_detached_gradient(D, x_cond, x_real, x_fake, eps):   # create_graph=True, then the gradient detached
    e = eps.view(-1, 1, 1, 1)
    x_hat = (e * x_real + (1 - e) * x_fake.detach()).requires_grad_(True)
    g, = torch.autograd.grad(D(x_cond, x_hat).sum(), x_hat, create_graph=True)
    return ((g.detach().flatten(1).norm(dim=1) - 1) ** 2).mean()


@pytest.mark.parametrize("answer, words", [
    (gp_written(create_graph=False), ["constant", "create_graph=True", "trains nothing"]),
    (gp_detached_gradient, ["constant", "ran with create_graph=True, but the graph was cut somewhere between that "
                                        "gradient and the value returned"]),
    (gp_mixed(lambda eps: eps.mean()), ["mixed with the same weight", "an eps of its own"]),
    (gp_mixed(lambda eps: torch.zeros_like(eps)), ["the fake images themselves"]),
    (gp_mixed(lambda eps: 1 - eps), ["1 - eps of each real image"]),
    (gp_mixed(lambda eps: eps.flip(0)), ["D was given images with 0.718, 0.170"]),
    (gp_written(per_image=False), ["one norm over the whole batch", "each image's own gradient norm"]),
    (gp_written(flatten=False), ["across the channels", "not one norm per image"]),
    (gp_written(mean=False), ["the sum over the batch", "mean"]),
    (gp_written(reshape=False), ["must match the size", "one number per image"]),
    (gp_written(first_eps=True), ["mixed with the same weight", "an eps of its own"]),
    (gp_eps_requires_grad, ["eps requires grad", "not something to differentiate"]),
    (gp_written(ones=False), ["scalar outputs", "grad_outputs"]),
    (gp_weights, ["gradient with respect to D's weights", "D's input"]),
    (gp_weights_unpacked, ["too many values to unpack", "one gradient per input"]),
    (gp_no_requires_grad, ["does not require grad", "did not require grad when D saw it"]),
    (gp_not_detached, ["reaches G", "trains the critic only"]),
    (gp_package, ["calls strategies.gradient_penalty", "torch.autograd.grad"]),
    (gp_both_inputs, ["both of D's inputs", "the image's gradient alone"]),
    (gp_swapped_inputs, ["puts the image where the condition goes", "condition first"]),
    (gp_unconditional, ["missing 1 required positional argument", "D is conditional"]),
    (gp_of_the_mean, ["the gradient of the scores' mean", "1/5 of its own score's gradient"]),
    (gp_one_sided, ["only norms above 1 are penalised"]),
], ids=lambda a: getattr(a, "__qualname__", "")[:40])
def test_gradient_penalty_names_each_mistake(capsys, answer, words):
    ok, out = run(capsys, exercises.check_gradient_penalty, answer)
    assert ok is False and out.startswith("✗ gradient_penalty") and all(w in out for w in words), out


def test_gradient_penalty_not_solved_yet(capsys):
    for answer in (..., stub):
        ok, out = run(capsys, exercises.check_gradient_penalty, answer)
        assert ok is False and out.startswith("? gradient_penalty: not solved yet"), out
    assert "# YOUR CODE HERE" in out
    ok, out = run(capsys, exercises.check_gradient_penalty, 0.5)
    assert ok is False and "not a function" in out


# --- r1_term(D, x_real, step, every, gamma) ---------------------------------------------------------------------
def r1_reference(D, x_real, step, every, gamma):
    if step % every != 0:
        return torch.zeros(())
    x_real = x_real.detach().requires_grad_(True)
    scores = D(x_real)
    g, = grad(scores, x_real, grad_outputs=torch.ones_like(scores), create_graph=True)
    r1 = g.flatten(1).pow(2).sum(1).mean()
    return gamma / 2 * every * r1


def r1_in_place_sum(D, x_real, step, every, gamma):  # in place on the argument, .sum(), squares over dims 1..3
    if step % every:
        return 0.0
    x_real.requires_grad_()
    g = grad(D(x_real).sum(), x_real, create_graph=True)[0]
    penalty = g.square().sum(dim=[1, 2, 3]).mean()
    weight = every * gamma / 2
    return weight * penalty


def r1_written(every_step=False, scaled=True, create_graph=True, halved=True, batch_mean=True, squared=True,
               zero_after_forward=False, divided=False):
    """A lazy R1 term as a student writes it, with one of the usual mistakes switched on."""
    def r1_term(D, x_real, step, every, gamma):
        if step % every and not (every_step or zero_after_forward):
            return torch.zeros(())
        x = x_real.detach().requires_grad_(True)
        scores = D(x)
        if step % every and zero_after_forward:
            return torch.zeros(())
        g, = grad(scores, x, grad_outputs=torch.ones_like(scores), create_graph=create_graph)
        squares = g.flatten(1).pow(2).sum(1)
        per_image = squares if squared else squares.sqrt()
        r1 = per_image.mean() if batch_mean else per_image.sum()
        weight = (gamma / 2 if halved else gamma) * (1 / every if divided else every if scaled else 1)
        return weight * r1
    return r1_term


def r1_no_requires_grad(D, x_real, step, every, gamma):   # the real images never require grad
    if step % every:
        return torch.zeros(())
    scores = D(x_real)
    g, = grad(scores, x_real, grad_outputs=torch.ones_like(scores), create_graph=True)
    return gamma / 2 * every * g.flatten(1).pow(2).sum(1).mean()


def r1_weights(D, x_real, step, every, gamma):       # the gradient of D's weights
    if step % every:
        return torch.zeros(())
    scores = D(x_real)
    g = grad(scores, list(D.parameters()), grad_outputs=torch.ones_like(scores), create_graph=True)[0]
    return gamma / 2 * every * g.flatten(1).pow(2).sum(1).mean()


def r1_schedule_off_by_one(D, x_real, step, every, gamma):   # computed at steps 1, 5, ...: 0.0 where it is due
    if (step - 1) % every:
        return 0.0
    x_real = x_real.detach().requires_grad_(True)
    scores = D(x_real)
    g, = grad(scores, x_real, grad_outputs=torch.ones_like(scores), create_graph=True)
    return gamma / 2 * every * g.flatten(1).pow(2).sum(1).mean()


def r1_package(D, x_real, step, every, gamma):       # the package's R1, not the student's
    if step % every:
        return torch.zeros(())
    return gamma / 2 * every * strategies.r1_penalty(D, x_real)


def r1_through_backward(D, x_real, step, every, gamma):   # backward(create_graph=True) for x.grad: fills D's .grad
    if step % every:
        return torch.zeros(())
    x = x_real.detach().requires_grad_(True)
    D(x).sum().backward(create_graph=True)
    return gamma / 2 * every * x.grad.flatten(1).pow(2).sum(1).mean()


_r1_calls_made = []


def r1_own_counter(D, x_real, step, every, gamma):    # its own count of calls, not the step passed in
    _r1_calls_made.append(1)
    return r1_reference(D, x_real, len(_r1_calls_made) - 1, every, gamma)


def test_lazy_r1_that_counts_its_own_calls_is_caught(capsys):
    _r1_calls_made.clear()
    ok, out = run(capsys, exercises.check_lazy_r1, r1_own_counter)
    assert ok is False and "the schedule does not follow the step passed in" in out, out


def r1_through_backward_then_cleared(D, x_real, step, every, gamma):   # the same, then D's .grad emptied
    term = r1_through_backward(D, x_real, step, every, gamma)
    D.zero_grad()
    return term


@pytest.mark.parametrize("answer", [r1_reference, r1_in_place_sum], ids=lambda f: f.__name__)
def test_lazy_r1_accepts_right_answers_written_differently(capsys, answer):
    ok, out = run(capsys, exercises.check_lazy_r1, answer)
    assert ok is True and out.startswith("✓ lazy R1"), out


@pytest.mark.parametrize("answer, words", [
    (r1_written(scaled=False), ["at step 0", "1/4 of the right one", "multiplied by 4"]),
    (r1_written(divided=True), ["divided by every", "gamma / 2 * every"]),
    (r1_written(halved=False), ["twice the right one", "gamma / 2"]),
    (r1_written(every_step=True), ["at step 1", "step % every == 0"]),
    (r1_written(zero_after_forward=True), ["at step 1", "ran D's forward", "the work lazy R1 exists to skip"]),
    (r1_written(create_graph=False), ["at step 0", "constant", "create_graph=True"]),
    (r1_written(batch_mean=False), ["the sum over the batch", "batch mean"]),
    (r1_written(squared=False), ["not squared"]),
    (r1_no_requires_grad, ["r1_term at step 0 raised", "x_real did not require grad when D saw it"]),
    (r1_weights, ["gradient with respect to D's weights", "real images"]),
    (r1_package, ["calls strategies.r1_penalty", "torch.autograd.grad"]),
    (r1_schedule_off_by_one, ["at step 0 the term is 0.0", "R1 is computed at steps 0, 4"]),
    (r1_through_backward, ["at step 0 your r1_term changed D's .grad", "before the caller's backward ran"]),
    (r1_through_backward_then_cleared, ["at step 0 your r1_term changed D's .grad"]),
], ids=lambda a: getattr(a, "__qualname__", "")[:40])
def test_lazy_r1_names_each_mistake(capsys, answer, words):
    ok, out = run(capsys, exercises.check_lazy_r1, answer)
    assert ok is False and out.startswith("✗ lazy R1") and all(w in out for w in words), out


def test_lazy_r1_not_solved_yet(capsys):
    for answer in (..., stub):
        ok, out = run(capsys, exercises.check_lazy_r1, answer)
        assert ok is False and out.startswith("? lazy R1: not solved yet"), out


# --- the penalty and R1 built from small factories -----------------------------------------------------------------
def penalty(create_graph=True, detach=True, leaf=True, ones=True, target=1.0):
    def gradient_penalty(D, x_cond, x_real, x_fake, eps):
        eps = eps.view(-1, 1, 1, 1)                  # one eps per image (lesson 08's checker passes shape (N,))
        x_hat = eps * x_real + (1 - eps) * (x_fake.detach() if detach else x_fake)
        if leaf:
            x_hat = x_hat.detach().requires_grad_(True)
        scores = D(x_cond, x_hat)
        g, = torch.autograd.grad(scores, x_hat, grad_outputs=torch.ones_like(scores) if ones else None,
                                 create_graph=create_graph)
        return ((g.flatten(1).norm(2, dim=1) - target) ** 2).mean()
    return gradient_penalty


def feedback(capsys, checker, answer, *words):
    """Run checker on answer; return whether it passed, and check its output holds every word."""
    ok, out = run(capsys, checker, answer)
    assert all(w in out for w in words), out
    return ok


def test_gradient_penalty(capsys):
    check = exercises.check_gradient_penalty
    assert feedback(capsys, check, ..., "not solved yet") is False
    ok, out = run(capsys, check, penalty())
    assert ok and out.startswith("✓"), out
    wrong = [(penalty(create_graph=False), ["constant", "create_graph=True"]),
             (penalty(detach=False, leaf=False), ["reaches G", "trains the critic only"]),
             (penalty(leaf=False), ["does not require grad", "did not require grad when D saw it"]),
             (penalty(ones=False), ["scalar outputs", "grad_outputs"]),
             (penalty(target=0.0), ["the right one"])]
    for answer, words in wrong:
        assert not feedback(capsys, check, answer, *words)


def r1_term(every_step=False, scaled=True, create_graph=True):
    def term(D, x_real, step, every, gamma):
        if step % every and not every_step:
            return torch.zeros(())
        x_real = x_real.detach().requires_grad_(True)
        scores = D(x_real)
        g, = torch.autograd.grad(scores, x_real, grad_outputs=torch.ones_like(scores), create_graph=create_graph)
        return gamma / 2 * (every if scaled else 1) * g.flatten(1).pow(2).sum(1).mean()
    return term


def test_lazy_r1(capsys):
    check = exercises.check_lazy_r1
    assert feedback(capsys, check, ..., "not solved yet") is False
    ok, out = run(capsys, check, r1_term())
    assert ok and out.startswith("✓"), out
    wrong = [(r1_term(every_step=True), ["at step 1", "step % every == 0"]),
             (r1_term(scaled=False), ["1/4 of the right one"]),
             (r1_term(create_graph=False), ["constant"])]
    for answer, words in wrong:
        assert not feedback(capsys, check, answer, *words)


def test_a_penalty_off_by_a_whole_factor_is_told_the_factor(capsys):
    """A weight the caller applies (lambda = 10), put inside: the line says 10 times, not only the two numbers."""
    ok, out = run(capsys, exercises.check_gradient_penalty, lambda *a: 10 * gp_reference(*a))
    assert ok is False and "that is 10 times the right one" in out, out
    ok, out = run(capsys, exercises.check_gradient_penalty, lambda *a: gp_reference(*a) / 3)
    assert ok is False and "that is 1/3 of the right one" in out, out


def _penalty_from(norms_of):
    """A gradient penalty whose per-image norm is replaced by norms_of(g), g the image-shaped gradient."""
    def penalty(D, x_cond, x_real, x_fake, eps):
        eps = eps.view(-1, 1, 1, 1)
        x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
        g, = grad(D(x_cond, x_hat).sum(), x_hat, create_graph=True)
        return norms_of(g)
    return penalty


@pytest.mark.parametrize("norms_of, named", [
    (lambda g: ((g.flatten(1).norm(dim=0) - 1) ** 2).mean(), "one norm per pixel across the batch"),
    (lambda g: ((g.norm(2, dim=(2, 3)) - 1) ** 2).mean(), "one norm per channel of each image"),
    (lambda g: (g.mean(0).norm() - 1) ** 2, "one norm of the batch's mean gradient"),
])
def test_norms_taken_over_the_wrong_dimensions_are_named(capsys, norms_of, named):
    ok, out = run(capsys, exercises.check_gradient_penalty, _penalty_from(norms_of))
    assert ok is False and named in out, out


def test_a_penalty_that_overwrites_the_callers_batch_is_told_so(capsys):
    ok, out = run(capsys, exercises.check_gradient_penalty, gp_overwrites_x_real)
    assert ok is False and "changed x_real in place" in out, out


def gp_graph_not_retained(D, x_cond, x_real, x_fake, eps):   # create_graph=True, retain_graph=False: the forward's
    e = eps.view(-1, 1, 1, 1)                                  # graph is freed, so the penalty's backward fails
    x_hat = (e * x_real + (1 - e) * x_fake.detach()).requires_grad_(True)
    out = D(x_cond, x_hat)
    g, = grad(out, x_hat, torch.ones_like(out), create_graph=True, retain_graph=False)
    return ((g.flatten(1).norm(dim=1) - 1) ** 2).mean()


def test_a_penalty_whose_backward_fails_gets_a_verdict(capsys):
    ok, out = run(capsys, exercises.check_gradient_penalty, gp_graph_not_retained)
    assert ok is False and "a backward through your penalty raised RuntimeError" in out, out


def test_what_a_penalty_leaves_behind_on_the_callers_objects_is_named(capsys):
    """Right values, but the caller's D or eps changed: eps clamped in place (values inside the clamp, so only its
    version moves), D left in eval mode, a forward hook left on D."""
    kept = []

    def clamps_eps(D, x_cond, x_real, x_fake, eps):
        eps.clamp_(0.01, 0.99)
        return reference_gradient_penalty(D, x_cond, x_real, x_fake, eps)

    def leaves_d_in_eval(D, x_cond, x_real, x_fake, eps):
        D.eval()
        return reference_gradient_penalty(D, x_cond, x_real, x_fake, eps)

    def leaves_a_hook(D, x_cond, x_real, x_fake, eps):
        D.register_forward_hook(lambda module, args, out: kept.append(out))
        return reference_gradient_penalty(D, x_cond, x_real, x_fake, eps)
    for answer, words in ((clamps_eps, "wrote into the caller's eps in place"),
                          (leaves_d_in_eval, "left D in eval mode, where it was given in training mode"),
                          (leaves_a_hook, "left 1 more hook(s) on D")):
        ok, out = run(capsys, exercises.check_gradient_penalty, answer)
        assert ok is False and words in out and out.count("✗") == 1, (answer.__name__, out)


def test_a_lazy_r1_weight_or_schedule_that_fits_one_gamma_or_one_order_is_caught(capsys):
    def r1_gamma_as_int(D, x_real, step, every, gamma):
        return reference_r1_term(D, x_real, step, every, int(gamma))

    def r1_by_last_computed(D, x_real, step, every, gamma):     # due `every` steps after the last one computed
        last = getattr(r1_by_last_computed, "last", None)
        if last is not None and step - last < every:
            return torch.zeros(())
        r1_by_last_computed.last = step
        return reference_r1_term(D, x_real, step, every, gamma)
    ok, out = run(capsys, exercises.check_lazy_r1, r1_gamma_as_int)
    assert ok is False and "with gamma=2.5 at step 0" in out, out
    ok, out = run(capsys, exercises.check_lazy_r1, r1_by_last_computed)
    assert ok is False and "gives 0.0 at step 4, where step % every is 0" in out, out
