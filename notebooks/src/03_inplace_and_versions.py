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
# # Lesson 03 · In-place operations and version counters
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/03_inplace_and_versions.ipynb)
#
# [中文版](zh/03_inplace_and_versions.ipynb) · [Student copy](student/03_inplace_and_versions.ipynb)
#
# **Goal.** Read the most confusing error in GAN training word by word:
# `one of the variables needed for gradient computation has been modified by an inplace operation: [...] is at
# version N; expected version M`. You will see the counter it talks about, reproduce it from seeds 001 and 000,
# learn that `optimizer.step()` is the in-place operation nobody sees, and judge seed 002's four remedies,
# one of which hides a wrong gradient.
#
# **Material.** Seed 001 (an untitled post on leaf nodes, `retain_graph` and `detach` in GAN training; no author or date given), seed 002 (皮牙子抓饭, “详解异常:RuntimeError: 一个用于梯度计算的变量已被就地操作修改的错误”, 华为云社区, 2024-04-05), seed 000
# (聖光之護, “解决PyTorch GAN训练中的梯度计算错误:inplace操作与计算图分离”, php中文网, 2025-10-02). The seeds are public blog posts, in Chinese, cited in [the instructor notes](README.md#the-seeds); every listing this lesson runs is in its cells.

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
# ## 1 · Every tensor has a version counter
#
# **Why it matters.** Autograd cannot afford to copy every tensor it saves, so it saves a reference plus the
# tensor's `_version` at that moment. Every in-place operation bumps the counter. At backward time, a saved
# tensor whose counter moved is known to hold different values than the ones the forward used.

# %%
x = torch.zeros(3)
timeline = [("x = torch.zeros(3)", x._version)]
x += 1;            timeline.append(("x += 1", x._version))
x.add_(1);         timeline.append(("x.add_(1)", x._version))
x.relu_();         timeline.append(("x.relu_()", x._version))
x[0] = 5;          timeline.append(("x[0] = 5", x._version))
x.mul(2);          timeline.append((tr("x.mul(2)   (out of place)"), x._version))
x = x + 1;         timeline.append((tr("x = x + 1  (a NEW tensor)"), x._version))
for step, version in timeline:
    print(tr("{step:<28} version {version}", step=step, version=version))
versions = [version for _, version in timeline]
claim("each in-place op bumped the version by exactly 1", versions[:5] == [0, 1, 2, 3, 4], versions[:5])
claim("x.mul(2), out of place, left it unchanged", versions[5] == versions[4], versions[4:6])
claim("x = x + 1 is a new tensor, which starts at version 0", versions[6] == 0, versions[6])

# %% [markdown]
# `optimizer.step()` belongs on this list: it updates each parameter in place (under `no_grad`, lesson 01).

# %% reveals=["init\\w*( is| bumps| fills)[^.\\n]*(in place|version)", "_version after one step -> 2"] tags=["predict"]
prediction = 2  # SOLUTION: a fresh nn.Linear(3, 1), one backward, one Adam step: what is layer.weight._version now?
layer = nn.Linear(3, 1)
opt = optim.Adam(layer.parameters(), lr=0.1)
layer(torch.ones(1, 3)).sum().backward()
opt.step()
check("layer.weight._version after one step", prediction, layer.weight._version,
      why="nn.Linear's init fills its weight in place (version 1; lesson 01), and backward only writes .grad; "
          "the step is one more in-place op: 2.")

# %%
layer = nn.Linear(3, 1)
opt = optim.Adam(layer.parameters(), lr=0.1)
versions = [layer.weight._version]             # init is in place too
layer(torch.ones(1, 3)).sum().backward()
opt.step()
versions.append(layer.weight._version)
opt.step()
versions.append(layer.weight._version)
print(tr("weight version at creation, after one opt.step(), after another: {versions}", versions=versions))
claim("init bumps the version once, and each Adam step once more", versions == [1, 2, 3], versions)

# %% [markdown]
# ## 2 · When autograd saves a tensor, and why a bump breaks backward
#
# **Why it matters.** An in-place change is only a problem for tensors that were *saved*. Which ones are saved
# depends on the operation's derivative, and on which inputs need a gradient: `a + b` saves nothing; `a * b`
# saves each operand only when the **other** one requires grad (the gradient for `a` is `grad * b`, so `b` is
# kept for it), so `a * a` keeps `a` twice, `a * b` with a constant `b` keeps only `b`, and `a * 2` keeps only the
# 2. Before the table of what each op keeps, one case to think through from the derivative: `exp`.

# %% reveals=["\\bstale\\b", "exp\\W.{0,25}saves? (its|their) output"] tags=["predict"]
prediction = True  # SOLUTION: after `y = a.exp()`, does `y.mul_(2)` change the tensor exp saved for backward? (True/False)
a = torch.ones(2, requires_grad=True)
y = a.exp()
y.mul_(2)
exp_saved = graphs.saved_tensors(y.grad_fn.next_functions[0][0])       # what ExpBackward0 keeps
check("y.mul_(2) changes exp's saved tensor", prediction, exp_saved[0].state != "alive",
      why=f"exp saves its output y (its derivative is exp(a), which is y), and mul_ changed y in place: the saved "
          f"`{exp_saved[0].name}` is {tr(exp_saved[0].state)}, at version {exp_saved[0].version_now}, saved at "
          f"{exp_saved[0].version_saved}.")

# %%
a = torch.ones(3, requires_grad=True)
b = torch.full((3,), 2.0)                      # a constant: requires_grad is False
made = {}
for name, make in [("a + 1", lambda t: t + 1), ("a * a", lambda t: t * t), ("a * b", lambda t: t * b),
                   ("a * 2", lambda t: t * 2), ("a.exp()", lambda t: t.exp()), ("a.sigmoid()", lambda t: t.sigmoid())]:
    out = make(a)
    made[name] = [s.name for s in graphs.saved_tensors(out.grad_fn)]
    print(tr("{op:<12} {node:<16} saves: {saved}", op=name, node=type(out.grad_fn).__name__,
             saved=made[name] or tr("nothing")))
claim("a + 1 saves nothing; a * a keeps a twice; exp and sigmoid save their output",
      made["a + 1"] == [] and made["a * a"] == ["other", "self"] and made["a.exp()"] == made["a.sigmoid()"] == ["result"])
claim("a * b with a constant b saves b (`other`) and not a (`self`)", made["a * b"] == ["other"], made["a * b"])
claim("a * 2 saves only the 2, not a", made["a * 2"] == ["other"], made["a * 2"])

# %% [markdown]
# So `y = a.exp(); y.add_(1)` must break the backward of `exp`, while `y = a + 1; y.add_(1)` is harmless.
# The renderer marks the broken saved tensor **stale** with both version numbers.

# %%
a = torch.ones(3, requires_grad=True)
y = a.exp()
y.add_(1)
graphs.draw({"y": y}, {a: "a"})

# %%
with expect_error(RuntimeError, r"modified by an inplace operation.*is at version 1; expected version 0"):
    y.sum().backward()

# %%
a = torch.ones(3, requires_grad=True)
y = a + 1
y.add_(1)
y.sum().backward()
print(tr("a + 1 then add_: backward fine, a.grad = {grad}", grad=a.grad))

# %% [markdown]
# The same test on `y = a * b` with a constant `b`. Only `b` was saved, so changing `a` in place afterwards
# (here under `no_grad`, the way `optimizer.step()` changes a parameter) cannot break the backward, and its
# gradient is still `b`; changing `b` in place does break it.

# %%
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = torch.tensor([4.0, 5.0, 6.0])             # a constant
y = a * b                                     # saves b only: the gradient for a is b
with torch.no_grad():
    a.add_(10)                                # bumps a's version; a was not saved
y.sum().backward()
claim("a changed in place after y = a * b: backward runs, a.grad is b", torch.equal(a.grad, b),
      f"a at version {a._version}, a.grad = {rounded(a.grad)}")

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = torch.tensor([4.0, 5.0, 6.0])
y = a * b
b.add_(10)                                    # b is the saved tensor
with expect_error(RuntimeError, r"modified by an inplace operation.*is at version 1; expected version 0"):
    y.sum().backward()

# %% [markdown]
# ## 3 · The GAN version of the error
#
# **Why it matters.** In GAN code you rarely write `add_` yourself. The in-place op is `optimizer.step()`.
# Seed 001's G/D toy with `retain_graph=True` (lesson 02 showed that, without it, the graph was freed):

# %%
torch.manual_seed(0)
G, D = nn.Linear(2, 2), nn.Linear(2, 2)
optimG, optimD = optim.Adam(G.parameters()), optim.Adam(D.parameters())
t = torch.tensor([1., 2], requires_grad=True)
g = G(t)
d = D(g)
lossD = d.sum()
optimD.zero_grad()
lossD.backward(retain_graph=True)
optimD.step()                       # D.weight changes in place: version 1 -> 2
lossG = (g + d).sum()
optimG.zero_grad()
with expect_error(RuntimeError, r"\[torch.FloatTensor \[2, 2\]\], which is output 0 of AsStrided(Backward0)?, is at version 2; expected version 1"):
    lossG.backward()

# %%
graphs.draw({"lossG": lossG}, graphs.param_names(G=G, D=D, t=t))

# %% [markdown]
# The message gives the saved tensor's shape, `[2, 2]`, the same as `D.weight`'s. Seed 000's D ends in
# `nn.Linear(512, 1)`, whose weight has shape `[1, 512]`, and it reads activations that require grad.

# %% reveals=["\\[512, 1\\]", "saves? .?weight\\.t\\(\\)"] tags=["predict"]
prediction = (512, 1)  # SOLUTION: the same error on Linear(512, 1)'s weight: which shape does the message print?
import re

head = nn.Linear(512, 1)                          # D's last layer in seed 000
opt_head = optim.Adam(head.parameters())
h = torch.randn(4, 512, requires_grad=True)      # the activations it reads
loss = head(h).sum()
loss.backward(retain_graph=True)
opt_head.step()
try:
    loss.backward()
    printed = None
except RuntimeError as error:
    printed = tuple(int(n) for n in re.search(r"FloatTensor \[(\d+), (\d+)\]\]", str(error)).groups())
check("shape in the message for Linear(512, 1)'s stale weight", prediction, printed,
      why="Linear computes addmm(bias, input, weight.t()) and saves weight.t() for the input's gradient: the "
          "saved tensor is [512, 1], not the weight's [1, 512].")

# %% [markdown]
# Reading the message piece by piece, against the graph of seed 001's toy above:
#
# - `[torch.FloatTensor [2, 2]]`: the type (`torch.cuda.FloatTensor` on a GPU) and shape of the **saved** tensor,
#   which is not always the shape of your parameter. `Linear` computes `addmm(bias, input, weight.t())` and saves
#   `weight.t()` as `mat2`.
# - `which is output 0 of AsStrided`: the saved tensor is a *view* of `D.weight` (the transpose), and the message
#   names the node that now produces that view. `t()` made it, so in the forward its `grad_fn` was `TBackward0`
#   (drawn above). When a view's base is changed in place under `no_grad`, which is what `optimD.step()` does,
#   autograd regenerates the view's `grad_fn` as a generic `AsStridedBackward0`, and the message names that. So
#   `AsStrided`, an operation your code never called, is itself a sign that the view's base was changed in place
#   (the cell below shows the switch). The spelling depends on the torch version: 2.13 and newer name the forward
#   operation (`AsStrided`, and `Sigmoid` or `Exp` further down); 2.12 and older name its backward node
#   (`AsStridedBackward0`); seed 001, written on an older torch still, quotes `TBackward`, the view's name before
#   the step. The checks in these lessons accept both current spellings and nothing else.
# - `is at version 2; expected version 1`: a view shares its base's counter. `D.weight` was at version 1
#   (after its in-place initialisation) when the forward saved `weight.t()`, and `optimD.step()` moved it to 2.
#
# The renderer names it: `mat2 = D.weight.T`, stale, version 2, saved at 1. G's saved weight is still alive,
# since nothing stepped G yet.

# %%
layer = nn.Linear(2, 2)
opt = optim.Adam(layer.parameters())
w_t = layer.weight.t()                        # the view Linear's addmm saves as mat2
made_by = type(w_t.grad_fn).__name__
layer(torch.ones(1, 2)).sum().backward()
opt.step()                                    # layer.weight changes in place, under no_grad
now = type(w_t.grad_fn).__name__
claim("before the step, the transposed view's grad_fn is t()'s", made_by == "TBackward0", made_by)
claim("after the step, it is regenerated as AsStrided", now == "AsStridedBackward0", now)
claim("the view shares its base's version counter", w_t._version == layer.weight._version == 2,
      f"both at version {w_t._version}")

# %% [markdown]
# **Seed 000's exact case.** Its GAN (now `gan_lessons.models`) and its `loss_nonsaturating`, called the way
# the seed does. `D`'s last layer is `Linear(512, 1)`, so the saved transposed weight is `[512, 1]`:

# %%
from gan_lessons.models import Generator, Discriminator

def loss_nonsaturating(d, g, x_real, *, device):
    """Seed 000's loss, as written there (including its double sigmoid: lesson 05)."""
    z = torch.randn(x_real.shape[0], g.z_dim, device=device)
    gz = g(z)
    dgz = F.sigmoid(d(gz))
    dx = d(x_real)
    real_label = torch.ones(x_real.shape[0], device=device)
    fake_label = torch.zeros(x_real.shape[0], device=device)
    bce_loss = F.binary_cross_entropy_with_logits
    g_loss = bce_loss(dgz, real_label).mean()
    d_loss = bce_loss(dx, real_label).mean() + bce_loss(dgz, fake_label).mean()
    return d_loss, g_loss

g, d = Generator().to(device), Discriminator().to(device)
g_optimizer, d_optimizer = optim.Adam(g.parameters(), lr=1e-3), optim.Adam(d.parameters(), lr=1e-3)
x_real = torch.rand(8, 1, 28, 28, device=device) * 2 - 1
d_loss, g_loss = loss_nonsaturating(d, g, x_real, device=device)
d_optimizer.zero_grad()
d_loss.backward(retain_graph=True)
d_optimizer.step()
g_optimizer.zero_grad()
with expect_error(RuntimeError, r"\[torch\.(cuda\.)?FloatTensor \[512, 1\]\], which is output 0 of AsStrided(Backward0)?, is at version 2; expected version 1"):
    g_loss.backward()

# %%
stale = [s for s in graphs.draw({"g_loss": g_loss}, graphs.param_names(G=g, D=d)).saved if s.state == "stale"]
for s in stale:
    print(tr("{node}.{name} = {param} {shape}: version {now}, saved at {saved}", node=s.node, name=s.name,
             param=s.param, shape=s.shape, now=s.version_now, saved=s.version_saved))
claim("every weight of D that the forward saved is stale, D's last layer (net.7) first, as PyTorch reports",
      len(stale) == 4 and all(s.param.startswith("D.") for s in stale) and stale[0].param == "D.net.7.weight.T",
      [s.param for s in stale])


# %% [markdown]
# Every weight of D that the forward saved is stale, since `step()` touched them all; PyTorch reports the first
# one its backward reaches, D's last layer. The side road "Seed 002's remedies, judged", after the exercises, says why the same loop ran without this error on old torch.

# %% [markdown]
# **Seed 000's explanation, checked.** Seed 000 says that `d_loss.backward(retain_graph=True)` "may operate on
# some intermediate variables of the graph (for example, freeing memory or modifying state)", so that
# `g_loss.backward()` meets variables that were modified or freed even though `retain_graph=True` tried to keep the
# graph. A backward modifies nothing: it reads what the forward saved and, without `retain_graph`, frees it. The
# version 2 comes from the line between the two backwards, `d_optimizer.step()`. The same two backwards, once
# without the step and once with it:

# %%
def seed000_backwards(step_between):
    """Seed 000's two backwards on a fresh GAN: D's last weight's version before and after d_loss.backward,
    and g_loss.backward's error, if any (None if it ran)."""
    torch.manual_seed(0)
    g, d = Generator().to(device), Discriminator().to(device)
    d_optimizer = optim.Adam(d.parameters(), lr=1e-3)
    d_loss, g_loss = loss_nonsaturating(d, g, x_real, device=device)
    before = d.net[7].weight._version
    d_loss.backward(retain_graph=True)
    after = d.net[7].weight._version
    if step_between:
        d_optimizer.step()
    try:
        g_loss.backward()
        return before, after, None
    except RuntimeError as error:
        return before, after, str(error)

no_step, with_step = seed000_backwards(False), seed000_backwards(True)
print(tr("D.net[7].weight versions before and after d_loss.backward: without the step {without} | with it {with_step}",
         without=no_step[:2], with_step=with_step[:2]))
claim("d_loss.backward(retain_graph=True) leaves D's weight at the version it had", no_step[0] == no_step[1] == with_step[1])
claim("without d_optimizer.step() between them, g_loss.backward() runs", no_step[2] is None)
claim("with d_optimizer.step() between them, g_loss.backward() raises the version error",
      with_step[2] is not None and "is at version 2; expected version 1" in with_step[2])

# %% [markdown]
# So seed 000's cause is wrong, and its fix is right: detaching the fake batch in D's loss and giving G's loss a
# fresh D forward after the step. So is its remark that the fixed loop "no longer needs `retain_graph=True`": D's
# loss then no longer reaches G's part of the graph, and G's loss has a forward of its own, so no graph is
# differentiated twice.

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - Every tensor carries `_version`; in-place ops, including `optimizer.step()`, bump it.
# - Autograd saves some tensors with their version; backward checks it. Which are saved follows the derivative:
#   `a * b` keeps `b` only if `a` requires grad and `a` only if `b` does; `exp`, `sigmoid`, `tanh` keep their output.
# - The message gives the **saved** tensor's type and shape (a Linear weight appears transposed), the node that
#   now produces it (`AsStrided` for a view whose base was changed in place, as `step()` does), and the two versions.
# - Seeds 001 and 000 hit it because `retain_graph=True` kept a graph alive across `optimizer.step()`.
# - An in-place op, `ReLU(inplace=True)` included, breaks backward when the tensor it overwrites was saved: by the
#   op that made it (Sigmoid, Tanh) or by another op that read it first (a mul by a tensor that requires grad).
#   After Linear or Conv it is usually fine, because they do not save their output; it is not a rule about layers.
# - Seed 002's `.data` remedy removes the error by producing a wrong gradient; `clone()` or no in-place op are the
#   real fixes, and `no_grad()` is for updating leaves.

# %% [markdown]
# ## Exercises
#
# ### Build it: a probe that finds stale saved tensors
#
# Every tensor autograd saves can pass through your own code. Inside
# `with torch.autograd.graph.saved_tensors_hooks(pack, unpack):`, each tensor an operation saves for backward goes
# through `pack(t)`, and whatever `pack` returns is kept in its place and handed to `unpack` when a backward needs
# the tensor (the hooks stay attached to the graph, so that backward may run after the `with` block). Tools use
# this to keep saved activations on the CPU (`torch.autograd.graph.save_on_cpu`). There is a catch: autograd
# cannot see through your hooks, so it stops checking versions, and section 2's error becomes a wrong gradient
# without a word:

# %%
a = torch.ones(3, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
    y = a.exp()                           # exp saves y through the hooks
y.mul_(2)                                 # the saved y moves to version 1
y.sum().backward()                        # no error
right = torch.autograd.grad((a.exp() * 2).sum(), a)[0]   # the same loss, out of place
claim("under saved_tensors_hooks, the stale saved y raised no error", a.grad is not None)
claim("and the gradient is wrong: 4e (mul_'s 2 times the doubled y), where the right one is 2e",
      torch.allclose(a.grad, 2 * right), f"{rounded(a.grad)} vs {rounded(right)}")


# %% [markdown]
# Put the check back yourself. Write `stale_saved(make_loss)`: run `make_loss()` (it builds a graph, may change
# a saved tensor in place, and returns a loss) under your hooks, run the backward through that loss, and return
# one `(shape, version when saved, version at backward)` per saved tensor whose version moved in between, `[]`
# when none did. A tensor saved twice counts twice. The backward must compute what it computes without your
# probe. The checker runs your probe on six graphs (section 2's `exp`, `a * a`, an `exp` whose output is saved
# again after it changed, a `sigmoid` whose output two writes change without changing a value, a clean
# `tanh(Linear(x))` and section 3's seed 001 toy) and compares your report and the gradients with its own.

# %%
def stale_saved(make_loss):
    """Run make_loss() and the backward through the loss it returns; one (shape, version when saved, version at
    backward) per saved tensor whose version moved in between."""
    ### BEGIN SOLUTION
    stale = []
    def pack(t):
        return t, t._version              # the tensor itself, and its version now
    def unpack(packed):
        t, version = packed
        if t._version != version:
            stale.append((tuple(t.shape), version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = make_loss()
    loss.backward()
    return stale
    ### END SOLUTION

my_answer = stale_saved  # SOLUTION: point this at your stale_saved

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_stale_saved(my_answer)
assert solved, "stale_saved: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# ## Going further · `ReLU(inplace=True)`: safe in one place, an error in another
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** Seed 001 says in-place on non-leaves is fine, "which is why `ReLU(inplace=True)` is
# common". The rule is not about which layer comes before it. An in-place op breaks backward when the tensor it
# overwrites was saved for backward by some node: by the op that produced it, when that op saves its output
# (`sigmoid` and `exp`, section 2, and `relu` itself), or by another op that read it before the overwrite and saved it
# as an input (`h * gate` saves `h` when `gate` requires grad, section 2). `Linear` does not save its output,
# so a ReLU right after it is usually fine, but not always.

# %%
safe = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 1))
safe(torch.randn(2, 4)).sum().backward()
print(tr("Linear -> ReLU(inplace=True): backward fine (addmm does not save its output)"))

broken = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid(), nn.ReLU(inplace=True), nn.Linear(4, 1))
with expect_error(RuntimeError, "modified by an inplace operation.*which is output 0 of Sigmoid(Backward0)?,"):
    broken(torch.randn(2, 4)).sum().backward()

# %% [markdown]
# "Fine after Linear" is a habit, not the rule. The same `Linear` followed by an in-place ReLU breaks once
# something else read the Linear's output and saved it. Here a multiplication reads `h` first: by a constant
# gate it saves only the gate, and the in-place ReLU is harmless; by a gate that requires grad it saves `h`, and
# the ReLU makes that saved `h` stale (the message names `Relu`, the in-place op that last wrote `h`).

# %%
layer, x = nn.Linear(4, 4), torch.randn(2, 4)

def gated_then_relu_(gate):
    h = layer(x)                      # addmm does not save its output
    gated = h * gate                  # saves h only if gate requires grad
    saved = [s.name for s in graphs.saved_tensors(gated.grad_fn)]
    F.relu(h, inplace=True)           # what nn.ReLU(inplace=True) does to h
    return (gated + h).sum(), saved

loss, saved = gated_then_relu_(torch.randn(2, 4))
loss.backward()
claim("constant gate: mul saved only the gate, so Linear -> ReLU(inplace) is fine", saved == ["other"], saved)

loss, saved = gated_then_relu_(torch.randn(2, 4, requires_grad=True))
claim("gate that requires grad: mul saved h too", saved == ["other", "self"], saved)
with expect_error(RuntimeError, r"modified by an inplace operation.*output 0 of Relu(Backward0)?, is at version 1; expected version 0"):
    loss.backward()

# %% reveals=["leaky_relu\\W+(saves?|keeps?) (its|their) input", "LeakyReLU then ReLU\\(inplace=True\\) raises -> False"] tags=["predict"]
prediction = False  # SOLUTION: D's layers: is nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU(0.2), nn.ReLU(inplace=True)) broken too? (True/False)
net = nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU(0.2), nn.ReLU(inplace=True))
try:
    net(torch.randn(2, 4)).sum().backward()
    raised = False
except RuntimeError:
    raised = True
check("LeakyReLU then ReLU(inplace=True) raises", prediction, raised,
      why="leaky_relu saves its input, not its output (its derivative, 1 or 0.2, depends on the input's sign), so "
          "relu_ overwrites nothing a backward needs; after Tanh or Sigmoid, which save their output, it would.")

# %% [markdown]
# ## Going further · Seed 002's remedies, judged
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** Seed 002 lists four remedies. Three are sound in the right place; one makes the error
# disappear by making the gradient wrong. We run each listing as written, then on a case where a tensor *was*
# saved, and compare with the correct gradient.

# %%
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)   # remedy 2: clone, then in place on the copy
y = x.clone()
y += 1
torch.sum(y).backward()
grad_clone = x.grad
print("clone     :", rounded(grad_clone))

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)   # remedy 3: torch.no_grad()
with torch.no_grad():
    x += 1
torch.sum(x).backward()
grad_no_grad = x.grad
print("no_grad   :", rounded(grad_no_grad), "x =", rounded(x), tr("version: {version}", version=x._version))

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)   # remedy 4: .data
x_data = x.data
x_data += 1
torch.sum(x).backward()
print(".data     :", rounded(x.grad), "x =", rounded(x), tr("version: {version}", version=x._version))
claim("for sum, all three give the gradient [1, 1, 1]",
      all(torch.equal(g, torch.ones(3)) for g in (grad_clone, grad_no_grad, x.grad)))
claim(".data changed x without bumping its version", x._version == 0 and torch.equal(x.detach(), torch.tensor([2.0, 3.0, 4.0])),
      f"x = {rounded(x)}, version {x._version}")


# %% [markdown]
# All three run, and for `sum` the gradient is right whatever `x` holds. That is why these listings look
# convincing: `sum` saves nothing. Now the same remedies where the in-place change hits a **saved** tensor,
# `y = x * x` (gradient `2x`, so `[2, 4, 6]` at the values used in the forward):

# %%
def fresh():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    return x, x * x

x, y = fresh()
y.sum().backward()
correct = x.grad
print(tr("{label:<25}: {value}", label=tr("correct gradient"), value=rounded(correct)))

x, y = fresh()
with expect_error(RuntimeError, "is at version 1; expected version 0"):
    with torch.no_grad():
        x += 1                  # no_grad does not hide the change from the version counter
    y.sum().backward()

# %% [markdown]
# `no_grad` does not get past the version check. `.data` does not bump the version (the first cell of this
# section showed it), so it will get past it. What does the backward then compute?

# %% reveals=["\\[4\\.0, 6\\.0, 8\\.0\\]", "2 \\* \\(x \\+ 1\\)"] tags=["predict"]
prediction = [4.0, 6.0, 8.0]  # SOLUTION: y = x * x at x = [1, 2, 3], then `x.data += 1` and y.sum().backward(): x.grad as a list, or "error"?
x, y = fresh()
x.data += 1                     # .data: no version bump
try:
    y.sum().backward()
    data_grad = x.grad.tolist()
except RuntimeError:
    data_grad = "error"
check("x.grad after x.data += 1", prediction, data_grad,
      why="no error, since .data left the version at 0; and the backward of x * x reads the saved x, which now "
          "holds x + 1: 2 * (x + 1), not 2x.")

# %%
x, y = fresh()
x.data += 1
try:
    y.sum().backward()
    raised = False
except RuntimeError:
    raised = True
print(tr("{label:<25}: {value}  <- {note}", label=tr(".data, silently"), value=rounded(x.grad),
         note=tr("2 * (x + 1): the forward used x, the backward used x + 1")))
claim(".data: backward raised no error", not raised)
claim(".data: the gradient is not the correct one", not torch.equal(x.grad, correct),
      f"{rounded(x.grad)} vs {rounded(correct)}")
claim(".data: the gradient is 2 * (x + 1), the values written after the forward",
      torch.equal(x.grad, 2 * torch.tensor([2.0, 3.0, 4.0])))

x, y = fresh()
x_shifted = torch.add(x, 1)     # avoid in-place (seed 002's first remedy, given as prose only): a new tensor
(y.sum() + x_shifted.sum()).backward()
print(tr("{label:<25}: {value}  <- {note}", label=tr("avoid in-place"), value=rounded(x.grad),
         note=tr("2x from y, plus 1 from x + 1")))
claim("avoid in-place: the correct gradient (2x + 1), and x is still at version 0",
      torch.equal(x.grad, correct + 1) and x._version == 0, f"{rounded(x.grad)}, version {x._version}")

x, y = fresh()
x2 = x.clone()
x2 += 1                         # clone: the saved x is untouched
y.sum().backward()
print(tr("{label:<25}: {value}", label="clone", value=rounded(x.grad)))
claim("clone: the correct gradient", torch.equal(x.grad, correct))

# %%
layer = nn.Linear(2, 1)
before = layer.weight.detach().clone()
p = layer.weight
p = p - 0.1 * torch.ones_like(p)            # out of place: a new tensor, now bound to the name p
claim("an out-of-place update leaves the model's own parameter as it was",
      torch.equal(layer.weight.detach(), before) and not torch.equal(p.detach(), before))

# %% [markdown]
# Verdict on seed 002:
#
# | remedy | verdict |
# |---|---|
# | avoid in-place (`torch.add` instead of `+=`) | correct for a value the graph uses; costs one allocation. Not for an update that must change the model's own tensor (a parameter, a buffer): `p = p - lr * g` leaves the model's parameter as it was (checked above) |
# | `clone()` then in place | correct; the saved tensor is untouched |
# | `torch.no_grad()` | right tool for updating **leaves** (that is `optimizer.step()`); does not stop the version error for saved tensors |
# | `.data` | never: it bypasses the version counter, so the wrong gradient above comes with no error. This is what GAN code got from pre-1.5 optimizers. |
#
# That last point is why seeds 001 and 000 "worked before": until torch 1.5, optimizers updated `p.data`, which
# does not bump the version. The same loops ran without error and computed G's gradient through D's **new**
# weights paired with activations from the **old** ones: a gradient of no function at all. The error of section 3
# is torch refusing to compute that.
#
# Seed 002's CIFAR-10 example clones the input batch before `+= 0.1`. Nothing there requires grad, so the
# in-place add on the batch itself is fine:

# %%
images = torch.rand(4, 3 * 32 * 32)          # stands in for a CIFAR-10 batch (no download here)
model = nn.Linear(3 * 32 * 32, 10)
images += 0.1                                 # no clone needed: images is a leaf without grad
F.cross_entropy(model(images), torch.tensor([0, 1, 2, 3])).backward()
print(tr("in-place augmentation on the input batch: fine; model.weight.grad set: {filled}",
         filled=model.weight.grad is not None))

# %% [markdown] tags=["read-after-exercises"]
# **The seed listings, judged.**
#
# | seed listing | on today's torch |
# |---|---|
# | 001: G/D toy with `lossD.backward(retain_graph=True)` then `optimD.step()` | raises the version error, `[2, 2] ... output 0 of AsStrided` (the seed quotes `TBackward`, the view's name before the step) |
# | 000: `loss_nonsaturating`, `d_loss.backward(retain_graph=True)`, `d_optimizer.step()`, `g_loss.backward()` | raises the version error, `[512, 1] ... output 0 of AsStrided, is at version 2; expected version 1` |
# | 002: `clone()` then `+=` | works, correct gradient |
# | 002: `with torch.no_grad(): x += 1` | works here; does **not** help when the tensor was saved for backward |
# | 002: `x.data += 1` | runs, no error, and can give a **silently wrong** gradient |
# | 002: CIFAR-10 augmentation loop | downloads CIFAR-10 (not run here); its `clone()` is unnecessary, since nothing there requires grad |

# %% [markdown]
# ## Going further · Anomaly detection points at the forward, not at `step()`
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** PyTorch's hint says "enable anomaly detection". It records a traceback of each forward
# operation and prints the one whose backward failed. Here is what it shows for seed 001's toy:

# %%
import warnings

def forward_line_blamed():
    with torch.autograd.set_detect_anomaly(True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.manual_seed(0)
        G, D = nn.Linear(2, 2), nn.Linear(2, 2)
        optimD = optim.Adam(D.parameters())
        t = torch.tensor([1., 2], requires_grad=True)
        g = G(t)
        d = D(g)                                   # the forward line
        d.sum().backward(retain_graph=True)
        optimD.step()                              # the line that really changed D.weight
        with expect_error(RuntimeError, "modified by an inplace operation"):
            (g + d).sum().backward()
    report = "\n".join(str(w.message) for w in caught if "Traceback of forward call" in str(w.message))
    lines = report.splitlines()   # pairs: '  File "...", line N' then '    code'; keep this notebook's frames
    return [code.strip() for where, code in zip(lines, lines[1:])
            if where.startswith("  File") and re.search(r"ipykernel_\d+|<ipython", where)]

code = forward_line_blamed()
print(tr("code lines in anomaly detection's forward traceback: {lines}", lines=code))
claim("it blames the forward line `d = D(g)`", any("d = D(g)" in line for line in code))
claim("it never mentions optimD.step()", not any("step" in line for line in code))

# %% [markdown]
# It names `d = D(g)`, the forward call whose saved tensor went stale, and never `optimD.step()`, the line that
# changed it. That is correct as far as it goes, but in GAN code the culprit is nearly always the `step()` (or a
# `backward` order) between the two. Lesson 07's doctor names both.
