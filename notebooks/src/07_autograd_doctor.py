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
# # Lesson 07 · The autograd doctor
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/07_autograd_doctor.ipynb)
#
# [中文版](zh/07_autograd_doctor.ipynb) · [Student copy](student/07_autograd_doctor.ipynb)
#
# **Goal.** Turn a diagnostic tool on over broken GAN code, your own included, and get the answer PyTorch's
# message leaves out: *which* tensor (by module and parameter name), *which* forward line saved it, *which* line
# or `optimizer.step()` changed or freed it, and the fix, with the lesson that teaches it.
#
# **Material.** Every broken listing of the seeds (000, 001, 003, 004) and three more of the kinds people post.
#
# `with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):` watches a block. It records with public hooks only: a
# `TorchFunctionMode` sees every torch call (forward ops, in-place ops, `backward`, `.grad`, `.data`), global
# module hooks say which module is running, and global optimizer hooks see every `step()`. When one of the
# lessons' errors escapes, the doctor prints a diagnosis and attaches it to the **original, unchanged**
# exception as `error.diagnosis`. Patterns that raise nothing but train the wrong thing become `DoctorWarning`s.

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
import itertools
import warnings
from gan_lessons import strategies
from gan_lessons.doctor import doctor, DoctorWarning
from gan_lessons.exercises import check_diagnosis
from gan_lessons.lesson import headline
from gan_lessons.models import Generator, Discriminator

warnings.simplefilter("always", DoctorWarning)


# %% [markdown]
# ## 1 · What PyTorch says, and what the doctor adds
#
# **Why it matters.** PyTorch's version error gives the saved tensor's type, shape and versions. It does not say
# that `[512, 1]` is D's last weight, transposed, or which line changed it. Anomaly detection (lesson 03) blames
# the forward line. Seed 000's loop, as written there, under the doctor:

# %%
def loss_nonsaturating(d, g, x_real, *, device):
    """Seed 000's loss, as written there."""
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

torch.manual_seed(0)
g, d = Generator().to(device), Discriminator().to(device)
g_optimizer, d_optimizer = optim.Adam(g.parameters(), lr=1e-3), optim.Adam(d.parameters(), lr=1e-3)
x_real = torch.rand(8, 1, 28, 28) * 2 - 1

with expect_error(RuntimeError, r"\[torch\.(cuda\.)?FloatTensor \[512, 1\]\]"):
    with doctor(g=g, d=d, g_optimizer=g_optimizer, d_optimizer=d_optimizer) as doc:
        d_loss, g_loss = loss_nonsaturating(d, g, x_real.to(device), device=device)
        d_optimizer.zero_grad()
        d_loss.backward(retain_graph=True)
        d_optimizer.step()
        g_optimizer.zero_grad()
        g_loss.backward()

# %% [markdown]
# Read it from the top. The tensor is `d.net.7.weight.T`: the saved transpose of D's `Linear(512, 1)` weight. The
# forward line that saved it is inside `loss_nonsaturating`. The step that changed it is `d_optimizer.step()`. The
# numbers are the same versions PyTorch printed. Along the way the doctor also warned about a silent problem, the
# double sigmoid (lesson 05). D's loss here does not detach the fake either, so its backward runs on into g; but
# `g_optimizer.zero_grad()` clears what it left in g's `.grad` before G's own backward, so no step uses a wrong
# gradient, and the doctor does not warn about that: a warning means the training is wrong. (Had g stepped on it,
# the doctor would have warned that one loss trains both nets.) The diagnosis is data, too:

# %%
diagnosis = doc.diagnoses[-1]
print(diagnosis.kind, "|", diagnosis.facts["tensor"])
print(tr("warnings raised in the block: {warnings}",
         warnings=[headline(d.summary) for d in doc.diagnoses if d.kind == "suspicious"]))
warned = [headline(d.summary) for d in doc.diagnoses if d.kind == "suspicious"]
claim("the diagnosis is a version error on d.net.7.weight.T", diagnosis.kind == "version"
      and diagnosis.facts["tensor"].startswith("d.net.7.weight.T [512, 1]"), on="this package's doctor")
claim("the doctor also warned about the double sigmoid, and not about D's backward into g, which no step used",
      any("sigmoid is fed into" in w for w in warned) and not any("trains both nets" in w for w in warned),
      on="this package's doctor")

# %% [markdown]
# The doctor sits on every torch call, every module and every optimizer step of the block it watches. Does
# watching change what it watches? Below, one clean training step (Adam on a small classifier) runs twice from the
# same seed: once plain, once under the doctor. Predict, then compare the loss and every weight after the step.

# %% reveals=["same with and without", "never changes a result"] tags=["predict"]
prediction = False  # SOLUTION: does the doctor change the loss, or any weight after the step, of a clean step? (True/False)
def clean_step():
    """One Adam step of a small classifier; its loss and every weight afterwards."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = optim.Adam(net.parameters())
    loss = F.cross_entropy(net(torch.randn(16, 4)), torch.randint(0, 3, (16,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return [loss, *net.parameters()]

plain = clean_step()
with doctor() as doc:
    watched = clean_step()
changed = not all(torch.equal(a, b) for a, b in zip(plain, watched))
check("the doctor changes a clean step", prediction, changed,
      why=f"the doctor only records: the loss and all {len(plain) - 1} weight tensors after the step are the same "
          "with and without it, bit for bit.")
claim("the doctor had nothing to say about the clean step", doc.diagnoses == [], on="this package's doctor")



# %% [markdown]
# ## 2 · Four broken training loops of the kinds people post
#
# **Why it matters.** Real code breaks in ways no blog post listed. Here are four new ones.
#
# **(a) A `+=` on G's output.** Someone adds a little noise to G's output in place ("instance noise"). G's
# backward then fails with a version error on `x_fake`. Predict which autograd node saved the `x_fake` that went
# stale (its `grad_fn` name, in the form `AddmmBackward0`), then run the loop under the doctor.

# %% reveals=["TanhBackward0", "tanh saves its output"] tags=["predict"]
prediction = "TanhBackward0"  # SOLUTION: which autograd node saved the x_fake that the += makes stale?
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
D = nn.Linear(16, 1)
opt_G = optim.Adam(G.parameters())
with expect_error(RuntimeError, "modified by an inplace operation"):
    with doctor(G=G, D=D, opt_G=opt_G) as doc:
        x_fake = G(torch.randn(4, 8))
        x_fake += 0.01 * torch.randn(4, 16)        # "instance noise", in place
        loss_G = F.softplus(-D(x_fake)).mean()
        loss_G.backward()
node = doc.diagnoses[-1].facts["saved by"].split()[0]
check("the node that saved the stale x_fake", prediction, node,
      why="tanh saves its output, since its backward is 1 - tanh(x)² computed from it: the op that made x_fake "
          "saved it, and the += changed it afterwards.")

# %% [markdown]
# The op that made the activation saved it, so changing it in place breaks that op's backward: the same happens to
# the output of `sigmoid`, `exp`, or a `ReLU(inplace=True)` (cheat sheet below). Make the change out of place
# (`x_fake = x_fake + noise`), and both backwards have what they saved.

# %% [markdown]
# **(b) G's loss on D's old output.** The D-first order, but G's loss reuses the logits D computed before its step
# instead of calling D again. Predict what the doctor will say (D here is a small `nn.Sequential`: its layers are
# `D[0]` to `D[3]`, and their parameters are named `D.1.weight` and so on):

# %% reveals=["modified by: opt_D\\.step\\(\\) at line \\d+ \\(`opt_D\\.step\\(\\)`\\)", "D\\.3\\.weight\\.T changed in place"] tags=["predict"]
prediction = dict(kind="version", tensor="D.3.weight", line="opt_D.step()")  # SOLUTION: what will the doctor say? dict(kind=..., tensor=..., line=...)
torch.manual_seed(0)
G = Generator()
D = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1))
opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
with expect_error(RuntimeError, "modified by an inplace operation") as caught:
    with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
        x_fake = G(torch.randn(8, 64))
        logits_fake = D(x_fake)
        opt_D.zero_grad()
        loss_D = strategies.bce(D(x_real), 1) + strategies.bce(D(x_fake.detach()), 0)
        loss_D.backward()
        opt_D.step()
        opt_G.zero_grad()
        loss_G = strategies.bce(logits_fake, 1)    # D's output from before the step
        loss_G.backward()
check_diagnosis(prediction, caught.error.diagnosis)

# %% [markdown]
# **(c) One optimizer over both nets, with detach.** Nothing raises. The doctor warns that the step runs while
# G's parameters have no gradient (lesson 04):

# %%
torch.manual_seed(0)
G, D = nn.Linear(4, 2), nn.Linear(2, 1)
opt = optim.Adam(itertools.chain(G.parameters(), D.parameters()))
with doctor(G=G, D=D, opt=opt) as doc:
    opt.zero_grad()
    F.softplus(D(G(torch.randn(4, 4)).detach())).mean().backward()
    opt.step()
print(tr("warnings: {warnings}", warnings=[headline(d.summary) for d in doc.diagnoses]))
claim("one warning: the step runs while G's 2 parameters have no .grad",
      len(doc.diagnoses) == 1 and "2 of its 4 parameters have no .grad" in doc.diagnoses[0].summary
      and doc.diagnoses[0].facts.get("parameters") == ["G.weight", "G.bias"], on="this package's doctor")

# %% [markdown]
# **(d) Weight clipping through `.data`, in the wrong place.** The original WGAN clips D's weights; written with
# `.data` between D's forward and its backward, nothing raises. `.data` changes a weight without moving its version
# counter, so the backward combines the old activations with the new weights (lesson 03 shows such a gradient is
# wrong). The doctor warns:

# %%
torch.manual_seed(0)
D = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
with doctor(D=D) as doc:
    out = D(torch.randn(4, 3))
    for p in D.parameters():
        p.data.clamp_(-0.01, 0.01)              # too early: the forward above saved these weights
    out.mean().backward()
print(tr("warnings: {warnings}", warnings=[headline(d.summary) for d in doc.diagnoses]))
claim("one warning, naming the .data change", len(doc.diagnoses) == 1 and "`.data.clamp_`" in doc.diagnoses[0].summary,
      on="this package's doctor")

# %% [markdown]
# ## 3 · The doctor in every cell: `%load_ext gan_lessons`
#
# **Why it matters.** Wrapping code in `with doctor(...)` is fine for a script. In a notebook, the extension does
# it for you: every cell runs under a doctor. Names are looked up when a diagnosis needs them, not before the cell
# runs: from the notebook's variables (as they are at that moment, so models and optimizers made in the same cell
# count), from modules one attribute inside your own objects (`agent.critic`), from the local variables of the
# functions that are running, and, for a module that has no name anywhere, from its class (`Critic.net.2.weight`).
# When one of these errors escapes a cell, the diagnosis appears under the usual traceback, which is the one you would
# see without the doctor. Any other exception is shown exactly as without the extension (`tests/doctor/test_doctor.py`
# checks both). Here it catches a silent bug:

# %%
# %load_ext gan_lessons

# %%
torch.manual_seed(0)
D = nn.Linear(2, 1)
logits = D(torch.randn(5, 2))
loss_G = F.binary_cross_entropy_with_logits(torch.sigmoid(logits), torch.ones(5, 1))

# %% [markdown]
# The way students actually write it: the whole loop in one cell, models and optimizers included. This is
# seed 000's mistake in a WGAN-style critic: the critic steps, then G's loss goes back through the critic's graph
# from before the step. (`expect_error` catches the error on purpose so the notebook goes on; under the extension
# it also shows the diagnosis, which is printed under the message.)

# %%
with expect_error(RuntimeError, r"\[torch.FloatTensor \[32, 1\]\], which is output 0 of AsStrided"):
    torch.manual_seed(0)

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

        def forward(self, x):
            return self.net(x)

    netG, netD = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)), Critic()
    optG, optD = optim.Adam(netG.parameters(), lr=1e-3), optim.Adam(netD.parameters(), lr=1e-3)
    real = torch.randn(16, 2) + 3
    for it in range(3):
        fake = netG(torch.randn(16, 8))
        out_fake = netD(fake)
        lossD = out_fake.mean() - netD(real).mean()
        optD.zero_grad()
        lossD.backward(retain_graph=True)
        optD.step()
        lossG = -out_fake.mean()
        optG.zero_grad()
        lossG.backward()
        optG.step()

from gan_lessons.doctor import active
found = active().diagnoses[-1]
claim("made in the same cell, the critic's weight is still named by its variable, with the step that changed it",
      found.facts["tensor"].startswith("netD.net.2.weight.T [32, 1]") and found.facts["modified by"].startswith("optD.step()"),
      shown=f'{found.facts["tensor"].split(" (")[0]}; {found.facts["modified by"].split(" (")[0]}',
      on="this package's doctor")

# %%
# %unload_ext gan_lessons

# %% [markdown]
# ### The doctor on a whole script
#
# Most GAN code you will debug is a script, not a notebook cell. `python -m gan_lessons doctor train.py ARGS` runs it
# as `python train.py ARGS` would (its own `sys.argv`, `sys.path[0]` and `__name__ == "__main__"`; `-m MODULE` runs a
# module), under the doctor. On one of these errors it prints the diagnosis, then the usual traceback, and exits 1;
# a clean script's output and exit status are its own, and `--strict` exits 3 when the doctor only warned. Here is
# section 1's loop as a file. Under the right fixes (`fix:`) are the fixes people reach for that will not work
# (`not:`), each with why.

# %%
import subprocess
import sys
import tempfile
from pathlib import Path

LOOP = """import torch
import torch.nn.functional as F
from gan_lessons.models import Discriminator, Generator

torch.manual_seed(0)
g, d = Generator(), Discriminator()
g_optimizer, d_optimizer = torch.optim.Adam(g.parameters()), torch.optim.Adam(d.parameters())
bce = F.binary_cross_entropy_with_logits
x_real = torch.rand(8, 1, 28, 28) * 2 - 1
dgz = d(g(torch.randn(8, 64)))
d_loss = bce(d(x_real), torch.ones(8)) + bce(dgz, torch.zeros(8))
g_loss = bce(dgz, torch.ones(8))
d_optimizer.zero_grad()
d_loss.backward(retain_graph=True)
d_optimizer.step()
g_optimizer.zero_grad()
g_loss.backward()
"""
with tempfile.TemporaryDirectory() as folder:
    (Path(folder) / "train.py").write_text(LOOP)
    done = subprocess.run([sys.executable, "-m", "gan_lessons", "doctor", "train.py"], cwd=folder,
                          capture_output=True, text=True)
said = done.stderr
end = said.index("Traceback")
diagnosis = said[said.rfind("autograd doctor: ", 0, end):end]     # the last report before the traceback
print(diagnosis)
claim("as a script, the doctor names the stale weight and the step that changed it, exits 1, and says not to "
      "reach for retain_graph=True", done.returncode == 1 and "d.net.7.weight.T" in diagnosis
      and "modified by: d_optimizer.step() at line 15" in diagnosis and "not: retain_graph=True" in diagnosis,
      shown=f"exit status {done.returncode}", on="this package's doctor")


# %% [markdown]
# ## Cheat sheet
#
# **Why it matters.** Most of the time you will meet these errors without the doctor on. This table maps each
# message to its cause, its fix and the lesson that explains it.
#
# | PyTorch says | cause | fix | lesson |
# |---|---|---|---|
# | `a leaf Variable that requires grad is being used in an in-place operation.` | in-place op on a parameter (or other leaf) while autograd records | do it under `torch.no_grad()`, as optimizers do; or out of place | 01 |
# | `UserWarning: The .grad attribute of a Tensor that is not a leaf Tensor is being accessed` | reading `.grad` of an activation | `.retain_grad()` before `backward()`, or read a leaf | 01 |
# | `Trying to backward through the graph a second time` | two losses share part of a graph; the first `backward()` freed it | `detach()` the shared tensor in the loss that must not reach it; or a fresh forward; or `retain_graph=True` (costs memory) | 02 |
# | `... modified by an inplace operation: [torch.FloatTensor [512, 1]], which is output 0 of AsStrided, is at version 2; expected version 1` | `optimizer.step()` (or any in-place op) changed a tensor a pending backward saved; `[512, 1]` is a transposed `Linear` weight | finish every backward through D before `opt_D.step()`, or forward again after it; detach the fake for D | 03, 05 |
# | same, `which is output 0 of Sigmoid` / `Tanh` | `ReLU(inplace=True)` or `+=` on an activation whose op saved its output | make it out of place, or `clone()` first | 03 |
# | `Inference tensors cannot be saved for backward` | a tensor made under `inference_mode` fed to training | `torch.no_grad()` instead | 04 |
# | nothing (wrong gradient) | `.data` mutation; `sigmoid` before `*_with_logits`; detach with one optimizer over both nets | `no_grad()` / `clone()`; pass raw logits; if model1 should learn from the second loss, do not detach: run every backward before any `step()` (a shared step between them raises the version error once model1 has two layers); if it should not, detach and give each network its own optimizer | 03, 05, 04, 02 |

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - The doctor names the tensor (`d.net.7.weight.T`), the forward line that saved it, and the `step()` or in-place
#   op that changed it; for a freed graph, the earlier backward and the shared forward.
# - It never changes a result or swallows an exception; its diagnosis rides on the original error.
# - Its warnings catch what raises nothing: double sigmoid, `.data` mutation, parameters without gradients at a
#   step, and one loss's gradient stepped on by both D's and G's optimizers (G's loss through D, or D's loss on a
#   fake batch not detached, left in G's `.grad`). Work that is wasted but harmless gets one line of information.

# %% [markdown]
# ## Exercises
#
# ### Fix it: seed 000's step, until the doctor has nothing to say
#
# Section 1's loop has three bugs: the version error it raises, the double sigmoid the doctor warned about, and D's loss
# on a fake batch that is not detached, whose backward runs on into `g` through the graph G's loss needs. Write seed
# 000's training step as one function that keeps its plan (D's step first, then G's; one forward of `g`) and has none of
# them: labels, both losses, each optimizer's `zero_grad`, `backward` and `step`, in the right order, and no graph kept
# once no backward needs it. The checker runs your step once under the doctor, which must neither raise nor warn, then
# twice on seed 000's models, comparing every gradient of `g` and `d` at each optimizer step with the right ones. While
# a bug is left, it prints the doctor's report or warning for it, and what that means here: read it first, the way you
# would on your own code.

# %%
def fixed_step(g, d, g_optimizer, d_optimizer, x_real, z):
    """Seed 000's step, fixed: D's step, then G's; one forward of g; nothing for the doctor to report."""
    ### BEGIN SOLUTION
    bce = F.binary_cross_entropy_with_logits         # takes raw logits: no sigmoid before it
    real_label, fake_label = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)                                          # the one forward of g
    d_loss = bce(d(x_real), real_label) + bce(d(gz.detach()), fake_label)   # D's backward stops at gz
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(d(gz), real_label)                    # a fresh forward of the d that has just stepped
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()
    ### END SOLUTION

my_answer = fixed_step  # SOLUTION: point this at your fixed_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_seed000_step(my_answer)
assert solved, "seed000_step: not solved yet, or not right: the lines above say what is missing"


# %% [markdown]
# ### Bring your own bug to the doctor
#
# The small GAN step below runs cleanly when D's loss sees `x_fake.detach()`. Break it with one of the errors of
# lessons 01 to 03 (change any line you like: an in-place op on a parameter, a second backward through a freed
# graph, a step before a backward that needs the old weights), and say which diagnosis you expect:
# `"leaf_inplace"`, `"freed"` or `"version"`. The checker runs your loop under the doctor, prints its report, and
# tells you whether there was an error to diagnose and which kind the doctor found.

# %%
def my_buggy_loop():
    """One D step and one G step; correct while D's loss sees x_fake.detach()."""
    torch.manual_seed(0)
    G, D = nn.Linear(4, 4), nn.Linear(4, 1)
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    x_fake = G(torch.randn(8, 4))
    fake_for_D = x_fake  # SOLUTION: x_fake.detach() is correct; what makes a backward below fail?
    loss_D = F.softplus(D(fake_for_D)).mean()
    opt_D.zero_grad(); loss_D.backward(); opt_D.step()
    loss_G = F.softplus(-D(x_fake)).mean()
    opt_G.zero_grad(); loss_G.backward(); opt_G.step()

expected = "freed"  # SOLUTION: the diagnosis kind you expect: "leaf_inplace", "freed" or "version"
my_answer = my_buggy_loop  # SOLUTION: point this at your loop
solved = exercises.check_doctor_bug(my_answer, expected)

# %% [markdown]
# ## Going further · The other seeds' broken listings
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** Each seed hits one of these errors from a different direction. The doctor names the moving
# part every time.
#
# First the smallest case of all: one loss, and `backward()` called on it twice. Section 1's diagnosis was of
# kind `"version"` (a saved tensor changed in place). The doctor has a kind for every autograd error it knows, each
# named after what went wrong; here are their names, read from its catalogue:

# %%
from gan_lessons.doctor.catalogue import CATALOGUE
print(", ".join(kind.key for kind in CATALOGUE))

# %% reveals=["first (call|backward) freed", "first call freed its graph"] tags=["predict"]
prediction = "freed"  # SOLUTION: `y.backward()` twice on the same y: which kind of diagnosis?
x = torch.ones(2, requires_grad=True)
kind = None                                  # stays None if nothing raises
try:
    with doctor(x=x):
        y = (x * x).sum()
        y.backward()
        y.backward()
except RuntimeError as error:
    kind = error.diagnosis.kind
check("diagnosis kind", prediction, kind,
      why="mul saved x (twice) for its backward; the first backward used and freed it, so the second has nothing to "
          "work with. It is one loss, so the doctor's fix is to call backward() once, not to detach.")


# %% [markdown]
# From here on, before each broken listing runs, write down what the doctor will say, as
# `dict(kind=..., tensor=..., line=...)`: the kind; the tensor it names (for `"version"` the stale tensor, written
# as its owner and attribute, such as `G.bias`; for `"freed"` a tensor through which the second loss reaches the
# part that was freed); and the line to blame, the one that changed that tensor or freed that part (its code, or
# its line number in the cell). The doctor is the answer key.
#
# **Seed 001's G/D toy**, first without `retain_graph`:

# %%
def seed001(retain_graph):
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Linear(2, 2)
    optimG, optimD = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    with doctor(G=G, D=D, optimG=optimG, optimD=optimD):
        t = torch.tensor([1., 2], requires_grad=True)
        g = G(t)
        d = D(g)
        lossD = d.sum()
        optimD.zero_grad()
        lossD.backward(retain_graph=retain_graph)
        optimD.step()
        lossG = (g + d).sum()
        optimG.zero_grad()
        lossG.backward()


# %% reveals=["freed by: the backward at line", "the first backward freed it"] tags=["predict"]
prediction = dict(kind="freed", tensor="g", line="lossD.backward(retain_graph=retain_graph)")  # SOLUTION: what will the doctor say? dict(kind=..., tensor=..., line=...)
with expect_error(RuntimeError, "backward through the graph a second time") as caught:
    seed001(retain_graph=False)
check_diagnosis(prediction, caught.error.diagnosis)

# %% [markdown]
# Its `not:` line already says what `retain_graph=True` would do here. Seed 001 tried it (on Colab, whose
# ipykernel is 6.17, the `DoctorWarning` may come after the error's lines instead of before them):

# %%
with expect_error(RuntimeError, "is at version 2; expected version 1"):
    seed001(retain_graph=True)

# %% [markdown]
# Seed 001 explains both failures itself, as the doctor does: without `retain_graph`, the graph from G to D is
# freed by the first backward; with it, `optimD.step()` has changed D's parameters in place, and `lossG` depends on
# D's output `d`.

# %% [markdown]
# **Seed 003's strategy 1** (`gan_lessons.strategies.retain_graph_seed003`): the lines named are inside the strategy
# function, which is exactly the code to fix.

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()
opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
noise = lambda n: torch.randn(n, G.z_dim)
with expect_error(RuntimeError, "modified by an inplace operation"):
    with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
        strategies.retain_graph_seed003(G, D, opt_G, opt_D, x_real, noise)

# %% [markdown]
# **Seed 004's model1/model2 loop**: two losses, each with its own optimizer. Predict first.

# %% reveals=["freed by: the backward at line \\d+ \\(`l2", "through `a`"] tags=["predict"]
prediction = dict(kind="freed", tensor="a", line="l2.backward()")  # SOLUTION: what will the doctor say? dict(kind=..., tensor=..., line=...)
torch.manual_seed(0)
model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
optimizer1 = optim.Adam(model1.parameters(), lr=0.001, betas=(0.5, 0.999))
optimizer2 = optim.Adam(model2.parameters(), lr=0.001, betas=(0.5, 0.999))
loss = nn.CrossEntropyLoss()
data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
with expect_error(RuntimeError, "backward through the graph a second time") as caught:
    with doctor(model1=model1, model2=model2, optimizer1=optimizer1, optimizer2=optimizer2):
        a = model1(data)
        b = model2(a)
        l1, l2 = loss(a, label), loss(b, label)
        optimizer2.zero_grad()
        l2.backward()
        optimizer2.step()
        optimizer1.zero_grad()
        l1.backward()
check_diagnosis(prediction, caught.error.diagnosis)

# %% [markdown]
# **Seed 001's leaf error** and **its non-leaf `.grad`**:

# %%
a = torch.tensor([1., 2, 3], requires_grad=True)
with expect_error(RuntimeError, "leaf Variable that requires grad"):
    with doctor(a=a):
        c = a * 2
        a += 1

# %%
G = nn.Linear(2, 2)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)   # PyTorch's own warning; the doctor's diagnosis follows
    warnings.simplefilter("always", DoctorWarning)
    with doctor(G=G) as doc:
        x_fake = G(torch.randn(3, 2))
        x_fake.sum().backward()
        x_fake.grad
