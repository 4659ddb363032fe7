"""
Source: https://github.com/yihaosun1124/OfflineRL-Kit/issues/15
Thread: "[Question]: Why critic1's update needs retain_graph=True in combo.py?"
What the reporter found: in the COMBO policy (offline model-based RL), removing `retain_graph=True` from
critic1's backward makes critic2's backward fail with the "backward through the graph a second time" error, and
they asked what tensor the two critics' losses share. It is the actor's sample: the conservative term's
`calc_pi_values` draws `act` from the actor with rsample (so it carries a graph into the actor) and feeds that one
`act` to critic1 and to critic2. critic1_loss.backward() runs through the actor part and frees it, and
critic2_loss needs it. The conservative loss is meant to train the critics only, so the actions can be sampled
without a graph (`act.detach()`, or no_grad inside calc_pi_values); the repository's retain_graph=True also runs, and
leaves unused gradients in the actor's .grad. Outside GAN training: offline reinforcement learning with twin
critics and a conservative (CQL-style) penalty.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Actor(nn.Module):
    def __init__(self, obs_dim=3, act_dim=2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 16), nn.ReLU(), nn.Linear(16, 2 * act_dim))

    def forward(self, obs):
        mu, log_std = self.net(obs).chunk(2, -1)
        return torch.distributions.Normal(mu, log_std.clamp(-5, 2).exp())


class Critic(nn.Module):
    def __init__(self, obs_dim=3, act_dim=2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + act_dim, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, obs, act):
        return self.net(torch.cat([obs, act], -1))


class COMBOPolicy:
    def __init__(self):
        self.actor, self.critic1, self.critic2 = Actor(), Critic(), Critic()
        self.actor_optim = torch.optim.Adam(self.actor.parameters(), 3e-4)
        self.critic1_optim = torch.optim.Adam(self.critic1.parameters(), 3e-4)
        self.critic2_optim = torch.optim.Adam(self.critic2.parameters(), 3e-4)
        self._alpha, self._gamma, self._num_repeat_actions = 0.2, 0.99, 2
        self._temperature, self._cql_weight = 1.0, 1.0

    def actforward(self, obs):
        dist = self.actor(obs)
        raw_action = dist.rsample()
        squashed_action = torch.tanh(raw_action)
        log_prob = dist.log_prob(raw_action).sum(-1, keepdim=True)
        return squashed_action, log_prob

    def calc_pi_values(self, obs_pi, obs_to_pred):
        act, log_prob = self.actforward(obs_pi)
        q1 = self.critic1(obs_to_pred, act)
        q2 = self.critic2(obs_to_pred, act)
        return q1 - log_prob.detach(), q2 - log_prob.detach()

    def calc_random_values(self, obs, random_act):
        q1, q2 = self.critic1(obs, random_act), self.critic2(obs, random_act)
        log_prob = torch.log(torch.tensor(0.5 ** random_act.shape[-1]))
        return q1 - log_prob, q2 - log_prob

    def learn(self, obss, actions, next_obss, rewards, terminals):
        batch_size = obss.shape[0]
        # actor update
        a, log_probs = self.actforward(obss)
        q1a, q2a = self.critic1(obss, a), self.critic2(obss, a)
        actor_loss = (self._alpha * log_probs - torch.min(q1a, q2a)).mean()
        self.actor_optim.zero_grad()
        actor_loss.backward()
        self.actor_optim.step()
        # TD targets
        with torch.no_grad():
            next_actions, next_log_probs = self.actforward(next_obss)
            next_q = torch.min(self.critic1(next_obss, next_actions), self.critic2(next_obss, next_actions))
        target_q = rewards + self._gamma * (1 - terminals) * next_q
        q1, q2 = self.critic1(obss, actions), self.critic2(obss, actions)
        critic1_loss = ((q1 - target_q).pow(2)).mean()
        critic2_loss = ((q2 - target_q).pow(2)).mean()
        # conservative penalty
        random_actions = torch.FloatTensor(batch_size * self._num_repeat_actions, actions.shape[-1]).uniform_(-1, 1)
        tmp_obss = obss.unsqueeze(1).repeat(1, self._num_repeat_actions, 1).view(-1, obss.shape[-1])
        tmp_next_obss = next_obss.unsqueeze(1).repeat(1, self._num_repeat_actions, 1).view(-1, obss.shape[-1])
        obs_pi_value1, obs_pi_value2 = self.calc_pi_values(tmp_obss, tmp_obss)
        next_obs_pi_value1, next_obs_pi_value2 = self.calc_pi_values(tmp_next_obss, tmp_obss)
        random_value1, random_value2 = self.calc_random_values(tmp_obss, random_actions)
        cat_q1 = torch.cat([obs_pi_value1, next_obs_pi_value1, random_value1], 1)
        cat_q2 = torch.cat([obs_pi_value2, next_obs_pi_value2, random_value2], 1)
        q1, q2 = self.critic1(obss, actions), self.critic2(obss, actions)
        conservative_loss1 = torch.logsumexp(cat_q1 / self._temperature, dim=1).mean() * self._cql_weight * \
            self._temperature - q1.mean() * self._cql_weight
        conservative_loss2 = torch.logsumexp(cat_q2 / self._temperature, dim=1).mean() * self._cql_weight * \
            self._temperature - q2.mean() * self._cql_weight
        critic1_loss = critic1_loss + conservative_loss1
        critic2_loss = critic2_loss + conservative_loss2
        # critic updates
        self.critic1_optim.zero_grad()
        critic1_loss.backward()  # CULPRIT (the repository passes retain_graph=True here)
        self.critic1_optim.step()
        self.critic2_optim.zero_grad()
        critic2_loss.backward()  # RAISES
        self.critic2_optim.step()


policy = COMBOPolicy()
for _ in range(2):
    obss, next_obss = torch.randn(4, 3), torch.randn(4, 3)
    actions = torch.rand(4, 2) * 2 - 1
    policy.learn(obss, actions, next_obss, torch.randn(4, 1), torch.zeros(4, 1))

# EXPECT: act or squashed_action or raw_action
