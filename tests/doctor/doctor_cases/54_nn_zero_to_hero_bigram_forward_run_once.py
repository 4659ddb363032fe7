"""
Source: https://github.com/karpathy/nn-zero-to-hero/issues/31
Thread: "RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after
they have already been freed)..."
What the reporter did: trained the makemore (part 1) bigram net by hand, in notebook cells: a forward pass
(`logits = (xenc @ W)`, counts, prob, loss), then a backward pass and the update `W.data += -0.1 * W.grad`, and got
the error at `loss.backward()`. It comes when the backward and update are run again on the same `loss` without the
forward being run again: the first backward freed that graph, and the loss would be stale anyway, since the update
changed W. The fix: compute logits, counts, prob and loss again before every backward (here the cell that ran once
is the code before the loop). Outside GAN training: a character-level bigram model trained by hand.
"""
import torch
import torch.nn.functional as F

g = torch.Generator().manual_seed(2147483647)
xs = torch.tensor([0, 5, 13, 13, 1])
ys = torch.tensor([5, 13, 13, 1, 0])
W = torch.randn((27, 27), generator=g, requires_grad=True)
xenc = F.one_hot(xs, num_classes=27).float()

# forward pass, run once
logits = (xenc @ W)
counts = logits.exp()
prob = counts / counts.sum(1, keepdim=True)
loss = -prob[torch.arange(5), ys].log().mean()

for k in range(3):
    # backward pass
    W.grad = None
    loss.backward()  # CULPRIT (k = 0) # RAISES (k = 1)
    # update
    W.data += -0.1 * W.grad

# EXPECT: loss
