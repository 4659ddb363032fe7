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


def test_what_a_step_leaves_on_the_callers_objects_is_named_in_every_step_checker(capsys):
    """A hook registered for every module and never removed, a gradient hook left on a parameter, a net left in eval
    mode, the caller's batch written in place: each is one line, in lessons 02, 04, 05 and 07's checkers."""
    import torch

    from gan_lessons.exercises.lesson04 import reference_d_step
    from gan_lessons.exercises.lesson07 import reference_seed000_step
    handles = []

    def chain_global_hook(*args):
        handles.append(torch.nn.modules.module.register_module_forward_hook(lambda m, a, out: None))
        return exercises.reference_chain_step(*args)

    def chain_data_scaled(model1, model2, model3, o1, o2, o3, data, label):
        data.mul_(1.0)                                # values kept, written all the same
        return exercises.reference_chain_step(model1, model2, model3, o1, o2, o3, data, label)

    def d_step_grad_hook(G, D, opt_D, z, x_real):
        for p in D.parameters():
            p.register_hook(lambda grad: None)
        return reference_d_step(G, D, opt_D, z, x_real)

    def strategy_d_left_in_eval(G, D, *args, **kwargs):
        out = reference_strategy(G, D, *args, **kwargs)
        D.eval()
        return out

    def seed000_z_redrawn(g, d, g_optimizer, d_optimizer, x_real, z):
        z.normal_()
        return reference_seed000_step(g, d, g_optimizer, d_optimizer, x_real, z)
    try:
        for checker, answer, words in (
                (exercises.check_chain_step, chain_global_hook, "more hook(s) on model1"),
                (exercises.check_chain_step, chain_data_scaled, "wrote into the caller's data in place"),
                (exercises.check_d_step, d_step_grad_hook, "more hook(s) on D"),
                (exercises.check_strategy, strategy_d_left_in_eval, "left D in eval mode"),
                (exercises.check_seed000_step, seed000_z_redrawn, "wrote into the caller's z in place")):
            ok, out = run(capsys, checker, answer)
            assert ok is False and words in out, (answer.__name__, out)
            for handle in handles:
                handle.remove()
    finally:
        for handle in handles:
            handle.remove()
