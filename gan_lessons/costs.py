"""Measure what a GAN update strategy costs (lesson 05): forward and backward passes of G and D counted
with hooks, gradient passes per parameter, median time per step, and peak memory."""
import gc
import statistics
import time
import weakref
from dataclasses import dataclass

import torch

from gan_lessons import strategies
from gan_lessons.lesson import headline
from gan_lessons.models import Discriminator, Generator


@dataclass
class Cost:
    strategy: str
    G_forward: float = 0
    G_backward: float = 0
    D_forward: float = 0
    D_backward: float = 0
    G_grad_passes: float = 0      # gradient accumulations per G parameter per step
    D_grad_passes: float = 0
    ms_per_step: float | None = None
    peak_mib: float | None = None
    memory: str = ""
    error: str | None = None


class _Passes:
    """Counts forward calls of a module, and backward passes through each call's output."""

    def __init__(self, net):
        self.forward = self.backward = self.grads = 0
        self.n_params = len(list(net.parameters()))
        self.handles = [net.register_forward_hook(self._on_forward)]
        self.handles += [p.register_post_accumulate_grad_hook(self._on_grad) for p in net.parameters()]

    def _on_forward(self, module, args, out):
        self.forward += 1
        if out.requires_grad:
            out.register_hook(self._on_backward)

    def _on_backward(self, grad):
        self.backward += 1

    def _on_grad(self, p):
        self.grads += 1

    def remove(self):
        for h in self.handles:
            h.remove()


class _SavedBytes:
    """CPU measure: peak bytes of the tensors autograd saves for backward (parameters left out),
    each storage counted once while anything still holds it."""

    def __init__(self, exclude):
        self.skip = {p.untyped_storage().data_ptr() for p in exclude}
        self.live, self.now, self.peak = {}, 0, 0

    def pack(self, t):
        t = t.detach()  # the graph keeps this alias; returning `t` itself would tie outputs into cycles
        ptr = t.untyped_storage().data_ptr()
        if ptr not in self.skip:
            size, refs = self.live.get(ptr, (t.untyped_storage().nbytes(), 0))
            if refs == 0:
                self.now += size
                self.peak = max(self.peak, self.now)
            self.live[ptr] = (size, refs + 1)
            weakref.finalize(t, self._release, ptr)
        return t

    def _release(self, ptr):
        size, refs = self.live.pop(ptr)
        if refs > 1:
            self.live[ptr] = (size, refs - 1)
        else:  # the address may now be reused by another storage of another size
            self.now -= size

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


def fresh_gan(seed=0, batch=64, device="cpu"):
    """Seed 000's G and D, a batch in [-1, 1] standing in for MNIST, and a seeded noise source: the inputs of
    every cost figure (lesson 05, the README table, images/strategies.png, the benchmark's memory column)."""
    torch.manual_seed(seed)
    G, D = Generator().to(device), Discriminator().to(device)
    x_real = torch.rand(batch, 1, 28, 28, device=device) * 2 - 1
    gen = torch.Generator(device=device).manual_seed(seed + 1)
    return G, D, x_real, (lambda n: torch.randn(n, G.z_dim, device=device, generator=gen))


def measure(name, G, D, x_real, noise, steps=5, warmup=2, lr=2e-4) -> Cost:
    """Run strategy `name` (or a strategy function) for warmup + steps steps on fresh Adam optimizers; report
    per-step costs."""
    step, name = (name, getattr(name, "__name__", "step")) if callable(name) else (strategies.get(name), name)
    opt_G = torch.optim.Adam(G.parameters(), lr=lr, betas=(0.5, 0.999))
    opt_D = torch.optim.Adam(D.parameters(), lr=lr, betas=(0.5, 0.999))
    cuda = x_real.is_cuda
    cost = Cost(name, memory="CUDA peak allocated" if cuda else "CPU: peak bytes of autograd's saved tensors")
    try:
        for _ in range(warmup):
            step(G, D, opt_G, opt_D, x_real, noise)
        g, d = _Passes(G), _Passes(D)
        saved = _SavedBytes([*G.parameters(), *D.parameters()])
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        times = []
        for _ in range(steps):
            gc.collect()
            gc.disable()  # frees then happen by reference counting alone: the same on every run
            start = time.perf_counter()
            with saved.hooks():
                step(G, D, opt_G, opt_D, x_real, noise)
            gc.enable()
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        g.remove(), d.remove()
    except RuntimeError as error:
        cost.error = str(error).split(". Hint")[0]
        return cost
    cost.G_forward, cost.G_backward, cost.D_forward, cost.D_backward = (
        g.forward / steps, g.backward / steps, d.forward / steps, d.backward / steps)
    cost.G_grad_passes, cost.D_grad_passes = g.grads / g.n_params / steps, d.grads / d.n_params / steps
    cost.ms_per_step = statistics.median(times) * 1e3
    peak = torch.cuda.max_memory_allocated() - base if cuda else saved.peak
    cost.peak_mib = peak / 2**20
    return cost


def grads_at_steps(optimizers, names):
    """Register step pre-hooks that record every parameter's .grad (a clone, or None) at each step() call.
    Returns (records, handles): records[optimizer name] is a list with one {parameter name: grad} per step."""
    records = {name: [] for name in optimizers}
    handles = []
    for opt_name, opt in optimizers.items():
        def hook(optimizer, args, kwargs, opt_name=opt_name):
            records[opt_name].append({names[p]: (None if p.grad is None else p.grad.detach().clone())
                                      for group in optimizer.param_groups for p in group["params"]})
        handles.append(opt.register_step_pre_hook(hook))
    return records, handles


def _step_grads(step, seed):
    """The gradients each optimizer steps on, for one step of `step` on fresh_gan(seed) (the last step of each)."""
    G, D, x_real, noise = fresh_gan(seed, batch=16)
    opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
    names = {p: n for net in (G, D) for n, p in net.named_parameters()}
    records, handles = grads_at_steps({"G": opt_G, "D": opt_D}, names)
    try:
        step(G, D, opt_G, opt_D, x_real, noise)
    finally:
        for h in handles:
            h.remove()
    return {key: list(steps[-1].items()) for key, steps in records.items() if steps}, D


def _times(n):
    return {1: "once", 2: "twice"}.get(n, f"{n:g} times")


def check_strategy(step, reference="d_first_fresh_fake", seed=0) -> bool:
    """Exercise feedback (lesson 05): does `step` give G and D the gradients `reference` gives them, computing
    each gradient once per step and running G twice (as `reference` does)? Prints one ✓ line, or one line per
    thing still wrong; returns whether everything is right. Feedback, not an assert."""
    name = getattr(step, "__name__", "your step")
    try:
        got, D = _step_grads(step, seed)
        cost = measure(step, *fresh_gan(seed, batch=16), steps=1, warmup=0)
    except Exception as error:  # noqa: BLE001 -- any error is feedback here
        message = f"{type(error).__name__}: {headline(str(error))}"
        if "ellipsis" in str(error):
            print(f"? {name}: not solved yet. Replace ... with your answer and run the cell again ({message}).")
        else:
            print(f"✗ {name}: the step raised {message}")
        return False
    if cost.error:
        print(f"✗ {name}: the step raised RuntimeError: {headline(cost.error)}")
        return False
    want, _ = _step_grads(strategies.get(reference), seed)
    wrong = []
    for net in ("D", "G"):
        if net not in got:
            wrong.append(f"opt_{net}.step() is never called")
            continue
        missing = [n for n, g in got[net] if g is None]
        if missing:
            wrong.append(f"{net}'s parameters have no gradient when opt_{net} steps ({', '.join(missing[:3])})")
            continue
        diffs = [((g - r).abs().max().item(), n) for (n, g), (_, r) in zip(got[net], want[net])
                 if not torch.allclose(g, r, rtol=1e-5, atol=1e-7)]
        if diffs:
            gap, where = max(diffs)
            wrong.append(f"{net}'s gradient differs from {reference}'s in {len(diffs)} of {len(got[net])} "
                         f"parameters (largest difference {gap:.2g}, in {where})")
    if cost.D_grad_passes != 1:
        wrong.append(f"D's gradient is computed {_times(cost.D_grad_passes)} per step"
                     + (": G's backward still fills D's .grad" if cost.D_grad_passes == 2 else ", not once"))
    if cost.G_grad_passes != 1:
        wrong.append(f"G's gradient is computed {_times(cost.G_grad_passes)} per step"
                     + (": D's loss still reaches G (make D's fake batch without a graph)"
                        if cost.G_grad_passes == 2 else ", not once"))
    if cost.G_forward != 2:
        wrong.append(f"G runs {_times(cost.G_forward)} per step; {reference} runs it twice (a fake batch for D "
                     "under no_grad, a fresh one for G's loss)")
    if not all(p.requires_grad for p in D.parameters()):
        wrong.append("D is still frozen after the step: call D.requires_grad_(True) before returning")
    for line in wrong:
        print(f"✗ {name}: {line}")
    if not wrong:
        print(f"✓ {name}: G and D step on {reference}'s gradients, D's gradient is computed once per step "
              "(not twice), and G runs twice")
    return not wrong
