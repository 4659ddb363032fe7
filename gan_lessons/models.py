"""Seed 000's GAN for MNIST: G with Linear, BatchNorm, PixelShuffle and Conv; D with Conv and Linear.
Used from lesson 03 on. D returns one logit per image, shape [B]."""
from torch import nn


class Reshape(nn.Module):
    """x.reshape(batch, *shape); Reshape() flattens [B, 1] logits to [B]."""

    def __init__(self, *shape):
        super().__init__()
        self.shape = shape

    def forward(self, x):
        return x.reshape(x.size(0), *self.shape)


class Generator(nn.Module):
    """Seed 000's G. tanh=True adds a final nn.Tanh(), so outputs share the data's [-1, 1] range: the seed has
    none (it only ever saw random noise), and on real MNIST one 20-epoch run of that G trained badly (lesson 06)."""

    def __init__(self, z_dim=64, tanh=False):
        super().__init__()
        self.z_dim, self.tanh = z_dim, tanh
        self.net = nn.Sequential(
            nn.Linear(z_dim, 512), nn.BatchNorm1d(512), nn.ReLU(),
            nn.Linear(512, 64 * 7 * 7), nn.BatchNorm1d(64 * 7 * 7), nn.ReLU(),
            Reshape(64, 7, 7),
            nn.PixelShuffle(2),                               # 64x7x7 -> 16x14x14
            nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.PixelShuffle(2),                               # 32x14x14 -> 8x28x28
            nn.Conv2d(8, 1, kernel_size=3, padding=1),
            *([nn.Tanh()] if tanh else []),
        )

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 32, kernel_size=4, padding=1, stride=2), nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, padding=1, stride=2), nn.ReLU(),
            Reshape(64 * 7 * 7),
            nn.Linear(64 * 7 * 7, 512), nn.ReLU(),
            nn.Linear(512, 1),                                # its weight.t() is the [512, 1] in seed 000's error
            Reshape(),
        )

    def forward(self, x):
        return self.net(x)
