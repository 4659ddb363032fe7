"""
Source: https://github.com/eriklindernoren/PyTorch-GAN/issues/6
Thread: "wgan retrain_graph"
What the reporter found: the WGAN example failed at the generator's `gen_validity.backward(valid)` with
"Trying to backward through the graph a second time". The cause, a typo in the generator step: it scored
`discriminator(fake_imgs)`, the batch made for the critic step, whose generator graph `fake_validity.backward(fake)`
had already gone through and freed, instead of the `gen_imgs` it had just generated. The fix in the repository
(commit 48e84ef, "WGAN: Fixed typo"): `gen_validity = discriminator(gen_imgs)`. retain_graph=True would hide the
typo and train G on the critic step's samples.
"""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)

latent_dim, img_dim, n_critic, clip_value = 4, 8, 1, 0.01


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(latent_dim, 16), nn.LeakyReLU(0.2, inplace=True),
                                   nn.Linear(16, img_dim), nn.Tanh())

    def forward(self, z):
        return self.model(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(img_dim, 16), nn.LeakyReLU(0.2, inplace=True), nn.Linear(16, 1))

    def forward(self, img):
        return self.model(img)


generator, discriminator = Generator(), Discriminator()
optimizer_G = torch.optim.RMSprop(generator.parameters(), lr=5e-5)
optimizer_D = torch.optim.RMSprop(discriminator.parameters(), lr=5e-5)
Tensor = torch.FloatTensor
dataloader = [torch.randn(4, img_dim) for _ in range(2)]

for epoch in range(1):
    for i, imgs in enumerate(dataloader):
        valid = Tensor(imgs.shape[0], 1).fill_(-1.0)
        fake = Tensor(imgs.shape[0], 1).fill_(1.0)
        real_imgs = imgs.type(Tensor)
        for _ in range(n_critic):
            # critic step
            optimizer_D.zero_grad()
            z = Tensor(np.random.normal(0, 1, (imgs.shape[0], latent_dim)))
            fake_imgs = generator(z)
            real_validity = discriminator(real_imgs)
            real_validity.backward(valid)
            fake_validity = discriminator(fake_imgs)
            fake_validity.backward(fake)  # CULPRIT
            d_loss = real_validity - fake_validity
            optimizer_D.step()
            for p in discriminator.parameters():
                p.data.clamp_(-clip_value, clip_value)
        # generator step
        optimizer_G.zero_grad()
        z = Tensor(np.random.normal(0, 1, (imgs.shape[0], latent_dim)))
        gen_imgs = generator(z)
        gen_validity = discriminator(fake_imgs)
        gen_validity.backward(valid)  # RAISES
        optimizer_G.step()

# EXPECT: fake_imgs
