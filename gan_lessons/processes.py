"""Several processes from a notebook (lesson 14): run one function of this package in `world` fresh processes that
form a gloo process group on this machine, as torchrun would start them, and bring back what each returned.

    results = processes.run(ddp_lesson.averaged, world=2)      # one value per rank, rank 0 first

The processes are forked from multiprocessing's fork server (where the platform has one; "spawn" elsewhere): a clean
process, started once, that has imported torch and nothing else. So each process starts without importing torch
again, and without anything of the kernel's (which a child forked from a Jupyter or Colab kernel could not use
safely). The function must live in an importable module, imported afresh in each process; a student's function is
sent as its source (`source=`). Each process gets the environment the notebook has when run() is called (its
language among it), not the one the server started with. If a process raises, run() raises the same kind of error
with the same message, with `.rank` set: the lowest rank's, an error that only says a peer went away coming last.
A process that hangs (its peer gone) is stopped at `timeout`, and the error says what each late process was doing.
What the processes return is sent as bytes, so it is still there when the notebook reads it after they have
exited; their Python warnings are shown in the notebook as warnings, each once."""
import builtins
import io
import os
import queue
import socket
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.multiprocessing as mp

from gan_lessons.i18n import _

WAIT_FOR_PEERS = 20      # seconds the others get, once one process has raised, before they are stopped


@dataclass
class Failure:
    """What a process raised, in a form that crosses processes: the error's module and class, and its message."""
    rank: int
    module: str
    kind: str
    message: str

    def error(self) -> BaseException:
        """The same kind of error, rebuilt here (RuntimeError where the kind cannot be rebuilt)."""
        kind: Any = getattr(builtins, self.kind, None) if self.module == "builtins" else None
        if kind is None:
            try:
                kind = getattr(__import__(self.module, fromlist=[self.kind]), self.kind)
                kind(self.message)
            except Exception:
                kind = RuntimeError
        error = kind(self.message)
        error.rank = self.rank         # the process that raised it, for the caller
        return error


def _peer_lost(failure) -> bool:
    """Whether a process failed only because another one went away (what gloo and NCCL say then)."""
    return "Dist" in failure.kind or any(w in failure.message for w in ("closed by peer", "reset by peer",
                                                                          "Connection refused"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Caught:
    """A warning a process raised, sent back so that the notebook shows it as the same warning, from the same line."""
    module: str
    kind: str
    message: str
    filename: str
    lineno: int

    def show(self) -> None:
        try:
            category = getattr(__import__(self.module, fromlist=[self.kind]), self.kind)
        except Exception:
            category = UserWarning
        if not (isinstance(category, type) and issubclass(category, Warning)):
            category = UserWarning
        warnings.warn_explicit(self.message, category, self.filename, self.lineno)


def _packed(value) -> bytes:
    """The value as bytes: tensors copied out of the process, so that they outlive it (a tensor sent as it is would
    be shared by a file descriptor that dies with its process, and a late read would fail)."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _unpacked(data: bytes):
    return torch.load(io.BytesIO(data), weights_only=False)      # sent by our own child process


def _context():
    """The fork server where there is one (torch imported there once, before it forks), else spawn."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(["torch", "torch.distributed"])     # read when the server starts, the first time
    return context


def _child(rank, world, port, results, module, name, kwargs, environ):
    """One process: take the caller's environment, join the group, call module.name(rank, world, **kwargs), send back
    its value (or its error) and its warnings. Before each stage it says which one it is in, for a timeout to report."""
    import torch.distributed as dist
    os.environ.clear()
    os.environ.update(environ)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 2)                     # gloo's and C++'s own log lines (with timestamps) would land in the notebook;
    # Python warnings (torch's C++ warnings among them) are caught below and shown in the notebook as warnings
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    results.put((rank, STAGE, _("joining the process group")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist.init_process_group("gloo", rank=rank, world_size=world)
        results.put((rank, STAGE, _("running {function}").format(function=f"{module.rsplit('.', 1)[-1]}.{name}")))
        try:
            function = getattr(__import__(module, fromlist=[name]), name)
            value = _packed(function(rank, world, **kwargs))
        except BaseException as error:    # sent to the notebook, which raises it there
            results.put((rank, WARNINGS, _warnings(caught)))
            results.put((rank, FAILURE, Failure(rank, type(error).__module__, type(error).__name__, str(error))))
            os._exit(0)                   # no teardown: a peer may be waiting in a collective that will not come
    results.put((rank, WARNINGS, _warnings(caught)))
    results.put((rank, VALUE, value))
    results.put((rank, STAGE, _("waiting for the other processes to finish")))
    dist.barrier()
    dist.destroy_process_group()


def _warnings(caught) -> list:
    return [Caught(w.category.__module__, w.category.__name__, str(w.message), w.filename, w.lineno) for w in caught]


STAGE, WARNINGS, VALUE, FAILURE = "stage", "warnings", "value", "failure"


def run(function, world=2, timeout=120, **kwargs) -> list:
    """function(rank, world, **kwargs) in `world` processes; the list of what each returned, rank 0 first. The
    values are copies: they stay readable after the processes have gone, however late they are read. Warnings the
    processes raised are shown here, each once."""
    ctx = _context()
    results, port = ctx.SimpleQueue(), _free_port()
    children = [ctx.Process(target=_child, args=(rank, world, port, results, function.__module__,
                                                  function.__name__, kwargs, dict(os.environ)), daemon=True)
                for rank in range(world)]
    for child in children:
        child.start()
    got: dict = {}
    failures: list = []
    shown: set = set()
    stage = {rank: _("starting") for rank in range(world)}
    pipe: queue.Queue = queue.Queue()

    def reader():
        while True:
            try:
                pipe.put(results.get())
            except Exception as error:     # the queue itself broke: said, not swallowed
                pipe.put((None, FAILURE, Failure(-1, type(error).__module__, type(error).__name__, str(error))))
                return
    threading.Thread(target=reader, daemon=True).start()
    deadline, gone = time.monotonic() + timeout, {}
    while len(got) + len(failures) < world and time.monotonic() < deadline:
        try:
            rank, what, value = pipe.get(timeout=0.5)
        except queue.Empty:          # a process that died without a word (killed, or its interpreter failed to start)
            gone = {rank: child.exitcode for rank, child in enumerate(children)
                    if child.exitcode not in (None, 0) and rank not in got}
            if gone:
                break
            continue
        if what == STAGE:
            stage[rank] = value
        elif what == WARNINGS:
            for caught in value:
                if (caught.kind, caught.message) not in shown:      # the same warning from every process: once
                    shown.add((caught.kind, caught.message))
                    caught.show()
        elif what == FAILURE:
            failures.append(value)
            deadline = min(deadline, time.monotonic() + WAIT_FOR_PEERS)
        else:
            got[rank] = _unpacked(value)
            stage[rank] = _("returned")
    for child in children:
        child.join(timeout=5)
        if child.is_alive():
            child.terminate()
    _raise_for_missing(got, failures, gone, stage, world, timeout)
    return [got[rank] for rank in range(world)]


def _raise_for_missing(got, failures, gone, stage, world, timeout):
    """What went wrong, when not every process returned: a process's own error before the errors of the peers
    that lost it; else the processes that exited without a word; else those still busy at the timeout."""
    if failures:
        raise min(failures, key=lambda f: (_peer_lost(f), f.rank)).error()
    if gone and len(got) < world:
        raise ChildProcessError(_("{doing}: it returned nothing").format(doing="; ".join(
            _("process {rank} exited with code {code} while {stage}").format(rank=rank, code=code, stage=stage[rank])
            for rank, code in gone.items())))
    if len(got) < world:
        late = [rank for rank in range(world) if rank not in got]
        raise TimeoutError(_("{count} of {world} processes returned nothing within {timeout} s ({doing}); a machine "
                             "this busy may need a longer timeout=").format(
            count=len(late), world=world, timeout=timeout,
            doing="; ".join(_("process {rank}: {stage}").format(rank=rank, stage=stage[rank]) for rank in late)))
