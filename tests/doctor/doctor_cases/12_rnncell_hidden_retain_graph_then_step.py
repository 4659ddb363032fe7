"""
Source: https://github.com/vikrant7/mobile-vod-bottleneck-lstm/issues/25
Thread: "Runtime error of inplace operation"
What the user did: trained a recurrent (bottleneck-LSTM) video detector and hit the
inplace-operation error; a later commenter traced it to the hidden/cell states not being
detached between iterations, so the next iteration's backward reaches into the previous
iteration's graph whose recurrent weights the optimizer has since updated.
Here retain_graph=True (a common attempt to silence the "backward twice" error) keeps the
old graph alive, so the failure shows up as a version error on the recurrent weight.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

cell = nn.RNNCell(4, 8)
head = nn.Linear(8, 1)
optimizer = optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.1)

h = torch.zeros(2, 8)
for it in range(2):
    x = torch.randn(3, 2, 4)        # (seq, batch, feat)
    y = torch.randn(2, 1)
    for t in range(x.size(0)):
        h = cell(x[t], h)           # h is carried across iterations without detach
    loss = F.mse_loss(head(h), y)
    optimizer.zero_grad()
    loss.backward(retain_graph=True)  # RAISES (second iteration)
    optimizer.step()  # CULPRIT (first iteration)

# EXPECT: cell.weight_hh
