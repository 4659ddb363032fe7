"""Files written whole or not at all, and read back as data (lesson 06): atomic writes, checkpoints, and the files of
a training run, which no other command may replace. The trainer, the plots and the command line all write through
here."""
import os
from pathlib import Path

import torch

from gan_lessons.i18n import N_, _
from gan_lessons.wording import reword, worded

# What `python -m gan_lessons train` writes into its run folder (besides grid_NNN.png, one per epoch).
RUN_FILES = ("last.pt", "metrics.json", "eval.jsonl", "progress.gif", "losses.png")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read (or a file that cannot be written); the message names the file."""


# What a full disk's message ends with; it stands in the template as {free_space}, worded like a setting, so that the
# command line can say more (gan_lessons.__main__.WORDS).
FREE_SPACE = N_("free some disk space and try again")
ANOTHER_CHECKPOINT = N_("delete it, or give another checkpoint")        # load_checkpoint's usual remedy


def atomic_write(path, write) -> None:
    """write(tmp) to a temporary file beside `path`, then rename it over `path`: a crash, a Ctrl-C or a full disk
    never leaves half a file, and the old file stays as it was until the new one is complete."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        reason = error.strerror or error
        if path.exists():
            failed = worded(CheckpointError, _("could not write {path} ({reason}); the old {name} is unchanged; "
                                               "{free_space}"), path=path, reason=reason, name=path.name)
        else:
            failed = worded(CheckpointError, _("could not write {path} ({reason}); {free_space}"), path=path,
                            reason=reason)
        failed.args = (reword(failed, {"free_space": _(FREE_SPACE)}),)      # the library's own words for it
        raise failed from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def save_checkpoint(path: Path, state: dict) -> None:
    """torch.save, atomically (atomic_write)."""
    atomic_write(path, lambda tmp: torch.save(state, tmp))


def load_checkpoint(path, remedy=ANOTHER_CHECKPOINT) -> dict:
    """torch.load(weights_only=True): a checkpoint is data, never code. `remedy` ends the message of an unreadable
    one (it may name settings, as gan_lessons.wording's templates do; marked with N_, it is translated here)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(_("no checkpoint at {path}").format(path=path))
    if path.is_dir():
        raise CheckpointError(_("{path} is a folder; give the checkpoint in it ({inside})").format(
            path=path, inside=path / "last.pt"))
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise worded(CheckpointError, _("{path} is not a readable checkpoint: corrupt, truncated, or not one "
                                        "({kind}); ") + _(remedy), path=path, kind=type(error).__name__) from None


def is_run_file(path: Path) -> bool:
    """A file `train` wrote (or a training checkpoint anywhere): no other command may replace it."""
    if path.name in RUN_FILES or (path.name.startswith("grid_") and path.suffix == ".png"):
        return True
    try:
        state = torch.load(path, map_location="cpu", weights_only=True) if path.suffix == ".pt" else None
    except Exception:
        return False
    return isinstance(state, dict) and "opt_D" in state
