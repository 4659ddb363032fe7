"""
Source: https://github.com/pytorch/pytorch/issues/68327
Thread: "Spectral Normalization issue."
What the user did: working on a GAN, wrapped the discriminator (nn.Linear(10, 1)) in the then
new torch.nn.utils.parametrizations.spectral_norm, ran it on the real batch X and on the
generated batch, summed loss_real + loss_fake and called backward once; it failed with "one of
the variables needed for gradient computation has been modified by an inplace operation",
while the older torch.nn.utils.spectral_norm worked. Why, as
https://github.com/pytorch/pytorch/pull/62293 ("Do not modify saved variables in-place for
spectral norm during power iteration") describes it: the parametrization's power iteration
renews its buffers with F.normalize(..., out=self._u) under no_grad and "performs a clone AFTER
modifying u and v in-place", so the cloned _u that one forward's sigma saved is the tensor the
next forward's power iteration writes into. Today's torch clones u and v inside forward, before
using them, so this file carries the parametrization as that PR describes it (reconstructed,
not copied); the user's code is as in the issue.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize

torch.manual_seed(0)


class _SpectralNorm(nn.Module):
    def __init__(self, weight, n_power_iterations=1, eps=1e-12):
        super().__init__()
        self.n_power_iterations, self.eps = n_power_iterations, eps
        h, w = weight.flatten(1).shape
        self.register_buffer('_u', F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=eps))
        self.register_buffer('_v', F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=eps))

    @torch.no_grad()
    def _power_method(self, weight_mat, n_power_iterations):
        for _ in range(n_power_iterations):
            self._u = F.normalize(torch.mv(weight_mat, self._v), dim=0, eps=self.eps, out=self._u)  # CULPRIT
            self._v = F.normalize(torch.mv(weight_mat.t(), self._u), dim=0, eps=self.eps, out=self._v)
        # the clone meant to protect saved tensors comes after the in-place writes
        self._u = self._u.clone(memory_format=torch.contiguous_format)
        self._v = self._v.clone(memory_format=torch.contiguous_format)

    def forward(self, weight):
        weight_mat = weight.flatten(1)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        sigma = torch.dot(self._u, torch.mv(weight_mat, self._v))
        return weight / sigma


def spectral_norm(module, name='weight'):
    parametrize.register_parametrization(module, name, _SpectralNorm(getattr(module, name)))
    return module


discriminator = spectral_norm(nn.Linear(10, 1))
optim = torch.optim.Adam(discriminator.parameters())
loss = nn.L1Loss()

X = torch.ones(4, 10)
real = torch.ones(4, 1)
fake = torch.zeros(4, 1)

optim.zero_grad()
generated = torch.rand(4, 10)

loss_real = loss(discriminator(X), real)
loss_fake = loss(discriminator(generated), fake)  # CULPRIT

l = loss_real + loss_fake  # noqa: E741

l.backward()  # RAISES
optim.step()

# EXPECT: _u or self._u or discriminator.parametrizations.weight.0._u
