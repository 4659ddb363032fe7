"""
Source: https://github.com/davda54/sam/issues/45
Thread: "RuntimeError: Trying to backward through the graph a second time, but the saved intermediate results have
already been freed. Specify retain_graph=True when calling backward the first time."
What the reporter found: with the SAM optimizer (sharpness-aware minimization), each step needs two forward and
backward passes: one at the weights w, then `first_step` moves the weights to w + e(w), and a second one there. The
reporter ran the model once, `output = model(images)`, and built the second loss from that same `output`; the first
pass's backward had already freed its graph, although the line they copied from the README carries the comment
"make sure to do a full forward pass". The fix: `criterion(model(images), target).backward()`. Keeping the graph with
retain_graph=True would not be one: the second gradient must be taken at w + e(w), and `first_step` changes the
weights that graph saved.
Outside GAN training: image classification with a two-pass optimizer.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        defaults = dict(rho=rho, **kwargs)
        super().__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = torch.norm(torch.stack([p.grad.norm(p=2) for g in self.param_groups for p in g["params"]
                                            if p.grad is not None]), p=2)
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.data.clone()
                e_w = p.grad * scale.to(p)
                p.add_(e_w)                        # to w + e(w)
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.data = self.state[p]["old_p"]    # back to w
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()


model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
criterion = nn.CrossEntropyLoss()
optimizer = SAM(model.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)

for i in range(2):
    images, target = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    output = model(images)
    # first pass, at w
    loss = criterion(output, target)
    loss.backward()  # CULPRIT
    optimizer.first_step(zero_grad=True)

    # second pass, meant to be at w + e(w)
    criterion(output, target).backward()  # RAISES
    optimizer.second_step(zero_grad=True)

# EXPECT: output
