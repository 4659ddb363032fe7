"""
Source: https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/439
Thread: "Wasserstein distance?"
What the user did (commenter implementing WGAN-GP for pix2pix): in backward_D they fed
the detached fake pair to the critic but passed the non-detached fake pair to the
gradient-penalty helper (torch.autograd.grad with create_graph=True on interpolates);
loss_D.backward() therefore also went through and freed the generator's graph, and the
generator update then failed with "Trying to backward through the graph a second time"
although they called backward only once per loss.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


def cal_gradient_penalty(netD, real_data, fake_data, lambda_gp=10.0):
    alpha = torch.rand(real_data.shape[0], 1, 1, 1).expand_as(real_data)
    interpolatesv = alpha * real_data + (1 - alpha) * fake_data
    interpolatesv.requires_grad_(True)
    disc_interpolates = netD(interpolatesv)
    gradients = torch.autograd.grad(outputs=disc_interpolates, inputs=interpolatesv,
                                    grad_outputs=torch.ones_like(disc_interpolates),
                                    create_graph=True, retain_graph=True, only_inputs=True)[0]
    gradients = gradients.view(real_data.size(0), -1)
    return (((gradients + 1e-16).norm(2, dim=1) - 1) ** 2).mean() * lambda_gp


class Pix2PixWGANGP:
    def __init__(self):
        self.netG = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())
        self.netD = nn.Sequential(nn.Conv2d(6, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3, padding=1))
        self.optimizer_G = optim.Adam(self.netG.parameters(), lr=2e-4)
        self.optimizer_D = optim.Adam(self.netD.parameters(), lr=2e-4)

    def set_requires_grad(self, net, flag):
        for p in net.parameters():
            p.requires_grad = flag

    def set_input(self, A, B):
        self.real_A, self.real_B = A, B

    def forward(self):
        self.fake_B = self.netG(self.real_A)

    def backward_D(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB.detach())
        self.loss_D_fake = pred_fake.mean()
        real_AB = torch.cat((self.real_A, self.real_B), 1)
        pred_real = self.netD(real_AB)
        self.loss_D_real = -pred_real.mean()
        self.gradient_penalty = cal_gradient_penalty(self.netD, real_AB, fake_AB)  # fake_AB not detached
        self.loss_D = self.loss_D_fake + self.loss_D_real + self.gradient_penalty
        self.loss_D.backward()  # CULPRIT

    def backward_G(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB)
        self.loss_G_GAN = -pred_fake.mean()
        self.loss_G_L1 = F.l1_loss(self.fake_B, self.real_B) * 100.0
        self.loss_G = self.loss_G_GAN + self.loss_G_L1
        self.loss_G.backward()  # RAISES

    def optimize_parameters(self):
        self.forward()
        self.set_requires_grad(self.netD, True)
        self.optimizer_D.zero_grad()
        self.backward_D()
        self.optimizer_D.step()
        self.set_requires_grad(self.netD, False)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


model = Pix2PixWGANGP()
model.set_input(torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8))
model.optimize_parameters()

# EXPECT: model.fake_B
