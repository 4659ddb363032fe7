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
# # 第 13 课 · 调试实验
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/13_debugging_lab.ipynb)
#
# [English](../13_debugging_lab.ipynb) · [学生版](student/13_debugging_lab.ipynb)
#
# **目标**。修好六个出了错的训练步。它们都取自公开的缺陷报告，出错的方式也和真实代码里一样：一步里有两三个错误，有的会报错，有的悄无声息（能运行，但训练的东西是错的）；其中几个还附带网上流传的修法，它让报错消失，训练却仍然是错的。请先凭第 01 到 10 课学到的知识和评分器的反馈，自己把每一个修好；然后在练习之后的延伸里看看自动微分医生对这六个问题怎么说。
#
# **材料**。每个训练步都保留了报告中代码的变量名和结构，只是把网络缩得很小，在 CPU 上就能运行。这些报告都是公开的：
#
# | 实验 | 代码 | 报告 |
# |---|---|---|
# | 1 | SRGAN 的训练步 | [leftthomas/SRGAN#89](https://github.com/leftthomas/SRGAN/issues/89) |
# | 2 | BigGAN 的 `train()` | [ajbrock/BigGAN-PyTorch#25](https://github.com/ajbrock/BigGAN-PyTorch/issues/25) |
# | 3 | 一个 WGAN-GP 评判器及其评判器迭代 | [Zeleni9/pytorch-wgan#40](https://github.com/Zeleni9/pytorch-wgan/issues/40)、[Lornatang/WassersteinGAN_GP-PyTorch#2](https://github.com/Lornatang/WassersteinGAN_GP-PyTorch/issues/2)、[kongyanye/cwgan-gp#6](https://github.com/kongyanye/cwgan-gp/issues/6) |
# | 4 | 一个混合精度的 SR-GAN 训练步 | [nerfstudio-project/nerfacc#307](https://github.com/nerfstudio-project/nerfacc/issues/307)、[neosr-project/neosr#9](https://github.com/neosr-project/neosr/pull/9)、[neosr-project/neosr#50](https://github.com/neosr-project/neosr/pull/50) |
# | 5 | 一个 RNN 回归教程 | [MorvanZhou/PyTorch-Tutorial#57](https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57) |
# | 6 | 一个带 R1 惩罚和 EMA 的编译后的 GAN | [pytorch/pytorch#91469](https://github.com/pytorch/pytorch/issues/91469)、[pytorch/pytorch#92348](https://github.com/pytorch/pytorch/pull/92348)、[pytorch/pytorch#92893](https://github.com/pytorch/pytorch/pull/92893)、[wandb/senpai#2899](https://github.com/wandb/senpai/pull/2899) |
#
# **评分看修法做了什么，而不看它怎么写**。评分器用它自己的小模型、优化器和批量，把你修好的训练步调用一到四次；每当任何一个优化器调用 `step()`，它就记下这次更新所用的梯度。它在同样的模型和批量上运行参考解法，逐个优化器、逐步进行比较。反馈会指出第一个出错的地方：哪个优化器、第几步、它的梯度是什么（它的范数与参考解法的对比，以及它的方向），并点名它认识的错误修法。只要代码用正确的梯度更新参数，无论怎么写都能通过，除非实验另有要求（实验 1 还会数有几次反向传播进入了 G，实验 4 还会检查缩放因子）。
#
# **怎么做**。每一节先把出错的训练步原样运行一遍，让你看到使用者遇到的情形：它的报错，或者在没有任何报错时评分器测出的差异。找出毛病所在，把出错的函数体复制到下方练习的函数里，在那里修改。每个实验在出错的训练步运行过之后，还会问你毛病出在哪里：先回答，再运行那个单元格。每个训练步背后的报告、讨论串、原因和修法，都放在这一步的评分器之后（学生版放在最后）：等你的修法通过之后再读。本实验需要**两节连堂**：按仔细学习的节奏约 95 分钟，每个实验约十四分钟；练习之后看医生表现的那一轮是延伸内容。

# %% tags=["nbval-ignore-output"]
# 每一课都一样的准备工作。在 Colab 上，它只安装 Colab 没有的两样：torchviz 和本课程的包。
import subprocess
import sys
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz", "gan-lessons @ git+https://github.com/gan-lessons/gan-lessons"],
                   check=True)

import torch
from torch import nn, optim
import torch.nn.functional as F
from gan_lessons.lesson import setup, expect_error, expect_warning, claim, check, describe, rounded, tr

device, QUICK = setup(seed=0, lang="zh")

# %%
import math
from gan_lessons import exercises
from gan_lessons.exercises.lesson13 import (Discriminator, discriminator_loss, first_wrong_step, generator_loss,
                                           gradient_ratio, mixes_samples, show_log, step_that_clears_the_error,
                                           toggle_grad)


# %% [markdown]
# ## 1 · SRGAN：G 的反向传播报错
#
# 这是公开报告里最常见的 GAN 错误，旁边还常常贴着流传最广的那个修法。
#
# **代码**。SRGAN 的训练步，保留了它原来的变量名和结构：先在真实批量和生成批量上算 D 的损失并更新 D，再算 G 的损失并更新 G。我们的 `netD` 以 sigmoid 结尾，`generator_criterion` 保留了 SRGAN 的图像损失和对抗项（`0.001 * mean(1 - out_labels)`），去掉了 VGG 项和 TV 项。这个训练步在两个批量上运行两次。运行它，看看评分器怎么说。

# %% reveals=["optimizerD\\.step\\(\\) \u539f\u5730\u4fee\u6539\u4e86 D \u7684\u6743\u91cd", "\u5c31\u4e0d\u518d\u62a5\u9519\u7684\u4f18\u5316\u5668 -> 'optimizerD'"] tags=["predict"]
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

prediction = "optimizerD"  # SOLUTION: 让某个优化器的 step() 什么也不做，报错就消失了：是 "optimizerD" 还是 "optimizerG"？
broken_ok = exercises.check_srgan_step(srgan_step_broken)
check("跳过它的 step 就不再报错的优化器", prediction,
      step_that_clears_the_error("srgan", srgan_step_broken),
      why="optimizerD.step() 原地修改了 D 的权重，而它之后的一次反向传播还需要这些权重原来的样子。")


# %% [markdown]
# **修好它**。这里有两个错误：一个会报错，另一个不报错，却白费功夫。评分器还认识两种让报错消失、却用错误的梯度更新参数的做法。

# %%
def srgan_step(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """SRGAN 的一步：先是 D 的一步，再是 G 的一步。"""
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

my_answer = srgan_step  # SOLUTION: 把它指向你的 srgan_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_srgan_step(my_answer)
assert solved, "srgan_step：还没有完成，或者还不对：上面几行说明了缺什么"


# %% [markdown] tags=["read-after-exercises"]
# **报告，以及错在哪里（实验 1）**。在 leftthomas/SRGAN#89 里，SRGAN 的训练循环只在生成的批量上计算一次 D 的输出 `fake_out`，用它算出 `d_loss`，调用 `d_loss.backward(retain_graph=True)` 和 `optimizerD.step()`，然后又用同一个 `fake_out` 构造 G 的损失。在 torch 1.5 及以后的版本上，这会在 D 的最后一个权重上引发版本错误：G 的反向传播经过的是 D 更新之前的那次前向传播，而它保存的权重已经被这次更新原地改过了。讨论串里有一个回答把两个 `step()` 调用都挪到了两次反向传播之后；这样能运行，可 D 更新时用的是 d_loss 的梯度加上 g_loss 的梯度（g_loss 的反向传播也经过了 netD）。第二个错误：D 的损失用的是没有分离的生成图像，于是有一次反向传播进入了 G，又被 `netG.zero_grad()` 丢掉。修法：D 的损失用 `fake_img.detach()`，G 的损失则经过更新后的 D 重新做一次前向传播。

# %% [markdown]
# ## 2 · BigGAN：没有任何报错
#
# 这是一个被广泛复制的代码库里的静默错误。
#
# **代码**。BigGAN-PyTorch 的 `train_fns.py` 中的 `train()`：先做 `config['num_D_steps']` 个 D 步，每个 D 步累加 `config['num_D_accumulations']` 次反向传播之后再更新，然后是 G 步。这里 `num_D_steps` 为 2，`num_D_accumulations` 为 3，`train` 运行两次。不会报任何错。下面的单元格像评分器那样按原样运行 `train`，并打印它的训练日志：每次调用中，作为各次反向传播起点的那些损失的值，旁边是参考解法在同样的模型和批量上的日志。先读一读再往下走：单看这样一份日志，你能发现哪里不对吗？

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

# %% reveals=["\u7b2c\u4e00\u4e2a\u7528\u9519\u68af\u5ea6\u7684 D \u6b65 -> 2", "\u4e24\u4e2a D \u6b65\u4e4b\u95f4\u7684\u67d0\u6837\u4e1c\u897f"] tags=["predict"]
prediction = 2  # SOLUTION: 评分器把 train 运行两次，每次两个 D 步：这四个 D 步里，第一个用错梯度的是第几个？（1 到 4）
broken_ok = exercises.check_biggan_train(train_broken)
check("第一个用错梯度的 D 步", prediction, first_wrong_step("biggan", train_broken, "D.optim"),
      why="第一个 D 步用的是参考解法的梯度，第二个却不是：毛病出在两个 D 步之间的某样东西上。"
          "（一步更新错了之后，权重就与参考解法不同了，后面的梯度也都随之不同。）")


# %% [markdown]
# **修好它**。评分器还认识第二种错误的写法，它会改变每个 D 步累加的内容。

# %%
def train(G, D, GD, z_, config, x):
    """BigGAN 的 train()：num_D_steps 个 D 步，每步累积 num_D_accumulations 次反向传播，然后是一个 G 步。"""
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

my_answer = train  # SOLUTION: 把它指向你的 train

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_biggan_train(my_answer)
assert solved, "biggan_train：还没有完成，或者还不对：上面几行说明了缺什么"


# %% [markdown] tags=["read-after-exercises"]
# **报告，以及错在哪里（实验 2）**。在 ajbrock/BigGAN-PyTorch#25 里，`D.optim.zero_grad()` 只在 `train()` 开头调用一次，位于遍历各个 D 步的循环之前，所以第一个之后的每个 D 步，用的都是它自己的梯度加上之前所有 D 步的梯度。作者的回复是：“Good catch--this was a typo!”（发现得好，这是个笔误！）他修好了它，并指出主训练脚本不受影响，因为它默认用 `num_D_steps=1` 训练。修法：在每个 D 步开始时、它的累积循环之前清零 D 的梯度（放进累积循环里，就会把除最后一个微批量之外的梯度全都扔掉）。

# %% [markdown]
# ## 3 · WGAN-GP：一个能运行的惩罚项
#
# 一个惩罚项可以看起来像 WGAN-GP 的、也能运行，训练的却是别的东西。
#
# **代码**。WGAN-GP 惩罚的是评判器对每个输入单独求出的梯度的范数。下面的评判器是 Zeleni9 的（pytorch-wgan），缩小到 8×8 像素；`train_critic` 是它评判器循环中的一次迭代（随机的 `z` 和 `eta` 作为参数传入），运行三次。下面的单元格打印它的训练日志，旁边是参考解法的：每次迭代中每个反向传播起点处的损失（`-D(real)`、`D(fake)` 和惩罚项）。

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

# %% reveals=["\u56fe\u50cf 1 \u53d8\u5316\u65f6\u56fe\u50cf 0 \u7684\u8f93\u51fa -> '\u4f1a\u53d8'", "\u5e76\u4e0d\u662f\u4e00\u6b21\u53ea\u770b\u4e00\u5f20\u56fe\u50cf"] tags=["predict"]
prediction = "会变"  # SOLUTION: 在训练模式下，同一批量中的图像 1 变了：这个评判器对图像 0 的输出是 "会变" 还是 "不变"？
broken_ok = exercises.check_wgan_gp(make_critic_broken, train_critic_broken)
mixed = mixes_samples(make_critic_broken(1))
check("评判器：图像 1 变化时图像 0 的输出", prediction, "stays" if mixed == 0 else "moves",
      why="它对图像 0 的输出关于同一批量中其他图像的梯度不为零：这个评判器并不是一次只看一张图像。")


# %% [markdown]
# **修好它**。`make_critic(channels)` 返回评判器，`train_critic` 做一次评判器迭代。评分器先逐张图像地看评判器算出了什么，再在你自己的评判器上运行参考解法的评判器迭代，拿它的梯度与你的 `train_critic` 的梯度对照。

# %%
def make_critic(channels):
    """Zeleni9 的评判器。"""
    ### BEGIN SOLUTION
    D = Discriminator(channels)
    for i, layer in enumerate(D.main_module):
        if isinstance(layer, nn.BatchNorm2d):
            D.main_module[i] = nn.InstanceNorm2d(layer.num_features, affine=True)
    return D
    ### END SOLUTION

def train_critic(D, G, d_optimizer, images, z, eta, lambda_term=10):
    """评判器的一次迭代：-D(real) + D(fake) + lambda * (|grad D(interpolated)| - 1)^2，逐样本计算。"""
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

my_critic = make_critic  # SOLUTION: 把它指向你的 make_critic
my_answer = train_critic  # SOLUTION: 把它指向你的 train_critic

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_wgan_gp(my_critic, my_answer)
assert solved, "wgan_gp：还没有完成，或者还不对：上面几行说明了缺什么"


# %% [markdown] tags=["read-after-exercises"]
# **报告，以及错在哪里（实验 3）**。论文写明“no critic batch normalization”（评判器不用批量规范化），并建议改用层规范化；可是不少公开的 WGAN-GP 评判器依然保留了 BatchNorm（Lornatang 和 kongyanye 代码下的 issue 问的就是为什么）：BatchNorm 让每张图像的输出依赖于同一批量里的其他图像，于是一个样本的梯度里混进了其他样本。Zeleni9 自己的评判器正因如此使用了 `nn.InstanceNorm2d(C, affine=True)`（上面的评判器在那个位置用的是 BatchNorm），而它的 issue #40 发现了另一个错误：惩罚项对形状为 `[batch, 1, 32, 32]` 的梯度取 `gradients.norm(2, dim=1)`，也就是在只有一个通道的维度上求范数，得到的是逐元素的 `|g|`。这两个错误都是静默的。修法：换用任何按样本单独做的规范化（InstanceNorm、`GroupNorm(1, C)`、层规范化），并对每个样本展平后的梯度求范数。

# %% [markdown]
# ## 4 · 混合精度：一个在 autocast 下运行的 SR-GAN 训练步
#
# 混合精度在反向传播之前把损失乘上一个缩放因子，在每次更新之前再把它除掉；把这件事做错的训练步照样能运行。
#
# **代码**。一个仿照 neosr（一个超分辨率 GAN 训练框架）写法的 SR-GAN 训练步，在 CPU 上以 bfloat16 autocast 运行：先是冻结 D 后的 G 步，然后是 D 步，共用一个 `GradScaler`。评分器的缩放器从 2^10 开始，每次 `update()` 时只要没出现 inf 就翻倍；这个训练步运行四次，第二次调用时评分器让 D 的一个缩放后的梯度变成 inf，第三次调用时让 G 的一个变成 inf，就像数值溢出时那样；第四次调用又恢复正常。下面的单元格打印训练日志：每个反向传播起点处未经缩放的损失（也就是 `loss.item()` 打印出来的值），以及每次调用之后的缩放因子，格式为“原代码 / 参考解法”。

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

# %% reveals=["\u7b2c\u4e00\u6b21\u8c03\u7528\u65f6\u79bb\u53c2\u8003\u89e3\u6cd5\u5f88\u8fdc\u7684\u4f18\u5316\u5668 -> 'optimizer_g'", "optimizer_d \u7684\u4e0e\u5b83\u76f8\u540c"] tags=["predict"]
prediction = "optimizer_g"  # SOLUTION: 第一次调用时，有没有哪个优化器所用的梯度离参考解法的很远？是 "optimizer_g"、"optimizer_d" 还是 "都不"（两个都不是）？
broken_ok = exercises.check_amp_lab(optimize_parameters_broken)
ratios = {name: gradient_ratio("amp", optimize_parameters_broken, name) for name in ("optimizer_g", "optimizer_d")}
check("第一次调用时离参考解法很远的优化器", prediction,
      next((name for name, r in ratios.items() if not 0.99 < r < 1.01), "neither"),
      why="上面评分器的第一行已经测出来了：optimizer_g 的梯度范数与参考解法的相差很远，optimizer_d 的与它相同。")


# %% [markdown]
# **修好它**。用 Adam 时，缩放错了在损失上几乎看不出来（Adam 会除以梯度大小的移动平均），这样的训练步正因如此才一直没被发现。评分器会对照每个优化器更新所用的梯度，检查它在自己的梯度含有 inf 的那次调用中是否跳过了更新，以及每次调用之后的缩放因子。

# %%
def optimize_parameters(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """先是 G 步（冻结 D），然后是 D 步，都在 bfloat16 autocast 下，使用传进来的缩放器 `scaler`。"""
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

my_answer = optimize_parameters  # SOLUTION: 把它指向你的 optimize_parameters

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_amp_lab(my_answer)
assert solved, "amp_lab：还没有完成，或者还不对：上面几行说明了缺什么"


# %% [markdown] tags=["read-after-exercises"]
# **报告，以及错在哪里（实验 4）**。neosr 让 G 和 D 共用一个 `GradScaler`（见其 PR #50），还不得不删掉多出来的第二次 `scaler.update()`（PR #9）。nerfacc 的示例用缩放器缩放损失，然后自己调用 `optimizer.step()`：“the gradients are now 1024x larger than they should be”（梯度现在比应有的大了 1024 倍，issue #307）；维护者在那里回答说这是有意为之，实际上就是 `(loss * 1024).backward()`，在 tiny-cuda-nn 上训练效果更好，并没有用混合精度（该项目更早的 issue #100 给出了原因：梯度小到 1e-17 左右，Adam 对它求平方时会下溢为零）。在上面的训练步里，G 绕过缩放器直接更新：用的是大了 1024 倍的梯度，在梯度含有 inf 的那次调用中也照样更新。修法：像 D 那样用 `scaler.step(optimizer_g)`，并且每次迭代只在两个 step 之后调用一次 `update()`。

# %% [markdown]
# ## 5 · 一个 RNN 回归：反向传播报错
#
# 训练代码常常要把某样东西从一个批量保留到下一个批量：RNN 的隐状态、移动平均值。
#
# **代码**。MorvanZhou 的 RNN 回归教程用 sin 预测 cos，每一步处理曲线的一段，并把 RNN 的隐状态 `h_state` 带到下一步。下面第二个单元格是人们最先想到的修法。

# %% reveals=["loss\\.backward\\(\\) \u5931\u8d25\u7684\u90a3\u4e00\u6b65 -> 2", "\u6765\u81ea\u524d\u4e00\u6b65"] tags=["predict"]
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

prediction = 2  # SOLUTION: 循环中的各步依次运行：loss.backward() 在第几步失败？（1、2 或 3）
broken_ok = exercises.check_rnn_train(train_rnn_broken)
fails_at = 0
for steps in (1, 2, 3):
    rnn_n, optimizer_n, loss_func_n, _ = exercises.lab_problem("rnn")
    try:
        train_rnn_broken(rnn_n, optimizer_n, loss_func_n, steps)
    except RuntimeError:
        fails_at = steps
        break
check("loss.backward() 失败的那一步", prediction, fails_at,
      why="第一步的反向传播能运行，第二步的不能：第二步的损失所依赖的某样东西来自前一步。")


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
# **修好它**，并让状态仍然传到下一步（评分器认识那个把状态直接扔掉的修法）。

# %%
def train_rnn(rnn, optimizer, loss_func, steps):
    """教程里的循环：曲线的 `steps` 段，隐状态从一段带到下一段。"""
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

my_answer = train_rnn  # SOLUTION: 把它指向你的 train_rnn

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_rnn_train(my_answer)
assert solved, "rnn_train：还没有完成，或者还不对：上面几行说明了缺什么"


# %% [markdown] tags=["read-after-exercises"]
# **报告，以及错在哪里（实验 5）**。在 MorvanZhou/PyTorch-Tutorial#57 里，一位读者删掉了教程中的 `h_state = h_state.data`，也就是把状态从上一步计算图上切断的那一行，于是第二步的 `loss.backward()` 失败了：它要反向经过第一步的计算图，而那张图已经被释放。报告者发现 `loss.backward(retain_graph=True)` 能让报错消失，不过那是在 2018 年的 torch 上（教程是为 0.4 版写的）；在如今的 torch 上，它会改报版本错误，因为优化器已经改过了旧计算图保存的权重。修法：把状态从计算图上切断之后再带到下一步，即 `h_state.detach()`（教程里的 `.data` 在这里效果相同，只是绕过了版本检查）。

# %% [markdown]
# ## 6 · 编译后的 GAN：D 步报错，还有一个要检查的 EMA
#
# `torch.compile` 能在几乎不改代码的情况下让 GAN 跑得更快。
#
# **代码**。带 R1 惩罚的 D 步、G 步，以及 G 的权重的 EMA（`ema.update(G)`）；G 和 D 都用 `aot_eager` 编译过，`ema` 是在编译 G 之前建立的。这个训练步运行两次。

# %% reveals=["\u62a5\u9519\u7684\u90a3\u4e00\u884c -> 'backward'", "\u987a\u987a\u5f53\u5f53\u5730\u6c42\u51fa\u6765"] tags=["predict"]
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

prediction = "backward"  # SOLUTION: 报错的是 autograd.grad(...) 那一行，还是 loss_D.backward()？（"grad" 或 "backward"）
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
check("报错的那一行", prediction, raised_at,
      why="自带计算图的梯度能顺顺当当地求出来；再对它求一次导，才会失败。")


# %% [markdown]
# **修好它**。这里错了两处，一处会报错，一处悄无声息。评分器认识的那个错误修法会让报错消失。

# %%
def train_step(G, D, opt_G, opt_D, ema, x_real, z, r1_gamma=10.0):
    """D 步（在真实批量上加 R1 惩罚），G 步，然后更新 G 的 EMA。"""
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

my_answer = train_step  # SOLUTION: 把它指向你的 train_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_compiled_step(my_answer)
assert solved, "compiled_step：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown] tags=["read-after-exercises"]
# **报告，以及错在哪里（实验 6）**。梯度惩罚需要 D 的输出*带着计算图*的梯度（`create_graph=True`），而用 AOT 后端（`aot_eager`、`inductor`）编译的模块不能求两次导：torch 以前什么也不报，却给出错误的二阶导数（pytorch#91469），直到一个拉取请求把它改成了报错（#92348，被撤回后又以 #92893 重新合入）。`backend="eager"` 不做任何 AOT 编译，可以正常工作。另外，`torch.compile(G)` 会把 G 的参数命名为 `_orig_mod.0.weight` 等，于是按未编译 G 的参数名建立的 EMA 一个参数也对不上，从来不动，而且悄无声息（senpai#2899）。修法：经过 `D._orig_mod`（编译后的模块由它而来，参数是同一份）计算惩罚项，并从 `G._orig_mod` 更新 EMA。

# %% [markdown]
# ## 练习
#
# 上面的六个修法就是本课的练习，每个都配有评分器。如果两节连堂课还有剩余时间，再做一个：拿一个你自己的训练脚本，用 `python -m gan_lessons doctor train.py` 运行它（第 07 课）；然后像这里的评分器那样，在一两步内，把它的各个优化器更新所用的梯度与同一训练步慢而直白的版本作比较（`gan_lessons.exercises.recorded_steps` 可以把这些梯度记录下来）。

# %% [markdown]
# ## 延伸 · 让医生看看这六个问题
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 前面你是在没有医生的情况下修好它们的。下面看看 `%load_ext gan_lessons` 对每个出错版本怎么说：每个版本都在实验自己的模型上运行一次（`exercises.lab_problem(name)` 每次给出一套新的）。
#
# **先预测，再验证**。医生盯的是第 01 到 03 课的三个错误，外加几种静默的模式（第 07 课）。六个出错的训练步里，它会点名或者警告几个？

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
    """监视本单元格的医生在已说过 `seen` 条之后又说了什么：每条诊断的类别和第一行。"""
    said[lab_name] = [(d.kind, headline(d.summary)) for d in active().diagnoses[seen:]]
    for kind, line in said[lab_name]:
        print(tr("{lab_name}: {kind}: {line}", lab_name=lab_name, kind=kind, line=line))
    if not said[lab_name]:
        print(tr("{lab_name}: the doctor says nothing", lab_name=lab_name))


# %% reveals=["\u627e\u51fa\u4e86\u5176\u4e2d\u4e09\u4e2a", "\u70b9\u540d\u6216\u8b66\u544a\u7684\u51fa\u9519\u8bad\u7ec3\u6b65 -> 3"] tags=["predict"]
prediction = 3  # SOLUTION: 六个出错的训练步各在医生的监视下运行一次，它会点名或者警告几个？
broken = {"srgan": (srgan_step_broken, "modified by an inplace operation"), "biggan": (train_broken, None),
          "wgan_gp": (train_critic_broken, None), "amp": (optimize_parameters_broken, None),
          "rnn": (train_rnn_broken, "backward through the graph a second time"),
          "compiled": (train_step_broken, "does not currently support double backward")}
for lab_name, (step, error) in broken.items():
    seen = len(active().diagnoses)
    args = exercises.lab_problem(lab_name)     # 在医生监视下建立：它的钩子是全局钩子
    if error:
        with expect_error(RuntimeError, error):
            step(*args)
    else:
        step(*args)
    doctor_said(lab_name, seen)
check("医生点名或警告的出错训练步", prediction, sum(bool(lines) for lines in said.values()),
      why="第 02、03 课的两个错误（SRGAN 的和 RNN 的），以及 BigGAN 被重复使用的梯度；另外三个不在它监视的范围之内。")

# %%
# %unload_ext gan_lessons

# %%
named = [name for name, lines in said.items() if any(kind != "suspicious" for kind, _ in lines)]
warned = [name for name, lines in said.items() if lines and all(kind == "suspicious" for kind, _ in lines)]
claim("医生诊断出了它认识的两个错误（SRGAN 的版本错误，RNN 已被释放的计算图）",
      named == ["srgan", "rnn"], shown=", ".join(named), on='本课程的自动微分医生')
claim("它对 BigGAN 重复施加的梯度发出警告，对另外三个则什么也没说",
      warned == ["biggan"] and all(not said[k] for k in ("wgan_gp", "amp", "compiled")), on='本课程的自动微分医生')

# %% [markdown]
# 可见医生找出了其中三个：第 02 课和第 03 课讲的两种错误（它会具体指出是哪个张量，以及修改或释放它的是哪一行），还有 BigGAN 漏掉的 `zero_grad()`。另外三个超出了它监视的范围：不是逐样本计算的惩罚项，被一个优化器绕过的缩放器，以及 `torch.compile` 自己的报错（它不属于课程讲的三种错误，所以医生原样放行）。找出这几个问题，靠的是本实验评分器所做的那种比较：把每个优化器更新所用的梯度，与一个你信得过的参考对照。对你自己的代码，参考可以是同一个训练步慢而直白的写法（不编译、不用 autocast、用 float64、一次只算一个样本），在模型的副本上跑一两步。

# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# | 实验 | 报错还是静默 | 错误 | 掩盖错误的错误修法 |
# |---|---|---|---|
# | 1 SRGAN | 报错 | G 的损失经过 `optimizerD.step()` 之前 D 的前向传播；D 的损失用了未分离的生成样本（白费计算） | 把两个 step 都放到最后；旧版 torch |
# | 2 BigGAN | 静默 | 在所有 D 步之前只调用一次 `zero_grad()` | 把 `zero_grad()` 放进累积循环里 |
# | 3 WGAN-GP | 静默 | 评判器里有 BatchNorm；在只有 1 个通道的维度上求范数 | |
# | 4 AMP | 静默 | G 绕过缩放器更新：梯度大了 1024 倍 | 每个优化器之后各调用一次 `update()` |
# | 5 RNN | 报错 | 隐状态连同它的计算图一起被带到下一步 | `retain_graph=True`（换来另一个错误）；把状态重置 |
# | 6 compile | 报错 + 静默 | 对经过 AOT 编译的 D 做二阶反向传播；EMA 按参数名匹配，而编译改变了参数名 | 去掉 `create_graph=True` |
