"""Lesson 08's exercises, both written from scratch: WGAN-GP's gradient penalty (check_gradient_penalty) and a lazy
R1 term (check_lazy_r1). Each checker runs the student's function on a small critic and image-shaped batches, and
compares the value and D's gradients with the reference; a wrong value is matched against the mistakes people make
(one norm for the whole batch, the norm across channels, the gradient of D's weights, a lazy weight not multiplied by
the interval, ...), so that the hint names the mistake."""
from contextlib import contextmanager

import torch
from torch import nn

from gan_lessons.exercises.feedback import raised, stub_line, unanswered, verdict
from gan_lessons.i18n import N_, _
from gan_lessons.models import Reshape

# Messages and hints are marked with N_() here and translated where they are shown (raised() translates the hints).
_SCALAR = ("grad can be implicitly created only for scalar outputs",
           N_("D gives one score per image: pass grad_outputs=torch.ones_like(scores) to torch.autograd.grad (or take "
              "the gradient of scores.sum())"))
_SECOND = ("backward through the graph a second time",
           N_("create_graph=True keeps the graph; a retain_graph=False beside it frees D's graph too early"))
_CONSTANT = ("does not require grad and does not have a grad_fn",
             N_("a penalty built from a gradient taken without create_graph=True is a constant: nothing can "
                "backpropagate through it"))
_UNPACK = ("too many values to unpack",
           N_("torch.autograd.grad returns one gradient per input, and you passed several (D's parameters?): the "
              "penalty is on the gradient with respect to D's input, one tensor"))
_GP_HINTS = [
    ("must match the size of tensor",
     N_("eps holds one number per image, shape (N,): reshape it to (N, 1, 1, 1), e.g. eps.view(-1, 1, 1, 1), so "
        "that each image's pixels share its own eps")),
    ("One of the differentiated Tensors does not require grad",
     N_("x_hat must require grad before D sees it: x_hat = (...).requires_grad_(True), made from a detached "
        "x_fake")),
    _SCALAR, _SECOND, _CONSTANT, _UNPACK]
_R1_HINTS = [
    ("One of the differentiated Tensors does not require grad",
     N_("x_real must require grad before D sees it (data never does): x_real = "
        "x_real.detach().requires_grad_(True)")),
    _SCALAR, _SECOND, _CONSTANT, _UNPACK]


def _critic():
    """A small critic on 2-channel 3x3 images (no BatchNorm: a per-sample penalty needs per-sample scores), a G, one
    batch of 5 real and 5 fake images (the fakes still carry G's graph), and one eps per image, shape (5,)."""
    torch.manual_seed(8)
    D = nn.Sequential(nn.Flatten(), nn.Linear(18, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), Reshape())
    G = nn.Sequential(nn.Linear(3, 18), nn.Unflatten(1, (2, 3, 3)))
    x_real, x_fake = torch.randn(5, 2, 3, 3), G(torch.randn(5, 3))
    return D, G, x_real, x_fake, torch.rand(5, generator=torch.Generator().manual_seed(3))


def _grad_at(D, x):
    """D's gradient with respect to its input x (a leaf made here), with a graph back to D."""
    x = x.detach().requires_grad_(True)
    scores = D(x)
    g, = torch.autograd.grad(scores, x, grad_outputs=torch.ones_like(scores), create_graph=True)
    return g


def _weight_grad(D, x):
    """What a student gets who takes the gradient with respect to D's first weight instead of D's input."""
    scores = D(x.detach())
    return torch.autograd.grad(scores, next(D.parameters()), grad_outputs=torch.ones_like(scores),
                               create_graph=True)[0]


def _gp_mistakes(D, x_real, x_fake, eps):
    """(value, hint) of the wrong penalties people write, on the checker's batch."""
    e = eps.view(-1, 1, 1, 1)
    x_hat = e * x_real + (1 - e) * x_fake.detach()
    g = _grad_at(D, x_hat)
    norms = g.flatten(1).norm(2, dim=1)
    return [
        (((g.norm(2) - 1) ** 2), _("one norm over the whole batch's gradient: the penalty is on each image's own "
                                   "gradient norm, g.flatten(1).norm(2, dim=1), one norm per image, then the mean "
                                   "of (norm - 1)²")),
        (((g.norm(2, dim=1) - 1) ** 2).mean(), _("g.norm(2, dim=1) of an image-shaped gradient (N, C, H, W) is a "
                                                 "norm across the channels at each pixel: flatten each image's "
                                                 "gradient first, g.flatten(1).norm(2, dim=1)")),
        (((norms - 1) ** 2).sum(), _("the sum over the batch: the penalty is the batch mean")),
        ((norms.mean() - 1) ** 2, _("(mean norm - 1)²: square each image's (norm - 1) first, then take the mean")),
        ((norms ** 2).mean(), _("the mean squared norm, with no target: WGAN-GP's target norm is 1, (norm - 1)²")),
        (((norms ** 2 - 1) ** 2).mean(), _("the squared norm in place of the norm: (‖g‖ - 1)², not (‖g‖² - 1)²")),
        ((((_grad_at(D, eps[0] * x_real + (1 - eps[0]) * x_fake.detach())).flatten(1).norm(2, dim=1) - 1) ** 2)
         .mean(), _("one eps for the whole batch: each image gets its own eps, eps.view(-1, 1, 1, 1)")),
        ((((_grad_at(D, e * x_fake.detach() + (1 - e) * x_real)).flatten(1).norm(2, dim=1) - 1) ** 2).mean(),
         _("eps and 1 - eps swapped: x_hat = eps * x_real + (1 - eps) * x_fake")),
        (((_weight_grad(D, x_hat).flatten(1).norm(2, dim=1) - 1) ** 2).mean(), _("that is the gradient with respect "
                                                                                 "to D's weights: the penalty is on "
                                                                                 "the gradient with respect to D's "
                                                                                 "input, x_hat")),
    ]


def _r1_mistakes(D, x_real, every, gamma):
    """(value, hint) of the wrong lazy R1 terms people write, on a due step."""
    g = _grad_at(D, x_real)
    squares = g.flatten(1).pow(2).sum(1)
    weight = gamma / 2 * every
    return [
        (gamma / 2 * squares.mean(), _("that is 1/{every} of the right one: a penalty applied every {every} steps "
                                       "is multiplied by {every} (gamma / 2 * every), so that on average it weighs "
                                       "as much as one applied every step").format(every=every)),
        (gamma / 2 / every * squares.mean(), _("the weight is divided by every: a penalty applied every {every} "
                                               "steps is multiplied by {every}, gamma / 2 * every").format(
            every=every)),
        (gamma * every * squares.mean(), _("that is twice the right one: R1's weight is gamma / 2")),
        (weight * squares.sum(), _("the sum over the batch: R1 is the batch mean of the squared norms")),
        (weight * g.pow(2).mean(), _("the mean over every pixel: R1 sums the squares over each image's pixels, "
                                     "g.flatten(1).pow(2).sum(1), then takes the mean over the batch")),
        (weight * squares.sqrt().mean(), _("the norm, not squared: R1 is the squared norm, "
                                           "g.flatten(1).pow(2).sum(1)")),
        (weight * _weight_grad(D, x_real).pow(2).sum(1).mean(), _("that is the gradient with respect to D's "
                                                                  "weights: R1 is on the gradient with respect to "
                                                                  "D's input, the real images")),
    ]


def _leaves(tensor):
    """The tensors that require grad at the far end of tensor's graph (its AccumulateGrad nodes' variables)."""
    found, todo, seen = [], [tensor.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            found.append(node.variable)
        todo += [next_node for next_node, _ in node.next_functions]
    return found


@contextmanager
def _watched(attribute):
    """Within the block, strategies.<attribute> (the package's own penalty) is wrapped to record that it was called."""
    from gan_lessons import strategies
    original, calls = getattr(strategies, attribute), []

    def wrapper(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)
    setattr(strategies, attribute, wrapper)
    try:
        yield calls
    finally:
        setattr(strategies, attribute, original)


def _call(name, function, what, hints, *args, label=None):
    """(result, None), or (None, feedback) when the call raised: "not solved yet" for nbgrader's stub, else a hint
    that names the function as `label` (default: `what`)."""
    try:
        return function(*args), None
    except NotImplementedError:
        return None, stub_line(name, what)
    except Exception as error:                              # the student's code: report what it raised
        return None, raised(what if label is None else label, error, hints)


def _not_run(name, feedback) -> bool:
    """Print the feedback of a call that raised ("not solved yet" for the stub, else a ✗ line); False."""
    if feedback.startswith("?"):
        print(feedback)
        return False
    return verdict(name, [feedback], "")


def _value_problems(value, reference, mistakes, say):
    """The problem with a value that differs from the reference: the known mistake it matches, else the numbers.
    `say` is the line's template, translated, with {value}, {right} and {hint}."""
    if torch.allclose(value.detach(), reference.detach(), rtol=1e-4, atol=1e-6):
        return []
    hint = next((h for v, h in mistakes if torch.allclose(value.detach(), v.detach(), rtol=1e-4, atol=1e-6)), None)
    return [say.format(value=value.item(), right=reference.item(),
                       hint=hint or _("compare each step with the formula in the exercise"))]


def _shape_problem(value):
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return []
    if isinstance(value, torch.Tensor):
        return [_("your function returned {kind} of shape {shape}: return one number, averaged over the batch (a "
                  "0-dim tensor)").format(kind=type(value).__name__, shape=str(tuple(value.shape)))]
    return [_("your function returned {kind}: return one number, averaged over the batch (a 0-dim tensor)").format(
        kind=type(value).__name__)]


def _graph_problems(penalty, reference, D, G):
    """What is wrong with the graph of a penalty whose value is right: none, one that reaches G, other D gradients."""
    if not penalty.requires_grad:
        return [_("the penalty is a constant (requires_grad=False): it trains nothing, and nothing tells you. The "
                  "gradient inside it was taken without create_graph=True")]
    problems = []
    if G is not None and torch.autograd.grad(penalty, list(G.parameters()), retain_graph=True,
                                             allow_unused=True)[0] is not None:
        problems.append(_("the penalty reaches G's parameters: the fake batch must be detached (a critic's penalty "
                          "trains the critic only)"))
    mine = torch.autograd.grad(penalty, list(D.parameters()), allow_unused=True)
    right = torch.autograd.grad(reference, list(D.parameters()), allow_unused=True)
    for (pname, _param), g, r in zip(D.named_parameters(), mine, right):
        if (g is None) != (r is None) or (g is not None and not torch.allclose(g, r, rtol=1e-4, atol=1e-6)):
            problems.append(_("D's {parameter} gets a different gradient from your penalty than from the right "
                              "one").format(parameter=pname))
            break
    return problems


def check_gradient_penalty(gradient_penalty) -> bool:
    """Lesson 08: the student's gradient_penalty(D, x_real, x_fake, eps), images (N, C, H, W) and eps of shape (N,),
    against WGAN-GP's: its value, a graph back to D's parameters (and not to G's), D's gradients."""
    from gan_lessons.strategies import gradient_penalty as reference_penalty
    name = "gradient_penalty"
    if unanswered(name, gradient_penalty, _("your gradient_penalty")):
        return False
    D, G, x_real, x_fake, eps = _critic()
    reference = reference_penalty(D, x_real, x_fake, eps=eps)
    inputs = []
    handle = D.register_forward_pre_hook(lambda module, args: inputs.append(args[0]))
    try:
        with _watched("gradient_penalty") as used:
            penalty, error = _call(name, gradient_penalty, "gradient_penalty", _GP_HINTS, D, x_real, x_fake,
                                   eps.clone())
    finally:
        handle.remove()
    if error is not None:
        return _not_run(name, error)
    problems = _shape_problem(penalty) or _value_problems(
        penalty, reference, _gp_mistakes(D, x_real, x_fake, eps),
        _("the penalty is {value:.5f}, the right one {right:.5f}: {hint}")) or _graph_problems(
        penalty, reference, D, G)
    if not problems and inputs and any(leaf.numel() == len(eps) for leaf in _leaves(inputs[0])):
        problems = [_("eps requires grad, so x_hat is not a leaf and the penalty's backward runs on into eps: eps is "
                      "a random mixing weight, not something to differentiate. Mix tensors that require no grad, "
                      "then call requires_grad_(True) on x_hat itself")]
    if not problems and used:
        problems = [_("it calls strategies.gradient_penalty: write the penalty yourself, with torch.autograd.grad")]
    return verdict(name, problems, _("the right value, a graph back to D's parameters (create_graph=True), D's "
                                      "gradients equal to WGAN-GP's, and nothing reaches G"))


def check_lazy_r1(r1_term, steps=8, every=4, gamma=10.0) -> bool:
    """Lesson 08: r1_term(D, x_real, step, every, gamma) must be 0 off the schedule, without running D, and
    gamma/2 * every * R1 on it, with R1's gradients for D."""
    from gan_lessons.strategies import r1_penalty
    name = _("lazy R1")
    if unanswered(name, r1_term, _("your r1_term")):
        return False
    problems = []
    for step in range(steps):
        D, _G, x_real, _fake, _eps = _critic()
        due = step % every == 0
        forwards = []
        handle = D.register_forward_pre_hook(lambda module, args, forwards=forwards: forwards.append(1))
        try:
            with _watched("r1_penalty") as used:
                term, error = _call(name, r1_term, "r1_term", _R1_HINTS, D, x_real.clone(), step, every, gamma,
                                    label=_("r1_term at step {step}").format(step=step))
        finally:
            handle.remove()
        if error is not None:
            return _not_run(name, error)
        if not due:
            value = term.item() if isinstance(term, torch.Tensor) and term.numel() == 1 else term
            if value != 0:
                problems.append(_("at step {step} the term is {value}: with every={every} it is computed only when "
                                  "step % every == 0, and is 0 in between").format(step=step, value=repr(value),
                                                                                  every=every))
            elif forwards:
                problems.append(_("at step {step} your r1_term ran D's forward, and then returned 0: off the "
                                  "schedule, return 0 before computing anything (the point of lazy R1 is to skip "
                                  "that work)").format(step=step))
            if problems:
                break
            continue
        reference = r1_penalty(D, x_real) * gamma / 2 * every
        found = _shape_problem(term) or _value_problems(
            term, reference, _r1_mistakes(D, x_real, every, gamma),
            _("the term is {value:.5f}, the right one {right:.5f}: {hint}")) or _graph_problems(term, reference, D, None)
        if not found and used:
            found = [_("it calls strategies.r1_penalty: compute the gradient yourself, with torch.autograd.grad")]
        if found:
            problems += [_("at step {step}: {problem}").format(step=step, problem=p) for p in found]
            break
    return verdict(name, problems, _("computed at steps 0, {every}, ... only, weighted gamma/2 * every, with the "
                                      "right gradients for D").format(every=every))
