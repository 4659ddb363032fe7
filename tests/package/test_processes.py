"""processes.run, which lesson 14 runs its experiments with: one value per process, rank 0 first; an error raised in
a process comes back as the same kind of error, with its rank, without waiting for the peers that hang; a process
that does not return is stopped at the timeout, with one line."""
import os
import threading
import time
import warnings

import pytest
import torch

from gan_lessons import ddp_lesson, processes

pytestmark = pytest.mark.slow


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
    with pytest.raises(TimeoutError, match=r"[12] of 2 processes returned nothing within 10 s \(.*process 1: "
                                           r"running ddp_lesson\.stalls\)"):
        processes.run(ddp_lesson.stalls, seconds=300, timeout=10)
    assert time.perf_counter() - start < 60


def test_an_error_of_a_kind_that_cannot_be_rebuilt_is_a_runtime_error():
    error = processes.Failure(0, "no.such.module", "Strange", "what happened").error()
    assert isinstance(error, RuntimeError) and str(error) == "what happened" and error.rank == 0


def test_values_read_after_the_processes_have_exited_are_still_there(monkeypatch):
    """The parent reads late: its reader starts only once both processes have sent their tensors and exited. (Tensors
    sent as they are live in shared memory that dies with the process: this read used to fail.)"""
    start = threading.Thread.start

    def late_start(self):
        time.sleep(8)
        start(self)
    monkeypatch.setattr(threading.Thread, "start", late_start)
    rank0, rank1 = processes.run(ddp_lesson.averaged)
    monkeypatch.undo()
    assert torch.equal(rank0["after_ddp"], rank1["after_ddp"]) and not torch.equal(rank0["own"], rank1["own"])


def test_a_warning_in_the_processes_is_shown_here_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert processes.run(ddp_lesson.warns) == [0, 1]
    said = [w for w in caught if issubclass(w.category, FutureWarning) and "this flag is deprecated" in str(w.message)]
    assert len(said) == 1 and said[0].filename.endswith("ddp_lesson.py")


def language(rank, world):
    """What a process speaks: its GAN_LESSONS_LANG, and a message of the package as it prints it."""
    from gan_lessons.i18n import _
    return os.environ.get("GAN_LESSONS_LANG"), _("joining the process group")


def test_each_run_s_processes_speak_the_language_the_notebook_speaks_then(monkeypatch):
    """The processes take the environment of the moment run() is called, not the one their fork server started
    with: a lesson that switches to Chinese after a first run gets Chinese messages from the next one."""
    monkeypatch.setenv("GAN_LESSONS_LANG", "en")
    assert processes.run(language) == [("en", "joining the process group")] * 2
    monkeypatch.setenv("GAN_LESSONS_LANG", "zh")
    (lang, said), _ = processes.run(language)
    assert lang == "zh" and said != "joining the process group" and any("\u4e00" <= c <= "\u9fff" for c in said)
