# %% [markdown]
# # Lesson 12 · Debugging lab
#
# **Goal.** Fix six broken training steps taken from public bug reports, the way they break in real code: two or
# three mistakes in one step, some loud (an error), some silent (it runs, and trains the wrong thing), and for some
# a fix people post that makes the error go away and leaves the training wrong. Fix each one yourself first, with
# what lessons 01 to 10 taught and the grader's feedback; then, in section 7, see what the autograd doctor says
# about the same six.
#
# **Material.** Each step keeps the names and the shape of the code in its report, scaled down to tiny networks so
# that it runs in well under a second on a CPU. The reports, all public:
#
# | lab | what | reports |
# |---|---|---|
# | 1 | SRGAN's D and G step | [leftthomas/SRGAN#89](https://github.com/leftthomas/SRGAN/issues/89) |
# | 2 | BigGAN's D steps with gradient accumulation | [ajbrock/BigGAN-PyTorch#25](https://github.com/ajbrock/BigGAN-PyTorch/issues/25) |
# | 3 | a WGAN-GP critic with BatchNorm | [Zeleni9/pytorch-wgan#40](https://github.com/Zeleni9/pytorch-wgan/issues/40), [Lornatang/WassersteinGAN_GP-PyTorch#2](https://github.com/Lornatang/WassersteinGAN_GP-PyTorch/issues/2), [kongyanye/cwgan-gp#6](https://github.com/kongyanye/cwgan-gp/issues/6) |
# | 4 | mixed precision, one `GradScaler`, two optimizers | [nerfstudio-project/nerfacc#307](https://github.com/nerfstudio-project/nerfacc/issues/307), [neosr-project/neosr#9](https://github.com/neosr-project/neosr/pull/9), [neosr-project/neosr#50](https://github.com/neosr-project/neosr/pull/50) |
# | 5 | an RNN's hidden state carried across batches | [MorvanZhou/PyTorch-Tutorial#57](https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57) |
# | 6 | an R1 penalty through a compiled D, an EMA of a compiled G | [pytorch/pytorch#91469](https://github.com/pytorch/pytorch/issues/91469), [pytorch/pytorch#92348](https://github.com/pytorch/pytorch/pull/92348), [wandb/senpai#2899](https://github.com/wandb/senpai/pull/2899) |
#
# **How a fix is graded: by what it does, not by its text.** The grader runs your fixed step, for two or three
# steps, on its own small models, optimizers and batches, and records, each time any optimizer calls `step()`, the
# gradient it steps on. It runs the reference fix on the same models and batches and compares, optimizer by
# optimizer and step by step. Its feedback names the first wrong one: which optimizer, at which step, and what its
# gradient was (so many times the right one; the right one plus what an earlier step left in `.grad`; ...), and
# names the wrong fixes it knows. Any code that steps on the right gradients passes, however it is written.
#
# **How to work.** Each section shows the broken step and what the grader says about it. Copy the broken body
# into the exercise's function below it and fix it there. This lab is planned as a **double slot** (about 100
# minutes): ten minutes to start, about fourteen per lab, and a closing round with the doctor.

# %%
#SETUP

# %%
import math
from gan_lessons import exercises
from gan_lessons.exercises.lesson12 import Discriminator, discriminator_loss, generator_loss, toggle_grad

# %% [markdown]
# ## 1 · SRGAN: D's step, then G's loss through D's old forward
#
# **Why it matters.** The most common GAN error in public reports, with the fix posted most often beside it.
#
# **The report.** SRGAN's training loop computes D's output on the fake batch once, `fake_out`, uses it in
# `d_loss`, calls `d_loss.backward(retain_graph=True)` and `optimizerD.step()`, and then builds G's loss from the
# same `fake_out`. On torch 1.5 and later that raises the version error on D's last weight. In the thread, one
# answer moves both `step()` calls after both backwards. Our `netD` ends in a sigmoid and `generator_criterion`
# keeps SRGAN's image loss and its adversarial term (`0.001 * mean(1 - out_labels)`); the VGG and TV terms are left
# out. The step runs twice, on two batches.

# %%
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

broken_ok = exercises.check_srgan_step(srgan_step_broken)

# %% [markdown]
# **Fix it.** There are two mistakes: the one that raises, and one that only wastes work (a backward that goes
# into G and is thrown away by `netG.zero_grad()`). The grader also knows the fix from the thread (both steps
# last) and what torch before 1.5 computed without complaining: both step on wrong gradients.

# %%
def srgan_step(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """One SRGAN step: D on real and fake, D steps; then G's loss through the D that has just stepped."""
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
solved = exercises.check_srgan_step(my_answer)

# %% [markdown]
# ## 2 · BigGAN: `zero_grad()` once, before every D step
#
# **Why it matters.** A silent bug in a widely copied code base: nothing raises, and D steps on too much.
#
# **The report.** In BigGAN-PyTorch's `train_fns.py`, `D.optim.zero_grad()` is called once at the top of
# `train()`, before the loop over `config['num_D_steps']`; inside it, each D step adds up
# `config['num_D_accumulations']` backwards and then steps. The author: "Good catch--this was a typo!" Nothing
# raises. Here `num_D_steps` is 2 and `num_D_accumulations` is 2, and `train` runs twice.

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

broken_ok = exercises.check_biggan_train(train_broken)

# %% [markdown]
# **Fix it.** Mind the accumulation: a `zero_grad()` in the wrong loop is a second way to get it wrong, which the
# grader knows too.

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
solved = exercises.check_biggan_train(my_answer)

# %% [markdown]
# ## 3 · WGAN-GP: a critic with BatchNorm, and a norm over the wrong dimension
#
# **Why it matters.** Two silent mistakes in one penalty: the loss looks like WGAN-GP's and is not.
#
# **The reports.** WGAN-GP penalises the norm of the critic's gradient *for each input on its own*; the paper says
# "no critic batch normalization" and recommends layer normalisation instead, and several public WGAN-GP
# critics keep BatchNorm anyway (the issues on Lornatang's and kongyanye's code ask why). Zeleni9's critic uses
# `nn.InstanceNorm2d(C, affine=True)` for that reason, and its issue #40 found the other mistake: the penalty takes
# `gradients.norm(2, dim=1)` of a `[batch, 1, 32, 32]` gradient. Both are silent. The critic below is Zeleni9's at
# 8x8 pixels, with BatchNorm where its code has InstanceNorm; `train_critic` is one iteration of its critic loop
# (the random `z` and `eta` come in as arguments), run three times.

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

broken_ok = exercises.check_wgan_gp(make_critic_broken, train_critic_broken)

# %% [markdown]
# **Fix both.** `make_critic(channels)` returns a critic whose output for one image does not depend on the other
# images of the batch; which layers do that is yours to choose. The grader checks that first, by the gradient of the
# critic's output for image 0 with respect to the other images, then runs the reference's critic iteration on your
# own critic and compares your `train_critic`'s gradients with it.

# %%
def make_critic(channels):
    """Zeleni9's critic, normalising each sample on its own."""
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
solved = exercises.check_wgan_gp(my_critic, my_answer)

# %% [markdown]
# ## 4 · Mixed precision: one `GradScaler`, two optimizers
#
# **Why it matters.** Mixed precision adds a scale to every gradient; one optimizer stepped around the scaler
# steps on the scaled one.
#
# **The reports.** neosr (a super-resolution GAN trainer) uses one `GradScaler` for G and D (its PR #50) and had to
# remove a second `scaler.update()` (PR #9). nerfacc's example scales the loss with the scaler and then calls
# `optimizer.step()` itself: "the gradients are now 1024x larger than they should be" (issue #307). Below, an
# SR-GAN step in that style, under bfloat16 autocast on the CPU: G's step with D frozen, then D's. The grader's
# scaler starts at 2^10 and grows 2x at each `update()` without an inf, and the step runs three times; at the
# second call it makes one of D's scaled gradients inf, and at the third one of G's, as an overflow would.

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

broken_ok = exercises.check_amp_lab(optimize_parameters_broken)

# %% [markdown]
# **Fix it.** With Adam the 1024x barely shows (Adam divides by the gradient's running size), which is how such a
# step survives; with SGD, or on the step where G's scaled gradient holds an inf, it does not. The grader also
# checks the scale after each call: an `update()` after each optimizer's step (neosr's bug) doubles it twice.

# %%
def optimize_parameters(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """G's step (D frozen), then D's, under bfloat16 autocast; one scaler for both, one update() per call."""
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
solved = exercises.check_amp_lab(my_answer)

# %% [markdown]
# ## 5 · An RNN's hidden state carried from batch to batch
#
# **Why it matters.** Any state kept from one batch to the next (an RNN's, a running estimate) carries its graph
# along unless it is cut.
#
# **The report.** MorvanZhou's RNN regression tutorial predicts cos from sin, one stretch of the curve per step,
# and carries the RNN's hidden state `h_state` on to the next step. A reader removed the line that cuts it from
# the previous step's graph, and the second step's `loss.backward()` failed. The first fix people reach for,
# `loss.backward(retain_graph=True)`, trades that error for another one, which the grader shows too.

# %%
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

broken_ok = exercises.check_rnn_train(train_rnn_broken)

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
solved = exercises.check_rnn_train(my_answer)

# %% [markdown]
# ## 6 · `torch.compile`: an R1 penalty through a compiled D, an EMA of a compiled G
#
# **Why it matters.** Compiling a GAN changes two things a training step may rely on: what can be
# differentiated twice, and the parameters' names.
#
# **The reports.** A gradient penalty needs the gradient of D's output *with a graph* (`create_graph=True`), and a
# module compiled with an AOT backend (`aot_eager`, `inductor`) cannot be differentiated twice: torch raised
# nothing and gave wrong second derivatives (pytorch#91469) until PR #92348 made it an error. `backend="eager"`
# compiles nothing AOT and works. Separately, `torch.compile(G)` names G's parameters `_orig_mod.0.weight`, ...,
# so an EMA keyed by the names of the uncompiled G matches none of them and never moves, silently (senpai#2899).
# Below, G and D come in compiled with `aot_eager`; `ema` was made from the uncompiled G. The step runs twice.

# %%
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

broken_ok = exercises.check_compiled_step(train_step_broken)

# %% [markdown]
# **Fix both.** The compiled module keeps the original as `D._orig_mod`, with the same parameters. The wrong fix
# the grader knows: dropping `create_graph=True` (with `retain_graph=True`, so that `loss_D` can still go back
# through `real_pred`) makes the error go away.

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
solved = exercises.check_compiled_step(my_answer)

# %% [markdown]
# ## 7 · The same six under the doctor
#
# **Why it matters.** You fixed them without the doctor. Here is what `%load_ext gan_lessons` says about each broken
# version, run once on the lab's own models (`exercises.lab_problem(name)` gives a fresh set). Count how many of
# the six it would have found for you.

# %%
# %load_ext gan_lessons

# %%
import warnings
from gan_lessons.doctor import DoctorWarning, active
from gan_lessons.lesson import headline
warnings.simplefilter("always", DoctorWarning)
said = {}

def doctor_said(lab_name):
    """What the doctor watching this cell has said so far: each diagnosis's kind and first line."""
    said[lab_name] = [(d.kind, headline(d.summary)) for d in active().diagnoses]
    for kind, line in said[lab_name]:
        print(f"{lab_name}: {kind}: {line}")
    if not said[lab_name]:
        print(f"{lab_name}: the doctor says nothing")

# %%
netG, netD, optimizerG, optimizerD, generator_criterion, data, target = exercises.lab_problem("srgan")
with expect_error(RuntimeError, "modified by an inplace operation"):
    srgan_step_broken(netG, netD, optimizerG, optimizerD, generator_criterion, data, target)
doctor_said("srgan")

# %%
G, D, GD, z_, config, x = exercises.lab_problem("biggan")
train_broken(G, D, GD, z_, config, x)
doctor_said("biggan")

# %%
D, G, d_optimizer, images, z, eta = exercises.lab_problem("wgan_gp")
train_critic_broken(D, G, d_optimizer, images, z, eta)
doctor_said("wgan_gp")

# %%
net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt = exercises.lab_problem("amp")
optimize_parameters_broken(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt)
doctor_said("amp")

# %%
rnn, optimizer, loss_func, steps = exercises.lab_problem("rnn")
with expect_error(RuntimeError, "backward through the graph a second time"):
    train_rnn_broken(rnn, optimizer, loss_func, steps)
doctor_said("rnn")

# %%
warnings.filterwarnings("ignore", message="Using `torch.compile\\(module\\)` when there are global hooks")
G, D, opt_G, opt_D, ema, x_real, z = exercises.lab_problem("compiled")   # the doctor's hooks are global ones
with expect_error(RuntimeError, "does not currently support double backward"):
    train_step_broken(G, D, opt_G, opt_D, ema, x_real, z)
doctor_said("compiled")

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
# So the doctor would have found three of the six: the two errors of lessons 02 and 03, named down to the tensor
# and the line that changed or freed it, and BigGAN's missing `zero_grad()`. The other three are outside what it
# watches: a penalty that is not per sample, a scaler bypassed by one optimizer, and `torch.compile`'s own error
# (not one of the lessons' three, so it passes through untouched). For those, what found them was the comparison
# this lab's grader makes: the gradients every optimizer steps on, against a reference you trust. On your own
# code, the reference can be the same step written the slow, obvious way (no compile, no autocast, float64, one
# sample at a time), run on a copy of the models for a step or two.

# %% [markdown]
# ## Exercises
#
# The six fixes above are this lesson's exercises, each with its grader. One more, for the rest of the double
# slot if there is time: take a training script of your own, run it under `python -m gan_lessons doctor
# train.py` (lesson 07), and then compare, for one or two steps, the gradients its optimizers step on with a slow,
# obvious version of the same step, as the graders here do (`gan_lessons.exercises.recorded_steps` records them).

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
