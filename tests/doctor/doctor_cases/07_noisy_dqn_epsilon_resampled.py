"""
Source: https://github.com/PacktPublishing/Deep-Reinforcement-Learning-Hands-On-Second-Edition/issues/21
Thread: "Chapter 10"
What the user did: in the book's stock-trading DQN, replaced two Linear layers with
NoisyLinear layers; training then failed with a version error on a [3, 512] tensor (the
noise buffer of the 3-action output layer, with no "output of" part since it is a
buffer). NoisyLinear re-samples its epsilon buffer in place with normal_() on every
forward, and the loss code runs the same net again on next states before backward.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


class NoisyLinear(nn.Linear):
    def __init__(self, in_features, out_features, sigma_init=0.017):
        super().__init__(in_features, out_features)
        self.sigma_weight = nn.Parameter(torch.full((out_features, in_features), sigma_init))
        self.register_buffer("epsilon_weight", torch.zeros(out_features, in_features))
        self.sigma_bias = nn.Parameter(torch.full((out_features,), sigma_init))
        self.register_buffer("epsilon_bias", torch.zeros(out_features))

    def forward(self, x):
        self.epsilon_bias.normal_()
        bias = self.bias + self.sigma_bias * self.epsilon_bias
        self.epsilon_weight.normal_()  # CULPRIT (second call, from the next-state pass)
        weight = self.weight + self.sigma_weight * self.epsilon_weight
        return F.linear(x, weight, bias)


class NoisyDQN(nn.Module):
    def __init__(self, obs_dim, n_actions):
        super().__init__()
        self.fc1 = nn.Linear(obs_dim, 32)
        self.fc2 = NoisyLinear(32, n_actions)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


obs_dim, n_actions, B, gamma = 6, 3, 8, 0.99
net = NoisyDQN(obs_dim, n_actions)
tgt_net = NoisyDQN(obs_dim, n_actions)
tgt_net.load_state_dict(net.state_dict())
optimizer = optim.Adam(net.parameters(), lr=1e-4)

states = torch.randn(B, obs_dim)
actions = torch.randint(0, n_actions, (B,))
rewards = torch.randn(B)
next_states = torch.randn(B, obs_dim)

optimizer.zero_grad()
state_action_values = net(states).gather(1, actions.unsqueeze(-1)).squeeze(-1)
with torch.no_grad():
    next_state_actions = net(next_states).max(1)[1]  # double DQN: online net picks actions
    next_state_values = tgt_net(next_states).gather(1, next_state_actions.unsqueeze(-1)).squeeze(-1)
expected = rewards + gamma * next_state_values
loss = F.mse_loss(state_action_values, expected)
loss.backward()  # RAISES
optimizer.step()

# EXPECT: net.fc2.epsilon_weight
