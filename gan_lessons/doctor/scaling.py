"""Mixed precision's loss scaling, watched: a gradient clipped while GradScaler's scale still multiplies it.

With a GradScaler, `scaler.scale(loss).backward()` leaves every gradient multiplied by the scale (65536 at first),
and `scaler.step(opt)` divides it out just before the step. A clip between the two (clip_grad_norm_,
clip_grad_value_) compares the scaled gradients with max_norm: it cuts nearly every step down to max_norm / scale
of its size, and nothing raises. PyTorch's recipe calls `scaler.unscale_(opt)` before the clip.

While a doctor block runs, GradScaler's scale, unscale_ and update, and torch.nn.utils' two clip functions, are
wrapped (the originals run unchanged, with the same arguments); a clip of parameters whose optimizer a scaler has
not unscaled since it scaled a loss is warned once, at the clip's line."""
import functools
import weakref

import torch
from torch.amp import GradScaler
from torch.nn import utils as nn_utils
from torch.nn.utils import clip_grad

from gan_lessons.doctor.frames import user_frame
from gan_lessons.i18n import _

_CLIPS = ("clip_grad_norm_", "clip_grad_value_")


class ScalingWatch:
    """While installed: which scalers scaled a loss since their last update(), and for which optimizers each has
    unscaled the gradients since; a clip in between is told to `warn(summary, facts, fixes, key)`."""

    def __init__(self, namer, warn):
        self.namer, self.warn = namer, warn
        self.scaled: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # scaler: ids of unscaled optimizers
        self.saved: list = []

    def install(self):
        watch = self

        def scale(original, scaler, outputs):
            if scaler.is_enabled():
                watch.scaled.setdefault(scaler, set())
            return original(scaler, outputs)

        def unscale_(original, scaler, optimizer):
            watch.scaled.setdefault(scaler, set()).add(id(optimizer))
            return original(scaler, optimizer)

        def update(original, scaler, *args, **kwargs):
            watch.scaled.pop(scaler, None)
            return original(scaler, *args, **kwargs)

        def clip(original, parameters, *args, **kwargs):
            if watch.scaled:
                parameters = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
                watch.check_clip(original.__name__, parameters)
            return original(parameters, *args, **kwargs)
        for owner, name, wrapper in [(GradScaler, "scale", scale), (GradScaler, "unscale_", unscale_),
                                     (GradScaler, "update", update)] + [
                (module, name, clip) for module in (nn_utils, clip_grad) for name in _CLIPS]:
            original = getattr(owner, name)
            self.saved.append((owner, name, original))
            setattr(owner, name, _wrapped(wrapper, original))

    def uninstall(self):
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)
        self.saved.clear()
        self.scaled = weakref.WeakKeyDictionary()

    def check_clip(self, function, parameters):
        clipped = {id(p) for p in parameters if isinstance(p, torch.Tensor) and p.grad is not None}
        if not clipped:
            return
        for scaler, unscaled in list(self.scaled.items()):
            stepping = [o for o in self.namer.known_optimizers() if id(o) not in unscaled
                        and any(id(p) in clipped for g in o.param_groups for p in g["params"])]
            if stepping:
                name = self.namer.optimizer_name(stepping[0])
                self.warn(_("{function} clipped gradients that GradScaler's scale ({scale:g}) still multiplies: a "
                            "loss was scaled since the last scaler.update(), and scaler.unscale_({optimizer}) has "
                            "not run since, so the clip compared scaled gradients with its limit").format(
                              function=function, scale=scaler.get_scale(), optimizer=name),
                          {"where": user_frame()},
                          [(_("call scaler.unscale_({optimizer}) right before the clip: scaler.step({optimizer}) "
                              "then knows they are unscaled already").format(optimizer=name), "10")],
                          key=("clip while scaled", function))
                return


def _wrapped(wrapper, original):
    """A function (a method, once set on a class) that calls wrapper(original, *args, **kwargs)."""
    @functools.wraps(original)
    def call(*args, **kwargs):
        return wrapper(original, *args, **kwargs)
    return call
