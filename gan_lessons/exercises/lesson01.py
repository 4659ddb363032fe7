"""Lesson 01's exercises: a manual SGD step on leaves (check_sgd_step), and DCGAN's weight initialisation
without the leaf error (check_init)."""
import math

import torch
from torch import nn, optim

from gan_lessons.exercises.exercise import Exercise, Found, Raised
from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, data_uses
from gan_lessons.i18n import N_, _
from gan_lessons.models import Reshape

# --- lesson 01: a manual SGD step on leaves ------------------------------------------------------------------
NAMES = ["w", "u", "b"]     # u, whose .grad stays None, in the middle: a loop that skips the last is seen


def _sgd_problem():
    """w and b, which the loss reaches, and u, which it does not: u.grad stays None, as a frozen layer's does."""
    torch.manual_seed(1)
    w = torch.randn(3, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    u = torch.ones(2, requires_grad=True)
    x, target = torch.randn(5, 3), torch.randn(5)

    def loss():
        return ((x @ w + b - target) ** 2).mean()
    return [w, u, b], loss


def _none_grad_problem(params, had_grad, before, reads):
    """What a "NoneType" error from the student's step means: .grad cleared before the update used it, or a
    parameter whose .grad is None (u) not skipped; and what else the parameters that had a gradient show."""
    cleared = [n for n, p, had, old in zip(NAMES, params, had_grad, before)
               if had and p.grad is None and torch.equal(p.detach(), old)]
    if cleared:
        return [_(CLEARED).format(name=cleared[0])]
    problems = [_("u's .grad is None (the loss never reaches u, as no loss reaches G in a D step on a detached "
                  "fake), and your step used it anyway")]
    unchanged = [n for n, p, had, old in zip(NAMES, params, had_grad, before) if had and torch.equal(p.detach(), old)]
    if unchanged:
        problems.append(_("{name} did not change either, though its .grad held a gradient: nothing was written into "
                          "the parameter itself").format(name=unchanged[0]))
    if reads.count:
        problems.append(_(_DATA_READ))
    return problems


_DATA_READ = N_("your step (or a function it calls) goes through `.data` of a parameter: it runs, but `.data` hides the change from "
                "autograd's version counter, so a graph that saved the parameter gives a silently wrong gradient "
                "(lesson 03)")
CLEARED = N_("{name} did not change, and its .grad is gone: it was cleared before the update used it")


def _param_problems(step, params, ref_params, before, grads, lrs):
    """What is wrong with each parameter after the step-th call (lrs: the lr of each call so far)."""
    problems = []
    for n, p, ref, old, grad in zip(NAMES, params, ref_params, before, grads):
        had = grad is not None
        if not p.is_leaf:
            problems.append(_("{name} is no longer a leaf (grad_fn {grad_fn}): the update was recorded in the graph "
                              "as an operation").format(name=n, grad_fn=type(p.grad_fn).__name__))
        elif not p.requires_grad:
            problems.append(_("{name} no longer requires grad after your step, so no later backward gives it a "
                              "gradient").format(name=n))
        elif had and p.grad is None and torch.equal(p.detach(), old):
            problems.append(_(CLEARED).format(name=n))
        elif had and p.grad is not None and not p.grad.any() and torch.equal(p.detach(), old):
            problems.append(_("{name} did not change, and its .grad is all zeros: it was zeroed before the update "
                              "used it").format(name=n))
        elif had and torch.equal(p.detach(), old):
            problems.append(_("{name} did not change at step {step}, though its .grad held a gradient: nothing was "
                              "written into the parameter itself").format(name=n, step=step))
        elif not torch.allclose(p.detach(), ref.detach(), atol=1e-6):
            kept_lr = had and step > 1 and torch.allclose(p.detach(), old - lrs[0] * grad, atol=1e-6)
            why = (_("u's .grad is None, and your step changed u all the same") if n == "u" else
                   _("the update at step {step} moved it by {first} times its gradient, the lr of the first call, "
                     "where this call passed lr={lr}").format(step=step, first=lrs[0], lr=lrs[-1]) if kept_lr else
                   _("the update at step 1 matched p - lr * p.grad and the one at step 2 did not: the update "
                     "changes from one call to the next") if step == 2
                   else _moved_by(p.detach() - old, lrs[-1] * grad) if had else _("it had no gradient to move by"))
            problems.append(_("{name} after step {step} is {value}, expected {expected}: {why}").format(
                name=n, step=step, value=p.detach().tolist(), expected=ref.detach().tolist(), why=why))
        elif p.grad is not None and p.grad.abs().sum() > 0:
            problems.append(_("{name}.grad still holds the gradient after your step, and the next backward adds to "
                              "it").format(name=n))
        elif p.grad is not None:
            problems.append(_("{name}.grad is a tensor of zeros after your step, where opt.zero_grad() leaves None "
                              "there").format(name=n))
    return problems


def _made_anew(returned, params, ref_params) -> list:
    """The names of the parameters whose right new values `returned` holds (in a list, tuple or dict) as other
    tensors while the parameter itself was left as it was."""
    values = returned.values() if isinstance(returned, dict) else returned if isinstance(returned, (list, tuple)) \
        else [returned]
    tensors = [t for t in values if isinstance(t, torch.Tensor) and all(t is not p for p in params)]
    return [n for n, p, ref in zip(NAMES, params, ref_params)
            if not torch.allclose(p.detach(), ref.detach(), atol=1e-6)
            and any(t.shape == ref.shape and torch.allclose(t.detach(), ref.detach(), atol=1e-6) for t in tensors)]


def _moved_by(change, step) -> str:
    """What the change a parameter took is, seen against lr * its gradient: how many times it, the other way, or
    not along it at all."""
    k = float((change * step).sum() / (step * step).sum().clamp_min(1e-30))
    if torch.allclose(change, k * step, atol=1e-6):
        return (_("it moved by +lr * p.grad, up the gradient, so the loss grows") if abs(k - 1) < 1e-3 else
                _("it moved up the gradient, {k} times as far as lr * p.grad") if k > 0 else
                _("it moved down the gradient, {k} times as far as lr * p.grad")).format(k=round(abs(k), 3))
    return _("its change is not a multiple of lr * p.grad: it did not move along its gradient")


def reference_sgd_step(params, lr):
    """The lesson's answer: SGD's update of every parameter that has a gradient, then its .grad cleared."""
    with torch.no_grad():
        for p in params:
            if p.grad is None:          # no loss reached p: SGD leaves it alone
                continue
            p -= lr * p.grad
            p.grad = None


def _sgd_calls():
    """Two steps, each after a backward of the problem's loss (the second one adds to what the first left)."""
    params, loss = _sgd_problem()

    def after_backward(lr):
        def call():
            loss().backward()
            return params, lr
        return call
    return [after_backward(0.1), after_backward(0.05)], [params]


def sgd_checks(sgd_step, lr=0.1) -> Found:
    """Lesson 01. sgd_step(params, lr) must update each leaf in place by lr * p.grad, keep it a leaf that
    requires grad, leave alone a parameter whose .grad is None (as optim.SGD does), and clear .grad to None (as
    opt.zero_grad() does) so the next backward starts fresh. Reading `.data` is named as the wrong route (lesson 03)."""
    params, loss = _sgd_problem()
    checked = list(params)              # the parameters themselves, whatever the answer does to the list
    ref_params, ref_loss = _sgd_problem()
    ref_opt = optim.SGD(ref_params, lr=lr)
    problems: list = []
    lrs = (lr, lr / 2)                  # the second call with another lr, as a schedule would pass
    for step, step_lr in enumerate(lrs, start=1):
        before = [p.detach().clone() for p in checked]
        loss().backward()
        ref_opt.param_groups[0]["lr"] = step_lr
        ref_opt.zero_grad()
        ref_loss().backward()
        ref_opt.step()
        grads = [None if p.grad is None else p.grad.clone() for p in checked]
        try:
            with data_uses() as reads:
                returned = sgd_step(params, step_lr)
        except Exception as error:
            if "NoneType" not in str(error) or "ellipsis" in str(error) or isinstance(error, NotImplementedError):
                raise Raised("sgd_step", error) from error
            problems += _none_grad_problem(checked, [g is not None for g in grads], before, reads)
            break
        if reads.count:
            problems.append(_(_DATA_READ))
            break
        if len(params) != len(checked) or any(a is not b for a, b in zip(params, checked)):
            problems.append(_("the list of parameters passed in holds {now} entries after your step, where it held "
                              "{was}: the caller's next step updates what is left in it").format(
                now=len(params), was=len(checked)))
            break
        problems += _param_problems(step, checked, ref_params, before, grads, lrs[:step])
        made = _made_anew(returned, checked, ref_params)
        if problems and made:
            problems = [_("your step returned the new values of {names} as new tensors, and the parameters "
                          "themselves did not change: the model and its optimizer hold those, not what a step "
                          "returns").format(names=", ".join(made))]
        if problems:
            break
    return problems


# --- lesson 01: DCGAN's weight initialisation, without the leaf error ----------------------------------------
def _init_model():
    """A small generator. Its PReLU (as SRGAN's generator has) is a module with a weight that DCGAN's init leaves
    alone. Its BatchNorm biases start at 0.1, not at PyTorch's 0, so an init that leaves them shows."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(64, 256), nn.BatchNorm1d(256), nn.ReLU(), Reshape(16, 4, 4),
                          nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.PReLU(8),
                          nn.Conv2d(8, 1, 3, 1, 1))
    with torch.no_grad():
        for norm in (model[1], model[5]):
            norm.bias.fill_(0.1)
    return model


INIT_KINDS = (nn.Linear, nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm1d, nn.BatchNorm2d)
SIGMAS = 5  # a right init fails a module's test about once in 3.5 million draws
STD = 0.02


def _drawn_from(w, mean, std=STD):
    """Whether the values of w could come from N(mean, std): its mean and standard deviation within 5 standard
    errors of the target's, so a correct init passes however few elements the tensor has (BatchNorm2d(8) has 8)."""
    n = w.numel()
    mean_ok = abs(w.mean().item() - mean) <= SIGMAS * std / math.sqrt(n)
    spread = SIGMAS * std / math.sqrt(2 * (n - 1))          # the standard error of a sample's std
    return mean_ok and std - spread <= w.std().item() <= std + spread


NORMAL_SHARE = 0.6827    # the share of a normal distribution's values within one standard deviation of its mean


def _share_within(w, mean, std=STD) -> float:
    """The share of w's values within one std of the mean."""
    return ((w - mean).abs() <= std).float().mean().item()


def _bell_shaped(w, mean, std=STD):
    """Whether w's values spread as a normal distribution's do (checked where w has 1,000 values or more): the share
    within one std of the mean within 5 standard errors of a normal's 68.3% (a uniform of the same std has 57.7%)."""
    n = w.numel()
    if n < 1000:
        return True
    return abs(_share_within(w, mean, std) - NORMAL_SHARE) <= SIGMAS * math.sqrt(NORMAL_SHARE * (1 - NORMAL_SHARE) / n)


MIX_UPS = (math.sqrt(STD), STD ** 2)      # the stds of N(0, 0.02) misread: 0.02 as a variance, or squared


def _weight_hint(kind, w, mean, before, changed=True, scales=MIX_UPS):
    """Why a weight does not look drawn from N(mean, 0.02): the mistake its values show, where one fits. `changed`:
    whether anything wrote to it (its version counter moved). scales: the stds of the two mix-ups (0.02 taken as
    a variance, or squared) that every wrong weight of the model fits, the only ones a weight may be told of."""
    norm = kind.startswith("BatchNorm")
    if torch.equal(w, before) and not changed:
        return _("it is untouched: does your function reach {kind} modules? model.apply calls it on every module, "
                 "and DCGAN's init covers Linear, Conv2d, ConvTranspose2d and BatchNorm").format(kind=kind)
    if w.numel() > 1 and not (w - w.flatten()[0]).any():
        return _("every entry is {value:g}: it was filled with one number, where DCGAN draws each entry from "
                 "N({mean:g}, 0.02)").format(value=w.flatten()[0].item(), mean=mean)
    if math.sqrt(STD) in scales and _drawn_from(w, mean, math.sqrt(STD)):
        return _("its std is close to √0.02 ≈ {std:.3f}, the std of N({mean:g}, 0.02) if 0.02 were its variance: "
                 "0.02 is the standard deviation").format(std=math.sqrt(STD), mean=mean)
    if STD ** 2 in scales and _drawn_from(w, mean, STD ** 2):
        return _("its std is 0.02² = {variance:g}, the square of the 0.02 in N(0, 0.02)").format(variance=STD ** 2)
    if norm and _drawn_from(w, 0.0):
        return _("BatchNorm's weight is the scale that multiplies the normalised activations: DCGAN draws it "
                 "around 1, from N(1, 0.02); around 0 it silences the layer")
    if _drawn_from(w, mean) and not _bell_shaped(w, mean):
        return _("its mean and std are right, but {share:.0%} of its values lie within one std of the mean, where a "
                 "normal distribution has 68% there: they were not drawn from N({mean:g}, 0.02)").format(
            share=_share_within(w, mean), mean=mean)
    if not norm and _drawn_from(w, 1.0):
        return _("only BatchNorm's weight is drawn around 1; a Linear or convolution weight is drawn around 0")
    return _("it should be drawn from N({mean:g}, 0.02): mean {mean:g}, standard deviation 0.02").format(mean=mean)


def _init_problems(model, values, versions=None):
    """What is wrong with model's values after init: DCGAN's N(0, 0.02) weights for Linear and convolutions,
    N(1, 0.02) for BatchNorm's weight, zeros for every bias. `versions`: each parameter's version before init. A
    weight of one repeated number fails however few entries it has (a BatchNorm2d(8) left at PyTorch's ones would
    pass a test of 8 draws alone)."""
    problems = []
    weights = [(m.weight.detach(), 1.0 if type(m).__name__.startswith("BatchNorm") else 0.0)
               for m in model.modules() if isinstance(m, INIT_KINDS)]
    wrong = {mean: [w for w, m in weights if m == mean and not _drawn_from(w, mean)] for mean in (0.0, 1.0)}
    scales = {mean: tuple(scale for scale in MIX_UPS                      # one line draws the weights of a kind
                          if all(_drawn_from(w, mean, scale) for w in ws))  # (BatchNorm's, or the others'): a
              for mean, ws in wrong.items()}                                # mix-up fits all of them, or none is told
    for n, m in model.named_modules():
        if isinstance(m, INIT_KINDS):
            kind = type(m).__name__
            mean = 1.0 if kind.startswith("BatchNorm") else 0.0
            w = m.weight.detach()
            constant = w.numel() > 1 and not (w - w.flatten()[0]).any()
            changed = versions is None or m.weight._version != versions[f"{n}.weight"]
            if constant or not _drawn_from(w, mean) or not _bell_shaped(w, mean):
                problems.append(_("{kind} {module}: weight has mean {mean:.3f} and std {std:.3f}; {hint}").format(
                    kind=kind, module=n, mean=w.mean().item(), std=w.std().item(),
                    hint=_weight_hint(kind, w, mean, values[f'{n}.weight'], changed, scales[mean])))
            if m.bias is not None and m.bias.detach().abs().max() > 0:
                problems.append(_("{kind} {module}: bias is not zero, where DCGAN starts every bias at 0").format(
                    kind=kind, module=n))
    return problems


def init_checks(init_weights) -> Found:
    """Lesson 01. model.apply(init_weights) must set DCGAN's initial values in place (not through `.data`), and
    leave every parameter the same leaf that requires grad, so the optimizer built afterwards still trains it."""
    model = _init_model()
    before = {n: p for n, p in model.named_parameters()}
    values = {n: p.detach().clone() for n, p in model.named_parameters()}
    versions = {n: p._version for n, p in model.named_parameters()}
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    try:
        with data_uses() as reads:
            model.apply(init_weights)
    except Exception as error:
        raise Raised("init_weights", error, AUTOGRAD_HINTS + [
            ("'NoneType' object has no attribute", N_("a layer built with bias=False (model[4], a ConvTranspose2d, "
                                                      "as DCGAN's are) has m.bias None"))]) from error
    problems = []
    for n, p in model.named_parameters():
        if p is not before[n]:
            problems.append(_("parameter {name} was replaced by a new tensor; an optimizer made before init would "
                              "still hold the old one").format(name=n))
        elif not p.is_leaf:
            problems.append(_("parameter {name} is no longer a leaf (grad_fn {grad_fn}): the change was recorded in "
                              "the graph as an operation").format(name=n, grad_fn=type(p.grad_fn).__name__))
        elif not p.requires_grad:
            problems.append(_("parameter {name} no longer requires grad after init, so no backward gives it a "
                              "gradient").format(name=n))
    if not problems and all(torch.equal(p.detach(), values[n]) for n, p in model.named_parameters()):
        problems.append(_("init_weights changed nothing: model.apply(init_weights) called it once per module, and no "
                          "weight or bias moved"))
    if problems:
        return problems[:4]
    problems = _init_problems(model, values, versions)
    for n, m in model.named_modules():
        moved = [k for k, p in m.named_parameters(recurse=False) if not torch.equal(p.detach(), values[f"{n}.{k}"])]
        if moved and not isinstance(m, INIT_KINDS):
            problems.append(_("{kind} {module}: its {parameter} changed, though DCGAN's init is for Linear, "
                              "convolutions and BatchNorm alone").format(kind=type(m).__name__, module=n,
                                                                          parameter=moved[0]))
    for n, b in model.named_buffers():
        if not torch.equal(b, buffers[n]):
            module, _dot, buffer = n.rpartition(".")
            problems.append(_("{kind} {module}: its buffer {buffer} changed, though DCGAN's init sets weights and "
                              "biases alone (a BatchNorm's running statistics are what it has measured)").format(
                kind=type(model.get_submodule(module)).__name__, module=module, buffer=buffer))
            break
    if reads.count:
        problems.append(_("your init goes through `.data` of a parameter (the old DCGAN tutorial's `m.weight.data`): "
                          "it works before training, but `.data` changes a parameter behind autograd's version "
                          "counter, the route lesson 03 shows giving silently wrong gradients"))
    if not problems:
        model(torch.randn(4, 64)).mean().backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None]
        if missing:
            problems.append(_("after init, backward no longer reaches {name}").format(name=missing[0]))
    return problems[:6]


def reference_init_weights(m):
    """The lesson's answer: DCGAN's initial values for module m, set in place under no_grad."""
    if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm1d, nn.BatchNorm2d)):
        mean = 1.0 if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) else 0.0
        with torch.no_grad():
            m.weight.normal_(mean, 0.02)
            if m.bias is not None:  # DCGAN's convolutions are built with bias=False
                m.bias.zero_()


def _init_calls() -> tuple[list, list]:
    """model.apply(init_weights): one call per module, children first, as apply() makes them."""
    model = _init_model()
    modules: list = []
    model.apply(modules.append)
    return [(m,) for m in modules], [model]


SGD_STEP = Exercise("01", "sgd_step", reference_sgd_step, sgd_checks, _sgd_calls, hints=AUTOGRAD_HINTS,
                    flags=True, what=N_("your sgd_step"), success=N_(
                        "two steps give SGD's values, u (whose .grad is None) is left alone, the parameters are still "
                        "leaves that require grad, and .grad is cleared after each update"))
INIT = Exercise("01", "init_weights", reference_init_weights, init_checks, _init_calls, what=N_("your init_weights"),
                success=N_("DCGAN's values set in place; every parameter is still the same leaf, requires grad and "
                           "gets a gradient"))
check_sgd_step = SGD_STEP.check
check_init = INIT.check
