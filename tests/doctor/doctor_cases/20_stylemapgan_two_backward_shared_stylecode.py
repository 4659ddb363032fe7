"""
Source: https://github.com/naver-ai/StyleMapGAN/issues/16
Thread: "RuntimeError: Trying to backward through the graph a second time"
What the user did: training StyleMapGAN, the model's "G" forward returns an adversarial
loss, a latent (w) reconstruction loss and the stylecode; the script calls backward on
the generator loss and then separately on the w-reconstruction loss, and the second call
failed. The user worked around it by summing both losses and calling backward once.
Both losses depend on the encoder output (stylecode), whose graph the first backward frees.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 8), nn.LeakyReLU(0.2), nn.Linear(8, 8))
        self.generator = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
        self.discriminator = nn.Sequential(nn.Linear(16, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

    def forward(self, real_img, mode):
        if mode == "G":
            stylecode = self.encoder(real_img)
            fake_img = self.generator(stylecode)
            adv_loss = F.softplus(-self.discriminator(fake_img)).mean()
            fake_stylecode = self.encoder(fake_img.detach())
            w_rec_loss = F.mse_loss(fake_stylecode, stylecode)
            return adv_loss, w_rec_loss, stylecode
        raise ValueError(mode)


model = Model()
g_optim = optim.Adam(list(model.encoder.parameters()) + list(model.generator.parameters()), lr=2e-3)
lambda_adv, lambda_w_rec_loss = 1.0, 1.0

real_img = torch.randn(4, 16)
adv_loss, w_rec_loss, stylecode = model(real_img, "G")
g_loss = adv_loss * lambda_adv
g_optim.zero_grad()
g_loss.backward()  # CULPRIT
(w_rec_loss * lambda_w_rec_loss).backward()  # RAISES
g_optim.step()

# EXPECT: stylecode
