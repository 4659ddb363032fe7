"""
Source: https://github.com/Hsintien-Ng/idinvert_pytorch-reproduced/issues/1
Thread: "optimizer_D.zero_grad() missing?"
What the user saw: in training/training_loop_encoder.py (at
https://github.com/Hsintien-Ng/idinvert_pytorch-reproduced/blob/3726e67aa8c51bf6f3740ae3e0bbafca084c0ddf/training/training_loop_encoder.py),
the D step of the in-domain GAN inversion encoder's training loop runs D_loss.backward() and
optimizer_D.step() with no optimizer_D.zero_grad(), so D's .grad is never cleared: every step
applies the gradients of all earlier iterations' D losses again (and of E's adversarial loss,
which also backpropagates into D.net). The author: "You're right. Sorry I forgot to add it. I
have fixed it." (commit cf3302510573138cf16202add06feae7c93624ea adds optimizer_D.zero_grad()
before D_loss.backward()). Reproduced with the loop's names, losses and weights (the
repository's train_encoder.py: loss_adv_weight 0.1, loss_gp_weight 5.0, ...; Adam, lr 1e-5),
tiny conv nets for E, G's synthesis and D; the perceptual loss is left out.
Silent: no error. Measured (3 iterations, same seed, against the same run with
optimizer_D.zero_grad() before D_loss.backward()): D's weights differ from the fixed run's by
up to 1.5e-5 (max |difference|) against a largest total move of 3.0e-5 in the fixed run, and
the gradient the 3rd step applies has 2.7x the norm of the 3rd D loss's own gradient.
"""
import torch
import torch.autograd as autograd
import torch.nn as nn
import torch.nn.functional as F

# SILENT

torch.manual_seed(0)


class Wrapper:
    def __init__(self, net):
        self.net = net


class Synthesis(nn.Module):
    def __init__(self, num_layers, w_dim):
        super().__init__()
        self.fc = nn.Linear(num_layers * w_dim, 3 * 8 * 8)

    def forward(self, z):
        return torch.tanh(self.fc(z.flatten(1))).view(-1, 3, 8, 8)


def div_loss_(D, real_x, fake_x, p=2, cuda=False):
    x_ = real_x.requires_grad_(True)
    y_ = D.net(x_)
    grad = autograd.grad(outputs=y_, inputs=x_, grad_outputs=torch.ones_like(y_),
                         create_graph=True, retain_graph=True, only_inputs=True)[0]
    div = (grad * grad).sum(dim=1, keepdim=True).sum(dim=2, keepdim=True).sum(dim=3, keepdim=True)
    return torch.mean(div)


def GAN_loss(scores_out, real=True):
    if real:
        return torch.mean(F.softplus(-scores_out))
    return torch.mean(F.softplus(scores_out))


loss_pix_weight, loss_adv_weight = 1.0, 0.1
loss_real_weight, loss_fake_weight, loss_gp_weight, loss_ep_weight = 1.0, 1.0, 5.0, 0.001
num_layers, w_space_dim = 2, 4
encode_dim = [num_layers, w_space_dim]

G = Wrapper(nn.Module())
G.net.synthesis = Synthesis(num_layers, w_space_dim)
E = Wrapper(nn.Sequential(nn.Conv2d(3, 4, 4, 2, 1), nn.LeakyReLU(0.2), nn.Flatten(),
                          nn.Linear(4 * 4 * 4, num_layers * w_space_dim)))
D = Wrapper(nn.Sequential(nn.Conv2d(3, 4, 4, 2, 1), nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(4 * 4 * 4, 1)))
G.net.synthesis.eval()
E.net.train()
D.net.train()

optimizer_E = torch.optim.Adam(E.net.parameters(), lr=1e-5, betas=(0.9, 0.99))
optimizer_D = torch.optim.Adam(D.net.parameters(), lr=1e-5, betas=(0.9, 0.99))

for step in range(3):  # noqa: B007
    x = torch.rand(2, 3, 8, 8) * 2 - 1
    batch_size = x.shape[0]
    z = E.net(x).view(batch_size, *encode_dim)
    x_rec = G.net.synthesis(z)

    # optimizing D
    x_real = D.net(x)
    x_fake = D.net(x_rec.detach())
    loss_real = GAN_loss(x_real, real=True)
    loss_fake = GAN_loss(x_fake, real=False)
    loss_gp = div_loss_(D, x, x_rec.detach())
    D_loss = loss_real_weight * loss_real + loss_fake_weight * loss_fake + loss_gp_weight * loss_gp \
        + loss_ep_weight * (loss_real * loss_real)
    D_loss.backward()  # CULPRIT (no optimizer_D.zero_grad() before it)
    optimizer_D.step()  # CULPRIT

    # optimizing G (the encoder E)
    loss_pix = torch.mean((x - x_rec) ** 2)
    x_adv = D.net(x_rec)
    loss_adv = GAN_loss(x_adv, real=True)
    E_loss = loss_pix_weight * loss_pix + loss_adv_weight * loss_adv
    optimizer_E.zero_grad()
    E_loss.backward()
    optimizer_E.step()

# EXPECT: optimizer_D
