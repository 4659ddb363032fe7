"""Lesson 02's exercise: seed 004's loop, fixed (check_seed004_step)."""
import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, compare_steps, raised, recorded_steps, unanswered, verdict


def _seed004_models():
    torch.manual_seed(0)
    model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
    optimizer1 = optim.Adam(model1.parameters(), lr=0.001, betas=(0.5, 0.999))
    optimizer2 = optim.Adam(model2.parameters(), lr=0.001, betas=(0.5, 0.999))
    data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
    return model1, model2, optimizer1, optimizer2, data, label


def reference_seed004_step(model1, model2, optimizer1, optimizer2, data, label):
    """One step of seed 004's loop with the detach fix (lesson 02)."""
    a = model1(data)
    b = model2(a.detach())
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    optimizer2.zero_grad()
    l2.backward()
    optimizer2.step()
    optimizer1.zero_grad()
    l1.backward()
    optimizer1.step()


def _run_seed004(step, calls):
    model1, model2, optimizer1, optimizer2, data, label = _seed004_models()
    names = {p: f"model1.{n}" for n, p in model1.named_parameters()}
    names.update({p: f"model2.{n}" for n, p in model2.named_parameters()})
    with recorded_steps({"optimizer1": optimizer1, "optimizer2": optimizer2}, names) as records:
        for _ in range(calls):
            step(model1, model2, optimizer1, optimizer2, data, label)
    return records


def check_seed004_step(fixed_step, calls=3) -> bool:
    """Lesson 02. fixed_step(model1, model2, optimizer1, optimizer2, data, label): one step of seed 004's loop that
    runs, and gives every parameter, at its optimizer's step, the gradient the loop means: l1's for model1, l2's
    for model2."""
    name = "fixed_step"
    if unanswered(name, fixed_step, "your fixed_step"):
        return False
    reference = _run_seed004(reference_seed004_step, calls)
    try:
        mine = _run_seed004(fixed_step, calls)
    except Exception as error:
        return verdict(name, [raised("fixed_step", error, AUTOGRAD_HINTS)], "")
    return verdict(name, compare_steps(mine, reference, "zero_grad() right before each backward; l1 alone "
                                                          "must train model1, and l2 alone model2"),
                    f"it runs, and all 4 parameters get the right gradient at every optimizer step ({calls} steps)")
