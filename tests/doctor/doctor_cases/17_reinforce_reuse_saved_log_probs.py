"""
Source: https://github.com/pytorch/examples/issues/151
Thread: "RuntimeError: Trying to backward through the graph second time, but the buffers
have already been freed. Please specify retain_variables=True when calling backward for
the first time."
What the user did: in the REINFORCE example, wanted to reuse stored experience and called
the policy-update routine more than once on the log-probabilities saved during the
episode; the second update backpropagates through graphs the first update already freed.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

torch.manual_seed(0)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 16)
        self.affine2 = nn.Linear(16, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        return F.softmax(self.affine2(F.relu(self.affine1(x))), dim=1)


policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=1e-2)
gamma = 0.99

# one short fake episode
for t in range(6):
    state = torch.randn(1, 4)
    m = Categorical(policy(state))
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    policy.rewards.append(1.0)

R, returns = 0.0, []
for r in reversed(policy.rewards):
    R = r + gamma * R
    returns.insert(0, R)
returns = torch.tensor(returns)
returns = (returns - returns.mean()) / (returns.std() + 1e-6)

# first update on the whole episode
policy_loss = torch.cat([-lp * g for lp, g in zip(policy.saved_log_probs, returns)]).sum()
optimizer.zero_grad()
policy_loss.backward()  # CULPRIT
optimizer.step()

# second update on a random sample of the stored experience (lists were not cleared)
idx = torch.randperm(len(returns))[:3].tolist()
replay_loss = torch.cat([-policy.saved_log_probs[i] * returns[i] for i in idx]).sum()
optimizer.zero_grad()
replay_loss.backward()  # RAISES
optimizer.step()

# EXPECT: policy.saved_log_probs
