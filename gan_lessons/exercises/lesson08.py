"""Lesson 08's exercises: WGAN-GP's gradient penalty (check_gradient_penalty) and a lazy R1 term
(check_lazy_r1)."""
import torch
from torch import nn

from gan_lessons.exercises.feedback import raised, unanswered, verdict
from gan_lessons.models import Reshape


_GP_HINTS = [
    ("One of the differentiated Tensors does not require grad",
     "the interpolates must be a leaf that requires grad: x_hat = (...).detach().requires_grad_(True)"),
    ("grad can be implicitly created only for scalar outputs",
     "D gives one score per image: pass grad_outputs=torch.ones_like(scores) to torch.autograd.grad"),
    ("backward through the graph a second time",
     "create_graph=True keeps the graph; a retain_graph=False beside it frees D's graph too early"),
    ("does not require grad and does not have a grad_fn",
     "a penalty built from a gradient taken without create_graph=True is a constant: nothing can backpropagate "
     "through it"),
]


def _critic():
    """A small critic (no BatchNorm: a per-sample penalty needs per-sample scores), a G, and one batch."""
    torch.manual_seed(8)
    D = nn.Sequential(nn.Linear(6, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), Reshape())
    G = nn.Linear(3, 6)
    x_real, x_fake = torch.randn(5, 6), G(torch.randn(5, 3))        # x_fake still carries G's graph
    return D, G, x_real, x_fake


def _penalty_problems(penalty, reference, D, G):
    """What is wrong with a penalty the student computed, compared with the reference on the same input."""
    if not isinstance(penalty, torch.Tensor) or penalty.numel() != 1:
        return [f"your function returned {type(penalty).__name__}"
                f"{'' if not isinstance(penalty, torch.Tensor) else ' of shape ' + str(tuple(penalty.shape))}: return "
                f"one number, the penalty averaged over the batch (a 0-dim tensor)"]
    if not penalty.requires_grad:
        return ["the penalty is a constant (requires_grad=False): it trains nothing, and nothing tells you. The "
                "gradient inside it was taken without create_graph=True"]
    if not torch.allclose(penalty.detach(), reference.detach(), rtol=1e-4, atol=1e-6):
        return [f"the penalty is {penalty.item():.5f}, the right one {reference.item():.5f}: check the per-image "
                f"gradient norm over all pixels, minus the target, squared, then the batch mean"]
    problems = []
    if any(p.grad is not None for p in G.parameters()) or torch.autograd.grad(
            penalty, list(G.parameters()), retain_graph=True, allow_unused=True)[0] is not None:
        problems.append("the penalty reaches G's parameters: the fake batch must be detached (a critic's penalty "
                        "trains the critic only)")
    mine = torch.autograd.grad(penalty, list(D.parameters()), allow_unused=True)
    right = torch.autograd.grad(reference, list(D.parameters()), allow_unused=True)
    for (pname, _), g, r in zip(D.named_parameters(), mine, right):
        if (g is None) != (r is None) or (g is not None and not torch.allclose(g, r, rtol=1e-4, atol=1e-6)):
            problems.append(f"D's {pname} gets a different gradient from your penalty than from the right one")
            break
    return problems


def check_gradient_penalty(gradient_penalty) -> bool:
    """Lesson 08: the student's gradient_penalty(D, x_real, x_fake, eps) against WGAN-GP's, value and gradients."""
    from gan_lessons.strategies import gradient_penalty as reference_penalty
    name = "gradient_penalty"
    if unanswered(name, gradient_penalty, "your gradient_penalty"):
        return False
    D, G, x_real, x_fake = _critic()
    eps = torch.rand(len(x_real), 1, generator=torch.Generator().manual_seed(3))
    reference = reference_penalty(D, x_real, x_fake, eps=eps)
    try:
        penalty = gradient_penalty(D, x_real, x_fake, eps)
    except Exception as error:                              # the student's code: report what it raised
        return verdict(name, [raised("gradient_penalty", error, _GP_HINTS)], "")
    return verdict(name, _penalty_problems(penalty, reference, D, G),
                    "the right value, a graph back to D's parameters (create_graph=True), D's gradients equal to "
                    "WGAN-GP's, and nothing reaches G")


def check_lazy_r1(r1_term, steps=8, every=4, gamma=10.0) -> bool:
    """Lesson 08: r1_term(D, x_real, step, every, gamma) must be 0 off the schedule and gamma/2 * every * R1 on it."""
    from gan_lessons.strategies import r1_penalty
    name = "lazy R1"
    if unanswered(name, r1_term, "your r1_term"):
        return False
    problems = []
    for step in range(steps):
        D, G, x_real, _ = _critic()
        due = step % every == 0
        reference = r1_penalty(D, x_real) * gamma / 2 * every if due else torch.zeros(())
        try:
            term = r1_term(D, x_real.clone(), step, every, gamma)
        except Exception as error:
            return verdict(name, [raised(f"r1_term at step {step}", error, _GP_HINTS)], "")
        if not due:
            value = term.item() if isinstance(term, torch.Tensor) and term.numel() == 1 else term
            if value != 0:
                problems.append(f"at step {step} the term is {value!r}: with every={every} it is computed only when "
                                f"step % every == 0, and is 0 in between")
                break
            continue
        if isinstance(term, torch.Tensor) and term.numel() == 1 and term.requires_grad and not torch.allclose(
                term.detach(), reference.detach(), rtol=1e-4):
            ratio = (term / reference).item()
            if abs(ratio - 1 / every) < 1e-3:
                problems.append(f"at step {step} the term is 1/{every} of the right one: a penalty applied every "
                                f"{every} steps is multiplied by {every}, so that on average it weighs as much as one "
                                f"applied every step")
            else:
                problems.append(f"at step {step} the term is {term.item():.5f}, the right one {reference.item():.5f} "
                                f"(gamma/2 * every * mean squared gradient norm)")
            break
        found = _penalty_problems(term, reference, D, G)
        if found:
            problems += [f"at step {step}: {p}" for p in found]
            break
    return verdict(name, problems, f"computed at steps 0, {every}, ... only, weighted gamma/2 * every, with the "
                                    f"right gradients for D")
