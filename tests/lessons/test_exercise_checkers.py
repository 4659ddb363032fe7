"""What every build-or-fix checker (gan_lessons.exercises) shares: `...` and a value that is not a function are
answered, not raised."""
from gan_lessons import exercises
from gan_lessons.exercises.lesson05 import reference_strategy


def run(capsys, checker, *args, **kwargs):
    result = checker(*args, **kwargs)
    return result, capsys.readouterr().out


def test_every_checker_says_not_solved_yet_for_ellipsis(capsys):
    for checker in (exercises.check_sgd_step, exercises.check_init, exercises.check_chain_step, exercises.check_stale_saved,
                    exercises.check_d_step, exercises.check_sample, exercises.check_doctor_bug,
                    exercises.check_seed000_step):
        ok, out = run(capsys, checker, ...)
        assert ok is False and out.startswith("?") and "not solved yet" in out, checker.__name__


def test_a_value_that_is_not_a_function(capsys):
    ok, out = run(capsys, exercises.check_sgd_step, 0.1)
    assert ok is False and "not a function" in out


# Each lesson's checkers, on right and named wrong answers: tests/test_checkers_lessonNN.py.


def test_an_answer_that_calls_sys_exit_gets_one_line(capsys):
    import sys

    def quits(*args, **kwargs):
        sys.exit(1)
    for checker in (exercises.check_sgd_step, exercises.check_chain_step, exercises.check_strategy):
        ok, out = run(capsys, checker, quits)
        assert ok is False and "called sys.exit(1)" in out and out.count("\n") == 1, (checker.__name__, out)


def test_autograd_left_off_by_one_call_is_named_when_a_later_call_raises_and_the_reference_still_records(capsys):
    """A right answer that ends by turning autograd off: the next call raises (no graph). The line says autograd was
    left off, and no hint blames a detach the answer does not have; the reference runs with autograd on."""
    import torch

    def chain_off(*args):
        exercises.reference_chain_step(*args)
        torch.set_grad_enabled(False)
    ok, out = run(capsys, exercises.check_chain_step, chain_off)
    assert ok is False and "autograd was left off after" in out and "detach" not in out, out
    assert torch.is_grad_enabled()

    def strategy_off(*args, **kwargs):
        out = reference_strategy(*args, **kwargs)
        torch.set_grad_enabled(False)
        return out
    ok, out = run(capsys, exercises.check_strategy, strategy_off)
    assert ok is False and "autograd was left off after" in out and "0 time(s)" not in out, out
    assert torch.is_grad_enabled()


def test_saved_tensor_hooks_left_on_by_an_answer_are_named_and_taken_off(capsys):
    """An answer that enters saved-tensor hooks and never exits them (a probe's `__enter__()` without its exit)
    computes the right values, but every graph built after it packs through its hooks: each checker says so, and
    the notebook's next cells pack as before."""
    import torch

    from gan_lessons.exercises.lesson03 import reference_stale_saved

    def entered(pack=lambda t: t, unpack=lambda t: t):
        torch.autograd.graph.saved_tensors_hooks(pack, unpack).__enter__()

    def probe_left_on(make_loss):
        entered()
        return reference_stale_saved(make_loss)

    def chain_left_on(*args):
        entered()
        return exercises.reference_chain_step(*args)

    def strategy_left_on(*args, **kwargs):
        entered()
        return reference_strategy(*args, **kwargs)
    for checker, answer in ((exercises.check_stale_saved, probe_left_on), (exercises.check_chain_step, chain_left_on),
                            (exercises.check_strategy, strategy_left_on)):
        ok, out = run(capsys, checker, answer)
        assert ok is False and "saved-tensor hooks" in out and out.count("\n") == 1, (checker.__name__, out)
        assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):      # hooks the notebook has on
        ok, out = run(capsys, exercises.check_stale_saved, reference_stale_saved)    # stay on, and are not blamed
        assert ok is True, out
        assert torch._C._autograd._top_saved_tensors_default_hooks(False) is not None
