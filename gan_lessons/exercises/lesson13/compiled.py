"""Lab 6 · A penalty through a compiled D, and an EMA of a compiled G (pytorch/pytorch#91469, wandb/senpai#2899)."""

import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.exercises.lesson13.grading import LABS, Lab, add_lab, lab_exercise
from gan_lessons.exercises.steps import parameter_names
from gan_lessons.exercises.variants import variant
from gan_lessons.i18n import N_, _


class EMA:
    """An EMA of a model's parameters, kept by name."""

    def __init__(self, model, decay=0.9):
        self.decay = decay
        self.shadow = {name: p.detach().clone() for name, p in model.named_parameters()}

    @torch.no_grad()
    def update(self, model):
        for name, p in model.named_parameters():
            if name in self.shadow:
                self.shadow[name].mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def _compiled_problem():
    torch._dynamo.reset()          # a fresh compile for each run (and no recompile limit reached)
    torch.manual_seed(6)
    G_net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    D_net = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    ema = EMA(G_net)
    G, D = torch.compile(G_net, backend="aot_eager"), torch.compile(D_net, backend="aot_eager")
    opt_G, opt_D = optim.Adam(G_net.parameters(), lr=1e-3), optim.Adam(D_net.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(66)
    data = [(torch.randn(8, 2, generator=g) + 2, torch.randn(8, 4, generator=g)) for _ in range(2)]
    shadows = []

    def args(k):                   # the second call with another r1_gamma than the default 10
        if k:
            shadows.append({n: t.clone() for n, t in ema.shadow.items()})
        return (G, D, opt_G, opt_D, ema, *data[k]) + ((5.0,) if k else ())
    return args, {"opt_D": opt_D, "opt_G": opt_G}, parameter_names(G=G_net, D=D_net), {"ema": ema, "shadows": shadows}


def reference_compiled_step(G, D, opt_G, opt_D, ema, x_real, z, r1_gamma=10.0):
    """A non-saturating GAN step with an R1 penalty through the uncompiled D, and the EMA of the uncompiled G."""
    x_fake = G(z)
    x_real = x_real.detach().requires_grad_(True)
    real_pred = D._orig_mod(x_real)
    grad_real, = torch.autograd.grad(real_pred.sum(), x_real, create_graph=True)
    r1 = grad_real.pow(2).sum(1).mean()
    loss_D = F.softplus(-real_pred).mean() + F.softplus(D(x_fake.detach())).mean() + r1_gamma / 2 * r1
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    loss_G = F.softplus(-D(x_fake)).mean()
    opt_G.zero_grad()
    loss_G.backward()
    opt_G.step()
    ema.update(G._orig_mod)


_compiled_no_create_graph = variant(reference_compiled_step, replace={   # the penalty's gradient kept without a graph
    "D._orig_mod(x_real)": "D(x_real)",
    "torch.autograd.grad(real_pred.sum(), x_real, create_graph=True)":
        "torch.autograd.grad(real_pred.sum(), x_real, retain_graph=True)"})


def _compiled_extra(mine, ref):
    got = mine["shadows"] + [mine["ema"].shadow]
    want = ref["shadows"] + [ref["ema"].shadow]
    for k, (a, b) in enumerate(zip(got, want), 1):
        if a.keys() != b.keys():
            return [_("the EMA's names changed ({name}): they are not the uncompiled G's parameter names").format(
                name=repr(sorted(a)[0]))]
        wrong = [n for n in b if not torch.allclose(a[n], b[n], atol=1e-6)]
        if wrong:
            start = _compiled_problem()[3]["ema"].shadow
            still = all(torch.equal(a[n], start[n]) for n in wrong)
            if still:
                return [_("after call {call}, the EMA weights {name} differ from the reference's: they are still the "
                          "initial ones, so ema.update() matched none of the parameters it was given (a compiled G "
                          "names them `_orig_mod.0.weight`, ...; the EMA knows them as `0.weight`)").format(
                    call=k, name=wrong[0])]
            return [_("after call {call}, the EMA weights {name} differ from the reference's").format(call=k,
                                                                                                     name=wrong[0])]
    return []


COMPILED_HINTS = [
    ("backward through the graph a second time",
     N_("autograd.grad went back through D's output on the real batch and freed that part of the graph, as a backward "
        "does unless told to keep it; loss_D's backward then needs the same part again")),
]
add_lab(Lab("compiled", "a penalty through a compiled D, an EMA of a compiled G", _compiled_problem,
         reference_compiled_step, calls=2, extra=_compiled_extra, hints=COMPILED_HINTS, mistakes=[
             (_compiled_no_create_graph, N_("the error went away, and the R1 penalty is a constant: the gradient "
                                            "inside it has no graph of its own, so the penalty adds to loss_D and "
                                            "trains nothing (the doctor warns about it)")),
             (variant(reference_compiled_step, replace={"r1_gamma / 2 * r1": "10.0 / 2 * r1"}),
              N_("the second call passes r1_gamma=5.0, and the R1 term was weighted as with the default 10"))]))


# What a student's copy may not say before this lab's grader passes (words that name the bug or its fix, in either
# language, matched without case), and what no grader message may print (the fix's code).
TELLS = ("_orig_mod", "uncompiled", "create_graph", "names g's parameters", "未编译", "参数命名")
FIX_CODE = ("D._orig_mod", "G._orig_mod")


# Lab 6. train_step(G, D, opt_G, opt_D, ema, x_real, z) on compiled G and D (backend aot_eager), twice.
TRAIN_STEP = lab_exercise("train_step", reference_compiled_step, LABS["compiled"], N_(
    "runs on the compiled models, opt_D and opt_G step on the reference's gradients (the R1 penalty "
    "included), and the EMA follows G"))
check_compiled_step = TRAIN_STEP.check
