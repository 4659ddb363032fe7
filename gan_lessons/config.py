"""What a training run is asked to do (TrainConfig), checked before anything runs: each wrong setting raises a
ConfigError that says what to change, naming the setting as TrainConfig's field (the command line rewords it as
its flag, gan_lessons.wording)."""
import math
from dataclasses import dataclass

import torch

from gan_lessons import data, strategies
from gan_lessons.i18n import N_, _
from gan_lessons.wording import worded


class ConfigError(ValueError):
    """A setting that cannot work; the message says what to change."""


@dataclass
class TrainConfig:
    epochs: int = 20
    batch_size: int = 64
    lr_G: float = 2e-4
    lr_D: float = 2e-4
    beta1: float = 0.5
    beta2: float = 0.999
    z_dim: int = 64
    tanh: bool = True             # end G with Tanh (seed 000's G has none: False trains it as written)
    strategy: str = "d_first_reuse_fake"
    n_critic: int = 5             # wgan_gp: critic steps per G step
    gp_weight: float = 10.0       # wgan_gp: the gradient penalty's weight
    seed: int = 0
    device: str = "auto"          # "auto", "cpu", "cuda", "cuda:1", ...
    out: str = "runs/mnist"
    data: str = data.DEFAULT_ROOT
    limit: int | None = None      # use only the first `limit` training images (quick mode, tests)
    fast: bool = False            # torch.compile G and D

    def validate(self) -> "TrainConfig":
        if not isinstance(self.epochs, int) or self.epochs <= 0:
            raise ConfigError(_("epochs must be a positive whole number, got {value}").format(value=repr(self.epochs)))
        if not isinstance(self.batch_size, int) or self.batch_size <= 1:
            raise ConfigError(_("batch size must be a whole number above 1 (BatchNorm needs 2), got {value}").format(
                value=repr(self.batch_size)))
        # the setting stands in braces: {lr_G} (gan_lessons.wording), so each field has a whole template of its own
        for field, template in (("lr_G", N_("{lr_G} must be a finite number above 0, got {value}")),
                                ("lr_D", N_("{lr_D} must be a finite number above 0, got {value}"))):
            lr = getattr(self, field)
            if not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
                raise worded(ConfigError, _(template), value=repr(lr))
        for field, template in (
                ("beta1", N_("{beta1} must be a number from 0 up to (not including) 1, got {value} (Adam's betas: 0.5 "
                             "and 0.999 here; WGAN-GP's paper uses 0 and 0.9)")),
                ("beta2", N_("{beta2} must be a number from 0 up to (not including) 1, got {value} (Adam's betas: 0.5 "
                             "and 0.999 here; WGAN-GP's paper uses 0 and 0.9)"))):
            beta = getattr(self, field)
            if not isinstance(beta, (int, float)) or not 0 <= beta < 1:
                raise worded(ConfigError, _(template), value=repr(beta))
        if isinstance(self.n_critic, bool) or not isinstance(self.n_critic, int) or self.n_critic <= 0:
            raise worded(ConfigError, _("{n_critic} must be a positive whole number (critic steps per G step), got "
                                        "{value}"), value=repr(self.n_critic))
        if not isinstance(self.gp_weight, (int, float)) or not math.isfinite(self.gp_weight) or self.gp_weight < 0:
            raise worded(ConfigError, _("{gp_weight} must be a finite number, 0 or above (0 turns the penalty off; "
                                        "the paper uses 10), got {value}"), value=repr(self.gp_weight))
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**63 - 4:
            raise worded(ConfigError, _("{seed} must be a whole number from 0 to 2**63 - 5, got {value}"),
                         value=repr(self.seed))
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
