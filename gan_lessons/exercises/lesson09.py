"""Lesson 09's exercise: a G step with D frozen, that puts everything back (check_frozen_g_step)."""
import torch
import torch.nn.functional as F
from torch import optim

from gan_lessons.exercises.exercise import Exercise, Found, Raised
from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, raised, returned
from gan_lessons.exercises.steps import (
    compare_steps,
    known_mistake,
    left_as_given,
    matching,
    parameter_names,
    recorded_steps,
)
from gan_lessons.exercises.variants import variant
from gan_lessons.i18n import N_, _
from gan_lessons.strategies import bce


class _Interrupt(BaseException):
    """What the checker raises inside D's forward, standing in for a Ctrl-C: like KeyboardInterrupt, no Exception,
    so that only a `finally:` (or a bare `except:`) sees it."""


class _BadBatch(Exception):
    """What the checker raises inside D's forward, standing in for an error of the step itself (a bad batch)."""


def _frozen_problem(frozen=0):
    """Seed 000's G and D; D's layer net[frozen] frozen on purpose (the first; a step's flags are also checked with
    a middle one, and with one parameter alone frozen, where `frozen` is its name), D's .grad holding an earlier
    gradient, and G's too (as after an earlier step, so a step that does not clear it steps on both)."""
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(9)
    G, D = Generator(), Discriminator()
    (D.get_parameter(frozen) if isinstance(frozen, str) else D.net[frozen]).requires_grad_(False)
    x_real = torch.rand(8, 1, 28, 28) * 2 - 1
    F.binary_cross_entropy_with_logits(D(x_real), torch.ones(8)).backward()
    for p in G.parameters():
        p.grad = torch.full_like(p, 0.01)
    return G, D, optim.Adam(G.parameters(), lr=1e-3), torch.randn(8, G.z_dim)


def reference_frozen_g_step(G, D, opt_G, z):
    """Lesson 09: G's step with D frozen, each of D's flags restored as it was, even on an error. (The lesson's
    solution block is this code: tools/build_notebook.py checks it.)"""
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        loss_G = bce(D(G(z)), 1)
        loss_G.backward()
        opt_G.step()
    finally:
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)
    return loss_G


def _run_frozen(g_step, interrupt=None, frozen=0):
    """Run g_step once on _frozen_problem(frozen), with `interrupt` (an exception class) raised inside D's forward;
    return what the checks need."""
    G, D, opt_G, z = _frozen_problem(frozen)
    names = parameter_names(G=G)
    run = {"flags": {n: p.requires_grad for n, p in D.named_parameters()},
           "grads": {n: None if p.grad is None else p.grad.clone() for n, p in D.named_parameters()},
           "weights": {n: p.detach().clone() for n, p in D.named_parameters()}, "at forward": None, "error": None}

    def at_forward(module, args):
        if run["at forward"] is None:
            recording = torch.is_grad_enabled()      # under no_grad a forward saves nothing for any weight
            run["at forward"] = {n: p.requires_grad and recording for n, p in D.named_parameters()}
        if interrupt:
            raise interrupt("raised by the checker inside D's forward")
    with recorded_steps({"opt_G": opt_G}, names) as records:
        handle = D.register_forward_pre_hook(at_forward)
        try:
            with left_as_given("g_step", {"G": G, "D": D}, {"z": z}) as run["left"]:
                g_step(G, D, opt_G, z)
        except (Exception, _Interrupt) as error:  # reported by the checker
            run["error"] = error
        finally:
            handle.remove()
    run["after"] = {n: p.requires_grad for n, p in D.named_parameters()}
    run["D"], run["records"] = D, records
    return run


# When the checker looks at D's flags: after the step, or after an error (the student's, or one raised inside D's
# forward), where only a `finally:` block puts them back.
AFTER_STEP = N_("after the step")
AFTER_ERROR = N_("after that error")
AFTER_INNER_ERROR = N_("after an error inside the step")
AFTER_INTERRUPT = N_("after an interruption inside the step, as a Ctrl-C's KeyboardInterrupt (no Exception)")
FLAG_PROBLEMS = {   # (whether D's first changed flag now requires grad, whether an error was raised) -> the line
    (True, False): N_("{when}, D.{name} requires grad, but it was frozen before ({changed} of D's {flags} flags "
                      "changed)"),
    (False, False): N_("{when}, D.{name} does not require grad, but it was trainable before ({changed} of D's {flags}"
                       " flags changed)"),
    (True, True): N_("{when}, D.{name} requires grad, but it was frozen before ({changed} of D's {flags} flags "
                     "changed), after a step that raised"),
    (False, True): N_("{when}, D.{name} does not require grad, but it was trainable before ({changed} of D's {flags} "
                      "flags changed), after a step that raised"),
}


def _flag_problems(run, when):
    """The first of D's flags that is not back as it was, `when` (AFTER_STEP, AFTER_ERROR, AFTER_INNER_ERROR or
    AFTER_INTERRUPT)."""
    changed = [n for n, flag in run["flags"].items() if run["after"][n] != flag]
    if not changed:
        return []
    n = changed[0]
    template = FLAG_PROBLEMS[bool(run["after"][n]), when != AFTER_STEP]
    return [_(template).format(when=_(when), name=n, changed=len(changed), flags=len(run["flags"]))]


def frozen_g_step_checks(g_step) -> Found:
    """Lesson 09. g_step(G, D, opt_G, z): one G step on bce(D(G(z)), 1) with D frozen during its forward and
    backward. D's .grad and weights must be left as they were, G must step on the right gradient, and each of D's
    requires_grad flags must be back as it was afterwards, also when the step raises (the error passes through)."""
    reference = _run_frozen(reference_frozen_g_step)["records"]
    run = _run_frozen(g_step)
    if isinstance(run["error"], NotImplementedError):
        raise Raised("g_step", run["error"])
    if run["error"] is not None:
        return [raised("g_step", run["error"], AUTOGRAD_HINTS + [
            ("does not require grad and does not have a grad_fn",
             N_("loss_G has no graph: D's output on the fakes requires no grad, so no backward reaches G from it"))]),
                *_flag_problems(run, AFTER_ERROR)]
    mistake = known_mistake(run["records"], KNOWN_MISTAKES, lambda step: _run_frozen(step)["records"]) \
        if not matching(run["records"], reference) else None
    problems = compare_steps(run["records"], reference, _(mistake) if mistake else _(
        "G's loss is bce(D(G(z)), 1), through D, after opt_G.zero_grad()"))
    D = run["D"]
    touched = [n for n, p in D.named_parameters() if not (
        (p.grad is None and run["grads"][n] is None)
        or (p.grad is not None and run["grads"][n] is not None and torch.equal(p.grad, run["grads"][n])))]
    cleared = [n for n in touched if run["grads"][n] is not None and (
        D.get_parameter(n).grad is None or not D.get_parameter(n).grad.any())]
    if touched and len(cleared) == len(touched):
        problems.append(_("D's .grad was emptied (D.{first}, {count} of {total}): G's step cleared a gradient of D "
                          "that it was not its to touch").format(first=cleared[0], count=len(cleared),
                                                                 total=len(run['grads'])))
    elif touched:
        problems.append(_("D's .grad changed (D.{first}, {count} of {total}): loss_G's backward went into D's "
                          "parameters").format(first=touched[0], count=len(touched),
                                                                           total=len(run['grads'])))
    elif run["at forward"] is not None and any(run["at forward"].values()):
        thawed = next(n for n, flag in run["at forward"].items() if flag)
        problems.append(_("D was not frozen when its forward ran (D.{name} required grad): D's .grad ends as it "
                          "was, but the forward saved activations for a gradient of D's weights, which G's step has no "
                          "use for").format(name=thawed))
    if any(not torch.equal(p.detach(), run["weights"][n]) for n, p in D.named_parameters()):
        problems.append(_("D's weights changed: G's step must not step or modify D"))
    problems += _flag_problems(run, AFTER_STEP) + run["left"]
    for frozen in (5, "net.5.bias"):  # the flags put back as they were, not as they are in this one D: a middle
        if not problems:              # layer frozen, then one parameter of a layer alone
            problems += _flag_problems(_run_frozen(g_step, frozen=frozen), AFTER_STEP)
    for interrupt in (_BadBatch, _Interrupt):     # an error of the step, then a Ctrl-C (no Exception)
        if problems:
            break
        interrupted = _run_frozen(g_step, interrupt=interrupt)
        if interrupted["at forward"] is None:
            problems.append(_("g_step never calls D"))
        elif interrupted["error"] is None:
            problems.append(_("an error raised inside D's forward did not come out of g_step: its caller never "
                              "learns that the step failed"))
        elif not isinstance(interrupted["error"], interrupt):
            problems.append(_("an error raised inside D's forward came out of g_step as {kind}, not as the error "
                              "itself: the caller's except clauses for it no longer catch it").format(
                kind=type(interrupted["error"]).__name__))
        problems += _flag_problems(interrupted, AFTER_INNER_ERROR if interrupt is _BadBatch else AFTER_INTERRUPT)
    if not problems:
        problems = returned("g_step", g_step(*_frozen_problem()), [reference_frozen_g_step(*_frozen_problem())],
                            "loss_G")
    return problems


KNOWN_MISTAKES = [
    (variant(reference_frozen_g_step, replace={"bce(D(G(z)), 1)": "-bce(D(G(z)), 0)"}),
     N_("G's loss is the saturating one, minus D's loss on the fakes (G minimises log(1 - D(G(z)))), where this "
        "step's G loss scores the fakes against the real label (G maximises log D(G(z)))"))]


def _frozen_calls():
    args = _frozen_problem()
    return [args, args], [args]


FROZEN_G_STEP = Exercise("09", "g_step", reference_frozen_g_step, frozen_g_step_checks, _frozen_calls, flags=True,
                         what=N_("your g_step"), success=N_(
                             "G steps on the right gradient, D's .grad and weights are untouched, D was frozen for its "
                             "forward, and every flag of D is back as it was, also after an error"))
check_frozen_g_step = FROZEN_G_STEP.check
