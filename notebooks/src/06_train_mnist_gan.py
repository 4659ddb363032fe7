# ---
# jupyter:
#   accelerator: GPU
#   colab:
#     gpuType: T4
#     provenance: []
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
# # Lesson 06 · Train the full MNIST GAN
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/06_train_mnist_gan.ipynb)
#
# [中文版](zh/06_train_mnist_gan.ipynb) · [Student copy](student/06_train_mnist_gan.ipynb)
#
# **Goal.** Put the course together. Train seed 000's GAN on MNIST with the update strategy you pick, watch the
# samples improve, read the loss curves for what they can and cannot tell you, and measure the digits with a
# number instead of squinting at them.
#
# **Material.** Seed 000's Generator (Linear, BatchNorm, PixelShuffle, Conv) and Discriminator (`gan_lessons.models`),
# with `z_dim = 64`, plus one `nn.Tanh()` at the end of G (section 6 compares one run with it and one without);
# the strategies of lesson 05.
#
# On a GPU this notebook trains the full run (20 epochs of 60,000 images). On a CPU, and under CI, quick mode
# trains 400 steps on 6,400 images at three times the learning rate, about a minute on two CPU cores: enough for
# blurry digits of all ten classes, checked with a classifier. It also shows a 20-epoch run that this project's
# command line produced beforehand, with the metrics recorded beside it. Each cell says which case it ran.

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
import dataclasses
import json
import matplotlib.pyplot as plt
from gan_lessons import data, metrics, plots, training
from gan_lessons.models import Discriminator, Generator
from gan_lessons.training import TrainConfig

# %% [markdown]
# ## 1 · The data lives on the device
#
# **Why it matters.** A training step of these small models is short, so any work done per image, every step,
# shows up in the step time. A `DataLoader` over torchvision's MNIST turns every image into a PIL image and
# back into a tensor, one at a time, in Python. MNIST is small, so the trainer copies all 60,000 training images
# to the device once, as one tensor, and slices batches out of it. Nothing is done per image. (How much this
# saves depends on the machine; this lesson does not measure it.)
#
# `data.mnist_tensors` returns that tensor, and the trainer keeps it as it comes. G's samples are floats in
# [-1, 1]. Predict how the real images are stored, then run the cell.

# %% reveals=["uint8", "\\b47(\\.0)? MB"] tags=["predict"]
prediction = torch.uint8  # SOLUTION: the dtype of the training images as data.mnist_tensors returns them (a torch dtype)?
images, labels = data.mnist_tensors(train=True)
check("images.dtype", prediction, images.dtype,
      why=f"one byte per pixel: {images.numel() * images.element_size() / 1e6:.0f} MB for all 60,000 (float32 would "
          "take 4 times that); each batch is converted to floats in [-1, 1] when it is used.")

# %%
print(tr("training images: {shape} {dtype} {mb:.1f} MB", shape=tuple(images.shape), dtype=images.dtype,
         mb=images.numel() * images.element_size() / 1e6))
batch = data.to_unit_range(images[:64])
print(tr("one batch in G's range: {shape} min {low} max {high}", shape=tuple(batch.shape), low=batch.min().item(),
         high=batch.max().item()))
claim("the 60,000 training images take under 50 MB as uint8", images.dtype == torch.uint8 and len(images) == 60000 and images.numel() * images.element_size() < 50e6,
      on='the MNIST files on this machine')

# %% [markdown]
# ## 2 · The training loop calls the strategy; nothing is hidden
#
# **Why it matters.** `gan_lessons.training` is one loop: pick a batch, call the strategy function from lesson 05
# (`zero_grad`, `detach`, `backward`, `step` are all in there), accumulate the losses **on the device** (an
# `.item()` per step would wait for the GPU every step), and write a checkpoint every epoch. The configuration is
# a small dataclass; a run changes only what differs.
#
# Two questions before it runs. Seed 000's G turns 64 numbers into 784 pixels; its D turns 784 pixels into one
# number. Which of the two has more parameters?

# %% reveals=["1,654,121", "1,640,033"] tags=["predict"]
prediction = False  # SOLUTION: does seed 000's D have more parameters than its G? (True/False)
count = lambda net: sum(p.numel() for p in net.parameters())
G_seed, D_seed = Generator(), Discriminator()
check("D has more parameters than G", prediction, count(D_seed) > count(G_seed),
      why=f"G has {count(G_seed):,}, D {count(D_seed):,}: nearly equal. Most of each is one Linear between 512 and "
          f"64 x 7 x 7 = 3,136 numbers, turned around: G's 512 -> 3,136 holds {count(G_seed.net[3]):,}, D's "
          f"3,136 -> 512 holds {count(D_seed.net[5]):,}.")

# %% [markdown]
# The trainer cuts the images it keeps into batches of 64, every epoch in a new order. With 1,000 images, how many
# steps make one epoch? (1,000 is not a multiple of 64.)

# %% reveals=["1000 // 64 = 15", "drops the incomplete last batch"] tags=["predict"]
prediction = 15  # SOLUTION: steps per epoch when the trainer keeps 1,000 images, batch size 64?
small = training.Trainer(TrainConfig(limit=1000, out=str(training.RUNS / "lesson06"), device=str(device)))
check("steps per epoch", prediction, small.steps_per_epoch,
      why=f"1000 // 64 = {small.steps_per_epoch}: the trainer drops the incomplete last batch ({1000 % 64} images), "
          "so every step has the same shape; the next epoch's new order uses them.")

# %%
full = TrainConfig(out=str(training.RUNS / "lesson06"), device=str(device))   # RUNS: outside notebooks/
quick = dataclasses.replace(full, epochs=4, limit=6400, lr_G=6e-4, lr_D=6e-4)   # 400 steps
cfg = quick if QUICK else full
changed = {k: v for k, v in dataclasses.asdict(cfg).items() if v != getattr(TrainConfig(), k) and k != "out"}
print(tr("quick mode: {changed}", changed=changed) if QUICK else tr("full run: {changed}", changed=changed))
print(tr("steps per epoch: {n}", n=cfg.limit // cfg.batch_size if cfg.limit else 60000 // cfg.batch_size))

# %% tags=["nbval-ignore-output"]
from tqdm.auto import tqdm
from IPython.display import clear_output

grids = []
bar = tqdm(total=cfg.epochs, desc=tr("training (quick)") if QUICK else tr("training (full)"), unit=tr("epoch"))
def on_epoch(trainer):
    grids.append(trainer.sample().cpu())
    bar.update(1)
    bar.set_postfix(loss_D=trainer.history[-1]["loss_D"], loss_G=trainer.history[-1]["loss_G"])

trainer = training.train(cfg, on_epoch=on_epoch)
bar.close()
clear_output()   # the live bar goes; its finished line stays (a stored widget would read 0%)
print(bar)
print(tr("seconds per epoch: {seconds}", seconds=[h["seconds"] for h in trainer.history]))

# %% [markdown]
# The grid uses the same 64 noise vectors after every epoch, so the panels are comparable:

# %%
fig, axes = plt.subplots(1, len(grids), figsize=(3 * len(grids), 3.2))
for i, (ax, grid) in enumerate(zip(axes, grids)):
    ax.imshow(plots.grid_array(grid))
    ax.set_title(tr("epoch {n}", n=i + 1))
    ax.axis("off")
fig.suptitle(tr("fixed-noise samples (quick mode: {n} images)", n=cfg.limit) if QUICK
             else tr("fixed-noise samples (full run)"))
plt.show()

# %% [markdown]
# ## 3 · What the losses do and don't tell you
#
# **Why it matters.** In ordinary training a falling loss means progress. A GAN is a two-player game: `loss_D`
# and `loss_G` measure each player against the **current** other player, who keeps changing. A falling `loss_D`
# may mean D is winning and G's gradient carries little useful signal; a flat pair of curves may mean a healthy standoff
# or a collapse onto a few digits. So read the curves for warnings, not progress:
#
# - `loss_D` near 0 and `loss_G` climbing: D has won. With the non-saturating loss G still gets a strong
#   gradient (lesson 05, section 0), but it only says "be less fake to this D", and D has stopped learning.
# - Both wildly oscillating: the learning rates are too high for the game.
# - Smooth curves tell you nothing about sample quality, or about how many digit classes G produces.

# %%
plots.loss_figure({cfg.strategy: trainer.history}, title=tr("losses per epoch (this run)"))
plt.show()

# %% [markdown]
# ## 4 · Measuring the digits
#
# **Why it matters.** To judge the samples we need a number. A small classifier, trained once by this project
# (`python -m gan_lessons classifier`) and shipped in the package, gives three:
#
# - **MNIST-FID**: the Fréchet distance between the classifier's 64-d penultimate features of generated images and
#   of the 10,000 test images. Lower is better.
# - **classifier score**: the Inception Score with this classifier, from 1 (one class, or unsure) to 10.
# - **coverage**: the share of each digit among the samples; mode collapse shows up as zeros.
#
# Real training images score the baseline a perfect generator would reach.

# %%
print(tr("shipped classifier: {record}", record=json.loads((metrics.ASSETS / "classifier.json").read_text())))

# %% tags=["nbval-ignore-output"]
n = 2000 if QUICK else 10000
G = trainer.G.eval().cpu()
with torch.no_grad():
    fakes = torch.cat([G(torch.randn(500, G.z_dim, generator=torch.Generator().manual_seed(i))) for i in range(n // 500)])
ours, real = metrics.evaluate(fakes.clamp(-1, 1)), metrics.baseline(n=n)
torch.manual_seed(cfg.seed)
G_untrained = Generator(cfg.z_dim, cfg.tanh).eval()    # the same architecture, at its initial weights
with torch.no_grad():
    untrained = metrics.evaluate(G_untrained(torch.randn(n, cfg.z_dim)).clamp(-1, 1))
print("{:<24}{:>10}{:>8}  {}".format("", "MNIST-FID", tr("score"), tr("coverage")))
for name, m in ((tr("this run"), ours), (tr("the same G, untrained"), untrained), (tr("real train images"), real)):
    print(f"{name:<24}{m['mnist_fid']:>10.2f}{m['classifier_score']:>8.2f}  {m['coverage']}")
claim("G learned every digit: each of the ten is at least 0.5% of its samples", min(ours["coverage"]) >= 0.005,
      shown=f"rarest digit {min(range(10), key=lambda d: ours['coverage'][d])}: {min(ours['coverage']):.1%}",
      on='this run')
claim("the classifier is confident about its samples (score above 4 of 10)", ours["classifier_score"] > 4,
      shown=f"score {ours['classifier_score']:.2f}", on='this run')
claim("its MNIST-FID is far below (under a third of) the same G's before training", 3 * ours["mnist_fid"]
      < untrained["mnist_fid"], shown=f"MNIST-FID {ours['mnist_fid']:.1f} vs {untrained['mnist_fid']:.1f} untrained",
      on='this run')

# %%
claim("this run's FID is above the real-data baseline", ours["mnist_fid"] > real["mnist_fid"], on='this run')
claim("the coverage shares sum to 1", abs(sum(ours["coverage"]) - 1) < 1e-3, on='this run')

# %% [markdown]
# ## 5 · A longer run, trained beforehand by the command line
#
# **Why it matters.** A quick CPU run only shows the start of training. The package ships a generator that this
# project's own command line trained for 20 epochs (`gan_lessons/assets/generator.pt`). The exact command, the
# device it ran on, its metrics and its score after every epoch (`--eval-each 2000`) are in `generator.json`
# beside it. We load it and show its samples and its recorded metrics; section 6 scores it again.

# %%
record_path = metrics.ASSETS / "generator.json"
if not record_path.exists():
    print(tr("no pretrained generator shipped: train one with `python -m gan_lessons train` and export it"))
else:
    record = json.loads(record_path.read_text())
    G_pre = training.load_generator(metrics.ASSETS / "generator.pt")
    print(tr("loaded the shipped generator | trained on {device} | {epochs} epochs, strategy {strategy} | "
             "command: {command}", device=record["device"], epochs=record["config"]["epochs"],
             strategy=record["config"]["strategy"], command=record["command"]))
    print(tr("recorded metrics (10k samples): {run} | real-train baseline: {baseline}",
             run={k: record["metrics"][k] for k in ("mnist_fid", "classifier_score")},
             baseline={k: record["baseline"][k] for k in ("mnist_fid", "classifier_score")}))
    shares = record["metrics"]["coverage"]
    print(tr("coverage: rarest digit {rare} ({rare_share:.1%}), commonest {common} ({common_share:.1%})",
             rare=min(range(10), key=lambda d: shares[d]), rare_share=min(shares),
             common=max(range(10), key=lambda d: shares[d]), common_share=max(shares)))
    with torch.no_grad():
        sample = G_pre(torch.randn(64, G_pre.z_dim, generator=torch.Generator().manual_seed(0))).clamp(-1, 1)
    plt.figure(figsize=(4, 4))
    plt.imshow(plots.grid_array(sample))
    plt.axis("off")
    plt.title(tr("shipped generator, fixed noise"))
    plt.show()

# %% [markdown]
# Read the coverage line before the picture. A generator that produces only a few digit classes, however
# sharp, has *collapsed* onto those modes: its classifier score falls towards the number of classes it still
# produces, and its FID stays far above the baseline. Neither loss curve shows this: D keeps scoring each batch,
# and G keeps fooling it on the digits it knows. The next section shows such a collapse, and its cause.

# %% [markdown]
# ## 6 · Seed 000's G as written: one run without `tanh`, one with
#
# **Why it matters.** Seed 000's G ends with a plain `Conv2d`: nothing bounds its pixels. The seed's own loop fed
# both models `torch.randn` noise (its `DummyDataLoader`), never digits, so nothing in its listings shows what
# that does to the samples. DCGAN-style generators end with `tanh` to keep G's output in the data's range. This
# suite keeps the seed's G as written (`Generator()`, which lessons 03 to 05 use to reproduce its errors). The
# trainer adds one `nn.Tanh()` (`TrainConfig.tanh = True`), and `python -m gan_lessons train --no-tanh` trains
# the seed's G unchanged. Both were trained for 20 epochs with the same command apart from that flag and the
# output folder (checked below), **one run each**, and both generators ship with the package. First, the range
# of the real pixels:

# %%
x_real = data.to_unit_range(images[:2000])
print(tr("real pixels: min {low} max {high} | share exactly -1: {share}", low=x_real.min().item(),
         high=x_real.max().item(), share=round((x_real == -1).float().mean().item(), 3)))
claim("real pixels lie in [-1, 1], and most of them are exactly -1", x_real.min() >= -1 and x_real.max() <= 1
      and (x_real == -1).float().mean() > 0.5, on='the MNIST files on this machine')

# %% [markdown]
# No real digit has a pixel outside [-1, 1]. Nothing stops the seed's G from making one, but for 20 epochs D
# compared its samples with real digits, which could have taught it to stay inside. Predict before we measure
# 2,000 samples of the shipped generator trained without `tanh`.

# %% reveals=["which no real digit has: (0\\.[5-9]|1\\.0)", "\\d+% of its samples have a pixel outside"] tags=["predict"]
prediction = True  # SOLUTION: after 20 epochs, do more than half of the seed's G's samples have a pixel outside [-1, 1]? (True/False)
shipped = {tr("with Tanh"): "generator", tr("seed's G (--no-tanh)"): "generator_no_tanh"}   # the names as shown
gens = {name: training.load_generator(metrics.ASSETS / f"{stem}.pt") for name, stem in shipped.items()}
z = torch.randn(2000, 64, generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    raw = {name: G_s(z) for name, G_s in gens.items()}          # no clamp: what D sees in training
outside = (raw[tr("seed's G (--no-tanh)")].abs() > 1).flatten(1).any(1).float().mean().item()
check("over half of the samples leave [-1, 1]", prediction, outside > 0.5,
      why=f"{outside:.0%} of its samples have a pixel outside [-1, 1]: training against D did not pull them in.")

# %%
for name, x in raw.items():
    print(tr("{name:<22} pixels from {low:5.2f} to {high:4.2f} | share exactly -1: {at_minus_one:.3f} | share "
             "outside [-1, 1]: {outside:.3f}", name=name, low=x.min().item(), high=x.max().item(),
             at_minus_one=(x == -1).float().mean().item(), outside=(x.abs() > 1).float().mean().item()))
    print(f"{'':<22}", tr("samples with a pixel outside [-1, 1], which no real digit has: {share:.3f}",
                          share=(x.abs() > 1).flatten(1).any(1).float().mean().item()))

# %% [markdown]
# D can use such pixels as a cue that has nothing to do with the strokes. That is a likely reason for what
# follows, not a proven one: here we measure only the symptom (above) and the outcome of the two runs (below).
#
# Now the outcome. Both records hold the score after every epoch, so we can plot how each run got there. Then
# both generators are scored again, live, on the 2,000 samples drawn above.

# %%
records = {name: json.loads((metrics.ASSETS / f"{stem}.json").read_text()) for name, stem in shipped.items()}
a, b = (r["config"] for r in records.values())
differ = sorted(k for k in a if a.get(k) != b.get(k))
claim("the two shipped runs differ only in the tanh flag and the output folder", differ == ["out", "tanh"], differ,
      on='the two runs shipped with the lessons')
plots.fid_figure({name: r["eval_each_epoch"] for name, r in records.items()},
                 title=tr("MNIST-FID after each epoch (2,000 samples)"))
plt.show()
live = {name: metrics.evaluate(x.clamp(-1, 1)) for name, x in raw.items()}
print("{:<24}{:>10}{:>8}  {}".format("", "MNIST-FID", tr("score"), tr("digits under 2% of samples")))
for name, m in live.items():
    print(f"{name:<24}{m['mnist_fid']:>10.1f}{m['classifier_score']:>8.2f}  "
          f"{[d for d in range(10) if m['coverage'][d] < 0.02]}")
fig, axes = plt.subplots(1, 2, figsize=(8, 4.3))
for ax, (name, x) in zip(axes, raw.items()):
    ax.imshow(plots.grid_array(x[:64].clamp(-1, 1)))
    ax.set_title(name)
    ax.axis("off")
plt.show()

# %%
tanh_m, seed_m = live[tr("with Tanh")], live[tr("seed's G (--no-tanh)")]
claim("the run with Tanh has the lower MNIST-FID", tanh_m["mnist_fid"] < seed_m["mnist_fid"],
      shown=f"{tanh_m['mnist_fid']:.1f} vs {seed_m['mnist_fid']:.1f}", on='the two runs shipped with the lessons')
claim("the run with Tanh has the higher classifier score", tanh_m["classifier_score"] > seed_m["classifier_score"],
      on='the two runs shipped with the lessons')
claim("the run with Tanh covers every digit with at least 2% of its samples", min(tanh_m["coverage"]) >= 0.02,
      on='the two runs shipped with the lessons')
top_two = sorted(range(10), key=lambda d: -seed_m["coverage"][d])[:2]
share = sum(seed_m["coverage"][d] for d in top_two)
claim("the seed's G, in its one run, collapsed onto 0s and 8s: together they are over 90% of its samples",
      sorted(top_two) == [0, 8] and share > 0.9, shown=f"0: {seed_m['coverage'][0]:.1%}, 8: {seed_m['coverage'][8]:.1%}",
      on='the two runs shipped with the lessons')


# %% [markdown]
# The seed's G runs without an error, and that is the trap: nothing in PyTorch complains, and the losses
# look like a GAN's losses. Only measuring the samples shows what happened: its run collapsed onto two digits,
# 0 and 8, drawn poorly, while the run with `tanh` covers all ten. The two runs differ in one layer with no
# weights, but there is **one run per setting**: this shows what happened to these two runs, not how often it
# happens, and not that the layer alone decides it (another seed of either setting might land elsewhere). To
# say that `tanh` fixes the seed's training you would need several runs per setting, at least 3 seeds each,
# with the spread of their scores; this lesson does not train them.

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - The trainer keeps MNIST on the device as `uint8`, calls the strategy function for each step, keeps losses on
#   the device, and checkpoints atomically; `python -m gan_lessons train --resume` continues a run exactly.
# - GAN losses tell you about the game, not about the samples. Measure the samples: MNIST-FID, classifier score
#   and coverage, always next to the real-data baseline.
# - Seed 000's G has no output activation. It trains without an error; in its one 20-epoch run its pixels left
#   [-1, 1] and it collapsed onto two digits, while one run with one `nn.Tanh()` added covered all ten. One run
#   per setting shows what happened to those runs; it does not show that `tanh` fixes training (that would take
#   at least 3 seeds per setting).
# - The command line writes the grids, a GIF, the loss curve and `metrics.json`: `python -m gan_lessons train --help`.

# %% [markdown]
# ## Exercises
#
# ### Build it: a checkpoint the run resumes from exactly
#
# `python -m gan_lessons train --resume` continues a stopped run so exactly that it ends with the same weights, bit
# for bit, as a run that never stopped. Write both halves of such a checkpoint, for a small GAN (its G has a
# BatchNorm layer) trained with `strategies.d_first_fresh_fake` whose real batch depends on the step number (as an
# epoch's order does):
#
# - `save_state(G, D, opt_G, opt_D, step)` returns the run after `step` steps as plain data (tensors, numbers,
#   dicts of them). A trainer may keep it in memory while the run goes on (the best state so far) and write it to
#   disk later, so it must not change once it is returned.
# - `load_state(state, G, D, opt_G, opt_D)` puts it back into freshly made objects and returns the step to go on
#   from.
#
# The weights alone are not enough: before you write, list everything that decides what the next step does. The
# checker saves after 3 of 6 steps, trains the original run on, sends your state through `torch.save` and
# `torch.load(weights_only=True)` (a checkpoint is data, never code), loads it into objects made with other
# weights and another random state, resumes, and says which piece is missing.

# %%
def save_state(G, D, opt_G, opt_D, step):
    """The run after `step` steps, as plain data that stays as it is while the run goes on."""
    ### BEGIN SOLUTION
    import copy
    state = {"G": G.state_dict(), "D": D.state_dict(),                   # the weights
             "opt_G": opt_G.state_dict(), "opt_D": opt_D.state_dict(),   # Adam's moments and step counts
             "rng": torch.get_rng_state(),                               # decides the next z
             "step": step}                                               # decides the next batch
    return copy.deepcopy(state)    # state_dict() hands out the live tensors, which the next steps change
    ### END SOLUTION


def load_state(state, G, D, opt_G, opt_D):
    """Put the checkpoint back into fresh objects; return the step to go on from."""
    ### BEGIN SOLUTION
    G.load_state_dict(state["G"])
    D.load_state_dict(state["D"])
    opt_G.load_state_dict(state["opt_G"])
    opt_D.load_state_dict(state["opt_D"])
    torch.set_rng_state(state["rng"])
    return state["step"]
    ### END SOLUTION

my_answer = save_state  # SOLUTION: point this at your save_state (no parentheses)

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_resume(my_answer, load_state)
assert solved, "resume: not solved yet, or not right: the lines above say what is missing"

# %% [markdown]
# ## Going further · Two strategies, compared
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** Lesson 05 showed that the alternating orders cost nearly the same. Do they train the same?
# Here two runs from the same seed and the same settings, one per strategy, are compared by their curves and
# their scores. Both must have learned (every digit present) for the comparison to mean anything. On a GPU, the
# full run's epochs show the full curves.

# %% tags=["nbval-ignore-output"]
trained = {cfg.strategy: trainer,   # the run above, and the same settings with g_first's order
           "g_first": training.train(dataclasses.replace(cfg, strategy="g_first", out=str(training.RUNS / "lesson06_g_first")))}
runs = {}
for strategy, t in trained.items():
    G_s = t.G.eval().cpu()
    with torch.no_grad():
        fakes = G_s(torch.randn(2000, G_s.z_dim, generator=torch.Generator().manual_seed(0))).clamp(-1, 1)
    runs[strategy] = (t.history, metrics.evaluate(fakes))
plots.loss_figure({s: h for s, (h, _) in runs.items()}, title=tr("two strategies, same seed"))
plt.show()
for s, (_, m) in runs.items():
    print(tr("{strategy:<20} MNIST-FID {fid:.2f}  score {score:.2f}  rarest digit {rarest:.1%}", strategy=s,
             fid=m["mnist_fid"], score=m["classifier_score"], rarest=min(m["coverage"])))
    claim(f"{s}'s run learned every digit (each at least 0.5% of its samples)", min(m["coverage"]) >= 0.005,
          on='these runs')
