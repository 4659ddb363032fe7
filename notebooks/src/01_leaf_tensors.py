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
# # Lesson 01 · Leaf tensors: where gradients land
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/01_leaf_tensors.ipynb)
#
# [中文版](zh/01_leaf_tensors.ipynb) · [Student copy](student/01_leaf_tensors.ipynb)
#
# **Goal.** After this lesson you can look at any tensor in a training script and say whether it is a *leaf*,
# whether `.grad` will be filled after `backward()`, and why PyTorch refuses `a += 1` on a parameter but lets
# `optimizer.step()` change that same parameter in place. You end by writing two functions every training script
# needs: an SGD step and DCGAN's weight initialisation.
#
# **Material.** Seed 001 (an untitled post on leaf nodes, `retain_graph` and `detach` in GAN training; no author or date given) opens with these examples. We run each of its
# listings on today's torch and check what it claims. The seeds are public blog posts, in Chinese, cited in [the instructor notes](README.md#the-seeds); every listing this lesson runs is in its cells.

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

# %% [markdown]
# ## 1 · Leaves and non-leaves
#
# **Why it matters.** Every GAN bug in this course is about *which* tensors autograd is tracking. The first split
# is simple: a tensor you create yourself is a **leaf**; a tensor produced by an operation on something that
# requires grad is a **non-leaf** and carries a `grad_fn`, the autograd node that knows how to send gradients back.
#
# Seed 001's first listing, unchanged:

# %%
a = torch.tensor([1., 2, 3]).requires_grad_(True)
b = a * 2
loss = b.sum()
loss.backward()
describe(a=a, b=b, loss=loss)

# %% [markdown]
# `a` is a leaf that requires grad, so it received `.grad` (the derivative of `sum(2a)` is 2 everywhere).
# `b` and `loss` are non-leaves: they have a `grad_fn` (`MulBackward0`, `SumBackward0`), and autograd does not keep
# their gradients.
#
# Now a tiny generator, held the way a GAN script holds one: a module, noise it does not train, and its output.

# %%
G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))   # a tiny "generator"
z = torch.randn(1, 4)        # noise: created by us, no grad
x_fake = G(z)                # produced by operations on G's parameters
doubled_z = z * 2            # produced by an operation, on a tensor that does not require grad

# %% [markdown]
# **Predict, then check.** Replace each `...` with your prediction, run the cell, and read the feedback.

# %% reveals=["doubled_z\\s+False\\s+True", "requires_grad=False tensors? (is|are) (always )?(a )?lea(f|ves)"] tags=["predict"]
prediction = True  # SOLUTION: is `doubled_z = z * 2` a leaf? (True/False)
check("doubled_z.is_leaf", prediction, doubled_z.is_leaf,
      why="z does not require grad, so nothing is tracked: every requires_grad=False tensor is a leaf, "
          "whatever made it.")

# %% reveals=["detached\\s+False\\s+True", "detach\\(\\) returns a tensor with no grad_fn"] tags=["predict"]
prediction = False  # SOLUTION: does `x_fake.detach()` have a grad_fn? (True/False)
check("x_fake.detach() has a grad_fn", prediction, x_fake.detach().grad_fn is not None,
      why="detach() returns a tensor with no grad_fn and requires_grad=False: a new leaf (lesson 04 uses this).")

# %% reveals=["parameters are leaves", "a weight and a bias: 4"] tags=["predict"]
prediction = 4  # SOLUTION: how many of G's parameter tensors are leaves that require grad? (a number)
check("G's parameter tensors that are leaves and require grad", prediction,
      sum(p.is_leaf and p.requires_grad for p in G.parameters()),
      why="two Linear layers, each with a weight and a bias: 4; ReLU has none. A module creates its parameters "
          "itself, with requires_grad=True, so no tracked operation made them.")

# %% [markdown]
# The rule for `is_leaf`, checked on all of them:
# - `requires_grad=False` tensors are always leaves, whatever made them;
# - a tensor that requires grad is a leaf only if no tracked operation made it;
# - a module's parameters are leaves; its outputs are not.

# %%
describe(z=z, weight=G[0].weight, x_fake=x_fake, doubled_z=doubled_z, detached=x_fake.detach())
claim("a module's parameters are leaves that require grad; its output is not a leaf",
      all(p.is_leaf and p.requires_grad for p in G.parameters()) and not x_fake.is_leaf)

# %% [markdown]
# ## 2 · Which tensors get `.grad`
#
# **Why it matters.** In a GAN you will want to inspect gradients: did the generator receive any? Seed 001's second
# listing multiplies a leaf that requires grad by one that does not, and runs backward:

# %%
a = torch.tensor([1., 2, 3], requires_grad=True)
b = torch.tensor([2., 3, 4])
c = a * b
loss = c.sum()
loss.backward()

# %% reveals=["only leaves that require grad (get|have)", "b\\.grad = None"] tags=["predict"]
prediction = ["a"]  # SOLUTION: which of "a", "b", "c" hold a gradient in .grad now? (a list of names, e.g. ["a", "c"])
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")               # reading c.grad warns; the next cells show why
    filled = [name for name, t in {"a": a, "b": b, "c": c}.items() if t.grad is not None]
check("tensors whose .grad backward() filled", prediction, filled,
      why="only leaves that require grad get .grad: b is a leaf, but nothing needs its gradient; c is a "
          "non-leaf, whose gradient is computed on the way back and not kept.")

# %% [markdown]
# The seed prints both leaves' `.grad`. `b` does not require grad, so its `.grad` stays `None`, and reading it is
# no mistake: nothing warns.

# %%
print("a.grad =", a.grad)
print("b.grad =", b.grad)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    b_grad = b.grad
claim("b.grad is None, and reading it warns of nothing: b is a leaf that does not require grad",
      b_grad is None and not caught)

# %% [markdown]
# Reading `.grad` of a **non-leaf** is different: PyTorch answers `None` *and* warns, because this is almost always
# a mistake (you meant a leaf). The seed shows the warning; here it is, live, and asserted (if a future torch stops
# warning, this cell fails):

# %%
with expect_warning(UserWarning, "not a leaf Tensor"):
    print("loss.grad =", loss.grad)

# %% [markdown]
# The warning names the fix: call `.retain_grad()` on the non-leaf **before** `backward()`.

# %%
a = torch.tensor([1., 2, 3], requires_grad=True)
b = torch.tensor([2., 3, 4])
c = a * b
c.retain_grad()
loss = c.sum()
loss.backward()
describe(a=a, b=b, c=c, loss=loss)

# %% [markdown]
# `c.grad` is all ones (d loss / d c for a sum), and `a.grad` equals `b`, as the product rule says. The check below
# compares autograd with that rule, using PyTorch's own answer rather than a copied number:

# %%
claim("a.grad equals b, as the product rule says", torch.equal(a.grad, b), shown=f"a.grad = {a.grad.tolist()}")

# %% [markdown]
# ## 3 · The graph, drawn from the live tensors
#
# **Why it matters.** "The graph" is not a metaphor: it is a chain of `grad_fn` objects you can walk. Each node's
# `next_functions` lists the nodes that feed it, one slot per input of its operation. A leaf that requires grad is
# reached through an `AccumulateGrad` node, which is what writes `.grad`. Before we draw it: `a * b` has two inputs,
# and only `a` requires grad.

# %%
a = torch.tensor([1., 2, 3], requires_grad=True)
b = torch.tensor([2., 3, 4])
loss = (a * b).sum()
mul = loss.grad_fn.next_functions[0][0]          # the node of a * b

# %% reveals=["\\bb`? has no node", "b's slot in MulBackward0 is empty"] tags=["predict"]
prediction = False  # SOLUTION: does b get a node of its own in loss's graph (something in mul's slot for b)? (True/False)
check("b has a node in loss's graph", prediction, mul.next_functions[1][0] is not None,
      why="nothing needs b's gradient, so autograd records no node for it: its slot is None.")

# %% [markdown]
# torchviz draws the graph. Blue boxes are leaves that require grad; `b` has no node, because nothing needs its
# gradient.

# %%
import torchviz
from gan_lessons import graphs

graphs.show(torchviz.make_dot(loss, params={"a": a, "b": b}), {"loss": loss}, names={a: "a"})

# %% [markdown]
# Walking the same chain by hand shows there is nothing hidden. The `AccumulateGrad` node holds the leaf as
# `.variable`:

# %%
accumulate = mul.next_functions[0][0]
print(type(loss.grad_fn).__name__, "->", type(mul).__name__, "->", type(accumulate).__name__)
claim("the AccumulateGrad node at the end of the chain holds the leaf a itself", accumulate.variable is a)
claim("b's slot in MulBackward0 is empty: nothing needs b's gradient", mul.next_functions[1][0] is None,
      shown=f"next_functions: {[type(f).__name__ if f else None for f, _ in mul.next_functions]}")

# %% [markdown]
# ## 4 · In-place on a leaf: the first error
#
# **Why it matters.** Seed 001's third listing changes `a` in place after using it. PyTorch refuses, and **at that
# line**, not later at `backward()`:

# %%
a = torch.tensor([1, 2., 3], requires_grad=True)
b = torch.tensor([2, 3, 4.])
c = a * b
with expect_error(RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation"):
    a += 1

# %% [markdown]
# Why refuse? `a` is where gradients land. If `a += 1` were recorded, `a` would become the output of an
# operation, i.e. no longer a leaf, and the optimizer would lose the tensor it is supposed to update.
#
# The seed adds: "in-place on non-leaf tensors doesn't matter, which is why `ReLU(inplace=True)` is common". That is
# only half true. In-place on a non-leaf is *allowed*, but if autograd saved that tensor for backward it breaks
# backward with a different error; lesson 03 shows both cases.

# %% [markdown]
# ## 5 · So how does an optimizer change a leaf?
#
# **Why it matters.** `optimizer.step()` changes every parameter in place, and parameters are leaves that require
# grad: exactly what section 4 refused. The cell below makes the same change by hand, with recording switched off
# around it by `with torch.no_grad():`.

# %%
a = torch.tensor([1., 2, 3], requires_grad=True)
(a * a).sum().backward()
print(tr("grad: {grad} | version before: {version}", grad=a.grad, version=a._version))

# %% reveals=["bumped its version by one", "version after: 1\\b"] tags=["predict"]
prediction = 1  # SOLUTION: a._version is 0 above. What is it after `a -= 0.1 * a.grad` under torch.no_grad()?
try:
    with torch.no_grad():
        a -= 0.1 * a.grad          # the same line without no_grad() raises section 4's error
    version = a._version
except RuntimeError as error:
    version = f"an error: {error}"
check("a's version after the update under no_grad", prediction, version,
      why="no_grad switches off the recording of operations, not the counting of writes: every in-place change "
          "bumps a tensor's version, recorded or not.")

# %%
print(tr("after : {value} | is_leaf: {is_leaf} | version after: {version}", value=a.detach(), is_leaf=a.is_leaf,
         version=a._version))
claim("the update under no_grad kept a a leaf that requires grad, and bumped its version by one",
      a.is_leaf and a.requires_grad and a._version == 1)

# %% [markdown]
# With recording off, the in-place update is part of no graph, so nothing makes `a` the output of an operation: the
# leaf stays a leaf, and autograd has no reason to refuse.

# %% [markdown]
# `torch.optim.SGD` does exactly this. Same start, same gradient, one `step()`; the two results are equal,
# and the step bumped the version counter in the same way (lesson 03 is built on that counter). A parameter that no
# loss reached since the last `zero_grad()` has `.grad` `None` (G's parameters in a D step on a detached fake,
# lesson 04), and SGD leaves it as it is:

# %%
a2 = torch.tensor([1., 2, 3], requires_grad=True)
spare = torch.tensor([5.], requires_grad=True)           # in the optimizer, but no loss reaches it
opt = optim.SGD([a2, spare], lr=0.1)
(a2 * a2).sum().backward()
opt.step()
print(tr("SGD result: {value} | equal to the manual update: {equal} | version: {version}", value=a2.detach(),
         equal=torch.equal(a2, a), version=a2._version))
claim("SGD's step gives the manual update's values and the same version", torch.equal(a2, a) and a2._version == a._version)
claim("SGD skips a parameter whose .grad is None: it is left as it was", spare.grad is None and spare.item() == 5.0)


# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - A **leaf** is a tensor no tracked operation produced: your inputs, and every `nn.Parameter`. Non-leaves carry a `grad_fn`.
# - `backward()` fills `.grad` only for leaves with `requires_grad=True`. Reading `.grad` of a non-leaf gives `None`
#   and a `UserWarning`; call `.retain_grad()` first if you need it.
# - In-place on a leaf that requires grad raises *at that line*; under `torch.no_grad()` it is allowed, and that is
#   how every optimizer updates parameters.
# - Every in-place update bumps the tensor's `_version`, including `optimizer.step()`. Lesson 03 shows why that
#   matters in GAN training.
# - `backward()` adds to `.grad`. Two backward passes give the gradient of the summed loss; a forgotten
#   `zero_grad()` silently trains on stale gradients.

# %% [markdown]
# ## Exercises
#
# ### Build it: a manual SGD step
#
# Seed 001's way of changing a leaf, `p -= lr * p.grad`, raises section 4's error while autograd records. Write the
# whole body of `sgd_step(params, lr)`, the update `optim.SGD` makes:
# - every parameter `p` with a gradient changes **in place** by `lr * p.grad`, and stays the same tensor, a leaf that
#   requires grad, without going through `.data` (lesson 03 shows what `.data` hides);
# - a parameter whose `.grad` is `None` (no loss reached it) is left as it is, as SGD leaves it (section 5);
# - once used, `.grad` is cleared (set to `None`, as `opt.zero_grad()` does), so that the next step's `backward()`
#   starts from an empty `.grad` (the side road after the exercises shows what it does to one that is not).
#
# Then point `my_answer` at your function and run the cell. The checker runs two steps on fresh leaves `w` and `b`
# and on a leaf `u` that the loss never reaches (the second step with half the lr, as a schedule would pass it),
# compares the values with `optim.SGD`'s, and says what is still wrong.

# %%
def sgd_step(params, lr):
    """SGD's update of every parameter that has a gradient, legal on leaves; then its .grad cleared."""
    ### BEGIN SOLUTION
    with torch.no_grad():
        for p in params:
            if p.grad is None:          # no loss reached p: SGD leaves it alone
                continue
            p -= lr * p.grad
            p.grad = None
    ### END SOLUTION

my_answer = sgd_step  # SOLUTION: point this at your sgd_step (no parentheses)

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_sgd_step(my_answer)
assert solved, "sgd_step: not solved yet, or not right: the lines above say what is missing"


# %% [markdown]
# ### Build it: DCGAN's weight initialisation
#
# DCGAN-style GANs start from small random weights, and the paper's recipe is what `G.apply(init_weights)` runs
# on every module `m` of a model:
# - every `Linear`, `Conv2d` and `ConvTranspose2d` weight drawn from N(0, 0.02), a normal distribution with mean 0
#   and **standard deviation** 0.02;
# - every BatchNorm weight (`BatchNorm1d`, `BatchNorm2d`) drawn from N(1, 0.02);
# - every bias zero. DCGAN's convolutions are built with `bias=False`, and their `m.bias` is `None`; the checker's
#   generator has one such layer;
# - every other module left alone.
#
# The values must be set **in place**, without going through `.data`: keep the very same parameter tensors (an
# optimizer made before the init holds them), and keep them leaves that require grad. The obvious one-liner, `m.weight.normal_(0.0, 0.02)`,
# raises section 4's error on the first module. Write the whole body of `init_weights(m)`; the checker applies it
# to a small generator and says what is still wrong.

# %%
def init_weights(m):
    """DCGAN's initial values for module m, for model.apply(init_weights)."""
    ### BEGIN SOLUTION
    if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm1d, nn.BatchNorm2d)):
        mean = 1.0 if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) else 0.0
        with torch.no_grad():
            m.weight.normal_(mean, 0.02)
            if m.bias is not None:  # DCGAN's convolutions are built with bias=False
                m.bias.zero_()
    ### END SOLUTION

my_answer = init_weights  # SOLUTION: point this at your init_weights (no parentheses)

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_init(my_answer)
assert solved, "init: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# Both halves of that, checked: the one-liner raises on a fresh `Linear`, and
# `torch.nn.init.normal_(m.weight, mean, 0.02)`, the library's way to write it, is legal because every function in
# `torch.nn.init` runs under `torch.no_grad()` itself.

# %%
lin = nn.Linear(3, 3)
with expect_error(RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation"):
    lin.weight.normal_(0.0, 0.02)                 # the one-liner
version = lin.weight._version
nn.init.normal_(lin.weight, 0.0, 0.02)
claim("nn.init.normal_ changed the parameter in place and left it a leaf that requires grad",
      lin.weight._version > version and lin.weight.is_leaf and lin.weight.requires_grad,
      shown=f"version {version} -> {lin.weight._version}")

# %% [markdown]
# ## Going further · A second `backward()` into a `.grad` that already holds something
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** A GAN step runs two backward passes, and both can reach the same parameters: `loss_G`'s
# backward flows through D to reach G, so it also fills D's `.grad`, unless you stop it (lessons 04 and 05). What
# happens to a `.grad` that already holds something decides whether D's next step is right. Here is a loop that
# forgets to clear it:

# %%
D = nn.Linear(3, 1)
opt_D = optim.SGD(D.parameters(), lr=0.1)
x = torch.ones(1, 3)
for step in range(3):
    loss_D = D(x).sum()                       # d loss_D / d D.weight is x: all ones, every step
    loss_D.backward()                         # note: no opt_D.zero_grad() in this loop

# %% reveals=["\\[3\\.0, 3\\.0, 3\\.0\\]", "backward\\(\\)\\W+adds", "each backward adds"] tags=["predict"]
prediction = [3.0, 3.0, 3.0]  # SOLUTION: what does D.weight.grad hold after the loop? (a list of 3 numbers)
check("D.weight.grad after 3 backward passes without zero_grad", prediction, D.weight.grad[0].tolist(),
      why="each backward adds x = [1, 1, 1]; three of them make [3, 3, 3]. opt_D.zero_grad() would have reset it.")

# %% [markdown]
# `backward()` **adds** the new gradient to whatever `.grad` holds. That is a feature: two backward passes into one
# `.grad` give exactly the gradient of the sum of the two losses, which is how `loss_D = loss_real + loss_fake` can
# be split in two backward calls. It is also why every training step starts with `opt.zero_grad()`. Both halves,
# checked:

# %%
w = torch.tensor([1., 2, 3], requires_grad=True)
(w * w).sum().backward()
first = w.grad.clone()
(w * w).sum().backward()                      # the same loss again, no zero_grad in between
claim("a second backward adds to .grad: it now holds twice the first gradient", torch.equal(w.grad, 2 * first),
      shown=f"first {first.tolist()}, now {w.grad.tolist()}")

w.grad = None
((w * w).sum() + (3 * w).sum()).backward()    # one backward of the summed loss
summed = w.grad.clone()
w.grad = None
(w * w).sum().backward()                      # two backward passes, one per term
(3 * w).sum().backward()
claim("two backward passes into one .grad give the gradient of the summed loss", torch.equal(w.grad, summed),
      shown=f"{w.grad.tolist()}")

# %% [markdown]
# In a GAN this is where a forgotten `zero_grad()` hides: the loop runs, every step is a legal step, and D is
# trained on the sum of this step's gradient and the last one's. Nothing raises. Lesson 07's doctor warns when the gradients of two different losses add up this way.
# Which tensor `zero_grad()` leaves behind (zeros or `None`) matters too, and lesson 04 shows when.

# %% [markdown] tags=["read-after-exercises"]
# | seed 001 listing | on today's torch |
# |---|---|
# | `a * 2`, `loss.backward()`, `a.grad` | works as the post says |
# | `b.grad`, `loss.grad` | `b.grad` is `None`; `loss.grad` is `None` **and** a `UserWarning` (section 2) |
# | `a += 1` on a leaf that requires grad | raises `RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.` at that line |
