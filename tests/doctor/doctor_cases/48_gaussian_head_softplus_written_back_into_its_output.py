"""
Source: https://github.com/pytorch/pytorch/issues/114505
Thread: "An inplace operation involved in torch.nn.functional.softplus"
What the user did: wrote the result of an activation on one column of a tensor back into another column of that
same tensor by index assignment. The activation had saved the column it read, and an assignment into any part of a
tensor moves the one version counter the whole storage shares, so the backward refused the saved column (the
maintainer's answer: autograd has a single version counter per storage, whichever region was written). Outside GAN
training: a regression head that predicts a mean and a positive scale in one output, the shape of a Gaussian
negative log-likelihood model.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(5, 32), nn.Tanh(), nn.Linear(32, 2))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
x, y = torch.randn(64, 5), torch.randn(64)

params = net(x)
params[:, 1] = F.softplus(params[:, 1]) + 1e-3  # CULPRIT
mean, scale = params[:, 0], params[:, 1]
loss = F.gaussian_nll_loss(mean, y, scale ** 2)
optimizer.zero_grad()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: params
