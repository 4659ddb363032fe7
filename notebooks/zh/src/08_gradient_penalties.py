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
# # 第 08 课 · 梯度惩罚：评判器需要的自动微分
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/08_gradient_penalties.ipynb)
#
# [English](../08_gradient_penalties.ipynb) · [学生版](student/08_gradient_penalties.ipynb)
#
# **目标**。用 `torch.autograd.grad` 把梯度*作为值*取出来，并弄清它每个参数的作用：`grad_outputs`、`retain_graph`、`create_graph`、`inputs`。然后一行一行地搭出 WGAN-GP 的梯度惩罚，途中逐一遇到它会抛出的错误，并弄清不加 `create_graph=True` 算出的惩罚会怎样。接下来是真实图像上的 R1、惰性正则化（lazy
# regularisation）、每次 G 更新配 `n_critic` 次评判器更新、实测一个惩罚的开销，以及为什么 `torch.compile` 的预先编译后端处理不了惩罚。在练习里，你将从零写出条件评判器的 WGAN-GP 惩罚（两个输入，只对其中一个求梯度）和惰性 R1。
#
# **材料**。五篇原帖都没有讲到梯度惩罚；这一课走得比它们更远。事实来自论文：WGAN-GP（Gulrajani 等，*Improved Training of Wasserstein GANs*，2017：惩罚权重 10，`n_critic` 为 5，Adam 的学习率为 1e-4、betas 为 (0, 0.9)）、R1（Mescheder 等，*Which Training Methods for GANs do actually Converge?*，2018）和惰性正则化（Karras 等，*Analyzing and Improving the Image Quality of StyleGAN*，2020：每 16 个小批量做一次 R1）。小结之前（学生版里在练习之后）有一张表，汇总了人们围绕它们写的代码，以及这些代码在如今的 torch 上会怎样。

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
# ## 1 · `torch.autograd.grad`：可以拿来计算的梯度
#
# `loss.backward()` 把梯度加进叶子张量的 `.grad` 里，自己什么也不返回。而梯度惩罚需要的是 D 的输出*关于输入图像*的梯度，它得是一个张量，出现在损失里。这就是 `torch.autograd.grad(outputs, inputs)`：它以元组的形式返回梯度，每个输入一个。

# %%
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x ** 3).sum()
dy_dx, = grad(y, x)
claim("autograd.grad 返回 dy/dx = 3x²", torch.equal(dy_dx, 3 * x.detach() ** 2), rounded(dy_dx))

# %% reveals=["\u4e0d\u78b0\u4efb\u4f55 ?`?\\.grad", "x\\.grad \u4ecd\u7136?\u662f None", "\u4e0d\u52a8 ?`?\\.grad"] tags=["predict"]
prediction = False  # SOLUTION: 调用 grad(y, x) 之后，x.grad 有值了吗？
check("autograd.grad 填充了 x.grad", prediction, x.grad is not None,
      why="autograd.grad 把梯度返回出来，而不是加进 .grad；x.grad 仍然是 None。")

# %% [markdown]
# 所以 `autograd.grad` 不碰任何 `.grad`：它算出的东西就是它的返回值，仅此而已。
#
# **`grad_outputs`**。评判器给每张图像打一个分数，所以它的输出是一个向量。自动微分计算的是向量-雅可比积：对向量输出，它需要 `v · ∂y/∂x` 里的那个向量 `v`。对标量调用 `backward()` 时，它默默地用了 `v = 1`；对向量，你得自己传入。`grad_outputs=torch.ones_like(y)` 给出的是 `y.sum()` 的梯度；由于每张图像的分数只依赖于这张图像本身，它也就是每个分数关于它自己那张图像的梯度。

# %%
y = x ** 3
with expect_error(RuntimeError, "grad can be implicitly created only for scalar outputs"):
    grad(y, x)
v = torch.tensor([1.0, 0.0, 2.0])
claim("grad_outputs=ones 给出 y.sum() 的梯度",
      torch.equal(grad(x ** 3, x, grad_outputs=torch.ones(3))[0], grad((x ** 3).sum(), x)[0]))
claim("grad_outputs=v 给出 v 乘以每个元素的导数", torch.equal(grad(x ** 3, x, grad_outputs=v)[0], v * 3 * x.detach() ** 2),
      rounded(grad(x ** 3, x, grad_outputs=v)[0]))

# %% [markdown]
# **`retain_graph`**。和 `backward()` 一样，`autograd.grad` 会释放它用过的已保存张量（第 02 课）。
#
# **`create_graph`**。设置 `create_graph=True` 时，返回的梯度本身就是一个计算图的输出，因此可以再对它求导：得到二阶导数，或者一个能训练 D 的惩罚。不设置时，梯度只是一个普通的数，没有 `grad_fn`。

# %%
y = (x ** 3).sum()
dy_dx, = grad(y, x)
with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    grad(y, x)
with expect_error(RuntimeError, "element 0 of tensors does not require grad and does not have a grad_fn"):
    grad(dy_dx.sum(), x)

y = (x ** 3).sum()
dy_dx, = grad(y, x, create_graph=True)
claim("设置 create_graph=True 时，梯度带有 grad_fn", dy_dx.grad_fn is not None, type(dy_dx.grad_fn).__name__)
d2y_dx2, = grad(dy_dx.sum(), x)
claim("再对它求导，就得到二阶导数 6x", torch.equal(d2y_dx2, 6 * x.detach()), rounded(d2y_dx2))
claim("create_graph=True 也保留了 y 的计算图：第二次 grad(y, x) 能运行（retain_graph 默认取 create_graph 的值）",
      torch.equal(grad(y, x)[0], 3 * x.detach() ** 2))

# %% [markdown]
# **`inputs`** 可以是多个张量，梯度按同样的顺序返回。对于输出没有用到的参数，`allow_unused=True` 会返回 `None`，而不是报错。

# %%
a, b, unused = (torch.tensor(v, requires_grad=True) for v in (2.0, 5.0, 1.0))
da, db, dunused = grad(a * b, (a, b, unused), allow_unused=True)
claim("d(ab)/da = b，d(ab)/db = a，没用到的输入得到 None", da.item() == 5.0 and db.item() == 2.0 and dunused is None)

# %% [markdown]
# ## 2 · 一行一行地搭出 WGAN-GP 的惩罚
#
# WGAN-GP 要求 D（一个*评判器*：只打分，不经过 sigmoid）在真实图像和假图像之间的点上，关于输入的梯度范数为 1：`x_hat = eps·x_real + (1 − eps)·x_fake`，每张图像一个 `eps`。惩罚是 `(‖∇x_hat D(x_hat)‖₂ − 1)²` 在批量上的均值，权重为 10。我们在原帖 000 的 D 和真实的手写数字上搭建它，途中会遇到两个错误。

# %%
torch.manual_seed(0)
G, D = Generator(tanh=True), Discriminator()
x_real = data.to_unit_range(data.mnist_tensors(train=False)[0][:16])
z = torch.randn(16, G.z_dim)
x_fake = G(z)
eps = torch.rand(16, 1, 1, 1)                           # 每张图像一个，广播到它的所有像素

x_hat = eps * x_real + (1 - eps) * x_fake.detach()      # 分离：惩罚只能训练 D
scores = D(x_hat)
with expect_error(RuntimeError, "One of the differentiated Tensors does not require grad"):
    grad(scores, x_hat, grad_outputs=torch.ones_like(scores))

# %% [markdown]
# `x_hat` 由分离过的假样本和真实数据构成，没有任何东西让它需要梯度，所以也就没有关于它的梯度可以返回。它必须在 D 看到它*之前*，就是一个需要梯度的叶子张量：

# %%
x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
scores = D(x_hat)
with expect_error(RuntimeError, "grad can be implicitly created only for scalar outputs"):
    grad(scores, x_hat, create_graph=True)

# %% [markdown]
# 加上 `grad_outputs=torch.ones_like(scores)`，它就能运行了。`g` 是 16 个分数（求和之后）关于 `x_hat` 的梯度，惩罚从中为每张图像取一个范数。

# %% reveals=["\\(16, 1, 28, 28\\)", "\u6bcf\u4e2a\u50cf\u7d20\u5bf9\u5e94\u4e00\u4e2a\u5143\u7d20"] tags=["predict"]
g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
prediction = (16, 1, 28, 28)  # SOLUTION: tuple(g.shape) 是多少？（x_hat 是 16 张 MNIST 数字图像；D 给每张图像打一个分数）
check("g.shape", prediction, tuple(g.shape),
      why="关于 x_hat 的梯度和 x_hat 形状相同，每张图像的每个像素对应一个元素，与 D 的输出是什么形状无关：每张图像的"
          "范数在它展平后的梯度上计算，即 g.flatten(1).norm(2, dim=1)。")

# %%
gp = ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
print(tr("per-image gradient norms: {norms} ...", norms=rounded(g.flatten(1).norm(2, dim=1)[:4])))
claim("gan_lessons.strategies.gradient_penalty 算出的惩罚与此相同",
      torch.allclose(gp, strategies.gradient_penalty(D, x_real, x_fake, eps=eps)), f"{gp.item():.4f}")


# %% [markdown]
# **如果假样本没有分离呢**？那么 `x_hat` 本来就需要梯度（它不是叶子张量，但 `autograd.grad` 接受它），不会报错，而惩罚的计算图会一路延伸进 G。这样做的危害有多大，取决于 D。原帖 000 的 D 由线性映射和 ReLU 构成：在 ReLU 切换状态的那些点之间，它关于输入的梯度是常数，所以稍微挪动假样本不会改变惩罚，G 从惩罚得到的梯度恰好为零：剩下的只有一次白白穿过 G 的反向传播。换成平滑的激活函数（这里用 SiLU），惩罚就真的会推动 G。

# %%
def penalty_into_G(D):
    x_hat = eps * x_real + (1 - eps) * x_fake                # x_fake 没有分离
    scores = D(x_hat)
    g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    gp = ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
    return grad(gp, list(G.parameters()), allow_unused=True, retain_graph=True)   # G 的计算图是共享的

D_smooth = copy.deepcopy(D)
for i, layer in enumerate(D_smooth.net):
    if isinstance(layer, nn.ReLU):
        D_smooth.net[i] = nn.SiLU()
relu_D, smooth_D = penalty_into_G(D), penalty_into_G(D_smooth)
claim("不分离时，惩罚会到达 G 的每一个参数", all(t is not None for t in relu_D),
      f"{len(relu_D)} 个中的 {sum(t is not None for t in relu_D)} 个")
claim("穿过原帖 000 用 ReLU 的 D，这些梯度全都恰好为零", all(bool((t == 0).all()) for t in relu_D))
claim("穿过换成 SiLU 的同一个 D，它们就不为零", any(bool(t.abs().sum() > 0) for t in smooth_D),
      f"最大 {max(t.abs().max().item() for t in smooth_D):.2e}")


# %% [markdown]
# ## 3 · 不加 `create_graph=True` 的惩罚
#
# 去掉 `create_graph=True`，一切照样运行。惩罚照样算出来、打印出来，也加进了 `loss_D`。下面比较同一批量上三种损失给 D 的梯度：只有评判器的损失（`plain`）；加上不设 `create_graph=True` 算出的惩罚（`no_graph`）；加上设了它算出的惩罚（`right`）。

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
plain = D_grads(wasserstein)                              # 完全没有惩罚
wasserstein, gp_const = critic_loss(D, create_graph=False)
no_graph = D_grads(wasserstein + 10 * gp_const)
wasserstein, gp_live = critic_loss(D, create_graph=True)
right = D_grads(wasserstein + 10 * gp_live)
print(tr("penalty without create_graph: {without:.4f}; with it: {with_it:.4f}", without=gp_const.item(),
         with_it=gp_live.item()))
claim("不加 create_graph，惩罚的值也一样", torch.allclose(gp_const, gp_live.detach()))

# %% reveals=["\u4e0e\u4e0d\u52a0\u4efb\u4f55\u60e9\u7f5a\u7684\u635f\u5931.{0,10}\u5b8c\u5168\u76f8\u540c", "\u4ec0\u4e48\u4e5f\u8bad\u7ec3\u4e0d\u4e86", "(\u5173\u4e8e|\u5bf9) ?D ?(\u7684\u6743\u91cd)?\u7684\u68af\u5ea6\u4e3a\u96f6"] tags=["predict"]
prediction = 0  # SOLUTION: D 的参数中，有多少个在 `no_graph` 里得到的梯度与 `plain` 里不同？
check("D 的参数中，梯度被不加 create_graph 的惩罚改变的个数", prediction,
      sum(not torch.equal(s, p) for s, p in zip(no_graph, plain)),
      why="一个不需要梯度的张量，不会给任何梯度添上任何东西：这个惩罚只是损失里的一个数。")

# %%
claim("不加 create_graph，惩罚的 requires_grad=False", not gp_const.requires_grad)
claim("而且 D 的梯度与不加任何惩罚的损失给出的梯度完全相同",
      all(torch.equal(s, p) for s, p in zip(no_graph, plain)))
changed = sum(not torch.allclose(r, p) for r, p in zip(right, plain))
claim("加上 create_graph=True，惩罚就改变了 D 的梯度", changed > 0,
      f"D 的 {len(right)} 个参数中有 {changed} 个得到了不同的梯度")

# %% [markdown]
# 惩罚所依据的梯度是一个常数，所以惩罚也是一个常数：它关于 D 的权重的梯度为零，训练就成了普通的 WGAN，只是损失上多加了一个数。

# %% [markdown]
# 第 07 课的自动微分医生也会监视 `autograd.grad`。当一个不加 `create_graph=True` 求出的梯度被混进一个随后要做反向传播的损失时，它会发出警告：

# %%
with expect_warning(DoctorWarning, "create_graph"):
    with doctor(D=D):
        wasserstein, gp_const = critic_loss(D, create_graph=False)
        (wasserstein + 10 * gp_const).backward()

# %% [markdown]
# ## 4 · 真实图像上的 R1，以及惰性正则化
#
# R1 只惩罚 D 在*真实*图像上的梯度，即 `γ/2 · E‖∇x D(x_real)‖²`，促使 D 在数据所在之处保持平坦。它由真实图像自己的前向传播算出，所以 `x_real` 必须设为需要梯度（延伸“惩罚代码里的 `retain_graph`”中的 `r1_loss` 以权重 5 加上了它）。StyleGAN2 每 *k* 个小批量（k = 16）才计算一次 R1，并把它乘以 *k*：平均来看权重不变，开销却只是原来的一小部分。`strategies.r1_penalty` 是权重为 1 的 R1；在练习里，你将自己写出惰性 R1。

# %%
every, gamma = 16, 10.0
lazy_weights = [gamma / 2 * every if step % every == 0 else 0.0 for step in range(32)]
claim("k = 16 时，32 步里惰性 R1 只在第 0 步和第 16 步计算",
      [step for step, w in enumerate(lazy_weights) if w] == [0, 16])

def D_grad(weight):                                         # 这个批量上 weight · R1 给 D 的梯度
    r1 = weight * strategies.r1_penalty(D, x_real)
    return torch.cat([t.flatten() for t in grad(r1, list(D.parameters()), materialize_grads=True)])

lazy_cycle = sum(D_grad(w) for w in lazy_weights[:every] if w)        # 一个周期里唯一该算的那一步
every_step = every * D_grad(gamma / 2)                                  # 16 步中每一步都加 γ/2 · R1
claim("在 D 保持不变时，一个 16 步的周期里，惰性 R1（γ/2 · 16，只算一次）给 D 的梯度与每一步都加 γ/2 · R1 "
      "相同", torch.allclose(lazy_cycle, every_step, rtol=1e-5),
      f"最大差距 {(lazy_cycle - every_step).abs().max().item():.1e}")

# %% [markdown]
# D 保持不变时，两者相等仅仅是线性性的直接结果：上面那条论断不可能不成立，而且它对训练什么也没说，因为训练时 D 在两次需要计算 R1 的步之间会变。下面让 D 训练 16 步（Adam，损失是它在真实图像和噪声上的损失，每一步再加上 γ/2 · R1），并在每一步另外求出 R1 的梯度：惰性的估计是其中第一个的 16 倍，它所代表的量则是这 16 个梯度之和。惰性正则化保住的是惩罚的平均权重，而不是每一步的梯度；StyleGAN2 的作者报告说，这样做没有让他们的模型质量变差。

# %%
D_live = copy.deepcopy(D)
opt_live = torch.optim.Adam(D_live.parameters(), lr=2e-4, betas=(0.5, 0.999))
x_noise = torch.rand_like(x_real) * 2 - 1                     # 一个固定的“假样本”批量：[-1, 1] 上的噪声
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
claim("D 在训练时，惰性 R1 的那一个梯度只是它所代表的 16 个梯度的估计：两者不同", gap > 1e-3,
      f"在学习率 2e-4 下 Adam 更新 16 步，相对差距为 {gap:.1%}")


# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - `torch.autograd.grad(outputs, inputs)` 返回梯度，不动 `.grad`。向量输出需要 `grad_outputs`（对评判器的分数用全 1）；第二次调用需要保留计算图。
# - `create_graph=True` 把反向传播记录成计算图，所以梯度可以再求导。它也会保留计算图（`retain_graph` 跟随它）。惩罚离不开它；没有它，惩罚就是一个常数，什么也训练不了，也不报错（医生会发出警告）。
# - WGAN-GP：插值点由**分离过的**假样本构成，用 `requires_grad_(True)` 变成叶子张量，每张图像一个 `eps`；惩罚权重为 10；每次 G 更新配 5 次评判器更新，每次都用分离过的（或在 `no_grad` 下生成的）假样本。
# - R1 惩罚 D 在真实图像上的梯度；惰性 R1 每 k 步计算一次，并乘以 k。
# - 用 AOTAutograd 后端（默认的 inductor，或 `aot_eager`）编译过的 D，惩罚无法穿过它做反向传播：AOTAutograd
#   没有二阶反向传播。要么穿过未编译的模块（`._orig_mod`，参数相同）计算它，要么用 `backend="eager"`，要么不编译 D。
# - 惩罚之后的 `backward(retain_graph=True)` 只会占着内存。`create_graph=True` 旁边的 `retain_graph=False` 会释放损失仍然需要的那次前向传播。

# %% [markdown]
# ## 练习
#
# ### 动手实现：条件评判器的梯度惩罚
#
# pix2pix 等图像到图像的 GAN 评判的是一对图像：评判器以生成 `x` 时所依据的那张图像为条件，给 `x` 打分，即 `D(x_cond, x)`。写出 `gradient_penalty(D, x_cond, x_real, x_fake, eps)`，它处理形状为 `(N, C, H, W)` 的图像批量（三者形状相同），每张图像一个 `eps`，以形状为 `(N,)` 的张量给出。它返回只针对图像的 WGAN-GP 惩罚：`(‖∇x D(x_cond, x_hat)‖₂ − 1)²` 在 `x_hat = eps·x_real + (1 − eps)·x_fake` 处的批量均值，真实图像和生成图像共用同一个条件。结果是一个数，以 0 维张量的形式给出，它训练 D 而不训练 G（`x_fake` 直接来自 G，带着它的计算图）。用 `torch.autograd.grad` 求梯度，不要用 `strategies.gradient_penalty`。检查程序会在一个小的条件评判器上运行你的函数，把值和 D 的梯度与正确惩罚的比较；值不对时，它会告诉你是哪种错误导致了你得到的这个值。

# %%
def gradient_penalty(D, x_cond, x_real, x_fake, eps):
    """条件评判器 D(x_cond, x) 的 WGAN-GP 惩罚，图像形状为 (N, C, H, W)，eps 形状为 (N,)：
    (‖∇x D(x_cond, x_hat)‖₂ − 1)² 在 x_hat = eps·x_real + (1 − eps)·x_fake 处的批量均值，作为训练 D、不训练 G 的
    0 维张量返回。"""
    ### BEGIN SOLUTION
    eps = eps.view(-1, 1, 1, 1)                             # 每张图像一个 eps，作用于它的所有像素
    x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
    scores = D(x_cond, x_hat)                               # 条件是给定的：不对它求梯度
    g, = torch.autograd.grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    norms = g.flatten(1).norm(2, dim=1)                     # 每张图像一个范数
    return ((norms - 1) ** 2).mean()
    ### END SOLUTION

my_answer = gradient_penalty  # SOLUTION: 把它指向你的 gradient_penalty

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_gradient_penalty(my_answer)
assert solved, "gradient_penalty：还没有完成，或者还不对：上面几行说明了缺什么"


# %% [markdown]
# ### 动手实现：从零写出惰性 R1
#
# 写出 `r1_term(D, x_real, step, every, gamma)`：训练到第 `step` 步时要加到 D 的损失上的那一项。当 `step % every != 0` 时它为 0，直接返回，不运行 D。在其余的步上，它等于 `gamma / 2 * every` 乘以 `‖∇x D(x_real)‖²` 的批量均值，其中平方范数取遍一张图像的所有像素，并且带有连回 D 的计算图。用 `torch.autograd.grad` 自己计算梯度（不要用 `strategies.r1_penalty`）。

# %%
def r1_term(D, x_real, step, every, gamma):
    """惰性 R1：不在计划内的步上为 0；在 step % every == 0 的步上为 gamma / 2 * every * E‖∇x D(x_real)‖²。"""
    ### BEGIN SOLUTION
    if step % every != 0:
        return torch.zeros(())
    x_real = x_real.detach().requires_grad_(True)
    scores = D(x_real)
    g, = torch.autograd.grad(scores, x_real, grad_outputs=torch.ones_like(scores), create_graph=True)
    r1 = g.flatten(1).pow(2).sum(1).mean()
    return gamma / 2 * every * r1
    ### END SOLUTION

my_answer = r1_term  # SOLUTION: 把它指向你的 r1_term

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_lazy_r1(my_answer)
assert solved, "lazy_r1：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# ## 延伸 · 梯度的计算图
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 设置 `create_graph=True` 时，自动微分会把反向传播记录成一个新的前向计算图。这个图的节点是 D 各个运算的*导数*：LeakyReLU 的反向计算变成一个 `LeakyReluBackwardBackward0` 节点，而反向计算中用到的转置权重（`TBackward0`、`MmBackward0`）又连回 D 的参数。惩罚的梯度正是沿着这条路径去训练 D 的。下面是一个小评判器的惩罚，直接从运行中的张量画出来：

# %%
torch.manual_seed(0)
D_small = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
x_hat = torch.randn(3, 4, requires_grad=True)
scores = D_small(x_hat).squeeze(1)
g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
nodes = sorted({type(fn).__name__ for fn in graphs.walk([penalty])})
claim("惩罚的计算图里有 D 的 LeakyReLU 的导数，并且连到了 D 的两个权重",
      "LeakyReluBackwardBackward0" in nodes and "AccumulateGrad" in nodes
      and all(p_grad is not None for p_grad in grad(penalty, [D_small[0].weight, D_small[2].weight], retain_graph=True)),
      ", ".join(nodes))
graphs.draw({"penalty": penalty}, graphs.param_names(D=D_small),
            title=tr("a gradient penalty's graph (create_graph=True)"))


# %% [markdown]
# ## 延伸 · 惩罚代码里的 `retain_graph`：写 `True`、省略，还是写 `False`
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 网上找到的惩罚代码经常写成 `autograd.grad(..., create_graph=True, retain_graph=True)`，接着又写 `loss_D.backward(retain_graph=True)`。第一个 `retain_graph=True` 重复了 `create_graph=True` 已经做了的事（第 1 节）。第二个会让这一步保存的所有张量在它之后继续存活，直到计算图被丢弃，只为了一次永远不会到来的第二次反向传播。删掉哪一个都是安全的。那么，在 `create_graph=True` 旁边写上 `retain_graph=False` 又会怎样？在 R1 式的代码里（第 4 节），惩罚的梯度和损失共用 D 在真实图像上的同一次前向传播：

# %%
def r1_loss(**grad_options):
    x_real_leaf = x_real.clone().requires_grad_(True)
    scores_real = D(x_real_leaf)
    g, = grad(scores_real, x_real_leaf, grad_outputs=torch.ones_like(scores_real), create_graph=True, **grad_options)
    return F.softplus(-scores_real).mean() + 5 * g.flatten(1).pow(2).sum(1).mean()   # 损失加上 R1，权重为 5


# %% reveals=["retain_graph=False.{0,60}\u91ca\u653e"] tags=["predict"]
prediction = True  # SOLUTION: r1_loss(retain_graph=False).backward() 会报错吗？（True/False）
try:
    r1_loss(retain_graph=False).backward()
    backward_ran = True
except RuntimeError:
    backward_ran = False
check("r1_loss(retain_graph=False).backward() 会报错", prediction, not backward_ran,
      why="retain_graph=False 一求完梯度，就释放了 D 在真实图像上的前向传播所保存的东西，而损失的反向传播还需要"
          "它们。")

# %%
with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    r1_loss(retain_graph=False).backward()


# %% [markdown]
# 写在 `create_graph=True` 旁边的 `retain_graph=False` 释放了 D 在真实图像上的前向传播，而损失还需要它。省略 `retain_graph`（这时它跟随 `create_graph`），同样的代码就能运行。至于最后的 `backward(retain_graph=True)`，它只是占着内存：在它之后，已保存张量仍然被持有。

# %%
def r1_step(retain):
    loss = r1_loss()                                        # 省略 retain_graph
    D.zero_grad()
    loss.backward(retain_graph=retain)
    return loss, [p.grad.clone() for p in D.parameters()]

(loss_kept, grads_kept), (loss_freed, grads_freed) = r1_step(retain=True), r1_step(retain=False)
claim("不管有没有 backward(retain_graph=True)，这一步给出的梯度都相同",
      all(torch.allclose(a, b) for a, b in zip(grads_kept, grads_freed)))
kept, freed = graphs.saved_bytes({"loss": loss_kept}), graphs.saved_bytes({"loss": loss_freed})
claim("但加上它，这一步保存的张量在之后仍然留在内存里", kept > 0 and freed == 0,
      f"仍持有 {kept / 2**20:.2f} MiB，对比 {freed} 字节")


# %% [markdown]
# ## 延伸 · 每次 G 更新配 `n_critic` 次评判器更新，以及假样本批量
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# WGAN-GP 每更新一次 G，就更新评判器 5 次。如果一个循环在每次评判器更新时都用 `G(z)` 生成假样本，却不分离它，G 的 `.grad` 就会被*评判器*损失的梯度填充五次。如果 `opt_G.zero_grad()` 只在每轮迭代的开头调用一次，G 的更新就会把它自己的梯度加到这些梯度上。评判器的损失奖励 D 给假样本打低分；它在 G 上的梯度把 G 推向与 G 自己的损失相反的方向，而且一共有五份。在 G 的反向传播之前紧接着调用一次 `zero_grad()`，就能把它们扔掉，G 的更新也就又对了；剩下的只有开销：五次白白穿过 G 的反向传播：

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
claim("不分离时，G 在更新时的梯度背离了正确的梯度（余弦为负）", cosine < 0,
      f"余弦 {cosine:.2f}")
late_zero_G = n_critic_iteration(detach=False, zero_grad_before_G=True)
claim("在 G 的反向传播之前紧接着调用 opt_G.zero_grad()，不分离的循环也能给 G 完全正确的梯度",
      torch.equal(late_zero_G, right_G))

# %% [markdown]
# `strategies.wgan_gp` 避开了这两个坑：每次调用是一次评判器更新，所用的假样本在 `no_grad` 下生成；G 每 `n_critic` 次调用才更新一次，按 `opt_D` 自己的更新计数器来数（所以恢复训练之后，节奏保持不变）。

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
claim("n_critic=5 时调用 wgan_gp 10 次：D 更新 10 次，G 更新 2 次", steps == {"G": 2, "D": 10}, steps)

# %% [markdown]
# ## 延伸 · 实测一个惩罚的开销
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 惩罚需要多做一次 D 的前向传播（在 `x_hat` 上），还要穿过梯度自己的计算图做一次反向传播，也就是二阶反向传播（double backward）。第 05 课的开销探针用钩子统计穿过 G 和 D 的次数。这里用它在原帖 000 的模型上运行 DCGAN 式的顺序和 `wgan_gp`；`wgan_gp` 的计数是它 5 次调用为一个周期的平均值（四次只有评判器更新，一次在评判器更新之后还有 G 的更新）。最后说明为什么 `torch.compile` 不能让惩罚变得更便宜。

# %% tags=["nbval-ignore-output"]
measured = {name: costs.measure(name, *costs.fresh_gan(batch=16), steps=5, warmup=5)
            for name in ("d_first_reuse_fake", "wgan_gp")}
display(Markdown(costs.cost_table_markdown(measured.values())))

# %%
gp_cost = measured["wgan_gp"]
claim("wgan_gp：每次评判器更新做 3 次 D 的前向传播（假样本、真实样本、x_hat），每第 5 次调用再为 G 做第 4 次："
      "平均每次调用 3.2 次", gp_cost.D_forward == 3.2, f"{gp_cost.D_forward:g}")
claim("每 5 次调用只有 1 次对 G 做反向传播（给 D 的假样本在 no_grad 下生成）", gp_cost.G_backward == 0.2,
      f"{gp_cost.G_backward:g}")
claim("每次调用，D 的每个参数只做一次梯度累积：惩罚的梯度和损失的梯度在同一次反向传播里到达",
      gp_cost.D_grad_passes == 1, f"{gp_cost.D_grad_passes:g}")

# %% [markdown]
# 在同一个批量上，惩罚本身给一次评判器更新增加了什么：自动微分保存的张量（二阶反向传播还需要梯度的计算图），以及一次评判器更新在有无惩罚时各自的耗时。

# %%
G16, D16, x_real16, noise16 = costs.fresh_gan(batch=16)
with torch.no_grad():
    x_fake16 = G16(noise16(16))

def critic_step_loss(gp_weight):
    loss_D = D16(x_fake16).mean() - D16(x_real16).mean()
    return loss_D + gp_weight * strategies.gradient_penalty(D16, x_real16, x_fake16) if gp_weight else loss_D

saved_plain = graphs.saved_bytes({"loss_D": critic_step_loss(0)}, exclude=list(D16.parameters()))
saved_gp = graphs.saved_bytes({"loss_D": critic_step_loss(10)}, exclude=list(D16.parameters()))
claim("加上惩罚后，一次评判器更新保存的字节数是不加时的 1.5 倍以上",
      saved_gp > 1.5 * saved_plain, f"不加时 {saved_plain / 2**20:.2f} MiB，加上时 {saved_gp / 2**20:.2f} MiB")


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

ms_per_critic_step(0, repeats=2), ms_per_critic_step(10, repeats=2)          # 预热
without, with_gp = ms_per_critic_step(0), ms_per_critic_step(10)
print(tr("critic step, median of 7: {without:.1f} ms without the penalty, {with_gp:.1f} ms with it "
         "({ratio:.2f}x), batch 16, torch {version}", without=without, with_gp=with_gp, ratio=with_gp / without,
         version=torch.__version__))

# %% [markdown]
# **惩罚无法穿过 AOTAutograd 运行**。让一步训练变得更便宜，常用的办法是 `torch.compile(D)`。编译后的模块用 AOTAutograd 生成的函数来运行它的前向传播和反向传播，而惩罚需要的是这个反向传播的反向传播。下面是最小的例子，用讲梯度计算图的那个延伸里的小评判器，加上 `backend="aot_eager"`：它运行 AOTAutograd，但不生成代码，所以不需要 C++ 编译器（默认后端 inductor 也经过同一个 AOTAutograd）。在 Python 3.13.0 的 Colab 上，每个编译过的单元格还会打印 torch 的一条警告，说在这个 Python 版本上 guard 可能运行得更慢；它不影响这里的任何结果（见 docs/setup.md 中的 `make check-colab`，英文）。

# %%
D_compiled = torch.compile(D_small, backend="aot_eager")
x_hat = torch.randn(3, 4, requires_grad=True)
scores = D_compiled(x_hat)
g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
claim("穿过编译后的 D，grad(..., create_graph=True) 返回一个带 grad_fn 的梯度", g.grad_fn is not None,
      type(g.grad_fn).__name__)
with expect_error(RuntimeError, "does not currently support double backward"):
    ((g.norm(2, dim=1) - 1) ** 2).mean().backward()

D_dynamo_only = torch.compile(D_small, backend="eager")   # Dynamo 捕获计算图，但不做任何预先编译
scores = D_dynamo_only(x_hat)
g, = grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
((g.norm(2, dim=1) - 1) ** 2).mean().backward()
claim("用 backend=\"eager\"（绕开 AOTAutograd），惩罚的反向传播能运行，并且到达 D 的权重",
      all(w.grad is not None and bool(w.grad.abs().sum() > 0) for w in (D_small[0].weight, D_small[2].weight)))
D_small.zero_grad(set_to_none=True)

# %% [markdown]
# 梯度能拿回来；错误要等到惩罚做反向传播时才出现。`backend="eager"` 能跑通：它把捕获到的计算图原样交回 PyTorch 执行，中间没有 AOTAutograd。训练器知道这一点：`TrainConfig` 拒绝在 `wgan_gp` 下使用 `fast=True`（编译 G 和 D）。能运行的做法是：评判器的损失穿过编译后的 D，惩罚则穿过它所包装的模块 `D_compiled._orig_mod`，二者持有相同的参数。

# %%
with expect_error(ConfigError, "不能训练 wgan_gp"):
    TrainConfig(strategy="wgan_gp", fast=True).validate()

x_fake_small, x_real_small = torch.randn(3, 4), torch.randn(3, 4)

def small_critic_grads(D_loss, D_penalty):
    loss = D_loss(x_fake_small).mean() - D_loss(x_real_small).mean() + 10 * strategies.gradient_penalty(
        D_penalty, x_real_small, x_fake_small, eps=torch.tensor([0.2, 0.5, 0.9]))
    return grad(loss, list(D_small.parameters()))

mixed, eager = small_critic_grads(D_compiled, D_compiled._orig_mod), small_critic_grads(D_small, D_small)
claim("损失穿过编译后的 D，惩罚穿过 D_compiled._orig_mod：能运行，而且 D 得到的梯度与完全不编译时的相同",
      all(torch.allclose(a, b, atol=1e-6) for a, b in zip(mixed, eager)))

# %% [markdown] tags=["read-after-exercises"]
# ### 人们怎么写，结果如何
#
# | 人们写的代码 | 在如今的 torch 上 |
# |---|---|
# | `torch.autograd.grad(D(x_hat), x_hat)`，D 给每张图像一个分数 | 报错“grad can be implicitly created only for scalar outputs”（第 2 节） |
# | 由分离过的张量构成的插值点，没有调用 `requires_grad_()` | 报错“One of the differentiated Tensors does not require grad”（第 2 节） |
# | 惩罚的 `autograd.grad` 不加 `create_graph=True` | 能运行，但惩罚什么也训练不了：它对 D 的梯度为零（第 3 节） |
# | `autograd.grad(..., create_graph=True, retain_graph=True)` | 能运行；`create_graph=True` 本来就隐含了 `retain_graph=True`（延伸：`retain_graph`） |
# | 对 D 在真实图像上的分数用 `create_graph=True, retain_graph=False`，然后在同样的分数上算损失 | 报错“Trying to backward through the graph a second time”（延伸：`retain_graph`） |
# | `torch.compile(D)`，然后穿过它计算梯度惩罚 | `autograd.grad(..., create_graph=True)` 能运行；惩罚的反向传播报错 “does not currently support double backward”（延伸：开销） |
# | 在没有分离的假样本批量上做 `n_critic` 次评判器更新，`opt_G.zero_grad()` 只在每轮迭代开头调用一次 | 能运行，但 G 的梯度方向是错的；在 G 的反向传播之前紧接着调用 `zero_grad()` 就对了，但评判器更新仍要为穿过 G 的反向传播付出开销（延伸：`n_critic`） |
