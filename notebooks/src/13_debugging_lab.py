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
# # Lesson 13 · Debugging lab
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/13_debugging_lab.ipynb)
#
# [中文版](zh/13_debugging_lab.ipynb) · [Student copy](student/13_debugging_lab.ipynb)
#
# **Goal.** Fix six broken training steps taken from public bug reports, the way they break in real code: two or
# three mistakes in one step, some loud (an error), some silent (it runs, and trains the wrong thing), and for some
# a fix people post that makes the error go away and leaves the training wrong. Fix each one yourself first, with
# what lessons 01 to 10 taught and the grader's feedback; then, in the side road after the exercises, see what the
# autograd doctor says about the same six.
#
# **Material.** Each step keeps the names and the shape of the code in its report, scaled down to tiny networks
# that a CPU runs. The reports, all public:
#
# | lab | the code | reports |
# |---|---|---|
# | 1 | SRGAN's training step | [leftthomas/SRGAN#89](https://github.com/leftthomas/SRGAN/issues/89) |
# | 2 | BigGAN's `train()` | [ajbrock/BigGAN-PyTorch#25](https://github.com/ajbrock/BigGAN-PyTorch/issues/25) |
# | 3 | a WGAN-GP critic and its critic iteration | [Zeleni9/pytorch-wgan#40](https://github.com/Zeleni9/pytorch-wgan/issues/40), [Lornatang/WassersteinGAN_GP-PyTorch#2](https://github.com/Lornatang/WassersteinGAN_GP-PyTorch/issues/2), [kongyanye/cwgan-gp#6](https://github.com/kongyanye/cwgan-gp/issues/6) |
# | 4 | a mixed-precision SR-GAN step | [nerfstudio-project/nerfacc#307](https://github.com/nerfstudio-project/nerfacc/issues/307), [neosr-project/neosr#9](https://github.com/neosr-project/neosr/pull/9), [neosr-project/neosr#50](https://github.com/neosr-project/neosr/pull/50) |
# | 5 | an RNN regression tutorial | [MorvanZhou/PyTorch-Tutorial#57](https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57) |
# | 6 | a compiled GAN with an R1 penalty and an EMA | [pytorch/pytorch#91469](https://github.com/pytorch/pytorch/issues/91469), [pytorch/pytorch#92348](https://github.com/pytorch/pytorch/pull/92348), [pytorch/pytorch#92893](https://github.com/pytorch/pytorch/pull/92893), [wandb/senpai#2899](https://github.com/wandb/senpai/pull/2899) |
#
# **How a fix is graded: by what it does, not by its text.** The grader runs your fixed step, for one to four
# calls, on its own small models, optimizers and batches, and records, each time any optimizer calls `step()`, the
# gradient it steps on. It runs the reference fix on the same models and batches and compares, optimizer by
# optimizer and step by step. Its feedback names the first wrong one: which optimizer, at which step, and what its
# gradient was (its norm beside the reference's, and its direction), and names the wrong fixes it knows. Any code that steps on the right gradients passes, however it is written, where
# the lab asks nothing more (lab 1 also counts the backward passes that reach G, lab 4 checks the scale).
#
# **How to work.** Each section runs the broken step as it was and shows what a user meets: its error, or what the
# grader measures when nothing raises. Find the fault, copy the broken body into the exercise's function below it
# and fix it there. Each lab also asks, once its broken step has run, where the fault shows: answer it before you
# run that cell.
# The report behind each step, its thread, the cause and the fix come after the step's grader (in
# the student copy, at the end): read them once yours passes. This lab takes a **double slot**: about 95 minutes
# at a careful pace, about fourteen per lab; the round with the doctor after the exercises is a side road.

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
import math
from gan_lessons import exercises
from gan_lessons.exercises.lesson13 import (Discriminator, discriminator_loss, first_wrong_step, generator_loss,
                                           gradient_ratio, mixes_samples, show_log, step_that_clears_the_error,
                                           toggle_grad)


# %% [markdown]
# ## 1 · SRGAN: an error at G's backward
#
# **Why it matters.** The most common GAN error in public reports, with the fix posted most often beside it.
#
# **The code.** SRGAN's training step, with the names and shape of its code: D's loss on a real and a generated
# batch and D's step, then G's loss and G's step. Our `netD` ends in a sigmoid and `generator_criterion` keeps
# SRGAN's image loss and its adversarial term (`0.001 * mean(1 - out_labels)`); the VGG and TV terms are left out.
# The step runs twice, on two batches. Run it, and read what the grader says.

# %% reveals=["optimizerD\\.step\\(\\) changes D's weights", "clears the error -> 'optimizerD'"] tags=["predict"]
def srgan_step_broken(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    real_img = target
    z = data
    fake_img = netG(z)
    netD.zero_grad()
    real_out = netD(real_img).mean()
    fake_out = netD(fake_img).mean()
    d_loss = 1 - real_out + fake_out
    d_loss.backward(retain_graph=True)
    optimizerD.step()
    netG.zero_grad()
    g_loss = generator_criterion(fake_out, fake_img, real_img)
    g_loss.backward()
    optimizerG.step()

prediction = "optimizerD"  # SOLUTION: make one optimizer's step() do nothing and the error goes away: which one, "optimizerD" or "optimizerG"?
broken_ok = exercises.check_srgan_step(srgan_step_broken)
check("the optimizer whose step, skipped, clears the error", prediction,
      step_that_clears_the_error("srgan", srgan_step_broken),
      why="optimizerD.step() changes D's weights in place, and a backward after it still needs them as they were.")


# %% [markdown]
# **Fix it.** There are two mistakes: the one that raises, and one that raises nothing and costs work. The grader
# also knows two ways of making the error go away that step on wrong gradients.

# %%
def srgan_step(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """One SRGAN step: D's step, then G's step."""
    ### BEGIN SOLUTION
    real_img = target
    z = data
    fake_img = netG(z)
    netD.zero_grad()
    real_out = netD(real_img).mean()
    fake_out = netD(fake_img.detach()).mean()
    d_loss = 1 - real_out + fake_out
    d_loss.backward()
    optimizerD.step()
    netG.zero_grad()
    fake_out = netD(fake_img).mean()
    g_loss = generator_criterion(fake_out, fake_img, real_img)
    g_loss.backward()
    optimizerG.step()
    ### END SOLUTION

my_answer = srgan_step  # SOLUTION: point this at your srgan_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_srgan_step(my_answer)
assert solved, "srgan_step: not solved yet, or not right: the lines above say what is missing"


# %% [markdown] tags=["read-after-exercises"]
# **The report, and what was wrong (lab 1).** In leftthomas/SRGAN#89, SRGAN's loop computes D's output on the fake
# batch once, `fake_out`, uses it in `d_loss`, calls `d_loss.backward(retain_graph=True)` and `optimizerD.step()`,
# and then builds G's loss from the same `fake_out`. On torch 1.5 and later that raises the version error on D's last
# weight: G's backward goes through D's forward from before the step, whose saved weight the step changed in place.
# In the thread, one answer moves both `step()` calls after both backwards; it runs, and D then steps on d_loss's
# gradient plus g_loss's, which went back through netD too. The second mistake: D's loss on the undetached fake sends a backward into G that `netG.zero_grad()`
# throws away. The fix: D's loss on `fake_img.detach()`, and G's loss through a new forward of the D that has
# stepped.

# %% [markdown]
# ## 2 · BigGAN: nothing raises
#
# **Why it matters.** A silent bug in a widely copied code base.
#
# **The code.** BigGAN-PyTorch's `train()` from `train_fns.py`: `config['num_D_steps']` D steps, each adding up
# `config['num_D_accumulations']` backwards before it steps, then G's step. Here `num_D_steps` is 2 and
# `num_D_accumulations` is 3, and `train` runs twice. Nothing raises. The cell below runs `train` as written, as
# the grader does, and prints its training log: the value of each loss a backward starts from, call by call, next to
# the reference fix's on the same models and batches. Read it before you go on: how would you know from a log
# like this that something is wrong?

# %%
def train_broken(G, D, GD, z_, config, x):
    G.optim.zero_grad()
    D.optim.zero_grad()
    x = torch.split(x, config['batch_size'])
    counter = 0
    if config['toggle_grads']:
        toggle_grad(D, True)
        toggle_grad(G, False)
    for step_index in range(config['num_D_steps']):
        for accumulation_index in range(config['num_D_accumulations']):
            z_.normal_()
            D_fake, D_real = GD(z_[:config['batch_size']], x[counter], train_G=False)
            D_loss_real, D_loss_fake = discriminator_loss(D_fake, D_real)
            D_loss = (D_loss_real + D_loss_fake) / float(config['num_D_accumulations'])
            D_loss.backward()
            counter += 1
        D.optim.step()
    if config['toggle_grads']:
        toggle_grad(D, False)
        toggle_grad(G, True)
    G.optim.zero_grad()
    for accumulation_index in range(config['num_G_accumulations']):
        z_.normal_()
        D_fake = GD(z_, train_G=True)
        G_loss = generator_loss(D_fake) / float(config['num_G_accumulations'])
        G_loss.backward()
    G.optim.step()

log = show_log("biggan", train_broken)

# %% reveals=["first D step on a wrong gradient -> 2", "something between the two D steps"] tags=["predict"]
prediction = 2  # SOLUTION: the grader runs train twice, two D steps each: which of those four D steps is the first on a wrong gradient? (1 to 4)
broken_ok = exercises.check_biggan_train(train_broken)
check("the first D step on a wrong gradient", prediction, first_wrong_step("biggan", train_broken, "D.optim"),
      why="the first D step is on the reference's gradient and the second is not: look for something between the two "
          "D steps. (After a wrong step the weights differ, and so does every later gradient.)")


# %% [markdown]
# **Fix it.** The grader also knows a second wrong version, which changes what each D step adds up.

# %%
def train(G, D, GD, z_, config, x):
    """BigGAN's train(): num_D_steps D steps, each on num_D_accumulations backwards, then a G step."""
    ### BEGIN SOLUTION
    G.optim.zero_grad()
    x = torch.split(x, config['batch_size'])
    counter = 0
    if config['toggle_grads']:
        toggle_grad(D, True)
        toggle_grad(G, False)
    for step_index in range(config['num_D_steps']):
        D.optim.zero_grad()
        for accumulation_index in range(config['num_D_accumulations']):
            z_.normal_()
            D_fake, D_real = GD(z_[:config['batch_size']], x[counter], train_G=False)
            D_loss_real, D_loss_fake = discriminator_loss(D_fake, D_real)
            D_loss = (D_loss_real + D_loss_fake) / float(config['num_D_accumulations'])
            D_loss.backward()
            counter += 1
        D.optim.step()
    if config['toggle_grads']:
        toggle_grad(D, False)
        toggle_grad(G, True)
    G.optim.zero_grad()
    for accumulation_index in range(config['num_G_accumulations']):
        z_.normal_()
        D_fake = GD(z_, train_G=True)
        G_loss = generator_loss(D_fake) / float(config['num_G_accumulations'])
        G_loss.backward()
    G.optim.step()
    ### END SOLUTION

my_answer = train  # SOLUTION: point this at your train

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_biggan_train(my_answer)
assert solved, "biggan_train: not solved yet, or not right: the lines above say what is missing"


# %% [markdown] tags=["read-after-exercises"]
# **The report, and what was wrong (lab 2).** In ajbrock/BigGAN-PyTorch#25, `D.optim.zero_grad()` is called once
# at the top of `train()`, before the loop over the D steps, so every D step after the first steps on its own
# gradient plus all the ones before. The author: "Good catch--this was a typo!", fixed it, and noted that the main
# training script is not affected, since it trains with `num_D_steps=1` by default. The fix: reset D's gradients at
# the start of each D step, before its accumulation loop (inside that loop, it throws away every micro-batch but
# the last).

# %% [markdown]
# ## 3 · WGAN-GP: a penalty that runs
#
# **Why it matters.** A penalty can look like WGAN-GP's, run, and train something else.
#
# **The code.** WGAN-GP penalises the norm of the critic's gradient for each input on its own. The critic below is
# Zeleni9's (pytorch-wgan), scaled down to 8x8 pixels; `train_critic` is one iteration of its critic loop (the
# random `z` and `eta` come in as arguments), run three times. The cell below prints its training log next to the
# reference fix's: each loss a backward starts from (`-D(real)`, `D(fake)`, the penalty), iteration by iteration.

# %%
def make_critic_broken(channels):
    return Discriminator(channels)

def train_critic_broken(D, G, d_optimizer, images, z, eta, lambda_term=10):
    one = torch.tensor(1.0)
    mone = one * -1
    D.zero_grad()
    d_loss_real = D(images).mean()
    d_loss_real.backward(mone)
    fake_images = G(z)
    d_loss_fake = D(fake_images).mean()
    d_loss_fake.backward(one)
    interpolated = eta * images.data + (1 - eta) * fake_images.data
    interpolated.requires_grad_(True)
    prob_interpolated = D(interpolated)
    gradients = torch.autograd.grad(outputs=prob_interpolated, inputs=interpolated,
                                    grad_outputs=torch.ones(prob_interpolated.size()),
                                    create_graph=True, retain_graph=True)[0]
    grad_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * lambda_term
    grad_penalty.backward()
    d_optimizer.step()

log = show_log("wgan_gp", train_critic_broken, make_critic_broken)

# %% reveals=["output for image 0 when image 1 changes -> 'moves'", "does not look at one image at a time"] tags=["predict"]
prediction = "moves"  # SOLUTION: in training mode, image 1 of a batch changes: does this critic's output for image 0 "move" or "stay"?
broken_ok = exercises.check_wgan_gp(make_critic_broken, train_critic_broken)
mixed = mixes_samples(make_critic_broken(1))
check("the critic's output for image 0 when image 1 changes", prediction, "stays" if mixed == 0 else "moves",
      why="its output for image 0 has a gradient with respect to the other images of the batch: the critic does not "
          "look at one image at a time.")


# %% [markdown]
# **Fix it.** `make_critic(channels)` returns the critic, `train_critic` one critic iteration. The grader judges the
# critic by what it computes, image by image, and then runs the reference's critic iteration on your own critic and
# compares your `train_critic`'s gradients with it.

# %%
def make_critic(channels):
    """Zeleni9's critic."""
    ### BEGIN SOLUTION
    D = Discriminator(channels)
    for i, layer in enumerate(D.main_module):
        if isinstance(layer, nn.BatchNorm2d):
            D.main_module[i] = nn.InstanceNorm2d(layer.num_features, affine=True)
    return D
    ### END SOLUTION

def train_critic(D, G, d_optimizer, images, z, eta, lambda_term=10):
    """One critic iteration: -D(real) + D(fake) + lambda * (|grad D(interpolated)| - 1)^2, per sample."""
    ### BEGIN SOLUTION
    one = torch.tensor(1.0)
    mone = one * -1
    D.zero_grad()
    d_loss_real = D(images).mean()
    d_loss_real.backward(mone)
    fake_images = G(z)
    d_loss_fake = D(fake_images.detach()).mean()
    d_loss_fake.backward(one)
    interpolated = (eta * images + (1 - eta) * fake_images.detach()).requires_grad_(True)
    prob_interpolated = D(interpolated)
    gradients = torch.autograd.grad(outputs=prob_interpolated, inputs=interpolated,
                                    grad_outputs=torch.ones(prob_interpolated.size()),
                                    create_graph=True, retain_graph=True)[0]
    grad_penalty = ((gradients.view(gradients.size(0), -1).norm(2, dim=1) - 1) ** 2).mean() * lambda_term
    grad_penalty.backward()
    d_optimizer.step()
    ### END SOLUTION

my_critic = make_critic  # SOLUTION: point this at your make_critic
my_answer = train_critic  # SOLUTION: point this at your train_critic

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_wgan_gp(my_critic, my_answer)
assert solved, "wgan_gp: not solved yet, or not right: the lines above say what is missing"


# %% [markdown] tags=["read-after-exercises"]
# **The reports, and what was wrong (lab 3).** The paper says "no critic batch normalization" and recommends layer
# normalisation instead, and several public WGAN-GP critics keep BatchNorm anyway (the issues on Lornatang's and
# kongyanye's code ask why): BatchNorm makes each image's output depend on the rest of its batch, so the gradient
# for one sample mixes in the others. Zeleni9's own critic uses `nn.InstanceNorm2d(C, affine=True)` for that reason
# (the critic above had BatchNorm in its place), and its issue #40 found the other mistake: the penalty takes
# `gradients.norm(2, dim=1)` of a `[batch, 1, 32, 32]` gradient, a norm over one channel, that is `|g|` element by
# element. Both are silent. The fix: any per-sample normalisation (InstanceNorm, `GroupNorm(1, C)`, layer norm), and
# the norm of each sample's flattened gradient.

# %% [markdown]
# ## 4 · Mixed precision: an SR-GAN step under autocast
#
# **Why it matters.** Mixed precision multiplies the loss by a scale before backward and takes it back out before
# each step; a step that gets this wrong still runs.
#
# **The code.** An SR-GAN step in the style of neosr (a super-resolution GAN trainer), under bfloat16 autocast on
# the CPU: G's step with D frozen, then D's, with one `GradScaler`. The grader's scaler starts at 2^10 and grows 2x
# at each `update()` without an inf, and the step runs four times; at the second call it makes one of D's scaled
# gradients inf, and at the third one of G's, as an overflow would; the fourth call is clean again. The cell below prints the training log: each
# loss a backward starts from, unscaled (what `loss.item()` prints), and the scale after each call, as written /
# with the reference fix.

# %%
def optimize_parameters_broken(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    for p in net_d.parameters():
        p.requires_grad = False
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = net_g(lq)
        l_g_pix = F.l1_loss(output, gt)
        l_g_gan = F.softplus(-net_d(output)).mean()
        l_g_total = l_g_pix + 0.1 * l_g_gan
    optimizer_g.zero_grad()
    scaler.scale(l_g_total).backward()
    optimizer_g.step()
    for p in net_d.parameters():
        p.requires_grad = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        l_d_real = F.softplus(-net_d(gt)).mean()
        l_d_fake = F.softplus(net_d(output.detach())).mean()
    optimizer_d.zero_grad()
    scaler.scale(l_d_real + l_d_fake).backward()
    scaler.step(optimizer_d)
    scaler.update()

log = show_log("amp", optimize_parameters_broken)

# %% reveals=["far from the reference's at the first call -> 'optimizer_g'", "optimizer_d's equals it"] tags=["predict"]
prediction = "optimizer_g"  # SOLUTION: at the first call, does one optimizer step on gradients far from the reference's? Which: "optimizer_g", "optimizer_d" or "neither"?
broken_ok = exercises.check_amp_lab(optimize_parameters_broken)
ratios = {name: gradient_ratio("amp", optimize_parameters_broken, name) for name in ("optimizer_g", "optimizer_d")}
check("the optimizer far from the reference's at the first call", prediction,
      next((name for name, r in ratios.items() if not 0.99 < r < 1.01), "neither"),
      why="the grader's first line above measures it: optimizer_g's gradient norm is far from the reference's, "
          "optimizer_d's equals it.")


# %% [markdown]
# **Fix it.** With Adam a wrong scale barely shows in the losses (Adam divides by the gradient's running size),
# which is how such a step survives. The grader compares the gradients each optimizer steps on, whether each skips
# the call where one of its gradients is inf, and the scale after each call.

# %%
def optimize_parameters(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """G's step (D frozen), then D's, under bfloat16 autocast, with the scaler passed in."""
    ### BEGIN SOLUTION
    for p in net_d.parameters():
        p.requires_grad = False
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = net_g(lq)
        l_g_pix = F.l1_loss(output, gt)
        l_g_gan = F.softplus(-net_d(output)).mean()
        l_g_total = l_g_pix + 0.1 * l_g_gan
    optimizer_g.zero_grad()
    scaler.scale(l_g_total).backward()
    scaler.step(optimizer_g)
    for p in net_d.parameters():
        p.requires_grad = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        l_d_real = F.softplus(-net_d(gt)).mean()
        l_d_fake = F.softplus(net_d(output.detach())).mean()
    optimizer_d.zero_grad()
    scaler.scale(l_d_real + l_d_fake).backward()
    scaler.step(optimizer_d)
    scaler.update()
    ### END SOLUTION

my_answer = optimize_parameters  # SOLUTION: point this at your optimize_parameters

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_amp_lab(my_answer)
assert solved, "amp_lab: not solved yet, or not right: the lines above say what is missing"


# %% [markdown] tags=["read-after-exercises"]
# **The reports, and what was wrong (lab 4).** neosr uses one `GradScaler` for G and D (its PR #50) and had to
# remove a second `scaler.update()` (PR #9). nerfacc's example scales the loss with the scaler and then calls
# `optimizer.step()` itself: "the gradients are now 1024x larger than they should be" (issue #307); there the
# maintainer answered that it was deliberate, in effect `(loss * 1024).backward()`, which trained better with
# tiny-cuda-nn, with no mixed precision (an earlier issue there, #100, gives the reason: gradients near 1e-17, whose
# squares Adam would flush to zero). In the step above, G steps around the scaler: on gradients 1024x
# too large, and on the call where one is inf. The fix: `scaler.step(optimizer_g)` as for D, and one `update()` per
# iteration, after both steps.

# %% [markdown]
# ## 5 · An RNN regression: an error at backward
#
# **Why it matters.** Training code often keeps something from one batch to the next: an RNN's state, a running
# estimate.
#
# **The code.** MorvanZhou's RNN regression tutorial predicts cos from sin, one stretch of the curve per step, and
# carries the RNN's hidden state `h_state` on to the next step. The second cell below is the first fix people reach
# for.

# %% reveals=["loss\\.backward\\(\\) fails -> 2", "comes from the step before"] tags=["predict"]
def train_rnn_broken(rnn, optimizer, loss_func, steps):
    h_state = None
    for step in range(steps):
        start, end = step * math.pi, (step + 1) * math.pi
        t = torch.linspace(start, end, 10)
        x, y = torch.sin(t).view(1, 10, 1), torch.cos(t).view(1, 10, 1)
        prediction, h_state = rnn(x, h_state)
        loss = loss_func(prediction, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

prediction = 2  # SOLUTION: the loop's steps run one after the other: at which step does loss.backward() fail? (1, 2 or 3)
broken_ok = exercises.check_rnn_train(train_rnn_broken)
fails_at = 0
for steps in (1, 2, 3):
    rnn_n, optimizer_n, loss_func_n, _ = exercises.lab_problem("rnn")
    try:
        train_rnn_broken(rnn_n, optimizer_n, loss_func_n, steps)
    except RuntimeError:
        fails_at = steps
        break
check("the step whose loss.backward() fails", prediction, fails_at,
      why="the first step's backward runs and the second's does not: something the second loss depends on comes from "
          "the step before.")


# %%
def train_rnn_retain_graph(rnn, optimizer, loss_func, steps):
    h_state = None
    for step in range(steps):
        start, end = step * math.pi, (step + 1) * math.pi
        t = torch.linspace(start, end, 10)
        x, y = torch.sin(t).view(1, 10, 1), torch.cos(t).view(1, 10, 1)
        prediction, h_state = rnn(x, h_state)
        loss = loss_func(prediction, y)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()

wrong_ok = exercises.check_rnn_train(train_rnn_retain_graph)


# %% [markdown]
# **Fix it**, so that the state still goes on to the next step (the grader knows the fix that throws it away).

# %%
def train_rnn(rnn, optimizer, loss_func, steps):
    """The tutorial's loop: `steps` stretches of the curve, the hidden state carried from one to the next."""
    ### BEGIN SOLUTION
    h_state = None
    for step in range(steps):
        start, end = step * math.pi, (step + 1) * math.pi
        t = torch.linspace(start, end, 10)
        x, y = torch.sin(t).view(1, 10, 1), torch.cos(t).view(1, 10, 1)
        prediction, h_state = rnn(x, h_state)
        h_state = h_state.detach()
        loss = loss_func(prediction, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ### END SOLUTION

my_answer = train_rnn  # SOLUTION: point this at your train_rnn

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_rnn_train(my_answer)
assert solved, "rnn_train: not solved yet, or not right: the lines above say what is missing"


# %% [markdown] tags=["read-after-exercises"]
# **The report, and what was wrong (lab 5).** In MorvanZhou/PyTorch-Tutorial#57 a reader removed the tutorial's
# `h_state = h_state.data`, the line that cuts the state from the previous step's graph, and the second step's
# `loss.backward()` failed: it went back through the first step's graph, already freed. The reporter found that
# `loss.backward(retain_graph=True)` made the error go away, on the torch of 2018 (the tutorial was written for
# 0.4); on today's torch it raises the version error instead, since the optimizer changed the weights the old graph
# saved. The fix: carry the state on cut from its graph, `h_state.detach()` (the tutorial's `.data` does the same
# here, without the version check).

# %% [markdown]
# ## 6 · A compiled GAN: an error in D's step, and an EMA to check
#
# **Why it matters.** `torch.compile` speeds a GAN up without changing its code, nearly.
#
# **The code.** D's step with an R1 penalty, G's step, and an EMA of G's weights (`ema.update(G)`), with G and D
# compiled with `aot_eager`; `ema` was made before G was compiled. The step runs twice.

# %% reveals=["the line that raises -> 'backward'", "made without complaint"] tags=["predict"]
def train_step_broken(G, D, opt_G, opt_D, ema, x_real, z, r1_gamma=10.0):
    x_fake = G(z)
    x_real = x_real.detach().requires_grad_(True)
    real_pred = D(x_real)
    grad_real, = torch.autograd.grad(real_pred.sum(), x_real, create_graph=True)
    r1 = grad_real.pow(2).sum(1).mean()
    loss_D = F.softplus(-real_pred).mean() + F.softplus(D(x_fake.detach())).mean() + r1_gamma / 2 * r1
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    loss_G = F.softplus(-D(x_fake)).mean()
    opt_G.zero_grad()
    loss_G.backward()
    opt_G.step()
    ema.update(G)

prediction = "backward"  # SOLUTION: which raises, the autograd.grad(...) line or loss_D.backward()? ("grad" or "backward")
broken_ok = exercises.check_compiled_step(train_step_broken)
G, D, opt_G, opt_D, ema, x_real, z = exercises.lab_problem("compiled")
x = x_real.detach().requires_grad_(True)
raised_at = "grad"
try:
    g, = torch.autograd.grad(D(x).sum(), x, create_graph=True)
    raised_at = "backward"
    g.pow(2).sum().backward()
    raised_at = "neither"
except RuntimeError:
    pass
check("the line that raises", prediction, raised_at,
      why="the gradient with a graph of its own is made without complaint; differentiating through it again is what "
          "fails.")


# %% [markdown]
# **Fix it.** Two things are wrong, one loud and one silent. The wrong fix the grader knows makes the error go away.

# %%
def train_step(G, D, opt_G, opt_D, ema, x_real, z, r1_gamma=10.0):
    """D's step with an R1 penalty on the real batch, G's step, then the EMA of G."""
    ### BEGIN SOLUTION
    x_fake = G(z)
    x_real = x_real.detach().requires_grad_(True)
    real_pred = D._orig_mod(x_real)
    grad_real, = torch.autograd.grad(real_pred.sum(), x_real, create_graph=True)
    r1 = grad_real.pow(2).sum(1).mean()
    loss_D = F.softplus(-real_pred).mean() + F.softplus(D(x_fake.detach())).mean() + r1_gamma / 2 * r1
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    loss_G = F.softplus(-D(x_fake)).mean()
    opt_G.zero_grad()
    loss_G.backward()
    opt_G.step()
    ema.update(G._orig_mod)
    ### END SOLUTION

my_answer = train_step  # SOLUTION: point this at your train_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_compiled_step(my_answer)
assert solved, "compiled_step: not solved yet, or not right: the lines above say what is missing"

# %% [markdown] tags=["read-after-exercises"]
# **The reports, and what was wrong (lab 6).** A gradient penalty needs the gradient of D's output *with a graph*
# (`create_graph=True`), and a module compiled with an AOT backend (`aot_eager`, `inductor`) cannot be
# differentiated twice: torch raised nothing and gave wrong second derivatives (pytorch#91469) until a pull request
# made it an error (#92348, reverted and relanded as #92893). `backend="eager"` compiles nothing AOT and works.
# Separately, `torch.compile(G)` names G's parameters `_orig_mod.0.weight`, ..., so an EMA keyed by the names of the
# uncompiled G matches none of them and never moves, silently (senpai#2899). The fix: the penalty through
# `D._orig_mod` (the module the compiled one was made from, with the same parameters), and the EMA updated from
# `G._orig_mod`.

# %% [markdown]
# ## Exercises
#
# The six fixes above are this lesson's exercises, each with its grader. One more, for the rest of the double
# slot if there is time: take a training script of your own, run it under `python -m gan_lessons doctor
# train.py` (lesson 07), and then compare, for one or two steps, the gradients its optimizers step on with a slow,
# obvious version of the same step, as the graders here do (`gan_lessons.exercises.recorded_steps` records them).

# %% [markdown]
# ## Going further · The same six under the doctor
#
# *Outside the lesson's planned time: a side road for whoever wants it, after the exercises.*
#
# **Why it matters.** You fixed them without the doctor. Here is what `%load_ext gan_lessons` says about each broken
# version, run once on the lab's own models (`exercises.lab_problem(name)` gives a fresh set).
#
# **Predict, then check.** The doctor watches for lessons 01 to 03's three errors and for a few silent patterns
# (lesson 07). Of the six broken steps, how many will it name or warn about?

# %%
# %load_ext gan_lessons

# %%
import warnings
from gan_lessons.doctor import DoctorWarning, active
from gan_lessons.lesson import headline
warnings.simplefilter("always", DoctorWarning)
warnings.filterwarnings("ignore", message="Using `torch.compile\\(module\\)` when there are global hooks")
said = {}

def doctor_said(lab_name, seen):
    """What the doctor watching this cell said since it had said `seen` things: each diagnosis's kind and first line."""
    said[lab_name] = [(d.kind, headline(d.summary)) for d in active().diagnoses[seen:]]
    for kind, line in said[lab_name]:
        print(tr("{lab_name}: {kind}: {line}", lab_name=lab_name, kind=kind, line=line))
    if not said[lab_name]:
        print(tr("{lab_name}: the doctor says nothing", lab_name=lab_name))


# %% reveals=["found three of the six", "names or warns about -> 3"] tags=["predict"]
prediction = 3  # SOLUTION: of the six broken steps, each run once with the doctor watching, how many will it name or warn about?
broken = {"srgan": (srgan_step_broken, "modified by an inplace operation"), "biggan": (train_broken, None),
          "wgan_gp": (train_critic_broken, None), "amp": (optimize_parameters_broken, None),
          "rnn": (train_rnn_broken, "backward through the graph a second time"),
          "compiled": (train_step_broken, "does not currently support double backward")}
for lab_name, (step, error) in broken.items():
    seen = len(active().diagnoses)
    args = exercises.lab_problem(lab_name)     # made with the doctor watching: its hooks are global ones
    if error:
        with expect_error(RuntimeError, error):
            step(*args)
    else:
        step(*args)
    doctor_said(lab_name, seen)
check("broken steps the doctor names or warns about", prediction, sum(bool(lines) for lines in said.values()),
      why="the two errors of lessons 02 and 03 (SRGAN's, the RNN's) and BigGAN's gradients applied again; the other "
          "three are outside what it watches.")

# %%
# %unload_ext gan_lessons

# %%
named = [name for name, lines in said.items() if any(kind != "suspicious" for kind, _ in lines)]
warned = [name for name, lines in said.items() if lines and all(kind == "suspicious" for kind, _ in lines)]
claim("the doctor diagnoses the two errors it knows (SRGAN's version error, the RNN's freed graph)",
      named == ["srgan", "rnn"], shown=", ".join(named), on="this package's doctor")
claim("it warns about BigGAN's gradients applied again, and says nothing about the other three",
      warned == ["biggan"] and all(not said[k] for k in ("wgan_gp", "amp", "compiled")), on="this package's doctor")

# %% [markdown]
# So the doctor found three of the six: the two errors of lessons 02 and 03, named down to the tensor
# and the line that changed or freed it, and BigGAN's missing `zero_grad()`. The other three are outside what it
# watches: a penalty that is not per sample, a scaler bypassed by one optimizer, and `torch.compile`'s own error
# (not one of the lessons' three, so it passes through untouched). For those, what found them was the comparison
# this lab's grader makes: the gradients every optimizer steps on, against a reference you trust. On your own
# code, the reference can be the same step written the slow, obvious way (no compile, no autocast, float64, one
# sample at a time), run on a copy of the models for a step or two.

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# | lab | loud or silent | the bugs | the wrong fix that hides it |
# |---|---|---|---|
# | 1 SRGAN | loud | G's loss through D's forward from before `optimizerD.step()`; D's loss on an undetached fake (waste) | both steps last; an older torch |
# | 2 BigGAN | silent | `zero_grad()` once before all D steps | `zero_grad()` inside the accumulation loop |
# | 3 WGAN-GP | silent | BatchNorm in the critic; the norm over a 1-channel dimension | |
# | 4 AMP | silent | G stepped around the scaler: 1024x gradients | an `update()` per optimizer |
# | 5 RNN | loud | the hidden state carried with its graph | `retain_graph=True` (another error); resetting the state |
# | 6 compile | loud + silent | a double backward through an AOT-compiled D; an EMA keyed by names compiling changed | dropping `create_graph=True` |
