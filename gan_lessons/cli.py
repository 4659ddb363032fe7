"""The command line's words: its parser (made at each call, in the language in use), the argument types that
refuse bad values in one line, and the flags that stand for TrainConfig's fields in messages. The commands
themselves are in gan_lessons/__main__.py."""
import argparse
import re
import unicodedata
from contextlib import contextmanager

from gan_lessons import metrics, strategies, training
from gan_lessons.doctor import script
from gan_lessons.i18n import N_, _


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(_("{text} is not a whole number").format(text=repr(text))) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(_("must be positive, got {value}").format(value=value))
    return value


def seed_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(_("{text} is not a whole number").format(text=repr(text))) from None
    if not 0 <= value < 2**63 - 4:
        raise argparse.ArgumentTypeError(_("must be from 0 to 2**63 - 5, got {value}").format(value=value))
    return value


def seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(_("{text} is not a number of seconds").format(text=repr(text))) from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(_("must be positive, got {value}").format(value=text))
    return value


# argparse's own words, as Python's argparse asks gettext for them; speaking() answers from this package's catalog,
# so that a Chinese --help or error has no English of argparse's in it.
ARGPARSE_WORDS = (N_("usage: "), N_("options"), N_("positional arguments"), N_("show this help message and exit"),
                  N_("argument %(argument_name)s: %(message)s"), N_("invalid %(type)s value: %(value)r"),
                  N_("invalid choice: %(value)r (choose from %(choices)s)"),
                  N_("the following arguments are required: %s"), N_("unrecognized arguments: %s"),
                  N_("expected one argument"), N_("expected at least one argument"), N_("expected at most one argument"),
                  N_("ambiguous option: %(option)s could match %(matches)s"), N_("not allowed with argument %s"),
                  N_("ignored explicit argument %r"), N_("one of the arguments %s is required"))


@contextmanager
def speaking():
    """argparse's own words in the language in use, inside the block (parsing, --help, errors)."""
    saved = argparse._, argparse.ngettext
    argparse._ = _
    argparse.ngettext = lambda singular, plural, n: _(singular) if n == 1 else _(plural)
    try:
        yield
    finally:
        argparse._, argparse.ngettext = saved


def width(text: str) -> int:
    """Columns a terminal gives the text: two for a wide (Chinese) character, one for the rest."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def wrap(text: str, columns: int) -> list:
    """Lines of at most `columns` terminal columns: break at spaces, or between two Chinese characters."""
    wide = "\u2e80-\u9fff\uff00-\uffef"
    pieces = re.findall(rf"[{wide}]|[^\s{wide}]+|\s+", " ".join(text.split()))
    lines, line = [], ""
    for piece in pieces:
        if line and width((line + piece).rstrip()) > columns and not piece.isspace():
            lines.append(line.rstrip())
            line = ""
        if not (piece.isspace() and not line):
            line += piece
    return lines + ([line.rstrip()] if line.strip() else [])


class Formatter(argparse.HelpFormatter):
    """argparse's help, wrapped by the columns a terminal gives each character (a Chinese one takes two)."""

    def _split_lines(self, text, columns):
        return wrap(text, columns)

    def _fill_text(self, text, columns, indent):
        return "\n".join(indent + line for line in wrap(text, columns - len(indent)))


class Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported on one line that says where the help is, and help text wrapped by
    display width (Formatter)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        command = self.prog.split()[-1] if self.prog != "python -m gan_lessons" else ""
        self.exit(2, (_("error: {message} (see: python -m gan_lessons {command} --help)").format(
            message=message, command=command) + "\n").replace("  ", " "))


MAX_SAMPLES = 1_000_000

# The library's messages name each setting as a Python caller does (gan_lessons.wording); the command line says
# these words instead. The one sentence among them (files.FREE_SPACE's) is translated where it is used: words().
WORDS = {"epochs": "--epochs", "batch_size": "--batch-size", "lr_G": "--lr-g", "lr_D": "--lr-d", "beta1": "--beta1",
         "beta2": "--beta2", "n_critic": "--n-critic", "gp_weight": "--gp-weight", "seed": "--seed",
         "device": "--device", "out": "--out", "limit": "--limit", "fast=True": "--fast", "resume=True": "--resume",
         "free_space": N_("free some disk space (or choose another --out) and run the command again")}


def words() -> dict:
    """WORDS in the language in use (a flag translates to itself)."""
    return {key: _(word) for key, word in WORDS.items()}


def parser():
    """The command line's parser, its help in the language in use (made at each call, never at import)."""
    p = Parser(prog="python -m gan_lessons", description=_(
        "Command line: python -m gan_lessons {commands} (lesson 06), and python -m gan_lessons doctor SCRIPT "
        "(lesson 07).").format(commands="{train, sample, evaluate, export, classifier}"))
    sub = p.add_subparsers(dest="command", required=True)
    d = training.TrainConfig()
    t = sub.add_parser("train", help=_("train seed 000's GAN on MNIST"))
    t.add_argument("--epochs", type=positive_int, default=d.epochs,
                   help=_("passes over the training images (default {default})").format(default=d.epochs))
    t.add_argument("--batch-size", type=positive_int, default=d.batch_size,
                   help=_("images per step, 2 or more for BatchNorm (default {default})").format(default=d.batch_size))
    t.add_argument("--strategy", default=d.strategy, help=_("one of: {names}").format(names=", ".join(strategies.ALL)))
    t.add_argument("--lr-g", type=float, default=d.lr_G,
                   help=_("G's learning rate, Adam's (default {default})").format(default=d.lr_G))
    t.add_argument("--lr-d", type=float, default=d.lr_D,
                   help=_("D's learning rate, Adam's (default {default})").format(default=d.lr_D))
    t.add_argument("--beta1", type=float, default=d.beta1, help=_("Adam's beta1, in [0, 1) (WGAN-GP's paper: 0)"))
    t.add_argument("--beta2", type=float, default=d.beta2, help=_("Adam's beta2, in [0, 1) (WGAN-GP's paper: 0.9)"))
    t.add_argument("--n-critic", type=positive_int, default=d.n_critic,
                   help=_("wgan_gp: critic steps per G step (its paper: 5, with --lr-g/--lr-d 1e-4, --beta1 0 "
                          "--beta2 0.9)"))
    t.add_argument("--gp-weight", type=float, default=d.gp_weight,
                   help=_("wgan_gp: the gradient penalty's weight, 0 or above (its paper: 10)"))
    t.add_argument("--no-tanh", dest="tanh", action="store_false",
                   help=_("train seed 000's G as written, with no final Tanh (one run of it trained badly: "
                          "lesson 06)"))
    t.add_argument("--seed", type=seed_int, default=d.seed,
                   help=_("random seed: the same seed and settings give the same run (default {default})").format(
                       default=d.seed))
    t.add_argument("--device", default=d.device,
                   help=_("auto (a GPU if there is one), cpu, cuda or cuda:N (default {default})").format(
                       default=d.device))
    t.add_argument("--out", default=d.out,
                   help=_("the run's folder: checkpoints, samples, metrics (default {default})").format(default=d.out))
    t.add_argument("--data", default=d.data, help=_("the folder MNIST is kept in (downloaded there if missing)"))
    t.add_argument("--limit", type=positive_int, default=None, help=_("train on the first N images only"))
    t.add_argument("--fast", action="store_true", help=_("torch.compile G and D"))
    t.add_argument("--resume", action="store_true", help=_("continue from OUT/last.pt"))
    t.add_argument("--restart", action="store_true",
                   help=_("start over in an OUT that holds a run (replaces its files)"))
    t.add_argument("--eval-samples", type=int, default=10000, help=_("samples for the metrics at the end (0: skip)"))
    t.add_argument("--eval-each", type=int, default=0, metavar="N",
                   help=_("after every epoch, score N samples (MNIST-FID, coverage) into OUT/eval.jsonl; not counted "
                          "in the epoch times"))
    t.add_argument("--time-limit", type=seconds, default=None, metavar="SECONDS",
                   help=_("stop at the end of an epoch once the next one would end more than SECONDS after the "
                          "start (judged by the slowest epoch so far); continue later with --resume"))
    t.add_argument("--no-progress", action="store_true", help=_("no progress bar (a log or CI)"))
    s = sub.add_parser("sample", help=_("write N generated images from a checkpoint to .npz or .pt"))
    s.add_argument("checkpoint")
    s.add_argument("-n", type=positive_int, default=64)
    s.add_argument("--out", default="samples.npz")
    s.add_argument("--seed", type=seed_int, default=0)
    e = sub.add_parser("evaluate", help=_("MNIST-FID, classifier score and coverage of a checkpoint"))
    e.add_argument("checkpoint")
    e.add_argument("-n", type=positive_int, default=10000)
    e.add_argument("--data", default=d.data)
    e.add_argument("--seed", type=seed_int, default=0)
    x = sub.add_parser("export",
                       help=_("ship a run's generator: half-precision weights plus a JSON record with metrics"))
    x.add_argument("run", help=_("a folder written by `train` (last.pt, metrics.json)"))
    x.add_argument("--out", default=str(metrics.ASSETS / "generator.pt"))
    x.add_argument("-n", type=positive_int, default=10000)
    x.add_argument("--data", default=d.data)
    c = sub.add_parser("classifier", help=_("train the metric's classifier and write gan_lessons/assets/"))
    c.add_argument("--data", default=d.data)
    c.add_argument("--epochs", type=positive_int, default=4)
    r = sub.add_parser("doctor", help=_("run a Python script under the autograd doctor (lesson 07)"),
                       usage="python -m gan_lessons doctor [-h] [--strict] (SCRIPT|-m MODULE) [ARGS...]",
                       description=_("Run SCRIPT (or MODULE) as `python SCRIPT ARGS` would, under the autograd "
                                     "doctor: on one of the autograd errors of lessons 01-04 and 08 it prints its "
                                     "diagnosis, then the usual traceback; it warns about the silent bugs it knows."),
                       epilog=_("exit status: the script's own when it ends cleanly; {error} when an error escapes "
                                "it (diagnosed or not); {bad_input} for no such script or module; {strict} with "
                                "--strict when the doctor warned").format(
                                    error=script.EXIT_ERROR, bad_input=script.EXIT_BAD_INPUT, strict=script.EXIT_STRICT))
    r.add_argument("script", nargs="?", metavar="SCRIPT",
                   help=_("the script to run, as `python SCRIPT ARGS` runs it"))
    r.add_argument("-m", dest="module", metavar="MODULE", help=_("run a module instead, as `python -m MODULE ARGS`"))
    r.add_argument("--strict", action="store_true",
                   help=_("exit {strict} if the doctor warned and the script would have exited 0 (a dry run in CI)")
                   .format(strict=script.EXIT_STRICT))
    r.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help=_("the script's own arguments, passed as they are"))
    return p


def split_doctor(argv):
    """`doctor`'s own options up to SCRIPT or -m MODULE, then the script's arguments, which are passed on verbatim
    (argparse would take a `--` or a `-h` meant for the script)."""
    if argv[:1] != ["doctor"]:
        return argv, []
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in ("-m", "--"):
            return argv[:i + 2], argv[i + 2:]
        if arg.startswith("-m"):                        # -mMODULE, as python takes it
            return argv[:i + 1], argv[i + 1:]
        if not arg.startswith("-") or arg == "-":
            return argv[:i + 1], argv[i + 1:]
        i += 1                                          # --strict, -h, or a mistake argparse will word
    return argv, []
