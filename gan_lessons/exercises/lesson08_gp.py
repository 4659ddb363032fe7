"""Lesson 08's first build: WGAN-GP's gradient penalty for a conditional critic D(x_cond, x), as pix2pix's is. The
checker binds the condition (D_c(x) = D(x_cond, x)) to compare with the package's unconditional penalty and to reuse
lesson08.py's list of the mistakes people make, plus the one a second input invites: a gradient with respect to both
inputs."""
import torch
from torch import nn

from gan_lessons.exercises.exercise import Exercise, Found, attempt, backward_through
from gan_lessons.exercises.lesson08 import (
    CONSTANT,
    MEAN_OF_SCORES,
    SCALAR,
    SECOND,
    UNPACK,
    grad_at,
    graph_problems,
    leaves_of,
    shape_problem,
    value_problems,
    watching,
    weight_grad,
)
from gan_lessons.exercises.steps import Backwards, left_as_given
from gan_lessons.i18n import N_, _
from gan_lessons.models import Reshape

_GP_HINTS = [
    ("must match the size of tensor",
     N_("eps, one number per image, was not lined up with the batch, the images' first dimension: broadcasting "
        "matches shapes from the right")),
    ("One of the differentiated Tensors does not require grad",
     N_("x_hat did not require grad when D saw it, so D's scores have no graph back to it")),
    ("missing 1 required positional argument",
     N_("D is conditional: it takes two arguments, D(x_cond, x), the condition first")),
    SCALAR, SECOND, CONSTANT, UNPACK]
class _Conditional(nn.Module):
    """A conditional critic, as pix2pix's: D(x_cond, x) scores an image x given the image it was made from."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(36, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), Reshape())

    def forward(self, x_cond, x):
        return self.net(torch.cat([x_cond.flatten(1), x.flatten(1)], dim=1))


class _Given(nn.Module):
    """D with its condition bound: D_c(x) = D(x_cond, x), so the unconditional penalties apply to it."""

    def __init__(self, D, x_cond, swapped=False):
        super().__init__()
        self.D, self.x_cond, self.swapped = D, x_cond, swapped

    def forward(self, x):
        return self.D(x, self.x_cond) if self.swapped else self.D(self.x_cond, x)


def _conditional_critic():
    """The conditional critic, a G that maps a condition to an image (the fakes still carry G's graph), one batch of 5
    conditions, 5 real images and 5 fakes (2-channel, 3x3), and one eps per image, shape (5,), each far from the
    others and from 0 and 1 (0.46, 0.53, 0.64, 0.17, 0.72), so a mix is told from another."""
    torch.manual_seed(8)
    D = _Conditional()
    G = nn.Sequential(nn.Flatten(), nn.Linear(18, 18), nn.Unflatten(1, (2, 3, 3)))
    x_cond, x_real = torch.randn(5, 2, 3, 3), torch.randn(5, 2, 3, 3)
    return D, G, x_cond, x_real, G(x_cond), torch.rand(5, generator=torch.Generator().manual_seed(82))


def _both_inputs(D, x_cond, x_hat):
    """What a student gets who takes the gradient with respect to both of D's inputs and one norm over the pair."""
    c, x = x_cond.detach().requires_grad_(True), x_hat.detach().requires_grad_(True)
    scores = D(c, x)
    g_c, g_x = torch.autograd.grad(scores, (c, x), grad_outputs=torch.ones_like(scores), create_graph=True)
    return torch.cat([g_c.flatten(1), g_x.flatten(1)], dim=1)


def _gp_mistakes(D, x_real, x_fake, eps):
    """(value, hint) of the wrong penalties people write, on the checker's batch (a wrong mix is told by what D was
    given: _mixing)."""
    e = eps.view(-1, 1, 1, 1)
    x_hat = e * x_real + (1 - e) * x_fake.detach()
    g = grad_at(D, x_hat)
    norms = g.flatten(1).norm(2, dim=1)
    return [
        (((g.norm(2) - 1) ** 2), _("one norm over the whole batch's gradient, where the penalty is on each image's "
                                   "own gradient norm")),
        (((g.norm(2, dim=1) - 1) ** 2).mean(), _("g.norm(2, dim=1) of an image-shaped gradient (N, C, H, W) is a "
                                                 "norm across the channels at each pixel, not one norm per image")),
        (((norms - 1) ** 2).sum(), _("the sum over the batch: the penalty is the batch mean")),
        ((norms.mean() - 1) ** 2, _("(mean norm - 1)²: the mean was taken before the square, not each image's "
                                    "(norm - 1) squared")),
        ((norms ** 2).mean(), _("the mean squared norm, with no target: WGAN-GP pulls each norm toward 1")),
        (((norms ** 2 - 1) ** 2).mean(), _("the squared norm in place of the norm: (‖g‖² - 1)²")),
        (((norms / len(x_real) - 1) ** 2).mean(), _(MEAN_OF_SCORES).format(count=len(x_real))),
        (((g.flatten(1).norm(2, dim=0) - 1) ** 2).mean(), _("a norm over dim 0 of the flattened gradient (N, C*H*W) "
                                                            "is one norm per pixel across the batch, not one per "
                                                            "image")),
        (((g.norm(2, dim=(2, 3)) - 1) ** 2).mean(), _("a norm over the height and width is one norm per channel of "
                                                      "each image, not one over the whole image")),
        ((g.mean(0).norm(2) - 1) ** 2, _("one norm of the batch's mean gradient, where the penalty is on each "
                                         "image's own gradient norm")),
        ((torch.relu(norms - 1) ** 2).mean(), _("only norms above 1 are penalised: WGAN-GP pulls each norm toward 1, "
                                                "from below as well")),
        (((weight_grad(D, x_hat).flatten(1).norm(2, dim=1) - 1) ** 2).mean(), _("that is the gradient with respect "
                                                                                 "to D's weights: the penalty is on "
                                                                                 "the gradient with respect to D's "
                                                                                 "input, x_hat")),
    ]


def _mixing(x_hat, x_real, x_fake):
    """The weight t of x_real in each image D was given, x_hat = t * x_real + (1 - t) * x_fake image by image, or
    None where what D was given is no such mix."""
    if not isinstance(x_hat, torch.Tensor) or x_hat.shape != x_real.shape:
        return None
    d, h = (x_real - x_fake.detach()).flatten(1), (x_hat.detach() - x_fake.detach()).flatten(1)
    t = (h * d).sum(1) / (d * d).sum(1)
    off = (h - t[:, None] * d).norm(dim=1) > 1e-4 * (1 + d.norm(dim=1))
    return None if off.any() else t


def _mix_problem(t, eps):
    """What the weights of x_real in the images D was given say, measured, against eps."""
    if torch.allclose(t, 1 - eps, atol=1e-4):
        return _("D was given x_hat with 1 - eps of each real image, where eps weighs the real images")
    if (t.max() - t.min()).item() < 1e-4:
        if abs(t[0].item()) < 1e-4:
            return _("D was given the fake images themselves, not a mix of real and fake")
        if abs(t[0].item() - 1) < 1e-4:
            return _("D was given the real images themselves, not a mix of real and fake")
        return _("D was given every image mixed with the same weight, {weight:.3f} of the real one, where each image "
                 "has an eps of its own ({eps})").format(weight=t[0].item(),
                                                         eps=", ".join(f"{e:.3f}" for e in eps.tolist()))
    return _("D was given images with {weights} of each real image, where eps is {eps}").format(
        weights=", ".join(f"{w:.3f}" for w in t.tolist()), eps=", ".join(f"{e:.3f}" for e in eps.tolist()))


def gradient_penalty_checks(gradient_penalty) -> Found:
    """Lesson 08: the student's gradient_penalty(D, x_cond, x_real, x_fake, eps) for a conditional critic D(x_cond, x),
    images (N, C, H, W) and eps of shape (N,), against WGAN-GP's on the image: its value, a graph back to D's
    parameters (and not to G's), D's gradients."""
    from gan_lessons.strategies import gradient_penalty as reference_penalty
    D, G, x_cond, x_real, x_fake, eps = _conditional_critic()
    given = _Given(D, x_cond)
    reference = reference_penalty(given, x_real, x_fake, eps=eps)
    inputs = []
    given_real, given_fake, given_eps = x_real.clone(), x_fake.detach().clone(), eps.clone()
    with left_as_given("gradient_penalty", {"D": D},
                       {"x_cond": x_cond, "x_real": x_real, "x_fake": x_fake, "eps": eps}) as side_effects:
        handle = D.register_forward_pre_hook(lambda module, args: inputs.append(args[-1]))
        try:
            with watching("gradient_penalty") as used, Backwards() as calls:
                penalty = attempt("gradient_penalty", gradient_penalty, D, x_cond, x_real, x_fake, eps)
        finally:
            handle.remove()
    changed = [name for name, now, was in (("x_real", x_real, given_real), ("x_fake", x_fake, given_fake))
               if not torch.equal(now.detach(), was)]
    if changed:                       # the caller's batches: D's loss and the next step read them after the penalty
        return [_("your gradient_penalty changed {names} in place: the caller's batch no longer holds what it "
                  "passed, and D's loss after the penalty reads it").format(names=_(" and ").join(changed))]
    if side_effects or not torch.equal(eps, given_eps):
        return side_effects or [_("your gradient_penalty changed eps: the caller's tensor no longer holds what "
                                  "it passed")]
    D.eval()                          # given in eval mode, D must come back in eval mode
    with left_as_given("gradient_penalty", {"D": D}) as side_effects:
        attempt("gradient_penalty", gradient_penalty, D, x_cond, x_real, x_fake, eps)
    D.train()
    if side_effects:
        return side_effects
    e = eps.view(-1, 1, 1, 1)
    both = _both_inputs(D, x_cond, e * x_real + (1 - e) * x_fake.detach()).norm(2, dim=1)
    mistakes = [(((both - 1) ** 2).mean(), _("that is the norm of the gradient with respect to both of D's inputs, "
                                             "the condition's and the image's: the penalty is on the image's "
                                             "gradient alone (the condition is given, the same for real and fake)")),
                (reference_penalty(_Given(D, x_cond, swapped=True), x_real, x_fake, eps=eps),
                 _("D(x_hat, x_cond) puts the image where the condition goes: D takes the condition first, "
                   "D(x_cond, x)"))]
    problems = shape_problem(penalty) or value_problems(
        penalty, reference, mistakes + _gp_mistakes(given, x_real, x_fake, eps),
        _("the penalty is {value:.5f}, the right one {right:.5f}: {hint}")) or graph_problems(
        penalty, reference, D, G, calls.grads)
    mixed = _mixing(inputs[0], x_real, x_fake) if inputs and problems else None
    if mixed is not None and not torch.allclose(mixed, eps, atol=1e-4):
        problems = [_mix_problem(mixed, eps)]
    if not problems and inputs and any(leaf.numel() == len(eps) for leaf in leaves_of(inputs[0])):
        problems = [_("eps requires grad, so x_hat is not a leaf and the penalty's backward runs on into eps: eps is "
                      "a random mixing weight, not something to differentiate")]
    if not problems and used:
        problems = [_("it calls strategies.gradient_penalty: write the penalty yourself, with torch.autograd.grad")]
    return problems


def reference_gradient_penalty(D, x_cond, x_real, x_fake, eps):
    """The lesson's answer: WGAN-GP's penalty on the image alone, for a conditional critic D(x_cond, x)."""
    eps = eps.view(-1, 1, 1, 1)                             # one eps per image, over all its pixels
    x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)
    scores = D(x_cond, x_hat)                               # the condition is given: no gradient is taken for it
    g, = torch.autograd.grad(scores, x_hat, grad_outputs=torch.ones_like(scores), create_graph=True)
    norms = g.flatten(1).norm(2, dim=1)                     # one norm per image
    return ((norms - 1) ** 2).mean()


def _gp_calls():
    """One penalty on the conditional critic's batch, its backward run: D's gradients, and none for G."""
    D, G, x_cond, x_real, x_fake, eps = _conditional_critic()
    return [(D, x_cond, x_real, x_fake, eps)], [D, G]


GRADIENT_PENALTY = Exercise("08", "gradient_penalty", reference_gradient_penalty, gradient_penalty_checks, _gp_calls,
                            result=backward_through, flags=True, hints=_GP_HINTS, what=N_("your gradient_penalty"),
                            success=N_("the right value, a graph back to D's parameters (create_graph=True), D's "
                                       "gradients equal to WGAN-GP's, and nothing reaches G"))
check_gradient_penalty = GRADIENT_PENALTY.check
