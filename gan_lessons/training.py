"""One training loop for seed 000's MNIST GAN, with any strategy from gan_lessons.strategies (lesson 06).

The whole dataset sits on the device as uint8; each step indexes a batch, so there is no DataLoader and no
per-image PIL work. Losses stay on the device until the progress bar asks for them. Checkpoints are written
atomically every epoch and on Ctrl-C (gan_lessons.files), and hold every random state, so a resumed run ends with the
same weights as an uninterrupted one (on the CPU). Errors name the settings as TrainConfig's fields (lr_G) and
train's argument (resume=True); the command line rewords them as its flags (gan_lessons.wording). TrainConfig
and its checks live in gan_lessons.config."""
import dataclasses
import functools
import math
import os
import signal
import time
from pathlib import Path

import torch

from gan_lessons import capture, data, distributed, strategies
from gan_lessons.config import ConfigError, TrainConfig, resolve_device
from gan_lessons.files import load_checkpoint, save_checkpoint
from gan_lessons.generators import UNREADABLE_RUN, export_generator, generate, load_generator  # noqa: F401
from gan_lessons.i18n import _
from gan_lessons.models import Discriminator, Generator
from gan_lessons.wording import worded


class NonFinite(RuntimeError):
    """Training produced NaN or infinite losses or weights; nothing non-finite was saved."""


class PeerLost(RuntimeError):
    """Under torchrun, another process of the run stopped (it crashed or was killed); the last epoch's checkpoint
    is kept."""


# Where the notebooks put their runs: beside the MNIST cache, never inside the repository's notebooks/ folder.
RUNS = Path(os.environ.get("GAN_LESSONS_RUNS") or Path(data.DEFAULT_ROOT) / "runs")

def _writable(folder: Path) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise worded(ConfigError, _("cannot write to output folder {folder} ({reason}); choose another with {out}"),
                     folder=folder, reason=error.strerror) from None
    return folder




def _adam(net, lr, betas, **more):
    """Adam with its fused kernel (one kernel for all the parameters of a step, instead of a loop of calls) where
    this torch has one for the device (CUDA; the CPU since torch 2.4), else torch's default. On the 2-core CPU
    it halves the aten calls of a step and cuts a batch-2 step by about 40% (benchmarks/fixed_cost.py). `more`:
    capturable=True for a step recorded as a CUDA graph (gan_lessons.capture)."""
    try:
        return torch.optim.Adam(net.parameters(), lr=lr, betas=betas, fused=True, **more)
    except RuntimeError:                 # an older torch, or a device with no fused Adam
        return torch.optim.Adam(net.parameters(), lr=lr, betas=betas, **more)


def _mnist_once(root, ranks):
    """MNIST's training images; under several processes, the first process on each machine fetches them (when they
    are not there yet) while the others wait, so that no two download into the same folder at once."""
    first = ranks is None or ranks.local == 0
    if not first:
        distributed.barrier()
    try:
        images, _labels = data.mnist_tensors(root, train=True)
    finally:
        if first and ranks is not None:
            distributed.barrier()        # reached even when the fetch failed: the others then try, and say why
    return images


class Trainer:
    """Holds G, D, their optimizers, the data on the device and every random state."""

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg.validate()
        self.device = resolve_device(cfg.device)
        self.ranks = distributed.ranks()              # several processes under torchrun, or None
        if self.ranks is not None:
            check_ranks(cfg, self.ranks)
            self.device = distributed.start(self.ranks, self.device)
        torch.manual_seed(cfg.seed)
        self.G = Generator(cfg.z_dim, cfg.tanh).to(self.device)
        self.D = Discriminator().to(self.device)
        # fast mode on a GPU records the whole step as a CUDA graph (gan_lessons.capture), where the strategy allows
        self.captured = cfg.fast and self.device.type == "cuda" and cfg.strategy in capture.CAPTURABLE
        more = capture.capturable(self.device) if self.captured else {}
        self.opt_G = _adam(self.G, cfg.lr_G, (cfg.beta1, cfg.beta2), **more)
        self.opt_D = _adam(self.D, cfg.lr_D, (cfg.beta1, cfg.beta2), **more)
        images = _mnist_once(cfg.data, self.ranks)
        if len(images[: cfg.limit]) < cfg.batch_size:
            raise worded(ConfigError, _("{batch_size} {size} is larger than the {n} training images: no full batch, "
                                        "so no step; choose a smaller {batch_size}"), size=cfg.batch_size, n=len(images[: cfg.limit]))
        self.out = _writable(Path(cfg.out)) if self.main else Path(cfg.out)   # the first thing written: after checks
        self.images = images[: cfg.limit].to(self.device)              # uint8, 47 MB for all 60k
        self.order_gen = torch.Generator().manual_seed(cfg.seed + 1)     # batch order (CPU: same on any device)
        self.noise_gen = torch.Generator(self.device).manual_seed(cfg.seed + 2)
        self.fixed_z = torch.randn(64, cfg.z_dim, generator=torch.Generator().manual_seed(cfg.seed + 3)).to(self.device)
        self.epoch, self.batch = 0, 0
        self.history: list[dict] = []
        # what a step trains: G and D themselves, or under DDP their wrappers (sampling and saving use G and D)
        self.nets = (self.G, self.D) if self.ranks is None else \
            (distributed.wrap(self.G, self.device), distributed.wrap(self.D, self.device))
        self.order_state = self.order_gen.get_state()
        self._losses = torch.zeros(2, device=self.device)   # this epoch's loss sums so far
        self.stop_requested = False
        self.step_fn = strategies.get(cfg.strategy)
        if cfg.strategy == "wgan_gp":       # the one strategy with settings of its own
            self.step_fn = functools.partial(self.step_fn, n_critic=cfg.n_critic, gp_weight=cfg.gp_weight)
        if self.captured:
            self.step_fn = capture.CapturedStep(self.step_fn, cfg.z_dim)
        elif cfg.fast:
            self.step_fn = _compiled_step(self)

    @property
    def main(self) -> bool:
        """Does this process write the run's files? (The only one, or rank 0.)"""
        return self.ranks is None or self.ranks.main

    @property
    def steps_per_epoch(self):
        return len(self.images) // self.cfg.batch_size                  # drop_last: static shapes

    def noise(self, n):
        """n noise vectors; under several processes, this process's slice of the draw one process would make for
        all of them (so every process draws different noise, and together the one-process run's)."""
        if self.ranks is None:
            return torch.randn(n, self.cfg.z_dim, device=self.device, generator=self.noise_gen)
        z = torch.randn(n * self.ranks.world, self.cfg.z_dim, device=self.device, generator=self.noise_gen)
        return z[self.ranks.rank * n:(self.ranks.rank + 1) * n]

    def state(self) -> dict:
        return {"G": self.G.state_dict(), "D": self.D.state_dict(), "opt_G": self.opt_G.state_dict(),
                "opt_D": self.opt_D.state_dict(), "epoch": self.epoch, "batch": self.batch,
                "order_state": self.order_state, "noise_state": self.noise_gen.get_state(),
                "losses": self._losses.cpu(),
                "history": self.history, "config": dataclasses.asdict(self.cfg)}

    def restore(self, state: dict) -> None:
        self.G.load_state_dict(state["G"])
        self.D.load_state_dict(state["D"])
        self.opt_G.load_state_dict(state["opt_G"])
        self.opt_D.load_state_dict(state["opt_D"])
        self.epoch, self.batch, self.history = state["epoch"], state["batch"], list(state["history"])
        self.order_state = state["order_state"]
        self.noise_gen.set_state(state["noise_state"])
        self._losses = state["losses"].to(self.device)

    def checkpoint(self, wait=True):
        """last.pt, written by the main process; with `wait`, the others wait for it (they read it to resume)."""
        if self.main:
            save_checkpoint(self.out / "last.pt", self.state())
        if wait:
            distributed.barrier()

    def finite(self) -> bool:
        """Are the losses so far and every weight finite? (One device sync: called once an epoch.)"""
        params = [*self.G.parameters(), *self.D.parameters()]
        summed = torch.stack([self._losses.sum(), *(p.detach().sum() for p in params)])
        losses = [h[k] for h in self.history[-1:] for k in ("loss_D", "loss_G")]
        return bool(torch.isfinite(summed).all()) and all(map(math.isfinite, losses))

    def run_epoch(self, on_step=None):
        """Train from the current (epoch, batch) to the end of the epoch, or until a stop is requested."""
        self.order_gen.set_state(self.order_state)
        order = torch.randperm(len(self.images), generator=self.order_gen).to(self.device)
        bs = self.cfg.batch_size
        share, rank = (bs, 0) if self.ranks is None else (bs // self.ranks.world, self.ranks.rank)
        while self.batch < self.steps_per_epoch:
            first = self.batch * bs + rank * share          # this process's slice of the batch
            x_real = data.to_unit_range(self.images[order[first:first + share]])
            loss_D, loss_G = self.step_fn(*self.nets, self.opt_G, self.opt_D, x_real, self.noise)
            self._losses = self._losses + torch.stack([loss_D.detach(), loss_G.detach()])  # no .item(): no sync
            self.batch += 1
            if on_step:
                on_step(self, loss_D, loss_G)
            if self.stop_requested:
                raise KeyboardInterrupt
        sums = self._losses if self.ranks is None else distributed.mean(self._losses)   # over the processes
        loss_D, loss_G = (sums / self.steps_per_epoch).tolist()
        self.history.append({"epoch": self.epoch + 1, "loss_D": round(loss_D, 4), "loss_G": round(loss_G, 4)})
        self.epoch, self.batch = self.epoch + 1, 0
        self._losses = torch.zeros(2, device=self.device)
        self.order_state = self.order_gen.get_state()

    @torch.no_grad()
    def sample(self, z=None):
        was = self.G.training
        self.G.eval()
        x = self.G(self.fixed_z if z is None else z)
        self.G.train(was)
        return x.clamp(-1, 1)


def check_ranks(cfg, r):
    """The settings that several processes need, checked before any process joins the group or writes a file."""
    if cfg.batch_size % r.world:
        raise worded(ConfigError, _("{batch_size} {size} does not split evenly over the {world} processes: choose a "
                                    "multiple of {world}"), size=cfg.batch_size, world=r.world)
    if cfg.batch_size // r.world < 2:
        raise worded(ConfigError, _("{batch_size} {size} gives each of the {world} processes {share} image, and "
                                    "BatchNorm needs 2 per process: choose {least} or more"),
                     size=cfg.batch_size, world=r.world, share=cfg.batch_size // r.world, least=2 * r.world)
    if cfg.fast:
        raise worded(ConfigError, _("{fast=True} is not available with several processes (torch.compile under "
                                    "DistributedDataParallel is not supported by this trainer); drop {fast=True}"))


def _compiled_step(trainer):
    """Fast mode where the whole step is not recorded as one CUDA graph (on the CPU, and for a strategy outside
    capture.CAPTURABLE): compile G and D.
    Donated buffers are turned off because one_forward keeps its graph (retain_graph) across two backward calls.
    On a GPU the compiled forward and backward are also replayed as CUDA graphs (mode "reduce-overhead");
    on the CPU, where there are no launches to save, it is plain compilation."""
    import torch._functorch.config as functorch_config
    functorch_config.donated_buffer = False
    mode = "reduce-overhead" if trainer.device.type == "cuda" else None
    trainer.G, trainer.D = torch.compile(trainer.G, mode=mode), torch.compile(trainer.D, mode=mode)
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)
    if mode is None or mark is None:
        return trainer.step_fn
    step_fn = trainer.step_fn

    def step(*args, **kwargs):           # each training step is a new replay: the last step's outputs are done with
        mark()
        return step_fn(*args, **kwargs)
    return step


class Interrupted(Exception):
    """Training stopped by Ctrl-C (or SIGTERM) after a checkpoint was written."""


def _non_finite(trainer, last):
    """Stop without saving: last.pt keeps the last finite epoch (or does not exist). The remedy still names the
    command line's flags, as tests/cli/test_cli_reliability.py expects of train() itself."""
    kept = (_("{last} still holds epoch {epoch}, the last finite one").format(
                last=last, epoch=trainer.epoch if trainer.batch else trainer.epoch - 1)
            if last.exists() else _("no checkpoint was written"))
    raise NonFinite(_("training went non-finite (NaN or inf losses or weights) in epoch {epoch}; {kept}; lower "
                      "--lr-g/--lr-d (now {lr_g:g}/{lr_d:g}) and start over with --restart").format(
                        epoch=trainer.epoch + (1 if trainer.batch else 0), kept=kept, lr_g=trainer.cfg.lr_G,
                        lr_d=trainer.cfg.lr_D))


def _resumable(cfg: TrainConfig, last: Path) -> dict:
    """The state in `last` a run with these settings can continue from, or a ConfigError saying why not."""
    state = load_checkpoint(last, UNREADABLE_RUN)
    if not isinstance(state, dict) or "D" not in state or "opt_D" not in state:
        raise worded(ConfigError, _("{resume=True}: {last} is not a training checkpoint (an exported generator "
                                    "has no D or optimizers); start a new run with another {out}"), last=last)
    # checkpoints from before the tanh option (trained without it), and before n_critic, gp_weight and the
    # betas (trained with these defaults)
    saved = {"tanh": False, "n_critic": 5, "gp_weight": 10.0, "beta1": 0.5, "beta2": 0.999, **state["config"]}
    for key in ("strategy", "batch_size", "z_dim", "seed", "limit", "lr_G", "lr_D", "beta1", "beta2", "tanh",
                "n_critic", "gp_weight"):
        if saved.get(key) != getattr(cfg, key):
            raise worded(ConfigError, _("{resume=True}: {last} was trained with {key}={then}, not {now}; resume "
                                        "with the same settings, or pick another {out}"), last=last, key=key,
                         then=repr(saved.get(key)), now=repr(getattr(cfg, key)))
    return state


def train(cfg: TrainConfig, resume=False, on_step=None, on_epoch=None) -> Trainer:
    """Train for cfg.epochs epochs; checkpoint every epoch, and on Ctrl-C or SIGTERM after the step in hand.
    on_epoch(trainer) runs after each epoch's checkpoint; when it returns True, training stops there."""
    last = Path(cfg.out) / "last.pt"
    if resume and not last.exists():
        raise worded(ConfigError, _("{resume=True}: there is no run to continue in {folder} (no last.pt); drop "
                                    "{resume=True} to start a new run there"), folder=cfg.out)
    trainer = Trainer(cfg)
    if resume:
        trainer.restore(_resumable(cfg, last))

    def request_stop(signum, frame):
        trainer.stop_requested = True       # finish the step in hand: a half-done step cannot be resumed

    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while trainer.epoch < cfg.epochs:
            started = time.perf_counter()
            trainer.run_epoch(on_step)
            trainer.history[-1]["seconds"] = round(time.perf_counter() - started, 3)
            if not trainer.finite():
                _non_finite(trainer, last)
            trainer.checkpoint()
            stop = bool(on_epoch and on_epoch(trainer))
            if trainer.ranks is not None:    # every process stops after the same epoch (rank 0 keeps the clock)
                stop = distributed.decided(stop)
            if stop:
                break
            if trainer.stop_requested:      # Ctrl-C during the checkpoint or on_epoch: the checkpoint is complete
                raise worded(Interrupted, _("interrupted after epoch {epoch}; checkpoint written to {last}; continue "
                                            "with {resume=True}"), epoch=trainer.epoch, last=last)
    except Exception as error:
        if trainer.ranks is None or not distributed.lost(error):
            raise
        facts = dict(rank=trainer.ranks.rank, world=trainer.ranks.world, reason=distributed.reason(error))
        if last.exists():
            raise worded(PeerLost, _("another process of this run stopped, so process {rank} of {world} stops too "
                                     "({reason}); {last} holds epoch {epoch}: run the same command with "
                                     "{resume=True} to continue"), last=last, epoch=trainer.epoch, **facts) from None
        raise worded(PeerLost, _("another process of this run stopped, so process {rank} of {world} stops too "
                                 "({reason}), before the first checkpoint: run the same command again"),
                     **facts) from None
    except KeyboardInterrupt:
        if not trainer.finite():
            _non_finite(trainer, last)
        trainer.checkpoint(wait=False)      # the other processes may have stopped elsewhere: nobody to wait for
        raise worded(Interrupted, _("interrupted at epoch {epoch}, batch {batch}; checkpoint written to {last}; "
                                    "continue with {resume=True}"), epoch=trainer.epoch + 1, batch=trainer.batch, last=last) from None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return trainer
