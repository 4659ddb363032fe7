"""Lab 4 · AMP with one GradScaler and two optimizers (nerfacc#307, neosr PRs #9 and #50)."""
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.exercises.feedback import SCALER_HINTS
from gan_lessons.exercises.lesson13.grading import LABS, Lab, add_lab, lab_exercise
from gan_lessons.exercises.steps import first_difference, parameter_names
from gan_lessons.i18n import N_, _


def _amp_nets():
    net_g = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))
    net_d = nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4, 1, 0))
    return net_g, net_d


AMP_INF = {2: "optimizer_d", 3: "optimizer_g"}   # call -> the optimizer one of whose scaled gradients is inf then
AMP_CALLS = 4
# In bfloat16, a right step written another way (backward(inputs=...), D's two terms scaled apart) is 0.21% of the
# largest gradient entry away from the reference, and a step whose D steps before G's loss goes through it 0.29%:
# no tolerance tells them apart there. So the lab is also run with autocast switched off, where those right steps
# agree with the reference to float32's rounding and D's step first differs by 4e-4; EXACT_ATOL sits between the
# two (tests/lessons/test_checkers_lesson12.py checks both sides by a factor of 10).
EXACT_ATOL = 1e-5


def _amp_problem():
    """Four calls; at call 2 one of D's scaled gradients is inf, at call 3 one of G's, as an overflow would make
    them (a hook on each network's first weight), so a grader sees which step the scaler skips and how it scales;
    call 4 is clean again, so an inf left in a .grad shows. Each network's first layer notes the dtype it computed
    in."""
    torch.manual_seed(4)
    net_g, net_d = _amp_nets()
    optimizer_g, optimizer_d = optim.Adam(net_g.parameters(), lr=1e-4), optim.Adam(net_d.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=1)
    g = torch.Generator().manual_seed(44)
    data = [(torch.rand(2, 3, 8, 8, generator=g), torch.rand(2, 3, 8, 8, generator=g)) for _ in range(AMP_CALLS)]
    scales, stepped, now, dtypes = [], [], {"call": 0}, {"net_g": set(), "net_d": set()}
    opts = {"optimizer_g": optimizer_g, "optimizer_d": optimizer_d}

    def overflow(name):
        def hook(grad):
            if AMP_INF.get(now["call"]) != name:
                return grad
            grad = grad.clone()
            grad.view(-1)[0] = float("inf")
            return grad
        return hook
    net_g[0].weight.register_hook(overflow("optimizer_g"))
    net_d[0].weight.register_hook(overflow("optimizer_d"))
    for key, net in (("net_g", net_g), ("net_d", net_d)):
        net[0].register_forward_hook(lambda m, args, out, key=key: dtypes[key].add(out.dtype))
    for name, opt in opts.items():
        opt.register_step_pre_hook(lambda o, a, kw, name=name: stepped.append((now["call"], name)))

    def args(k):
        now["call"] = k + 1
        scales.append(scaler.get_scale())
        return net_g, net_d, optimizer_g, optimizer_d, scaler, *data[k]
    return args, opts, parameter_names(net_g=net_g, net_d=net_d), \
        {"scaler": scaler, "scales": scales, "stepped": stepped, "nets": {"optimizer_g": net_g, "optimizer_d": net_d},
         "dtypes": dtypes}


def reference_optimize_parameters(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """neosr-style G then D step under bfloat16 autocast, one GradScaler: both steps through it, one update()."""
    for p in net_d.parameters():
        p.requires_grad = False
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = net_g(lq)
        l_g_pix = F.l1_loss(output, gt)
        l_g_gan = F.softplus(-net_d(output)).mean()
        l_g_total = l_g_pix + 0.1 * l_g_gan
    optimizer_g.zero_grad()
    scaler.scale(l_g_total).backward()
    scaler.step(optimizer_g)
    for p in net_d.parameters():
        p.requires_grad = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        l_d_real = F.softplus(-net_d(gt)).mean()
        l_d_fake = F.softplus(net_d(output.detach())).mean()
    optimizer_d.zero_grad()
    scaler.scale(l_d_real + l_d_fake).backward()
    scaler.step(optimizer_d)
    scaler.update()


def _amp_steps(mine, ref):
    """A network computed in float32 under the student's autocast; else which optimizer stepped at which call,
    against the reference's scaler (which skips a step on an inf): the steps each optimizer took before the first
    call where they differ, and what differs there."""
    for key, seen in mine["dtypes"].items():
        if torch.float32 in seen:
            return {}, [_("{net}'s first layer computed in float32, where the reference's computes in "
                          "bfloat16").format(net=key)]
    got, want = set(mine["stepped"]), set(ref["stepped"])
    for call, name in sorted(got ^ want)[:1]:
        before = {n: sum(1 for c, m in ref["stepped"] if m == n and c < call) for n in mine["nets"]}
        return before, _amp_step_problem(mine, got, call, name)
    return {}, []


def _amp_step_problem(mine, got, call, name):
    if (call, name) not in got:
        return [_("call {call}: {optimizer} did not step, where the reference's does: the reference's gradients at "
                  "that call were finite (a scaler skips only the optimizer whose gradients hold an inf)").format(
            call=call, optimizer=name)]
    bad = sum(int((~torch.isfinite(p)).sum()) for p in mine["nets"][name].parameters())
    return [_("call {call}: {optimizer} stepped although one of its gradients was inf, a step the reference's scaler "
              "skips; {optimizer}'s weights now hold {count} inf or nan value(s)").format(call=call, optimizer=name,
                                                                                        count=bad)]


def _amp_extra(mine, ref):
    got, want = mine["scales"] + [mine["scaler"].get_scale()], ref["scales"] + [ref["scaler"].get_scale()]
    if got != want:
        k = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        if k in AMP_INF:
            return [_("the scale after call {call} is {scale:g} where the reference's is {reference:g}: the inf in "
                      "{optimizer}'s gradients at call {call} did not halve the scale the next call uses").format(call=k, scale=got[k], reference=want[k],
                                                               optimizer=AMP_INF[k])]
        return [_("the scale after call {call} is {scale:g} where the reference's is {reference:g}: in that call it "
                  "went from {start:g} to {scale:g}, where the reference's doubles once per call without an inf").format(
            call=k, scale=got[k], reference=want[k], start=got[k - 1])]
    return []


@contextmanager
def _autocast_off():
    """Every torch.autocast (torch.amp.autocast, and the older torch.cpu.amp.autocast, its subclass) made within the
    block is made with enabled=False: the step runs in float32, as written otherwise."""
    autocast = torch.amp.autocast_mode.autocast
    original = autocast.__init__

    def disabled(self, device_type, *args, **kwargs):
        if len(args) >= 2:                        # (dtype, enabled, ...) given by position
            args = (args[0], False, *args[2:])
        else:
            kwargs["enabled"] = False
        original(self, device_type, *args, **kwargs)
    autocast.__init__ = disabled
    try:
        yield
    finally:
        autocast.__init__ = original


def _amp_exact(step):
    """What the run in float32 shows and the bfloat16 run cannot: the first gradient off the reference's, both run
    with autocast off."""
    lab = LABS["amp"]
    with _autocast_off():
        mine, _state, error = lab.run(step)
        reference = lab.run(reference_optimize_parameters)[0]
    if error is not None:
        return []
    wrong = first_difference(mine, reference, EXACT_ATOL, causes=False)
    return [_("{problem} (with autocast switched off, where the reference's steps are exact to float32's "
              "rounding)").format(problem=wrong)] if wrong else []


add_lab(Lab("amp", "AMP: one GradScaler, two optimizers", _amp_problem, reference_optimize_parameters,
            calls=AMP_CALLS, atol=2e-2, extra=_amp_extra, first=_amp_steps, exact=_amp_exact, hints=SCALER_HINTS))


# What a student's copy may not say before this lab's grader passes (words that name the bug or its fix, in either
# language, matched without case), and what no grader message may print (the fix's code).
TELLS = ("around the scaler", "1024x", "1024 倍", "2^10 = 1024", "1024 times", "scaler.step(optimizer_g)", "update() per", "second `scaler.update()`", "绕过")
FIX_CODE = ("scaler.step(optimizer_g)", "scaler.step(optimizer_d)", "scaler.unscale_(optimizer")


# Lab 4. optimize_parameters(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt), four iterations, with one
# GradScaler (init_scale 2**10, growth_interval 1: the scale doubles at each update() without an inf); an inf in one
# of D's scaled gradients at call 2 and in one of G's at call 3; then the same four in float32.
OPTIMIZE_PARAMETERS = lab_exercise("optimize_parameters", reference_optimize_parameters, LABS["amp"], N_(
    "both optimizers step through the one scaler on the reference's (unscaled) gradients, each skips the "
    "call where one of its gradients is inf, and the scale follows the reference's (2x per clean call, "
    "halved after an inf)"))
check_amp_lab = OPTIMIZE_PARAMETERS.check
