"""Each build-or-fix checker (gan_lessons.exercises) on a right answer, wrong answers and `...`: the returned
bool, and feedback that says what is still wrong."""
import torch
import torch.nn.functional as F

from gan_lessons import exercises


def run(capsys, checker, *args, **kwargs):
    result = checker(*args, **kwargs)
    return result, capsys.readouterr().out


def test_every_checker_says_not_solved_yet_for_ellipsis(capsys):
    for checker in (exercises.check_sgd_step, exercises.check_seed004_step, exercises.check_saved_bytes,
                    exercises.check_d_step, exercises.check_doctor_bug):
        ok, out = run(capsys, checker, ...)
        assert ok is False and out.startswith("?") and "not solved yet" in out, checker.__name__


def test_a_value_that_is_not_a_function(capsys):
    ok, out = run(capsys, exercises.check_sgd_step, 0.1)
    assert ok is False and "not a function" in out


# --- lesson 01 ---------------------------------------------------------------------------------------------
def sgd_right(params, lr):
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
    for p in params:
        p.grad = None


def sgd_seed(params, lr):                      # the seed's loop: raises on a leaf
    for p in params:
        p -= lr * p.grad


def sgd_keeps_grad(params, lr):
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad


def sgd_out_of_place(params, lr):
    for p in params:
        p = p - lr * p.grad


def sgd_with_ellipsis(params, lr):
    with ...:
        pass


def test_sgd_step(capsys):
    ok, out = run(capsys, exercises.check_sgd_step, sgd_right)
    assert ok is True and out.startswith("✓")
    ok, out = run(capsys, exercises.check_sgd_step, sgd_seed)
    assert ok is False and "leaf Variable" in out and "torch.no_grad()" in out
    ok, out = run(capsys, exercises.check_sgd_step, sgd_keeps_grad)
    assert ok is False and "w.grad still holds the gradient" in out and "None" in out
    ok, out = run(capsys, exercises.check_sgd_step, sgd_out_of_place)
    assert ok is False and "did not change" in out and "in place" in out
    ok, out = run(capsys, exercises.check_sgd_step, sgd_with_ellipsis)
    assert ok is False and "a `...` is still in your function" in out
    assert "✗" in out and not out.strip().endswith("✗")


# --- lesson 02 ---------------------------------------------------------------------------------------------
def seed004_retain(model1, model2, optimizer1, optimizer2, data, label):
    a = model1(data)
    b = model2(a)
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    optimizer2.zero_grad()
    l2.backward(retain_graph=True)
    optimizer2.step()
    optimizer1.zero_grad()
    l1.backward()
    optimizer1.step()


def seed004_as_written(model1, model2, optimizer1, optimizer2, data, label):
    a = model1(data)
    b = model2(a)
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    optimizer2.zero_grad()
    l2.backward()
    optimizer2.step()
    optimizer1.zero_grad()
    l1.backward()
    optimizer1.step()


def seed004_no_zero_grad(model1, model2, optimizer1, optimizer2, data, label):
    a = model1(data)
    b = model2(a)
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    l2.backward(retain_graph=True)            # l2's gradient stays in model1's .grad
    optimizer2.step()
    l1.backward()
    optimizer1.step()


def seed004_skips_step(model1, model2, optimizer1, optimizer2, data, label):
    a = model1(data)
    optimizer1.zero_grad()
    F.cross_entropy(a, label).backward()
    optimizer1.step()


def test_seed004_step(capsys):
    ok, out = run(capsys, exercises.check_seed004_step, exercises.reference_seed004_step)
    assert ok is True and "4 parameters" in out
    ok, out = run(capsys, exercises.check_seed004_step, seed004_retain)
    assert ok is True
    ok, out = run(capsys, exercises.check_seed004_step, seed004_as_written)
    assert ok is False and "second time" in out and "detach" in out
    ok, out = run(capsys, exercises.check_seed004_step, seed004_no_zero_grad)
    assert ok is False and "model1.weight" in out and "differs" in out
    ok, out = run(capsys, exercises.check_seed004_step, seed004_skips_step)
    assert ok is False and "optimizer2.step() ran 0 time(s)" in out


# --- lesson 03 ---------------------------------------------------------------------------------------------
def counter(size):
    def count_saved_bytes(make_graph):
        sizes = []

        def pack(t):
            sizes.append(size(t))
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            make_graph()
        return sum(sizes)
    return count_saved_bytes


def counter_outside(make_graph):
    make_graph()
    return 0


def counter_bad_unpack(make_graph):
    sizes = []

    def pack(t):
        sizes.append(t.numel() * t.element_size())
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: None):
        make_graph()
    return sum(sizes)


def test_saved_bytes(capsys):
    ok, out = run(capsys, exercises.check_saved_bytes, counter(lambda t: t.numel() * t.element_size()))
    assert ok is True and "all three graphs" in out
    ok, out = run(capsys, exercises.check_saved_bytes, counter(lambda t: t.numel()))
    assert ok is False and "elements, not bytes" in out and "a.exp()" in out and "too few" in out
    ok, out = run(capsys, exercises.check_saved_bytes, counter_outside)
    assert ok is False and "never ran" in out
    ok, out = run(capsys, exercises.check_saved_bytes, counter(lambda t: ...))
    assert ok is False and "a `...` is still in your function" in out
    ok, out = run(capsys, exercises.check_saved_bytes, counter_bad_unpack)
    assert ok is False and "unpack must return" in out


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


def test_d_step(capsys):
    ok, out = run(capsys, exercises.check_d_step, exercises.reference_d_step)
    assert ok is True and out.startswith("✓")
    ok, out = run(capsys, exercises.check_d_step, d_step_no_grad)
    assert ok is True
    ok, out = run(capsys, exercises.check_d_step, d_step_undetached)
    assert ok is False and "loss_D reached G" in out and "x_fake.detach()" in out
    ok, out = run(capsys, exercises.check_d_step, d_step_swapped_labels)
    assert ok is False and "D.net.0.weight" in out and "differs" in out


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
