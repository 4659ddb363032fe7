# %% [markdown]
# # Lesson 09 · Freezing, BatchNorm, AMP, hooks and `torch.compile` in a GAN loop
#
# **Goal.** Know what five pieces of machinery do in the middle of a GAN step, each checked on this torch: freezing D
# for G's step (and the look-alike that is not one), BatchNorm's running statistics and batch statistics, mixed
# precision with one `GradScaler` for two optimizers, hooks that read or change a gradient or count saved bytes, and
# what `torch.compile` changes about `retain_graph` and `.item()`.
#
# **Material.** None of the seeds goes this far; seed 000's G (it has BatchNorm) and D are the models. The facts come
# from PyTorch's own documentation (autocast, `GradScaler` and its examples for several optimizers, `torch.compile`),
# from soumith/ganhacks (tip 4: a mini-batch holds only real or only generated images, which PyTorch's DCGAN tutorial
# follows) and from pix2pix/CycleGAN's `set_requires_grad`. The code people write, and what it does on today's torch:

# %% [markdown] tags=["read-after-exercises"]
# | what people write | on today's torch |
# |---|---|
# | `D(x_fake.detach())` in G's loss, "so that D gets no gradient" | runs; G gets no gradient, and D gets one (section 1) |
# | `D.requires_grad_(False)` before G's step, `D.requires_grad_(True)` after | right only if the second line always runs, and if no layer of D was frozen on purpose (section 1, the exercise) |
# | `with torch.no_grad(): x_fake = G(z)`, "G is left alone" | G's BatchNorm running statistics move all the same (section 2) |
# | `D(torch.cat([x_real, x_fake]))` with BatchNorm in D | runs; each logit depends on the other images in the batch, real and fake mixed (section 2) |
# | `torch.autocast("cpu", dtype=torch.bfloat16)` and `torch.amp.GradScaler("cpu")` | both work on a CPU; Linear and Conv layers compute in bfloat16, the loss and every `.grad` stay float32 (section 3) |
# | one `GradScaler` for opt_G and opt_D, an inf in one of G's gradients | opt_G skips its step, opt_D takes its own, the scale halves (section 3) |
# | `torch.compile(D)` and a strategy that keeps its graph (`retain_graph=True`) | raises about "donated buffers" once a plain backward has compiled D's backward (section 5) |
# | `loss_D.item()` inside a compiled function | a graph break: the function runs as two graphs with Python in between (section 5) |

# %%
#SETUP

# %%
import logging
from gan_lessons import costs, strategies
from gan_lessons.lesson import headline
from gan_lessons.models import Generator, Discriminator

bce = strategies.bce       # bce(logits, 1): G's non-saturating loss; bce(logits, 0): D's fake term


# %% [markdown]
# ## 1 · Freezing D during G's step
#
# **Why it matters.** G's loss must go back *through* D to reach G, but G's step has no use for D's own parameter
# gradients. Three lines look as if they keep D out of G's step. Only two of them do, and they differ in what D's
# forward saves. Lesson 05 counted whole steps; here is G's step alone, right after a D step, when D's `.grad` still
# holds the gradient D just stepped on. The counter uses the hooks `gan_lessons.costs` uses (section 4 takes them
# apart): a forward hook counts each network's calls, a hook on each call's output counts the backward passes through
# it, a hook on each parameter counts gradient accumulations, and a saved-tensor hook adds up the bytes autograd
# keeps for backward (parameters left out).

# %%
def counted(G, D, run):
    """Run run() once; count G's and D's forwards, backwards, gradient passes per parameter, and saved KiB."""
    n = dict.fromkeys(["G forward", "G backward", "D forward", "D backward", "G grads", "D grads"], 0)
    def add(key):
        n[key] += 1
    def on_forward(name):
        def hook(module, args, out):
            add(f"{name} forward")
            if out.requires_grad:
                out.register_hook(lambda grad: add(f"{name} backward"))
        return hook
    nets = {"G": G, "D": D}
    handles = [net.register_forward_hook(on_forward(name)) for name, net in nets.items()]
    handles += [p.register_post_accumulate_grad_hook(lambda p, name=name: add(f"{name} grads"))
                for name, net in nets.items() for p in net.parameters()]
    params = {p.untyped_storage().data_ptr() for net in nets.values() for p in net.parameters()}
    saved = []
    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            saved.append(t.numel() * t.element_size())
        return t
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            run()
    finally:
        for h in handles:
            h.remove()
    for name, net in nets.items():
        n[f"{name} grads"] /= len(list(net.parameters()))
    n["saved KiB"] = sum(saved) / 1024
    return n


def after_D_step():
    """Seed 000's G and D after one D step: D's .grad holds the gradient D stepped on."""
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    z, x_real = torch.randn(16, G.z_dim), torch.rand(16, 1, 28, 28) * 2 - 1
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(G(z).detach()), 0)) / 2
    loss_D.backward()
    opt_D.step()
    return G, D, opt_G, z


def G_step(how):
    G, D, opt_G, z = after_D_step()
    D_grad = [p.grad.clone() for p in D.parameters()]
    def run():
        opt_G.zero_grad()
        x_fake = G(z)
        if how == "D.requires_grad_(False)":
            D.requires_grad_(False)
            bce(D(x_fake), 1).backward()
            D.requires_grad_(True)
        elif how == "backward(inputs=G's)":
            bce(D(x_fake), 1).backward(inputs=list(G.parameters()))
        elif how == "D(x_fake.detach())":
            bce(D(x_fake.detach()), 1).backward()
        else:
            bce(D(x_fake), 1).backward()
    n = counted(G, D, run)
    n["D untouched"] = all(torch.equal(before, p.grad) for before, p in zip(D_grad, D.parameters()))
    return n, [None if p.grad is None else p.grad.clone() for p in G.parameters()]

ways = ["plain backward", "D.requires_grad_(False)", "backward(inputs=G's)", "D(x_fake.detach())"]
results = {how: G_step(how) for how in ways}
print(f"{'G step':<25}{'G fwd/bwd':>10}{'D fwd/bwd':>10}{'G grads':>9}{'D grads':>9}{'saved KiB':>11}  D's .grad")
for how, (n, _) in results.items():
    print(f"{how:<25}{n['G forward']:>6}/{n['G backward']:<3}{n['D forward']:>6}/{n['D backward']:<3}"
          f"{n['G grads']:>9g}{n['D grads']:>9g}{n['saved KiB']:>11.1f}  "
          f"{'untouched' if n['D untouched'] else 'changed'}")

# %%
(plain, G_plain), (frozen, G_frozen), (inputs, G_inputs), (detached, G_detached) = results.values()
same = lambda a, b: all(x is not None and torch.equal(x, y) for x, y in zip(a, b))
claim("a plain backward computes D's gradient too, and adds it to D's .grad", plain["D grads"] == 1
      and not plain["D untouched"])
claim("frozen D: G gets exactly the plain backward's gradient, D's .grad is untouched, no D gradient pass",
      same(G_frozen, G_plain) and frozen["D untouched"] and frozen["D grads"] == 0)
claim("backward(inputs=G's parameters): the same, G's gradient identical, D's .grad untouched",
      same(G_inputs, G_plain) and inputs["D untouched"] and inputs["D grads"] == 0)
claim("both still run one backward pass through D: G's gradient has to go through it",
      frozen["D backward"] == inputs["D backward"] == 1)
claim("D(x_fake.detach()): none of G's 14 parameters gets a gradient, no backward reaches G, and D's .grad changes",
      all(g is None for g in G_detached) and detached["G backward"] == 0 and not detached["D untouched"],
      f"{sum(g is None for g in G_detached)} of {len(G_detached)} G parameters without .grad")
claim("a frozen D's forward saves less than with backward(inputs=...), which decides only at backward time",
      frozen["saved KiB"] < inputs["saved KiB"] == plain["saved KiB"],
      f"{frozen['saved KiB']:.1f} KiB vs {inputs['saved KiB']:.1f} KiB")

# %% [markdown]
# The detached version is the one to never write: it cuts exactly the path G learns from, and D's `.grad` collects a
# gradient for the wrong target (`1` on fakes), which an optimizer step on D would then use unless
# `opt_D.zero_grad()` comes first. With D frozen **and** the fake detached, nothing in the loss requires grad any
# more, and backward says so:

# %%
G, D, opt_G, z = after_D_step()
D.requires_grad_(False)
with expect_error(RuntimeError, "element 0 of tensors does not require grad and does not have a grad_fn"):
    bce(D(G(z).detach()), 1).backward()


# %% [markdown]
# Freezing and `backward(inputs=...)` give G the same gradient and leave D's `.grad` alone. They differ in the
# forward: `requires_grad_(False)` is known **before** D runs, while `inputs=` is read only when backward starts,
# after D's forward has saved everything. What does a frozen layer leave out? A Linear layer needs its input only for
# its weight's gradient, and a frozen one does not save it. Predict before you run the next cell: does a frozen Conv
# layer save its input?

# %%
prediction = True  # SOLUTION: with D frozen, does D's first Conv layer save its input for backward? (True or False)

# %% [markdown]
# Each of D's Conv and Linear layers gets an input that requires grad (as G's fake does), with D frozen, and a
# saved-tensor hook records whether the layer saved that input:

# %%
def saves_its_input(layer, shape):
    """Whether the layer's forward, on an input that requires grad, saves that input for backward."""
    x, packed = torch.randn(shape, requires_grad=True), []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        layer(x)
    return any(t.data_ptr() == x.data_ptr() for t in packed)

G, D, opt_G, z = after_D_step()
layers = {name: m for name, m in D.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))}
shapes = {}
def record_input_shape(name):
    def hook(module, args, out):
        shapes[name] = args[0].shape          # returns None: the output stays as it is
    return hook
handles = [m.register_forward_hook(record_input_shape(name)) for name, m in layers.items()]
with torch.no_grad():
    D(G(z))
for h in handles:
    h.remove()
D.requires_grad_(False)
frozen_saves = {name: saves_its_input(m, shapes[name]) for name, m in layers.items()}
D.requires_grad_(True)
for name, m in layers.items():
    print(f"D.{name:<6} {type(m).__name__:<7} input {list(shapes[name])!s:<16} frozen: "
          f"{'saves' if frozen_saves[name] else 'does not save'} its input")
linear_kib = sum(shapes[n].numel() * 4 for n, m in layers.items() if isinstance(m, nn.Linear)) / 1024
claim("in a frozen D each Conv layer still saves its input (ConvolutionBackward0 keeps it whatever requires grad), "
      "and no Linear layer does", all(frozen_saves[n] == isinstance(m, nn.Conv2d) for n, m in layers.items()))
claim("what freezing saved in the table above is exactly the inputs of D's two Linear layers",
      abs((plain["saved KiB"] - frozen["saved KiB"]) - linear_kib) < 1e-6,
      f"{plain['saved KiB'] - frozen['saved KiB']:.1f} KiB saved; Linear inputs {linear_kib:.1f} KiB")
check("a frozen Conv layer saves its input", prediction, frozen_saves["net.0"],
      why="a convolution's backward function saves its input whatever requires grad; only the input's own "
          "gradient needs the weight, and the weight's gradient needs the input.")

# %% [markdown]
# So freezing saves what the frozen layers' weight gradients alone would need, layer by layer, as each backward
# function decides: here D's Linear inputs, not its Conv inputs. Lesson 05's strategies `d_first_frozen_D` and
# `g_first_inputs` (in `gan_lessons.strategies`) are exactly these two G steps.
#
# Freezing has its own trap: the flag has to come back. `d_first_frozen_D` ends with `D.requires_grad_(True)`, as
# pix2pix's `set_requires_grad` does. That line does not run if the step raises in between (Ctrl-C in a notebook is
# enough), and it switches on **every** parameter of D, also one that was frozen on purpose (a pretrained feature
# layer, say). Below, a forward hook on D stands in for the Ctrl-C:

# %%
def frozen_D_run():
    """Seed 000's models and optimizers, as d_first_frozen_D steps them."""
    G, D, x_real, noise = costs.fresh_gan(batch=8)
    return G, D, optim.Adam(G.parameters()), optim.Adam(D.parameters()), x_real, noise

G, D, opt_G, opt_D, x_real, noise = frozen_D_run()
D.net[0].requires_grad_(False)                       # frozen on purpose, for good
first_layer = D.net[0].weight.detach().clone()
for _ in range(2):
    strategies.d_first_frozen_D(G, D, opt_G, opt_D, x_real, noise)
claim("after a d_first_frozen_D step, D's first layer, frozen on purpose, requires grad again",
      D.net[0].weight.requires_grad)
claim("so the next step trains it, and nothing says so", not torch.equal(first_layer, D.net[0].weight),
      f"max |change| {(D.net[0].weight - first_layer).abs().max():.2e}")

G, D, opt_G, opt_D, x_real, noise = frozen_D_run()
def ctrl_c(module, args):
    if not D.net[7].weight.requires_grad:            # only during G's step, when D is frozen
        raise KeyboardInterrupt
handle = D.register_forward_pre_hook(ctrl_c)
try:
    strategies.d_first_frozen_D(G, D, opt_G, opt_D, x_real, noise)
except KeyboardInterrupt:
    print("KeyboardInterrupt during G's step")
handle.remove()
still_frozen = sum(not p.requires_grad for p in D.parameters())
claim("interrupted during G's step, D is left frozen", still_frozen == len(list(D.parameters())),
      f"{still_frozen} of {len(list(D.parameters()))} D parameters frozen")
with expect_error(RuntimeError, "element 0 of tensors does not require grad"):
    strategies.d_first_frozen_D(G, D, opt_G, opt_D, x_real, noise)      # the cell run again

# %% [markdown]
# The first failure is silent: a layer meant to stay fixed trains from the second step on. The second one is loud but
# far from its cause: the next step's `loss_D` reaches no parameter at all, and the message says nothing about
# freezing. The exercise at the end builds the G step that avoids both: it remembers each flag and puts it back in a
# `finally` block.

# %% [markdown]
# ## 2 · BatchNorm in a GAN step
#
# **Why it matters.** In training mode a BatchNorm layer normalises each feature with the mean and variance of **the
# batch it is given**, and every such forward also updates its running statistics (`running_mean`, `running_var`,
# `num_batches_tracked`), which evaluation mode uses instead. Both facts leak into a GAN step: the statistics count
# G's forwards, not G's steps, and a D with BatchNorm sees real and fake images through each other. Seed 000's G has
# three BatchNorm layers. First, lesson 04's finding again, on G's first one:

# %%
torch.manual_seed(0)
G = Generator()
z = torch.randn(16, G.z_dim)
bn = G.net[1]                                    # G's first BatchNorm1d

def bn_moves(run):
    """Run once; return (did running_mean change, how much num_batches_tracked grew)."""
    mean, batches = bn.running_mean.clone(), bn.num_batches_tracked.item()
    run()
    return not torch.equal(mean, bn.running_mean), bn.num_batches_tracked.item() - batches

def forward_without_graph():
    with torch.no_grad():
        G(z)

changed, counted_batches = bn_moves(forward_without_graph)
claim("training mode, under no_grad: running_mean changes and num_batches_tracked grows by 1",
      changed and counted_batches == 1)
G.eval()
changed, counted_batches = bn_moves(forward_without_graph)
G.train(True)                                    # back to training mode
claim("evaluation mode: neither changes", not changed and counted_batches == 0)

# %% [markdown]
# So the running statistics count forwards. How many does one step of each strategy of lesson 05 make?

# %%
steps_run = ["one_forward", "d_first_reuse_fake", "g_first", "d_first_fresh_fake", "d_first_frozen_D", "g_first_inputs"]
tracked = {}
for name in steps_run:
    G, D, x_real, noise = costs.fresh_gan(batch=16)
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    strategies.get(name)(G, D, opt_G, opt_D, x_real, noise)
    tracked[name] = G.net[1].num_batches_tracked.item()
    print(f"{name:<20} num_batches_tracked after one step: {tracked[name]}")
claim("d_first_fresh_fake updates G's running statistics twice per step, every other strategy once",
      tracked["d_first_fresh_fake"] == 2 and all(v == 1 for k, v in tracked.items() if k != "d_first_fresh_fake"))

# %% [markdown]
# `d_first_fresh_fake` runs G twice (a fake batch for D under `no_grad`, a fresh one with a graph for G's loss), and
# each training-mode forward is one update of the running statistics, with momentum 0.1. Harmless, but the running
# averages then move twice per step, forgetting old steps twice as fast, and `num_batches_tracked` is not a step
# counter. What matters more is D.
#
# **D with BatchNorm.** Seed 000's D has none. A small D that has one shows what mixing does: D's logits for the same
# real images, once in an all-real batch and once in a batch half real, half fake.

# %%
torch.manual_seed(0)
D_bn = nn.Sequential(nn.Linear(2, 16), nn.BatchNorm1d(16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
x_real, x_fake = torch.randn(8, 2) + 3, torch.randn(8, 2)
stats = D_bn[1]

def through_D(*batches):
    """D_bn's logits for each batch in turn, in training mode, starting from fresh running statistics."""
    stats.reset_running_stats()
    with torch.no_grad():
        logits = [D_bn(batch) for batch in batches]
    return logits, stats.running_mean.clone(), stats.num_batches_tracked.item()

(separate, _), mean_separate, n_separate = through_D(x_real, x_fake)
(mixed_batch,), mean_mixed, n_mixed = through_D(torch.cat([x_real, x_fake]))
mixed = mixed_batch[:8]                          # the logits of the 8 real images
gap = (separate - mixed).abs().max().item()
claim("training mode: D's logits for the same 8 real images differ between an all-real and a mixed batch",
      gap > 1e-3, f"max |difference| {gap:.4f}")
claim("separate batches update the running statistics twice, the concatenated batch once, to another mean",
      n_separate == 2 and n_mixed == 1 and not torch.allclose(mean_separate, mean_mixed))

other_fakes = torch.randn(8, 2) - 3
with torch.no_grad():
    mixed_again = D_bn(torch.cat([x_real, other_fakes]))[:8]
claim("in a mixed batch, changing only the fakes changes D's logits for the real images",
      not torch.allclose(mixed, mixed_again), f"max |difference| {(mixed - mixed_again).abs().max():.4f}")

D_bn.eval()
with torch.no_grad():
    eval_gap = (D_bn(x_real) - D_bn(torch.cat([x_real, x_fake]))[:8]).abs().max().item()
D_bn.train()
claim("evaluation mode: the same logits either way, each image is normalised on its own", eval_gap == 0)

# %% [markdown]
# In training mode the batch mean and variance mix every image in the batch, so in a concatenated batch D's verdict
# on a real image depends on the fakes beside it (and the other way round), and the running statistics end up at a
# mixture that neither real nor fake batches have. ganhacks' tip 4 says to keep each mini-batch all real or all fake,
# which is why PyTorch's DCGAN tutorial calls D twice; the other way out is a D without BatchNorm (seed 000's D, and
# every WGAN-GP critic: its penalty is per sample, lesson 08). For G, sample figures in `G.eval()` under `no_grad`
# (lesson 04's exercise).

# %% [markdown]
# ## 3 · Mixed precision: autocast, and one GradScaler for two optimizers
#
# **Why it matters.** `torch.autocast` runs chosen operations in a 16-bit type and leaves the rest in float32; a
# `GradScaler` multiplies the loss so that small float16 gradients do not round to zero, and skips an optimizer step
# whose gradients came out inf or NaN. A GAN has two losses and two optimizers, which is exactly the case PyTorch's
# AMP examples treat separately. Autocast on a CPU defaults to bfloat16, and this torch runs all of it on a CPU, so
# CI checks it. First, which operations change type, on seed 000's G and D:

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
loss_G.backward()
for kind, seen in sorted(dtypes.items()):
    print(f"{kind:<12} outputs {', '.join(sorted(str(t) for t in seen))}")
print(f"x_fake {x_fake.dtype}, logits {logits.dtype}, loss_G {loss_G.dtype}")
claim("under autocast on the CPU, every Linear and Conv2d computes in bfloat16",
      dtypes["Linear"] == dtypes["Conv2d"] == {torch.bfloat16})
claim("BatchNorm and ReLU keep the bfloat16 they are given", dtypes["BatchNorm1d"] == dtypes["ReLU"] == {torch.bfloat16})
claim("the BCE loss comes out float32: autocast runs it in float32 whatever its input",
      logits.dtype == torch.bfloat16 and loss_G.dtype == torch.float32)
claim("the parameters stay float32, and so does every gradient backward writes into them",
      all(p.dtype == p.grad.dtype == torch.float32 for p in G.parameters()))

# %% [markdown]
# The layers after a Linear or a Conv (BatchNorm and ReLU here) are not on autocast's CPU list and keep the type they
# are given; the lists of operations autocast changes are in its documentation, and they differ between CPU and CUDA.
# The parameters are never converted: autocast casts a bfloat16 copy for each operation, and backward brings each
# gradient back to its parameter's type.
#
# bfloat16 keeps float32's exponent, and float16 does not. That is why a `GradScaler` matters for float16 on a GPU
# and hardly ever for bfloat16:

# %%
tiny = torch.tensor(1e-8)
claim("a gradient of 1e-8 rounds to 0 in float16, not in bfloat16", tiny.half().item() == 0 and tiny.bfloat16().item() > 0)
claim("float16 overflows above 65504; bfloat16 reaches about 3.4e38, as float32 does",
      torch.finfo(torch.float16).max == 65504 and torch.finfo(torch.bfloat16).max > 3e38)

# %% [markdown]
# **One scaler, two optimizers.** The pattern of PyTorch's AMP examples: scale each loss before its backward, let
# `scaler.step(opt)` unscale that optimizer's gradients and step it only if they are all finite, and call
# `scaler.update()` **once per iteration**, after both steps. On this torch `torch.amp.GradScaler("cpu")` exists and
# works, so the whole loop runs here. The `poison` argument writes an inf into one of G's gradients, as a float16
# overflow would.

# %%
HAS_AMP_SCALER = hasattr(torch.amp, "GradScaler")    # missing on older torch (2.1)

def amp_step(G, D, opt_G, opt_D, scaler, x_real, z, device_type="cpu", dtype=torch.bfloat16, poison=False):
    """d_first_reuse_fake under autocast, one GradScaler for both optimizers."""
    with torch.autocast(device_type, dtype=dtype):
        x_fake = G(z)
        loss_D = (bce(D(x_real), 1) + bce(D(x_fake.detach()), 0)) / 2
    opt_D.zero_grad()
    scaler.scale(loss_D).backward()
    if poison:
        G.net[0].weight.grad[0, 0] = float("inf")       # G's .grad (the last step's) holds an inf while D steps
    scaler.step(opt_D)                                  # skipped if D's gradients hold an inf or NaN
    with torch.autocast(device_type, dtype=dtype):
        loss_G = bce(D(x_fake), 1)
    opt_G.zero_grad()
    scaler.scale(loss_G).backward()
    if poison:
        G.net[0].weight.grad[0, 0] = float("inf")       # and an overflow in one of G's new gradients
    scaler.step(opt_G)
    scaler.update()                                     # once, after both steps
    return loss_D, loss_G

def amp_run(device_type="cpu", dtype=torch.bfloat16, init_scale=2.0**16):
    """Two amp steps on seed 000's models, the second with an inf in G's gradient; what changed, step by step."""
    G, D, x_real, noise = costs.fresh_gan(batch=8, device=device_type)
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    scaler = torch.amp.GradScaler(device_type, init_scale=init_scale)     # 2**16 is the default
    report = []
    for poison in (False, True):
        G_before = [p.detach().clone() for p in G.parameters()]
        D_before = [p.detach().clone() for p in D.parameters()]
        scale = scaler.get_scale()
        amp_step(G, D, opt_G, opt_D, scaler, x_real, noise(8), device_type, dtype, poison)
        moved = lambda net, before: any(not torch.equal(p, b) for p, b in zip(net.parameters(), before))
        report.append({"G moved": moved(G, G_before), "D moved": moved(D, D_before), "scale": (scale, scaler.get_scale()),
                       "opt_G steps": int(opt_G.state[G.net[0].weight]["step"])})
    return report

if HAS_AMP_SCALER:
    clean, poisoned = amp_run()
    for label, r in (("clean step", clean), ("inf in G's grad", poisoned)):
        print(f"{label:<16} G moved: {r['G moved']!s:<6} D moved: {r['D moved']!s:<6} "
              f"scale {r['scale'][0]:g} -> {r['scale'][1]:g}   opt_G's Adam step count: {r['opt_G steps']}")
    claim("a clean step: both optimizers step, and the scale stays at 65536 (it grows only after 2000 clean steps)",
          clean["G moved"] and clean["D moved"] and clean["scale"] == (65536.0, 65536.0))
    claim("an inf in G's gradient: opt_G skips its step, G is unchanged, and Adam's step count does not advance",
          not poisoned["G moved"] and poisoned["opt_G steps"] == 1)
    claim("opt_D still steps in that iteration, with an inf in G's .grad at that moment: each optimizer checks only "
          "its own gradients",
          poisoned["D moved"])
    claim("and the one update() halves the scale", poisoned["scale"] == (65536.0, 32768.0))
else:
    print(f"torch {torch.__version__} has no torch.amp.GradScaler (torch 2.1 lacks it; the reference torch 2.13 has it): skipped, not checked")

# %% [markdown]
# Each `scaler.step(opt)` decides for its own optimizer, so one iteration can train D and skip G. `update()` comes
# once, after every optimizer has stepped, so that the scale reacts to the iteration as a whole. On a GPU the same
# loop runs with float16, where overflows really happen. The next cell runs it only where CUDA is available, and says
# so where it is not:

# %%
# NBVAL_IGNORE_OUTPUT
# (its output names the device.)
if torch.cuda.is_available() and HAS_AMP_SCALER:
    clean, poisoned = amp_run("cuda", torch.float16, init_scale=2.0**10)   # low enough that the clean step stays finite
    claim("on CUDA with float16: a clean step moves G and D; an inf in G's gradient skips G's step only and halves the scale",
          clean["G moved"] and clean["D moved"] and not poisoned["G moved"] and poisoned["D moved"]
          and poisoned["scale"][1] == poisoned["scale"][0] / 2)
else:
    print("No CUDA device here (or no torch.amp.GradScaler): the float16 run on a GPU is skipped, not checked. The bfloat16 run above, on the "
          "CPU, checked the same GradScaler logic.")

# %% [markdown]
# ## 4 · Hooks: read a gradient, change it, count what is saved
#
# **Why it matters.** Hooks let you look inside a step without rewriting it. `x_fake.register_hook(fn)` calls `fn`
# with the gradient of the loss with respect to `x_fake`, the signal G receives through D; if `fn` returns a tensor,
# that tensor replaces the gradient for everything upstream, i.e. all of G. Saved-tensor hooks
# (`torch.autograd.graph.saved_tensors_hooks`) see every tensor autograd keeps for backward. Reading first:

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()
z = torch.randn(8, G.z_dim)
x_fake = G(z)
loss_G = bce(D(x_fake), 1)
want, = torch.autograd.grad(loss_G, x_fake, retain_graph=True)   # before any hook
seen = []
handle = x_fake.register_hook(lambda grad: seen.append(grad.clone()))
loss_G.backward()
handle.remove()
claim("the hook on x_fake receives exactly torch.autograd.grad(loss_G, x_fake): what G gets from D",
      len(seen) == 1 and torch.equal(seen[0], want), f"shape {list(seen[0].shape)}, norm {seen[0].norm():.4f}")


# %% [markdown]
# Now a hook that returns something: half the gradient. Everything upstream of `x_fake` scales with it, since
# backward is linear in the gradient it is handed. What that does to G's *update* depends on the optimizer:

# %%
def G_update(factor, make_opt):
    """G's parameter change after one step, with a hook scaling the gradient at x_fake by `factor`."""
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
grads_1, sgd_1 = G_update(1.0, sgd)
grads_half, sgd_half = G_update(0.5, sgd)
_, adam_1 = G_update(1.0, adam)
_, adam_half = G_update(0.5, adam)
relative = lambda a, b: ((a - b).norm() / b.norm()).item()
claim("halved at x_fake, every gradient of G is exactly halved", torch.equal(grads_half, grads_1 / 2))
claim("with SGD, G's update is halved too", torch.allclose(sgd_half, sgd_1 / 2, atol=1e-6),
      f"relative difference from the unhooked update {relative(sgd_half, sgd_1):.3f}")
claim("with Adam, G's first update hardly changes: Adam divides by the gradient's own size",
      relative(adam_half, adam_1) < 0.01, f"relative difference {relative(adam_half, adam_1):.4f}")

# %% [markdown]
# Adam's first step is about `lr * g / |g|` per parameter, so a constant factor on the gradient almost cancels (only
# its `eps` notices). A factor on the **whole** loss, or a hook that scales all of G's signal, is a learning-rate knob
# under SGD and nearly nothing under Adam. A weight on **one term** of a sum is another matter: it changes the
# direction of the sum's gradient, and so where training settles. WGAN-GP's `gp_weight=10` (lesson 08) is such a
# weight. On the smallest case, $(p-1)^2 + w\,(p+1)^2$, whose minimum is at $p = (1-w)/(1+w)$:

# %%
def adam_settles(w, scale=1.0, steps=3000):
    """Where Adam leaves p on scale * ((p - 1)² + w (p + 1)²), starting from p = 0.5."""
    p = torch.tensor(0.5, requires_grad=True)
    opt = optim.Adam([p], lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        (scale * ((p - 1) ** 2 + w * (p + 1) ** 2)).backward()
        opt.step()
    return round(p.item(), 3)

ends = {(w, scale): adam_settles(w, scale) for w in (1, 10) for scale in (1, 10)}
for (w, scale), p_end in ends.items():
    print(f"term weight w = {w:<3} whole-loss factor {scale:<3} Adam settles at p = {p_end}")
claim("a factor on the whole loss does not move where Adam settles",
      ends[1, 1] == ends[1, 10] and ends[10, 1] == ends[10, 10])
claim("a weight on one term does: p = 0 with w = 1, p = -0.818 = (1 - 10) / (1 + 10) with w = 10",
      ends[1, 1] == 0 and ends[10, 1] == round(-9 / 11, 3), f"{ends[1, 1]}, {ends[10, 1]}")

# %% [markdown]
# A hook that changes the gradient's *direction* (clipping each sample, adding noise) moves training the same way.
# One more thing to know: a tensor hook also fires inside `torch.autograd.grad`, and changes what it returns:

# %%
torch.manual_seed(0)
G, D = Generator(), Discriminator()
x_fake = G(torch.randn(8, G.z_dim))
loss_G = bce(D(x_fake), 1)
plain, = torch.autograd.grad(loss_G, x_fake, retain_graph=True)
x_fake.register_hook(lambda grad: grad * 0.5)
hooked, = torch.autograd.grad(loss_G, x_fake)
claim("after register_hook, torch.autograd.grad(loss_G, x_fake) returns the hooked gradient",
      torch.equal(hooked, plain * 0.5))

# %% [markdown]
# **Counting saved bytes.** Lesson 03's probe, now as a check you can do by hand: `tanh(Linear(16, 32)(x))` for a
# batch `x` of shape [8, 16]. The layer's `addmm` keeps `x` (8 × 16 floats, for the weight's gradient) and the
# transposed weight (16 × 32, for `x`'s gradient); `tanh` keeps its output (8 × 32), because its derivative is 1 −
# tanh². Four bytes each: 512 + 2048 + 1024 = 3584. Autograd saves only what the gradients it will compute need, so
# freezing the layer, or an `x` that does not require grad, removes one of them:

# %%
torch.manual_seed(0)
layer = nn.Linear(16, 32)

def saved_bytes(x_requires_grad, layer_frozen):
    """Bytes and shapes of what autograd saves for tanh(layer(x))."""
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

by_hand = {"x and layer require grad": 4 * (8 * 16 + 16 * 32 + 8 * 32),
           "layer frozen": 4 * (16 * 32 + 8 * 32), "x needs no grad": 4 * (8 * 16 + 8 * 32)}
measured = {"x and layer require grad": saved_bytes(True, False), "layer frozen": saved_bytes(True, True),
            "x needs no grad": saved_bytes(False, False)}
for case, (count, shapes) in measured.items():
    print(f"{case:<26} saved {shapes}: {count} bytes (by hand {by_hand[case]})")
claim("the pack hook's count equals the sizes worked out by hand, in all three cases",
      all(measured[k][0] == by_hand[k] for k in by_hand), ", ".join(f"{v[0]}" for v in measured.values()))

# %% [markdown]
# The transposed weight is a view of the weight, not new memory, which is why section 1's counter (and
# `gan_lessons.costs`) leaves parameters' storage out. In a frozen D the Linear layers keep only such views; the Conv
# layers still keep their inputs (section 1), so what freezing saves is the Linear layers' inputs.

# %% [markdown]
# ## 5 · `torch.compile`: donated buffers and graph breaks
#
# **Why it matters.** `torch.compile(D)` traces D's forward into a graph and compiles a matching backward. Two things
# a GAN loop does can collide with it: keeping a graph for a second backward (`retain_graph=True`, as lesson 05's
# `one_forward` does), and pulling a number out with `.item()` mid-function. Compiling costs time, so the models here
# are tiny, and the backend is `aot_eager`: it runs the same AOTAutograd layer as the default `inductor` backend
# (where donated buffers live) without generating and compiling C++, so it is fast and needs no compiler. First,
# whether `torch.compile` works on this machine at all:

# %%
torch._logging.set_logs(dynamo=logging.ERROR)     # keep dynamo's own warnings out of the outputs
import torch._functorch.config as functorch_config

try:
    torch._dynamo.reset()
    torch.compile(nn.Linear(2, 1), backend="aot_eager")(torch.ones(1, 2)).sum().backward()
    compile_works = True
    print("torch.compile works here (backend aot_eager)")
except Exception as error:                        # any failure: say so, and skip this section's checks
    compile_works = False
    print(f"torch.compile does NOT work on this machine ({type(error).__name__}: {headline(str(error))}). "
          "The checks of section 5 are skipped below, each cell says so; the rest of the lesson is unaffected.")
SKIPPED = "skipped, not checked: torch.compile does not work on this machine (see above)"

# %% [markdown]
# **Donated buffers.** When AOTAutograd compiles a backward for a plain `backward()`, it marks the activations the
# forward saved as *donated*: the backward may reuse their memory, since nobody will need them again. A backward with
# `retain_graph=True` promises the opposite, and torch refuses it. On torch 2.13 the backward is compiled the first
# time it runs, and whichever backward comes first decides: a plain one donates, and a later `retain_graph=True`
# through the same compiled graph raises. The smallest case:

# %%
HAS_DONATION = compile_works and hasattr(functorch_config, "donated_buffer")    # not in older torch
NO_DONATION = (f"skipped, not checked: torch {torch.__version__} has no donated buffers "
               f"(torch._functorch.config.donated_buffer)" if compile_works else SKIPPED)
if HAS_DONATION:
    torch._dynamo.reset()
    torch.manual_seed(0)
    D_small = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
    D_compiled = torch.compile(D_small, backend="aot_eager")
    x = torch.randn(8, 2)
    D_compiled(x).sum().backward()                # the first backward: compiled with donated buffers
    loss = D_compiled(x).sum()
    with expect_error(RuntimeError, "compiled with non-empty donated buffers which requires create_graph=False "
                                    "and retain_graph=False"):
        loss.backward(retain_graph=True)
else:
    print(NO_DONATION)


# %% [markdown]
# In a GAN loop that is one step of a strategy with a plain backward through D, followed by `one_forward`, whose
# `loss_G.backward(inputs=..., retain_graph=True)` goes through the same compiled D. The checks below run two steps
# on tiny compiled G and D, in three versions; the fix is the trainer's own (`_compiled_step` in
# `gan_lessons.training` sets `torch._functorch.config.donated_buffer = False` before compiling), here as a `patch`
# that undoes itself:

# %%
def compiled_steps(order, donate=True, compile_=True):
    """Run the strategies in `order` on tiny compiled G and D; return G's and D's weights after them."""
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
    claim("two one_forward steps alone run: their first backward through D kept the graph, so nothing was donated",
          bool(torch.isfinite(alone).all()))
    retain_free = ["d_first_reuse_fake", "g_first", "d_first_fresh_fake", "d_first_frozen_D", "g_first_inputs"]
    claim("the five orders that never retain a graph run one after another, compiled with donation on",
          bool(torch.isfinite(compiled_steps(retain_free * 2)).all()))
    eager = compiled_steps(["d_first_fresh_fake", "one_forward"], compile_=False)
    fixed = compiled_steps(["d_first_fresh_fake", "one_forward"], donate=False)
    claim("with donated_buffer=False the same two steps run, and end where eager PyTorch ends",
          torch.allclose(fixed, eager, atol=1e-6), f"max |difference| {(fixed - eager).abs().max():.1e}")
else:
    print(NO_DONATION)

# %% [markdown]
# So on this torch the error depends on history: `one_forward` on its own passes, and the same strategy after one
# other step fails. Two fixes, then. Turn donation off before compiling, as the trainer does; the cost is the memory
# donation would have saved in the backward. Or do not retain graphs: every order of lesson 05 except `one_forward`
# (and seed 003's, which fails anyway) uses each graph once, and runs compiled with donation on.
#
# **Graph breaks.** Dynamo traces Python into a graph until it meets something it cannot put in one. `.item()` is the
# classic: it turns a tensor into a Python number, and by default dynamo stops the graph there, runs that line in
# Python, and starts a new graph after it. `torch._dynamo.explain` reports the breaks without running a compiler:

# %%
torch.manual_seed(0)
D_small = nn.Linear(4, 1)

def logged_step(x):
    loss_D = F.softplus(D_small(x)).mean()
    value = loss_D.item()                          # the loss, for a log line
    return loss_D * 2, value

if compile_works:
    torch._dynamo.reset()
    report = torch._dynamo.explain(logged_step)(torch.randn(8, 4))
    reason = report.break_reasons[0].reason.splitlines()[0]
    print(f"graphs: {report.graph_count}, graph breaks: {report.graph_break_count}")
    print(f"reason: {reason}")
    claim("one .item() splits the function into two graphs: one graph break", report.graph_break_count == 1
          and report.graph_count == 2)
    claim("and the reason names Tensor.item", "Tensor.item" in reason)   # its wording varies by version
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        captured = torch._dynamo.explain(logged_step)(torch.randn(8, 4))
    claim("with capture_scalar_outputs=True the number stays in the graph: no break",
          captured.graph_break_count == 0 and captured.graph_count == 1)

    def branching_step(x):
        loss_D = F.softplus(D_small(x)).mean()
        if loss_D.item() > 10:                     # Python decides on the number
            loss_D = loss_D * 0
        return loss_D * 2

    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(capture_scalar_outputs=True):
            branching = torch._dynamo.explain(branching_step)(torch.randn(8, 4))
    except Exception as error:                     # older dynamo (torch 2.1) fails on this case itself
        branching = None
        print(f"torch {torch.__version__}: dynamo.explain raises {type(error).__name__} on the branch: skipped, "
              "not checked")
    if branching is not None:
        claim("but a Python branch on the number breaks the graph even then", branching.graph_break_count == 1)
else:
    print(SKIPPED)

# %% [markdown]
# A break is not an error: the function still runs, as two compiled pieces with Python between them. A number can
# stay in the graph only while no Python code looks at it. In a training loop the cheap habit is to keep losses as
# tensors inside the step and read them once in a while, as `gan_lessons.training` does (`_losses` sums the detached
# losses, and `.tolist()` runs once an epoch); on a GPU `.item()` also waits for the device to finish.

# %% [markdown] tags=["read-after-exercises"]
# ## Summary
#
# - For G's step, freeze D (`D.requires_grad_(False)`) or call `loss_G.backward(inputs=list(G.parameters()))`:
#   G gets the same gradient as a plain backward, D's `.grad` is untouched, D's gradient is not computed. Freezing
#   also saves less in D's forward. `D(x_fake.detach())` in G's loss gives G **nothing** and gives D a gradient.
# - Restore the flags as they were, in a `finally`: `D.requires_grad_(True)` unfreezes layers frozen on purpose,
#   and a step that raises in between leaves D frozen, silently.
# - A training-mode BatchNorm updates its running statistics on every forward, `no_grad` or not; `eval()` stops
#   it. `d_first_fresh_fake` updates G's twice per step. Real and fake through a BatchNorm'd D in one batch mix
#   their statistics: keep the batches separate, or use a D without BatchNorm.
# - Autocast on the CPU (bfloat16) runs Linear and Conv in bfloat16 and the BCE loss in float32; parameters and
#   gradients stay float32. `torch.amp.GradScaler("cpu")` works on torch 2.13. With one scaler and two
#   optimizers, each `scaler.step` skips only its own optimizer on inf/NaN, and `scaler.update()` runs once per
#   iteration and halves the scale after an inf.
# - A hook on `x_fake` sees the gradient G gets through D (the same as `torch.autograd.grad`, which the hook also
#   changes). Scaling it scales G's gradient exactly; SGD's update follows, Adam's barely moves.
#   `saved_tensors_hooks` count what autograd keeps, and the count matches the sizes worked out by hand.
# - Compiled modules donate saved activations to a plain backward; a later `retain_graph=True` through them
#   raises. `torch._functorch.config.donated_buffer = False` (the trainer's fix) or orders that never retain.
#   `.item()` in a compiled function is a graph break.

# %% [markdown]
# ## Exercises

# %%
prediction = 2  # SOLUTION: after one d_first_fresh_fake step, how much has num_batches_tracked of G's first BatchNorm grown?
check("num_batches_tracked after one d_first_fresh_fake step", prediction, tracked["d_first_fresh_fake"],
      why="G runs twice in that order (D's fake batch under no_grad, then G's own), and each training-mode forward "
          "updates the running statistics, graph or no graph.")

# %%
prediction = "D"  # SOLUTION: one GradScaler, an inf in one of G's gradients: which optimizer still steps, "G", "D", "both" or "neither"?
if HAS_AMP_SCALER:
    clean, poisoned = amp_run()
    stepped = {(True, True): "both", (True, False): "G", (False, True): "D", (False, False): "neither"}
    check("optimizer that steps when G's gradient holds an inf", prediction,
          stepped[poisoned["G moved"], poisoned["D moved"]],
          why="each scaler.step(opt) unscales and checks only that optimizer's gradients; D's were finite.")
else:
    print(f"torch {torch.__version__} has no torch.amp.GradScaler (torch 2.1 lacks it; the reference torch 2.13 has it): skipped, not checked")

# %%
prediction = torch.float32  # SOLUTION: after a backward under torch.autocast("cpu", dtype=torch.bfloat16), what dtype is G.net[0].weight.grad?
torch.manual_seed(0)
G, D = Generator(), Discriminator()
with torch.autocast("cpu", dtype=torch.bfloat16):
    loss_G = bce(D(G(torch.randn(4, G.z_dim))), 1)
loss_G.backward()
check("dtype of a parameter's gradient after an autocast backward", prediction, G.net[0].weight.grad.dtype,
      why="autocast casts copies for each operation; the parameter stays float32, and its gradient takes its type.")

# %%
prediction = "SGD"  # SOLUTION: a hook halves the gradient at x_fake. Whose first update of G is halved too, "SGD" or "Adam"?
check("optimizer whose update follows a halved gradient", prediction,
      "SGD" if torch.allclose(sgd_half, sgd_1 / 2, atol=1e-7) and not torch.allclose(adam_half, adam_1 / 2, atol=1e-7)
      else "Adam",
      why="SGD's step is lr * grad; Adam's first step is about lr * grad / |grad|, so a constant factor cancels.")

# %%
prediction = 1  # SOLUTION: how many graph breaks does torch._dynamo.explain report for logged_step, with its one .item()?
breaks = report.graph_break_count if compile_works else SKIPPED
check("graph breaks in logged_step", prediction, breaks,
      why="dynamo cannot keep a Python number in the graph by default: it ends the graph at .item() and starts "
          "another after it.")

# %% [markdown]
# ### Build it: a G step with D frozen, that puts everything back
#
# Section 1 found two ways a freeze goes wrong: `D.requires_grad_(True)` afterwards switches on layers that were
# frozen on purpose, and a step that raises between the two lines leaves D frozen for good. Write `g_step(G, D,
# opt_G, z)`: one G step on the non-saturating loss `bce(D(G(z)), 1)`, with D frozen **during its forward and
# backward**, that leaves D's `.grad` exactly as it was, and puts every one of D's `requires_grad` flags back as it
# found it, also when something inside the step raises (let the error through). The checker runs it on seed 000's G
# and D, whose first layer is frozen on purpose and whose `.grad` holds an earlier gradient. It compares G's gradient
# at `opt_G.step()` with the right one, checks D's `.grad`, weights and flags, reads the flags when D's forward
# starts, and runs the step once more with an error raised inside D's forward. The whole body is yours: nothing of
# the freeze, the flags or the `try` is written for you.

# %%
from gan_lessons import exercises

def g_step(G, D, opt_G, z):
    """One G step through a frozen D; D's .grad and requires_grad flags are left as they were, even on an error.
    Returns loss_G."""
    ### BEGIN SOLUTION
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        loss_G = bce(D(G(z)), 1)
        loss_G.backward()
        opt_G.step()
    finally:
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)
    return loss_G
    ### END SOLUTION

my_answer = g_step  # SOLUTION: point this at your g_step
solved = exercises.check_frozen_g_step(my_answer)
