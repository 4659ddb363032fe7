"""
Source: https://github.com/lyongo/NWPU-MOC/issues/4
Thread: "gradient computation problems"
What the user did: ran train.py of a counting model with an FPN head and got the version
error on a [4, 128, 64, 64] tensor that is "output 0 of ReluBackward0"; switching
inplace=True to False did not help, and the fix was to replace the in-place
`laterals[i - 1] += F.interpolate(laterals[i], ...)` with an out-of-place addition.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

in_channels = [8, 16]
lateral_convs = nn.ModuleList([nn.Conv2d(c, 8, 1) for c in in_channels])
fpn_convs = nn.ModuleList([nn.Conv2d(8, 8, 3, padding=1) for _ in in_channels])
optimizer = optim.Adam(list(lateral_convs.parameters()) + list(fpn_convs.parameters()), lr=1e-4)

feats = [torch.randn(2, 8, 16, 16), torch.randn(2, 16, 8, 8)]
laterals = [F.relu(conv(f)) for conv, f in zip(lateral_convs, feats)]

for i in range(len(laterals) - 1, 0, -1):
    prev_shape = laterals[i - 1].shape[2:]
    laterals[i - 1] += F.interpolate(laterals[i], size=prev_shape, mode="nearest")  # CULPRIT

outs = [conv(l) for conv, l in zip(fpn_convs, laterals)]
loss = sum(o.mean() for o in outs)
optimizer.zero_grad()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: laterals[0]
