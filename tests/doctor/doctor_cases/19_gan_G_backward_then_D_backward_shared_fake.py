"""
Source: https://whosebug.com/question/5232549/How-does-PyTorch-s-loss-backward-work-when-retain-graph-True-is-specified
Thread: "How does PyTorch's loss.backward() work when "retain_graph=True" is specified?"
(mirror of a Stack Overflow question)
What the user did: training a GAN, they computed the generator and discriminator losses
first, then ran loss_g.backward()/optim_g.step() followed by loss_d.backward()/
optim_d.step(); the second backward failed with "Trying to backward through the graph a
second time". The answer explains the discriminator loss backpropagates through the
generator output, whose graph the generator backward already freed.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh())
disc = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
optim_g = optim.Adam(gen.parameters(), lr=2e-4)
optim_d = optim.Adam(disc.parameters(), lr=2e-4)
bce = nn.BCELoss()

real = torch.randn(8, 8)
fake = gen(torch.randn(8, 4))
ones, zeros = torch.ones(8, 1), torch.zeros(8, 1)

# computing loss_g and loss_d ...
loss_g = bce(disc(fake), ones)
loss_d = bce(disc(real), ones) + bce(disc(fake), zeros)   # fake not detached

optim_g.zero_grad()
loss_g.backward()  # CULPRIT
optim_g.step()

optim_d.zero_grad()
loss_d.backward()  # RAISES
optim_d.step()

# EXPECT: fake
