"""Lesson 01's exercises: a manual SGD step on leaves (check_sgd_step), and DCGAN's weight initialisation
without the leaf error (check_init)."""
import math

import torch
from torch import nn, optim

from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, data_reads, raised, unanswered, verdict
from gan_lessons.models import Reshape


# --- lesson 01: a manual SGD step on leaves ------------------------------------------------------------------
def _sgd_problem():
    torch.manual_seed(1)
    w = torch.randn(3, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    x, target = torch.randn(5, 3), torch.randn(5)

    def loss():
        return ((x @ w + b - target) ** 2).mean()
    return [w, b], loss


def check_sgd_step(sgd_step, lr=0.1) -> bool:
    """Lesson 01. sgd_step(params, lr) must update each leaf in place by lr * p.grad, keep it a leaf that
    requires grad, and clear .grad (None or zeros) so the next backward starts fresh."""
    name = "sgd_step"
    if unanswered(name, sgd_step, "your sgd_step"):
        return False
    params, loss = _sgd_problem()
    ref_params, ref_loss = _sgd_problem()
    ref_opt = optim.SGD(ref_params, lr=lr)
    names = ["w", "b"]
    problems = []
    for step in (1, 2):
        before = [p.detach().clone() for p in params]
        loss().backward()
        ref_opt.zero_grad()
        ref_loss().backward()
        ref_opt.step()
        try:
            with data_reads() as reads:
                sgd_step(params, lr)
        except Exception as error:
            problems.append(raised("sgd_step", error, AUTOGRAD_HINTS))
            break
        if reads.count:
            problems.append("your step reads `.data` of a parameter: it runs, but `.data` hides the change from "
                            "autograd's version counter, so a graph that saved the parameter gives a silently "
                            "wrong gradient (lesson 03). Update under `with torch.no_grad():` instead")
            break
        for n, p, ref, old in zip(names, params, ref_params, before):
            if not p.is_leaf:
                problems.append(f"{n} is no longer a leaf (grad_fn {type(p.grad_fn).__name__}): the update was "
                                f"recorded; run it under torch.no_grad()")
            elif not p.requires_grad:
                problems.append(f"{n} no longer requires grad: leave requires_grad alone and update under "
                                f"torch.no_grad() instead")
            elif torch.equal(p.detach(), old):
                problems.append(f"{n} did not change at step {step}: `p = p - lr * p.grad` makes a new tensor and "
                                f"leaves the parameter as it was; update it in place (p -= ...)")
            elif not torch.allclose(p.detach(), ref.detach(), atol=1e-6):
                why = ("its .grad still held step 1's gradient, and backward() adds to it: clear .grad after the "
                       "update" if step == 2 else "the update is p - lr * p.grad")
                problems.append(f"{n} after step {step} is {p.detach().tolist()}, expected {ref.detach().tolist()}: "
                                f"{why}")
            elif p.grad is not None and p.grad.abs().sum() > 0:
                problems.append(f"{n}.grad still holds the gradient after your step: set it to None (what "
                                f"opt.zero_grad() does), or the next backward adds to it")
        if problems:
            break
    return verdict(name, problems, "two steps give SGD's values, the parameters are still leaves that require "
                                    "grad, and .grad is cleared after each update")



# --- lesson 01: DCGAN's weight initialisation, without the leaf error ----------------------------------------
def _init_model():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(64, 256), nn.BatchNorm1d(256), nn.ReLU(), Reshape(16, 4, 4),
                         nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 1, 3, 1, 1))


INIT_KINDS = (nn.Linear, nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm1d, nn.BatchNorm2d)
SIGMAS = 5  # a right init fails a module's test about once in 3.5 million draws


def _drawn_from(w, mean, std=0.02):
    """Whether the values of w could come from N(mean, std): its mean and standard deviation within 5 standard
    errors of the target's, so a correct init passes however few elements the tensor has (BatchNorm2d(8) has 8)."""
    n = w.numel()
    mean_ok = abs(w.mean().item() - mean) <= SIGMAS * std / math.sqrt(n)
    spread = SIGMAS * std / math.sqrt(2 * (n - 1))          # the standard error of a sample's std
    return mean_ok and std - spread <= w.std().item() <= std + spread


def _init_problems(model):
    """What is wrong with model's values after init: DCGAN's N(0, 0.02) weights for Linear and convolutions,
    N(1, 0.02) for BatchNorm's weight, zeros for every bias."""
    problems = []
    for n, m in model.named_modules():
        if isinstance(m, INIT_KINDS):
            kind = type(m).__name__
            mean = 1.0 if kind.startswith("BatchNorm") else 0.0
            w = m.weight.detach()
            if not _drawn_from(w, mean):
                problems.append(f"{kind} {n}: weight has mean {w.mean().item():.3f} and std {w.std().item():.3f}; "
                                f"it should be drawn from N({mean:g}, 0.02)")
            if m.bias is not None and m.bias.detach().abs().max() > 0:
                problems.append(f"{kind} {n}: bias is not zero; fill it with zeros")
    return problems


def check_init(init_weights) -> bool:
    """Lesson 01. model.apply(init_weights) must set DCGAN's initial values in place, and leave every parameter
    the same leaf that requires grad, so the optimizer built afterwards still trains it."""
    name = "init_weights"
    if unanswered(name, init_weights, "your init_weights"):
        return False
    model = _init_model()
    before = {n: p for n, p in model.named_parameters()}
    values = {n: p.detach().clone() for n, p in model.named_parameters()}
    try:
        model.apply(init_weights)
    except Exception as error:
        return verdict(name, [raised("init_weights", error, AUTOGRAD_HINTS + [
            ("'NoneType' object has no attribute", "a layer built with bias=False (model[4], a ConvTranspose2d, "
             "as DCGAN's are) has m.bias None: touch the bias only `if m.bias is not None`")])], "")
    problems = []
    for n, p in model.named_parameters():
        if p is not before[n]:
            problems.append(f"parameter {n} was replaced by a new tensor; an optimizer made before init would "
                            f"still hold the old one: change the values in place")
        elif not (p.is_leaf and p.requires_grad):
            problems.append(f"parameter {n} is no longer a leaf that requires grad: change it under torch.no_grad()")
    if not problems and all(torch.equal(p.detach(), values[n]) for n, p in model.named_parameters()):
        problems.append("init_weights changed nothing: model.apply(init_weights) calls it once per module m; set "
                        "m.weight and m.bias of the Linear, convolution and BatchNorm modules")
    if problems:
        return verdict(name, problems[:4], "")
    problems = _init_problems(model)
    if not problems:
        model(torch.randn(4, 64)).mean().backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None]
        if missing:
            problems.append(f"after init, backward no longer reaches {missing[0]}")
    return verdict(name, problems[:6], "DCGAN's values set in place; every parameter is still the same leaf, "
                                        "requires grad and gets a gradient")
