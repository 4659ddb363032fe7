"""
Source: https://github.com/nikhilsinghmus/image2reverb/issues/37
Thread: a user points out that the generator's step computes `d_fake2 = self.d(fake_spec.detach(), f)`.
What the user saw: in Image2Reverb's training_step, the branch for the encoder's and the generator's optimizers
builds the adversarial term G_loss1 from D's score on `fake_spec.detach()`. The detach cuts the generated
spectrogram off from G, so the term gives G and the encoder no gradient; with D trainable, its gradient lands in D's
.grad, which D's own step clears before its backward. The maintainer: "You're right, that .detach() should not be
there for the generator". Reproduced with the step's names, its three optimizers stepped in turn on one
training_step each (as Lightning's automatic optimisation does, here without its requires_grad toggling), tiny
linear nets, random spectrograms and images.
Silent: no error; G and the encoder train on the L1 term alone.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
# SILENT
LAMBDA = 100


class Image2Reverb(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(12, 4)
        self.g = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
        self.d = nn.Sequential(nn.Linear(16, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

    def training_step(self, spec, label, optimizer_idx):
        f = self.enc(label)
        z = torch.cat((f, torch.randn(f.shape[0], 4)), 1)
        fake_spec = self.g(z)
        d_fake = self.d(fake_spec.detach())
        d_real = self.d(spec)
        if optimizer_idx in (0, 1):
            d_fake2 = self.d(fake_spec.detach())  # CULPRIT
            G_loss1 = F.mse_loss(d_fake2, torch.ones_like(d_fake2))
            G_loss2 = F.l1_loss(fake_spec, spec)
            return G_loss1 + LAMBDA * G_loss2
        return F.mse_loss(d_fake, torch.zeros_like(d_fake)) + F.mse_loss(d_real, torch.ones_like(d_real))


model = Image2Reverb()
optimizers = [torch.optim.Adam(model.enc.parameters(), 1e-4), torch.optim.Adam(model.g.parameters(), 4e-4),
              torch.optim.Adam(model.d.parameters(), 2e-4)]
for batch in range(2):
    spec, label = torch.rand(4, 16), torch.rand(4, 12)
    for k, opt in enumerate(optimizers):
        loss = model.training_step(spec, label, k)
        opt.zero_grad()
        loss.backward()
        opt.step()

# EXPECT: d_fake2 or model.d
