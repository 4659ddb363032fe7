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
# # 第 03 课 · 原地操作与版本计数器
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/03_inplace_and_versions.ipynb)
#
# [English](../03_inplace_and_versions.ipynb) · [学生版](student/03_inplace_and_versions.ipynb)
#
# **目标**。逐字读懂 GAN 训练中最让人困惑的报错：`one of the variables needed for gradient computation has been modified by an inplace operation: [...] is at
# version N; expected version M`。我们会看到它所说的那个计数器，用原帖 001 和原帖 000 复现这个报错，认识到 `optimizer.step()` 就是那个谁都看不见的原地操作，并评判原帖 002 给出的四种解决方法，其中一种会藏起一个错误的梯度。
#
# **材料**。原帖 001（一篇没有标题的文章，讲 GAN 训练中的叶子节点、`retain_graph` 和 `detach`；没有注明作者和日期），原帖 002（皮牙子抓饭，「详解异常:RuntimeError: 一个用于梯度计算的变量已被就地操作修改的错误」，华为云社区，2024-04-05），原帖 000（聖光之護，「解决PyTorch GAN训练中的梯度计算错误:inplace操作与计算图分离」，php 中文网，2025-10-02）。这些原帖都是公开的中文博客文章，出处见[教师手册](../README.md#the-seeds)（英文）；本课运行的每段代码都写在单元格里。

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

# %% [markdown]
# ## 1 · 每个张量都有版本计数器
#
# 自动微分没法把它保存的每个张量都复制一份，所以它只保存一个引用，外加该张量此刻的 `_version`。每次原地操作都会让这个计数器加 1。到了反向传播时，只要某个已保存张量的计数器变了，就可以断定它存放的值已经不是前向传播用过的那些了。

# %%
x = torch.zeros(3)
timeline = [("x = torch.zeros(3)", x._version)]
x += 1;            timeline.append(("x += 1", x._version))
x.add_(1);         timeline.append(("x.add_(1)", x._version))
x.relu_();         timeline.append(("x.relu_()", x._version))
x[0] = 5;          timeline.append(("x[0] = 5", x._version))
x.mul(2);          timeline.append((tr("x.mul(2)   (out of place)"), x._version))
x = x + 1;         timeline.append((tr("x = x + 1  (a NEW tensor)"), x._version))
for step, version in timeline:
    print(tr("{step:<28} version {version}", step=step, version=version))
versions = [version for _, version in timeline]
claim("每次原地操作都让版本正好加 1", versions[:5] == [0, 1, 2, 3, 4], versions[:5])
claim("非原地的 x.mul(2) 没有改变版本", versions[5] == versions[4], versions[4:6])
claim("x = x + 1 得到的是一个新张量，版本从 0 开始", versions[6] == 0, versions[6])

# %% [markdown]
# `optimizer.step()` 也属于这张清单：它原地更新每个参数（在 `no_grad` 下，见第 01 课）。

# %% reveals=["\u521d\u59cb\u5316[^\u3002\\n]*(\u539f\u5730|\u7248\u672c)", "\u4e00\u6b65\u4e4b\u540e\u7684 layer\\.weight\\._version -> 2"] tags=["predict"]
prediction = 2  # SOLUTION: 新建一个 nn.Linear(3, 1)，做一次反向传播、走一步 Adam：现在 layer.weight._version 是多少？
layer = nn.Linear(3, 1)
opt = optim.Adam(layer.parameters(), lr=0.1)
layer(torch.ones(1, 3)).sum().backward()
opt.step()
check("一步之后的 layer.weight._version", prediction, layer.weight._version,
      why="nn.Linear 的初始化会原地填充它的权重（版本 1；见第 01 课），反向传播只写 .grad；"
          "优化器的这一步又是一次原地操作：2。")

# %%
layer = nn.Linear(3, 1)
opt = optim.Adam(layer.parameters(), lr=0.1)
versions = [layer.weight._version]             # 初始化也是原地操作
layer(torch.ones(1, 3)).sum().backward()
opt.step()
versions.append(layer.weight._version)
opt.step()
versions.append(layer.weight._version)
print(tr("weight version at creation, after one opt.step(), after another: {versions}", versions=versions))
claim("初始化让版本加 1，之后每步 Adam 再加 1", versions == [1, 2, 3], versions)

# %% [markdown]
# ## 2 · 自动微分何时保存张量，以及版本一变为什么会破坏反向传播
#
# 原地修改只对*被保存*的张量才是问题。哪些张量会被保存，取决于运算的导数，以及哪些输入需要梯度：`a + b` 什么也不保存；`a * b` 对每个操作数，只有在**另一个**操作数需要梯度时才会保存它（`a` 的梯度是 `grad * b`，所以要为它留着 `b`）。于是 `a * a` 会把 `a` 保存两次，`b` 是常量时 `a * b` 只保存 `b`，而 `a * 2` 只保存那个 2。在列出每种运算保存什么之前，我们先从导数出发想一个例子：`exp`。

# %% reveals=["\u8fc7\u671f|\\bstale\\b", "exp\\W.{0,25}\u4fdd\u5b58[^\u3002\\n]{0,8}\u8f93\u51fa"] tags=["predict"]
prediction = True  # SOLUTION: 执行 `y = a.exp()` 之后，`y.mul_(2)` 会改动 exp 为反向传播保存的那个张量吗？（True/False）
a = torch.ones(2, requires_grad=True)
y = a.exp()
y.mul_(2)
exp_saved = graphs.saved_tensors(y.grad_fn.next_functions[0][0])       # ExpBackward0 保存的东西
check("y.mul_(2) 改动了 exp 保存的张量", prediction, exp_saved[0].state != "alive",
      why=f"exp 保存的是它的输出 y（它的导数 exp(a) 就是 y），而 mul_ 原地修改了 y：保存的 "
          f"`{exp_saved[0].name}` 现在{tr(exp_saved[0].state)}，当前版本 {exp_saved[0].version_now}，保存时为 "
          f"{exp_saved[0].version_saved}。")

# %%
a = torch.ones(3, requires_grad=True)
b = torch.full((3,), 2.0)                      # 常量：requires_grad 为 False
made = {}
for name, make in [("a + 1", lambda t: t + 1), ("a * a", lambda t: t * t), ("a * b", lambda t: t * b),
                   ("a * 2", lambda t: t * 2), ("a.exp()", lambda t: t.exp()), ("a.sigmoid()", lambda t: t.sigmoid())]:
    out = make(a)
    made[name] = [s.name for s in graphs.saved_tensors(out.grad_fn)]
    print(tr("{op:<12} {node:<16} saves: {saved}", op=name, node=type(out.grad_fn).__name__,
             saved=made[name] or tr("nothing")))
claim("a + 1 什么也不保存；a * a 把 a 保存两次；exp 和 sigmoid 保存它们的输出",
      made["a + 1"] == [] and made["a * a"] == ["other", "self"] and made["a.exp()"] == made["a.sigmoid()"] == ["result"])
claim("b 是常量时，a * b 保存 b（`other`），不保存 a（`self`）", made["a * b"] == ["other"], made["a * b"])
claim("a * 2 只保存那个 2，不保存 a", made["a * 2"] == ["other"], made["a * 2"])

# %% [markdown]
# 所以 `y = a.exp(); y.add_(1)` 必然会破坏 `exp` 的反向传播，而 `y = a + 1; y.add_(1)` 则无害。渲染器会把出问题的那个已保存张量标为**已过期**，并写出两个版本号。

# %%
a = torch.ones(3, requires_grad=True)
y = a.exp()
y.add_(1)
graphs.draw({"y": y}, {a: "a"})

# %%
with expect_error(RuntimeError, r"modified by an inplace operation.*is at version 1; expected version 0"):
    y.sum().backward()

# %%
a = torch.ones(3, requires_grad=True)
y = a + 1
y.add_(1)
y.sum().backward()
print(tr("a + 1 then add_: backward fine, a.grad = {grad}", grad=a.grad))

# %% [markdown]
# 对常量 `b` 的 `y = a * b` 做同样的测试。这里只保存了 `b`，所以之后原地修改 `a`（这里放在 `no_grad` 下，和 `optimizer.step()` 修改参数的方式一样）不会破坏反向传播，`a` 的梯度仍然是 `b`；而原地修改 `b` 就会破坏它。

# %%
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = torch.tensor([4.0, 5.0, 6.0])             # 常量
y = a * b                                     # 只保存 b：a 的梯度就是 b
with torch.no_grad():
    a.add_(10)                                # a 的版本加 1；但 a 没有被保存
y.sum().backward()
claim("y = a * b 之后原地修改 a：反向传播照常运行，a.grad 就是 b", torch.equal(a.grad, b),
      f"a 的版本为 {a._version}，a.grad = {rounded(a.grad)}")

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = torch.tensor([4.0, 5.0, 6.0])
y = a * b
b.add_(10)                                    # b 才是保存的张量
with expect_error(RuntimeError, r"modified by an inplace operation.*is at version 1; expected version 0"):
    y.sum().backward()

# %% [markdown]
# ## 3 · GAN 里的这个报错
#
# 在 GAN 代码里，我们很少亲手写 `add_`。这里的原地操作是 `optimizer.step()`。下面是原帖 001 的 G/D 小例子，带上了 `retain_graph=True`（第 02 课讲过，不加它，计算图就被释放了）：

# %%
torch.manual_seed(0)
G, D = nn.Linear(2, 2), nn.Linear(2, 2)
optimG, optimD = optim.Adam(G.parameters()), optim.Adam(D.parameters())
t = torch.tensor([1., 2], requires_grad=True)
g = G(t)
d = D(g)
lossD = d.sum()
optimD.zero_grad()
lossD.backward(retain_graph=True)
optimD.step()                       # D.weight 被原地修改：版本 1 -> 2
lossG = (g + d).sum()
optimG.zero_grad()
with expect_error(RuntimeError, r"\[torch.FloatTensor \[2, 2\]\], which is output 0 of AsStrided(Backward0)?, is at version 2; expected version 1"):
    lossG.backward()

# %%
graphs.draw({"lossG": lossG}, graphs.param_names(G=G, D=D, t=t))

# %% [markdown]
# 报错信息给出了已保存张量的形状 `[2, 2]`，和 `D.weight` 的形状相同。原帖 000 的 D 最后一层是 `nn.Linear(512, 1)`，它的权重形状为 `[1, 512]`，而它读入的激活值是需要梯度的。

# %% reveals=["\\[512, 1\\]", "\u4fdd\u5b58\u4e86?\\s?`?weight\\.t\\(\\)"] tags=["predict"]
prediction = (512, 1)  # SOLUTION: 同样的报错发生在 Linear(512, 1) 的权重上：报错信息打印的是哪个形状？
import re

head = nn.Linear(512, 1)                          # 原帖 000 中 D 的最后一层
opt_head = optim.Adam(head.parameters())
h = torch.randn(4, 512, requires_grad=True)      # 它读入的激活值
loss = head(h).sum()
loss.backward(retain_graph=True)
opt_head.step()
try:
    loss.backward()
    printed = None
except RuntimeError as error:
    printed = tuple(int(n) for n in re.search(r"FloatTensor \[(\d+), (\d+)\]\]", str(error)).groups())
check("Linear(512, 1) 的权重过期后，报错信息里的形状", prediction, printed,
      why="Linear 计算的是 addmm(bias, input, weight.t())，并为求输入的梯度保存了 weight.t()："
          "已保存张量是 [512, 1]，而不是权重本身的 [1, 512]。")

# %% [markdown]
# 对照上面原帖 001 小例子的计算图，我们逐段来读这条报错信息：
#
# - `[torch.FloatTensor [2, 2]]`：**保存的**张量的类型（在 GPU 上是 `torch.cuda.FloatTensor`）和形状，它不一定是参数的形状。`Linear` 计算
#   `addmm(bias, input, weight.t())`，并把 `weight.t()` 保存为 `mat2`。
# - `which is output 0 of AsStrided`：已保存张量是 `D.weight` 的一个*视图*（转置），报错信息给出的是现在产生这个视图的节点。这个视图是 `t()` 造出来的，所以前向传播时它的 `grad_fn` 是 `TBackward0`（见上图）。当视图的基张量在 `no_grad` 下被原地修改时（`optimD.step()` 做的正是这件事），自动微分会把视图的 `grad_fn` 重新生成为通用的
#   `AsStridedBackward0`，报错信息给出的就是它。所以，`AsStrided` 这个你的代码从没调用过的运算，本身就说明视图的基张量被原地修改过（下面的单元格展示了这次切换）。它的写法随 torch 版本而不同：2.13 及更新的版本写的是前向运算的名字（`AsStrided`，后面还会见到 `Sigmoid` 或 `Exp`）；2.12 及更早的版本写的是它的反向节点（`AsStridedBackward0`）；原帖 001 是在更老的 torch 上写的，引用的是 `TBackward`，即优化器更新之前视图的名字。本课程的检查接受当前这两种写法，别的都不接受。
# - `is at version 2; expected version 1`：视图和它的基张量共享一个计数器。前向传播保存 `weight.t()` 时，`D.weight`
#   处于版本 1（经过了原地初始化），`optimD.step()` 把它变成了 2。
#
# 渲染器把它标了出来：`mat2 = D.weight.T`，已过期，当前版本 2，保存时为 1。G 保存的权重仍然存活，因为 G 还没有更新过。

# %%
layer = nn.Linear(2, 2)
opt = optim.Adam(layer.parameters())
w_t = layer.weight.t()                        # Linear 的 addmm 保存为 mat2 的那个视图
made_by = type(w_t.grad_fn).__name__
layer(torch.ones(1, 2)).sum().backward()
opt.step()                                    # layer.weight 在 no_grad 下被原地修改
now = type(w_t.grad_fn).__name__
claim("step 之前，转置视图的 grad_fn 来自 t()", made_by == "TBackward0", made_by)
claim("step 之后，它被重新生成为 AsStrided", now == "AsStridedBackward0", now)
claim("视图与它的基张量共享版本计数器", w_t._version == layer.weight._version == 2,
      f"两者都处于版本 {w_t._version}")

# %% [markdown]
# **原帖 000 的原例**。它的 GAN（现在放在 `gan_lessons.models` 里）和它的 `loss_nonsaturating`，按原帖里的方式调用。`D` 的最后一层是 `Linear(512, 1)`，所以保存的转置权重是 `[512, 1]`：

# %%
from gan_lessons.models import Generator, Discriminator

def loss_nonsaturating(d, g, x_real, *, device):
    """原帖 000 的损失函数，照原文写（包括它用了两次的 sigmoid：见第 05 课）。"""
    z = torch.randn(x_real.shape[0], g.z_dim, device=device)
    gz = g(z)
    dgz = F.sigmoid(d(gz))
    dx = d(x_real)
    real_label = torch.ones(x_real.shape[0], device=device)
    fake_label = torch.zeros(x_real.shape[0], device=device)
    bce_loss = F.binary_cross_entropy_with_logits
    g_loss = bce_loss(dgz, real_label).mean()
    d_loss = bce_loss(dx, real_label).mean() + bce_loss(dgz, fake_label).mean()
    return d_loss, g_loss

g, d = Generator().to(device), Discriminator().to(device)
g_optimizer, d_optimizer = optim.Adam(g.parameters(), lr=1e-3), optim.Adam(d.parameters(), lr=1e-3)
x_real = torch.rand(8, 1, 28, 28, device=device) * 2 - 1
d_loss, g_loss = loss_nonsaturating(d, g, x_real, device=device)
d_optimizer.zero_grad()
d_loss.backward(retain_graph=True)
d_optimizer.step()
g_optimizer.zero_grad()
with expect_error(RuntimeError, r"\[torch\.(cuda\.)?FloatTensor \[512, 1\]\], which is output 0 of AsStrided(Backward0)?, is at version 2; expected version 1"):
    g_loss.backward()

# %%
stale = [s for s in graphs.draw({"g_loss": g_loss}, graphs.param_names(G=g, D=d)).saved if s.state == "stale"]
for s in stale:
    print(tr("{node}.{name} = {param} {shape}: version {now}, saved at {saved}", node=s.node, name=s.name,
             param=s.param, shape=s.shape, now=s.version_now, saved=s.version_saved))
claim("前向传播保存的 D 的每个权重都已过期，排在第一个的是 D 的最后一层（net.7），和 PyTorch 的报告一致",
      len(stale) == 4 and all(s.param.startswith("D.") for s in stale) and stale[0].param == "D.net.7.weight.T",
      [s.param for s in stale])


# %% [markdown]
# 前向传播保存的 D 的每个权重都已过期，因为 `step()` 把它们全都改了；PyTorch 报告的是它的反向传播最先遇到的那一个，也就是 D 的最后一层。练习之后的延伸“评判原帖 002 的解决方法”会解释，为什么同样的循环在旧版 torch 上不报这个错。

# %% [markdown]
# **检验原帖 000 的解释**。原帖 000 是这样解释这个报错的：
#
# > 当d_loss.backward(retain_graph=True)执行时,它会计算判别器参数的梯度,并可能对计算图中的某些中间变量进行操作(例如,释放内存或修改状态)。尽管retain_graph=True参数试图保留计算图以供后续使用,但如果后续的g_loss.backward()尝试访问已被修改或释放的中间变量,就会触发inplace操作错误。
#
# 反向传播什么也不修改：它读取前向传播保存的张量，不加 `retain_graph` 时再把它们释放。版本号变成 2，是两次反向传播之间那一行 `d_optimizer.step()` 干的。同样的两次反向传播，先不加这次更新运行一遍，再加上它运行一遍：

# %%
def seed000_backwards(step_between):
    """在一对新建的 G 和 D 上运行原帖 000 的两次反向传播：返回 d_loss.backward 前后 D 最后一层权重的版本，
    以及 g_loss.backward 的报错（如果运行成功则为 None）。"""
    torch.manual_seed(0)
    g, d = Generator().to(device), Discriminator().to(device)
    d_optimizer = optim.Adam(d.parameters(), lr=1e-3)
    d_loss, g_loss = loss_nonsaturating(d, g, x_real, device=device)
    before = d.net[7].weight._version
    d_loss.backward(retain_graph=True)
    after = d.net[7].weight._version
    if step_between:
        d_optimizer.step()
    try:
        g_loss.backward()
        return before, after, None
    except RuntimeError as error:
        return before, after, str(error)

no_step, with_step = seed000_backwards(False), seed000_backwards(True)
print(tr("D.net[7].weight versions before and after d_loss.backward: without the step {without} | with it {with_step}",
         without=no_step[:2], with_step=with_step[:2]))
claim("d_loss.backward(retain_graph=True) 不改变 D 的权重的版本", no_step[0] == no_step[1] == with_step[1])
claim("两次反向传播之间没有 d_optimizer.step() 时，g_loss.backward() 能运行", no_step[2] is None)
claim("两次反向传播之间有 d_optimizer.step() 时，g_loss.backward() 抛出版本错误",
      with_step[2] is not None and "is at version 2; expected version 1" in with_step[2])

# %% [markdown]
# 所以原帖 000 说错了原因，改法却是对的：在 D 的损失里把假样本批量分离，并在更新之后让 G 的损失重新经过一次 D 的前向传播。它的这句话也没错：
#
# > 同时,也不再需要retain_graph=True,因为每个网络的梯度计算都在独立的计算路径上完成。
#
# 改好之后，D 的损失不再连到计算图里 G 的那一部分，G 的损失也有自己的前向传播，没有哪张计算图会被求导两次。

# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - 每个张量都带着 `_version`；原地操作（包括 `optimizer.step()`）会让它加 1。
# - 自动微分保存某些张量时，连同它们的版本一起记下；反向传播时检查版本。哪些张量被保存取决于导数：
#   `a * b` 只在 `a` 需要梯度时保存 `b`，只在 `b` 需要梯度时保存 `a`；`exp`、`sigmoid`、`tanh` 保存它们的输出。
# - 报错信息给出**保存的**张量的类型和形状（Linear 的权重以转置的形式出现）、现在产生它的节点（基张量被原地修改过的视图显示为 `AsStrided`，`step()` 就会造成这种情况），以及两个版本号。
# - 原帖 001 和原帖 000 碰到这个报错，是因为 `retain_graph=True` 让计算图在 `optimizer.step()` 之后依然存活。
# - 原地操作（包括 `ReLU(inplace=True)`）会破坏反向传播，前提是它覆盖的张量已经被保存下来：保存它的，可能是产生它的运算（Sigmoid、Tanh），也可能是先读过它的另一个运算（乘以一个需要梯度的张量的 mul）。接在 Linear 或 Conv 后面通常没问题，因为它们不保存输出；但这不是一条关于层的规则。
# - 原帖 002 的 `.data` 方法是靠产生错误的梯度来消除报错的；真正的修正是 `clone()` 或者不用原地操作，而 `no_grad()` 是用来更新叶子张量的。

# %% [markdown]
# ## 练习
#
# ### 动手实现：一个探针，找出过期的已保存张量
#
# 自动微分保存的每个张量，都可以先交给你自己的代码处理一遍。在 `with torch.autograd.graph.saved_tensors_hooks(pack, unpack):` 里面，运算为反向传播保存的每个张量都会经过 `pack(t)`，`pack` 返回的东西会代替它保存下来，等反向传播需要这个张量时再交给 `unpack`（钩子会一直挂在计算图上，所以反向传播可以在 `with` 块结束之后才运行）。有些工具就是用它把保存的激活值放到 CPU 上（`torch.autograd.graph.save_on_cpu`）。但这里有个陷阱：自动微分看不透你的钩子，于是不再检查版本，第 2 节的报错就变成了一个一声不吭的错误梯度：

# %%
a = torch.ones(3, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
    y = a.exp()                           # exp 通过钩子保存 y
y.mul_(2)                                 # 保存的 y 变成版本 1
y.sum().backward()                        # 不报错
right = torch.autograd.grad((a.exp() * 2).sum(), a)[0]   # 同一个损失，用非原地操作计算
claim("在 saved_tensors_hooks 下，过期的已保存张量 y 没有引发报错", a.grad is not None)
claim("而且梯度是错的：4e（mul_ 的 2 乘以翻倍后的 y），正确的应该是 2e",
      torch.allclose(a.grad, 2 * right), f"{rounded(a.grad)}，正确的是 {rounded(right)}")


# %% [markdown]
# 自己把检查加回来。写一个 `stale_saved(make_loss)`：在你的钩子下运行 `make_loss()`（它构建计算图，可能原地修改某个已保存张量，并返回一个损失），对它返回的损失做反向传播；对在此期间版本变动过的每个已保存张量，返回一个 `(形状, 保存时的版本, 反向传播时的版本)`，一个都没有时返回 `[]`。同一个张量被保存两次就算两次。反向传播算出的结果必须和不装探针时一样。检查程序会在六个计算图上运行你的探针（第 2 节的 `exp`、`a * a`、一个输出被改动后又被保存一次的 `exp`、一个输出被写了两次但数值不变的 `sigmoid`、一个干净的 `tanh(Linear(x))`，以及第 3 节原帖 001 的小例子），并把你的报告和梯度与它自己的结果比较。

# %%
def stale_saved(make_loss):
    """运行 make_loss()，再对它返回的损失做反向传播；对在此期间版本变动过的每个已保存张量，
    返回一个 (形状, 保存时的版本, 反向传播时的版本)。"""
    ### BEGIN SOLUTION
    stale = []
    def pack(t):
        return t, t._version              # 张量本身，以及它此刻的版本
    def unpack(packed):
        t, version = packed
        if t._version != version:
            stale.append((tuple(t.shape), version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = make_loss()
    loss.backward()
    return stale
    ### END SOLUTION

my_answer = stale_saved  # SOLUTION: 让它指向你的 stale_saved

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_stale_saved(my_answer)
assert solved, "stale_saved：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# ## 延伸 · `ReLU(inplace=True)`：在一处安全，在另一处报错
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 原帖 001 说，对非叶子张量做原地操作没有问题，所以 `ReLU(inplace=True)` 才那么常见：
#
# > 关于inplace操作有两个注意点,第一点是要避免对叶子结点进行inplace操作,非叶子结点无所谓,所以我们在CNN网络中经常可以看到ReLU(inplace=True)的语句,这里是对非叶子结点进行的,而inplace操作又可以节省内存,这样使用一般是没有错的。
#
# 但规则与它前面是哪一层无关。只要原地操作覆盖的张量已被某个节点保存下来供反向传播使用，它就会破坏反向传播：要么是产生这个张量的运算保存了自己的输出（第 2 节的 `sigmoid` 和 `exp`，以及 `relu` 本身），要么是另一个运算在覆盖之前读了它，并把它作为输入保存了下来（`gate` 需要梯度时，`h * gate` 会保存 `h`，见第 2 节）。`Linear` 不保存它的输出，所以紧跟在它后面的 ReLU 通常没问题，但并不总是如此。

# %%
safe = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 1))
safe(torch.randn(2, 4)).sum().backward()
print(tr("Linear -> ReLU(inplace=True): backward fine (addmm does not save its output)"))

broken = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid(), nn.ReLU(inplace=True), nn.Linear(4, 1))
with expect_error(RuntimeError, "modified by an inplace operation.*which is output 0 of Sigmoid(Backward0)?,"):
    broken(torch.randn(2, 4)).sum().backward()

# %% [markdown]
# “接在 Linear 后面就没事”只是一种习惯，而不是规则。同一个 `Linear` 后面接原地 ReLU，只要有别的运算读过 Linear 的输出并把它保存了下来，就会出错。下面先有一个乘法读了 `h`：乘以常量 gate 时，它只保存 gate，原地 ReLU 无害；乘以需要梯度的 gate 时，它会保存 `h`，而 ReLU 让这个保存的 `h` 过期了（报错信息里写的是 `Relu`，也就是最后一次写 `h` 的那个原地操作）。

# %%
layer, x = nn.Linear(4, 4), torch.randn(2, 4)

def gated_then_relu_(gate):
    h = layer(x)                      # addmm 不保存它的输出
    gated = h * gate                  # 只有 gate 需要梯度时才保存 h
    saved = [s.name for s in graphs.saved_tensors(gated.grad_fn)]
    F.relu(h, inplace=True)           # nn.ReLU(inplace=True) 对 h 做的事
    return (gated + h).sum(), saved

loss, saved = gated_then_relu_(torch.randn(2, 4))
loss.backward()
claim("gate 是常量：mul 只保存了 gate，所以 Linear -> ReLU(inplace) 没问题", saved == ["other"], saved)

loss, saved = gated_then_relu_(torch.randn(2, 4, requires_grad=True))
claim("gate 需要梯度：mul 把 h 也保存了", saved == ["other", "self"], saved)
with expect_error(RuntimeError, r"modified by an inplace operation.*output 0 of Relu(Backward0)?, is at version 1; expected version 0"):
    loss.backward()

# %% reveals=["leaky_relu\\W+\u4fdd\u5b58[^\u3002\\n]{0,6}\u8f93\u5165", "LeakyReLU \u4e4b\u540e\u63a5 ReLU\\(inplace=True\\) \u4f1a\u62a5\u9519 -> False"] tags=["predict"]
prediction = False  # SOLUTION: D 里用的层：nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU(0.2), nn.ReLU(inplace=True)) 也会出错吗？（True/False）
net = nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU(0.2), nn.ReLU(inplace=True))
try:
    net(torch.randn(2, 4)).sum().backward()
    raised = False
except RuntimeError:
    raised = True
check("LeakyReLU 之后接 ReLU(inplace=True) 会报错", prediction, raised,
      why="leaky_relu 保存的是它的输入而不是输出（它的导数是 1 还是 0.2，取决于输入的正负），所以 relu_ "
          "覆盖的不是任何反向传播需要的东西；换成保存输出的 Tanh 或 Sigmoid，就会出错。")

# %% [markdown]
# ## 延伸 · 评判原帖 002 的解决方法
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 原帖 002 列出了四种解决方法：
#
# > 为了避免这个异常,我们可以避免就地操作、使用原始操作的副本、使用with torch.no_grad()上下文管理器或者使用torch.Tensor.data属性。
#
# 其中三种用对了地方都是可靠的；剩下一种消除报错的办法，靠的却是让梯度出错。我们先照原样运行每段代码，再换一个确实*有*张量被保存的例子来运行，并和正确的梯度比较。

# %%
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)   # 方法 2：先 clone，再对副本做原地操作
y = x.clone()
y += 1
torch.sum(y).backward()
grad_clone = x.grad
print("clone     :", rounded(grad_clone))

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)   # 方法 3：torch.no_grad()
with torch.no_grad():
    x += 1
torch.sum(x).backward()
grad_no_grad = x.grad
print("no_grad   :", rounded(grad_no_grad), "x =", rounded(x), tr("version: {version}", version=x._version))

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)   # 方法 4：.data
x_data = x.data
x_data += 1
torch.sum(x).backward()
print(".data     :", rounded(x.grad), "x =", rounded(x), tr("version: {version}", version=x._version))
claim("对 sum 来说，三种方法给出的梯度都是 [1, 1, 1]",
      all(torch.equal(g, torch.ones(3)) for g in (grad_clone, grad_no_grad, x.grad)))
claim(".data 改了 x，却没有让它的版本加 1", x._version == 0 and torch.equal(x.detach(), torch.tensor([2.0, 3.0, 4.0])),
      f"x = {rounded(x)}，版本 {x._version}")


# %% [markdown]
# 三种都能运行，而且对 `sum` 来说，无论 `x` 里存的是什么，梯度都是对的。这就是这些代码看起来很有说服力的原因：`sum` 什么也不保存。现在把同样的方法用在原地修改会碰到**已保存张量**的情形，即 `y = x * x`（梯度是 `2x`，按前向传播时用的值就是 `[2, 4, 6]`）：

# %%
def fresh():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    return x, x * x

x, y = fresh()
y.sum().backward()
correct = x.grad
print(tr("{label:<25}: {value}", label=tr("correct gradient"), value=rounded(correct)))

x, y = fresh()
with expect_error(RuntimeError, "is at version 1; expected version 0"):
    with torch.no_grad():
        x += 1                  # no_grad 瞒不过版本计数器
    y.sum().backward()

# %% [markdown]
# `no_grad` 绕不过版本检查。`.data` 不会让版本加 1（本节第一个单元格已经展示过），所以它能绕过去。那么反向传播会算出什么？

# %% reveals=["\\[4\\.0, 6\\.0, 8\\.0\\]", "2 \\* \\(x \\+ 1\\)"] tags=["predict"]
prediction = [4.0, 6.0, 8.0]  # SOLUTION: x = [1, 2, 3] 时 y = x * x，然后执行 `x.data += 1` 和 y.sum().backward()：x.grad 是多少（写成列表），还是"报错"？
x, y = fresh()
x.data += 1                     # .data：版本不变
try:
    y.sum().backward()
    data_grad = x.grad.tolist()
except RuntimeError:
    data_grad = "error"
check("x.data += 1 之后的 x.grad", prediction, data_grad,
      why="不报错，因为 .data 让版本停在 0；而 x * x 的反向传播读的是保存的 x，它现在存的是 x + 1："
          "结果是 2 * (x + 1)，而不是 2x。")

# %%
x, y = fresh()
x.data += 1
try:
    y.sum().backward()
    raised = False
except RuntimeError:
    raised = True
print(tr("{label:<25}: {value}  <- {note}", label=tr(".data, silently"), value=rounded(x.grad),
         note=tr("2 * (x + 1): the forward used x, the backward used x + 1")))
claim(".data：反向传播没有报错", not raised)
claim(".data：梯度不是正确的那个", not torch.equal(x.grad, correct),
      f"{rounded(x.grad)}，正确的是 {rounded(correct)}")
claim(".data：梯度是 2 * (x + 1)，用的是前向传播之后写入的值",
      torch.equal(x.grad, 2 * torch.tensor([2.0, 3.0, 4.0])))

x, y = fresh()
x_shifted = torch.add(x, 1)     # 避免原地操作（原帖 002 的第一种方法，原文只有文字描述）：得到一个新张量
(y.sum() + x_shifted.sum()).backward()
print(tr("{label:<25}: {value}  <- {note}", label=tr("avoid in-place"), value=rounded(x.grad),
         note=tr("2x from y, plus 1 from x + 1")))
claim("避免原地操作：梯度正确（2x + 1），而且 x 仍处于版本 0",
      torch.equal(x.grad, correct + 1) and x._version == 0, f"{rounded(x.grad)}，版本 {x._version}")

x, y = fresh()
x2 = x.clone()
x2 += 1                         # clone：保存的 x 没有被碰过
y.sum().backward()
print(tr("{label:<25}: {value}", label="clone", value=rounded(x.grad)))
claim("clone：梯度正确", torch.equal(x.grad, correct))

# %%
layer = nn.Linear(2, 1)
before = layer.weight.detach().clone()
p = layer.weight
p = p - 0.1 * torch.ones_like(p)            # 非原地：得到一个新张量，名字 p 现在指向它
claim("非原地的更新不会改变模型自己的参数",
      torch.equal(layer.weight.detach(), before) and not torch.equal(p.detach(), before))

# %% [markdown]
# 对原帖 002 的评判：
#
# | 方法 | 评判 |
# |---|---|
# | 避免原地操作（用 `torch.add` 代替 `+=`） | 对计算图要用到的值是正确的；代价是多分配一次内存。但如果更新必须改动模型自己的张量（参数、缓冲区），就不行：`p = p - lr * g` 让模型的参数保持原样（见上面的检查） |
# | 先 `clone()` 再做原地操作 | 正确；已保存张量没有被碰过 |
# | `torch.no_grad()` | 是更新**叶子张量**的正确工具（`optimizer.step()` 就是这样做的）；对已保存张量，它拦不住版本错误 |
# | `.data` | 绝不要用：它绕过了版本计数器，所以上面那个错误的梯度不会伴随任何报错。torch 1.5 之前的优化器让 GAN 代码遇到的正是这种情况。 |
#
# 最后这一点解释了为什么原帖 001 和原帖 000“以前能跑”：在 torch 1.5 之前，优化器更新的都是 `p.data`，它不会让版本加 1。同样的循环不会报错，却会用 D 的**新**权重，搭配用**旧**权重算出的激活值，来计算 G 的梯度：这根本不是任何函数的梯度。第 3 节的报错，就是 torch 拒绝计算这种东西。
#
# 原帖 002 的 CIFAR-10 示例在 `+= 0.1` 之前先 clone 了输入批量。那里没有任何东西需要梯度，所以直接在批量本身上做原地加法也没问题：

# %%
images = torch.rand(4, 3 * 32 * 32)          # 代替一个 CIFAR-10 批量（这里不下载）
model = nn.Linear(3 * 32 * 32, 10)
images += 0.1                                 # 不需要 clone：images 是不需要梯度的叶子张量
F.cross_entropy(model(images), torch.tensor([0, 1, 2, 3])).backward()
print(tr("in-place augmentation on the input batch: fine; model.weight.grad set: {filled}",
         filled=model.weight.grad is not None))

# %% [markdown] tags=["read-after-exercises"]
# **评判原帖里的代码**。
#
# | 原帖代码 | 在如今的 torch 上 |
# |---|---|
# | 001：G/D 小例子，先 `lossD.backward(retain_graph=True)`，再 `optimD.step()` | 抛出版本错误，`[2, 2] ... output 0 of AsStrided`（原帖引用的是 `TBackward`，即这一步之前视图的名字） |
# | 000：`loss_nonsaturating`、`d_loss.backward(retain_graph=True)`、`d_optimizer.step()`、`g_loss.backward()` | 抛出版本错误，`[512, 1] ... output 0 of AsStrided, is at version 2; expected version 1` |
# | 002：先 `clone()` 再 `+=` | 能运行，梯度正确 |
# | 002：`with torch.no_grad(): x += 1` | 在这里能运行；但张量被保存下来供反向传播使用时，它**帮不上忙** |
# | 002：`x.data += 1` | 能运行，不报错，却可能给出**悄无声息的错误**梯度 |
# | 002：CIFAR-10 数据增强循环 | 要下载 CIFAR-10（这里不运行）；它的 `clone()` 没有必要，因为那里没有任何东西需要梯度 |

# %% [markdown]
# ## 延伸 · 异常检测指向的是前向传播，而不是 `step()`
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# PyTorch 的提示是 `enable anomaly detection`，即打开异常检测。异常检测会记录每个前向运算的回溯信息（调用栈），并打印出反向计算失败的那个运算的回溯信息。下面是它对原帖 001 小例子给出的结果：

# %%
import warnings

def forward_line_blamed():
    with torch.autograd.set_detect_anomaly(True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.manual_seed(0)
        G, D = nn.Linear(2, 2), nn.Linear(2, 2)
        optimD = optim.Adam(D.parameters())
        t = torch.tensor([1., 2], requires_grad=True)
        g = G(t)
        d = D(g)                                   # 前向传播的那一行
        d.sum().backward(retain_graph=True)
        optimD.step()                              # 真正改动 D.weight 的那一行
        with expect_error(RuntimeError, "modified by an inplace operation"):
            (g + d).sum().backward()
    report = "\n".join(str(w.message) for w in caught if "Traceback of forward call" in str(w.message))
    lines = report.splitlines()   # 两行一组：'  File "...", line N'，接着是 '    代码'；只保留本笔记本里的帧
    return [code.strip() for where, code in zip(lines, lines[1:])
            if where.startswith("  File") and re.search(r"ipykernel_\d+|<ipython", where)]

code = forward_line_blamed()
print(tr("code lines in anomaly detection's forward traceback: {lines}", lines=code))
claim("它把问题归到前向传播的那一行 `d = D(g)`", any("d = D(g)" in line for line in code))
claim("它从不提 optimD.step()", not any("step" in line for line in code))

# %% [markdown]
# 它指出的是 `d = D(g)`，也就是已保存张量后来过期的那次前向调用，而从不指向改动了这个张量的那一行 `optimD.step()`。单看这一点并没有错，但在 GAN 代码里，罪魁祸首几乎总是夹在两者之间的 `step()`（或者 `backward` 的顺序）。第 07 课的医生会把两者都指出来。
