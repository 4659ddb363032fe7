"""Lesson 09's exercise: a G step with D frozen, that puts everything back (check_frozen_g_step)."""
import torch
import torch.nn.functional as F
from torch import optim

from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, compare_steps, raised, recorded_steps, unanswered, verdict


class _Interrupt(Exception):
    """What the checker raises inside D's forward, standing in for a Ctrl-C or a bad batch."""


def _frozen_problem():
    """Seed 000's G and D; D's first layer frozen on purpose, D's .grad holding an earlier gradient."""
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(9)
    G, D = Generator(), Discriminator()
    D.net[0].requires_grad_(False)
    x_real = torch.rand(8, 1, 28, 28) * 2 - 1
    F.binary_cross_entropy_with_logits(D(x_real), torch.ones(8)).backward()
    return G, D, optim.Adam(G.parameters(), lr=1e-3), torch.randn(8, G.z_dim)


def reference_frozen_g_step(G, D, opt_G, z):
    """Lesson 09: G's step with D frozen, each of D's flags restored as it was, even on an error."""
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        logits = D(G(z))
        loss_G = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))
        loss_G.backward()
        opt_G.step()
    finally:
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)
    return loss_G


def _run_frozen(g_step, interrupt=False):
    """Run g_step once on _frozen_problem(); return what the checks need."""
    G, D, opt_G, z = _frozen_problem()
    names = {p: f"G.{n}" for n, p in G.named_parameters()}
    run = {"flags": {n: p.requires_grad for n, p in D.named_parameters()},
           "grads": {n: None if p.grad is None else p.grad.clone() for n, p in D.named_parameters()},
           "weights": {n: p.detach().clone() for n, p in D.named_parameters()}, "at forward": None, "error": None}

    def at_forward(module, args):
        if run["at forward"] is None:
            run["at forward"] = {n: p.requires_grad for n, p in D.named_parameters()}
        if interrupt:
            raise _Interrupt("raised by the checker inside D's forward")
    with recorded_steps({"opt_G": opt_G}, names) as records:
        handle = D.register_forward_pre_hook(at_forward)
        try:
            g_step(G, D, opt_G, z)
        except Exception as error:  # reported by the checker
            run["error"] = error
        finally:
            handle.remove()
    run["after"] = {n: p.requires_grad for n, p in D.named_parameters()}
    run["D"], run["records"] = D, records
    return run


def _flag_problems(run, when):
    changed = [n for n, flag in run["flags"].items() if run["after"][n] != flag]
    if not changed:
        return []
    n = changed[0]
    was = "frozen" if not run["flags"][n] else "trainable"
    return [f"{when}, D.{n} {'requires' if run['after'][n] else 'does not require'} grad, but it was {was} before "
            f"({len(changed)} of D's {len(run['flags'])} flags changed): remember each flag before freezing and put "
            f"each one back" + (" in a `finally:` block, so that it runs even when the step raises"
                                if "error" in when else ", not D.requires_grad_(True) for all")]


def check_frozen_g_step(g_step) -> bool:
    """Lesson 09. g_step(G, D, opt_G, z): one G step on bce(D(G(z)), 1) with D frozen during its forward and
    backward. D's .grad and weights must be left as they were, G must step on the right gradient, and each of D's
    requires_grad flags must be back as it was afterwards, also when the step raises (the error passes through)."""
    name = "g_step"
    if unanswered(name, g_step, "your g_step"):
        return False
    reference = _run_frozen(reference_frozen_g_step)["records"]
    run = _run_frozen(g_step)
    if isinstance(run["error"], NotImplementedError):              # nbgrader's stub, still in place
        print(f"? {name}: not solved yet. Replace `# YOUR CODE HERE` and `raise NotImplementedError()` in your "
              f"g_step with your code and run the cell again.")
        return False
    if run["error"] is not None:
        return verdict(name, [raised("g_step", run["error"], AUTOGRAD_HINTS + [
            ("does not require grad and does not have a grad_fn",
             "nothing in loss_G requires grad: D is frozen, so the graph must come from G; give D G(z) itself, "
             "not G(z).detach()")])] + _flag_problems(run, "after that error"), "")
    problems = compare_steps(run["records"], reference, "G's loss is bce(D(G(z)), 1), through D, after "
                              "opt_G.zero_grad()", atol=1e-6, limit=3)
    D = run["D"]
    touched = [n for n, p in D.named_parameters() if not (
        (p.grad is None and run["grads"][n] is None)
        or (p.grad is not None and run["grads"][n] is not None and torch.equal(p.grad, run["grads"][n])))]
    if touched:
        problems.append(f"D's .grad changed (D.{touched[0]}, {len(touched)} of {len(run['grads'])}): loss_G's "
                        f"backward went into D's parameters; freeze D before its forward")
    elif run["at forward"] is not None and any(run["at forward"].values()):
        thawed = next(n for n, flag in run["at forward"].items() if flag)
        problems.append(f"D was not frozen when its forward ran (D.{thawed} required grad): D's .grad is "
                        f"untouched, but the forward saved activations for a D gradient nobody computes; call "
                        f"D.requires_grad_(False) before D(...)")
    if any(not torch.equal(p.detach(), run["weights"][n]) for n, p in D.named_parameters()):
        problems.append("D's weights changed: G's step must not step or modify D")
    problems += _flag_problems(run, "after the step")
    if not problems:
        interrupted = _run_frozen(g_step, interrupt=True)
        if interrupted["at forward"] is None:
            problems.append("g_step never calls D")
        elif not isinstance(interrupted["error"], _Interrupt):
            problems.append("an error raised inside D's forward did not come out of g_step: let it through "
                            "(try/finally, not try/except), so the caller sees that the step failed")
        problems += _flag_problems(interrupted, "after an error inside the step")
    return verdict(name, problems, "G steps on the right gradient, D's .grad and weights are untouched, D was "
                                    "frozen for its forward, and every flag of D is back as it was, also after an "
                                    "error")
