"""What a training run is asked to do (TrainConfig), checked before anything runs: each wrong setting raises a
ConfigError that says what to change, naming the setting as TrainConfig's field (the command line rewords it as
its flag, gan_lessons.wording)."""
import math
from dataclasses import dataclass, field

import torch

from gan_lessons import data, strategies
from gan_lessons.i18n import N_, _
from gan_lessons.wording import worded


class ConfigError(ValueError):
    """A setting that cannot work; the message says what to change."""


def option(default, flag: str, help: str, kind: str):
    """A TrainConfig field that is also one of `train`'s flags, declared once: the flag, its help line (marked for
    translation; `{default}` and `{names}` are filled where it is shown) and how the command line reads it (kind:
    "positive", "seed", "float" or "text", or "off" / "on" for a switch that sets the field False / True)."""
    return field(default=default, metadata={"flag": flag, "help": help, "kind": kind})


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass
class TrainConfig:
    epochs: int = option(20, "--epochs", N_("passes over the training images (default {default})"), "positive")
    batch_size: int = option(64, "--batch-size", N_("images per step, 2 or more for BatchNorm (default {default})"),
                             "positive")
    lr_G: float = option(2e-4, "--lr-g", N_("G's learning rate, Adam's (default {default})"), "float")
    lr_D: float = option(2e-4, "--lr-d", N_("D's learning rate, Adam's (default {default})"), "float")
    beta1: float = option(0.5, "--beta1", N_("Adam's beta1, in [0, 1) (WGAN-GP's paper: 0)"), "float")
    beta2: float = option(0.999, "--beta2", N_("Adam's beta2, in [0, 1) (WGAN-GP's paper: 0.9)"), "float")
    z_dim: int = 64
    tanh: bool = option(True, "--no-tanh", N_("train seed 000's G as written, with no final Tanh (one run of it "
                                              "trained badly: lesson 06)"), "off")
    strategy: str = option("d_first_reuse_fake", "--strategy", N_("one of: {names}"), "text")
    n_critic: int = option(5, "--n-critic", N_("wgan_gp: critic steps per G step (its paper: 5, with --lr-g/--lr-d "
                                               "1e-4, --beta1 0 --beta2 0.9)"), "positive")
    gp_weight: float = option(10.0, "--gp-weight",
                              N_("wgan_gp: the gradient penalty's weight, 0 or above (its paper: 10)"), "float")
    seed: int = option(0, "--seed", N_("random seed: the same seed and settings give the same run (default "
                                       "{default})"), "seed")
    device: str = option("auto", "--device", N_("auto (a GPU if there is one), cpu, cuda or cuda:N (default "
                                                "{default})"), "text")
    out: str = option("runs/mnist", "--out", N_("the run's folder: checkpoints, samples, metrics (default "
                                                "{default})"), "text")
    data: str = option(data.DEFAULT_ROOT, "--data", N_("the folder MNIST is kept in (downloaded there if missing)"),
                       "text")
    limit: int | None = option(None, "--limit", N_("train on the first N images only"), "positive")
    fast: bool = option(False, "--fast", N_("on a GPU, record the whole step once as a CUDA graph and replay it; on "
                                            "the CPU, torch.compile G and D"), "on")

    def validate(self) -> "TrainConfig":
        for name, holds, template in RULES:
            value = getattr(self, name)
            if not holds(value):
                raise worded(ConfigError, _(template), value=repr(value))
        if self.limit is not None and self.limit < self.batch_size:
            raise worded(ConfigError, _("{limit} ({n}) must be at least {batch_size} ({size})"), n=self.limit,
                         size=self.batch_size)
        try:
            strategies.get(self.strategy)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if self.strategy == "retain_graph_seed003":
            raise ConfigError(_("strategy 'retain_graph_seed003' raises the version error on torch >= 1.5 "
                                "(lesson 05); pick another one"))
        if self.fast and self.strategy == "wgan_gp":
            raise worded(ConfigError, _("{fast=True} cannot train wgan_gp: torch.compile does not support the double "
                                        "backward of its gradient penalty; drop {fast=True}"))
        resolve_device(self.device)
        return self


# What each setting must be, one row each: the field, the test, the message (the setting in braces, worded for its
# reader by gan_lessons.wording: `epochs` for a Python caller, `--epochs` on the command line).
RULES = (
    ("epochs", lambda v: _whole(v) and v > 0, N_("{epochs} must be a positive whole number, got {value}")),
    ("batch_size", lambda v: _whole(v) and v > 1,
     N_("{batch_size} must be a whole number above 1 (BatchNorm needs 2), got {value}")),
    ("lr_G", lambda v: _number(v) and v > 0, N_("{lr_G} must be a finite number above 0, got {value}")),
    ("lr_D", lambda v: _number(v) and v > 0, N_("{lr_D} must be a finite number above 0, got {value}")),
    ("beta1", lambda v: _number(v) and 0 <= v < 1,
     N_("{beta1} must be a number from 0 up to (not including) 1, got {value} (Adam's betas: 0.5 and 0.999 here; "
        "WGAN-GP's paper uses 0 and 0.9)")),
    ("beta2", lambda v: _number(v) and 0 <= v < 1,
     N_("{beta2} must be a number from 0 up to (not including) 1, got {value} (Adam's betas: 0.5 and 0.999 here; "
        "WGAN-GP's paper uses 0 and 0.9)")),
    ("n_critic", lambda v: _whole(v) and v > 0,
     N_("{n_critic} must be a positive whole number (critic steps per G step), got {value}")),
    ("gp_weight", lambda v: _number(v) and v >= 0,
     N_("{gp_weight} must be a finite number, 0 or above (0 turns the penalty off; the paper uses 10), got "
        "{value}")),
    ("seed", lambda v: _whole(v) and 0 <= v < 2**63 - 4, N_("{seed} must be a whole number from 0 to 2**63 - 5, got "
                                                            "{value}")),
    ("limit", lambda v: v is None or (_whole(v) and v > 0),
     N_("{limit} must be a positive whole number of images, got {value}")),
)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(_("unknown device {name}; use auto, cpu or cuda").format(name=repr(name))) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise worded(ConfigError, _("{device} {name} asked for, but this machine has no CUDA GPU; use {device} cpu"),
                     name=name)
    if device.type not in ("cpu", "cuda"):
        raise worded(ConfigError, _("{device} {name}: this trainer runs on cpu or cuda only; use {device} cpu or "
                                    "cuda"), name=name)
    return device
