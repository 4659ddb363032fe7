"""
Source: https://github.com/facebookresearch/DomainBed/issues/50
Thread: "IGA implementation"
What the user saw: DomainBed's IGA (Inter-environmental Gradient Alignment) algorithm, in
domainbed/algorithms.py at
https://github.com/facebookresearch/DomainBed/blob/54c2f8c614a96067dee2d961f0b34575753c9df0/domainbed/algorithms.py#L986,
takes each environment's gradient and the mean gradient with
autograd.grad(loss, self.network.parameters(), retain_graph=True), without create_graph, and
adds the penalty sum((g - mean_g)^2) to the loss; so "the penalty_value is useless in the
training" (backward on the penalty alone raises "element 0 of tensors does not require grad",
and the 'penalty' hyperparameter has no effect). Fixed by
https://github.com/facebookresearch/DomainBed/pull/51 ("create_graph patch to IGA").
Reproduced with the algorithm's update() (ERM's featurizer + classifier network, Adam,
penalty 1000 as in hparams_registry.py), a tiny MLP and three environments.
Silent: no error. Measured (same seed, against the same update with the penalty term removed):
the penalty changes no gradient (max |difference| 0.0 over every parameter's .grad) although
penalty_value is 0.66 (times 1000 in the loss); with create_graph=True in both calls the
gradients differ from the no-penalty ones by up to 4.2e+2.
"""
import torch
import torch.autograd as autograd
import torch.nn as nn
import torch.nn.functional as F

# SILENT

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self, n_inputs, n_outputs, mlp_width=16, mlp_depth=3):
        super().__init__()
        self.input = nn.Linear(n_inputs, mlp_width)
        self.hiddens = nn.ModuleList([nn.Linear(mlp_width, mlp_width) for _ in range(mlp_depth - 2)])
        self.output = nn.Linear(mlp_width, n_outputs)
        self.n_outputs = n_outputs

    def forward(self, x):
        x = F.relu(self.input(x))
        for hidden in self.hiddens:
            x = F.relu(hidden(x))
        return self.output(x)


class IGA(nn.Module):
    """Inter-environmental Gradient Alignment, From https://arxiv.org/abs/2008.01883v2"""

    def __init__(self, in_features, num_classes, num_domains, hparams):
        super().__init__()
        self.hparams = hparams
        self.featurizer = MLP(in_features, 8)
        self.classifier = nn.Linear(self.featurizer.n_outputs, num_classes)
        self.network = nn.Sequential(self.featurizer, self.classifier)
        self.optimizer = torch.optim.Adam(self.network.parameters(), lr=hparams["lr"],
                                          weight_decay=hparams['weight_decay'])

    def update(self, minibatches, unlabeled=False):
        all_x = torch.cat([x for x, y in minibatches])
        all_logits = self.network(all_x)

        total_loss = 0
        all_logits_idx = 0
        grads = []
        for i, (x, y) in enumerate(minibatches):  # noqa: B007
            logits = all_logits[all_logits_idx:all_logits_idx + x.shape[0]]
            all_logits_idx += x.shape[0]

            env_loss = F.cross_entropy(logits, y)
            total_loss += env_loss

            grads.append(autograd.grad(env_loss, self.network.parameters(), retain_graph=True))  # CULPRIT

        mean_loss = total_loss / len(minibatches)
        mean_grad = autograd.grad(mean_loss, self.network.parameters(), retain_graph=True)  # CULPRIT

        # compute trace penalty
        penalty_value = 0
        for grad in grads:
            for g, mean_g in zip(grad, mean_grad):
                penalty_value += (g - mean_g).pow(2).sum()

        self.optimizer.zero_grad()
        (mean_loss + self.hparams['penalty'] * penalty_value).backward()
        self.optimizer.step()

        return {'loss': mean_loss.item(), 'penalty': penalty_value.item()}


hparams = {'lr': 1e-3, 'weight_decay': 0.0, 'penalty': 1000}
algorithm = IGA(6, 3, 3, hparams)
minibatches = [(torch.randn(4, 6), torch.randint(0, 3, (4,))) for _ in range(3)]
step_vals = algorithm.update(minibatches)

# EXPECT: grads or mean_grad
