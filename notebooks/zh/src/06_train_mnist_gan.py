# ---
# jupyter:
#   accelerator: GPU
#   colab:
#     gpuType: T4
#     provenance: []
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
# # 第 06 课 · 训练完整的 MNIST GAN
#
# [![在 Colab 中打开](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/gan-lessons/gan-lessons/blob/main/notebooks/zh/06_train_mnist_gan.ipynb)
#
# [English](../06_train_mnist_gan.ipynb) · [学生版](student/06_train_mnist_gan.ipynb)
#
# **目标**。把整门课串起来。用你选的更新策略在 MNIST 上训练原帖 000 的 GAN，看着样本一步步变好，弄清损失曲线能告诉你什么、不能告诉你什么，并用一个数值指标来衡量生成的手写数字，而不是眯着眼睛去看。
#
# **材料**。原帖 000 的 Generator（Linear、BatchNorm、PixelShuffle、Conv）和 Discriminator（`gan_lessons.models`），`z_dim = 64`，另外在 G 的末尾加一个 `nn.Tanh()`（第 6 节比较有它和没有它的各一次运行）；以及第 05 课的各种策略。
#
# 在 GPU 上，本笔记本训练完整的一次运行（20 个迭代周期，每个迭代周期 60,000 张图像）。在 CPU 上以及 CI 中，快速模式用 6,400 张图像、三倍的学习率训练 400 步，在两个 CPU 核上大约一分钟：足以得到十个类别都有的模糊数字，并用一个分类器加以检验。它还会展示本项目的命令行事先训练好的一次 20 个迭代周期的运行，以及与之一同记录下来的各项指标。每个单元格都会说明它运行的是哪种情况。

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
import dataclasses
import json
import matplotlib.pyplot as plt
from gan_lessons import data, metrics, plots, training
from gan_lessons.models import Discriminator, Generator
from gan_lessons.training import TrainConfig

# %% [markdown]
# ## 1 · 数据放在设备上
#
# 这两个小模型的一个训练步很短，所以每一步对每张图像做的任何工作，都会体现在每步的用时上。基于 torchvision 的 MNIST 构建的 `DataLoader` 会在 Python 里逐张把图像转成 PIL 图像，再转回张量。MNIST 很小，所以训练器一次性把全部 60,000 张训练图像作为一个张量复制到设备上，再从中切出批量，不再对单张图像做任何处理。（这能省多少时间取决于机器；本课不测量它。）
#
# `data.mnist_tensors` 返回的就是这个张量，训练器按原样保存它。G 的样本是 [-1, 1] 中的浮点数。先预测真实图像是以什么形式存储的，再运行单元格。

# %% reveals=["uint8", "\\b47(\\.0)? MB"] tags=["predict"]
prediction = torch.uint8  # SOLUTION: data.mnist_tensors 返回的训练图像是什么 dtype（填一个 torch 的 dtype）？
images, labels = data.mnist_tensors(train=True)
check("images.dtype", prediction, images.dtype,
      why=f"每个像素一个字节：全部 60,000 张共 {images.numel() * images.element_size() / 1e6:.0f} MB（float32 要占 4 倍）；"
          "每个批量在使用时才转换成 [-1, 1] 中的浮点数。")

# %%
print(tr("training images: {shape} {dtype} {mb:.1f} MB", shape=tuple(images.shape), dtype=images.dtype,
         mb=images.numel() * images.element_size() / 1e6))
batch = data.to_unit_range(images[:64])
print(tr("one batch in G's range: {shape} min {low} max {high}", shape=tuple(batch.shape), low=batch.min().item(),
         high=batch.max().item()))
claim("60,000 张训练图像以 uint8 存储，占用不到 50 MB", images.dtype == torch.uint8 and len(images) == 60000 and images.numel() * images.element_size() < 50e6,
      on='这台机器上的 MNIST 文件')

# %% [markdown]
# ## 2 · 训练循环调用策略函数，没有隐藏任何东西
#
# `gan_lessons.training` 就是一个循环：取一个批量，调用第 05 课的策略函数（`zero_grad`、`detach`、`backward`、`step` 全在里面），**在设备上**累积损失（每步调用一次 `.item()`，就会让每一步都等待 GPU），每个迭代周期写一次检查点。配置是一个小小的 dataclass；每次运行只需写出与默认值不同的那几项。
#
# 运行之前，先回答两个问题。原帖 000 的 G 把 64 个数变成 784 个像素；它的 D 把 784 个像素变成一个数。两者哪个参数更多？

# %% reveals=["1,654,121", "1,640,033"] tags=["predict"]
prediction = False  # SOLUTION: 原帖 000 的 D 的参数比它的 G 多吗？（True/False）
count = lambda net: sum(p.numel() for p in net.parameters())
G_seed, D_seed = Generator(), Discriminator()
check("D 的参数比 G 多", prediction, count(D_seed) > count(G_seed),
      why=f"G 有 {count(G_seed):,} 个参数，D 有 {count(D_seed):,} 个：几乎相等。两者的大部分参数都在一个连接 512 个数和 "
          f"64 x 7 x 7 = 3,136 个数的 Linear 层里，只是方向相反：G 的 512 -> 3,136 有 {count(G_seed.net[3]):,} 个，D 的 "
          f"3,136 -> 512 有 {count(D_seed.net[5]):,} 个。")

# %% [markdown]
# 训练器把它保存的图像切成每批 64 张，每个迭代周期换一种顺序。如果保存 1,000 张图像，一个迭代周期有多少步？（1,000 不是 64 的倍数。）

# %% reveals=["1000 // 64 = 15", "\u4e22\u6389\u6700\u540e(\u90a3\u4e2a)?\u4e0d\u5b8c\u6574\u7684\u6279\u91cf"] tags=["predict"]
prediction = 15  # SOLUTION: 训练器保存 1,000 张图像、批量大小为 64 时，一个迭代周期有几步？
small = training.Trainer(TrainConfig(limit=1000, out=str(training.RUNS / "lesson06"), device=str(device)))
check("每个迭代周期的步数", prediction, small.steps_per_epoch,
      why=f"1000 // 64 = {small.steps_per_epoch}：训练器丢掉最后那个不完整的批量（{1000 % 64} 张图像），"
          "让每一步的形状都相同；下一个迭代周期换了顺序，这些图像也会用上。")

# %%
full = TrainConfig(out=str(training.RUNS / "lesson06"), device=str(device))   # RUNS：在 notebooks/ 之外
quick = dataclasses.replace(full, epochs=4, limit=6400, lr_G=6e-4, lr_D=6e-4)   # 400 步
cfg = quick if QUICK else full
changed = {k: v for k, v in dataclasses.asdict(cfg).items() if v != getattr(TrainConfig(), k) and k != "out"}
print(tr("quick mode: {changed}", changed=changed) if QUICK else tr("full run: {changed}", changed=changed))
print(tr("steps per epoch: {n}", n=cfg.limit // cfg.batch_size if cfg.limit else 60000 // cfg.batch_size))

# %% tags=["nbval-ignore-output"]
from tqdm.auto import tqdm
from IPython.display import clear_output

grids = []
bar = tqdm(total=cfg.epochs, desc=tr("training (quick)") if QUICK else tr("training (full)"), unit=tr("epoch"))
def on_epoch(trainer):
    grids.append(trainer.sample().cpu())
    bar.update(1)
    bar.set_postfix(loss_D=trainer.history[-1]["loss_D"], loss_G=trainer.history[-1]["loss_G"])

trainer = training.train(cfg, on_epoch=on_epoch)
bar.close()
clear_output()   # 清掉实时进度条，只留下它结束时的那一行（存下来的控件会显示 0%）
print(bar)
print(tr("seconds per epoch: {seconds}", seconds=[h["seconds"] for h in trainer.history]))

# %% [markdown]
# 每个迭代周期之后，网格都使用同样的 64 个噪声向量，所以各个面板可以相互比较：

# %%
fig, axes = plt.subplots(1, len(grids), figsize=(3 * len(grids), 3.2))
for i, (ax, grid) in enumerate(zip(axes, grids)):
    ax.imshow(plots.grid_array(grid))
    ax.set_title(tr("epoch {n}", n=i + 1))
    ax.axis("off")
fig.suptitle(tr("fixed-noise samples (quick mode: {n} images)", n=cfg.limit) if QUICK
             else tr("fixed-noise samples (full run)"))
plt.show()

# %% [markdown]
# ## 3 · 损失能告诉你什么，不能告诉你什么
#
# 在普通的训练中，损失下降意味着进步。GAN 却是一场双人博弈：`loss_D` 和 `loss_G` 衡量的都是一方对抗**当前**另一方的表现，而另一方一直在变。`loss_D` 下降，可能意味着 D 正在取胜，G 的梯度几乎不带有用的信号；两条平坦的曲线，可能意味着健康的僵持，也可能意味着模式崩溃，只剩少数几个数字。所以，看曲线是为了发现警告信号，而不是为了看进展：
#
# - `loss_D` 接近 0，`loss_G` 不断上升：D 赢了。使用非饱和损失时，G 仍然能得到很强的梯度（第 05 课第 0 节），但这个梯度只是在说“在这个 D 眼里，显得再真一点”，而 D 已经不再学习了。
# - 两条曲线都剧烈振荡：学习率对这场博弈来说太高了。
# - 平滑的曲线既说明不了样本的质量，也说明不了 G 能生成多少类数字。

# %%
plots.loss_figure({cfg.strategy: trainer.history}, title=tr("losses per epoch (this run)"))
plt.show()

# %% [markdown]
# ## 4 · 衡量生成的数字
#
# 要评判样本，我们需要一个数字。本项目训练过一次（`python -m gan_lessons classifier`）并随包发布的一个小分类器，给出三个数字：
#
# - **MNIST-FID**：在分类器倒数第二层的 64 维特征上，生成图像与 10,000 张测试图像之间的 Fréchet 距离。越低越好。
# - **分类器得分**（classifier score）：用这个分类器计算的 Inception Score，从 1（只有一个类别，或者分类器拿不准）到 10。
# - **覆盖率**（coverage）：各个数字在样本中所占的比例；模式崩溃表现为其中出现 0。
#
# 真实训练图像的得分，就是完美的生成器能达到的基线。

# %%
print(tr("shipped classifier: {record}", record=json.loads((metrics.ASSETS / "classifier.json").read_text())))

# %% tags=["nbval-ignore-output"]
n = 2000 if QUICK else 10000
G = trainer.G.eval().cpu()
with torch.no_grad():
    fakes = torch.cat([G(torch.randn(500, G.z_dim, generator=torch.Generator().manual_seed(i))) for i in range(n // 500)])
ours, real = metrics.evaluate(fakes.clamp(-1, 1)), metrics.baseline(n=n)
torch.manual_seed(cfg.seed)
G_untrained = Generator(cfg.z_dim, cfg.tanh).eval()    # 同样的架构，取初始权重
with torch.no_grad():
    untrained = metrics.evaluate(G_untrained(torch.randn(n, cfg.z_dim)).clamp(-1, 1))
print("{:<24}{:>10}{:>8}  {}".format("", "MNIST-FID", tr("score"), tr("coverage")))
for name, m in ((tr("this run"), ours), (tr("the same G, untrained"), untrained), (tr("real train images"), real)):
    print(f"{name:<24}{m['mnist_fid']:>10.2f}{m['classifier_score']:>8.2f}  {m['coverage']}")
claim("G 学会了每个数字：十个数字各自至少占样本的 0.5%", min(ours["coverage"]) >= 0.005,
      shown=f"最少的数字是 {min(range(10), key=lambda d: ours['coverage'][d])}：{min(ours['coverage']):.1%}", on='这次训练')
claim("分类器对它的样本有把握（得分高于 4，满分 10）", ours["classifier_score"] > 4,
      shown=f"得分 {ours['classifier_score']:.2f}", on='这次训练')
claim("它的 MNIST-FID 远低于（不到三分之一）同一个 G 训练前的值", 3 * ours["mnist_fid"]
      < untrained["mnist_fid"], shown=f"MNIST-FID {ours['mnist_fid']:.1f}，未训练时为 {untrained['mnist_fid']:.1f}",
      on='这次训练')

# %%
claim("本次运行的 FID 高于真实数据的基线", ours["mnist_fid"] > real["mnist_fid"], on='这次训练')
claim("各数字的覆盖率之和为 1", abs(sum(ours["coverage"]) - 1) < 1e-3, on='这次训练')

# %% [markdown]
# ## 5 · 更长的一次运行，由命令行事先训练
#
# CPU 上的快速运行只能展示训练的开头。包里附带一个生成器，由本项目自己的命令行训练了 20 个迭代周期（`gan_lessons/assets/generator.pt`）。确切的命令、运行所用的设备、它的各项指标，以及每个迭代周期之后的得分（`--eval-each 2000`），都记录在旁边的 `generator.json` 里。我们加载它，展示它的样本和记录下来的指标；第 6 节会再给它打一次分。

# %%
record_path = metrics.ASSETS / "generator.json"
if not record_path.exists():
    print(tr("no pretrained generator shipped: train one with `python -m gan_lessons train` and export it"))
else:
    record = json.loads(record_path.read_text())
    G_pre = training.load_generator(metrics.ASSETS / "generator.pt")
    print(tr("loaded the shipped generator | trained on {device} | {epochs} epochs, strategy {strategy} | "
             "command: {command}", device=record["device"], epochs=record["config"]["epochs"],
             strategy=record["config"]["strategy"], command=record["command"]))
    print(tr("recorded metrics (10k samples): {run} | real-train baseline: {baseline}",
             run={k: record["metrics"][k] for k in ("mnist_fid", "classifier_score")},
             baseline={k: record["baseline"][k] for k in ("mnist_fid", "classifier_score")}))
    shares = record["metrics"]["coverage"]
    print(tr("coverage: rarest digit {rare} ({rare_share:.1%}), commonest {common} ({common_share:.1%})",
             rare=min(range(10), key=lambda d: shares[d]), rare_share=min(shares),
             common=max(range(10), key=lambda d: shares[d]), common_share=max(shares)))
    with torch.no_grad():
        sample = G_pre(torch.randn(64, G_pre.z_dim, generator=torch.Generator().manual_seed(0))).clamp(-1, 1)
    plt.figure(figsize=(4, 4))
    plt.imshow(plots.grid_array(sample))
    plt.axis("off")
    plt.title(tr("shipped generator, fixed noise"))
    plt.show()

# %% [markdown]
# 先读覆盖率那一行，再看图。一个只生成少数几类数字的生成器，不管画得多清楚，都已经*崩溃*到这几个模式上了：它的分类器得分会降到接近它还能生成的类别数，FID 也会远高于基线。两条损失曲线都看不出这一点：D 照样给每个批量打分，G 也照样在它会画的那几个数字上骗过 D。下一节展示这样一次崩溃，以及它的原因。

# %% [markdown]
# ## 6 · 原帖 000 原样的 G：一次没有 `tanh`，一次有
#
# 原帖 000 的 G 以一个普通的 `Conv2d` 结尾：没有任何东西限制它输出的像素。原帖自己的循环给两个模型喂的都是 `torch.randn` 噪声（它的 `DummyDataLoader`），从来不是数字图像，所以它的代码里看不出这会对样本产生什么影响。DCGAN 风格的生成器以 `tanh` 结尾，让 G 的输出保持在数据的取值范围内。本套课程保留了原帖原样的 G（`Generator()`，第 03 到 05 课用它复现原帖的错误）。训练器加了一个 `nn.Tanh()`（`TrainConfig.tanh = True`），而 `python -m gan_lessons train --no-tanh` 则原样训练原帖的 G。两者都用同样的命令训练了 20 个迭代周期，只有这个开关和输出文件夹不同（下面会检查），**各只有一次运行**，两个生成器都随包发布。先看真实像素的取值范围：

# %%
x_real = data.to_unit_range(images[:2000])
print(tr("real pixels: min {low} max {high} | share exactly -1: {share}", low=x_real.min().item(),
         high=x_real.max().item(), share=round((x_real == -1).float().mean().item(), 3)))
claim("真实像素都在 [-1, 1] 之内，而且大多数恰好是 -1", x_real.min() >= -1 and x_real.max() <= 1
      and (x_real == -1).float().mean() > 0.5, on='这台机器上的 MNIST 文件')

# %% [markdown]
# 没有哪个真实数字的像素落在 [-1, 1] 之外。原帖的 G 生成这样的像素并不受阻拦，但在 20 个迭代周期里，D 一直拿它的样本和真实数字比较，这本来可能教会它待在范围之内。我们要测量不带 `tanh` 训练的那个随包生成器的 2,000 个样本，测量之前先做预测。

# %% reveals=["\u771f\u5b9e\u6570\u5b57\u56fe\u50cf\u4e0d\u4f1a\u8fd9\u6837\uff09\uff1a(0\\.[5-9]|1\\.0)", "\\d+% \u7684\u6837\u672c\u6709\u50cf\u7d20\u843d\u5728"] tags=["predict"]
prediction = True  # SOLUTION: 训练 20 个迭代周期后，原帖的 G 的样本中，是否超过一半有像素落在 [-1, 1] 之外？（True/False）
shipped = {tr("with Tanh"): "generator", tr("seed's G (--no-tanh)"): "generator_no_tanh"}   # 显示出来的名称
gens = {name: training.load_generator(metrics.ASSETS / f"{stem}.pt") for name, stem in shipped.items()}
z = torch.randn(2000, 64, generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    raw = {name: G_s(z) for name, G_s in gens.items()}          # 不做 clamp：这就是训练时 D 看到的
outside = (raw[tr("seed's G (--no-tanh)")].abs() > 1).flatten(1).any(1).float().mean().item()
check("超过一半的样本跑出了 [-1, 1]", prediction, outside > 0.5,
      why=f"它有 {outside:.0%} 的样本有像素落在 [-1, 1] 之外：与 D 对抗的训练并没有把它们拉回来。")

# %%
for name, x in raw.items():
    print(tr("{name:<22} pixels from {low:5.2f} to {high:4.2f} | share exactly -1: {at_minus_one:.3f} | share "
             "outside [-1, 1]: {outside:.3f}", name=name, low=x.min().item(), high=x.max().item(),
             at_minus_one=(x == -1).float().mean().item(), outside=(x.abs() > 1).float().mean().item()))
    print(f"{'':<22}", tr("samples with a pixel outside [-1, 1], which no real digit has: {share:.3f}",
                          share=(x.abs() > 1).flatten(1).any(1).float().mean().item()))

# %% [markdown]
# D 可以把这样的像素当作线索，而这条线索与笔画毫无关系。这很可能是下面结果的原因，但并未得到证明：这里我们只测量症状（上面）和两次运行的结果（下面）。
#
# 现在看结果。两份记录都保存了每个迭代周期之后的得分，所以我们可以画出每次运行是怎样走到最后的。然后在上面抽取的 2,000 个样本上，现场给两个生成器重新打分。

# %%
records = {name: json.loads((metrics.ASSETS / f"{stem}.json").read_text()) for name, stem in shipped.items()}
a, b = (r["config"] for r in records.values())
differ = sorted(k for k in a if a.get(k) != b.get(k))
claim("两次随包发布的运行只在 tanh 开关和输出文件夹上不同", differ == ["out", "tanh"], differ, on='课程附带的两次训练')
plots.fid_figure({name: r["eval_each_epoch"] for name, r in records.items()},
                 title=tr("MNIST-FID after each epoch (2,000 samples)"))
plt.show()
live = {name: metrics.evaluate(x.clamp(-1, 1)) for name, x in raw.items()}
print("{:<24}{:>10}{:>8}  {}".format("", "MNIST-FID", tr("score"), tr("digits under 2% of samples")))
for name, m in live.items():
    print(f"{name:<24}{m['mnist_fid']:>10.1f}{m['classifier_score']:>8.2f}  "
          f"{[d for d in range(10) if m['coverage'][d] < 0.02]}")
fig, axes = plt.subplots(1, 2, figsize=(8, 4.3))
for ax, (name, x) in zip(axes, raw.items()):
    ax.imshow(plots.grid_array(x[:64].clamp(-1, 1)))
    ax.set_title(name)
    ax.axis("off")
plt.show()

# %%
tanh_m, seed_m = live[tr("with Tanh")], live[tr("seed's G (--no-tanh)")]
claim("加了 Tanh 的运行，MNIST-FID 更低", tanh_m["mnist_fid"] < seed_m["mnist_fid"],
      shown=f"{tanh_m['mnist_fid']:.1f} 对 {seed_m['mnist_fid']:.1f}", on='课程附带的两次训练')
claim("加了 Tanh 的运行，分类器得分更高", tanh_m["classifier_score"] > seed_m["classifier_score"], on='课程附带的两次训练')
claim("加了 Tanh 的运行覆盖了每个数字，每个数字都至少占样本的 2%", min(tanh_m["coverage"]) >= 0.02, on='课程附带的两次训练')
top_two = sorted(range(10), key=lambda d: -seed_m["coverage"][d])[:2]
share = sum(seed_m["coverage"][d] for d in top_two)
claim("原帖的 G 在它唯一的一次运行中发生模式崩溃，只剩 0 和 8：两者合计超过样本的 90%",
      sorted(top_two) == [0, 8] and share > 0.9, shown=f"0：{seed_m['coverage'][0]:.1%}，8：{seed_m['coverage'][8]:.1%}",
      on='课程附带的两次训练')


# %% [markdown]
# 原帖的 G 运行时不报任何错误，这恰恰是陷阱所在：PyTorch 没有任何抱怨，损失看起来也像是 GAN 的损失。只有测量样本才能看出发生了什么：它的那次运行发生了模式崩溃，几乎只生成 0 和 8，而且画得很差；而带 `tanh` 的那次运行覆盖了全部十个数字。两次运行只差一个没有权重的层，但**每种设置只有一次运行**：这只说明这两次运行发生了什么，不能说明这种情况有多常见，也不能说明单凭这一层就决定了结果（任何一种设置换一个随机种子，结果都可能不同）。要说 `tanh` 修好了原帖的训练，需要每种设置跑多次，每种至少 3 个随机种子，并给出它们得分的离散程度；本课不训练这些。

# %% [markdown] tags=["read-after-exercises"]
# ## 小结
#
# - 训练器把 MNIST 以 `uint8` 的形式放在设备上，每一步调用策略函数，把损失留在设备上，并以原子方式写检查点；
#   `python -m gan_lessons train --resume` 能精确地接着一次运行继续训练。
# - GAN 的损失反映的是博弈，而不是样本。要测量样本：MNIST-FID、分类器得分和覆盖率，并且总要和真实数据的基线放在一起看。
# - 原帖 000 的 G 没有输出激活函数。它训练时不报错；在它唯一一次 20 个迭代周期的运行中，它的像素跑出了 [-1, 1]，并崩溃到两个数字上；而加了一个 `nn.Tanh()` 的一次运行覆盖了全部十个数字。每种设置一次运行，只说明这几次运行发生了什么；并不能说明 `tanh` 修好了训练（那需要每种设置至少 3 个随机种子）。
# - 命令行会写出样本网格、一个 GIF、损失曲线和 `metrics.json`：见 `python -m gan_lessons train --help`。

# %% [markdown]
# ## 练习
#
# ### 动手实现：一个能让运行精确恢复的检查点
#
# `python -m gan_lessons train --resume` 接着一次中断的运行继续训练，而且恢复得足够精确：最终的权重与从未中断的运行逐位相同。请为这样的检查点写出两半。要训练的是一个小 GAN（它的 G 里有一个批量规范化层），使用 `strategies.d_first_fresh_fake`，它的真实批量取决于步数（就像一个迭代周期里的顺序那样）：
#
# - `save_state(G, D, opt_G, opt_D, step)` 以纯数据的形式（张量、数字，以及由它们组成的字典）返回走完 `step` 步之后的运行状态。训练器可能在运行继续时把它留在内存里（作为目前最好的状态），稍后再写到磁盘，所以它一经返回就不能再变。
# - `load_state(state, G, D, opt_G, opt_D)` 把它放回新建的对象中，并返回接下来应从哪一步继续。
#
# 只有权重是不够的：动手写之前，先列出决定下一步怎么走的所有东西。检查程序会在 6 步中的第 3 步之后保存，让原来的运行继续训练，把你的状态经过 `torch.save` 和 `torch.load(weights_only=True)` 走一遍（检查点是数据，绝不是代码），再加载到用其他权重和另一个随机状态创建的对象中，恢复训练，并指出缺了哪一部分。

# %%
def save_state(G, D, opt_G, opt_D, step):
    """走完 `step` 步之后的运行状态：纯数据，在运行继续时保持不变。"""
    ### BEGIN SOLUTION
    import copy
    state = {"G": G.state_dict(), "D": D.state_dict(),                   # 权重
             "opt_G": opt_G.state_dict(), "opt_D": opt_D.state_dict(),   # Adam 的矩估计和步数
             "rng": torch.get_rng_state(),                               # 决定下一个 z
             "step": step}                                               # 决定下一个批量
    return copy.deepcopy(state)    # state_dict() 交出的是模型正在用的张量本身，接下来的训练步会改变它们
    ### END SOLUTION


def load_state(state, G, D, opt_G, opt_D):
    """把检查点放回新建的对象；返回接下来应从哪一步继续。"""
    ### BEGIN SOLUTION
    G.load_state_dict(state["G"])
    D.load_state_dict(state["D"])
    opt_G.load_state_dict(state["opt_G"])
    opt_D.load_state_dict(state["opt_D"])
    torch.set_rng_state(state["rng"])
    return state["step"]
    ### END SOLUTION

my_answer = save_state  # SOLUTION: 把它指向你的 save_state（不要加括号）

# %% tags=["test"]
from gan_lessons import exercises
solved = exercises.check_resume(my_answer, load_state)
assert solved, "resume：还没有完成，或者还不对：上面几行说明了缺什么"

# %% [markdown]
# ## 延伸 · 比较两种策略
#
# *不计入本课的计划课时：留给有兴趣的读者，在做完练习之后读。*
#
# 第 05 课表明，几种交替顺序的开销几乎相同。那么它们训练出来的结果也一样吗？这里用同一个随机种子和同样的设置，每种策略各跑一次，比较它们的曲线和得分。两次运行都必须学到了东西（每个数字都出现），比较才有意义。在 GPU 上，完整运行的各个迭代周期会给出完整的曲线。

# %% tags=["nbval-ignore-output"]
trained = {cfg.strategy: trainer,   # 上面那次运行，以及同样设置下按 g_first 顺序的一次运行
           "g_first": training.train(dataclasses.replace(cfg, strategy="g_first", out=str(training.RUNS / "lesson06_g_first")))}
runs = {}
for strategy, t in trained.items():
    G_s = t.G.eval().cpu()
    with torch.no_grad():
        fakes = G_s(torch.randn(2000, G_s.z_dim, generator=torch.Generator().manual_seed(0))).clamp(-1, 1)
    runs[strategy] = (t.history, metrics.evaluate(fakes))
plots.loss_figure({s: h for s, (h, _) in runs.items()}, title=tr("two strategies, same seed"))
plt.show()
for s, (_, m) in runs.items():
    print(tr("{strategy:<20} MNIST-FID {fid:.2f}  score {score:.2f}  rarest digit {rarest:.1%}", strategy=s,
             fid=m["mnist_fid"], score=m["classifier_score"], rarest=min(m["coverage"])))
    claim(f"{s} 的运行学会了每个数字（每个数字都至少占样本的 0.5%）", min(m["coverage"]) >= 0.005, on='这两次训练')
