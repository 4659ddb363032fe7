"""Lesson 08's exercises, both written from scratch: WGAN-GP's gradient penalty for a conditional critic D(x_cond, x),
as pix2pix's is (check_gradient_penalty, in lesson08_gp.py), and a lazy R1 term (check_lazy_r1). Each checker runs the student's
function on a small critic and image-shaped batches, and compares the value and D's gradients with the reference; a
wrong value is matched against the mistakes people make (one norm for the whole batch, the norm across channels, the
gradient with respect to both of D's inputs or to D's weights, a lazy weight not multiplied by the interval, ...), so
that the hint names the mistake."""
from contextlib import contextmanager

import torch
from torch import nn

from gan_lessons.exercises.exercise import Exercise, Found, attempt, backward_through
from gan_lessons.exercises.steps import Backwards, left_as_given
from gan_lessons.i18n import N_, _
from gan_lessons.models import Reshape

# Messages and hints are marked with N_() here and translated where they are shown (raised() translates the hints).
MEAN_OF_SCORES = N_("that is the gradient of the scores' mean, which gives each of the {count} images 1/{count} of "
                    "its own score's gradient: the penalty is on each image's own gradient")
SCALAR = ("grad can be implicitly created only for scalar outputs",
           N_("D gives one score per image, and torch.autograd.grad of many scores was not told how to weigh each "
              "(it takes one number, or grad_outputs)"))
SECOND = ("backward through the graph a second time",
           N_("create_graph=True keeps the graph; a retain_graph=False beside it frees D's graph too early"))
CONSTANT = ("does not require grad and does not have a grad_fn",
             N_("a penalty built from a gradient taken without create_graph=True is a constant: nothing can "
                "backpropagate through it"))
UNPACK = ("too many values to unpack",
           N_("torch.autograd.grad returns one gradient per input, and you passed several (D's parameters?): the "
              "penalty is on the gradient with respect to D's input, one tensor"))
_R1_HINTS = [
    ("One of the differentiated Tensors does not require grad",
     N_("x_real did not require grad when D saw it (data never does), so D's scores have no graph back to it")),
    SCALAR, SECOND, CONSTANT, UNPACK]


def _critic():
    """A small critic on 2-channel 3x3 images (no BatchNorm: a per-sample penalty needs per-sample scores), a G, one
    batch of 5 real and 5 fake images (the fakes still carry G's graph), and one eps per image, shape (5,)."""
    torch.manual_seed(8)
    D = nn.Sequential(nn.Flatten(), nn.Linear(18, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), Reshape())
    G = nn.Sequential(nn.Linear(3, 18), nn.Unflatten(1, (2, 3, 3)))
    x_real, x_fake = torch.randn(5, 2, 3, 3), G(torch.randn(5, 3))
    return D, G, x_real, x_fake, torch.rand(5, generator=torch.Generator().manual_seed(3))


def grad_at(D, x):
    """D's gradient with respect to its input x (a leaf made here), with a graph back to D."""
    x = x.detach().requires_grad_(True)
    scores = D(x)
    g, = torch.autograd.grad(scores, x, grad_outputs=torch.ones_like(scores), create_graph=True)
    return g


def weight_grad(D, x):
    """What a student gets who takes the gradient with respect to D's first weight instead of D's input."""
    scores = D(x.detach())
    return torch.autograd.grad(scores, next(D.parameters()), grad_outputs=torch.ones_like(scores),
                               create_graph=True)[0]


def _r1_mistakes(D, x_real, every, gamma):
    """(value, hint) of the wrong lazy R1 terms people write, on a due step."""
    g = grad_at(D, x_real)
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
        (weight * g.pow(2).mean(), _("the mean over every pixel, where R1 sums the squares over each image's pixels "
                                     "and averages over the batch")),
        (weight * squares.sqrt().mean(), _("the norm, not squared, where R1 is the squared norm")),
        (weight * weight_grad(D, x_real).pow(2).sum(1).mean(), _("that is the gradient with respect to D's "
                                                                  "weights: R1 is on the gradient with respect to "
                                                                  "D's input, the real images")),
        (weight * (g / len(x_real)).flatten(1).pow(2).sum(1).mean(), MEAN_OF_SCORES.format(count=len(x_real))),
    ]


def leaves_of(tensor):
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
def watching(attribute):
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


def value_problems(value, reference, mistakes, say):
    """The problem with a value that differs from the reference: the known mistake it matches, else the numbers.
    `say` is the line's template, translated, with {value}, {right} and {hint}."""
    if torch.allclose(value.detach(), reference.detach(), rtol=1e-4, atol=1e-6):
        return []
    hint = next((h for v, h in mistakes if torch.allclose(value.detach(), v.detach(), rtol=1e-4, atol=1e-6)), None)
    return [say.format(value=value.item(), right=reference.item(), hint=hint or _ratio(value, reference) or _(
        "compare each step with the formula in the exercise"))]


def _ratio(value, reference):
    """"that is k times the right one" (or 1/k of it) when the value is a whole multiple or part of it, else None: a
    factor left in or out, found by its size."""
    ratio = (value.detach() / reference.detach()).item() if reference.item() else 0.0
    for k in range(2, 101):
        if abs(ratio - k) < 1e-3 * k:
            return _("that is {k} times the right one").format(k=k)
        if abs(ratio * k - 1) < 1e-3:
            return _("that is 1/{k} of the right one").format(k=k)
    return None


def shape_problem(value):
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        return []
    if isinstance(value, torch.Tensor):
        return [_("your function returned {kind} of shape {shape}: return one number, averaged over the batch (a "
                  "0-dim tensor)").format(kind=type(value).__name__, shape=str(tuple(value.shape)))]
    return [_("your function returned {kind}: return one number, averaged over the batch (a 0-dim tensor)").format(
        kind=type(value).__name__)]


def graph_problems(penalty, reference, D, G, grads=()):
    """What is wrong with the graph of a penalty whose value is right: none, one that reaches G, other D gradients.
    grads: the create_graph of each torch.autograd.grad call the answer made (steps.Backwards)."""
    if not penalty.requires_grad:
        if grads and all(grads):
            return [_("the penalty is a constant (requires_grad=False): it trains nothing, and nothing tells you. "
                      "torch.autograd.grad ran with create_graph=True, but the graph was cut somewhere between "
                      "that gradient and the value returned")]
        return [_("the penalty is a constant (requires_grad=False): it trains nothing, and nothing tells you. The "
                  "gradient inside it was taken without create_graph=True")]
    problems = []
    try:
        if G is not None and torch.autograd.grad(penalty, list(G.parameters()), retain_graph=True,
                                                 allow_unused=True)[0] is not None:
            problems.append(_("the penalty reaches G's parameters, where a critic's penalty trains the critic only"))
        mine = torch.autograd.grad(penalty, list(D.parameters()), allow_unused=True)
    except RuntimeError as error:     # a penalty whose backward fails cannot train D: that is what is measured
        return [_("a backward through your penalty raised RuntimeError: {error}: the penalty cannot train "
                  "D").format(error=str(error).split(". ")[0])]
    right = torch.autograd.grad(reference, list(D.parameters()), allow_unused=True)
    for (pname, _param), g, r in zip(D.named_parameters(), mine, right):
        if (g is None) != (r is None) or (g is not None and not torch.allclose(g, r, rtol=1e-4, atol=1e-6)):
            problems.append(_("D's {parameter} gets a different gradient from your penalty than from the right "
                              "one").format(parameter=pname))
            break
    return problems


def lazy_r1_checks(r1_term, steps=8, every=4, gamma=10.0) -> Found:
    """Lesson 08: r1_term(D, x_real, step, every, gamma) must be 0 off the schedule, without running D, and
    gamma/2 * every * R1 on it, with R1's gradients for D."""
    from gan_lessons.strategies import r1_penalty
    problems = []
    for step in range(steps):
        D, _G, x_real, _fake, _eps = _critic()
        held = [torch.full_like(p, 0.01) for p in D.parameters()]    # as D's loss's backward leaves its .grad
        for p, g in zip(D.parameters(), held):
            p.grad = g.clone()
        due = step % every == 0
        forwards: list = []
        handle = D.register_forward_pre_hook(lambda module, args, forwards=forwards: forwards.append(1))
        with left_as_given("r1_term", {"D": D}) as side_effects:     # x_real: a copy (R1's usual idiom,
            try:                                                      # x_real.requires_grad_(), is right)
                with watching("r1_penalty") as used, Backwards() as calls:
                    term = attempt("r1_term", r1_term, D, x_real.clone(), step, every, gamma,
                                   call=_("r1_term at step {step}").format(step=step))
            finally:
                handle.remove()
        if side_effects:
            problems += [_("at step {step}: {problem}").format(step=step, problem=p) for p in side_effects]
            break
        if any(p.grad is None or not torch.equal(p.grad, g) for p, g in zip(D.parameters(), held)):
            # the term is for the caller's backward: what D's .grad held before it must be there after it
            problems.append(_("at step {step} your r1_term changed D's .grad, which held D's loss's gradient before "
                              "the call, before the caller's backward ran: D would step on something else than its "
                              "loss's gradient and the term's").format(step=step))
            break
        value = term.item() if isinstance(term, torch.Tensor) and term.numel() == 1 else term
        if due and isinstance(value, (int, float)) and value == 0:
            problems.append(_("at step {step} the term is {value}, where with every={every} R1 is computed at steps "
                              "{due} (step % every == 0), this one among them").format(
                step=step, value=repr(value), every=every,
                due=", ".join(str(k) for k in range(steps) if k % every == 0)))
            break
        if not due:
            if value != 0:
                problems.append(_("at step {step} the term is {value}: with every={every} it is computed only when "
                                  "step % every == 0, and is 0 in between").format(step=step, value=repr(value),
                                                                                  every=every))
            elif forwards:
                problems.append(_("at step {step}, off the schedule, your r1_term ran D's forward and then returned "
                                  "0: the work lazy R1 exists to skip").format(step=step))
            if problems:
                break
            continue
        reference = r1_penalty(D, x_real) * gamma / 2 * every
        found = shape_problem(term) or value_problems(
            term, reference, _r1_mistakes(D, x_real, every, gamma),
            _("the term is {value:.5f}, the right one {right:.5f}: {hint}")) or graph_problems(term, reference, D, None,
                                                                                    calls.grads)
        if not found and used:
            found = [_("it calls strategies.r1_penalty: compute the gradient yourself, with torch.autograd.grad")]
        if found:
            problems += [_("at step {step}: {problem}").format(step=step, problem=p) for p in found]
            break
    if not problems:
        problems = _schedule_problems(r1_term, every, gamma)
    return problems, {"every": every}


def _schedule_problems(r1_term, every, gamma, steps=(5, 8, 6, 12, 4, 0, 9)):
    """The term at steps out of order (a run resumed from a checkpoint starts at another step, and a new run at 0):
    0 exactly off the schedule step % every == 0; and on it, with another gamma (2.5, not a whole number), the right
    value."""
    from gan_lessons.strategies import r1_penalty
    for step in steps:
        D, _G, x_real, _fake, _eps = _critic()
        term = attempt("r1_term", r1_term, D, x_real.clone(), step, every, gamma,
                       call=_("r1_term at step {step}").format(step=step))
        value = term.item() if isinstance(term, torch.Tensor) and term.numel() == 1 else term
        if (value == 0) == (step % every == 0):
            return [_("called at steps {steps} in that order, your r1_term gives {value} at step {step}, where "
                      "step % every is {rest}: the schedule does not follow the step passed in").format(
                steps=", ".join(map(str, steps)), value=repr(value), step=step, rest=step % every)]
    D, _G, x_real, _fake, _eps = _critic()
    other = 2.5
    term = attempt("r1_term", r1_term, D, x_real.clone(), 0, every, other,
                   call=_("r1_term at step {step}").format(step=0))
    right = (r1_penalty(D, x_real) * other / 2 * every).item()
    value = term.item() if isinstance(term, torch.Tensor) and term.numel() == 1 else term
    if not isinstance(value, (int, float)) or abs(value - right) > 1e-4 * abs(right):
        return [_("with gamma={gamma} at step 0 your r1_term gives {value}, the right one {right:.5f}: the weight "
                  "does not follow the gamma passed in").format(gamma=other, value=repr(value), right=right)]
    return []


def reference_r1_term(D, x_real, step, every, gamma):
    """The lesson's answer: lazy R1, 0 off the schedule without running D; on it gamma / 2 * every * E||grad_x D||^2."""
    if step % every != 0:
        return torch.zeros(())
    x_real = x_real.detach().requires_grad_(True)
    scores = D(x_real)
    g, = torch.autograd.grad(scores, x_real, grad_outputs=torch.ones_like(scores), create_graph=True)
    r1 = g.flatten(1).pow(2).sum(1).mean()
    return gamma / 2 * every * r1


def _r1_calls():
    """Eight training steps with every=4 and gamma=10 on one critic, each term's backward adding to D's .grad; D's
    forwards are counted (off the schedule, none may run)."""
    D, _G, x_real, _fake, _eps = _critic()
    forwards = torch.zeros(())

    def count(module, args) -> None:
        forwards.add_(1)
    D.register_forward_pre_hook(count)
    return [(D, x_real, step, 4, 10.0) for step in range(8)], [D, forwards]


LAZY_R1 = Exercise("08", "r1_term", reference_r1_term, lazy_r1_checks, _r1_calls, result=backward_through, flags=True,
                   hints=_R1_HINTS, label=N_("lazy R1"), what=N_("your r1_term"), success=N_(
                       "computed at steps 0, {every}, ... only, weighted gamma/2 * every, with the right gradients for "
                       "D"))
check_lazy_r1 = LAZY_R1.check
