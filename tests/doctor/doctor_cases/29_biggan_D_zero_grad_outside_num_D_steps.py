"""
Source: https://github.com/ajbrock/BigGAN-PyTorch/issues/25
Thread: "Any reason you don't zero optimizer between Discriminator training steps?"
What the user saw: in train_fns.py's GAN_training_function (at
https://github.com/ajbrock/BigGAN-PyTorch/blob/b4754ea8c8428fabce898d6bb150faae0295cac6/train_fns.py),
D.optim.zero_grad() is called once at the top of train(), before the loop over
config['num_D_steps'], so each D step applies the gradients of every earlier D step of that
iteration too. The author: "Good catch--this was a typo! Fixed with the most recent commit"
(b70f16c4a879b2d5d5d7bcb73794424aef5eec1f moves D.optim.zero_grad() inside the loop), noting it
does not affect the main script's default num_D_steps=1 (two launch scripts use 4, one 5).
Reproduced with the function's loop, names and hinge losses (unconditional, tiny MLPs).
Silent: no error. Measured (4 D steps, 1 accumulation, same seed, against the same run with
zero_grad() moved into the loop): D's weights after the D steps differ from the fixed run's by up to
7.0e-4 (max |difference|), against a largest total move of 1.1e-3 over the 4 correct steps;
the 4th step's gradient is the sum of all 4 steps' (its norm 3.0x that of its own).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

# SILENT

torch.manual_seed(0)


def toggle_grad(model, on_or_off):
    for param in model.parameters():
        param.requires_grad = on_or_off


def discriminator_loss(dis_fake, dis_real):
    loss_real = torch.mean(F.relu(1. - dis_real))
    loss_fake = torch.mean(F.relu(1. + dis_fake))
    return loss_real, loss_fake


def generator_loss(dis_fake):
    return -torch.mean(dis_fake)


class G_D(nn.Module):
    def __init__(self, G, D):
        super().__init__()
        self.G, self.D = G, D

    def forward(self, z, x=None, train_G=False):
        with torch.set_grad_enabled(train_G):
            G_z = self.G(z)
        if x is None:
            return self.D(G_z)
        D_out = self.D(torch.cat([G_z, x], 0))
        return torch.split(D_out, [G_z.shape[0], x.shape[0]])


G = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 12))
D = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 1))
G.optim = optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.999), eps=1e-8)
D.optim = optim.Adam(D.parameters(), lr=2e-4, betas=(0.0, 0.999), eps=1e-8)
GD = G_D(G, D)
config = {'batch_size': 4, 'num_D_steps': 4, 'num_D_accumulations': 1, 'num_G_accumulations': 1,
          'toggle_grads': True}
z_ = torch.randn(config['batch_size'], 8)


def train(x):
    G.optim.zero_grad()
    D.optim.zero_grad()  # CULPRIT (once, before the loop over D steps)
    x = torch.split(x, config['batch_size'])
    counter = 0

    if config['toggle_grads']:
        toggle_grad(D, True)
        toggle_grad(G, False)

    for step_index in range(config['num_D_steps']):  # noqa: B007
        # If accumulating gradients, loop multiple times before an optimizer step
        for accumulation_index in range(config['num_D_accumulations']):  # noqa: B007
            z_.normal_()                                  # z_.sample_()
            D_fake, D_real = GD(z_[:config['batch_size']], x[counter], train_G=False)
            D_loss_real, D_loss_fake = discriminator_loss(D_fake, D_real)
            D_loss = (D_loss_real + D_loss_fake) / float(config['num_D_accumulations'])
            D_loss.backward()
            counter += 1
        D.optim.step()  # CULPRIT

    if config['toggle_grads']:
        toggle_grad(D, False)
        toggle_grad(G, True)

    G.optim.zero_grad()
    for accumulation_index in range(config['num_G_accumulations']):  # noqa: B007
        z_.normal_()
        D_fake = GD(z_, train_G=True)
        G_loss = generator_loss(D_fake) / float(config['num_G_accumulations'])
        G_loss.backward()
    G.optim.step()
    return {'G_loss': float(G_loss.item()), 'D_loss_real': float(D_loss_real.item()),
            'D_loss_fake': float(D_loss_fake.item())}


x = torch.randn(config['num_D_steps'] * config['num_D_accumulations'] * config['batch_size'], 12)
metrics = train(x)

# EXPECT: D.optim
