"""processes.run, which lesson 13 runs its experiments with: one value per process, rank 0 first; an error raised in
a process comes back as the same kind of error, with its rank, without waiting for the peers that hang; a process
that does not return is stopped at the timeout, with one line."""
import time

import pytest

from gan_lessons import ddp_lesson, processes


def test_each_process_returns_its_value_rank_0_first():
    assert processes.run(ddp_lesson.stalls, seconds=0) == [0, 1]


def test_an_error_in_one_process_comes_back_as_that_error_with_its_rank(monkeypatch):
    monkeypatch.setattr(processes, "WAIT_FOR_PEERS", 2)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="rank 1 could not go on") as caught:
        processes.run(ddp_lesson.raises_on, which=1)          # rank 0 hangs at a barrier: stopped, not waited for
    assert caught.value.rank == 1 and time.perf_counter() - start < 30


def test_a_process_that_does_not_return_is_stopped_at_the_timeout():
    start = time.perf_counter()                    # rank 1 stalls; on a busy machine rank 0 may not be up in time
    with pytest.raises(TimeoutError, match=r"[12] of 2 processes returned nothing within 20 s"):
        processes.run(ddp_lesson.stalls, seconds=300, timeout=20)
    assert time.perf_counter() - start < 60


def test_an_error_of_a_kind_that_cannot_be_rebuilt_is_a_runtime_error():
    error = processes.Failure(0, "no.such.module", "Strange", "what happened").error()
    assert isinstance(error, RuntimeError) and str(error) == "what happened" and error.rank == 0
