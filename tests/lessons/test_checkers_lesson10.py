"""Lesson 10's checker, check_amp_step: right answers written differently, and the wrong answers students write,
each answered with a hint that names the mistake."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gan_lessons import exercises
from gan_lessons.exercises.variants import variant


def bce(logits, target):
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, target))


def run(capsys, answer):
    ok = exercises.check_amp_step(answer)
    return ok, capsys.readouterr().out


def amp_step(clip_first=False, updates="once", step_D="scaler", scale_G=True, autocast=True, own_scaler=False,
             clip=True, g_target=1, zero_each=False, unscale_each=False, whole_batch=False, fresh_fake=False,
             attached=False, zero_G_first=False):
    """The reference step, or one of the mistakes it is written to catch."""
    def step(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):
        if zero_G_first:
            opt_G.zero_grad()
        dtype = autocast if isinstance(autocast, torch.dtype) else torch.bfloat16
        ctx = (lambda: torch.autocast("cpu", dtype=dtype)) if autocast else torch.enable_grad
        scaler_G = torch.amp.GradScaler("cpu") if own_scaler else scaler
        with ctx():
            x_fake = G(z)
        opt_D.zero_grad()
        fakes = x_fake if attached else x_fake.detach()
        parts = [(x_real, fakes)] if whole_batch else zip(x_real.chunk(accum), fakes.chunk(accum))
        for x_part, fake_part in parts:
            if zero_each:
                opt_D.zero_grad()
            with ctx():
                loss_D = (bce(D(x_part), 1) + bce(D(fake_part), 0)) / 2
            scaler.scale(loss_D if whole_batch else loss_D / accum).backward(retain_graph=attached)
            if unscale_each:
                scaler.unscale_(opt_D)
        if unscale_each:
            pass
        elif clip_first:
            nn.utils.clip_grad_norm_(D.parameters(), max_norm)
            scaler.unscale_(opt_D)
        elif clip:
            scaler.unscale_(opt_D)
            nn.utils.clip_grad_norm_(D.parameters(), max_norm)
        if step_D == "scaler":
            scaler.step(opt_D)
        else:
            opt_D.step()
        if updates in ("twice", "between"):
            scaler.update()
        with ctx():
            loss_G = bce(D(G(z) if fresh_fake else x_fake), g_target)
        if not zero_G_first:
            opt_G.zero_grad()
        (scaler_G.scale(loss_G) if scale_G else loss_G).backward()
        scaler_G.step(opt_G)
        if updates in ("once", "twice"):
            scaler.update()
        if own_scaler:
            scaler_G.update()
    return step


def amp_step_split(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):
    """Right, written differently: micro-batches by slicing, D's two terms each scaled and backpropagated, backward
    inside autocast, the clip by hand, zero_grad to zeros."""
    opt_D.zero_grad(set_to_none=False)
    m = len(x_real) // accum
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        x_fake = G(z)
        for k in range(accum):
            part = slice(k * m, (k + 1) * m)
            scaler.scale(bce(D(x_real[part]), 1) / (2 * accum)).backward()
            scaler.scale(bce(D(x_fake[part].detach()), 0) / (2 * accum)).backward()
    scaler.unscale_(opt_D)
    norm = torch.cat([p.grad.flatten() for p in D.parameters()]).norm()
    if norm > max_norm:
        for p in D.parameters():
            p.grad.mul_(max_norm / norm)
    scaler.step(opt_D)
    opt_G.zero_grad(set_to_none=False)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        scaler.scale(bce(D(x_fake), 1)).backward()
    scaler.step(opt_G)
    scaler.update()


def amp_step_frozen(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):
    """Right, written differently: D's fake micro-batches cut from x_fake under no_grad, G's step through a frozen D
    (lesson 09) on the same x_fake."""
    opt_D.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x_fake = G(z)
    with torch.no_grad():
        fakes = x_fake.chunk(accum)
    for x_part, fake_part in zip(x_real.chunk(accum), fakes):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss_D = bce(D(x_part), 1) / 2 + bce(D(fake_part), 0) / 2
        scaler.scale(loss_D / accum).backward()
    scaler.unscale_(opt_D)
    torch.nn.utils.clip_grad_norm_(list(D.parameters()), max_norm=max_norm)
    scaler.step(opt_D)
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss_G = bce(D(x_fake), 1)
        scaler.scale(loss_G).backward()
        scaler.step(opt_G)
    finally:
        D.requires_grad_(True)
    scaler.update()


def one_backward_for_all(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):
    """The micro-batches' losses added up, and one backward for them all."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x_fake = G(z)
        total = sum((bce(D(x_part), 1) + bce(D(fake_part), 0)) / 2 / accum
                    for x_part, fake_part in zip(x_real.chunk(accum), x_fake.detach().chunk(accum)))
    opt_D.zero_grad()
    scaler.scale(total).backward()
    scaler.unscale_(opt_D)
    nn.utils.clip_grad_norm_(D.parameters(), max_norm)
    scaler.step(opt_D)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss_G = bce(D(x_fake), 1)
    opt_G.zero_grad()
    scaler.scale(loss_G).backward()
    scaler.step(opt_G)
    scaler.update()


# the reference with one edit (the checker's own known mistakes are written the same way)
G_before_D_steps = variant(   # G's loss and backward before D's step: through D as it was before that step
    exercises.reference_amp_step,
    move=(["with torch.autocast('cpu', dtype=torch.bfloat16):\n    loss_G = bce(D(x_fake), 1)", "opt_G.zero_grad()",
           "scaler.scale(loss_G).backward()"], "scaler.unscale_(opt_D)"),
    replace={"scaler.scale(loss_G).backward()": "scaler.scale(loss_G).backward(inputs=list(G.parameters()))"})
G_never_cleared = variant(exercises.reference_amp_step, drop="opt_G.zero_grad()")   # an inf a skipped step left stays
never_updated = variant(exercises.reference_amp_step, drop="scaler.update()")


def whole_step_in_autocast(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):
    """One autocast block around the whole step: autocast's cached bfloat16 copies of D's weights outlive D's step,
    so G's loss goes through D's old weights."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x_fake = G(z)
        opt_D.zero_grad()
        for x_part, fake_part in zip(x_real.chunk(accum), x_fake.detach().chunk(accum)):
            scaler.scale((bce(D(x_part), 1) + bce(D(fake_part), 0)) / 2 / accum).backward()
        scaler.unscale_(opt_D)
        nn.utils.clip_grad_norm_(D.parameters(), max_norm)
        scaler.step(opt_D)
        loss_G = bce(D(x_fake), 1)
        opt_G.zero_grad()
        scaler.scale(loss_G).backward()
        scaler.step(opt_G)
    scaler.update()


def amp_step_stub(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):
    # YOUR CODE HERE
    raise NotImplementedError()


def one_D_forward_per_micro_batch(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x_fake = G(z)
    opt_D.zero_grad()
    for x_part, fake_part in zip(x_real.chunk(accum), x_fake.detach().chunk(accum)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            scores = D(torch.cat([x_part, fake_part]))
            targets = torch.cat([torch.ones_like(scores[:len(x_part)]), torch.zeros_like(scores[len(x_part):])])
            loss_D = F.binary_cross_entropy_with_logits(scores, targets)
        scaler.scale(loss_D / accum).backward()
    scaler.unscale_(opt_D)
    nn.utils.clip_grad_norm_(D.parameters(), max_norm)
    scaler.step(opt_D)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss_G = bce(D(x_fake), 1)
    opt_G.zero_grad()
    scaler.scale(loss_G).backward()
    scaler.step(opt_G)
    scaler.update()


@pytest.mark.parametrize("answer", [exercises.reference_amp_step, amp_step(), amp_step_split, amp_step_frozen,
                                    one_D_forward_per_micro_batch],
                         ids=["reference", "rebuilt", "split", "frozen", "one D forward per micro-batch"])
def test_right_answers_are_accepted(capsys, answer):
    ok, out = run(capsys, answer)
    assert ok is True and out.startswith("✓"), out


@pytest.mark.parametrize("answer, words", [
    (amp_step(clip_first=True), ["clip saw the scaled gradients", "before scaler.step divided them"]),
    (amp_step(updates="twice"), ["scaler.update() ran 2 times", "more than once in one iteration"]),
    (amp_step(updates="between"), ["not to half", "the update did not see that inf"]),
    (amp_step(step_D="directly"), ["opt_D.step() ran, but not through scaler.step(opt_D)"]),
    (amp_step(scale_G=False), ["loss_G was not scaled", "divided its gradient by the scale all the same"]),
    (amp_step(autocast=False), ["computed in float32", "outside autocast"]),
    (amp_step(autocast=torch.float16), ["computed in float16, where the exercise's autocast computes in bfloat16"]),
    (amp_step(own_scaler=True), ["not through scaler.step(opt_G) on the scaler passed in"]),
    (amp_step(zero_each=True), ["its last micro-batch's alone", "emptied between the micro-batches' backwards"]),
    (amp_step(unscale_each=True), ["unscale_() has already been called", "ran twice on one optimizer in one iteration"]),
    (amp_step(whole_batch=True), ["D ran on 8 samples at once", "accum=2 micro-batches holds 4"]),
    (amp_step(fresh_fake=True), ["G ran 2 forwards in one call"]),
    (one_backward_for_all, ["1 backward reached D before its step", "a backward of its own"]),
    (G_before_D_steps, ["the one through D as it was before opt_D's step", "computed before that step"]),
    (G_never_cleared, ["G's .grad still held that inf", "skipped G's step again"]),
    (whole_step_in_autocast, ["the one through D as it was before opt_D's step", "ran inside an autocast block"]),
    (never_updated, ["scaler.update() never ran in one call of amp_step, so the scale never moved"]),
    (amp_step(attached=True), ["D's backwards before opt_D.step() went on into G's weights", "that no step uses"]),
    (amp_step(attached=True, zero_G_first=True), ["D's backwards before opt_D.step() went on into G's weights",
                                                  "G's gradient at opt_G.step() is not the reference's"]),
], ids=["clip before unscale_", "update twice", "update between", "opt_D.step()", "loss_G unscaled",
        "no autocast", "float16", "a second scaler", "zero_grad each micro-batch", "unscale_ each micro-batch", "no micro-batches",
        "G run again for its loss", "one backward for every micro-batch", "G through D before its step",
        "G's .grad never cleared", "the whole step in one autocast block", "no update()", "D's fakes not detached",
    "D's fakes not detached, G's .grad emptied first"])
def test_each_mistake_is_named(capsys, answer, words):
    ok, out = run(capsys, answer)
    assert ok is False and out.startswith("✗"), out
    for word in words:
        assert word in out, (word, out)


def test_opt_D_stepped_directly_is_told_first_and_alone(capsys):
    """Its first line says what happened: no false line about D's micro-batches before it."""
    ok, out = run(capsys, amp_step(step_D="directly"))
    assert ok is False and out.startswith("✗ amp_step: opt_D.step() ran, but not through scaler.step(opt_D)"), out
    assert "samples at once" not in out, out


D_cleared_before_its_step = variant(      # D's gradients emptied after unscale_: opt_D steps on nothing
    exercises.reference_amp_step, move=("opt_D.zero_grad()", "scaler.step(opt_D)"))


def test_gradients_cleared_before_the_step_are_told_as_that_and_alone(capsys):
    ok, out = run(capsys, D_cleared_before_its_step)
    assert ok is False and out == "✗ amp_step: every parameter of D has .grad None at opt_D.step(), so that step " \
        "changed nothing\n", out


def test_a_D_forward_of_G_s_loss_is_no_micro_batch(capsys):
    """G's loss through D before D's step runs D on the whole fake batch: G's mistake, not D's micro-batches'."""
    ok, out = run(capsys, G_before_D_steps)
    assert ok is False and "samples at once" not in out and "backward reached D" not in out, out


clipped_by_value = variant(exercises.reference_amp_step,
                           replace={"nn.utils.clip_grad_norm_(D.parameters(), max_norm)":
                                    "nn.utils.clip_grad_value_(D.parameters(), max_norm)"})


def G_clipped_too(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):   # G's gradient clipped like D's
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x_fake = G(z)
    opt_D.zero_grad()
    for x_part, fake_part in zip(x_real.chunk(accum), x_fake.detach().chunk(accum)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss_D = (bce(D(x_part), 1) + bce(D(fake_part), 0)) / 2
        scaler.scale(loss_D / accum).backward()
    for opt, net in ((opt_D, D), (opt_G, G)):
        if opt is opt_G:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss_G = bce(D(x_fake), 1)
            opt_G.zero_grad()
            scaler.scale(loss_G).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(net.parameters(), max_norm)
        scaler.step(opt)
    scaler.update()


def a_D_step_per_micro_batch(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x_fake = G(z)
    for x_part, fake_part in zip(x_real.chunk(accum), x_fake.detach().chunk(accum)):
        opt_D.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss_D = (bce(D(x_part), 1) + bce(D(fake_part), 0)) / 2
        scaler.scale(loss_D).backward()
        scaler.unscale_(opt_D)
        nn.utils.clip_grad_norm_(D.parameters(), max_norm)
        scaler.step(opt_D)
        scaler.update()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss_G = bce(D(x_fake), 1)
    opt_G.zero_grad()
    scaler.scale(loss_G).backward()
    scaler.step(opt_G)
    scaler.update()


def test_no_clip_and_a_wrong_loss(capsys):
    ok, out = run(capsys, amp_step(clip=False))
    assert ok is False and "above max_norm" in out and "nothing clipped it" not in out, out
    ok, out = run(capsys, clipped_by_value)                      # clipped, but by value, not by norm
    assert ok is False and "above max_norm" in out, out
    ok, out = run(capsys, G_clipped_too)
    assert ok is False and "G's gradient norm at opt_G.step() is 0.100, max_norm" in out, out
    assert "G's loss is" not in out, out
    ok, out = run(capsys, a_D_step_per_micro_batch)
    assert ok is False and "backward reached D" not in out and "scaler.update() ran 3 times" in out, out
    ok, out = run(capsys, amp_step(g_target=0))                  # G's target swapped
    assert ok is False and "G's loss is bce(D(x_fake), 1)" in out, out


def test_not_solved_yet(capsys):
    ok, out = run(capsys, ...)
    assert ok is False and out.startswith("?") and "not solved yet" in out
    ok, out = run(capsys, amp_step_stub)
    assert ok is False and out.startswith("?") and "not solved yet" in out
    ok, out = run(capsys, 3)
    assert ok is False and "not a function" in out


def test_a_step_without_accum_is_told_its_signature(capsys):
    def old_signature(G, D, opt_G, opt_D, scaler, x_real, z, max_norm):
        exercises.reference_amp_step(G, D, opt_G, opt_D, scaler, x_real, z, max_norm)
    ok, out = run(capsys, old_signature)
    assert ok is False and "takes no accum" in out, out
