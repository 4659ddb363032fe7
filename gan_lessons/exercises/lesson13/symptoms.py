"""What a user of a lab's step meets when nothing raises: the training log. Each loss a backward starts from, call
by call (unscaled, as `loss.item()` would print it), and a GradScaler's scale after each call, next to the same log
of the reference fix run on the same models and batches."""
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode

from gan_lessons.exercises.lesson13.grading import LABS
from gan_lessons.i18n import Text, _, width


@dataclass
class Log:
    """One run of a lab's step: losses[call] lists the value of each loss a backward started from in that call;
    scales[call] is the scaler's scale after it (empty for a lab without one); error is what the run raised."""
    losses: list = field(default_factory=list)
    scales: list = field(default_factory=list)
    error: str = ""


class _Backwards(TorchFunctionMode):
    """Notes the value of every scalar a `.backward()` starts from (times the gradient it is given, as
    `loss.backward(mone)` backs from -loss), divided by the scale when a scaler made it."""

    def __init__(self, log, scaled):
        super().__init__()
        self.log, self.scaled = log, scaled

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.backward and args and args[0].numel() == 1:
            value = args[0].detach().float().item()
            given = args[1] if len(args) > 1 else (kwargs or {}).get("gradient")
            if isinstance(given, torch.Tensor) and given.numel() == 1:
                value *= given.item()
            value /= self.scaled.get(id(args[0]), 1.0)
            self.log.losses[-1].append(value)
        return func(*args, **(kwargs or {}))


def _problem(name, make_critic):
    if name == "wgan_gp":
        from gan_lessons.exercises.lesson13.wgan_gp import Discriminator, wgan_problem
        return wgan_problem(make_critic or Discriminator)
    return LABS[name].problem()


def training_log(name, step, make_critic=None, calls=None):
    """The log of `step` run as the lab's grader runs it (the same models, batches and number of calls)."""
    args, _opts, _names, state = _problem(name, make_critic)
    scaler, scaled, log = state.get("scaler"), {}, Log()
    if scaler is not None:
        scale = scaler.scale

        def noting(outputs):
            out = scale(outputs)
            if isinstance(out, torch.Tensor):
                scaled[id(out)] = scaler.get_scale()
            return out
        scaler.scale = noting
    with _Backwards(log, scaled):
        for k in range(calls or (3 if name == "wgan_gp" else LABS[name].calls)):
            torch.manual_seed(100 + k)
            log.losses.append([])
            try:
                step(*args(k))
            except Exception as error:  # shown in the log
                log.error = _("{kind} at call {call}").format(kind=type(error).__name__, call=k + 1)
                break
            finally:
                if scaler is not None:
                    log.scales.append(scaler.get_scale())
    return log


def reference_log(name):
    """The log of the lab's reference fix."""
    if name == "wgan_gp":
        from gan_lessons.exercises.lesson13.wgan_gp import reference_make_critic, reference_train_critic
        return training_log(name, reference_train_critic, reference_make_critic)
    return training_log(name, LABS[name].reference)


def show_log(name, step, make_critic=None):
    """Print the step's log next to the reference fix's, call by call, to 4 significant digits; returns both."""
    mine, ref = training_log(name, step, make_critic), reference_log(name)
    header = [_("call"), _("backward"), _("as written"), _("reference fix")] + ([_("scale after")] if ref.scales else [])
    rows = []
    for k, (got, want) in enumerate(zip(mine.losses, ref.losses), 1):
        for j in range(max(len(got), len(want))):
            cells = [str(k), str(j + 1), f"{got[j]:.4g}" if j < len(got) else "-", f"{want[j]:.4g}" if j < len(want)
                     else "-"]
            if ref.scales:
                last = j == max(len(got), len(want)) - 1
                cells.append(f"{mine.scales[k - 1]:g} / {ref.scales[k - 1]:g}" if last and k <= len(mine.scales)
                             else "")
            rows.append(cells)
    widths = [max(width(r[i]) for r in [header] + rows) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(f"{Text(c):<{w}}" for c, w in zip(r, widths)).rstrip())
    if mine.error:
        print(_("the step as written raised {error}").format(error=mine.error))
    return mine, ref
