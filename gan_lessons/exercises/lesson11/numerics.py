"""Lesson 12, step 5: a finite-difference gradient, the check every autograd engine is tested with.

The student writes `numerical_grad(f, x, eps)`: `f` maps a tensor to a number, `x` is a float tensor, and the answer is
a tensor of x's shape whose entry i is (f(x + eps e_i) - f(x - eps e_i)) / (2 eps), e_i the i-th unit tensor. The
checker runs it on functions whose gradients it knows, in float64, and compares with them and with the answers the
usual slips give (a one-sided difference, eps instead of 2 eps, every entry moved at once, x left changed)."""
import torch

from gan_lessons.engine import mine_or_finished
from gan_lessons.exercises.exercise import Exercise, Found, Raised
from gan_lessons.i18n import N_, _

EPS = 1e-3


def _functions():
    """(description, f, x, exact gradient): smooth functions of tensors of three shapes, in float64."""
    generator = torch.Generator().manual_seed(5)
    c = torch.randn(3, 4, generator=generator, dtype=torch.float64)
    w = torch.randn(4, 2, generator=generator, dtype=torch.float64)
    cases = [("(x.exp() * x).sum(), x of shape [3]", lambda t: (t.exp() * t).sum(),
              torch.randn(3, generator=generator, dtype=torch.float64)),
             ("((x * c) @ w).tanh().sum(), x of shape [3, 4]", lambda t: ((t * c) @ w).tanh().sum(),
              torch.randn(3, 4, generator=generator, dtype=torch.float64) * 0.5),
             ("x.exp() * x * x, x a 0-dim tensor", lambda t: t.exp() * t * t, torch.tensor(0.7, dtype=torch.float64))]
    out = []
    for what, g, x in cases:
        t = x.clone().requires_grad_(True)
        exact, = torch.autograd.grad(g(t), t)
        out.append((what, lambda data, g=g: g(torch.as_tensor(data, dtype=torch.float64)).item(), x, exact))
    return out


def _slips(f, x, eps):
    """What the usual slips give on f at x: name -> tensor."""
    flat = x.reshape(-1)
    forward, backward, halved = torch.zeros_like(flat), torch.zeros_like(flat), torch.zeros_like(flat)
    base = f(x.clone())
    for i in range(flat.numel()):
        up, down = flat.clone(), flat.clone()
        up[i] += eps
        down[i] -= eps
        f_up, f_down = f(up.reshape(x.shape)), f(down.reshape(x.shape))
        forward[i], backward[i], halved[i] = (f_up - base) / eps, (base - f_down) / eps, (f_up - f_down) / eps
    at_once = (f(x + eps) - f(x - eps)) / (2 * eps)
    return {"one-sided": forward.reshape(x.shape), "one-sided back": backward.reshape(x.shape),
            "eps": halved.reshape(x.shape), "at once": torch.full_like(x, at_once)}


SLIP_LINES = {
    "one-sided": N_("on {what} your answer is the one-sided difference (f(x + eps) - f(x)) / eps: its error shrinks "
                    "like eps, not eps squared, and here it is {error:.1e} off"),
    "one-sided back": N_("on {what} your answer is the one-sided difference (f(x) - f(x - eps)) / eps: its error "
                         "shrinks like eps, not eps squared, and here it is {error:.1e} off"),
    "eps": N_("on {what} your answer is twice the gradient: the two evaluations are 2 eps apart, and the difference "
              "was divided by eps"),
    "at once": N_("on {what} every entry of your answer is the same number, the change of f when every entry of x "
                  "moves together"),
}


def _problem(numerical_grad, what, f, x, exact):
    given = x.clone()
    got = numerical_grad(f, given, EPS)
    if not torch.allclose(given, x, rtol=1e-12, atol=1e-12):     # put back by arithmetic: a rounding is no change
        return _("on {what} x is not the same after your function: it moved entries of x and did not put them back "
                 "(the caller's x must come back as it was)").format(what=what)
    if not isinstance(got, torch.Tensor):         # a list or an array: the cells after it compute with a tensor
        return _("on {what} your function returned {kind}, not a tensor of x's shape").format(
            what=what, kind=type(got).__name__)
    if got.shape != x.shape:
        return _("on {what} your answer has shape {shape}; it should have x's shape, {x_shape}").format(
            what=what, shape=list(got.shape), x_shape=list(x.shape))
    got = got.double()
    if torch.allclose(got, exact, rtol=1e-5, atol=1e-6):
        return None
    error = (got - exact).abs().max().item()
    for slip, wrong in _slips(f, x, EPS).items():
        if torch.allclose(got, wrong, rtol=1e-6, atol=1e-8):
            return _(SLIP_LINES[slip]).format(what=what, error=error)
    return _("on {what} your answer is {error:.1e} away from the exact gradient, where a central difference with eps "
             "= {eps} is within 1e-5 of it").format(what=what, error=error, eps=EPS)


def numerical_grad_checks(numerical_grad) -> Found:
    """Lesson 12, step 5. numerical_grad(f, x, eps) on three smooth functions of tensors of shapes [3], [3, 4] and []
    in float64, against their exact gradients: within 1e-5 for a central difference with eps = 1e-3, x left as it
    was, and the usual slips named (one-sided, divided by eps, every entry moved at once)."""
    found: dict = {}                          # {raised: [line, ...]}: an error is not "like" a wrong value
    for what, f, x, exact in _functions():
        try:
            problem, raised = _problem(numerical_grad, what, f, x, exact), False
        except NotImplementedError as error:
            raise Raised("`numerical_grad`", error) from error
        except Exception as error:  # reported
            problem, raised = _("on {what} your function raised {kind}: {error}").format(
                what=what, kind=type(error).__name__, error=error), True
        if problem:
            found.setdefault(raised, []).append(problem)
    problems = []
    for lines in found.values():
        problems.append(lines[0])
        if len(lines) > 1:
            problems.append(_("... and {count} more function(s) like it").format(count=len(lines) - 1))
    if not problems:
        problems = _eps_problems(numerical_grad)
    return problems, {"count": len(_functions())}


def _eps_problems(numerical_grad, eps=1e-2):
    """Whether numerical_grad follows the eps it is given: with another eps, the central difference with that eps
    (which differs from eps = 1e-3's by about eps squared)."""
    what, f, x, _exact = _functions()[0]          # there eps = 1e-2 and 1e-3 differ by 2e-4 of the gradient
    try:
        got = torch.as_tensor(numerical_grad(f, x.clone(), eps), dtype=torch.float64)
    except Exception as error:  # the student's code, with another eps
        return [_("on {what} with eps = {eps} your function raised {kind}: {error}").format(
            what=what, eps=eps, kind=type(error).__name__, error=error)]
    right = finished_numerical_grad(f, x.clone(), eps)
    if got.shape == right.shape and torch.allclose(got, right, rtol=1e-6, atol=1e-9):
        return []
    if got.shape == right.shape and torch.allclose(got, finished_numerical_grad(f, x.clone(), EPS), rtol=1e-6,
                                                   atol=1e-9):
        return [_("on {what} your answer with eps = {eps} is the one for eps = {default}: the eps passed in is not "
                  "the one used").format(what=what, eps=eps, default=EPS)]
    return [_("on {what} with eps = {eps} your answer is not the central difference with that eps").format(
        what=what, eps=eps)]


def finished_numerical_grad(f, x, eps=EPS):
    """Step 5's reference answer (a lesson cell runs on it, without its text, while the student's is not solved)."""
    grad = torch.zeros_like(x)
    flat, out = x.view(-1), grad.view(-1)   # views: writing flat[i] moves x's entry i
    for i in range(flat.numel()):
        old = flat[i].item()
        flat[i] = old + eps
        up = f(x)
        flat[i] = old - eps
        down = f(x)
        flat[i] = old                       # put it back
        out[i] = (up - down) / (2 * eps)
    return grad


# TRANSLATORS: the name of lesson 12's step 5, as its feedback lines show it ("✓ finite differences: ...")
NUMERICAL_GRAD = Exercise("12", "numerical_grad", finished_numerical_grad, numerical_grad_checks, None,
                          label=N_("finite differences"), what=N_("your function"), success=N_(
                              "on {count} functions of tensors of three shapes your central differences agree with "
                              "the exact gradients within 1e-5, and x comes back as it was (to within rounding)"))
check_numerical_grad = NUMERICAL_GRAD.check


def numerical_grad_or_finished(numerical_grad, solved):
    """The student's numerical_grad when step 5 is solved, else a finished one; says which."""
    return mine_or_finished(numerical_grad, solved, finished_numerical_grad, "numerical_grad")
