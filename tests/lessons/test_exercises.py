"""Lesson 05's build exercise, around the checker: a step that raises is reported, not raised; costs.measure (which
the checker uses to count passes) takes a function as well as a name. The checker's table of right and wrong answers
is in tests/lessons/test_checkers_lesson05.py."""
from gan_lessons import costs, exercises
from gan_lessons.exercises.lesson05 import reference_strategy


def test_a_step_that_raises_is_reported_not_raised(capsys):
    def broken(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
        raise RuntimeError("Trying to backward through the graph a second time")

    assert exercises.check_strategy(broken) is False
    out = capsys.readouterr().out.strip()
    assert out.startswith("✗ broken: broken raised RuntimeError: Trying to backward through the graph a second time")
    assert "Hint:" in out and len(out.splitlines()) == 1


def test_a_value_instead_of_a_function_is_named(capsys):
    assert exercises.check_strategy(3) is False
    assert "not a function but a value of type int" in capsys.readouterr().out


def test_measure_takes_a_function_as_well_as_a_name():
    G, D, x_real, noise = costs.fresh_gan(batch=8)
    c = costs.measure(reference_strategy, G, D, x_real, noise, steps=1, warmup=0)
    assert c.strategy == "reference_strategy" and (c.G_forward, c.D_grad_passes, c.G_grad_passes) == (2, 2, 1)
    assert 0 < c.saved_mib < c.alloc_mib      # the saved tensors are a part of what the allocator holds
