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
# # 第 02 课 · 计算图的释放与 `retain_graph`
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/02_graph_freeing_and_retain_graph.ipynb)
#
# [English](../02_graph_freeing_and_retain_graph.ipynb) · [学生版](student/02_graph_freeing_and_retain_graph.ipynb)
#
# **目标**。亲眼看到前向传播构建计算图、`backward()` 释放计算图中保存的张量；用三种方式复现“Trying to backward through the graph a second time”；测量 `retain_graph=True` 让多少东西继续留在内存里；在这个报错的两种修复方法 `retain_graph` 和 `detach` 之间做出选择，并知道各自在什么时候是错的。最后，我们从零写出原帖 004 修复后的训练步。
#
# **材料**。原帖 001（G/D 小例子；一篇没有标题的文章，讲 GAN 训练中的叶子节点、`retain_graph` 和 `detach`；没有注明作者和日期）和原帖 004（model1/model2 循环，以及它关于 `itertools.chain` 的提醒；一篇没有标题的转载文章，讲“Trying to backward through the graph a second time”；没有注明作者和日期）。原帖都是公开的中文博客文章，出处列在[教师手册（英文）](../README.md#the-seeds)里；本课运行的每段代码都已放在单元格中。

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
# ## 1 · 计算图由前向传播构建，反向传播释放它保存的东西
#
# 在你的代码运行之前，PyTorch 里并没有计算图：对需要梯度的张量做的每个运算，都会添加一个节点，并*保存*它的反向计算要用到的东西（一个输入、一个权重或一个输出）。`backward()` 用完这些已保存张量就把它们释放，所以内存不会每一步都增长。下面的渲染器把当前的计算图画出来，并给每个已保存张量上色：绿色表示**存活**，灰色表示**已释放**，红色表示**过期**（第 03 课）。

# %%
G, D = nn.Linear(2, 2), nn.Linear(2, 1)
z = torch.randn(4, 2, requires_grad=True)
loss = D(torch.tanh(G(z))).mean()
names = graphs.param_names(G=G, D=D, z=z)
graph = graphs.draw({"loss": loss}, names)
saved = sorted((s.node, s.name) for s in graph.saved if s.node in ("AddmmBackward0", "TanhBackward0"))
claim("tanh 保存了它的输出；每个 addmm 保存了它的输入（mat1）和转置后的权重（mat2）",
      saved == [("AddmmBackward0", "mat1")] * 2 + [("AddmmBackward0", "mat2")] * 2 + [("TanhBackward0", "result")])
graph

# %% [markdown]
# `tanh` 保存的是它的**输出**（它的导数是 `1 - tanh²`），每个 `addmm` 保存了它的输入（`mat1`）和转置后的权重（`mat2`）。现在做一次反向传播。反向传播释放的是这些已保存张量；那么保存它们的节点呢？

# %% reveals=["\u8282\u70b9\u90fd?\u8fd8\u5728", "\u4e0d\u662f\u8282\u70b9\u672c\u8eab"] tags=["predict"]
loss.backward()
prediction = False  # SOLUTION: loss.backward() 会把 loss.grad_fn 设为 None 吗？（True/False）
check("loss.backward() 把 loss.grad_fn 设为 None", prediction, loss.grad_fn is None,
      why="backward 释放的是节点保存的东西，而不是节点本身：只要 loss 还在，这些 grad_fn 对象就一直存在。")

# %% [markdown]
# 反向传播之后，再画一次同一个计算图：

# %%
graph = graphs.draw({"loss": loss}, names)
claim("一次反向传播之后，每个已保存张量都已释放", len(graph.saved) >= 5 and all(s.state == "freed" for s in graph.saved))
graph

# %% [markdown]
# 节点还在（只要 `loss` 还在，这些 `grad_fn` 对象就一直存在），但每个已保存张量都没了。这就是报错信息中“Saved intermediate values of the graph are freed when you call `.backward()`”这句话的意思。

# %% [markdown]
# **纠正原帖 004 给出的理由**。原帖 004 是这样解释释放的：
#
# > 其实看简单点和我们之前的backward一样,当图进行了一次梯度更新,就会把一些梯度的缓存给清空,为了避免下次叠加
#
# 这句话前后两层意思都不对。反向传播释放的是前向传播保存下来的东西（输入、权重、输出），从来不是梯度；释放也阻止不了梯度的累加。把计算图留住，第二次反向传播照样能运行，并且和第一次一样累加到 `.grad` 上：

# %%
w = torch.ones(3, requires_grad=True)
y = (w * w).sum()
y.backward(retain_graph=True)                 # 留住前向传播保存的东西
first = w.grad.clone()
y.backward()                                  # 第二次反向传播能运行，并且会累加
claim("留住计算图时，第二次反向传播能运行，.grad 也会累加：防止累加的并不是释放",
      torch.equal(w.grad, 2 * first), f"w.grad {rounded(first)} -> {rounded(w.grad)}")

# %% [markdown]
# ## 2 · “Trying to backward through the graph a second time”的三种触发方式
#
# 这几乎是每个写 GAN 的人遇到的第一个错误：两个损失共享计算图的一部分，第一次 `backward()` 释放了第二次需要的东西。
#
# **方式一：反向传播两次**。这是最小的例子。

# %%
with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    loss.backward()

# %% [markdown]
# **先预测，再验证**。方式一之所以报错，是因为第一次反向传播释放了 `addmm` 和 `tanh` 保存的东西。下面换成一个只有一次加法和一次求和的计算图。

# %% reveals=["\u4e0d\u4fdd\u5b58\u4efb\u4f55\u5f20\u91cf", "\u6ca1\u6709(\u4efb\u4f55)?\u4e1c\u897f\u53ef\u4ee5?\u91ca\u653e"] tags=["predict"]
x = torch.ones(3, requires_grad=True)
y = (x + 1).sum()
prediction = False  # SOLUTION: 连续调用两次 y.backward() 会报错吗？（True/False）提示：`x + 1` 需要保存什么？
try:
    y.backward(); y.backward()
    raised_twice = False
except RuntimeError:
    raised_twice = True
check("对 (x + 1).sum() 反向传播两次会报错", prediction, raised_twice,
      why="加法和求和不保存任何张量（它们的梯度不需要任何值），所以没有东西可以释放；"
          "x.grad 只是累积了两次。")

# %% [markdown]
# 乘法就不一样了，哪怕乘的是常数：`x * 2` 会保存那个 2（对每个操作数，只要与它相乘的另一方需要梯度，`mul` 就会保存它，留给另一方求梯度用），第一次反向传播就会把它释放。

# %%
claim("对 (x + 1).sum() 的两次反向传播在 x.grad 里加在了一起", torch.equal(x.grad, torch.full((3,), 2.0)),
      shown=f"x.grad = {x.grad.tolist()}")
doubled = (x * 2).sum()
saved = graphs.saved_tensors(doubled.grad_fn.next_functions[0][0])
claim("x * 2 保存了一个张量，就是作为 `other` 的那个 2", [(s.name, s.shape) for s in saved] == [("other", ())],
      shown=[s.name for s in saved])
doubled.backward()
with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    doubled.backward()


# %% [markdown]
# **方式二：原帖 001 的 G/D 小例子**。`lossD` 和 `lossG` 都依赖于 `d = D(g)`。`lossD.backward()` 之后，从 `t` 经过 G 和 D 到 `d` 的那一段计算图已被释放，`lossG.backward()` 也就无路可回了。

# %%
def seed001_toy(retain_graph=False, detach=False):
    """原帖 001 的代码，与原文一致；返回 G 的梯度。"""
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Linear(2, 2)
    optimG, optimD = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    t = torch.tensor([1., 2], requires_grad=True)
    g = G(t)
    d = D(g)
    lossD = d.sum()
    optimD.zero_grad()
    lossD.backward(retain_graph=retain_graph)
    optimD.step()
    lossG = (g + (d.detach() if detach else d)).sum()
    optimG.zero_grad()
    lossG.backward()
    optimG.step()
    return G.weight.grad

with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    seed001_toy()

# %% [markdown]
# **方式三：原帖 004 的 model1/model2 循环**。`b = model2(a)` 让 `l2` 依赖于 model1 的计算图，所以 `l2.backward()` 会在 `l1.backward()` 用到这部分计算图之前就把它释放。

# %%
import itertools

def seed004_loop(fix=None, shared_optimizer=False, steps=20, hidden=None):
    """原帖 004 的循环。fix：None、"retain_graph"或"detach"。返回两个模型和最后一步的损失。
    hidden：None 表示原帖中的单层 model1，给出一个宽度则表示两层的 model1（第 5 节）。"""
    torch.manual_seed(0)
    model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
    if hidden is not None:
        model1 = nn.Sequential(nn.Linear(10, hidden), nn.Tanh(), nn.Linear(hidden, 2))
    params2 = itertools.chain(model1.parameters(), model2.parameters()) if shared_optimizer else model2.parameters()
    optimizer1 = optim.Adam(model1.parameters(), lr=0.001, betas=(0.5, 0.999))
    optimizer2 = optim.Adam(params2, lr=0.001, betas=(0.5, 0.999))
    loss = nn.CrossEntropyLoss()
    data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
    for i in range(steps):
        a = model1(data)
        b = model2(a.detach() if fix == "detach" else a)
        l1, l2 = loss(a, label), loss(b, label)
        optimizer2.zero_grad()
        l2.backward(retain_graph=(fix == "retain_graph"))
        optimizer2.step()
        optimizer1.zero_grad()
        l1.backward()
        optimizer1.step()
    return model1, model2, l1.item(), l2.item()

with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    seed004_loop()

# %% reveals=["l1 \u53ea\u9700\u8981 model1 \u7684\u8ba1\u7b97\u56fe", "l1 \u7684\u8ba1\u7b97\u56fe\u80fd\u5230\u8fbe model2 -> False"] tags=["predict"]
model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
a = model1(torch.randn(4, 10))
l1 = F.cross_entropy(a, torch.tensor([0, 1, 1, 0]))
prediction = False  # SOLUTION: l1 自己的计算图会到达 model2 的任何参数吗？（True/False）
tree = graphs.text_tree({"l1": l1}, graphs.param_names(model1=model1, model2=model2))
check("l1 的计算图能到达 model2", prediction, "model2." in tree,
      why="l1 只需要 model1 的计算图；它之所以报错，是因为 l2.backward() 先把两者共享的那部分释放了。")

# %% [markdown]
# ## 3 · `retain_graph=True` 保留了什么，代价是什么
#
# 报错信息建议使用 `retain_graph=True`，大多数论坛回答也就到此为止。它确实能让错误消失，办法是让每个已保存张量一直存活，直到计算图本身被丢弃。这要占多少内存？我们在原帖 000 的 G 和 D（第 06 课的 MNIST 模型）上，对一个 64 张图像的批量进行测量：计算图持有的已保存张量一共占多少字节，每块存储只计一次，参数不算在内（参数反正一直存在）。这个数字只取决于张量的形状，所以每次运行、在每台机器上都一样。

# %% reveals=["\u548c\u53c2\u6570(\u672c\u8eab)?\u5dee\u4e0d\u591a", "-> '\u5dee\u4e0d\u591a'"] tags=["predict"]
from gan_lessons.models import Generator, Discriminator

G, D = Generator(), Discriminator()
params = [*G.parameters(), *D.parameters()]
z, x_real = torch.randn(64, G.z_dim), torch.randn(64, 1, 28, 28)
loss_D = F.softplus(-D(x_real)).mean() + F.softplus(D(G(z))).mean()
saved = [graphs.saved_bytes({"loss_D": loss_D}, params)]
param_bytes = sum(p.numel() * p.element_size() for p in params)

prediction = "差不多"  # SOLUTION: 一个批量的已保存张量，与 G 和 D 全部参数的字节数相比："少得多"（不到十分之一）、"差不多"还是"多得多"（超过十倍）？
ratio = saved[0] / param_bytes
check("一个批量保存的张量的字节数，与参数的字节数相比", prediction,
      "far fewer bytes" if ratio < 0.1 else "far more bytes" if ratio > 10 else "about the same",
      why=f"已保存张量是参数字节数的 {ratio:.2f} 倍：64 张 28 x 28 的图像一层接一层留下的激活值，"
          f"和各层的权重差不多一样重。")

# %% [markdown]
# 现在先做一次保留计算图的反向传播，再做一次普通的：

# %%
mib = lambda n: f"{n / 2**20:.2f} MiB"
loss_D.backward(retain_graph=True)
saved.append(graphs.saved_bytes({"loss_D": loss_D}, params))
loss_D.backward()
saved.append(graphs.saved_bytes({"loss_D": loss_D}, params))
print(tr("{label:<38}: {size}", label=tr("saved tensors after forward"), size=mib(saved[0])))
print(tr("{label:<38}: {size}", label=tr("after backward(retain_graph=True)"), size=mib(saved[1])))
print(tr("{label:<38}: {size}", label=tr("after a second, plain backward()"), size=mib(saved[2])))
print(tr("{label:<38}: {size}", label=tr("for scale, all parameters of G and D"), size=mib(param_bytes)))
claim("retain_graph 让每个保存的字节都留着，和参数差不多一样多，直到一次普通的 backward 把它们释放",
      saved[1] == saved[0] and 0.8 < saved[0] / param_bytes < 1.2 and saved[2] == 0)

# %% [markdown]
# 使用 `retain_graph=True` 时，整个前向传播的激活值都会留在内存里，直到*下一次*反向传播，或者直到对计算图的最后一个引用消失。每保留一个计算图，就要多占用和全部参数差不多大小的内存。
#
# 它换来的是对**同一次**前向传播再做一次反向传播。当两个损失来自同一次前向传播时，另一种做法是为第二个损失再跑一遍前向传播；`retain_graph` 省下了这第二次前向传播，代价就是上面那些内存。第 05 课的 `one_forward` 策略就是这样从 D 的一次前向传播中同时得到 G 和 D 的损失。`retain_graph` 不改变任何梯度：下面在一个小的 G 和 D 上计算两个损失，并用钩子统计 D 的前向传播次数。

# %%
torch.manual_seed(0)
G, D = nn.Linear(2, 2), nn.Linear(2, 1)
z = torch.randn(4, 2)
d_forwards = []
D.register_forward_hook(lambda module, inputs, output: d_forwards.append(1))

def take_grads():
    grads = [p.grad.clone() for p in (*G.parameters(), *D.parameters())]
    G.zero_grad(); D.zero_grad()
    return grads

def one_forward():
    logits = D(G(z))
    F.softplus(-logits).mean().backward(retain_graph=True)   # 为第二个损失保留计算图
    first = take_grads()
    F.softplus(logits).mean().backward()
    return first + take_grads()

def two_forwards():
    F.softplus(-D(G(z))).mean().backward()
    first = take_grads()
    F.softplus(D(G(z))).mean().backward()                     # 再做一次前向传播
    return first + take_grads()

d_forwards.clear(); reused = one_forward(); n_reused = len(d_forwards)
d_forwards.clear(); again = two_forwards(); n_again = len(d_forwards)
claim("retain_graph：两个损失都来自 D 的同一次前向传播", n_reused == 1, f"{n_reused} 次前向传播")
claim("没有它，第二个损失需要 D 再做一次前向传播", n_again == 2, f"{n_again} 次前向传播")
claim("两种做法的梯度完全相同", all(torch.equal(p, q) for p, q in zip(reused, again)))

# %% [markdown]
# ## 4 · 两种修复方法，并排比较
#
# 原帖 004 为它的循环给出了两种修复方法：
#
# > 解决方案可以是l2.backward(retain_graph=True)。除此之外我们还可以是 b = model2(a.detach()) ,这个就优美一点
#
# 但这两者并不是同一种操作：
#
# - `retain_graph=True`：`l2.backward` 仍然会流进 model1，填充 model1 的 `.grad`，而且计算图会一直保留到
#   `l1.backward()`；
# - `detach`：`model2(a.detach())` 切断了计算图，所以 `l2.backward` 停在 model2，不会释放 model1 需要的任何东西。
#
# **先预测，再验证**。`seed004_loop`（第 2 节）从同一个随机种子出发，分别用两种修复方法把这个循环运行 20 步，用的是原帖里的两个优化器：`optimizer1` 负责 model1，`optimizer2` 负责 model2。

# %% reveals=["\u5f97\u5230\u7684\u6743\u91cd\u5b8c\u5168\u76f8\u540c", "\u8fde\u6700\u540e\u4e00\u4f4d\u90fd(\u76f8\u540c|\u4e00\u6837)"] tags=["predict"]
runs = {fix: seed004_loop(fix) for fix in ("retain_graph", "detach")}
prediction = True  # SOLUTION: 两种修复方法最后在两个模型里得到的权重是否一模一样？（True/False）
same = all(torch.equal(p, q) for p, q in zip([*runs["retain_graph"][0].parameters(), *runs["retain_graph"][1].parameters()],
                                              [*runs["detach"][0].parameters(), *runs["detach"][1].parameters()]))
check("retain_graph 和分离（detach）两种修法最后的权重一样", prediction, same,
      why="唯一的差别是 l2 在 model1 的 .grad 里留下的梯度，而 optimizer1.zero_grad() 会在 l1.backward() 之前把它清掉："
          "optimizer1 从来不会用它来更新。")

# %%
for fix, (m1, m2, l1, l2) in runs.items():
    print(f"{fix:<13} l1={l1:.4f} l2={l2:.4f}")
claim("20 步之后，retain_graph 和 detach 得到的权重完全相同", same)


# %% [markdown]
# 连最后一位都相同：使用两个独立的优化器时，`retain_graph` 放进 model1 的那份梯度反正会被丢掉。`detach` 得到同样的结果，却不用保留计算图，也不用计算那份白白浪费的梯度。

# %% [markdown]
# ## 5 · 分离什么时候是错的：一个优化器管两个模型
#
# 原帖 004 在最后提醒了一点：
#
# > 但有一点需要注意的是,两个网络一定没有需要共同更新的 ,假如上面的optimizer2 = torch.optim.Adam(itertools.chain(model1.parameters(),model2.parameters()), lr=0.001,betas=(0.5, 0.999)),则还是用retain_graph=True保险,因为.detach则model2反向不会传播到model1,导致不对model1里面参数更新。
#
# 也就是说，如果 `optimizer2` 也管理 model1 的参数（`itertools.chain`），`detach` 会悄无声息地让 `l2` 不再训练 model1：没有报错，也没有警告。下面是证据，我们在 `l2.backward()` 之后立即查看 model1 的梯度：

# %%
def model1_grad_after_l2(fix):
    torch.manual_seed(0)
    model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
    data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
    a = model1(data)
    b = model2(a.detach() if fix == "detach" else a)
    F.cross_entropy(b, label).backward(retain_graph=(fix == "retain_graph"))
    return model1.weight.grad

grad = {fix: model1_grad_after_l2(fix) for fix in ("retain_graph", "detach")}
claim("retain_graph：l2 到达了 model1", grad["retain_graph"] is not None, f"范数 {grad['retain_graph'].norm():.4f}")
claim("detach：model1 的梯度是 None", grad["detach"] is None)

# %%
shared = {fix: seed004_loop(fix, shared_optimizer=True) for fix in ("retain_graph", "detach")}
for fix, (m1, m2, l1, l2) in shared.items():
    print(f"{fix:<13} l1={l1:.4f} l2={l2:.4f}")
same = all(torch.equal(p, q) for p, q in zip(shared["retain_graph"][0].parameters(), shared["detach"][0].parameters()))
claim("共用一个优化器时，两种修复方法训练出的 model1 权重不同", not same)

# %% [markdown]
# 共用一个优化器时，两种修复方法训练出的是**不同的**模型：`detach` 改变了算法。经验法则：某个损失*不应*训练上游时，就在那里分离（D 的损失不应训练 G）；上游*必须*由它训练时，绝不要分离（G 的损失必须穿过 D 来训练 G，第 04 课）。

# %% [markdown]
# 共用优化器时 `retain_graph` 之所以能在这里运行，只是因为原帖 004 中 model1 的结构。在 `l2.backward()` 和 `l1.backward()` 之间，`optimizer2.step()` 现在也会原地修改 model1 的权重。原帖 004 的 model1 只是作用在 `data` 上的一个 `Linear`，而 `data` 不需要梯度，所以它的 `addmm` 只保存 `data`（只有要为输入计算梯度时，它才会保存权重）；没有哪一步会修改 `data`，因此 `l1.backward()` 找不到任何过期的东西。给 model1 加上第二层，这一层的输入就是第一层的输出，它需要梯度，于是这一层的 `addmm` 会保存转置后的权重，形状为 `[8, 2]`；共享优化器的那一步更新修改了这个权重，`l1.backward()` 就会引发第 03 课的版本错误。（如果用两个独立的优化器，在 `l1.backward()` 之前不会有任何一步修改 `l1` 保存的东西，所以两层的 model1 在两种修复方法下都能运行。）

# %%
saved = [s.name for s in graphs.saved_tensors(nn.Linear(10, 2)(torch.randn(4, 10)).grad_fn)]
claim("原帖 004 的单层 model1 只保存它的输入 data", saved == ["mat1"], saved)

deep = {fix: seed004_loop(fix, hidden=8) for fix in ("retain_graph", "detach")}
claim("两层的 model1、两个独立的优化器：两种修复方法都能运行，得到的权重完全相同",
      all(torch.equal(p, q) for p, q in zip(deep["retain_graph"][0].parameters(), deep["detach"][0].parameters())))

with expect_error(RuntimeError, r"modified by an inplace operation: \[torch.FloatTensor \[8, 2\]\], which is output 0 of AsStrided(Backward0)?, is at version 2; expected version 1"):
    seed004_loop("retain_graph", shared_optimizer=True, hidden=8)


# %% [markdown] tags=["read-after-exercises"]
# | 原帖代码 | 在如今的 torch 上 |
# |---|---|
# | 001：`lossD.backward(); optimD.step(); lossG.backward()` | 引发“Trying to backward through the graph a second time” |
# | 001：同上，但改用 `lossD.backward(retain_graph=True)` | 改为引发版本错误（第 03 课会解释） |
# | 001：`lossG = (g + d.detach()).sum()` | 能运行，但 G 失去了经由 D 流回的梯度（第 04 课会测量它） |
# | 004：原样的 model1/model2 循环 | 引发“Trying to backward through the graph a second time” |
# | 004：`l2.backward(retain_graph=True)` 或 `model2(a.detach())` | 都能运行，并且得到的权重完全相同 |
# | 004：一个优化器管两个模型（`itertools.chain`）时用分离 | 能运行，但 model1 悄无声息地得不到来自 `l2` 的梯度 |
# | 004：一个优化器管两个模型时用 `retain_graph` | 能运行，只是因为 model1 只有一个 Linear 层：两层的 model1 会引发版本错误 |

# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - 前向传播构建计算图，并为反向传播保存张量；`backward()` 释放它们。再对任何已释放的部分做反向传播，就会引发
#   “Trying to backward through the graph a second time”。
# - `retain_graph=True` 让每个已保存张量都继续存活：对一个 64 张图像的批量，原帖 000 的 G 和 D 保存的字节数与两个模型参数的字节数差不多（第 3 节）。它不改变任何梯度；它换来的是对同一次前向传播再做一次反向传播，从而省去重跑一遍前向传播的开销（第 05 课的 `one_forward`）。
# - `detach()` 把共享的部分从第二个损失的计算图中切掉。使用两个独立的优化器时，它得到的权重与 `retain_graph` 相同，代价却更低。一个优化器管两个模型时，它会悄无声息地改变被训练的东西；而 `retain_graph` 在那里能运行，前提是第二次反向传播不需要任何被共享那一步修改过的东西：原帖 004 的单层 model1 只保存它的输入 data，两层的 model1 则会引发版本错误。

# %% [markdown]
# ## 练习
#
# ### 动手实现：三个模型连成一串
#
# 在原帖 004 的两个模型之后再接一个模型：`model3 = nn.Linear(2, 2)`，它读 model2 的 logits。每个模型都有自己的损失，标签都是同一个 `label`：`a = model1(data)` 与 `l1`，`b = model2(a)` 与 `l2`，`c = model3(b)` 与 `l3`（都用 `F.cross_entropy`）。写出一个训练步 `chain_step(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label)`，要求：
# - model1 根据 l1 **和** l2 的梯度更新（model2 是 model1 输出上的一个头，所以 l2 也要训练 model1，同第 5 节）；
# - model2 只根据 l2 的梯度更新；
# - model3 只根据 l3 的梯度更新（它是一个探针：不能改变它所读的东西）；
# - 每一次调用中，每个优化器都基于本次调用算出的梯度更新；
# - 没有任何浪费：每个模型每次调用只做一次前向传播，不计算会被优化器扔掉的梯度，也不保留之后没有哪次反向传播会经过的计算图。
#
# 反向传播调用几次、按什么顺序都可以。检查程序会在新建的模型上运行你的训练步三次，并借助 `register_step_pre_hook` 在每次 `optimizer.step()` 时读取每个参数的 `.grad`；梯度不对时，它会把这个梯度拆成来自各个损失的部分。它还会统计前向传播的次数、传回 model2 的梯度，以及白白保留的计算图。

# %%
def chain_step(model1, model2, model3, optimizer1, optimizer2, optimizer3, data, label):
    """这一串模型的一个训练步：l1 和 l2 训练 model1，l2 训练 model2，l3 只训练 model3。"""
    ### BEGIN SOLUTION
    a = model1(data)
    b = model2(a)                   # l2 要继续传进 model1：这里不能切断
    c = model3(b.detach())          # l3 停在 model3
    loss = F.cross_entropy(a, label) + F.cross_entropy(b, label) + F.cross_entropy(c, label)
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.zero_grad()
    loss.backward()                 # 一次反向传播：每个损失只到达它该到达的地方
    for optimizer in (optimizer1, optimizer2, optimizer3):
        optimizer.step()
    ### END SOLUTION

my_answer = chain_step  # SOLUTION: 把它指向你的 chain_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_chain_step(my_answer)
assert solved, "chain_step：还没有完成，或者还不对：上面几行说明了缺什么"
