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
# # Lesson 09 · Freezing D and BatchNorm in a GAN step
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/09_freezing_and_batchnorm.ipynb)
#
# [中文版](zh/09_freezing_and_batchnorm.ipynb) · [Student copy](student/09_freezing_and_batchnorm.ipynb)
#
# **Goal.** Know what two pieces of machinery do in the middle of a GAN step, each checked on this torch: freezing D
# for G's step (and the look-alike that is not one, and how a freeze goes wrong), and BatchNorm's running statistics
# and batch statistics. Then build a G step through a frozen D that puts everything back. Lesson 10 takes the next
# three pieces: mixed precision, hooks and `torch.compile`.
#
# **Material.** None of the seeds goes this far; seed 000's G (it has BatchNorm) and D are the models. The facts come
# from PyTorch's own documentation (`requires_grad_`, `backward(inputs=...)`, BatchNorm), from pix2pix/CycleGAN's
# `set_requires_grad`, and from soumith/ganhacks (tip 4: a mini-batch holds only real or only generated images, which
# PyTorch's DCGAN tutorial follows). A table at the end sets the code people write beside what it does on today's
# torch.

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
from gan_lessons import costs, strategies
from gan_lessons.models import Generator, Discriminator

bce = strategies.bce       # bce(logits, 1): G's non-saturating loss; bce(logits, 0): D's fake term


# %% [markdown]
# ## 1 · Freezing D during G's step
#
# **Why it matters.** G's loss must go back *through* D to reach G, but G's step has no use for D's own parameter
# gradients. Three lines look as if they keep D out of G's step. Only two of them do, and they differ in what D's
# forward saves. Lesson 05 counted whole steps; here is G's step alone, right after a D step, when D's `.grad` still
# holds the gradient D just stepped on. The counter uses the hooks `gan_lessons.costs` uses (lesson 10 takes them
# apart): a forward hook counts each network's calls, a hook on each call's output counts the backward passes through
# it, a hook on each parameter counts gradient accumulations, and a saved-tensor hook adds up the bytes autograd
# keeps for backward (parameters left out).

# %%
def counted(G, D, run):
    """Run run() once; count G's and D's forwards, backwards, gradient passes per parameter, and saved KiB."""
    n = dict.fromkeys(["G forward", "G backward", "D forward", "D backward", "G grads", "D grads"], 0)
    def add(key):
        n[key] += 1
    def on_forward(name):
        def hook(module, args, out):
            add(f"{name} forward")
            if out.requires_grad:
                out.register_hook(lambda grad: add(f"{name} backward"))
        return hook
    nets = {"G": G, "D": D}
    handles = [net.register_forward_hook(on_forward(name)) for name, net in nets.items()]
    handles += [p.register_post_accumulate_grad_hook(lambda p, name=name: add(f"{name} grads"))
                for name, net in nets.items() for p in net.parameters()]
    params = {p.untyped_storage().data_ptr() for net in nets.values() for p in net.parameters()}
    saved = []
    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            saved.append(t.numel() * t.element_size())
        return t
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            run()
    finally:
        for h in handles:
            h.remove()
    for name, net in nets.items():
        n[f"{name} grads"] /= len(list(net.parameters()))
    n["saved KiB"] = sum(saved) / 1024
    return n


def after_D_step():
    """Seed 000's G and D after one D step: D's .grad holds the gradient D stepped on."""
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    z, x_real = torch.randn(16, G.z_dim), torch.rand(16, 1, 28, 28) * 2 - 1
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(G(z).detach()), 0)) / 2
    loss_D.backward()
    opt_D.step()
    return G, D, opt_G, z


def G_step(how):
    G, D, opt_G, z = after_D_step()
    D_grad = [p.grad.clone() for p in D.parameters()]
    def run():
        opt_G.zero_grad()
        x_fake = G(z)
        if how == "D.requires_grad_(False)":
            D.requires_grad_(False)
            bce(D(x_fake), 1).backward()
            D.requires_grad_(True)
        elif how == tr("backward(inputs=G's)"):
            bce(D(x_fake), 1).backward(inputs=list(G.parameters()))
        elif how == "D(x_fake.detach())":
            bce(D(x_fake.detach()), 1).backward()
        else:
            bce(D(x_fake), 1).backward()
    n = counted(G, D, run)
    n["D untouched"] = all(torch.equal(before, p.grad) for before, p in zip(D_grad, D.parameters()))
    return n, [None if p.grad is None else p.grad.clone() for p in G.parameters()]

ways = [tr("plain backward"), "D.requires_grad_(False)", tr("backward(inputs=G's)"), "D(x_fake.detach())"]
results = {how: G_step(how) for how in ways}
print(f"{tr('G step'):<25}{tr('G fwd/bwd'):>12}{tr('D fwd/bwd'):>12}{tr('G grads'):>11}{tr('D grads'):>11}"
      f"{tr('saved KiB'):>11}", tr("D's .grad"), sep="  ")
for how, (n, _) in results.items():
    print(f"{how:<25}{n['G forward']:>8}/{n['G backward']:<3}{n['D forward']:>8}/{n['D backward']:<3}"
          f"{n['G grads']:>11g}{n['D grads']:>11g}{n['saved KiB']:>11.1f}  "
          f"{tr('untouched') if n['D untouched'] else tr('changed')}")

# %%
(plain, G_plain), (frozen, G_frozen), (inputs, G_inputs), (detached, G_detached) = results.values()
same = lambda a, b: all(x is not None and torch.equal(x, y) for x, y in zip(a, b))
claim("a plain backward computes D's gradient too, and adds it to D's .grad", plain["D grads"] == 1
      and not plain["D untouched"])
claim("frozen D: G gets exactly the plain backward's gradient, D's .grad is untouched, no D gradient pass",
      same(G_frozen, G_plain) and frozen["D untouched"] and frozen["D grads"] == 0)
claim("backward(inputs=G's parameters): the same, G's gradient identical, D's .grad untouched",
      same(G_inputs, G_plain) and inputs["D untouched"] and inputs["D grads"] == 0)
claim("both still run one backward pass through D: G's gradient has to go through it",
      frozen["D backward"] == inputs["D backward"] == 1)
claim("D(x_fake.detach()): none of G's 14 parameters gets a gradient, no backward reaches G, and D's .grad changes",
      all(g is None for g in G_detached) and detached["G backward"] == 0 and not detached["D untouched"],
      f"{sum(g is None for g in G_detached)} of {len(G_detached)} G parameters without .grad")
claim("a frozen D's forward saves less than with backward(inputs=...), which decides only at backward time",
      frozen["saved KiB"] < inputs["saved KiB"] == plain["saved KiB"],
      f"{frozen['saved KiB']:.1f} KiB vs {inputs['saved KiB']:.1f} KiB")

# %% [markdown]
# The detached version is the one to never write: it cuts exactly the path G learns from, and D's `.grad` collects a
# gradient for the wrong target (`1` on fakes), which an optimizer step on D would then use unless
# `opt_D.zero_grad()` comes first. With D frozen **and** the fake detached, nothing in the loss requires grad any
# more, and backward says so:

# %%
G, D, opt_G, z = after_D_step()
D.requires_grad_(False)
with expect_error(RuntimeError, "element 0 of tensors does not require grad and does not have a grad_fn"):
    bce(D(G(z).detach()), 1).backward()



# %% [markdown]
# Freezing and `backward(inputs=...)` give G the same gradient and leave D's `.grad` alone. They differ in the
# forward: `requires_grad_(False)` is known **before** D runs, while `inputs=` is read only when backward starts,
# after D's forward has saved everything. What does a frozen layer leave out? A Linear layer and a convolution both
# need their input only for their weight's gradient.
#
# **Predict, then check.** The next cell gives each of D's Conv and Linear layers an input that requires grad (as
# G's fake does), with D frozen, and a saved-tensor hook records whether the layer saved that input. Replace the
# `...` with your prediction, then run the cell.

# %% reveals=["Conv2d +input .*frozen: saves its input", "conv layers? still (saves|keeps|save|keep) (its|their) inputs?", "ConvolutionBackward0 keeps"] tags=["predict"]
prediction = "Conv2d"  # SOLUTION: with D frozen, which of D's layers save their input for backward: "Conv2d", "Linear", "both" or "neither"?

def saves_its_input(layer, shape):
    """Whether the layer's forward, on an input that requires grad, saves that input for backward."""
    x, packed = torch.randn(shape, requires_grad=True), []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        layer(x)
    return any(t.data_ptr() == x.data_ptr() for t in packed)

G, D, opt_G, z = after_D_step()
layers = {name: m for name, m in D.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))}
shapes = {}
def record_input_shape(name):
    def hook(module, args, out):
        shapes[name] = args[0].shape          # returns None: the output stays as it is
    return hook
handles = [m.register_forward_hook(record_input_shape(name)) for name, m in layers.items()]
with torch.no_grad():
    D(G(z))
for h in handles:
    h.remove()
D.requires_grad_(False)
frozen_saves = {name: saves_its_input(m, shapes[name]) for name, m in layers.items()}
D.requires_grad_(True)
for name, m in layers.items():
    print(tr("D.{name:<6} {layer:<7} input {shape:<16} frozen: {verdict}", name=name, layer=type(m).__name__,
             shape=str(list(shapes[name])),
             verdict=tr("saves its input") if frozen_saves[name] else tr("does not save its input")))
kinds = {type(m).__name__ for name, m in layers.items() if frozen_saves[name]}
check("the frozen layers that save their input", prediction,
      "both" if len(kinds) == 2 else kinds.pop() if kinds else "neither",
      why="a convolution's backward function saves its input whatever requires grad (only the input's own "
          "gradient needs the weight, and the weight's gradient needs the input); a Linear layer's decides by "
          "what requires grad, and leaves its input out when its weight does not.")

# %%
linear_kib = sum(shapes[n].numel() * 4 for n, m in layers.items() if isinstance(m, nn.Linear)) / 1024
claim("in a frozen D each Conv layer still saves its input (ConvolutionBackward0 keeps it whatever requires grad), "
      "and no Linear layer does", all(frozen_saves[n] == isinstance(m, nn.Conv2d) for n, m in layers.items()))
claim("what freezing saved in the table above is exactly the inputs of D's two Linear layers",
      abs((plain["saved KiB"] - frozen["saved KiB"]) - linear_kib) < 1e-6,
      f"{plain['saved KiB'] - frozen['saved KiB']:.1f} KiB saved; Linear inputs {linear_kib:.1f} KiB")


# %% [markdown]
# So freezing saves what the frozen layers' weight gradients alone would need, layer by layer, as each backward
# function decides: here D's Linear inputs, not its Conv inputs. Lesson 05's strategies `d_first_frozen_D` and
# `g_first_inputs` (in `gan_lessons.strategies`) are exactly these two G steps.
#
# Freezing has its own trap: the flag has to come back. `d_first_frozen_D` ends with `D.requires_grad_(True)`, as
# pix2pix's `set_requires_grad` does. That line does not run if the step raises in between (Ctrl-C in a notebook is
# enough), and it switches on **every** parameter of D, also one that was frozen on purpose (a pretrained feature
# layer, say). Below, a forward hook on D stands in for the Ctrl-C:

# %%
def frozen_D_run():
    """Seed 000's models and optimizers, as d_first_frozen_D steps them."""
    G, D, x_real, noise = costs.fresh_gan(batch=8)
    return G, D, optim.Adam(G.parameters()), optim.Adam(D.parameters()), x_real, noise

G, D, opt_G, opt_D, x_real, noise = frozen_D_run()
D.net[0].requires_grad_(False)                       # frozen on purpose, for good
first_layer = D.net[0].weight.detach().clone()
for _ in range(2):
    strategies.d_first_frozen_D(G, D, opt_G, opt_D, x_real, noise)
claim("after a d_first_frozen_D step, D's first layer, frozen on purpose, requires grad again",
      D.net[0].weight.requires_grad)
claim("so the next step trains it, and nothing says so", not torch.equal(first_layer, D.net[0].weight),
      f"max |change| {(D.net[0].weight - first_layer).abs().max():.2e}")

G, D, opt_G, opt_D, x_real, noise = frozen_D_run()
def ctrl_c(module, args):
    if not D.net[7].weight.requires_grad:            # only during G's step, when D is frozen
        raise KeyboardInterrupt
handle = D.register_forward_pre_hook(ctrl_c)
try:
    strategies.d_first_frozen_D(G, D, opt_G, opt_D, x_real, noise)
except KeyboardInterrupt:
    print(tr("KeyboardInterrupt during G's step"))
handle.remove()
still_frozen = sum(not p.requires_grad for p in D.parameters())
claim("interrupted during G's step, D is left frozen", still_frozen == len(list(D.parameters())),
      f"{still_frozen} of {len(list(D.parameters()))} D parameters frozen")
with expect_error(RuntimeError, "element 0 of tensors does not require grad"):
    strategies.d_first_frozen_D(G, D, opt_G, opt_D, x_real, noise)      # the cell run again

# %% [markdown]
# The first failure is silent: a layer meant to stay fixed trains from the second step on. The second one is loud but
# far from its cause: the next step's `loss_D` reaches no parameter at all, and the message says nothing about
# freezing. The exercise at the end builds a G step that avoids both.

# %% [markdown]
# ## 2 · BatchNorm in a GAN step
#
# **Why it matters.** In training mode a BatchNorm layer normalises each feature with the mean and variance of **the
# batch it is given**, and every such forward also updates its running statistics (`running_mean`, `running_var`,
# `num_batches_tracked`), which evaluation mode uses instead. Both facts leak into a GAN step: the statistics can move
# in a forward that trains nothing, and a D with BatchNorm sees real and fake images through each other. Seed 000's G
# has three BatchNorm layers. First, lesson 04's finding again, on G's first one:

# %%
torch.manual_seed(0)
G = Generator()
z = torch.randn(16, G.z_dim)
bn = G.net[1]                                    # G's first BatchNorm1d

def bn_moves(run):
    """Run once; return (did running_mean change, how much num_batches_tracked grew)."""
    mean, batches = bn.running_mean.clone(), bn.num_batches_tracked.item()
    run()
    return not torch.equal(mean, bn.running_mean), bn.num_batches_tracked.item() - batches

def forward_without_graph():
    with torch.no_grad():
        G(z)

changed, counted_batches = bn_moves(forward_without_graph)
claim("training mode, under no_grad: running_mean changes and num_batches_tracked grows by 1",
      changed and counted_batches == 1)
G.eval()
changed, counted_batches = bn_moves(forward_without_graph)
G.train(True)                                    # back to training mode
claim("evaluation mode: neither changes", not changed and counted_batches == 0)

# %% [markdown]
# So the running statistics count forwards, graph or no graph. How many does one step of each order of lesson 05
# make? **Predict, then check** for `d_first_fresh_fake`; the next cell runs one step of each of the six orders on a
# fresh G and prints `num_batches_tracked` of G's first BatchNorm after it.

# %% reveals=["d_first_fresh_fake +num_batches_tracked after one step: 2", "running statistics twice", "runs G twice"] tags=["predict"]
prediction = 2  # SOLUTION: after one d_first_fresh_fake step on a fresh G, what is num_batches_tracked of G's first BatchNorm?
steps_run = ["one_forward", "d_first_reuse_fake", "g_first", "d_first_fresh_fake", "d_first_frozen_D", "g_first_inputs"]
tracked = {}
for name in steps_run:
    G, D, x_real, noise = costs.fresh_gan(batch=16)
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    strategies.get(name)(G, D, opt_G, opt_D, x_real, noise)
    tracked[name] = G.net[1].num_batches_tracked.item()
    print(tr("{name:<20} num_batches_tracked after one step: {count}", name=name, count=tracked[name]))
check("num_batches_tracked after one d_first_fresh_fake step", prediction, tracked["d_first_fresh_fake"],
      why="G runs twice in that order (D's fake batch under no_grad, then G's own), and each training-mode forward "
          "updates the running statistics, graph or no graph.")

# %%
claim("d_first_fresh_fake updates G's running statistics twice per step, every other order once",
      tracked["d_first_fresh_fake"] == 2 and all(v == 1 for k, v in tracked.items() if k != "d_first_fresh_fake"))

# %% [markdown]
# `d_first_fresh_fake` runs G twice (a fake batch for D under `no_grad`, a fresh one with a graph for G's loss), and
# each training-mode forward is one update of the running statistics, with momentum 0.1. Harmless, but the running
# averages then move twice per step, forgetting old steps twice as fast, and `num_batches_tracked` is not a step
# counter. What matters more is D.
#
# **D with BatchNorm.** Seed 000's D has none. A small D that has one shows what mixing does: D's logits for the same
# real images, once in an all-real batch and once in a batch half real, half fake.

# %%
torch.manual_seed(0)
D_bn = nn.Sequential(nn.Linear(2, 16), nn.BatchNorm1d(16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
x_real, x_fake = torch.randn(8, 2) + 3, torch.randn(8, 2)
stats = D_bn[1]

def through_D(*batches):
    """D_bn's logits for each batch in turn, in training mode, starting from fresh running statistics."""
    stats.reset_running_stats()
    with torch.no_grad():
        logits = [D_bn(batch) for batch in batches]
    return logits, stats.running_mean.clone(), stats.num_batches_tracked.item()

(separate, _), mean_separate, n_separate = through_D(x_real, x_fake)
(mixed_batch,), mean_mixed, n_mixed = through_D(torch.cat([x_real, x_fake]))
mixed = mixed_batch[:8]                          # the logits of the 8 real images
gap = (separate - mixed).abs().max().item()
claim("training mode: D's logits for the same 8 real images differ between an all-real and a mixed batch",
      gap > 1e-3, f"max |difference| {gap:.4f}")
claim("separate batches update the running statistics twice, the concatenated batch once, to another mean",
      n_separate == 2 and n_mixed == 1 and not torch.allclose(mean_separate, mean_mixed))

other_fakes = torch.randn(8, 2) - 3
with torch.no_grad():
    mixed_again = D_bn(torch.cat([x_real, other_fakes]))[:8]
claim("in a mixed batch, changing only the fakes changes D's logits for the real images",
      not torch.allclose(mixed, mixed_again), f"max |difference| {(mixed - mixed_again).abs().max():.4f}")

D_bn.eval()
with torch.no_grad():
    eval_gap = (D_bn(x_real) - D_bn(torch.cat([x_real, x_fake]))[:8]).abs().max().item()
D_bn.train()
claim("evaluation mode: the same logits either way: BatchNorm normalises with its running statistics, which no "
      "batch changes", eval_gap == 0)


# %% [markdown]
# In training mode the batch mean and variance mix every image in the batch, so in a concatenated batch D's verdict
# on a real image depends on the fakes beside it (and the other way round), and the running statistics end up at a
# mixture that neither real nor fake batches have. ganhacks' tip 4 says to keep each mini-batch all real or all fake,
# which is why PyTorch's DCGAN tutorial calls D twice; the other way out is a D without BatchNorm (seed 000's D, and
# the critic the WGAN-GP paper recommends, since its penalty is per sample, lesson 08; public critics that keep
# BatchNorm exist, and lesson 13 debugs one). For G, sample figures in `G.eval()` under `no_grad`
# (lesson 04's exercise).

# %% [markdown] tags=["read-after-exercises"]
# | what people write | on today's torch |
# |---|---|
# | `D(x_fake.detach())` in G's loss, "so that D gets no gradient" | runs; G gets no gradient, and D gets one (section 1) |
# | `D.requires_grad_(False)` before G's step, `D.requires_grad_(True)` after | right only if the second line always runs, and if no layer of D was frozen on purpose (section 1, the exercise) |
# | `D.requires_grad_(False)`, "so D's forward saves nothing for its weights" | Linear layers save less; each Conv layer still saves its input (section 1) |
# | `with torch.no_grad(): x_fake = G(z)`, "G is left alone" | G's BatchNorm running statistics move all the same (section 2) |
# | `D(torch.cat([x_real, x_fake]))` with BatchNorm in D | runs; each logit depends on the other images in the batch, real and fake mixed (section 2) |

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - For G's step, freeze D (`D.requires_grad_(False)`) or call `loss_G.backward(inputs=list(G.parameters()))`:
#   G gets the same gradient as a plain backward, D's `.grad` is untouched, D's gradient is not computed. Freezing
#   also saves less in D's forward, as much as each backward function allows: the Linear layers' inputs, not the
#   Conv layers'. `D(x_fake.detach())` in G's loss gives G **nothing** and gives D a gradient.
# - Restore the flags as they were, in a `finally`: `D.requires_grad_(True)` unfreezes layers frozen on purpose,
#   and a step that raises in between leaves D frozen, silently.
# - A training-mode BatchNorm updates its running statistics on every forward, `no_grad` or not; `eval()` stops
#   it. `d_first_fresh_fake` updates G's twice per step. Real and fake through a BatchNorm'd D in one batch mix
#   their statistics: keep the batches separate, or use a D without BatchNorm.

# %% [markdown]
# ## Exercises
#
# ### Build it: a G step with D frozen, that puts everything back
#
# Section 1 found two ways a freeze goes wrong: `D.requires_grad_(True)` afterwards switches on layers that were
# frozen on purpose, and a step that raises between the two lines leaves D frozen for good. Write `g_step(G, D,
# opt_G, z)`: one G step on the non-saturating loss `bce(D(G(z)), 1)`, with D frozen **during its forward and
# backward**, that leaves D's `.grad` exactly as it was, and puts every one of D's `requires_grad` flags back as it
# found it, also when something inside the step raises (let the error through). The checker runs it on seed 000's G
# and D, whose first layer is frozen on purpose and whose `.grad` holds an earlier gradient. It compares G's gradient
# at `opt_G.step()` with the right one, checks D's `.grad`, weights and flags, reads the flags when D's forward
# starts, and runs the step once more with an error raised inside D's forward. The whole body is yours: nothing of
# the freeze, the flags or the `try` is written for you.

# %%
def g_step(G, D, opt_G, z):
    """One G step through a frozen D; D's .grad and requires_grad flags are left as they were, even on an error.
    Returns loss_G."""
    ### BEGIN SOLUTION
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        loss_G = bce(D(G(z)), 1)
        loss_G.backward()
        opt_G.step()
    finally:
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)
    return loss_G
    ### END SOLUTION

my_answer = g_step  # SOLUTION: point this at your g_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_frozen_g_step(my_answer)
assert solved, "frozen_g_step: not solved yet, or not right: the lines above say what is missing"
