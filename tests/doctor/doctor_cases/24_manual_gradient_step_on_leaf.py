"""
Source: https://github.com/BaiTheBest/SparseLLM/issues/13
Thread: "How to fix this problem?"
What the user did: optimized an auxiliary tensor by hand -- loss.backward(), then
`s_batch -= lr * s_batch.grad` on a leaf tensor created with requires_grad=True, outside
torch.no_grad() -- and got "a leaf Variable that requires grad is being used in an
in-place operation"; the maintainer suggested an out-of-place update.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

W = torch.randn(8, 8)
target = torch.randn(4, 8)
s_batch = torch.randn(4, 8, requires_grad=True)
s_learning_rate = 0.1

for it in range(3):
    loss_s = F.mse_loss(s_batch @ W, target)
    loss_s.backward()
    s_batch -= s_learning_rate * s_batch.grad  # CULPRIT # RAISES
    s_batch.grad.zero_()

# EXPECT: s_batch
