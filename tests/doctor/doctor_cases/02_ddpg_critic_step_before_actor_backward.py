"""
Source: https://github.com/kashif/firedup/issues/11
Thread: "ddpg torch error"
What the user did: ran a DDPG implementation on torch 1.6 where the critic (Q) optimizer
stepped before the policy loss (computed earlier through the critic) was backpropagated;
the error named a [300, 1] tensor that is "output 0 of TBackward", i.e. the transposed
weight of the critic's final Linear(300, 1). Reordering the two updates fixed it.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


class QFunction(nn.Module):
    def __init__(self, obs_dim, act_dim, hid=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + act_dim, hid), nn.ReLU(), nn.Linear(hid, 1))

    def forward(self, o, a):
        return self.net(torch.cat([o, a], dim=-1)).squeeze(-1)


class MLPActorCritic(nn.Module):
    def __init__(self, obs_dim, act_dim, hid=16):
        super().__init__()
        self.pi = nn.Sequential(nn.Linear(obs_dim, hid), nn.ReLU(), nn.Linear(hid, act_dim), nn.Tanh())
        self.q = QFunction(obs_dim, act_dim, hid)


obs_dim, act_dim, gamma = 3, 1, 0.99
ac = MLPActorCritic(obs_dim, act_dim)
ac_targ = MLPActorCritic(obs_dim, act_dim)
ac_targ.load_state_dict(ac.state_dict())
pi_optimizer = optim.Adam(ac.pi.parameters(), lr=1e-3)
q_optimizer = optim.Adam(ac.q.parameters(), lr=1e-3)

o = torch.randn(8, obs_dim)
a = torch.rand(8, act_dim) * 2 - 1
r = torch.randn(8)
o2 = torch.randn(8, obs_dim)
d = torch.zeros(8)

q = ac.q(o, a)
with torch.no_grad():
    backup = r + gamma * (1 - d) * ac_targ.q(o2, ac_targ.pi(o2))
loss_q = ((q - backup) ** 2).mean()
loss_pi = -ac.q(o, ac.pi(o)).mean()

q_optimizer.zero_grad()
loss_q.backward()
q_optimizer.step()  # CULPRIT

pi_optimizer.zero_grad()
loss_pi.backward()  # RAISES
pi_optimizer.step()

# EXPECT: ac.q.net.2.weight
