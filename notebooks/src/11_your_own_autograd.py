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
# # Lesson 11 · Your own autograd
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/11_your_own_autograd.ipynb)
#
# [中文版](zh/11_your_own_autograd.ipynb) · [Student copy](student/11_your_own_autograd.ipynb)
#
# **Goal.** Build the core of a reverse-mode engine of your own, shaped like micrograd, that does what lesson 02 took
# apart in PyTorch: each operation saves what its backward needs, and only that, and backward frees it afterwards.
# You write the parts that matter: what `*`, `exp` and `@` keep, and the backward pass, which runs each node once,
# adds up the gradients of a value used twice, and raises PyTorch's "Trying to backward through the graph a second
# time" exactly where torch raises it, and nowhere else. Each build step is checked against torch on the same
# programs: what torch's nodes keep, gradients on random expressions, and backward called twice. Lesson 12 goes on
# with this engine: version counters, the leaf rule, a gradient check, the seeds' failing steps and training. This
# lesson needs only lessons 01 to 03, and can be taken right after lesson 03; it is a double slot.
#
# **Material.** The engine is shaped like Andrej Karpathy's micrograd (a `Value` that knows its parents and a
# `_backward`), which has no saved values to free and no version counter; PyTorch's own nodes (`grad_fn._saved_self`,
# `_saved_other`, `_saved_result`, `_saved_mat2`) and messages are what it is checked against.

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
import re
from contextlib import contextmanager
import matplotlib.pyplot as plt
from gan_lessons import exercises
from gan_lessons.exercises import lesson11
from gan_lessons.exercises.lesson11 import SECOND_TIME, draw_engine, torch_fit, training_problem
from gan_lessons.lesson import headline


def saved_by_torch(y):
    """Every tensor torch's nodes behind y keep for backward: (node, attribute, shape), read from grad_fn._saved_*."""
    found, todo, seen = [], [y.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in dir(node):
            if name.startswith("_saved_") and isinstance(getattr(node, name), torch.Tensor):
                found.append((type(node).__name__, name, list(getattr(node, name).shape)))
        todo += [fn for fn, _ in node.next_functions]
    return sorted(found)


# %% [markdown]
# ## 1 · What each operation saves
#
# **Why it matters.** Backward runs after the forward is over, so every value a derivative reads must be kept from
# the forward: too little and the gradient cannot be computed, too much and memory grows (lesson 02 weighed it). What
# is kept is also exactly what an in-place change can spoil (lesson 03). Which values a node keeps follows from the
# derivative of its operation and from which of its inputs need a gradient. Torch shows what its nodes keep as
# attributes, `grad_fn._saved_self`, `_saved_other`, `_saved_result` (`None` when not kept).
#
# **Predict, then check.** Three operations in a row, with only `a` requiring grad. Count the tensors torch keeps.

# %% reveals=["three tensors", "exp\\(\\) \\* c -> 3"] tags=["predict"]
prediction = 3  # SOLUTION: y = (a * b).exp() * c, only a requires grad: how many tensors do y's nodes keep for backward?
a = torch.randn(3, requires_grad=True)
b, c = torch.randn(3), torch.randn(3)
y = (a * b).exp() * c
kept = saved_by_torch(y)
check("tensors torch saves for y = (a * b).exp() * c", prediction, len(kept),
      why="b for a's gradient (grad * b), exp's output for exp's own gradient, and c for the gradient through "
          "exp's output: three tensors, and never a itself, since nothing needs a gradient with respect to b or c.")

# %%
for node, attribute, shape in kept:
    print(tr("{node:<14} {attribute:<14} shape {shape}", node=node, attribute=attribute, shape=shape))
claim("torch kept b, exp's output and c, and not a", len(kept) == 3 and
      all(attr in ("_saved_other", "_saved_result") for _, attr, _ in kept))


# %% [markdown]
# **The engine.** A `Value` holds a plain torch tensor `data` that never requires grad: all the autograd is ours.
# An operation makes an output `Value` that knows its `parents` and carries a `_backward(grad, saved)` that turns the
# output's gradient into one gradient per parent, reading the values it needs from `saved` (a dict by name, as torch
# names them). What a node keeps lives in its `_saved` dict: name -> `(value, the version value had when saved)`, and
# `None` once backward has freed it. The class below is the container and its plumbing: `__add__` and `sum` (they
# save nothing, since the gradient of a sum needs no values), `-`, whole powers `**` and the reversed operators
# (written with `+` and `*`), and two placeholders that lesson 12 replaces: `unpack`, which hands backward the saved
# tensors, and `_inplace`, behind `add_` and `mul_`. `method` attaches a function you write to the class, so the
# engine grows step by step.

# %%
class Value:
    """A tensor of our engine. `data` is a plain torch tensor (it never requires grad): the autograd is ours."""
    grad_enabled = True                   # the engine's no_grad switch: `with Value.no_grad():`

    def __init__(self, data, requires_grad=False, parents=()):
        self.data = torch.as_tensor(data, dtype=torch.float32).clone()
        self.requires_grad = requires_grad
        self.parents = parents            # the Values this one was computed from; none for a leaf
        self._backward = None             # (grad, saved tensors by name) -> one gradient per parent, or None
        self._saved = {}                  # what _backward needs: name -> (Value, its version when saved); None once freed
        self._version = 0                 # how many in-place changes this value has had (lesson 12 counts them)
        self.grad = None                  # a leaf's gradient, added up by backward (section 2)

    def __repr__(self):
        return f"Value({self.data.tolist()}, requires_grad={self.requires_grad})"

    @property
    def is_leaf(self):
        return not self.parents

    @classmethod
    @contextmanager
    def no_grad(cls):
        """Within the block, operations build no graph (and, in lesson 12, in-place changes of leaves are allowed)."""
        before, cls.grad_enabled = cls.grad_enabled, False
        try:
            yield
        finally:
            cls.grad_enabled = before

    def _value(self, x):                  # a number or a tensor as a Value that requires no grad
        return x if isinstance(x, Value) else type(self)(x)

    def _result(self, data, parents):
        """An operation's output: it requires grad when an input does (and grad is on), and only then has parents."""
        requires_grad = self.grad_enabled and any(p.requires_grad for p in parents)
        return type(self)(data, requires_grad, parents if requires_grad else ())

    def __add__(self, other):
        other = self._value(other)
        out = self._result(self.data + other.data, (self, other))
        # a broadcast operand gets its gradient summed back to its own shape
        out._backward = lambda grad, saved: (grad.sum_to_size(self.data.shape), grad.sum_to_size(other.data.shape))
        return out

    def sum(self):
        out = self._result(self.data.sum(), (self,))
        out._backward = lambda grad, saved: (grad * torch.ones_like(self.data),)
        return out

    # plumbing, written with + and *: they save what those save
    def __radd__(self, other):
        return self + other

    def __rmul__(self, other):
        return self * other

    def __neg__(self):
        return self * -1.0

    def __sub__(self, other):
        return self + (-self._value(other))

    def __pow__(self, n):                 # a whole power, as products: x ** 2 is x * x
        if not (isinstance(n, int) and n >= 1):
            return NotImplemented
        out = self
        for _k in range(n - 1):
            out = out * self
        return out

    def unpack(self):                     # placeholder (lesson 12): the saved tensors by name, nothing checked
        return {name: value.data for name, (value, _) in self._saved.items()}

    def _inplace(self, op, other):        # placeholder (lesson 12): changes the data, counts nothing
        op(self.data, self._value(other).data)
        return self

    def add_(self, other):
        return self._inplace(torch.Tensor.add_, other)

    def mul_(self, other):
        return self._inplace(torch.Tensor.mul_, other)


def method(function):
    """Attach a function to Value as a method: each step of this lesson adds some."""
    setattr(Value, function.__name__, function)
    return function


# %% [markdown]
# ### Build it, step 1: `save`, `*`, `exp` and `@`
#
# First `out.save(name, value)`, which every operation calls to keep a value for its node's backward: it stores the
# value in `_saved` under `name`, beside the version the value has at that moment (lesson 12 compares it with the
# version at backward time), and keeps nothing on a node that requires no grad (there is no graph to run backward
# through). Then `a * b` (shapes broadcast: `(3, 3) * (3,)`), `a.exp()` and `a @ b` for matrices. Each makes its
# output with `self._result(data, parents)`, keeps what its backward needs with `out.save(...)`, using torch's names
# (`self`, `other`, `result`, `mat2`), and sets `out._backward(grad, saved)`, which returns one gradient per parent,
# in the order of `parents`, `None` for a parent that needs none. Keep only what a gradient that is needed reads. The
# checker runs them on 52 one-operation expressions (every `requires_grad` combination, `a * a`, `a @ a`,
# broadcasting, under `no_grad`, values already changed in place) beside torch, and compares what each saved, by
# identity, the version kept beside it, and the gradients its backward returns.

# %%
@method
def save(self, name, value):
    """Keep `value` for this node's backward, with the version it has now."""
    ### BEGIN SOLUTION
    if self.requires_grad:                # no graph, nothing to keep
        self._saved[name] = (value, value._version)
    ### END SOLUTION


@method
def __mul__(self, other):
    """self * other, element by element."""
    ### BEGIN SOLUTION
    other = self._value(other)
    out = self._result(self.data * other.data, (self, other))
    if self.requires_grad:
        out.save("other", other)          # self's gradient is grad * other
    if other.requires_grad:
        out.save("self", self)

    def backward(grad, saved):
        return ((grad * saved["other"]).sum_to_size(self.data.shape) if "other" in saved else None,
                (grad * saved["self"]).sum_to_size(other.data.shape) if "self" in saved else None)
    out._backward = backward
    return out
    ### END SOLUTION


@method
def exp(self):
    """e ** self, element by element."""
    ### BEGIN SOLUTION
    out = self._result(self.data.exp(), (self,))
    out.save("result", out)               # exp's derivative is exp itself: its own output

    def backward(grad, saved):
        return (grad * saved["result"],)
    out._backward = backward
    return out
    ### END SOLUTION


@method
def __matmul__(self, other):
    """self @ other, for matrices."""
    ### BEGIN SOLUTION
    out = self._result(self.data @ other.data, (self, other))
    if self.requires_grad:
        out.save("mat2", other)           # self's gradient is grad @ other.T
    if other.requires_grad:
        out.save("self", self)            # other's is self.T @ grad

    def backward(grad, saved):
        return (grad @ saved["mat2"].T if "mat2" in saved else None,
                saved["self"].T @ grad if "self" in saved else None)
    out._backward = backward
    return out
    ### END SOLUTION


# %% tags=["test"]
solved_saving = exercises.check_saving(Value)
assert solved_saving, "saving: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# Your engine beside torch's nodes, read from their `_saved_*` attributes (the same values, by identity in yours, by
# value in torch's):

# %%
engine = exercises.engine_or_reference(Value, solved_saving)
rows = []
for ra, rb in [(True, False), (False, True), (True, True)]:
    torch.manual_seed(0)
    a_t, b_t = torch.randn(3, requires_grad=ra), torch.randn(3, requires_grad=rb)
    y_t = a_t * b_t
    a, b = engine(a_t.detach(), requires_grad=ra), engine(b_t.detach(), requires_grad=rb)
    y = a * b
    theirs = sorted(n for n in ("self", "other") if getattr(y_t.grad_fn, f"_saved_{n}") is not None)
    ours = sorted("self" if v is a else "other" for v, _ in y._saved.values())
    same_values = all(torch.equal(getattr(y_t.grad_fn, f"_saved_{n}"), (a if n == "self" else b).data) for n in theirs)
    rows.append((f"a * b, requires_grad {ra!s:<5} {rb!s:<5}", theirs, ours, same_values))
e_t = torch.randn(3, requires_grad=True).exp()
e = engine(torch.randn(3), requires_grad=True).exp()
rows.append(("a.exp()", ["result" if e_t.grad_fn._saved_result is not None else ""],
             ["result" if v is e else "input" for v, _ in e._saved.values()],
             torch.equal(e_t.grad_fn._saved_result, e_t.detach())))
for what, theirs, ours, same_values in rows:
    print(tr("{what:<32} torch keeps {theirs:<20} ours keeps {ours}", what=what, theirs=str(theirs), ours=ours))
claim("your engine keeps what torch's MulBackward0 and ExpBackward0 keep, in every case",
      all(theirs == ours and same_values for _, theirs, ours, same_values in rows))
claim("mul keeps the OTHER operand for an operand's gradient, and exp its output",
      rows[0][1] == ["other"] and rows[1][1] == ["self"] and rows[3][1] == ["result"])

# %% [markdown]
# `a * b` with only `a` requiring grad keeps `b` (called `other`): `a`'s gradient is `grad * b`, and nothing needs
# `a`. Only when both require grad are both kept. `exp` keeps its output, because its derivative is itself.

# %% [markdown]
# ## 2 · Backward, and freeing what it used
#
# **Why it matters.** Backward visits the nodes from the output back, each once all the gradient that reaches it has
# arrived (a topological order), and adds up what reaches a value from each of its uses. Torch then frees what each
# node saved, unless `retain_graph=True`; lesson 02's "Trying to backward through the graph a second time" is a node
# asked for values it no longer has.
#
# **Predict, then check.** Two losses built from the same leaf, each through its own multiplication.

# %% reveals=["share the leaf a and nothing else", "raises after l1\\.backward\\(\\) -> False"] tags=["predict"]
prediction = False  # SOLUTION: l1 = (a * b).sum(), l2 = (a * c).sum(); after l1.backward(), does l2.backward() raise? (True/False)
a = torch.randn(3, requires_grad=True)
b, c = torch.randn(3), torch.randn(3)
l1, l2 = (a * b).sum(), (a * c).sum()
l1.backward()
try:
    l2.backward()
    raised = False
except RuntimeError:
    raised = True
check("l2.backward() raises after l1.backward()", prediction, raised,
      why="the two losses share the leaf a and nothing else: each mul is a node of its own, and l1's backward freed "
          "only what l1's nodes saved. Only a second backward through a node that saved something raises.")


# %% [markdown]
# ### Build it, step 2: `backward`
#
# Write `loss.backward(retain_graph=False)`: start from a gradient of ones, run each node's `_backward` once all the
# gradient from every use of it has arrived, with the tensors `node.unpack()` returns, and add up the gradients of a
# value used more than once. A leaf that requires grad adds its gradient to `.grad` (a second backward adds to the
# first, as in torch); other values keep none. Then free each node's saved values (`node._saved = None`) unless
# `retain_graph=True`, and when a backward reaches a node whose saved values are gone, raise torch's error:
# `RuntimeError(SECOND_TIME)`. Mind the nodes that saved nothing. The checker runs 46 programs on torch and on
# your engine: 24 random expressions (gradients compared) and programs that call backward twice, with and without
# `retain_graph`, and two losses that share nodes.

# %%
@method
def backward(self, retain_graph=False):
    """Reverse mode from this Value (a scalar): every leaf that requires grad gets its gradient added to .grad."""
    ### BEGIN SOLUTION
    order, seen = [], set()

    def visit(v):                         # depth first: each value after every value it was computed from
        if v not in seen:
            seen.add(v)
            for p in v.parents:
                visit(p)
            order.append(v)
    visit(self)
    grads = {self: torch.ones_like(self.data)}
    for v in reversed(order):             # from the output back
        grad = grads.pop(v, None)
        if grad is None:                  # a value that needs no gradient
            continue
        if v.is_leaf:
            v.grad = grad if v.grad is None else v.grad + grad
            continue
        if v._saved is None:
            raise RuntimeError(SECOND_TIME)
        for p, g in zip(v.parents, v._backward(grad, v.unpack())):
            if p.requires_grad:
                grads[p] = grads[p] + g if p in grads else g
        if v._saved and not retain_graph:
            v._saved = None               # freed; a node that saved nothing has nothing to miss
    ### END SOLUTION


# %% tags=["test"]
solved_freeing = exercises.check_freeing(Value)
assert solved_freeing, "freeing: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# Lesson 02's first two cases, on torch and on your engine: `(x * 2).sum()` and `(x + 1).sum()`, backward twice.

# %%
engine = exercises.engine_or_reference(Value, solved_saving, solved_freeing)
programs = {tr("x * 2, backward twice"): "x = leaf([3], requires_grad=True)\nloss = (x * 2).sum()\n"
                                         "loss.backward()\nloss.backward()",
            tr("x + 1, backward twice"): "x = leaf([3], requires_grad=True)\nloss = (x + 1).sum()\n"
                                         "loss.backward()\nloss.backward()",
            tr("x * 2, retain_graph"): "x = leaf([3], requires_grad=True)\nloss = (x * 2).sum()\n"
                                       "loss.backward(retain_graph=True)\nloss.backward()"}
agree = []
for what, program in programs.items():
    theirs, ours = lesson11.run(program, torch), lesson11.run(program, engine)
    said = lambda o: headline(o.message) if o.kind else tr("no error, x.grad = {grad}", grad=rounded(o.grads['x']))
    print(tr("{what:<23} torch: {outcome}", what=what, outcome=said(theirs)))
    print(tr("{what:<23} ours:  {outcome}", what="", outcome=said(ours)))
    agree.append(theirs.kind == ours.kind and (theirs.kind is not None or torch.equal(theirs.grads["x"], ours.grads["x"])))
claim("the same outcome from both: an error on x * 2 backward twice, 2 + 2 on x + 1, and 4 with retain_graph",
      all(agree))

# %% [markdown]
# `(x + 1).sum()` runs backward twice without an error because neither node behind it saved anything: there is
# nothing to free and nothing to miss. Lesson 12 takes this engine on: a saved value that is changed in place after
# it was saved, and a parameter changed in place.

# %% [markdown] tags=["read-after-exercises"]
# | what your engine does | what torch does | the error when it is missed |
# |---|---|---|
# | `*` keeps the other operand, `@` the other matrix, `exp` its output, `+` and `sum` nothing | the same (`_saved_other`, `_saved_mat2`, `_saved_result`) | none: a wrong or missing gradient, or memory kept for nothing |
# | runs each node once, after all the gradient from every use has arrived | the same | a gradient counted twice, or a node run before its gradient is complete |
# | frees what a node saved after its backward, unless `retain_graph=True` | the same | "Trying to backward through the graph a second time" |

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - In the operations you wrote, as in torch's for them, a node keeps exactly what its derivative reads for the
#   inputs that need a gradient: `a * b` keeps `b` for `a`'s gradient and `a` for `b`'s, `@` likewise, `exp` its own
#   output, a sum nothing. (Not every torch operation is this frugal: lesson 09 shows a frozen convolution keeping its
#   input.)
# - Backward runs each node once all its gradient has arrived, adds up the gradients of a value used twice, and frees
#   what each node kept unless `retain_graph=True`; a node that kept nothing has nothing to miss, which is why
#   `(x + 1).sum()` can run backward twice. Run a node once per use instead, and the second use finds it freed.

# %% [markdown]
# ## Exercises
#
# The two build steps above are this lesson's exercises; each has its checker in its section. To go further (not
# checked):
#
# - add `relu`, keeping what its derivative reads (torch's `ReluBackward0` keeps its output), and compare what it
#   saves with `saved_by_torch` on `(a * b).relu()`;
# - give `backward` an `inputs=` argument, as `torch.autograd.backward` has, that fills `.grad` only for those leaves,
#   and check on a few expressions that the gradients it fills are torch's;
# - make `**` one node of its own that keeps its base, as torch's `PowBackward0` keeps `self` (and the exponent, a
#   number), and count what `(x ** 3).sum()` saves against the four entries `x * x * x` keeps today.
