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
# # Lesson 08 · Gradient penalties: the autograd a critic needs
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/08_gradient_penalties.ipynb)
#
# [中文版](zh/08_gradient_penalties.ipynb) · [Student copy](student/08_gradient_penalties.ipynb)
#
# **Goal.** Take gradients *as values* with `torch.autograd.grad`, and know what each of its arguments does:
# `grad_outputs`, `retain_graph`, `create_graph`, `inputs`. Then build WGAN-GP's gradient penalty one line at a
# time, meet each error it raises on the way, and find out what a penalty computed without `create_graph=True`
# does. Go on to R1 on real images, lazy regularisation, `n_critic` critic steps per G step, what a
# penalty costs, measured, and why `torch.compile`'s ahead-of-time backends cannot take it. In the exercises you write WGAN-GP's penalty for a
# conditional critic (two inputs, one gradient) and lazy R1 yourself, from scratch.
#
# **Material.** None of the five seeds reaches gradient penalties; this lesson goes past them. The facts come
# from the papers: WGAN-GP (Gulrajani et al., *Improved Training of Wasserstein GANs*, 2017: penalty weight 10,
# `n_critic` 5, Adam with lr 1e-4 and betas (0, 0.9)), R1 (Mescheder et al., *Which Training Methods for GANs do
# actually Converge?*, 2018) and lazy regularisation (Karras et al., *Analyzing and Improving the Image Quality
# of StyleGAN*, 2020: R1 every 16 minibatches). A table before the summary (after the exercises, in the student
# copy) sums up the code people write around them, and what it does on today's torch.

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
import copy
import statistics
import time
import warnings
from gan_lessons import costs, data, graphs, strategies
from gan_lessons.doctor import doctor, DoctorWarning
from gan_lessons.models import Generator, Discriminator
from gan_lessons.training import ConfigError, TrainConfig
from IPython.display import Markdown, display

warnings.simplefilter("always", DoctorWarning)
grad = torch.autograd.grad

# %% [markdown]
# ## 1 · `torch.autograd.grad`: a gradient you can compute with
#
# **Why it matters.** `loss.backward()` adds gradients into the `.grad` of leaves and returns nothing. A gradient
# penalty needs the gradient of D's output *with respect to its input image*, as a tensor, inside the loss. That
# is `torch.autograd.grad(outputs, inputs)`, which returns the gradients, one per input, as a tuple.

# %%
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x ** 3).sum()
dy_dx, = grad(y, x)
claim("autograd.grad returns dy/dx = 3x²", torch.equal(dy_dx, 3 * x.detach() ** 2), rounded(dy_dx))

# %% reveals=["touches no `?\\.grad", "x\\.grad stays None", "leaves `?\\.grad`? alone"] tags=["predict"]
prediction = False  # SOLUTION: after grad(y, x), is x.grad filled?
check("autograd.grad fills x.grad", prediction, x.grad is not None,
      why="autograd.grad returns the gradients instead of adding them into .grad; x.grad stays None.")

# %% [markdown]
# So `autograd.grad` touches no `.grad`: what it computes is its return value, nothing else.
#
# **`grad_outputs`.** A critic gives one score per image, so its output is a vector. Autograd computes
# vector-Jacobian products: for a vector output it needs the vector `v` in `v · ∂y/∂x`. `backward()` on a scalar
# uses `v = 1` silently; for a vector you pass it. `grad_outputs=torch.ones_like(y)` gives the gradient of
# `y.sum()`, which, since each image's score depends on that image only, is each score's gradient with respect to
# its own image.

# %%
y = x ** 3
with expect_error(RuntimeError, "grad can be implicitly created only for scalar outputs"):
    grad(y, x)
v = torch.tensor([1.0, 0.0, 2.0])
claim("grad_outputs=ones gives the gradient of y.sum()",
      torch.equal(grad(x ** 3, x, grad_outputs=torch.ones(3))[0], grad((x ** 3).sum(), x)[0]))
claim("grad_outputs=v gives v times each element's derivative", torch.equal(grad(x ** 3, x, grad_outputs=v)[0], v * 3 * x.detach() ** 2),
      rounded(grad(x ** 3, x, grad_outputs=v)[0]))

# %% [markdown]
# **`retain_graph`.** Like `backward()`, `autograd.grad` frees the saved tensors it used (lesson 02).
#
# **`create_graph`.** With `create_graph=True` the returned gradient is itself the output of a graph, so it can
# be differentiated again: a second derivative, or a penalty that trains D. Without it, the gradient is a plain
# number with no `grad_fn`.

# %%
y = (x ** 3).sum()
dy_dx, = grad(y, x)
with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    grad(y, x)
with expect_error(RuntimeError, "element 0 of tensors does not require grad and does not have a grad_fn"):
    grad(dy_dx.sum(), x)

y = (x ** 3).sum()
dy_dx, = grad(y, x, create_graph=True)
claim("with create_graph=True the gradient has a grad_fn", dy_dx.grad_fn is not None, type(dy_dx.grad_fn).__name__)
d2y_dx2, = grad(dy_dx.sum(), x)
claim("and differentiating it gives the second derivative 6x", torch.equal(d2y_dx2, 6 * x.detach()), rounded(d2y_dx2))
claim("create_graph=True also kept y's graph: a second grad(y, x) runs (retain_graph defaults to create_graph)",
      torch.equal(grad(y, x)[0], 3 * x.detach() ** 2))

# %% [markdown]
# **`inputs`** may be several tensors; the gradients come back in the same order. For parameters that the
# output does not reach, `allow_unused=True` returns `None` instead of raising.

# %%
a, b, unused = (torch.tensor(v, requires_grad=True) for v in (2.0, 5.0, 1.0))
da, db, dunused = grad(a * b, (a, b, unused), allow_unused=True)
claim("d(ab)/da = b, d(ab)/db = a, and an unused input gets None", da.item() == 5.0 and db.item() == 2.0 and dunused is None)

# %% [markdown]
# ## 2 · WGAN-GP's penalty, one line at a time
#
# **Why it matters.** WGAN-GP asks D (a *critic*: a score, no sigmoid) to have gradient norm 1 with respect to
# its input, on points between real and fake images: `x_hat = eps·x_real + (1 − eps)·x_fake`, one `eps` per image.
# The penalty is the batch mean of `(‖∇x_hat D(x_hat)‖₂ − 1)²`, weighted 10. We build it on seed 000's D and real
# digits, and meet the two errors on the way.

# %%
torch.manual_seed(0)
G, D = Generator(tanh=True), Discriminator()
x_real = data.to_unit_range(data.mnist_tensors(train=False)[0][:16])
z = torch.randn(16, G.z_dim)
x_fake = G(z)
eps = torch.rand(16, 1, 1, 1)                           # one per image, broadcast over its pixels

x_hat = eps * x_real + (1 - eps) * x_fake.detach()      # detached: the penalty must train D only
scores = D(x_hat)
with expect_error(RuntimeError, "One of the differentiated Tensors does not require grad"):
    grad(scores, x_hat, grad_outputs=torch.ones_like(scores))

# %% [markdown]
# `x_hat` was made from a detached fake and real data, so nothing made it require grad: there is no gradient
# with respect to it to return. It must be a leaf that requires grad *before* D sees it:

# %%
x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
scores = D(x_hat)
with expect_error(RuntimeError, "grad can be implicitly created only for scalar outputs"):
    grad(scores, x_hat, create_graph=True)

# %% [markdown]
# With `grad_outputs=torch.ones_like(scores)` it runs. `g` is the gradient of the 16 scores (summed) with respect
# to `x_hat`, and the penalty takes one norm per image from it.

# %% reveals=["\\(16, 1, 28, 28\\)", "one entry per pixel"] tags=["predict"]
g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
prediction = (16, 1, 28, 28)  # SOLUTION: what is tuple(g.shape)? (x_hat is 16 MNIST digits; D gives one score each)
check("g.shape", prediction, tuple(g.shape),
      why="a gradient with respect to x_hat has x_hat's shape, one entry per pixel of every image, whatever the "
          "shape of D's output: each image's norm is taken over its flattened gradient, g.flatten(1).norm(2, dim=1).")

# %%
gp = ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
print(tr("per-image gradient norms: {norms} ...", norms=rounded(g.flatten(1).norm(2, dim=1)[:4])))
claim("gan_lessons.strategies.gradient_penalty computes the same penalty",
      torch.allclose(gp, strategies.gradient_penalty(D, x_real, x_fake, eps=eps)), f"{gp.item():.4f}")


# %% [markdown]
# **What if the fake is not detached?** Then `x_hat` already requires grad (it is not a leaf, but
# `autograd.grad` accepts it), no error is raised, and the penalty's graph runs on into G. How much harm that does
# depends on D. Seed 000's D is made of linear maps and ReLUs: its gradient with respect to the input is constant
# between the points where a ReLU switches, so nudging the fakes does not change the penalty, and G's gradient
# from it is exactly zero: only the wasted backward through G remains. With a smooth activation (SiLU here) the
# penalty moves G for real.

# %%
def penalty_into_G(D):
    x_hat = eps * x_real + (1 - eps) * x_fake                # x_fake not detached
    scores = D(x_hat)
    g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    gp = ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
    return grad(gp, list(G.parameters()), allow_unused=True, retain_graph=True)   # G's graph is shared

D_smooth = copy.deepcopy(D)
for i, layer in enumerate(D_smooth.net):
    if isinstance(layer, nn.ReLU):
        D_smooth.net[i] = nn.SiLU()
relu_D, smooth_D = penalty_into_G(D), penalty_into_G(D_smooth)
claim("not detached, the penalty reaches every one of G's parameters", all(t is not None for t in relu_D),
      f"{sum(t is not None for t in relu_D)} of {len(relu_D)}")
claim("through seed 000's ReLU D those gradients are all exactly zero", all(bool((t == 0).all()) for t in relu_D))
claim("through the same D with SiLU they are not", any(bool(t.abs().sum() > 0) for t in smooth_D),
      f"largest {max(t.abs().max().item() for t in smooth_D):.2e}")


# %% [markdown]
# ## 3 · A penalty without `create_graph=True`
#
# **Why it matters.** Drop `create_graph=True` and everything still runs. The penalty is computed and printed,
# and it is added to `loss_D`. Below, D's gradients from three losses on the same batch: the critic's loss alone
# (`plain`), with the penalty computed without `create_graph=True` (`no_graph`), and with it (`right`).

# %%
def critic_loss(D, create_graph):
    x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
    scores = D(x_hat)
    g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=create_graph)
    gp = ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
    wasserstein = D(x_fake.detach()).mean() - D(x_real).mean()
    return wasserstein, gp

def D_grads(loss):
    D.zero_grad()
    loss.backward()
    return [p.grad.clone() for p in D.parameters()]

wasserstein, _ = critic_loss(D, create_graph=False)
plain = D_grads(wasserstein)                              # no penalty at all
wasserstein, gp_const = critic_loss(D, create_graph=False)
no_graph = D_grads(wasserstein + 10 * gp_const)
wasserstein, gp_live = critic_loss(D, create_graph=True)
right = D_grads(wasserstein + 10 * gp_live)
print(tr("penalty without create_graph: {without:.4f}; with it: {with_it:.4f}", without=gp_const.item(),
         with_it=gp_live.item()))
claim("without create_graph the penalty has the same value", torch.allclose(gp_const, gp_live.detach()))

# %% reveals=["exactly those of the loss without any penalty", "trains nothing", "gradient (on|with respect to) D('s weights)? is zero"] tags=["predict"]
prediction = 0  # SOLUTION: of D's parameters, how many get a different gradient in `no_graph` than in `plain`?
check("D parameters whose gradient the penalty without create_graph changes", prediction,
      sum(not torch.equal(s, p) for s, p in zip(no_graph, plain)),
      why="a tensor that requires no grad adds nothing to any gradient: the penalty is only a number in the loss.")

# %%
claim("without create_graph the penalty has requires_grad=False", not gp_const.requires_grad)
claim("and D's gradients are exactly those of the loss without any penalty",
      all(torch.equal(s, p) for s, p in zip(no_graph, plain)))
changed = sum(not torch.allclose(r, p) for r, p in zip(right, plain))
claim("with create_graph=True the penalty changes D's gradient", changed > 0,
      f"{changed} of {len(right)} D parameters get a different gradient")

# %% [markdown]
# The gradient the penalty was built from is a constant, so the penalty is a constant too: its gradient with respect
# to D's weights is zero, and training is plain WGAN with a number added to the loss.

# %% [markdown]
# The autograd doctor of lesson 07 watches `autograd.grad` too. It warns when a gradient taken without
# `create_graph=True` is mixed into a loss that is then backpropagated:

# %%
with expect_warning(DoctorWarning, "create_graph"):
    with doctor(D=D):
        wasserstein, gp_const = critic_loss(D, create_graph=False)
        (wasserstein + 10 * gp_const).backward()

# %% [markdown]
# ## 4 · R1 on real images, and lazy regularisation
#
# **Why it matters.** R1 penalises D's gradient on *real* images only, `γ/2 · E‖∇x D(x_real)‖²`, pushing D to be
# flat where the data is. It is computed from the real images' own forward, so `x_real` must require grad (the side
# road on `retain_graph` has an `r1_loss` that adds it with weight 5). StyleGAN2 computes it only every *k*-th minibatch (k = 16) and multiplies it
# by *k*: on average it weighs the same, at a fraction of the cost. `strategies.r1_penalty` is R1 with weight 1;
# in the exercises you write lazy R1 yourself.

# %%
every, gamma = 16, 10.0
lazy_weights = [gamma / 2 * every if step % every == 0 else 0.0 for step in range(32)]
claim("in 32 steps with k = 16, lazy R1 is computed at steps 0 and 16 only",
      [step for step, w in enumerate(lazy_weights) if w] == [0, 16])

def D_grad(weight):                                         # D's gradient from weight · R1 on this batch
    r1 = weight * strategies.r1_penalty(D, x_real)
    return torch.cat([t.flatten() for t in grad(r1, list(D.parameters()), materialize_grads=True)])

lazy_cycle = sum(D_grad(w) for w in lazy_weights[:every] if w)        # the cycle's one due step
every_step = every * D_grad(gamma / 2)                                  # γ/2 · R1 at each of the 16 steps
claim("over a cycle of 16 steps, lazy R1 (γ/2 · 16, once) gives D the same gradient as γ/2 · R1 at every step, "
      "with D held fixed", torch.allclose(lazy_cycle, every_step, rtol=1e-5),
      f"largest gap {(lazy_cycle - every_step).abs().max().item():.1e}")

# %% [markdown]
# Held fixed, the two are equal by linearity alone: the claim above could not have failed, and it says nothing
# about training, where D changes between the due steps. Here D trains for 16 steps (Adam, its loss on real images
# and on noise, plus γ/2 · R1 at every step), and at each step we also take R1's gradient: the lazy estimate is 16
# times the first of them, the quantity it stands for is their sum. Lazy regularisation keeps the penalty's
# average weight, not each step's gradient; StyleGAN2's authors report that this cost their models no quality.

# %%
D_live = copy.deepcopy(D)
opt_live = torch.optim.Adam(D_live.parameters(), lr=2e-4, betas=(0.5, 0.999))
x_noise = torch.rand_like(x_real) * 2 - 1                     # a fixed batch of "fakes": noise in [-1, 1]
r1_grads = []
for step in range(every):
    r1 = gamma / 2 * strategies.r1_penalty(D_live, x_real)
    r1_grads.append(torch.cat([t.flatten() for t in grad(r1, list(D_live.parameters()), retain_graph=True,
                                                          materialize_grads=True)]))
    opt_live.zero_grad()
    (F.softplus(-D_live(x_real)).mean() + F.softplus(D_live(x_noise)).mean() + r1).backward()
    opt_live.step()
summed, lazy_estimate = sum(r1_grads), every * r1_grads[0]
gap = ((lazy_estimate - summed).norm() / summed.norm()).item()
claim("while D trains, lazy R1's one gradient only estimates the 16 it stands for: they differ", gap > 1e-3,
      f"relative gap {gap:.1%} over 16 Adam steps at lr 2e-4")


# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - `torch.autograd.grad(outputs, inputs)` returns gradients and leaves `.grad` alone. A vector output needs
#   `grad_outputs` (ones for a critic's scores); a second call needs the graph kept.
# - `create_graph=True` records the backward as a graph, so the gradient can be differentiated again. It also
#   keeps the graph (`retain_graph` follows it). A penalty needs it; without it the penalty is a constant that
#   trains nothing and raises nothing (the doctor warns).
# - WGAN-GP: interpolates from a **detached** fake, made a leaf with `requires_grad_(True)`, one `eps` per image;
#   penalty weight 10; 5 critic steps per G step, each on a detached (or `no_grad`) fake.
# - R1 penalises D's gradient on real images; lazy R1 computes it every k steps and multiplies it by k.
# - A penalty cannot backpropagate through a D compiled with an AOTAutograd backend (inductor, the default, or
#   `aot_eager`): AOTAutograd has no double backward. Compute it through the uncompiled module (`._orig_mod`, the
#   same parameters), use `backend="eager"`, or do not compile D.
# - `backward(retain_graph=True)` after a penalty only holds memory. `retain_graph=False` next to
#   `create_graph=True` frees a forward the loss still needs.

# %% [markdown]
# ## Exercises
#
# ### Build it: the gradient penalty of a conditional critic
#
# pix2pix and other image-to-image GANs judge a pair: the critic scores an image `x` given the image it was made
# from, `D(x_cond, x)`. Write `gradient_penalty(D, x_cond, x_real, x_fake, eps)` for batches of images of shape
# `(N, C, H, W)` (the three alike), with one `eps` per image given as a tensor of shape `(N,)`. It returns WGAN-GP's
# penalty on the image alone: the batch mean of `(‖∇x D(x_cond, x_hat)‖₂ − 1)²` at
# `x_hat = eps·x_real + (1 − eps)·x_fake`, where the real and the fake image share their condition. One number, as a
# 0-dim tensor, that trains D and not G (`x_fake` comes straight from G, graph and all). Take the gradient with
# `torch.autograd.grad`, not with `strategies.gradient_penalty`. The checker runs your function on a small
# conditional critic and compares the value and D's gradients with the right penalty's; when the value is wrong, it
# says which mistake gives your number.

# %%
def gradient_penalty(D, x_cond, x_real, x_fake, eps):
    """WGAN-GP's penalty for a conditional critic D(x_cond, x), images (N, C, H, W) and eps of shape (N,): the batch
    mean of (‖∇x D(x_cond, x_hat)‖₂ − 1)² at x_hat = eps·x_real + (1 − eps)·x_fake, as a 0-dim tensor that trains D,
    not G."""
    ### BEGIN SOLUTION
    eps = eps.view(-1, 1, 1, 1)                             # one eps per image, over all its pixels
    x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
    scores = D(x_cond, x_hat)                               # the condition is given: no gradient is taken for it
    g, = torch.autograd.grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    norms = g.flatten(1).norm(2, dim=1)                     # one norm per image
    return ((norms - 1) ** 2).mean()
    ### END SOLUTION

my_answer = gradient_penalty  # SOLUTION: point this at your gradient_penalty

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_gradient_penalty(my_answer)
assert solved, "gradient_penalty: not solved yet, or not right: the lines above say what is missing"


# %% [markdown]
# ### Build it: lazy R1, from scratch
#
# Write `r1_term(D, x_real, step, every, gamma)`: the term to add to D's loss at training step `step`. It is 0 when
# `step % every != 0`, returned without running D. On the other steps it is `gamma / 2 * every` times the batch
# mean of `‖∇x D(x_real)‖²`, the squared norm over all of an image's pixels, with a graph back to D. Compute the
# gradient yourself with `torch.autograd.grad` (not with `strategies.r1_penalty`).

# %%
def r1_term(D, x_real, step, every, gamma):
    """Lazy R1: 0 off the schedule; on steps where step % every == 0, gamma / 2 * every * E‖∇x D(x_real)‖²."""
    ### BEGIN SOLUTION
    if step % every != 0:
        return torch.zeros(())
    x_real = x_real.detach().requires_grad_(True)
    scores = D(x_real)
    g, = torch.autograd.grad(scores, x_real, grad_outputs=torch.ones_like(scores), create_graph=True)
    r1 = g.flatten(1).pow(2).sum(1).mean()
    return gamma / 2 * every * r1
    ### END SOLUTION

my_answer = r1_term  # SOLUTION: point this at your r1_term

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_lazy_r1(my_answer)
assert solved, "lazy_r1: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# ## Going further · The graph of a gradient
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** With `create_graph=True` autograd records the backward pass as a new forward graph. Its
# nodes are the *derivatives* of D's operations: a LeakyReLU's backward becomes a `LeakyReluBackwardBackward0`
# node, and the transposed weights of the backward (`TBackward0`, `MmBackward0`) lead back to D's parameters.
# That is the path a penalty's gradient takes to train D. Here is the penalty of a small critic, drawn from the
# live tensors:

# %%
torch.manual_seed(0)
D_small = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
x_hat = torch.randn(3, 4, requires_grad=True)
scores = D_small(x_hat).squeeze(1)
g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
nodes = sorted({type(fn).__name__ for fn in graphs.walk([penalty])})
claim("the penalty's graph holds the derivative of D's LeakyReLU, and reaches both of D's weights",
      "LeakyReluBackwardBackward0" in nodes and "AccumulateGrad" in nodes
      and all(p_grad is not None for p_grad in grad(penalty, [D_small[0].weight, D_small[2].weight], retain_graph=True)),
      ", ".join(nodes))
graphs.draw({"penalty": penalty}, graphs.param_names(D=D_small),
            title=tr("a gradient penalty's graph (create_graph=True)"))


# %% [markdown]
# ## Going further · `retain_graph` in penalty code: `True`, left out, or `False`
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** Penalty code found online often reads `autograd.grad(..., create_graph=True,
# retain_graph=True)` and then `loss_D.backward(retain_graph=True)`. The first `retain_graph=True` repeats what
# `create_graph=True` already does (section 1). The second keeps every saved tensor of the step alive after it,
# until the graph is dropped, for a second backward that never comes. Deleting either is safe. And writing
# `retain_graph=False` next to `create_graph=True`? In R1-style code (section 4), the penalty's gradient and the
# loss share one forward of D on the real images:

# %%
def r1_loss(**grad_options):
    x_real_leaf = x_real.clone().requires_grad_(True)
    scores_real = D(x_real_leaf)
    g, = grad(scores_real, x_real_leaf, grad_outputs=torch.ones_like(scores_real), create_graph=True, **grad_options)
    return F.softplus(-scores_real).mean() + 5 * g.flatten(1).pow(2).sum(1).mean()   # the loss and R1, weight 5


# %% reveals=["retain_graph=False.{0,60}(breaks|freed|frees)"] tags=["predict"]
prediction = True  # SOLUTION: does r1_loss(retain_graph=False).backward() raise? (True/False)
try:
    r1_loss(retain_graph=False).backward()
    backward_ran = True
except RuntimeError:
    backward_ran = False
check("r1_loss(retain_graph=False).backward() raises", prediction, not backward_ran,
      why="retain_graph=False frees what D's forward on the real images saved as soon as the gradient is taken, and "
          "the loss's backward still needs it.")

# %%
with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    r1_loss(retain_graph=False).backward()


# %% [markdown]
# `retain_graph=False` beside `create_graph=True` freed D's forward on the real images, which the loss needed.
# Leave `retain_graph` out (it then follows `create_graph`), and the same code runs. And the final
# `backward(retain_graph=True)` only keeps memory: after it, the saved tensors are still held.

# %%
def r1_step(retain):
    loss = r1_loss()                                        # retain_graph left out
    D.zero_grad()
    loss.backward(retain_graph=retain)
    return loss, [p.grad.clone() for p in D.parameters()]

(loss_kept, grads_kept), (loss_freed, grads_freed) = r1_step(retain=True), r1_step(retain=False)
claim("the step gives the same gradients with and without backward(retain_graph=True)",
      all(torch.allclose(a, b) for a, b in zip(grads_kept, grads_freed)))
kept, freed = graphs.saved_bytes({"loss": loss_kept}), graphs.saved_bytes({"loss": loss_freed})
claim("but with it, the step's saved tensors stay in memory afterwards", kept > 0 and freed == 0,
      f"{kept / 2**20:.2f} MiB still held vs {freed} bytes")


# %% [markdown]
# ## Going further · `n_critic` critic steps per G step, and the fake batch
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** WGAN-GP takes 5 critic steps for each G step. A loop that makes each critic step's fake
# with `G(z)` and does not detach it fills G's `.grad` five times with the gradient of the *critic's* loss. If
# `opt_G.zero_grad()` is called once at the top of the iteration, G's step then adds its own gradient to those.
# The critic's loss rewards D for scoring fakes low; its gradient on G pushes G the opposite way from G's own
# loss, and there are five of them. A `zero_grad()` right before G's backward throws them away, so G's step is
# right again; what stays is the cost, five backward passes through G for nothing:

# %%
def n_critic_iteration(detach, n_critic=5, zero_grad_before_G=False):
    g, d = copy.deepcopy(G), copy.deepcopy(D)
    opt_G = torch.optim.Adam(g.parameters(), lr=1e-4, betas=(0.0, 0.9))
    opt_D = torch.optim.Adam(d.parameters(), lr=1e-4, betas=(0.0, 0.9))
    torch.manual_seed(1)
    opt_G.zero_grad()
    for _ in range(n_critic):
        x_fake = g(torch.randn(16, g.z_dim))
        loss_D = d(x_fake.detach() if detach else x_fake).mean() - d(x_real).mean()
        opt_D.zero_grad()
        loss_D.backward()
        opt_D.step()
    loss_G = -d(g(torch.randn(16, g.z_dim))).mean()
    if zero_grad_before_G:
        opt_G.zero_grad()
    loss_G.backward()
    return torch.cat([p.grad.flatten() for p in g.parameters()])

right_G, polluted_G = n_critic_iteration(detach=True), n_critic_iteration(detach=False)
cosine = F.cosine_similarity(right_G, polluted_G, dim=0).item()
claim("without detach, G's gradient at its step points away from the right one (negative cosine)", cosine < 0,
      f"cosine {cosine:.2f}")
late_zero_G = n_critic_iteration(detach=False, zero_grad_before_G=True)
claim("with opt_G.zero_grad() right before G's backward, the undetached loop gives G exactly the right gradient",
      torch.equal(late_zero_G, right_G))

# %% [markdown]
# `strategies.wgan_gp` avoids both traps: each call is one critic step on a fake made under `no_grad`, and G
# steps once every `n_critic` calls, counted by `opt_D`'s own step counter (so a resumed run keeps the cadence).

# %%
torch.manual_seed(0)
G8, D8 = Generator(tanh=True), Discriminator()
opt_G8 = torch.optim.Adam(G8.parameters(), lr=1e-4, betas=(0.0, 0.9))
opt_D8 = torch.optim.Adam(D8.parameters(), lr=1e-4, betas=(0.0, 0.9))
steps = {"G": 0, "D": 0}
hooks = [opt_G8.register_step_post_hook(lambda *a: steps.__setitem__("G", steps["G"] + 1)),
         opt_D8.register_step_post_hook(lambda *a: steps.__setitem__("D", steps["D"] + 1))]
noise = lambda n: torch.randn(n, G8.z_dim)
for _ in range(10):
    loss_D, loss_G = strategies.wgan_gp(G8, D8, opt_G8, opt_D8, x_real, noise, n_critic=5)
claim("10 calls of wgan_gp with n_critic=5: D steps 10 times, G twice", steps == {"G": 2, "D": 10}, steps)

# %% [markdown]
# ## Going further · What a penalty costs, measured
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** The penalty needs one more D forward (on `x_hat`) and a backward through the gradient's
# own graph: a double backward. The cost probe of lesson 05 counts passes through G and D with hooks. Here it
# runs the DCGAN-style order and `wgan_gp` on seed 000's models; `wgan_gp`'s counts are averages over its
# 5-call cycle (four critic steps alone, one followed by G's step). Last, why `torch.compile` cannot make a
# penalty cheaper.

# %% tags=["nbval-ignore-output"]
measured = {name: costs.measure(name, *costs.fresh_gan(batch=16), steps=5, warmup=5)
            for name in ("d_first_reuse_fake", "wgan_gp")}
display(Markdown(costs.cost_table_markdown(measured.values())))

# %%
gp_cost = measured["wgan_gp"]
claim("wgan_gp: 3 D forwards per critic step (fake, real, x_hat), and a 4th on every 5th call for G: 3.2 a call",
      gp_cost.D_forward == 3.2, f"{gp_cost.D_forward:g}")
claim("G is backpropagated on 1 call in 5 only (its fakes for D are made under no_grad)", gp_cost.G_backward == 0.2,
      f"{gp_cost.G_backward:g}")
claim("each D parameter gets one gradient accumulation a call: the penalty's and the loss's arrive in one backward",
      gp_cost.D_grad_passes == 1, f"{gp_cost.D_grad_passes:g}")

# %% [markdown]
# What the penalty itself adds to one critic step, on the same batch: the tensors autograd saves (the double
# backward needs the gradient's graph too), and the time of a critic step with and without it.

# %%
G16, D16, x_real16, noise16 = costs.fresh_gan(batch=16)
with torch.no_grad():
    x_fake16 = G16(noise16(16))

def critic_step_loss(gp_weight):
    loss_D = D16(x_fake16).mean() - D16(x_real16).mean()
    return loss_D + gp_weight * strategies.gradient_penalty(D16, x_real16, x_fake16) if gp_weight else loss_D

saved_plain = graphs.saved_bytes({"loss_D": critic_step_loss(0)}, exclude=list(D16.parameters()))
saved_gp = graphs.saved_bytes({"loss_D": critic_step_loss(10)}, exclude=list(D16.parameters()))
claim("with the penalty a critic step saves more than 1.5 times the bytes it saves without",
      saved_gp > 1.5 * saved_plain, f"{saved_plain / 2**20:.2f} MiB without, {saved_gp / 2**20:.2f} MiB with")


# %% tags=["nbval-ignore-output"]
def ms_per_critic_step(gp_weight, repeats=7):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        loss_D = critic_step_loss(gp_weight)
        D16.zero_grad()
        loss_D.backward()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)

ms_per_critic_step(0, repeats=2), ms_per_critic_step(10, repeats=2)          # warm-up
without, with_gp = ms_per_critic_step(0), ms_per_critic_step(10)
print(tr("critic step, median of 7: {without:.1f} ms without the penalty, {with_gp:.1f} ms with it "
         "({ratio:.2f}x), batch 16, torch {version}", without=without, with_gp=with_gp, ratio=with_gp / without,
         version=torch.__version__))

# %% [markdown]
# **A penalty cannot run through AOTAutograd.** The usual way to make a step cheaper is `torch.compile(D)`.
# A compiled module runs its forward and its backward as functions that AOTAutograd made, and a penalty needs the
# backward of that backward. Here is the smallest case, on the small critic of the side road on a gradient's graph, with `backend="aot_eager"`:
# it runs AOTAutograd without generating code, so no C++ compiler is needed (the default backend, inductor, goes
# through the same AOTAutograd). On Colab with Python 3.13.0, each compiled cell also prints torch's warning that
# guards may run slower on that Python release; it changes nothing here (`make check-colab`, docs/setup.md).

# %%
D_compiled = torch.compile(D_small, backend="aot_eager")
x_hat = torch.randn(3, 4, requires_grad=True)
scores = D_compiled(x_hat)
g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
claim("through a compiled D, grad(..., create_graph=True) returns a gradient with a grad_fn", g.grad_fn is not None,
      type(g.grad_fn).__name__)
with expect_error(RuntimeError, "does not currently support double backward"):
    ((g.norm(2, dim=1) - 1) ** 2).mean().backward()

D_dynamo_only = torch.compile(D_small, backend="eager")   # Dynamo captures the graph; nothing is compiled ahead
scores = D_dynamo_only(x_hat)
g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
((g.norm(2, dim=1) - 1) ** 2).mean().backward()
claim("with backend=\"eager\", which skips AOTAutograd, the penalty's backward runs and reaches D's weights",
      all(w.grad is not None and bool(w.grad.abs().sum() > 0) for w in (D_small[0].weight, D_small[2].weight)))
D_small.zero_grad(set_to_none=True)

# %% [markdown]
# The gradient comes back; the error waits for the penalty's backward. `backend="eager"` runs it: it hands the
# captured graph back to PyTorch to run as it is, with no AOTAutograd in between. The trainer knows: `TrainConfig` refuses
# `fast=True` (compile G and D) with `wgan_gp`. What does run is the critic's loss through the compiled D and the
# penalty through the module it wraps, `D_compiled._orig_mod`, which holds the same parameters.

# %%
with expect_error(ConfigError, "cannot train wgan_gp"):
    TrainConfig(strategy="wgan_gp", fast=True).validate()

x_fake_small, x_real_small = torch.randn(3, 4), torch.randn(3, 4)

def small_critic_grads(D_loss, D_penalty):
    loss = D_loss(x_fake_small).mean() - D_loss(x_real_small).mean() + 10 * strategies.gradient_penalty(
        D_penalty, x_real_small, x_fake_small, eps=torch.tensor([0.2, 0.5, 0.9]))
    return grad(loss, list(D_small.parameters()))

mixed, eager = small_critic_grads(D_compiled, D_compiled._orig_mod), small_critic_grads(D_small, D_small)
claim("the loss through the compiled D, the penalty through D_compiled._orig_mod: it runs, and D gets the "
      "gradients it gets with no compile at all", all(torch.allclose(a, b, atol=1e-6) for a, b in zip(mixed, eager)))

# %% [markdown] tags=["read-after-exercises"]
# ### What people write, and what it does
#
# | what people write | on today's torch |
# |---|---|
# | `torch.autograd.grad(D(x_hat), x_hat)` with D's one score per image | raises "grad can be implicitly created only for scalar outputs" (section 2) |
# | interpolates made from detached tensors, without `requires_grad_()` | raises "One of the differentiated Tensors does not require grad" (section 2) |
# | the penalty's `autograd.grad` without `create_graph=True` | runs, and the penalty trains nothing: its gradient on D is zero (section 3) |
# | `autograd.grad(..., create_graph=True, retain_graph=True)` | runs; `retain_graph=True` is what `create_graph=True` already implies (side road: `retain_graph`) |
# | `create_graph=True, retain_graph=False` on D's real scores, then the loss on the same scores | raises "Trying to backward through the graph a second time" (side road: `retain_graph`) |
# | `torch.compile(D)`, then a gradient penalty through it | `autograd.grad(..., create_graph=True)` runs; the penalty's backward raises "does not currently support double backward" (side road: the cost) |
# | `n_critic` critic steps on a fake batch that is not detached, `opt_G.zero_grad()` once at the top of the iteration | runs, and G's gradient points the wrong way; with `zero_grad()` right before G's backward it is right, and the critic steps still pay for backward passes through G (side road: `n_critic`) |
