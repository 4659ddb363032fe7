"""Lesson 05's exercise: a GAN update strategy, written whole, that wastes no D gradient (check_strategy). It runs
on seed 000's G and D, whose .grad holds an earlier gradient; the gradients each optimizer steps on are compared
with reference_strategy's and with known wrong steps', and costs.measure counts the passes."""
import torch

from gan_lessons.costs import fresh_gan, measure
from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, raised, stub_left, unanswered, verdict
from gan_lessons.exercises.steps import compare_steps, known_mistake, matching, recorded_steps, right_answer
from gan_lessons.i18n import N_, _
from gan_lessons.strategies import bce


def reference_strategy(G, D, opt_G, opt_D, x_real, noise):
    """Lesson 05: d_first_fresh_fake's order, G's backward limited to G's parameters: D's gradient once a step."""
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))                    # D's fake batch: no graph back to G
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    loss_G = bce(D(G(noise(len(x_real)))), 1)             # a fresh fake, through the updated D
    loss_G.backward(inputs=list(G.parameters()))          # G's .grad only: D's is not computed
    opt_G.step()
    return loss_D, loss_G


def _written(zero_D=True, zero_G=True, fake_graph=False, order="D, G", summed=False):
    """reference_strategy, or one way of getting it wrong (or right, differently): without opt_D's or opt_G's
    zero_grad(); D's fake batch with a graph back to G, opt_G.zero_grad() once before it (D's step trains G); D's
    terms summed; in another order: "G before D's step" (D's fake batch drawn first, then G's whole step, then D's)
    or "G, D" (G's whole step first, then D's fake batch from the updated G)."""
    def step(G, D, opt_G, opt_D, x_real, noise):
        n = len(x_real)

        def fake_for_D():
            if fake_graph:
                opt_G.zero_grad()
                return G(noise(n))
            with torch.no_grad():
                return G(noise(n))

        def d_step(x_fake):
            if zero_D:
                opt_D.zero_grad()
            loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / (1 if summed else 2)
            loss_D.backward()
            opt_D.step()
            return loss_D

        def g_step():
            if zero_G and not fake_graph:
                opt_G.zero_grad()
            loss_G = bce(D(G(noise(n))), 1)
            loss_G.backward(inputs=list(G.parameters()))
            opt_G.step()
            return loss_G
        if order == "G, D":
            loss_G = g_step()
            return d_step(fake_for_D()), loss_G
        x_fake = fake_for_D()
        if order == "G before D's step":
            loss_G = g_step()
            return d_step(x_fake), loss_G
        loss_D = d_step(x_fake)
        return loss_D, g_step()
    return step


# Hints and messages are marked with N_() here and translated with _() where they are shown.
TRAINS_G = N_("D's step trains G: D's fake batch has a graph back to G, so loss_D.backward() added D's loss into G's "
              ".grad before G stepped")
STALE_D = N_("G's gradient was taken through D as it was before opt_D.step(), where in this order G answers the D "
             "that has just stepped")
MISTAKES = [
    (_written(zero_D=False), N_("D's gradient at opt_D.step() still holds the earlier .grad: backward adds "
                                "into .grad, and nothing emptied D's since its last step")),
    (_written(zero_G=False), N_("G's gradient at opt_G.step() still holds the earlier .grad: backward adds "
                                "into .grad, and nothing emptied G's since its last step")),
    (_written(fake_graph=True), TRAINS_G),
    (_written(order="G before D's step"), STALE_D),
    (_written(order="G, D"), STALE_D),
]
HINTS = AUTOGRAD_HINTS + [
    ("does not require grad and does not have a grad_fn",
     N_("loss_G has no graph back to G: it is built from the fake batch made without a graph (under no_grad, or "
        "detached) for D")),
]
STALE_FORWARD = N_("loss_G reuses a D forward made before opt_D.step(), which changed D's weights in place since: "
                   "the backward needs the weights that forward saved")


def _problem(seed=0):
    """Seed 000's G and D, batch 16, Adam for each; every .grad holds an earlier gradient (0.01), as after a step."""
    G, D, x_real, noise = fresh_gan(seed, batch=16)
    for p in (*G.parameters(), *D.parameters()):
        p.grad = torch.full_like(p, 0.01)
    return G, D, torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters()), x_real, noise


def _run(step, seed=0):
    """One call of step on _problem(seed): (the gradients each optimizer stepped on, D, the error raised or None)."""
    G, D, opt_G, opt_D, x_real, noise = _problem(seed)
    names = {p: f"{net}.{n}" for net, m in (("G", G), ("D", D)) for n, p in m.named_parameters()}
    with recorded_steps({"opt_D": opt_D, "opt_G": opt_G}, names) as records:
        try:
            step(G, D, opt_G, opt_D, x_real, noise)
        except Exception as error:  # reported as feedback
            return records, D, error
    return records, D, None


def _record(step):
    return _run(step)[0]


def _gradient_problems(mine, right, missing_only=False):
    """One line per optimizer whose step count or gradients differ from the right answer's (missing_only: only for
    an optimizer that stepped with a parameter's .grad None)."""
    problems = []
    for opt, what in (("opt_D", N_("D's loss is the mean of bce(D(x_real), 1) and bce(D(x_fake), 0), x_fake from "
                                   "the first noise draw")),
                      ("opt_G", N_("G's loss is bce(D(G(z)), 1) on a fresh z (the second noise draw), through D "
                                   "after its step"))):
        got = mine[opt]
        if missing_only and not (len(got) == 1 and any(g is None for g in got[0].values())):
            continue
        problems += compare_steps({opt: got}, {opt: right[opt]}, _(what))
    return problems


def _times(n):
    """How often, as a phrase that reads after a verb: "never", "once", "twice", "3 times"."""
    return {0: _("never"), 1: _("once"), 2: _("twice")}.get(n) or _("{count:g} times").format(count=n)


def check_strategy(step) -> bool:
    """Lesson 05. step(G, D, opt_G, opt_D, x_real, noise): d_first_fresh_fake's order (D first, on a fake batch made
    without a graph; then G on a fresh fake batch, through the updated D) in which D's gradient is computed once a
    step. Runs it on seed 000's G and D, whose .grad holds an earlier gradient, compares the gradients each optimizer
    steps on with the right ones, counts passes with costs.measure, and prints one line per thing still wrong."""
    name = getattr(step, "__name__", _("your step"))
    if unanswered(name, step, _("your strategy function")):
        return False
    mine, D, error = _run(step)
    if stub_left(name, error, N_("your step")):
        return False
    if error is not None:
        stale = "modified by an inplace operation" in str(error) and mine["opt_D"]
        return verdict(name, [raised(name, error, [("modified by an inplace operation", STALE_FORWARD)] + HINTS
                                     if stale else HINTS)], "")
    cost = measure(step, *fresh_gan(batch=16), steps=1, warmup=0, memory=False)
    if cost.error:
        return verdict(name, [_("run again on a fresh G and D, the step raised RuntimeError: {error}").format(
            error=cost.error)], "")
    right = right_answer(mine, [reference_strategy, _written(summed=True)], _record)
    hint = None if matching(mine, right) else known_mistake(mine, MISTAKES, _record)
    if hint:
        problems = [_(hint)]
    else:
        problems = _gradient_problems(mine, right)
        if cost.G_forward == 1:      # then G's gradient differs: say why, unless it is missing altogether
            problems = _gradient_problems(mine, right, missing_only=True) or [
                _("G runs once per step: G's loss reuses D's fake batch (as d_first_frozen_D and g_first_inputs "
                  "do); this exercise asks for d_first_fresh_fake's order, with a fresh G forward for G's loss")]
        elif cost.G_forward != 2:
            problems.append(_("G runs {times} per step; this order runs it twice: a fake batch for D without a "
                              "graph, and a fresh one for G's loss").format(times=_times(cost.G_forward)))
    if cost.D_grad_passes > 1:
        problems.append(_("D's gradient is computed {times} per step, once for nothing, as in g_first: G's backward "
                          "still fills D's .grad, which no step of D uses").format(times=_times(cost.D_grad_passes)))
    if cost.G_grad_passes > 1 and hint != TRAINS_G:                 # that hint already says D's loss reaches G
        problems.append(_("G's gradient is computed {times} per step: D's loss still reaches G, through the fake batch "
                          "D sees").format(times=_times(cost.G_grad_passes)))
    if not all(p.requires_grad for p in D.parameters()):
        problems.append(_("D is still frozen after the step: its parameters no longer require grad when the step "
                          "returns"))
    return verdict(name, problems, _("D and G step on the right gradients, D's gradient is computed once per step "
                                     "(not twice), and G runs twice, as d_first_fresh_fake does"))
