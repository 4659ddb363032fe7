"""What every build-or-fix checker (gan_lessons.exercises) shares: `...` and a value that is not a function are
answered, not raised."""
from gan_lessons import exercises


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
