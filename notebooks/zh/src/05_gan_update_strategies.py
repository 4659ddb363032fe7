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
# # 第 05 课 · GAN 的更新策略：实测对比
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/05_gan_update_strategies.ipynb)
#
# [English](../05_gan_update_strategies.ipynb) · [学生版](student/05_gan_update_strategies.ipynb)
#
# **目标**。把 GAN 更新 D 和 G 的几种顺序都跑一遍，看哪些会失败、为什么失败；比较每种顺序的实际开销（用钩子统计经过 G 和 D 的遍数，以及运算量、时间和内存）；用一个控件在它们之间切换；最后自己写出一种毫不浪费的顺序。
#
# **材料**。原帖 003（三种策略和一个效率论证；凌逆战，「pytorch训练GAN时的detach()」，博客园，2020-11-09）和原帖 000（`loss_nonsaturating`；聖光之護，「解决PyTorch GAN训练中的梯度计算错误:inplace操作与计算图分离」，php 中文网，2025-10-02）。原帖都是公开的中文博客文章，出处见[教师手册](../README.md#the-seeds)（英文）；本课运行的每段代码都写在本课的单元格里。

# %% [markdown] tags=["read-after-exercises"]
# | 原帖代码 | 在如今的 torch 上 |
# |---|---|
# | 003 的「策略一」：`d_loss.backward(retain_graph=True)`、`optimizer_D.step()`、`g_loss.backward()` | 抛出版本错误（torch 1.5 起；在此之前，则是悄无声息地得到错误的梯度） |
# | 003 的「策略二」：D 作用于 `gen_imgs.detach()`，然后在同一个输出上计算 `g_loss = adversarial_loss(pred_gen, valid)` | 抛出“Trying to backward through the graph a second time”；加上 `retain_graph=True`，则抛出版本错误（两次反向传播之间 D 更新了一步）；加上 `retain_graph=True` 且中间不更新 D，它能运行，但 G **得不到**梯度 |
# | 003 的「策略三」：先更新 G，再让 D 作用于分离后的假样本 | 能运行（即下文的 `g_first`）；原帖说这份开销「不得不」付，这一点不成立：第 4 节统计了它，冻结 D 或使用 `backward(inputs=...)` 都能让它更省 |
# | 000 的 `loss_nonsaturating` | 在它的循环里抛出版本错误 `[512, 1]`；另外，它还把 sigmoid 用了两次，而且既不报错也不警告 |

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
from IPython.display import Markdown, display
from gan_lessons import costs, strategies
from gan_lessons.lesson import headline, show_source
from gan_lessons.models import Generator

def fresh_gan(batch=64):
    """原帖 000 的 G 和 D（固定了随机种子）、一个代替 MNIST 的取值在 [-1, 1] 的批量，以及一个固定了随机种子的噪声来源。"""
    return costs.fresh_gan(batch=batch, device=device)


# %% [markdown]
# ## 0 · 两个玩家，一个损失
#
# 本课的每种策略，都是在安排同样两次更新的先后顺序。这里先说清楚更新的是什么，以及为什么它们用的 G 损失都是 `bce(D(x_fake), 1)`。
#
# **生成器** G 把噪声 z 映射成一个样本：x_fake = G(z)。**判别器** D 把一个样本映射成一个 **logit**：值越大，表示越像“真”。下文的 D(x) 指 σ(logit)，即 D 认为样本为“真”的概率。两者进行如下博弈：
#
# $$\min_G \max_D \; \mathbb{E}_{x}\big[\log D(x)\big] + \mathbb{E}_{z}\big[\log\big(1 - D(G(z))\big)\big]$$
#
# 只有第二项依赖 G，所以博弈中 G 的损失是 log(1 − D(G(z)))。训练初期，D 能轻易识破 G 拙劣的样本（D(G(z)) ≈ 0），而此时这个损失几乎是平的：G 最差的时候反而学得最少。因此，G 改为最小化用意相同的**非饱和**损失 −log D(G(z))。这两个损失都是作用在 D 的 logit 上的二元交叉熵（`F.binary_cross_entropy_with_logits`；即目标取常数的 `strategies.bce(logits, target)`）：目标为 1 时得到 −log σ(ℓ)，它既是 G 在假样本上的损失，也是 D 损失中的真实样本项；目标为 0 时得到 −log(1 − σ(ℓ))，即 D 损失中的假样本项。

# %%
logit = torch.tensor(-6.0, requires_grad=True)       # D 很有把握地判定一个假样本为假
grad_sat, = torch.autograd.grad(torch.log(1 - torch.sigmoid(logit)), logit)    # 博弈本身的 G 损失
grad_non, = torch.autograd.grad(-torch.log(torch.sigmoid(logit)), logit)       # 非饱和损失
claim("在 logit -6 处，博弈本身的 G 损失只给 G 极小的梯度，非饱和损失给出约 -1",
      abs(grad_sat.item()) < 0.01 and abs(grad_non.item() + 1) < 0.01,
      shown=f"{grad_sat.item():.4f} 对 {grad_non.item():.4f}")

logits = torch.linspace(-8, 8, 17)
p_real = torch.sigmoid(logits.double())     # 对数公式用 float64 计算：在 float32 中，1 - sigmoid(-8) 会丢掉有效数字
claim("strategies.bce(logits, 1) 等于 -log sigmoid(logit) 的均值：即 G 的非饱和损失",
      torch.allclose(strategies.bce(logits, 1).double(), -torch.log(p_real).mean(), atol=1e-6))
claim("strategies.bce(logits, 0) 等于 -log(1 - sigmoid(logit)) 的均值：即 D 损失中的假样本项",
      torch.allclose(strategies.bce(logits, 0).double(), -torch.log(1 - p_real).mean(), atol=1e-6))
far = torch.tensor([-200.0])
claim("直接从 logit 计算时，在 log(sigmoid) 下溢的地方它仍是有限值：logit -200 处为 200，而不是 inf",
      strategies.bce(far, 1).item() == 200 and torch.isinf(-torch.log(torch.sigmoid(far))).item())

# %% [markdown]
# 为了看清这个博弈怎样起作用，我们把它缩小到一维。数据是来自 N(3, 0.5²) 的数；G 把一个噪声数变成一个数，D 给一个数打出一个 logit。两者都不知道 3 和 0.5：只有 G 的损失经过 D 传回来的梯度，告诉 G 数据在哪里。下面的循环调用 `strategies.g_first`（第 3 节在原帖 000 的网络上运行的也正是这个函数），共 1000 步：

# %%
import matplotlib.pyplot as plt

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))                 # z -> x_fake
D = nn.Sequential(nn.Linear(1, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2),
                  nn.Linear(64, 1), nn.Flatten(0))                                # x -> 一个 logit
opt_G = optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.999))
opt_D = optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.999))
gen = torch.Generator().manual_seed(1)
noise = lambda n: torch.randn(n, 1, generator=gen)
real_batch = lambda n, gen=gen: 3 + 0.5 * torch.randn(n, 1, generator=gen)

shown_gen = torch.Generator().manual_seed(2)                                      # 用来比较的样本
x_shown, z_shown = real_batch(10_000, shown_gen).flatten(), torch.randn(10_000, 1, generator=shown_gen)
with torch.no_grad():
    before = G(z_shown).flatten()
for _ in range(1000):
    loss_D, loss_G = strategies.g_first(G, D, opt_G, opt_D, real_batch(256), noise)
with torch.no_grad():
    after = G(z_shown).flatten()

for label, x in ((tr("real"), x_shown), (tr("G before"), before), (tr("G after"), after)):
    print(tr("{label:<9} mean {mean:5.2f}   std {std:.2f}", label=label, mean=x.mean(), std=x.std()))
claim("训练后，G 的均值与真实均值相差不到 0.15（训练开始时它在 0 附近）",
      abs(after.mean() - x_shown.mean()).item() < 0.15, shown=f"{after.mean():.2f} 对 {x_shown.mean():.2f}")
claim("G 的标准差与真实标准差相差不到真实标准差的一半",
      abs(after.std() - x_shown.std()).item() < 0.5 * x_shown.std().item(),
      shown=f"{after.std():.2f} 对 {x_shown.std():.2f}，训练前为 {before.std():.2f}")

plt.figure(figsize=(7, 2.6))
for label, x in ((tr("real"), x_shown), (tr("G before training"), before), (tr("G after 1000 steps"), after)):
    plt.hist(x.numpy(), bins=80, range=(-1.5, 5), density=True, alpha=0.5, label=label)
plt.xlabel("x")
plt.legend(loc="upper center")
plt.title(tr("1-D GAN: real samples, and G's before and after training"))
plt.show()

# %% [markdown]
# G 的样本移到了数据上（均值和离散程度都对上了；要匹配整个分布需要更久，见第 06 课）。从第 1 节起，G 和 D 换成原帖 000 的 MNIST 网络（`gan_lessons.models`），调用方式和这里的 `g_first` 完全一样。

# %% [markdown]
# ## 1 · 两种如今会失败的原帖策略，以及它们以前为什么悄无声息地出错
#
# 原帖 003 向 D 开销大的 GAN 推荐它的策略一：「如果 discriminator 比generator 复杂,那么应该采取第一种策略」。在 torch ≥ 1.5 上，它根本跑不起来。下面把它写成一个策略函数（顺序与原帖相同，只是用 logit 代替了 `BCELoss`），在原帖 000 的 G 和 D 上运行：

# %%
show_source(strategies.retain_graph_seed003)
G, D, x_real, noise = fresh_gan()
opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
with expect_error(RuntimeError, r"\[torch\.(cuda\.)?FloatTensor \[512, 1\]\], which is output 0 of AsStrided(Backward0)?, is at version 2; expected version 1"):
    strategies.retain_graph_seed003(G, D, opt_G, opt_D, x_real, noise)


# %% [markdown]
# 原帖 000 的循环也报同样的错误（第 03 课会把这条信息逐段拆开来讲）：`loss_nonsaturating` 在一次前向传播中同时返回两个损失，循环再先后对它们做反向传播。原帖 003 是有意这样做，原帖 000 是无意为之；本质上都是 G 的反向传播要穿过 D 的前向传播，而 `optimizer_D.step()` 在两次反向传播之间改了 D 的权重。在 torch 1.5 之前，优化器更新的是 `p.data`，不会让版本计数器加一，于是反向传播把 D 的**新**权重和**旧**权重算出的激活值配在了一起。下面用 `.data` 更新来模拟这种情况，并与 G 经过旧 D 和经过新 D 如实算出的梯度相比较：

# %%
def pre15_emulation(mode, lr=0.1):
    torch.manual_seed(0)
    G, D = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    x_real, z = torch.randn(16, 2), torch.randn(16, 4)
    x_fake = G(z)
    logits_fake = D(x_fake)
    loss_D = strategies.bce(D(x_real), 1) + strategies.bce(logits_fake, 0)
    loss_D.backward(retain_graph=True)
    if mode != "old D":
        for p in D.parameters():
            p.data.add_(-lr * p.grad)           # 1.5 之前的更新方式：版本计数器不加一
    G.zero_grad()
    logits = D(x_fake) if mode == "new D" else logits_fake
    strategies.bce(logits, 1).backward()
    return torch.cat([p.grad.flatten() for p in G.parameters()])

old, new, mixed = (pre15_emulation(m) for m in ("old D", "new D", "pre-1.5 mix"))
distance = lambda a, b: ((a - b).norm() / b.norm()).item()
claim("torch 1.5 之前的写法得到的梯度，既不是 G 经过旧 D 的梯度，也不是 G 经过新 D 的梯度",
      not torch.allclose(mixed, old) and not torch.allclose(mixed, new),
      shown=f"与旧 D 的相对距离 {distance(mixed, old):.3f}，与新 D 的相对距离 {distance(mixed, new):.3f}")


# %% [markdown]
# 这个梯度不属于任何一个判别器，而且没有任何提示。
#
# **原帖 003 的策略二**为 D 分离了假样本（这是对的），然后用**同一个已分离的**输出来构建 G 的损失。它会因为另一个原因失败：`d_loss.backward()` 已经释放了 D 的计算图；加上 `retain_graph=True`，D 的更新又会让保存下来的权重过期，和策略一一样；就算这两个问题都避开，G 也根本得不到梯度，因为 `pred_gen` 的计算图是从那个已分离的假样本开始的：

# %%
def seed003_strategy2(retain, step_D=True):
    G, D, x_real, noise = fresh_gan(batch=8)
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    gen_imgs = G(noise(8))
    pred_gen, pred_real = D(gen_imgs.detach()), D(x_real)
    opt_D.zero_grad()
    d_loss = (strategies.bce(pred_real, 1) + strategies.bce(pred_gen, 0)) / 2
    d_loss.backward(retain_graph=retain)
    if step_D:
        opt_D.step()
    g_loss = strategies.bce(pred_gen, 1)
    opt_G.zero_grad()
    g_loss.backward()
    return sum(p.grad is not None for p in G.parameters())

with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    seed003_strategy2(retain=False)
with expect_error(RuntimeError, "modified by an inplace operation"):
    seed003_strategy2(retain=True)
n_with_grad = seed003_strategy2(retain=True, step_D=False)
claim("有 retain_graph 且中间不更新 D 时，它能运行，但 G 的参数一个也没有得到梯度",
      n_with_grad == 0, shown=f"G 的 {len(list(Generator().parameters()))} 个参数中有 {n_with_grad} 个有 .grad")

# %% [markdown]
# ## 2 · 原帖 000 的双重 sigmoid
#
# `loss_nonsaturating` 先算 `dgz = F.sigmoid(d(gz))`，再把 `dgz` 交给 `binary_cross_entropy_with_logits`，而后者自己还会再做一次 sigmoid。没有报错，没有警告，损失值看上去也合情合理。下面比较有和没有这个多余的 sigmoid 时，G 的损失以及它关于 D 的 logit 的梯度：

# %%
import warnings

logits = torch.tensor([-10., -6., -2., 0., 2., 6.], requires_grad=True)
with warnings.catch_warnings():
    warnings.simplefilter("error")               # 什么都不报，连警告也没有
    correct = F.binary_cross_entropy_with_logits(logits, torch.ones(6), reduction="none")
    seed000 = F.binary_cross_entropy_with_logits(torch.sigmoid(logits), torch.ones(6), reduction="none")
grad_correct, = torch.autograd.grad(correct.sum(), logits)
grad_seed000, = torch.autograd.grad(seed000.sum(), logits)
shrink = grad_correct / grad_seed000
print(tr("D's logit for a fake              : {values}", values=rounded(logits)))
print(tr("loss_G, double sigmoid            : {values}", values=rounded(seed000)))
print(tr("d loss_G / d logit, correct       : {values}", values=rounded(grad_correct)))
print(tr("d loss_G / d logit, double sigmoid: {values}", values=rounded(grad_seed000, 6)))
claim("D 越有把握地判定假样本为假，缩小的倍数就越大，没有上限",
      bool((shrink[:-1] > shrink[1:]).all()) and 40_000 < shrink[0].item() < 50_000 and 700 < shrink[1].item() < 900,
      shown=f"logit -6 处 {shrink[1]:.0f} 倍，logit -10 处 {shrink[0]:.0f} 倍")
sweep = torch.linspace(-30, 30, 601).sigmoid()  # 不管 D 给出什么，BCE-with-logits 现在看到的输入都在 (0, 1) 之内
G_seen = F.binary_cross_entropy_with_logits(sweep, torch.ones(601), reduction="none")
claim("有了双重 sigmoid，不管 logit 是多少，G 的损失都在 softplus(-1) 和 softplus(0) 之间，即 0.31 到 0.69",
      G_seen.min().item() >= F.softplus(torch.tensor(-1.0)).item() - 1e-6
      and G_seen.max().item() <= F.softplus(torch.tensor(0.0)).item() + 1e-6,
      shown=f"logit 从 -30 扫到 30：{G_seen.min():.4f} 到 {G_seen.max():.4f}")

# %% [markdown]
# 在 D 很有把握地判定假样本为假的地方，正确的损失会用力推动 G（梯度 ≈ −1）；双重 sigmoid 给出的梯度在 logit −6 处只有正确梯度的约 1/800，在 −10 处只有约 1/44,000，而且缩小的倍数没有上限；与此同时，它的损失曲线看起来很平稳，实际上什么也没学到。第 07 课的自动微分医生会报告这种模式。

# %% [markdown]
# ## 3 · 六种能运行的策略，代码并排比较
#
# 自动微分的全部逻辑，都体现在 `zero_grad`、`detach`、`backward` 和 `step` 的先后顺序里。读这些代码之前，先回答一个关于 `g_first` 的问题；它就是第 0 节用的顺序，也是原帖 003 的策略三。它的开头是：
#
# ```python
# x_fake = G(noise(len(x_real)))
# opt_G.zero_grad()
# loss_G = bce(D(x_fake), 1)
# loss_G.backward()
# ```

# %% reveals=["D \u7684\u53c2\u6570\u4e5f\u5f97\u5230\u4e86\u68af\u5ea6", "\u4e5f\u4f1a\u586b\u4e0a D \u7684\u68af\u5ea6", "G \u7684\u53cd\u5411\u4f20\u64ad\\s*(\u4ecd\u7136|\u4e5f)?\\s*\u4f1a?\\s*\u8ba1\u7b97\\s*D \u7684(\u53c2\u6570)?\u68af\u5ea6"] tags=["predict"]
prediction = "两者"  # SOLUTION: g_first 执行 loss_G.backward() 之后，哪个网络的参数有 .grad："G"、"D" 还是 "两者"？
G, D, x_real, noise = fresh_gan(batch=8)
strategies.bce(D(G(noise(8))), 1).backward()
has = lambda net: all(p.grad is not None for p in net.parameters())
check("g_first 中 G 的反向传播之后，有 .grad 的网络", prediction,
      "both" if has(G) and has(D) else "G" if has(G) else "D",
      why="loss_G 要穿过 D 才能传回 G，所以 D 的参数也得到了梯度；"
          "g_first 在 D 自己的反向传播之前，用 opt_D.zero_grad() 把它们清掉。")

# %% [markdown]
# 下面是这六种策略，每种都只有一屏长：

# %%
show_source(*(strategies.get(name) for name in ("one_forward", "d_first_reuse_fake", "g_first", "d_first_fresh_fake",
                                                 "d_first_frozen_D", "g_first_inputs")))

# %% [markdown]
# 先就上面的代码回答两个问题，下文再逐一讲解。

# %% reveals=["\u5fc5\u987b\\*\u7a7f\u8fc7\\* D", "\u53cd\u5411\u4f20\u64ad\u8fd8\u662f\u7a7f\u8fc7\u4e86 D"] tags=["predict"]
prediction = "两者"  # SOLUTION: one_forward 的 loss_G.backward(inputs=list(G.parameters())) 注释写着 "只求 G 的梯度"。这次反向传播穿过了哪些网络："G"、"D" 还是 "两者"？
G, D, x_real, noise = fresh_gan(batch=8)
x_fake = G(noise(8))
passed = set()
x_fake.register_hook(lambda grad: passed.add("D"))      # 梯度到达了 D 的输入
strategies.bce(D(x_fake), 1).backward(inputs=list(G.parameters()))
if all(p.grad is not None for p in G.parameters()):
    passed.add("G")
check("loss_G.backward(inputs=G 的参数) 穿过的网络", prediction,
      "both" if passed == {"G", "D"} else "neither" if not passed else passed.pop(),
      why="要得到 G 的梯度，只能穿过 D 的各层，所以反向传播还是穿过了 D；"
          "`inputs=` 决定的是填哪些 .grad，而不是反向传播走到哪里。")

# %% reveals=["\u628a G \u7684\u8ba1\u7b97\u56fe\u4e00\u76f4\u4fdd\u7559\u5230 D \u66f4\u65b0\u4e4b\u540e", "G \u7684\u8ba1\u7b97\u56fe\u4e00\u76f4\u4fdd\u7559\u5230 D"] tags=["predict"]
prediction = "d_first_reuse_fake"  # SOLUTION: 哪一种为反向传播保存的字节数峰值更高："d_first_reuse_fake" 还是 "d_first_fresh_fake"？
saved = {name: costs.measure(name, *fresh_gan(), steps=1, warmup=1, memory=False).saved_mib
         for name in ("d_first_reuse_fake", "d_first_fresh_fake")}
check("两者中已保存张量的峰值更高的一个", prediction, max(saved, key=saved.get),
      why="d_first_reuse_fake 把 G 的计算图一直保留到 D 更新之后，压在 D 自己两次前向传播的计算图之下；"
          "d_first_fresh_fake 为 D 生成假样本时不建计算图，G 的计算图只在 G 的那一步才建。")

# %% [markdown]
# `one_forward` 是原帖 003 那个想法的正确版本：G 的梯度在 `opt_D.step()` **之前**经过 D 求出，每次反向传播都用 `inputs=` 限定为只对一个网络求梯度。它是另一种算法：*同时*更新，G 回应的是给它打分的那个 D；而其他顺序都是*交替*更新，G 回应的是刚刚更新过的 D（`g_first` 给 G 看的也是旧的 D）。
#
# 最后两种是在 `d_first_reuse_fake` 和 `g_first` 的基础上，只改动 G 的那一步。G 的反向传播必须*穿过* D，但不必计算 D 的**参数**梯度，因为 G 的那一步反正会把它们扔掉。`d_first_frozen_D` 在 G 的那一步之前用 `D.requires_grad_(False)` 把它们关掉，之后再用 `D.requires_grad_(True)` 打开（pix2pix 和 CycleGAN 用各自的 `set_requires_grad` 做同样的事）；`g_first_inputs` 则用 `loss_G.backward(inputs=list(G.parameters()))` 只要 G 的梯度。`tests/package/test_strategies.py` 会检查：在这六种策略中，D 更新所用的梯度**完全相同**；`one_forward` 和 `g_first` 给 G 的梯度完全相同，而与先更新 D 的那几种顺序给出的不同。

# %% [markdown]
# ## 4 · 实测开销
#
# 原帖 003 从理论上论证：策略一省了一次前向传播，却多算了一次 G 的梯度；策略三最好。它的原话是：
#
# > 一个多计算了一次 generator 梯度,一个多计算一次 discriminator 前向传播。
#
# > 综合来说,还是策略三最好,策略二其次,策略一最差(差在多计算一次 generator gradient 上,而通常多计算一次 generator gradient 的运算量比多计算一次 discriminator 前向传播的运算量大)
#
# 我们不讲理论，直接计数。`costs.measure` 在原帖 000 的模型上（批量 64）用新建的 Adam 优化器运行一种策略，并用钩子统计每一步中的以下几项：G 和 D 的前向调用次数、经过这些调用的反向传播遍数（表中“G 前向/反向”“D 前向/反向”两列，斜杠前是前向，斜杠后是反向），以及**梯度遍数**（grad passes；表中“G 梯度遍数”“D 梯度遍数”两列），即每个参数的梯度被累积了几次（2 表示有一次是白算的）。它还测量了两种内存，二者是不同的量：
#
# - **已保存 MiB**（saved MiB）：自动微分为反向传播保留的已保存张量所占字节数的峰值（不计参数），由已保存张量的钩子（saved-tensor
#   hooks）测得。它是一张计算图在等待反向传播期间的开销。
# - **分配器峰值 MiB**（allocator peak MiB）：一步之内，分配器占用的内存比这一步开始时高出的最大值：除了已保存张量，还包括正在写入的梯度、反向传播用不到的输出，以及反向传播的临时张量。在 CPU 上，它来自性能分析器（profiler）对每次分配和释放的记录；在 GPU
#   上，来自 CUDA 自己记录的峰值。一步能不能放进内存，由它决定。

# %%
results = {}
for name in strategies.STRATEGIES:
    G, D, x_real, noise = fresh_gan()
    results[name] = costs.measure(name, G, D, x_real, noise, steps=3 if QUICK else 20, warmup=1 if QUICK else 5)

print("{:<22}{:>12}{:>12}{:>11}{:>11}{:>11}{:>17}".format(tr("strategy"), tr("G fwd/bwd"), tr("D fwd/bwd"), tr("G grads"),
                                                        tr("D grads"), tr("saved MiB"), tr("alloc. peak MiB")))
for name, c in results.items():
    if c.error:
        print(f"{name:<22}", tr("raises: {error}", error=headline(c.error)))
    else:
        print(f"{name:<22}{c.G_forward:>8g}/{c.G_backward:<3g}{c.D_forward:>8g}/{c.D_backward:<3g}"
              f"{c.G_grad_passes:>11g}{c.D_grad_passes:>11g}{c.saved_mib:>11.2f}{c.alloc_mib:>17.2f}")
print(tr("batch 64 | {memory} | allocator: {allocator}", memory=results["g_first"].memory,
         allocator="CUDA" if device.type == "cuda" else "CPU"))

# %% [markdown]
# 这些计数对原帖 003 的论证说明了什么（每一行都由上表算出）：

# %%
r = results
passes = ("G_forward", "G_backward", "D_forward", "D_backward", "G_grad_passes", "D_grad_passes")
same = lambda a, b, keys=passes: all(getattr(r[a], k) == getattr(r[b], k) for k in keys)
claim("1. 原帖 003 的策略一如今会报错；它改正后的单次前向传播版本省下一次 D 的前向传播",
      r["retain_graph_seed003"].error is not None and r["one_forward"].D_forward == r["d_first_reuse_fake"].D_forward - 1)
claim("2. g_first（原帖 003 的策略三）与 d_first_reuse_fake 的遍数相同，二者每一步都把 D 的梯度算两次，"
      "其中一次白算（原帖 003 对策略三也是这么说的）",
      same("g_first", "d_first_reuse_fake") and r["g_first"].D_grad_passes == 2 and r["g_first"].G_grad_passes == 1)
claim("3. 冻结 D 或使用 backward(inputs=...) 能去掉这白算的一遍，前向和反向调用次数不变",
      all(r[n].D_grad_passes == r[n].G_grad_passes == 1 for n in ("d_first_frozen_D", "g_first_inputs"))
      and same("d_first_frozen_D", "d_first_reuse_fake", passes[:4]) and same("g_first_inputs", "g_first", passes[:4]))
claim("4. d_first_fresh_fake 多付出一次 G 的前向传播", r["d_first_fresh_fake"].G_forward == 2)

# %% [markdown]
# 每一步的时间取热身之后各测量步的中位数；它取决于机器，所以测试不比较这个单元格的输出：

# %% tags=["nbval-ignore-output"]
display(Markdown(costs.cost_table_markdown(results.values())))
ref = results["d_first_reuse_fake"].ms_per_step
print(tr("time relative to d_first_reuse_fake: {ratios}",
         ratios={n: round(c.ms_per_step / ref, 2) for n, c in results.items() if not c.error}))


# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - GAN 的 G 最小化的是 −log D(G(z))，而不是博弈中的 log(1 − D(G(z)))，因为在 D 识破假样本时，后者的梯度会消失；`bce(D(x_fake), 1)` 正是前一个损失。在一维小例子上，`g_first` 用 1000 步就把 G 的样本移到了数据上。
# - 原帖 003 的策略一和原帖 000 的循环会抛出版本错误，因为两次反向传播之间运行了 `optimizer_D.step()`，而这两次反向传播穿过的是同一次 D 前向传播。在 torch 1.5 之前，它们能运行，得到的梯度却既不属于旧的 D，也不属于新的 D。
# - 原帖 003 的策略二在已分离的假样本上复用 D 的输出来计算 G 的损失：要么遇到已被释放的计算图，要么（加上
#   `retain_graph=True`）抛出版本错误；如果中间不更新 D，它能运行，但 G 根本得不到梯度。
# - 原帖 000 在 `binary_cross_entropy_with_logits` 之前加的 `F.sigmoid`，把 G 的损失压进 [0.31, 0.69]，并把 G 的梯度缩小一个没有上限的倍数（logit −6 处约 800 倍，−10 处约 44,000 倍），而且悄无声息。
# - 实测：按原样写，交替顺序在 G 的那一步会白算一次 D 的梯度；冻结 D 或使用 `backward(inputs=...)`，在任何顺序中都能去掉这一遍。`one_forward` 的运算量最少，交替计时时也最快；在繁忙的机器上，每种策略单独跑一段来计时，可能排出任意名次。
# - 已保存张量的字节数（自动微分为反向传播保留的东西）只是分配器峰值（一步在最紧张的时刻占用的全部内存）的一部分。按两种度量，把 G 的计算图保留到 D 更新之后的顺序，峰值都最高。

# %% [markdown]
# ## 练习
#
# **动手实现 BigGAN 的训练步：铰链损失，每次更新 G 之前更新 D 多次**。WGAN 以及其后的许多 GAN 每更新一次 G，就更新 D `n_critic` 次；BigGAN 这样做时用的是第 04 课的铰链损失。写出 `my_step(G, D, opt_G, opt_D, x_real, noise, n_critic=2)` 的完整函数体：像 `d_first_fresh_fake`（第 3 节）那样先更新 D，把 D 的那部分重复多次，并且 D 的梯度只在 D 自己的更新中计算。要求如下：
#
# - 把 `x_real` 按顺序均分成 `n_critic` 块。D 用的假样本只来自**一次** G 的前向传播：抽取一次 `noise(len(x_real))`，这次前向传播不构建计算图（不为反向传播保存任何张量），生成一个假样本批量，再按同样的方式均分成 `n_critic` 块。D 的第 k 次更新读真实样本的第 k 块和假样本的第 k 块；D 的损失是铰链损失 `F.relu(1 - D(x_chunk)).mean() + F.relu(1 + D(x_fake)).mean()`（取两项的平均也对）。
# - 然后 G 更新一次，用下一次抽样生成的、大小为一块的新假样本批量，由 D **最后一次更新之后**打分：`-D(x_fake).mean()`。
# - 不白算任何梯度，也不白做任何前向传播（无论 `n_critic` 是多少，G 每步都只运行两次）；优化器据以更新的每个 `.grad` 都只来自那一次更新；D 的可训练状态与开始时相同。返回 `(loss_D, loss_G)`，其中 `loss_D` 来自 D 的最后一次更新。
#
# `exercises.check_strategy` 会在原帖 000 的 G 和 D 上（它们的 `.grad` 里还留着之前的梯度）分别以 `n_critic` 为 2 和 3 运行你的函数，把两个优化器据以更新的梯度与正确的梯度相比较，用第 4 节的钩子统计遍数，并指出还有哪里不对。

# %%
def my_step(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """BigGAN 的训练步：D 以铰链损失在 x_real 和同一批假样本的各块上更新 n_critic 次，然后 G 更新一次；D 的梯度只在 D 的更新中计算，G 运行两次。
    返回 (loss_D, loss_G)。"""
    ### BEGIN SOLUTION
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)     # 一次 G 前向传播生成 D 每次更新的假样本
    for x_chunk, x_fake in zip(x_real.chunk(n_critic), fakes):
        opt_D.zero_grad()
        loss_D = F.relu(1 - D(x_chunk)).mean() + F.relu(1 + D(x_fake)).mean()
        loss_D.backward()
        opt_D.step()
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_chunk)))).mean()            # 新的假样本，穿过更新后的 D
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G
    ### END SOLUTION

my_answer = my_step  # SOLUTION: 把它指向你的 my_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_strategy(my_answer)
assert solved, "strategy：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# ## 延伸 · 自己切换策略
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 这个控件在一个小 GAN 上（排成一圈的八个高斯分布上的二维点，在 CPU 上几秒钟就能训练好）用所选的策略运行一步。它显示这一步的计算图（已保存张量按状态着色）、上表中该策略的开销行，以及一条简短的训练曲线。创建时，它会按默认选项画一次。

# %%
import math
from gan_lessons.widgets import StrategyPanel

RING_GEN = torch.Generator().manual_seed(0)     # 下面所有批量共用一个随机数流

def ring_batch(n=128, gen=RING_GEN):
    """来自圆周上八个高斯分布的点：经典的二维 GAN 小例子。"""
    angle = torch.randint(0, 8, (n,), generator=gen) * (2 * math.pi / 8)
    centres = torch.stack([angle.cos(), angle.sin()], dim=1) * 2
    return centres + 0.05 * torch.randn(n, 2, generator=gen)

torch.manual_seed(0)
toy_G = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 2))
toy_D = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1), nn.Flatten(0))
toy_noise_gen = torch.Generator().manual_seed(1)
toy_noise = lambda n: torch.randn(n, 8, generator=toy_noise_gen)

# %% tags=["nbval-ignore-output"]
panel = StrategyPanel(toy_G, toy_D, ring_batch, toy_noise, results, steps=100 if QUICK else 600)
panel

# %%
shown = panel.shown[panel.buttons.value]
print(tr("default strategy: {name}", name=panel.buttons.value))
print(tr("final (loss_D, loss_G): {final}", final=tuple(round(v, 4) for v in shown["final"])))
print(shown["graph"])

# %% [markdown]
# ## 延伸 · 为什么 `one_forward` 可能最慢
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# `one_forward` 做的遍数最少，可之前有一次运行第 4 节的计时单元格时，它却排在最后：每步 101.5 ms，而其他策略在 79 到 94 ms 之间；它是 `d_first_reuse_fake` 的 1.21 倍。可能的原因有：`retain_graph=True` 让它的计算图一直存活；两次而不是一次 backward 调用；`inputs=` 让引擎多做了工作。与其猜测，不如先把工作量数清楚，再用一种不让机器的噪声左右胜负的方式来计时。
#
# 先看运算量：`FlopCounterMode` 统计一步之内每个矩阵乘法和卷积的浮点运算次数，前向和反向都算在内（这是这里一步工作量的主体，下面的计时会检验这一点）：

# %%
from torch.utils.flop_counter import FlopCounterMode

def step_gflop(name):
    """策略 `name` 一步中矩阵乘法和卷积的 GFLOP 数，在先跑一步之后测量（这时 Adam 的状态已经存在）。"""
    G, D, x_real, noise = fresh_gan()
    args = (G, D, optim.Adam(G.parameters()), optim.Adam(D.parameters()), x_real, noise)
    strategies.get(name)(*args)
    with FlopCounterMode(display=False) as counter:
        strategies.get(name)(*args)
    return counter.get_total_flops() / 1e9

gflop = {name: step_gflop(name) for name, c in results.items() if not c.error}
G, D, x_real, noise = fresh_gan()
with FlopCounterMode(display=False) as counter:
    D(x_real)
d_forward = counter.get_total_flops() / 1e9
for name, g in gflop.items():
    print(tr("{name:<22}{value:6.3f} GFLOP  ({ratio:.2f} of d_first_reuse_fake)", name=name, value=g,
             ratio=g / gflop["d_first_reuse_fake"]))
print(tr("one D forward, batch 64: {value:.3f} GFLOP", value=d_forward))
claim("在六种策略中，one_forward 的运算量最少",
      min(gflop, key=gflop.get) == "one_forward", shown=f"{gflop['one_forward']:.3f} GFLOP")
claim("d_first_frozen_D 比 d_first_reuse_fake 少一次 D 前向传播的运算量（那次白算的 D 梯度），"
      "one_forward 又再少一次 D 前向传播",
      abs(gflop["d_first_reuse_fake"] - gflop["d_first_frozen_D"] - d_forward) < 1e-3
      and abs(gflop["d_first_frozen_D"] - gflop["one_forward"] - d_forward) < 1e-3)

# %% [markdown]
# 可见，这些可能的原因没有一个增加了工作量：`one_forward` 省掉了一次 D 的前向传播，它的 `inputs=` 也像冻结 D 一样省掉了白算的 D 梯度。再来看时间。上面的表格把每种策略放在各自的一段里计时（快速模式下 3 步），一段接着一段：只要某一段期间有什么拖慢了机器（别的程序、时钟频率、第一段的热身），代价就全落在那一种策略上。`costs.interleaved_ms` 则轮流对单步计时，每隔一轮把顺序反过来，我们再把每一轮中的各步两两配对比较。只有当这些比值的中位数的 99% 置信区间整个落在 1 的一侧时，才算得出结论；否则就再多测几轮（最多 50 轮）。机器忙到无法下结论时，这个单元格会直说，而不是去猜：

# %% tags=["nbval-ignore-output"]
import statistics
from gan_lessons import timing

names = ["one_forward", "d_first_frozen_D", "d_first_reuse_fake"]
timed = timing.until_decided(lambda rounds: costs.interleaved_ms(names, rounds=rounds, device=device),
                             "one_forward", "d_first_reuse_fake")
for name, t in timed.items():
    ratio = timing.paired(timed, name, "d_first_reuse_fake").median
    print(tr("{name:<20} median {median:6.1f} ms | paired ratio to d_first_reuse_fake {ratio:.2f} "
             "(FLOPs {flops:.2f}) | one step ranged {low:.1f} to {high:.1f} ms", name=name,
             median=statistics.median(t), ratio=ratio, flops=gflop[name] / gflop["d_first_reuse_fake"],
             low=min(t), high=max(t)))
verdict = timing.claim_timing("交替计时时，one_forward 每步的用时少于 d_first_reuse_fake",
                              timing.paired(timed, "one_forward", "d_first_reuse_fake"))

# %% [markdown]
# 如果单元格打印的是 ✓，计时就与运算量的统计一致：工作量最少的 `one_forward` 用时也最少。如果打印的是 ?，说明这台机器的噪声太大，排不出这两种策略的先后，而上面的运算量统计照样说明了谁做的工作更少；倘若计时给出了与运算量相反的结论，单元格会以 ✗ 停下。看看同一种策略单步时间的范围：在共享的机器上，它可能比策略之间的差距还大，这时每种策略只跑一小段来计时，排名就全凭运气。之前那次运行中 `one_forward` 慢，原因在于计时的方式，而不在于策略本身：它做的工作是所有策略中最少的。想要结论，就数工作量；要计时，就只交替计时，比较配对的比值，并允许计时给出“无法判定”。
#
# 再看内存，两种度量并排：

# %%
order = [n for n, c in results.items() if not c.error]
claim("在每种顺序中，分配器的峰值都高于已保存张量的峰值：已保存张量只是一步所占内存的一部分",
      all(r[n].alloc_mib > r[n].saved_mib for n in order),
      shown=", ".join(f"{n} {r[n].saved_mib:.2f} / {r[n].alloc_mib:.2f}" for n in order))
keeps_G_graph, frees_it = ("one_forward", "d_first_reuse_fake"), ("g_first", "d_first_fresh_fake")
claim("按两种度量，把 G 的计算图一直保留到 D 更新之后的顺序，峰值都更高（原帖 003 的观点）",
      min(r[n].saved_mib for n in keeps_G_graph) > max(r[n].saved_mib for n in frees_it)
      and min(r[n].alloc_mib for n in keeps_G_graph) > max(r[n].alloc_mib for n in frees_it))
saved_saving = 1 - r["g_first"].saved_mib / r["d_first_reuse_fake"].saved_mib
alloc_saving = 1 - r["g_first"].alloc_mib / r["d_first_reuse_fake"].alloc_mib
claim("及早释放 G 的计算图（g_first 对比 d_first_reuse_fake），已保存张量能省下约五分之一，"
      "分配器的峰值能省下约三分之一", 0.15 < saved_saving < 0.25 and 0.25 < alloc_saving < 0.40,
      shown=f"{saved_saving:.0%} 和 {alloc_saving:.0%}")

# %% [markdown]
# 所以，原帖 003 的策略一不可取。原帖 003 对策略三的计数是对的，包括 G 的反向传播仍然会计算 D 的梯度、随后这些梯度又被清零这一点；先更新 D 的顺序也是如此。原帖错在说这一遍*不得不*做：「根据链式法则,不得不顺带计算一下判别器的参数梯度」。其实在任何交替顺序中，冻结 D 或使用 `backward(inputs=...)` 都能跳过它，前向传播的次数不变。内存的测量结果印证了原帖 003 对策略二的说法：「之前的 generator 生成的计算图得保留着,直到 discriminator 更新完,再释放」；把 G 的计算图保留到 D 更新之后，按两种度量都要多占内存。选择时，先看你要的是哪种算法（G 回应的是旧的 D 还是新的 D？），然后不管选了哪种顺序，都去掉那次白算的 D 梯度。
