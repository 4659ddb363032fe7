"""
Source: https://github.com/f-dangel/singd/issues/56
Thread: "Bug: Full backward hook incompatible with in-place activations"
What the user did: an optimizer that reads each layer's input and output gradients (SINGD; K-FAC, BackPACK and
Grad-CAM do the same) registered a full backward hook on every module of a model with ReLU(inplace=True). A full
backward hook wraps the module's inputs and outputs in a BackwardHookFunction, so the in-place ReLU writes into the
wrapper's output and the forward raises "Output 0 of BackwardHookFunctionBackward is a view and is being modified
inplace" (pytorch/pytorch#61519; jacobgil/pytorch-grad-cam#183 is the same with Grad-CAM). Outside GAN training:
second-order optimizers and attribution tools built on module hooks.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class KroneckerStats:
    """Keeps each layer's output gradients, as a K-FAC-style optimizer does."""

    def __init__(self, model):
        self.grads = {}
        for name, module in model.named_modules():
            if name:
                module.register_full_backward_hook(self.keep(name))

    def keep(self, name):
        def hook(module, grad_input, grad_output):  # CULPRIT
            self.grads[name] = grad_output[0].detach()
        return hook


model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(inplace=True), nn.Conv2d(4, 2, 3), nn.Flatten(),
                      nn.Linear(2, 1))
stats = KroneckerStats(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.rand(2, 1, 5, 5)
output = model(x)  # RAISES
loss = output.pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()

# EXPECT: model.1
