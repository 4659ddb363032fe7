"""Lesson 02's checker: check_chain_step on right answers written differently (each accepted), on the wrong answers
students write (each answered with a line that names the mistake without printing the fix), and on the student
copy's stub and `...` (not solved yet)."""
import torch
import torch.nn.functional as F

from gan_lessons import exercises

ce = F.cross_entropy


def run(capsys, answer):
    result = exercises.check_chain_step(answer)
    return result, capsys.readouterr().out


def stub(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    # YOUR CODE HERE
    raise NotImplementedError()


# --- right answers ---------------------------------------------------------------------------------------------
def three_backwards(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    """l3 first on a detached b; then l2 keeps model1's graph for l1."""
    a = model1(data)
    b = model2(a)
    c = model3(b.detach())
    optimizer3.zero_grad()
    ce(c, label).backward()
    optimizer3.step()
    optimizer1.zero_grad()
    optimizer2.zero_grad()
    ce(b, label).backward(retain_graph=True)
    ce(a, label).backward()
    optimizer2.step()
    optimizer1.step()


def inputs_instead_of_detach(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    """l3's backward limited to model3's parameters with inputs=: it never runs model2's part of the graph."""
    a = model1(data)
    b = model2(a)
    c = model3(b)
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.zero_grad()
    ce(c, label).backward(inputs=list(model3.parameters()))
    (ce(a, label) + ce(b, label)).backward()
    for optimizer in (optimizer3, optimizer2, optimizer1):
        optimizer.step()


def autograd_grad(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    """Gradients from torch.autograd.grad, set by hand (no zero_grad needed: .grad is replaced)."""
    a = model1(data)
    b = model2(a)
    c = model3(b.detach())
    groups = [list(m.parameters()) for m in (model1, model2, model3)]
    wrt = [*groups[0], *groups[1]]
    for p, g in zip(wrt, torch.autograd.grad(ce(a, label) + ce(b, label), wrt)):
        p.grad = g
    for p, g in zip(groups[2], torch.autograd.grad(ce(c, label), groups[2])):
        p.grad = g
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.step()


def set_to_none_false(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    """zero_grad(set_to_none=False) at the top, l1 first keeping the graph for l2."""
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.zero_grad(set_to_none=False)
    a = model1(data)
    b = model2(a)
    l3 = ce(model3(b.detach()), label)
    ce(a, label).backward(retain_graph=True)
    ce(b, label).backward()
    l3.backward()
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.step()


# --- wrong answers ---------------------------------------------------------------------------------------------
def no_detach_one_backward(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    a = model1(data)
    b = model2(a)
    c = model3(b)
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.zero_grad()
    (ce(a, label) + ce(b, label) + ce(c, label)).backward()
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.step()


def detach_both(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):   # section 2's fix, twice
    a = model1(data)
    b = model2(a.detach())
    c = model3(b.detach())
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.zero_grad()
    (ce(a, label) + ce(b, label) + ce(c, label)).backward()
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.step()


def as_seed004(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):   # one backward each
    a = model1(data)
    b = model2(a)
    c = model3(b)
    for optimizer, loss in ((optimizer3, ce(c, label)), (optimizer2, ce(b, label)), (optimizer1, ce(a, label))):
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def thrown_away(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    """Right gradients, but l3's backward runs through model2 and model1 and zero_grad() throws it away."""
    a = model1(data)
    b = model2(a)
    c = model3(b)
    optimizer3.zero_grad()
    ce(c, label).backward(retain_graph=True)
    optimizer3.step()
    optimizer1.zero_grad()
    optimizer2.zero_grad()
    (ce(a, label) + ce(b, label)).backward()
    optimizer1.step()
    optimizer2.step()


def kept_for_nothing(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    a = model1(data)
    b = model2(a)
    c = model3(b.detach())
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.zero_grad()
    (ce(a, label) + ce(b, label) + ce(c, label)).backward(retain_graph=True)
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.step()


def second_forward(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    a = model1(data)
    b = model2(a)
    c = model3(model2(model1(data)).detach())
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.zero_grad()
    (ce(a, label) + ce(b, label) + ce(c, label)).backward()
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.step()


def zero_grad_forgotten(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    a = model1(data)
    b = model2(a)
    c = model3(b.detach())
    optimizer3.zero_grad()
    (ce(a, label) + ce(b, label) + ce(c, label)).backward()
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.step()


def zero_grad_after_backward(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    a = model1(data)
    b = model2(a)
    c = model3(b.detach())
    (ce(a, label) + ce(b, label) + ce(c, label)).backward()
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.zero_grad()
        optimizer.step()


def probe_detached_from_nothing(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    a = model1(data).detach()
    model3(model2(a))
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.zero_grad()
    ce(a, label).backward()


def model3_skipped(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    a = model1(data)
    b = model2(a)
    optimizer1.zero_grad()
    optimizer2.zero_grad()
    (ce(a, label) + ce(b, label)).backward()
    optimizer1.step()
    optimizer2.step()


def data_made_to_require_grad(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    data.requires_grad_(True)       # the caller's batch: its .grad is computed and used by nothing
    exercises.reference_chain_step(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label)


def zero_grad_at_the_end_only(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    a = model1(data)
    b = model2(a)
    c = model3(b.detach())
    (ce(a, label) + ce(b, label) + ce(c, label)).backward()    # the first call adds to what .grad held on entry
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.step()
        optimizer.zero_grad()


def ellipsis_left(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    return model2(...)


RIGHT = (exercises.reference_chain_step, three_backwards, inputs_instead_of_detach, autograd_grad, set_to_none_false)
WRONG = (no_detach_one_backward, detach_both, as_seed004, thrown_away, kept_for_nothing, second_forward,
         zero_grad_forgotten, zero_grad_after_backward, probe_detached_from_nothing, model3_skipped,
         data_made_to_require_grad, zero_grad_at_the_end_only)


def test_accepts_right_answers_written_differently(capsys):
    for right in RIGHT:
        ok, out = run(capsys, right)
        assert ok is True and out.startswith("✓") and "l3 stops at model3" in out, (right.__name__, out)


def test_names_each_mistake(capsys):
    ok, out = run(capsys, no_detach_one_backward)
    assert ok is False and "optimizer2 stepped on the gradient of l2 + l3, where it should step on that of l2" in out
    assert "l3 must train model3 alone" in out and "optimizer1 stepped on the gradient of l1 + l2 + l3" in out
    ok, out = run(capsys, detach_both)
    assert ok is False and "optimizer1 stepped on the gradient of l1, where it should step on that of l1 + l2" in out
    assert "l2 must train model1 too" in out and "optimizer2" not in out
    ok, out = run(capsys, as_seed004)
    assert ok is False and "second time" in out and "two of your losses share that part" in out
    ok, out = run(capsys, thrown_away)
    assert ok is False and "gradients are right" in out and "from model3 into model2" in out and "threw away" in out
    ok, out = run(capsys, kept_for_nothing)
    assert ok is False and "3 backward() call(s) in 3 calls" in out and "no later backward went through" in out
    ok, out = run(capsys, second_forward)
    assert ok is False and "model1, model2 ran more than one forward per call" in out
    ok, out = run(capsys, zero_grad_forgotten)
    assert ok is False and "optimizer1 stepped on the gradient its .grad held before the call plus" in out, out
    ok, out = run(capsys, zero_grad_after_backward)
    assert ok is False and "optimizer1.step() its parameters' .grad held nothing" in out
    ok, out = run(capsys, probe_detached_from_nothing)
    assert ok is False and "has no graph at all" in out
    ok, out = run(capsys, model3_skipped)
    assert ok is False and "optimizer3.step() ran 0 time(s)" in out
    ok, out = run(capsys, ellipsis_left)
    assert ok is False and "a `...` is still in your function" in out
    ok, out = run(capsys, data_made_to_require_grad)
    assert ok is False and "made the caller's data require grad" in out, out
    ok, out = run(capsys, zero_grad_at_the_end_only)
    assert ok is False and "step 1: optimizer1 stepped on the gradient its .grad held before the call" in out, out


def zero_grad_between_the_losses(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    """Seed 004's order: optimizer1's zero_grad() after l2's backward wipes l2's gradient out of model1."""
    a = model1(data)
    b = model2(a)
    c = model3(b.detach())
    optimizer2.zero_grad()
    optimizer3.zero_grad()
    F.cross_entropy(b, label).backward(retain_graph=True)
    optimizer2.step()
    optimizer1.zero_grad()
    F.cross_entropy(a, label).backward()
    optimizer1.step()
    F.cross_entropy(c, label).backward()
    optimizer3.step()


def test_a_gradient_wiped_by_zero_grad_is_not_called_a_cut_path(capsys):
    ok, out = run(capsys, zero_grad_between_the_losses)
    assert ok is False and "no part of l2's gradient was in model1's .grad at that step" in out, out
    assert "cut" not in out, out


def test_no_feedback_prints_the_fix(capsys):
    for wrong in WRONG:
        ok, out = run(capsys, wrong)
        assert ok is False and ".detach()" not in out and "drop retain_graph" not in out, (wrong.__name__, out)
        assert "inputs=" not in out, (wrong.__name__, out)


def test_not_solved_yet(capsys):
    for blank in (stub, ...):
        ok, out = run(capsys, blank)
        assert ok is False and out.startswith("?") and "not solved yet" in out and "✗" not in out


def test_the_checker_leaves_no_mode_or_hook_behind(capsys):
    """The checker's watch on backward() comes off after an error inside the student's step too."""
    before = torch.overrides._get_current_function_mode_stack()
    run(capsys, as_seed004)
    assert torch.overrides._get_current_function_mode_stack() == before
