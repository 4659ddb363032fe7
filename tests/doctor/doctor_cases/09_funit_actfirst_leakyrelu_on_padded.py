"""
Source: https://github.com/NVlabs/FUNIT/issues/23
Thread: "RuntimeError: one of the variables needed for gradient computation has been
modified by an inplace operation: [torch.cuda.FloatTensor [4, 512, 16, 16]], which is
output 0 of ConstantPadNdBackward, is"
What the user did: trained the FUNIT image-translation GAN, whose conv blocks pad their
input and, in "activation first" residual blocks, apply LeakyReLU/ReLU with inplace=True
to their input; the error named a zero-padded tensor, and a commenter fixed it by setting
inplace=False in nn.ReLU and nn.LeakyReLU. Here a padded feature map is saved by one conv
and then overwritten by an activation-first branch's in-place LeakyReLU.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

conv_in = nn.Conv2d(3, 8, 3, padding=1)
pad = nn.ZeroPad2d(1)
conv_a = nn.Conv2d(8, 8, 3)
actfirst = nn.LeakyReLU(0.2, inplace=True)
conv_b = nn.Conv2d(8, 8, 3)
params = [p for m in (conv_in, conv_a, conv_b) for p in m.parameters()]
optimizer = optim.Adam(params, lr=1e-4)

x = torch.randn(2, 3, 8, 8)
feat = conv_in(x)
h = pad(feat)            # output of ConstantPadNdBackward0
y = conv_a(h)            # conv_a saves h for its weight gradient
r = actfirst(h)  # CULPRIT
r = conv_b(r)
out = y + r
loss = out.pow(2).mean()
optimizer.zero_grad()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: h
