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
# # 第 12 课 · 自己动手写自动微分（续）：版本、叶子、检验与训练
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/12_your_engine_versions_and_training.ipynb)
#
# [English](../12_your_engine_versions_and_training.ipynb) · [学生版](student/12_your_engine_versions_and_training.ipynb)
#
# **目标**。第 11 课的引擎会保存每个反向计算需要的值，用完就释放；这一课让它在 torch 拒绝的地方同样拒绝。你要写的是版本的计数和检查（第 03 课的“is at version 2; expected version 1”），以及叶子规则（第 01 课的“a leaf Variable that requires grad is being used in an in-place operation”）。每一步都在相同的程序上与 torch 对照检查：PyTorch 的三个错误，每一个都恰好在 torch 报错的地方报出，别处一个也不报。接着，你用自己写的有限差分来检验梯度，这也是检验任何自动微分引擎的标准做法；最后，你的引擎会训练一个小网络，每一步的损失都与 torch 的一致（相对误差在 1e-4 以内）。练习之后还有三条延伸：第 03 课的例子在两个引擎上对照运行；画出你自己的计算图，标出每个节点保存了什么；原帖 001 和 000 中出错的那几步在你的引擎上报出与 torch 相同的两个错误。本课需要第 11 课以及第 01 课到第 03 课的知识，占两节连堂。
#
# **材料**。第 11 课的引擎，结构仿照 Andrej Karpathy 的 micrograd，而 micrograd 没有版本计数器。出错的步骤来自原帖 001（一篇没有标题的文章，讲 GAN 训练中的叶子节点、`retain_graph` 和 `detach`）和原帖 000（聖光之護，「解决PyTorch GAN训练中的梯度计算错误:inplace操作与计算图分离」，php 中文网，2025-10-02）；原帖的出处见[教师手册](../README.md#the-seeds)。

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
# **目前的引擎**。`Value` 就是你在第 11 课结束时的引擎：`save`、`*`、`exp`、`@` 和 `backward` 都已写好（这里用的是本课程包里第 11 课的参考答案，好让本课从完成的第 2 步出发）；`unpack` 和 `_inplace` 仍是第 11 课的占位实现，既不检查也不计数；`tanh` 还没有写。和第 11 课一样，`method` 把你写的函数挂到类上；动手步骤接着第 11 课的两步往下编号，是第 3 步到第 6 步。

# %%
import re
import matplotlib.pyplot as plt
from gan_lessons import exercises
from gan_lessons.exercises import lesson11
from gan_lessons.exercises.lesson11 import LEAF_IN_PLACE, draw_engine, torch_fit, training_problem

Value = lesson11.engine_after_lesson_11()


def method(function):
    """把一个函数作为方法挂到 Value 上：本课的每一步都会添加一些。"""
    setattr(Value, function.__name__, function)
    return function


# %% [markdown]
# ## 1 · 版本计数器
#
# 保存的值是一个引用，而不是副本，所以前向传播之后的原地修改会改变反向传播读到的内容。你写的 `save` 在每个保存的值旁边记下了它当时的版本；可是现在还没有谁统计原地修改（占位的 `_inplace` 只改数据，别的什么也不做），占位的 `unpack` 也什么都不比较。没人计数、也没人比较的计数器，就是第 03 课的 `.data`：把第 03 课的 `y = a.exp()` 接着 `y.mul_(2)` 放到一个不做检查的引擎上，它会悄无声息地给出错误的梯度，而 torch 会抛出它的版本错误：

# %%
class Unchecked(Value):
    def unpack(self):                     # 占位实现：返回保存的张量，不做任何检查
        return {name: value.data for name, (value, _) in self._saved.items()}


a = Unchecked(torch.ones(3), requires_grad=True)
y = a.exp()
with Unchecked.no_grad():
    y.mul_(2)
y.sum().backward()
right = torch.full((3,), torch.e)         # exp(a) 在 a = 1 处对 a 的导数：no_grad 下的修改不属于这个函数
claim("没有报错，梯度却是 2e，而正确的梯度是 e：mul_ 把 exp 保存的输出翻了一倍",
      torch.allclose(a.grad, 2 * right), f"{rounded(a.grad)}，正确值 {rounded(right)}")

a_t = torch.ones(3, requires_grad=True)
y_t = a_t.exp()
with torch.no_grad():
    y_t.mul_(2)
with expect_error(RuntimeError, "is at version 1; expected version 0"):
    y_t.sum().backward()

# %% [markdown]
# torch 在每个保存的值旁边记下它被保存时的版本，反向传播时再拿它与这个值当时的版本比较。**先预测，再验证**：如果一次修改随后又被撤销，这种比较会得出什么结论？

# %% reveals=["\u6570\u7684\u662f\u4fee\u6539\u6b21\u6570\uff0c\u800c\u4e0d\u662f\u503c", "\u53c8\u6539\u56de\u539f\u503c\uff1ay\\.sum\\(\\)\\.backward\\(\\) -> '\u62a5\u9519'"] tags=["predict"]
prediction = "报错"  # SOLUTION: y = a * b（b 是常量），然后 b.add_(1)、b.add_(-1)：b 又变回原来的值。y.sum().backward() 会怎样："正常运行" 还是 "报错"？
a, b = torch.randn(3, requires_grad=True), torch.randn(3)
y = a * b
b.add_(1)
b.add_(-1)
try:
    y.sum().backward()
    versions = None
except RuntimeError as error:
    versions = re.search(r"is at version \d+; expected version \d+", str(error))[0]
check("b 被原地修改后又改回原值：y.sum().backward()", prediction, "error" if versions else "runs",
      why=f"版本计数器数的是修改次数，而不是值：两次原地操作把 b 从版本 0 变成了版本 2，而检查只比较版本"
          f"（{versions}）。")


# %% [markdown]
# ### 动手实现，第 3 步：`_inplace` 计数，`unpack` 检查
#
# 两个方法。`_inplace(op, other)` 和占位实现一样，用 `op(self.data, self._value(other).data)` 修改 `self.data`，同时给这次修改计数：每一次原地修改都让这个值的版本加一。`unpack()` 按名字返回已保存张量（`self._saved` 的每一项是 `(value, 保存时它的版本)`）；如果某个值的版本在保存之后变了，就抛出与 torch 相同的错误，信息里包含 torch 报错所带的几项：值的类型和形状，以及两个版本：`one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor
# [3, 3]], is at version 1; expected version 0 instead.`（`value.data.type()` 是 `torch.FloatTensor`）。检查程序运行 77 个程序：第 2 步的那些，再加上对保存的值和未保存的值所做的修改——在前向传播之前、在它之后、在反向传播之后、在两次反向传播之间、改回原值，以及改成与原来相同的值；还有一种是捕获版本错误之后，再对同一个计算图做一次反向传播。

# %%
@method
def _inplace(self, op, other):
    """用 op 和 other 原地修改 self.data，并记下这次修改。"""
    ### BEGIN SOLUTION
    op(self.data, self._value(other).data)
    self._version += 1
    return self
    ### END SOLUTION


@method
def unpack(self):
    """按名字返回保存的张量；如果某个张量在保存之后被原地修改过，就抛出 torch 的版本错误。"""
    ### BEGIN SOLUTION
    tensors = {}
    for name, (value, version) in self._saved.items():
        if value._version != version:
            raise RuntimeError(f"one of the variables needed for gradient computation has been modified by an "
                               f"inplace operation: [{value.data.type()} {list(value.data.shape)}], is at version "
                               f"{value._version}; expected version {version} instead.")
        tensors[name] = value.data
    return tensors
    ### END SOLUTION


# %% tags=["test"]
solved_versions = exercises.check_versions(Value)
assert solved_versions, "versions：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# ## 2 · 需要梯度的叶子张量
#
# 需要梯度的叶子张量就是参数：优化器读的是它的 `.grad`；在梯度模式下原地修改它，就得把这次修改作为一个运算记入计算图，而它作用的却是一个没有历史的值。torch 拒绝这样做（第 01 课），但在 `no_grad` 下允许，`optimizer.step()` 正是这样更新参数的。**先预测，再验证**：这种拒绝是否取决于有没有运行过反向传播？

# %% reveals=["backward \u4e4b\u540e\u6267\u884c a\\.add_\\(1\\) -> '\u62a5\u9519'", "\u4e0e(\u65f6\u95f4|\u65f6\u673a|\u4f55\u65f6)\u65e0\u5173"] tags=["predict"]
prediction = "报错"  # SOLUTION: 叶子张量 a 需要梯度；loss.backward() 已经运行过。在 no_grad 之外执行 a.add_(1) 会怎样："会变"（a 被改动）还是 "报错"？
a = torch.randn(3, requires_grad=True)
(a * a).sum().backward()
try:
    a.add_(1)
    refused = False
except RuntimeError:
    refused = True
check("backward 之后执行 a.add_(1)", prediction, "error" if refused else "moves",
      why="这条规则看的是 a 是什么（需要梯度的叶子张量）以及梯度模式是否开启，与时机无关："
          "反向传播之后它仍然是参数；要在 no_grad 下更新它。")


# %% [markdown]
# ### 动手实现，第 4 步：`_inplace` 拒绝需要梯度的叶子张量
#
# 再写一遍 `_inplace`。它仍然像第 3 步那样修改数据并计数；但在此之前，如果梯度模式开启（`Value.grad_enabled`），它要拒绝对需要梯度的叶子张量做原地修改，用的是 torch 的原话：`RuntimeError(LEAF_IN_PLACE)`。其他情况都照常进行：`Value.no_grad()` 之下的修改、不需要梯度的值，以及由运算产生的值。检查程序运行 97 个程序：第 2 步和第 3 步的那些，在前向传播之前、在它之后以及在反向传播之后对叶子张量的原地修改，再加上在梯度模式下对运算产生的值所做的原地修改。

# %%
@method
def _inplace(self, op, other):
    """用 op 和 other 原地修改 self.data，并记下这次修改；拒绝需要梯度的叶子张量。"""
    ### BEGIN SOLUTION
    if self.is_leaf and self.requires_grad and self.grad_enabled:
        raise RuntimeError(LEAF_IN_PLACE)
    op(self.data, self._value(other).data)
    self._version += 1
    return self
    ### END SOLUTION


# %% tags=["test"]
solved_leaf_rule = exercises.check_leaf_rule(Value)
assert solved_leaf_rule, "leaf_rule：还没有完成，或者还不对：上面几行说明了缺什么"

# %%
engine = exercises.engine_or_reference(Value, solved_versions, solved_leaf_rule)
p = engine(torch.ones(3), requires_grad=True)
with expect_error(RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation"):
    p.add_(1)
with engine.no_grad():
    p.add_(1)                             # 优化器的一次更新
claim("在 no_grad 下，更新照常进行，并算作一次修改", p._version == 1 and p.data[0].item() == 2.0,
      f"版本 {p._version}，数据 {rounded(p.data)}")

# %% [markdown]
# ## 3 · 不用自动微分来检验梯度
#
# 到目前为止，你的梯度都是拿 torch 的来比。一个没有别的引擎可比的引擎（比如 torch 自己当初刚写出来的时候），要对照的是导数的定义，它用不着计算图：把输入的某一个元素往上、往下各挪一点点 `eps`，用输出变化的量除以输入变化的量。`torch.autograd.gradcheck` 就是这样检验 torch 自带的运算的。这样算出的结果带有误差，`eps` 越小误差越小，直到舍入误差占了上风。
#
# **先预测，再验证**。在 float64 下，用这种差分计算 `exp` 在 1 处的导数，并与精确值 `e` 比较。

# %% reveals=["eps \u7684\u5e73\u65b9", "\u7f29\u5c0f\u5230\u539f\u6765\u7684\u51e0\u5206\u4e4b\u4e00 -> 100"] tags=["predict"]
prediction = 100  # SOLUTION: 在 float64 下用 (exp(1 + eps) - exp(1 - eps)) / (2 eps) 近似 e：eps 从 1e-2 变为 1e-3，误差大约缩小到原来的几分之一？（10 或 100）
x = torch.tensor(1.0, dtype=torch.float64)
central = {eps: ((x + eps).exp() - (x - eps).exp()) / (2 * eps) for eps in (1e-2, 1e-3)}
one_sided = {eps: ((x + eps).exp() - x.exp()) / eps for eps in (1e-2, 1e-3)}
error = {eps: (central[eps] - x.exp()).abs().item() for eps in central}
error_one_sided = {eps: (one_sided[eps] - x.exp()).abs().item() for eps in one_sided}
check("eps 从 1e-2 变为 1e-3 时，中心差分的误差缩小到原来的几分之一", prediction,
      int(round(error[1e-2] / error[1e-3], -1)),
      why=f"往上挪一步和往下挪一步，正好把与 eps 成正比的误差项抵消掉，只剩下与 eps 的平方成正比的一项："
          f"先是 {error[1e-2]:.1e}，再是 {error[1e-3]:.1e}。单侧差分保留了与 eps 成正比的误差项："
          f"先是 {error_one_sided[1e-2]:.1e}，再是 {error_one_sided[1e-3]:.1e}。")

# %%
ratio_one_sided = error_one_sided[1e-2] / error_one_sided[1e-3]
claim("单侧差分 (f(x + eps) - f(x)) / eps 的误差只缩小到约十分之一", 8 < ratio_one_sided < 12,
      f"{ratio_one_sided:.1f}")


# %% [markdown]
# ### 动手实现，第 5 步：有限差分梯度
#
# 写出 `numerical_grad(f, x, eps=1e-3)`：`f` 接受一个与 `x` 形状相同的张量，返回一个数；结果是一个与 `x` 形状相同的张量，它的每个元素都是只挪动 `x` 的对应元素、其余元素保持不动时 `f` 的中心差分。不管你的函数在计算过程中对 `x` 做了什么，调用者手里的 `x` 最后都要恢复原样。检查程序在 float64 下用三个函数来检查它，自变量的形状分别是 [3]、[3, 4] 和 []，并与这些函数的精确梯度比较。

# %%
def numerical_grad(f, x, eps=1e-3):
    """用中心差分计算 f 在 x 处的梯度：一个与 x 形状相同的张量。"""
    ### BEGIN SOLUTION
    grad = torch.zeros_like(x)
    flat, out = x.view(-1), grad.view(-1)   # 视图：写 flat[i] 就是在改 x 的第 i 个元素
    for i in range(flat.numel()):
        old = flat[i].item()
        flat[i] = old + eps
        up = f(x)
        flat[i] = old - eps
        down = f(x)
        flat[i] = old                       # 放回原值
        out[i] = (up - down) / (2 * eps)
    return grad
    ### END SOLUTION


# %% tags=["test"]
solved_numerical = exercises.check_numerical_grad(numerical_grad)
assert solved_numerical, "numerical_grad：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# 现在拿你的引擎的反向传播和你的有限差分对照：一个小网络的损失对它第一个权重矩阵（32 个元素）的梯度，`eps` 取三个值。引擎用 float32 计算，一个数只有大约 7 位有效数字，所以舍入误差除以 `eps` 之后，`eps` 越小它就越大；而差分本身的误差则随 `eps` 变小而变小。

# %% tags=["nbval-ignore-output"]
engine = exercises.engine_or_reference(Value, solved_versions, solved_leaf_rule)
gradient = lesson11.numerical_grad_or_finished(numerical_grad, solved_numerical)
problem = training_problem()
x, y = engine(problem.x), engine(problem.y)


def loss_of(W1_data, requires_grad=False):
    """以 exp 为激活函数的小网络：给定 W1，返回损失和 W1。"""
    W1 = engine(W1_data, requires_grad=requires_grad)
    b1, W2, b2 = [engine(p) for p in problem.params[1:]]
    pred = (x @ W1 + b1).exp() @ W2 + b2
    return ((pred - y) * (pred - y)).sum() * (1 / 64), W1


loss, W1 = loss_of(problem.params[0], requires_grad=True)
loss.backward()
differences = {}
for eps in (1e-1, 1e-2, 1e-4):
    numerical = gradient(lambda data: loss_of(data)[0].data.item(), problem.params[0].clone(), eps)
    differences[eps] = ((numerical - W1.grad).abs().max() / W1.grad.abs().max()).item()
    print(tr("eps {eps:g}: the largest difference is {difference:.0e} of the largest gradient entry",
             eps=eps, difference=differences[eps]))
claim("eps 取 1e-2 时，反向传播与有限差分相差不到最大元素的 1e-3",
      differences[1e-2] < 1e-3)
claim("在 float32 下，eps 取 1e-2 比取更大的值（差分本身的误差）和更小的值（舍入误差除以 eps）都更准",
      differences[1e-2] < min(differences[1e-1], differences[1e-4]))


# %% [markdown]
# ## 4 · 用你的引擎训练一个网络
#
# micrograd 最后在自己的引擎上训练了一个小网络，本课也以此收尾。三条规则在训练循环里汇合：每一步都做一次新的前向传播和一次反向传播，反向传播会释放它用过的值；而参数更新，是在需要它们旧值的那次反向传播之后、在 `no_grad` 下对需要梯度的叶子张量做的原地修改。网络是这样的：两个输入，16 个 tanh 单元，一个输出；用普通的梯度下降，以均方误差为损失，去拟合输入的一个光滑函数。
#
# ### 动手实现，第 6 步：`tanh` 和训练循环
#
# 先写 `a.tanh()`：它的导数是 `1 - tanh(a)²`；只保存这个导数要读的值（对照的是 torch 的 `TanhBackward0`）。然后写 `fit(params, x, y, steps, lr)`：`params` 是 `[W1, b1, W2, b2]`，都是需要梯度的 Value（W1 形状为 [2, 16]，b1 为 [16]，W2 为 [16, 1]，b2 为 [1]）；`x` 的形状为 [64, 2]，`y` 为 [64, 1]。每一步计算 `pred = tanh(x @ W1 + b1) @ W2 + b2` 和损失，即 `(pred - y)²` 在 64 个样本上的平均值（你的引擎没有除法：乘以 `1 / 64`；`**` 只支持正整数次幂），做反向传播，再把每个参数挪动 `-lr` 乘以它的梯度。函数以 Python 浮点数列表的形式返回每一步的损失。检查程序把你的循环运行两次（lr 0.1 下 40 步，lr 0.3 下 8 步），每次都和 torch 上的同一个循环从相同的起点出发，并逐步比较两者的损失。

# %%
@method
def tanh(self):
    """逐元素计算 tanh(self)。"""
    ### BEGIN SOLUTION
    out = self._result(self.data.tanh(), (self,))
    out.save("result", out)               # 1 - tanh**2 只读输出

    def backward(grad, saved):
        return (grad * (1 - saved["result"] ** 2),)
    out._backward = backward
    return out
    ### END SOLUTION


def fit(params, x, y, steps, lr):
    """用梯度下降最小化 tanh 网络的均方误差：返回每一步的损失。"""
    ### BEGIN SOLUTION
    W1, b1, W2, b2 = params
    losses = []
    for _step in range(steps):
        pred = (x @ W1 + b1).tanh() @ W2 + b2
        loss = ((pred - y) * (pred - y)).sum() * (1 / len(y.data))
        loss.backward()
        with Value.no_grad():
            for p in params:
                p.add_(p.grad * -lr)      # 优化器的一步：原地修改，在 no_grad 下
                p.grad = None             # zero_grad
        losses.append(loss.data.item())
    return losses
    ### END SOLUTION


# %% tags=["test"]
solved_training = exercises.check_training(Value, fit)
assert solved_training, "training：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# 在你的引擎和 torch 上，从同一个起点出发，以 lr 0.1 各训练 300 步：

# %%
engine = exercises.engine_or_reference(Value, solved_versions, solved_leaf_rule, solved_training)
train = lesson11.fit_or_finished(fit, solved_training)
problem = training_problem()
ours = train([engine(p, requires_grad=True) for p in problem.params], engine(problem.x), engine(problem.y), 300, 0.1)
theirs = torch_fit(problem, 300, 0.1)
plt.figure(figsize=(6, 2.6))
plt.semilogy(theirs, label="torch", lw=5, alpha=0.35)
plt.semilogy(ours, label=tr("your engine"), lw=1)
plt.xlabel(tr("step"))
plt.ylabel(tr("mean squared error"))
plt.legend()
plt.show()
print(tr("loss {start:.3f} at the start, {end:.4f} after 300 steps", start=ours[0], end=ours[-1]))
apart = [k for k, (mine, torchs) in enumerate(zip(ours, theirs)) if abs(mine - torchs) > 1e-4 * abs(torchs) + 1e-6]
claim("300 步里损失降到了原来的十分之一以下，并且每一步都与 torch 的相同（相差不超过 1e-4）",
      ours[-1] < ours[0] / 10 and not apart, f"第一个出现差异的步：{apart[0]}" if apart else None)

# %% [markdown]
# torch 上的同一个循环就是 `torch_fit`，也就是检查程序用来对照的那个：先 `loss.backward()`，再在 `no_grad` 下更新每个参数、把它的 `.grad` 设为 `None`；对普通的 SGD 来说，这正是 `optimizer.step()` 和 `optimizer.zero_grad()` 所做的事。它里面没有任何 GAN 特有的东西；第 02 课到第 05 课多出来的，是共享同一张计算图的两个这样的循环。

# %% [markdown] tags=["read-after-exercises"]
# | 你的引擎做什么 | torch 做什么 | 漏掉这一点时的后果 |
# |---|---|---|
# | 节点的反向计算之后释放它保存的值，除非 `retain_graph=True`（第 11 课） | 相同 | “Trying to backward through the graph a second time” |
# | 记下每个保存的值的版本，在反向传播时比较 | 相同，通过张量的版本计数器 | “... modified by an inplace operation: [...], is at version N; expected version M instead” |
# | 在 `no_grad` 之外，拒绝对需要梯度的叶子张量做原地修改 | 相同 | “a leaf Variable that requires grad is being used in an in-place operation.” |
# | 梯度模式下对运算产生的值做原地修改：允许，但不记录 | 允许，并把它记录为一个节点（张量的历史转移到这个节点上） | 本引擎的局限：它的反向传播看不到这样的修改 |
# | `tanh` 保存自己的输出 | 相同（`_saved_result`） | 不报错：梯度错误，或者白白占用内存 |
# | 用中心差分检验 | `torch.autograd.gradcheck` | 不借助 torch，也能找出反向计算里写错的公式 |

# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - 每个保存的值都连同它的版本一起保存；反向传播比较的是版本，而不是值，所以一次被撤销的修改仍然会报错，而在值被保存之前所做的修改则不会。
# - 需要梯度的叶子张量只能在 `no_grad` 下原地修改，无论在反向传播之前还是之后；运算产生的值不是叶子张量。
# - 中心差分不借助其他引擎就能检验反向计算；在 float32 下，`eps` 取得太小，就会输给舍入误差。
# - 原帖 001 和 000 在你的引擎上和在 torch 上一样出错：不加 `retain_graph` 时是节点已被释放，加上之后是保存的权重过期了。而一个先前向、再反向、然后在 `no_grad` 下更新的训练循环，在你的引擎上训练网络的结果与 torch 完全相同。

# %% [markdown]
# ## 练习
#
# 上面的四个动手步骤就是本课的练习，每一步的检查程序都在它所在的那一节里。想继续深入的话（不做检查）：
#
# - 添加 `relu` 和你自己写的原地版本 `relu_`，在你的引擎上运行第 03 课中 `Tanh` 之后接 `ReLU(inplace=True)` 的例子：哪个保存的值会过期？
# - 让视图与它的基张量共享版本计数器（把计数器存在一个两者都持有的单元素列表里），就像 torch 里 `W.T` 与 `W`
#   共享那样，并验证对 `W` 的一步更新会让保存的 `W.T` 过期；
# - 给 `backward` 加一个 `inputs=` 参数，就像 `torch.autograd.backward` 的那样，只为这些叶子张量填写 `.grad`，并用你的 `numerical_grad` 验证它填写的梯度没有变。

# %% [markdown]
# ## 延伸 · 第 03 课的三个例子，在两个引擎上各跑一遍
#
# 第 03 课的三个例子，在两边各跑一遍：`exp` 保存的输出被修改；`a * b` 中没有被保存的 `a` 被修改（就像一次更新步骤修改参数那样）；以及 `a * b` 中被保存的 `b` 被修改。

# %%
engine = exercises.engine_or_reference(Value, solved_versions)
programs = {"y = a.exp(); y.mul_(2)": "a = leaf([3], requires_grad=True)\ny = a.exp()\nwith no_grad():\n"
                                      "    y.mul_(2)\ny.sum().backward()",
            "y = a * b; a.add_(10)": "a = leaf([3], requires_grad=True)\nb = leaf([3])\ny = a * b\nwith no_grad():\n"
                                     "    a.add_(10)\ny.sum().backward()",
            "y = a * b; b.add_(10)": "a = leaf([3], requires_grad=True)\nb = leaf([3])\ny = a * b\nb.add_(10)\n"
                                     "y.sum().backward()"}
agree = []
for what, program in programs.items():
    theirs, ours = lesson11.run(program, torch), lesson11.run(program, engine)
    print(tr("{what:<24} torch: {outcome}", what=what,
             outcome=theirs.message.split('. Hint')[0] if theirs.kind else tr("no error")))
    print(tr("{what:<24} ours:  {outcome}", what="", outcome=ours.message or tr("no error")))
    agree.append(theirs.kind == ours.kind and lesson11.version_parts(theirs.message) == lesson11.version_parts(ours.message)
                 and (theirs.kind is not None or torch.equal(theirs.grads["a"], ours.grads["a"])))
claim("两边结果相同，报错信息里的形状和版本也相同", all(agree))

# %% [markdown]
# 当保存的值不是叶子时，torch 的报错信息还会指出产生它的运算（`which is output 0 of Exp`）；我们的报错信息只给出检查程序比较的那些内容。两者比较的都是版本，从来不是值。

# %% [markdown]
# ## 延伸 · 把你的计算图画出来
#
# 第 02 课画过 torch 的计算图，并标出每个已保存张量是存活、已释放还是过期。`draw_engine` 用同样的方式画你的引擎的计算图，它读的只是你的 `Value` 所持有的东西：`parents`、`_saved` 保存了什么以及保存时的版本，还有反向传播释放之后留下的 `None`。
#
# **先预测，再验证**。`loss = ((a * b).exp() * b).sum()`，只有 `a` 需要梯度；接着 `loss.backward(retain_graph=True)`；然后在 `no_grad` 下执行 `b.add_(1)`。

# %% reveals=["b \u88ab\u4fdd\u5b58\u4e86\u4e24\u6b21", "\u6807\u4e3a\u8fc7\u671f\u7684\u4fdd\u5b58\u503c -> 2"] tags=["predict"]
prediction = 2  # SOLUTION: 执行 b.add_(1) 之后，图中会有几个保存的值被标为过期？
engine = exercises.engine_or_reference(Value, solved_versions, solved_leaf_rule)
a, b = engine(torch.ones(3), requires_grad=True), engine(torch.full((3,), 2.0))
loss = ((a * b).exp() * b).sum()
loss.backward(retain_graph=True)
with engine.no_grad():
    b.add_(1)
drawn = draw_engine({"loss": loss}, a=a, b=b)
check("b.add_(1) 之后标为过期的保存值", prediction, sum(s.state == "stale" for s in drawn.saved),
      why="b 被保存了两次：第一个 mul 为 a 的梯度保存它，第二个 mul 为 exp 输出的梯度保存它（exp 的输出需要梯度）。"
          "一次修改让两处都过期；exp 的输出没有被改动，仍然存活。")
drawn

# %% [markdown]
# 还是同一个表达式，这次做一次不带 `retain_graph` 的反向传播：

# %%
loss = ((a * b).exp() * b).sum()
loss.backward()
drawn = draw_engine({"loss": loss}, a=a, b=b)
claim("不带 retain_graph 的反向传播之后，保存过东西的三个节点都显示为已释放",
      [s.state for s in drawn.saved] == ["freed"] * 3)
drawn

# %% [markdown]
# ## 延伸 · 原帖 001 和 000，在你的引擎上运行
#
# 第 02 课和第 03 课在 torch 上运行过原帖中出错的那几步。把同样的步骤只写一遍，分别在 torch 和你的引擎上运行，就能看出你搭建的机制是不是这些错误背后的那个机制。这些步骤改写成只用引擎已有的运算：线性层写成 `x @ W + b`，`W` 按 `[in, out]` 存储（即 `nn.Linear` 保存的转置），并像 `nn.Linear` 那样原地初始化（所以参数从版本 1 开始）；优化器是 `no_grad` 下的一步 SGD；原帖 000 的 sigmoid 换成 `exp`（两者都保存自己的输出）；它的损失换成求和（这些错误只取决于两个损失共享什么、保存了什么，与损失本身无关）。

# %%
engine = exercises.engine_or_reference(Value, solved_versions, solved_leaf_rule)


def backends():
    """torch 和引擎各自的 (name, leaf, no_grad)：原帖的步骤只写一遍，两边共用。"""
    return [("torch", lambda data, rg=False: data.clone().requires_grad_(rg), torch.no_grad),
            ("ours", lambda data, rg=False: engine(data, requires_grad=rg), engine.no_grad)]


def shown_as(name):
    """后端打印出来的名字：torch，或者你的引擎（ours）。"""
    return name if name == "torch" else tr("ours")


def linear(leaf, no_grad, n_in, n_out):
    """线性层的参数 W [in, out] 和 b [out]，像 nn.Linear 那样原地初始化。"""
    W, b = leaf(torch.randn(n_in, n_out), True), leaf(torch.randn(n_out), True)
    with no_grad():
        W.mul_(n_in ** -0.5)
        b.mul_(n_in ** -0.5)
    return W, b


def sgd_step(params, no_grad, lr=0.1):
    with no_grad():
        for p in params:
            p.add_(p.grad * -lr)


def seed001(leaf, no_grad, retain_graph=False):
    """原帖 001 的 G/D 小例子：lossD 的反向传播，optimD 的一步更新，然后是与它共享 d = D(g) 的 lossG。"""
    torch.manual_seed(0)
    (G_W, G_b), (D_W, D_b) = linear(leaf, no_grad, 2, 2), linear(leaf, no_grad, 2, 2)
    t = leaf(torch.tensor([[1., 2.]]), True)
    g = t @ G_W + G_b
    d = g @ D_W + D_b
    lossD = d.sum()
    lossD.backward(retain_graph=retain_graph)
    sgd_step([D_W, D_b], no_grad)
    lossG = (g + d).sum()
    lossG.backward()


def seed000(leaf, no_grad, retain_graph=False):
    """原帖 000 的 loss_nonsaturating 及其训练步骤：d_loss 的反向传播，d_optimizer 的一步更新，然后是 g_loss。"""
    torch.manual_seed(0)
    G = [linear(leaf, no_grad, 64, 784)]
    D = [linear(leaf, no_grad, 784, 512), linear(leaf, no_grad, 512, 1)]   # D 的最后一层：[512, 1]

    def forward(layers, x):
        for W, b in layers:
            x = x @ W + b
        return x
    z, x_real = leaf(torch.randn(8, 64)), leaf(torch.rand(8, 784) * 2 - 1)
    dgz = forward(D, forward(G, z)).exp()            # 原帖原文：F.sigmoid(d(gz))
    dx = forward(D, x_real)
    g_loss, d_loss = dgz.sum(), (dx + dgz).sum()
    d_loss.backward(retain_graph=retain_graph)
    sgd_step([p for layer in D for p in layer], no_grad)
    g_loss.backward()


# %%
for name, leaf, no_grad in backends():
    print(tr("seed 001 on {name}:", name=shown_as(name)))
    with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
        seed001(leaf, no_grad)

# %%
messages = {}
for name, leaf, no_grad in backends():
    print(tr("seed 001 with retain_graph=True on {name}:", name=shown_as(name)))
    with expect_error(RuntimeError, r"\[2, 2\]\],? .*is at version 2; expected version 1"):
        try:
            seed001(leaf, no_grad, retain_graph=True)
        except RuntimeError as error:
            messages[name] = str(error)
            raise
claim("同一个保存的值 [2, 2]，同样的版本 2 和 1，与第 03 课在 nn.Linear 上运行原帖 001 的结果一致",
      lesson11.version_parts(messages["torch"]) == lesson11.version_parts(messages["ours"])
      == ("torch.FloatTensor [2, 2]", "2", "1"))

# %%
for name, leaf, no_grad in backends():
    print(tr("seed 000 on {name}:", name=shown_as(name)))
    with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
        seed000(leaf, no_grad)

# %%
messages = {}
for name, leaf, no_grad in backends():
    print(tr("seed 000 with retain_graph=True on {name}:", name=shown_as(name)))
    with expect_error(RuntimeError, r"\[512, 1\]\],? .*is at version 2; expected version 1"):
        try:
            seed000(leaf, no_grad, retain_graph=True)
        except RuntimeError as error:
            messages[name] = str(error)
            raise
claim("两边都是 D 的最后一个权重 [512, 1]，版本为 2，而保存时是 1：正是原帖 000 自己的报错",
      lesson11.version_parts(messages["torch"]) == lesson11.version_parts(messages["ours"])
      == ("torch.FloatTensor [512, 1]", "2", "1"))

# %% [markdown]
# 不加 `retain_graph` 时，d_loss 的反向传播释放了 `dgz` 的各个节点保存的值，而 G 的反向传播需要它们：这是第一个错误。加上它，这些值保留了下来，但更新步骤原地修改了 D 的权重，保存的 `[512, 1]` 权重落后了一个版本：这是第二个错误。两个错误归根结底就是你搭建的机制——第 11 课里反向传播的释放，加上第 1 节的版本检查——别无其他。
