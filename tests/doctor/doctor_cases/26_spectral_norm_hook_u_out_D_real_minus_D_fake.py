"""
Source: https://github.com/pytorch/pytorch/pull/13350
Thread: "Fix more spectral norm bugs"
What the report says (the PR's description, problem 3): https://github.com/pytorch/pytorch/pull/12671
("Fix SpectralNorm with DataParallel") "changed SN to update `u` in-place to make DP work
correctly, but then it breaks backward through two forwards (e.g., the common GAN loss
`D(real) - D(fake)`) because the vectors needed to backprop the 1st forward is changed in the
2nd forward"; the maintainer pointed a user who hit it (@YaoshengFu) to the PR. Reproduced with
the hook as PR #12671 left it (October 2018, reconstructed from its description and a public
copy of that torch/nn/utils/spectral_norm.py): a forward pre-hook whose power iteration, under
no_grad, writes the new u into the module's buffer weight_u with normalize(..., out=u), then
computes sigma = dot(u, W v), which saves that same buffer. A critic with the hook on each
layer runs on the real and the fake batch before one backward. Today's torch clones u and v
first, so the hook is carried here as it was.
"""
import torch
import torch.nn as nn
import torch.optim as optim
from torch.nn.functional import normalize

torch.manual_seed(0)


class SpectralNorm(object):
    def __init__(self, name='weight', n_power_iterations=1, dim=0, eps=1e-12):
        self.name, self.dim, self.n_power_iterations, self.eps = name, dim, n_power_iterations, eps

    def compute_weight_and_update_u(self, module):
        # NB: This updates the _u vector **in-place** (so that DataParallel replicas share it)
        weight = getattr(module, self.name + '_orig')
        u = getattr(module, self.name + '_u')
        height = weight.size(0)
        weight_mat = weight.reshape(height, -1)
        with torch.no_grad():
            for _ in range(self.n_power_iterations):
                v = normalize(torch.matmul(weight_mat.t(), u), dim=0, eps=self.eps)
                u = normalize(torch.matmul(weight_mat, v), dim=0, eps=self.eps, out=u)  # CULPRIT

        sigma = torch.dot(u, torch.matmul(weight_mat, v))
        weight = weight / sigma
        return weight

    def __call__(self, module, inputs):
        if module.training:
            weight = self.compute_weight_and_update_u(module)
            setattr(module, self.name, weight)

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        u = normalize(weight.new_empty(weight.size(dim)).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        module.register_buffer(fn.name, weight.data)
        module.register_buffer(fn.name + "_u", u)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name='weight', n_power_iterations=1, eps=1e-12, dim=0):
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


netD = nn.Sequential(
    spectral_norm(nn.Conv2d(3, 8, 4, 2, 1)),     # 8x8 -> 4x4
    nn.LeakyReLU(0.1),
    spectral_norm(nn.Conv2d(8, 1, 4, 1, 0)),     # 4x4 -> 1x1
)
netG = nn.Sequential(nn.ConvTranspose2d(4, 3, 8, 1, 0), nn.Tanh())   # 1x1 -> 8x8
optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.0, 0.9))

real = torch.randn(4, 3, 8, 8)
z = torch.randn(4, 4, 1, 1)
with torch.no_grad():
    fake = netG(z)

optimizerD.zero_grad()
errD = -(netD(real).mean() - netD(fake).mean())  # CULPRIT (the second forward reruns the hook)
errD.backward()  # RAISES
optimizerD.step()

# EXPECT: weight_u or netD.0.weight_u or netD.2.weight_u or u
