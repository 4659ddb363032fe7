"""Lesson 01's checkers: check_sgd_step and check_init on right answers written differently (each
accepted), on the wrong answers students write (each answered with a hint that names the mistake), and on the
student copy's stub and `...` (not solved yet)."""
import math

import pytest
import torch
from torch import nn

from gan_lessons import exercises
from gan_lessons.exercises.lesson01 import reference_sgd_step


def run(capsys, checker, answer):
    result = checker(answer)
    return result, capsys.readouterr().out


def stub(*args):                                  # what the student copy holds before the student writes anything
    # YOUR CODE HERE
    raise NotImplementedError()


# --- check_sgd_step --------------------------------------------------------------------------------------------
def sgd_reference(params, lr):                    # the lesson's answer
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue
            p -= lr * p.grad
            p.grad = None


def sgd_zeroed(params, lr):                       # sub_, then .grad zeroed in place, where the statement asks for None
    with torch.no_grad():
        for p in (p for p in params if p.grad is not None):
            p.sub_(lr * p.grad)
            p.grad.zero_()


@torch.no_grad()
def sgd_decorated(params, lr):                    # right: no_grad as a decorator, add_ with alpha, two loops
    live = [p for p in params if p.grad is not None]
    for p in live:
        p.add_(p.grad, alpha=-lr)
    for p in live:
        p.grad = None


def sgd_seed(params, lr):                         # seed 001's way: in place on a leaf while autograd records
    for p in params:
        if p.grad is not None:
            p -= lr * p.grad
            p.grad = None


def sgd_no_skip(params, lr):                      # u's .grad is None: lr * None
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None


def sgd_new_tensors(params, lr):                  # the new values made as new tensors and returned
    with torch.no_grad():
        new = [p - lr * p.grad for p in params if p.grad is not None]
        for p in params:
            p.grad = None
    return new


def test_sgd_new_values_returned_as_new_tensors_are_named(capsys):
    ok, out = run(capsys, exercises.check_sgd_step, sgd_new_tensors)
    assert ok is False and out.startswith("✗ sgd_step: your step returned the new values of w, b as new tensors"), out
    assert "cleared before" not in out and out.count("✗") == 1, out


def sgd_cleared_first(params, lr):                # .grad cleared before the update reads it
    with torch.no_grad():
        for p in params:
            p.grad = None
        for p in params:
            if p.grad is not None:
                p -= lr * p.grad


def sgd_keeps_grad(params, lr):                   # no clearing: step 2 adds to step 1's gradient
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p -= lr * p.grad


def sgd_out_of_place(params, lr):                 # rebinds the loop variable; the parameters never change
    for p in params:
        if p.grad is not None:
            p = p - lr * p.grad


def sgd_through_data(params, lr):                 # SGD's values, behind the version counter's back
    for p in params:
        if p.grad is not None:
            p.data.sub_(lr * p.grad)
            p.grad = None


def sgd_detach_alias(params, lr):                 # right: detach() shares p's memory and, unlike .data, its version
    for p in params:                              # counter, so the in-place update is no secret to autograd
        if p.grad is not None:
            p.detach().sub_(lr * p.grad)
            p.grad = None


def sgd_ellipsis(params, lr):
    with ...:
        pass


def test_sgd_step_accepts_right_answers_written_differently(capsys):
    for right in (sgd_reference, sgd_decorated, sgd_detach_alias):
        ok, out = run(capsys, exercises.check_sgd_step, right)
        assert ok is True and out.startswith("✓") and "u (whose .grad is None) is left alone" in out, right.__name__


def test_sgd_step_names_each_mistake(capsys):
    ok, out = run(capsys, exercises.check_sgd_step, sgd_seed)
    assert ok is False and "leaf Variable" in out and "changed in place while autograd was recording" in out
    ok, out = run(capsys, exercises.check_sgd_step, sgd_no_skip)
    assert ok is False and "u's .grad is None" in out and "used it anyway" in out and "skip" not in out
    ok, out = run(capsys, exercises.check_sgd_step, sgd_cleared_first)
    assert ok is False and "w did not change, and its .grad is gone: it was cleared before the update used it" in out
    ok, out = run(capsys, exercises.check_sgd_step, sgd_keeps_grad)
    assert ok is False and "w.grad still holds the gradient" in out and "the next backward adds to it" in out
    ok, out = run(capsys, exercises.check_sgd_step, sgd_out_of_place)
    assert ok is False and "w did not change" in out and "nothing was written into the parameter" in out
    assert "in place" not in out, out
    ok, out = run(capsys, exercises.check_sgd_step, sgd_through_data)
    assert ok is False and "`.data`" in out and "version counter" in out and "torch.no_grad()" not in out
    ok, out = run(capsys, exercises.check_sgd_step, sgd_ellipsis)
    assert ok is False and "a `...` is still in your function" in out


def test_an_update_that_changes_between_calls_is_told_so_not_blamed_on_a_kept_grad(capsys):
    velocity = {}

    def sgd_momentum(params, lr):                   # a velocity kept between calls: step 1 is SGD's, step 2 is not
        with torch.no_grad():
            for p in params:
                if p.grad is None:
                    continue
                v = velocity[p] = 0.9 * velocity.get(p, 0) + p.grad
                p -= lr * v
                p.grad = None
    ok, out = run(capsys, exercises.check_sgd_step, sgd_momentum)
    assert ok is False and "the update at step 1 matched p - lr * p.grad and the one at step 2 did not" in out, out
    assert "still held step 1's gradient" not in out


def test_an_lr_fixed_in_the_step_and_a_list_emptied_by_it_are_named(capsys):
    def sgd_fixed_lr(params, lr):                   # the lr of the first call, whatever the caller passes
        reference_sgd_step(params, 0.1)

    def sgd_pops(params, lr):                       # empties the caller's list: the next step updates nothing
        with torch.no_grad():
            while params:
                p = params.pop()
                if p.grad is not None:
                    p -= lr * p.grad
                    p.grad = None
    ok, out = run(capsys, exercises.check_sgd_step, sgd_fixed_lr)
    assert ok is False and "moved it by 0.1 times its gradient, the lr of the first call, where this call passed " \
        "lr=0.05" in out, out
    ok, out = run(capsys, exercises.check_sgd_step, sgd_pops)
    assert ok is False and "the list of parameters passed in holds 0 entries after your step, where it held 3" in out


@pytest.mark.parametrize("update, words", [
    ("p += lr * p.grad", "it moved by +lr * p.grad, up the gradient, so the loss grows"),
    ("p -= 2 * lr * p.grad", "it moved down the gradient, 2.0 times as far as lr * p.grad"),
    ("p += 0.5 * lr * p.grad", "it moved up the gradient, 0.5 times as far as lr * p.grad"),
    ("p -= lr * p.grad.sign()", "its change is not a multiple of lr * p.grad"),
])
def test_a_wrong_update_is_told_by_how_the_parameter_moved_not_by_the_formula(capsys, update, words):
    def sgd(params, lr):
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    exec(update)
                    p.grad = None
    ok, out = run(capsys, exercises.check_sgd_step, sgd)
    assert ok is False and words in out and "p - lr * p.grad" not in out, out


def test_sgd_step_not_solved_yet(capsys):
    for blank in (stub, ...):
        ok, out = run(capsys, exercises.check_sgd_step, blank)
        assert ok is False and out.startswith("?") and "not solved yet" in out and "✗" not in out


# --- check_init ------------------------------------------------------------------------------------------------
DCGAN = (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)
NORMS = (nn.BatchNorm1d, nn.BatchNorm2d)


def init_reference(m):                            # the lesson's answer
    if isinstance(m, DCGAN + NORMS):
        mean = 1.0 if isinstance(m, NORMS) else 0.0
        with torch.no_grad():
            m.weight.normal_(mean, 0.02)
            if m.bias is not None:
                m.bias.zero_()


def init_nn_init(m):                              # right, written differently: torch.nn.init, which runs under no_grad
    if isinstance(m, DCGAN + NORMS):
        nn.init.normal_(m.weight, 1.0 if isinstance(m, NORMS) else 0.0, 0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def init_by_class_name(m):                        # right: the DCGAN tutorial's class-name test, without its .data
    classname = type(m).__name__
    if "Conv" in classname or "Linear" in classname:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif "BatchNorm" in classname:
        nn.init.normal_(m.weight, 1.0, 0.02)
    if getattr(m, "bias", None) is not None:
        nn.init.constant_(m.bias, 0.0)


def init_recording(m):                            # in place on a parameter while autograd records: the leaf error
    if isinstance(m, DCGAN + NORMS):
        m.weight.normal_(1.0 if isinstance(m, NORMS) else 0.0, 0.02)
        if m.bias is not None:
            m.bias.zero_()


def init_through_data(m):                         # the old DCGAN tutorial's `.data`: runs, behind the version counter
    if isinstance(m, DCGAN + NORMS):
        m.weight.data.normal_(1.0 if isinstance(m, NORMS) else 0.0, 0.02)
        if m.bias is not None:
            m.bias.data.zero_()


def init_variance(m):                             # reads N(0, 0.02) as a variance: std √0.02
    if isinstance(m, DCGAN + NORMS):
        nn.init.normal_(m.weight, 1.0 if isinstance(m, NORMS) else 0.0, math.sqrt(0.02))
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def init_std_squared(m):                          # passes 0.02² where normal_ wants the std
    if isinstance(m, DCGAN + NORMS):
        nn.init.normal_(m.weight, 1.0 if isinstance(m, NORMS) else 0.0, 0.02 ** 2)
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def init_batchnorm_like_conv(m):                  # BatchNorm's scale drawn around 0
    if isinstance(m, DCGAN + NORMS):
        nn.init.normal_(m.weight, 0.0, 0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def init_bias_always(m):                          # forgets DCGAN's bias=False layers: m.bias is None there
    if isinstance(m, DCGAN + NORMS):
        nn.init.normal_(m.weight, 1.0 if isinstance(m, NORMS) else 0.0, 0.02)
        nn.init.zeros_(m.bias)


def init_new_parameters(m):                       # right values, but new tensors an existing optimizer never sees
    if isinstance(m, DCGAN + NORMS):
        m.weight = nn.Parameter(torch.randn_like(m.weight) * 0.02 + (1.0 if isinstance(m, NORMS) else 0.0))
        if m.bias is not None:
            m.bias = nn.Parameter(torch.zeros_like(m.bias))


def init_no_transposed(m):                        # isinstance list without ConvTranspose2d, the layer G is made of
    if isinstance(m, (nn.Linear, nn.Conv2d) + NORMS):
        init_reference(m)


def init_weights_only(m):                         # biases left at PyTorch's defaults
    if isinstance(m, DCGAN + NORMS):
        nn.init.normal_(m.weight, 1.0 if isinstance(m, NORMS) else 0.0, 0.02)


def init_nothing(m):
    pass


def test_init_accepts_right_answers_written_differently(capsys):
    for right in (init_reference, init_nn_init, init_by_class_name):
        ok, out = run(capsys, exercises.check_init, right)
        assert ok is True and out.startswith("✓"), (right.__name__, out)


def test_init_names_each_mistake(capsys):
    ok, out = run(capsys, exercises.check_init, init_recording)
    assert ok is False and "leaf Variable" in out and "changed in place while autograd was recording" in out
    ok, out = run(capsys, exercises.check_init, init_through_data)
    assert ok is False and "`.data`" in out and "version counter" in out and "torch.no_grad()" not in out
    ok, out = run(capsys, exercises.check_init, init_variance)
    assert ok is False and "√0.02" in out and "if 0.02 were its variance" in out
    ok, out = run(capsys, exercises.check_init, init_std_squared)
    assert ok is False and "0.02²" in out and "the square of the 0.02" in out
    ok, out = run(capsys, exercises.check_init, init_batchnorm_like_conv)
    assert ok is False and "BatchNorm1d" in out and "N(1, 0.02)" in out and "Linear 0" not in out
    ok, out = run(capsys, exercises.check_init, init_bias_always)
    assert ok is False and "bias=False" in out and "has m.bias None" in out and "if m.bias" not in out
    ok, out = run(capsys, exercises.check_init, init_new_parameters)
    assert ok is False and "replaced by a new tensor" in out and "still hold the old one" in out
    ok, out = run(capsys, exercises.check_init, init_no_transposed)
    assert ok is False and "ConvTranspose2d 4" in out and "untouched" in out and "Linear 0" not in out
    ok, out = run(capsys, exercises.check_init, init_weights_only)
    assert ok is False and "Linear 0: bias is not zero" in out and ": weight" not in out
    ok, out = run(capsys, exercises.check_init, init_nothing)
    assert ok is False and "changed nothing" in out


def init_running_var_zeroed(m):                      # the weights right, and BatchNorm's running_var zeroed too
    init_reference(m)
    if isinstance(m, NORMS):
        with torch.no_grad():
            m.running_var.zero_()


def test_init_names_a_changed_running_statistic(capsys):
    ok, out = run(capsys, exercises.check_init, init_running_var_zeroed)
    assert ok is False and out.startswith("✗ init_weights: BatchNorm1d 1: its buffer running_var changed"), out


def init_skips_batchnorm(m):                         # Linear and convolutions only: BatchNorm left at PyTorch's ones
    if isinstance(m, DCGAN):
        init_reference(m)


def init_batchnorm_ones(m):                           # BatchNorm's weight filled with 1, not drawn around it
    init_reference(m)
    if isinstance(m, NORMS):
        with torch.no_grad():
            m.weight.fill_(1.0)


def sgd_zeroed_before(params, lr):                    # .grad zeroed in place before the update reads it
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.grad.zero_()
                p -= lr * p.grad


def test_init_names_an_untouched_or_constant_batchnorm(capsys):
    ok, out = run(capsys, exercises.check_init, init_skips_batchnorm)
    assert ok is False and "BatchNorm2d 5" in out and "untouched" in out, out
    ok, out = run(capsys, exercises.check_init, init_batchnorm_ones)
    assert ok is False and "BatchNorm2d 5" in out and "every entry is 1" in out and "untouched" not in out, out


def init_keeps_batchnorm_bias(m):                 # BatchNorm's weight drawn, its bias left as it was
    with torch.no_grad():
        if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
            m.weight.normal_(0.0, 0.02)
            if m.bias is not None:
                m.bias.zero_()
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            m.weight.normal_(1.0, 0.02)


def test_init_names_a_batchnorm_bias_left_as_it_was(capsys):
    """A fresh BatchNorm's bias is 0 already; the checker's model has been used, so its biases are not."""
    ok, out = run(capsys, exercises.check_init, init_keeps_batchnorm_bias)
    assert ok is False and "BatchNorm1d 1: bias is not zero" in out and "BatchNorm2d 5: bias is not zero" in out, out


def sgd_assigns_data(params, lr):                 # p.data = ...: no in-place op, and the version counter never moves
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.data = p - lr * p.grad
                p.grad = None


def init_assigns_data(m):                          # m.weight.data = ...: a new tensor behind the parameter's back
    if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm1d, nn.BatchNorm2d)):
        mean = 1.0 if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) else 0.0
        m.weight.data = torch.randn_like(m.weight) * 0.02 + mean
        if m.bias is not None:
            m.bias.data = torch.zeros_like(m.bias)


def sgd_does_nothing(params, lr):
    pass


def test_an_assignment_to_data_is_named_as_a_read_is(capsys):
    ok, out = run(capsys, exercises.check_sgd_step, sgd_assigns_data)
    assert ok is False and "goes through `.data`" in out and "version counter" in out, out
    ok, out = run(capsys, exercises.check_init, init_assigns_data)
    assert ok is False and "goes through `.data`" in out and "version counter" in out, out


def test_a_step_that_writes_nothing_is_not_told_it_made_a_new_tensor(capsys):
    ok, out = run(capsys, exercises.check_sgd_step, sgd_does_nothing)
    assert ok is False and "w did not change at step 1" in out and "nothing was written into the parameter" in out


def test_sgd_step_names_a_gradient_left_as_zeros(capsys):
    ok, out = run(capsys, exercises.check_sgd_step, sgd_zeroed)
    assert ok is False and "w.grad is a tensor of zeros after your step, where opt.zero_grad() leaves None" in out, out


def init_every_weight(m):                             # every module with a weight initialised, PReLU's too
    if isinstance(m, NORMS):
        with torch.no_grad():
            m.weight.normal_(1.0, 0.02)
            m.bias.zero_()
    elif getattr(m, "weight", None) is not None:
        with torch.no_grad():
            m.weight.normal_(0.0, 0.02)
            if getattr(m, "bias", None) is not None:
                m.bias.zero_()


def init_frozen(m):                                   # the parameters frozen so that the init raises nothing
    if isinstance(m, DCGAN + NORMS):
        m.requires_grad_(False)
        init_reference(m)


def test_init_names_another_module_changed_and_a_frozen_parameter(capsys):
    ok, out = run(capsys, exercises.check_init, init_every_weight)
    assert ok is False and "PReLU 6: its weight changed" in out, out
    ok, out = run(capsys, exercises.check_init, init_frozen)
    assert ok is False and "no longer requires grad after init" in out and "recorded in the graph" not in out, out


def test_sgd_step_names_a_gradient_zeroed_before_the_update(capsys):
    ok, out = run(capsys, exercises.check_sgd_step, sgd_zeroed_before)
    assert ok is False and "its .grad is all zeros: it was zeroed before the update used it" in out, out
    assert "makes a new tensor" not in out


def test_init_not_solved_yet(capsys):
    for blank in (stub, ...):
        ok, out = run(capsys, exercises.check_init, blank)
        assert ok is False and out.startswith("?") and "not solved yet" in out and "✗" not in out


def test_init_accepts_a_right_answer_in_every_random_state(capsys):
    """The statistical test must not reject DCGAN's init by chance (it did in 13 of 40 states when it tested the
    8-element BatchNorm2d weight against fixed bounds): the check reseeds its model, so vary the draw."""
    accepted = 0
    for seed in range(40):
        def init_then_reseed(m, seed=seed):
            if isinstance(m, nn.Linear):                 # the first module apply() reaches: draw from a new state
                torch.manual_seed(1000 + seed)
            init_reference(m)
        ok, _ = run(capsys, exercises.check_init, init_then_reseed)
        accepted += ok
    assert accepted == 40


def test_init_drawn_from_another_distribution_is_named(capsys):
    """A uniform draw with DCGAN's mean and std is not N(0, 0.02): the spread of its values tells them apart."""
    def init_uniform_same_std(m):
        if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm1d, nn.BatchNorm2d)):
            centre = 1.0 if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) else 0.0
            half = 0.02 * math.sqrt(3)                     # a uniform on [-half, half] has std 0.02
            nn.init.uniform_(m.weight, centre - half, centre + half)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    ok, out = run(capsys, exercises.check_init, init_uniform_same_std)
    assert ok is False and "mean and std are right" in out and "not drawn from N(0, 0.02)" in out, out



def test_a_loop_that_skips_the_last_parameter_is_seen(capsys):
    """The parameter whose .grad is None sits in the middle of the list: skipping the last one leaves one that has
    a gradient unchanged."""
    def sgd_step_skips_last(params, lr):
        with torch.no_grad():
            for p in params[:-1]:
                if p.grad is not None:
                    p -= lr * p.grad
                    p.grad = None
    assert exercises.check_sgd_step(sgd_step_skips_last) is False
    out = capsys.readouterr().out
    assert "b did not change at step 1, though its .grad held a gradient" in out, out


def test_a_mix_up_is_told_only_where_every_wrong_weight_fits_it(capsys):
    """std 0.2 (a typo): a small layer's sample std can fall near √0.02, but the larger ones do not, so no layer is
    told that 0.02 was taken as a variance."""
    def init_std_typo(m):
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            nn.init.normal_(m.weight, 0.0, 0.2)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            nn.init.normal_(m.weight, 1.0, 0.02)
            nn.init.zeros_(m.bias)
    for seed in range(5):
        torch.manual_seed(seed)
        ok, out = run(capsys, exercises.check_init, init_std_typo)
        assert ok is False and "√0.02" not in out and "variance" not in out, out
