"""
Source: https://github.com/ultralytics/ultralytics/pull/25315
Thread: "Faster `ModelEMA` update with batched `_foreach_lerp_`" (the review asks whether the fused update, fed tensors
that still take part in autograd, could cause in-place and autograd failures afterwards).
What this reproduces: a mean-teacher consistency loss (semi-supervised learning, self-distillation), where the teacher
is a deepcopy of the student whose parameters still require grad, so its forward records a graph that saves its
weights; the EMA update, written the fast way as one `torch._foreach_lerp_` over every teacher parameter, runs after
the forward and before the backward. The write goes through no Python-level in-place method of any one tensor.
Outside GAN training: mean teachers, BYOL/DINO-style targets, EMA models in detection.
"""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
student = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
teacher = copy.deepcopy(student)        # its parameters still require grad
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)


def update_teacher(decay=0.99):
    with torch.no_grad():
        torch._foreach_lerp_(list(teacher.parameters()), list(student.parameters()), 1 - decay)  # CULPRIT


for step in range(2):
    x = torch.randn(32, 8)
    target = teacher(x).softmax(-1)
    loss = F.kl_div(student(x).log_softmax(-1), target, reduction="batchmean")
    optimizer.zero_grad()
    update_teacher()  # CULPRIT
    loss.backward()  # RAISES
    optimizer.step()

# EXPECT: teacher.2.weight or teacher.0.weight
