"""Lesson 02's checker: check_seed004_step on right answers written differently (each accepted), on the
wrong answers students write (each answered with a hint that names the mistake), and on the student copy's stub
and `...` (not solved yet)."""
import torch
import torch.nn.functional as F

from gan_lessons import exercises


def run(capsys, answer):
    result = exercises.check_seed004_step(answer)
    return result, capsys.readouterr().out


def stub(model1, model2, optimizer1, optimizer2, data, label):
    # YOUR CODE HERE
    raise NotImplementedError()


# --- right answers ---------------------------------------------------------------------------------------------
def l1_first(model1, model2, optimizer1, optimizer2, data, label):   # model1 steps first; a was taken before it
    a = model1(data)
    optimizer1.zero_grad()
    F.cross_entropy(a, label).backward()
    optimizer1.step()
    optimizer2.zero_grad()
    F.cross_entropy(model2(a.detach()), label).backward()
    optimizer2.step()


def zero_grads_first(model1, model2, optimizer1, optimizer2, data, label):   # both zero_grad() at the top
    optimizer1.zero_grad()
    optimizer2.zero_grad()
    a = model1(data)
    l1 = F.cross_entropy(a, label)
    l2 = F.cross_entropy(model2(a.detach()), label)
    (l1 + l2).backward()                        # one backward: with a detached, l2 reaches model2 only
    optimizer1.step()
    optimizer2.step()


def backward_inputs(model1, model2, optimizer1, optimizer2, data, label):   # backward(inputs=): l2 stops at model2
    a = model1(data)
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(model2(a), label)
    optimizer2.zero_grad()
    l2.backward(inputs=list(model2.parameters()))
    optimizer2.step()
    optimizer1.zero_grad()
    l1.backward()
    optimizer1.step()


# --- wrong answers ---------------------------------------------------------------------------------------------
def as_written(model1, model2, optimizer1, optimizer2, data, label):   # seed 004 unchanged: the freed-graph error
    a = model1(data)
    b = model2(a)
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    optimizer2.zero_grad()
    l2.backward()
    optimizer2.step()
    optimizer1.zero_grad()
    l1.backward()
    optimizer1.step()


def retain_graph(model1, model2, optimizer1, optimizer2, data, label):   # the error message's fix: runs, right
    a = model1(data)                                                     # gradients, but l2 computes one for model1
    b = model2(a)                                                        # that zero_grad() throws away
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    optimizer2.zero_grad()
    l2.backward(retain_graph=True)
    optimizer2.step()
    optimizer1.zero_grad()
    l1.backward()
    optimizer1.step()


def retain_double_count(model1, model2, optimizer1, optimizer2, data, label):   # retain_graph hides a double count:
    optimizer1.zero_grad()                                                      # l2's gradient stays in model1's .grad
    optimizer2.zero_grad()
    a = model1(data)
    b = model2(a)
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    l2.backward(retain_graph=True)
    optimizer2.step()
    l1.backward()
    optimizer1.step()


def detach_everything(model1, model2, optimizer1, optimizer2, data, label):   # detach cuts l1's only path to model1
    a = model1(data).detach()
    b = model2(a)
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    optimizer2.zero_grad()
    l2.backward()
    optimizer2.step()
    optimizer1.zero_grad()
    l1.backward()
    optimizer1.step()


def detach_and_retain(model1, model2, optimizer1, optimizer2, data, label):   # retain_graph everywhere: wasted memory
    a = model1(data)
    b = model2(a.detach())
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    optimizer2.zero_grad()
    l2.backward(retain_graph=True)
    optimizer2.step()
    optimizer1.zero_grad()
    l1.backward(retain_graph=True)
    optimizer1.step()


def second_forward(model1, model2, optimizer1, optimizer2, data, label):   # no error, but model1 runs twice and l2
    optimizer2.zero_grad()                                                 # still computes a gradient for it
    F.cross_entropy(model2(model1(data)), label).backward()
    optimizer2.step()
    optimizer1.zero_grad()
    F.cross_entropy(model1(data), label).backward()
    optimizer1.step()


def zero_grad_once(model1, model2, optimizer1, optimizer2, data, label):   # zero_grad() forgotten for model1
    a = model1(data)
    b = model2(a.detach())
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    optimizer2.zero_grad()
    l2.backward()
    optimizer2.step()
    l1.backward()
    optimizer1.step()


def one_step_only(model1, model2, optimizer1, optimizer2, data, label):   # only l1's half of the loop
    a = model1(data)
    optimizer1.zero_grad()
    F.cross_entropy(a, label).backward()
    optimizer1.step()


def ellipsis_left(model1, model2, optimizer1, optimizer2, data, label):
    return model2(...)


def test_accepts_right_answers_written_differently(capsys):
    for right in (exercises.reference_seed004_step, l1_first, zero_grads_first, backward_inputs):
        ok, out = run(capsys, right)
        assert ok is True and out.startswith("✓") and "4 parameters" in out, (right.__name__, out)


def test_names_each_mistake(capsys):
    ok, out = run(capsys, as_written)
    assert ok is False and "second time" in out and "freed its part of the graph" in out and "still joined" in out
    ok, out = run(capsys, retain_graph)
    assert ok is False and "gradients are right" in out and "throws away" in out and "retain_graph=True kept" in out
    ok, out = run(capsys, retain_double_count)
    assert ok is False and "l1's gradient plus l2's" in out and "counted in another's step" in out
    ok, out = run(capsys, detach_everything)
    assert ok is False and "has no graph at all" in out and "l1 trains model1 through a itself" in out
    ok, out = run(capsys, detach_and_retain)
    assert ok is False and "6 backward() call(s) in 3 calls of your step used retain_graph=True" in out and "no graph here is used twice" in out
    ok, out = run(capsys, second_forward)
    assert ok is False and "throws away" in out and "second forward of model1" in out
    ok, out = run(capsys, zero_grad_once)
    assert ok is False and "the first call is right" in out and "optimizer1.zero_grad()" in out
    ok, out = run(capsys, one_step_only)
    assert ok is False and "optimizer2.step() ran 0 time(s)" in out
    ok, out = run(capsys, ellipsis_left)
    assert ok is False and "a `...` is still in your function" in out


def zero_grad_after_backward(model1, model2, optimizer1, optimizer2, data, label):   # cleared between backward and step
    a = model1(data)
    l1 = F.cross_entropy(a, label)
    l2 = F.cross_entropy(model2(a.detach()), label)
    l1.backward()
    optimizer1.zero_grad()
    optimizer1.step()
    optimizer2.zero_grad()
    l2.backward()
    optimizer2.step()


def test_a_gradient_cleared_between_backward_and_step_is_named(capsys):
    ok, out = run(capsys, zero_grad_after_backward)
    assert ok is False and "optimizer1.step() its parameters' .grad held nothing" in out, out


def test_no_feedback_prints_the_fix(capsys):
    for wrong in (as_written, retain_graph, retain_double_count, detach_everything, detach_and_retain, second_forward,
                  zero_grad_once, zero_grad_after_backward):
        ok, out = run(capsys, wrong)
        assert ok is False and "a.detach()" not in out and "drop retain_graph" not in out, (wrong.__name__, out)


def test_not_solved_yet(capsys):
    for blank in (stub, ...):
        ok, out = run(capsys, blank)
        assert ok is False and out.startswith("?") and "not solved yet" in out and "✗" not in out


def test_the_checker_leaves_no_mode_behind(capsys):
    """The checker's watch on backward() comes off after an error inside the student's step too."""
    before = torch.overrides._get_current_function_mode_stack()
    run(capsys, as_written)
    assert torch.overrides._get_current_function_mode_stack() == before
