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
# # Lesson 04 · `detach()`, `torch.no_grad()` and `torch.inference_mode()`
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/04_detach_and_no_grad.ipynb)
#
# [中文版](zh/04_detach_and_no_grad.ipynb) · [Student copy](student/04_detach_and_no_grad.ipynb)
#
# **Goal.** Know exactly what each of the three ways of "turning gradients off" makes, use `detach()` to cut the
# G→D gradient in a GAN step (and check every parameter's `.grad` to prove it), and recognise the two places
# where detach is the wrong fix: when it removes the gradient G needs, and when one optimizer owns both models. Then weigh seed 000's claim
# that `detach()` is the more precise choice than `no_grad`, with G's BatchNorm in the picture. Build a D step and a
# sampling function that leave G alone.
#
# **Material.** Seed 000 (its corrected loop; 聖光之護, “解决PyTorch GAN训练中的梯度计算错误:inplace操作与计算图分离”, php中文网, 2025-10-02), seed 001 (the `d.detach()` fix),
# seed 003 (`detach` in its strategies; 凌逆战, “pytorch训练GAN时的detach()”, 博客园, 2020-11-09), seed 004 (the shared-optimizer caveat). The seeds are public blog posts, in Chinese, cited in [the instructor notes](README.md#the-seeds); every listing this lesson runs is in its cells.

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
from gan_lessons import graphs
from gan_lessons.models import Generator, Discriminator

# %% [markdown]
# ## 1 · What `detach()` returns
#
# **Why it matters.** `detach()` returns a new tensor object with no `grad_fn`, so autograd will not follow it
# back. It is not a copy: it points at the **same memory**. A GAN step hands `x_fake.detach()` to D and keeps
# `x_fake` for G, so what happens to one can happen to the other.

# %%
a = torch.ones(3, requires_grad=True)
y = a.exp()                       # exp saves its output y
y_detached = y.detach()
claim("y.detach() shares y's memory", y_detached.data_ptr() == y.data_ptr())
claim("yet it is an alias, not a view in autograd's sense: it has no _base", not y_detached._is_view() and y_detached._base is None)

# %% reveals=["shares?[^.\\n]*version counter", "bumped y's version"] tags=["predict"]
prediction = False  # SOLUTION: after `y = a.exp(); y.detach().zero_()`, does `y.sum().backward()` fill a.grad? (True/False)
a = torch.ones(3, requires_grad=True)
y = a.exp()
y.detach().zero_()
try:
    y.sum().backward()
    raised = False
except RuntimeError:
    raised = True
check("backward after zeroing y.detach() in place fills a.grad", prediction, not raised and a.grad is not None,
      why="detach() shares y's memory and also its version counter: zero_() bumped y's version, and exp saved y "
          "for its backward (lesson 03).")

# %%
a = torch.ones(3, requires_grad=True)
y = a.exp()
y_detached = y.detach()
version_before = y._version
y_detached.zero_()
claim("y_detached.zero_() zeroed y and bumped y's version", torch.equal(y, torch.zeros(3)) and y._version == version_before + 1,
      f"y = {rounded(y)}, version {version_before} -> {y._version}")
with expect_error(RuntimeError, "output 0 of Exp(Backward0)?, is at version 1; expected version 0"):
    y.sum().backward()

# %% [markdown]
# `detach()` shares storage **and** the version counter, so autograd notices an in-place change made through it.
# If you need a detached tensor you may change, use `y.detach().clone()`.

# %% [markdown]
# ## 2 · `detach()` vs `torch.no_grad()` vs `torch.inference_mode()`
#
# **Why it matters.** All three stop gradients, but they make different things, and picking the wrong one either
# wastes memory or raises later.

# %%
G = nn.Linear(4, 4)
z = torch.randn(2, 4)

x_detach = G(z).detach()              # graph built, then cut: the forward saved tensors for nothing
with torch.no_grad():
    x_nograd = G(z)                   # no graph built at all
with torch.inference_mode():
    x_inference = G(z)                # no graph, and no version counter either

made = {"detach": x_detach, "no_grad": x_nograd, "inference_mode": x_inference}
claim("all three are leaves with requires_grad=False and no grad_fn",
      all(t.is_leaf and not t.requires_grad and t.grad_fn is None for t in made.values()))
inference = [name for name, t in made.items() if t.is_inference()]
claim("only inference_mode makes an inference tensor", inference == ["inference_mode"], ", ".join(inference))

# %% [markdown]
# Three fake batches that look alike: no graph behind any of them, and the same values. The D step trains D on a
# fake batch: `D(x_fake)`, a loss, a backward into D's weights.

# %% reveals=["Inference tensors cannot be saved", "never for data that will enter training"] tags=["predict"]
prediction = "inference_mode"  # SOLUTION: D = nn.Linear(4, 1) trains on each of the three; which ones raise? "none", or their names joined by ", "
D = nn.Linear(4, 1)
raising = []
for name, x_fake in made.items():
    try:
        D(x_fake).sum().backward()
    except RuntimeError:
        raising.append(name)
check("fake batches D cannot train on", prediction, ", ".join(raising) or "none",
      why="D's Linear saves its input for the weight's gradient, and an inference tensor cannot be saved for "
          "backward; the detached and the no_grad batch are ordinary tensors.")

# %%
D = nn.Linear(4, 1)
D(x_nograd).sum().backward()
claim("D on a no_grad fake: backward runs and fills D.weight.grad", D.weight.grad is not None)
with expect_error(RuntimeError, "Inference tensors cannot be saved for backward"):
    D(x_inference).sum().backward()
with expect_error(RuntimeError, "Inference tensors do not track version counter"):
    x_inference._version


# %% [markdown]
# | tool | makes | use it for |
# |---|---|---|
# | `t.detach()` | an alias of `t`: same memory, same version counter, no `grad_fn` (torch does not mark it as a view) | cutting a graph you still need elsewhere (the fake batch for D, reused for G) |
# | `with torch.no_grad():` | ordinary tensors with no graph | optimizer updates, evaluation, making a fake batch only D will see |
# | `with torch.inference_mode():` | inference tensors (no graph, no version counter) | pure inference: sampling images, computing metrics; never for data that will enter training |
#
# Seed 000's corrected loop writes `with torch.no_grad(): fake_samples = g(z).detach()`. It is correct; the
# `detach()` inside `no_grad` adds nothing, since no graph was built.

# %% [markdown]
# ## 3 · Cutting the G→D gradient in a GAN step
#
# **Why it matters.** D's loss on a fake batch must train D only. What does `loss_D.backward()` do to G when the
# fake batch goes into D as G made it? We check **every** parameter's `.grad`, on seed 000's models.

# %%
def grads_after_D_step(detach):
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    z, x_real = torch.randn(8, G.z_dim), torch.rand(8, 1, 28, 28) * 2 - 1
    x_fake = G(z)
    logits_fake = D(x_fake.detach() if detach else x_fake)
    loss_D = (F.binary_cross_entropy_with_logits(D(x_real), torch.ones(8))
              + F.binary_cross_entropy_with_logits(logits_fake, torch.zeros(8)))
    loss_D.backward()
    count = lambda net: (sum(p.grad is not None for p in net.parameters()), len(list(net.parameters())))
    return count(G), count(D)


# %% reveals=["G 14/14", "fills the \\.grad of every G parameter"] tags=["predict"]
prediction = 14  # SOLUTION: seed 000's G has 14 parameter tensors; without detach, how many have a .grad after loss_D.backward()?
check("G parameters with a .grad after an undetached D step", prediction, grads_after_D_step(detach=False)[0][0],
      why="D's loss reaches every G parameter through x_fake, so backward fills all of them.")

# %%
(g_with, g_all), (d_with, d_all) = grads_after_D_step(detach=False)
claim("without detach, loss_D.backward() fills the .grad of every G parameter", g_with == g_all,
      f"G {g_with}/{g_all}, D {d_with}/{d_all} parameters with .grad")
(g_with, g_all), (d_with, d_all) = grads_after_D_step(detach=True)
claim("with x_fake.detach(), every G parameter's .grad is None, and every D parameter has one",
      g_with == 0 and d_with == d_all, f"G {g_with}/{g_all}, D {d_with}/{d_all} parameters with .grad")
claim("seed 000's G has 14 parameter tensors and its D 8", g_all == 14 and d_all == 8)

# %% [markdown]
# With `detach()` the D step touches D's 8 parameters and none of G's 14. Without it, the backward runs through
# all of G: with `opt_G.zero_grad()` in the right place that is "only" wasted work, but it is the source of the
# bugs in lessons 02 and 03.
#
# **Seed 000's corrected loop, run as written.** Its D ends in `Reshape()`, so it returns one logit per image,
# shape `[64]`; its labels are built as `[64, 1]` "to match the discriminator's output". `binary_cross_entropy_with_logits`
# refuses the mismatch, so the "fix" stops at its first loss:

# %%
g, d = Generator(), Discriminator()
x_real = torch.rand(64, 1, 28, 28) * 2 - 1
real_output = d(x_real)
real_label = torch.ones(x_real.shape[0], 1, device=device)  # as in seed 000
with expect_error(ValueError, r"Target size \(torch.Size\(\[64, 1\]\)\) must be the same as input size \(torch.Size\(\[64\]\)\)"):
    F.binary_cross_entropy_with_logits(real_output, real_label).mean()

# %% [markdown]
# With labels of shape `[64]` the loop runs, and it is the "D first, fresh G forward" order of lesson 05.

# %% [markdown]
# ## 4 · Seed 000's `no_grad` and `detach()`, and G's BatchNorm
#
# **Why it matters.** Seed 000's notes say that for the fake batch D sees, `detach()` "expresses more precisely"
# the intent "use the data only, do not track where its gradient came from" (its loop's comment: `detach` is
# "more common and flexible"). Half of that is true. `detach()` is narrower: it cuts one tensor's history,
# while `no_grad` covers every operation in its block. But for D's fake batch it is not more precise in effect:
# D gets the same gradient either way, and `G(z).detach()` first runs G's forward **with** a graph, saving
# tensors for a backward that never comes. And G holds more state than its graph: BatchNorm's statistics.

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()          # seed 000's models
z = torch.randn(64, G.z_dim)
lives_anyway = [*G.parameters(), *G.buffers(), z]

out = G(z)
x_fake_detach = out.detach()                 # the way seed 000's notes prefer
saved_detach = graphs.saved_bytes({"G(z)": out}, lives_anyway)
del out                                      # the graph goes with it
with torch.no_grad():
    x_fake_nograd = G(z)                     # no graph at all
saved_nograd = graphs.saved_bytes({"G(z)": x_fake_nograd}, lives_anyway)

def D_grads(x_fake):
    D.zero_grad()
    F.binary_cross_entropy_with_logits(D(x_fake), torch.zeros(64)).backward()
    return [p.grad.clone() for p in D.parameters()]

claim("D gets the same gradient from the detached and the no_grad fake batch",
      all(torch.equal(a, b) for a, b in zip(D_grads(x_fake_detach), D_grads(x_fake_nograd))))
claim("G(z).detach(): G's forward saved activations for a backward that never runs; no_grad saved none",
      saved_detach > 0 and saved_nograd == 0, f"{saved_detach / 2**20:.1f} MiB vs {saved_nograd} bytes")

# %% [markdown]
# Those tensors are freed with the graph once the statement ends, so the cost is a higher peak while G runs,
# not a leak. For a fake batch that only D will see, `with torch.no_grad(): x_fake = G(z)` is the cheaper way and
# just as exact. `detach()` is the tool when the same `G(z)` is needed both ways, cut for D's loss and whole for
# G's (`d_first_reuse_fake` and `g_first` in lesson 05). Seed 000 writes both; the `detach()` adds nothing.
#
# **G's BatchNorm.** G is in training mode. A BatchNorm layer keeps running statistics (`running_mean`,
# `running_var`, `num_batches_tracked`): buffers, not parameters, which it normalises with in eval mode. Seed
# 000's loop makes D's fake batch under `no_grad`, with G in training mode.

# %%
bn = G.net[1]                                # G's first BatchNorm1d
def bn_change(run):
    """Run once; say whether bn.running_mean changed and how much num_batches_tracked grew."""
    mean, batches = bn.running_mean.clone(), bn.num_batches_tracked.item()
    run()
    return not torch.equal(mean, bn.running_mean), bn.num_batches_tracked.item() - batches

def G_under_no_grad():
    with torch.no_grad():
        G(z)


# %% reveals=["(updates?|moves?|changes?) (its |their |BatchNorm's |the )?running statistics", "still updates BatchNorm"] tags=["predict"]
prediction = True  # SOLUTION: in training mode, does `with torch.no_grad(): G(z)` change bn.running_mean?
check("a no_grad forward changes BatchNorm's running_mean", prediction, bn_change(G_under_no_grad)[0],
      why="running statistics are buffers that every training-mode forward updates; no_grad only stops the graph.")

# %% [markdown]
# A training-mode BatchNorm updates its running statistics on every forward. The forward itself writes them, with
# no gradient or optimizer involved, so turning the graph off does not stop them. In seed 000's step G runs twice,
# once under `no_grad` for D's fake batch and once with a graph for G's step:

# %%
changed, counted = bn_change(G_under_no_grad)
claim("under no_grad, G(z) still updates BatchNorm's running statistics", changed and counted == 1,
      f"num_batches_tracked +{counted}")
changed, counted = bn_change(lambda: G(z).detach())
claim("so does G(z).detach()", changed and counted == 1, f"num_batches_tracked +{counted}")

opt_G, opt_D = optim.Adam(G.parameters(), lr=1e-3), optim.Adam(D.parameters(), lr=1e-3)
x_real = torch.rand(64, 1, 28, 28) * 2 - 1
real, fake = torch.ones(64), torch.zeros(64)   # shape [B], which seed 000's loop needs

def seed000_step():
    opt_D.zero_grad()
    with torch.no_grad():
        x_fake = G(torch.randn(64, G.z_dim))     # G's first forward: D's fake batch
    loss_D = (F.binary_cross_entropy_with_logits(D(x_real), real)
              + F.binary_cross_entropy_with_logits(D(x_fake), fake))
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    loss_G = F.binary_cross_entropy_with_logits(D(G(torch.randn(64, G.z_dim))), real)   # the second, with a graph
    loss_G.backward()
    opt_G.step()

changed, counted = bn_change(seed000_step)
claim("one step of seed 000's loop moves them twice", changed and counted == 2, f"num_batches_tracked +{counted}")

G.eval()
changed, counted = bn_change(G_under_no_grad)
claim("G.eval() is what stops them", not changed and counted == 0, f"num_batches_tracked +{counted}")
with torch.no_grad():
    gap = (G(z) - x_fake_nograd).abs().max().item()
G.train(True)                                # back to training mode
claim("and eval() changes G's output: BatchNorm now normalises with the running statistics", gap > 0,
      f"max |difference| from the training-mode batch {gap:.2f}")


# %% [markdown]
# The statistics count G's forwards, not G's steps: two per step here, both from the same G, which is
# harmless but worth knowing when you read `num_batches_tracked`. `no_grad` and `detach()` switch off the graph,
# never a module's mode; `G.eval()` switches the mode, and with it what G computes, so it belongs to sampling, not
# to making D's fake batch.

# %% [markdown] tags=["read-after-exercises"]
# **The seed listings, judged.**
#
# | seed listing | on today's torch |
# |---|---|
# | 000: the "corrected training loop" | raises `ValueError: Target size (torch.Size([64, 1])) must be the same as input size (torch.Size([64]))` at its first loss; its D returns `[B]`, its labels are `[B, 1]` |
# | 000: `with torch.no_grad(): fake = g(z).detach()` | works; the `detach()` inside `no_grad` does nothing more |
# | 000's notes: `detach()` "expresses the intent more precisely" than `no_grad` | half true: `detach()` cuts one tensor, `no_grad` a whole block, and D gets the same gradient from both; but `detach()` comes after a forward that saved tensors for nothing. Neither stops G's BatchNorm running statistics (section 4) |
# | 001: `lossG = (g + d.detach()).sum()` | runs, but G's gradient loses the part that flows through D |
# | 004: detach with `itertools.chain` | runs; model1 gets no gradient from `l2` (lesson 02): its `.grad` stays `None`, so the shared Adam skips it (side road "When detach is wrong (2)"; the last one asks what happens when it holds zeros instead) |

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - `detach()` is an alias: same memory, same version counter, no `grad_fn`. `detach().clone()` when you need to
#   modify it.
# - `no_grad` builds no graph; `inference_mode` also drops version counters, and its tensors cannot be saved for
#   a later backward.
# - In a GAN step, detach the fake batch for **D's** loss: G's 14 parameters then receive no gradient from it.
# - Detach is wrong where a loss must train what is upstream: G's loss through D, and any loss whose optimizer
#   owns both models. Seed 000's corrected loop also needs labels of shape `[B]`, not `[B, 1]`.
# - A parameter cut off by `detach()` gets no gradient; whether it then stays put depends on `zero_grad`, as the
#   last section, after the exercises, shows.
# - For D's fake batch, `no_grad` and `detach()` give D the same gradient; `no_grad` builds no graph, `detach()`
#   cuts one after the forward saved tensors for nothing. Neither stops BatchNorm's running statistics (twice
#   per step in seed 000's loop); `G.eval()` does, and changes G's output.

# %% [markdown]
# ## Exercises
#
# ### Build it: a D step that trains D and nothing else
#
# SAGAN and BigGAN train D with the **hinge loss** instead of BCE: D's score on a real image is pushed up until it
# reaches 1, its score on a fake pushed down until it reaches -1, and a score past its margin adds nothing. Write
# `d_step(G, D, opt_D, z, x_real)`: one step of D on `relu(1 − D(x_real)).mean() + relu(1 + D(G(z))).mean()`, where D
# returns one score per image (shape `[B]`) and `relu` is `F.relu`. It must train D, and its backward must not go
# into G (section 3). Return `loss_D`. The checker runs it on seed 000's models, D's scores spread past the margins
# and its `.grad` holding an earlier gradient, as they are mid-training; it reads D's gradients at `opt_D.step()`
# (with `register_step_pre_hook`) and compares them with the right ones (the sum of the two terms or their mean),
# and it watches G's parameters for any gradient computed along the way. The whole body is yours.

# %%
def d_step(G, D, opt_D, z, x_real):
    """One D step on the hinge loss: real scores pushed up to 1, fake scores down to -1; trains D, and its backward
    never enters G."""
    ### BEGIN SOLUTION
    x_fake = G(z).detach()                    # cut from G: D's backward stops here
    loss_D = F.relu(1 - D(x_real)).mean() + F.relu(1 + D(x_fake)).mean()
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    return loss_D
    ### END SOLUTION

my_answer = d_step  # SOLUTION: point this at your d_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_d_step(my_answer)
assert solved, "d_step: not solved yet, or not right: the lines above say what is missing"


# %% [markdown]
# ### Build it: samples for a figure, mid-training
#
# Every few hundred steps a training loop draws a grid of G's images (lesson 06's trainer does). That sampling
# must leave no trace on training: section 4 showed what a forward in training mode does to BatchNorm's running
# statistics, and that a `detach()` after the forward comes too late to save the graph's memory. Write
# `sample(G, z)`: it returns G's images **as G computes them in evaluation mode**, builds no graph, leaves G's
# parameters and running statistics as they were, and leaves G in the mode it found it in (training or
# evaluation). The checker trains a small G for two steps, calls your function on it in training mode and then in
# evaluation mode, counts the tensors its forward saved with `saved_tensors_hooks`, and compares everything else.

# %%
def sample(G, z):
    """G's images for a figure: eval-mode output, no graph, nothing about G changed."""
    ### BEGIN SOLUTION
    was_training = G.training
    G.eval()                                  # BatchNorm normalises with its running statistics
    with torch.no_grad():                     # no graph: nothing saved for a backward
        images = G(z)
    G.train(was_training)
    return images
    ### END SOLUTION

my_answer = sample  # SOLUTION: point this at your sample

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_sample(my_answer)
assert solved, "sample: not solved yet, or not right: the lines above say what is missing"


# %% [markdown]
# ## Going further · When detach is wrong (1): it can remove the gradient G needs
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** Seed 001 fixes its G/D toy with `lossG = (g + d.detach()).sum()`. It runs, but G's
# loss now ignores the path through D, the very path a GAN's generator learns from. Compare with the gradient
# of the loss as written, computed correctly: with D's updated weights, by a fresh forward.

# %%
def seed001_grads(fix):
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Linear(2, 2)
    optimD = optim.Adam(D.parameters())
    t = torch.tensor([1., 2], requires_grad=True)
    g = G(t)
    d = D(g)
    optimD.zero_grad()
    d.sum().backward(retain_graph=True)
    optimD.step()
    G.zero_grad(); D.zero_grad()           # every .grad back to None
    if fix == "seed 001: d.detach()":
        (g + d.detach()).sum().backward()
    else:                                  # fresh forward through the updated D
        g = G(t)
        (g + D(g)).sum().backward()
    return t, G.weight.grad, D.weight.grad

t, detached, D_grad = seed001_grads("seed 001: d.detach()")
_, fresh, _ = seed001_grads("fresh forward")
claim("seed 001's d.detach(): lossG gives D no gradient (D.weight.grad is None)", D_grad is None)
claim("and G's gradient is only d(sum g)/dW: each row is t, whatever D is", torch.equal(detached, t.detach().expand(2, 2)),
      f"G.weight.grad = {rounded(detached)}")
gap = (detached - fresh).abs().max().item()
claim("it differs from G's gradient by a fresh forward through the updated D", not torch.allclose(detached, fresh),
      f"fresh forward: {rounded(fresh)}, max |difference| {gap:.4f}")

# %% [markdown]
# The detached version's gradient is just `d(sum g)/dW`, the same whatever D says. For a GAN that means G stops
# learning from D. Seed 001's reason for the detach, that G's loss should compute no gradient for D's parameters,
# is met, but at the price of the path through D; freezing D or `backward(inputs=...)` (lesson 05) keep the path
# and still spare D's gradients. Detach the **fake batch for D's loss**, never D's output in G's loss.

# %% [markdown]
# ## Going further · When detach is wrong (2): one optimizer for both models
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** Seen from the other side than lesson 02: if a single optimizer steps both models, a
# `detach()` in a loss leaves the parameters upstream of it with no gradient from that loss, and what the
# optimizer then does to them depends on their `.grad`. The symptom is a model that silently never changes, or
# one that does something you did not ask for.

# %%
import itertools

torch.manual_seed(0)
model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
opt = optim.Adam(itertools.chain(model1.parameters(), model2.parameters()), lr=0.1)
before = model1.weight.detach().clone()
data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
for step in range(5):
    opt.zero_grad()
    F.cross_entropy(model2(model1(data).detach()), label).backward()
    opt.step()
claim("nothing reaches model1 through the detach: model1.weight.grad is None", model1.weight.grad is None)
claim("so the shared Adam skips it: model1 is unchanged after 5 steps", torch.equal(before, model1.weight))


# %% [markdown]
# ## Going further · `None` or zeros: `zero_grad(set_to_none=...)`
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# In the side road "When detach is wrong (2)", model1 stayed put because its `.grad` was `None`:
# `opt.zero_grad()` sets every `.grad` to `None` (`set_to_none=True`, the default since torch 2.0), backward never
# wrote one, and an optimizer skips a parameter whose `.grad` is `None`. `opt.zero_grad(set_to_none=False)` fills
# the `.grad`s with zeros instead, as `zero_grad()` did before torch 2.0. Below, one Adam owns G and D; G takes a
# step, then comes a D step on `x_fake.detach()`, so G's `.grad` is zeros or `None` at the second `opt.step()`.

# %%
def G_after_a_D_step(set_to_none):
    torch.manual_seed(0)
    G, D = nn.Linear(4, 2), nn.Linear(2, 1)
    opt = optim.Adam(itertools.chain(G.parameters(), D.parameters()), lr=0.1)   # one optimizer owns both
    z = torch.randn(8, 4)
    F.softplus(-D(G(z))).mean().backward()          # a G step: Adam now has running averages for G
    opt.step()
    opt.zero_grad(set_to_none=set_to_none)
    before = G.weight.detach().clone()
    F.softplus(D(G(z).detach())).mean().backward()  # D's fake loss: nothing reaches G
    opt.step()
    return G.weight.grad, (G.weight - before).abs().max().item()


# %% reveals=["zero \\.grad is (still )?stepped", "Adam still moves G", "`\\.grad` of zeros (would not have kept|does not keep)"] tags=["predict"]
prediction = "moves"  # SOLUTION: with opt.zero_grad(set_to_none=False), G's .grad is zeros at the D step's opt.step(): does G "move" or "stay"?
check("G at a D step with zeroed, not None, grads", prediction,
      "moves" if G_after_a_D_step(set_to_none=False)[1] > 0 else "stays",
      why="a zero .grad is still stepped, and Adam's step comes from its running averages, which G's earlier step "
          "filled. Only a parameter whose .grad is None is skipped.")

# %%
grad, moved = G_after_a_D_step(set_to_none=False)
claim("zero_grad(set_to_none=False): G.weight.grad is zeros, and Adam still moves G",
      torch.equal(grad, torch.zeros(2, 4)) and moved > 0, f"max |change| {moved:.4f}")
grad, moved = G_after_a_D_step(set_to_none=True)
claim("zero_grad(set_to_none=True): G.weight.grad is None, and Adam leaves G exactly as it was",
      grad is None and moved == 0, f"max |change| {moved}")

# %% [markdown]
# A zero `.grad` is still stepped, and Adam's step comes from its running averages of **earlier** gradients, not
# from this step's gradient alone: a parameter that has learned before keeps moving. A `.grad` of zeros does not keep
# it still. So "no gradient, no update"
# holds only while `.grad` is `None`. Plain SGD without momentum would not move G on a zero gradient (its step is
# `lr * grad`); SGD with momentum, like Adam, would.
