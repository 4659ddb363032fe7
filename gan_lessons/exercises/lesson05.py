"""Lesson 05's exercise: a GAN update strategy that computes each gradient once (check_strategy), checked against
d_first_fresh_fake's gradients and costs.measure's counts."""
import torch

from gan_lessons import strategies
from gan_lessons.costs import fresh_gan, measure
from gan_lessons.exercises.feedback import recorded_steps, verdict
from gan_lessons.lesson import headline, not_solved


def _step_grads(step, seed):
    """The gradients each optimizer steps on, for one step of `step` on fresh_gan(seed) (the last step of each)."""
    G, D, x_real, noise = fresh_gan(seed, batch=16)
    opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
    names = {p: n for net in (G, D) for n, p in net.named_parameters()}
    with recorded_steps({"G": opt_G, "D": opt_D}, names) as records:
        step(G, D, opt_G, opt_D, x_real, noise)
    return {key: list(steps[-1].items()) for key, steps in records.items() if steps}, D


def _times(n):
    return {1: "once", 2: "twice"}.get(n, f"{n:g} times")


def check_strategy(step, reference="d_first_fresh_fake", seed=0) -> bool:
    """Exercise feedback (lesson 05): does `step` give G and D the gradients `reference` gives them, computing
    each gradient once per step and running G twice (as `reference` does)? Prints one ✓ line, or one line per
    thing still wrong; returns whether everything is right. Feedback, not an assert."""
    name = getattr(step, "__name__", "your step")
    try:
        got, D = _step_grads(step, seed)
        cost = measure(step, *fresh_gan(seed, batch=16), steps=1, warmup=0)
    except Exception as error:  # any error is feedback here
        if "ellipsis" in str(error):
            not_solved(name, "your answer")
            return False
        return verdict(name, [f"the step raised {type(error).__name__}: {headline(str(error))}"], "")
    if cost.error:
        return verdict(name, [f"the step raised RuntimeError: {headline(cost.error)}"], "")
    want, _ = _step_grads(strategies.get(reference), seed)
    wrong = []
    for net in ("D", "G"):
        if net not in got:
            wrong.append(f"opt_{net}.step() is never called")
            continue
        missing = [n for n, g in got[net] if g is None]
        if missing:
            wrong.append(f"{net}'s parameters have no gradient when opt_{net} steps ({', '.join(missing[:3])})")
            continue
        diffs = [((g - r).abs().max().item(), n) for (n, g), (_, r) in zip(got[net], want[net])
                 if not torch.allclose(g, r, rtol=1e-5, atol=1e-7)]
        if diffs:
            gap, where = max(diffs)
            wrong.append(f"{net}'s gradient differs from {reference}'s in {len(diffs)} of {len(got[net])} "
                         f"parameters (largest difference {gap:.2g}, in {where})")
    if cost.D_grad_passes != 1:
        wrong.append(f"D's gradient is computed {_times(cost.D_grad_passes)} per step"
                     + (": G's backward still fills D's .grad" if cost.D_grad_passes == 2 else ", not once"))
    if cost.G_grad_passes != 1:
        wrong.append(f"G's gradient is computed {_times(cost.G_grad_passes)} per step"
                     + (": D's loss still reaches G (make D's fake batch without a graph)"
                        if cost.G_grad_passes == 2 else ", not once"))
    if cost.G_forward != 2:
        wrong.append(f"G runs {_times(cost.G_forward)} per step; {reference} runs it twice (a fake batch for D "
                     "under no_grad, a fresh one for G's loss)")
    if not all(p.requires_grad for p in D.parameters()):
        wrong.append("D is still frozen after the step: call D.requires_grad_(True) before returning")
    return verdict(name, wrong, f"G and D step on {reference}'s gradients, D's gradient is computed once per step "
                                "(not twice), and G runs twice")
