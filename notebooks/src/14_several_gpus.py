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
# # Lesson 14 · Several GPUs: what DistributedDataParallel changes in a GAN step
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/14_several_gpus.ipynb)
#
# [中文版](zh/14_several_gpus.ipynb) · [Student copy](student/14_several_gpus.ipynb)
#
# **Goal.** The day a GAN moves to several GPUs, the errors of lessons 01 to 10 come back in new forms, and a few
# new ones arrive. `DistributedDataParallel` (DDP) runs one copy of G and D per device, each on its own slice of
# the batch, and keeps the copies equal. This lesson shows what that adds to a step and
# where it breaks: parameters no loss reaches, BatchNorm's buffers, seed 003's order, gradient accumulation, noise
# and files.
#
# **How it runs here.** Every experiment runs in two processes that this notebook starts on the CPU, joined by
# PyTorch's gloo backend, as `torchrun --nproc_per_node=2` would start them on two GPUs with NCCL. What DDP does
# to autograd is the same on both (SyncBatchNorm aside: GPUs only); the speed is not (the note at the end says what a GPU changes). Each
# experiment is a plain function in `gan_lessons/ddp_lesson.py`, `f(rank, world, ...)`, called in both processes
# by `processes.run`, which returns what each process returned, rank 0 first. About 58 minutes at a careful pace.

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
import inspect
from gan_lessons import ddp_lesson, processes
from gan_lessons.lesson import show_source

def same(a, b):
    return torch.allclose(a, b, rtol=1e-5, atol=1e-7)


# %% [markdown]
# ## 1 · What DDP adds to a step
#
# **Why it matters.** Every distributed bug below comes from something DDP adds that the training code does not
# show: a hook on every parameter that acts during `backward()`, the buckets gradients travel in between the
# processes, and its handling of buffers, which no gradient reaches.
#
# Wrapping is one line, `ddp = DistributedDataParallel(D)`; the training code then calls `ddp(x)` where it called
# `D(x)`. Each process below computes D's loss on its **own** batch (a different one per rank) and calls
# `backward()`, once on a plain D and once on a DDP-wrapped D from the same weights:

# %%
show_source(ddp_lesson.averaged)

# %% [markdown]
# **Predict, then check.** After `backward()` through the DDP-wrapped D, rank 1's `D` holds a `.grad`. Is it the
# gradient of rank 1's own loss, as on one process?

# %% reveals=["the mean of the two processes' own gradients", "is not rank 1's own"] tags=["predict"]
prediction = False  # SOLUTION: is rank 1's .grad after the DDP backward the gradient of rank 1's own loss? (True/False)
rank0, rank1 = processes.run(ddp_lesson.averaged)
check("rank 1's .grad is its own loss's gradient", prediction, same(rank1["after_ddp"], rank1["own"]),
      why="DDP's hooks average each gradient over the processes during the backward itself: every process ends "
          "with the mean of the two processes' own gradients, so rank 1's .grad is not rank 1's own.")

# %%
mean_of_own = (rank0["own"] + rank1["own"]) / 2
claim("after the DDP backward, each process holds the mean of the processes' own gradients",
      same(rank0["after_ddp"], mean_of_own) and same(rank1["after_ddp"], mean_of_own))
claim("and the two processes hold the same gradient, to the last bit: their optimizers take the same step",
      torch.equal(rank0["after_ddp"], rank1["after_ddp"]))
claim("the gradients travelled in one bucket (D is small), sent once in the backward",
      rank0["buckets_sent"] == 1, shown=f"bucket sizes {rank0['bucket_sizes']} bytes: D's 193 float32 entries")

# %% [markdown]
# The averaging happens **inside** `backward()`: DDP registers a hook that fires when a parameter's gradient is
# ready, and sends the gradients in buckets (25 MiB by default) as they fill, so communication overlaps the rest of
# the backward. The counting hook above (`register_comm_hook`) sees each bucket go. That is why a loss that does not
# reach every parameter breaks DDP: the bucket that holds the parameter never fills, so it is never averaged, and
# DDP notices at the next forward (section 3).
#
# **Buffers.** BatchNorm's running statistics are buffers, not parameters: no gradient reaches them, so the hooks
# cannot keep them equal. Below, rank 1 writes 5 into its D's running mean, and each process then runs one forward
# of its own batch, with DDP's default for buffers (`broadcast_buffers=True`).

# %%
show_source(ddp_lesson.buffers)

# %% [markdown]
# **Predict, then check.** Does that forward overwrite rank 1's running mean (about 4.5 after one update with
# momentum 0.1, if nothing overwrote it) with rank 0's?

# %% reveals=["copied rank 0's buffers in", "the 5 is gone"] tags=["predict"]
prediction = True  # SOLUTION: does one DDP forward overwrite rank 1's running mean with rank 0's? (True/False)
rank0, rank1 = processes.run(ddp_lesson.buffers)
check("one DDP forward overwrites rank 1's running mean with rank 0's", prediction,
      bool(rank1["running_mean"].mean() < 1),
      why="before the forward, DDP copied rank 0's buffers in; the 5 is gone, and the forward's update started "
          "from rank 0's statistics.")

# %%
print(tr("rank 1's running mean, first 3: {values}", values=rounded(rank1['running_mean'][:3])))
claim("the copy left rank 1's buffer near rank 0's (both near 0), not near 4.5", bool(rank1["running_mean"].abs().max() < 0.5))
claim("and left the buffer's version counter where it was: on this torch the copy does not count as a write",
      rank1["version"][0] == rank1["version"][1], shown=f"version {rank1['version'][0]} -> {rank1['version'][1]}")

# %% [markdown]
# The flag that turns the copy off has changed. Up to torch 2.12 it is `broadcast_buffers=False`; torch 2.13
# deprecates that flag with a `FutureWarning` and adds `forward_sync_buffers`. The two are not the same switch:
# `broadcast_buffers=False` also skips the copy DDP makes once, when it wraps the module, and
# `forward_sync_buffers=False` keeps that one.

# %%
from torch.nn.parallel import DistributedDataParallel
NEW_FLAG = "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
if NEW_FLAG:
    with expect_warning(FutureWarning, "broadcast_buffers"):
        kept0, kept1 = processes.run(ddp_lesson.buffers, broadcast_buffers=False)
    new0, new1 = processes.run(ddp_lesson.buffers, forward_sync_buffers=False)
    claim("forward_sync_buffers=False skips the copy before the forward, as broadcast_buffers=False does: rank 1 "
          "still shows its 5", bool(new1["running_mean"].mean() > 4), shown=f"rank 1 {rounded(new1['running_mean'][:3])}")
else:
    kept0, kept1 = processes.run(ddp_lesson.buffers, broadcast_buffers=False)
claim("with broadcast_buffers=False each process keeps its own statistics: rank 1 still shows its 5",
      bool(kept1["running_mean"].mean() > 4), shown=f"rank 1 {rounded(kept1['running_mean'][:3])}")

# %% [markdown]
# The copy at wrapping time matters as soon as the processes build their modules differently. The side road "Noise, seeds and files" advises
# seeding each process with its rank added, so that each draws its own noise; a D with spectral norm (SNGAN's,
# `nn.utils.parametrizations.spectral_norm`) then starts with a different vector `u` per layer in each process, a buffer. DDP copies rank 0's
# parameters into every process when it wraps D; it copies the buffers too unless `broadcast_buffers=False`:

# %%
show_source(ddp_lesson.seeded_per_rank)
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)   # its FutureWarning was shown above
    loose0, loose1 = processes.run(ddp_lesson.seeded_per_rank, broadcast_buffers=False)
gap = (loose0["out"] - loose1["out"]).abs().max().item()
claim("seed + rank and broadcast_buffers=False: the u vectors differ between the processes, and so does D's "
      "output on the same input", not torch.equal(loose0["u"], loose1["u"]) and gap > 1e-3, shown=f"largest difference {gap:.3f}")
if NEW_FLAG:
    tight0, tight1 = processes.run(ddp_lesson.seeded_per_rank, forward_sync_buffers=False)
    claim("with forward_sync_buffers=False the copy at wrapping time still runs: equal u vectors, equal outputs",
          torch.equal(tight0["u"], tight1["u"]) and torch.equal(tight0["out"], tight1["out"]))

# %% [markdown]
# **Predict, then check.** A GAN shows a grid of samples now and then, in a forward under `torch.no_grad()`.
# Below, each process trains one step, runs one forward under `no_grad`, rank 1 writes 5 into its running mean, and
# one training forward follows. Does that training forward copy rank 0's buffers in, as the forward above did?

# %% reveals=["rank 1's 5 survives it", "says yes only after"] tags=["predict"]
prediction = False  # SOLUTION: after the no_grad forward, does the next training forward copy rank 0's buffers in? (True/False)
after0, after1 = processes.run(ddp_lesson.sample_then_train)
check("the training forward after a no_grad forward copies rank 0's buffers in", prediction,
      bool(after1["running_mean"].mean() < 1),
      why="DDP decides at the end of each forward whether the next one copies the buffers, and it says yes only after "
          "a forward with gradients on (and outside no_sync()): after a forward under no_grad, the next forward skips "
          "the copy, and rank 1's 5 survives it.")

# %%
plain0, plain1 = processes.run(ddp_lesson.sample_then_train, sample_first=False)
claim("without the no_grad forward, the same training forward copies them: rank 1's 5 is gone",
      bool(plain1["running_mean"].abs().max() < 0.5))
claim("DDP's own ddp.will_sync_module_buffers() said so before each forward: no copy after the no_grad forward, a "
      "copy without it", not after1["will_copy"] and plain1["will_copy"])

# %% [markdown]
# ## 2 · BatchNorm's buffers and the version error
#
# **Why it matters.** "DDP + BatchNorm + two forwards of D" is one of the most reported DDP errors in GAN code
# (pytorch/pytorch#22095, #175024; rosinality/stylegan2-pytorch#236; Project-MONAI/GenerativeModels#352):
# D runs on the real batch and on the fake batch, then one backward raises lesson 03's version error on a tensor
# the size of BatchNorm's running mean. The cause was DDP's buffer copy at the second forward: an in-place write to
# a buffer that the first forward's graph had saved. On this torch (the setup cell prints its version) DDP makes
# that copy without counting it as a write (the version counter stayed put above), so the classic case runs; on a
# torch whose DDP counts it, the same code raises, and the fixes below apply:

# %%
show_source(ddp_lesson.two_forwards)
results = processes.run(ddp_lesson.two_forwards)
claim("two D forwards, then one backward, run under DDP on this torch", len(results) == 2)

# %% [markdown]
# The mechanism is intact: any write into a saved buffer between the forwards and the backward raises the error,
# from DDP or from your own code. Code that syncs BatchNorm statistics by hand does exactly that:

# %%
with expect_error(RuntimeError, r"modified by an inplace operation: \[torch.(cuda.)?FloatTensor \[16\]\] is at version \d+; expected version \d+"):
    processes.run(ddp_lesson.two_forwards, copy_between=True)

# %% [markdown]
# The two fixes people post each remove the write, at a price.
#
# - `broadcast_buffers=False`: no copy at all, so nothing is written. The price: each process keeps statistics of
#   its own (rank 1's 5 survived in section 1; with different batches they drift apart), so `D.eval()` can score
#   differently on different processes, and the checkpoint (rank 0's) holds rank 0's statistics only.
# - `SyncBatchNorm`: BatchNorm computes its batch statistics over all processes, with a collective in every
#   BatchNorm forward and backward; the buffers then agree without a copy. It needs GPUs:

# %%
show_source(ddp_lesson.sync_batch_norm)
with expect_error(ValueError, "SyncBatchNorm layers only work with GPU modules"):
    processes.run(ddp_lesson.sync_batch_norm)

# %%
gap = (kept0["running_mean"] - kept1["running_mean"]).abs().max().item()
claim("broadcast_buffers=False: after one forward, rank 1's running mean is still its own, far from rank 0's",
      gap > 1,
      shown=f"largest difference {gap:.3f}")

# %% [markdown]
# ## 3 · A parameter no loss reaches
#
# **Why it matters.** An AC-GAN-style D has two heads: a real/fake score and class logits. A step whose loss uses
# only the score (a D step on unlabelled data) leaves the class head without a gradient. On one process that is
# harmless: its `.grad` stays `None`. Under DDP, the bucket that holds the head never fills.

# %%
show_source(ddp_lesson.ConditionalD, ddp_lesson.unused_head)

# %% [markdown]
# **Predict, then check.** `unused_head(iterations=1)` runs one D step, `iterations=2` two. In which iteration,
# 1 or 2, does DDP raise?

# %% reveals=["at the start of the second", "iteration 2 raises"] tags=["predict"]
prediction = 2  # SOLUTION: in which iteration (1 or 2) does DDP raise?
try:
    first = processes.run(ddp_lesson.unused_head, iterations=1)
except RuntimeError:
    first = None
check("the iteration that raises", prediction, 1 if first is None else 2,
      why="the first backward ends with the class head's bucket never reduced; DDP finds out at the start of the "
          "second forward, and says so: iteration 2 raises.")

# %%
claim("iteration 1 raised nothing, and yet averaged nothing: D's one bucket never filled, so each process stepped "
      "on its own gradient and the two copies of D already differ", not torch.equal(first[0]["D"], first[1]["D"]))

# %%
with expect_error(RuntimeError, "Expected to have finished reduction in the prior iteration before starting a new one"):
    processes.run(ddp_lesson.unused_head, iterations=2)

# %% [markdown]
# The message offers `find_unused_parameters=True`: DDP then does extra work at every iteration to settle the
# parameters that got no gradient (PyTorch's documentation: a walk of the autograd graph from the forward's
# outputs). It runs:

# %%
ran = processes.run(ddp_lesson.unused_head, iterations=3, find_unused_parameters=True)
claim("find_unused_parameters=True: three iterations run, and the class head has no gradient",
      all(r["ran"] == 3 and r["classes_grad"] is None for r in ran))
claim("and the two copies of D stay equal", torch.equal(ran[0]["D"], ran[1]["D"]))

# %% [markdown]
# `static_graph=True`, the other flag the documentation offers, records in the first iteration which parameters
# get a gradient and reuses that. On this D it fails in two steps. Iteration 2 runs without an error but does not
# average (the two copies differ after it); iteration 3 raises, with a message that says the graph changed, though
# this D's graph is the same at every iteration. The cause is an open PyTorch bug: a forward that **returns** an
# output no loss uses (the class logits here) confuses the static graph's bookkeeping (pytorch/pytorch#97030 and
# #79171). A D whose forward leaves the head out (`returns_classes=False`) runs with `static_graph=True`:

# %%
two = processes.run(ddp_lesson.unused_head, iterations=2, static_graph=True)
claim("static_graph=True: iteration 2 raises nothing, but the two copies of D differ after it", not torch.equal(two[0]["D"], two[1]["D"]))
with expect_error(RuntimeError, "Expected to have finished reduction in the prior iteration"):
    processes.run(ddp_lesson.unused_head, iterations=3, static_graph=True)
left_out = processes.run(ddp_lesson.unused_head, iterations=3, static_graph=True, returns_classes=False)
claim("with the head left out of the forward's outputs, static_graph=True runs three iterations and the copies stay "
      "equal", all(r["ran"] == 3 for r in left_out) and torch.equal(left_out[0]["D"], left_out[1]["D"]))

# %% [markdown]
# What the flags cost, on a D whose loss uses both heads (so nothing is unused), in this notebook's two CPU
# processes: the median milliseconds per D step, five alternating rounds of 50 steps each. The figures are this
# machine's; the walk `find_unused_parameters` adds grows with the graph. The fix that needs no flag: give every
# head a loss term in every step; a zero-weighted one is enough (below).

# %% tags=["nbval-ignore-output"]
costs = processes.run(ddp_lesson.flag_costs)[0]
for flag, ms in costs.items():
    print(tr("{flag:<24} {ms:6.2f} ms a step", flag=tr("default") if flag == "default" else flag, ms=ms))

# %%
ran = processes.run(ddp_lesson.unused_head, iterations=3, zero_term=True)
claim("with 0 * classes.sum() in D's loss and no flag, three iterations run; the class head's gradient is zero",
      all(r["ran"] == 3 and r["classes_grad"] is not None and not r["classes_grad"].any() for r in ran))

# %% [markdown]
# ## 4 · Seed 003's order under DDP
#
# **Why it matters.** Seed 003's strategy 1 (lesson 05) keeps D's graph with `retain_graph=True`, steps D, then
# backpropagates G's loss through the stale graph. DDP changes nothing about that: the step still writes D's weights
# in place before the backward of a graph that saved them.

# %%
with expect_error(RuntimeError, r"modified by an inplace operation: \[torch.(cuda.)?FloatTensor \[16, 1\]\]"):
    processes.run(ddp_lesson.seed003)

# %% [markdown]
# The fix is lesson 05's: any order that takes G's gradient before `opt_D.step()`, or through a fresh D forward
# after it. `python -m gan_lessons train --strategy ...` under `torchrun` runs every lesson strategy with DDP
# (seed 003's raises the same error there).

# %% [markdown]
# ## 5 · Accumulating D's gradient: `no_sync()`
#
# **Why it matters.** BigGAN adds D's gradient up over several micro-batches when one batch does not fit (lesson
# 10 did it with a `GradScaler`). Here is that step written as on one process, with D wrapped in DDP:

# %%
show_source(ddp_lesson.d_step_synced_each)

# %% [markdown]
# **Predict, then check.** Each backward averages what is in `.grad` at that point... or does it? With `accum=2`,
# is the gradient each process steps on the one that one process would step on with the two processes' batches
# together?

# %% reveals=["is right all the same", "the mean of sums is the sum of means"] tags=["predict"]
prediction = True  # SOLUTION: does each process step on the one-process gradient of the global batch? (True/False)
synced = processes.run(ddp_lesson.accumulate, step="d_step_synced_each")
one_process = ddp_lesson.one_process_reference(world=2)
check("each process steps on the one-process gradient of the global batch", prediction,
      all(same(g, r) for run in synced for g, r in zip(run["grads"], one_process)),
      why="each backward averages its own micro-batch's gradient over the processes and adds it to .grad: the mean "
          "of sums is the sum of means, so the gradient is right all the same.")

# %%
claim("but DDP sent D's bucket once per backward: two micro-batches, two sends a step", synced[0]["sent"][0] == 2,
      shown=f"{synced[0]['sent'][0]} sends")

# %% [markdown]
# Averaging the sum once gives the same gradient. `with ddp.no_sync():` turns the averaging off for the passes
# run inside it, forward **and** backward (DDP decides at the forward whether the next backward averages): their
# gradients add up in `.grad` locally, and the first forward and backward **outside** it average the sum. The
# exercise asks for that step.

# %% [markdown]
# ## 6 · Freezing D and a gradient penalty under DDP
#
# **Why it matters.** Lessons 08 and 09 built a WGAN-GP step with D frozen for G's step and a penalty that
# backpropagates through D twice (`create_graph=True`). Both touch what DDP hooks into: a frozen D has parameters
# that get no gradient in G's step; the penalty's `autograd.grad` computes gradients without putting them in `.grad`.
# Three steps of both, in two processes:

# %%
show_source(ddp_lesson.frozen_and_penalty)
rank0, rank1 = processes.run(ddp_lesson.frozen_and_penalty)
claim("after three steps, D's copies in the two processes are equal to the last bit", torch.equal(rank0["D"], rank1["D"]))
claim("and so are G's", torch.equal(rank0["G"], rank1["G"]))
claim("the penalty's autograd.grad made DDP send nothing; D's buckets went in the backwards of D's loss",
      rank0["sent_by_grad"] == 0 and rank0["sent"] == 3, shown=f"{rank0['sent']} sends in 3 steps")

# %% [markdown]
# Both work: `requires_grad_(False)` takes D's parameters out of G's backward, and DDP sends nothing for them; the
# penalty's `autograd.grad` computes a gradient with respect to `x_hat` only, which puts nothing in D's `.grad` and
# fires none of DDP's hooks: D's gradient, penalty included, is averaged once, in the backward of D's loss.

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - DDP averages every gradient over the processes **during** `backward()`, in buckets, through a hook on each
#   parameter; every process then holds the same gradient and takes the same step. It copies rank 0's buffers into
#   every process when it wraps the module, and before each forward that follows a forward with gradients (not
#   after one under `no_grad` or `no_sync()`). Torch 2.13 deprecates `broadcast_buffers` for
#   `forward_sync_buffers`, which keeps the copy at wrapping time.
# - A parameter that no loss reaches makes the next iteration raise; `find_unused_parameters=True` makes it run,
#   with a walk of the graph every iteration; a loss term for every head, even a zero-weighted one, needs no flag.
#   `static_graph=True` fails on this D because of a PyTorch bug with a returned, unused output; it runs when the
#   forward leaves the head out. Until DDP raises, nothing is averaged: the copies drift from iteration 1.
# - On this torch the buffer copy no longer trips the version check, so D's two forwards before one backward run;
#   a write of your own into a saved buffer still raises lesson 03's error. `broadcast_buffers=False` lets the
#   statistics drift; `SyncBatchNorm` needs GPUs.
# - Seed 003's order fails as on one process. Freezing D and a gradient penalty work; `autograd.grad` with respect
#   to the parameters is not averaged. Accumulation wants `no_sync()`. Each process needs its own noise; one process
#   writes the files, from `ddp.module`.
# - On GPUs (one process each, NCCL), the averaging overlaps the backward and each device does a real share of the
#   work. On this 2-core CPU a second process buys nothing: `docs/training.md` gives the measured step times.

# %% [markdown]
# ## Exercises
#
# ### Build it: D's step over micro-batches, averaged once
#
# Write `d_step(ddp, opt_D, x_real, x_fake, accum)`: one D step with D's gradient added up over `accum`
# micro-batches, where `ddp` is D wrapped in DDP. Cut `x_real` and `x_fake` into `accum` equal chunks, in order;
# for each pair, D's hinge loss `F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()`, divided by `accum`,
# and its own backward; one `opt_D.step()`, each call starting from an emptied gradient. DDP must average **once**
# a step: every micro-batch but the last, its forward and its backward, inside `ddp.no_sync()`.
#
# The checker runs your function in two processes, each on its own batch, two calls each, and compares the gradient
# D steps on in each process with the gradient one process steps on with the two batches together; a counting hook
# checks that DDP sends its bucket once a step. Your function runs in the two processes alone, without this
# notebook's other cells (a helper defined in another cell is not there, and what it prints is not shown): `torch`,
# `F`, `nn` and `contextlib` are there; define or import anything else inside it.

# %%
import contextlib

def d_step(ddp, opt_D, x_real, x_fake, accum):
    """D's hinge loss over accum micro-batches under DDP, averaged over the processes once, at the last backward."""
    ### BEGIN SOLUTION
    opt_D.zero_grad()
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        last = k == len(pairs) - 1
        with contextlib.nullcontext() if last else ddp.no_sync():
            loss_D = (F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum
            loss_D.backward()
    opt_D.step()
    ### END SOLUTION

my_answer = d_step  # SOLUTION: point this at your d_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_ddp_accumulation(my_answer)
assert solved, "d_step: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# ## Going further · Noise, seeds and files
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** Code written for one process seeds once and draws `z`. Run as it is in every process, it
# also writes its checkpoints from every process.

# %%
show_source(ddp_lesson.noise_and_files)

# %% [markdown]
# Every process below calls `torch.manual_seed(0)`, then `torch.randn(8, 4)`, as one-process code does:

# %%
rank0, rank1 = processes.run(ddp_lesson.noise_and_files)
claim("the two processes draw the same z: half the fakes of the global batch are copies of the other half",
      torch.equal(rank0["z"], rank1["z"]))

# %%
own0, own1 = processes.run(ddp_lesson.noise_and_files, seed_per_rank=True)
claim("seeded with seed + rank, the processes draw different z", not torch.equal(own0["z"], own1["z"]))
claim("rank 0 alone wrote the checkpoint; after a barrier, every process read the same weights",
      own0["loaded_equal"] and own1["loaded_equal"])

# %% [markdown]
# Two ways to give every process its own noise: seed with the rank added (above), or draw the global batch's noise
# from one shared stream and take your slice, which is what `python -m gan_lessons train` does under `torchrun`,
# so that two processes together draw exactly the noise one process would. Files: one process writes
# (`if dist.get_rank() == 0`), the others wait at `dist.barrier()` before they read; the trainer does the same.
# Seeding with the rank has the price section 1 showed: modules built differently in each process, whose buffers
# only the copy at wrapping time makes equal.

# %% [markdown]
# ## Going further · What a real multi-GPU GAN also needs
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** The lesson's experiments are small on purpose. A training script on several GPUs meets a few
# more things, each of them a question people ask about DDP.
#
# - **`torch.autograd.grad` with respect to the parameters.** DDP averages in the hooks that fill `.grad`.
#   `autograd.grad` returns gradients without touching `.grad`, so they are never averaged; neither is a `.grad`
#   you assign by hand. (A penalty's `autograd.grad` with respect to the *input*, section 6, is fine.)

# %%
show_source(ddp_lesson.grad_of_parameters)
g0, g1 = processes.run(ddp_lesson.grad_of_parameters)
claim("autograd.grad through the DDP-wrapped D returns each process's own gradient, not the mean",
      same(g0["through_ddp"], g0["own"]) and same(g1["through_ddp"], g1["own"]) and not same(g0["through_ddp"], g1["through_ddp"]))

# %% [markdown]
# - **Saving.** DDP's `state_dict()` puts `module.` before every name; save `ddp.module.state_dict()` (here D's), so
#   that one process can load it without DDP. An exponential moving average of G's weights (StyleGAN, BigGAN) is
#   kept from `ddp.module` too, by one process or by all (the replicas are equal after every step).

# %%
claim("DDP's state_dict names start with module.; the module's own do not",
      all(k.startswith("module.") for k in g0["ddp_keys"]) and not any(k.startswith("module.") for k in g0["module_keys"]),
      shown=f"{g0['ddp_keys'][0]} / {g0['module_keys'][0]}")

# %% [markdown]
# - **A `DataLoader`.** The trainer slices one shuffled batch; a `DataLoader` needs `DistributedSampler`, which
#   gives each process its own share of the dataset, and `sampler.set_epoch(epoch)` at the start of each epoch:
#   without it, every epoch shuffles in the same order.

# %%
from torch.utils.data import DistributedSampler
sampler = DistributedSampler(range(16), num_replicas=2, rank=0, seed=0)
first, again = list(sampler), list(sampler)
sampler.set_epoch(1)
claim("without set_epoch, DistributedSampler gives the same order every epoch; set_epoch(1) changes it",
      first == again and list(sampler) != first, shown=f"{first[:4]} ... then {list(sampler)[:4]} ...")

# %% [markdown]
# - **Calls on one process only.** A forward through the DDP wrapper can run a collective (the buffer copy of
#   section 1), which every process must join. A grid or a log made on rank 0 alone goes through `ddp.module`, not
#   `ddp`: `ddp.will_sync_module_buffers()` says whether the next forward will copy.
# - **On GPUs** (not run here): each process calls `torch.cuda.set_device(local_rank)` before it builds anything,
#   and uses `backend="nccl"`. When one process dies, the others wait in their next collective until NCCL's watchdog
#   or the group's timeout stops them; `torchrun` then stops the rest. `python -m gan_lessons train` under
#   `torchrun` does both (docs/training.md).

# %% [markdown] tags=["read-after-exercises"]
# | on several processes | what happens | what to do |
# |---|---|---|
# | a parameter no loss reaches (a second head) | iteration 1 averages nothing; the next raises "Expected to have finished reduction in the prior iteration" | give it a loss term in every step (`0 * classes.sum()` will do), or `find_unused_parameters=True` (a graph walk every iteration); `static_graph=True` only if the forward does not return the head (pytorch/pytorch#97030) |
# | BatchNorm, two forwards of D, one backward | runs on this torch: DDP's buffer copy no longer counts as a write | nothing on this torch (on one whose DDP counts it: the buffer fixes below); a `copy_` into a buffer between the forwards and the backward still raises the version error |
# | `broadcast_buffers=False` (deprecated in torch 2.13) | no buffer copy, not even at wrapping time; running statistics drift apart, and with seed + rank spectral norm's `u` differs | `forward_sync_buffers=False` keeps the copy at wrapping time; evaluate and save from one process, or use SyncBatchNorm |
# | a forward under `no_grad` (a grid) | the next forward skips the buffer copy | nothing, or sample through `ddp.module` |
# | `autograd.grad` on the parameters | each process's own gradient, not averaged | `backward()` into `.grad` |
# | `SyncBatchNorm` on the CPU | raises "SyncBatchNorm layers only work with GPU modules" | GPUs only; a collective in every BatchNorm forward and backward |
# | seed 003's order | the same version error as on one process | lesson 05's orders |
# | accumulation over micro-batches | right gradient, one all-reduce per backward | `no_sync()` for all but the last micro-batch |
# | D frozen for G's step; a gradient penalty | replicas stay equal | nothing |
# | the same seed in every process | the same noise in every process | seed + rank, or a slice of one shared draw |
# | files | every process writes | rank 0 writes, the others wait at a barrier |
