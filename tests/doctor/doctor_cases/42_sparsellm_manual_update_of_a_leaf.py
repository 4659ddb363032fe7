"""
Source: https://github.com/BaiTheBest/SparseLLM/issues/13
Thread: "How to fix this problem?"
What the user did: pruning a language model layer by layer, optimised an auxiliary tensor of the method by hand:
`loss_s.backward()`, then `s_batch -= s_learning_rate * s_batch.grad`. The tensor is a leaf that requires grad,
and an in-place update of it while autograd records is refused: "a leaf Variable that requires grad is being used
in an in-place operation". The maintainer's fix writes it out of place; an optimizer's step, or torch.no_grad(),
is the usual way. Outside GAN training: sparsification and post-training compression of language models.
"""
import torch

torch.manual_seed(0)
weight = torch.randn(16, 32)
inputs = torch.randn(64, 32)
target = inputs @ weight.t()
s = torch.zeros(64, 16)
s_learning_rate = 0.05

for chunk in torch.arange(64).split(32):
    s_batch = s[chunk].clone().requires_grad_(True)
    loss_s = (s_batch - target[chunk]).pow(2).mean()
    loss_s.backward()
    s_batch -= s_learning_rate * s_batch.grad  # CULPRIT RAISES
    s_batch.grad.zero_()
    s[chunk] = s_batch.detach()

# EXPECT: s_batch
