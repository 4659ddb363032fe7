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
# # 第 07 课 · 自动微分医生
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/07_autograd_doctor.ipynb)
#
# [English](../07_autograd_doctor.ipynb) · [学生版](student/07_autograd_doctor.ipynb)
#
# **目标**。把自动微分医生套在出错的 GAN 代码上（也包括你自己的代码），拿到 PyTorch 报错信息里没有给出的答案：出问题的是*哪个*张量（精确到模块名和参数名），是前向传播的*哪一行*保存了它，是*哪一行*代码或哪一次 `optimizer.step()` 修改或释放了它，该怎么修，以及哪一课讲了这种修法。
#
# **材料**。原帖里的每一段出错代码（原帖 000、001、003、004），再加上三段常有人贴出来求助的同类代码。
#
# `with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):` 监视一个代码块。它只用公开的钩子做记录：一个 `TorchFunctionMode` 能看到每一次 torch 调用（前向运算、原地操作、`backward`、`.grad`、`.data`），全局模块钩子告诉它当前在运行哪个模块，全局优化器钩子能看到每一次 `step()`。当课程里讲过的某种错误从代码块中抛出时，医生会打印一份诊断，并把它作为 `error.diagnosis` 附在**原封不动的原始**异常上。那些不报错、却把模型训练错了的写法，会变成 `DoctorWarning` 警告。

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
import itertools
import warnings
from gan_lessons import strategies
from gan_lessons.doctor import doctor, DoctorWarning
from gan_lessons.exercises import check_diagnosis
from gan_lessons.lesson import headline
from gan_lessons.models import Generator, Discriminator

warnings.simplefilter("always", DoctorWarning)


# %% [markdown]
# ## 1 · PyTorch 说了什么，医生又补充了什么
#
# PyTorch 的版本错误会给出已保存张量的类型、形状和版本，但不会告诉你 `[512, 1]` 是 D 最后一层的权重（转置过的），也不会告诉你是哪一行修改了它。异常检测（第 03 课）指向的是前向传播的那一行。下面是原帖 000 的循环，照原文写出，在医生的监视下运行：

# %%
def loss_nonsaturating(d, g, x_real, *, device):
    """原帖 000 的损失函数，照原文写出。"""
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

torch.manual_seed(0)
g, d = Generator().to(device), Discriminator().to(device)
g_optimizer, d_optimizer = optim.Adam(g.parameters(), lr=1e-3), optim.Adam(d.parameters(), lr=1e-3)
x_real = torch.rand(8, 1, 28, 28) * 2 - 1

with expect_error(RuntimeError, r"\[torch\.(cuda\.)?FloatTensor \[512, 1\]\]"):
    with doctor(g=g, d=d, g_optimizer=g_optimizer, d_optimizer=d_optimizer) as doc:
        d_loss, g_loss = loss_nonsaturating(d, g, x_real.to(device), device=device)
        d_optimizer.zero_grad()
        d_loss.backward(retain_graph=True)
        d_optimizer.step()
        g_optimizer.zero_grad()
        g_loss.backward()

# %% [markdown]
# 从上往下读。出问题的张量是 `d.net.7.weight.T`：D 的 `Linear(512, 1)` 权重被保存下来的转置。保存它的那一行前向代码在 `loss_nonsaturating` 里，修改它的是 `d_optimizer.step()`，版本号和 PyTorch 打印的一样。此外，医生还对一个不报错的问题发出了警告：双重 sigmoid（第 05 课）。这里 D 的损失也没有分离假样本，所以它的反向传播会一路传进 g；不过在 G 自己的反向传播之前，`g_optimizer.zero_grad()` 已经把它留在 g 的 `.grad` 里的东西清掉了，没有哪一步用到错误的梯度，所以医生不为此发出警告：警告意味着训练是错的。（要是 g 真的用这些梯度做了更新，医生就会警告“一个损失同时训练了两个网络”。）诊断本身也是数据：

# %%
diagnosis = doc.diagnoses[-1]
print(diagnosis.kind, "|", diagnosis.facts["tensor"])
print(tr("warnings raised in the block: {warnings}",
         warnings=[headline(d.summary) for d in doc.diagnoses if d.kind == "suspicious"]))
warned = [headline(d.summary) for d in doc.diagnoses if d.kind == "suspicious"]
claim("诊断是 d.net.7.weight.T 上的版本错误", diagnosis.kind == "version"
      and diagnosis.facts["tensor"].startswith("d.net.7.weight.T [512, 1]"), on='本课程的自动微分医生')
claim("医生还警告了双重 sigmoid，而没有为 D 一路传进 g 的反向传播发出警告，因为没有哪一步用到它",
      any("送进了 binary_cross_entropy_with_logits" in w for w in warned) and not any("同时训练了两个网络" in w for w in warned),
      on='本课程的自动微分医生')

# %% [markdown]
# 医生的钩子挂在它所监视的代码块中的每一次 torch 调用、每一个模块和每一次优化器更新上。监视会不会改变被监视的东西？下面用同一个随机种子把一个干净的训练步（用 Adam 训练一个小分类器）跑两次：一次直接跑，一次在医生的监视下跑。先预测，再比较这一步的损失和更新之后的每个权重。

# %% reveals=["\u6709\u5b83\u6ca1\u5b83.{0,60}\u76f8\u540c", "\u4ece\u4e0d\u6539\u53d8(\u4efb\u4f55)?\u7ed3\u679c"] tags=["predict"]
prediction = False  # SOLUTION: 对一个干净的训练步，医生会改变它的损失，或更新之后的任何一个权重吗？（True/False）
def clean_step():
    """小分类器的一次 Adam 更新；返回它的损失和更新之后的每个权重。"""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = optim.Adam(net.parameters())
    loss = F.cross_entropy(net(torch.randn(16, 4)), torch.randint(0, 3, (16,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return [loss, *net.parameters()]

plain = clean_step()
with doctor() as doc:
    watched = clean_step()
changed = not all(torch.equal(a, b) for a, b in zip(plain, watched))
check("医生改变了干净的训练步", prediction, changed,
      why=f"医生只做记录：有它没它，损失和更新之后全部 {len(plain) - 1} 个权重张量都逐位相同。")
claim("对这个干净的训练步，医生没有任何话要说", doc.diagnoses == [], on='本课程的自动微分医生')



# %% [markdown]
# ## 2 · 四个常有人贴出来求助的出错训练循环
#
# 真实代码还会以博客里从没列出过的方式出错。这里是四个新例子。
#
# **(a) 对 G 的输出做 `+=`**。有人在 G 的输出上原地加一点噪声（“instance noise”）。于是 G 的反向传播在 `x_fake` 上报出版本错误。请预测：保存了那个过期的 `x_fake` 的，是哪个自动微分节点（写出它的 `grad_fn` 名称，形如 `AddmmBackward0`），然后在医生的监视下运行这个循环。

# %% reveals=["TanhBackward0", "tanh \u4f1a?\u4fdd\u5b58(\u5b83\u7684|\u81ea\u5df1\u7684)?\u8f93\u51fa"] tags=["predict"]
prediction = "TanhBackward0"  # SOLUTION: 被 += 弄得过期的 x_fake，是哪个自动微分节点保存的？
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
D = nn.Linear(16, 1)
opt_G = optim.Adam(G.parameters())
with expect_error(RuntimeError, "modified by an inplace operation"):
    with doctor(G=G, D=D, opt_G=opt_G) as doc:
        x_fake = G(torch.randn(4, 8))
        x_fake += 0.01 * torch.randn(4, 16)        # “instance noise”，原地操作
        loss_G = F.softplus(-D(x_fake)).mean()
        loss_G.backward()
node = doc.diagnoses[-1].facts["saved by"].split()[0]
check("保存了过期 x_fake 的节点", prediction, node,
      why="tanh 会保存它的输出，因为它的反向传播 1 - tanh(x)² 正是用输出算的：生成 x_fake 的运算保存了它，"
          "而 += 随后修改了它。")

# %% [markdown]
# 生成激活值的运算保存了这个激活值，所以原地修改它，就会破坏那个运算的反向传播：`sigmoid`、`exp` 或 `ReLU(inplace=True)` 的输出也是一样（见下面的速查表）。改成非原地的写法（`x_fake = x_fake + noise`），两处反向计算就都能拿到各自保存的张量。

# %% [markdown]
# **(b) G 的损失用的是 D 的旧输出**。顺序是先 D 后 G，但 G 的损失没有再调用一次 D，而是复用了 D 在更新之前算出的 logits。先预测医生会怎么说（这里的 D 是一个小小的 `nn.Sequential`：它的各层是 `D[0]` 到 `D[3]`，参数名是 `D.1.weight` 这样的形式）：

# %% reveals=["\u4fee\u6539\u8005\uff1aopt_D\\.step\\(\\)\uff0c\u4f4d\u4e8e\u7b2c \\d+ \u884c\uff08`opt_D\\.step\\(\\)`\uff09", "\u4fdd\u5b58 D\\.3\\.weight\\.T \u4e4b\u540e"] tags=["predict"]
prediction = dict(kind="version", tensor="D.3.weight", line="opt_D.step()")  # SOLUTION: 医生会怎么说？写成 dict(kind=..., tensor=..., line=...)
torch.manual_seed(0)
G = Generator()
D = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1))
opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
with expect_error(RuntimeError, "modified by an inplace operation") as caught:
    with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
        x_fake = G(torch.randn(8, 64))
        logits_fake = D(x_fake)
        opt_D.zero_grad()
        loss_D = strategies.bce(D(x_real), 1) + strategies.bce(D(x_fake.detach()), 0)
        loss_D.backward()
        opt_D.step()
        opt_G.zero_grad()
        loss_G = strategies.bce(logits_fake, 1)    # D 在更新之前的输出
        loss_G.backward()
check_diagnosis(prediction, caught.error.diagnosis)

# %% [markdown]
# **(c) 一个优化器管两个网络，再加上分离**。什么错也不报。医生警告：更新时 G 的参数没有梯度（第 04 课）：

# %%
torch.manual_seed(0)
G, D = nn.Linear(4, 2), nn.Linear(2, 1)
opt = optim.Adam(itertools.chain(G.parameters(), D.parameters()))
with doctor(G=G, D=D, opt=opt) as doc:
    opt.zero_grad()
    F.softplus(D(G(torch.randn(4, 4)).detach())).mean().backward()
    opt.step()
print(tr("warnings: {warnings}", warnings=[headline(d.summary) for d in doc.diagnoses]))
claim("一条警告：更新时 G 的 2 个参数没有 .grad",
      len(doc.diagnoses) == 1 and "4 个参数里有 2 个没有 .grad" in doc.diagnoses[0].summary
      and doc.diagnoses[0].facts.get("parameters") == ["G.weight", "G.bias"], on='本课程的自动微分医生')

# %% [markdown]
# **(d) 用 `.data` 做权重裁剪，却放错了位置**。原始的 WGAN 会裁剪 D 的权重；如果用 `.data` 把它写在 D 的前向传播和反向传播之间，什么错也不报。`.data` 修改权重时不会让它的版本计数器增加，于是反向传播把旧的激活值和新的权重混在一起用（第 03 课说明了这样的梯度是错的）。医生会发出警告：

# %%
torch.manual_seed(0)
D = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
with doctor(D=D) as doc:
    out = D(torch.randn(4, 3))
    for p in D.parameters():
        p.data.clamp_(-0.01, 0.01)              # 太早了：上面的前向传播保存了这些权重
    out.mean().backward()
print(tr("warnings: {warnings}", warnings=[headline(d.summary) for d in doc.diagnoses]))
claim("一条警告，指出了 .data 修改", len(doc.diagnoses) == 1 and "`.data.clamp_`" in doc.diagnoses[0].summary, on='本课程的自动微分医生')

# %% [markdown]
# ## 3 · 每个单元格里都有医生：`%load_ext gan_lessons`
#
# 在脚本里，用 `with doctor(...)` 把代码包起来就行。在笔记本里，这个扩展替你做这件事：每个单元格都在医生的监视下运行。名字是在诊断需要时才去查的，而不是在单元格运行之前：先查笔记本里的变量（取它们此刻的值，所以同一个单元格里新建的模型和优化器也算在内），再查你自己的对象下一层属性上的模块（如 `agent.critic`），再查正在运行的函数的局部变量；一个在哪里都没有名字的模块，就用它的类名来称呼（`Critic.net.2.weight`）。当这些错误之一从单元格里抛出时，诊断会出现在平常的回溯信息下面，而这份回溯正是没有医生时你会看到的那一份。其他任何异常的显示都与不加载扩展时完全一样（`tests/doctor/test_doctor.py` 对两者都做了检查）。下面它抓到了一个不报错的 bug：

# %%
# %load_ext gan_lessons

# %%
torch.manual_seed(0)
D = nn.Linear(2, 1)
logits = D(torch.randn(5, 2))
loss_G = F.binary_cross_entropy_with_logits(torch.sigmoid(logits), torch.ones(5, 1))

# %% [markdown]
# 学生们实际上是这样写的：整个循环放在一个单元格里，连模型和优化器也在里面。这是原帖 000 的错误在 WGAN 式评判器上的翻版：评判器先更新，然后 G 的损失又穿过评判器更新之前的计算图做反向传播。（`expect_error` 特意捕获了这个错误，好让笔记本继续往下运行；在扩展之下，它还会显示诊断，打印在错误信息下面。）

# %%
with expect_error(RuntimeError, r"\[torch.FloatTensor \[32, 1\]\], which is output 0 of AsStrided"):
    torch.manual_seed(0)

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

        def forward(self, x):
            return self.net(x)

    netG, netD = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)), Critic()
    optG, optD = optim.Adam(netG.parameters(), lr=1e-3), optim.Adam(netD.parameters(), lr=1e-3)
    real = torch.randn(16, 2) + 3
    for it in range(3):
        fake = netG(torch.randn(16, 8))
        out_fake = netD(fake)
        lossD = out_fake.mean() - netD(real).mean()
        optD.zero_grad()
        lossD.backward(retain_graph=True)
        optD.step()
        lossG = -out_fake.mean()
        optG.zero_grad()
        lossG.backward()
        optG.step()

from gan_lessons.doctor import active
found = active().diagnoses[-1]
claim("即使是在同一个单元格里新建的，评判器的权重仍然用它的变量名指出，连同修改它的那次更新",
      found.facts["tensor"].startswith("netD.net.2.weight.T [32, 1]") and found.facts["modified by"].startswith("optD.step()"),
      shown=f'{found.facts["tensor"].split(" (")[0]}; {found.facts["modified by"].split(" (")[0]}', on='本课程的自动微分医生')

# %%
# %unload_ext gan_lessons

# %% [markdown]
# ### 对整个脚本使用医生
#
# 你要调试的 GAN 代码，大多是脚本，而不是笔记本单元格。`python -m gan_lessons doctor train.py ARGS` 会像 `python train.py ARGS` 那样运行它（用它自己的 `sys.argv`、`sys.path[0]` 和 `__name__ == "__main__"`；`-m MODULE` 则运行一个模块），只是放在医生的监视下。遇到这些错误之一时，它先打印诊断，再打印平常的回溯信息，并以状态 1 退出；干净的脚本，输出和退出状态都与直接运行时相同；而加上 `--strict` 时，如果医生只发出了警告，就以状态 3 退出。下面把第 1 节的循环写成一个文件。在正确的修法（`修法：`）下面，列出了人们常会想到、却行不通的修法（`行不通：`），每一条都附有原因。

# %%
import subprocess
import sys
import tempfile
from pathlib import Path

LOOP = """import torch
import torch.nn.functional as F
from gan_lessons.models import Discriminator, Generator

torch.manual_seed(0)
g, d = Generator(), Discriminator()
g_optimizer, d_optimizer = torch.optim.Adam(g.parameters()), torch.optim.Adam(d.parameters())
bce = F.binary_cross_entropy_with_logits
x_real = torch.rand(8, 1, 28, 28) * 2 - 1
dgz = d(g(torch.randn(8, 64)))
d_loss = bce(d(x_real), torch.ones(8)) + bce(dgz, torch.zeros(8))
g_loss = bce(dgz, torch.ones(8))
d_optimizer.zero_grad()
d_loss.backward(retain_graph=True)
d_optimizer.step()
g_optimizer.zero_grad()
g_loss.backward()
"""
with tempfile.TemporaryDirectory() as folder:
    (Path(folder) / "train.py").write_text(LOOP)
    done = subprocess.run([sys.executable, "-m", "gan_lessons", "doctor", "train.py"], cwd=folder,
                          capture_output=True, text=True)
said = done.stderr
end = said.index("Traceback")
diagnosis = said[said.rfind("自动微分医生：", 0, end):end]     # 回溯信息之前的最后一份报告
print(diagnosis)
claim("作为脚本运行时，医生指出了过期的权重和修改它的那次更新，以状态 1 退出，并告诉你不要去用 "
      "retain_graph=True", done.returncode == 1 and "d.net.7.weight.T" in diagnosis
      and "修改者：d_optimizer.step()，位于第 15 行" in diagnosis and "行不通：retain_graph=True" in diagnosis,
      shown=f"退出状态 {done.returncode}", on='本课程的自动微分医生')


# %% [markdown]
# ## 速查表
#
# 大多数时候，你遇到这些错误时医生并没有开着。这张表把每条报错信息对应到它的原因、修法，以及讲解它的那一课。
#
# | PyTorch 的报错 | 原因 | 修法 | 课 |
# |---|---|---|---|
# | `a leaf Variable that requires grad is being used in an in-place operation.` | 在自动微分记录期间，对参数（或其他叶子张量）做原地操作 | 像优化器那样放在 `torch.no_grad()` 下做；或者改成非原地的写法 | 01 |
# | `UserWarning: The .grad attribute of a Tensor that is not a leaf Tensor is being accessed` | 读取激活值的 `.grad` | 在 `backward()` 之前调用 `.retain_grad()`，或者改读叶子张量 | 01 |
# | `Trying to backward through the graph a second time` | 两个损失共享计算图的一部分，第一次 `backward()` 把它释放了 | 在不该到达共享张量的那个损失里对它 `detach()`；或者重新做一次前向传播；或者 `retain_graph=True`（耗内存） | 02 |
# | `... modified by an inplace operation: [torch.FloatTensor [512, 1]], which is output 0 of AsStrided, is at version 2; expected version 1` | `optimizer.step()`（或任何原地操作）修改了一个尚未执行的反向传播所保存的张量；`[512, 1]` 是转置过的 `Linear` 权重 | 先完成所有穿过 D 的反向传播，再调用 `opt_D.step()`，或者在它之后重新做前向传播；给 D 的假样本要分离 | 03, 05 |
# | 同上，但是 `which is output 0 of Sigmoid` / `Tanh` | 对一个激活值做 `ReLU(inplace=True)` 或 `+=`，而生成它的运算保存了自己的输出 | 改成非原地的写法，或者先 `clone()` | 03 |
# | `Inference tensors cannot be saved for backward` | 在 `inference_mode` 下生成的张量被拿去训练 | 改用 `torch.no_grad()` | 04 |
# | 不报错（梯度是错的） | 修改 `.data`；在 `*_with_logits` 之前做 `sigmoid`；一个优化器管两个网络时使用分离 | `no_grad()` / `clone()`；传入原始 logits；如果 model1 应该从第二个损失中学习，就不要分离：在任何 `step()` 之前完成所有反向传播（一旦 model1 有两层，二者之间夹一次共享的 `step()` 就会引发版本错误）；如果不应该，就分离，并给每个网络各配一个优化器 | 03, 05, 04, 02 |

# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - 医生能指出出问题的张量（`d.net.7.weight.T`）、保存它的那一行前向代码，以及修改它的 `step()` 或原地操作；对于已被释放的计算图，它能指出更早的那次反向传播和共享的前向传播。
# - 它从不改变任何结果，也从不吞掉异常；它的诊断附在原来的错误上。
# - 它的警告能抓住不报错的问题：双重 sigmoid、修改 `.data`、更新时有参数没有梯度，以及同一个损失的梯度被 D 和 G 的优化器都用来更新（G 的损失穿过 D，或者 D 的损失用了没有分离的假样本，又留在了 G 的 `.grad` 里）。浪费了计算但无害的做法，只会得到一行提示信息。

# %% [markdown]
# ## 练习
#
# ### 动手修复：原帖 000 的训练步，直到医生无话可说
#
# 第 1 节的循环有三个 bug：它抛出的版本错误、医生警告过的双重 sigmoid，以及 D 的损失用了没有分离的假样本，它的反向传播会穿过 G 的损失还需要的那张计算图，一路传进 `g`。把原帖 000 的训练步写成一个函数，保持它原来的方案（先更新 D，再更新 G；`g` 只做一次前向传播），并且不含这三个 bug：标签、两个损失、每个优化器的 `zero_grad`、`backward` 和 `step`，顺序都要对；没有反向传播再需要的计算图，也不要留着。检查程序先在医生的监视下运行一次你的训练步，医生既不能报错也不能警告；然后在原帖 000 的模型上运行两次，在每次优化器更新时把 `g` 和 `d` 的每个梯度与正确的梯度比较。只要还有 bug 没修好，它就会打印医生对这个 bug 的报告或警告，以及它在这里意味着什么：先读一读，就像你在自己的代码上会做的那样。

# %%
def fixed_step(g, d, g_optimizer, d_optimizer, x_real, z):
    """修好之后的原帖 000 训练步：先更新 D，再更新 G；g 只做一次前向传播；医生无可报告。"""
    ### BEGIN SOLUTION
    bce = F.binary_cross_entropy_with_logits         # 接收原始 logits：前面不要加 sigmoid
    real_label, fake_label = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)                                          # g 唯一的一次前向传播
    d_loss = bce(d(x_real), real_label) + bce(d(gz.detach()), fake_label)   # D 的反向传播到 gz 为止
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(d(gz), real_label)                    # 对刚更新过的 d 重新做一次前向传播
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()
    ### END SOLUTION

my_answer = fixed_step  # SOLUTION: 把它指向你的 fixed_step

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_seed000_step(my_answer)
assert solved, "seed000_step：还没有完成，或者还不对：上面几行说明了缺什么"


# %% [markdown]
# ### 把你自己的 bug 带给医生
#
# 下面这个小 GAN 训练步，只要 D 的损失用的是 `x_fake.detach()`，就能正常运行。用第 01 到 03 课讲过的某个错误把它弄坏（哪一行都可以改：对参数做原地操作、穿过已被释放的计算图做第二次反向传播、在一个需要旧权重的反向传播之前调用 step），并说出你预期的诊断：`"leaf_inplace"`、`"freed"` 或 `"version"`。检查程序会在医生的监视下运行你的循环，打印它的报告，并告诉你有没有可供诊断的错误，以及医生发现的是哪一类。

# %%
def my_buggy_loop():
    """一次 D 更新和一次 G 更新；只要 D 的损失用的是 x_fake.detach()，就是正确的。"""
    torch.manual_seed(0)
    G, D = nn.Linear(4, 4), nn.Linear(4, 1)
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    x_fake = G(torch.randn(8, 4))
    fake_for_D = x_fake  # SOLUTION: x_fake.detach() 是正确的；怎样才能让下面的某次反向传播失败？
    loss_D = F.softplus(D(fake_for_D)).mean()
    opt_D.zero_grad(); loss_D.backward(); opt_D.step()
    loss_G = F.softplus(-D(x_fake)).mean()
    opt_G.zero_grad(); loss_G.backward(); opt_G.step()

expected = "freed"  # SOLUTION: 你预期的诊断类别："leaf_inplace"、"freed" 或 "version"
my_answer = my_buggy_loop  # SOLUTION: 把它指向你的循环
solved = exercises.check_doctor_bug(my_answer, expected)

# %% [markdown]
# ## 延伸 · 其他原帖里的出错代码
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 每篇原帖都从不同的方向撞上了这些错误中的一个。医生每次都能指出问题出在哪个环节。
#
# 先看最小的情形：只有一个损失，对它调用两次 `backward()`。第 1 节的诊断属于 `"version"` 类（已保存张量被原地修改了）。医生认识的每一种自动微分错误都有自己的类别，每一类都以出了什么问题来命名；下面是从它的错误目录里读出的全部类别名：

# %%
from gan_lessons.doctor.catalogue import CATALOGUE
print(", ".join(kind.key for kind in CATALOGUE))

# %% reveals=["first (call|backward) freed|\u7b2c\u4e00\u6b21\u53cd\u5411\u4f20\u64ad\u7528\u5b8c\u5c31\u91ca\u653e", "\u7b2c\u4e00\u6b21\u8c03\u7528\u5df2\u7ecf\u91ca\u653e\u4e86\u5b83\u7684\u8ba1\u7b97\u56fe"] tags=["predict"]
prediction = "freed"  # SOLUTION: 对同一个 y 调用两次 `y.backward()`：会得到哪一类诊断？
x = torch.ones(2, requires_grad=True)
kind = None                                  # 如果没有报错，就保持 None
try:
    with doctor(x=x):
        y = (x * x).sum()
        y.backward()
        y.backward()
except RuntimeError as error:
    kind = error.diagnosis.kind
check("诊断类别", prediction, kind,
      why="mul 为它的反向传播保存了 x（两次）；第一次反向传播用完就释放了它，所以第二次没有东西可用。这是同一个"
          "损失，所以医生给出的修法是只调用一次 backward()，而不是分离。")


# %% [markdown]
# 从这里开始，每段有问题的代码运行之前，先写下医生会怎么说，写成 `dict(kind=..., tensor=..., line=...)`：诊断的类别；它点名的张量（`"version"` 类写过期的那个张量，用“所属模块加属性名”的形式，例如 `G.bias`；`"freed"` 类写第二个损失经由哪个张量到达被释放的那部分）；以及该怪的那一行，也就是改动了这个张量、或者释放了那部分计算图的那一行（写它的代码，或者它在单元格里的行号）。医生的诊断就是答案。
#
# **原帖 001 的 G/D 小例子**，先不加 `retain_graph`：

# %%
def seed001(retain_graph):
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Linear(2, 2)
    optimG, optimD = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    with doctor(G=G, D=D, optimG=optimG, optimD=optimD):
        t = torch.tensor([1., 2], requires_grad=True)
        g = G(t)
        d = D(g)
        lossD = d.sum()
        optimD.zero_grad()
        lossD.backward(retain_graph=retain_graph)
        optimD.step()
        lossG = (g + d).sum()
        optimG.zero_grad()
        lossG.backward()


# %% reveals=["\u91ca\u653e\u8005\uff1a\u7b2c \\d+ \u884c\uff08`lossD", "\u7b2c\u4e00\u6b21\u53cd\u5411\u4f20\u64ad\u5df2\u7ecf\u628a\u8fd9\u90e8\u5206\u91ca\u653e\u4e86"] tags=["predict"]
prediction = dict(kind="freed", tensor="g", line="lossD.backward(retain_graph=retain_graph)")  # SOLUTION: 医生会怎么说？写成 dict(kind=..., tensor=..., line=...)
with expect_error(RuntimeError, "backward through the graph a second time") as caught:
    seed001(retain_graph=False)
check_diagnosis(prediction, caught.error.diagnosis)

# %% [markdown]
# 诊断里以“行不通：”开头的那一行已经说了，在这里加上 `retain_graph=True` 会怎样。原帖 001 试的正是这个（在 Colab 上，ipykernel 的版本是 6.17，`DoctorWarning` 可能出现在错误信息之后，而不是之前）：

# %%
with expect_error(RuntimeError, "is at version 2; expected version 1"):
    seed001(retain_graph=True)

# %% [markdown]
# 原帖 001 自己对这两次失败是这样解释的，和医生说的一致：
#
# > 此时我们执行lossG.backward()一定会报错,因为从G到D的计算图都被释放了。
#
# > 前面提到optimD.step()执行以后,D的参数被修改了且是inplace操作,而lossG的计算依赖于D的输出d,那么lossG在反向传播时肯定会发生inplace error。
#
# 也就是说：不加 `retain_graph` 时，从 G 到 D 的计算图在第一次反向传播时就被释放了；加上它，`optimD.step()` 又原地修改了 D 的参数，而 `lossG` 依赖 D 的输出 `d`。

# %% [markdown]
# **原帖 003 的策略一**（`gan_lessons.strategies.retain_graph_seed003`）：医生指出的那几行都在这个策略函数里，而这正是要改的代码。

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()
opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
noise = lambda n: torch.randn(n, G.z_dim)
with expect_error(RuntimeError, "modified by an inplace operation"):
    with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
        strategies.retain_graph_seed003(G, D, opt_G, opt_D, x_real, noise)

# %% [markdown]
# **原帖 004 的 model1/model2 循环**：两个损失，各有各的优化器。还是先预测。

# %% reveals=["\u91ca\u653e\u8005\uff1a\u7b2c \\d+ \u884c\uff08`l2", "\u7ecf\u7531 `a` \u8fde\u5230\u7b2c\u4e8c\u4e2a\u635f\u5931"] tags=["predict"]
prediction = dict(kind="freed", tensor="a", line="l2.backward()")  # SOLUTION: 医生会怎么说？写成 dict(kind=..., tensor=..., line=...)
torch.manual_seed(0)
model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
optimizer1 = optim.Adam(model1.parameters(), lr=0.001, betas=(0.5, 0.999))
optimizer2 = optim.Adam(model2.parameters(), lr=0.001, betas=(0.5, 0.999))
loss = nn.CrossEntropyLoss()
data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
with expect_error(RuntimeError, "backward through the graph a second time") as caught:
    with doctor(model1=model1, model2=model2, optimizer1=optimizer1, optimizer2=optimizer2):
        a = model1(data)
        b = model2(a)
        l1, l2 = loss(a, label), loss(b, label)
        optimizer2.zero_grad()
        l2.backward()
        optimizer2.step()
        optimizer1.zero_grad()
        l1.backward()
check_diagnosis(prediction, caught.error.diagnosis)

# %% [markdown]
# **原帖 001 的叶子张量错误**，以及**它读取非叶子张量的 `.grad`**：

# %%
a = torch.tensor([1., 2, 3], requires_grad=True)
with expect_error(RuntimeError, "leaf Variable that requires grad"):
    with doctor(a=a):
        c = a * 2
        a += 1

# %%
G = nn.Linear(2, 2)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)   # PyTorch 自己的警告；医生的诊断在后面
    warnings.simplefilter("always", DoctorWarning)
    with doctor(G=G) as doc:
        x_fake = G(torch.randn(3, 2))
        x_fake.sum().backward()
        x_fake.grad
