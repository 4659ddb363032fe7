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
# # 第 14 课 · 多块 GPU：分布式数据并行给 GAN 的训练步带来了什么
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/14_several_gpus.ipynb)
#
# [English](../14_several_gpus.ipynb) · [学生版](student/14_several_gpus.ipynb)
#
# **目标**。GAN 搬到多块 GPU 上的那一天，第 01 到 10 课的错误会换个样子回来，还会多出几个新的。分布式数据并行（`DistributedDataParallel`，下文简称 DDP）在每个设备上各放一份 G 和 D，每份只处理批量中属于自己的那一片，并让各份副本保持一致。本课展示它给训练步添了什么，又在哪里出错：没有任何损失到达的参数、BatchNorm 的缓冲区、原帖 003 的顺序、梯度累积、噪声和文件。
#
# **在这里怎么运行**。每个实验都在本笔记本于 CPU 上启动的两个进程里运行，两个进程由 PyTorch 的 gloo 后端连在一起，和 `torchrun --nproc_per_node=2` 在两块 GPU 上用 NCCL 启动它们的方式一样。DDP 对自动微分做的事在两种情况下相同（只能用于 GPU 的 SyncBatchNorm 除外），速度则不同（本课最后会说明换成 GPU 后有什么变化）。每个实验都是 `gan_lessons/ddp_lesson.py` 里的一个普通函数 `f(rank, world, ...)`，由 `processes.run` 在两个进程里分别调用，并按 0 号进程在前的顺序返回每个进程的结果。按仔细学习的节奏，本课约需 58 分钟。

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
import inspect
from gan_lessons import ddp_lesson, processes
from gan_lessons.lesson import show_source

def same(a, b):
    return torch.allclose(a, b, rtol=1e-5, atol=1e-7)


# %% [markdown]
# ## 1 · DDP 给训练步添了什么
#
# 下面每一个分布式错误都来自 DDP 添加的某样东西，而它们在训练代码里都看不见：每个参数上的一个钩子，它在 `backward()` 期间起作用；梯度在进程间传送时装进的桶（bucket）；以及它对缓冲区的处理，因为没有梯度会到达缓冲区。
#
# 包装只要一行：`ddp = DistributedDataParallel(D)`；训练代码随后在原来调用 `D(x)` 的地方调用 `ddp(x)`。下面每个进程都在**自己的**批量上（每个进程的批量都不同；进程编号即 rank）计算 D 的损失并调用 `backward()`：一次用普通的 D，一次用权重相同、经 DDP 包装的 D。

# %%
show_source(ddp_lesson.averaged)

# %% [markdown]
# **先预测，再验证**。经过 DDP 包装的 D 做完 `backward()` 之后，1 号进程的 `D` 里有了 `.grad`。它是不是 1 号进程自己那个损失的梯度，和单进程时一样？

# %% reveals=["\u4e24\u4e2a\u8fdb\u7a0b\u5404\u81ea\u68af\u5ea6\u7684\u5e73\u5747\u503c", "\u4e0d\u662f 1 \u53f7\u8fdb\u7a0b\u81ea\u5df1\u7684"] tags=["predict"]
prediction = False  # SOLUTION: DDP 反向传播之后，1 号进程的 .grad 是不是它自己那个损失的梯度？（True/False）
rank0, rank1 = processes.run(ddp_lesson.averaged)
check("1 号进程的 .grad 是它自己那个损失的梯度", prediction, same(rank1["after_ddp"], rank1["own"]),
      why="DDP 的钩子在反向传播过程中就对每个梯度在各进程间求平均：每个进程最后拿到的都是两个进程各自梯度的平均值，"
          "所以 1 号进程的 .grad 不是 1 号进程自己的。")

# %%
mean_of_own = (rank0["own"] + rank1["own"]) / 2
claim("DDP 反向传播之后，每个进程拿到的都是各进程自身梯度的平均值",
      same(rank0["after_ddp"], mean_of_own) and same(rank1["after_ddp"], mean_of_own))
claim("两个进程的梯度逐位相同：它们的优化器会做出相同的更新",
      torch.equal(rank0["after_ddp"], rank1["after_ddp"]))
claim("梯度装在一个桶里（D 很小），在反向传播中发送了一次",
      rank0["buckets_sent"] == 1, shown=f"桶的大小：{rank0['bucket_sizes']} 字节，即 D 的 193 个 float32 元素")

# %% [markdown]
# 求平均发生在 `backward()` **之内**：某个参数的梯度一算好，DDP 注册的钩子就会触发，梯度按桶（默认 25 MiB）装满一个发一个，因此通信和反向传播的其余部分是重叠进行的。上面那个计数用的钩子（`register_comm_hook`）能看到每个桶发出去。这也解释了为什么一个没有用到所有参数的损失会让 DDP 出错：装着那个参数的桶永远装不满，也就永远不会被求平均，DDP 在下一次前向传播时发现这一点（第 3 节）。
#
# **缓冲区**。BatchNorm 的运行统计量是缓冲区，不是参数：没有梯度会到达它们，钩子也就没法让它们保持一致。下面，1 号进程先把它的 D 的移动平均值写成 5，然后每个进程用自己的批量做一次前向传播，缓冲区用 DDP 的默认设置（`broadcast_buffers=True`）。

# %%
show_source(ddp_lesson.buffers)

# %% [markdown]
# **先预测，再验证**。这次前向传播会不会用 0 号进程的移动平均值覆盖 1 号进程的（如果没有被覆盖，以 0.1 的动量更新一次后约为 4.5）？

# %% reveals=["0 \u53f7\u8fdb\u7a0b\u7684\u7f13\u51b2\u533a\u590d\u5236\u4e86\u8fdb\u6765", "\u90a3\u4e2a 5 \u5df2\u7ecf\u6ca1\u4e86"] tags=["predict"]
prediction = True  # SOLUTION: 一次 DDP 前向传播会用 0 号进程的移动平均值覆盖 1 号进程的吗？（True/False）
rank0, rank1 = processes.run(ddp_lesson.buffers)
check("一次 DDP 前向传播用 0 号进程的移动平均值覆盖了 1 号进程的", prediction,
      bool(rank1["running_mean"].mean() < 1),
      why="前向传播之前，DDP 把 0 号进程的缓冲区复制了进来；那个 5 已经没了，这次前向传播的更新是从 0 号进程的统计量开始的。")

# %%
print(tr("rank 1's running mean, first 3: {values}", values=rounded(rank1['running_mean'][:3])))
claim("复制之后，1 号进程的缓冲区接近 0 号进程的（都接近 0），而不是接近 4.5", bool(rank1["running_mean"].abs().max() < 0.5))
claim("而且缓冲区的版本计数器没有变：在这个版本的 torch 上，这次复制不算一次写入",
      rank1["version"][0] == rank1["version"][1], shown=f"版本 {rank1['version'][0]} -> {rank1['version'][1]}")

# %% [markdown]
# 用来关掉这次复制的选项在新版本里变了。torch 2.12 及以前是 `broadcast_buffers=False`；torch 2.13 弃用了它（会发出 `FutureWarning`），另加了 `forward_sync_buffers`。两者并不是同一个开关：`broadcast_buffers=False` 连 DDP 在包装模块时做的那一次复制也跳过了，而 `forward_sync_buffers=False` 保留那一次。

# %%
from torch.nn.parallel import DistributedDataParallel
NEW_FLAG = "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
if NEW_FLAG:
    with expect_warning(FutureWarning, "broadcast_buffers"):
        kept0, kept1 = processes.run(ddp_lesson.buffers, broadcast_buffers=False)
    new0, new1 = processes.run(ddp_lesson.buffers, forward_sync_buffers=False)
    claim("forward_sync_buffers=False 和 broadcast_buffers=False 一样跳过了前向传播之前的复制：1 号进程仍然看得到它的 5",
          bool(new1["running_mean"].mean() > 4), shown=f"1 号进程 {rounded(new1['running_mean'][:3])}")
else:
    kept0, kept1 = processes.run(ddp_lesson.buffers, broadcast_buffers=False)
claim("broadcast_buffers=False 时，每个进程保留自己的统计量：1 号进程仍然看得到它的 5",
      bool(kept1["running_mean"].mean() > 4), shown=f"1 号进程 {rounded(kept1['running_mean'][:3])}")

# %% [markdown]
# 一旦各进程构建模块的方式不同，包装时的那次复制就要紧了。延伸“噪声、随机种子与文件”建议每个进程把进程编号加到随机种子上，好让各进程抽到自己的噪声；这样一来，带谱规范化的 D（SNGAN 的做法，`nn.utils.parametrizations.spectral_norm`）在每个进程里每层的向量 `u` 都不同，而 `u` 是缓冲区。DDP 包装 D 时会把 0 号进程的参数复制到每个进程；缓冲区也会复制，除非设了 `broadcast_buffers=False`：

# %%
show_source(ddp_lesson.seeded_per_rank)
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)   # 它的 FutureWarning 上面已经看过了
    loose0, loose1 = processes.run(ddp_lesson.seeded_per_rank, broadcast_buffers=False)
gap = (loose0["out"] - loose1["out"]).abs().max().item()
claim("随机种子加进程编号、再加上 broadcast_buffers=False：两个进程的向量 u 不同，D 在同一个输入上的输出也不同",
      not torch.equal(loose0["u"], loose1["u"]) and gap > 1e-3, shown=f"最大差值 {gap:.3f}")
if NEW_FLAG:
    tight0, tight1 = processes.run(ddp_lesson.seeded_per_rank, forward_sync_buffers=False)
    claim("用 forward_sync_buffers=False 时，包装时的复制照样进行：向量 u 相同，输出也相同",
          torch.equal(tight0["u"], tight1["u"]) and torch.equal(tight0["out"], tight1["out"]))

# %% [markdown]
# **先预测，再验证**。GAN 时不时要画一张样本网格，那是在 `torch.no_grad()` 下的一次前向传播。下面每个进程先训练一步，再在 `no_grad` 下做一次前向传播，然后 1 号进程把它的移动平均值写成 5，接着做一次训练用的前向传播。这次前向传播会像上面那样把 0 号进程的缓冲区复制进来吗？

# %% reveals=["1 \u53f7\u8fdb\u7a0b\u7684 5 \u4fdd\u7559\u4e86\u4e0b\u6765", "\u4e4b\u540e\u624d\u4f1a\u590d\u5236"] tags=["predict"]
prediction = False  # SOLUTION: 在 no_grad 下的前向传播之后，下一次训练用的前向传播会复制 0 号进程的缓冲区吗？（True/False）
after0, after1 = processes.run(ddp_lesson.sample_then_train)
check("no_grad 前向传播之后的那次训练前向传播复制了 0 号进程的缓冲区", prediction,
      bool(after1["running_mean"].mean() < 1),
      why="DDP 在每次前向传播结束时决定下一次前向传播是否复制缓冲区，只有开着梯度（且不在 no_sync() 里）的前向传播之后才会复制："
          "在 no_grad 下的前向传播之后，下一次前向传播跳过了复制，1 号进程的 5 保留了下来。")

# %%
plain0, plain1 = processes.run(ddp_lesson.sample_then_train, sample_first=False)
claim("没有那次 no_grad 前向传播时，同样的训练前向传播会复制缓冲区：1 号进程的 5 没了",
      bool(plain1["running_mean"].abs().max() < 0.5))
claim("每次前向传播之前，DDP 自己的 ddp.will_sync_module_buffers() 已经说明了这一点：no_grad 前向传播之后不复制，没有它时复制",
      not after1["will_copy"] and plain1["will_copy"])

# %% [markdown]
# ## 2 · BatchNorm 的缓冲区与版本错误
#
# “DDP + BatchNorm + D 的两次前向传播”是 GAN 代码里最常被报告的 DDP 错误之一（pytorch/pytorch#22095、#175024；rosinality/stylegan2-pytorch#236；Project-MONAI/GenerativeModels#352）：D 先在真实批量上、再在假样本批量上运行，然后一次反向传播就抛出第 03 课的版本错误，出错的张量和 BatchNorm 的移动平均值一样大。原因曾是 DDP 在第二次前向传播时复制缓冲区：这次复制是对一个缓冲区的原地写入，而第一次前向传播的计算图保存了这个缓冲区。在这个版本的 torch 上（准备工作那一格打印了它的版本），DDP 做这次复制时不把它算作写入（上面版本计数器没有动），所以这个经典场景能运行；在把这次复制算作写入的 torch 上，同样的代码会报错，这时就要用下面的修法：

# %%
show_source(ddp_lesson.two_forwards)
results = processes.run(ddp_lesson.two_forwards)
claim("在这个版本的 torch 上，DDP 下先做 D 的两次前向传播再做一次反向传播，可以运行", len(results) == 2)

# %% [markdown]
# 机制本身还在：在前向传播和反向传播之间，只要有任何写入碰到了被保存的缓冲区，无论来自 DDP 还是你自己的代码，都会报这个错。手动同步 BatchNorm 统计量的代码做的正是这件事：

# %%
with expect_error(RuntimeError, r"modified by an inplace operation: \[torch.(cuda.)?FloatTensor \[16\]\] is at version \d+; expected version \d+"):
    processes.run(ddp_lesson.two_forwards, copy_between=True)

# %% [markdown]
# 网上流传的两个修法都去掉了这次写入，各有代价。
#
# - `broadcast_buffers=False`：根本不复制，也就没有写入。代价是每个进程保留自己的统计量（第 1 节里 1 号进程的 5 保留了下来；批量不同，统计量就会各自漂移），于是 `D.eval()` 在不同进程上可能给出不同的分数，而检查点（0 号进程写的）只保存了 0 号进程的统计量。
# - `SyncBatchNorm`：BatchNorm 在所有进程上一起计算批量统计量，每次 BatchNorm 的前向传播和反向传播都要做一次进程间的集合通信；这样缓冲区不用复制也一致。它需要 GPU：

# %%
show_source(ddp_lesson.sync_batch_norm)
with expect_error(ValueError, "SyncBatchNorm layers only work with GPU modules"):
    processes.run(ddp_lesson.sync_batch_norm)

# %%
gap = (kept0["running_mean"] - kept1["running_mean"]).abs().max().item()
claim("broadcast_buffers=False：一次前向传播之后，1 号进程的移动平均值仍是它自己的，和 0 号进程的相差很远", gap > 1,
      shown=f"最大差值 {gap:.3f}")

# %% [markdown]
# ## 3 · 没有任何损失到达的参数
#
# AC-GAN 式的 D 有两个头：一个真假分数，一组类别 logits。如果某一步的损失只用到分数（在无标签数据上更新 D），类别头就得不到梯度。单进程时这无关紧要：它的 `.grad` 保持为 `None`。在 DDP 下，装着这个头的桶永远装不满。

# %%
show_source(ddp_lesson.ConditionalD, ddp_lesson.unused_head)

# %% [markdown]
# **先预测，再验证**。`unused_head(iterations=1)` 让 D 更新一步，`iterations=2` 更新两步。DDP 在第几次迭代（1 还是 2）报错？

# %% reveals=["\u5728\u7b2c\u4e8c\u6b21\u8fed\u4ee3\u5f00\u59cb\u65f6", "\u7b2c 2 \u6b21\u8fed\u4ee3\u62a5\u9519"] tags=["predict"]
prediction = 2  # SOLUTION: DDP 在第几次迭代（1 或 2）报错？
try:
    first = processes.run(ddp_lesson.unused_head, iterations=1)
except RuntimeError:
    first = None
check("报错的那次迭代", prediction, 1 if first is None else 2,
      why="第一次反向传播结束时，类别头所在的桶从未被规约；DDP 在第二次迭代开始时的前向传播里才发现这一点并报出来：第 2 次迭代报错。")

# %%
claim("第 1 次迭代没有报错，却也什么都没平均：D 唯一的桶没有装满，每个进程都按自己的梯度更新，两份 D 已经不一样了",
      not torch.equal(first[0]["D"], first[1]["D"]))

# %%
with expect_error(RuntimeError, "Expected to have finished reduction in the prior iteration before starting a new one"):
    processes.run(ddp_lesson.unused_head, iterations=2)

# %% [markdown]
# 报错信息建议 `find_unused_parameters=True`：DDP 会在每次迭代时多做一些工作，处理那些没有得到梯度的参数（PyTorch 的文档说：从前向传播的输出出发遍历一遍计算图）。它能运行：

# %%
ran = processes.run(ddp_lesson.unused_head, iterations=3, find_unused_parameters=True)
claim("find_unused_parameters=True：三次迭代都能运行，类别头没有梯度",
      all(r["ran"] == 3 and r["classes_grad"] is None for r in ran))
claim("而且两份 D 保持一致", torch.equal(ran[0]["D"], ran[1]["D"]))

# %% [markdown]
# 文档给出的另一个选项 `static_graph=True` 会在第一次迭代时记下哪些参数得到了梯度，之后沿用。在这个 D 上它分两步失败：第 2 次迭代不报错，但也不求平均（之后两份 D 就不同了）；第 3 次迭代报错，报错信息说计算图变了，尽管这个 D 的计算图每次迭代都一样。原因是 PyTorch 一个尚未修复的缺陷：前向传播**返回**了一个没有任何损失用到的输出（这里是类别 logits），静态图的记账就会出错（pytorch/pytorch#97030 和 #79171）。如果 D 的前向传播不输出这个头（`returns_classes=False`），`static_graph=True` 就能运行：

# %%
two = processes.run(ddp_lesson.unused_head, iterations=2, static_graph=True)
claim("static_graph=True：第 2 次迭代没有报错，但之后两份 D 不一样了", not torch.equal(two[0]["D"], two[1]["D"]))
with expect_error(RuntimeError, "Expected to have finished reduction in the prior iteration"):
    processes.run(ddp_lesson.unused_head, iterations=3, static_graph=True)
left_out = processes.run(ddp_lesson.unused_head, iterations=3, static_graph=True, returns_classes=False)
claim("前向传播的输出里去掉这个头之后，static_graph=True 能运行三次迭代，两份 D 保持一致",
      all(r["ran"] == 3 for r in left_out) and torch.equal(left_out[0]["D"], left_out[1]["D"]))

# %% [markdown]
# 这两个选项的代价：D 的损失同时用到两个头（没有未使用的参数），在本笔记本的两个 CPU 进程里，D 每更新一步用时的中位数（毫秒），共五轮，轮流测量，每轮 50 步。这些数字只属于这台机器；`find_unused_parameters` 多出的那次遍历随计算图变大而变长。不需要任何选项的修法：让每个头在每一步都有一个损失项，权重为零的项就够了（见下）。

# %% tags=["nbval-ignore-output"]
costs = processes.run(ddp_lesson.flag_costs)[0]
for flag, ms in costs.items():
    print(tr("{flag:<24} {ms:6.2f} ms a step", flag=tr("default") if flag == "default" else flag, ms=ms))

# %%
ran = processes.run(ddp_lesson.unused_head, iterations=3, zero_term=True)
claim("D 的损失里加上 0 * classes.sum()、不设任何选项时，三次迭代都能运行；类别头的梯度为零",
      all(r["ran"] == 3 and r["classes_grad"] is not None and not r["classes_grad"].any() for r in ran))

# %% [markdown]
# ## 4 · DDP 下原帖 003 的顺序
#
# 原帖 003 的策略一（第 05 课）用 `retain_graph=True` 保留 D 的计算图，更新 D，然后让 G 的损失穿过这张已过期的计算图做反向传播。DDP 对此毫无改变：更新仍然在反向传播之前原地改写了 D 的权重，而这次反向传播所用的计算图保存了这些权重。

# %%
with expect_error(RuntimeError, r"modified by an inplace operation: \[torch.(cuda.)?FloatTensor \[16, 1\]\]"):
    processes.run(ddp_lesson.seed003)

# %% [markdown]
# 修法就是第 05 课的：任何一种在 `opt_D.step()` 之前求 G 的梯度的顺序，或者在它之后重新做一次 D 的前向传播。在 `torchrun` 下，`python -m gan_lessons train --strategy ...` 能用 DDP 运行课程里的每一种策略（原帖 003 的顺序在那里同样报错）。

# %% [markdown]
# ## 5 · 累积 D 的梯度：`no_sync()`
#
# 一个批量放不下时，BigGAN 会把 D 的梯度在几个微批量上累积起来（第 10 课配合 `GradScaler` 做过）。下面是按单进程写法写的这个训练步，D 经过了 DDP 包装：

# %%
show_source(ddp_lesson.d_step_synced_each)

# %% [markdown]
# **先预测，再验证**。每次反向传播都对当时 `.grad` 里的东西求平均……真是这样吗？`accum=2` 时，每个进程据以更新的梯度，是不是单个进程把两个进程的批量合在一起时据以更新的那个梯度？

# %% reveals=["\u68af\u5ea6\u7167\u6837\u662f\u5bf9\u7684", "\u548c\u7684\u5e73\u5747\u7b49\u4e8e\u5e73\u5747\u7684\u548c"] tags=["predict"]
prediction = True  # SOLUTION: 每个进程据以更新的，是不是单个进程用全局批量得到的梯度？（True/False）
synced = processes.run(ddp_lesson.accumulate, step="d_step_synced_each")
one_process = ddp_lesson.one_process_reference(world=2)
check("每个进程据以更新的，是单个进程用全局批量得到的梯度", prediction,
      all(same(g, r) for run in synced for g, r in zip(run["grads"], one_process)),
      why="每次反向传播都把本微批量的梯度在各进程间求平均，再加进 .grad：和的平均等于平均的和，所以梯度照样是对的。")

# %%
claim("但 DDP 每次反向传播都发送一次 D 的桶：两个微批量，每一步发送两次", synced[0]["sent"][0] == 2,
      shown=f"发送 {synced[0]['sent'][0]} 次")

# %% [markdown]
# 把总和平均一次就能得到同样的梯度。`with ddp.no_sync():` 会关掉在它里面运行的那些前向传播**和**反向传播的求平均（DDP 在前向传播时就决定了下一次反向传播是否求平均）：它们的梯度在本地的 `.grad` 里累加，而它**之外**的第一次前向传播和反向传播会对总和求平均。练习要你写的就是这样一个训练步。

# %% [markdown]
# ## 6 · DDP 下冻结 D 与梯度惩罚
#
# 第 08 课和第 09 课写过一个 WGAN-GP 训练步：G 更新时冻结 D，梯度惩罚需要穿过 D 做二阶反向传播（`create_graph=True`）。这两样都碰到了 DDP 装钩子的地方：冻结的 D 有些参数在 G 的更新中得不到梯度；惩罚项的 `autograd.grad` 算出梯度，却不放进 `.grad`。在两个进程里把两者都运行三步：

# %%
show_source(ddp_lesson.frozen_and_penalty)
rank0, rank1 = processes.run(ddp_lesson.frozen_and_penalty)
claim("三步之后，两个进程里 D 的副本逐位相同", torch.equal(rank0["D"], rank1["D"]))
claim("G 的副本也一样", torch.equal(rank0["G"], rank1["G"]))
claim("惩罚项的 autograd.grad 没有让 DDP 发送任何东西；D 的桶是在 D 的损失的反向传播中发送的",
      rank0["sent_by_grad"] == 0 and rank0["sent"] == 3, shown=f"3 步中发送 {rank0['sent']} 次")

# %% [markdown]
# 两者都没问题：`requires_grad_(False)` 把 D 的参数从 G 的反向传播里拿掉了，DDP 也就不为它们发送任何东西；惩罚项的 `autograd.grad` 只对 `x_hat` 求梯度，不往 D 的 `.grad` 里放任何东西，也不触发 DDP 的任何钩子：D 的梯度（连同惩罚项）只在 D 的损失的反向传播中求一次平均。

# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - DDP 在 `backward()` **期间**通过每个参数上的钩子，按桶对每个梯度在各进程间求平均；之后每个进程的梯度都相同，更新也相同。它在包装模块时把 0 号进程的缓冲区复制到每个进程，此后，只要上一次前向传播开着梯度，下一次前向传播之前就会再复制一次（上一次是在 `no_grad` 或 `no_sync()` 下做的，就不复制）。torch 2.13 弃用了 `broadcast_buffers`，改用 `forward_sync_buffers`，后者保留包装时的那次复制。
# - 某个参数没有任何损失到达时，下一次迭代会报错；`find_unused_parameters=True` 能让它运行，代价是每次迭代多遍历一次计算图；给每个头都加一个损失项（哪怕权重为零）则不需要任何选项。`static_graph=True` 在这个 D 上失败，是因为 PyTorch 在处理返回了却没被用到的输出时有缺陷；前向传播不输出这个头时它就能运行。在 DDP 报错之前什么都没有平均：两份副本从第 1 次迭代起就开始不一致。
# - 在这个版本的 torch 上，复制缓冲区不再触发版本检查，所以 D 先做两次前向传播再做一次反向传播可以运行；而你自己对已保存的缓冲区的写入仍会抛出第 03 课的错误。`broadcast_buffers=False` 让统计量各自漂移；`SyncBatchNorm` 需要 GPU。
# - 原帖 003 的顺序和单进程时一样出错。冻结 D 和梯度惩罚都没问题；对参数调用 `autograd.grad` 得到的梯度不会被平均。梯度累积需要 `no_sync()`。每个进程需要自己的噪声；只让一个进程写文件，写的是 `ddp.module` 的状态。
# - 在 GPU 上（每块 GPU 一个进程，使用 NCCL），求平均和反向传播重叠进行，每个设备分担的是实实在在的工作。在这台 2 核 CPU 上，第二个进程带不来任何好处：`docs/training.md` 给出了实测的每步用时。

# %% [markdown]
# ## 练习
#
# ### 动手实现：在微批量上累积、只平均一次的 D 训练步
#
# 写一个 `d_step(ddp, opt_D, x_real, x_fake, accum)`：D 的一步更新，D 的梯度在 `accum` 个微批量上累积，其中 `ddp` 是经 DDP 包装的 D。把 `x_real` 和 `x_fake` 按顺序各均分成 `accum` 块；对每一对，计算 D 的铰链损失 `F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()`，除以 `accum`，各做一次反向传播；只调用一次 `opt_D.step()`，每次调用 d_step 都要从清零的梯度开始。DDP 每一步只能求**一次**平均：除最后一个微批量之外，每个微批量的前向传播和反向传播都要放在 `ddp.no_sync()` 里。
#
# 检查程序会在两个进程里运行你的函数，每个进程用自己的批量，各调用两次；它把每个进程中 D 据以更新的梯度，与单个进程把两个批量合在一起时据以更新的梯度相比较，并用一个计数钩子检查 DDP 每一步只发送一次桶。你的函数是在那两个进程里单独运行的，看不到本笔记本其他单元格里的东西（在别的单元格里定义的辅助函数不在那里，它打印的内容也不会显示）：`torch`、`F`、`nn` 和 `contextlib` 已经有了，其他要用的请在函数内部定义或导入。

# %%
import contextlib

def d_step(ddp, opt_D, x_real, x_fake, accum):
    """DDP 下 D 在 accum 个微批量上的铰链损失，只在最后一次反向传播时在进程间求一次平均。"""
    ### BEGIN SOLUTION
    opt_D.zero_grad()
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        last = k == len(pairs) - 1
        with contextlib.nullcontext() if last else ddp.no_sync():
            loss_D = (F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum
            loss_D.backward()
    opt_D.step()
    ### END SOLUTION

my_answer = d_step  # SOLUTION: 把它指向你的 d_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_ddp_accumulation(my_answer)
assert solved, "d_step：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# ## 延伸 · 噪声、随机种子与文件
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 为单进程写的代码只设一次随机种子，然后抽取 `z`；原样放到每个进程里运行时，每个进程还都会写一遍检查点。

# %%
show_source(ddp_lesson.noise_and_files)

# %% [markdown]
# 下面每个进程都像单进程代码那样，先调用 `torch.manual_seed(0)`，再调用 `torch.randn(8, 4)`：

# %%
rank0, rank1 = processes.run(ddp_lesson.noise_and_files)
claim("两个进程抽到的 z 相同：全局批量里有一半假样本是另一半的复制品", torch.equal(rank0["z"], rank1["z"]))

# %%
own0, own1 = processes.run(ddp_lesson.noise_and_files, seed_per_rank=True)
claim("用“随机种子 + 进程编号”作为随机种子后，两个进程抽到的 z 不同", not torch.equal(own0["z"], own1["z"]))
claim("只有 0 号进程写了检查点；经过一道屏障之后，每个进程读到的权重都相同",
      own0["loaded_equal"] and own1["loaded_equal"])

# %% [markdown]
# 让每个进程拿到自己的噪声有两种办法：像上面那样把进程编号加到随机种子上；或者从一个共享的随机数流里抽取整个全局批量的噪声，再各取自己的一片。`torchrun` 下的 `python -m gan_lessons train` 用的是后一种，这样两个进程合起来抽到的噪声，恰好就是单个进程会抽到的。文件：只让一个进程写（`if dist.get_rank() == 0`），其他进程先在 `dist.barrier()` 处等待，再去读；训练程序也是这样做的。把进程编号加到随机种子上是有代价的，第 1 节已经看到：各进程构建出的模块不同，它们的缓冲区只靠包装时的那次复制才变得一致。

# %% [markdown]
# ## 延伸 · 真正的多 GPU GAN 还需要什么
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 本课的实验有意做得很小。在多块 GPU 上运行的训练脚本还会遇到几件事，每一件都是大家常问的 DDP 问题。
#
# - **对参数调用 `torch.autograd.grad`**。DDP 是在填写 `.grad` 的钩子里求平均的。`autograd.grad` 返回梯度却不碰 `.grad`，所以这些梯度永远不会被平均；手动赋给 `.grad` 的值也一样。（第 6 节里惩罚项对输入调用的 `autograd.grad` 没有问题。）

# %%
show_source(ddp_lesson.grad_of_parameters)
g0, g1 = processes.run(ddp_lesson.grad_of_parameters)
claim("穿过 DDP 包装的 D 调用 autograd.grad，得到的是每个进程自己的梯度，不是平均值",
      same(g0["through_ddp"], g0["own"]) and same(g1["through_ddp"], g1["own"]) and not same(g0["through_ddp"], g1["through_ddp"]))

# %% [markdown]
# - **保存**。DDP 的 `state_dict()` 在每个名字前加上 `module.`；请保存 `ddp.module.state_dict()`（这里是 D 的），这样单个进程不用 DDP 也能加载。G 权重的指数移动平均（StyleGAN、BigGAN 都用）同样从 `ddp.module` 取，可以由一个进程维护，也可以每个进程都维护（每一步之后各副本都相同）。

# %%
claim("DDP 的 state_dict 里的名字以 module. 开头，模块自己的不是",
      all(k.startswith("module.") for k in g0["ddp_keys"]) and not any(k.startswith("module.") for k in g0["module_keys"]),
      shown=f"{g0['ddp_keys'][0]} / {g0['module_keys'][0]}")

# %% [markdown]
# - **`DataLoader`**。训练程序的做法是把一个打乱后的批量切成几片；用 `DataLoader` 时需要 `DistributedSampler`，它让每个进程拿到数据集里属于自己的那一份，并且每个迭代周期开始时要调用 `sampler.set_epoch(epoch)`：不调用的话，每个迭代周期的打乱顺序都一样。

# %%
from torch.utils.data import DistributedSampler
sampler = DistributedSampler(range(16), num_replicas=2, rank=0, seed=0)
first, again = list(sampler), list(sampler)
sampler.set_epoch(1)
claim("不调用 set_epoch 时，DistributedSampler 每个迭代周期给出的顺序都一样；set_epoch(1) 之后就变了",
      first == again and list(sampler) != first, shown=f"{first[:4]} …… 之后 {list(sampler)[:4]} ……")

# %% [markdown]
# - **只在一个进程上的调用**。经过 DDP 包装器的前向传播可能会做一次集合通信（第 1 节的缓冲区复制），每个进程都必须参加。只在 0 号进程上画网格或记录日志时，要经过 `ddp.module`，而不是 `ddp`：`ddp.will_sync_module_buffers()` 会告诉你下一次前向传播是否要复制。
# - **在 GPU 上**（这里没有运行）：每个进程在构建任何东西之前先调用 `torch.cuda.set_device(local_rank)`，并使用 `backend="nccl"`。一个进程挂掉时，其他进程会在下一次集合通信里一直等，直到 NCCL 的看门狗或进程组的超时让它们停下；随后 `torchrun` 会停掉其余进程。在 `torchrun` 下，`python -m gan_lessons train` 两件事都做了（docs/training.md）。

# %% [markdown] tags=["read-after-exercises"]
# | 在多个进程上 | 会发生什么 | 怎么办 |
# |---|---|---|
# | 某个参数没有任何损失到达（第二个头） | 第 1 次迭代什么都没平均；下一次迭代报错“Expected to have finished reduction in the prior iteration” | 让它在每一步都有一个损失项（`0 * classes.sum()` 即可），或者 `find_unused_parameters=True`（每次迭代多遍历一次计算图）；只有前向传播不返回这个头时才能用 `static_graph=True`（pytorch/pytorch#97030） |
# | BatchNorm，D 做两次前向传播、一次反向传播 | 在这个版本的 torch 上能运行：DDP 复制缓冲区不再算作写入 | 在这个版本的 torch 上无需处理（在把复制算作写入的 torch 上，用下面缓冲区的修法）；在前向传播和反向传播之间对缓冲区做 `copy_`，仍会抛出版本错误 |
# | `broadcast_buffers=False`（torch 2.13 起弃用） | 不复制缓冲区，包装时也不复制；运行统计量各自漂移，随机种子加进程编号时谱规范化的 `u` 也不同 | `forward_sync_buffers=False` 保留包装时的复制；只在一个进程上评估和保存，或者使用 SyncBatchNorm |
# | `no_grad` 下的前向传播（画网格） | 下一次前向传播跳过缓冲区复制 | 不用处理，或者经过 `ddp.module` 采样 |
# | 对参数调用 `autograd.grad` | 每个进程自己的梯度，没有平均 | 用 `backward()` 写进 `.grad` |
# | CPU 上的 `SyncBatchNorm` | 报错“SyncBatchNorm layers only work with GPU modules” | 只能用于 GPU；每次 BatchNorm 的前向传播和反向传播都做一次集合通信 |
# | 原帖 003 的顺序 | 和单进程时一样的版本错误 | 第 05 课的那些顺序 |
# | 在微批量上累积梯度 | 梯度正确，但每次反向传播都做一次全规约 | 除最后一个微批量外，其余都放进 `no_sync()` |
# | G 更新时冻结 D；梯度惩罚 | 各副本保持一致 | 无需处理 |
# | 每个进程用同一个随机种子 | 每个进程抽到相同的噪声 | 随机种子加上进程编号，或者各取一次共享抽样的一片 |
# | 文件 | 每个进程都写 | 0 号进程写，其他进程在屏障处等待 |
