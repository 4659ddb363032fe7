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
# # 第 04 课 · `detach()`、`torch.no_grad()` 与 `torch.inference_mode()`
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/04_detach_and_no_grad.ipynb)
#
# [English](../04_detach_and_no_grad.ipynb) · [学生版](student/04_detach_and_no_grad.ipynb)
#
# **目标**。弄清楚“关掉梯度”的三种方式各自产生的是什么；用 `detach()` 切断 GAN 一步中 G→D 的梯度（并检查每个参数的 `.grad` 来证明这一点）；认出两种不该用分离来修正的情形：分离会去掉 G 需要的梯度时，以及一个优化器同时管着两个模型时。然后把 G 的 BatchNorm 也考虑进来，掂量原帖 000 的说法：`detach()` 是比 `no_grad` 更精确的选择。最后写一个 D 的训练步和一个采样函数，二者都不改动 G。
#
# **材料**。原帖 000（它修正后的循环；聖光之護，「解决PyTorch GAN训练中的梯度计算错误:inplace操作与计算图分离」，php 中文网，2025-10-02），原帖 001（`d.detach()` 这个修正），原帖 003（它的各种策略里的 `detach`；凌逆战，「pytorch训练GAN时的detach()」，博客园，2020-11-09），原帖 004（关于共享优化器的提醒）。这些原帖都是公开的中文博客文章，出处见[教师手册](../README.md#the-seeds)（英文）；本课运行的每段代码都写在单元格里。

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
from gan_lessons import graphs
from gan_lessons.models import Generator, Discriminator

# %% [markdown]
# ## 1 · `detach()` 返回的是什么
#
# `detach()` 返回一个没有 `grad_fn` 的新张量对象，所以自动微分不会顺着它往回走。它不是副本：它指向**同一块内存**。GAN 的一步把 `x_fake.detach()` 交给 D，把 `x_fake` 留给 G，所以发生在其中一个身上的事，也可能发生在另一个身上。

# %%
a = torch.ones(3, requires_grad=True)
y = a.exp()                       # exp 保存它的输出 y
y_detached = y.detach()
claim("y.detach() 与 y 共享内存", y_detached.data_ptr() == y.data_ptr())
claim("但它是别名，而不是自动微分意义上的视图：它没有 _base", not y_detached._is_view() and y_detached._base is None)

# %% reveals=["\u5171\u4eab[^\u3002\\n]*\u7248\u672c\u8ba1\u6570\u5668", "y \u7684\u7248\u672c\u52a0\u4e86 1"] tags=["predict"]
prediction = False  # SOLUTION: 执行 `y = a.exp(); y.detach().zero_()` 之后，`y.sum().backward()` 会填上 a.grad 吗？（True/False）
a = torch.ones(3, requires_grad=True)
y = a.exp()
y.detach().zero_()
try:
    y.sum().backward()
    raised = False
except RuntimeError:
    raised = True
check("原地把 y.detach() 清零之后，反向传播填上了 a.grad", prediction, not raised and a.grad is not None,
      why="detach() 不仅共享 y 的内存，也共享它的版本计数器：zero_() 让 y 的版本加了 1，而 exp 为它的反向传播"
          "保存了 y（第 03 课）。")

# %%
a = torch.ones(3, requires_grad=True)
y = a.exp()
y_detached = y.detach()
version_before = y._version
y_detached.zero_()
claim("y_detached.zero_() 把 y 清零了，也让 y 的版本加了 1", torch.equal(y, torch.zeros(3)) and y._version == version_before + 1,
      f"y = {rounded(y)}，版本 {version_before} -> {y._version}")
with expect_error(RuntimeError, "output 0 of Exp(Backward0)?, is at version 1; expected version 0"):
    y.sum().backward()

# %% [markdown]
# `detach()` 共享存储**和**版本计数器，所以通过它做的原地修改，自动微分也能察觉。如果你需要一个可以随意修改的分离出来的张量，请用 `y.detach().clone()`。

# %% [markdown]
# ## 2 · `detach()`、`torch.no_grad()` 与 `torch.inference_mode()` 的对比
#
# 三者都能阻止梯度，但产生的东西各不相同；选错了，要么浪费内存，要么在后面报错。

# %%
G = nn.Linear(4, 4)
z = torch.randn(2, 4)

x_detach = G(z).detach()              # 先建计算图再切断：前向传播白白保存了张量
with torch.no_grad():
    x_nograd = G(z)                   # 根本不建计算图
with torch.inference_mode():
    x_inference = G(z)                # 没有计算图，也没有版本计数器

made = {"detach": x_detach, "no_grad": x_nograd, "inference_mode": x_inference}
claim("三者都是叶子张量：requires_grad=False，没有 grad_fn",
      all(t.is_leaf and not t.requires_grad and t.grad_fn is None for t in made.values()))
inference = [name for name, t in made.items() if t.is_inference()]
claim("只有 inference_mode 产生推理张量", inference == ["inference_mode"], ", ".join(inference))

# %% [markdown]
# 三个看起来差不多的假样本批量：背后都没有计算图，值也都一样。D 的训练步用一个假样本批量训练 D：先算 `D(x_fake)`，再算损失，然后反向传播到 D 的权重。

# %% reveals=["Inference tensors cannot be saved", "\u7edd\u4e0d\u7528\u4e8e[^\u3002\\n]*\u8bad\u7ec3"] tags=["predict"]
prediction = "inference_mode"  # SOLUTION: 让 D = nn.Linear(4, 1) 分别在这三个批量上训练；哪些会报错？写"都不会"，或者把它们的名字用 ", " 连起来
D = nn.Linear(4, 1)
raising = []
for name, x_fake in made.items():
    try:
        D(x_fake).sum().backward()
    except RuntimeError:
        raising.append(name)
check("D 无法用来训练的假样本批量", prediction, ", ".join(raising) or "none",
      why="D 的 Linear 为了求权重的梯度会保存它的输入，而推理张量不能保存下来供反向传播使用；"
          "分离出来的批量和 no_grad 下得到的批量都是普通张量。")

# %%
D = nn.Linear(4, 1)
D(x_nograd).sum().backward()
claim("D 作用在 no_grad 得到的假样本上：反向传播正常运行，并填上 D.weight.grad", D.weight.grad is not None)
with expect_error(RuntimeError, "Inference tensors cannot be saved for backward"):
    D(x_inference).sum().backward()
with expect_error(RuntimeError, "Inference tensors do not track version counter"):
    x_inference._version


# %% [markdown]
# | 工具 | 产生什么 | 用途 |
# |---|---|---|
# | `t.detach()` | `t` 的别名：同一块内存、同一个版本计数器、没有 `grad_fn`（torch 不把它标记为视图） | 切断一个你在别处还要用的计算图（给 D 的假样本批量，G 还要再用一次） |
# | `with torch.no_grad():` | 没有计算图的普通张量 | 优化器更新、评估、生成只给 D 看的假样本批量 |
# | `with torch.inference_mode():` | 推理张量（没有计算图，没有版本计数器） | 纯推理：采样图像、计算指标；绝不用于将要进入训练的数据 |
#
# 原帖 000 修正后的循环写的是 `with torch.no_grad(): fake_samples = g(z).detach()`。这样写是正确的；不过 `no_grad` 里面的 `detach()` 没有任何作用，因为根本没有建计算图。

# %% [markdown]
# ## 3 · 在 GAN 的一步中切断 G→D 的梯度
#
# D 在假样本批量上的损失只应该训练 D。如果假样本批量按 G 生成时的样子直接送进 D，`loss_D.backward()` 会对 G 做什么？我们在原帖 000 的模型上检查**每一个**参数的 `.grad`。

# %%
def grads_after_D_step(detach):
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    z, x_real = torch.randn(8, G.z_dim), torch.rand(8, 1, 28, 28) * 2 - 1
    x_fake = G(z)
    logits_fake = D(x_fake.detach() if detach else x_fake)
    loss_D = (F.binary_cross_entropy_with_logits(D(x_real), torch.ones(8))
              + F.binary_cross_entropy_with_logits(logits_fake, torch.zeros(8)))
    loss_D.backward()
    count = lambda net: (sum(p.grad is not None for p in net.parameters()), len(list(net.parameters())))
    return count(G), count(D)


# %% reveals=["G 14/14", "\u586b\u4e0a G \u6bcf\u4e2a\u53c2\u6570\u7684 ?`?\\.grad"] tags=["predict"]
prediction = 14  # SOLUTION: 原帖 000 的 G 有 14 个参数张量；不分离假样本时，loss_D.backward() 之后其中有几个有 .grad？
check("不分离假样本的 D 训练步之后，有 .grad 的 G 参数个数", prediction, grads_after_D_step(detach=False)[0][0],
      why="D 的损失经由 x_fake 到达 G 的每一个参数，所以反向传播会把它们全部填上。")

# %%
(g_with, g_all), (d_with, d_all) = grads_after_D_step(detach=False)
claim("不分离假样本时，loss_D.backward() 会填上 G 每个参数的 .grad", g_with == g_all,
      f"有 .grad 的参数：G {g_with}/{g_all}，D {d_with}/{d_all}")
(g_with, g_all), (d_with, d_all) = grads_after_D_step(detach=True)
claim("用 x_fake.detach() 时，G 每个参数的 .grad 都是 None，而 D 的每个参数都有 .grad",
      g_with == 0 and d_with == d_all, f"有 .grad 的参数：G {g_with}/{g_all}，D {d_with}/{d_all}")
claim("原帖 000 的 G 有 14 个参数张量，D 有 8 个", g_all == 14 and d_all == 8)

# %% [markdown]
# 用了 `detach()`，D 的训练步只碰 D 的 8 个参数，G 的 14 个一个也不碰。不用它，反向传播会跑遍整个 G：如果 `opt_G.zero_grad()` 放在了正确的位置，这“只不过”是白费计算，但它正是第 02 课和第 03 课那些错误的根源。
#
# **原帖 000 修正后的循环，照原样运行**。它的 D 以 `Reshape()` 结尾，所以对每张图像返回一个 logit，形状为 `[64]`；它的标签却构造成 `[64, 1]`，注释说这是为了「确保标签维度匹配判别器输出」。`binary_cross_entropy_with_logits` 拒绝这种不匹配，所以这个“修正”在第一个损失处就停下了：

# %%
g, d = Generator(), Discriminator()
x_real = torch.rand(64, 1, 28, 28) * 2 - 1
real_output = d(x_real)
real_label = torch.ones(x_real.shape[0], 1, device=device)  # 和原帖 000 一样
with expect_error(ValueError, r"Target size \(torch.Size\(\[64, 1\]\)\) must be the same as input size \(torch.Size\(\[64\]\)\)"):
    F.binary_cross_entropy_with_logits(real_output, real_label).mean()

# %% [markdown]
# 把标签的形状改成 `[64]`，这个循环就能运行，它就是第 05 课里“先训练 D，再对 G 做一次新的前向传播”的顺序。

# %% [markdown]
# ## 4 · 原帖 000 的 `no_grad` 与 `detach()`，以及 G 的 BatchNorm
#
# 原帖 000 的说明认为，对于 D 看到的假样本批量，`detach()` 更精确：
#
# > 在GANs中,当判别器处理生成器输出的假样本时,使用detach()更精确地表达了“只使用数据,不追踪其来源梯度”的意图。
#
# 它的循环里的注释也说：「在生成假样本时,可以暂时禁用梯度计算,但detach更常用且灵活」。这话只对了一半。`detach()` 的作用范围更窄：它只切断一个张量的历史，而 `no_grad` 覆盖它代码块里的每一个运算。但对于 D 的假样本批量，`detach()` 在效果上并不更精确：两种写法下 D 得到的梯度相同，而 `G(z).detach()` 先要**带着**计算图跑一遍 G 的前向传播，为一次永远不会到来的反向传播保存张量。而且 G 的状态不只有它的计算图：还有 BatchNorm 的统计量。

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()          # 原帖 000 的模型
z = torch.randn(64, G.z_dim)
lives_anyway = [*G.parameters(), *G.buffers(), z]

out = G(z)
x_fake_detach = out.detach()                 # 原帖 000 的说明推荐的写法
saved_detach = graphs.saved_bytes({"G(z)": out}, lives_anyway)
del out                                      # 计算图随之释放
with torch.no_grad():
    x_fake_nograd = G(z)                     # 根本没有计算图
saved_nograd = graphs.saved_bytes({"G(z)": x_fake_nograd}, lives_anyway)

def D_grads(x_fake):
    D.zero_grad()
    F.binary_cross_entropy_with_logits(D(x_fake), torch.zeros(64)).backward()
    return [p.grad.clone() for p in D.parameters()]

claim("分离出来的假样本批量和 no_grad 下的假样本批量给 D 的梯度相同",
      all(torch.equal(a, b) for a, b in zip(D_grads(x_fake_detach), D_grads(x_fake_nograd))))
claim("G(z).detach()：G 的前向传播为一次永远不会运行的反向传播保存了激活值；no_grad 什么也没保存",
      saved_detach > 0 and saved_nograd == 0, f"{saved_detach / 2**20:.1f} MiB 对 {saved_nograd} 字节")

# %% [markdown]
# 这些张量在语句结束时随计算图一起释放，所以代价是 G 运行期间更高的内存峰值，而不是内存泄漏。对于只给 D 看的假样本批量，`with torch.no_grad(): x_fake = G(z)` 更省，而且同样精确。`detach()` 适用于同一个 `G(z)` 两边都要用的情形：给 D 的损失用时要切断，给 G 的损失用时要完整（第 05 课的 `d_first_reuse_fake` 和 `g_first`）。原帖 000 两个都写了；其中的 `detach()` 没有任何作用。
#
# **G 的 BatchNorm**。G 处于训练模式。BatchNorm 层维护着运行统计量（`running_mean`、`running_var`、`num_batches_tracked`）：它们是缓冲区而不是参数，在评估模式下用来做规范化。原帖 000 的循环在 `no_grad` 下、G 处于训练模式时，生成给 D 的假样本批量。

# %%
bn = G.net[1]                                # G 的第一个 BatchNorm1d
def bn_change(run):
    """运行一次；返回 bn.running_mean 是否变了，以及 num_batches_tracked 增加了多少。"""
    mean, batches = bn.running_mean.clone(), bn.num_batches_tracked.item()
    run()
    return not torch.equal(mean, bn.running_mean), bn.num_batches_tracked.item() - batches

def G_under_no_grad():
    with torch.no_grad():
        G(z)


# %% reveals=["(\u66f4\u65b0|\u6539\u53d8|\u6539\u52a8)\u4e86? ?(\u5b83\u7684|\u5b83\u4eec\u7684|BatchNorm ?\u7684)?\u8fd0\u884c\u7edf\u8ba1\u91cf", "\u4ecd\u4f1a\u66f4\u65b0 ?BatchNorm"] tags=["predict"]
prediction = True  # SOLUTION: 在训练模式下，`with torch.no_grad(): G(z)` 会改变 bn.running_mean 吗？
check("no_grad 下的前向传播会改变 BatchNorm 的 running_mean", prediction, bn_change(G_under_no_grad)[0],
      why="运行统计量是缓冲区，训练模式下的每次前向传播都会更新它们；no_grad 只是不建计算图。")

# %% [markdown]
# 训练模式下的 BatchNorm 每做一次前向传播都会更新它的运行统计量。写这些统计量的是前向传播本身，不涉及梯度，也不涉及优化器，所以关掉计算图也拦不住它们。在原帖 000 的一步里，G 要运行两次：一次在 `no_grad` 下，为 D 生成假样本批量；一次带着计算图，用于 G 的那一步：

# %%
changed, counted = bn_change(G_under_no_grad)
claim("在 no_grad 下，G(z) 仍会更新 BatchNorm 的运行统计量", changed and counted == 1,
      f"num_batches_tracked +{counted}")
changed, counted = bn_change(lambda: G(z).detach())
claim("G(z).detach() 也一样", changed and counted == 1, f"num_batches_tracked +{counted}")

opt_G, opt_D = optim.Adam(G.parameters(), lr=1e-3), optim.Adam(D.parameters(), lr=1e-3)
x_real = torch.rand(64, 1, 28, 28) * 2 - 1
real, fake = torch.ones(64), torch.zeros(64)   # 形状为 [B]，原帖 000 的循环需要这样

def seed000_step():
    opt_D.zero_grad()
    with torch.no_grad():
        x_fake = G(torch.randn(64, G.z_dim))     # G 的第一次前向传播：给 D 的假样本批量
    loss_D = (F.binary_cross_entropy_with_logits(D(x_real), real)
              + F.binary_cross_entropy_with_logits(D(x_fake), fake))
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    loss_G = F.binary_cross_entropy_with_logits(D(G(torch.randn(64, G.z_dim))), real)   # 第二次，带计算图
    loss_G.backward()
    opt_G.step()

changed, counted = bn_change(seed000_step)
claim("原帖 000 循环的一步会让它们变两次", changed and counted == 2, f"num_batches_tracked +{counted}")

G.eval()
changed, counted = bn_change(G_under_no_grad)
claim("能让它们停下来的是 G.eval()", not changed and counted == 0, f"num_batches_tracked +{counted}")
with torch.no_grad():
    gap = (G(z) - x_fake_nograd).abs().max().item()
G.train(True)                                # 回到训练模式
claim("而且 eval() 改变了 G 的输出：BatchNorm 现在用运行统计量做规范化", gap > 0,
      f"与训练模式下的批量相比，最大 |差| {gap:.2f}")


# %% [markdown]
# 这些统计量数的是 G 的前向传播次数，而不是 G 走了几步：这里每一步两次，都来自同一个 G。这没有害处，但读 `num_batches_tracked` 时值得知道。`no_grad` 和 `detach()` 关掉的是计算图，从不改变模块的模式；`G.eval()` 切换的是模式，G 计算的内容也随之改变，所以它应当用在采样时，而不应用在为 D 生成假样本批量时。

# %% [markdown] tags=["read-after-exercises"]
# **评判原帖里的代码**。
#
# | 原帖代码 | 在如今的 torch 上 |
# |---|---|
# | 000：「修正后的训练循环」 | 在第一个损失处抛出 `ValueError: Target size (torch.Size([64, 1])) must be the same as input size (torch.Size([64]))`；它的 D 返回 `[B]`，标签却是 `[B, 1]` |
# | 000：`with torch.no_grad(): fake = g(z).detach()` | 能运行；`no_grad` 里面的 `detach()` 不起任何额外作用 |
# | 000 的说明：`detach()` 比 `no_grad`「更精确地表达了“只使用数据,不追踪其来源梯度”的意图」 | 对了一半：`detach()` 切断一个张量，`no_grad` 管一整个代码块，D 从两者得到的梯度相同；但 `detach()` 之前的那次前向传播白白保存了张量。两者都拦不住 G 的 BatchNorm 运行统计量（第 4 节） |
# | 001：`lossG = (g + d.detach()).sum()` | 能运行，但 G 的梯度丢掉了流经 D 的那部分 |
# | 004：配合 `itertools.chain` 使用分离 | 能运行；model1 得不到来自 `l2` 的梯度（第 02 课）：它的 `.grad` 一直是 `None`，所以共享的 Adam 跳过了它（延伸“分离用错的情形（二）”；`.grad` 若存的是零又会怎样，最后一个延伸再问） |

# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - `detach()` 得到的是别名：同一块内存、同一个版本计数器、没有 `grad_fn`。需要修改它时，用 `detach().clone()`。
# - `no_grad` 不建计算图；`inference_mode` 还去掉了版本计数器，它产生的张量不能保存下来供之后的反向传播使用。
# - 在 GAN 的一步中，要分离的是给 **D 的**损失用的假样本批量：这样 G 的 14 个参数就不会从中得到梯度。
# - 当一个损失必须训练它上游的东西时，分离就是错的：要穿过 D 来训练 G 的 G 损失，以及一个优化器同时管着两个模型时的任何损失。原帖 000 修正后的循环还需要形状为 `[B]` 而不是 `[B, 1]` 的标签。
# - 被 `detach()` 切断的参数得不到梯度；它是否因此保持不动，取决于 `zero_grad`，练习之后的最后一节会讲到。
# - 对于 D 的假样本批量，`no_grad` 和 `detach()` 给 D 的梯度相同；`no_grad` 不建计算图，`detach()` 则要等前向传播白白保存了张量之后才切断计算图。两者都拦不住 BatchNorm 的运行统计量（在原帖 000 的循环中每步两次）；
#   `G.eval()` 能拦住，但会改变 G 的输出。

# %% [markdown]
# ## 练习
#
# ### 动手实现：只训练 D、不碰别的东西的 D 训练步
#
# SAGAN 和 BigGAN 训练 D 时用的不是 BCE，而是**铰链损失**（hinge loss）：D 对真实图像的打分被往上推，到 1 为止；对生成样本的打分被往下压，到 -1 为止；超出间隔的打分不再贡献任何东西。写一个 `d_step(G, D, opt_D, z, x_real)`：以 `relu(1 − D(x_real)).mean() + relu(1 + D(G(z))).mean()` 为损失，让 D 更新一步，其中 D 对每张图像返回一个打分（形状为 `[B]`），`relu` 是 `F.relu`。它必须训练 D，而且它的反向传播不能进入 G（第 3 节）。返回 `loss_D`。检查程序在原帖 000 的模型上运行它，并模拟训练进行到一半时的状态：D 的打分有一部分已越过间隔，D 的 `.grad` 里已存有之前的梯度；它在 `opt_D.step()` 时读取 D 的梯度（用 `register_step_pre_hook`），与正确的梯度（两项之和或两项的平均）比较，并监视 G 的参数，看过程中有没有为它们算出任何梯度。整个函数体都由你来写。

# %%
def d_step(G, D, opt_D, z, x_real):
    """D 在铰链损失上的一步：真实图像的打分推到 1，生成样本的打分压到 -1；训练 D，且反向传播从不进入 G。"""
    ### BEGIN SOLUTION
    x_fake = G(z).detach()                    # 与 G 切断：D 的反向传播到这里为止
    loss_D = F.relu(1 - D(x_real)).mean() + F.relu(1 + D(x_fake)).mean()
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    return loss_D
    ### END SOLUTION

my_answer = d_step  # SOLUTION: 让它指向你的 d_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_d_step(my_answer)
assert solved, "d_step：还没有完成，或者还不对：上面几行说明了缺什么"


# %% [markdown]
# ### 动手实现：训练中途生成样本图
#
# 训练循环每隔几百步就会画一张 G 生成的图像网格（第 06 课的训练器就是这样做的）。这次采样不能在训练上留下任何痕迹：第 4 节展示了训练模式下的前向传播会对 BatchNorm 的运行统计量做什么，也展示了在前向传播之后才 `detach()` 为时已晚，省不下计算图的内存。写一个 `sample(G, z)`：它返回 **G 在评估模式下计算出的**图像，不建计算图，让 G 的参数和运行统计量保持原样，并让 G 回到它原来所处的模式（训练或评估）。检查程序先把一个小的 G 训练两步，然后分别在训练模式和评估模式下对它调用你的函数，用 `saved_tensors_hooks` 数它的前向传播保存了多少张量，并比较其余的一切。

# %%
def sample(G, z):
    """用于插图的 G 的图像：评估模式下的输出，不建计算图，G 的任何东西都不改变。"""
    ### BEGIN SOLUTION
    was_training = G.training
    G.eval()                                  # BatchNorm 用它的运行统计量做规范化
    with torch.no_grad():                     # 不建计算图：不为反向传播保存任何东西
        images = G(z)
    G.train(was_training)
    return images
    ### END SOLUTION

my_answer = sample  # SOLUTION: 让它指向你的 sample

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_sample(my_answer)
assert solved, "sample：还没有完成，或者还不对：上面几行说明了缺什么"


# %% [markdown]
# ## 延伸 · 分离用错的情形（一）：它可能去掉 G 需要的梯度
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 原帖 001 用 `lossG = (g + d.detach()).sum()` 修好了它的 G/D 小例子。代码能运行，但 G 的损失从此忽略了经过 D 的那条路径，而 GAN 的生成器恰恰是从这条路径上学习的。我们把它和按原样写出的那个损失的梯度作对比，后者用正确的方式计算：用 D 更新后的权重，做一次新的前向传播。

# %%
def seed001_grads(fix):
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Linear(2, 2)
    optimD = optim.Adam(D.parameters())
    t = torch.tensor([1., 2], requires_grad=True)
    g = G(t)
    d = D(g)
    optimD.zero_grad()
    d.sum().backward(retain_graph=True)
    optimD.step()
    G.zero_grad(); D.zero_grad()           # 所有 .grad 都恢复为 None
    if fix == "seed 001: d.detach()":
        (g + d.detach()).sum().backward()
    else:                                  # 经过更新后的 D 做一次新的前向传播
        g = G(t)
        (g + D(g)).sum().backward()
    return t, G.weight.grad, D.weight.grad

t, detached, D_grad = seed001_grads("seed 001: d.detach()")
_, fresh, _ = seed001_grads("fresh forward")
claim("原帖 001 的 d.detach()：lossG 不给 D 任何梯度（D.weight.grad 为 None）", D_grad is None)
claim("而 G 的梯度只有 d(sum g)/dW：不管 D 是什么，每一行都是 t", torch.equal(detached, t.detach().expand(2, 2)),
      f"G.weight.grad = {rounded(detached)}")
gap = (detached - fresh).abs().max().item()
claim("它与让更新后的 D 重新做一次前向传播所得的 G 的梯度不同", not torch.allclose(detached, fresh),
      f"新的前向传播：{rounded(fresh)}，最大 |差| {gap:.4f}")

# %% [markdown]
# 分离之后的梯度只是 `d(sum g)/dW`，与 D 的输出无关。对 GAN 来说，这意味着 G 不再从 D 那里学习。原帖 001 做分离的理由是：
#
# > 现在是训练G的参数,D的参数应该是不变的,所以我们不希望D参数的梯度在反向传播时被计算,这样既节省了计算资源,又可以避免inplace error。
#
# 这个目的达到了，代价却是丢掉了经过 D 的路径；冻结 D 或者用 `backward(inputs=...)`（第 05 课）既能保留这条路径，又能省掉 D 的梯度。要分离的是**给 D 的损失用的假样本批量**，绝不是 G 的损失里 D 的输出。

# %% [markdown]
# ## 延伸 · 分离用错的情形（二）：一个优化器管两个模型
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 这是从与第 02 课相反的一面来看：如果一个优化器同时更新两个模型，损失里的一个 `detach()` 会让它上游的参数得不到这个损失的梯度，而优化器接下来怎么处理这些参数，取决于它们的 `.grad`。症状是某个模型悄悄地一直不变，或者做了你没让它做的事。

# %%
import itertools

torch.manual_seed(0)
model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
opt = optim.Adam(itertools.chain(model1.parameters(), model2.parameters()), lr=0.1)
before = model1.weight.detach().clone()
data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
for step in range(5):
    opt.zero_grad()
    F.cross_entropy(model2(model1(data).detach()), label).backward()
    opt.step()
claim("因为做了分离，没有任何梯度到达 model1：model1.weight.grad 为 None", model1.weight.grad is None)
claim("于是共享的 Adam 跳过了它：5 步之后 model1 没有变", torch.equal(before, model1.weight))


# %% [markdown]
# ## 延伸 · `None` 还是零：`zero_grad(set_to_none=...)`
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 延伸“分离用错的情形（二）”里，model1 停在原地，是因为它的 `.grad` 是 `None`：`opt.zero_grad()` 把每个 `.grad` 设成 `None`（即 `set_to_none=True`，torch 2.0 起的默认值），反向传播没有写入任何值，而优化器会跳过 `.grad` 为 `None` 的参数。`opt.zero_grad(set_to_none=False)` 则把 `.grad` 填成零，和 torch 2.0 之前的 `zero_grad()` 一样。下面让一个 Adam 同时管 G 和 D；G 先走一步，接着是在 `x_fake.detach()` 上的 D 训练步，所以到第二次 `opt.step()` 时，G 的 `.grad` 要么是零，要么是 `None`。

# %%
def G_after_a_D_step(set_to_none):
    torch.manual_seed(0)
    G, D = nn.Linear(4, 2), nn.Linear(2, 1)
    opt = optim.Adam(itertools.chain(G.parameters(), D.parameters()), lr=0.1)   # 一个优化器同时管两个模型
    z = torch.randn(8, 4)
    F.softplus(-D(G(z))).mean().backward()          # G 的一步：Adam 现在有了 G 的移动平均
    opt.step()
    opt.zero_grad(set_to_none=set_to_none)
    before = G.weight.detach().clone()
    F.softplus(D(G(z).detach())).mean().backward()  # D 在假样本上的损失：没有梯度到达 G
    opt.step()
    return G.weight.grad, (G.weight - before).abs().max().item()


# %% reveals=["\u4e3a\u96f6\u7684\u53c2\u6570\u7167\u6837\u4f1a\u88ab\u66f4\u65b0", "Adam \u4ecd\u4f1a\u66f4\u65b0 G", "`\\.grad` ?\u662f\u96f6\uff0c(\u5c31\u4e0d\u4f1a|\u5e76\u4e0d\u80fd)\u8ba9(\u5b83|\u53c2\u6570)\u4fdd\u6301\u4e0d\u52a8"] tags=["predict"]
prediction = "会变"  # SOLUTION: 用 opt.zero_grad(set_to_none=False) 时，D 训练步的 opt.step() 那一刻 G 的 .grad 全是零：G "会变"还是"不变"？
check("梯度被清零而不是设为 None 时，D 训练步中的 G", prediction,
      "moves" if G_after_a_D_step(set_to_none=False)[1] > 0 else "stays",
      why=".grad 为零的参数照样会被更新，而 Adam 这一步的大小来自它的移动平均，G 之前走的那一步已经把它们填上了。"
          "只有 .grad 为 None 的参数才会被跳过。")

# %%
grad, moved = G_after_a_D_step(set_to_none=False)
claim("zero_grad(set_to_none=False)：G.weight.grad 全是零，Adam 仍会更新 G",
      torch.equal(grad, torch.zeros(2, 4)) and moved > 0, f"最大 |变化| {moved:.4f}")
grad, moved = G_after_a_D_step(set_to_none=True)
claim("zero_grad(set_to_none=True)：G.weight.grad 为 None，Adam 让 G 原封不动",
      grad is None and moved == 0, f"最大 |变化| {moved}")

# %% [markdown]
# `.grad` 为零的参数照样会被更新，而且 Adam 这一步的大小来自它对**之前**各步梯度的移动平均，而不只取决于这一步的梯度：一个以前学过东西的参数会继续移动。`.grad` 是零，并不能让参数保持不动。所以“没有梯度就没有更新”只在 `.grad` 为 `None` 时成立。不带动量的普通 SGD 在零梯度下不会移动 G（它的一步是 `lr * grad`）；带动量的 SGD 则和 Adam 一样，会移动 G。
