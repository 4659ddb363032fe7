"""Several processes from a notebook (lesson 13): run one function of this package in `world` fresh processes that
form a gloo process group on this machine, as torchrun would start them, and bring back what each returned.

    results = processes.run(ddp_lesson.averaged, world=2)      # one value per rank, rank 0 first

The processes are started with "spawn" (a fresh interpreter each: what Jupyter and Colab need, since a kernel's own
functions cannot be sent to a forked child safely), so the function must live in an importable module; a student's
function is sent as its source (`source=`). If a process raises, run() raises the same kind of error with the same
message, with `.rank` set: the lowest rank's, an error that only says a peer went away coming last. A process that
hangs (its peer gone) is stopped at `timeout`."""
import builtins
import os
import queue
import socket
import threading
from dataclasses import dataclass

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
        kind = getattr(builtins, self.kind, None) if self.module == "builtins" else None
        if kind is None:
            try:
                kind = getattr(__import__(self.module, fromlist=[self.kind]), self.kind)
                kind(self.message)
            except Exception:
                kind = RuntimeError
        error = kind(self.message)
        error.rank = self.rank
        return error


def _peer_lost(failure) -> bool:
    """Whether a process failed only because another one went away (what gloo and NCCL say then)."""
    return "Dist" in failure.kind or any(w in failure.message for w in ("closed by peer", "reset by peer",
                                                                          "Connection refused"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(rank, world, port, results, module, name, kwargs):
    """One process: join the group, call module.name(rank, world, **kwargs), send back its value or its error."""
    import warnings

    import torch.distributed as dist
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 2)                     # torch's own warnings (C++ and Python) would land in the notebook, with
    warnings.simplefilter("ignore")       # timestamps: what a process has to say comes back through `results`
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        function = getattr(__import__(module, fromlist=[name]), name)
        results.put((rank, function(rank, world, **kwargs)))
    except BaseException as error:        # sent to the notebook, which raises it there
        results.put((rank, Failure(rank, type(error).__module__, type(error).__name__, str(error))))
        os._exit(0)                       # no teardown: a peer may be waiting in a collective that will not come
    dist.barrier()
    dist.destroy_process_group()


def run(function, world=2, timeout=120, **kwargs) -> list:
    """function(rank, world, **kwargs) in `world` processes; the list of what each returned, rank 0 first."""
    ctx = mp.get_context("spawn")
    results, port = ctx.SimpleQueue(), _free_port()
    children = [ctx.Process(target=_child, args=(rank, world, port, results, function.__module__,
                                                  function.__name__, kwargs), daemon=True) for rank in range(world)]
    for child in children:
        child.start()
    got, failures = {}, []
    pipe = queue.Queue()

    def reader():
        for _i in range(world):
            pipe.put(results.get())
    threading.Thread(target=reader, daemon=True).start()
    wait = timeout
    while len(got) + len(failures) < world:
        try:
            rank, value = pipe.get(timeout=wait)
        except queue.Empty:
            break
        if isinstance(value, Failure):
            failures.append(value)
            wait = WAIT_FOR_PEERS
        else:
            got[rank] = value
    for child in children:
        child.join(timeout=5)
        if child.is_alive():
            child.terminate()
    if failures:          # a process's own error before the errors of the peers that lost it
        raise min(failures, key=lambda f: (_peer_lost(f), f.rank)).error()
    if len(got) < world:
        raise TimeoutError(_("{count} of {world} processes returned nothing within {timeout} s").format(
            count=world - len(got), world=world, timeout=timeout))
    return [got[rank] for rank in range(world)]
