"""Fast mode on a GPU: the whole training step recorded once as a CUDA graph and replayed (lesson 06's trainer).

A step of seed 000's GAN at batch 64 launches about two hundred kernels that each take microseconds; on a GPU the
step waits on those launches, not on the arithmetic. A CUDA graph records every kernel of one step (G's and D's
forwards, both losses, both backwards, both optimizers' updates) and replays them with one launch. What a replay
reads and writes must live at fixed addresses, so:

- the real batch is copied into one static tensor before each replay;
- the noise is drawn outside the graph, from the trainer's own generator, in the same order and sizes as the
  eager step draws it, into static tensors the recorded step reads (so the captured run draws the same z);
- the optimizers are built with `capturable=True` (their step counts stay on the device);
- the losses a replay returns are the graph's static outputs, overwritten by the next replay (the trainer adds
  them to its sums at once).

The first WARMUP calls run the step eagerly on a side stream (they are real training steps: optimizer state and
cuBLAS's workspace are made there, as PyTorch's CUDA-graph notes require); the next call records the step, then
replays it, and every later call only replays.

What cannot be captured is left to training.py's per-module torch.compile: a step that reads a tensor's value on
the host (wgan_gp counts its critic steps with int(...), and fast mode refuses wgan_gp in any case), and seed 003's
order, which raises. `one_forward`, which keeps its graph across two backward calls, is captured as it
is: inside one recorded step the retained graph is only memory.

The CUDA calls go through CUDAGraphs; a test hands in OnTheCPU instead, so that everything here but the recording
itself runs on the CPU."""
from dataclasses import dataclass, field

import torch

WARMUP = 3
CAPTURABLE = ("one_forward", "d_first_reuse_fake", "g_first", "d_first_fresh_fake", "d_first_frozen_D",
              "g_first_inputs")


@dataclass
class Noise:
    """The draws one step makes, as static tensors: the sizes seen in the eager steps, refilled before each replay."""
    z_dim: int
    sizes: list = field(default_factory=list)      # n of each noise(n) call, in order
    static: list = field(default_factory=list)
    calls: int = 0

    def recording(self, noise):
        """noise(n) as it is, noting each call's size (the eager warm-up steps)."""
        def draw(n):
            self.sizes.append(n)
            return noise(n)
        return draw

    def make(self, device):
        """The static tensors, empty: the recording reads them, refill() writes them (drawing nothing here keeps the
        generator's stream where the eager step would have it)."""
        self.static = [torch.empty(n, self.z_dim, device=device) for n in self.sizes]
        self.calls = 0

    def refill(self, noise, device):
        """Draw this step's noise with the trainer's own noise(n), into the static tensors."""
        if not self.static:
            self.make(device)
        for z, n in zip(self.static, self.sizes):
            z.copy_(noise(n))
        self.calls = 0

    def replayed(self, n):
        """noise(n) inside the recorded step: the next static tensor."""
        z = self.static[self.calls]
        if z.shape[0] != n:
            raise RuntimeError(f"the step drew noise of size {n} where its warm-up drew {z.shape[0]}")
        self.calls += 1
        return z


class CUDAGraphs:
    """The two CUDA calls a captured step needs, after PyTorch's notes on CUDA graphs: warm-up steps on a side stream,
    and a step recorded once, replayed by one call."""

    def warm(self, fn):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = fn()
        torch.cuda.current_stream().wait_stream(side)
        return out

    def record(self, fn):
        """fn's kernels recorded (not run); the returned replay() runs them and returns fn's outputs."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn()

        def replay():
            graph.replay()
            return out
        return replay


class OnTheCPU:
    """A stand-in for CUDAGraphs, for tests on the CPU: warm-up runs as it is; "recording" keeps the step's call
    without running it, and each replay runs it on the static tensors and writes its losses into fixed outputs. So
    the static batch, the noise slots, the order of warm-up, recording and replay, and the returned losses are
    exercised as on a GPU; only the kernels' recording itself is not."""

    def warm(self, fn):
        return fn()

    def record(self, fn):
        fixed = []

        def replay():
            out = [t.detach() for t in fn()]
            if not fixed:
                fixed.extend(torch.empty_like(t) for t in out)
            for f, t in zip(fixed, out):
                f.copy_(t)
            return tuple(fixed)
        return replay


class CapturedStep:
    """step(G, D, opt_G, opt_D, x_real, noise) -> (loss_D, loss_G), as a strategy function, replayed from a CUDA
    graph after WARMUP eager calls."""

    def __init__(self, step_fn, z_dim, graphs=None):
        self.step_fn, self.graphs = step_fn, graphs or CUDAGraphs()
        self.noise = Noise(z_dim)
        self.calls, self.replay, self.x = 0, None, None

    def __call__(self, G, D, opt_G, opt_D, x_real, noise):
        self.calls += 1
        if self.calls <= WARMUP:            # real steps, eager; the first notes the noise it draws
            draw = self.noise.recording(noise) if self.calls == 1 else noise
            return self.graphs.warm(lambda: self.step_fn(G, D, opt_G, opt_D, x_real, draw))
        if self.replay is None:
            self.x = torch.empty_like(x_real)
            self.noise.make(x_real.device)                   # the static noise, filled below
            opt_G.zero_grad(set_to_none=True)                # the recorded step makes its gradients in the graph's
            opt_D.zero_grad(set_to_none=True)                # own memory
            self.replay = self.graphs.record(
                lambda: self.step_fn(G, D, opt_G, opt_D, self.x, self.noise.replayed))
        self.x.copy_(x_real)
        self.noise.refill(noise, x_real.device)
        return self.replay()


def capturable(device: torch.device) -> dict:
    """Adam's keyword arguments for a step that will be recorded on this device."""
    return {"capturable": True} if device.type == "cuda" else {}
