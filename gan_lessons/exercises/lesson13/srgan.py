"""Lab 1 · SRGAN (leftthomas/SRGAN#89): D's step before G's backward."""

import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.exercises.lesson13.grading import LABS, Lab, add_lab, lab_exercise
from gan_lessons.exercises.steps import parameter_names
from gan_lessons.exercises.variants import variant
from gan_lessons.i18n import N_, _


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
    """Two calls; state["into_G"][k] counts the backward passes that reached netG's first weight in call k + 1. In
    float64: the adversarial term is 1/1000 of G's loss, so the lab tells gradients apart at 2e-6 of the largest,
    and float32's rounding alone (D scoring both batches in one call, sums in another order) comes that close."""
    torch.manual_seed(1)
    netG, netD = SRGenerator().double(), SRDiscriminator().double()
    optimizerG, optimizerD = optim.Adam(netG.parameters(), lr=1e-3), optim.Adam(netD.parameters(), lr=1e-3)
    data = [(torch.rand(2, 3, 8, 8, dtype=torch.float64), torch.rand(2, 3, 8, 8, dtype=torch.float64))
            for _ in range(2)]
    crit = GeneratorLoss()
    into_G = []
    netG.body[0].weight.register_post_accumulate_grad_hook(lambda p: into_G.__setitem__(-1, into_G[-1] + 1))

    def args(k):
        into_G.append(0)
        return netG, netD, optimizerG, optimizerD, crit, *data[k]
    return args, {"optimizerG": optimizerG, "optimizerD": optimizerD}, parameter_names(netG=netG, netD=netD), \
        {"into_G": into_G}


def _srgan_extra(mine, ref):
    for call, (got, want) in enumerate(zip(mine["into_G"], ref["into_G"]), 1):
        if got > want:
            return [_("call {call}: {passes} backward passes reached netG where the reference makes {expected}: D's "
                      "loss was also sent back into netG, work that netG.zero_grad() then throws away").format(
                call=call, passes=got, expected=want)]
    return []


def reference_srgan_step(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """SRGAN's step, fixed: D on the detached fake; G's loss from a fresh D(fake_img), after D's step."""
    real_img = target
    z = data
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


# The known wrong fixes, as edits of the reference
G_STEP = ["netG.zero_grad()", "fake_out = netD(fake_img).mean()",
          "g_loss = generator_criterion(fake_out, fake_img, real_img)", "g_loss.backward()", "optimizerG.step()"]
ONE_D_FORWARD: dict = dict(drop="fake_out = netD(fake_img).mean()",      # G's loss reuses D's forward of the fake batch
                     replace={"fake_img.detach()": "fake_img", "d_loss.backward()": "d_loss.backward(retain_graph=True)"})


def _unchecked(step):
    """step with no version check on saved tensors, as torch before 1.5 ran it."""
    def run(*args):
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            return step(*args)
    return run


_srgan_no_adversarial = variant(reference_srgan_step, drop="fake_out = netD(fake_img).mean()", replace={
    "generator_criterion(fake_out, fake_img, real_img)": "F.mse_loss(fake_img, real_img)"})   # the image loss alone
_srgan_g_first = variant(reference_srgan_step, move=(G_STEP, "netD.zero_grad()"))
_srgan_both_steps_last = variant(reference_srgan_step, move=("optimizerD.step()", "optimizerG.step()"),
                                 **ONE_D_FORWARD)
_srgan_g_through_old_d = _unchecked(variant(reference_srgan_step, **ONE_D_FORWARD))


add_lab(Lab("srgan", "SRGAN: D's step before G's backward", _srgan_problem, reference_srgan_step, calls=2, atol=2e-6,
         extra=_srgan_extra, mistakes=[
    (_srgan_no_adversarial, N_("what reached netG is the image loss's gradient alone: no part of it came through "
                               "netD, so G no longer learns from D's score of its images (the adversarial term is "
                               "1/1000 of the loss and hides under the image loss)")),
    (_srgan_g_first, N_("netG's gradient came through netD as it was before optimizerD.step(), where in the "
                        "report's order, kept in the reference, G learns from the netD that has just stepped")),
    (_srgan_both_steps_last, N_("both steps after both backwards makes the error go away, but optimizerD then "
                                "steps on d_loss's gradient plus g_loss's (g_loss went back through netD too), and G "
                                "learns from D as it was before its step")),
    (_srgan_g_through_old_d, N_("this is what torch before 1.5 computed without an error: G's gradient through "
                                "netD's forward from before optimizerD.step(), with the new weights put into it")),
]))


# What a student's copy may not say before this lab's grader passes (words that name the bug or its fix, in either
# language, matched without case), and what no grader message may print (the fix's code).
TELLS = ("detach", "old forward", "before the step", "stale", "retain_graph=true", "分离", "过期", "更新之前的")
FIX_CODE = ("fake_img.detach()", "netD(fake_img.detach())")


# Lab 1. srgan_step(netG, netD, optimizerG, optimizerD, generator_criterion, data, target), twice.
SRGAN_STEP = lab_exercise("srgan_step", reference_srgan_step, LABS["srgan"], N_(
    "runs to the end, and optimizerD and optimizerG step on the reference's gradients at both steps"))
check_srgan_step = SRGAN_STEP.check
