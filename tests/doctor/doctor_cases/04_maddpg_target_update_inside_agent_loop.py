"""
Source: https://github.com/philtabor/Multi-Agent-Deep-Deterministic-Policy-Gradients/issues/2
Thread: "Question about backward"
What the user did: ran a MADDPG learn() that first builds joint next-actions from every
agent's target actor (with autograd on), then loops over agents doing a critic update,
an actor update and a soft target-network update per agent; on torch 1.8.1 the next
agent's critic_loss.backward(retain_graph=True) failed with a TBackward version error.
The per-agent target update rewrites target-actor weights that the shared joint-action
graph still needs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


class ActorNetwork(nn.Module):
    def __init__(self, obs_dim, n_actions, hid=16):
        super().__init__()
        self.fc1 = nn.Linear(obs_dim, hid)
        self.fc2 = nn.Linear(hid, hid)
        self.pi = nn.Linear(hid, n_actions)

    def forward(self, s):
        x = F.relu(self.fc1(s))
        x = F.relu(self.fc2(x))
        return torch.softmax(self.pi(x), dim=1)


class CriticNetwork(nn.Module):
    def __init__(self, state_dim, joint_act_dim, hid=16):
        super().__init__()
        self.fc1 = nn.Linear(state_dim + joint_act_dim, hid)
        self.fc2 = nn.Linear(hid, hid)
        self.q = nn.Linear(hid, 1)

    def forward(self, s, a):
        x = F.relu(self.fc1(torch.cat([s, a], dim=1)))
        x = F.relu(self.fc2(x))
        return self.q(x)


class Agent:
    def __init__(self, obs_dim, state_dim, n_actions, n_agents, tau=0.01):
        self.gamma, self.tau = 0.95, tau
        self.actor = ActorNetwork(obs_dim, n_actions)
        self.target_actor = ActorNetwork(obs_dim, n_actions)
        self.critic = CriticNetwork(state_dim, n_agents * n_actions)
        self.target_critic = CriticNetwork(state_dim, n_agents * n_actions)
        self.actor_optimizer = optim.Adam(self.actor.parameters(), lr=1e-3)
        self.critic_optimizer = optim.Adam(self.critic.parameters(), lr=1e-3)
        self.update_network_parameters(tau=1.0)

    def update_network_parameters(self, tau=None):
        tau = self.tau if tau is None else tau
        for net, target in ((self.actor, self.target_actor), (self.critic, self.target_critic)):
            src = net.state_dict()
            dst = target.state_dict()
            blended = {k: tau * src[k].clone() + (1 - tau) * dst[k].clone() for k in src}
            target.load_state_dict(blended)  # CULPRIT (the in-place copy inside the method)


class MADDPG:
    def __init__(self, obs_dim, state_dim, n_actions, n_agents):
        self.agents = [Agent(obs_dim, state_dim, n_actions, n_agents) for _ in range(n_agents)]


n_agents, obs_dim, n_actions, B = 2, 4, 3, 8
state_dim = n_agents * obs_dim
maddpg = MADDPG(obs_dim, state_dim, n_actions, n_agents)

actor_states = [torch.randn(B, obs_dim) for _ in range(n_agents)]
actor_new_states = [torch.randn(B, obs_dim) for _ in range(n_agents)]
states = torch.cat(actor_states, dim=1)
states_ = torch.cat(actor_new_states, dim=1)
old_actions = torch.softmax(torch.randn(B, n_agents * n_actions), dim=1)
rewards = torch.randn(B, n_agents)

all_new_actions, all_mu_actions = [], []
for i, agent in enumerate(maddpg.agents):
    all_new_actions.append(agent.target_actor(actor_new_states[i]))
    all_mu_actions.append(agent.actor(actor_states[i]))
new_actions = torch.cat(all_new_actions, dim=1)
mu = torch.cat(all_mu_actions, dim=1)

for i, agent in enumerate(maddpg.agents):
    critic_value_ = agent.target_critic(states_, new_actions).flatten()
    critic_value = agent.critic(states, old_actions).flatten()
    target = rewards[:, i] + agent.gamma * critic_value_
    critic_loss = F.mse_loss(target, critic_value)
    agent.critic_optimizer.zero_grad()
    critic_loss.backward(retain_graph=True)  # RAISES
    agent.critic_optimizer.step()

    actor_loss = -agent.critic(states, mu).flatten().mean()
    agent.actor_optimizer.zero_grad()
    actor_loss.backward(retain_graph=True)
    agent.actor_optimizer.step()

    agent.update_network_parameters()  # CULPRIT

# EXPECT: maddpg.agents[0].target_actor.pi.weight
