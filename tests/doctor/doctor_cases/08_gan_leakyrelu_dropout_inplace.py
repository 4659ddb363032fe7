"""
Source: https://github.com/dreamgonfly/GAN-tutorial/issues/1
Thread: (Korean) "Train Backward 과정에서 오류" (error during the backward pass of training)
What the user did: running a GAN tutorial, D_loss.backward() raised the inplace-operation
error; a reply said removing inplace=True from the LeakyReLU and Dropout layers of the
Generator/Discriminator fixes it. An in-place Dropout overwrites the output of the
in-place LeakyReLU, which that LeakyReLU needs for its backward.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(
            nn.Linear(16, 32),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Dropout(0.3, inplace=True),  # CULPRIT
            nn.Linear(32, 1),
            nn.Sigmoid(),
        )

    def forward(self, x):
        return self.model(x)  # CULPRIT (where the inplace Dropout runs)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(4, 32), nn.LeakyReLU(0.2), nn.Linear(32, 16), nn.Tanh())

    def forward(self, z):
        return self.model(z)


D = Discriminator()
G = Generator()
D_optimizer = optim.Adam(D.parameters(), lr=2e-4)
criterion = nn.BCELoss()

real = torch.randn(8, 16)
z = torch.randn(8, 4)
D_optimizer.zero_grad()
D_real = D(real)
D_fake = D(G(z).detach())
D_loss = criterion(D_real, torch.ones(8, 1)) + criterion(D_fake, torch.zeros(8, 1))
D_loss.backward()  # RAISES
D_optimizer.step()

# EXPECT: D.model.1
# NOTE: the stale tensor is the output of module D.model.1 (LeakyReLU, in place on the
# Linear output); module D.model.2 (Dropout, inplace=True) overwrote it.
