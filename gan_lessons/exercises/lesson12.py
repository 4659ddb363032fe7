"""Lesson 12's debugging lab: six training steps from public bug reports, scaled down, each graded by behaviour.

Each lab runs the student's fixed step (or few-step loop) on the lab's own small models, optimizers and batches, and
records, at every optimizer's every step(), the gradient it steps on (feedback.recorded_steps). The same run with
the reference fix gives the right gradients; the feedback names the optimizer, the step and what its gradient was
(so many times the right one, the right one plus an earlier step's, ...), and the known wrong fixes by name. Some
labs also compare state that no optimizer steps on (an EMA copy's weights, a GradScaler's scale).

    exercises.check_lab("srgan", my_answer)            # or check_srgan_step(my_answer), ...

`lab_problem(name)` gives a lab's fresh arguments, to run a broken version by hand (or under the doctor)."""
import math

import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, raised, recorded_steps, stub_left, unanswered, verdict
from gan_lessons.i18n import N_, _

LAB_HINTS = AUTOGRAD_HINTS + [
    ("does not currently support double backward",
     N_("a penalty's create_graph=True gradient cannot go back through a module compiled with an AOT backend "
        "(aot_eager, inductor): compute the penalty through the uncompiled module, `D._orig_mod`, which holds the "
        "same parameters")),
    ("does not require grad and does not have a grad_fn",
     N_("nothing in that loss requires grad: is the network that should learn from it frozen, or its input "
        "detached?")),
    ("unscale_() has already been called on this optimizer",
     N_("scaler.step(opt) unscales by itself; call scaler.unscale_(opt) at most once per optimizer per iteration")),
]


# --- the comparison every lab shares ------------------------------------------------------------------------------
def _flat(step):
    return torch.cat([g.flatten() for g in step.values() if g is not None]) if any(
        g is not None for g in step.values()) else torch.zeros(0)


def _close(a, b, rel, scale=None):
    """Equal within `rel` of `scale` (the largest entry of the reference's step, all its parameters; float32 sums in
    another order differ by about 1e-7 of it, and a gradient that is zero in exact arithmetic, a bias before a
    normalisation, by as little)."""
    scale = b.abs().max().item() if scale is None else scale
    return a.shape == b.shape and (a - b).abs().max().item() <= rel * scale + 1e-12


def _what(mine, ref, k, atol, name):
    """How the gradient `name` (an optimizer) stepped on at step k (1-based) differs from the reference's: the
    whole line."""
    g, r = _flat(mine[k - 1]), _flat(ref[k - 1])
    if g.shape != r.shape:
        return _("step {step}: {optimizer} stepped on gradients a different set of gradients (a .grad is None where it "
                 "should hold one, or the other way round)").format(step=k, optimizer=name)
    if k > 1:
        for first in range(1, k):
            earlier = sum(_flat(ref[j - 1]) for j in range(first, k + 1))
            if _close(g, earlier, atol * 10, r.abs().max().item()):
                if first == k - 1:
                    return _("step {step}: {optimizer} stepped on gradients its .grad still held step {first}'s "
                             "gradient, added to this step's: no zero_grad() between them").format(
                        step=k, optimizer=name, first=first)
                return _("step {step}: {optimizer} stepped on gradients its .grad still held steps {first} to "
                         "{last}'s gradient, added to this step's: no zero_grad() between them").format(
                    step=k, optimizer=name, first=first, last=k - 1)
    if r.norm() == 0:
        return _("step {step}: {optimizer} stepped on gradients the reference's is zero").format(step=k,
                                                                                                  optimizer=name)
    ratio = (g.norm() / r.norm()).item()
    cos = (g @ r / (g.norm() * r.norm() + 1e-30)).item() if g.norm() > 0 else 0.0
    if g.norm() == 0:
        return _("step {step}: {optimizer} stepped on gradients all zero").format(step=k, optimizer=name)
    if cos > 0.999 and _times(ratio) == "1x":
        return _("step {step}: {optimizer} stepped on gradients the size of the reference's and in its direction, yet "
                 "{apart:.2g} of its norm apart: a small part of the reference's gradient is missing or changed, "
                 "hidden under a larger one").format(step=k, optimizer=name, apart=((g - r).norm() / r.norm()).item())
    if cos > 0.999:
        return _("step {step}: {optimizer} stepped on gradients {times} the reference's, in the same "
                 "direction").format(step=k, optimizer=name, times=_times(ratio))
    return _("step {step}: {optimizer} stepped on gradients {times} the reference's norm, in another direction "
             "(cosine {cosine:.2f})").format(step=k, optimizer=name, times=_times(ratio), cosine=cos)


def _times(ratio):
    if ratio >= 100 or ratio <= 0.01:
        p = math.log2(ratio)
        if abs(p - round(p)) < 0.01:
            return f"2^{round(p)} = {ratio:.6g}x"
    return f"{ratio:.3g}x"


def _compare(mine, ref, atol):
    """The first wrong optimizer step (in the order the reference stepped them), in words, or None."""
    for opt_name, ref_steps in ref.items():
        if opt_name == "order":
            continue
        got = mine.get(opt_name, [])
        if len(got) != len(ref_steps):
            return _("{optimizer}.step() ran {runs} time(s) where the reference steps it {expected} time(s)").format(
                optimizer=opt_name, runs=len(got), expected=len(ref_steps))
    order = ref.get("order") or sorted(((k, name) for name, steps in ref.items() for k in range(len(steps))))
    for k, name in order:
        g_step, r_step = mine[name][k], ref[name][k]
        missing = [p for p, r in r_step.items() if r is not None and g_step.get(p) is None]
        if missing:
            return _("step {step}: {optimizer} stepped with {parameter}.grad None ({count} parameter(s) without a "
                     "gradient): the loss that trains it never reached it").format(
                step=k + 1, optimizer=name, parameter=missing[0], count=len(missing))
        if g_step.keys() != r_step.keys():
            return _("step {step}: {optimizer} steps on other parameters than the reference's optimizer").format(
                step=k + 1, optimizer=name)
        scale = max((r.abs().max().item() for r in r_step.values() if r is not None), default=0.0)
        if not all(r is None or _close(g_step[p], r, atol, scale) for p, r in r_step.items()):
            return _what(mine[name], ref[name], k + 1, atol, name)
    return None


def _matches(mine, ref, atol):
    return _compare(mine, ref, atol) is None


# --- the labs ------------------------------------------------------------------------------------------------------
class Lab:
    """One lab: problem(seed) -> (args for each call, {optimizer name: optimizer}, {parameter: name}, state); the
    reference step; the calls made; known wrong fixes [(step, hint)]; extra(state_mine, state_ref) -> problems, and
    first(...) likewise, judged before the gradients are compared."""

    def __init__(self, name, title, problem, reference, calls, mistakes=(), extra=None, atol=1e-4, first=None):
        self.name, self.title, self.problem, self.reference = name, title, problem, reference
        self.calls, self.mistakes, self.extra, self.atol = calls, list(mistakes), extra, atol
        self.first = first          # first(state_mine, state_ref) -> problems, judged before the gradients

    def run(self, step):
        args, opts, names, state = self.problem()
        error, order = None, []
        handles = [opt.register_step_pre_hook(lambda o, a, kw, name=name: order.append(
            (sum(n == name for _, n in order), name))) for name, opt in opts.items()]
        with recorded_steps(opts, names) as records:
            try:
                for k in range(self.calls):
                    torch.manual_seed(100 + k)          # randomness drawn inside a step repeats run to run
                    step(*args(k))
            except Exception as e:  # reported by the checker
                error = e
            finally:
                for h in handles:
                    h.remove()
        records["order"] = order
        return records, state, error


LABS = {}


def _lab(lab):
    LABS[lab.name] = lab
    return lab


def _names(**nets):
    return {p: f"{name}.{n}" for name, net in nets.items() for n, p in net.named_parameters()}


def _batches(seed, *shapes, calls):
    g = torch.Generator().manual_seed(seed)
    return [[torch.randn(*s, generator=g) for s in shapes] for _ in range(calls)]


# 1 · SRGAN (leftthomas/SRGAN#89) ----------------------------------------------------------------------------------
class SRGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.PReLU(), nn.Conv2d(8, 3, 3, padding=1))

    def forward(self, x):
        return (torch.tanh(self.body(x)) + 1) / 2


class SRDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
                                 nn.AdaptiveAvgPool2d(1), nn.Conv2d(8, 16, kernel_size=1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(16, 1, kernel_size=1))

    def forward(self, x):
        return torch.sigmoid(self.net(x).view(x.size(0)))


class GeneratorLoss(nn.Module):
    """SRGAN's generator_criterion without its VGG and TV terms: image MSE + 0.001 * adversarial."""

    def forward(self, out_labels, out_images, target_images):
        adversarial_loss = torch.mean(1 - out_labels)
        image_loss = F.mse_loss(out_images, target_images)
        return image_loss + 0.001 * adversarial_loss


def _srgan_problem():
    """Two calls; state["into_G"][k] counts the backward passes that reached netG's first weight in call k + 1."""
    torch.manual_seed(1)
    netG, netD = SRGenerator(), SRDiscriminator()
    optimizerG, optimizerD = optim.Adam(netG.parameters(), lr=1e-3), optim.Adam(netD.parameters(), lr=1e-3)
    data = [(torch.rand(2, 3, 8, 8), torch.rand(2, 3, 8, 8)) for _ in range(2)]
    crit = GeneratorLoss()
    into_G = []
    netG.body[0].weight.register_post_accumulate_grad_hook(lambda p: into_G.__setitem__(-1, into_G[-1] + 1))

    def args(k):
        into_G.append(0)
        return netG, netD, optimizerG, optimizerD, crit, *data[k]
    return args, {"optimizerG": optimizerG, "optimizerD": optimizerD}, _names(netG=netG, netD=netD), \
        {"into_G": into_G}


def _srgan_extra(mine, ref):
    for call, (got, want) in enumerate(zip(mine["into_G"], ref["into_G"]), 1):
        if got > want:
            return [_("call {call}: {passes} backward passes reached netG where the reference's make {expected}: D's "
                      "loss was also sent back into netG, work that netG.zero_grad() then throws away").format(
                call=call, passes=got, expected=want)]
    return []


def reference_srgan_step(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """SRGAN's step, fixed: D on the detached fake; G's loss from a fresh D(fake_img), after D's step."""
    real_img, z = target, data
    fake_img = netG(z)
    netD.zero_grad()
    real_out = netD(real_img).mean()
    fake_out = netD(fake_img.detach()).mean()
    d_loss = 1 - real_out + fake_out
    d_loss.backward()
    optimizerD.step()
    netG.zero_grad()
    fake_out = netD(fake_img).mean()
    g_loss = generator_criterion(fake_out, fake_img, real_img)
    g_loss.backward()
    optimizerG.step()


def _srgan_both_steps_last(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    real_img, z = target, data
    fake_img = netG(z)
    netD.zero_grad()
    real_out = netD(real_img).mean()
    fake_out = netD(fake_img).mean()
    d_loss = 1 - real_out + fake_out
    d_loss.backward(retain_graph=True)
    netG.zero_grad()
    g_loss = generator_criterion(fake_out, fake_img, real_img)
    g_loss.backward()
    optimizerD.step()
    optimizerG.step()


def _srgan_g_through_old_d(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """What torch before 1.5 computed: G's loss through D's forward from before optimizerD.step()."""
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):       # no version check, as then
        real_img, z = target, data
        fake_img = netG(z)
        netD.zero_grad()
        real_out = netD(real_img).mean()
        fake_out = netD(fake_img).mean()
        d_loss = 1 - real_out + fake_out
        d_loss.backward(retain_graph=True)
        optimizerD.step()
        netG.zero_grad()
        g_loss = generator_criterion(fake_out, fake_img, real_img)
        g_loss.backward()
        optimizerG.step()


def _srgan_no_adversarial(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """G trained on the image loss alone: the adversarial term, 1/1000 of the loss, left out."""
    fake_img = netG(data)
    netD.zero_grad()
    (1 - netD(target).mean() + netD(fake_img.detach()).mean()).backward()
    optimizerD.step()
    netG.zero_grad()
    F.mse_loss(fake_img, target).backward()
    optimizerG.step()


def _srgan_g_first(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """G's step first, through D as it was; then D's step."""
    fake_img = netG(data)
    netG.zero_grad()
    generator_criterion(netD(fake_img).mean(), fake_img, target).backward()
    optimizerG.step()
    netD.zero_grad()
    (1 - netD(target).mean() + netD(fake_img.detach()).mean()).backward()
    optimizerD.step()


_lab(Lab("srgan", "SRGAN: D's step before G's backward", _srgan_problem, reference_srgan_step, calls=2, atol=2e-6,
         extra=_srgan_extra, mistakes=[
    (_srgan_no_adversarial, N_("what reached netG is the image loss's gradient alone: no part of it came through "
                               "netD, so G no longer learns from D's score of its images (the adversarial term is "
                               "1/1000 of the loss and hides under the image loss)")),
    (_srgan_g_first, N_("netG's gradient came through netD as it was before optimizerD.step(): G's step ran before "
                        "D's, where the report's order, kept in the reference, is D's step first")),
    (_srgan_both_steps_last, N_("both steps after both backwards, as the thread suggests, makes the error go away, "
                                "but optimizerD then steps on d_loss's gradient plus g_loss's (g_loss went back "
                                "through netD too), and G learns from D as it was before its step; step D first, then "
                                "compute fake_out again through the stepped netD")),
    (_srgan_g_through_old_d, N_("this is what torch before 1.5 computed without an error: G's gradient through "
                                "netD's forward from before optimizerD.step(), with the new weights put into it; "
                                "compute fake_out again after optimizerD.step()")),
]))


# 2 · BigGAN (ajbrock/BigGAN-PyTorch#25) ---------------------------------------------------------------------------
class G_D(nn.Module):
    def __init__(self, G, D):
        super().__init__()
        self.G, self.D = G, D

    def forward(self, z, x=None, train_G=False):
        with torch.set_grad_enabled(train_G):
            G_z = self.G(z)
        if x is None:
            return self.D(G_z)
        D_out = self.D(torch.cat([G_z, x], 0))
        return torch.split(D_out, [G_z.shape[0], x.shape[0]])


def toggle_grad(model, on_or_off):
    for param in model.parameters():
        param.requires_grad = on_or_off


def discriminator_loss(dis_fake, dis_real):
    return torch.mean(F.relu(1. - dis_real)), torch.mean(F.relu(1. + dis_fake))


def generator_loss(dis_fake):
    return -torch.mean(dis_fake)


BIGGAN_CONFIG = {'batch_size': 4, 'num_D_steps': 2, 'num_D_accumulations': 2, 'num_G_accumulations': 1,
                 'toggle_grads': True}


def _biggan_problem():
    torch.manual_seed(2)
    G = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 12))
    D = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 1))
    G.optim = optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.999), eps=1e-8)
    D.optim = optim.Adam(D.parameters(), lr=2e-4, betas=(0.0, 0.999), eps=1e-8)
    GD, config = G_D(G, D), dict(BIGGAN_CONFIG)
    z_ = torch.randn(config['batch_size'], 8)
    n = config['num_D_steps'] * config['num_D_accumulations'] * config['batch_size']
    xs = [torch.randn(n, 12) for _ in range(2)]
    return (lambda k: (G, D, GD, z_, config, xs[k]), {"G.optim": G.optim, "D.optim": D.optim}, _names(G=G, D=D), {})


def reference_biggan_train(G, D, GD, z_, config, x):
    """BigGAN's train(), fixed as in b70f16c: D.optim.zero_grad() at the start of each D step."""
    G.optim.zero_grad()
    x = torch.split(x, config['batch_size'])
    counter = 0
    if config['toggle_grads']:
        toggle_grad(D, True)
        toggle_grad(G, False)
    for step_index in range(config['num_D_steps']):  # noqa: B007
        D.optim.zero_grad()
        for accumulation_index in range(config['num_D_accumulations']):  # noqa: B007
            z_.normal_()
            D_fake, D_real = GD(z_[:config['batch_size']], x[counter], train_G=False)
            D_loss_real, D_loss_fake = discriminator_loss(D_fake, D_real)
            D_loss = (D_loss_real + D_loss_fake) / float(config['num_D_accumulations'])
            D_loss.backward()
            counter += 1
        D.optim.step()
    if config['toggle_grads']:
        toggle_grad(D, False)
        toggle_grad(G, True)
    G.optim.zero_grad()
    for accumulation_index in range(config['num_G_accumulations']):  # noqa: B007
        z_.normal_()
        D_fake = GD(z_, train_G=True)
        G_loss = generator_loss(D_fake) / float(config['num_G_accumulations'])
        G_loss.backward()
    G.optim.step()


def _biggan_zero_in_accumulation(G, D, GD, z_, config, x):
    G.optim.zero_grad()
    x = torch.split(x, config['batch_size'])
    counter = 0
    toggle_grad(D, True)
    toggle_grad(G, False)
    for step_index in range(config['num_D_steps']):  # noqa: B007
        for accumulation_index in range(config['num_D_accumulations']):  # noqa: B007
            D.optim.zero_grad()
            z_.normal_()
            D_fake, D_real = GD(z_[:config['batch_size']], x[counter], train_G=False)
            D_loss_real, D_loss_fake = discriminator_loss(D_fake, D_real)
            D_loss = (D_loss_real + D_loss_fake) / float(config['num_D_accumulations'])
            D_loss.backward()
            counter += 1
        D.optim.step()
    toggle_grad(D, False)
    toggle_grad(G, True)
    G.optim.zero_grad()
    z_.normal_()
    G_loss = generator_loss(GD(z_, train_G=True))
    G_loss.backward()
    G.optim.step()


_lab(Lab("biggan", "BigGAN: zero_grad() once, before the D steps", _biggan_problem, reference_biggan_train, calls=2,
         mistakes=[(_biggan_zero_in_accumulation, N_("zero_grad() inside the accumulation loop throws away every "
                                                     "accumulated half-batch but the last: each D step must start "
                                                     "from zero and then add up all num_D_accumulations backwards, so "
                                                     "call D.optim.zero_grad() once per D step, before the "
                                                     "accumulation loop"))]))


# 3 · WGAN-GP with a BatchNorm critic (Zeleni9/pytorch-wgan#40, Lornatang/WassersteinGAN_GP-PyTorch#2) -------------
class Discriminator(nn.Module):
    """Zeleni9's critic at 8x8 and a few channels, with BatchNorm2d where its code has InstanceNorm2d (as the
    critics the reports are about have it)."""

    def __init__(self, channels):
        super().__init__()
        self.main_module = nn.Sequential(
            nn.Conv2d(in_channels=channels, out_channels=4, kernel_size=4, stride=2, padding=1),
            nn.BatchNorm2d(4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(in_channels=4, out_channels=8, kernel_size=4, stride=2, padding=1),
            nn.BatchNorm2d(8),
            nn.LeakyReLU(0.2, inplace=True))
        self.output = nn.Sequential(nn.Conv2d(in_channels=8, out_channels=1, kernel_size=2, stride=1, padding=0))

    def forward(self, x):
        x = self.main_module(x)
        return self.output(x)


class Generator(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.main_module = nn.Sequential(nn.ConvTranspose2d(8, 8, kernel_size=4, stride=1, padding=0),
                                         nn.BatchNorm2d(8), nn.ReLU(True),
                                         nn.ConvTranspose2d(8, channels, kernel_size=4, stride=2, padding=1))
        self.output = nn.Tanh()

    def forward(self, x):
        return self.output(self.main_module(x))


def reference_make_critic(channels):
    D = Discriminator(channels)
    for i, layer in enumerate(D.main_module):
        if isinstance(layer, nn.BatchNorm2d):
            D.main_module[i] = nn.InstanceNorm2d(layer.num_features, affine=True)
    return D


def reference_train_critic(D, G, d_optimizer, images, z, eta, lambda_term=10):
    """One critic iteration of Zeleni9's train(), with the penalty's norm taken per sample."""
    one = torch.tensor(1.0)
    mone = one * -1
    D.zero_grad()
    d_loss_real = D(images).mean()
    d_loss_real.backward(mone)
    fake_images = G(z)
    d_loss_fake = D(fake_images.detach()).mean()
    d_loss_fake.backward(one)
    interpolated = (eta * images + (1 - eta) * fake_images.detach()).requires_grad_(True)
    prob_interpolated = D(interpolated)
    gradients = torch.autograd.grad(outputs=prob_interpolated, inputs=interpolated,
                                    grad_outputs=torch.ones(prob_interpolated.size()),
                                    create_graph=True, retain_graph=True)[0]
    gradient_penalty = ((gradients.view(gradients.size(0), -1).norm(2, dim=1) - 1) ** 2).mean() * lambda_term
    gradient_penalty.backward()
    d_optimizer.step()


def _wgan_problem(make_critic):
    torch.manual_seed(3)
    G = Generator(1)
    torch.manual_seed(33)
    D = make_critic(1)
    d_optimizer = optim.Adam(D.parameters(), lr=1e-4, betas=(0.5, 0.999))
    g = torch.Generator().manual_seed(333)
    data = [(torch.rand(4, 1, 8, 8, generator=g) * 2 - 1, torch.randn(4, 8, 1, 1, generator=g),
             torch.rand(4, 1, 1, 1, generator=g)) for _ in range(3)]
    return (lambda k: (D, G, d_optimizer, *data[k]), {"d_optimizer": d_optimizer}, _names(D=D), {"D": D})


def _mixes_samples(D):
    """How much the critic's output for sample 0 depends on samples 1 to 3 (in training mode): the largest entry of
    the gradient of D(x)[0] with respect to them, 0.0 for a critic that treats each sample on its own."""
    x = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
    D.train()
    out = D(x)
    g, = torch.autograd.grad(out.reshape(4, -1)[0].sum(), x, allow_unused=True)
    size = 0.0 if g is None else g[1:].abs().max().item()
    return size if size > 1e-8 else 0.0


WGAN_HINTS = [
    ("does not require grad and does not have a grad_fn",
     N_("the penalty was built from a gradient that autograd.grad returned without a graph of its own, so it is a "
        "constant: its backward has nothing to go back through, and it could not train the critic")),
]


# 4 · AMP with one GradScaler and two optimizers (nerfacc#307, neosr PRs #9 and #50) -------------------------------
def _amp_nets():
    net_g = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))
    net_d = nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4, 1, 0))
    return net_g, net_d


AMP_INF = {2: "optimizer_d", 3: "optimizer_g"}   # call -> the optimizer one of whose scaled gradients is inf then


def _amp_problem():
    """Three calls; at call 2 one of D's scaled gradients is inf, at call 3 one of G's, as an overflow would make
    them (a hook on each network's first weight), so a grader sees which step the scaler skips and how it scales."""
    torch.manual_seed(4)
    net_g, net_d = _amp_nets()
    optimizer_g, optimizer_d = optim.Adam(net_g.parameters(), lr=1e-4), optim.Adam(net_d.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=1)
    g = torch.Generator().manual_seed(44)
    data = [(torch.rand(2, 3, 8, 8, generator=g), torch.rand(2, 3, 8, 8, generator=g)) for _ in range(3)]
    scales, stepped, now = [], [], {"call": 0}
    opts = {"optimizer_g": optimizer_g, "optimizer_d": optimizer_d}

    def overflow(name):
        def hook(grad):
            if AMP_INF.get(now["call"]) != name:
                return grad
            grad = grad.clone()
            grad.view(-1)[0] = float("inf")
            return grad
        return hook
    net_g[0].weight.register_hook(overflow("optimizer_g"))
    net_d[0].weight.register_hook(overflow("optimizer_d"))
    for name, opt in opts.items():
        opt.register_step_pre_hook(lambda o, a, kw, name=name: stepped.append((now["call"], name)))

    def args(k):
        now["call"] = k + 1
        scales.append(scaler.get_scale())
        return net_g, net_d, optimizer_g, optimizer_d, scaler, *data[k]
    return args, opts, _names(net_g=net_g, net_d=net_d), \
        {"scaler": scaler, "scales": scales, "stepped": stepped, "nets": {"optimizer_g": net_g, "optimizer_d": net_d}}


def reference_optimize_parameters(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """neosr-style G then D step under bfloat16 autocast, one GradScaler: both steps through it, one update()."""
    for p in net_d.parameters():
        p.requires_grad = False
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = net_g(lq)
        l_g_pix = F.l1_loss(output, gt)
        l_g_gan = F.softplus(-net_d(output)).mean()
        l_g_total = l_g_pix + 0.1 * l_g_gan
    optimizer_g.zero_grad()
    scaler.scale(l_g_total).backward()
    scaler.step(optimizer_g)
    for p in net_d.parameters():
        p.requires_grad = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        l_d_real = F.softplus(-net_d(gt)).mean()
        l_d_fake = F.softplus(net_d(output.detach())).mean()
    optimizer_d.zero_grad()
    scaler.scale(l_d_real + l_d_fake).backward()
    scaler.step(optimizer_d)
    scaler.update()


def _amp_steps(mine, ref):
    """Which optimizer stepped at which call, against the reference's scaler (which skips a step on an inf): the
    steps each optimizer took before the first call where they differ, and what differs there."""
    got, want = set(mine["stepped"]), set(ref["stepped"])
    for call, name in sorted(got ^ want)[:1]:
        before = {n: sum(1 for c, m in ref["stepped"] if m == n and c < call) for n in mine["nets"]}
        return before, _amp_step_problem(mine, got, call, name)
    return {}, []


def _amp_step_problem(mine, got, call, name):
    if (call, name) not in got:
        return [_("call {call}: {optimizer} did not step, where the reference's does: its gradients were finite "
                  "(only the optimizer whose gradients hold an inf is skipped)").format(call=call, optimizer=name)]
    bad = sum(int((~torch.isfinite(p)).sum()) for p in mine["nets"][name].parameters())
    return [_("call {call}: {optimizer} stepped although one of its gradients was inf, a step the reference's scaler "
              "skips; {optimizer}'s weights now hold {count} inf or nan value(s)").format(call=call, optimizer=name,
                                                                                        count=bad)]


def _amp_extra(mine, ref):
    got, want = mine["scales"] + [mine["scaler"].get_scale()], ref["scales"] + [ref["scaler"].get_scale()]
    if got != want:
        k = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        if k in AMP_INF:
            return [_("the scale after call {call} is {scale:g} where the reference's is {reference:g}: call {call}'s "
                      "inf in {optimizer}'s gradients halves it, so the scaler that saw that inf must be the one "
                      "whose scale the next call uses").format(call=k, scale=got[k], reference=want[k],
                                                               optimizer=AMP_INF[k])]
        return [_("the scale after call {call} is {scale:g} where the reference's is {reference:g}: in that call it "
                  "went from {start:g} to {scale:g}, where the reference's doubles once per call without an inf").format(
            call=k, scale=got[k], reference=want[k], start=got[k - 1])]
    return []


# 5 · A hidden state carried across batches (MorvanZhou/PyTorch-Tutorial#57) -------------------------------------
class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(input_size=1, hidden_size=8, num_layers=1, batch_first=True)
        self.out = nn.Linear(8, 1)

    def forward(self, x, h_state):
        r_out, h_state = self.rnn(x, h_state)
        return self.out(r_out), h_state


def _rnn_problem():
    torch.manual_seed(5)
    rnn = RNN()
    optimizer = optim.Adam(rnn.parameters(), lr=0.02)
    return (lambda k: (rnn, optimizer, nn.MSELoss(), 3), {"optimizer": optimizer}, _names(rnn=rnn), {})


def reference_rnn_train(rnn, optimizer, loss_func, steps):
    """The tutorial's loop: the hidden state carried on, cut from the previous step's graph."""
    h_state = None
    for step in range(steps):
        start, end = step * math.pi, (step + 1) * math.pi
        t = torch.linspace(start, end, 10)
        x, y = torch.sin(t).view(1, 10, 1), torch.cos(t).view(1, 10, 1)
        prediction, h_state = rnn(x, h_state)
        h_state = h_state.detach()
        loss = loss_func(prediction, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def _rnn_reset(rnn, optimizer, loss_func, steps):
    for step in range(steps):
        t = torch.linspace(step * math.pi, (step + 1) * math.pi, 10)
        prediction, _ = rnn(torch.sin(t).view(1, 10, 1), None)
        loss = loss_func(prediction, torch.cos(t).view(1, 10, 1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


# 6 · A penalty through a compiled D, and an EMA of a compiled G (pytorch/pytorch#91469, wandb/senpai#2899) ---------
class EMA:
    """An EMA of a model's parameters, kept by name."""

    def __init__(self, model, decay=0.9):
        self.decay = decay
        self.shadow = {name: p.detach().clone() for name, p in model.named_parameters()}

    @torch.no_grad()
    def update(self, model):
        for name, p in model.named_parameters():
            if name in self.shadow:
                self.shadow[name].mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def _compiled_problem():
    torch._dynamo.reset()          # a fresh compile for each run (and no recompile limit reached)
    torch.manual_seed(6)
    G_net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    D_net = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    ema = EMA(G_net)
    G, D = torch.compile(G_net, backend="aot_eager"), torch.compile(D_net, backend="aot_eager")
    opt_G, opt_D = optim.Adam(G_net.parameters(), lr=1e-3), optim.Adam(D_net.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(66)
    data = [(torch.randn(8, 2, generator=g) + 2, torch.randn(8, 4, generator=g)) for _ in range(2)]
    shadows = []

    def args(k):
        if k:
            shadows.append({n: t.clone() for n, t in ema.shadow.items()})
        return G, D, opt_G, opt_D, ema, *data[k]
    return args, {"opt_D": opt_D, "opt_G": opt_G}, _names(G=G_net, D=D_net), {"ema": ema, "shadows": shadows}


def reference_compiled_step(G, D, opt_G, opt_D, ema, x_real, z, r1_gamma=10.0):
    """A non-saturating GAN step with an R1 penalty through the uncompiled D, and the EMA of the uncompiled G."""
    x_fake = G(z)
    x_real = x_real.detach().requires_grad_(True)
    real_pred = D._orig_mod(x_real)
    grad_real, = torch.autograd.grad(real_pred.sum(), x_real, create_graph=True)
    r1 = grad_real.pow(2).sum(1).mean()
    loss_D = F.softplus(-real_pred).mean() + F.softplus(D(x_fake.detach())).mean() + r1_gamma / 2 * r1
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    loss_G = F.softplus(-D(x_fake)).mean()
    opt_G.zero_grad()
    loss_G.backward()
    opt_G.step()
    ema.update(G._orig_mod)


def _compiled_no_create_graph(G, D, opt_G, opt_D, ema, x_real, z, r1_gamma=10.0):
    x_fake = G(z)
    x_real = x_real.detach().requires_grad_(True)
    real_pred = D(x_real)
    grad_real, = torch.autograd.grad(real_pred.sum(), x_real, retain_graph=True)
    r1 = grad_real.pow(2).sum(1).mean()
    loss_D = F.softplus(-real_pred).mean() + F.softplus(D(x_fake.detach())).mean() + r1_gamma / 2 * r1
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    loss_G = F.softplus(-D(x_fake)).mean()
    opt_G.zero_grad()
    loss_G.backward()
    opt_G.step()
    ema.update(G._orig_mod)


def _compiled_extra(mine, ref):
    got = mine["shadows"] + [mine["ema"].shadow]
    want = ref["shadows"] + [ref["ema"].shadow]
    for k, (a, b) in enumerate(zip(got, want), 1):
        if a.keys() != b.keys():
            return [_("the EMA's names changed ({name}): keep the EMA keyed by the uncompiled G's names").format(
                name=repr(sorted(a)[0]))]
        wrong = [n for n in b if not torch.allclose(a[n], b[n], atol=1e-6)]
        if wrong:
            start = _compiled_problem()[3]["ema"].shadow
            still = all(torch.equal(a[n], start[n]) for n in wrong)
            if still:
                return [_("after call {call}, the EMA weights {name} differ from the reference's: they are still the "
                          "initial ones, so ema.update() matched none of G's parameters (a compiled G names them "
                          "`_orig_mod.0.weight`, ...; the EMA knows them as `0.weight`): update it from "
                          "`G._orig_mod`").format(call=k, name=wrong[0])]
            return [_("after call {call}, the EMA weights {name} differ from the reference's").format(call=k,
                                                                                                     name=wrong[0])]
    return []


_lab(Lab("compiled", "a penalty through a compiled D, an EMA of a compiled G", _compiled_problem,
         reference_compiled_step, calls=2, extra=_compiled_extra, mistakes=[
             (_compiled_no_create_graph, N_("without create_graph=True the error goes away, and the R1 penalty is a "
                                            "constant: it adds to loss_D and trains nothing (the doctor warns about "
                                            "it); compute it through D._orig_mod, with create_graph=True"))]))
_lab(Lab("rnn", "a hidden state carried across batches", _rnn_problem, reference_rnn_train, calls=1, mistakes=[
    (_rnn_reset, N_("the state is reset to None at every step, which makes the error go away and changes what the "
                    "RNN computes: carry h_state on to the next step, cut from the old graph with h_state.detach() "
                    "(or the tutorial's h_state.data)"))]))
_lab(Lab("amp", "AMP: one GradScaler, two optimizers", _amp_problem, reference_optimize_parameters, calls=3, atol=2e-2,
         extra=_amp_extra, first=_amp_steps))


def lab_problem(name, make_critic=None):
    """A lab's arguments for one call (call 0), fresh: to run a broken version by hand or under the doctor."""
    if name == "wgan_gp":
        return _wgan_problem(make_critic or Discriminator)[0](0)
    return LABS[name].problem()[0](0)


def _prefix(records, counts):
    """Each optimizer's first counts[name] recorded steps, and the order they ran in."""
    return {**{name: records[name][:n] for name, n in counts.items()},
            "order": [(k, name) for k, name in records["order"] if k < counts.get(name, 0)]}


def _check(lab, answer, label, success, extra_problems=None):
    if unanswered(label, answer, _("your {function}").format(function=label)):
        return False
    mine, state, error = lab.run(answer)
    if error is not None:
        if stub_left(label, error, label):
            return False
        return verdict(label, [raised(label, error, LAB_HINTS)], "")
    ref, ref_state, ref_error = lab.run(lab.reference)
    assert ref_error is None, ref_error
    before, problems = lab.first(state, ref_state) if lab.first else ({}, [])
    if problems:                # what went wrong first in time: a gradient before that call, or that call's steps
        earlier = _compare(_prefix(mine, before), _prefix(ref, before), lab.atol)
        return verdict(label, [earlier] if earlier else problems, success)
    wrong = _compare(mine, ref, lab.atol)
    if wrong:
        hint = next((h for step, h in lab.mistakes if _matches(mine, lab.run(step)[0], lab.atol)), None)
        problems.append(_("{problem}. {hint}").format(problem=wrong, hint=_(hint)) if hint else wrong)
    elif lab.extra:
        problems += lab.extra(state, ref_state)
    problems += extra_problems or []
    return verdict(label, problems, success)


def check_srgan_step(srgan_step) -> bool:
    """Lab 1. srgan_step(netG, netD, optimizerG, optimizerD, generator_criterion, data, target), twice."""
    return _check(LABS["srgan"], srgan_step, "srgan_step", _("runs to the end, and optimizerD and optimizerG step on "
                                                            "the reference's gradients at both steps"))


def check_biggan_train(train) -> bool:
    """Lab 2. train(G, D, GD, z_, config, x), twice (2 D steps of 2 accumulations each, then a G step)."""
    return _check(LABS["biggan"], train, "train", _("every D step and G step is on the reference's gradients: each D "
                                                   "step starts from zero and adds up its accumulations"))


def check_wgan_gp(make_critic, train_critic) -> bool:
    """Lab 3. make_critic(channels) -> a critic whose penalty is per sample; train_critic(D, G, d_optimizer, images,
    z, eta), three critic iterations, with the penalty's norm per sample."""
    label = _("make_critic and train_critic")
    if unanswered("make_critic", make_critic, N_("your make_critic")) or \
            unanswered("train_critic", train_critic, N_("your train_critic")):
        return False
    try:
        _wgan_problem(make_critic)
    except Exception as error:
        if stub_left("make_critic", error, "make_critic"):
            return False
        return verdict(label, [raised("make_critic", error, LAB_HINTS)], "")
    lab = Lab("wgan_gp", "WGAN-GP", lambda: _wgan_problem(make_critic), reference_train_critic, calls=3)
    D = _wgan_problem(make_critic)[3]["D"]
    mixed = _mixes_samples(D)
    if mixed:
        return verdict(label, [_("your critic's output for one image depends on the other images of the batch (the "
                                 "gradient of D(x)[0] with respect to x[1:] reaches {size:.2g}, not 0): the penalty's "
                                 "gradient for one sample then mixes in the others, so it is no longer a penalty per "
                                 "sample").format(size=mixed)], "")
    mine, _state, error = lab.run(train_critic)
    if error is not None:
        if stub_left("train_critic", error, "train_critic"):
            return False
        return verdict(label, [raised("train_critic", error, WGAN_HINTS + LAB_HINTS)], "")
    ref = lab.run(reference_train_critic)[0]          # the reference's critic iteration, on your own critic
    wrong = _compare(mine, ref, 1e-4)
    if wrong:
        elementwise = lambda *a: _wgan_elementwise(*a)  # noqa: E731
        if _matches(mine, lab.run(elementwise)[0], 1e-4):
            wrong = _("{problem}. The penalty's norm is taken over dim 1 of a [batch, 1, H, W] gradient: dim 1 has one "
                      "channel, so that is |g| element by element, not one norm per sample").format(problem=wrong)
    return verdict(label, [wrong] if wrong else [], _("the critic normalises each sample on its own, and d_optimizer "
                                                      "steps on the reference's gradients at all three critic "
                                                      "iterations"))


def _wgan_elementwise(D, G, d_optimizer, images, z, eta, lambda_term=10):
    one = torch.tensor(1.0)
    D.zero_grad()
    D(images).mean().backward(-one)
    fake_images = G(z)
    D(fake_images.detach()).mean().backward(one)
    interpolated = (eta * images + (1 - eta) * fake_images.detach()).requires_grad_(True)
    prob = D(interpolated)
    gradients = torch.autograd.grad(prob, interpolated, torch.ones(prob.size()), create_graph=True)[0]
    (((gradients.norm(2, dim=1) - 1) ** 2).mean() * lambda_term).backward()
    d_optimizer.step()


def check_amp_lab(optimize_parameters) -> bool:
    """Lab 4. optimize_parameters(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt), three iterations, with
    one GradScaler (init_scale 2**10, growth_interval 1: the scale doubles at each update() without an inf); an inf
    in one of D's scaled gradients at call 2 and in one of G's at call 3."""
    return _check(LABS["amp"], optimize_parameters, "optimize_parameters", _(
        "both optimizers step through the one scaler on the reference's (unscaled) gradients, each skips the call "
        "where one of its gradients is inf, and the scale follows the reference's (2x per clean call, halved after "
        "an inf)"))


def check_rnn_train(train) -> bool:
    """Lab 5. train(rnn, optimizer, loss_func, steps) with steps=3."""
    return _check(LABS["rnn"], train, "train", _("all three steps run, on the reference's gradients: the state is "
                                                "carried on, cut from the previous step's graph"))


def check_compiled_step(train_step) -> bool:
    """Lab 6. train_step(G, D, opt_G, opt_D, ema, x_real, z) on compiled G and D (backend aot_eager), twice."""
    return _check(LABS["compiled"], train_step, "train_step", _("runs on the compiled models, opt_D and opt_G step "
                                                               "on the reference's gradients (the R1 penalty "
                                                               "included), and the EMA follows G"))

