"""Each build-or-fix checker (gan_lessons.exercises) on a right answer, wrong answers and `...`: the returned
bool, and feedback that says what is still wrong."""
import torch
import torch.nn.functional as F

from gan_lessons import exercises


def run(capsys, checker, *args, **kwargs):
    result = checker(*args, **kwargs)
    return result, capsys.readouterr().out


def test_every_checker_says_not_solved_yet_for_ellipsis(capsys):
    for checker in (exercises.check_sgd_step, exercises.check_init, exercises.check_seed004_step, exercises.check_stale_saved,
                    exercises.check_d_step, exercises.check_sample, exercises.check_doctor_bug,
                    exercises.check_seed000_step):
        ok, out = run(capsys, checker, ...)
        assert ok is False and out.startswith("?") and "not solved yet" in out, checker.__name__


def test_a_value_that_is_not_a_function(capsys):
    ok, out = run(capsys, exercises.check_sgd_step, 0.1)
    assert ok is False and "not a function" in out


# --- lesson 01: check_sgd_step and check_init are tested in tests/test_checkers_lesson01.py -------------
# --- lesson 02: check_seed004_step is tested in tests/test_checkers_lesson02.py -------------------------


# --- lesson 03: check_stale_saved is tested in tests/test_checkers_lesson03.py ----------------------------


# --- lesson 04 ---------------------------------------------------------------------------------------------
def d_step_undetached(G, D, opt_D, z, x_real):
    x_fake = G(z)
    loss_D = (F.binary_cross_entropy_with_logits(D(x_real), torch.ones(len(x_real)))
              + F.binary_cross_entropy_with_logits(D(x_fake), torch.zeros(len(z))))
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def d_step_no_grad(G, D, opt_D, z, x_real):
    with torch.no_grad():
        x_fake = G(z)
    loss_D = (F.binary_cross_entropy_with_logits(D(x_real), torch.ones(len(x_real)))
              + F.binary_cross_entropy_with_logits(D(x_fake), torch.zeros(len(z))))
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def d_step_swapped_labels(G, D, opt_D, z, x_real):
    x_fake = G(z).detach()
    loss_D = (F.binary_cross_entropy_with_logits(D(x_real), torch.zeros(len(x_real)))
              + F.binary_cross_entropy_with_logits(D(x_fake), torch.ones(len(z))))
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def d_step_output_detached(G, D, opt_D, z, x_real):   # detaches D's output: the fake term trains nothing
    loss_D = (F.binary_cross_entropy_with_logits(D(x_real), torch.ones(len(x_real)))
              + F.binary_cross_entropy_with_logits(D(G(z)).detach(), torch.zeros(len(z))))
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def d_step_averaged(G, D, opt_D, z, x_real):           # right, written differently: lesson 05's mean of two terms
    x_fake = G(z).detach()
    loss_D = (F.binary_cross_entropy_with_logits(D(x_real), torch.ones(len(x_real)))
              + F.binary_cross_entropy_with_logits(D(x_fake), torch.zeros(len(z)))) / 2
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def test_d_step(capsys):
    ok, out = run(capsys, exercises.check_d_step, exercises.reference_d_step)
    assert ok is True and out.startswith("✓")
    ok, out = run(capsys, exercises.check_d_step, d_step_no_grad)
    assert ok is True
    ok, out = run(capsys, exercises.check_d_step, d_step_undetached)
    assert ok is False and "loss_D reached G" in out and "x_fake.detach()" in out
    ok, out = run(capsys, exercises.check_d_step, d_step_swapped_labels)
    assert ok is False and "labels are swapped" in out
    ok, out = run(capsys, exercises.check_d_step, d_step_output_detached)
    assert ok is False and "the fake term no longer reaches D" in out and "D(x_fake.detach())" in out
    ok, out = run(capsys, exercises.check_d_step, d_step_averaged)
    assert ok is True and out.startswith("✓"), out


# --- lesson 04: sampling ------------------------------------------------------------------------------------
def sample_right(G, z):
    was_training = G.training
    G.eval()
    with torch.no_grad():
        images = G(z)
    G.train(was_training)
    return images


def sample_no_grad_only(G, z):                 # the graph is off, BatchNorm still in training mode
    with torch.no_grad():
        return G(z)


def sample_detach(G, z):                       # eval mode, but the forward builds a graph first
    G.eval()
    images = G(z).detach()
    G.train()
    return images


def sample_left_in_eval(G, z):
    G.eval()
    with torch.no_grad():
        return G(z)


def test_sample(capsys):
    ok, out = run(capsys, exercises.check_sample, sample_right)
    assert ok is True and out.startswith("✓"), out
    ok, out = run(capsys, exercises.check_sample, sample_no_grad_only)
    assert ok is False and "running statistics changed" in out and "eval()" in out and "saved" not in out
    ok, out = run(capsys, exercises.check_sample, sample_detach)
    assert ok is False and "saved" in out and "torch.no_grad()" in out and "running statistics" not in out
    ok, out = run(capsys, exercises.check_sample, sample_left_in_eval)
    assert ok is False and "left in eval mode" in out and out.count("✗") == 1
    ok, out = run(capsys, exercises.check_sample, lambda G, z: G(z))
    assert ok is False and "still require grad" in out

# --- lesson 06: a checkpoint to resume from: tests/test_checkers_lesson06.py ------------------------------

# --- lesson 07 ---------------------------------------------------------------------------------------------
def freed_loop():
    G, D = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
    x_fake = G(torch.randn(8, 4))
    F.softplus(D(x_fake)).mean().backward()
    F.softplus(-D(x_fake)).mean().backward()


def clean_loop():
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
    ok, out = run(capsys, exercises.check_doctor_bug, clean_loop, quiet=True)
    assert ok is False and "ran without an error" in out and "Hint" in out
    ok, out = run(capsys, exercises.check_doctor_bug, other_error_loop, quiet=True)
    assert ok is False and "ValueError" in out and "only the lessons' autograd errors" in out


# --- lesson 07: seed 000's step, fixed ---------------------------------------------------------------------
bce = F.binary_cross_entropy_with_logits


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


def seed000_averaged(g, d, g_optimizer, d_optimizer, x_real, z):        # right: D's loss the mean of its terms
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
    for right in (exercises.reference_seed000_step, seed000_averaged):
        ok, out = run(capsys, exercises.check_seed000_step, right)
        assert ok is True and out.startswith("✓"), out
    ok, out = run(capsys, exercises.check_seed000_step, seed000_no_grad_fake)
    assert ok is False and "g ran 2 forwards in one call" in out and "gz.detach()" in out
    ok, out = run(capsys, exercises.check_seed000_step, seed000_as_written)
    assert ok is False and "the doctor says: d.net.7.weight.T changed in place" in out
    ok, out = run(capsys, exercises.check_seed000_step, seed000_sigmoid_kept)
    assert ok is False and out.count("the doctor still warns: a sigmoid is fed into") == 1
    assert "gradient at d_optimizer.step() (call 1) differs" in out
    ok, out = run(capsys, exercises.check_seed000_step, seed000_stale_D)
    assert ok is False and "the doctor says" in out and "changed in place" in out


# --- lesson 08 ---------------------------------------------------------------------------------------------
def penalty(create_graph=True, detach=True, leaf=True, ones=True, target=1.0):
    def gradient_penalty(D, x_real, x_fake, eps):
        eps = eps.view(-1, 1, 1, 1)                  # one eps per image (lesson 08's checker passes shape (N,))
        x_hat = eps * x_real + (1 - eps) * (x_fake.detach() if detach else x_fake)
        if leaf:
            x_hat = x_hat.detach().requires_grad_(True)
        scores = D(x_hat)
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
             (penalty(detach=False, leaf=False), ["reaches G", "detached"]),
             (penalty(leaf=False), ["does not require grad", "requires_grad_(True)"]),
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


# --- lesson 09: a G step with D frozen, that puts everything back -------------------------------------------
def g_bce(logits):
    return F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))


def g_step_plain(G, D, opt_G, z):                    # D not frozen: loss_G's backward fills D's .grad
    opt_G.zero_grad()
    g_bce(D(G(z))).backward()
    opt_G.step()


def g_step_detached(G, D, opt_G, z):                 # frozen D and a detached fake: nothing requires grad
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        g_bce(D(G(z).detach())).backward()
        opt_G.step()
    finally:
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)


def g_step_detached_unfrozen(G, D, opt_G, z):        # G gets no gradient at all
    opt_G.zero_grad()
    g_bce(D(G(z).detach())).backward()
    opt_G.step()


def g_step_inputs(G, D, opt_G, z):                   # D's .grad untouched, but D never frozen
    opt_G.zero_grad()
    g_bce(D(G(z))).backward(inputs=list(G.parameters()))
    opt_G.step()


def g_step_all_true(G, D, opt_G, z):                 # unfreezes D's first layer, frozen on purpose
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        g_bce(D(G(z))).backward()
        opt_G.step()
    finally:
        D.requires_grad_(True)


def g_step_no_finally(G, D, opt_G, z):               # an error leaves D frozen
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    opt_G.zero_grad()
    g_bce(D(G(z))).backward()
    opt_G.step()
    for p, flag in zip(D.parameters(), flags):
        p.requires_grad_(flag)


def g_step_swallows(G, D, opt_G, z):                 # flags restored, but the error never reaches the caller
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        g_bce(D(G(z))).backward()
        opt_G.step()
    except Exception:
        pass
    finally:
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)


def g_step_ellipsis(G, D, opt_G, z):
    flags = ...
    for p, flag in zip(D.parameters(), flags):
        p.requires_grad_(flag)


def test_frozen_g_step(capsys):
    ok, out = run(capsys, exercises.check_frozen_g_step, exercises.reference_frozen_g_step)
    assert ok is True and out.startswith("✓"), out
    ok, out = run(capsys, exercises.check_frozen_g_step, g_step_plain)
    assert ok is False and "D's .grad changed" in out and "freeze D before its forward" in out
    ok, out = run(capsys, exercises.check_frozen_g_step, g_step_detached)
    assert ok is False and "does not require grad" in out and "not G(z).detach()" in out
    ok, out = run(capsys, exercises.check_frozen_g_step, g_step_detached_unfrozen)
    assert ok is False and ".grad is None at opt_G.step()" in out
    ok, out = run(capsys, exercises.check_frozen_g_step, g_step_inputs)
    assert ok is False and "D was not frozen when its forward ran" in out
    ok, out = run(capsys, exercises.check_frozen_g_step, g_step_all_true)
    assert ok is False and "after the step, D.net.0.weight requires grad, but it was frozen before" in out
    ok, out = run(capsys, exercises.check_frozen_g_step, g_step_no_finally)
    assert ok is False and "after an error inside the step" in out and "finally" in out
    ok, out = run(capsys, exercises.check_frozen_g_step, g_step_swallows)
    assert ok is False and "did not come out of g_step" in out
    ok, out = run(capsys, exercises.check_frozen_g_step, g_step_ellipsis)
    assert ok is False and "a `...` is still in your function" in out
    ok, out = run(capsys, exercises.check_frozen_g_step, ...)
    assert ok is False and out.startswith("?") and "not solved yet" in out
