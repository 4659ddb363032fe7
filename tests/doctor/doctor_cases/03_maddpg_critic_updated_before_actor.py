"""
Source: https://github.com/starry-sky6688/MADDPG/issues/27
Thread: (Chinese) asking why updating the critic first and then the actor (the order in
the paper) raises the inplace-operation error.
What the user did: in a MADDPG agent class, they swapped the update order so that
critic_optim.step() ran before actor_loss.backward(); actor_loss had been computed
through the agent's critic network, whose weights the critic step had just changed.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


class Actor(nn.Module):
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.fc1 = nn.Linear(obs_dim, 16)
        self.fc2 = nn.Linear(16, 16)
        self.action_out = nn.Linear(16, act_dim)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return torch.tanh(self.action_out(x))


class Critic(nn.Module):
    def __init__(self, in_dim):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, 16)
        self.fc2 = nn.Linear(16, 16)
        self.q_out = nn.Linear(16, 1)

    def forward(self, state, action):
        x = torch.cat([state, action], dim=1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.q_out(x)


class MADDPGAgent:
    def __init__(self, agent_id, obs_dim, act_dim, n_agents):
        self.agent_id = agent_id
        self.act_dim = act_dim
        self.actor_network = Actor(obs_dim, act_dim)
        self.critic_network = Critic(n_agents * (obs_dim + act_dim))
        self.critic_target_network = Critic(n_agents * (obs_dim + act_dim))
        self.critic_target_network.load_state_dict(self.critic_network.state_dict())
        self.actor_optim = optim.Adam(self.actor_network.parameters(), lr=1e-3)
        self.critic_optim = optim.Adam(self.critic_network.parameters(), lr=1e-3)


n_agents, obs_dim, act_dim, B, gamma = 2, 4, 2, 8, 0.95
agent = MADDPGAgent(0, obs_dim, act_dim, n_agents)

o = torch.randn(B, n_agents * obs_dim)
u = torch.rand(B, n_agents * act_dim) * 2 - 1
r = torch.randn(B, 1)
o_next = torch.randn(B, n_agents * obs_dim)
u_next = torch.rand(B, n_agents * act_dim) * 2 - 1

with torch.no_grad():
    target_q = r + gamma * agent.critic_target_network(o_next, u_next)
q_value = agent.critic_network(o, u)
critic_loss = (target_q - q_value).pow(2).mean()

# replace this agent's action by the current policy's action
u_new = u.clone()
own_obs = o[:, agent.agent_id * obs_dim:(agent.agent_id + 1) * obs_dim]
u_new[:, agent.agent_id * act_dim:(agent.agent_id + 1) * act_dim] = agent.actor_network(own_obs)
actor_loss = -agent.critic_network(o, u_new).mean()

# user's order: critic first, then actor
agent.critic_optim.zero_grad()
critic_loss.backward()
agent.critic_optim.step()  # CULPRIT

agent.actor_optim.zero_grad()
actor_loss.backward()  # RAISES
agent.actor_optim.step()

# EXPECT: agent.critic_network.q_out.weight
