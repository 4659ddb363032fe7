"""
Source: https://github.com/sniklaus/softmax-splatting/issues/50
Thread: "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation"
What the user did: used a custom autograd.Function (forward warping of feature maps by optical flow) that saves its
inputs with save_for_backward, in a frame-interpolation network whose next layer changes the same feature map in
place. The Function's backward then finds its saved input changed; the user's fix was to save clones, the
maintainer asked which layers come before and after. Outside GAN training: video frame interpolation.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Splat(torch.autograd.Function):
    """Forward warping reduced to its autograd shape: it saves both inputs for its backward."""

    @staticmethod
    def forward(ctx, tenIn, tenFlow):
        ctx.save_for_backward(tenIn, tenFlow)
        return tenIn * torch.sigmoid(tenFlow.sum(1, keepdim=True))

    @staticmethod
    def backward(ctx, grad):
        tenIn, tenFlow = ctx.saved_tensors
        gate = torch.sigmoid(tenFlow.sum(1, keepdim=True))
        grad_flow = (grad * tenIn * gate * (1 - gate)).sum(1, keepdim=True).expand_as(tenFlow)
        return grad * gate, grad_flow


class Synthesis(nn.Module):
    def __init__(self):
        super().__init__()
        self.encode = nn.Conv2d(3, 8, 3, padding=1)
        self.decode = nn.Conv2d(16, 3, 3, padding=1)

    def forward(self, frame, flow):
        features = self.encode(frame)
        warped = Splat.apply(features, flow)
        features = F.leaky_relu(features, 0.1, inplace=True)  # CULPRIT
        return self.decode(torch.cat([warped, features], 1))


model = Synthesis()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
frame, flow, target = torch.rand(2, 3, 8, 8), torch.randn(2, 2, 8, 8, requires_grad=True), torch.rand(2, 3, 8, 8)
loss = F.l1_loss(model(frame, flow), target)
optimizer.zero_grad()
loss.backward()  # RAISES
optimizer.step()

# EXPECT: features or model.encode
