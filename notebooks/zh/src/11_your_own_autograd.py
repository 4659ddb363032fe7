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
# # 第 11 课 · 自己动手写自动微分
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/11_your_own_autograd.ipynb)
#
# [English](../11_your_own_autograd.ipynb) · [学生版](student/11_your_own_autograd.ipynb)
#
# **目标**。仿照 micrograd，自己搭一个反向模式自动微分引擎的核心部分，让它做到第 02 课在 PyTorch 里拆解过的事：每个运算只保存它的反向计算需要的值，反向传播之后再把这些值释放掉。要紧的部分都由你来写：`*`、`exp` 和 `@` 各自保存什么；以及反向传播本身——每个节点只运行一次，被使用两次的值要把梯度加起来，并且恰好在 torch 报错的地方抛出 PyTorch 的“Trying to backward through the graph a second time”，别处一次也不报。每个动手步骤都在相同的程序上与 torch 对照检查：torch 的节点保存了什么，随机表达式上的梯度，以及连续两次反向传播。第 12 课接着用这个引擎，依次加上版本计数器、叶子规则、梯度检验、原帖中出错的那几步以及训练。本课只需要第 01 课到第 03 课的知识，学完第 03 课就可以直接学；本课占两节连堂。
#
# **材料**。引擎的结构仿照 Andrej Karpathy 的 micrograd（一个知道自己父节点、带有 `_backward` 的 `Value`），而 micrograd 既没有需要释放的保存值，也没有版本计数器；我们拿来对照检查的，是 PyTorch 自己的节点（`grad_fn._saved_self`、`_saved_other`、`_saved_result`、`_saved_mat2`）和报错信息。

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
import re
from contextlib import contextmanager
import matplotlib.pyplot as plt
from gan_lessons import exercises
from gan_lessons.exercises import lesson11
from gan_lessons.exercises.lesson11 import SECOND_TIME, draw_engine, torch_fit, training_problem
from gan_lessons.lesson import headline


def saved_by_torch(y):
    """y 背后 torch 的各个节点为反向传播保存的每个张量：(节点, 属性, 形状)，从 grad_fn._saved_* 读出。"""
    found, todo, seen = [], [y.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in dir(node):
            if name.startswith("_saved_") and isinstance(getattr(node, name), torch.Tensor):
                found.append((type(node).__name__, name, list(getattr(node, name).shape)))
        todo += [fn for fn, _ in node.next_functions]
    return sorted(found)


# %% [markdown]
# ## 1 · 每个运算保存什么
#
# 反向传播在前向传播结束之后才运行，所以导数要读的每个值都必须在前向传播时保存下来：存得太少，梯度就算不出来；存得太多，内存就会增长（第 02 课权衡过这一点）。保存下来的值，也正是原地操作可能破坏的值（第 03 课）。一个节点保存哪些值，取决于它的运算的导数，以及它的哪些输入需要梯度。torch 把节点保存的值作为属性展示出来：`grad_fn._saved_self`、`_saved_other`、`_saved_result`（没有保存时为 `None`）。
#
# **先预测，再验证**。连续三个运算，只有 `a` 需要梯度。数一数 torch 保存了几个张量。

# %% reveals=["\u4e09\u4e2a\u5f20\u91cf", "exp\\(\\) \\* c -> 3"] tags=["predict"]
prediction = 3  # SOLUTION: y = (a * b).exp() * c，只有 a 需要梯度：y 的各个节点为反向传播保存了几个张量？
a = torch.randn(3, requires_grad=True)
b, c = torch.randn(3), torch.randn(3)
y = (a * b).exp() * c
kept = saved_by_torch(y)
check("torch 为下式保存的张量个数：y = (a * b).exp() * c", prediction, len(kept),
      why="b 用于 a 的梯度（grad * b），exp 的输出用于 exp 自身的梯度，c 用于穿过 exp 输出的那部分梯度：共三个张量。"
          "a 本身从不保存，因为没有谁需要对 b 或 c 求梯度。")

# %%
for node, attribute, shape in kept:
    print(tr("{node:<14} {attribute:<14} shape {shape}", node=node, attribute=attribute, shape=shape))
claim("torch 保存了 b、exp 的输出和 c，没有保存 a", len(kept) == 3 and
      all(attr in ("_saved_other", "_saved_result") for _, attr, _ in kept))


# %% [markdown]
# **引擎**。`Value` 持有一个普通的 torch 张量 `data`，它从不需要梯度：自动微分全部由我们自己完成。一个运算产生一个输出 `Value`，它知道自己的 `parents`，并带有一个 `_backward(grad, saved)`：把输出的梯度变成每个父节点各一个梯度，需要的值从 `saved` 里读（一个按名字索引的字典，名字和 torch 的一样）。节点保存的东西放在它的 `_saved` 字典里：名字 -> `(value, 保存时 value 的版本)`；反向传播释放之后，`_saved` 变为 `None`。下面的类只提供容器和一些辅助代码：`__add__` 和 `sum`（它们什么也不保存，因为求和的梯度不需要任何值），减号、正整数次幂 `**`，以及右操作数版本的运算符 `__radd__`、`__rmul__`（都用 `+` 和 `*` 写成），以及两个要到第 12 课才替换的占位实现：把保存的张量交给反向传播的 `unpack`，以及 `add_`、`mul_` 背后的 `_inplace`。`method` 把你写的函数挂到类上，这样引擎就能一步步搭起来。

# %%
class Value:
    """我们引擎里的张量。`data` 是普通的 torch 张量（从不需要梯度）：自动微分由我们自己完成。"""
    grad_enabled = True                   # 引擎的 no_grad 开关：`with Value.no_grad():`

    def __init__(self, data, requires_grad=False, parents=()):
        self.data = torch.as_tensor(data, dtype=torch.float32).clone()
        self.requires_grad = requires_grad
        self.parents = parents            # 计算出这个值的那些 Value；叶子没有
        self._backward = None             # (grad, 按名字索引的已保存张量) -> 每个父节点一个梯度，或 None
        self._saved = {}                  # _backward 需要的值：name -> (Value, 保存时它的版本)；释放后为 None
        self._version = 0                 # 这个值被原地修改过几次（第 12 课负责计数）
        self.grad = None                  # 叶子的梯度，由 backward 累加（第 2 节）

    def __repr__(self):
        return f"Value({self.data.tolist()}, requires_grad={self.requires_grad})"

    @property
    def is_leaf(self):
        return not self.parents

    @classmethod
    @contextmanager
    def no_grad(cls):
        """在这个代码块里，运算不构建计算图（第 12 课还会规定：在这里可以原地修改叶子张量）。"""
        before, cls.grad_enabled = cls.grad_enabled, False
        try:
            yield
        finally:
            cls.grad_enabled = before

    def _value(self, x):                  # 把一个数或张量包装成不需要梯度的 Value
        return x if isinstance(x, Value) else type(self)(x)

    def _result(self, data, parents):
        """运算的输出：当某个输入需要梯度（并且梯度开启）时，它才需要梯度，也只有这时才有父节点。"""
        requires_grad = self.grad_enabled and any(p.requires_grad for p in parents)
        return type(self)(data, requires_grad, parents if requires_grad else ())

    def __add__(self, other):
        other = self._value(other)
        out = self._result(self.data + other.data, (self, other))
        # 经过广播的操作数，它的梯度要求和回它自己的形状
        out._backward = lambda grad, saved: (grad.sum_to_size(self.data.shape), grad.sum_to_size(other.data.shape))
        return out

    def sum(self):
        out = self._result(self.data.sum(), (self,))
        out._backward = lambda grad, saved: (grad * torch.ones_like(self.data),)
        return out

    # 辅助方法，用 + 和 * 写成：它们保存的就是 + 和 * 保存的
    def __radd__(self, other):
        return self + other

    def __rmul__(self, other):
        return self * other

    def __neg__(self):
        return self * -1.0

    def __sub__(self, other):
        return self + (-self._value(other))

    def __pow__(self, n):                 # 正整数次幂，写成连乘：x ** 2 就是 x * x
        if not (isinstance(n, int) and n >= 1):
            return NotImplemented
        out = self
        for _k in range(n - 1):
            out = out * self
        return out

    def unpack(self):                     # 占位实现（第 12 课）：按名字返回保存的张量，不做任何检查
        return {name: value.data for name, (value, _) in self._saved.items()}

    def _inplace(self, op, other):        # 占位实现（第 12 课）：修改数据，什么也不计数
        op(self.data, self._value(other).data)
        return self

    def add_(self, other):
        return self._inplace(torch.Tensor.add_, other)

    def mul_(self, other):
        return self._inplace(torch.Tensor.mul_, other)


def method(function):
    """把一个函数作为方法挂到 Value 上：本课的每一步都会添加一些方法。"""
    setattr(Value, function.__name__, function)
    return function


# %% [markdown]
# ### 动手实现，第 1 步：`save`、`*`、`exp` 和 `@`
#
# 先写 `out.save(name, value)`，每个运算都调用它，为自己节点的反向计算保存一个值：它把这个值以 `name` 为键存进 `_saved`，旁边记下这个值此刻的版本（第 12 课会拿它和反向传播时的版本比较）；如果节点不需要梯度，就什么也不保存（没有计算图可供反向传播）。然后写 `a * b`（形状可以广播：`(3, 3) * (3,)`）、`a.exp()` 和矩阵乘法 `a @ b`。每个运算都用 `self._result(data, parents)` 产生输出，用 `out.save(...)` 保存它的反向计算需要的值，名字沿用 torch 的（`self`、`other`、`result`、`mat2`），并设置 `out._backward(grad, saved)`：它按 `parents` 的顺序为每个父节点返回一个梯度，不需要梯度的父节点返回 `None`。只保存那些确实要计算的梯度所读取的值。检查程序会在 52 个单运算表达式上（`requires_grad` 的每种组合、`a * a`、`a @ a`、广播、`no_grad` 之下、已被原地修改过的值）把这些运算与 torch 并排运行，按对象同一性比较各自保存了什么，检查旁边记下的版本，并比较反向计算返回的梯度。

# %%
@method
def save(self, name, value):
    """为这个节点的反向计算保存 `value`，连同它此刻的版本。"""
    ### BEGIN SOLUTION
    if self.requires_grad:                # 没有计算图，就什么也不用保存
        self._saved[name] = (value, value._version)
    ### END SOLUTION


@method
def __mul__(self, other):
    """逐元素计算 self * other。"""
    ### BEGIN SOLUTION
    other = self._value(other)
    out = self._result(self.data * other.data, (self, other))
    if self.requires_grad:
        out.save("other", other)          # self 的梯度是 grad * other
    if other.requires_grad:
        out.save("self", self)

    def backward(grad, saved):
        return ((grad * saved["other"]).sum_to_size(self.data.shape) if "other" in saved else None,
                (grad * saved["self"]).sum_to_size(other.data.shape) if "self" in saved else None)
    out._backward = backward
    return out
    ### END SOLUTION


@method
def exp(self):
    """逐元素计算 e ** self。"""
    ### BEGIN SOLUTION
    out = self._result(self.data.exp(), (self,))
    out.save("result", out)               # exp 的导数就是 exp 本身：也就是它自己的输出

    def backward(grad, saved):
        return (grad * saved["result"],)
    out._backward = backward
    return out
    ### END SOLUTION


@method
def __matmul__(self, other):
    """矩阵乘法 self @ other。"""
    ### BEGIN SOLUTION
    out = self._result(self.data @ other.data, (self, other))
    if self.requires_grad:
        out.save("mat2", other)           # self 的梯度是 grad @ other.T
    if other.requires_grad:
        out.save("self", self)            # other 的梯度是 self.T @ grad

    def backward(grad, saved):
        return (grad @ saved["mat2"].T if "mat2" in saved else None,
                saved["self"].T @ grad if "self" in saved else None)
    out._backward = backward
    return out
    ### END SOLUTION


# %% tags=["test"]
solved_saving = exercises.check_saving(Value)
assert solved_saving, "saving：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# 把你的引擎和 torch 的节点放在一起对照，torch 一侧从节点的 `_saved_*` 属性读出（两边是同样的值：在你的引擎里按对象同一性比较，在 torch 里按数值比较）：

# %%
engine = exercises.engine_or_reference(Value, solved_saving)
rows = []
for ra, rb in [(True, False), (False, True), (True, True)]:
    torch.manual_seed(0)
    a_t, b_t = torch.randn(3, requires_grad=ra), torch.randn(3, requires_grad=rb)
    y_t = a_t * b_t
    a, b = engine(a_t.detach(), requires_grad=ra), engine(b_t.detach(), requires_grad=rb)
    y = a * b
    theirs = sorted(n for n in ("self", "other") if getattr(y_t.grad_fn, f"_saved_{n}") is not None)
    ours = sorted("self" if v is a else "other" for v, _ in y._saved.values())
    same_values = all(torch.equal(getattr(y_t.grad_fn, f"_saved_{n}"), (a if n == "self" else b).data) for n in theirs)
    rows.append((f"a * b, requires_grad {ra!s:<5} {rb!s:<5}", theirs, ours, same_values))
e_t = torch.randn(3, requires_grad=True).exp()
e = engine(torch.randn(3), requires_grad=True).exp()
rows.append(("a.exp()", ["result" if e_t.grad_fn._saved_result is not None else ""],
             ["result" if v is e else "input" for v, _ in e._saved.values()],
             torch.equal(e_t.grad_fn._saved_result, e_t.detach())))
for what, theirs, ours, same_values in rows:
    print(tr("{what:<32} torch keeps {theirs:<20} ours keeps {ours}", what=what, theirs=str(theirs), ours=ours))
claim("在每种情况下，你的引擎保存的都和 torch 的 MulBackward0、ExpBackward0 保存的一样",
      all(theirs == ours and same_values for _, theirs, ours, same_values in rows))
claim("为了求一个操作数的梯度，mul 保存的是“另一个”操作数；exp 保存的是它的输出",
      rows[0][1] == ["other"] and rows[1][1] == ["self"] and rows[3][1] == ["result"])

# %% [markdown]
# 只有 `a` 需要梯度时，`a * b` 保存的是 `b`（名为 `other`）：`a` 的梯度是 `grad * b`，而没有谁需要 `a`。只有两者都需要梯度时，两者才都会被保存。`exp` 保存它的输出，因为它的导数就是它本身。

# %% [markdown]
# ## 2 · 反向传播，以及释放它用过的值
#
# 反向传播从输出往回逐个访问节点，每个节点都要等流向它的梯度全部到齐之后才处理（即按拓扑顺序），并把一个值在每处使用传回来的梯度加起来。之后，除非指定 `retain_graph=True`，torch 会释放每个节点保存的值；第 02 课的“Trying to backward through the graph a second time”，就是一个节点被要求交出它已经不再持有的值。
#
# **先预测，再验证**。从同一个叶子张量构建两个损失，各自经过自己的一次乘法。

# %% reveals=["\u53ea\u5171\u4eab\u53f6\u5b50\u5f20\u91cf a", "l2\\.backward\\(\\) \u662f\u5426\u62a5\u9519 -> False"] tags=["predict"]
prediction = False  # SOLUTION: l1 = (a * b).sum()，l2 = (a * c).sum()；l1.backward() 之后，l2.backward() 会报错吗？（True/False）
a = torch.randn(3, requires_grad=True)
b, c = torch.randn(3), torch.randn(3)
l1, l2 = (a * b).sum(), (a * c).sum()
l1.backward()
try:
    l2.backward()
    raised = False
except RuntimeError:
    raised = True
check("l1.backward() 之后，l2.backward() 是否报错", prediction, raised,
      why="两个损失只共享叶子张量 a，别的什么也不共享：每个乘法都是各自独立的节点，l1 的反向传播只释放了 l1 的"
          "节点保存的值。只有第二次反向传播经过一个保存过值的节点时，才会报错。")


# %% [markdown]
# ### 动手实现，第 2 步：`backward`
#
# 写出 `loss.backward(retain_graph=False)`：从全 1 的梯度出发，等一个节点从它每一处被使用的地方传回的梯度都到齐之后，用 `node.unpack()` 返回的张量运行它的 `_backward`，并把被多次使用的值的梯度加起来。需要梯度的叶子张量把梯度加到 `.grad` 上（和 torch 一样，第二次反向传播会加到第一次的结果上）；其他值不保留梯度。然后，除非 `retain_graph=True`，释放每个节点保存的值（`node._saved = None`）；当反向传播遇到一个保存的值已被释放的节点时，抛出 torch 的错误：`RuntimeError(SECOND_TIME)`。留意那些什么也没保存的节点。检查程序在 torch 和你的引擎上运行 46 个程序：24 个随机表达式（比较梯度），调用两次 backward 的程序（带或不带 `retain_graph`），以及共享节点的两个损失。

# %%
@method
def backward(self, retain_graph=False):
    """从这个 Value（一个标量）出发做反向模式求导：每个需要梯度的叶子张量把自己的梯度加到 .grad 上。"""
    ### BEGIN SOLUTION
    order, seen = [], set()

    def visit(v):                         # 深度优先：每个值都排在计算出它的所有值之后
        if v not in seen:
            seen.add(v)
            for p in v.parents:
                visit(p)
            order.append(v)
    visit(self)
    grads = {self: torch.ones_like(self.data)}
    for v in reversed(order):             # 从输出往回
        grad = grads.pop(v, None)
        if grad is None:                  # 不需要梯度的值
            continue
        if v.is_leaf:
            v.grad = grad if v.grad is None else v.grad + grad
            continue
        if v._saved is None:
            raise RuntimeError(SECOND_TIME)
        for p, g in zip(v.parents, v._backward(grad, v.unpack())):
            if p.requires_grad:
                grads[p] = grads[p] + g if p in grads else g
        if v._saved and not retain_graph:
            v._saved = None               # 已释放；什么也没保存的节点，也就没有什么可缺的
    ### END SOLUTION


# %% tags=["test"]
solved_freeing = exercises.check_freeing(Value)
assert solved_freeing, "freeing：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# 第 02 课的前两个例子，分别在 torch 和你的引擎上运行：`(x * 2).sum()` 和 `(x + 1).sum()`，各做两次反向传播。

# %%
engine = exercises.engine_or_reference(Value, solved_saving, solved_freeing)
programs = {tr("x * 2, backward twice"): "x = leaf([3], requires_grad=True)\nloss = (x * 2).sum()\n"
                                         "loss.backward()\nloss.backward()",
            tr("x + 1, backward twice"): "x = leaf([3], requires_grad=True)\nloss = (x + 1).sum()\n"
                                         "loss.backward()\nloss.backward()",
            tr("x * 2, retain_graph"): "x = leaf([3], requires_grad=True)\nloss = (x * 2).sum()\n"
                                       "loss.backward(retain_graph=True)\nloss.backward()"}
agree = []
for what, program in programs.items():
    theirs, ours = lesson11.run(program, torch), lesson11.run(program, engine)
    said = lambda o: headline(o.message) if o.kind else tr("no error, x.grad = {grad}", grad=rounded(o.grads['x']))
    print(tr("{what:<23} torch: {outcome}", what=what, outcome=said(theirs)))
    print(tr("{what:<23} ours:  {outcome}", what="", outcome=said(ours)))
    agree.append(theirs.kind == ours.kind and (theirs.kind is not None or torch.equal(theirs.grads["x"], ours.grads["x"])))
claim("两边结果相同：x * 2 反向传播两次时报错，x + 1 得到 2 + 2，加 retain_graph 时得到 4",
      all(agree))

# %% [markdown]
# `(x + 1).sum()` 可以做两次反向传播而不报错，是因为它背后的两个节点什么也没保存：没有东西要释放，也就没有东西会缺。第 12 课接着用这个引擎，去处理保存之后又被原地修改的值，以及被原地修改的参数。

# %% [markdown] tags=["read-after-exercises"]
# | 你的引擎做什么 | torch 做什么 | 漏掉这一点时的后果 |
# |---|---|---|
# | `*` 保存另一个操作数，`@` 保存另一个矩阵，`exp` 保存自己的输出，`+` 和 `sum` 什么也不保存 | 相同（`_saved_other`、`_saved_mat2`、`_saved_result`） | 不报错：梯度错误或缺失，或者白白占用内存 |
# | 每个节点只运行一次，等它每一处用途传来的梯度都到齐之后再运行 | 相同 | 梯度被算了两遍，或者节点在梯度到齐之前就运行了 |
# | 节点的反向计算之后释放它保存的值，除非 `retain_graph=True` | 相同 | “Trying to backward through the graph a second time” |

# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - 在你写的这些运算里（torch 里的同名运算也一样），节点只保存它的导数为需要梯度的那些输入所读取的值：`a * b`
#   为 `a` 的梯度保存 `b`，为 `b` 的梯度保存 `a`，`@` 也是如此；`exp` 保存自己的输出；求和什么也不保存。（并非 torch 的每个运算都这样节省：第 09 课可以看到，冻结的卷积层仍会保存它的输入。）
# - 反向传播等一个节点的梯度全部到齐之后才运行它，把被使用两次的值的梯度加起来，并且除非 `retain_graph=True`，会释放每个节点保存的值；什么也没保存的节点也就没有什么可缺的，所以 `(x + 1).sum()` 可以做两次反向传播。如果每用到一次就运行一次节点，第二次用到时它保存的值已经被释放了。

# %% [markdown]
# ## 练习
#
# 上面的两个动手步骤就是本课的练习，每一步的检查程序都在它所在的那一节里。想继续深入的话（不做检查）：
#
# - 添加 `relu`，只保存它的导数要读的值（torch 的 `ReluBackward0` 保存的是输出），再用 `saved_by_torch` 在 `(a * b).relu()` 上对照两边保存了什么；
# - 给 `backward` 加一个 `inputs=` 参数，就像 `torch.autograd.backward` 的那样，只为这些叶子张量填写 `.grad`，并在几个表达式上验证它填写的梯度与 torch 的相同；
# - 把 `**` 写成一个独立的节点，让它保存底数，就像 torch 的 `PowBackward0` 保存 `self`（以及指数，一个普通的数）那样；再数一数 `(x ** 3).sum()` 保存了几个值，和现在 `x * x * x` 保存的四项比一比。
