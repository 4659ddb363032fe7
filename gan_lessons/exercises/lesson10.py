"""Lesson 10's exercise: a GAN step under autocast with ONE GradScaler for both optimizers, D's gradient accumulated
over micro-batches and its norm clipped (check_amp_step)."""
import functools
import math

import torch
from torch import nn, optim

from gan_lessons.exercises.exercise import Exercise, Found, Raised
from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, ONE_BACKWARD, SCALER_HINTS, raised
from gan_lessons.exercises.steps import first_difference, flat, parameter_names, recorded_steps
from gan_lessons.exercises.variants import variant
from gan_lessons.i18n import N_, _
from gan_lessons.strategies import bce

MAX_NORM = 0.1        # D's gradient norm on the checker's batch is about 0.27: the clip is active
ACCUM = 2             # D's micro-batches per step, in the checker's runs

_AMP_HINTS = SCALER_HINTS + AUTOGRAD_HINTS


def reference_amp_step(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2):
    """Lesson 10: d_first_reuse_fake under autocast (bfloat16 on the CPU), one GradScaler for both optimizers, D's
    gradient added up over `accum` micro-batches and its norm clipped to max_norm on the unscaled gradients. (The
    lesson's solution block is this code: tools/build_notebook.py checks it.)"""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x_fake = G(z)
    opt_D.zero_grad()                                    # once: the micro-batches add up into .grad
    for x_part, fake_part in zip(x_real.chunk(accum), x_fake.detach().chunk(accum)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss_D = (bce(D(x_part), 1) + bce(D(fake_part), 0)) / 2
        scaler.scale(loss_D / accum).backward()
    scaler.unscale_(opt_D)                               # the true gradient, for the clip
    nn.utils.clip_grad_norm_(D.parameters(), max_norm)
    scaler.step(opt_D)                                   # skipped if D's gradient holds an inf or NaN
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss_G = bce(D(x_fake), 1)
    opt_G.zero_grad()
    scaler.scale(loss_G).backward()
    scaler.step(opt_G)
    scaler.update()                                      # once, after both steps


# a known wrong version: D's .grad emptied before each micro-batch, so only the last one's gradient is left
CLEARED_EACH_MICRO_BATCH = {"move": ("opt_D.zero_grad()", "into the loop")}
# and one whose G loss goes through D's weights from before opt_D's step (its backward still comes after the step)
G_LOSS_BEFORE_D_STEPS = {"move": ("with torch.autocast('cpu', dtype=torch.bfloat16):\n    loss_G = bce(D(x_fake), 1)",
                                  "scaler.unscale_(opt_D)")}


def _recording_scaler(names):
    """A CPU GradScaler that notes the calls made on it: scale, unscale_(opt), step(opt) and update. (A class made
    here, not at import: torch 2.1 has no torch.amp.GradScaler, and the other checkers must still import there.)"""
    class RecordingScaler(torch.amp.GradScaler):
        def scale(self, outputs):
            self.calls.append("scale")
            return super().scale(outputs)

        def unscale_(self, optimizer):
            if not self.stepping:                        # step() unscales by itself: not the student's call
                self.calls.append(f"unscale_({names.get(optimizer, 'another optimizer')})")
            return super().unscale_(optimizer)

        def step(self, optimizer, *args, **kwargs):
            self.calls.append(f"step({names.get(optimizer, 'another optimizer')})")
            self.stepping = True
            try:
                return super().step(optimizer, *args, **kwargs)
            finally:
                self.stepping = False

        def update(self, new_scale=None):
            self.calls.append("update")
            return super().update(new_scale)

    scaler = RecordingScaler("cpu")
    scaler.calls, scaler.stepping = [], False
    return scaler


def _amp_problem(calls=1):
    """Seed 000's G and D (seed 10), plain SGD for each, and a batch (x_real, z) for each call. Not Adam: its step
    moves every weight by about lr whatever the size of its gradient entry, so bfloat16's rounding in entries near
    zero (a right answer written differently: one D forward on real and fake together) would move D's weights by
    whole steps of either sign, and G's gradient through the updated D would differ by a percent or two."""
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(10)
    G, D = Generator(), Discriminator()
    batches = [(torch.rand(8, 1, 28, 28) * 2 - 1, torch.randn(8, G.z_dim)) for _ in range(calls)]
    opt_G, opt_D = optim.SGD(G.parameters(), lr=0.1), optim.SGD(D.parameters(), lr=0.1)
    return G, D, opt_G, opt_D, *batches


def _run_amp(amp_step, poison=None):
    """Run amp_step once on seed 000's G and D; poison="G" or "D" puts an inf into one gradient of that network
    (as a float16 overflow would). Returns what the checks need."""
    G, D, opt_G, opt_D, (x_real, z) = _amp_problem()
    scaler = _recording_scaler({opt_G: "opt_G", opt_D: "opt_D"})
    names = parameter_names(G=G, D=D)
    before = {net: [p.detach().clone() for p in net.parameters()] for net in (G, D)}
    dtypes = {"G": [], "D": []}
    handles = [net.net[0].register_forward_hook(lambda m, a, out, key=key: dtypes[key].append(out.dtype))
               for key, net in (("G", G), ("D", D))]
    d_batches = []                    # the batch of each D forward before opt_D's first step, through the scaler
    d_stepped = []                    # (which may skip it) or not
    handles.append(opt_D.register_step_pre_hook(lambda *_: d_stepped.append(torch.is_autocast_enabled("cpu"))))
    before_d_step = lambda: not d_stepped and "step(opt_D)" not in scaler.calls   # noqa: E731
    handles.append(D.register_forward_hook(lambda m, args, out: d_batches.append(len(args[0])) if before_d_step()
                                           else None))
    d_backwards = []                  # the backwards that reached D's first layer before opt_D's step
    reached = []                      # "D" and "G" as each backward reaches their first layers before opt_D's step:
                                      # a G after which a D follows was a micro-batch of D's loss going on into G
    def at_D(grad):
        if before_d_step():
            d_backwards.append(1)
            reached.append("D")
    handles.append(D.net[0].weight.register_hook(at_D))
    handles.append(G.net[0].weight.register_hook(lambda grad: reached.append("G") if before_d_step() else None))
    if poison:
        def overflow(grad):
            grad = grad.clone()
            grad.view(-1)[0] = float("inf")
            return grad
        handles.append({"G": G, "D": D}[poison].net[0].weight.register_hook(overflow))
    run = {"error": None, "scale before": scaler.get_scale()}
    with recorded_steps({"opt_G": opt_G, "opt_D": opt_D}, names) as records:
        try:
            amp_step(G, D, opt_G, opt_D, scaler, x_real, z, MAX_NORM, accum=ACCUM)
        except Exception as error:  # reported by the checker
            run["error"] = error
        finally:
            for h in handles:
                h.remove()
    moved = {key: any(not torch.equal(p.detach(), b) for p, b in zip(net.parameters(), before[net]))
             for key, net in (("G", G), ("D", D))}
    run.update(records=records, calls=scaler.calls, dtypes=dtypes, moved=moved, scale=scaler.get_scale(),
               stepped_in_autocast=any(d_stepped),
               d_batches=d_batches, d_backwards=len(d_backwards), micro_batch=len(x_real) // ACCUM,
               into_G="D" in "".join(reached).partition("G")[2])
    return run


def _call_problems(run, g_right):
    """What the calls on the scaler say: unused, no autocast, update() not once, an optimizer stepped around it.
    g_right: whether G's gradient at its step is the reference's."""
    calls, problems = run["calls"], []
    if "scale" not in calls:
        return [_("the scaler passed in never scaled a loss")]
    forwards = len(run["dtypes"]["G"])
    if forwards != 1:
        problems.append(_("G ran {count} forwards in one call of amp_step, where the step makes one fake batch, "
                          "x_fake, for both losses").format(count=forwards))
    for key in ("G", "D"):
        if torch.float32 in run["dtypes"][key]:
            problems.append(_("{net}'s first layer computed in float32: that forward ran outside autocast").format(
                net=key))
            break
        other = next((d for d in run["dtypes"][key] if d != torch.bfloat16), None)
        if other is not None:
            problems.append(_("{net}'s first layer computed in {dtype}, where the exercise's autocast computes in "
                              "bfloat16").format(net=key, dtype=str(other).removeprefix("torch.")))
            break
    largest = max(run["d_batches"], default=0)
    if run["d_backwards"] < ACCUM and largest > run["micro_batch"]:
        problems.append(_("D ran on {count} samples at once before its step, where each of its accum={accum} "
                          "micro-batches holds {size}: D's loss is added up over the micro-batches, one backward "
                          "each").format(count=largest, accum=ACCUM, size=run["micro_batch"]))
    elif 0 < sum(run["d_batches"]) < 2 * ACCUM * run["micro_batch"]:
        problems.append(_("D ran on {seen} samples before its step, where the accum={accum} micro-batches of the real "
                          "and the fake batch hold {total}: part of the batch never reached D's loss").format(
            seen=sum(run["d_batches"]), accum=ACCUM, total=2 * ACCUM * run["micro_batch"]))
    elif 0 < run["d_backwards"] < ACCUM and len(run["records"]["opt_D"]) <= 1:
        problems.append(_(ONE_BACKWARD).format(count=run["d_backwards"], accum=ACCUM))
    if run["into_G"] and g_right:
        problems.append(_("D's backwards before opt_D.step() went on into G's weights: D's loss reached G through "
                          "x_fake, for a gradient of G that no step uses (G's own loss comes after "
                          "opt_G.zero_grad())"))
    elif run["into_G"]:
        problems.append(_("D's backwards before opt_D.step() went on into G's weights: D's loss reached G through "
                          "x_fake, and G's gradient at opt_G.step() is not the reference's"))
    updates = calls.count("update")
    if updates != 1:
        problems.append(_("scaler.update() never ran in one call of amp_step, so the scale never moved") if not updates
                        else _("scaler.update() ran {updates} times in one call of amp_step, so the scale moved more "
                               "than once in one iteration").format(updates=updates))
    for opt in ("opt_D", "opt_G"):
        if f"step({opt})" not in calls and run["records"][opt]:
            problems.append(_("{optimizer}.step() ran, but not through scaler.step({optimizer}) on the scaler passed "
                              "in (one GradScaler for both optimizers): only scaler.step skips the step when the "
                              "gradients hold an inf or NaN (and it unscales them when you have not)").format(
                optimizer=opt))
    return problems


def _same_step(run, reference, opt):
    """Whether opt stepped once, on the reference's gradient (to 1% of its norm)."""
    mine, right = run["records"][opt], reference["records"][opt]
    if len(mine) != 1 or len(right) != 1 or any(g is None for g in mine[0].values()):
        return False
    g, r = flat(mine[0]), flat(right[0])
    return bool((g - r).norm() <= 1e-2 * r.norm())


def _gradient_problems(run, reference):
    """G's and D's gradients at their optimizer's step, compared with the reference step's."""
    problems, scale = [], run["scale before"]
    last_only = _run_amp(variant(reference_amp_step, **CLEARED_EACH_MICRO_BATCH))["records"]["opt_D"]
    if len(run["records"]["opt_D"]) == 1 and len(last_only) == 1 and \
            all(g is not None for g in run["records"]["opt_D"][0].values()) and \
            (flat(run["records"]["opt_D"][0]) - flat(last_only[0])).norm() <= 1e-2 * flat(last_only[0]).norm():
        return [_("D's gradient at opt_D.step() is its last micro-batch's alone: D's .grad was emptied between the "
                  "micro-batches' backwards, so the earlier ones were lost")]
    for opt, net in (("opt_D", "D"), ("opt_G", "G")):
        mine, right = run["records"][opt], reference["records"][opt]
        if len(mine) != 1:
            problems.append(_("{optimizer} stepped {count} times in one call of amp_step; it should step "
                              "once").format(optimizer=opt, count=len(mine)))
            continue
        if all(g is None for g in mine[0].values()):
            problems.append(_("every parameter of {net} has .grad None at {optimizer}.step(), so that step changed "
                              "nothing").format(net=net, optimizer=opt))
            break
        if any(g is None for g in mine[0].values()):
            missing = next(n for n, g in mine[0].items() if g is None)
            problems.append(_("{parameter}.grad is None at {optimizer}.step(): did {net}'s loss reach it, and its "
                              "backward run?").format(parameter=missing, optimizer=opt, net=net))
            break
        g, r = flat(mine[0]), flat(right[0])
        if (g - r).norm() <= 1e-2 * r.norm():
            continue
        ratio = (g.norm() / r.norm()).item()
        tiny = abs(math.log2(max(ratio, 1e-30)) + math.log2(scale)) < 2          # about 1/scale of the right one
        if net == "D" and g.norm() > MAX_NORM * 1.001:
            problems.append(_("D's gradient norm at opt_D.step() is {norm:.3f}, above max_norm = {max_norm}").format(
                norm=g.norm(), max_norm=MAX_NORM))
        elif net == "G" and abs(g.norm() - MAX_NORM) < 1e-3 * MAX_NORM and r.norm() > MAX_NORM * 1.01:
            problems.append(_("G's gradient norm at opt_G.step() is {norm:.3f}, max_norm, where the right one's is "
                              "{right:.3f}: it was cut to max_norm as D's is").format(norm=g.norm(), right=r.norm()))
        elif net == "D" and tiny and run["calls"].index("scale") < run["calls"].index("step(opt_D)"):
            problems.append(_("D's gradient at opt_D.step() is about 1/{scale:g} of the right one: the clip saw the "
                              "scaled gradients ({scale:g} times too large) and cut them to max_norm before "
                              "scaler.step divided them by the scale").format(scale=scale))
        elif tiny:
            loss = "loss_D" if net == "D" else "loss_G"
            problems.append(_("{net}'s gradient at {optimizer}.step() is about 1/{scale:g} of the right one: {loss} "
                              "was not scaled, and scaler.step({optimizer}) divided its gradient by the scale all the"
                              " same").format(net=net, optimizer=opt, scale=scale,
                                                                                  loss=loss))
        elif net == "G" and _through_old_D(g, r):
            problems.append(_("G's gradient at opt_G.step() is the one through D as it was before opt_D's step: "
                              "opt_D's step ran inside an autocast block, and autocast keeps the bfloat16 copies of "
                              "D's weights it made in that block until the block ends, so a D forward after the "
                              "step still used the old weights") if run["stepped_in_autocast"] else
                            _("G's gradient at opt_G.step() is the one through D as it was before opt_D's step: "
                              "G's loss was computed before that step changed D's weights"))
        else:
            what = (_("D's loss on each of its accum micro-batches (x_real and x_fake cut into accum equal chunks) is "
                      "(bce(D(x_part), 1) + bce(D(fake_part), 0)) / 2, divided by accum, their gradients added up "
                      "after one opt_D.zero_grad() and clipped to max_norm") if net == "D" else
                    _("G's loss is bce(D(x_fake), 1) through D after D's step, after opt_G.zero_grad()"))
            problems.append(_("{net}'s gradient at {optimizer}.step() differs from the right one (relative "
                              "difference {difference:.3f}): {what}").format(
                net=net, optimizer=opt, difference=((g - r).norm() / r.norm()).item(), what=what))
        if problems:
            break                # G's step follows D's: a wrong D step says enough
    return problems


def _through_old_D(g, right):
    """Whether G's gradient g is the one through D's weights from before opt_D's step (within bfloat16's percent)."""
    old = flat(_run_amp(variant(reference_amp_step, **G_LOSS_BEFORE_D_STEPS))["records"]["opt_G"][0])
    return (g - old).norm() <= 1e-2 * old.norm() < (right - old).norm()


def _unclipped_steps(amp_step, calls=2):
    """The gradients each optimizer steps on over two calls, with a max_norm so large that the clip never acts (an
    active clip hides a gradient's size: the loss's `/ accum`, its `/ 2`, an earlier call's gradient left in .grad),
    and an inf in one of G's gradients at the first call (so G's step is skipped there, and a .grad left uncleared
    holds the inf into the second); and whether G's .grad still holds an inf at the end."""
    G, D, opt_G, opt_D, *batches = _amp_problem(calls)
    scaler = torch.amp.GradScaler("cpu")
    names = parameter_names(G=G, D=D)
    now = {"call": 0}
    handle = G.net[0].weight.register_hook(
        lambda grad: grad.index_fill(0, torch.tensor([0]), float("inf")) if now["call"] == 0 else grad)
    try:
        with recorded_steps({"opt_D": opt_D, "opt_G": opt_G}, names) as records:
            for now["call"], (x_real, z) in enumerate(batches):
                amp_step(G, D, opt_G, opt_D, scaler, x_real, z, 1e6, accum=ACCUM)
    finally:
        handle.remove()
    return records, any(p.grad is not None and not p.grad.isfinite().all() for p in G.parameters())


def _unclipped_problems(amp_step):
    try:
        mine, inf_kept = _unclipped_steps(amp_step)
    except Exception as error:  # reported as feedback
        return [raised("amp_step", error, _AMP_HINTS)]
    # bfloat16 is coarse (right answers written differently differ by a percent or two here); the mistakes this
    # run is for change a gradient by a factor of 2 or more
    right = _unclipped_steps(reference_amp_step)[0]
    if inf_kept and len(mine["opt_G"]) < len(right["opt_G"]):
        return [_("run twice with an inf in G's gradient at the first call: at the second call G's .grad still held "
                  "that inf, so scaler.step(opt_G) skipped G's step again (opt_G stepped {count} time(s) where the "
                  "reference steps it {expected} time(s))").format(count=len(mine["opt_G"]),
                                                                   expected=len(right["opt_G"]))]
    line = first_difference(mine, right, rtol=0.1)
    return [] if line is None else [_("run twice with a max_norm so large that the clip never acts, and an inf in G's "
                                      "gradient at the first call: {problem}").format(problem=line)]


def _overflow_problems(amp_step):
    """An inf in one network's gradient: that optimizer skips, the other steps, the scale halves once."""
    problems = []
    for net, other in (("D", "G"), ("G", "D")):
        run = _run_amp(amp_step, poison=net)
        opt = f"opt_{net}"
        if run["error"] is not None:
            problems.append(_("with an inf in {net}'s gradient: {problem}").format(
                net=net, problem=raised("amp_step", run["error"], _AMP_HINTS)))
        elif run["moved"][net]:
            problems.append(_("an inf in {net}'s gradient, and {optimizer} stepped all the same").format(
                net=net, optimizer=opt))
        elif not run["moved"][other]:
            problems.append(_("an inf in {net}'s gradient, and opt_{other} skipped its step too: {other}'s gradient "
                              "was finite, and each scaler.step(opt) decides for its own optimizer").format(
                net=net, other=other))
        elif run["scale"] != run["scale before"] / 2:
            problems.append(_("an inf in {net}'s gradient, and the scale went from {before:g} to {after:g} in that "
                              "call, not to half: the update did not see that inf").format(
                net=net, before=run['scale before'], after=run['scale']))
        if problems:
            break
    return problems


def amp_step_checks(amp_step) -> Found:
    """Lesson 10. amp_step(G, D, opt_G, opt_D, scaler, x_real, z, max_norm, accum=2): one d_first_reuse_fake step
    with the forwards and losses under torch.autocast("cpu", dtype=torch.bfloat16), both losses scaled by the one
    scaler, D's gradient added up over accum micro-batches, its norm clipped to max_norm on the true (unscaled) gradients, both optimizers stepped through
    the scaler, and scaler.update() once at the end. Also run with an inf in D's, then in G's gradient."""
    name = "amp_step"
    if not hasattr(torch.amp, "GradScaler"):
        print(_("? {name}: torch {version} has no torch.amp.GradScaler (torch 2.1 lacks it; the reference torch 2.13 "
                "has it): skipped, not checked.").format(name=name, version=torch.__version__))
        return None
    run = _run_amp(amp_step)
    if isinstance(run["error"], TypeError) and "accum" in str(run["error"]):
        return [_("your amp_step takes no accum: its signature is amp_step(G, D, opt_G, opt_D, scaler, x_real, z, "
                  "max_norm, accum=2)")]
    if run["error"] is not None:
        raise Raised(name, run["error"])
    reference = _run_amp(reference_amp_step)
    problems = _call_problems(run, _same_step(run, reference, "opt_G"))
    if not problems:
        problems = _gradient_problems(run, reference)
    if not problems:
        problems = _unclipped_problems(amp_step)
    if not problems:
        problems = _overflow_problems(amp_step)
    return problems


def _amp_calls():
    """Three calls on seed 000's G and D: the first with a max_norm so large that the clip never acts (an active
    clip hides a gradient's size), at the second an inf in one of G's gradients, at the third in one of D's, as a
    float16 overflow would put them."""
    G, D, opt_G, opt_D, (x_real, z) = _amp_problem()
    scaler = torch.amp.GradScaler("cpu")
    now = {"call": 0}

    def overflow(at):
        def hook(grad):
            return grad.index_fill(0, torch.tensor([0]), float("inf")) if now["call"] == at else grad
        return hook
    G.net[0].weight.register_hook(overflow(1))
    D.net[0].weight.register_hook(overflow(2))

    def call(k):
        now["call"] = k
        return G, D, opt_G, opt_D, scaler, x_real, z, 1e6 if k == 0 else MAX_NORM, ACCUM
    return [functools.partial(call, k) for k in range(3)], [G, D, scaler, x_real, z]


AMP_STEP = Exercise("10", "amp_step", reference_amp_step, amp_step_checks, _amp_calls, hints=_AMP_HINTS,
                   what=N_("your amp_step"), success=N_(
                       "autocast forwards, both losses scaled by one GradScaler, D's gradient added up over its "
                       "micro-batches and clipped on its true value, G and D step on the right gradients, an inf "
                       "skips only its own optimizer's step, and one update() halves the scale"))
check_amp_step = AMP_STEP.check
