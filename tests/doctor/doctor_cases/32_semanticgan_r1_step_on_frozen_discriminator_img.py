"""
Source: https://github.com/nv-tlabs/semanticGAN_code/issues/25
Thread: "Is requires_grad(discriminator_img, False) infection dimg regulation"
What the user saw: in semanticGAN/train_seg_gan.py (at
https://github.com/nv-tlabs/semanticGAN_code/blob/65453b3e01690491eceb1250b46c70bc33c4370f/semanticGAN/train_seg_gan.py),
step 2 of each iteration (train the segmentation discriminator) runs
requires_grad(discriminator_img, False), and the lazy R1 regularization that follows
(d_regularize, every d_reg_every iterations) computes r1_img_loss through discriminator_img,
calls backward and d_img_optim.step() without switching discriminator_img back on. A maintainer:
"I think it makes sense to enable to gradient for both discriminators in the regularization,
this might be a mistake when we refactor the codebase." Reproduced with the loop's three steps,
names and losses (a hinge loss and a single-scale seg discriminator in place of the repository's
GANLoss and multi-scale outputs), tiny conv nets.
Silent: no error. Measured (iteration 0, where d_regularize is on): d_img_optim.step() in the
regularization leaves every discriminator_img weight unchanged (max |change| 0.0; its
parameters have no .grad after the backward), while d_seg_optim.step() just after it moves
discriminator_seg's weights by up to 2.8e-3.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import autograd

# SILENT

torch.manual_seed(0)


def requires_grad(model, flag=True):
    for p in model.parameters():
        p.requires_grad = flag


def d_logistic_loss(real_pred, fake_pred):
    return F.softplus(-real_pred).mean() + F.softplus(fake_pred).mean()


def d_r1_loss(real_pred, real_img):
    grad_real, = autograd.grad(outputs=real_pred.sum(), inputs=real_img, create_graph=True)
    return grad_real.pow(2).reshape(grad_real.shape[0], -1).sum(1).mean()


class Generator(nn.Module):
    def __init__(self, latent=8):
        super().__init__()
        self.fc = nn.Linear(latent, 4 * 8 * 8)

    def forward(self, noise):
        out = self.fc(noise).view(-1, 4, 8, 8)
        return torch.tanh(out[:, :3]), torch.sigmoid(out[:, 3:])     # fake_img, fake_seg


def discriminator(in_ch):
    return nn.Sequential(nn.Conv2d(in_ch, 8, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4, 1, 0))


generator, discriminator_img, discriminator_seg = Generator(), discriminator(3), discriminator(4)
g_optim = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.0, 0.99))
d_img_optim = torch.optim.Adam(discriminator_img.parameters(), lr=2e-3, betas=(0.0, 0.99))
d_seg_optim = torch.optim.Adam(discriminator_seg.parameters(), lr=2e-3, betas=(0.0, 0.99))
r1, d_reg_every, batch, latent = 10, 16, 2, 8

for i in range(1):
    real_img = torch.rand(batch, 3, 8, 8) * 2 - 1
    seg_img, seg_mask = torch.rand(batch, 3, 8, 8) * 2 - 1, (torch.rand(batch, 1, 8, 8) > 0.5).float()

    # Step1: train the d_img
    requires_grad(generator, False)
    requires_grad(discriminator_img, True)
    requires_grad(discriminator_seg, False)
    fake_img, fake_seg = generator(torch.randn(batch, latent))
    fake_seg = fake_seg.detach()
    fake_img_pred = discriminator_img(fake_img)
    real_img_pred = discriminator_img(real_img)
    d_img_loss = d_logistic_loss(real_img_pred, fake_img_pred)
    discriminator_img.zero_grad()
    d_img_loss.backward()
    d_img_optim.step()

    # Step2: train the d_seg
    requires_grad(generator, False)
    requires_grad(discriminator_img, False)  # CULPRIT
    requires_grad(discriminator_seg, True)
    fake_img, fake_seg = generator(torch.randn(batch, latent))
    fake_seg_pred = discriminator_seg(torch.cat([fake_img, fake_seg], 1))
    real_seg_pred = discriminator_seg(torch.cat([seg_img, seg_mask], 1))
    d_seg_loss = (F.relu(1 + fake_seg_pred).mean() + F.relu(1 - real_seg_pred).mean()) / 2.0
    discriminator_seg.zero_grad()
    d_seg_loss.backward()
    d_seg_optim.step()

    d_regularize = i % d_reg_every == 0
    if d_regularize:
        real_img.requires_grad = True
        real_pred = discriminator_img(real_img)
        r1_img_loss = d_r1_loss(real_pred, real_img)
        discriminator_img.zero_grad()
        (r1 / 2 * r1_img_loss * d_reg_every + 0 * real_pred[0]).backward()
        d_img_optim.step()  # CULPRIT

        # seg discriminator regulate
        real_img_seg = torch.cat([seg_img, seg_mask], 1)
        real_img_seg.requires_grad = True
        real_pred = discriminator_seg(real_img_seg).mean()
        r1_seg_loss = d_r1_loss(real_pred, real_img_seg)
        discriminator_seg.zero_grad()
        (r1 / 2 * r1_seg_loss * d_reg_every + 0 * real_pred).backward()
        d_seg_optim.step()

    # Step3: train the generator
    requires_grad(generator, True)
    requires_grad(discriminator_img, False)
    requires_grad(discriminator_seg, False)
    fake_img, fake_seg = generator(torch.randn(batch, latent))
    g_loss = F.softplus(-discriminator_img(fake_img)).mean() \
        - discriminator_seg(torch.cat([fake_img, fake_seg], 1)).mean()
    generator.zero_grad()
    g_loss.backward()
    g_optim.step()

# EXPECT: d_img_optim
