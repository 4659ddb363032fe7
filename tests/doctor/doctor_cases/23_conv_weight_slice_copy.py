"""
Source: https://github.com/PingoLH/FCHarDNet/issues/61
Thread: "RuntimeError: a view of a leaf Variable that requires grad is being used in an
in-place operation- Using own dataset"
What the user did: ran the repo's test script, which folds BatchNorm statistics into a
convolution by writing new values into the conv's weight through a full slice
(cconv.weight[:, :, :, :] = W[...]) without torch.no_grad(); PyTorch rejects the in-place
write into a view of a parameter.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
bn = nn.BatchNorm2d(8).eval()
bn.running_mean.uniform_(-0.1, 0.1)
bn.running_var.uniform_(0.5, 1.5)

# fold BN into a fresh conv
cconv = nn.Conv2d(3, 8, 3, padding=1, bias=True)
scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
W = conv.weight * scale.view(-1, 1, 1, 1)
b = bn.bias - bn.running_mean * scale
cconv.weight[:, :, :, :] = W[:, :, :, :]  # CULPRIT # RAISES
cconv.bias[:] = b

# EXPECT: cconv.weight
