"""Lesson 05's exercise: a GAN update strategy with n_critic D steps per G step, written whole, that wastes no D
gradient and no G forward (check_strategy). It runs on seed 000's G and D, whose .grad holds an earlier gradient,
with n_critic 2 and 3; the gradients each optimizer steps on are compared with reference_strategy's and with known
wrong steps', and costs.measure counts the passes."""
from functools import partial

import torch
import torch.nn.functional as F

from gan_lessons.costs import fresh_gan, measure
from gan_lessons.exercises.exercise import Exercise, Found, Raised, attempt
from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, raised, returned
from gan_lessons.exercises.steps import (
    compare_steps,
    kept_autograd_state,
    known_mistake,
    left_as_given,
    matching,
    parameter_names,
    recorded_steps,
    right_answer,
)
from gan_lessons.exercises.variants import variant
from gan_lessons.i18n import N_, _

CHUNK = 8           # each D step's real batch, and G's fake batch
N_CRITICS = (2, 3)  # the checker runs the step with each


def reference_strategy(G, D, opt_G, opt_D, x_real, noise, n_critic=2):
    """Lesson 05, BigGAN's step: the hinge loss, n_critic D steps, each on its chunk of x_real and the same chunk of one fake batch made without a
    graph (one G forward for all of them), then one G step on a fresh fake batch of one chunk's size through the
    updated D, G's backward limited to G's parameters: D's gradient once per D step, G run twice per step."""
    with torch.no_grad():
        fakes = G(noise(len(x_real))).chunk(n_critic)     # one G forward makes every D step's fake batch
    for x_chunk, x_fake in zip(x_real.chunk(n_critic), fakes):
        opt_D.zero_grad()
        loss_D = F.relu(1 - D(x_chunk)).mean() + F.relu(1 + D(x_fake)).mean()
        loss_D.backward()
        opt_D.step()
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_chunk)))).mean()            # a fresh fake, through the updated D
    loss_G.backward(inputs=list(G.parameters()))
    opt_G.step()
    return loss_D, loss_G


# The known ways of getting it wrong (or right, differently), each as an edit of reference_strategy
G_STEP = ["opt_G.zero_grad()", "loss_G = -D(G(noise(len(x_chunk)))).mean()",
          "loss_G.backward(inputs=list(G.parameters()))", "opt_G.step()"]
ONE_CHUNK = {"len(x_chunk)": "len(x_real) // n_critic"}   # G's batch, where no D step has run yet to set x_chunk
FAKES = "G(noise(len(x_real))).chunk(n_critic)"
LOSS_D = "F.relu(1 - D(x_chunk)).mean() + F.relu(1 + D(x_fake)).mean()"
AVERAGED = variant(reference_strategy, replace={LOSS_D: f"({LOSS_D}) / 2"})      # right: D's two terms averaged


# Hints and messages are marked with N_() here and translated with _() where they are shown.
TRAINS_G = N_("D's steps train G: D's fake batches have a graph back to G, so loss_D.backward() added D's loss into "
              "G's .grad before G stepped")
WHOLE = N_("every D step saw the whole of x_real, where the k-th D step reads the k-th of its n_critic equal "
           "chunks")
PER_STEP = N_("each D step made its fake batch with a G forward of its own, where one G forward on one noise "
              "draw of len(x_real) makes all of them, cut into n_critic chunks as x_real is")
STALE_D = N_("G's gradient was taken through D as it was before D's last step, where in this order G answers the D "
             "that has just stepped")
LARGE_G_BATCH = N_("G's fake batch has len(x_real) samples, where it is one chunk's size, as each of D's fake batches")
MISTAKES = [
    (variant(reference_strategy, drop="opt_D.zero_grad()"), N_(
        "D's gradient at opt_D.step() still holds the earlier .grad: backward adds into .grad, and nothing emptied "
        "D's since its last step")),
    (variant(reference_strategy, move=("opt_D.zero_grad()", "before the loop")), N_(
        "D's second step stepped on its own gradient plus the first one's: backward adds into .grad, and nothing "
        "emptied D's between its steps")),
    (variant(reference_strategy, drop="opt_G.zero_grad()"), N_(
        "G's gradient at opt_G.step() still holds the earlier .grad: backward adds into .grad, and nothing emptied "
        "G's since its last step")),
    (variant(reference_strategy, move=("opt_G.zero_grad()", "at the start"), replace={   # D's fakes keep G's graph
        "torch.no_grad()": "torch.enable_grad()", "loss_D.backward()": "loss_D.backward(retain_graph=True)"}),
     TRAINS_G),
    (variant(reference_strategy, move=(G_STEP, "before the loop"), replace=ONE_CHUNK), STALE_D),
    (variant(reference_strategy, move=(G_STEP, "at the start"), replace=ONE_CHUNK), STALE_D),
    (variant(reference_strategy, replace={"x_real.chunk(n_critic)": "[x_real] * n_critic",
                                          FAKES: "[G(noise(len(x_real)))] * n_critic", **ONE_CHUNK}), WHOLE),
    (variant(reference_strategy, replace={FAKES: "[G(noise(len(x_real) // n_critic)) for _ in range(n_critic)]"}),
     PER_STEP),
    (variant(reference_strategy, replace={FAKES: f"[{FAKES}[0]] * n_critic"}), N_(
        "every D step scored the same fake batch, where the k-th D step scores the k-th chunk of the fake batch")),
    (variant(reference_strategy, replace={"len(x_chunk)": "len(x_real)"}), LARGE_G_BATCH),
]
HINTS = AUTOGRAD_HINTS + [
    ("does not require grad and does not have a grad_fn",
     N_("loss_G has no graph back to G: it is built from a fake batch made without a graph (under no_grad, or "
        "detached) for D")),
]
STALE_FORWARD = N_("loss_G reuses a D forward made before opt_D.step(), which changed D's weights in place since: "
                   "the backward needs the weights that forward saved")


def _problem(n_critic, seed=0):
    """Seed 000's G and D, a real batch of CHUNK images per D step, plain SGD for each; every .grad holds an earlier
    gradient (0.01), as after a step. Not Adam: its step divides each gradient entry by that entry's own size, so
    an entry near zero whose last digits differ (the same sum in another order, a right answer written differently)
    would move its weight by a whole step of either sign, and the next step's gradients would differ."""
    G, D, x_real, noise = fresh_gan(seed, batch=CHUNK * n_critic)
    for p in (*G.parameters(), *D.parameters()):
        p.grad = torch.full_like(p, 0.01)
    return G, D, torch.optim.SGD(G.parameters(), lr=0.01), torch.optim.SGD(D.parameters(), lr=0.01), x_real, noise


def _run(step, n_critic, seed=0):
    """One call of step on _problem: (the gradients each optimizer stepped on, D, the error raised or None, how
    many backwards reached D after its last step, where no step of D uses them, how many samples D's forwards ran
    on, and the size of each noise draw)."""
    G, D, opt_G, opt_D, x_real, draw = _problem(n_critic, seed)
    draws: list = []

    def noise(n):
        draws.append(n)
        return draw(n)
    names = parameter_names(G=G, D=D)
    arrivals: list = []          # for each backward that reached D: how many D steps had run before it
    samples: list = []           # the batch size of each D forward
    with recorded_steps({"opt_D": opt_D, "opt_G": opt_G}, names) as records:
        handles = [next(D.parameters()).register_hook(lambda grad: arrivals.append(len(records["opt_D"]))),
                   D.register_forward_pre_hook(lambda module, args: samples.append(len(args[0])))]
        try:
            step(G, D, opt_G, opt_D, x_real, noise, n_critic=n_critic)
        except Exception as error:  # reported as feedback
            return records, D, error, 0, sum(samples), draws
        finally:
            for handle in handles:
                handle.remove()
    return records, D, None, arrivals.count(len(records["opt_D"])), sum(samples), draws


def _gradient_problems(mine, right, missing_only=False):
    """A line for the first optimizer (D's, then G's) whose step count or gradients differ from the right answer's
    (missing_only: only for an optimizer that stepped with a parameter's .grad None)."""
    problems = []
    for opt, what in (("opt_D", N_("D's k-th loss is relu(1 - D(x_chunk)).mean() + relu(1 + D(x_fake)).mean(), x_chunk "
                                   "the k-th chunk of x_real and x_fake the k-th chunk of one fake batch of len(x_real), from "
                                   "the first noise draw")),
                      ("opt_G", N_("G's loss is -D(G(z)).mean() on a fresh z (the last noise draw), through D after "
                                   "its last step"))):
        got = mine[opt]
        if missing_only and not (got and any(g is None for g in got[-1].values())):
            continue
        problems += compare_steps({opt: got}, {opt: right[opt]}, _(what))
        if problems:
            break                # G's step follows D's: a wrong D step changes G's gradient too
    return problems


def _times(n):
    """How often, as a phrase that reads after a verb: "never", "once", "twice", "3 times"."""
    return {0: _("never"), 1: _("once"), 2: _("twice")}.get(n) or _("{count:g} times").format(count=n)


def _problems(step, n_critic, mine, D, wasted, samples, draws):
    """What is still wrong with a step that ran, for one n_critic."""
    record = lambda answer: _run(answer, n_critic)[0]     # noqa: E731
    with kept_autograd_state():
        cost = measure(partial(step, n_critic=n_critic), *fresh_gan(batch=CHUNK * n_critic), steps=1, warmup=0,
                       memory=False)
    if cost.error:
        return [_("run again on a fresh G and D, the step raised RuntimeError: {error}").format(error=cost.error)]
    right = right_answer(mine, [reference_strategy, AVERAGED], record)
    hint = None if matching(mine, right) else known_mistake(mine, MISTAKES, record)
    if hint:
        problems = [_(hint)]
    else:
        problems = _gradient_problems(mine, right)
        if len(mine["opt_D"]) != n_critic:
            pass                            # the step count is the problem, and first_difference says it
        elif cost.G_forward == 1:      # then G's gradient differs: say why, unless it is missing altogether
            problems = _gradient_problems(mine, right, missing_only=True) or [
                _("G runs once per step: G's loss reuses the fake batch made for D; this exercise asks for a fresh G "
                  "forward for G's loss")]
        elif cost.G_forward != 2:
            problems.append(_("G runs {times} per step, where this order runs it twice whatever n_critic is: once "
                              "without a graph for all of D's fake batches, once for G's loss").format(
                times=_times(cost.G_forward)))
    if wasted:
        problems.append(_("D's gradient is computed {times} per step after D's last step, for nothing, as in g_first: "
                          "G's backward still fills D's .grad, which no step of D uses").format(times=_times(wasted)))
    needed = (2 * n_critic + 1) * CHUNK        # a real and a fake chunk per D step, one fake chunk for G's loss
    if samples > needed and hint != LARGE_G_BATCH:          # that hint already says what the extra samples are
        problems.append(_("D ran on {count} samples in one step, where each D step needs a real and a fake chunk "
                          "({chunk} each) and G's loss one fake chunk, {needed} in all: {extra} went through D for "
                          "nothing").format(count=samples, chunk=CHUNK, needed=needed, extra=samples - needed))
    if cost.G_unused_graphs and hint != TRAINS_G:
        problems.append(_("G built a graph {times} per step that no backward went through: its forward saved "
                          "tensors for a backward that never runs").format(times=_times(cost.G_unused_graphs)))
    if cost.G_grad_passes > 1 and hint != TRAINS_G:                 # that hint already says D's loss reaches G
        problems.append(_("G's gradient is computed {times} per step: D's loss still reaches G, through the fake "
                          "batches D sees").format(times=_times(cost.G_grad_passes)))
    if not problems and draws != [CHUNK * n_critic, CHUNK]:
        problems.append(_("the step's noise draws had sizes {sizes}, where it draws len(x_real) ({n}) for D's fake "
                          "batches, then one chunk's size ({chunk}) for G's: the noise every later step draws then "
                          "differs").format(sizes=", ".join(map(str, draws)), n=CHUNK * n_critic, chunk=CHUNK))
    if not all(p.requires_grad for p in D.parameters()):
        problems.append(_("D is still frozen after the step: its parameters no longer require grad when the step "
                          "returns"))
    return problems


def _label(step) -> str:
    return getattr(step, "__name__", _("your step"))


def strategy_checks(step) -> Found:
    """Lesson 05. step(G, D, opt_G, opt_D, x_real, noise, n_critic=2): n_critic D steps (each on its chunk of x_real
    and the same chunk of one fake batch made without a graph), then one G step on a fresh fake batch through the
    updated D, with D's gradient computed once per D step. Runs it with n_critic 2 and 3 on seed 000's G
    and D, whose .grad holds an earlier gradient, compares the gradients each optimizer steps on with the right ones,
    counts passes with costs.measure, and prints one line per thing still wrong."""
    name = _label(step)
    for n_critic in N_CRITICS:
        mine, D, error, wasted, samples, draws = _run(step, n_critic)
        if isinstance(error, NotImplementedError):
            raise Raised(name, error)
        if isinstance(error, TypeError) and "n_critic" in str(error):
            return [_("your step takes no n_critic: its signature is my_step(G, D, opt_G, opt_D, x_real, noise, "
                      "n_critic=2)")]
        if error is not None:
            stale = "modified by an inplace operation" in str(error) and mine["opt_D"]
            problems = [raised(name, error, [("modified by an inplace operation", STALE_FORWARD)] + HINTS
                               if stale else HINTS)]
        else:
            problems = _problems(step, n_critic, mine, D, wasted, samples, draws)
        if problems:
            if n_critic != N_CRITICS[0]:
                problems = [_("with n_critic={n_critic}: {problem}").format(n_critic=n_critic, problem=p)
                            for p in problems]
            return problems

    def on_a_fresh_problem(form, n_critic=N_CRITICS[0]):
        G, D, opt_G, opt_D, x_real, noise = _problem(n_critic)
        return form(G, D, opt_G, opt_D, x_real, noise, n_critic=n_critic)
    G, D, opt_G, opt_D, x_real, noise = _problem(N_CRITICS[0])
    with left_as_given(name, {"G": G, "D": D}, {"x_real": x_real}) as side_effects:
        attempt(name, step, G, D, opt_G, opt_D, x_real, noise, n_critic=N_CRITICS[0])
    if side_effects:
        return side_effects
    right = [on_a_fresh_problem(form) for form in (reference_strategy, AVERAGED)]
    return returned(name, on_a_fresh_problem(step), right, "(loss_D, loss_G)")


def _strategy_calls(n_critic=3):
    args = (*_problem(n_critic), n_critic)
    return [args, args], [args]


STRATEGY = Exercise("05", "my_step", reference_strategy, strategy_checks, _strategy_calls, label=_label,
                    what=N_("your strategy function"), success=N_(
                        "with n_critic 2 and 3, D and G step on the right gradients, no gradient of D is computed in "
                        "G's step, and G runs twice a step"),
                    forbids=("no keywords: loss_G.backward",      # no D gradient computed for nothing
                             "graph made, then detached"))        # D's fake batches made without a graph
check_strategy = STRATEGY.check
