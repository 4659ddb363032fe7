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
# # 第 09 课 · GAN 训练步中的冻结 D 与 BatchNorm
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/09_freezing_and_batchnorm.ipynb)
#
# [English](../09_freezing_and_batchnorm.ipynb) · [学生版](student/09_freezing_and_batchnorm.ipynb)
#
# **目标**。弄清 GAN 训练步中间的两个机制的作用，每一样都在当前的 torch 上验证过：一是在 G 的更新步中冻结 D（还有一种看似冻结、其实不是的写法，以及冻结会怎样出错），二是 BatchNorm 的运行统计量和批量统计量。最后动手写一个穿过冻结 D 的 G 更新步，并把一切恢复原状。第 10 课接着讲后面三样：混合精度、钩子和 `torch.compile`。
#
# **材料**。原帖都没有讲到这么深；模型用的是原帖 000 的 G（带 BatchNorm）和 D。事实来自 PyTorch 自己的文档（`requires_grad_`、`backward(inputs=...)`、BatchNorm）、pix2pix/CycleGAN 的 `set_requires_grad`，以及 soumith/ganhacks（第 4 条技巧：一个小批量里要么全是真实图像，要么全是生成的图像，PyTorch 的 DCGAN 教程就是这样做的）。课末有一张表，把人们常写的代码和它在如今的 torch 上实际做了什么并排列出。

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
from gan_lessons import costs, strategies
from gan_lessons.models import Generator, Discriminator

bce = strategies.bce       # bce(logits, 1)：G 的非饱和损失；bce(logits, 0)：D 损失中的假样本项


# %% [markdown]
# ## 1 · 在 G 的更新步中冻结 D
#
# G 的损失必须*穿过*D 才能到达 G，但 G 的更新步用不到 D 自己参数的梯度。有三种写法看起来都能让 D 置身于 G 的更新步之外，其实只有两种做到了，而这两种的区别在于 D 的前向传播保存了什么。第 05 课统计的是完整的训练步；这里只看 G 的更新步，而且紧跟在 D 的一次更新之后，这时 D 的 `.grad` 里还留着 D 刚刚用来更新的梯度。计数器用的是 `gan_lessons.costs` 所用的那些钩子（第 10 课会把它们拆开来讲）：前向钩子统计每个网络被调用的次数，挂在每次调用输出上的钩子统计有几次反向传播经过该输出，挂在每个参数上的钩子统计梯度累积的次数，保存张量钩子则累加自动微分为反向传播保存下来的字节数（参数本身不计在内）。

# %%
def counted(G, D, run):
    """运行一次 run()；统计 G 和 D 的前向传播次数、反向传播次数、每个参数的梯度累积次数，以及保存的 KiB 数。"""
    n = dict.fromkeys(["G forward", "G backward", "D forward", "D backward", "G grads", "D grads"], 0)
    def add(key):
        n[key] += 1
    def on_forward(name):
        def hook(module, args, out):
            add(f"{name} forward")
            if out.requires_grad:
                out.register_hook(lambda grad: add(f"{name} backward"))
        return hook
    nets = {"G": G, "D": D}
    handles = [net.register_forward_hook(on_forward(name)) for name, net in nets.items()]
    handles += [p.register_post_accumulate_grad_hook(lambda p, name=name: add(f"{name} grads"))
                for name, net in nets.items() for p in net.parameters()]
    params = {p.untyped_storage().data_ptr() for net in nets.values() for p in net.parameters()}
    saved = []
    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            saved.append(t.numel() * t.element_size())
        return t
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            run()
    finally:
        for h in handles:
            h.remove()
    for name, net in nets.items():
        n[f"{name} grads"] /= len(list(net.parameters()))
    n["saved KiB"] = sum(saved) / 1024
    return n


def after_D_step():
    """原帖 000 的 G 和 D，D 已经更新过一步：D 的 .grad 里是 D 这一步更新所用的梯度。"""
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    z, x_real = torch.randn(16, G.z_dim), torch.rand(16, 1, 28, 28) * 2 - 1
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(G(z).detach()), 0)) / 2
    loss_D.backward()
    opt_D.step()
    return G, D, opt_G, z


def G_step(how):
    G, D, opt_G, z = after_D_step()
    D_grad = [p.grad.clone() for p in D.parameters()]
    def run():
        opt_G.zero_grad()
        x_fake = G(z)
        if how == "D.requires_grad_(False)":
            D.requires_grad_(False)
            bce(D(x_fake), 1).backward()
            D.requires_grad_(True)
        elif how == tr("backward(inputs=G's)"):
            bce(D(x_fake), 1).backward(inputs=list(G.parameters()))
        elif how == "D(x_fake.detach())":
            bce(D(x_fake.detach()), 1).backward()
        else:
            bce(D(x_fake), 1).backward()
    n = counted(G, D, run)
    n["D untouched"] = all(torch.equal(before, p.grad) for before, p in zip(D_grad, D.parameters()))
    return n, [None if p.grad is None else p.grad.clone() for p in G.parameters()]

ways = [tr("plain backward"), "D.requires_grad_(False)", tr("backward(inputs=G's)"), "D(x_fake.detach())"]
results = {how: G_step(how) for how in ways}
print(f"{tr('G step'):<25}{tr('G fwd/bwd'):>12}{tr('D fwd/bwd'):>12}{tr('G grads'):>11}{tr('D grads'):>11}"
      f"{tr('saved KiB'):>11}", tr("D's .grad"), sep="  ")
for how, (n, _) in results.items():
    print(f"{how:<25}{n['G forward']:>8}/{n['G backward']:<3}{n['D forward']:>8}/{n['D backward']:<3}"
          f"{n['G grads']:>11g}{n['D grads']:>11g}{n['saved KiB']:>11.1f}  "
          f"{tr('untouched') if n['D untouched'] else tr('changed')}")

# %%
(plain, G_plain), (frozen, G_frozen), (inputs, G_inputs), (detached, G_detached) = results.values()
same = lambda a, b: all(x is not None and torch.equal(x, y) for x, y in zip(a, b))
claim("普通的反向传播也会计算 D 的梯度，并把它累加到 D 的 .grad 上", plain["D grads"] == 1
      and not plain["D untouched"])
claim("冻结 D：G 得到的梯度和普通反向传播完全相同，D 的 .grad 原封不动，也没有为 D 求梯度",
      same(G_frozen, G_plain) and frozen["D untouched"] and frozen["D grads"] == 0)
claim("backward(inputs=G 的参数)：效果一样，G 的梯度完全相同，D 的 .grad 原封不动",
      same(G_inputs, G_plain) and inputs["D untouched"] and inputs["D grads"] == 0)
claim("两种写法都仍有一次经过 D 的反向传播：G 的梯度必须穿过 D",
      frozen["D backward"] == inputs["D backward"] == 1)
claim("D(x_fake.detach())：G 的 14 个参数都得不到梯度，没有反向传播到达 G，而 D 的 .grad 变了",
      all(g is None for g in G_detached) and detached["G backward"] == 0 and not detached["D untouched"],
      f"G 的 {len(G_detached)} 个参数中有 {sum(g is None for g in G_detached)} 个没有 .grad")
claim("冻结 D 时，D 的前向传播保存的比用 backward(inputs=...) 时少，因为后者要到反向传播时才做决定",
      frozen["saved KiB"] < inputs["saved KiB"] == plain["saved KiB"],
      f"冻结：{frozen['saved KiB']:.1f} KiB；inputs=：{inputs['saved KiB']:.1f} KiB")

# %% [markdown]
# 分离的那种写法千万别用：它恰好切断了 G 赖以学习的那条路径，而 D 的 `.grad` 还会收集一个目标错误（对假样本用 `1`）的梯度，除非先调用 `opt_D.zero_grad()`，否则 D 的下一次优化器更新就会用上它。如果既冻结 D**又**分离假样本，损失里就再没有任何需要梯度的东西，反向传播会直接这样报错：

# %%
G, D, opt_G, z = after_D_step()
D.requires_grad_(False)
with expect_error(RuntimeError, "element 0 of tensors does not require grad and does not have a grad_fn"):
    bce(D(G(z).detach()), 1).backward()



# %% [markdown]
# 冻结和 `backward(inputs=...)` 给 G 的梯度相同，也都不碰 D 的 `.grad`。它们的区别在前向传播：`requires_grad_(False)` 在 D 运行**之前**就已经确定，而 `inputs=` 要到反向传播开始时才被读取，那时 D 的前向传播早已把该保存的都保存了。被冻结的层会少保存什么？Linear 层和卷积层都只有在求权重的梯度时才需要它们的输入。
#
# **先预测，再验证**。下一个单元格在 D 冻结的情况下，给 D 的每个 Conv 层和 Linear 层一个需要梯度的输入（就像 G 生成的假样本那样），并用保存张量钩子记录该层是否保存了这个输入。把 `...` 换成你的预测，然后运行这个单元格。

# %% reveals=["Conv2d +\u8f93\u5165 .*\u51bb\u7ed3\u65f6\uff1a\u4fdd\u5b58\u5b83\u7684\u8f93\u5165", "conv ?\u5c42(\u4ecd\u7136|\u4f9d\u7136)\u4f1a?\u4fdd\u5b58(\u5b83\u7684|\u5176)?\u8f93\u5165", "ConvolutionBackward0 ?\u90fd\u4f1a\u4fdd\u5b58"] tags=["predict"]
prediction = "Conv2d"  # SOLUTION: 冻结 D 之后，D 的哪些层会为反向传播保存输入："Conv2d"、"Linear"、"两者" 还是 "都不"？

def saves_its_input(layer, shape):
    """在需要梯度的输入上运行该层的前向传播，返回它是否为反向传播保存了这个输入。"""
    x, packed = torch.randn(shape, requires_grad=True), []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        layer(x)
    return any(t.data_ptr() == x.data_ptr() for t in packed)

G, D, opt_G, z = after_D_step()
layers = {name: m for name, m in D.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))}
shapes = {}
def record_input_shape(name):
    def hook(module, args, out):
        shapes[name] = args[0].shape          # 返回 None：输出保持原样
    return hook
handles = [m.register_forward_hook(record_input_shape(name)) for name, m in layers.items()]
with torch.no_grad():
    D(G(z))
for h in handles:
    h.remove()
D.requires_grad_(False)
frozen_saves = {name: saves_its_input(m, shapes[name]) for name, m in layers.items()}
D.requires_grad_(True)
for name, m in layers.items():
    print(tr("D.{name:<6} {layer:<7} input {shape:<16} frozen: {verdict}", name=name, layer=type(m).__name__,
             shape=str(list(shapes[name])),
             verdict=tr("saves its input") if frozen_saves[name] else tr("does not save its input")))
kinds = {type(m).__name__ for name, m in layers.items() if frozen_saves[name]}
check("冻结后仍保存输入的层", prediction,
      "both" if len(kinds) == 2 else kinds.pop() if kinds else "neither",
      why="无论谁需要梯度，卷积的反向函数都会保存输入（只有输入自身的梯度需要权重，而权重的梯度需要输入）；"
          "Linear 层的反向函数则看谁需要梯度，权重不需要梯度时就不保存输入。")

# %%
linear_kib = sum(shapes[n].numel() * 4 for n, m in layers.items() if isinstance(m, nn.Linear)) / 1024
claim("冻结的 D 里，每个 Conv 层仍然保存它的输入（无论谁需要梯度，ConvolutionBackward0 都会保存它），"
      "而 Linear 层都不保存", all(frozen_saves[n] == isinstance(m, nn.Conv2d) for n, m in layers.items()))
claim("上面表格里冻结所省下的，恰好是 D 的两个 Linear 层的输入",
      abs((plain["saved KiB"] - frozen["saved KiB"]) - linear_kib) < 1e-6,
      f"省下 {plain['saved KiB'] - frozen['saved KiB']:.1f} KiB；Linear 层的输入 {linear_kib:.1f} KiB")


# %% [markdown]
# 所以冻结省下的，是被冻结的层仅仅为了求权重梯度才需要的那些张量，逐层由各自的反向函数决定：在这里是 D 的 Linear 层的输入，而不是 Conv 层的输入。第 05 课的策略 `d_first_frozen_D` 和 `g_first_inputs`（在 `gan_lessons.strategies` 里）正是这两种 G 更新步。
#
# 冻结本身也有陷阱：标志必须恢复回来。`d_first_frozen_D` 以 `D.requires_grad_(True)` 结尾，pix2pix 的 `set_requires_grad` 也是这样做的。如果这一步在中途抛出异常（在笔记本里按一下 Ctrl-C 就够了），这一行就不会运行；而且它会打开 D 的**每一个**参数，包括有意冻结的参数（比如一个预训练的特征层）。下面用 D 上的一个前向钩子来代替 Ctrl-C：

# %%
def frozen_D_run():
    """原帖 000 的模型和优化器，和 d_first_frozen_D 更新时用的一样。"""
    G, D, x_real, noise = costs.fresh_gan(batch=8)
    return G, D, optim.Adam(G.parameters()), optim.Adam(D.parameters()), x_real, noise

G, D, opt_G, opt_D, x_real, noise = frozen_D_run()
D.net[0].requires_grad_(False)                       # 有意冻结，一直冻结下去
first_layer = D.net[0].weight.detach().clone()
for _ in range(2):
    strategies.d_first_frozen_D(G, D, opt_G, opt_D, x_real, noise)
claim("走过一步 d_first_frozen_D 之后，D 中有意冻结的第一层又需要梯度了",
      D.net[0].weight.requires_grad)
claim("于是下一步就训练了它，而且没有任何提示", not torch.equal(first_layer, D.net[0].weight),
      f"最大 |变化| {(D.net[0].weight - first_layer).abs().max():.2e}")

G, D, opt_G, opt_D, x_real, noise = frozen_D_run()
def ctrl_c(module, args):
    if not D.net[7].weight.requires_grad:            # 只在 G 的更新步中 D 被冻结时触发
        raise KeyboardInterrupt
handle = D.register_forward_pre_hook(ctrl_c)
try:
    strategies.d_first_frozen_D(G, D, opt_G, opt_D, x_real, noise)
except KeyboardInterrupt:
    print(tr("KeyboardInterrupt during G's step"))
handle.remove()
still_frozen = sum(not p.requires_grad for p in D.parameters())
claim("在 G 的更新步中被中断后，D 一直处于冻结状态", still_frozen == len(list(D.parameters())),
      f"D 的 {len(list(D.parameters()))} 个参数中有 {still_frozen} 个被冻结")
with expect_error(RuntimeError, "element 0 of tensors does not require grad"):
    strategies.d_first_frozen_D(G, D, opt_G, opt_D, x_real, noise)      # 再运行一次这个单元格

# %% [markdown]
# 第一种失败悄无声息：本该保持不变的层从第二步起就开始训练了。第二种失败会报错，但报错的地方离起因很远：下一步的 `loss_D` 根本够不到任何参数，而报错信息对冻结只字未提。课末的练习会写一个避开这两种问题的 G 更新步。

# %% [markdown]
# ## 2 · GAN 训练步中的 BatchNorm
#
# 在训练模式下，BatchNorm 层用**送进来的这个批量**的均值和方差来规范化每个特征，而且每一次这样的前向传播还会更新它的运行统计量（`running_mean`、`running_var`、`num_batches_tracked`），评估模式用的就是这些运行统计量。这两点都会渗进 GAN 的训练步：统计量可能在一次什么也不训练的前向传播里发生变化；而带 BatchNorm 的 D 看真实图像时会受到假图像的影响，反之亦然。原帖 000 的 G 有三个 BatchNorm 层。先在它的第一个 BatchNorm 层上重温第 04 课的发现：

# %%
torch.manual_seed(0)
G = Generator()
z = torch.randn(16, G.z_dim)
bn = G.net[1]                                    # G 的第一个 BatchNorm1d

def bn_moves(run):
    """运行一次；返回（running_mean 是否变了，num_batches_tracked 增加了多少）。"""
    mean, batches = bn.running_mean.clone(), bn.num_batches_tracked.item()
    run()
    return not torch.equal(mean, bn.running_mean), bn.num_batches_tracked.item() - batches

def forward_without_graph():
    with torch.no_grad():
        G(z)

changed, counted_batches = bn_moves(forward_without_graph)
claim("训练模式下，即使在 no_grad 中：running_mean 也会变，num_batches_tracked 加 1",
      changed and counted_batches == 1)
G.eval()
changed, counted_batches = bn_moves(forward_without_graph)
G.train(True)                                    # 回到训练模式
claim("评估模式：两者都不变", not changed and counted_batches == 0)

# %% [markdown]
# 可见，不管有没有计算图，运行统计量数的都是前向传播的次数。那么第 05 课的每种顺序，一步下来会做几次这样的前向传播？**先预测，再验证**。这里问的是 `d_first_fresh_fake`：下一个单元格在新建的 G 上把六种顺序各运行一步，并打印之后 G 的第一个 BatchNorm 的 `num_batches_tracked`。

# %% reveals=["d_first_fresh_fake +\u4e00\u6b65\u4e4b\u540e num_batches_tracked = 2", "\u8fd0\u884c\u7edf\u8ba1\u91cf\u4e24\u6b21", "\u8c03\u7528\u4e24\u6b21 ?G"] tags=["predict"]
prediction = 2  # SOLUTION: 在新建的 G 上运行一步 d_first_fresh_fake 之后，G 的第一个 BatchNorm 的 num_batches_tracked 是多少？
steps_run = ["one_forward", "d_first_reuse_fake", "g_first", "d_first_fresh_fake", "d_first_frozen_D", "g_first_inputs"]
tracked = {}
for name in steps_run:
    G, D, x_real, noise = costs.fresh_gan(batch=16)
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    strategies.get(name)(G, D, opt_G, opt_D, x_real, noise)
    tracked[name] = G.net[1].num_batches_tracked.item()
    print(tr("{name:<20} num_batches_tracked after one step: {count}", name=name, count=tracked[name]))
check("一步 d_first_fresh_fake 之后的 num_batches_tracked", prediction, tracked["d_first_fresh_fake"],
      why="在这个顺序里 G 要做两次前向传播（先在 no_grad 下为 D 生成假样本批量，再为 G 自己的损失生成一批），"
          "而训练模式下的每次前向传播都会更新运行统计量，无论有没有计算图。")

# %%
claim("d_first_fresh_fake 每一步更新 G 的运行统计量两次，其余每种顺序都只更新一次",
      tracked["d_first_fresh_fake"] == 2 and all(v == 1 for k, v in tracked.items() if k != "d_first_fresh_fake"))

# %% [markdown]
# `d_first_fresh_fake` 调用两次 G（一次在 `no_grad` 下为 D 生成假样本批量，一次带着计算图重新生成，用于 G 的损失），而训练模式下的每次前向传播都会以动量 0.1 更新一次运行统计量。这没什么害处，只是这些移动平均值每步要移动两次，遗忘旧训练步的速度也快了一倍，而且 `num_batches_tracked` 并不是训练步的计数器。更要紧的是 D。
#
# **带 BatchNorm 的 D**。原帖 000 的 D 没有 BatchNorm。我们用一个带 BatchNorm 的小 D 来看看混合会带来什么：同样的真实图像，分别放在全是真实图像的批量里和一半真实、一半假的批量里，比较 D 给出的 logits。

# %%
torch.manual_seed(0)
D_bn = nn.Sequential(nn.Linear(2, 16), nn.BatchNorm1d(16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
x_real, x_fake = torch.randn(8, 2) + 3, torch.randn(8, 2)
stats = D_bn[1]

def through_D(*batches):
    """依次返回 D_bn 对每个批量的 logits（训练模式，从重置后的运行统计量开始）。"""
    stats.reset_running_stats()
    with torch.no_grad():
        logits = [D_bn(batch) for batch in batches]
    return logits, stats.running_mean.clone(), stats.num_batches_tracked.item()

(separate, _), mean_separate, n_separate = through_D(x_real, x_fake)
(mixed_batch,), mean_mixed, n_mixed = through_D(torch.cat([x_real, x_fake]))
mixed = mixed_batch[:8]                          # 8 张真实图像的 logits
gap = (separate - mixed).abs().max().item()
claim("训练模式：同样的 8 张真实图像，在全真实的批量和混合批量里得到的 D 的 logits 不同",
      gap > 1e-3, f"最大 |差值| {gap:.4f}")
claim("分开的两个批量更新两次运行统计量，拼接后的批量只更新一次，而且得到的均值不同",
      n_separate == 2 and n_mixed == 1 and not torch.allclose(mean_separate, mean_mixed))

other_fakes = torch.randn(8, 2) - 3
with torch.no_grad():
    mixed_again = D_bn(torch.cat([x_real, other_fakes]))[:8]
claim("在混合批量里，只换掉假样本，D 对真实图像的 logits 也会变",
      not torch.allclose(mixed, mixed_again), f"最大 |差值| {(mixed - mixed_again).abs().max():.4f}")

D_bn.eval()
with torch.no_grad():
    eval_gap = (D_bn(x_real) - D_bn(torch.cat([x_real, x_fake]))[:8]).abs().max().item()
D_bn.train()
claim("评估模式：两种方式得到的 logits 相同：BatchNorm 用的是它的运行统计量，哪个批量都改变不了它们", eval_gap == 0)


# %% [markdown]
# 训练模式下，批量的均值和方差把批量里的每张图像都混在了一起，所以在拼接的批量里，D 对一张真实图像的判断取决于它旁边的假图像（反过来也一样），运行统计量最终也落在一个真实批量和假批量都不具有的混合值上。ganhacks 的第 4 条技巧建议每个小批量要么全是真实图像，要么全是假图像，这就是 PyTorch 的 DCGAN 教程调用两次 D 的原因；另一条出路是用不带 BatchNorm 的 D（原帖 000 的 D，以及 WGAN-GP 论文推荐的评判器：它的梯度惩罚是逐样本计算的，见第 08 课；公开代码里也有保留 BatchNorm 的评判器，第 13 课就调试了一个）。至于 G，画样本图时要在 `no_grad` 下用 `G.eval()`（第 04 课的练习）。

# %% [markdown] tags=["read-after-exercises"]
# | 人们常写的代码 | 在如今的 torch 上 |
# |---|---|
# | 在 G 的损失里写 `D(x_fake.detach())`，“这样 D 就得不到梯度” | 能运行；G 得不到梯度，D 反而得到了梯度（第 1 节） |
# | G 的更新步之前写 `D.requires_grad_(False)`，之后写 `D.requires_grad_(True)` | 仅当第二行一定会运行、而且 D 没有哪一层是有意冻结的时候，才是对的（第 1 节、练习） |
# | `D.requires_grad_(False)`，“这样 D 的前向传播就不会为权重保存任何东西” | Linear 层保存得更少；每个 Conv 层仍然保存它的输入（第 1 节） |
# | `with torch.no_grad(): x_fake = G(z)`，“G 不受影响” | G 的 BatchNorm 运行统计量照样会变（第 2 节） |
# | D 里有 BatchNorm 时写 `D(torch.cat([x_real, x_fake]))` | 能运行；每个 logit 都取决于批量里的其他图像，真实的和假的混在一起（第 2 节） |

# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - 在 G 的更新步中，冻结 D（`D.requires_grad_(False)`），或者调用 `loss_G.backward(inputs=list(G.parameters()))`：G 得到的梯度和普通反向传播相同，D 的 `.grad` 原封不动，也不会计算 D 的梯度。冻结还能让 D 的前向传播少保存一些东西，能省多少取决于各个反向函数：省下的是 Linear 层的输入，而不是 Conv 层的输入。在 G 的损失里写 `D(x_fake.detach())`，G**什么也得不到**，D 反而得到了梯度。
# - 在 `finally` 里把标志恢复成原来的样子：`D.requires_grad_(True)` 会解冻有意冻结的层，而中途抛出异常的训练步会让 D 一直处于冻结状态，而且毫无提示。
# - 训练模式下的 BatchNorm 在每次前向传播中都会更新运行统计量，不管是否在 `no_grad` 下；`eval()` 才能让它停下。`d_first_fresh_fake` 每步更新 G 的运行统计量两次。真实图像和假图像放在同一个批量里经过带 BatchNorm 的 D，它们的统计量就会混在一起：要么把批量分开，要么用不带 BatchNorm 的 D。

# %% [markdown]
# ## 练习
#
# ### 动手实现：冻结 D 的 G 更新步，并把一切恢复原状
#
# 第 1 节发现了冻结出错的两种方式：事后调用 `D.requires_grad_(True)` 会打开有意冻结的层，而在这两行之间抛出异常的训练步会让 D 永远冻结下去。请写一个 `g_step(G, D, opt_G, z)`：用非饱和损失 `bce(D(G(z)), 1)` 让 G 更新一步，在 D 的前向传播和反向传播**期间**冻结 D，让 D 的 `.grad` 保持原样，并把 D 的每一个 `requires_grad` 标志恢复成进来时的样子，即使这一步中途抛出异常也要如此（让异常照常抛出）。检查程序会在原帖 000 的 G 和 D 上运行它：D 的第一层是有意冻结的，`.grad` 里存着之前的一个梯度。检查程序会把 `opt_G.step()` 时 G 的梯度和正确的梯度比较，检查 D 的 `.grad`、权重和标志，在 D 的前向传播开始时读取标志，并在 D 的前向传播中抛出一个错误，再运行一次这个训练步。整个函数体都由你来写：冻结、标志和 `try` 都不会替你写好。

# %%
def g_step(G, D, opt_G, z):
    """穿过冻结 D 的一次 G 更新；D 的 .grad 和 requires_grad 标志保持原样，出错时也一样。
    返回 loss_G。"""
    ### BEGIN SOLUTION
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        loss_G = bce(D(G(z)), 1)
        loss_G.backward()
        opt_G.step()
    finally:
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)
    return loss_G
    ### END SOLUTION

my_answer = g_step  # SOLUTION: 把它指向你的 g_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_frozen_g_step(my_answer)
assert solved, "frozen_g_step：还没有完成，或者还不对：上面几行说明了缺什么"
