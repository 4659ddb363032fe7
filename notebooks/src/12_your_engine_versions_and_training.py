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
# # Lesson 12 · Your own autograd, continued: versions, leaves, checks and training
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/12_your_engine_versions_and_training.ipynb)
#
# [中文版](zh/12_your_engine_versions_and_training.ipynb) · [Student copy](student/12_your_engine_versions_and_training.ipynb)
#
# **Goal.** Lesson 11's engine saves what each backward needs and frees it; this lesson makes it refuse what torch
# refuses. You write the version count and its check (lesson 03's "is at version 2; expected version 1"), and the
# leaf rule (lesson 01's "a leaf Variable that requires grad is being used in an in-place operation"), each checked
# against torch on the same programs: each of PyTorch's three errors raised exactly where torch raises it, and
# nowhere else. Then you check your gradients the way every engine is checked, with finite differences you write,
# and your engine trains a small network, step for step with torch (its losses within a relative 1e-4 of torch's).
# After the exercises, three side roads: lesson 03's cases on both engines, your own graph drawn with what each node
# kept, and seeds 001's and 000's failing steps raising torch's two errors on your engine. It needs lesson 11 and
# lessons 01 to 03; it is a double slot.
#
# **Material.** Lesson 11's engine, shaped like Andrej Karpathy's micrograd, which has no version counter. Seed 001
# (an untitled post on leaf nodes, `retain_graph` and `detach` in GAN training) and seed 000 (聖光之護,
# “解决PyTorch GAN训练中的梯度计算错误:inplace操作与计算图分离”, php中文网, 2025-10-02) give the failing steps; the
# seeds are cited in [the instructor notes](README.md#the-seeds).

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
# **The engine so far.** `Value` is lesson 11's engine as you left it: `save`, `*`, `exp`, `@` and `backward` are
# written (here, the package's answers to lesson 11, so that this lesson starts from a finished step 2); `unpack` and
# `_inplace` are still lesson 11's placeholders, which check and count nothing; `tanh` is not written yet. `method`
# attaches a function you write to the class, as in lesson 11, and the build steps go on from lesson 11's two: steps
# 3 to 6.

# %%
import re
import matplotlib.pyplot as plt
from gan_lessons import exercises
from gan_lessons.exercises import lesson11
from gan_lessons.exercises.lesson11 import LEAF_IN_PLACE, draw_engine, torch_fit, training_problem

Value = lesson11.engine_after_lesson_11()


def method(function):
    """Attach a function to Value as a method: each step of this lesson adds some."""
    setattr(Value, function.__name__, function)
    return function


# %% [markdown]
# ## 1 · Version counters
#
# **Why it matters.** A saved value is a reference, not a copy, so an in-place change after the forward changes what
# backward reads. Your `save` keeps, beside each saved value, the version it had; but nothing counts in-place changes
# yet (the placeholder `_inplace` changes the data and nothing else), and the placeholder `unpack` compares nothing. A
# counter nobody keeps or compares is lesson 03's `.data`: lesson 03's `y = a.exp()` then `y.mul_(2)` on an engine
# without the check gives a wrong gradient, silently, where torch raises its version error:

# %%
class Unchecked(Value):
    def unpack(self):                     # the placeholder: the saved tensors, nothing checked
        return {name: value.data for name, (value, _) in self._saved.items()}


a = Unchecked(torch.ones(3), requires_grad=True)
y = a.exp()
with Unchecked.no_grad():
    y.mul_(2)
y.sum().backward()
right = torch.full((3,), torch.e)         # d/da exp(a) at a = 1: a change under no_grad is no part of the function
claim("no error, and a gradient of 2e where the right one is e: mul_ doubled the output exp had kept",
      torch.allclose(a.grad, 2 * right), f"{rounded(a.grad)} vs {rounded(right)}")

a_t = torch.ones(3, requires_grad=True)
y_t = a_t.exp()
with torch.no_grad():
    y_t.mul_(2)
with expect_error(RuntimeError, "is at version 1; expected version 0"):
    y_t.sum().backward()

# %% [markdown]
# Torch keeps, beside each saved value, the version it had when saved, and backward compares it with the value's
# version then. **Predict, then check** what that comparison makes of a change that is undone.

# %% reveals=["counts changes, not values", "changed back: y\\.sum\\(\\)\\.backward\\(\\) -> 'error'"] tags=["predict"]
prediction = "error"  # SOLUTION: y = a * b (b constant), then b.add_(1) and b.add_(-1): b holds its old values again. What does y.sum().backward() do: "runs" or "error"?
a, b = torch.randn(3, requires_grad=True), torch.randn(3)
y = a * b
b.add_(1)
b.add_(-1)
try:
    y.sum().backward()
    versions = None
except RuntimeError as error:
    versions = re.search(r"is at version \d+; expected version \d+", str(error))[0]
check("b changed in place and changed back: y.sum().backward()", prediction, "error" if versions else "runs",
      why=f"the version counts changes, not values: two in-place ops took b from version 0 to 2, and the check "
          f"compares versions only ({versions}).")


# %% [markdown]
# ### Build it, step 3: `_inplace` counts, `unpack` checks
#
# Two methods. `_inplace(op, other)` changes `self.data` with `op(self.data, self._value(other).data)`, as the
# placeholder does, and counts the change: every in-place change moves the value's version up by one. `unpack()`
# returns the saved tensors by name (each entry of `self._saved` is `(value, its version when saved)`), and when a
# value's version moved since it was saved it raises torch's error with what torch's message carries, the value's
# type and shape and both versions:
# `one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor
# [3, 3]], is at version 1; expected version 0 instead.` (`value.data.type()` is `torch.FloatTensor`). The checker
# runs 77 programs: step 2's again, and changes of saved and unsaved values before the forward, after it, after the
# backward, between two backwards, back to the old values, and to the same values; and a version error caught, then
# a second backward through the same graph.

# %%
@method
def _inplace(self, op, other):
    """Change self.data in place with op and other, and count the change."""
    ### BEGIN SOLUTION
    op(self.data, self._value(other).data)
    self._version += 1
    return self
    ### END SOLUTION


@method
def unpack(self):
    """The saved tensors by name; torch's version error if one changed in place since it was saved."""
    ### BEGIN SOLUTION
    tensors = {}
    for name, (value, version) in self._saved.items():
        if value._version != version:
            raise RuntimeError(f"one of the variables needed for gradient computation has been modified by an "
                               f"inplace operation: [{value.data.type()} {list(value.data.shape)}], is at version "
                               f"{value._version}; expected version {version} instead.")
        tensors[name] = value.data
    return tensors
    ### END SOLUTION


# %% tags=["test"]
solved_versions = exercises.check_versions(Value)
assert solved_versions, "versions: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# ## 2 · A leaf that requires grad
#
# **Why it matters.** A leaf that requires grad is a parameter: its `.grad` is what an optimizer reads, and an
# in-place change of it in grad mode would have to go into the graph as an operation on a value that has no history.
# Torch refuses it (lesson 01), and allows it under `no_grad`, which is how `optimizer.step()` updates parameters.
# **Predict, then check** whether the refusal depends on a backward having run.

# %% reveals=["a\\.add_\\(1\\) after backward -> 'error'", "not about (time|when)"] tags=["predict"]
prediction = "error"  # SOLUTION: a leaf a that requires grad; loss.backward() has run. What does a.add_(1) outside no_grad do: "moves" (a changes) or "error"?
a = torch.randn(3, requires_grad=True)
(a * a).sum().backward()
try:
    a.add_(1)
    refused = False
except RuntimeError:
    refused = True
check("a.add_(1) after backward", prediction, "error" if refused else "moves",
      why="the rule is about what a is (a leaf that requires grad) and whether grad mode is on, not about time: "
          "after backward it is still a parameter; update it under no_grad.")


# %% [markdown]
# ### Build it, step 4: `_inplace` refuses a leaf that requires grad
#
# Write `_inplace` once more. It still changes the data and counts the change, as in step 3; first, it refuses an
# in-place change of a leaf that requires grad while grad mode is on (`Value.grad_enabled`), with torch's words:
# `RuntimeError(LEAF_IN_PLACE)`. Everything else goes on: under `Value.no_grad()`, values that require no
# grad, and values an operation made. The checker runs 97 programs: step 2's and step 3's again, in-place changes of
# leaves before the forward, after it and after the backward, and in-place changes, in grad mode, of values an
# operation made.

# %%
@method
def _inplace(self, op, other):
    """Change self.data in place with op and other, counting the change; refuse a leaf that requires grad."""
    ### BEGIN SOLUTION
    if self.is_leaf and self.requires_grad and self.grad_enabled:
        raise RuntimeError(LEAF_IN_PLACE)
    op(self.data, self._value(other).data)
    self._version += 1
    return self
    ### END SOLUTION


# %% tags=["test"]
solved_leaf_rule = exercises.check_leaf_rule(Value)
assert solved_leaf_rule, "leaf_rule: not solved yet, or not right: the lines above say what is missing"

# %%
engine = exercises.engine_or_reference(Value, solved_versions, solved_leaf_rule)
p = engine(torch.ones(3), requires_grad=True)
with expect_error(RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation"):
    p.add_(1)
with engine.no_grad():
    p.add_(1)                             # an optimizer's update
claim("under no_grad the update goes through and counts as one change", p._version == 1 and p.data[0].item() == 2.0,
      f"version {p._version}, data {rounded(p.data)}")

# %% [markdown]
# ## 3 · Checking a gradient without autograd
#
# **Why it matters.** So far your gradients were compared with torch's. An engine with nothing to compare with (torch
# itself, while it was being written) is checked against the definition of a derivative, which needs no graph: move
# one entry of the input a little, `eps`, up and down, and divide how much the output moved by how far the input
# moved. `torch.autograd.gradcheck` does this for the operations torch ships. The answer carries an error that shrinks
# as `eps` shrinks, until rounding takes over.
#
# **Predict, then check.** That difference for `exp` at 1, in float64, against the exact derivative `e`.

# %% reveals=["eps squared", "divided by -> 100"] tags=["predict"]
prediction = 100  # SOLUTION: (exp(1 + eps) - exp(1 - eps)) / (2 eps) against e, in float64: going from eps = 1e-2 to 1e-3 divides its error by about how much? (10 or 100)
x = torch.tensor(1.0, dtype=torch.float64)
central = {eps: ((x + eps).exp() - (x - eps).exp()) / (2 * eps) for eps in (1e-2, 1e-3)}
one_sided = {eps: ((x + eps).exp() - x.exp()) / eps for eps in (1e-2, 1e-3)}
error = {eps: (central[eps] - x.exp()).abs().item() for eps in central}
error_one_sided = {eps: (one_sided[eps] - x.exp()).abs().item() for eps in one_sided}
check("the central difference's error, going from eps 1e-2 to 1e-3, is divided by", prediction,
      int(round(error[1e-2] / error[1e-3], -1)),
      why=f"the step up and the step down cancel the error term in eps and leave one in eps squared: "
          f"{error[1e-2]:.1e}, then {error[1e-3]:.1e}. A one-sided difference keeps the term in eps: "
          f"{error_one_sided[1e-2]:.1e}, then {error_one_sided[1e-3]:.1e}.")

# %%
ratio_one_sided = error_one_sided[1e-2] / error_one_sided[1e-3]
claim("a one-sided difference (f(x + eps) - f(x)) / eps gets only about 10 times better", 8 < ratio_one_sided < 12,
      f"{ratio_one_sided:.1f}")


# %% [markdown]
# ### Build it, step 5: a finite-difference gradient
#
# Write `numerical_grad(f, x, eps=1e-3)`: `f` takes a tensor shaped like `x` and returns a number, and the answer is
# a tensor shaped like `x` whose every entry is the central difference of `f` for that entry of `x` alone, the others
# left where they are. Whatever your function does to `x` on the way, the caller's `x` comes back as it was. The
# checker runs it on three functions of tensors of shapes [3], [3, 4] and [] in float64, against their exact
# gradients.

# %%
def numerical_grad(f, x, eps=1e-3):
    """The gradient of f at x by central differences: a tensor shaped like x."""
    ### BEGIN SOLUTION
    grad = torch.zeros_like(x)
    flat, out = x.view(-1), grad.view(-1)   # views: writing flat[i] moves x's entry i
    for i in range(flat.numel()):
        old = flat[i].item()
        flat[i] = old + eps
        up = f(x)
        flat[i] = old - eps
        down = f(x)
        flat[i] = old                       # put it back
        out[i] = (up - down) / (2 * eps)
    return grad
    ### END SOLUTION


# %% tags=["test"]
solved_numerical = exercises.check_numerical_grad(numerical_grad)
assert solved_numerical, "numerical_grad: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# Now your engine's backward against your finite differences: the gradient of a small network's loss with respect to
# its first weight matrix (32 entries), for three values of `eps`. The engine computes in float32, where a number
# carries about 7 digits, so rounding, divided by `eps`, grows as `eps` shrinks, while the error of the difference
# itself shrinks.

# %% tags=["nbval-ignore-output"]
engine = exercises.engine_or_reference(Value, solved_versions, solved_leaf_rule)
gradient = lesson11.numerical_grad_or_finished(numerical_grad, solved_numerical)
problem = training_problem()
x, y = engine(problem.x), engine(problem.y)


def loss_of(W1_data, requires_grad=False):
    """A network with exp as its nonlinearity, its loss and its W1, with W1 given."""
    W1 = engine(W1_data, requires_grad=requires_grad)
    b1, W2, b2 = [engine(p) for p in problem.params[1:]]
    pred = (x @ W1 + b1).exp() @ W2 + b2
    return ((pred - y) * (pred - y)).sum() * (1 / 64), W1


loss, W1 = loss_of(problem.params[0], requires_grad=True)
loss.backward()
differences = {}
for eps in (1e-1, 1e-2, 1e-4):
    numerical = gradient(lambda data: loss_of(data)[0].data.item(), problem.params[0].clone(), eps)
    differences[eps] = ((numerical - W1.grad).abs().max() / W1.grad.abs().max()).item()
    print(tr("eps {eps:g}: the largest difference is {difference:.0e} of the largest gradient entry",
             eps=eps, difference=differences[eps]))
claim("with eps 1e-2, backward and finite differences agree within 1e-3 of the largest entry",
      differences[1e-2] < 1e-3)
claim("in float32, eps 1e-2 agrees better than a larger eps (the difference's own error) and than a smaller one "
      "(rounding, divided by eps)", differences[1e-2] < min(differences[1e-1], differences[1e-4]))


# %% [markdown]
# ## 4 · Your engine trains a network
#
# **Why it matters.** micrograd ends by training a small network on its engine, and so does this lesson. A training
# loop is where the three rules meet: every step runs a new forward and one backward, which frees what it used, and
# the update is an in-place change of leaves that require grad, under `no_grad`, after the backward that needed their
# old values. The network: two inputs, 16 tanh units, one output, fit to a smooth function of the inputs by plain
# gradient descent on the mean squared error.
#
# ### Build it, step 6: `tanh`, and the training loop
#
# `a.tanh()` first: its derivative is `1 - tanh(a)²`; keep what that reads, and only that (torch's `TanhBackward0` is
# what it is checked against). Then `fit(params, x, y, steps, lr)`: `params` is `[W1, b1, W2, b2]`, Values that
# require grad (W1 is [2, 16], b1 [16], W2 [16, 1], b2 [1]); `x` is [64, 2] and `y` [64, 1]. Each step computes
# `pred = tanh(x @ W1 + b1) @ W2 + b2` and the loss, the mean of `(pred - y)²` over the 64 samples (your engine has no
# division: multiply by `1 / 64`; `**` takes whole powers), runs backward, and moves each parameter by `-lr` times its gradient. It returns
# the loss of every step, as numbers. The checker runs your loop twice (40 steps at lr 0.1, 8 at lr 0.3) from the
# same start as the same loop on torch, and compares the losses step by step.

# %%
@method
def tanh(self):
    """tanh(self), element by element."""
    ### BEGIN SOLUTION
    out = self._result(self.data.tanh(), (self,))
    out.save("result", out)               # 1 - tanh**2 reads only the output

    def backward(grad, saved):
        return (grad * (1 - saved["result"] ** 2),)
    out._backward = backward
    return out
    ### END SOLUTION


def fit(params, x, y, steps, lr):
    """Gradient descent on the mean squared error of a tanh network: the loss of every step."""
    ### BEGIN SOLUTION
    W1, b1, W2, b2 = params
    losses = []
    for _step in range(steps):
        pred = (x @ W1 + b1).tanh() @ W2 + b2
        loss = ((pred - y) * (pred - y)).sum() * (1 / len(y.data))
        loss.backward()
        with Value.no_grad():
            for p in params:
                p.add_(p.grad * -lr)      # an optimizer's step: in place, under no_grad
                p.grad = None             # zero_grad
        losses.append(loss.data.item())
    return losses
    ### END SOLUTION


# %% tags=["test"]
solved_training = exercises.check_training(Value, fit)
assert solved_training, "training: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# 300 steps at lr 0.1, on your engine and on torch, from the same start:

# %%
engine = exercises.engine_or_reference(Value, solved_versions, solved_leaf_rule, solved_training)
train = lesson11.fit_or_finished(fit, solved_training)
problem = training_problem()
ours = train([engine(p, requires_grad=True) for p in problem.params], engine(problem.x), engine(problem.y), 300, 0.1)
theirs = torch_fit(problem, 300, 0.1)
plt.figure(figsize=(6, 2.6))
plt.semilogy(theirs, label="torch", lw=5, alpha=0.35)
plt.semilogy(ours, label=tr("your engine"), lw=1)
plt.xlabel(tr("step"))
plt.ylabel(tr("mean squared error"))
plt.legend()
plt.show()
print(tr("loss {start:.3f} at the start, {end:.4f} after 300 steps", start=ours[0], end=ours[-1]))
apart = [k for k, (mine, torchs) in enumerate(zip(ours, theirs)) if abs(mine - torchs) > 1e-4 * abs(torchs) + 1e-6]
claim("the loss fell more than 10 times in 300 steps, and is torch's at every step (within 1e-4)",
      ours[-1] < ours[0] / 10 and not apart, f"first step apart: {apart[0]}" if apart else None)

# %% [markdown]
# The same loop on torch is `torch_fit`, the reference the checker used: `loss.backward()`, then under `no_grad` a step
# of each parameter and its `.grad` set to `None`, which is what `optimizer.step()` and `optimizer.zero_grad()` do for
# plain SGD. Nothing in it is GAN-specific; what lessons 02 to 05 add is two such loops sharing one graph.

# %% [markdown] tags=["read-after-exercises"]
# | what your engine does | what torch does | the error when it is missed |
# |---|---|---|
# | frees what a node saved after its backward, unless `retain_graph=True` (lesson 11) | the same | "Trying to backward through the graph a second time" |
# | keeps each saved value's version, compares it in backward | the same, through the tensor's version counter | "... modified by an inplace operation: [...], is at version N; expected version M instead" |
# | refuses an in-place change of a leaf that requires grad outside `no_grad` | the same | "a leaf Variable that requires grad is being used in an in-place operation." |
# | an in-place change, in grad mode, of a value an operation made: allowed, not recorded | allowed, recorded as a node (the tensor's history moves onto it) | this engine's limit: its backward does not see such a change |
# | `tanh` keeps its output | the same (`_saved_result`) | none: a wrong gradient, or memory kept for nothing |
# | checked against central differences | `torch.autograd.gradcheck` | a wrong formula in a backward, found without torch |

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - Each saved value is kept with its version; backward compares versions, not values, so a change that is undone
#   still raises, and a change before the value was saved does not.
# - A leaf that requires grad changes in place only under `no_grad`, before or after any backward; a value an
#   operation made is no leaf.
# - Central differences check a backward without any other engine; in float32, an `eps` too small loses to rounding.
# - Seeds 001 and 000 fail on your engine as on torch: a freed node without `retain_graph`, a stale saved weight with
#   it. And a training loop that runs forward, backward, then the update under `no_grad`, trains a network on your
#   engine exactly as on torch.

# %% [markdown]
# ## Exercises
#
# The four build steps above are this lesson's exercises; each has its checker in its section. To go further (not
# checked):
#
# - add `relu` and an in-place `relu_` of your own, and run lesson 03's `Tanh` then `ReLU(inplace=True)` case on your
#   engine: which saved value goes stale?
# - make a view share its base's version counter (store the counter in a one-element list both hold), as `W.T` shares
#   `W`'s in torch, and check that a step on `W` makes a saved `W.T` stale;
# - give `backward` an `inputs=` argument, as `torch.autograd.backward` has, that fills `.grad` only for those leaves,
#   and check with your `numerical_grad` that the gradients it does fill are unchanged.

# %% [markdown]
# ## Going further · Lesson 03's three cases, on both engines
#
# Lesson 03's three cases on both: `exp`'s kept output changed, `a * b`'s unsaved `a` changed (the way a step changes
# a parameter), and its saved `b` changed.

# %%
engine = exercises.engine_or_reference(Value, solved_versions)
programs = {"y = a.exp(); y.mul_(2)": "a = leaf([3], requires_grad=True)\ny = a.exp()\nwith no_grad():\n"
                                      "    y.mul_(2)\ny.sum().backward()",
            "y = a * b; a.add_(10)": "a = leaf([3], requires_grad=True)\nb = leaf([3])\ny = a * b\nwith no_grad():\n"
                                     "    a.add_(10)\ny.sum().backward()",
            "y = a * b; b.add_(10)": "a = leaf([3], requires_grad=True)\nb = leaf([3])\ny = a * b\nb.add_(10)\n"
                                     "y.sum().backward()"}
agree = []
for what, program in programs.items():
    theirs, ours = lesson11.run(program, torch), lesson11.run(program, engine)
    print(tr("{what:<24} torch: {outcome}", what=what,
             outcome=theirs.message.split('. Hint')[0] if theirs.kind else tr("no error")))
    print(tr("{what:<24} ours:  {outcome}", what="", outcome=ours.message or tr("no error")))
    agree.append(theirs.kind == ours.kind and lesson11.version_parts(theirs.message) == lesson11.version_parts(ours.message)
                 and (theirs.kind is not None or torch.equal(theirs.grads["a"], ours.grads["a"])))
claim("the same outcome from both, the same shapes and versions in the messages", all(agree))

# %% [markdown]
# Torch's message also names the operation that made the saved value (`which is output 0 of Exp`) when it is not a
# leaf; ours names only what the checker compares. Both compare versions, never values.

# %% [markdown]
# ## Going further · Your graph, drawn
#
# **Why it matters.** Lesson 02 drew torch's graph with each saved tensor alive, freed or stale. `draw_engine` draws
# your engine's graph the same way, reading only what your `Value`s hold: `parents`, what `_saved` keeps and at which
# version, and `None` where backward freed it.
#
# **Predict, then check.** `loss = ((a * b).exp() * b).sum()` with only `a` requiring grad, then
# `loss.backward(retain_graph=True)`, then `b.add_(1)` under `no_grad`.

# %% reveals=["b is kept twice", "marked stale after b\\.add_\\(1\\) -> 2"] tags=["predict"]
prediction = 2  # SOLUTION: after that b.add_(1), how many saved values will the drawing mark stale?
engine = exercises.engine_or_reference(Value, solved_versions, solved_leaf_rule)
a, b = engine(torch.ones(3), requires_grad=True), engine(torch.full((3,), 2.0))
loss = ((a * b).exp() * b).sum()
loss.backward(retain_graph=True)
with engine.no_grad():
    b.add_(1)
drawn = draw_engine({"loss": loss}, a=a, b=b)
check("saved values marked stale after b.add_(1)", prediction, sum(s.state == "stale" for s in drawn.saved),
      why="b is kept twice: by the first mul, for a's gradient, and by the second, for the gradient of exp's output, "
          "which requires grad. One change makes both stale; exp's output, untouched, stays alive.")
drawn

# %% [markdown]
# The same expression again, after a backward without `retain_graph`:

# %%
loss = ((a * b).exp() * b).sum()
loss.backward()
drawn = draw_engine({"loss": loss}, a=a, b=b)
claim("after a backward without retain_graph, each of the three nodes that saved something shows freed",
      [s.state for s in drawn.saved] == ["freed"] * 3)
drawn

# %% [markdown]
# ## Going further · Seeds 001 and 000, through your engine
#
# **Why it matters.** Lessons 02 and 03 ran the seeds' failing steps on torch. The same steps, written once and run on
# torch and on your engine, show whether the mechanism you built is the one behind those errors. They are scaled to
# the engine's operations: a linear layer is `x @ W + b` with `W` stored as `[in, out]` (the transpose `nn.Linear`
# saves), initialised in place as `nn.Linear` does (so a parameter starts at version 1), the optimizer is an SGD step
# under `no_grad`, seed 000's sigmoid is `exp` (both keep their output), and its losses are sums (the errors depend
# only on what the two losses share and what was saved, not on the loss).

# %%
engine = exercises.engine_or_reference(Value, solved_versions, solved_leaf_rule)


def backends():
    """(name, leaf, no_grad) for torch and for the engine: the seeds' steps are written once for both."""
    return [("torch", lambda data, rg=False: data.clone().requires_grad_(rg), torch.no_grad),
            ("ours", lambda data, rg=False: engine(data, requires_grad=rg), engine.no_grad)]


def shown_as(name):
    """A backend's name as printed: torch, or ours (your engine)."""
    return name if name == "torch" else tr("ours")


def linear(leaf, no_grad, n_in, n_out):
    """A linear layer's parameters, W [in, out] and b [out], initialised in place as nn.Linear does."""
    W, b = leaf(torch.randn(n_in, n_out), True), leaf(torch.randn(n_out), True)
    with no_grad():
        W.mul_(n_in ** -0.5)
        b.mul_(n_in ** -0.5)
    return W, b


def sgd_step(params, no_grad, lr=0.1):
    with no_grad():
        for p in params:
            p.add_(p.grad * -lr)


def seed001(leaf, no_grad, retain_graph=False):
    """Seed 001's G/D toy: lossD's backward, optimD's step, then lossG, which shares d = D(g)."""
    torch.manual_seed(0)
    (G_W, G_b), (D_W, D_b) = linear(leaf, no_grad, 2, 2), linear(leaf, no_grad, 2, 2)
    t = leaf(torch.tensor([[1., 2.]]), True)
    g = t @ G_W + G_b
    d = g @ D_W + D_b
    lossD = d.sum()
    lossD.backward(retain_graph=retain_graph)
    sgd_step([D_W, D_b], no_grad)
    lossG = (g + d).sum()
    lossG.backward()


def seed000(leaf, no_grad, retain_graph=False):
    """Seed 000's loss_nonsaturating and its step: d_loss's backward, d_optimizer's step, then g_loss."""
    torch.manual_seed(0)
    G = [linear(leaf, no_grad, 64, 784)]
    D = [linear(leaf, no_grad, 784, 512), linear(leaf, no_grad, 512, 1)]   # D's last layer: [512, 1]

    def forward(layers, x):
        for W, b in layers:
            x = x @ W + b
        return x
    z, x_real = leaf(torch.randn(8, 64)), leaf(torch.rand(8, 784) * 2 - 1)
    dgz = forward(D, forward(G, z)).exp()            # the seed: F.sigmoid(d(gz))
    dx = forward(D, x_real)
    g_loss, d_loss = dgz.sum(), (dx + dgz).sum()
    d_loss.backward(retain_graph=retain_graph)
    sgd_step([p for layer in D for p in layer], no_grad)
    g_loss.backward()


# %%
for name, leaf, no_grad in backends():
    print(tr("seed 001 on {name}:", name=shown_as(name)))
    with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
        seed001(leaf, no_grad)

# %%
messages = {}
for name, leaf, no_grad in backends():
    print(tr("seed 001 with retain_graph=True on {name}:", name=shown_as(name)))
    with expect_error(RuntimeError, r"\[2, 2\]\],? .*is at version 2; expected version 1"):
        try:
            seed001(leaf, no_grad, retain_graph=True)
        except RuntimeError as error:
            messages[name] = str(error)
            raise
claim("the same saved value, [2, 2], at the same versions, 2 and 1, as lesson 03's seed 001 on nn.Linear",
      lesson11.version_parts(messages["torch"]) == lesson11.version_parts(messages["ours"])
      == ("torch.FloatTensor [2, 2]", "2", "1"))

# %%
for name, leaf, no_grad in backends():
    print(tr("seed 000 on {name}:", name=shown_as(name)))
    with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
        seed000(leaf, no_grad)

# %%
messages = {}
for name, leaf, no_grad in backends():
    print(tr("seed 000 with retain_graph=True on {name}:", name=shown_as(name)))
    with expect_error(RuntimeError, r"\[512, 1\]\],? .*is at version 2; expected version 1"):
        try:
            seed000(leaf, no_grad, retain_graph=True)
        except RuntimeError as error:
            messages[name] = str(error)
            raise
claim("D's last weight, [512, 1], at version 2 where 1 was saved, from both: seed 000's own error",
      lesson11.version_parts(messages["torch"]) == lesson11.version_parts(messages["ours"])
      == ("torch.FloatTensor [512, 1]", "2", "1"))

# %% [markdown]
# Without `retain_graph`, d_loss's backward frees what `dgz`'s nodes kept, and G's backward needs them: the first
# error. With it, the values are kept, but the step changes D's weights in place and the kept `[512, 1]` weight is one
# version behind: the second. The mechanism you built, backward's freeing in lesson 11 and the version check in
# section 1, and nothing more, is what both errors are.
