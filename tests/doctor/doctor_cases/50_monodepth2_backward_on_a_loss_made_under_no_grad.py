"""
Source: https://github.com/nianticlabs/monodepth2/issues/24
Thread: "Element 0 of tensors does not require grad and does not have a grad_fn"
What the user did: changed the training code of a self-supervised depth model so that a loss computed in its
validation routine is backpropagated. That routine runs the model inside torch.no_grad() (the maintainers: it is
there to save memory during validation, and it also catches bugs like this one), so the loss has no graph and
backward() refuses it. Outside GAN training: monocular depth estimation.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Trainer:
    def __init__(self):
        self.depth = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))
        self.optimizer = torch.optim.Adam(self.depth.parameters(), lr=1e-4)

    def process_batch(self, inputs):
        disp = torch.sigmoid(self.depth(inputs["color"]))
        return {"disp": disp}, {"loss": F.l1_loss(disp, inputs["target"])}

    def val(self, inputs):
        self.depth.eval()
        with torch.no_grad():
            outputs, losses = self.process_batch(inputs)  # CULPRIT
        self.depth.train()
        return losses

    def train_on(self, inputs):
        losses = self.val(inputs)          # the change: the validation losses, reused for a step
        self.optimizer.zero_grad()
        losses["loss"].backward()  # RAISES
        self.optimizer.step()


trainer = Trainer()
trainer.train_on({"color": torch.rand(2, 3, 8, 8), "target": torch.rand(2, 1, 8, 8)})

# EXPECT: trainer.depth or depth
