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
# # 第 10 课 · GAN 训练循环中的混合精度、钩子与 `torch.compile`
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/10_amp_hooks_and_compile.ipynb)
#
# [English](../10_amp_hooks_and_compile.ipynb) · [学生版](student/10_amp_hooks_and_compile.ipynb)
#
# **目标**。弄清 GAN 训练步中间另外三样机制的作用，每一样都在当前的 torch 上验证过：两个优化器共用一个 `GradScaler` 的混合精度训练，读取或修改梯度、统计保存字节数的钩子，以及 `torch.compile` 在 `retain_graph` 和 `.item()` 上带来的变化。最后动手写一个在 autocast 下运行、共用一个 `GradScaler`、并裁剪 D 的梯度的 GAN 训练步。第 09 课已经讲了前两样：冻结 D，以及 BatchNorm。
#
# **材料**。原帖都没有讲到这么深；模型用的是原帖 000 的 G 和 D。事实来自 PyTorch 自己的文档（autocast；`GradScaler` 及其针对多个模型和优化器、针对反缩放后梯度的两个示例；张量钩子和保存张量钩子；`torch.compile`）。课末有一张表，把人们常写的代码和它在如今的 torch 上实际做了什么并排列出。

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
import logging
from gan_lessons import strategies
from gan_lessons.lesson import headline
from gan_lessons.models import Generator, Discriminator

bce = strategies.bce       # bce(logits, 1)：G 的非饱和损失；bce(logits, 0)：D 损失中的假样本项

# %% [markdown]
# ## 1 · 混合精度：autocast，以及两个优化器共用一个 GradScaler
#
# `torch.autocast` 让一张清单上的运算以 16 位类型运行，另一张清单上的运算以 float32 运行，其余的运算则沿用输入的类型；`GradScaler` 把损失乘上一个倍数，让很小的 float16 梯度不至于舍入成零，并且在梯度出现 inf 或 NaN 时跳过那次优化器更新。GAN 有两个损失和两个优化器，这正是 PyTorch 的 AMP 示例单独讨论的情形。CPU 上的 autocast 默认使用 bfloat16，而当前的 torch 能在 CPU 上运行这一切，所以 CI 也会检查这部分。首先看看在原帖 000 的 G 和 D 的一次前向传播中，哪些运算改变了类型：

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()
z, x_real = torch.randn(8, G.z_dim), torch.rand(8, 1, 28, 28) * 2 - 1
dtypes = {}
record = lambda module, args, out: dtypes.setdefault(type(module).__name__, set()).add(out.dtype)
handles = [m.register_forward_hook(record) for net in (G, D) for m in net.modules()
           if isinstance(m, (nn.Linear, nn.Conv2d, nn.BatchNorm1d, nn.BatchNorm2d, nn.ReLU))]
with torch.autocast("cpu", dtype=torch.bfloat16):
    x_fake = G(z)
    logits = D(x_fake)
    loss_G = bce(logits, 1)
for h in handles:
    h.remove()
for kind, seen in sorted(dtypes.items()):
    print(tr("{kind:<12} outputs {dtypes}", kind=kind, dtypes=", ".join(sorted(str(t) for t in seen))))
print(f"x_fake {x_fake.dtype}, logits {logits.dtype}, loss_G {loss_G.dtype}")
claim("CPU 上的 autocast 下，每个 Linear 和 Conv2d 都以 bfloat16 计算",
      dtypes["Linear"] == dtypes["Conv2d"] == {torch.bfloat16})
claim("BatchNorm 和 ReLU 沿用输入给它们的 bfloat16", dtypes["BatchNorm1d"] == dtypes["ReLU"] == {torch.bfloat16})
claim("BCE 损失的结果是 float32：无论输入是什么类型，autocast 都以 float32 运行它",
      logits.dtype == torch.bfloat16 and loss_G.dtype == torch.float32)

# %% [markdown]
# 上面 G 的第一个 Linear 层是以 bfloat16 计算的。**先预测，再验证**。反向传播给出的权重梯度会是什么类型？把 `...` 换掉，然后运行这个单元格：它会运行 `loss_G.backward()`。

# %% reveals=["-> torch.float32", "\u53cd\u5411\u4f20\u64ad\u5199\u8fdb\u53c2\u6570\u7684\u6bcf\u4e2a\u68af\u5ea6", "\u68af\u5ea6\u4e5f?\u90fd?\u4fdd\u6301 ?float32"] tags=["predict"]
prediction = torch.float32  # SOLUTION: loss_G.backward() 之后，G.net[0].weight.grad 的 dtype 是什么（torch.float32 还是 torch.bfloat16）？
loss_G.backward()
check("autocast 下的反向传播之后参数梯度的 dtype", prediction, G.net[0].weight.grad.dtype,
      why="autocast 为每个运算转换出副本；参数本身仍是 float32，它的梯度也取参数的类型。")

# %%
claim("参数保持 float32，反向传播写进参数的每个梯度也是 float32",
      all(p.dtype == p.grad.dtype == torch.float32 for p in G.parameters()))

# %% [markdown]
# Linear 或 Conv 之后的层（这里是 BatchNorm 和 ReLU）不在 autocast 的 CPU 列表里，输入什么类型就保持什么类型；autocast 会改变哪些运算的类型，列在它的文档里，CPU 和 CUDA 的列表并不相同。参数从来不会被转换：autocast 为每个运算转换出一份 bfloat16 副本，而反向传播会把每个梯度转换回它所属参数的类型。
#
# bfloat16 保留了 float32 的指数位，float16 则没有。所以在 GPU 上用 float16 时 `GradScaler` 很重要，用 bfloat16 时则几乎用不上：

# %%
tiny = torch.tensor(1e-8)
claim("大小为 1e-8 的梯度在 float16 中舍入为 0，在 bfloat16 中不会", tiny.half().item() == 0 and tiny.bfloat16().item() > 0)
claim("float16 能表示的最大值是 65504：65510 仍会舍入到它，65520 及以上变成 inf；bfloat16 和 float32 一样，最大约为 3.4e38",
      torch.finfo(torch.float16).max == 65504 and torch.tensor(65510.0).half().item() == 65504
      and torch.isinf(torch.tensor(65520.0).half()).item() and torch.finfo(torch.bfloat16).max > 3e38)


# %% [markdown]
# 在这台 CPU 上，用一个真实的梯度再看一遍这两点。钩子可以把梯度舍入成 float16 再转回来，模拟梯度在 float16 反向传播中实际的样子。下面把同一个很小的损失算两次：一次原样，一次先乘以 65536、得到梯度后再除以 65536，这正是 `GradScaler` 在反向传播前后所做的：

# %%
def through_float16(loss_scale, small=1e-7):
    """一个很小的损失对 Linear 层权重的梯度：钩子把每个元素舍入为 float16（就像 float16 的反向传播那样），
    损失先乘以 loss_scale，梯度再除回去。"""
    torch.manual_seed(0)
    layer, x = nn.Linear(16, 1), torch.randn(64, 16)
    true, = torch.autograd.grad(layer(x).mean() * small, layer.weight)
    handle = layer.weight.register_hook(lambda g: g.half().float())
    got, = torch.autograd.grad(layer(x).mean() * small * loss_scale, layer.weight)
    handle.remove()
    return true, got / loss_scale

rounded_away = {}
for scale in (1.0, 2.0**16):
    true, got = through_float16(scale)
    rounded_away[scale] = int((got == 0).sum())
    error = ((got - true).abs() / true.abs()).max().item()
    print(tr("loss scale {scale:>7g}: {zeros} of {entries} gradient entries rounded to 0, largest relative error "
             "{error:.3g}", scale=scale, zeros=rounded_away[scale], entries=got.numel(), error=error))
claim("不缩放时，这个梯度的大部分在 float16 中舍入为 0", rounded_away[1.0] > got.numel() / 2)
claim("先乘以 65536，就没有元素舍入为 0，而且每个元素与真实梯度的相对误差都在 1% 以内",
      rounded_away[2.0**16] == 0 and error < 0.01)
claim("而 70000 这样的梯度在 float16 中变成 inf：GradScaler 随后会跳过这一步更新",
      torch.isinf(torch.tensor(70000.0).half()).item())

# %% [markdown]
# **一个缩放器，两个优化器**。PyTorch 的 AMP 示例给出的做法是：每个损失在反向传播之前先缩放；每个优化器都通过 `scaler.step(opt)` 来更新，它会先对梯度做反缩放，发现 inf 或 NaN 就跳过这次更新；所有更新做完之后调用 `scaler.update()`，**每次迭代只调用一次**。在当前的 torch 上，`torch.amp.GradScaler("cpu")` 存在而且可用，所以这些都能在这里运行。最小的例子和 PyTorch 针对多个模型和优化器的示例一样：两个很小的网络代替 G 和 D，各有自己的损失和 Adam 优化器，共用一个缩放器，先做完两次反向传播，再做两次更新。第二次迭代在两次反向传播之后往 G 的一个梯度里写入 inf，就像 float16 溢出时那样：于是在 `scaler.step(opt_D)` 运行时，G 的 `.grad` 里有这个 inf。

# %%
HAS_AMP_SCALER = hasattr(torch.amp, "GradScaler")    # 较旧的 torch（2.1）没有它
NO_AMP_SCALER = tr("torch {version} has no torch.amp.GradScaler (torch 2.1 lacks it; the reference torch 2.13 has "
                   "it): skipped, not checked", version=torch.__version__)

def growth_run(iterations, growth_interval, init_scale=4.0):
    """一个小模型在同一个 GradScaler 下连续 `iterations` 次正常迭代，每次之后的缩放因子。"""
    torch.manual_seed(0)
    layer = nn.Linear(4, 1)
    opt = optim.SGD(layer.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    x, scales = torch.randn(8, 4), []
    for _ in range(iterations):
        opt.zero_grad()
        scaler.scale(layer(x).pow(2).mean()).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales

def one_scaler_run(device_type="cpu", dtype=torch.bfloat16, init_scale=2.0**16):
    """两个小网络在一个 GradScaler 下的两次迭代，第二次 G 的梯度里有 inf；逐次迭代返回：哪个网络变了、
    迭代前后的缩放因子，以及 opt_G 的 Adam 步数。"""
    torch.manual_seed(0)
    G_toy, D_toy = nn.Linear(4, 4).to(device_type), nn.Linear(4, 1).to(device_type)
    opt_G, opt_D = optim.Adam(G_toy.parameters()), optim.Adam(D_toy.parameters())
    scaler = torch.amp.GradScaler(device_type, init_scale=init_scale)     # 默认值就是 2**16
    x = torch.randn(8, 4, device=device_type)
    report = []
    for inf_in_G in (False, True):
        before = {net: [p.detach().clone() for p in net.parameters()] for net in (G_toy, D_toy)}
        scale = scaler.get_scale()
        opt_G.zero_grad()
        opt_D.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss_D = D_toy(x).pow(2).mean()
            loss_G = G_toy(x).pow(2).mean()
        scaler.scale(loss_D).backward()
        scaler.scale(loss_G).backward()
        if inf_in_G:
            G_toy.weight.grad[0, 0] = float("inf")      # 在两个优化器更新之前写进 G 的 .grad
        scaler.step(opt_D)
        scaler.step(opt_G)
        scaler.update()                                 # 两次更新之后，只调用一次
        moved = lambda net, before=before: any(not torch.equal(p, b) for p, b in zip(net.parameters(), before[net]))
        report.append({"G moved": moved(G_toy), "D moved": moved(D_toy), "scale": (scale, scaler.get_scale()),
                       "opt_G steps": int(opt_G.state[G_toy.weight]["step"])})
    return report


# %% [markdown]
# **先预测，再验证**。第二次迭代中，哪个优化器会执行它的更新？把 `...` 换掉，然后运行这个单元格：它会运行两次迭代，并打印哪些网络变了。

# %% reveals=["G \u7684\u68af\u5ea6\u6709 inf +G \u66f4\u65b0\uff1aFalse +D \u66f4\u65b0\uff1aTrue", "opt_D ?\u4ecd\u7136\u7167\u5e38\u66f4\u65b0", "\u6bcf\u4e2a\u4f18\u5316\u5668\u53ea\u68c0\u67e5\u81ea\u5df1\u7684"] tags=["predict"]
prediction = "D"  # SOLUTION: 共用一个 GradScaler，G 的一个梯度里有 inf：哪个优化器会更新，"G"、"D"、"两者"还是"都不"？
if HAS_AMP_SCALER:
    clean, poisoned = one_scaler_run()
    for label, r in ((tr("clean iteration"), clean), (tr("inf in G's grad"), poisoned)):
        print(tr("{label:<16} G moved: {G_moved!s:<6} D moved: {D_moved!s:<6} scale {before:g} -> {after:g}   "
                 "opt_G's Adam step count: {steps}", label=label, G_moved=r["G moved"], D_moved=r["D moved"],
                 before=r["scale"][0], after=r["scale"][1], steps=r["opt_G steps"]))
    stepped = {(True, True): "both", (True, False): "G", (False, True): "D", (False, False): "neither"}
    check("G 的梯度里有 inf 时执行更新的优化器", prediction,
          stepped[poisoned["G moved"], poisoned["D moved"]],
          why="每次 scaler.step(opt) 只对这一个优化器的梯度做反缩放和检查；D 的梯度都是有限值。")
else:
    print(NO_AMP_SCALER)

# %%
if HAS_AMP_SCALER:
    claim("正常迭代：两个优化器都更新，缩放因子保持 65536", clean["G moved"] and clean["D moved"]
          and clean["scale"] == (65536.0, 65536.0))
    scales = growth_run(iterations=5, growth_interval=3)
    claim("缩放因子要连续经过 growth_interval 次正常迭代才会翻倍（这里是 3 次，默认是 2000 次）",
          scales == [4.0, 4.0, 8.0, 8.0, 8.0] and torch.amp.GradScaler("cpu").get_growth_interval() == 2000,
          f"5 次正常迭代后各自的缩放因子：{scales}")
    claim("G 的梯度里有 inf：opt_G 跳过这次更新，G 不变，Adam 的步数也不增加",
          not poisoned["G moved"] and poisoned["opt_G steps"] == 1)
    claim("这次迭代里 opt_D 仍然照常更新，尽管那时 G 的 .grad 里有 inf：每个优化器只检查自己的梯度",
          poisoned["D moved"])
    claim("而那唯一一次 update() 把缩放因子减半", poisoned["scale"] == (65536.0, 32768.0))
else:
    print(NO_AMP_SCALER)

# %% [markdown]
# 每个 `scaler.step(opt)` 只替自己的优化器做决定，所以一次迭代可以训练 D 而跳过 G。`update()` 在所有优化器都更新之后只调用一次，这样缩放因子就是根据整次迭代来调整的。在反向传播和对应的更新之间，`.grad` 里是**缩放后的**梯度，`scaler.step` 在更新之前才把它除以缩放因子。如果代码要在这中间读取 `.grad`（裁剪它的范数、记录日志），就必须先调用 `scaler.unscale_(opt)`，PyTorch 关于梯度裁剪的示例正是这样做的；之后 `scaler.step` 不会再除第二次：

# %%
if HAS_AMP_SCALER:
    torch.manual_seed(0)
    layer = nn.Linear(4, 1)
    opt = optim.SGD(layer.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    x = torch.randn(8, 4)
    true_grad, = torch.autograd.grad(layer(x).pow(2).mean(), layer.weight)
    scaler.scale(layer(x).pow(2).mean()).backward()
    claim("scaler.scale(loss).backward() 之后，.grad 里是梯度乘以缩放因子",
          torch.allclose(layer.weight.grad, true_grad * scaler.get_scale()), f"缩放因子 {scaler.get_scale():g}")
    scaler.unscale_(opt)
    claim("scaler.unscale_(opt) 原地把它除回去：.grad 就是真实梯度",
          torch.allclose(layer.weight.grad, true_grad))
    before = layer.weight.detach().clone()
    scaler.step(opt)
    scaler.update()
    claim("之后的 scaler.step(opt) 直接用这个梯度更新：变化量是 lr 乘以真实梯度",
          torch.allclose(before - layer.weight.detach(), 0.1 * true_grad))
else:
    print(NO_AMP_SCALER)

# %% [markdown]
# GAN 的训练步是有先后顺序的：D 在 G 的损失算出来之前就已经更新了（`d_first_reuse_fake`，第 05 课），所以 D 的 `scaler.step` 在 G 的反向传播之前，而那唯一一次 `update()` 在 G 更新之后。练习会写出这样的训练步，并裁剪 D 的梯度。在 GPU 上，同一个缩放器要配合 float16 使用，那里才真的会发生溢出。下一个单元格只在有 CUDA 时在 GPU 上运行上面的两次迭代，没有 CUDA 时会如实说明：

# %% tags=["nbval-ignore-output"]
if torch.cuda.is_available() and HAS_AMP_SCALER:
    clean, poisoned = one_scaler_run("cuda", torch.float16, init_scale=2.0**10)
    claim("CUDA 上用 float16：正常迭代让 G 和 D 都更新；G 的梯度里有 inf 时只跳过 G 的更新，并把缩放因子"
          "减半", clean["G moved"] and clean["D moved"] and not poisoned["G moved"]
          and poisoned["D moved"] and poisoned["scale"][1] == poisoned["scale"][0] / 2)
else:
    print(tr("No CUDA device here (or no torch.amp.GradScaler): the float16 run on a GPU is skipped, not checked. "
             "The bfloat16 run above, on the CPU, checked the same GradScaler logic."))


# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - CPU 上的 autocast（bfloat16）让 Linear 和 Conv 以 bfloat16 运行，BCE 损失以 float32 运行；参数和梯度都保持 float32。`torch.amp.GradScaler("cpu")` 在 torch 2.13 上可用。一个缩放器配两个优化器时，遇到 inf/NaN，每个 `scaler.step` 只跳过它自己的优化器；`scaler.update()` 每次迭代运行一次，遇到 inf 后把缩放因子减半。在反向传播和更新之间，`.grad` 是缩放过的：要在 `scaler.unscale_(opt)` 之后再裁剪。
# - `x_fake` 上的钩子看到的是 G 经由 D 得到的梯度（和 `torch.autograd.grad` 的结果相同，钩子也会改变后者）。缩放它，G 的梯度就精确地按同样比例缩放；SGD 的更新随之变化，Adam 的几乎不动。损失中某一项上的权重会改变 Adam 最终停下的位置；整个损失上的因子则不会。`saved_tensors_hooks` 统计 autograd 保存了什么，统计结果与手算的大小一致。
# - 编译过的模块会把保存的激活值捐赠给普通的反向传播；之后再经过它们做 `retain_graph=True` 的反向传播就会报错。解决办法是 `torch._functorch.config.donated_buffer = False`（训练器的修复方法），或者只用从不保留计算图的顺序。编译过的函数里的 `.item()` 是一次图中断。用 AOTAutograd 后端（包括默认后端）编译过的 D，梯度惩罚无法穿过它运行；`backend="eager"` 可以（第 08 课）。

# %% [markdown]
# ## 练习
#
# ### 动手实现：autocast 下的 GAN 训练步，共用一个 GradScaler，累积并裁剪 D 的梯度
#
# 第 1 节让一个缩放器服务两个互不相干的网络，每个网络各做一次反向传播。GAN 的训练步是有先后顺序的；整个批量放不进显存时，BigGAN 一类的代码会把 D 的梯度在几个微批量上累积起来，而很多 GAN 代码库还会裁剪 D 的梯度范数。请写一个 `amp_step(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2)`，做一步 `d_first_reuse_fake`（第 05 课）。先算 `x_fake = G(z)`；然后在 `accum` 个微批量上求 D 的梯度：把 `x_real` 和（分离后的）`x_fake` 各按顺序均分成 `accum` 块，对每一对 `x_part, fake_part` 计算损失 `(bce(D(x_part), 1) + bce(D(fake_part), 0)) / 2`，除以 `accum`，各做一次反向传播；D 根据累积的梯度只更新一次。然后 G 的损失 `bce(D(x_fake), 1)` 经过更新后的 D，G 更新。前向传播和损失都在 `torch.autocast("cpu", dtype=torch.bfloat16)` 下计算；每个损失都用传进来的这一个 `scaler` 缩放；用 `torch.nn.utils.clip_grad_norm_` 把 D 累积后的梯度范数裁剪到 `max_norm`，范数按真实梯度计算；一个网络的梯度里出现 inf 或 NaN 时，只跳过这个网络的更新；缩放因子在整次迭代中只更新一次。检查程序会在原帖 000 的 G 和 D 上以批量大小 8、`accum=2`、`max_norm=0.1` 运行它（那里 D 的梯度范数约为 0.27），记录对缩放器的每一次调用和 D 每次前向传播的批量大小，把每个优化器更新时所用的梯度和正确的梯度比较，然后再运行两次：一次在 D 的一个梯度里放 inf，一次在 G 的一个梯度里放 inf。整个函数体都由你来写。

# %%
def amp_step(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):
    """bfloat16 autocast 下的一步 d_first_reuse_fake：opt_D 和 opt_G 共用一个 GradScaler，D 的梯度在 accum 个微批量上
    累积，按真实值裁剪到 max_norm，溢出只跳过对应网络的更新。"""
    ### BEGIN SOLUTION
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x_fake = G(z)
    opt_D.zero_grad()                                    # 只清一次：各微批量的梯度累积在 .grad 里
    for x_part, fake_part in zip(x_real.chunk(accum), x_fake.detach().chunk(accum)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss_D = (bce(D(x_part), 1) + bce(D(fake_part), 0)) / 2
        scaler.scale(loss_D / accum).backward()
    scaler.unscale_(opt_D)                               # 先还原真实梯度，再裁剪
    nn.utils.clip_grad_norm_(D.parameters(), max_norm)
    scaler.step(opt_D)                                   # D 的梯度里有 inf 或 NaN 时会跳过
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss_G = bce(D(x_fake), 1)
    opt_G.zero_grad()
    scaler.scale(loss_G).backward()
    scaler.step(opt_G)
    scaler.update()                                      # 两次更新之后，只调用一次
    ### END SOLUTION

my_answer = amp_step  # SOLUTION: 把它指向你的 amp_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_amp_step(my_answer)
assert solved, "amp_step：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# ## 延伸 · 钩子：读取梯度、修改梯度、统计保存了什么
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 钩子让我们不必改写训练步就能看到它的内部。`x_fake.register_hook(fn)` 会用损失关于 `x_fake` 的梯度调用 `fn`，这正是 G 经由 D 收到的信号；如果 `fn` 返回一个张量，这个张量就会替换掉该梯度，供上游的一切使用，也就是整个 G。保存张量钩子（`torch.autograd.graph.saved_tensors_hooks`）能看到 autograd 为反向传播保存的每一个张量。先从读取开始：

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()
z = torch.randn(8, G.z_dim)
x_fake = G(z)
loss_G = bce(D(x_fake), 1)
want, = torch.autograd.grad(loss_G, x_fake, retain_graph=True)   # 还没有挂任何钩子
seen = []
handle = x_fake.register_hook(lambda grad: seen.append(grad.clone()))
loss_G.backward()
handle.remove()
claim("x_fake 上的钩子收到的恰好是 torch.autograd.grad(loss_G, x_fake)：也就是 G 从 D 那里得到的梯度",
      len(seen) == 1 and torch.equal(seen[0], want), f"形状 {list(seen[0].shape)}，范数 {seen[0].norm():.4f}")


# %% [markdown]
# 接下来是一个有返回值的钩子：返回梯度的一半。由于反向传播对传给它的梯度是线性的，`x_fake` 上游的一切都会随之按同样比例缩放。至于这对 G 的*更新*有什么影响，要看优化器。**先预测，再验证**。分别用 SGD 和 Adam 训练 G，每种优化器都在有钩子和没有钩子时各训练一次。谁的第一次更新也会减半？先运行下一个单元格，它定义了训练过程；然后把再下一个单元格里的 `...` 换掉，再运行它。

# %%
def G_update(factor, make_opt):
    """一步之后 G 的参数变化量，其中有个钩子把 x_fake 处的梯度乘以 `factor`。"""
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    opt_G = make_opt(G.parameters())
    z = torch.randn(8, G.z_dim)
    before = [p.detach().clone() for p in G.parameters()]
    x_fake = G(z)
    x_fake.register_hook(lambda grad: grad * factor)
    bce(D(x_fake), 1).backward()
    grads = torch.cat([p.grad.flatten() for p in G.parameters()])
    opt_G.step()
    return grads, torch.cat([(p.detach() - b).flatten() for p, b in zip(G.parameters(), before)])

sgd = lambda params: optim.SGD(params, lr=0.1)
adam = lambda params: optim.Adam(params, lr=1e-3)

# %% reveals=["\u7528 ?SGD ?\u65f6\uff0cG ?\u7684\u66f4\u65b0\u4e5f\u51cf\u534a", "\u7528 ?Adam ?\u65f6\uff0cG ?\u7684\u7b2c\u4e00\u6b21\u66f4\u65b0\u51e0\u4e4e\u4e0d\u53d8", "\u68af\u5ea6\u4e0a\u7684\u5e38\u6570\u56e0\u5b50\u51e0\u4e4e\u88ab?(\u62b5\u6d88|\u7ea6\u6389)"] tags=["predict"]
prediction = "SGD"  # SOLUTION: 钩子把 x_fake 处的梯度减半。谁对 G 的第一次更新也会减半，"SGD"还是"Adam"？
grads_1, sgd_1 = G_update(1.0, sgd)
grads_half, sgd_half = G_update(0.5, sgd)
_, adam_1 = G_update(1.0, adam)
_, adam_half = G_update(0.5, adam)
halved = lambda hooked, plain: torch.allclose(hooked, plain / 2, atol=1e-7)
followers = [name for name, hooked, plain in (("SGD", sgd_half, sgd_1), ("Adam", adam_half, adam_1))
             if halved(hooked, plain)]
check("更新随梯度一起减半的优化器", prediction, " and ".join(followers) or "neither",
      why="SGD 的一步是 lr * grad；Adam 的第一步约为 lr * grad / |grad|，所以常数因子被约掉了。")

# %%
relative = lambda a, b: ((a - b).norm() / b.norm()).item()
claim("在 x_fake 处减半后，G 的每个梯度都恰好减半", torch.equal(grads_half, grads_1 / 2))
claim("用 SGD 时，G 的更新也减半", torch.allclose(sgd_half, sgd_1 / 2, atol=1e-6),
      f"与没有钩子时的更新相比，相对差异为 {relative(sgd_half, sgd_1):.3f}")
claim("用 Adam 时，G 的第一次更新几乎不变：Adam 会除以梯度自身的大小",
      relative(adam_half, adam_1) < 0.01, f"相对差异 {relative(adam_half, adam_1):.4f}")


# %% [markdown]
# Adam 的第一步对每个参数大约是 `lr * g / |g|`，所以梯度上的常数因子几乎被抵消（只有它的 `eps` 能察觉到）。乘在**整个**损失上的因子，或者把 G 收到的全部信号都按比例缩放的钩子，在 SGD 下相当于调学习率，在 Adam 下几乎不起作用。乘在和式中**某一项**上的权重则是另一回事：它改变和的梯度方向，从而改变训练最终停在哪里。WGAN-GP 的 `gp_weight=10`（第 08 课）就是这样的权重。来看最简单的例子 $(p-1)^2 + w\,(p+1)^2$，它的最小值点在 $p = (1-w)/(1+w)$：

# %%
def adam_settles(w, scale=1.0, steps=3000):
    """从 p = 0.5 出发，Adam 在 scale * ((p - 1)² + w (p + 1)²) 上最终把 p 带到哪里。"""
    p = torch.tensor(0.5, requires_grad=True)
    opt = optim.Adam([p], lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        (scale * ((p - 1) ** 2 + w * (p + 1) ** 2)).backward()
        opt.step()
    return round(p.item(), 3)

ends = {(w, scale): adam_settles(w, scale) for w in (1, 10) for scale in (1, 10)}
for (w, scale), p_end in ends.items():
    print(tr("term weight w = {w:<3} whole-loss factor {scale:<3} Adam settles at p = {p}", w=w, scale=scale,
             p=p_end))
claim("整个损失上的因子不会改变 Adam 停下的位置",
      ends[1, 1] == ends[1, 10] and ends[10, 1] == ends[10, 10])
claim("某一项上的权重会改变它：w = 1 时 p = 0，w = 10 时 p = -0.818 = (1 - 10) / (1 + 10)",
      ends[1, 1] == 0 and ends[10, 1] == round(-9 / 11, 3), f"{ends[1, 1]}, {ends[10, 1]}")

# %% [markdown]
# 改变梯度*方向*的钩子（逐样本裁剪、加噪声）同样会改变训练的走向。还有一点要知道：张量钩子在 `torch.autograd.grad` 里也会触发，并改变它的返回值：

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()
x_fake = G(torch.randn(8, G.z_dim))
loss_G = bce(D(x_fake), 1)
plain, = torch.autograd.grad(loss_G, x_fake, retain_graph=True)
x_fake.register_hook(lambda grad: grad * 0.5)
hooked, = torch.autograd.grad(loss_G, x_fake)
claim("register_hook 之后，torch.autograd.grad(loss_G, x_fake) 返回的是经钩子修改后的梯度",
      torch.equal(hooked, plain * 0.5))

# %% [markdown]
# **统计保存的字节数**。用第 03 课的保存张量钩子来计数，结果可以手算核对：对形状为 [8, 16] 的批量 `x` 计算 `tanh(Linear(16, 32)(x))`。这一层的 `addmm` 保存 `x`（8 × 16 个浮点数，用于求权重的梯度）和转置后的权重（16 × 32，用于求 `x` 的梯度）；`tanh` 保存它的输出（8 × 32），因为它的导数是 1 − tanh²。每个浮点数 4 字节：512 + 2048 + 1024 = 3584。在这里，autograd 只保存它将要计算的那些梯度所需的东西（并非每个运算都这样节省：第 09 课可以看到，冻结的卷积层仍会保存它的输入），所以冻结这一层，或者让 `x` 不需要梯度，都会去掉其中一项：

# %%
torch.manual_seed(0)
layer = nn.Linear(16, 32)

def saved_bytes(x_requires_grad, layer_frozen):
    """autograd 为 tanh(layer(x)) 保存的张量的字节数和形状。"""
    layer.requires_grad_(not layer_frozen)
    x = torch.randn(8, 16, requires_grad=x_requires_grad)
    shapes = []
    def pack(t):
        shapes.append(list(t.shape))
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch.tanh(layer(x))
    layer.requires_grad_(True)
    return sum(4 * s[0] * s[1] for s in shapes), shapes

by_hand = {tr("x and layer require grad"): 4 * (8 * 16 + 16 * 32 + 8 * 32),
           tr("layer frozen"): 4 * (16 * 32 + 8 * 32), tr("x needs no grad"): 4 * (8 * 16 + 8 * 32)}
measured = {tr("x and layer require grad"): saved_bytes(True, False), tr("layer frozen"): saved_bytes(True, True),
            tr("x needs no grad"): saved_bytes(False, False)}
for case, (count, shapes) in measured.items():
    print(tr("{case:<26} saved {shapes}: {count} bytes (by hand {by_hand})", case=case, shapes=shapes, count=count,
             by_hand=by_hand[case]))
claim("三种情况下，pack 钩子统计的结果都和手算的大小相等",
      all(measured[k][0] == by_hand[k] for k in by_hand), ", ".join(f"{v[0]}" for v in measured.values()))

# %% [markdown]
# 转置后的权重只是权重的一个视图，不占新的内存，所以第 09 课的计数器（以及 `gan_lessons.costs`）不把参数的存储算在内。在冻结的 D 里，Linear 层只保存这样的视图；Conv 层仍然保存它们的输入（第 09 课），所以冻结省下的是 Linear 层的输入。

# %% [markdown]
# ## 延伸 · `torch.compile`：捐赠缓冲区与图中断
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# `torch.compile(D)` 把 D 的前向传播追踪成一个图，并编译出与之对应的反向传播。GAN 训练循环里有两种做法可能和它冲突：为第二次反向传播保留计算图（`retain_graph=True`，第 05 课的 `one_forward` 就是这样做的），以及在函数中间用 `.item()` 取出一个数。编译很花时间，所以这里的模型都很小，后端用的是 `aot_eager`：它运行的 AOTAutograd 层和默认的 `inductor` 后端相同（捐赠缓冲区就在这一层），但不生成、也不编译 C++ 代码，所以速度快，也不需要编译器。在 Python 3.13.0 的 Colab 上，下面每个编译过的单元格还会打印 torch 的一条警告，说在这个 Python 版本上 guard 可能运行得更慢；结果是一样的（`make check-colab`，见 docs/setup.md）。首先看看 `torch.compile` 在这台机器上到底能不能用：

# %%
torch._logging.set_logs(dynamo=logging.ERROR)     # 不让 dynamo 自己的警告出现在输出里
import torch._functorch.config as functorch_config

try:
    torch._dynamo.reset()
    torch.compile(nn.Linear(2, 1), backend="aot_eager")(torch.ones(1, 2)).sum().backward()
    compile_works = True
    print(tr("torch.compile works here (backend aot_eager)"))
except Exception as error:                        # 任何失败：如实说明，并跳过本节的检查
    compile_works = False
    print(tr("torch.compile does NOT work on this machine ({error_type}: {error}). The checks of section 3 are "
             "skipped below, each cell says so; the rest of the lesson is unaffected.",
             error_type=type(error).__name__, error=headline(str(error))))
SKIPPED = tr("skipped, not checked: torch.compile does not work on this machine (see above)")

# %% [markdown]
# **捐赠缓冲区**。AOTAutograd 为普通的 `backward()` 编译反向传播时，会把前向传播保存的激活值标记为*捐赠的*（donated）：反向传播可以复用它们的内存，因为以后再也没有谁需要它们。带 `retain_graph=True` 的反向传播承诺的恰恰相反，所以 torch 拒绝它。在 torch 2.13 上，反向传播在第一次运行时才编译，先到的那次反向传播说了算：如果是普通的反向传播，缓冲区就被捐赠，之后再经过同一个编译图做 `retain_graph=True` 的反向传播就会报错。最小的例子：

# %%
HAS_DONATION = compile_works and hasattr(functorch_config, "donated_buffer")    # 较旧的 torch 里没有
NO_DONATION = (tr("skipped, not checked: torch {version} has no donated buffers "
                  "(torch._functorch.config.donated_buffer)", version=torch.__version__) if compile_works else SKIPPED)
if HAS_DONATION:
    torch._dynamo.reset()
    torch.manual_seed(0)
    D_small = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
    D_compiled = torch.compile(D_small, backend="aot_eager")
    x = torch.randn(8, 2)
    D_compiled(x).sum().backward()                # 第一次反向传播：编译时使用了捐赠缓冲区
    loss = D_compiled(x).sum()
    with expect_error(RuntimeError, "compiled with non-empty donated buffers which requires create_graph=False "
                                    "and retain_graph=False"):
        loss.backward(retain_graph=True)
else:
    print(NO_DONATION)


# %% [markdown]
# 放到 GAN 训练循环里，就是先用某个策略走一步，其中有一次经过 D 的普通反向传播，接着运行 `one_forward`，而它的 `loss_G.backward(inputs=..., retain_graph=True)` 要经过同一个编译好的 D。下面的检查在很小的编译版 G 和 D 上运行两步，分三个版本；修复方法就是训练器自己用的那一种（`gan_lessons.training` 里的 `_compiled_step` 在编译之前设置 `torch._functorch.config.donated_buffer = False`），这里写成一个会自动撤销的 `patch`：

# %%
def compiled_steps(order, donate=True, compile_=True):
    """在很小的编译版 G 和 D 上依次运行 `order` 里的策略；返回之后 G 和 D 的权重。"""
    torch._dynamo.reset()
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
    opt_G, opt_D = optim.Adam(G.parameters(), lr=1e-3), optim.Adam(D.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    noise = lambda n: torch.randn(n, 4, generator=gen)
    x_real = torch.randn(16, 2, generator=gen) + 2
    with functorch_config.patch(donated_buffer=donate):
        G_run, D_run = (torch.compile(G, backend="aot_eager"), torch.compile(D, backend="aot_eager")) if compile_ else (G, D)
        for name in order:
            strategies.get(name)(G_run, D_run, opt_G, opt_D, x_real, noise)
    return torch.cat([p.detach().flatten() for p in (*G.parameters(), *D.parameters())])

if HAS_DONATION:
    with expect_error(RuntimeError, "compiled with non-empty donated buffers"):
        compiled_steps(["d_first_fresh_fake", "one_forward"])
    alone = compiled_steps(["one_forward", "one_forward"])
    claim("只运行两步 one_forward 没问题：它们第一次经过 D 的反向传播保留了计算图，所以什么也没有捐赠",
          bool(torch.isfinite(alone).all()))
    retain_free = ["d_first_reuse_fake", "g_first", "d_first_fresh_fake", "d_first_frozen_D", "g_first_inputs"]
    claim("从不保留计算图的五种顺序，在开启捐赠的情况下编译，可以一个接一个地运行",
          bool(torch.isfinite(compiled_steps(retain_free * 2)).all()))
    eager = compiled_steps(["d_first_fresh_fake", "one_forward"], compile_=False)
    fixed = compiled_steps(["d_first_fresh_fake", "one_forward"], donate=False)
    claim("设置 donated_buffer=False 后，同样的两步可以运行，而且结果和 eager 模式的 PyTorch 一致",
          torch.allclose(fixed, eager, atol=1e-6), f"最大 |差值| {(fixed - eager).abs().max():.1e}")
else:
    print(NO_DONATION)

# %% [markdown]
# 可见在当前的 torch 上，这个错误取决于之前运行过什么：单独运行 `one_forward` 没问题，同一个策略跟在另一个训练步后面就会失败。因此有两种修复方法。一是像训练器那样，在编译之前关闭捐赠，代价是反向传播中本可以靠捐赠省下的内存。二是不保留计算图：除了 `one_forward`（以及原帖 003 的顺序，它反正也会失败），第 05 课的每种顺序都让每个计算图只用一次，可以在开启捐赠的情况下编译运行。梯度惩罚不能穿过用 AOT 后端（默认的 inductor，或 aot_eager）编译过的 D：它需要二阶反向传播（double backward），而这些后端编译出的图不支持，所以 `gan_lessons.training` 拒绝在 `wgan_gp` 下使用 `fast=True`（第 08 课展示了这个错误）。
#
# **图中断**。Dynamo 把 Python 代码追踪成图，直到遇到无法放进图里的东西为止；它不得不停下的每一处，都叫作*图中断*（graph break）。`.item()` 把张量变成 Python 数字，训练步里为了记日志常有这样一行。`torch._dynamo.explain` 不运行编译器，就能报告一个函数有哪些图和图中断。**先预测，再验证**。对下面只含一个 `.item()` 的 `logged_step`，它会报告几次图中断？把 `...` 换掉，然后运行这个单元格。

# %% reveals=["\u56fe\uff1a2 \u4e2a\uff0c\u56fe\u4e2d\u65ad\uff1a1 \u6b21", "\u4e00\u6b21\u56fe\u4e2d\u65ad", "\u628a\u51fd\u6570(\u5207|\u62c6|\u5206)\u6210\u4e24\u4e2a\u56fe"] tags=["predict"]
prediction = 1  # SOLUTION: 对只含一个 .item() 的 logged_step，torch._dynamo.explain 会报告几次图中断？
torch.manual_seed(0)
D_small = nn.Linear(4, 1)

def logged_step(x):
    loss_D = F.softplus(D_small(x)).mean()
    value = loss_D.item()                          # 损失值，用来写一行日志
    return loss_D * 2, value

if compile_works:
    torch._dynamo.reset()
    report = torch._dynamo.explain(logged_step)(torch.randn(8, 4))
    print(tr("graphs: {graphs}, graph breaks: {breaks}", graphs=report.graph_count,
             breaks=report.graph_break_count))
check("logged_step 中的图中断次数", prediction, report.graph_break_count if compile_works else SKIPPED,
      why="dynamo 默认不能把 Python 数字留在图里：它在 .item() 处结束当前的图，在它之后再开始"
          "另一个。")

# %%
if compile_works:
    reason = report.break_reasons[0].reason.splitlines()[0]
    print(tr("reason: {reason}", reason=reason))
    claim("一个 .item() 把函数切成两个图：一次图中断", report.graph_break_count == 1
          and report.graph_count == 2)
    claim("而且原因里提到了 Tensor.item", "Tensor.item" in reason)   # 具体措辞因版本而异
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        captured = torch._dynamo.explain(logged_step)(torch.randn(8, 4))
    claim("设置 capture_scalar_outputs=True 后，这个数字留在图里：没有图中断",
          captured.graph_break_count == 0 and captured.graph_count == 1)

    def branching_step(x):
        loss_D = F.softplus(D_small(x)).mean()
        if loss_D.item() > 10:                     # 由 Python 根据这个数字做判断
            loss_D = loss_D * 0
        return loss_D * 2

    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(capture_scalar_outputs=True):
            branching = torch._dynamo.explain(branching_step)(torch.randn(8, 4))
    except Exception as error:                     # 较旧的 dynamo（torch 2.1）自己就会在这个例子上失败
        branching = None
        print(tr("torch {version}: dynamo.explain raises {error_type} on the branch: skipped, not checked",
                 version=torch.__version__, error_type=type(error).__name__))
    if branching is not None:
        claim("但即使这样，Python 根据这个数字做分支判断仍然会造成图中断", branching.graph_break_count == 1)
else:
    print(SKIPPED)

# %% [markdown]
# 默认情况下，dynamo 在 `.item()` 处结束当前的图，用 Python 运行这一行，然后在它之后开始一个新图。图中断不是错误：函数照样运行，只是变成两段编译好的代码，中间夹着 Python。只有在没有 Python 代码查看这个数字时，它才能留在图里。在训练循环里，开销小的做法是在训练步内部把损失保留为张量，隔一段时间才读取一次，`gan_lessons.training` 就是这样做的（`_losses` 累加分离后的损失，`.tolist()` 每个迭代周期只运行一次）；在 GPU 上，`.item()` 还要等设备完成之前排队的计算。

# %% [markdown] tags=["read-after-exercises"]
# | 人们常写的代码 | 在如今的 torch 上 |
# |---|---|
# | `torch.autocast("cpu", dtype=torch.bfloat16)` 和 `torch.amp.GradScaler("cpu")` | 两者在 CPU 上都能用；Linear 层和 Conv 层以 bfloat16 计算，损失和每个 `.grad` 都保持 float32（第 1 节） |
# | opt_G 和 opt_D 共用一个 `GradScaler`，G 的一个梯度里有 inf | opt_G 跳过它的更新，opt_D 照常更新，缩放因子减半（第 1 节） |
# | 在 `scaler.scale(loss).backward()` 和 `scaler.step(opt)` 之间调用 `clip_grad_norm_` | 裁剪的是缩放后的梯度，除非先调用 `scaler.unscale_(opt)`（第 1 节、练习） |
# | 在 `x_fake` 处把梯度减半的钩子，“用来让 G 慢下来” | 在 SGD 下 G 的更新减半；在 Adam 下第一次更新几乎不变（延伸：钩子） |
# | `torch.compile(D)`，再加一个保留计算图的策略（`retain_graph=True`） | 一旦某次普通的反向传播编译了 D 的反向传播，就会报与“donated buffers”有关的错误（延伸：`torch.compile`） |
# | 在编译过的函数里写 `loss_D.item()` | 一次图中断：函数以两个图运行，中间夹着 Python（延伸：`torch.compile`） |
