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
# # Lesson 05 · GAN update strategies, measured
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/05_gan_update_strategies.ipynb)
#
# [中文版](zh/05_gan_update_strategies.ipynb) · [Student copy](student/05_gan_update_strategies.ipynb)
#
# **Goal.** Run the orders in which a GAN can update D and G, see which ones fail and why, compare what each really
# costs (passes through G and D counted with hooks, arithmetic, time, memory), switch between them with a widget,
# and write one order yourself that wastes nothing.
#
# **Material.** Seed 003 (three strategies and an efficiency argument; 凌逆战, “pytorch训练GAN时的detach()”, 博客园, 2020-11-09) and seed 000
# (`loss_nonsaturating`; 聖光之護, “解决PyTorch GAN训练中的梯度计算错误:inplace操作与计算图分离”, php中文网, 2025-10-02). The seeds are public blog posts, in Chinese, cited in [the instructor notes](README.md#the-seeds); every listing this lesson runs is in its cells.

# %% [markdown] tags=["read-after-exercises"]
# | seed listing | on today's torch |
# |---|---|
# | 003 "strategy 1": `d_loss.backward(retain_graph=True)`, `optimizer_D.step()`, `g_loss.backward()` | raises the version error (since torch 1.5; before, a silently wrong gradient) |
# | 003 "strategy 2": D on `gen_imgs.detach()`, then `g_loss = adversarial_loss(pred_gen, valid)` on that same output | raises "Trying to backward through the graph a second time"; with `retain_graph=True`, the version error (D stepped in between); with `retain_graph=True` and no D step in between, it runs and G gets **no** gradient |
# | 003 "strategy 3": G first, then D on the detached fake | works (`g_first` below); the seed's "it has to be so" about its cost does not hold: section 4 counts it, and freezing D or `backward(inputs=...)` makes it cheaper |
# | 000 `loss_nonsaturating` | raises the version error `[512, 1]` in its loop, and, independently, applies the sigmoid twice: nothing reports that |

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
from IPython.display import Markdown, display
from gan_lessons import costs, strategies
from gan_lessons.lesson import headline, show_source
from gan_lessons.models import Generator

def fresh_gan(batch=64):
    """Seed 000's G and D (seeded), a batch in [-1, 1] standing in for MNIST, and a seeded noise source."""
    return costs.fresh_gan(batch=batch, device=device)


# %% [markdown]
# ## 0 · Two players, one loss
#
# **Why it matters.** Every strategy in this lesson orders the same two updates: here is what is updated, and why
# the G loss they all use is `bce(D(x_fake), 1)`.
#
# The **generator** G maps noise z to a sample, x_fake = G(z). The **discriminator** D maps a sample to one
# **logit**: high means "real". D(x) below is σ(logit), the probability D gives to "real". The two play
#
# $$\min_G \max_D \; \mathbb{E}_{x}\big[\log D(x)\big] + \mathbb{E}_{z}\big[\log\big(1 - D(G(z))\big)\big]$$
#
# Only the second term depends on G, so the game's G loss is log(1 − D(G(z))). Early on D rejects G's poor samples
# (D(G(z)) ≈ 0), where that loss is flat: G would learn least when it is worst. So G minimises the
# **non-saturating** loss −log D(G(z)) instead, which has the same aim. Both losses are binary cross-entropy on D's
# logit (`F.binary_cross_entropy_with_logits`; `strategies.bce(logits, target)` with a constant target):
# target 1 gives −log σ(ℓ), G's loss on a fake and D's real term; target 0 gives −log(1 − σ(ℓ)), D's fake term.

# %%
logit = torch.tensor(-6.0, requires_grad=True)       # D confidently rejects a fake
grad_sat, = torch.autograd.grad(torch.log(1 - torch.sigmoid(logit)), logit)    # the game's G loss
grad_non, = torch.autograd.grad(-torch.log(torch.sigmoid(logit)), logit)       # the non-saturating one
claim("at logit -6 the game's G loss gives G a tiny gradient, the non-saturating loss about -1",
      abs(grad_sat.item()) < 0.01 and abs(grad_non.item() + 1) < 0.01,
      shown=f"{grad_sat.item():.4f} vs {grad_non.item():.4f}")

logits = torch.linspace(-8, 8, 17)
p_real = torch.sigmoid(logits.double())     # the log formulas in float64: in float32, 1 - sigmoid(-8) loses digits
claim("strategies.bce(logits, 1) is the mean of -log sigmoid(logit): G's non-saturating loss",
      torch.allclose(strategies.bce(logits, 1).double(), -torch.log(p_real).mean(), atol=1e-6))
claim("strategies.bce(logits, 0) is the mean of -log(1 - sigmoid(logit)): D's fake term",
      torch.allclose(strategies.bce(logits, 0).double(), -torch.log(1 - p_real).mean(), atol=1e-6))
far = torch.tensor([-200.0])
claim("computed from the logit, it stays finite where log(sigmoid) underflows: 200 at logit -200, not inf",
      strategies.bce(far, 1).item() == 200 and torch.isinf(-torch.log(torch.sigmoid(far))).item())

# %% [markdown]
# To see the game work, shrink it to one dimension. The data are numbers from N(3, 0.5²); G turns one noise number
# into one number, D gives one number a logit. Neither knows 3 or 0.5: only the gradient of G's loss through D tells
# G where the data lie. The loop calls `strategies.g_first`, the same function section 3 runs on seed 000's
# networks, for 1000 steps:

# %%
import matplotlib.pyplot as plt

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))                 # z -> x_fake
D = nn.Sequential(nn.Linear(1, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2),
                  nn.Linear(64, 1), nn.Flatten(0))                                # x -> one logit
opt_G = optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.999))
opt_D = optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.999))
gen = torch.Generator().manual_seed(1)
noise = lambda n: torch.randn(n, 1, generator=gen)
real_batch = lambda n, gen=gen: 3 + 0.5 * torch.randn(n, 1, generator=gen)

shown_gen = torch.Generator().manual_seed(2)                                      # what we compare
x_shown, z_shown = real_batch(10_000, shown_gen).flatten(), torch.randn(10_000, 1, generator=shown_gen)
with torch.no_grad():
    before = G(z_shown).flatten()
for _ in range(1000):
    loss_D, loss_G = strategies.g_first(G, D, opt_G, opt_D, real_batch(256), noise)
with torch.no_grad():
    after = G(z_shown).flatten()

for label, x in ((tr("real"), x_shown), (tr("G before"), before), (tr("G after"), after)):
    print(tr("{label:<9} mean {mean:5.2f}   std {std:.2f}", label=label, mean=x.mean(), std=x.std()))
claim("after training, G's mean is within 0.15 of the real mean (it started near 0)",
      abs(after.mean() - x_shown.mean()).item() < 0.15, shown=f"{after.mean():.2f} vs {x_shown.mean():.2f}")
claim("and G's std is within half the real std of the real std",
      abs(after.std() - x_shown.std()).item() < 0.5 * x_shown.std().item(),
      shown=f"{after.std():.2f} vs {x_shown.std():.2f}, from {before.std():.2f} before training")

plt.figure(figsize=(7, 2.6))
for label, x in ((tr("real"), x_shown), (tr("G before training"), before), (tr("G after 1000 steps"), after)):
    plt.hist(x.numpy(), bins=80, range=(-1.5, 5), density=True, alpha=0.5, label=label)
plt.xlabel("x")
plt.legend(loc="upper center")
plt.title(tr("1-D GAN: real samples, and G's before and after training"))
plt.show()

# %% [markdown]
# G's samples moved onto the data (mean and spread; matching a whole distribution takes longer, lesson 06). From
# section 1 on, G and D are seed 000's MNIST networks (`gan_lessons.models`), called exactly as `g_first` was here.

# %% [markdown]
# ## 1 · Two seed strategies that fail today, and why they failed silently before
#
# **Why it matters.** Seed 003 recommends its strategy 1 for GANs whose D is expensive. On torch ≥ 1.5 it does not
# run. Here it is as a strategy function (the seed's order, with logits instead of `BCELoss`), on seed 000's G and D:

# %%
show_source(strategies.retain_graph_seed003)
G, D, x_real, noise = fresh_gan()
opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
with expect_error(RuntimeError, r"\[torch\.(cuda\.)?FloatTensor \[512, 1\]\], which is output 0 of AsStrided(Backward0)?, is at version 2; expected version 1"):
    strategies.retain_graph_seed003(G, D, opt_G, opt_D, x_real, noise)


# %% [markdown]
# Seed 000's loop fails with the same words (lesson 03 takes the message apart): `loss_nonsaturating` returns both
# losses from one forward, and the loop backpropagates them one after the other. Seed 003 does it on purpose, seed
# 000 by accident; underneath, G's backward goes through D's forward and `optimizer_D.step()` changed D's weights in
# between. Before torch 1.5 the optimizers updated `p.data`, which does not bump the version counter, so the
# backward paired D's **new** weights with activations of the **old** ones. Emulated with a `.data` update, and
# compared with G's honest gradients through the old D and through the new D:

# %%
def pre15_emulation(mode, lr=0.1):
    torch.manual_seed(0)
    G, D = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    x_real, z = torch.randn(16, 2), torch.randn(16, 4)
    x_fake = G(z)
    logits_fake = D(x_fake)
    loss_D = strategies.bce(D(x_real), 1) + strategies.bce(logits_fake, 0)
    loss_D.backward(retain_graph=True)
    if mode != "old D":
        for p in D.parameters():
            p.data.add_(-lr * p.grad)           # a pre-1.5 style update: no version bump
    G.zero_grad()
    logits = D(x_fake) if mode == "new D" else logits_fake
    strategies.bce(logits, 1).backward()
    return torch.cat([p.grad.flatten() for p in G.parameters()])

old, new, mixed = (pre15_emulation(m) for m in ("old D", "new D", "pre-1.5 mix"))
distance = lambda a, b: ((a - b).norm() / b.norm()).item()
claim("the pre-1.5 gradient is G's gradient through neither the old D nor the new D",
      not torch.allclose(mixed, old) and not torch.allclose(mixed, new),
      shown=f"relative distance {distance(mixed, old):.3f} to the old, {distance(mixed, new):.3f} to the new")


# %% [markdown]
# That gradient belongs to neither discriminator, and nothing said so.
#
# **Seed 003's strategy 2** detaches the fake for D (good), then builds G's loss from that **same detached**
# output. It fails for a second reason, `d_loss.backward()` already freed D's graph; with `retain_graph=True`
# the D step makes the saved weights stale, as in strategy 1; and with neither, G would get no gradient at all,
# since the graph of `pred_gen` starts at the detached fake:

# %%
def seed003_strategy2(retain, step_D=True):
    G, D, x_real, noise = fresh_gan(batch=8)
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    gen_imgs = G(noise(8))
    pred_gen, pred_real = D(gen_imgs.detach()), D(x_real)
    opt_D.zero_grad()
    d_loss = (strategies.bce(pred_real, 1) + strategies.bce(pred_gen, 0)) / 2
    d_loss.backward(retain_graph=retain)
    if step_D:
        opt_D.step()
    g_loss = strategies.bce(pred_gen, 1)
    opt_G.zero_grad()
    g_loss.backward()
    return sum(p.grad is not None for p in G.parameters())

with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    seed003_strategy2(retain=False)
with expect_error(RuntimeError, "modified by an inplace operation"):
    seed003_strategy2(retain=True)
n_with_grad = seed003_strategy2(retain=True, step_D=False)
claim("with retain_graph and no D step it runs, and none of G's parameters gets a gradient",
      n_with_grad == 0, shown=f"{n_with_grad} of {len(list(Generator().parameters()))} G parameters have a .grad")

# %% [markdown]
# ## 2 · Seed 000's double sigmoid
#
# **Why it matters.** `loss_nonsaturating` computes `dgz = F.sigmoid(d(gz))` and feeds `dgz` to
# `binary_cross_entropy_with_logits`, which applies a sigmoid itself. No error, no warning, plausible losses.
# Compare G's loss and its gradient with respect to D's logit, with and without the extra sigmoid:

# %%
import warnings

logits = torch.tensor([-10., -6., -2., 0., 2., 6.], requires_grad=True)
with warnings.catch_warnings():
    warnings.simplefilter("error")               # nothing is reported, not even a warning
    correct = F.binary_cross_entropy_with_logits(logits, torch.ones(6), reduction="none")
    seed000 = F.binary_cross_entropy_with_logits(torch.sigmoid(logits), torch.ones(6), reduction="none")
grad_correct, = torch.autograd.grad(correct.sum(), logits)
grad_seed000, = torch.autograd.grad(seed000.sum(), logits)
shrink = grad_correct / grad_seed000
print(tr("D's logit for a fake              : {values}", values=rounded(logits)))
print(tr("loss_G, double sigmoid            : {values}", values=rounded(seed000)))
print(tr("d loss_G / d logit, correct       : {values}", values=rounded(grad_correct)))
print(tr("d loss_G / d logit, double sigmoid: {values}", values=rounded(grad_seed000, 6)))
claim("the shrink factor grows without bound as D rejects the fake more confidently",
      bool((shrink[:-1] > shrink[1:]).all()) and 40_000 < shrink[0].item() < 50_000 and 700 < shrink[1].item() < 900,
      shown=f"{shrink[1]:.0f}x at logit -6, {shrink[0]:.0f}x at logit -10")
sweep = torch.linspace(-30, 30, 601).sigmoid()  # whatever D says, BCE-with-logits now sees an input in (0, 1)
G_seen = F.binary_cross_entropy_with_logits(sweep, torch.ones(601), reduction="none")
claim("with the double sigmoid, G's loss stays between softplus(-1) and softplus(0), 0.31 and 0.69, for any logit",
      G_seen.min().item() >= F.softplus(torch.tensor(-1.0)).item() - 1e-6
      and G_seen.max().item() <= F.softplus(torch.tensor(0.0)).item() + 1e-6,
      shown=f"logits swept from -30 to 30: {G_seen.min():.4f} to {G_seen.max():.4f}")

# %% [markdown]
# Where D confidently rejects a fake, the correct loss pushes G hard (gradient ≈ −1); the double sigmoid gives about
# 800 times less at logit −6, 44,000 times less at −10, with no upper bound, and its loss curve looks calm while
# nothing is learned. Lesson 07's doctor reports this pattern.

# %% [markdown]
# ## 3 · Six strategies that run, side by side in code
#
# **Why it matters.** Every bit of autograd logic is in the order of `zero_grad`, `detach`, `backward` and `step`.
# Before reading them, one question about `g_first`, the order of section 0 and seed 003's strategy 3. It starts:
#
# ```python
# x_fake = G(noise(len(x_real)))
# opt_G.zero_grad()
# loss_G = bce(D(x_fake), 1)
# loss_G.backward()
# ```

# %% reveals=["D's parameters get gradients", "also fills D's grads", "G's backward\\s+(still\\s+|also\\s+)?computes\\s+D's\\s+gradients?"] tags=["predict"]
prediction = "both"  # SOLUTION: after g_first's loss_G.backward(), which network's parameters have .grad: "G", "D" or "both"?
G, D, x_real, noise = fresh_gan(batch=8)
strategies.bce(D(G(noise(8))), 1).backward()
has = lambda net: all(p.grad is not None for p in net.parameters())
check("nets with .grad after g_first's G backward", prediction,
      "both" if has(G) and has(D) else "G" if has(G) else "D",
      why="loss_G flows back through D to reach G, so D's parameters get gradients too; "
          "g_first clears them with opt_D.zero_grad() before D's own backward.")

# %% [markdown]
# Here are the six, each one screen long:

# %%
show_source(*(strategies.get(name) for name in ("one_forward", "d_first_reuse_fake", "g_first", "d_first_fresh_fake",
                                                 "d_first_frozen_D", "g_first_inputs")))

# %% [markdown]
# Two questions on the code above, before the text below walks through it.

# %% reveals=["has to go\\s+\\*through\\* D", "the backward went through D"] tags=["predict"]
prediction = "both"  # SOLUTION: one_forward's loss_G.backward(inputs=list(G.parameters())) is marked "G's grads only". Which networks does that backward pass through: "G", "D" or "both"?
G, D, x_real, noise = fresh_gan(batch=8)
x_fake = G(noise(8))
passed = set()
x_fake.register_hook(lambda grad: passed.add("D"))      # a gradient arrived at D's input
strategies.bce(D(x_fake), 1).backward(inputs=list(G.parameters()))
if all(p.grad is not None for p in G.parameters()):
    passed.add("G")
check("networks loss_G.backward(inputs=G's parameters) passes through", prediction,
      "both" if passed == {"G", "D"} else "neither" if not passed else passed.pop(),
      why="G's gradient can only be reached through D's layers, so the backward went through D all the same; "
          "`inputs=` decides which .grad is filled, not where the backward goes.")

# %% reveals=["keeps? G's graph alive until D has stepped", "keeping G's graph alive"] tags=["predict"]
prediction = "d_first_reuse_fake"  # SOLUTION: which one peaks higher in bytes saved for backward: "d_first_reuse_fake" or "d_first_fresh_fake"?
saved = {name: costs.measure(name, *fresh_gan(), steps=1, warmup=1, memory=False).saved_mib
         for name in ("d_first_reuse_fake", "d_first_fresh_fake")}
check("the higher saved-tensor peak of the two", prediction, max(saved, key=saved.get),
      why="d_first_reuse_fake keeps G's graph alive until D has stepped, under D's own graph of two forwards; "
          "d_first_fresh_fake makes D's fake batch without a graph and builds G's only for G's step.")

# %% [markdown]
# `one_forward` is the correct version of seed 003's idea: G's gradient is taken through D **before**
# `opt_D.step()`, each backward limited by `inputs=` to one network. It is a different algorithm: *simultaneous*
# updates, where G answers the D that scored it, instead of the *alternating* updates of the other orders, where G
# answers the D that was just updated (`g_first` also shows G the old D).
#
# The last two are `d_first_reuse_fake` and `g_first` with one change in G's step. G's backward has to go
# *through* D, but it does not have to compute D's **parameter** gradients, which G's step throws away.
# `d_first_frozen_D` turns them off with `D.requires_grad_(False)` around G's step (pix2pix and CycleGAN do this
# with their `set_requires_grad`); `g_first_inputs` asks for G's gradients only, with
# `loss_G.backward(inputs=list(G.parameters()))`. `tests/package/test_strategies.py` checks that D steps on **identical**
# gradients in all six, and that `one_forward` and `g_first` give G identical gradients, which differ from those
# of the D-first orders.

# %% [markdown]
# ## 4 · The costs, measured
#
# **Why it matters.** Seed 003 argues from theory that its strategy 1 saves a forward but wastes a G backward, and
# that strategy 3 is best. We count instead. `costs.measure` runs a strategy on seed 000's models (batch 64) with
# fresh Adam optimizers and counts per step, with hooks: forward calls of G and D, backward passes through each of
# those calls, and **grad passes**, how many times each parameter's gradient was accumulated (2 means one was
# wasted). It measures memory twice, and the two are different things:
#
# - **saved MiB**: the peak of the bytes autograd keeps in saved tensors for backward (parameters left out), from
#   saved-tensor hooks. It is what a graph costs while it waits for its backward.
# - **allocator peak MiB**: the most memory the allocator held during one step above its level when the step
#   started: the saved tensors, and also the gradients being written, outputs no backward needs, and backward's
#   temporaries. On a CPU it comes from the profiler's record of every allocation and free; on a GPU from CUDA's
#   own peak. It is what decides whether a step fits in memory.

# %%
results = {}
for name in strategies.STRATEGIES:
    G, D, x_real, noise = fresh_gan()
    results[name] = costs.measure(name, G, D, x_real, noise, steps=3 if QUICK else 20, warmup=1 if QUICK else 5)

print("{:<22}{:>12}{:>12}{:>11}{:>11}{:>11}{:>17}".format(tr("strategy"), tr("G fwd/bwd"), tr("D fwd/bwd"), tr("G grads"),
                                                        tr("D grads"), tr("saved MiB"), tr("alloc. peak MiB")))
for name, c in results.items():
    if c.error:
        print(f"{name:<22}", tr("raises: {error}", error=headline(c.error)))
    else:
        print(f"{name:<22}{c.G_forward:>8g}/{c.G_backward:<3g}{c.D_forward:>8g}/{c.D_backward:<3g}"
              f"{c.G_grad_passes:>11g}{c.D_grad_passes:>11g}{c.saved_mib:>11.2f}{c.alloc_mib:>17.2f}")
print(tr("batch 64 | {memory} | allocator: {allocator}", memory=results["g_first"].memory,
         allocator="CUDA" if device.type == "cuda" else "CPU"))

# %% [markdown]
# What the counts say about seed 003's argument (each line computed from the table):

# %%
r = results
passes = ("G_forward", "G_backward", "D_forward", "D_backward", "G_grad_passes", "D_grad_passes")
same = lambda a, b, keys=passes: all(getattr(r[a], k) == getattr(r[b], k) for k in keys)
claim("1. seed 003's strategy 1 raises today; its correct one-forward version saves one D forward",
      r["retain_graph_seed003"].error is not None and r["one_forward"].D_forward == r["d_first_reuse_fake"].D_forward - 1)
claim("2. g_first (seed 003's strategy 3) makes the same passes as d_first_reuse_fake, and both compute D's "
      "gradient twice per step, once for nothing (as seed 003 says of strategy 3)",
      same("g_first", "d_first_reuse_fake") and r["g_first"].D_grad_passes == 2 and r["g_first"].G_grad_passes == 1)
claim("3. freezing D or backward(inputs=...) removes that wasted pass, with the same forward and backward calls",
      all(r[n].D_grad_passes == r[n].G_grad_passes == 1 for n in ("d_first_frozen_D", "g_first_inputs"))
      and same("d_first_frozen_D", "d_first_reuse_fake", passes[:4]) and same("g_first_inputs", "g_first", passes[:4]))
claim("4. d_first_fresh_fake pays one extra G forward", r["d_first_fresh_fake"].G_forward == 2)

# %% [markdown]
# Time per step is the median over the measured steps, after warm-up; it depends on the machine, so the tests do
# not compare this cell's output:

# %% tags=["nbval-ignore-output"]
display(Markdown(costs.cost_table_markdown(results.values())))
ref = results["d_first_reuse_fake"].ms_per_step
print(tr("time relative to d_first_reuse_fake: {ratios}",
         ratios={n: round(c.ms_per_step / ref, 2) for n, c in results.items() if not c.error}))


# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - A GAN's G minimises −log D(G(z)) rather than the game's log(1 − D(G(z))), whose gradient vanishes
#   where D rejects the fakes; `bce(D(x_fake), 1)` is exactly that loss. On a 1-D toy, `g_first` moves
#   G's samples onto the data in 1000 steps.
# - Seed 003's strategy 1 and seed 000's loop raise the version error because `optimizer_D.step()` ran between two
#   backward passes through the same D forward. Before torch 1.5 they ran and produced a gradient of neither the
#   old nor the new D.
# - Seed 003's strategy 2 reuses D's output on a detached fake for G's loss: a freed graph, or with
#   `retain_graph=True` the version error; with no D step in between it would run and give G no gradient at all.
# - Seed 000's `F.sigmoid` before `binary_cross_entropy_with_logits` squashes G's loss into [0.31, 0.69] and
#   shrinks G's gradient by a factor with no upper bound (about 800x at logit −6, 44,000x at −10), silently.
# - Measured: as written, the alternating orders compute D's gradient once for nothing during G's step; freezing D
#   or `backward(inputs=...)` removes that pass in any order. `one_forward` does the least arithmetic and, timed in
#   alternation, is the fastest; a block of steps per strategy can rank them in any order on a busy machine.
# - Saved-tensor bytes (what autograd keeps for backward) are a part of the allocator's peak (everything the step
#   holds at its worst moment). By both, the orders that keep G's graph alive until D has stepped peak highest.

# %% [markdown]
# ## Exercises
#
# **Build BigGAN's step: the hinge loss, several D steps per G step.** WGAN and many GANs after it step D
# `n_critic` times for every G step; BigGAN does it with the hinge loss of lesson 04. Write the whole body of
# `my_step(G, D, opt_G, opt_D, x_real, noise, n_critic=2)`: D first, as in `d_first_fresh_fake` (section 3), D's
# part repeated, with D's gradient computed only by D's own steps. The contract:
#
# - `x_real` is cut into `n_critic` equal chunks, in order. D's fake batches come from **one** G forward: one
#   `noise(len(x_real))` draw, made into a fake batch by a forward that builds no graph (it saves nothing for a
#   backward) and cut into `n_critic` chunks the same way. D's k-th step reads the k-th real chunk and the k-th fake chunk; its loss is the hinge loss
#   `F.relu(1 - D(x_chunk)).mean() + F.relu(1 + D(x_fake)).mean()` (the mean of the two terms is right too).
# - Then G steps once, on a fresh fake batch of one chunk's size from the next draw, scored by D **after** its last
#   step: `-D(x_fake).mean()`.
# - No gradient and no forward is computed for nothing (G runs twice a step, whatever `n_critic` is), every `.grad`
#   an optimizer steps on is that step's alone, and D is left as trainable as it was. Return `(loss_D, loss_G)`,
#   `loss_D` from D's last step.
#
# `exercises.check_strategy` runs your function with `n_critic` 2 and 3 on seed 000's G and D, whose `.grad` still
# holds an earlier gradient, compares the gradients both optimizers step on with the right ones, counts passes with
# the hooks of section 4, and says what is still wrong.

# %%
def my_step(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """BigGAN's step: n_critic hinge-loss D steps on chunks of x_real and of one fake batch, then one G step;
    D's gradient only in D's steps, G run twice. Returns (loss_D, loss_G)."""
    ### BEGIN SOLUTION
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)     # one G forward makes every D step's fake batch
    for x_chunk, x_fake in zip(x_real.chunk(n_critic), fakes):
        opt_D.zero_grad()
        loss_D = F.relu(1 - D(x_chunk)).mean() + F.relu(1 + D(x_fake)).mean()
        loss_D.backward()
        opt_D.step()
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_chunk)))).mean()            # a fresh fake, through the updated D
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G
    ### END SOLUTION

my_answer = my_step  # SOLUTION: point this at your my_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_strategy(my_answer)
assert solved, "strategy: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# ## Going further · Switch strategies yourself
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** The widget runs the chosen strategy for one step on a small GAN (2-D points on a ring of
# eight Gaussians, so it trains in seconds on a CPU). It shows the step's graph, with saved tensors coloured by
# state, the strategy's cost row from the table above, and a short training curve. It draws the default choice
# once when created.

# %%
import math
from gan_lessons.widgets import StrategyPanel

RING_GEN = torch.Generator().manual_seed(0)     # one stream for every batch below

def ring_batch(n=128, gen=RING_GEN):
    """Points from eight Gaussians on a circle: the classic 2-D GAN toy."""
    angle = torch.randint(0, 8, (n,), generator=gen) * (2 * math.pi / 8)
    centres = torch.stack([angle.cos(), angle.sin()], dim=1) * 2
    return centres + 0.05 * torch.randn(n, 2, generator=gen)

torch.manual_seed(0)
toy_G = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 2))
toy_D = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1), nn.Flatten(0))
toy_noise_gen = torch.Generator().manual_seed(1)
toy_noise = lambda n: torch.randn(n, 8, generator=toy_noise_gen)

# %% tags=["nbval-ignore-output"]
panel = StrategyPanel(toy_G, toy_D, ring_batch, toy_noise, results, steps=100 if QUICK else 600)
panel

# %%
shown = panel.shown[panel.buttons.value]
print(tr("default strategy: {name}", name=panel.buttons.value))
print(tr("final (loss_D, loss_G): {final}", final=tuple(round(v, 4) for v in shown["final"])))
print(shown["graph"])

# %% [markdown]
# ## Going further · Why `one_forward` can come out slowest
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# `one_forward` makes the fewest passes, yet an earlier run of section 4's timing cell put it last: 101.5 ms a step against
# 79 to 94 ms for the others, 1.21 times `d_first_reuse_fake`. Candidate reasons: `retain_graph=True` keeps its
# graph alive; two backward calls instead of one; `inputs=` making the engine do extra work. Instead of guessing,
# count the work, then time it so that the machine's noise cannot pick a winner.
#
# First the arithmetic: `FlopCounterMode` counts the floating-point operations of every matrix product and
# convolution of one step, forward and backward (the bulk of a step's work here, which the timing below tests):

# %%
from torch.utils.flop_counter import FlopCounterMode

def step_gflop(name):
    """Matmul and convolution GFLOPs of one step of strategy `name`, after one step (Adam's state exists)."""
    G, D, x_real, noise = fresh_gan()
    args = (G, D, optim.Adam(G.parameters()), optim.Adam(D.parameters()), x_real, noise)
    strategies.get(name)(*args)
    with FlopCounterMode(display=False) as counter:
        strategies.get(name)(*args)
    return counter.get_total_flops() / 1e9

gflop = {name: step_gflop(name) for name, c in results.items() if not c.error}
G, D, x_real, noise = fresh_gan()
with FlopCounterMode(display=False) as counter:
    D(x_real)
d_forward = counter.get_total_flops() / 1e9
for name, g in gflop.items():
    print(tr("{name:<22}{value:6.3f} GFLOP  ({ratio:.2f} of d_first_reuse_fake)", name=name, value=g,
             ratio=g / gflop["d_first_reuse_fake"]))
print(tr("one D forward, batch 64: {value:.3f} GFLOP", value=d_forward))
claim("one_forward does the least arithmetic of the six",
      min(gflop, key=gflop.get) == "one_forward", shown=f"{gflop['one_forward']:.3f} GFLOP")
claim("d_first_frozen_D does one D forward's worth less than d_first_reuse_fake (the wasted D gradient), and "
      "one_forward one D forward less again",
      abs(gflop["d_first_reuse_fake"] - gflop["d_first_frozen_D"] - d_forward) < 1e-3
      and abs(gflop["d_first_frozen_D"] - gflop["one_forward"] - d_forward) < 1e-3)

# %% [markdown]
# So no candidate adds work: `one_forward` skips a D forward, and its `inputs=` skip the wasted D gradient as
# freezing does. Now the time. The table timed each strategy in a block of its own (3 steps in quick mode), one block
# after the other: whatever slows the machine during one block (another program, the clock, the first block's
# warm-up) lands on that one strategy. `costs.interleaved_ms` times single steps in turn instead, reversing the order
# every other round, and we compare each round's steps as pairs. The median of those ratios decides only when its 99%
# interval lies on one side of 1; while it does not, more rounds are timed (up to 50), and on a machine too busy to
# decide, the cell says so instead of guessing:

# %% tags=["nbval-ignore-output"]
import statistics
from gan_lessons import timing

names = ["one_forward", "d_first_frozen_D", "d_first_reuse_fake"]
timed = timing.until_decided(lambda rounds: costs.interleaved_ms(names, rounds=rounds, device=device),
                             "one_forward", "d_first_reuse_fake")
for name, t in timed.items():
    ratio = timing.paired(timed, name, "d_first_reuse_fake").median
    print(tr("{name:<20} median {median:6.1f} ms | paired ratio to d_first_reuse_fake {ratio:.2f} "
             "(FLOPs {flops:.2f}) | one step ranged {low:.1f} to {high:.1f} ms", name=name,
             median=statistics.median(t), ratio=ratio, flops=gflop[name] / gflop["d_first_reuse_fake"],
             low=min(t), high=max(t)))
verdict = timing.claim_timing("timed in alternation, one_forward takes less time per step than d_first_reuse_fake",
                              timing.paired(timed, "one_forward", "d_first_reuse_fake"))

# %% [markdown]
# If the cell printed ✓, the timing agrees with the count: `one_forward`, which does the least work, takes the least
# time. If it printed ?, this machine was too noisy to rank the two, and the count above still says which does less
# work; had the timing decided against the count, the cell would have stopped with ✗. Look at the range of one
# strategy's single steps: on a shared machine it can be wider than the gap between strategies, and then a short
# block per strategy ranks them by luck. The slow `one_forward` of the earlier run came from the way it was timed, not
# from the strategy, which does the least work of all. Count work when you want a verdict; time only in alternation,
# compare ratios of pairs, and let a timing say "cannot decide".
#
# Memory, the two measures side by side:

# %%
order = [n for n, c in results.items() if not c.error]
claim("in every order the allocator's peak is above the saved-tensor peak: saved tensors are only part of a step's "
      "memory", all(r[n].alloc_mib > r[n].saved_mib for n in order),
      shown=", ".join(f"{n} {r[n].saved_mib:.2f} / {r[n].alloc_mib:.2f}" for n in order))
keeps_G_graph, frees_it = ("one_forward", "d_first_reuse_fake"), ("g_first", "d_first_fresh_fake")
claim("by both measures, the orders that keep G's graph alive until D has stepped peak higher (seed 003's point)",
      min(r[n].saved_mib for n in keeps_G_graph) > max(r[n].saved_mib for n in frees_it)
      and min(r[n].alloc_mib for n in keeps_G_graph) > max(r[n].alloc_mib for n in frees_it))
saved_saving = 1 - r["g_first"].saved_mib / r["d_first_reuse_fake"].saved_mib
alloc_saving = 1 - r["g_first"].alloc_mib / r["d_first_reuse_fake"].alloc_mib
claim("freeing G's graph early (g_first against d_first_reuse_fake) saves about a fifth of the saved tensors and "
      "about a third of the allocator's peak", 0.15 < saved_saving < 0.25 and 0.25 < alloc_saving < 0.40,
      shown=f"{saved_saving:.0%} and {alloc_saving:.0%}")

# %% [markdown]
# So: seed 003's strategy 1 is not an option. Seed 003 counts its strategy 3 correctly, including that G's backward
# still computes D's gradients, which are then cleared; the D-first order does the same. Where the seed goes wrong
# is in saying that this pass *has to* happen: freezing D or `backward(inputs=...)` skips it in any alternating
# order, with the same forwards. Memory agrees with seed 003's point about its strategy 2: keeping G's graph alive
# until D has stepped costs memory by both measures. Choose first by the algorithm you want (does G answer the old
# or the new D?), then drop the wasted D gradient, whichever order you chose.
