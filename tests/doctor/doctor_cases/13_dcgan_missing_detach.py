"""
Source: https://github.com/pytorch/examples/issues/116
Thread: "why is detach necessary"
What the user did (commenter in the thread): implemented DCGAN without the .detach() on
the fake batch in the discriminator step; errD_fake.backward() then backpropagated into
and freed the generator's graph, so the later generator-loss backward through the same
fake batch failed with "Trying to backward through the graph a second time".
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

nz = 4
netG = nn.Sequential(
    nn.ConvTranspose2d(nz, 8, 4, 1, 0, bias=False),   # 1x1 -> 4x4
    nn.BatchNorm2d(8),
    nn.ReLU(True),
    nn.ConvTranspose2d(8, 1, 4, 2, 1, bias=False),    # 4x4 -> 8x8
    nn.Tanh(),
)
netD = nn.Sequential(
    nn.Conv2d(1, 8, 4, 2, 1, bias=False),             # 8x8 -> 4x4
    nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(8, 1, 4, 1, 0, bias=False),             # 4x4 -> 1x1
    nn.Sigmoid(),
)
criterion = nn.BCELoss()
optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))

b = 4
real = torch.randn(b, 1, 8, 8)
real_label = torch.ones(b)
fake_label = torch.zeros(b)

# (1) Update D
netD.zero_grad()
output = netD(real).view(-1)
errD_real = criterion(output, real_label)
errD_real.backward()
noise = torch.randn(b, nz, 1, 1)
fake = netG(noise)
output = netD(fake).view(-1)          # missing fake.detach()
errD_fake = criterion(output, fake_label)
errD_fake.backward()  # CULPRIT
optimizerD.step()

# (2) Update G
netG.zero_grad()
output = netD(fake).view(-1)
errG = criterion(output, real_label)
errG.backward()  # RAISES
optimizerG.step()

# EXPECT: fake
