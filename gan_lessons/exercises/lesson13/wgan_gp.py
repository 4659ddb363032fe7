"""Lab 3 · WGAN-GP with a BatchNorm critic (Zeleni9/pytorch-wgan#40, Lornatang/WassersteinGAN_GP-PyTorch#2)."""

import functools

import torch
from torch import nn, optim

from gan_lessons.exercises.exercise import Exercise, Found, Raised, attempt
from gan_lessons.exercises.lesson13.grading import LAB_HINTS, Lab, lab_calls
from gan_lessons.exercises.steps import first_difference, matching, parameter_names
from gan_lessons.exercises.variants import variant
from gan_lessons.i18n import N_, _


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
    grad_penalty = ((gradients.view(gradients.size(0), -1).norm(2, dim=1) - 1) ** 2).mean() * lambda_term
    grad_penalty.backward()
    d_optimizer.step()


def wgan_problem(make_critic, channels=1):
    torch.manual_seed(3)
    G = Generator(channels)
    torch.manual_seed(33)
    D = make_critic(channels)
    d_optimizer = optim.Adam(D.parameters(), lr=1e-4, betas=(0.5, 0.999))
    g = torch.Generator().manual_seed(333)
    data = [(torch.rand(4, channels, 8, 8, generator=g) * 2 - 1, torch.randn(4, 8, 1, 1, generator=g),
             torch.rand(4, 1, 1, 1, generator=g)) for _ in range(3)]
    return (lambda k: (D, G, d_optimizer, *data[k]), {"d_optimizer": d_optimizer}, parameter_names(D=D), {"D": D})


def sample_mixing(D):
    """How much the critic's output for sample 0 depends on samples 1 to 3 (in training mode): the largest entry of
    the gradient of D(x)[0] with respect to them, 0.0 for a critic that treats each sample on its own."""
    x = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
    D.train()
    out = D(x)
    g, = torch.autograd.grad(out.reshape(4, -1)[0].sum(), x, allow_unused=True)
    size = 0.0 if g is None else g[1:].abs().max().item()
    return size if size > 1e-8 else 0.0


ELEMENTWISE = variant(reference_train_critic, replace={"gradients.view(gradients.size(0), -1)": "gradients"})
WGAN_HINTS = [
    ("does not require grad and does not have a grad_fn",
     N_("the penalty was built from a gradient that autograd.grad returned without a graph of its own, so it is a "
        "constant: its backward has nothing to go back through, and it could not train the critic")),
]


def wgan_gp_checks(make_critic, train_critic) -> Found:
    """Lab 3. make_critic(channels) -> a critic whose penalty is per sample; train_critic(D, G, d_optimizer, images,
    z, eta), three critic iterations, with the penalty's norm per sample."""
    torch.manual_seed(33)
    made = attempt("make_critic", make_critic, 1, hints=LAB_HINTS)
    if not isinstance(made, nn.Module):
        return [_("make_critic returned {kind}, not the critic: return the nn.Module it builds").format(
            kind=type(made).__name__)]
    attempt("make_critic", wgan_problem, make_critic, hints=LAB_HINTS)
    D = wgan_problem(make_critic)[3]["D"]
    mixed = sample_mixing(D)
    if mixed:
        return [_("your critic's output for one image depends on the other images of the batch (the gradient of "
                  "D(x)[0] with respect to x[1:] reaches {size:.2g}, not 0): the penalty's gradient for one sample "
                  "then mixes in the others, so it is no longer a penalty per sample").format(size=mixed)]
    for channels in (1, 3):         # 3: a norm per channel, or across channels, is no norm per sample there
        lab = Lab("wgan_gp", "WGAN-GP", functools.partial(wgan_problem, make_critic, channels), reference_train_critic,
                  calls=3)
        mine, _state, failure = lab.run(train_critic)
        if failure is not None:
            raise Raised("train_critic", failure, WGAN_HINTS + LAB_HINTS)
        ref = lab.run(reference_train_critic)[0]          # the reference's critic iteration, on your own critic
        wrong = first_difference(mine, ref, 1e-4)
        if wrong and channels == 1:
            if matching(mine, lab.run(ELEMENTWISE)[0], 1e-4):
                wrong = _("{problem}. The penalty's norm is taken over dim 1 of a [batch, 1, H, W] gradient: dim 1 has "
                          "one channel, so that is |g| element by element, not one norm per sample").format(problem=wrong)
        if wrong:
            return [wrong if channels == 1 else _("on images of {channels} channels: {problem}").format(
                channels=channels, problem=wrong)]
    return []


# What a student's copy may not say before this lab's grader passes (words that name the bug or its fix, in either
# language, matched without case), and what no grader message may print (the fix's code).
TELLS = ("batchnorm", "batch norm", "instancenorm", "groupnorm", "layernorm", "layer norm", "dim=1", "dim 1", "批量规范化", "层规范化", "批归一化")
FIX_CODE = ("InstanceNorm2d(", "GroupNorm(", "LayerNorm(", ".view(gradients", "flatten(1)", ".reshape(gradients")


def _critic_calls():
    return [(1,)], []


_WGAN: dict = dict(label=N_("make_critic and train_critic"), answers=("make_critic", "train_critic"), success=N_(
    "the critic treats each sample on its own, and d_optimizer steps on the reference's gradients at all three "
    "critic iterations, on images of one channel and of three"))
# Lab 3. make_critic(channels) -> a critic whose penalty is per sample; train_critic(D, G, d_optimizer, images, z, eta),
# three critic iterations, with the penalty's norm per sample.
MAKE_CRITIC = Exercise("13", "make_critic", reference_make_critic, wgan_gp_checks, _critic_calls,
                       around=lambda make_critic: (make_critic, reference_train_critic), **_WGAN)
TRAIN_CRITIC = Exercise("13", "train_critic", reference_train_critic, wgan_gp_checks,
                        lab_calls(Lab("wgan_gp", "WGAN-GP", lambda: wgan_problem(reference_make_critic),
                                      reference_train_critic, calls=3)),
                        around=lambda train_critic: (reference_make_critic, train_critic), **_WGAN)
check_wgan_gp = MAKE_CRITIC.check
