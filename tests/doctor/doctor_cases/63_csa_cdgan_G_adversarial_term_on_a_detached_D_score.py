"""
Source: https://github.com/wangle53/CSA-CDGAN/issues/5
Thread: a user asks why the generator's adversarial term uses `pred_fake = netd(fake).detach()`.
What the user saw: in train.py, G's loss is `err_g_total = G_WEIGHT * err_g + D_WEIGHT * err_d_fake`, where
`err_d_fake` is computed from `pred_fake = netd(fake).detach()`. The detach cuts D's score off from G, so the
adversarial term is a constant to `err_g_total.backward()`: G learns from the L1 term alone, and the model is not
trained adversarially at all ("you detach the 'pred_fake', so the loss cannot update anything"). The author's reply,
that the detach keeps D from being updated, does not hold: optimizer_g steps netg alone, and optimizer_d.zero_grad()
clears D's .grad before D's own backward. Reproduced with the loop's names and weights (G_WEIGHT 200, D_WEIGHT 1,
BCE on a sigmoid score, L1 on the change map), tiny conv nets, random image pairs.
Silent: no error; netg's weights after two steps are those of a run with the adversarial term left out.
"""
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)
# SILENT


class NetG(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1), nn.Sigmoid())

    def forward(self, x):
        return self.net(x)


class NetD(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4, 1, 0))

    def forward(self, x):
        return torch.sigmoid(self.features(x)).view(-1)


G_WEIGHT, D_WEIGHT = 200, 1
netg, netd = NetG(), NetD()
l_con, l_bce = nn.L1Loss(), nn.BCELoss()
optimizer_g = optim.Adam(netg.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizer_d = optim.Adam(netd.parameters(), lr=2e-4, betas=(0.5, 0.999))
for i in range(2):
    x1, x2 = torch.rand(2, 3, 8, 8), torch.rand(2, 3, 8, 8)
    gt = (torch.rand(2, 1, 8, 8) > 0.5).float()
    x = torch.cat((x1, x2), 1)
    real_label, fake_label = torch.ones(2), torch.zeros(2)
    fake = netg(x)
    pred_real = netd(gt)
    pred_fake = netd(fake).detach()  # CULPRIT
    err_d_fake = l_bce(pred_fake, fake_label)
    err_g = l_con(fake, gt)
    err_g_total = G_WEIGHT * err_g + D_WEIGHT * err_d_fake
    pred_fake_ = netd(fake.detach())
    err_d_total = (l_bce(pred_real, real_label) + l_bce(pred_fake_, fake_label)) * 0.5
    optimizer_g.zero_grad()
    err_g_total.backward(retain_graph=True)
    optimizer_g.step()
    optimizer_d.zero_grad()
    err_d_total.backward()
    optimizer_d.step()

# EXPECT: pred_fake or netd
