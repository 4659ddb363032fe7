"""
Source: https://github.com/leftthomas/SRGAN/issues/89
Thread: "RuntimeError: one of the variables needed for gradient computation has been
modified by an inplace operation: [torch.cuda.FloatTensor [1, 1024, 1, 1]] is at version 2;
expected version 1 instead. Hint"
What the user did: ran SRGAN training where the discriminator output on the fake image is
computed once, d_loss.backward(retain_graph=True) and optimizerD.step() run, and then the
generator loss (built from that same discriminator output) is backpropagated; the stale
tensor is the weight of the discriminator's final 1x1 conv (1024 -> 1). A commenter
suggested stepping both optimizers only after both backward calls.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.PReLU(), nn.Conv2d(8, 3, 3, padding=1))

    def forward(self, x):
        return (torch.tanh(self.body(x)) + 1) / 2


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(8, 8, 3, stride=2, padding=1),
            nn.LeakyReLU(0.2),
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(8, 16, kernel_size=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(16, 1, kernel_size=1),
        )

    def forward(self, x):
        return torch.sigmoid(self.net(x).view(x.size(0)))


class GeneratorLoss(nn.Module):
    def forward(self, out_labels, out_images, target_images):
        adversarial_loss = torch.mean(1 - out_labels)
        image_loss = F.mse_loss(out_images, target_images)
        return image_loss + 1e-3 * adversarial_loss


class SRGANTrainer:
    def __init__(self):
        self.netG = Generator()
        self.netD = Discriminator()
        self.generator_criterion = GeneratorLoss()
        self.optimizerG = optim.Adam(self.netG.parameters())
        self.optimizerD = optim.Adam(self.netD.parameters())

    def train_step(self, lr_img, hr_img):
        fake_img = self.netG(lr_img)
        real_out = self.netD(hr_img).mean()
        fake_out = self.netD(fake_img).mean()

        # (1) update D
        self.netD.zero_grad()
        d_loss = 1 - real_out + fake_out
        d_loss.backward(retain_graph=True)
        self.optimizerD.step()  # CULPRIT

        # (2) update G, reusing fake_out from before the D step
        self.netG.zero_grad()
        g_loss = self.generator_criterion(fake_out, fake_img, hr_img)
        g_loss.backward()  # RAISES
        self.optimizerG.step()


trainer = SRGANTrainer()
lr_img = torch.rand(2, 3, 8, 8)
hr_img = torch.rand(2, 3, 8, 8)
trainer.train_step(lr_img, hr_img)

# EXPECT: trainer.netD.net.7.weight
