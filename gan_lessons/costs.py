"""Measure what a GAN update strategy costs (lesson 05): forward and backward passes of G and D counted
with hooks, gradient passes per parameter, median time per step, and two memory figures kept apart: the peak of
autograd's saved tensors, and the allocator's peak; steps timed in alternation (interleaved_ms); and the table that
shows them (lessons 05 and 08, lesson 05's strategy switch), as markdown or HTML."""
import gc
import html
import os
import statistics
import sys
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import torch
from torch.profiler import ProfilerActivity, profile

from gan_lessons import strategies
from gan_lessons.i18n import N_, _
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
    G_unused_graphs: float = 0    # G forwards per step that built a graph no backward went through
    D_grad_passes: float = 0
    ms_per_step: float | None = None
    saved_mib: float | None = None    # peak of autograd's saved tensors (parameters left out): what backward needs
    alloc_mib: float | None = None    # the allocator's peak above its level at the step's start: everything alive
    memory: str = ""
    error: str | None = None

    @property
    def peak_mib(self):
        """The saved-tensor peak (this figure's name before the allocator's peak was measured beside it)."""
        return self.saved_mib


class _Passes:
    """Counts forward calls of a module, and backward passes through each call's output."""

    def __init__(self, net: torch.nn.Module):
        self.forward = self.backward = self.grads = 0
        self.reached: list[bool] = []     # per forward that built a graph: whether a backward went through it
        self.n_params = len(list(net.parameters()))
        self.handles = [net.register_forward_hook(self._on_forward)]
        self.handles += [p.register_post_accumulate_grad_hook(self._on_grad) for p in net.parameters()]

    def _on_forward(self, module, args, out):
        self.forward += 1
        if out.requires_grad:
            self.reached.append(False)
            out.register_hook(partial(self._on_backward, len(self.reached) - 1))

    def _on_backward(self, k, grad):
        self.backward += 1
        self.reached[k] = True

    @property
    def unused_graphs(self) -> int:
        """Forwards that built a graph (saved tensors) through which no backward ever went."""
        return self.reached.count(False)

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


@contextmanager
def _quiet_stderr():
    """Keep the profiler's own log lines (written to file descriptor 2 by its C++ side) out of a lesson's output."""
    sys.stderr.flush()
    kept = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(kept, 2)
        os.close(kept)


def cpu_allocator_peak(run) -> int:
    """Peak bytes the CPU allocator holds while run() runs, above its level when run() starts, from the profiler's
    record of every allocation and free. Run twice, the second counted: the first record cannot see the frees of
    blocks allocated before any profiling (the previous step's gradients)."""
    for _step in range(2):
        with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            run()
    now = peak = 0
    for _start, nbytes in sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                            if e.name() == "[memory]"):      # one event per allocation (+) and free (-)
        now += nbytes
        peak = max(peak, now)
    return peak


def fresh_gan(seed=0, batch=64, device="cpu"):
    """Seed 000's G and D, a batch in [-1, 1] standing in for MNIST, and a seeded noise source: the inputs of
    every cost figure (lesson 05, the README table, images/strategies.png, the benchmark's memory column)."""
    torch.manual_seed(seed)
    G, D = Generator().to(device), Discriminator().to(device)
    x_real = torch.rand(batch, 1, 28, 28, device=device) * 2 - 1
    gen = torch.Generator(device=device).manual_seed(seed + 1)
    return G, D, x_real, (lambda n: torch.randn(n, G.z_dim, device=device, generator=gen))


def measure(name, G, D, x_real, noise, steps=5, warmup=2, lr=2e-4, memory=True) -> Cost:
    """Run strategy `name` (or a strategy function) for warmup + steps steps on fresh Adam optimizers; report
    per-step costs (with memory=True, the allocator's peak over one more step)."""
    step, name = (name, getattr(name, "__name__", "step")) if callable(name) else (strategies.get(name), name)
    opt_G = torch.optim.Adam(G.parameters(), lr=lr, betas=(0.5, 0.999))
    opt_D = torch.optim.Adam(D.parameters(), lr=lr, betas=(0.5, 0.999))
    cuda = x_real.is_cuda
    cost = Cost(name, memory=_("{device}: peak bytes of autograd's saved tensors").format(
        device="CUDA" if cuda else "CPU"))
    try:
        for _step in range(warmup):
            step(G, D, opt_G, opt_D, x_real, noise)
        g, d = _Passes(G), _Passes(D)
        saved = _SavedBytes([*G.parameters(), *D.parameters()])
        times = []
        for _step in range(steps):
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
        alloc = _allocator_peak(lambda: step(G, D, opt_G, opt_D, x_real, noise), cuda) if memory else None
    except RuntimeError as error:
        cost.error = str(error).split(". Hint")[0]
        return cost
    cost.G_forward, cost.G_backward, cost.D_forward, cost.D_backward = (
        g.forward / steps, g.backward / steps, d.forward / steps, d.backward / steps)
    cost.G_grad_passes, cost.D_grad_passes = g.grads / g.n_params / steps, d.grads / d.n_params / steps
    cost.G_unused_graphs = g.unused_graphs / steps
    cost.ms_per_step = statistics.median(times) * 1e3
    cost.saved_mib, cost.alloc_mib = saved.peak / 2**20, None if alloc is None else alloc / 2**20
    return cost


def _allocator_peak(run, cuda) -> int:
    """The allocator's peak over one more step, untimed, above the level at its start (CUDA's own count on a GPU)."""
    gc.collect()
    gc.disable()
    try:
        if not cuda:
            return cpu_allocator_peak(run)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        run()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    finally:
        gc.enable()


def interleaved_ms(names, rounds=10, batch=64, device="cpu") -> dict:
    """Time one step of each strategy in turn, each on its own fresh_gan after two warm-up steps, the order reversed
    every other round: {name: [ms of each round's step]}. Whatever slows the machine for a while (another program,
    the clock) then falls on every strategy alike, where a block of steps per strategy gives it to one of them."""
    runs, cuda = {}, torch.device(device).type == "cuda"
    for name in names:
        G, D, x_real, noise = fresh_gan(batch=batch, device=device)
        runs[name] = (G, D, torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters()), x_real, noise)
        for _step in range(2):
            strategies.get(name)(*runs[name])
    times: dict[str, list] = {name: [] for name in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            strategies.get(name)(*runs[name])
            if cuda:
                torch.cuda.synchronize()
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


COST_COLUMNS = (N_("strategy"), N_("G fwd / bwd"), N_("D fwd / bwd"), N_("G grad passes"), N_("D grad passes"),
                N_("ms / step (median)"), N_("saved MiB (peak)"), N_("allocator peak MiB"))   # shown through _()


def cost_cells(c: Cost) -> list:
    """One row of the cost table (the strategy in markdown's backticks); a strategy that raised shows the error."""
    if c.error:
        return [f"`{c.strategy}`", _("raises: {error}").format(error=headline(c.error))] + [""] * (len(COST_COLUMNS) - 2)
    return [f"`{c.strategy}`", f"{c.G_forward:g} / {c.G_backward:g}", f"{c.D_forward:g} / {c.D_backward:g}",
            f"{c.G_grad_passes:g}", f"{c.D_grad_passes:g}", f"{c.ms_per_step:.1f}", f"{c.saved_mib:.2f}",
            "–" if c.alloc_mib is None else f"{c.alloc_mib:.2f}"]


def cost_table_markdown(measured) -> str:
    """The cost table as markdown, one row per Cost in `measured`."""
    def row(cells):
        return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"
    return "\n".join([row([_(c) for c in COST_COLUMNS]), "|" + "---|" * len(COST_COLUMNS), *(row(cost_cells(c)) for c in measured)])


def cost_table_html(measured) -> str:
    """The same table as HTML, made from the same cells (backticks dropped), for a page with no markdown."""
    def row(cells, tag):
        return "<tr>" + "".join(f"<{tag}>{html.escape(cell).replace('`', '')}</{tag}>" for cell in cells) + "</tr>"
    return ("<table><thead>" + row([_(c) for c in COST_COLUMNS], "th") + "</thead><tbody>"
            + "".join(row(cost_cells(c), "td") for c in measured) + "</tbody></table>")
