"""
Source: https://github.com/cy-xu/simple_CycleGAN/issues/3
Thread: "RuntimeError: one of the variables needed for gradient computation has been
modified by an inplace operation"
What the user did: ran a simple CycleGAN script on torch >= 1.5; the generator loss is
backpropagated (retain_graph=True) and optimizer_g.step() is called, then the
discriminator loss is computed on the same, non-detached fake_y, so D's backward walks
into the generator whose conv weight ([3, 64, 7, 7]) was already updated.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

netG_x = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())
netG_y = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())
netD_x = nn.Sequential(nn.Conv2d(3, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3, padding=1))
optimizer_g = optim.Adam(list(netG_x.parameters()) + list(netG_y.parameters()), lr=2e-4)
optimizer_d = optim.Adam(netD_x.parameters(), lr=2e-4)

real_x = torch.randn(2, 3, 8, 8)
real_y = torch.randn(2, 3, 8, 8)

# X -> Y' -> X^ cycle
optimizer_g.zero_grad()
fake_y = netG_x(real_x)
prediction = netD_x(fake_y)
loss_G_X = F.mse_loss(prediction, torch.ones_like(prediction))
x_hat = netG_y(fake_y)
loss_cycle_X = F.l1_loss(x_hat, real_x) * 10.0
loss_X = loss_G_X + loss_cycle_X
loss_X.backward(retain_graph=True)
optimizer_g.step()  # CULPRIT

# netD_x update, fake_y not detached
optimizer_d.zero_grad()
pred_real = netD_x(real_y)
pred_fake = netD_x(fake_y)
loss_D_x = 0.5 * (F.mse_loss(pred_real, torch.ones_like(pred_real))
                  + F.mse_loss(pred_fake, torch.zeros_like(pred_fake)))
loss_D_x.backward()  # RAISES
optimizer_d.step()

# EXPECT: netG_x.2.weight
