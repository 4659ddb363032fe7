"""Lesson 14's checker, check_ddp_accumulation, run in two processes: right answers written differently (each
accepted), the wrong answers students write (each named, the fix not printed), and the stub and `...`.
The functions are module-level so that the checker can read their source, as it reads a notebook cell's."""
import contextlib

import pytest
import torch
import torch.nn.functional as F

from gan_lessons import exercises

pytestmark = pytest.mark.slow


def reference(ddp, opt_D, x_real, x_fake, accum):
    opt_D.zero_grad()
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        with ddp.no_sync() if k < len(pairs) - 1 else contextlib.nullcontext():
            loss_D = (F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum
            loss_D.backward()
    opt_D.step()


def split_by_hand(ddp, opt_D, x_real, x_fake, accum):
    """The last micro-batch outside the loop; sizes by slicing; .grad emptied by hand."""
    import torch
    for p in ddp.parameters():
        p.grad = None
    n = len(x_real) // accum
    with ddp.no_sync():
        for k in range(accum - 1):
            part = slice(k * n, (k + 1) * n)
            (torch.clamp(1 - ddp(x_real[part]), min=0).mean() / accum
             + torch.clamp(1 + ddp(x_fake[part]), min=0).mean() / accum).backward()
    last = slice((accum - 1) * n, accum * n)
    (F.relu(1 - ddp(x_real[last])).mean() / accum + F.relu(1 + ddp(x_fake[last])).mean() / accum).backward()
    opt_D.step()


def cleared_at_the_end(ddp, opt_D, x_real, x_fake, accum):
    """.grad emptied after the step: the next call starts from what a G step's backward left in it."""
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        with ddp.no_sync() if k < len(pairs) - 1 else contextlib.nullcontext():
            ((F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum).backward()
    opt_D.step()
    opt_D.zero_grad()


def forward_outside_no_sync(ddp, opt_D, x_real, x_fake, accum):
    """Each micro-batch's forward outside no_sync, its backward inside but the last's."""
    opt_D.zero_grad()
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        loss_D = (F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum
        with ddp.no_sync() if k < len(pairs) - 1 else contextlib.nullcontext():
            loss_D.backward()
    opt_D.step()


def around_the_wrapper_but_last(ddp, opt_D, x_real, x_fake, accum):
    """ddp.module for every micro-batch but the last, in place of no_sync()."""
    opt_D.zero_grad()
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        D = ddp if k == len(pairs) - 1 else ddp.module
        ((F.relu(1 - D(real)).mean() + F.relu(1 + D(fake)).mean()) / accum).backward()
    opt_D.step()


def synced_every_time(ddp, opt_D, x_real, x_fake, accum):
    opt_D.zero_grad()
    for real, fake in zip(x_real.chunk(accum), x_fake.chunk(accum)):
        ((F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum).backward()
    opt_D.step()


def never_synced(ddp, opt_D, x_real, x_fake, accum):
    opt_D.zero_grad()
    with ddp.no_sync():
        for real, fake in zip(x_real.chunk(accum), x_fake.chunk(accum)):
            ((F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum).backward()
    opt_D.step()


def around_the_wrapper(ddp, opt_D, x_real, x_fake, accum):
    D = ddp.module                                   # the plain D: DDP's hooks never run
    opt_D.zero_grad()
    for real, fake in zip(x_real.chunk(accum), x_fake.chunk(accum)):
        ((F.relu(1 - D(real)).mean() + F.relu(1 + D(fake)).mean()) / accum).backward()
    opt_D.step()


def cleared_each_time(ddp, opt_D, x_real, x_fake, accum):
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        opt_D.zero_grad()
        with ddp.no_sync() if k < len(pairs) - 1 else contextlib.nullcontext():
            ((F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum).backward()
    opt_D.step()


def not_divided(ddp, opt_D, x_real, x_fake, accum):
    opt_D.zero_grad()
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        with ddp.no_sync() if k < len(pairs) - 1 else contextlib.nullcontext():
            (F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()).backward()
    opt_D.step()


def never_cleared(ddp, opt_D, x_real, x_fake, accum):
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        with ddp.no_sync() if k < len(pairs) - 1 else contextlib.nullcontext():
            ((F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum).backward()
    opt_D.step()


def one_backward_for_all(ddp, opt_D, x_real, x_fake, accum):
    """Every micro-batch's forward under no_sync, and one backward of their summed losses."""
    opt_D.zero_grad()
    with ddp.no_sync():
        parts = [(F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum
                 for real, fake in zip(x_real.chunk(accum)[:-1], x_fake.chunk(accum)[:-1])]
    last = (F.relu(1 - ddp(x_real.chunk(accum)[-1])).mean() + F.relu(1 + ddp(x_fake.chunk(accum)[-1])).mean()) / accum
    (sum(parts) + last).backward()
    opt_D.step()


def synced_first_only(ddp, opt_D, x_real, x_fake, accum):
    """The first micro-batch's backward averaged, the others' kept to each process."""
    opt_D.zero_grad()
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        with ddp.no_sync() if k > 0 else contextlib.nullcontext():
            ((F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum).backward()
    opt_D.step()


def unsynced_first_only(ddp, opt_D, x_real, x_fake, accum):
    """no_sync() around the first micro-batch alone: right with two micro-batches, not with more."""
    opt_D.zero_grad()
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        with ddp.no_sync() if k == 0 else contextlib.nullcontext():
            ((F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum).backward()
    opt_D.step()


def averaged_by_hand(ddp, opt_D, x_real, x_fake, accum):
    """Every backward inside no_sync(), then an all_reduce of each .grad by hand: the right mean, not DDP's."""
    import torch.distributed as dist
    opt_D.zero_grad()
    with ddp.no_sync():
        for real, fake in zip(x_real.chunk(accum), x_fake.chunk(accum)):
            ((F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum).backward()
    for p in ddp.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()
    opt_D.step()


def whole_fake_each_time(ddp, opt_D, x_real, x_fake, accum):
    """Each micro-batch's loss on its real chunk and on the whole fake batch: the same mean, D run on it accum times."""
    opt_D.zero_grad()
    reals = x_real.chunk(accum)
    for k, real in enumerate(reals):
        with ddp.no_sync() if k < len(reals) - 1 else contextlib.nullcontext():
            ((F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(x_fake)).mean()) / accum).backward()
    opt_D.step()


def cat_per_micro_batch(ddp, opt_D, x_real, x_fake, accum):
    """Right: one forward per micro-batch on its real and fake chunks together, split after."""
    opt_D.zero_grad()
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        with ddp.no_sync() if k < len(pairs) - 1 else contextlib.nullcontext():
            out = ddp(torch.cat([real, fake]))
            ((F.relu(1 - out[:len(real)]).mean() + F.relu(1 + out[len(real):]).mean()) / accum).backward()
    opt_D.step()


def uses_a_notebook_name(ddp, opt_D, x_real, x_fake, accum):
    opt_D.zero_grad()
    hinge_D(ddp, x_real, x_fake).backward()          # noqa: F821 (defined in another cell of a notebook)
    opt_D.step()


def split_into_pieces_of_accum(ddp, opt_D, x_real, x_fake, accum):     # split(accum): pieces of accum samples
    opt_D.zero_grad()
    pairs = list(zip(x_real.split(accum), x_fake.split(accum)))
    for k, (real, fake) in enumerate(pairs):
        with contextlib.nullcontext() if k == len(pairs) - 1 else ddp.no_sync():
            ((F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum).backward()
    opt_D.step()


def stub(ddp, opt_D, x_real, x_fake, accum):
    # YOUR CODE HERE
    raise NotImplementedError()


@pytest.mark.parametrize("answer", [reference, split_by_hand, cat_per_micro_batch])
def test_right_answers_are_accepted(capsys, answer):
    assert exercises.check_ddp_accumulation(answer) is True
    out = capsys.readouterr().out
    assert out.startswith("✓ d_step:") and "once a step" in out, out


@pytest.mark.parametrize("answer, words", [
    (synced_every_time, ["the gradients are right, but DDP sent each bucket 4 times a step"]),
    (never_synced, ["the two processes stepped on different gradients", "never averaged them"]),
    (around_the_wrapper, ["the two processes stepped on different gradients"]),
    (cleared_each_time, ["its last micro-batch's gradient alone", "emptied between"]),
    (not_divided, ["4x the reference's, in the same direction"]),
    (uses_a_notebook_name, ["NameError", "a name from another cell is not there"]),
    (one_backward_for_all, ["1 backward reached D before its step", "a backward of its own"]),
    (synced_first_only, ["the two processes stepped on different gradients", "after that averaging"]),
    (cleared_at_the_end, ["plus the 0.01 its .grad held when the call began"]),
    (never_cleared, ["plus the 0.01 its .grad held when the call began"]),
    (forward_outside_no_sync, ["sent each bucket 4 times a step", "3 backward(s) ran inside a no_sync block after their "
                                                                  "forward ran outside it"]),
    (around_the_wrapper_but_last, ["6 of D's forwards in a call ran through ddp.module, around DDP"]),
    (unsynced_first_only, ["the gradients are right, but DDP sent each bucket 3 times a step"]),
    (averaged_by_hand, ["DDP sent no bucket during a step"]),
    (whole_fake_each_time, ["the gradients are right, but D ran on", "went through D more than once"]),
    (split_into_pieces_of_accum, ["0.5x the reference's", "and 2 backward(s) reached D in a call",
                                  "accum=4 micro-batches has one of its own"]),
], ids=lambda x: getattr(x, "__name__", "words"))
def test_each_mistake_is_named(capsys, answer, words):
    assert exercises.check_ddp_accumulation(answer) is False
    out = capsys.readouterr().out
    assert out.startswith("✗") and "✓" not in out, out
    for word in words:
        assert word in out, (word, out)
    assert "no_sync()" not in out.replace("outside no_sync()", ""), out       # the fix is the student's to write


def test_not_solved_yet(capsys):
    assert exercises.check_ddp_accumulation(...) is False
    assert exercises.check_ddp_accumulation(stub) is False
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 and all(line.startswith("? ") and "not solved yet" in line for line in out), out


def test_a_script_that_starts_the_check_at_import_is_told_what_happened():
    """Run from a script with no main guard, the spawned processes import it again and start the check once more;
    the line says so, and does not blame the student's d_step for it with a generic hint."""
    from gan_lessons.exercises.feedback import raised
    from gan_lessons.exercises.lesson14 import HINTS
    error = RuntimeError("An attempt has been made to start a new process before the current process has finished "
                         "its bootstrapping phase.")
    line = raised("d_step", error, HINTS)
    assert "imported the calling script again" in line and "read the message" not in line, line
