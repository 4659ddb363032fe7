"""
Source: https://github.com/microsoft/oac-explore/issues/27
Thread: "`RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation`"
What the user did: ran the soft actor-critic trainer of the repository on a recent torch. It computes the policy
loss from both Q networks first, then steps each Q network's optimizer, then runs the policy loss's backward, which
goes back through the Q networks' weights as they were before their steps (older torch let this pass silently,
with gradients from weights that no longer existed). The fix in the thread: compute the policy loss after the Q
steps. Outside GAN training: off-policy reinforcement learning with twin critics.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


def mlp(dim_in, dim_out):
    return nn.Sequential(nn.Linear(dim_in, 32), nn.ReLU(), nn.Linear(32, dim_out))


obs_dim, act_dim, alpha = 6, 2, 0.2
policy, qf1, qf2 = mlp(obs_dim, act_dim), mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)
policy_optimizer = torch.optim.Adam(policy.parameters(), lr=3e-4)
qf1_optimizer = torch.optim.Adam(qf1.parameters(), lr=3e-4)
qf2_optimizer = torch.optim.Adam(qf2.parameters(), lr=3e-4)

obs, actions, q_target = torch.randn(16, obs_dim), torch.randn(16, act_dim), torch.randn(16, 1)
new_actions = torch.tanh(policy(obs))
log_pi = -new_actions.pow(2).sum(1, keepdim=True)
q_new_actions = torch.min(qf1(torch.cat([obs, new_actions], 1)), qf2(torch.cat([obs, new_actions], 1)))
policy_loss = (alpha * log_pi - q_new_actions).mean()
qf1_loss = (qf1(torch.cat([obs, actions], 1)) - q_target).pow(2).mean()
qf2_loss = (qf2(torch.cat([obs, actions], 1)) - q_target).pow(2).mean()

qf1_optimizer.zero_grad()
qf1_loss.backward()
qf1_optimizer.step()  # CULPRIT
qf2_optimizer.zero_grad()
qf2_loss.backward()
qf2_optimizer.step()  # CULPRIT
policy_optimizer.zero_grad()
policy_loss.backward()  # RAISES
policy_optimizer.step()

# EXPECT: qf1.2.weight or qf2.2.weight or qf1.0.weight or qf2.0.weight
