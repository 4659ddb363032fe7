"""The doctor under torchrun: every process runs the script and is diagnosed, and each diagnosis is said once.

Processes that train together run the same code and usually meet the same bug, so N processes would print N copies
of one diagnosis. Before a process says something, it claims the text in a folder that every process torchrun
started on this machine shares (the run's id and the launching agent's pid name it): the first to create the
text's file says it, the others stay quiet. Rank 0 claims at once and the others a moment later, so rank 0 says
what all of them found, and another rank says only what rank 0 did not find (named with its rank). One machine's
processes share the folder; on several machines, each machine's processes say it once.

The folder does not outlive the run: each process leaves its pid there when its doctor starts, and at exit the last
of the machine's processes (all have come, none other is alive) removes the folder. A folder left by a run whose
processes were killed (its launcher gone) is removed by the next run that uses one."""
import atexit
import hashlib
import os
import shutil
import sys
import tempfile
import time

from gan_lessons.i18n import _

LATER = 0.5          # seconds the other ranks wait before they claim a text, so that rank 0 claims first


def rank() -> int | None:
    """This process's rank when torchrun (or any launcher that sets WORLD_SIZE) started several, else None."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        return int(os.environ.get("RANK", "0")) if world > 1 else None
    except ValueError:
        return None


PREFIX = "gan_lessons_doctor_"


def _folder() -> str:
    run = os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("MASTER_PORT") or "run"
    name = "".join(c for c in f"{PREFIX}{run}_{os.getppid()}" if c.isalnum() or c in "_-")
    return os.path.join(tempfile.gettempdir(), name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _members(folder: str) -> list:
    try:
        return [int(n.split("_", 1)[1]) for n in os.listdir(folder) if n.startswith("pid_")]
    except (OSError, ValueError):
        return []


_joined: set = set()


def join() -> None:
    """Under torchrun, say that this process is one of the run's, for the folder's clean-up (the doctor does this when
    it starts, so that every process of the run has joined long before any of them leaves). Nothing with one
    process."""
    if rank() is None:
        return
    folder = _folder()
    if folder in _joined:
        return
    try:
        if not _joined:          # the first time: folders of earlier runs whose launcher is gone
            for old in os.listdir(tempfile.gettempdir()):
                launcher = old.rsplit("_", 1)[-1]
                if old.startswith(PREFIX) and launcher.isdigit() and not _alive(int(launcher)):
                    shutil.rmtree(os.path.join(tempfile.gettempdir(), old), ignore_errors=True)
        os.makedirs(folder, exist_ok=True)
        for mark in ("pid", "seen"):
            open(os.path.join(folder, f"{mark}_{os.getpid()}"), "w").close()
    except OSError:
        return
    _joined.add(folder)
    atexit.register(_leave, folder)


def _leave(folder: str) -> None:
    """At exit: the last of the run's processes on this machine (all have joined, none other alive) removes it."""
    try:
        os.unlink(os.path.join(folder, f"pid_{os.getpid()}"))
    except OSError:
        pass
    try:
        seen = sum(n.startswith("seen_") for n in os.listdir(folder))
    except OSError:
        return
    expected = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("WORLD_SIZE") or 1)
    if seen >= expected and not any(_alive(pid) for pid in _members(folder)):
        shutil.rmtree(folder, ignore_errors=True)


def first_to_say(text: str) -> bool:
    """Whether this process is the first of its run to say `text` (always, with one process)."""
    r = rank()
    if r is None:
        return True
    join()
    folder = _folder()
    if r:
        time.sleep(LATER)
    try:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(os.path.join(folder, hashlib.sha1(text.encode()).hexdigest()), os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return False
    except OSError:
        return True                # no shared folder: better said twice than not at all
    os.close(fd)
    return True


def said(text: str) -> str:
    """The text as this process says it: with its rank, under torchrun, when it is not rank 0."""
    r = rank()
    if not r:
        return text
    first, _sep, rest = text.partition("\n")
    return _("{line} [rank {rank}]").format(line=first, rank=r) + ("\n" + rest if rest else "")


def tell(text: str) -> None:
    """Print `text` on stderr, as this process says it, when it is the first of its run to say it."""
    if first_to_say(text):
        print(said(text), file=sys.stderr)
