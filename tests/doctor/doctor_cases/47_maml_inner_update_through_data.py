"""
Source: https://github.com/KanishJebaMathewM/Truxify/issues/13118
Thread: "MAML inner-loop `param.data -=` detaches the graph — the meta-model never trains"
What the user did: adapted a copy of the meta-model to each task with a gradient taken with create_graph=True, but
wrote the adapted weights through `.data` (`param.data -= inner_lr * grad`). Autograd does not see a write through
.data, so the query loss has no path back to the meta-model's parameters: meta_loss.backward() leaves their .grad
None, and the meta-optimizer's step changes nothing, silently. Outside GAN training: meta-learning (MAML).
"""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
meta_optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
inner_lr = 0.01


def inner_update(model, support_x, support_y):
    adapted_model = copy.deepcopy(model)
    loss = F.mse_loss(adapted_model(support_x), support_y)
    grads = torch.autograd.grad(loss, adapted_model.parameters(), create_graph=True)
    for param, grad in zip(adapted_model.parameters(), grads):
        param.data -= inner_lr * grad  # CULPRIT
    return adapted_model


for step in range(2):
    meta_loss = 0.0
    for task in range(3):
        support_x, query_x = torch.randn(8, 4), torch.randn(8, 4)
        support_y, query_y = support_x.sum(1, keepdim=True), query_x.sum(1, keepdim=True)
        adapted_model = inner_update(model, support_x, support_y)
        meta_loss = meta_loss + F.mse_loss(adapted_model(query_x), query_y)
    meta_optimizer.zero_grad()
    meta_loss.backward()
    meta_optimizer.step()  # CULPRIT

# SILENT
# EXPECT: model.0.weight or model.2.weight or model.0.bias
