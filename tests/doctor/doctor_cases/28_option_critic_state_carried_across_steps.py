"""
Source: https://github.com/lweitkamp/option-critic-pytorch/issues/5
Thread: "Got an error of inplace operation while running the code"
What the user did: ran the repository's main.py (option-critic on CartPole, code at
https://github.com/lweitkamp/option-critic-pytorch/blob/0c57da7686f8903ed2d8dded3fae832ee9defd1a/main.py
and option_critic.py) on a torch >= 1.5 and got "modified by an inplace operation ... [32, 64], which
is output 0 of TBackward" at loss.backward(). In the step loop, `state` is computed by
option_critic.get_state(next_obs) with autograd on and kept for the next step, where
get_action(state, option) turns it into logp and entropy for the actor loss; but
optim.step() has run in between, so that loss reaches the feature network's weights as they
were before the step. The maintainer's fix (commit 38728db7534ca4f8f0043d824ac3a30ddf35f2d0, "fix state
selection in pytorch") made get_action use state.data. Reproduced with the repository's
classes, actor loss and loop (the critic loss every update_frequency steps left out), a
random CartPole-sized environment and tiny sizes.
"""
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions import Bernoulli, Categorical

torch.manual_seed(0)
np.random.seed(0)


def to_tensor(obs):
    return torch.from_numpy(np.asarray(obs)).float()


class OptionCriticFeatures(nn.Module):
    def __init__(self, in_features, num_actions, num_options, temperature=1.0):
        super().__init__()
        self.num_options, self.temperature = num_options, temperature
        self.features = nn.Sequential(nn.Linear(in_features, 32), nn.ReLU(), nn.Linear(32, 64), nn.ReLU())
        self.Q = nn.Linear(64, num_options)                 # Policy-Over-Options
        self.terminations = nn.Linear(64, num_options)      # Option-Termination
        self.options_W = nn.Parameter(torch.zeros(num_options, 64, num_actions))
        self.options_b = nn.Parameter(torch.zeros(num_options, num_actions))

    def get_state(self, obs):
        if obs.ndim < 4:
            obs = obs.unsqueeze(0)
        return self.features(obs)

    def get_Q(self, state):
        return self.Q(state)

    def predict_option_termination(self, state, current_option):
        termination = self.terminations(state)[:, current_option].sigmoid()
        option_termination = Bernoulli(termination).sample()
        next_option = self.get_Q(state).argmax(dim=-1)
        return bool(option_termination.item()), next_option.item()

    def get_terminations(self, state):
        return self.terminations(state).sigmoid()

    def get_action(self, state, option):
        logits = state @ self.options_W[option] + self.options_b[option]
        action_dist = Categorical((logits / self.temperature).softmax(dim=-1))
        action = action_dist.sample()
        return action.item(), action_dist.log_prob(action), action_dist.entropy()

    def greedy_option(self, state):
        return self.get_Q(state).argmax(dim=-1).item()


def actor_loss_fn(obs, option, logp, entropy, reward, done, next_obs, model, model_prime, gamma=0.99):
    state = model.get_state(to_tensor(obs))
    next_state = model.get_state(to_tensor(next_obs))
    next_state_prime = model_prime.get_state(to_tensor(next_obs))
    option_term_prob = model.get_terminations(state)[:, option]
    next_option_term_prob = model.get_terminations(next_state)[:, option].detach()
    Q = model.get_Q(state).detach().squeeze()
    next_Q_prime = model_prime.get_Q(next_state_prime).detach().squeeze()
    gt = reward + (1 - done) * gamma * \
        ((1 - next_option_term_prob) * next_Q_prime[option] + next_option_term_prob * next_Q_prime.max(dim=-1)[0])
    termination_loss = option_term_prob * (Q[option].detach() - Q.max(dim=-1)[0].detach() + 0.01) * (1 - done)
    policy_loss = -logp * (gt.detach() - Q[option]) - 0.01 * entropy
    return termination_loss + policy_loss


obs_dim, num_actions, num_options, batch_size = 4, 2, 2, 2
option_critic = OptionCriticFeatures(obs_dim, num_actions, num_options)
option_critic_prime = OptionCriticFeatures(obs_dim, num_actions, num_options)
option_critic_prime.load_state_dict(option_critic.state_dict())
optim = optim.RMSprop(option_critic.parameters(), lr=5e-4)
buffer = deque(maxlen=100)

obs = np.random.randn(obs_dim)
state = option_critic.get_state(to_tensor(obs))
greedy_option = option_critic.greedy_option(state)
current_option = 0
done, option_termination = False, True
for steps in range(6):  # noqa: B007
    if option_termination:
        current_option = greedy_option
    action, logp, entropy = option_critic.get_action(state, current_option)

    next_obs, reward, done = np.random.randn(obs_dim), 1.0, False     # env.step(action)
    buffer.append((obs, current_option, reward, next_obs, done))

    old_state = state
    state = option_critic.get_state(to_tensor(next_obs))  # CULPRIT
    option_termination, greedy_option = option_critic.predict_option_termination(state, current_option)

    if len(buffer) > batch_size:
        actor_loss = actor_loss_fn(obs, current_option, logp, entropy, reward, done, next_obs,
                                   option_critic, option_critic_prime)
        loss = actor_loss
        optim.zero_grad()
        loss.backward()  # RAISES (the step after the first update)
        optim.step()  # CULPRIT
    obs = next_obs

# EXPECT: state or old_state
