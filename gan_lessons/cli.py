"""The command line's words: its parser (made at each call, in the language in use), the argument types that
refuse bad values in one line, and the flags that stand for TrainConfig's fields in messages. The commands
themselves are in gan_lessons/__main__.py."""
import argparse
import re
from contextlib import contextmanager
from dataclasses import fields

from gan_lessons import metrics, strategies, training
from gan_lessons.doctor import script
from gan_lessons.i18n import N_, _, width


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


# Chinese typesetting: a line never starts with closing punctuation, nor ends with an opening one.
CLOSING, OPENING = "）」』】〕〉》，。；：、！？”’…", "（「『【〔〈《“‘"


def wrap(text: str, columns: int) -> list:
    """Lines of at most `columns` terminal columns: break at spaces, or between two Chinese characters, never
    before a closing mark or after an opening one (they stay with the character they belong to)."""
    wide = "\u2e80-\u9fff\uff00-\uffef\u2018-\u201d\u2026"
    pieces = re.findall(rf"[{OPENING}]*(?:[{wide}]|[^\s{wide}]+)[{CLOSING}]*|\s+", " ".join(text.split()))
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

    def format_help(self):          # a Chinese section's heading ends in a full-width colon: 选项：
        return re.sub(r"^([\u4e00-\u9fff]+):$", r"\1：", super().format_help(), flags=re.M)

    def error(self, message):
        command = self.prog.split()[-1] if self.prog != "python -m gan_lessons" else ""
        self.exit(2, (_("error: {message} (see: python -m gan_lessons {command} --help)").format(
            message=message, command=command) + "\n").replace("  ", " "))


MAX_SAMPLES = 1_000_000
# How the command line reads a TrainConfig field, by the kind its option() declares.
KINDS = {"positive": positive_int, "seed": seed_int, "float": float, "text": str}
SWITCHES = {"on": "store_true", "off": "store_false"}

# The library's messages name each setting as a Python caller does (gan_lessons.wording); the command line says
# these words instead. The one sentence among them (files.FREE_SPACE's) is translated where it is used: words().
WORDS = {**{f.name: f.metadata["flag"] for f in fields(training.TrainConfig) if f.metadata},
         "fast=True": "--fast", "resume=True": "--resume",
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
    for f in fields(training.TrainConfig):          # one flag per field that declares one (config.option)
        if not f.metadata:
            continue
        flag, kind, note = f.metadata["flag"], f.metadata["kind"], f.metadata["help"]
        text = _(note).format(default=f.default, names=", ".join(strategies.ALL))
        if kind in SWITCHES:
            t.add_argument(flag, dest=f.name, action=SWITCHES[kind], help=text)
        else:
            t.add_argument(flag, dest=f.name, type=KINDS[kind], default=f.default, metavar=f.name.upper(), help=text)
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
