"""
Source: https://github.com/hijkzzz/pymarl2/issues/46
Thread: "MAPPO bug, trying to backward through the graph a second time."
What the user did: reported that the PPO/MAPPO learner crashes when mini_epochs > 1
because advantages are computed from the critic outside the mini-epoch loop (without
detaching) and reused inside it; after the first mini-epoch's backward the critic graph
behind the advantages is freed, so the second mini-epoch fails.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

obs_dim, n_actions, B = 6, 3, 16
actor = nn.Sequential(nn.Linear(obs_dim, 16), nn.Tanh(), nn.Linear(16, n_actions))
critic = nn.Sequential(nn.Linear(obs_dim, 16), nn.Tanh(), nn.Linear(16, 1))
agent_optimiser = optim.Adam(actor.parameters(), lr=5e-4)
critic_optimiser = optim.Adam(critic.parameters(), lr=5e-4)

obs = torch.randn(B, obs_dim)
actions = torch.randint(0, n_actions, (B, 1))
returns = torch.randn(B)
with torch.no_grad():
    old_log_pi = F.log_softmax(actor(obs), dim=1).gather(1, actions).squeeze(1)

values = critic(obs).squeeze(1)
advantages = returns - values           # computed once, not detached

eps_clip, mini_epochs = 0.2, 2
for k in range(mini_epochs):
    log_pi = F.log_softmax(actor(obs), dim=1).gather(1, actions).squeeze(1)
    ratios = torch.exp(log_pi - old_log_pi)
    surr1 = ratios * advantages
    surr2 = torch.clamp(ratios, 1 - eps_clip, 1 + eps_clip) * advantages
    pg_loss = -torch.min(surr1, surr2).mean()
    agent_optimiser.zero_grad()
    pg_loss.backward()  # CULPRIT (k=0) # RAISES (k=1)
    agent_optimiser.step()

    critic_loss = (returns - critic(obs).squeeze(1)).pow(2).mean()
    critic_optimiser.zero_grad()
    critic_loss.backward()
    critic_optimiser.step()

# EXPECT: advantages
