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
# # Lesson 02 · Graph freeing and `retain_graph`
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/02_graph_freeing_and_retain_graph.ipynb)
#
# [中文版](zh/02_graph_freeing_and_retain_graph.ipynb) · [Student copy](student/02_graph_freeing_and_retain_graph.ipynb)
#
# **Goal.** See the graph being built by the forward pass and its saved tensors being freed by `backward()`;
# reproduce "Trying to backward through the graph a second time" three ways; measure what `retain_graph=True`
# keeps alive; and choose between its two fixes, `retain_graph` and `detach`, knowing when each one is wrong. You end
# by writing seed 004's training step, fixed, from scratch.
#
# **Material.** Seed 001 (the G/D toy; an untitled post on leaf nodes, `retain_graph` and `detach` in GAN training; no author or date given) and seed 004 (the model1/model2 loop and its `itertools.chain` caveat;
# a repost, untitled, on “Trying to backward through the graph a second time”; no author or date given). The seeds are public blog posts, in Chinese, cited in [the instructor notes](README.md#the-seeds); every listing this lesson runs is in its cells.

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

# %% [markdown]
# ## 1 · The graph is built by the forward pass; backward frees what it saved
#
# **Why it matters.** PyTorch has no graph until your code runs: every operation on a tensor that requires grad
# adds a node and *saves* whatever its backward will need (an input, a weight, an output). `backward()` uses
# those saved tensors and then frees them, so memory does not grow with every step. The renderer below draws
# the live graph and colours each saved tensor: green **alive**, grey **freed**, red **stale** (lesson 03).

# %%
G, D = nn.Linear(2, 2), nn.Linear(2, 1)
z = torch.randn(4, 2, requires_grad=True)
loss = D(torch.tanh(G(z))).mean()
names = graphs.param_names(G=G, D=D, z=z)
graph = graphs.draw({"loss": loss}, names)
saved = sorted((s.node, s.name) for s in graph.saved if s.node in ("AddmmBackward0", "TanhBackward0"))
claim("tanh saved its output; each addmm saved its input (mat1) and its transposed weight (mat2)",
      saved == [("AddmmBackward0", "mat1")] * 2 + [("AddmmBackward0", "mat2")] * 2 + [("TanhBackward0", "result")])
graph

# %% [markdown]
# `tanh` saved its **output** (its derivative is `1 - tanh²`), each `addmm` saved its input (`mat1`) and the
# transposed weight (`mat2`). Now one backward. The saved tensors are what backward frees; what about the nodes
# that held them?

# %% reveals=["nodes are still there", "not the nodes themselves"] tags=["predict"]
loss.backward()
prediction = False  # SOLUTION: does loss.backward() set loss.grad_fn to None? (True/False)
check("loss.backward() sets loss.grad_fn to None", prediction, loss.grad_fn is None,
      why="backward frees what the nodes saved, not the nodes themselves: the grad_fn objects live as long as "
          "loss does.")

# %% [markdown]
# The same graph again, after that backward:

# %%
graph = graphs.draw({"loss": loss}, names)
claim("after one backward, every saved tensor is freed", len(graph.saved) >= 5 and all(s.state == "freed" for s in graph.saved))
graph

# %% [markdown]
# The nodes are still there (the `grad_fn` objects live as long as `loss` does), but every saved tensor is gone.
# That is what the error message means by "Saved intermediate values of the graph are freed when you call
# `.backward()`".

# %% [markdown]
# **Seed 004's reason, corrected.** Seed 004 says that once the graph has made a gradient update, it clears some
# cached gradients, "to avoid adding up next time". Both halves are off. What backward frees is what the forward
# saved (inputs, weights, outputs), never a gradient; and the freeing does not stop anything from adding up. Keep
# the graph, and a second backward runs and adds into `.grad` like the first:

# %%
w = torch.ones(3, requires_grad=True)
y = (w * w).sum()
y.backward(retain_graph=True)                 # keep what the forward saved
first = w.grad.clone()
y.backward()                                  # the second backward runs, and adds
claim("with the graph kept, a second backward runs and .grad adds up: freeing is not what stops it",
      torch.equal(w.grad, 2 * first), f"w.grad {rounded(first)} -> {rounded(w.grad)}")

# %% [markdown]
# ## 2 · "Trying to backward through the graph a second time", three ways
#
# **Why it matters.** This is the first error nearly every GAN author meets: two losses share part of a graph,
# and the first `backward()` frees what the second needs.
#
# **Way 1: backward twice.** The smallest case.

# %%
with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    loss.backward()

# %% [markdown]
# **Predict, then check.** Way 1 raised because the first backward freed what `addmm` and `tanh` had saved. Here
# is a graph of one addition and one sum instead.

# %% reveals=["save no tensor", "nothing can be freed"] tags=["predict"]
x = torch.ones(3, requires_grad=True)
y = (x + 1).sum()
prediction = False  # SOLUTION: does calling y.backward() twice raise? (True/False) Hint: what does `x + 1` need to save?
try:
    y.backward(); y.backward()
    raised_twice = False
except RuntimeError:
    raised_twice = True
check("backward twice through (x + 1).sum() raises", prediction, raised_twice,
      why="addition and sum save no tensor (their gradients need no values), so nothing can be freed; "
          "x.grad simply accumulates twice.")

# %% [markdown]
# Multiplication is different even by a constant: `x * 2` saves the 2 (`mul` keeps each operand whose partner
# requires grad, for that partner's gradient), and the first backward frees it.

# %%
claim("two backward passes through (x + 1).sum() added up in x.grad", torch.equal(x.grad, torch.full((3,), 2.0)),
      shown=f"x.grad = {x.grad.tolist()}")
doubled = (x * 2).sum()
saved = graphs.saved_tensors(doubled.grad_fn.next_functions[0][0])
claim("x * 2 saved one tensor, the 2, as `other`", [(s.name, s.shape) for s in saved] == [("other", ())],
      shown=[s.name for s in saved])
doubled.backward()
with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    doubled.backward()


# %% [markdown]
# **Way 2: seed 001's G/D toy.** `lossD` and `lossG` both depend on `d = D(g)`. After `lossD.backward()`,
# the part of the graph from `t` through G and D to `d` is freed, so `lossG.backward()` has nothing to go back
# through.

# %%
def seed001_toy(retain_graph=False, detach=False):
    """Seed 001's listing, as written there; returns G's gradient."""
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Linear(2, 2)
    optimG, optimD = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    t = torch.tensor([1., 2], requires_grad=True)
    g = G(t)
    d = D(g)
    lossD = d.sum()
    optimD.zero_grad()
    lossD.backward(retain_graph=retain_graph)
    optimD.step()
    lossG = (g + (d.detach() if detach else d)).sum()
    optimG.zero_grad()
    lossG.backward()
    optimG.step()
    return G.weight.grad

with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    seed001_toy()

# %% [markdown]
# **Way 3: seed 004's model1/model2 loop.** `b = model2(a)` makes `l2` depend on model1's graph, so
# `l2.backward()` frees it before `l1.backward()` needs it.

# %%
import itertools

def seed004_loop(fix=None, shared_optimizer=False, steps=20, hidden=None):
    """Seed 004's loop. fix: None, "retain_graph" or "detach". Returns both models and the last losses.
    hidden: None for the seed's one-layer model1, or a width for a two-layer one (section 5)."""
    torch.manual_seed(0)
    model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
    if hidden is not None:
        model1 = nn.Sequential(nn.Linear(10, hidden), nn.Tanh(), nn.Linear(hidden, 2))
    params2 = itertools.chain(model1.parameters(), model2.parameters()) if shared_optimizer else model2.parameters()
    optimizer1 = optim.Adam(model1.parameters(), lr=0.001, betas=(0.5, 0.999))
    optimizer2 = optim.Adam(params2, lr=0.001, betas=(0.5, 0.999))
    loss = nn.CrossEntropyLoss()
    data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
    for i in range(steps):
        a = model1(data)
        b = model2(a.detach() if fix == "detach" else a)
        l1, l2 = loss(a, label), loss(b, label)
        optimizer2.zero_grad()
        l2.backward(retain_graph=(fix == "retain_graph"))
        optimizer2.step()
        optimizer1.zero_grad()
        l1.backward()
        optimizer1.step()
    return model1, model2, l1.item(), l2.item()

with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    seed004_loop()

# %% reveals=["l1 only needs model1's graph", "l1's graph reaches model2 -> False"] tags=["predict"]
model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
a = model1(torch.randn(4, 10))
l1 = F.cross_entropy(a, torch.tensor([0, 1, 1, 0]))
prediction = False  # SOLUTION: does l1's own graph reach any parameter of model2? (True/False)
tree = graphs.text_tree({"l1": l1}, graphs.param_names(model1=model1, model2=model2))
check("l1's graph reaches model2", prediction, "model2." in tree,
      why="l1 only needs model1's graph; it fails because l2.backward() freed that shared part first.")

# %% [markdown]
# ## 3 · What `retain_graph=True` keeps, and what it costs
#
# **Why it matters.** The error message suggests `retain_graph=True`, and most forum answers stop there. It does
# make the error go away, by keeping every saved tensor alive until the graph itself is dropped. How much is that?
# We measure it on seed 000's G and D (the MNIST models of lesson 06) for one batch of 64: the bytes of the saved
# tensors the graph holds, each storage counted once, parameters left out (they live anyway). The figure depends
# only on shapes, so it is the same on every run and every machine.

# %% reveals=["about as (much|many bytes) as the parameters", "-> 'about the same'"] tags=["predict"]
from gan_lessons.models import Generator, Discriminator

G, D = Generator(), Discriminator()
params = [*G.parameters(), *D.parameters()]
z, x_real = torch.randn(64, G.z_dim), torch.randn(64, 1, 28, 28)
loss_D = F.softplus(-D(x_real)).mean() + F.softplus(D(G(z))).mean()
saved = [graphs.saved_bytes({"loss_D": loss_D}, params)]
param_bytes = sum(p.numel() * p.element_size() for p in params)

prediction = "about the same"  # SOLUTION: one batch's saved tensors, next to all of G's and D's parameters: "far fewer bytes" (under a tenth), "about the same" or "far more bytes" (over ten times)?
ratio = saved[0] / param_bytes
check("bytes of one batch's saved tensors, next to the parameters'", prediction,
      "far fewer bytes" if ratio < 0.1 else "far more bytes" if ratio > 10 else "about the same",
      why=f"the saved tensors hold {ratio:.2f} times the parameters' bytes: the activations of 64 images of "
          f"28 x 28, layer after layer, weigh about as much as the layers' weights.")

# %% [markdown]
# Now one backward that keeps the graph, then a plain one:

# %%
mib = lambda n: f"{n / 2**20:.2f} MiB"
loss_D.backward(retain_graph=True)
saved.append(graphs.saved_bytes({"loss_D": loss_D}, params))
loss_D.backward()
saved.append(graphs.saved_bytes({"loss_D": loss_D}, params))
print(tr("{label:<38}: {size}", label=tr("saved tensors after forward"), size=mib(saved[0])))
print(tr("{label:<38}: {size}", label=tr("after backward(retain_graph=True)"), size=mib(saved[1])))
print(tr("{label:<38}: {size}", label=tr("after a second, plain backward()"), size=mib(saved[2])))
print(tr("{label:<38}: {size}", label=tr("for scale, all parameters of G and D"), size=mib(param_bytes)))
claim("retain_graph keeps every saved byte, about as much as the parameters, until a plain backward frees them",
      saved[1] == saved[0] and 0.8 < saved[0] / param_bytes < 1.2 and saved[2] == 0)

# %% [markdown]
# With `retain_graph=True` the whole forward's activations stay in memory until the *next* backward or until
# the last reference to the graph goes. They cost about as much as the parameters themselves, per retained graph.
#
# What it buys is a second backward through the **same** forward. When two losses come from one forward, the
# alternative is to run that forward again for the second loss; `retain_graph` spares that second forward, at the
# price of the memory above. Lesson 05's `one_forward` strategy takes G's and D's losses from one D forward this way.
# It changes no gradient: below, two losses on one small G and D, counting D's forward calls with a hook.

# %%
torch.manual_seed(0)
G, D = nn.Linear(2, 2), nn.Linear(2, 1)
z = torch.randn(4, 2)
d_forwards = []
D.register_forward_hook(lambda module, inputs, output: d_forwards.append(1))

def take_grads():
    grads = [p.grad.clone() for p in (*G.parameters(), *D.parameters())]
    G.zero_grad(); D.zero_grad()
    return grads

def one_forward():
    logits = D(G(z))
    F.softplus(-logits).mean().backward(retain_graph=True)   # keep the graph for the second loss
    first = take_grads()
    F.softplus(logits).mean().backward()
    return first + take_grads()

def two_forwards():
    F.softplus(-D(G(z))).mean().backward()
    first = take_grads()
    F.softplus(D(G(z))).mean().backward()                     # the forward again
    return first + take_grads()

d_forwards.clear(); reused = one_forward(); n_reused = len(d_forwards)
d_forwards.clear(); again = two_forwards(); n_again = len(d_forwards)
claim("retain_graph: both losses from one D forward", n_reused == 1, f"{n_reused} forward")
claim("without it, the second loss needs a second D forward", n_again == 2, f"{n_again} forwards")
claim("the gradients are the same", all(torch.equal(p, q) for p, q in zip(reused, again)))

# %% [markdown]
# ## 4 · The two fixes, side by side
#
# **Why it matters.** Seed 004 offers both fixes for its loop. They are not the same operation:
#
# - `retain_graph=True`: `l2.backward` still flows into model1 and fills model1's `.grad`, and the graph is kept
#   until `l1.backward()`;
# - `detach`: `model2(a.detach())` cuts the graph, so `l2.backward` stops at model2 and frees nothing model1 needs.
#
# **Predict, then check.** `seed004_loop` (section 2) runs 20 steps of the loop from the same seed with either fix,
# with the seed's two optimizers, `optimizer1` over model1 and `optimizer2` over model2.

# %% reveals=["identical weights", "Identical to the last bit"] tags=["predict"]
runs = {fix: seed004_loop(fix) for fix in ("retain_graph", "detach")}
prediction = True  # SOLUTION: do the two fixes end with exactly the same weights in both models? (True/False)
same = all(torch.equal(p, q) for p, q in zip([*runs["retain_graph"][0].parameters(), *runs["retain_graph"][1].parameters()],
                                              [*runs["detach"][0].parameters(), *runs["detach"][1].parameters()]))
check("retain_graph and detach end with the same weights", prediction, same,
      why="the only difference is l2's gradient in model1's .grad, and optimizer1.zero_grad() clears it before "
          "l1.backward(): optimizer1 never steps on it.")

# %%
for fix, (m1, m2, l1, l2) in runs.items():
    print(f"{fix:<13} l1={l1:.4f} l2={l2:.4f}")
claim("retain_graph and detach give identical weights after 20 steps", same)


# %% [markdown]
# Identical to the last bit: with two separate optimizers the gradient `retain_graph` lets into model1 is
# discarded anyway. `detach` gets there without keeping the graph and without computing that wasted gradient.

# %% [markdown]
# ## 5 · When detach is wrong: one optimizer for both models
#
# **Why it matters.** Seed 004 ends with a caveat: if `optimizer2` owns model1's parameters too
# (`itertools.chain`), `detach` silently stops `l2` from training model1. No error, no warning. Here is the proof,
# looking at model1's gradient right after `l2.backward()`:

# %%
def model1_grad_after_l2(fix):
    torch.manual_seed(0)
    model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
    data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
    a = model1(data)
    b = model2(a.detach() if fix == "detach" else a)
    F.cross_entropy(b, label).backward(retain_graph=(fix == "retain_graph"))
    return model1.weight.grad

grad = {fix: model1_grad_after_l2(fix) for fix in ("retain_graph", "detach")}
claim("retain_graph: l2 reaches model1", grad["retain_graph"] is not None, f"norm {grad['retain_graph'].norm():.4f}")
claim("detach: model1's gradient is None", grad["detach"] is None)

# %%
shared = {fix: seed004_loop(fix, shared_optimizer=True) for fix in ("retain_graph", "detach")}
for fix, (m1, m2, l1, l2) in shared.items():
    print(f"{fix:<13} l1={l1:.4f} l2={l2:.4f}")
same = all(torch.equal(p, q) for p, q in zip(shared["retain_graph"][0].parameters(), shared["detach"][0].parameters()))
claim("with one shared optimizer, the two fixes train different model1 weights", not same)

# %% [markdown]
# With a shared optimizer the two fixes train **different** models: `detach` changed the algorithm.
# Rule of thumb: detach where a loss must *not* train what is upstream (D's loss must not train G); never where
# it must (G's loss must train G through D, lesson 04).

# %% [markdown]
# `retain_graph` with the shared optimizer runs here only because of the shape of seed 004's model1. Between
# `l2.backward()` and `l1.backward()`, `optimizer2.step()` now changes model1's weights in place too. Seed 004's
# model1 is one `Linear` on `data`, which needs no gradient, so its `addmm` saves only `data` (it would keep the
# weight only to compute a gradient for its input); no step changes `data`, and `l1.backward()` finds nothing
# stale. Give model1 a second layer and that layer's input is the first layer's output, which requires grad, so
# its `addmm` saves its transposed weight, `[8, 2]`; the shared step changes that weight, and `l1.backward()`
# raises lesson 03's version error. (With separate optimizers, nothing `l1` saved is stepped before `l1.backward()`,
# so the two-layer model1 runs under both fixes.)

# %%
saved = [s.name for s in graphs.saved_tensors(nn.Linear(10, 2)(torch.randn(4, 10)).grad_fn)]
claim("seed 004's one-layer model1 saves only its input data", saved == ["mat1"], saved)

deep = {fix: seed004_loop(fix, hidden=8) for fix in ("retain_graph", "detach")}
claim("two-layer model1, separate optimizers: both fixes run, with identical weights",
      all(torch.equal(p, q) for p, q in zip(deep["retain_graph"][0].parameters(), deep["detach"][0].parameters())))

with expect_error(RuntimeError, r"modified by an inplace operation: \[torch.FloatTensor \[8, 2\]\], which is output 0 of AsStrided(Backward0)?, is at version 2; expected version 1"):
    seed004_loop("retain_graph", shared_optimizer=True, hidden=8)


# %% [markdown] tags=["read-after-exercises"]
# | seed listing | on today's torch |
# |---|---|
# | 001: `lossD.backward(); optimD.step(); lossG.backward()` | raises "Trying to backward through the graph a second time" |
# | 001: same with `lossD.backward(retain_graph=True)` | raises the version error instead (lesson 03 explains it) |
# | 001: `lossG = (g + d.detach()).sum()` | runs, but G loses the gradient that flows through D (lesson 04 measures it) |
# | 004: model1/model2 loop as written | raises "Trying to backward through the graph a second time" |
# | 004: `l2.backward(retain_graph=True)` or `model2(a.detach())` | both run, and give identical weights |
# | 004: detach with one optimizer over both models (`itertools.chain`) | runs, but model1 silently gets no gradient from `l2` |
# | 004: `retain_graph` with one optimizer over both models | runs only because model1 is one Linear layer: a two-layer model1 raises the version error |

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - The forward pass builds the graph and saves tensors for backward; `backward()` frees them. A second
#   backward through any freed part raises "Trying to backward through the graph a second time".
# - `retain_graph=True` keeps every saved tensor alive: for one batch of 64 through seed 000's G and D, about
#   as many bytes as the models' parameters (section 3). It changes no gradient; what it buys is a second
#   backward through the same forward, which saves running that forward again (lesson 05's `one_forward`).
# - `detach()` cuts the shared part out of the second loss's graph. With separate optimizers it gives the same
#   weights as `retain_graph` at lower cost. With one optimizer over both models it silently changes what is
#   trained, and `retain_graph` runs there only while the second backward needs nothing the shared step changed:
#   seed 004's one-layer model1 saves only its input data, a two-layer model1 raises the version error.

# %% [markdown]
# ## Exercises
#
# ### Build it: a chain of three models
#
# Add a third model to seed 004's two: `model3 = nn.Linear(2, 2)` reads model2's logits. Each model has its loss,
# from the same `label`: `a = model1(data)` and `l1`, `b = model2(a)` and `l2`, `c = model3(b)` and `l3`
# (`F.cross_entropy` each). Write one step, `chain_step(model1, model2, model3, optimizer1, optimizer2, optimizer3,
# data, label)`, in which
# - model1 steps on the gradient of l1 **and** l2 (model2 is a head on model1's output, so l2 must train model1
#   as well, as in section 5);
# - model2 steps on the gradient of l2 alone;
# - model3 steps on the gradient of l3 alone (a probe: it must not change what it reads);
# - every optimizer steps on this call's gradient, in every call;
# - nothing is wasted: each model runs forward once a call, no gradient is computed that an optimizer then throws
#   away, and no graph is kept that no later backward goes through.
#
# As many backward calls as you like, in any order. The checker runs your step three times on fresh models and, with
# `register_step_pre_hook`, reads every parameter's `.grad` at each `optimizer.step()`; a wrong gradient is split
# into the losses it came from. It also counts forwards, the gradients that come back into model2, and the graphs
# kept for nothing.

# %%
def chain_step(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    """One step of the chain: l1 and l2 train model1, l2 trains model2, l3 trains model3 alone."""
    ### BEGIN SOLUTION
    a = model1(data)
    b = model2(a)                   # l2 goes on into model1: no cut here
    c = model3(b.detach())          # l3 stops at model3
    loss = F.cross_entropy(a, label) + F.cross_entropy(b, label) + F.cross_entropy(c, label)
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.zero_grad()
    loss.backward()                 # one backward: each loss reaches only what it may
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.step()
    ### END SOLUTION

my_answer = chain_step  # SOLUTION: point this at your chain_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_chain_step(my_answer)
assert solved, "chain_step: not solved yet, or not right: the lines above say what is missing"
