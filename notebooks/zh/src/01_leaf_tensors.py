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
# # 第 01 课 · 叶子张量：梯度落在哪里
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/01_leaf_tensors.ipynb)
#
# [English](../01_leaf_tensors.ipynb) · [学生版](student/01_leaf_tensors.ipynb)
#
# **目标**。学完本课，你能看着训练脚本里的任何一个张量，说出它是不是*叶子张量*、`backward()` 之后它的 `.grad` 会不会被填上，还能解释为什么 PyTorch 拒绝对参数执行 `a += 1`，却允许 `optimizer.step()` 原地修改同一个参数。最后，我们会亲手写出每个训练脚本都需要的两个函数：一个 SGD 更新步，以及 DCGAN 的权重初始化。
#
# **材料**。本课从原帖 001 开头的这几个例子讲起（一篇没有标题的文章，讲 GAN 训练中的叶子节点、`retain_graph` 和 `detach`；没有注明作者和日期）。我们在如今的 torch 上逐一运行它的代码清单，验证它的每个说法。原帖都是公开的中文博客文章，出处列在[教师手册（英文）](../README.md#the-seeds)里；本课运行的每段代码都已放在单元格中。

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

# %% [markdown]
# ## 1 · 叶子张量与非叶子张量
#
# 本课程里的每一个 GAN 错误，归根结底都在于自动微分跟踪的是*哪些*张量。第一层区分很简单：你自己创建的张量是**叶子张量**；对需要梯度的张量做运算得到的张量是**非叶子张量**，它带有一个 `grad_fn`，也就是知道如何把梯度传回去的那个自动微分节点。
#
# 下面是原帖 001 的第一段代码，原样照录：

# %%
a = torch.tensor([1., 2, 3]).requires_grad_(True)
b = a * 2
loss = b.sum()
loss.backward()
describe(a=a, b=b, loss=loss)

# %% [markdown]
# `a` 是需要梯度的叶子张量，所以它得到了 `.grad`（`sum(2a)` 的导数处处为 2）。`b` 和 `loss` 是非叶子张量：它们有 `grad_fn`（`MulBackward0`、`SumBackward0`），自动微分不会保留它们的梯度。
#
# 接下来看一个很小的生成器，按 GAN 脚本通常的方式组织：一个模块、一份不参与训练的噪声，以及模块的输出。

# %%
G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))   # 一个很小的“生成器”
z = torch.randn(1, 4)        # 噪声：由我们创建，不需要梯度
x_fake = G(z)                # 由作用在 G 的参数上的运算产生
doubled_z = z * 2            # 由运算产生，但作用的张量不需要梯度

# %% [markdown]
# **先预测，再验证**。把每个 `...` 换成你的预测，运行单元格，然后阅读反馈。

# %% reveals=["doubled_z\\s+False\\s+True", "requires_grad=False\\W*\u7684\u5f20\u91cf\\W*(\u603b\u662f|\u90fd\u662f|\u4e00\u5f8b\u662f)\u53f6\u5b50\u5f20\u91cf"] tags=["predict"]
prediction = True  # SOLUTION: `doubled_z = z * 2` 是叶子张量吗？（True/False）
check("doubled_z.is_leaf", prediction, doubled_z.is_leaf,
      why="z 不需要梯度，所以没有任何运算被跟踪：凡是 requires_grad=False 的张量都是叶子张量，"
          "不管它是怎么产生的。")

# %% reveals=["detached\\s+False\\s+True", "detach\\(\\)\\s*\u8fd4\u56de\u7684\u5f20\u91cf\u6ca1\u6709\\s*grad_fn"] tags=["predict"]
prediction = False  # SOLUTION: `x_fake.detach()` 有 grad_fn 吗？（True/False）
check("x_fake.detach() 有 grad_fn", prediction, x_fake.detach().grad_fn is not None,
      why="detach() 返回的张量没有 grad_fn，并且 requires_grad=False：它是一个新的叶子张量（第 04 课会用到这一点）。")

# %% reveals=["\u53c2\u6570\u90fd?\u662f\u53f6\u5b50\u5f20\u91cf", "\u4e00\u4e2a\u6743\u91cd\u548c\u4e00\u4e2a\u504f\u7f6e\\W*\u5171\\s*4"] tags=["predict"]
prediction = 4  # SOLUTION: G 的参数张量中，有几个是需要梯度的叶子张量？（一个数）
check("G 中既是叶子张量、又需要梯度的参数张量个数", prediction,
      sum(p.is_leaf and p.requires_grad for p in G.parameters()),
      why="两个 Linear 层各有一个权重和一个偏置，共 4 个；ReLU 没有参数。模块自己创建参数，并设置 "
          "requires_grad=True，所以它们不是由任何被跟踪的运算产生的。")

# %% [markdown]
# `is_leaf` 的规则，在上面所有张量上验证一遍：
# - `requires_grad=False` 的张量总是叶子张量，不论它由什么产生；
# - 需要梯度的张量，只有在不是由被跟踪的运算产生时，才是叶子张量；
# - 模块的参数是叶子张量，它的输出不是。

# %%
describe(z=z, weight=G[0].weight, x_fake=x_fake, doubled_z=doubled_z, detached=x_fake.detach())
claim("模块的参数是需要梯度的叶子张量；它的输出不是叶子张量",
      all(p.is_leaf and p.requires_grad for p in G.parameters()) and not x_fake.is_leaf)

# %% [markdown]
# ## 2 · 哪些张量会得到 `.grad`
#
# 在 GAN 里，我们常常要检查梯度：生成器到底有没有收到梯度？原帖 001 的第二段代码把一个需要梯度的叶子张量与一个不需要梯度的叶子张量相乘，然后做反向传播：

# %%
a = torch.tensor([1., 2, 3], requires_grad=True)
b = torch.tensor([2., 3, 4])
c = a * b
loss = c.sum()
loss.backward()

# %% reveals=["\u53ea\u6709\u9700\u8981\u68af\u5ea6\u7684\u53f6\u5b50\u5f20\u91cf\u624d\u4f1a?(\u5f97\u5230|\u6709)", "b\\.grad = None"] tags=["predict"]
prediction = ["a"]  # SOLUTION: 现在"a"、"b"、"c"中哪些的 .grad 里有梯度？（名字组成的列表，例如 ["a", "c"]）
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")               # 读取 c.grad 会发出警告；接下来几个单元格会说明原因
    filled = [name for name, t in {"a": a, "b": b, "c": c}.items() if t.grad is not None]
check("backward() 填充了 .grad 的张量", prediction, filled,
      why="只有需要梯度的叶子张量才会得到 .grad：b 是叶子张量，但没有任何计算需要它的梯度；c 是非叶子张量，"
          "它的梯度在反向传播途中算出来，但不会被保留。")

# %% [markdown]
# 原帖打印了两个叶子张量的 `.grad`。`b` 不需要梯度，所以它的 `.grad` 一直是 `None`，读取它也不算错误：不会有任何警告。

# %%
print("a.grad =", a.grad)
print("b.grad =", b.grad)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    b_grad = b.grad
claim("b.grad 是 None，读取它也不会有任何警告：b 是不需要梯度的叶子张量",
      b_grad is None and not caught)

# %% [markdown]
# 读取**非叶子张量**的 `.grad` 就不一样了：PyTorch 返回 `None`，*同时*发出警告，因为这几乎总是写错了（你本来想读的是叶子张量）。原帖展示了这条警告；下面我们现场触发它，并断言它确实出现（如果将来某个版本的 torch 不再警告，这个单元格就会失败）：

# %%
with expect_warning(UserWarning, "not a leaf Tensor"):
    print("loss.grad =", loss.grad)

# %% [markdown]
# 警告里已经给出了修复办法：在 `backward()`**之前**对非叶子张量调用 `.retain_grad()`。

# %%
a = torch.tensor([1., 2, 3], requires_grad=True)
b = torch.tensor([2., 3, 4])
c = a * b
c.retain_grad()
loss = c.sum()
loss.backward()
describe(a=a, b=b, c=c, loss=loss)

# %% [markdown]
# `c.grad` 全是 1（对求和来说，d loss / d c 处处为 1），而 `a.grad` 等于 `b`，正如乘积法则所说。下面的检查拿自动微分的结果与这条法则比较，用的是 PyTorch 自己算出的值，而不是抄来的数字：

# %%
claim("a.grad 等于 b，正如乘积法则所说", torch.equal(a.grad, b), shown=f"a.grad = {a.grad.tolist()}")

# %% [markdown]
# ## 3 · 直接从当前的张量画出计算图
#
# “计算图”不是比喻：它是一串可以逐个走访的 `grad_fn` 对象。每个节点的 `next_functions` 列出为它提供输入的节点，它的运算有几个输入，就有几个槽位。要到达一个需要梯度的叶子张量，得经过一个 `AccumulateGrad` 节点，正是这个节点负责写入 `.grad`。画图之前先注意一点：`a * b` 有两个输入，其中只有 `a` 需要梯度。

# %%
a = torch.tensor([1., 2, 3], requires_grad=True)
b = torch.tensor([2., 3, 4])
loss = (a * b).sum()
mul = loss.grad_fn.next_functions[0][0]          # a * b 的节点

# %% reveals=["`b`\\s*\u6ca1\u6709(\u81ea\u5df1\u7684)?\u8282\u70b9", "b\\s*\u5728\\s*MulBackward0\\s*\u4e2d\u7684\u69fd\u4f4d\u662f\u7a7a\u7684"] tags=["predict"]
prediction = False  # SOLUTION: b 在 loss 的计算图里有自己的节点吗（mul 中对应 b 的槽位里有东西吗）？（True/False）
check("b 在 loss 的计算图里有节点", prediction, mul.next_functions[1][0] is not None,
      why="没有任何计算需要 b 的梯度，所以自动微分不为它记录节点：它的槽位是 None。")

# %% [markdown]
# torchviz 可以把计算图画出来。蓝色方框是需要梯度的叶子张量；`b` 没有节点，因为没有任何计算需要它的梯度。

# %%
import torchviz
from gan_lessons import graphs

graphs.show(torchviz.make_dot(loss, params={"a": a, "b": b}), {"loss": loss}, names={a: "a"})

# %% [markdown]
# 手动沿着同一条链走一遍，就能看出这里没有任何隐藏的东西。`AccumulateGrad` 节点通过 `.variable` 持有这个叶子张量：

# %%
accumulate = mul.next_functions[0][0]
print(type(loss.grad_fn).__name__, "->", type(mul).__name__, "->", type(accumulate).__name__)
claim("链末端的 AccumulateGrad 节点持有的正是叶子张量 a 本身", accumulate.variable is a)
claim("b 在 MulBackward0 中的槽位是空的：没有任何计算需要 b 的梯度", mul.next_functions[1][0] is None,
      shown=f"next_functions: {[type(f).__name__ if f else None for f, _ in mul.next_functions]}")

# %% [markdown]
# ## 4 · 对叶子张量做原地操作：第一个错误
#
# 原帖 001 的第三段代码在用过 `a` 之后又原地修改了它。PyTorch 拒绝执行，而且**就在这一行**报错，而不是等到后面的 `backward()`：

# %%
a = torch.tensor([1, 2., 3], requires_grad=True)
b = torch.tensor([2, 3, 4.])
c = a * b
with expect_error(RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation"):
    a += 1

# %% [markdown]
# 为什么要拒绝？`a` 是梯度最终落下的地方。如果 `a += 1` 被记录下来，`a` 就会变成某个运算的输出，从而不再是叶子张量，优化器便失去了它本该更新的那个张量。
#
# 原帖接着写道：
#
# > 关于inplace操作有两个注意点,第一点是要避免对叶子结点进行inplace操作,非叶子结点无所谓,所以我们在CNN网络中经常可以看到ReLU(inplace=True)的语句,这里是对非叶子结点进行的,而inplace操作又可以节省内存,这样使用一般是没有错的。
#
# 这话只对了一半。对非叶子张量做原地操作是*允许的*，但如果自动微分为反向传播保存了这个张量，反向传播就会因另一个错误而失败；第 03 课会展示这两种情况。

# %% [markdown]
# ## 5 · 那么优化器是怎样修改叶子张量的？
#
# `optimizer.step()` 会原地修改每一个参数，而参数恰恰是需要梯度的叶子张量：这正是第 4 节被拒绝的情况。下面的单元格手动做同样的修改，只是外面套了一行 `with torch.no_grad():`，在修改期间关闭记录。

# %%
a = torch.tensor([1., 2, 3], requires_grad=True)
(a * a).sum().backward()
print(tr("grad: {grad} | version before: {version}", grad=a.grad, version=a._version))

# %% reveals=["\u7248\u672c\u52a0\u4e86 1", "\u66f4\u65b0\u540e\u7684\u7248\u672c\uff1a1\\b"] tags=["predict"]
prediction = 1  # SOLUTION: 上面 a._version 是 0。在 torch.no_grad() 下执行 `a -= 0.1 * a.grad` 之后，它是多少？
try:
    with torch.no_grad():
        a -= 0.1 * a.grad          # 去掉 no_grad()，同样这一行就会引发第 4 节的错误
    version = a._version
except RuntimeError as error:
    version = f"报错：{error}"
check("no_grad 下更新之后 a 的版本", prediction, version,
      why="no_grad 关闭的是对运算的记录，而不是对写入的计数：每一次原地修改都会让张量的版本加一，"
          "不管这次修改有没有被记录。")

# %%
print(tr("after : {value} | is_leaf: {is_leaf} | version after: {version}", value=a.detach(), is_leaf=a.is_leaf,
         version=a._version))
claim("no_grad 下的更新让 a 保持为需要梯度的叶子张量，并把它的版本加了 1",
      a.is_leaf and a.requires_grad and a._version == 1)

# %% [markdown]
# 关闭记录后，这次原地更新不属于任何计算图，也就没有什么会让 `a` 变成某个运算的输出：叶子张量仍然是叶子张量，自动微分也就没有理由拒绝。

# %% [markdown]
# `torch.optim.SGD` 做的正是这件事。同样的起点、同样的梯度、一次 `step()`，两个结果相等；而且这一步也以同样的方式让版本计数器加一（第 03 课就建立在这个计数器之上）。如果自上次 `zero_grad()` 以来，没有任何损失的反向传播到达某个参数，它的 `.grad` 就是 `None`（例如在用分离后的假样本训练 D 的那一步里，G 的参数就是这样，见第 04 课），SGD 会让它保持原样：

# %%
a2 = torch.tensor([1., 2, 3], requires_grad=True)
spare = torch.tensor([5.], requires_grad=True)           # 在优化器里，但没有任何损失到达它
opt = optim.SGD([a2, spare], lr=0.1)
(a2 * a2).sum().backward()
opt.step()
print(tr("SGD result: {value} | equal to the manual update: {equal} | version: {version}", value=a2.detach(),
         equal=torch.equal(a2, a), version=a2._version))
claim("SGD 的 step 得到的值与手动更新相同，版本也相同", torch.equal(a2, a) and a2._version == a._version)
claim("SGD 跳过 .grad 为 None 的参数：它保持原样", spare.grad is None and spare.item() == 5.0)


# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - **叶子张量**是不由任何被跟踪的运算产生的张量：你的输入，以及每一个 `nn.Parameter`。非叶子张量带有 `grad_fn`。
# - `backward()` 只为 `requires_grad=True` 的叶子张量填充 `.grad`。读取非叶子张量的 `.grad` 会得到 `None` 和一条
#   `UserWarning`；如果需要它的梯度，先调用 `.retain_grad()`。
# - 对需要梯度的叶子张量做原地操作，会*就在那一行*报错；在 `torch.no_grad()` 下则是允许的，所有优化器都是这样更新参数的。
# - 每次原地更新都会让张量的 `_version` 加一，`optimizer.step()` 也不例外。第 03 课会说明这一点在 GAN 训练中为什么重要。
# - `backward()` 会把梯度加到 `.grad` 上。两次反向传播得到损失之和的梯度；忘了 `zero_grad()`，训练就会悄无声息地用上过期的梯度。

# %% [markdown]
# ## 练习
#
# ### 动手实现：手写一个 SGD 更新步
#
# 原帖 001 修改叶子张量的写法 `p -= lr * p.grad`，在自动微分记录运算时会引发第 4 节的错误。请写出 `sgd_step(params, lr)` 的完整函数体，也就是 `optim.SGD` 所做的更新：
# - 每个有梯度的参数 `p` 都按 `lr * p.grad`**原地**更新，并且仍是同一个张量、仍是需要梯度的叶子张量，不经过 `.data`（`.data` 会瞒过什么，见第 03 课）；
# - `.grad` 为 `None` 的参数（没有任何损失到达它）保持原样，和 SGD 的做法一样（第 5 节）；
# - 用过之后清除 `.grad`（设为 `None`，和 `opt.zero_grad()` 一样），让下一步的 `backward()` 从空的 `.grad` 开始（`.grad` 不空时会怎样，见练习之后的延伸）。
#
# 然后把 `my_answer` 指向你的函数，运行单元格。检查程序会在全新的叶子张量 `w` 和 `b`、以及一个损失永远到达不了的叶子张量 `u` 上运行两步（第二步的 lr 减半，就像学习率调度器传进来的那样），把得到的值与 `optim.SGD` 的结果比较，并告诉你还有哪里不对。

# %%
def sgd_step(params, lr):
    """SGD 对每个有梯度的参数所做的更新，对叶子张量也合法；随后清除它的 .grad。"""
    ### BEGIN SOLUTION
    with torch.no_grad():
        for p in params:
            if p.grad is None:          # 没有任何损失到达 p：SGD 不动它
                continue
            p -= lr * p.grad
            p.grad = None
    ### END SOLUTION

my_answer = sgd_step  # SOLUTION: 把它指向你的 sgd_step（不加括号）

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_sgd_step(my_answer)
assert solved, "sgd_step：还没有完成，或者还不对：上面几行说明了缺什么"


# %% [markdown]
# ### 动手实现：DCGAN 的权重初始化
#
# DCGAN 风格的 GAN 从较小的随机权重开始训练。论文给出的初始化方法如下，`G.apply(init_weights)` 会对模型的每个模块 `m` 执行这些操作：
# - 每个 `Linear`、`Conv2d` 和 `ConvTranspose2d` 的权重从 N(0, 0.02) 中抽取，即均值为 0、**标准差**为 0.02 的正态分布；
# - 每个批量规范化层（`BatchNorm1d`、`BatchNorm2d`）的权重从 N(1, 0.02) 中抽取；
# - 每个偏置都设为 0。DCGAN 的卷积层用 `bias=False` 构建，它们的 `m.bias` 是 `None`；检查程序所用的生成器里就有一个这样的层；
# - 其他模块一律不动。
#
# 这些值必须**原地**设置，且不经过 `.data`：保留原来那些参数张量本身（在初始化之前创建的优化器持有的就是它们），并让它们仍是需要梯度的叶子张量。最直接的一行写法 `m.weight.normal_(0.0, 0.02)` 在第一个模块上就会引发第 4 节的错误。请写出 `init_weights(m)` 的完整函数体；检查程序会把它应用到一个小生成器上，并告诉你还有哪里不对。

# %%
def init_weights(m):
    """模块 m 的 DCGAN 初始值，供 model.apply(init_weights) 使用。"""
    ### BEGIN SOLUTION
    if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm1d, nn.BatchNorm2d)):
        mean = 1.0 if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) else 0.0
        with torch.no_grad():
            m.weight.normal_(mean, 0.02)
            if m.bias is not None:  # DCGAN 的卷积层用 bias=False 构建
                m.bias.zero_()
    ### END SOLUTION

my_answer = init_weights  # SOLUTION: 把它指向你的 init_weights（不加括号）

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_init(my_answer)
assert solved, "init：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# 上面说的两点都验证一下：那种一行的写法在一个新建的 `Linear` 上会报错；而 `torch.nn.init.normal_(m.weight, mean, 0.02)` 这种库里的写法是合法的，因为 `torch.nn.init` 中的每个函数自己都在 `torch.no_grad()` 下运行。

# %%
lin = nn.Linear(3, 3)
with expect_error(RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation"):
    lin.weight.normal_(0.0, 0.02)                 # 一行写法
version = lin.weight._version
nn.init.normal_(lin.weight, 0.0, 0.02)
claim("nn.init.normal_ 原地修改了参数，并让它仍是需要梯度的叶子张量",
      lin.weight._version > version and lin.weight.is_leaf and lin.weight.requires_grad,
      shown=f"版本 {version} -> {lin.weight._version}")

# %% [markdown]
# ## 延伸 · 第二次 `backward()` 遇上已有内容的 `.grad`
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# GAN 的一个训练步要做两次反向传播，而两次都可能到达同一批参数：`loss_G` 的反向传播要穿过 D 才能到达 G，所以它也会填充 D 的 `.grad`，除非你把它拦下来（第 04 课和第 05 课）。`.grad` 里已经有值时会发生什么，决定了 D 的下一步更新对不对。下面这个循环忘了清空它：

# %%
D = nn.Linear(3, 1)
opt_D = optim.SGD(D.parameters(), lr=0.1)
x = torch.ones(1, 3)
for step in range(3):
    loss_D = D(x).sum()                       # d loss_D / d D.weight 就是 x：每一步都是全 1
    loss_D.backward()                         # 注意：这个循环里没有 opt_D.zero_grad()

# %% reveals=["\\[3\\.0, 3\\.0, 3\\.0\\]", "backward\\(\\)\\W*\u4f1a?\u628a\u65b0\u7684?\u68af\u5ea6\\W*\u52a0\u5230", "\u6bcf\u6b21(\u53cd\u5411\u4f20\u64ad|backward\\(\\))\u90fd\u4f1a?\u52a0\u4e0a"] tags=["predict"]
prediction = [3.0, 3.0, 3.0]  # SOLUTION: 循环结束后，D.weight.grad 里是什么？（由 3 个数组成的列表）
check("3 次反向传播、中间没有 zero_grad 之后的 D.weight.grad", prediction, D.weight.grad[0].tolist(),
      why="每次反向传播都加上 x = [1, 1, 1]，三次加起来就是 [3, 3, 3]。调用 opt_D.zero_grad() 本可以把它清零。")

# %% [markdown]
# `backward()` 会把新的梯度**加到**`.grad` 已有的值上。这是有意的设计：两次反向传播写进同一个 `.grad`，得到的恰好是两个损失之和的梯度，所以 `loss_D = loss_real + loss_fake` 可以拆成两次 `backward` 调用。这也是为什么每个训练步都要从 `opt.zero_grad()` 开始。两点都验证一下：

# %%
w = torch.tensor([1., 2, 3], requires_grad=True)
(w * w).sum().backward()
first = w.grad.clone()
(w * w).sum().backward()                      # 同样的损失再来一次，中间没有 zero_grad
claim("第二次 backward 会加到 .grad 上：现在它是第一次梯度的两倍", torch.equal(w.grad, 2 * first),
      shown=f"第一次 {first.tolist()}，现在 {w.grad.tolist()}")

w.grad = None
((w * w).sum() + (3 * w).sum()).backward()    # 对求和后的损失做一次反向传播
summed = w.grad.clone()
w.grad = None
(w * w).sum().backward()                      # 两次反向传播，每一项一次
(3 * w).sum().backward()
claim("两次反向传播写进同一个 .grad，得到的是损失之和的梯度", torch.equal(w.grad, summed),
      shown=f"{w.grad.tolist()}")

# %% [markdown]
# 在 GAN 里，漏写 `zero_grad()` 的错误就藏在这里：循环照常运行，每一步都是合法的一步，而 D 是用这一步的梯度与上一步的梯度之和来训练的。不会有任何报错。第 07 课的自动微分医生会在两个不同损失的梯度这样叠加时发出警告。`zero_grad()` 留下的是什么张量（全零还是 `None`）也有影响，第 04 课会说明什么时候有影响。

# %% [markdown] tags=["read-after-exercises"]
# | 原帖 001 的代码 | 在如今的 torch 上 |
# |---|---|
# | `a * 2`、`loss.backward()`、`a.grad` | 与文章所说一致 |
# | `b.grad`、`loss.grad` | `b.grad` 是 `None`；`loss.grad` 是 `None`，**并且**发出 `UserWarning`（第 2 节） |
# | 对需要梯度的叶子张量执行 `a += 1` | 就在这一行引发 `RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.` |
