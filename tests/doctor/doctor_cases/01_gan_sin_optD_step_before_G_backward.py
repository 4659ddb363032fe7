"""
Source: https://github.com/pytorch/pytorch/issues/39141
Thread: "RuntimeError: one of the variables needed for gradient computation has been
modified by an inplace operation?"
What the user did: in a tiny GAN fitting a sine curve (Linear/ReLU/Linear/Sigmoid
discriminator), they computed both D and G losses from one forward pass, called
opt_D.step() after D_loss.backward(retain_graph=True), and only then called
G_loss.backward(), which still needs D's (now updated) last Linear weight.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

N_IDEAS, ART, BATCH = 5, 15, 8
G = nn.Sequential(nn.Linear(N_IDEAS, 32), nn.ReLU(), nn.Linear(32, ART))
D = nn.Sequential(nn.Linear(ART, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
opt_D = optim.Adam(D.parameters(), lr=1e-4)
opt_G = optim.Adam(G.parameters(), lr=1e-4)

xs = torch.linspace(-1, 1, ART).repeat(BATCH, 1)
real = torch.sin(xs * 3.14159) + 0.02 * torch.randn(BATCH, 1)
fake = G(torch.randn(BATCH, N_IDEAS))

p_real = D(real)
p_fake = D(fake)
D_loss = -torch.mean(torch.log(p_real) + torch.log(1.0 - p_fake))
G_loss = torch.mean(torch.log(1.0 - p_fake))

opt_D.zero_grad()
D_loss.backward(retain_graph=True)
opt_D.step()  # CULPRIT

opt_G.zero_grad()
G_loss.backward()  # RAISES
opt_G.step()

# EXPECT: D.2.weight
