# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,reveals,-all
#     formats: ipynb,src//py:percent
#     notebook_metadata_filter: kernelspec,jupytext,accelerator,colab,-all
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lesson 10 · Mixed precision, hooks and `torch.compile` in a GAN loop
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/10_amp_hooks_and_compile.ipynb)
#
# [中文版](zh/10_amp_hooks_and_compile.ipynb) · [Student copy](student/10_amp_hooks_and_compile.ipynb)
#
# **Goal.** Know what three more pieces of machinery do in the middle of a GAN step, each checked on this torch:
# mixed precision with one `GradScaler` for two optimizers, hooks that read or change a gradient or count saved
# bytes, and what `torch.compile` changes about `retain_graph` and `.item()`. Then build a GAN step under autocast
# with one `GradScaler` and D's gradient clipped. Lesson 09 took the first two pieces: freezing D, and BatchNorm.
#
# **Material.** None of the seeds goes this far; seed 000's G and D are the models. The facts come from PyTorch's own
# documentation (autocast, `GradScaler` and its examples for several models and optimizers and for working with
# unscaled gradients, tensor and saved-tensor hooks, `torch.compile`). A table at the end sets the code people write
# beside what it does on today's torch.

# %% tags=["nbval-ignore-output"]
# Setup, the same in every lesson. On Colab it installs what Colab lacks: torchviz and this package.
import subprocess
import sys
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz", "gan-lessons @ git+https://github.com/gan-lessons/gan-lessons"],
                   check=True)

import torch
from torch import nn, optim
import torch.nn.functional as F
from gan_lessons.lesson import setup, expect_error, expect_warning, claim, check, describe, rounded, tr

device, QUICK = setup(seed=0, lang="en")

# %%
import logging
from gan_lessons import strategies
from gan_lessons.lesson import headline
from gan_lessons.models import Generator, Discriminator

bce = strategies.bce       # bce(logits, 1): G's non-saturating loss; bce(logits, 0): D's fake term

# %% [markdown]
# ## 1 · Mixed precision: autocast, and one GradScaler for two optimizers
#
# **Why it matters.** `torch.autocast` runs the operations on one of its lists in a 16-bit type, those on another
# in float32, and leaves every other one in the type it is given; a
# `GradScaler` multiplies the loss so that small float16 gradients do not round to zero, and skips an optimizer step
# whose gradients came out inf or NaN. A GAN has two losses and two optimizers, which is exactly the case PyTorch's
# AMP examples treat separately. Autocast on a CPU defaults to bfloat16, and this torch runs all of it on a CPU, so
# CI checks it. First, which operations change type in a forward through seed 000's G and D:

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()
z, x_real = torch.randn(8, G.z_dim), torch.rand(8, 1, 28, 28) * 2 - 1
dtypes = {}
record = lambda module, args, out: dtypes.setdefault(type(module).__name__, set()).add(out.dtype)
handles = [m.register_forward_hook(record) for net in (G, D) for m in net.modules()
           if isinstance(m, (nn.Linear, nn.Conv2d, nn.BatchNorm1d, nn.BatchNorm2d, nn.ReLU))]
with torch.autocast("cpu", dtype=torch.bfloat16):
    x_fake = G(z)
    logits = D(x_fake)
    loss_G = bce(logits, 1)
for h in handles:
    h.remove()
for kind, seen in sorted(dtypes.items()):
    print(tr("{kind:<12} outputs {dtypes}", kind=kind, dtypes=", ".join(sorted(str(t) for t in seen))))
print(f"x_fake {x_fake.dtype}, logits {logits.dtype}, loss_G {loss_G.dtype}")
claim("under autocast on the CPU, every Linear and Conv2d computes in bfloat16",
      dtypes["Linear"] == dtypes["Conv2d"] == {torch.bfloat16})
claim("BatchNorm and ReLU keep the bfloat16 they are given", dtypes["BatchNorm1d"] == dtypes["ReLU"] == {torch.bfloat16})
claim("the BCE loss comes out float32: autocast runs it in float32 whatever its input",
      logits.dtype == torch.bfloat16 and loss_G.dtype == torch.float32)

# %% [markdown]
# G's first Linear layer computed in bfloat16 above. **Predict, then check:** what type will backward give its
# weight's gradient? Replace the `...`, then run the cell: it runs `loss_G.backward()`.

# %% reveals=["-> torch.float32", "every gradient backward writes into them", "gradients? stays? float32"] tags=["predict"]
prediction = torch.float32  # SOLUTION: after loss_G.backward(), what dtype is G.net[0].weight.grad (torch.float32 or torch.bfloat16)?
loss_G.backward()
check("dtype of a parameter's gradient after an autocast backward", prediction, G.net[0].weight.grad.dtype,
      why="autocast casts copies for each operation; the parameter stays float32, and its gradient takes its type.")

# %%
claim("the parameters stay float32, and so does every gradient backward writes into them",
      all(p.dtype == p.grad.dtype == torch.float32 for p in G.parameters()))

# %% [markdown]
# The layers after a Linear or a Conv (BatchNorm and ReLU here) are not on autocast's CPU list and keep the type they
# are given; the lists of operations autocast changes are in its documentation, and they differ between CPU and CUDA.
# The parameters are never converted: autocast casts a bfloat16 copy for each operation, and backward brings each
# gradient back to its parameter's type.
#
# bfloat16 keeps float32's exponent, and float16 does not. That is why a `GradScaler` matters for float16 on a GPU
# and hardly ever for bfloat16:

# %%
tiny = torch.tensor(1e-8)
claim("a gradient of 1e-8 rounds to 0 in float16, not in bfloat16", tiny.half().item() == 0 and tiny.bfloat16().item() > 0)
claim("float16's largest value is 65504: 65510 still rounds to it, 65520 and above become inf; bfloat16 reaches "
      "about 3.4e38, as float32 does",
      torch.finfo(torch.float16).max == 65504 and torch.tensor(65510.0).half().item() == 65504
      and torch.isinf(torch.tensor(65520.0).half()).item() and torch.finfo(torch.bfloat16).max > 3e38)


# %% [markdown]
# The same two facts on a real gradient, on this CPU. A hook can round a gradient to float16 and back, as a float16
# backward would carry it. Below, one small loss twice: as it is, and multiplied by 65536 first with the gradient
# divided by 65536 after, which is what a `GradScaler` does around the backward:

# %%
def through_float16(loss_scale, small=1e-7):
    """A Linear layer's weight gradient for a small loss, each entry rounded to float16 by a hook (as a float16
    backward would carry it), the loss multiplied by loss_scale and the gradient divided by it again."""
    torch.manual_seed(0)
    layer, x = nn.Linear(16, 1), torch.randn(64, 16)
    true, = torch.autograd.grad(layer(x).mean() * small, layer.weight)
    handle = layer.weight.register_hook(lambda g: g.half().float())
    got, = torch.autograd.grad(layer(x).mean() * small * loss_scale, layer.weight)
    handle.remove()
    return true, got / loss_scale

rounded_away = {}
for scale in (1.0, 2.0**16):
    true, got = through_float16(scale)
    rounded_away[scale] = int((got == 0).sum())
    error = ((got - true).abs() / true.abs()).max().item()
    print(tr("loss scale {scale:>7g}: {zeros} of {entries} gradient entries rounded to 0, largest relative error "
             "{error:.3g}", scale=scale, zeros=rounded_away[scale], entries=got.numel(), error=error))
claim("unscaled, most of this gradient rounds to 0 in float16", rounded_away[1.0] > got.numel() / 2)
claim("scaled by 65536 first, none of it does, and each entry is within 1% of the true gradient",
      rounded_away[2.0**16] == 0 and error < 0.01)
claim("and a gradient of 70000 becomes inf in float16: the step a GradScaler then skips",
      torch.isinf(torch.tensor(70000.0).half()).item())

# %% [markdown]
# **One scaler, two optimizers.** The recipe of PyTorch's AMP examples: scale each loss before its backward, step
# each optimizer through `scaler.step(opt)`, which unscales the gradients first and skips the step if it finds an
# inf or NaN, and call `scaler.update()` **once per iteration**, after the steps. On this torch
# `torch.amp.GradScaler("cpu")` exists and works, so all of it runs here. The smallest case, as in PyTorch's example
# for several models and optimizers: two tiny networks stand in for G and D, each with its own loss and Adam
# optimizer, one scaler, both backwards first and then both steps. The second iteration writes an inf into one of G's
# gradients, as a float16 overflow would, after both backwards: while `scaler.step(opt_D)` runs, G's `.grad` holds
# the inf.

# %%
HAS_AMP_SCALER = hasattr(torch.amp, "GradScaler")    # missing on older torch (2.1)
NO_AMP_SCALER = tr("torch {version} has no torch.amp.GradScaler (torch 2.1 lacks it; the reference torch 2.13 has "
                   "it): skipped, not checked", version=torch.__version__)

def growth_run(iterations, growth_interval, init_scale=4.0):
    """The scale after each of `iterations` clean iterations of a tiny model under one GradScaler."""
    torch.manual_seed(0)
    layer = nn.Linear(4, 1)
    opt = optim.SGD(layer.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    x, scales = torch.randn(8, 4), []
    for _ in range(iterations):
        opt.zero_grad()
        scaler.scale(layer(x).pow(2).mean()).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales

def one_scaler_run(device_type="cpu", dtype=torch.bfloat16, init_scale=2.0**16):
    """Two iterations of two tiny networks under one GradScaler, the second with an inf in G's gradient: what
    moved, the scale before and after, and opt_G's Adam step count, per iteration."""
    torch.manual_seed(0)
    G_toy, D_toy = nn.Linear(4, 4).to(device_type), nn.Linear(4, 1).to(device_type)
    opt_G, opt_D = optim.Adam(G_toy.parameters()), optim.Adam(D_toy.parameters())
    scaler = torch.amp.GradScaler(device_type, init_scale=init_scale)     # 2**16 is the default
    x = torch.randn(8, 4, device=device_type)
    report = []
    for inf_in_G in (False, True):
        before = {net: [p.detach().clone() for p in net.parameters()] for net in (G_toy, D_toy)}
        scale = scaler.get_scale()
        opt_G.zero_grad()
        opt_D.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss_D = D_toy(x).pow(2).mean()
            loss_G = G_toy(x).pow(2).mean()
        scaler.scale(loss_D).backward()
        scaler.scale(loss_G).backward()
        if inf_in_G:
            G_toy.weight.grad[0, 0] = float("inf")      # in G's .grad before either optimizer steps
        scaler.step(opt_D)
        scaler.step(opt_G)
        scaler.update()                                 # once, after both steps
        moved = lambda net, before=before: any(not torch.equal(p, b) for p, b in zip(net.parameters(), before[net]))
        report.append({"G moved": moved(G_toy), "D moved": moved(D_toy), "scale": (scale, scaler.get_scale()),
                       "opt_G steps": int(opt_G.state[G_toy.weight]["step"])})
    return report


# %% [markdown]
# **Predict, then check:** in the second iteration, which optimizer takes its step? Replace the `...`, then run the
# cell: it runs both iterations and prints what moved.

# %% reveals=["inf in G's grad +G moved: False +D moved: True", "opt_D still steps", "each optimizer checks only its own"] tags=["predict"]
prediction = "D"  # SOLUTION: one GradScaler, an inf in one of G's gradients: which optimizer steps, "G", "D", "both" or "neither"?
if HAS_AMP_SCALER:
    clean, poisoned = one_scaler_run()
    for label, r in ((tr("clean iteration"), clean), (tr("inf in G's grad"), poisoned)):
        print(tr("{label:<16} G moved: {G_moved!s:<6} D moved: {D_moved!s:<6} scale {before:g} -> {after:g}   "
                 "opt_G's Adam step count: {steps}", label=label, G_moved=r["G moved"], D_moved=r["D moved"],
                 before=r["scale"][0], after=r["scale"][1], steps=r["opt_G steps"]))
    stepped = {(True, True): "both", (True, False): "G", (False, True): "D", (False, False): "neither"}
    check("optimizer that steps when G's gradient holds an inf", prediction,
          stepped[poisoned["G moved"], poisoned["D moved"]],
          why="each scaler.step(opt) unscales and checks only that optimizer's gradients; D's were finite.")
else:
    print(NO_AMP_SCALER)

# %%
if HAS_AMP_SCALER:
    claim("a clean iteration: both optimizers step, and the scale stays at 65536", clean["G moved"] and clean["D moved"]
          and clean["scale"] == (65536.0, 65536.0))
    scales = growth_run(iterations=5, growth_interval=3)
    claim("the scale doubles only after growth_interval clean iterations in a row (3 here; 2000 by default)",
          scales == [4.0, 4.0, 8.0, 8.0, 8.0] and torch.amp.GradScaler("cpu").get_growth_interval() == 2000,
          f"scale after each of 5 clean iterations: {scales}")
    claim("an inf in G's gradient: opt_G skips its step, G is unchanged, and Adam's step count does not advance",
          not poisoned["G moved"] and poisoned["opt_G steps"] == 1)
    claim("opt_D still steps in that iteration, with the inf in G's .grad at that moment: each optimizer checks only "
          "its own gradients", poisoned["D moved"])
    claim("and the one update() halves the scale", poisoned["scale"] == (65536.0, 32768.0))
else:
    print(NO_AMP_SCALER)

# %% [markdown]
# Each `scaler.step(opt)` decides for its own optimizer, so one iteration can train D and skip G. `update()` comes
# once, after every optimizer has stepped, so that the scale reacts to the iteration as a whole. Between a backward
# and its step, `.grad` holds the **scaled** gradient, and `scaler.step` divides it by the scale just before the
# step. Code that reads `.grad` in between (clipping its norm, logging it) must call `scaler.unscale_(opt)` first,
# as PyTorch's example for gradient clipping does; `scaler.step` then does not divide a second time:

# %%
if HAS_AMP_SCALER:
    torch.manual_seed(0)
    layer = nn.Linear(4, 1)
    opt = optim.SGD(layer.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    x = torch.randn(8, 4)
    true_grad, = torch.autograd.grad(layer(x).pow(2).mean(), layer.weight)
    scaler.scale(layer(x).pow(2).mean()).backward()
    claim("after scaler.scale(loss).backward(), .grad holds the gradient times the scale",
          torch.allclose(layer.weight.grad, true_grad * scaler.get_scale()), f"scale {scaler.get_scale():g}")
    scaler.unscale_(opt)
    claim("scaler.unscale_(opt) divides it in place: .grad is the true gradient",
          torch.allclose(layer.weight.grad, true_grad))
    before = layer.weight.detach().clone()
    scaler.step(opt)
    scaler.update()
    claim("scaler.step(opt) after it steps on that gradient as it is: the change is lr times the true gradient",
          torch.allclose(before - layer.weight.detach(), 0.1 * true_grad))
else:
    print(NO_AMP_SCALER)

# %% [markdown]
# A GAN step runs in order: D steps before G's loss is even made (`d_first_reuse_fake`, lesson 05), so D's
# `scaler.step` comes before G's backward, and the one `update()` after G's step. The exercise builds that step, with
# D's gradient clipped. On a GPU the same scaler runs with float16, where overflows really happen. The next cell runs
# the two iterations above there, only where CUDA is available, and says so where it is not:

# %% tags=["nbval-ignore-output"]
if torch.cuda.is_available() and HAS_AMP_SCALER:
    clean, poisoned = one_scaler_run("cuda", torch.float16, init_scale=2.0**10)
    claim("on CUDA with float16: a clean iteration moves G and D; an inf in G's gradient skips G's step only and "
          "halves the scale", clean["G moved"] and clean["D moved"] and not poisoned["G moved"]
          and poisoned["D moved"] and poisoned["scale"][1] == poisoned["scale"][0] / 2)
else:
    print(tr("No CUDA device here (or no torch.amp.GradScaler): the float16 run on a GPU is skipped, not checked. "
             "The bfloat16 run above, on the CPU, checked the same GradScaler logic."))


# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - Autocast on the CPU (bfloat16) runs Linear and Conv in bfloat16 and the BCE loss in float32; parameters and
#   gradients stay float32. `torch.amp.GradScaler("cpu")` works on torch 2.13. With one scaler and two
#   optimizers, each `scaler.step` skips only its own optimizer on inf/NaN, and `scaler.update()` runs once per
#   iteration and halves the scale after an inf. Between backward and step, `.grad` is scaled: clip after
#   `scaler.unscale_(opt)`.
# - A hook on `x_fake` sees the gradient G gets through D (the same as `torch.autograd.grad`, which the hook also
#   changes). Scaling it scales G's gradient exactly; SGD's update follows, Adam's barely moves. A weight on one
#   term of a loss moves where Adam settles; a factor on the whole loss does not.
#   `saved_tensors_hooks` count what autograd keeps, and the count matches the sizes worked out by hand.
# - Compiled modules donate saved activations to a plain backward; a later `retain_graph=True` through them
#   raises. `torch._functorch.config.donated_buffer = False` (the trainer's fix) or orders that never retain.
#   `.item()` in a compiled function is a graph break. A gradient penalty cannot run through a D compiled with an
#   AOTAutograd backend, the default included; `backend="eager"` runs it (lesson 08).

# %% [markdown]
# ## Exercises
#
# ### Build it: a GAN step under autocast, one GradScaler, D's gradient accumulated and clipped
#
# Section 1 ran one scaler for two independent networks, one backward each. A GAN step is ordered; BigGAN-style code
# adds D's gradient up over several micro-batches when a whole batch does not fit, and many GAN codebases clip D's
# gradient norm. Write `amp_step(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2)`: one
# `d_first_reuse_fake` step (lesson 05). `x_fake = G(z)`; then D's gradient over `accum` micro-batches: `x_real` and
# `x_fake` (detached) each cut into `accum` equal chunks, in order, and for each pair `x_part, fake_part` the loss
# `(bce(D(x_part), 1) + bce(D(fake_part), 0)) / 2`, divided by `accum`, with its own backward; D steps once, on the
# sum. Then G's loss `bce(D(x_fake), 1)` through the updated D, and G steps. The forwards and the losses run under
# `torch.autocast("cpu", dtype=torch.bfloat16)`; every loss is scaled by the one `scaler` passed in; D's summed
# gradient norm is clipped to `max_norm` with `torch.nn.utils.clip_grad_norm_`, measured on the true gradient; an
# inf or NaN in one network's gradients skips that network's step only; and the scale is updated once for the
# iteration. The checker runs it on seed 000's G and D with a batch of 8, `accum=2` and `max_norm=0.1` (D's
# gradient norm there is about 0.27), notes every call on the scaler and the batch of every D forward, compares the
# gradient each optimizer steps on with the right one, and runs it twice more: with an inf in one of D's gradients,
# then in one of G's. The whole body is yours.

# %%
def amp_step(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):
    """One d_first_reuse_fake step under bfloat16 autocast: one GradScaler for opt_D and opt_G, D's gradient
    added up over accum micro-batches and clipped to max_norm on its true value, an overflow skipping only its own
    network's step."""
    ### BEGIN SOLUTION
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x_fake = G(z)
    opt_D.zero_grad()                                    # once: the micro-batches add up into .grad
    for x_part, fake_part in zip(x_real.chunk(accum), x_fake.detach().chunk(accum)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss_D = (bce(D(x_part), 1) + bce(D(fake_part), 0)) / 2
        scaler.scale(loss_D / accum).backward()
    scaler.unscale_(opt_D)                               # the true gradient, for the clip
    nn.utils.clip_grad_norm_(D.parameters(), max_norm)
    scaler.step(opt_D)                                   # skipped if D's gradient holds an inf or NaN
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss_G = bce(D(x_fake), 1)
    opt_G.zero_grad()
    scaler.scale(loss_G).backward()
    scaler.step(opt_G)
    scaler.update()                                      # once, after both steps
    ### END SOLUTION

my_answer = amp_step  # SOLUTION: point this at your amp_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_amp_step(my_answer)
assert solved, "amp_step: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# ## Going further · Hooks: read a gradient, change it, count what is saved
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** Hooks let you look inside a step without rewriting it. `x_fake.register_hook(fn)` calls `fn`
# with the gradient of the loss with respect to `x_fake`, the signal G receives through D; if `fn` returns a tensor,
# that tensor replaces the gradient for everything upstream, i.e. all of G. Saved-tensor hooks
# (`torch.autograd.graph.saved_tensors_hooks`) see every tensor autograd keeps for backward. Reading first:

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()
z = torch.randn(8, G.z_dim)
x_fake = G(z)
loss_G = bce(D(x_fake), 1)
want, = torch.autograd.grad(loss_G, x_fake, retain_graph=True)   # before any hook
seen = []
handle = x_fake.register_hook(lambda grad: seen.append(grad.clone()))
loss_G.backward()
handle.remove()
claim("the hook on x_fake receives exactly torch.autograd.grad(loss_G, x_fake): what G gets from D",
      len(seen) == 1 and torch.equal(seen[0], want), f"shape {list(seen[0].shape)}, norm {seen[0].norm():.4f}")


# %% [markdown]
# Now a hook that returns something: half the gradient. Everything upstream of `x_fake` scales with it, since
# backward is linear in the gradient it is handed. What that does to G's *update* depends on the optimizer.
# **Predict, then check:** G is trained once by SGD and once by Adam, each with and without the hook. Whose first
# update is halved too? Run the next cell, which defines the training, then replace the `...` in the one after it
# and run it.

# %%
def G_update(factor, make_opt):
    """G's parameter change after one step, with a hook scaling the gradient at x_fake by `factor`."""
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    opt_G = make_opt(G.parameters())
    z = torch.randn(8, G.z_dim)
    before = [p.detach().clone() for p in G.parameters()]
    x_fake = G(z)
    x_fake.register_hook(lambda grad: grad * factor)
    bce(D(x_fake), 1).backward()
    grads = torch.cat([p.grad.flatten() for p in G.parameters()])
    opt_G.step()
    return grads, torch.cat([(p.detach() - b).flatten() for p, b in zip(G.parameters(), before)])

sgd = lambda params: optim.SGD(params, lr=0.1)
adam = lambda params: optim.Adam(params, lr=1e-3)

# %% reveals=["with SGD, G's update is halved", "Adam, G's first update hardly changes", "constant factor on the gradient almost cancels"] tags=["predict"]
prediction = "SGD"  # SOLUTION: a hook halves the gradient at x_fake. Whose first update of G is halved too, "SGD" or "Adam"?
grads_1, sgd_1 = G_update(1.0, sgd)
grads_half, sgd_half = G_update(0.5, sgd)
_, adam_1 = G_update(1.0, adam)
_, adam_half = G_update(0.5, adam)
halved = lambda hooked, plain: torch.allclose(hooked, plain / 2, atol=1e-7)
followers = [name for name, hooked, plain in (("SGD", sgd_half, sgd_1), ("Adam", adam_half, adam_1))
             if halved(hooked, plain)]
check("optimizer whose update follows a halved gradient", prediction, " and ".join(followers) or "neither",
      why="SGD's step is lr * grad; Adam's first step is about lr * grad / |grad|, so a constant factor cancels.")

# %%
relative = lambda a, b: ((a - b).norm() / b.norm()).item()
claim("halved at x_fake, every gradient of G is exactly halved", torch.equal(grads_half, grads_1 / 2))
claim("with SGD, G's update is halved too", torch.allclose(sgd_half, sgd_1 / 2, atol=1e-6),
      f"relative difference from the unhooked update {relative(sgd_half, sgd_1):.3f}")
claim("with Adam, G's first update hardly changes: Adam divides by the gradient's own size",
      relative(adam_half, adam_1) < 0.01, f"relative difference {relative(adam_half, adam_1):.4f}")


# %% [markdown]
# Adam's first step is about `lr * g / |g|` per parameter, so a constant factor on the gradient almost cancels (only
# its `eps` notices). A factor on the **whole** loss, or a hook that scales all of G's signal, is a learning-rate knob
# under SGD and nearly nothing under Adam. A weight on **one term** of a sum is another matter: it changes the
# direction of the sum's gradient, and so where training settles. WGAN-GP's `gp_weight=10` (lesson 08) is such a
# weight. On the smallest case, $(p-1)^2 + w\,(p+1)^2$, whose minimum is at $p = (1-w)/(1+w)$:

# %%
def adam_settles(w, scale=1.0, steps=3000):
    """Where Adam leaves p on scale * ((p - 1)² + w (p + 1)²), starting from p = 0.5."""
    p = torch.tensor(0.5, requires_grad=True)
    opt = optim.Adam([p], lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        (scale * ((p - 1) ** 2 + w * (p + 1) ** 2)).backward()
        opt.step()
    return round(p.item(), 3)

ends = {(w, scale): adam_settles(w, scale) for w in (1, 10) for scale in (1, 10)}
for (w, scale), p_end in ends.items():
    print(tr("term weight w = {w:<3} whole-loss factor {scale:<3} Adam settles at p = {p}", w=w, scale=scale,
             p=p_end))
claim("a factor on the whole loss does not move where Adam settles",
      ends[1, 1] == ends[1, 10] and ends[10, 1] == ends[10, 10])
claim("a weight on one term does: p = 0 with w = 1, p = -0.818 = (1 - 10) / (1 + 10) with w = 10",
      ends[1, 1] == 0 and ends[10, 1] == round(-9 / 11, 3), f"{ends[1, 1]}, {ends[10, 1]}")

# %% [markdown]
# A hook that changes the gradient's *direction* (clipping each sample, adding noise) moves training the same way.
# One more thing to know: a tensor hook also fires inside `torch.autograd.grad`, and changes what it returns:

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()
x_fake = G(torch.randn(8, G.z_dim))
loss_G = bce(D(x_fake), 1)
plain, = torch.autograd.grad(loss_G, x_fake, retain_graph=True)
x_fake.register_hook(lambda grad: grad * 0.5)
hooked, = torch.autograd.grad(loss_G, x_fake)
claim("after register_hook, torch.autograd.grad(loss_G, x_fake) returns the hooked gradient",
      torch.equal(hooked, plain * 0.5))

# %% [markdown]
# **Counting saved bytes.** The saved-tensor hooks of lesson 03, used to count, with a check you can do by hand: `tanh(Linear(16, 32)(x))` for a
# batch `x` of shape [8, 16]. The layer's `addmm` keeps `x` (8 × 16 floats, for the weight's gradient) and the
# transposed weight (16 × 32, for `x`'s gradient); `tanh` keeps its output (8 × 32), because its derivative is 1 −
# tanh². Four bytes each: 512 + 2048 + 1024 = 3584. Here autograd saves only what the gradients it will compute need (not
# every operation is so frugal: lesson 09 shows a frozen convolution keeping its input), so freezing the layer, or an `x` that does not require grad, removes one of them:

# %%
torch.manual_seed(0)
layer = nn.Linear(16, 32)

def saved_bytes(x_requires_grad, layer_frozen):
    """Bytes and shapes of what autograd saves for tanh(layer(x))."""
    layer.requires_grad_(not layer_frozen)
    x = torch.randn(8, 16, requires_grad=x_requires_grad)
    shapes = []
    def pack(t):
        shapes.append(list(t.shape))
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch.tanh(layer(x))
    layer.requires_grad_(True)
    return sum(4 * s[0] * s[1] for s in shapes), shapes

by_hand = {tr("x and layer require grad"): 4 * (8 * 16 + 16 * 32 + 8 * 32),
           tr("layer frozen"): 4 * (16 * 32 + 8 * 32), tr("x needs no grad"): 4 * (8 * 16 + 8 * 32)}
measured = {tr("x and layer require grad"): saved_bytes(True, False), tr("layer frozen"): saved_bytes(True, True),
            tr("x needs no grad"): saved_bytes(False, False)}
for case, (count, shapes) in measured.items():
    print(tr("{case:<26} saved {shapes}: {count} bytes (by hand {by_hand})", case=case, shapes=shapes, count=count,
             by_hand=by_hand[case]))
claim("the pack hook's count equals the sizes worked out by hand, in all three cases",
      all(measured[k][0] == by_hand[k] for k in by_hand), ", ".join(f"{v[0]}" for v in measured.values()))

# %% [markdown]
# The transposed weight is a view of the weight, not new memory, which is why lesson 09's counter (and
# `gan_lessons.costs`) leaves parameters' storage out. In a frozen D the Linear layers keep only such views; the Conv
# layers still keep their inputs (lesson 09), so what freezing saves is the Linear layers' inputs.

# %% [markdown]
# ## Going further · `torch.compile`: donated buffers and graph breaks
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** `torch.compile(D)` traces D's forward into a graph and compiles a matching backward. Two things
# a GAN loop does can collide with it: keeping a graph for a second backward (`retain_graph=True`, as lesson 05's
# `one_forward` does), and pulling a number out with `.item()` mid-function. Compiling costs time, so the models here
# are tiny, and the backend is `aot_eager`: it runs the same AOTAutograd layer as the default `inductor` backend
# (where donated buffers live) without generating and compiling C++, so it is fast and needs no compiler. On Colab
# with Python 3.13.0, each compiled cell below also prints torch's warning that guards may run slower on that Python
# release; the results are the same (`make check-colab`, docs/setup.md). First, whether `torch.compile` works on this
# machine at all:

# %%
torch._logging.set_logs(dynamo=logging.ERROR)     # keep dynamo's own warnings out of the outputs
import torch._functorch.config as functorch_config

try:
    torch._dynamo.reset()
    torch.compile(nn.Linear(2, 1), backend="aot_eager")(torch.ones(1, 2)).sum().backward()
    compile_works = True
    print(tr("torch.compile works here (backend aot_eager)"))
except Exception as error:                        # any failure: say so, and skip this section's checks
    compile_works = False
    print(tr("torch.compile does NOT work on this machine ({error_type}: {error}). The checks of this side road are "
             "skipped below, each cell says so; the rest of the lesson is unaffected.",
             error_type=type(error).__name__, error=headline(str(error))))
SKIPPED = tr("skipped, not checked: torch.compile does not work on this machine (see above)")

# %% [markdown]
# **Donated buffers.** When AOTAutograd compiles a backward for a plain `backward()`, it marks the activations the
# forward saved as *donated*: the backward may reuse their memory, since nobody will need them again. A backward with
# `retain_graph=True` promises the opposite, and torch refuses it. On torch 2.13 the backward is compiled the first
# time it runs, and whichever backward comes first decides: a plain one donates, and a later `retain_graph=True`
# through the same compiled graph raises. The smallest case:

# %%
HAS_DONATION = compile_works and hasattr(functorch_config, "donated_buffer")    # not in older torch
NO_DONATION = (tr("skipped, not checked: torch {version} has no donated buffers "
                  "(torch._functorch.config.donated_buffer)", version=torch.__version__) if compile_works else SKIPPED)
if HAS_DONATION:
    torch._dynamo.reset()
    torch.manual_seed(0)
    D_small = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
    D_compiled = torch.compile(D_small, backend="aot_eager")
    x = torch.randn(8, 2)
    D_compiled(x).sum().backward()                # the first backward: compiled with donated buffers
    loss = D_compiled(x).sum()
    with expect_error(RuntimeError, "compiled with non-empty donated buffers which requires create_graph=False "
                                    "and retain_graph=False"):
        loss.backward(retain_graph=True)
else:
    print(NO_DONATION)


# %% [markdown]
# In a GAN loop that is one step of a strategy with a plain backward through D, followed by `one_forward`, whose
# `loss_G.backward(inputs=..., retain_graph=True)` goes through the same compiled D. The checks below run two steps
# on tiny compiled G and D, in three versions; the fix is the trainer's own (`_compiled_step` in
# `gan_lessons.training` sets `torch._functorch.config.donated_buffer = False` before compiling), here as a `patch`
# that undoes itself:

# %%
def compiled_steps(order, donate=True, compile_=True):
    """Run the strategies in `order` on tiny compiled G and D; return G's and D's weights after them."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
    opt_G, opt_D = optim.Adam(G.parameters(), lr=1e-3), optim.Adam(D.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    noise = lambda n: torch.randn(n, 4, generator=gen)
    x_real = torch.randn(16, 2, generator=gen) + 2
    with functorch_config.patch(donated_buffer=donate):
        G_run, D_run = (torch.compile(G, backend="aot_eager"), torch.compile(D, backend="aot_eager")) if compile_ else (G, D)
        for name in order:
            strategies.get(name)(G_run, D_run, opt_G, opt_D, x_real, noise)
    return torch.cat([p.detach().flatten() for p in (*G.parameters(), *D.parameters())])

if HAS_DONATION:
    with expect_error(RuntimeError, "compiled with non-empty donated buffers"):
        compiled_steps(["d_first_fresh_fake", "one_forward"])
    alone = compiled_steps(["one_forward", "one_forward"])
    claim("two one_forward steps alone run: their first backward through D kept the graph, so nothing was donated",
          bool(torch.isfinite(alone).all()))
    retain_free = ["d_first_reuse_fake", "g_first", "d_first_fresh_fake", "d_first_frozen_D", "g_first_inputs"]
    claim("the five orders that never retain a graph run one after another, compiled with donation on",
          bool(torch.isfinite(compiled_steps(retain_free * 2)).all()))
    eager = compiled_steps(["d_first_fresh_fake", "one_forward"], compile_=False)
    fixed = compiled_steps(["d_first_fresh_fake", "one_forward"], donate=False)
    claim("with donated_buffer=False the same two steps run, and end where eager PyTorch ends",
          torch.allclose(fixed, eager, atol=1e-6), f"max |difference| {(fixed - eager).abs().max():.1e}")
else:
    print(NO_DONATION)

# %% [markdown]
# So on this torch the error depends on history: `one_forward` on its own passes, and the same strategy after one
# other step fails. Two fixes, then. Turn donation off before compiling, as the trainer does; the cost is the memory
# donation would have saved in the backward. Or do not retain graphs: every order of lesson 05 except `one_forward`
# (and seed 003's, which fails anyway) uses each graph once, and runs compiled with donation on. A gradient penalty
# cannot run through a D compiled with an AOT backend (the default, inductor, or aot_eager): it needs a double
# backward, which their compiled graphs do not support, so `gan_lessons.training` refuses `fast=True` with `wgan_gp` (lesson 08 shows the error).
#
# **Graph breaks.** Dynamo traces Python into a graph until it meets something it cannot put in one; each place
# where it has to stop is a *graph break*. `.item()` turns a tensor into a Python number, the kind of line a training
# step has for its log. `torch._dynamo.explain` reports the graphs and the breaks of a function without running a
# compiler. **Predict, then check:** how many breaks does it report for `logged_step` below, with its one `.item()`?
# Replace the `...`, then run the cell.

# %% reveals=["graphs: 2, graph breaks: 1", "one graph break", "splits the function into two graphs"] tags=["predict"]
prediction = 1  # SOLUTION: how many graph breaks does torch._dynamo.explain report for logged_step, with its one .item()?
torch.manual_seed(0)
D_small = nn.Linear(4, 1)

def logged_step(x):
    loss_D = F.softplus(D_small(x)).mean()
    value = loss_D.item()                          # the loss, for a log line
    return loss_D * 2, value

if compile_works:
    torch._dynamo.reset()
    report = torch._dynamo.explain(logged_step)(torch.randn(8, 4))
    print(tr("graphs: {graphs}, graph breaks: {breaks}", graphs=report.graph_count,
             breaks=report.graph_break_count))
check("graph breaks in logged_step", prediction, report.graph_break_count if compile_works else SKIPPED,
      why="dynamo cannot keep a Python number in the graph by default: it ends the graph at .item() and starts "
          "another after it.")

# %%
if compile_works:
    reason = report.break_reasons[0].reason.splitlines()[0]
    print(tr("reason: {reason}", reason=reason))
    claim("one .item() splits the function into two graphs: one graph break", report.graph_break_count == 1
          and report.graph_count == 2)
    claim("and the reason names Tensor.item", "Tensor.item" in reason)   # its wording varies by version
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        captured = torch._dynamo.explain(logged_step)(torch.randn(8, 4))
    claim("with capture_scalar_outputs=True the number stays in the graph: no break",
          captured.graph_break_count == 0 and captured.graph_count == 1)

    def branching_step(x):
        loss_D = F.softplus(D_small(x)).mean()
        if loss_D.item() > 10:                     # Python decides on the number
            loss_D = loss_D * 0
        return loss_D * 2

    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(capture_scalar_outputs=True):
            branching = torch._dynamo.explain(branching_step)(torch.randn(8, 4))
    except Exception as error:                     # older dynamo (torch 2.1) fails on this case itself
        branching = None
        print(tr("torch {version}: dynamo.explain raises {error_type} on the branch: skipped, not checked",
                 version=torch.__version__, error_type=type(error).__name__))
    if branching is not None:
        claim("but a Python branch on the number breaks the graph even then", branching.graph_break_count == 1)
else:
    print(SKIPPED)

# %% [markdown]
# By default dynamo ends the graph at `.item()`, runs that line in Python, and starts a new graph after it. A break
# is not an error: the function still runs, as two compiled pieces with Python between them. A number can stay in
# the graph only while no Python code looks at it. In a training loop the cheap habit is to keep losses as tensors
# inside the step and read them once in a while, as `gan_lessons.training` does (`_losses` sums the detached
# losses, and `.tolist()` runs once an epoch); on a GPU `.item()` also waits for the device to finish.

# %% [markdown] tags=["read-after-exercises"]
# | what people write | on today's torch |
# |---|---|
# | `torch.autocast("cpu", dtype=torch.bfloat16)` and `torch.amp.GradScaler("cpu")` | both work on a CPU; Linear and Conv layers compute in bfloat16, the loss and every `.grad` stay float32 (section 1) |
# | one `GradScaler` for opt_G and opt_D, an inf in one of G's gradients | opt_G skips its step, opt_D takes its own, the scale halves (section 1) |
# | `clip_grad_norm_` between `scaler.scale(loss).backward()` and `scaler.step(opt)` | clips the scaled gradient, unless `scaler.unscale_(opt)` comes first (section 1, the exercise) |
# | a hook that halves the gradient at `x_fake`, "to slow G down" | halves G's update under SGD; under Adam the first update hardly changes (side road: hooks) |
# | `torch.compile(D)` and a strategy that keeps its graph (`retain_graph=True`) | raises about "donated buffers" once a plain backward has compiled D's backward (side road: `torch.compile`) |
# | `loss_D.item()` inside a compiled function | a graph break: the function runs as two graphs with Python in between (side road: `torch.compile`) |
