"""Build-or-fix exercises: the student writes or fixes a function, and a checker runs it and says what is still
wrong. One plain function per exercise. Each prints one "✓ ..." line when the answer is right, otherwise one
line per remaining problem (what is wrong, and a hint), and returns True or False. Feedback, not an assert:
an exercise left as `...` prints "not solved yet", so "Run All" goes on.

    my_answer = sgd_step  # SOLUTION: point this at your function
    exercises.check_sgd_step(my_answer)"""
import io
from contextlib import nullcontext, redirect_stderr

import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.lesson import headline

ELLIPSIS_HINT = "a `...` is still in your function: replace it with your code"


# --- shared helpers ----------------------------------------------------------------------------------------
def _not_solved(name, answer, what="your function") -> bool:
    if answer is ...:
        print(f"? {name}: not solved yet. Replace the ... in `my_answer = ...` with {what} and run the cell again.")
        return True
    if not callable(answer):
        print(f"✗ {name}: my_answer is a {type(answer).__name__}, not a function. Point it at {what}, "
              "without calling it (no parentheses).")
        return True
    return False


def _verdict(name, problems, success) -> bool:
    if not problems:
        print(f"✓ {name}: {success}")
        return True
    for problem in problems:
        print(f"✗ {name}: {problem}")
    return False


def _raised(function_name, error, hints) -> str:
    """One feedback line for an exception from the student's code: its first clause and the hint that fits."""
    message = str(error)
    hint = ELLIPSIS_HINT if "ellipsis" in message.lower() else next(
        (h for pattern, h in hints if pattern in message), "read the message: it names what went wrong")
    return f"{function_name} raised {type(error).__name__}: {headline(message)}. Hint: {hint}."


_AUTOGRAD_HINTS = [
    ("leaf Variable that requires grad is being used in an in-place operation",
     "an in-place update of a parameter must run under `with torch.no_grad():`, as optimizer.step() does (lesson 01)"),
    ("backward through the graph a second time",
     "a first backward freed part of the graph a second loss still needs: detach the shared tensor in the loss "
     "that must not reach it (lessons 02 and 04)"),
    ("modified by an inplace operation",
     "a step or an in-place op changed a tensor a pending backward saved: do that backward before the step, or "
     "detach so the backward never needs it (lesson 03)"),
]


def _grads_at_steps(optimizers, names):
    """Register step pre-hooks that record every parameter's .grad (a clone, or None) at each step() call.
    Returns (records, handles): records[optimizer name] is a list with one {parameter name: grad} per step."""
    records = {name: [] for name in optimizers}
    handles = []
    for opt_name, opt in optimizers.items():
        def hook(optimizer, args, kwargs, opt_name=opt_name):
            records[opt_name].append({names[p]: (None if p.grad is None else p.grad.detach().clone())
                                      for group in optimizer.param_groups for p in group["params"]})
        handles.append(opt.register_step_pre_hook(hook))
    return records, handles


def _compare_steps(mine, reference, hint, atol=1e-6, limit=6):
    """Problems, one per parameter (then one summary line), where the student's gradients at each optimizer
    step differ from the reference: a missing step, a .grad that is None, or different values."""
    problems = []
    for opt_name, ref_steps in reference.items():
        got = mine.get(opt_name, [])
        if len(got) != len(ref_steps):
            problems.append(f"{opt_name}.step() ran {len(got)} time(s) in {len(ref_steps)} call(s) of your "
                            f"function; it should run once per call")
            continue
        for k, (g_step, r_step) in enumerate(zip(got, ref_steps), 1):
            for pname, ref in r_step.items():
                g = g_step.get(pname)
                if ref is None and g is None:
                    continue
                if g is None:
                    problems.append(f"{pname}: .grad is None at {opt_name}.step() (call {k}); it should hold a "
                                    f"gradient: does the loss that trains it reach it, and did its backward run?")
                elif ref is None:
                    problems.append(f"{pname}: has a .grad at {opt_name}.step() (call {k}); it should be None")
                elif g.shape != ref.shape or not torch.allclose(g, ref, atol=atol, rtol=1e-5):
                    gap = (g - ref).abs().max().item() if g.shape == ref.shape else float("nan")
                    problems.append(f"{pname}: gradient at {opt_name}.step() (call {k}) differs from the right one "
                                    f"by up to {gap:.4g}: {hint}")
            if problems:
                break            # the first wrong step says enough; later steps follow from it
    if len(problems) > limit:
        problems = problems[:limit] + [f"... and {len(problems) - limit} more parameter(s) like these"]
    return problems


# --- lesson 01: a manual SGD step on leaves ------------------------------------------------------------------
def _sgd_problem():
    torch.manual_seed(1)
    w = torch.randn(3, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    x, target = torch.randn(5, 3), torch.randn(5)
    loss = lambda: ((x @ w + b - target) ** 2).mean()
    return [w, b], loss


def check_sgd_step(sgd_step, lr=0.1) -> bool:
    """Lesson 01. sgd_step(params, lr) must update each leaf in place by lr * p.grad, keep it a leaf that
    requires grad, and clear .grad (None or zeros) so the next backward starts fresh."""
    name = "sgd_step"
    if _not_solved(name, sgd_step, "your sgd_step"):
        return False
    params, loss = _sgd_problem()
    ref_params, ref_loss = _sgd_problem()
    ref_opt = optim.SGD(ref_params, lr=lr)
    names = ["w", "b"]
    problems = []
    for step in (1, 2):
        before = [p.detach().clone() for p in params]
        loss().backward()
        ref_opt.zero_grad()
        ref_loss().backward()
        ref_opt.step()
        try:
            sgd_step(params, lr)
        except Exception as error:
            problems.append(_raised("sgd_step", error, _AUTOGRAD_HINTS))
            break
        for n, p, ref, old in zip(names, params, ref_params, before):
            if not p.is_leaf:
                problems.append(f"{n} is no longer a leaf (grad_fn {type(p.grad_fn).__name__}): the update was "
                                f"recorded; run it under torch.no_grad()")
            elif not p.requires_grad:
                problems.append(f"{n} no longer requires grad: leave requires_grad alone and update under "
                                f"torch.no_grad() instead")
            elif torch.equal(p.detach(), old):
                problems.append(f"{n} did not change at step {step}: `p = p - lr * p.grad` makes a new tensor and "
                                f"leaves the parameter as it was; update it in place (p -= ...)")
            elif not torch.allclose(p.detach(), ref.detach(), atol=1e-6):
                why = ("its .grad still held step 1's gradient, and backward() adds to it: clear .grad after the "
                       "update" if step == 2 else "the update is p - lr * p.grad")
                problems.append(f"{n} after step {step} is {p.detach().tolist()}, expected {ref.detach().tolist()}: "
                                f"{why}")
            elif p.grad is not None and p.grad.abs().sum() > 0:
                problems.append(f"{n}.grad still holds the gradient after your step: set it to None (what "
                                f"opt.zero_grad() does), or the next backward adds to it")
        if problems:
            break
    return _verdict(name, problems, "two steps give SGD's values, the parameters are still leaves that require "
                                    "grad, and .grad is cleared after each update")


# --- lesson 02: seed 004's loop, fixed ------------------------------------------------------------------------
def _seed004_models():
    torch.manual_seed(0)
    model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
    optimizer1 = optim.Adam(model1.parameters(), lr=0.001, betas=(0.5, 0.999))
    optimizer2 = optim.Adam(model2.parameters(), lr=0.001, betas=(0.5, 0.999))
    data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])
    return model1, model2, optimizer1, optimizer2, data, label


def reference_seed004_step(model1, model2, optimizer1, optimizer2, data, label):
    """One step of seed 004's loop with the detach fix (lesson 02)."""
    a = model1(data)
    b = model2(a.detach())
    l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
    optimizer2.zero_grad()
    l2.backward()
    optimizer2.step()
    optimizer1.zero_grad()
    l1.backward()
    optimizer1.step()


def _run_seed004(step, calls):
    model1, model2, optimizer1, optimizer2, data, label = _seed004_models()
    names = {p: f"model1.{n}" for n, p in model1.named_parameters()}
    names.update({p: f"model2.{n}" for n, p in model2.named_parameters()})
    records, handles = _grads_at_steps({"optimizer1": optimizer1, "optimizer2": optimizer2}, names)
    try:
        for _ in range(calls):
            step(model1, model2, optimizer1, optimizer2, data, label)
    finally:
        for h in handles:
            h.remove()
    return records


def check_seed004_step(fixed_step, calls=3) -> bool:
    """Lesson 02. fixed_step(model1, model2, optimizer1, optimizer2, data, label): one step of seed 004's loop that
    runs, and gives every parameter, at its optimizer's step, the gradient the loop means: l1's for model1, l2's
    for model2."""
    name = "fixed_step"
    if _not_solved(name, fixed_step, "your fixed_step"):
        return False
    reference = _run_seed004(reference_seed004_step, calls)
    try:
        mine = _run_seed004(fixed_step, calls)
    except Exception as error:
        return _verdict(name, [_raised("fixed_step", error, _AUTOGRAD_HINTS)], "")
    return _verdict(name, _compare_steps(mine, reference, "zero_grad() right before each backward; l1 alone "
                                                          "must train model1, and l2 alone model2"),
                    f"it runs, and all 4 parameters get the right gradient at every optimizer step ({calls} steps)")


# --- lesson 03: counting the bytes autograd saves -------------------------------------------------------------
def _saved_graphs():
    """(description, make_graph) pairs; make_graph builds a small graph and returns its output."""
    def exp_graph():
        a = torch.linspace(-1, 1, 1000, requires_grad=True)
        return a.exp()

    def square_graph():
        a = torch.linspace(-1, 1, 300, requires_grad=True)
        return a * a

    def linear_tanh_graph():
        torch.manual_seed(0)
        layer = nn.Linear(16, 32)
        return torch.tanh(layer(torch.randn(8, 16)))

    return [("y = a.exp(), a of 1000 floats", exp_graph),
            ("y = a * a, a of 300 floats", square_graph),
            ("tanh(Linear(16, 32)(x)), x of shape [8, 16]", linear_tanh_graph)]


def reference_saved_bytes(make_graph):
    """Bytes of every tensor autograd saves while make_graph() runs (a tensor saved twice counts twice)."""
    sizes = []

    def pack(t):
        sizes.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        make_graph()
    return sum(sizes)


def _elements_saved(make_graph):
    counts = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: counts.append(t.numel()) or t, lambda t: t):
        make_graph()
    return sum(counts)


def check_saved_bytes(count_saved_bytes) -> bool:
    """Lesson 03. count_saved_bytes(make_graph) runs make_graph() under torch.autograd.graph.saved_tensors_hooks
    and returns the bytes of the tensors autograd saved; the graph's backward must still work afterwards."""
    name = "count_saved_bytes"
    if _not_solved(name, count_saved_bytes, "your count_saved_bytes"):
        return False
    problems = []
    for description, make_graph in _saved_graphs():
        right = reference_saved_bytes(make_graph)
        made = []
        try:
            got = count_saved_bytes(lambda: made.append(make_graph()) or made[-1])
        except Exception as error:
            problems.append(_raised("count_saved_bytes", error, []))
            break
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            problems.append(f"on {description}: it returned {got!r}; return the total number of bytes, an int")
            continue
        if got != right:
            if got == 0 or not made:
                hint = ("your pack hook never ran: call make_graph() inside `with saved_tensors_hooks(pack, unpack):`"
                        if made else "call make_graph() inside the with-block")
            elif got == _elements_saved(make_graph):
                hint = "you counted elements, not bytes: multiply t.numel() by t.element_size() (4 for float32)"
            else:
                hint = "add t.numel() * t.element_size() once per call of pack: each call is one saved tensor"
            diff = got - right
            problems.append(f"on {description}: you counted {got} bytes, autograd saved {right} "
                            f"({abs(diff)} {'too many' if diff > 0 else 'too few'}). Hint: {hint}")
            continue
        try:
            made[-1].sum().backward()
        except Exception as error:
            problems.append(f"on {description}: the count is right, but backward() then failed "
                            f"({headline(str(error))}): unpack must return the tensor pack returned")
    return _verdict(name, problems, "right on all three graphs, and backward still works through them")


# --- lesson 04: a D step that keeps its hands off G ----------------------------------------------------------
def _gan(batch=8):
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    opt_D = optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    z, x_real = torch.randn(batch, G.z_dim), torch.rand(batch, 1, 28, 28) * 2 - 1
    return G, D, opt_D, z, x_real


def reference_d_step(G, D, opt_D, z, x_real):
    """D's step of lesson 04: the fake batch detached, so loss_D trains D only."""
    x_fake = G(z)
    ones, zeros = torch.ones(len(x_real)), torch.zeros(len(z))
    loss_D = (F.binary_cross_entropy_with_logits(D(x_real), ones)
              + F.binary_cross_entropy_with_logits(D(x_fake.detach()), zeros))
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    return loss_D


def _run_d_step(step):
    G, D, opt_D, z, x_real = _gan()
    names = {p: f"D.{n}" for n, p in D.named_parameters()}
    records, handles = _grads_at_steps({"opt_D": opt_D}, names)
    try:
        step(G, D, opt_D, z, x_real)
    finally:
        for h in handles:
            h.remove()
    return records, G


def check_d_step(d_step) -> bool:
    """Lesson 04. d_step(G, D, opt_D, z, x_real): one D step on seed 000's models, real images labelled 1 and
    fakes 0. Every D parameter must get the right gradient at opt_D.step(), and no G parameter any."""
    name = "d_step"
    if _not_solved(name, d_step, "your d_step"):
        return False
    reference, _ = _run_d_step(reference_d_step)
    try:
        mine, G = _run_d_step(d_step)
    except Exception as error:
        return _verdict(name, [_raised("d_step", error, _AUTOGRAD_HINTS + [
            ("must be the same as input size", "D returns one logit per image, shape [B]: labels of shape [B]")])],
            "")
    problems = []
    reached = [n for n, p in G.named_parameters() if p.grad is not None]
    if reached:
        problems.append(f"loss_D reached G: {len(reached)} of G's 14 parameters have a .grad (G.{reached[0]}, ...). "
                        f"Hint: give D the fake batch detached, x_fake.detach()")
    problems += _compare_steps(mine, reference, "labels 1 for x_real and 0 for the fakes, opt_D.zero_grad() right "
                               "before loss_D.backward()", atol=1e-5)
    return _verdict(name, problems, "D's 8 parameters get the right gradient at opt_D.step(), and none of G's 14 "
                                    "gets any")


# --- lesson 07: bring your own bug to the doctor -------------------------------------------------------------
DOCTOR_KINDS = {"leaf_inplace": "an in-place op on a leaf that requires grad (lesson 01)",
                "freed": "a backward through a freed graph (lesson 02)",
                "version": "a saved tensor changed in place (lesson 03)"}


def check_doctor_bug(buggy_loop, expected=None, quiet=False) -> bool:
    """Lesson 07. buggy_loop() is a short training loop with one of the lessons' errors in it. It runs under the
    doctor; the answer is right when it raises an error the doctor diagnoses (and, if `expected` is given, of
    that kind: "leaf_inplace", "freed" or "version"). The doctor's own report is printed unless quiet=True."""
    from gan_lessons.doctor import doctor
    name = "your bug"
    if _not_solved(name, buggy_loop, "your buggy loop"):
        return False
    if expected is ...:
        print(f"? {name}: not solved yet. Replace the ... in `expected = ...` with the diagnosis kind you expect: "
              f"{', '.join(repr(k) for k in DOCTOR_KINDS)}.")
        return False
    if expected is not None and expected not in DOCTOR_KINDS:
        return _verdict(name, [f"expected = {expected!r} is not a diagnosis kind the doctor gives for an error; "
                               f"pick one of {', '.join(repr(k) for k in DOCTOR_KINDS)}"], "")
    watch = doctor()
    stderr = io.StringIO()
    try:
        with redirect_stderr(stderr) if quiet else nullcontext():
            with watch:
                buggy_loop()
    except Exception as error:
        diagnosis = getattr(error, "diagnosis", None)
        if diagnosis is None:
            return _verdict(name, [_raised("your loop", error, []) + " The doctor diagnoses only the lessons' "
                                   "autograd errors: " + "; ".join(DOCTOR_KINDS.values())], "")
        if expected is not None and diagnosis.kind != expected:
            return _verdict(name, [f"the doctor diagnosed {diagnosis.kind!r} ({DOCTOR_KINDS[diagnosis.kind]}), not "
                                   f"{expected!r} as you expected: read its report, and either change the bug "
                                   f"or your expectation"], "")
        return _verdict(name, [], f"{type(error).__name__}, diagnosed by the doctor as {diagnosis.kind!r}: "
                                  f"{diagnosis.summary}")
    warned = [d.summary for d in watch.diagnoses]
    extra = f" (the doctor only warned: {headline(warned[0])}; that bug is silent)" if warned else ""
    return _verdict(name, [f"your loop ran without an error, so there is nothing to diagnose{extra}. Hint: put in one "
                           f"of {'; '.join(DOCTOR_KINDS.values())}"], "")

