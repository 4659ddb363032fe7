"""The doctor under torchrun: every process runs the script and is diagnosed, and each diagnosis is said once.

Processes that train together run the same code and usually meet the same bug, so N processes would print N copies
of one diagnosis. Before a process says something, it claims the text in a folder that every process torchrun
started on this machine shares (the run's id and the launching agent's pid name it): the first to create the
text's file says it, the others stay quiet. Rank 0 claims at once and the others a moment later, so rank 0 says
what all of them found, and another rank says only what rank 0 did not find (named with its rank). One machine's
processes share the folder; on several machines, each machine's processes say it once."""
import hashlib
import os
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


def _folder() -> str:
    run = os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("MASTER_PORT") or "run"
    name = "".join(c for c in f"gan_lessons_doctor_{run}_{os.getppid()}" if c.isalnum() or c in "_-")
    return os.path.join(tempfile.gettempdir(), name)


def first_to_say(text: str) -> bool:
    """Whether this process is the first of its run to say `text` (always, with one process)."""
    r = rank()
    if r is None:
        return True
    if r:
        time.sleep(LATER)
    folder = _folder()
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
