"""Lab 2 · BigGAN (ajbrock/BigGAN-PyTorch#25): gradients accumulated over D steps."""

import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.exercises.lesson13.grading import LABS, Lab, add_lab, lab_exercise
from gan_lessons.exercises.steps import parameter_names
from gan_lessons.exercises.variants import variant
from gan_lessons.i18n import N_


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


BIGGAN_CONFIG = {'batch_size': 4, 'num_D_steps': 2, 'num_D_accumulations': 3, 'num_G_accumulations': 1,
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
    return (lambda k: (G, D, GD, z_, config, xs[k]), {"G.optim": G.optim, "D.optim": D.optim}, parameter_names(G=G, D=D), {})


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


_biggan_zero_in_accumulation = variant(reference_biggan_train, move=("D.optim.zero_grad()", "into the loop"))


add_lab(Lab("biggan", "BigGAN: zero_grad() once, before the D steps", _biggan_problem, reference_biggan_train, calls=2,
         mistakes=[(_biggan_zero_in_accumulation, N_("each D step now steps on its last accumulated micro-batch only: "
                                                     "the gradient is reset inside the accumulation loop, which throws "
                                                     "away every micro-batch but the last"))]))


# What a student's copy may not say before this lab's grader passes (words that name the bug or its fix, in either
# language, matched without case), and what no grader message may print (the fix's code).
TELLS = ("zero_grad", "typo", "once, before", "still held", "plus step", "清零", "笔误", "还留在", "加上第")
FIX_CODE = ("D.optim.zero_grad()",)


# Lab 2. train(G, D, GD, z_, config, x), twice (2 D steps of 3 accumulations each, then a G step): two counts
# that differ, so a loss divided by the wrong one shows.
TRAIN = lab_exercise("train", reference_biggan_train, LABS["biggan"], N_(
    "every D step and G step is on the reference's gradients: each D step starts from zero and adds up "
    "its accumulations"))
check_biggan_train = TRAIN.check
