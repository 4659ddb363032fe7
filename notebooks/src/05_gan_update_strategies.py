# %% [markdown]
# # Lesson 05 · GAN update strategies, measured
#
# **Goal.** Run the orders in which a GAN can update D and G, see which ones fail and why, switch between them
# with a widget, and compare their real costs (passes through G and D counted with hooks, gradient passes,
# time, memory) instead of arguing from theory.
#
# **Material.** Seed 003 (three strategies and an efficiency argument; 凌逆战, “pytorch训练GAN时的detach()”, 博客园, 2020-11-09) and seed 000
# (`loss_nonsaturating`; 聖光之護, “解决PyTorch GAN训练中的梯度计算错误:inplace操作与计算图分离”, php中文网, 2025-10-02). The seeds are public blog posts, in Chinese, cited in [the instructor notes](README.md#the-seeds); every listing this lesson runs is in its cells.

# %% [markdown] tags=["read-after-exercises"]
# | seed listing | on today's torch |
# |---|---|
# | 003 "strategy 1": `d_loss.backward(retain_graph=True)`, `optimizer_D.step()`, `g_loss.backward()` | raises the version error (since torch 1.5; before, a silently wrong gradient) |
# | 003 "strategy 2": D on `gen_imgs.detach()`, then `g_loss = adversarial_loss(pred_gen, valid)` on that same output | raises "Trying to backward through the graph a second time"; with `retain_graph=True`, the version error (D stepped in between); with `retain_graph=True` and no D step in between, it runs and G gets **no** gradient |
# | 003 "strategy 3": G first, then D on the detached fake | works (`g_first` below); the seed says G's backward "has to" compute D's gradient too, which freezing D or `backward(inputs=...)` avoids |
# | 000 `loss_nonsaturating` | raises the version error `[512, 1]` in its loop, and, independently, applies the sigmoid twice: nothing reports that |

# %%
#SETUP

# %%
import inspect
from IPython.display import Markdown, display
from gan_lessons import costs, strategies
from gan_lessons.lesson import headline
from gan_lessons.models import Generator

def fresh_gan(batch=64):
    """Seed 000's G and D (seeded), a batch in [-1, 1] standing in for MNIST, and a seeded noise source."""
    return costs.fresh_gan(batch=batch, device=device)


# %% [markdown]
# ## 0 · Two players, one loss
#
# **Why it matters.** Every strategy in this lesson orders the same two updates. Before comparing orders, here is
# what is being updated, and why the G loss they all use is `bce(D(x_fake), 1)`.
#
# A GAN has two networks. The **generator** G maps noise z (a few random numbers) to a sample, x_fake = G(z).
# The **discriminator** D maps a sample to one number, a **logit**: high means "real", low means "fake". Below,
# D(x) is the probability σ(logit) that D gives to "real". The two play a game on one value:
#
# $$\min_G \max_D \; \mathbb{E}_{x}\big[\log D(x)\big] + \mathbb{E}_{z}\big[\log\big(1 - D(G(z))\big)\big]$$
#
# D raises it by calling data real and G's samples fake; G lowers it by making samples that D calls real. Only the
# second term depends on G, so the game's G loss is log(1 − D(G(z))). Early in training, D easily recognises G's
# poor samples (D(G(z)) ≈ 0), and there this loss is flat: its derivative with respect to D's logit is
# −σ(logit) ≈ 0. G would learn least exactly when it is worst. So G minimises the **non-saturating** loss
# −log D(G(z)) instead: the same aim (make D(G(z)) large), but its derivative, −(1 − σ(logit)), is about −1 where
# D rejects the fake. Here are both at logit −6:

# %%
logit = torch.tensor(-6.0, requires_grad=True)       # D confidently rejects a fake
saturating = torch.log(1 - torch.sigmoid(logit))      # the game's G loss: log(1 - D(G(z)))
non_saturating = -torch.log(torch.sigmoid(logit))     # what G minimises instead: -log D(G(z))
grad_sat, = torch.autograd.grad(saturating, logit)
grad_non, = torch.autograd.grad(non_saturating, logit)
print(f"D(G(z)) = sigmoid(-6) = {torch.sigmoid(logit).item():.4f}")
print(f"d/dlogit of log(1 - D(G(z))): {grad_sat.item():.4f}")
print(f"d/dlogit of -log D(G(z))    : {grad_non.item():.4f}")
claim("at logit -6 the game's G loss gives G a tiny gradient, the non-saturating loss about -1",
      abs(grad_sat.item()) < 0.01 and abs(grad_non.item() + 1) < 0.01,
      shown=f"{grad_sat.item():.4f} vs {grad_non.item():.4f}: the non-saturating one is "
            f"{grad_non.item() / grad_sat.item():.0f} times larger")

# %% [markdown]
# No strategy writes `log` and `sigmoid` itself. Both players' losses are binary cross-entropy on D's logit ℓ,
# BCE(ℓ, y) = −[y log σ(ℓ) + (1 − y) log(1 − σ(ℓ))], which `F.binary_cross_entropy_with_logits` computes
# (`strategies.bce(logits, target)` is that, with a constant target):
#
# - target 1 leaves −log σ(ℓ). On D(x_fake) that **is** G's non-saturating loss; on D(x_real) it is D's real term.
# - target 0 leaves −log(1 − σ(ℓ)), D's fake term: D's loss is the real and the fake terms together.
#
# PyTorch computes both as softplus(∓ℓ), which stays finite where `log(sigmoid(ℓ))` underflows to −∞:

# %%
logits = torch.linspace(-8, 8, 17)
ones, zeros = torch.ones(17), torch.zeros(17)
bce_ones = F.binary_cross_entropy_with_logits(logits, ones, reduction="none")
bce_zeros = F.binary_cross_entropy_with_logits(logits, zeros, reduction="none")
p_real = torch.sigmoid(logits.double())   # the log formulas in float64: in float32, 1 - sigmoid(-8) loses digits
claim("BCE with target 1 is G's non-saturating loss, softplus(-logit) = -log sigmoid(logit)",
      torch.allclose(bce_ones, F.softplus(-logits), atol=1e-6) and torch.allclose(bce_ones.double(), -torch.log(p_real), atol=1e-6),
      shown=f"logits -8 to 8, largest difference to the log form {(bce_ones + torch.log(p_real)).abs().max():.1e}")
claim("BCE with target 0 is D's fake term, softplus(logit) = -log(1 - sigmoid(logit))",
      torch.allclose(bce_zeros, F.softplus(logits), atol=1e-6) and torch.allclose(bce_zeros.double(), -torch.log(1 - p_real), atol=1e-6),
      shown=f"largest difference {(bce_zeros + torch.log(1 - p_real)).abs().max():.1e}")
claim("strategies.bce(logits, 1) is their mean: the G loss of every strategy in this lesson",
      torch.allclose(strategies.bce(logits, 1), bce_ones.mean()))
far = torch.tensor([-200.0])
claim("at logit -200, BCE gives 200 where -log(sigmoid) gives inf",
      F.binary_cross_entropy_with_logits(far, torch.ones(1)).item() == 200 and torch.isinf(-torch.log(torch.sigmoid(far))).item())

# %% [markdown]
# To see the game work, shrink it to one dimension, where a CPU trains it in seconds. The real data are numbers
# drawn from N(3, 0.5²). G turns one noise number z ~ N(0, 1) into one number; D gives one number a logit. Neither
# knows 3 or 0.5: the only thing that tells G where the data lie is the gradient of its loss through D. The
# training loop calls `strategies.g_first`, the same function that section 3 runs on seed 000's networks. Before and
# after 1000 steps, G turns the same 10,000 z into samples, which we compare with 10,000 real numbers:

# %%
import matplotlib.pyplot as plt

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))                 # z -> x_fake
D = nn.Sequential(nn.Linear(1, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2),
                  nn.Linear(64, 1), nn.Flatten(0))                                # x -> one logit
opt_G = optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.999))
opt_D = optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.999))
gen = torch.Generator().manual_seed(1)
noise = lambda n: torch.randn(n, 1, generator=gen)
real_batch = lambda n, gen=gen: 3 + 0.5 * torch.randn(n, 1, generator=gen)

shown_gen = torch.Generator().manual_seed(2)                                      # what we compare
x_shown, z_shown = real_batch(10_000, shown_gen).flatten(), torch.randn(10_000, 1, generator=shown_gen)
with torch.no_grad():
    before = G(z_shown).flatten()
for _ in range(1000):
    loss_D, loss_G = strategies.g_first(G, D, opt_G, opt_D, real_batch(256), noise)
with torch.no_grad():
    after = G(z_shown).flatten()

for label, x in (("real", x_shown), ("G before", before), ("G after", after)):
    print(f"{label:<9} mean {x.mean():5.2f}   std {x.std():.2f}")
claim("after training, G's mean is within 0.15 of the real mean (it started near 0)",
      abs(after.mean() - x_shown.mean()).item() < 0.15, shown=f"{after.mean():.2f} vs {x_shown.mean():.2f}")
claim("and G's std is within half the real std of the real std",
      abs(after.std() - x_shown.std()).item() < 0.5 * x_shown.std().item(),
      shown=f"{after.std():.2f} vs {x_shown.std():.2f}, from {before.std():.2f} before training")

plt.figure(figsize=(7, 2.6))
for label, x in (("real", x_shown), ("G before training", before), ("G after 1000 steps", after)):
    plt.hist(x.numpy(), bins=80, range=(-1.5, 5), density=True, alpha=0.5, label=label)
plt.xlabel("x")
plt.legend(loc="upper center")
plt.title("1-D GAN: real samples, and G's before and after training")
plt.show()

# %% [markdown]
# G's samples moved onto the data: their mean and spread are close to the real ones. Their shape is only roughly
# the bell curve (the claims check mean and spread only); matching a whole distribution takes longer, and a GAN can
# miss parts of it, which lesson 06 measures on MNIST. Tiny as it is, this is the whole algorithm. From section 1
# on, G and D are seed 000's MNIST networks (`gan_lessons.models`: G maps 64 noise numbers to a 28×28 image, D maps
# an image to one logit), and each strategy is called exactly as `g_first` was called here.

# %% [markdown]
# ## 1 · Two seed strategies that fail today, and why they failed silently before
#
# **Why it matters.** Seed 003 recommends its strategy 1 for GANs whose D is expensive. On torch ≥ 1.5 it does not
# run. Here it is as a strategy function (`strategies.retain_graph_seed003`, the same order as the seed, with
# logits instead of `BCELoss`), on seed 000's G and D:

# %%
display(Markdown(f"```python\n{inspect.getsource(strategies.retain_graph_seed003)}```"))

# %%
G, D, x_real, noise = fresh_gan()
opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
with expect_error(RuntimeError, r"\[torch.FloatTensor \[512, 1\]\], which is output 0 of AsStrided(Backward0)?, is at version 2; expected version 1"):
    strategies.retain_graph_seed003(G, D, opt_G, opt_D, x_real, noise)


# %% [markdown]
# Seed 000's own loop fails with the same words (lesson 03 takes that message apart). The two posts reach it
# differently:
#
# - seed 003's strategy 1 does it **on purpose**: it wants one forward and keeps the graph for G's backward.
# - seed 000 does it **by accident**: `loss_nonsaturating` returns both losses from one forward, and the loop
#   then backpropagates them one after the other.
#
# The fact underneath is the same: G's backward goes through D's forward, and `optimizer_D.step()` changed D's
# weights in between. Torch 1.5 made it visible. Until then the built-in optimizers updated `p.data`, which does
# not bump the version counter. The backward then paired D's **new** weights with activations computed by the
# **old** ones. We can emulate that: update D through `.data` and compare G's gradient with the two honest
# answers, G's gradient through the old D and through the new D.

# %%
def pre15_emulation(mode, lr=0.1):
    torch.manual_seed(0)
    G, D = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    x_real, z = torch.randn(16, 2), torch.randn(16, 4)
    x_fake = G(z)
    logits_fake = D(x_fake)
    loss_D = strategies.bce(D(x_real), 1) + strategies.bce(logits_fake, 0)
    loss_D.backward(retain_graph=True)
    if mode != "old D":
        for p in D.parameters():
            p.data.add_(-lr * p.grad)           # a pre-1.5 style update: no version bump
    G.zero_grad()
    logits = D(x_fake) if mode == "new D" else logits_fake
    strategies.bce(logits, 1).backward()
    return torch.cat([p.grad.flatten() for p in G.parameters()])

old, new, mixed = (pre15_emulation(m) for m in ("old D", "new D", "pre-1.5 mix"))
distance = lambda a, b: ((a - b).norm() / b.norm()).item()
claim("the pre-1.5 gradient is G's gradient through neither the old D nor the new D",
      not torch.allclose(mixed, old) and not torch.allclose(mixed, new),
      shown=f"relative distance {distance(mixed, old):.3f} to the old, {distance(mixed, new):.3f} to the new")


# %% [markdown]
# The pre-1.5 number is the gradient of neither the old nor the new discriminator's loss, and nothing said so.
#
# **Seed 003's strategy 2** detaches the fake for D (good), then builds G's loss from that **same detached**
# output. It fails for a second reason: `d_loss.backward()` already freed D's graph:

# %%
def seed003_strategy2(retain, step_D=True):
    G, D, x_real, noise = fresh_gan(batch=8)
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    gen_imgs = G(noise(8))
    pred_gen, pred_real = D(gen_imgs.detach()), D(x_real)
    opt_D.zero_grad()
    d_loss = (strategies.bce(pred_real, 1) + strategies.bce(pred_gen, 0)) / 2
    d_loss.backward(retain_graph=retain)
    if step_D:
        opt_D.step()
    g_loss = strategies.bce(pred_gen, 1)
    opt_G.zero_grad()
    g_loss.backward()
    return sum(p.grad is not None for p in G.parameters())

with expect_error(RuntimeError, "Trying to backward through the graph a second time"):
    seed003_strategy2(retain=False)

# %% [markdown]
# With `retain_graph=True` it still fails: the graph is kept, but `optimizer_D.step()` makes D's saved weights
# stale, as in strategy 1:

# %%
with expect_error(RuntimeError, "modified by an inplace operation"):
    seed003_strategy2(retain=True)

# %% [markdown]
# Even with no D step in between, nothing would reach G: `pred_gen` was computed from `gen_imgs.detach()`, so
# `g_loss`'s graph starts at the detached fake and contains only D. The run below keeps the graph and skips the
# step, so that nothing else can fail first, and counts G's parameters that received a gradient:

# %%
n_with_grad = seed003_strategy2(retain=True, step_D=False)
claim("seed 003's strategy 2 with retain_graph and no D step runs, and none of G's parameters gets a gradient",
      n_with_grad == 0, shown=f"{n_with_grad} of {len(list(Generator().parameters()))} G parameters have a .grad")

# %% [markdown]
# ## 2 · Seed 000's double sigmoid
#
# **Why it matters.** `loss_nonsaturating` computes `dgz = F.sigmoid(d(gz))` and then feeds `dgz` to
# `binary_cross_entropy_with_logits`, which applies a sigmoid itself. No error, no warning, and the losses look
# plausible. Compare the G loss and its gradient with respect to D's logit, with and without the extra sigmoid:

# %%
import warnings

logits = torch.tensor([-10., -6., -2., 0., 2., 6.], requires_grad=True)
ones, zeros = torch.ones(6), torch.zeros(6)
with warnings.catch_warnings():
    warnings.simplefilter("error")               # nothing is reported, not even a warning
    correct = F.binary_cross_entropy_with_logits(logits, ones, reduction="none")
    seed000 = F.binary_cross_entropy_with_logits(torch.sigmoid(logits), ones, reduction="none")
grad_correct, = torch.autograd.grad(correct.sum(), logits)
grad_seed000, = torch.autograd.grad(seed000.sum(), logits)
shrink = grad_correct / grad_seed000
print("D's logit for a fake     :", rounded(logits))
print("loss_G, correct          :", rounded(correct))
print("loss_G, double sigmoid   :", rounded(seed000))
print("d loss_G / d logit, correct       :", rounded(grad_correct))
print("d loss_G / d logit, double sigmoid:", rounded(grad_seed000, 6))
print("shrink factor (correct / double)  :", [round(f) for f in shrink.tolist()])
claim("the shrink factor grows without bound as D rejects the fake more confidently",
      bool((shrink[:-1] > shrink[1:]).all()) and 40_000 < shrink[0].item() < 50_000 and 700 < shrink[1].item() < 900,
      shown=f"{shrink[1]:.0f}x at logit -6, {shrink[0]:.0f}x at logit -10")

# the ranges: sigmoid(logit) lies in (0, 1), so BCE-with-logits sees an input in (0, 1) whatever D says
G_range = (F.softplus(-torch.tensor(1.0)).item(), F.softplus(torch.tensor(0.0)).item())   # target 1: G's loss
D_range = (F.softplus(torch.tensor(0.0)).item(), F.softplus(torch.tensor(1.0)).item())    # target 0: D's fake term
sweep = torch.linspace(-30, 30, 601)
G_seen = F.binary_cross_entropy_with_logits(sweep.sigmoid(), torch.ones(601), reduction="none")
D_seen = F.binary_cross_entropy_with_logits(sweep.sigmoid(), torch.zeros(601), reduction="none")
claim(f"with the double sigmoid, G's loss stays in [{G_range[0]:.2f}, {G_range[1]:.2f}] and D's fake term in "
      f"[{D_range[0]:.2f}, {D_range[1]:.2f}], for any logit",
      G_seen.min().item() >= G_range[0] - 1e-6 and G_seen.max().item() <= G_range[1] + 1e-6
      and D_seen.min().item() >= D_range[0] - 1e-6 and D_seen.max().item() <= D_range[1] + 1e-6,
      shown=f"logits swept from -30 to 30: G {G_seen.min():.4f} to {G_seen.max():.4f}, "
            f"D {D_seen.min():.4f} to {D_seen.max():.4f}")

# %% [markdown]
# When D confidently rejects a fake (logit −6), the correct loss gives G a strong push (gradient ≈ −1). The
# double-sigmoid version gives it ≈ −0.001, about 800 times less, and at logit −10 about 44,000 times less: the
# factor has no upper bound, because the extra sigmoid's slope goes to zero as D grows confident. G barely learns
# exactly when it most needs to. The losses are squashed too (G's into [0.31, 0.69], D's fake term into
# [0.69, 1.31]), so the curves look calm while nothing is learned. Lesson 07's doctor reports this pattern.

# %% [markdown]
# ## 3 · Six strategies that run, side by side in code
#
# **Why it matters.** Every bit of autograd logic is in the order of `zero_grad`, `detach`, `backward` and `step`.
# Each strategy in `gan_lessons.strategies` is one screen long; read them before looking at the numbers.

# %%
for name in ("one_forward", "d_first_reuse_fake", "g_first", "d_first_fresh_fake", "d_first_frozen_D", "g_first_inputs"):
    display(Markdown(f"```python\n{inspect.getsource(strategies.get(name))}```"))

# %% [markdown]
# `one_forward` is the correct version of seed 003's idea: G's gradient is taken through D **before**
# `opt_D.step()` (with `backward(inputs=...)`, so neither loss fills the other network's gradients). It is a
# different algorithm: *simultaneous* updates, where G answers the D that scored it, instead of the *alternating*
# updates of the other orders, where G answers the D that was just updated. `g_first` also shows G the old D.
#
# The last two are `d_first_reuse_fake` and `g_first` with one change in G's step. G's backward has to go
# *through* D, but it does not have to compute D's **parameter** gradients, which G's step throws away.
# `d_first_frozen_D` turns them off with `D.requires_grad_(False)` around G's step (pix2pix and CycleGAN do this
# with their `set_requires_grad`). `g_first_inputs` asks for G's gradients only, with
# `loss_G.backward(inputs=list(G.parameters()))`, the tool `one_forward` already uses.
#
# The tests in `tests/test_strategies.py` check that D steps on **identical** gradients in all six, and that
# `one_forward` and `g_first` give G identical gradients, which differ from those of the D-first orders.

# %%
prediction = "both"  # SOLUTION: after g_first's loss_G.backward(), which network's parameters have .grad: "G", "D" or "both"?
G, D, x_real, noise = fresh_gan(batch=8)
strategies.bce(D(G(noise(8))), 1).backward()
has = lambda net: all(p.grad is not None for p in net.parameters())
check("nets with .grad after g_first's G backward", prediction,
      "both" if has(G) and has(D) else "G" if has(G) else "D",
      why="loss_G flows back through D to reach G, so D's parameters get gradients too; "
          "g_first clears them with opt_D.zero_grad() before D's own backward.")

# %% [markdown]
# ## 4 · The costs, measured
#
# **Why it matters.** Seed 003 argues from theory that its strategy 1 saves a forward but wastes a G backward, and
# that strategy 3 is best. We count instead. `costs.measure` runs a strategy on seed 000's models with fresh Adam
# optimizers and counts, per step, with hooks: forward calls of G and D, backward passes through each of those
# calls, and how many times each parameter's gradient was accumulated ("grad passes"; 2 means one pass was
# wasted). Memory on a CPU is the peak of the bytes autograd holds in saved tensors, parameters left out; on a
# GPU it is CUDA's peak allocated memory.

# %%
results = {}
for name in strategies.STRATEGIES:
    G, D, x_real, noise = fresh_gan()
    results[name] = costs.measure(name, G, D, x_real, noise, steps=3 if QUICK else 20, warmup=1 if QUICK else 5)

print(f"{'strategy':<22}{'G fwd/bwd':>10}{'D fwd/bwd':>10}{'G grads':>9}{'D grads':>9}{'peak MiB':>10}")
for name, c in results.items():
    if c.error:
        print(f"{name:<22} raises: {headline(c.error)}")
    else:
        print(f"{name:<22}{c.G_forward:>6g}/{c.G_backward:<3g}{c.D_forward:>6g}/{c.D_backward:<3g}"
              f"{c.G_grad_passes:>9g}{c.D_grad_passes:>9g}{c.peak_mib:>10.2f}")
print("memory:", results["g_first"].memory, "| batch 64")

# %% [markdown]
# Time per step is the median over the measured steps, after warm-up. It depends on the machine, so this cell's
# output is not compared by the tests:

# %%
# NBVAL_IGNORE_OUTPUT
# (timings vary from run to run)
display(Markdown(costs.cost_table_markdown(results.values())))
ref = results["d_first_reuse_fake"].ms_per_step
print("time relative to d_first_reuse_fake:",
      {n: round(c.ms_per_step / ref, 2) for n, c in results.items() if not c.error})

# %% [markdown]
# What the numbers say about seed 003's argument (each line is computed from the table above):

# %%
r = results
passes = ("G_forward", "G_backward", "D_forward", "D_backward", "G_grad_passes", "D_grad_passes")
same_passes = lambda a, b: all(getattr(r[a], k) == getattr(r[b], k) for k in passes)
claim("1. seed 003's strategy 1 raises today", r["retain_graph_seed003"].error is not None)
claim("2. its correct one-forward version saves one D forward",
      r["one_forward"].D_forward == r["d_first_reuse_fake"].D_forward - 1,
      shown=f"D forwards {r['one_forward'].D_forward:g} vs {r['d_first_reuse_fake'].D_forward:g}")
claim("3. g_first (seed 003's strategy 3) makes the same passes as d_first_reuse_fake (the strategy 2 its text describes)",
      same_passes("g_first", "d_first_reuse_fake"))
claim("4. both compute D's gradient twice per step, once for nothing (as seed 003 says of strategy 3)",
      r["g_first"].D_grad_passes == r["d_first_reuse_fake"].D_grad_passes == 2 and r["g_first"].G_grad_passes == 1)
claim("5. freezing D or backward(inputs=...) removes that wasted pass, with the same forward and backward calls",
      all(r[n].D_grad_passes == r[n].G_grad_passes == 1 for n in ("d_first_frozen_D", "g_first_inputs"))
      and all(getattr(r["d_first_frozen_D"], k) == getattr(r["d_first_reuse_fake"], k) for k in passes[:4])
      and all(getattr(r["g_first_inputs"], k) == getattr(r["g_first"], k) for k in passes[:4]))
claim("6. d_first_fresh_fake pays one extra G forward", r["d_first_fresh_fake"].G_forward == 2)
keeps_G_graph, frees_it = ("one_forward", "d_first_reuse_fake"), ("g_first", "d_first_fresh_fake")
claim("7. the orders that keep G's graph alive until D has stepped peak higher in saved memory (seed 003's point)",
      min(r[n].peak_mib for n in keeps_G_graph) > max(r[n].peak_mib for n in frees_it),
      shown=", ".join(f"{n} {r[n].peak_mib:.2f} MiB" for n in keeps_G_graph + frees_it))
saving = 1 - r["g_first"].peak_mib / r["d_first_reuse_fake"].peak_mib
claim("8. among the alternating orders, freeing G's graph early saves about a fifth of the saved memory",
      0.15 < saving < 0.25, shown=f"{saving:.0%}")

# %% [markdown]
# So: seed 003's strategy 1 is not an option. Seed 003 counts its strategy 3 correctly: it avoids computing G's
# gradients twice, and, as the seed says itself, G's backward still computes D's gradients, which are then
# cleared. The same holds for the D-first order. Where the seed goes wrong is in saying that this pass *has to*
# happen. Any alternating order can skip it, by freezing D during G's step or by `backward(inputs=...)`. Both run
# the same forwards, and D's gradient is computed once per step. `one_forward` also wastes nothing, but it is a
# different algorithm (simultaneous updates).
#
# Memory agrees with seed 003's point about strategy 2: the orders that keep G's graph alive until D has stepped
# (`one_forward`, `d_first_reuse_fake`) peak highest. `g_first` frees G's graph before D's step, and
# `d_first_fresh_fake` builds it only after. Among the alternating orders the differences are one small forward
# pass, one avoidable D gradient and about a fifth of the saved memory. Choose first by the algorithm you want
# (does G answer the old or the new D?), then drop the wasted D gradient, whichever order you chose.

# %% [markdown]
# ## 5 · Switch strategies yourself
#
# **Why it matters.** The widget runs the chosen strategy for one step on a small GAN (2-D points on a ring of
# eight Gaussians, so it trains in seconds on a CPU). It shows the step's graph, with saved tensors coloured by
# state, the strategy's cost row from the table above, and a short training curve. It draws the default choice
# once when created.

# %%
import math
from gan_lessons.widgets import StrategyPanel

RING_GEN = torch.Generator().manual_seed(0)     # one stream for every batch below

def ring_batch(n=128, gen=RING_GEN):
    """Points from eight Gaussians on a circle: the classic 2-D GAN toy."""
    angle = torch.randint(0, 8, (n,), generator=gen) * (2 * math.pi / 8)
    centres = torch.stack([angle.cos(), angle.sin()], dim=1) * 2
    return centres + 0.05 * torch.randn(n, 2, generator=gen)

torch.manual_seed(0)
toy_G = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 2))
toy_D = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1), nn.Flatten(0))
toy_noise_gen = torch.Generator().manual_seed(1)
toy_noise = lambda n: torch.randn(n, 8, generator=toy_noise_gen)

# %%
# NBVAL_IGNORE_OUTPUT
# (a widget; the next cell checks what it drew)
panel = StrategyPanel(toy_G, toy_D, ring_batch, toy_noise, results, steps=100 if QUICK else 600)
panel

# %%
shown = panel.shown[panel.buttons.value]
print("default strategy:", panel.buttons.value)
print("final (loss_D, loss_G):", tuple(round(v, 4) for v in shown["final"]))
print(shown["graph"])

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - A GAN's G minimises −log D(G(z)) rather than the game's log(1 − D(G(z))), whose gradient vanishes
#   where D rejects the fakes; `bce(D(x_fake), 1)` is exactly that loss. On a 1-D toy, `g_first` moves
#   G's samples onto the data in 1000 steps.
# - Seed 003's strategy 1 and seed 000's loop raise the version error because `optimizer_D.step()` ran between two
#   backward passes through the same D forward. Before torch 1.5 they ran and produced a gradient of neither the
#   old nor the new D.
# - Seed 003's strategy 2 reuses D's output on a detached fake for G's loss. Today that is a freed graph, or with
#   `retain_graph=True` the version error; with no D step in between it would run and give G no gradient at all.
# - Seed 000's `F.sigmoid` before `binary_cross_entropy_with_logits` squashes G's loss into [0.31, 0.69] (D's fake
#   term into [0.69, 1.31]) and shrinks G's gradient by a factor with no upper bound (about 800x at logit −6,
#   44,000x at −10), silently.
# - Measured: the alternating orders differ by one small forward. As written, each computes D's gradient once for
#   nothing during G's step. Freezing D (`requires_grad_(False)`) or `backward(inputs=...)` removes that pass in
#   any order; the simultaneous `one_forward` does not make it. Peak saved memory is highest where G's graph
#   stays alive until D has stepped, as seed 003 says.

# %% [markdown]
# ## Exercises

# %%
prediction = 1  # SOLUTION: how many gradient passes per D parameter does one_forward make per step?
check("one_forward D grad passes", prediction, results["one_forward"].D_grad_passes,
      why="backward(inputs=...) keeps loss_G's backward out of D's .grad; only loss_D fills it.")

# %%
prediction = 2  # SOLUTION: how many forward calls of G per step does d_first_fresh_fake make?
check("d_first_fresh_fake G forwards", prediction, results["d_first_fresh_fake"].G_forward,
      why="one under no_grad for D's fake batch, one fresh with a graph for G's loss.")


# %% [markdown]
# **Build a strategy.** Write `my_step`: d_first_fresh_fake's order (D first, on a fake batch made under
# `no_grad`; then a fresh G forward for G's step), but without computing D's gradient during G's step. Section 3
# shows two ways: freeze D around G's step (`d_first_frozen_D`), or tell G's backward which tensors to fill
# (`g_first_inputs`). The cell below has the whole step except the line that sets `grad_inputs`, what
# `loss_G.backward` fills. To freeze D instead, set it to `None` (the default: every leaf that needs a gradient)
# and add the freeze. `exercises.check_strategy` runs your function on seed 000's G and D. It compares the gradients
# both optimizers step on with d_first_fresh_fake's, counts passes with the hooks of section 4, and prints what is
# still wrong.

# %%
from gan_lessons import exercises

def my_step(G, D, opt_G, opt_D, x_real, noise):
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))                       # D's fake batch, made without a graph
    opt_D.zero_grad()
    loss_D = (strategies.bce(D(x_real), 1) + strategies.bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    loss_G = strategies.bce(D(G(noise(len(x_real)))), 1)     # a fresh G forward, through the updated D
    grad_inputs = list(G.parameters())  # SOLUTION: which tensors should loss_G's backward fill?
    loss_G.backward(inputs=grad_inputs)
    opt_G.step()
    return loss_D, loss_G

solved = exercises.check_strategy(my_step)
