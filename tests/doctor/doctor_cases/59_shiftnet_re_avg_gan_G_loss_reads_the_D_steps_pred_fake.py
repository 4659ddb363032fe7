"""
Source: https://github.com/Zhaoyi-Yan/Shift-Net_pytorch/issues/34
Thread: "`re_avg_gan` is broken."
What the reporter found: with the relativistic average GAN loss, training of the inpainting model stopped at G's
backward with "Trying to backward through the graph a second time, but the buffers have already been freed".
The cause: `backward_G` computes a fresh `pred_fake = self.netD(fake_AB)` and then never uses it: its loss reads
`self.pred_fake`, the attribute that `backward_D` set to D's prediction on `fake_AB.detach()`, whose graph
`loss_D.backward()` had already freed (and whose D weights `optimizer_D.step()` has since changed). The fix is to
build G's relativistic loss from the local `pred_fake`. The repository's own change (commit ac34fa7) kept D's graph
with `loss_D.backward(retain_graph=True)` instead; on current PyTorch that trades this error for the in-place one,
and the term it keeps gives G no gradient, since that prediction was made on a detached fake.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class GANLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.BCEWithLogitsLoss()

    def forward(self, input, target_is_real):
        target = torch.ones_like(input) if target_is_real else torch.zeros_like(input)
        return self.loss(input, target)


class ShiftNetModel:
    def __init__(self):
        self.netG = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 3, 3, padding=1), nn.Tanh())
        self.netD = nn.Sequential(nn.Conv2d(3, 4, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(4, 1, 4, 2, 1))
        self.criterionGAN, self.criterionL1 = GANLoss(), nn.L1Loss()
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=2e-4)
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=2e-4)
        self.gan_type, self.ncritic, self.lambda_A, self.gan_weight = 're_avg_gan', 1, 100, 0.2

    def set_input(self, real_A, real_B):
        self.real_A, self.real_B = real_A, real_B

    def forward(self):
        self.fake_B = self.netG(self.real_A)

    def backward_D(self):
        fake_AB = self.fake_B
        real_AB = self.real_B
        self.pred_fake = self.netD(fake_AB.detach())
        self.pred_real = self.netD(real_AB)
        self.loss_D = (self.criterionGAN(self.pred_real - torch.mean(self.pred_fake), True)
                       + self.criterionGAN(self.pred_fake - torch.mean(self.pred_real), False)) / 2.
        self.loss_D.backward()  # CULPRIT

    def backward_G(self):
        fake_AB = self.fake_B
        pred_fake = self.netD(fake_AB)  # computed, never used
        self.pred_real = self.netD(self.real_B)
        self.loss_G_GAN = (self.criterionGAN(self.pred_real - torch.mean(self.pred_fake), False)
                           + self.criterionGAN(self.pred_fake - torch.mean(self.pred_real), True)) / 2.
        self.loss_G_L1 = self.criterionL1(self.fake_B, self.real_B) * self.lambda_A
        self.loss_G = self.loss_G_L1 + self.loss_G_GAN * self.gan_weight
        self.loss_G.backward()  # RAISES

    def optimize_parameters(self):
        self.forward()
        for i in range(self.ncritic):
            self.optimizer_D.zero_grad()
            self.backward_D()
            self.optimizer_D.step()
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


model = ShiftNetModel()
for _ in range(2):
    model.set_input(torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8))
    model.optimize_parameters()

# EXPECT: self.pred_fake or model.pred_fake
