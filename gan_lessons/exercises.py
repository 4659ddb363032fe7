"""Build-or-fix exercises: the student writes or fixes a function, and a checker runs it and says what is still
wrong. One plain function per exercise. Each prints one "✓ ..." line when the answer is right, otherwise one
line per remaining problem (what is wrong, and a hint), and returns True or False. Feedback, not an assert:
an exercise left as `...` prints "not solved yet", so "Run All" goes on.

    my_answer = sgd_step  # SOLUTION: point this at your function
    exercises.check_sgd_step(my_answer)"""
import copy
import io
from contextlib import nullcontext, redirect_stderr

import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.costs import grads_at_steps
from gan_lessons.lesson import headline
from gan_lessons.models import Reshape

ELLIPSIS_HINT = "a `...` is still in your function: replace it with your code"


# --- shared helpers ----------------------------------------------------------------------------------------
def _not_solved(name, answer, what="your function") -> bool:
    if answer is ...:
        print(f"? {name}: not solved yet. Replace the ... in `my_answer = ...` with {what} and run the cell again.")
        return True
    if not callable(answer):
        print(f"✗ {name}: my_answer is not a function but a value of type {type(answer).__name__}. Point it at {what}, "
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



# --- lesson 01: DCGAN's weight initialisation, without the leaf error ----------------------------------------
def _init_model():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(64, 256), nn.BatchNorm1d(256), nn.ReLU(), Reshape(16, 4, 4),
                         nn.ConvTranspose2d(16, 8, 4, 2, 1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 1, 3, 1, 1))


def _init_problems(model):
    """What is wrong with model's values after init: DCGAN's N(0, 0.02) weights for Linear and convolutions,
    N(1, 0.02) for BatchNorm's weight, zeros for every bias."""
    problems = []
    for n, m in model.named_modules():
        if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm1d, nn.BatchNorm2d)):
            kind = type(m).__name__
            mean = 1.0 if kind.startswith("BatchNorm") else 0.0
            w = m.weight.detach()
            if abs(w.mean().item() - mean) > 0.01 or not 0.014 < w.std().item() < 0.026:
                problems.append(f"{kind} {n}: weight has mean {w.mean().item():.3f} and std {w.std().item():.3f}; "
                                f"it should be drawn from N({mean:g}, 0.02)")
            if m.bias is not None and m.bias.detach().abs().max() > 0:
                problems.append(f"{kind} {n}: bias is not zero; fill it with zeros")
    return problems


def check_init(init_weights) -> bool:
    """Lesson 01. model.apply(init_weights) must set DCGAN's initial values in place, and leave every parameter
    the same leaf that requires grad, so the optimizer built afterwards still trains it."""
    name = "init_weights"
    if _not_solved(name, init_weights, "your init_weights"):
        return False
    model = _init_model()
    before = {n: p for n, p in model.named_parameters()}
    values = {n: p.detach().clone() for n, p in model.named_parameters()}
    try:
        model.apply(init_weights)
    except Exception as error:
        return _verdict(name, [_raised("init_weights", error, _AUTOGRAD_HINTS)], "")
    problems = []
    for n, p in model.named_parameters():
        if p is not before[n]:
            problems.append(f"parameter {n} was replaced by a new tensor; an optimizer made before init would "
                            f"still hold the old one: change the values in place")
        elif not (p.is_leaf and p.requires_grad):
            problems.append(f"parameter {n} is no longer a leaf that requires grad: change it under torch.no_grad()")
    if not problems and all(torch.equal(p.detach(), values[n]) for n, p in model.named_parameters()):
        problems.append("init_weights changed nothing: model.apply(init_weights) calls it once per module m; set "
                        "m.weight and m.bias of the Linear, convolution and BatchNorm modules")
    if problems:
        return _verdict(name, problems[:4], "")
    problems = _init_problems(model)
    if not problems:
        model(torch.randn(4, 64)).mean().backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None]
        if missing:
            problems.append(f"after init, backward no longer reaches {missing[0]}")
    return _verdict(name, problems[:6], "DCGAN's values set in place; every parameter is still the same leaf, "
                                        "requires grad and gets a gradient")


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
    records, handles = grads_at_steps({"optimizer1": optimizer1, "optimizer2": optimizer2}, names)
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
    records, handles = grads_at_steps({"opt_D": opt_D}, names)
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


# --- lesson 04: sampling for a figure, with nothing left behind ---------------------------------------------
def _sampling_problem():
    from gan_lessons.models import Generator
    torch.manual_seed(4)
    G = Generator(tanh=True)
    opt = optim.SGD(G.parameters(), lr=0.1)
    for _ in range(2):                           # a few training steps, so the running statistics mean something
        opt.zero_grad()
        G(torch.randn(16, G.z_dim)).mean().backward()
        opt.step()
    return G, torch.randn(8, G.z_dim)


def check_sample(sample) -> bool:
    """Lesson 04. sample(G, z) returns G's images for a figure mid-training: computed in evaluation mode (BatchNorm
    uses its running statistics), with no graph built, G's running statistics and parameters untouched, and G left
    in the mode it was in."""
    name = "sample"
    if _not_solved(name, sample, "your sample"):
        return False
    G, z = _sampling_problem()
    G.eval()
    with torch.no_grad():
        expected = G(z)
    G.train()
    state = {k: v.clone() for k, v in G.state_dict().items()}
    saved = []
    try:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
            images = sample(G, z)
    except Exception as error:
        return _verdict(name, [_raised("sample", error, _AUTOGRAD_HINTS + [
            ("expected to be boolean", "G.train(mode) takes True (training) or False (evaluation)")])], "")
    problems = []
    if not isinstance(images, torch.Tensor):
        return _verdict(name, [f"sample returned {type(images).__name__}, not the tensor of images: return it"], "")
    moved = [k for k, v in G.state_dict().items() if not torch.equal(v, state[k])]
    if any("running" in k or "num_batches" in k for k in moved):
        problems.append(f"G's BatchNorm running statistics changed ({moved[0]}, ...): a training-mode forward "
                        f"updates them, graph or no graph; run G in eval() mode")
    elif moved:
        problems.append(f"G's parameters changed ({moved[0]}, ...): sampling must not step or modify G")
    if saved:
        problems.append(f"G's forward saved {len(saved)} tensors for a backward that never runs: build no graph "
                        f"(torch.no_grad() around the forward); a detach() afterwards comes too late")
    if images.requires_grad:
        problems.append("the images still require grad and carry a graph back into G")
    if not G.training:
        problems.append("G is left in eval mode, and the next training step would use the running statistics: "
                        "put it back with G.train()")
    if images.shape != expected.shape or not torch.allclose(images, expected, atol=1e-6):
        problems.append("the images differ from G's evaluation-mode output: BatchNorm must use the running "
                        "statistics (G.eval() before the forward)")
    return _verdict(name, problems, "eval-mode images, no graph, G's statistics and parameters untouched, G back "
                                    "in training mode")

# --- lesson 06: a checkpoint a run resumes from exactly ------------------------------------------------------
def _resume_run(seed):
    torch.manual_seed(seed)
    G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
    opt_G = optim.Adam(G.parameters(), lr=1e-2, betas=(0.5, 0.999))
    opt_D = optim.Adam(D.parameters(), lr=1e-2, betas=(0.5, 0.999))
    return G, D, opt_G, opt_D


def _resume_steps(G, D, opt_G, opt_D, steps):
    from gan_lessons.strategies import d_first_fresh_fake
    x_real = torch.tensor([2.0, -1.0]) + 0.3 * torch.arange(16.0).reshape(8, 2).sin()
    for _ in range(steps):
        d_first_fresh_fake(G, D, opt_G, opt_D, x_real, lambda n: torch.randn(n, 4))


def _tensors(state):
    """Every tensor in a nested state dict, flattened to (path, tensor)."""
    if isinstance(state, torch.Tensor):
        return [("", state)]
    items = state.items() if isinstance(state, dict) else enumerate(state) if isinstance(state, (list, tuple)) else []
    return [(f"{k}.{p}".rstrip("."), t) for k, v in items for p, t in _tensors(v)]


def _same(a, b) -> bool:
    ta, tb = _tensors(a), _tensors(b)
    return len(ta) == len(tb) and all(pa == pb and torch.equal(x, y) for (pa, x), (pb, y) in zip(ta, tb))


def check_resume(save_state, load_state, steps=3) -> bool:
    """Lesson 06. save_state(G, D, opt_G, opt_D) returns what a checkpoint holds; load_state(state, G, D, opt_G,
    opt_D) puts it back into fresh objects. The state goes through torch.save and torch.load(weights_only=True),
    as the trainer's checkpoints do. A run of 2 * steps steps and a run stopped after `steps`, saved, loaded into
    differently initialised objects and continued must end with bit-identical weights."""
    import tempfile
    from pathlib import Path
    name = "checkpoint"
    for what, answer in (("your save_state", save_state), ("your load_state", load_state)):
        if _not_solved(name, answer, what):
            return False
    G, D, opt_G, opt_D = _resume_run(0)
    _resume_steps(G, D, opt_G, opt_D, 2 * steps)
    straight = [p.detach().clone() for p in (*G.parameters(), *D.parameters())]

    G, D, opt_G, opt_D = _resume_run(0)
    _resume_steps(G, D, opt_G, opt_D, steps)
    truth = copy.deepcopy({"G": G.state_dict(), "D": D.state_dict(), "opt_G": opt_G.state_dict(),
                           "opt_D": opt_D.state_dict(), "rng": torch.get_rng_state()})
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "last.pt"
        try:
            saved = save_state(G, D, opt_G, opt_D)
            if ... in (saved.values() if isinstance(saved, dict) else [saved]):
                return _verdict(name, [ELLIPSIS_HINT + " (save_state returned a `...`)"], "")
            torch.save(saved, path)
        except Exception as error:
            return _verdict(name, [_raised("save_state", error, [])], "")
        if not torch.equal(torch.get_rng_state(), truth["rng"]):
            return _verdict(name, ["save_state drew random numbers: saving must leave the run exactly as it was"], "")
        try:
            state = torch.load(path, weights_only=True)
        except Exception as error:
            return _verdict(name, [f"torch.load(weights_only=True) refuses what save_state returned "
                                   f"({headline(str(error))}): keep to state_dict()s, tensors, numbers and "
                                   f"dicts of them, as the trainer does"], "")
    G, D, opt_G, opt_D = _resume_run(1)            # other initial weights, another random state
    try:
        load_state(state, G, D, opt_G, opt_D)
    except Exception as error:
        return _verdict(name, [_raised("load_state", error, [("Missing key", "load each state_dict into the "
                                                             "object it came from")])], "")
    problems = []
    if not (_same(G.state_dict(), truth["G"]) and _same(D.state_dict(), truth["D"])):
        problems.append("after load_state, G's or D's weights are not the saved ones: save and load both "
                        "models' state_dict()")
    for opt_name, opt in (("opt_G", opt_G), ("opt_D", opt_D)):
        if not _same(opt.state_dict()["state"], truth[opt_name]["state"]):
            problems.append(f"after load_state, {opt_name} has lost Adam's running averages and step count (its "
                            f"state): without them the next steps differ; save and load {opt_name}.state_dict()")
    if not torch.equal(torch.get_rng_state(), truth["rng"]):
        problems.append("after load_state, torch's random state is not the saved one, so the resumed run draws "
                        "other z: save torch.get_rng_state() and put it back with torch.set_rng_state()")
    if not problems:
        _resume_steps(G, D, opt_G, opt_D, steps)
        resumed = [p.detach() for p in (*G.parameters(), *D.parameters())]
        if not all(torch.equal(a, b) for a, b in zip(straight, resumed)):
            problems.append("the resumed run ends with other weights than the run that never stopped")
    return _verdict(name, problems, f"a run stopped after {steps} steps, saved, loaded into fresh objects and "
                                    f"continued ends with the same weights, bit for bit, as one that never stopped")

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
            what = DOCTOR_KINDS.get(diagnosis.kind, diagnosis.summary)      # a kind beyond the three: its summary
            return _verdict(name, [f"the doctor diagnosed {diagnosis.kind!r} ({what}), not "
                                   f"{expected!r} as you expected: read its report, and either change the bug "
                                   f"or your expectation"], "")
        return _verdict(name, [], f"{type(error).__name__}, diagnosed by the doctor as {diagnosis.kind!r}: "
                                  f"{diagnosis.summary}")
    warned = [d.summary for d in watch.diagnoses]
    extra = f" (the doctor only warned: {headline(warned[0])}; that bug is silent)" if warned else ""
    return _verdict(name, [f"your loop ran without an error, so there is nothing to diagnose{extra}. Hint: put in one "
                           f"of {'; '.join(DOCTOR_KINDS.values())}"], "")


# --- lesson 07: seed 000's step, fixed with the doctor's help ------------------------------------------------
def reference_seed000_step(g, d, g_optimizer, d_optimizer, x_real, z):
    """Seed 000's step, fixed: raw logits into the *_with_logits loss, D's fake term detached, D first, then G
    through the stepped D, one forward of g."""
    bce = F.binary_cross_entropy_with_logits
    real_label, fake_label = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)
    d_loss = bce(d(x_real), real_label) + bce(d(gz.detach()), fake_label)
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(d(gz), real_label)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


def _run_seed000(step, calls, watch=None):
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(0)
    g, d = Generator(), Discriminator()
    g_optimizer, d_optimizer = optim.Adam(g.parameters(), lr=1e-3), optim.Adam(d.parameters(), lr=1e-3)
    batches = [(torch.rand(8, 1, 28, 28) * 2 - 1, torch.randn(8, g.z_dim)) for _ in range(calls)]
    names = {p: f"g.{n}" for n, p in g.named_parameters()}
    names.update({p: f"d.{n}" for n, p in d.named_parameters()})
    records, handles = grads_at_steps({"d_optimizer": d_optimizer, "g_optimizer": g_optimizer}, names)
    try:
        for x_real, z in batches:
            if watch is None:
                step(g, d, g_optimizer, d_optimizer, x_real, z)
            else:
                with watch(g=g, d=d, g_optimizer=g_optimizer, d_optimizer=d_optimizer) as doc:
                    step(g, d, g_optimizer, d_optimizer, x_real, z)
                return doc.diagnoses
    finally:
        for h in handles:
            h.remove()
    return records


def check_seed000_step(fixed_step, calls=2) -> bool:
    """Lesson 07. fixed_step(g, d, g_optimizer, d_optimizer, x_real, z): seed 000's step (D first, then G, one
    forward of g) without its bugs. It runs once under the doctor, which must find nothing to raise or warn
    about, then `calls` times on seed 000's models, comparing every gradient at each optimizer step with the
    right ones."""
    import warnings

    from gan_lessons.doctor import doctor
    name = "fixed_step"
    if _not_solved(name, fixed_step, "your fixed_step"):
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = _run_seed000(fixed_step, 1, watch=doctor)
    except Exception as error:
        diagnosis = getattr(error, "diagnosis", None)
        hint = f"the doctor says: {headline(diagnosis.summary)}" if diagnosis else None
        return _verdict(name, [_raised("fixed_step", error, _AUTOGRAD_HINTS) if hint is None else
                               f"fixed_step raised {type(error).__name__}, and {hint}"], "")
    warned = dict.fromkeys(f"the doctor still warns: {headline(d.summary)}" for d in found if d.kind == "suspicious")
    reference = _run_seed000(reference_seed000_step, calls)
    problems = list(warned) + _compare_steps(
        _run_seed000(fixed_step, calls), reference, "pass D raw logits, detach the fake in D's fake term, and give "
        "G's loss D's output on the fake batch after D's step", atol=1e-5, limit=3)
    return _verdict(name, problems, "the doctor finds nothing, and every parameter of g and d gets the right "
                                    "gradient at each step")


# Lesson 08 (gradient penalties)
_GP_HINTS = [
    ("One of the differentiated Tensors does not require grad",
     "the interpolates must be a leaf that requires grad: x_hat = (...).detach().requires_grad_(True)"),
    ("grad can be implicitly created only for scalar outputs",
     "D gives one score per image: pass grad_outputs=torch.ones_like(scores) to torch.autograd.grad"),
    ("backward through the graph a second time",
     "create_graph=True keeps the graph; a retain_graph=False beside it frees D's graph too early"),
    ("does not require grad and does not have a grad_fn",
     "a penalty built from a gradient taken without create_graph=True is a constant: nothing can backpropagate "
     "through it"),
]


def _critic():
    """A small critic (no BatchNorm: a per-sample penalty needs per-sample scores), a G, and one batch."""
    torch.manual_seed(8)
    D = nn.Sequential(nn.Linear(6, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), Reshape())
    G = nn.Linear(3, 6)
    x_real, x_fake = torch.randn(5, 6), G(torch.randn(5, 3))        # x_fake still carries G's graph
    return D, G, x_real, x_fake


def _penalty_problems(penalty, reference, D, G):
    """What is wrong with a penalty the student computed, compared with the reference on the same input."""
    if not isinstance(penalty, torch.Tensor) or penalty.numel() != 1:
        return [f"your function returned {type(penalty).__name__}"
                f"{'' if not isinstance(penalty, torch.Tensor) else ' of shape ' + str(tuple(penalty.shape))}: return "
                f"one number, the penalty averaged over the batch (a 0-dim tensor)"]
    if not penalty.requires_grad:
        return ["the penalty is a constant (requires_grad=False): it trains nothing, and nothing tells you. The "
                "gradient inside it was taken without create_graph=True"]
    if not torch.allclose(penalty.detach(), reference.detach(), rtol=1e-4, atol=1e-6):
        return [f"the penalty is {penalty.item():.5f}, the right one {reference.item():.5f}: check the per-image "
                f"gradient norm over all pixels, minus the target, squared, then the batch mean"]
    problems = []
    if any(p.grad is not None for p in G.parameters()) or torch.autograd.grad(
            penalty, list(G.parameters()), retain_graph=True, allow_unused=True)[0] is not None:
        problems.append("the penalty reaches G's parameters: the fake batch must be detached (a critic's penalty "
                        "trains the critic only)")
    mine = torch.autograd.grad(penalty, list(D.parameters()), allow_unused=True)
    right = torch.autograd.grad(reference, list(D.parameters()), allow_unused=True)
    for (pname, _), g, r in zip(D.named_parameters(), mine, right):
        if (g is None) != (r is None) or (g is not None and not torch.allclose(g, r, rtol=1e-4, atol=1e-6)):
            problems.append(f"D's {pname} gets a different gradient from your penalty than from the right one")
            break
    return problems


def check_gradient_penalty(gradient_penalty) -> bool:
    """Lesson 08: the student's gradient_penalty(D, x_real, x_fake, eps) against WGAN-GP's, value and gradients."""
    from gan_lessons.strategies import gradient_penalty as reference_penalty
    name = "gradient_penalty"
    if _not_solved(name, gradient_penalty, "your gradient_penalty"):
        return False
    D, G, x_real, x_fake = _critic()
    eps = torch.rand(len(x_real), 1, generator=torch.Generator().manual_seed(3))
    reference = reference_penalty(D, x_real, x_fake, eps=eps)
    try:
        penalty = gradient_penalty(D, x_real, x_fake, eps)
    except Exception as error:                              # the student's code: report what it raised
        return _verdict(name, [_raised("gradient_penalty", error, _GP_HINTS)], "")
    return _verdict(name, _penalty_problems(penalty, reference, D, G),
                    "the right value, a graph back to D's parameters (create_graph=True), D's gradients equal to "
                    "WGAN-GP's, and nothing reaches G")


def check_lazy_r1(r1_term, steps=8, every=4, gamma=10.0) -> bool:
    """Lesson 08: r1_term(D, x_real, step, every, gamma) must be 0 off the schedule and gamma/2 * every * R1 on it."""
    from gan_lessons.strategies import r1_penalty
    name = "lazy R1"
    if _not_solved(name, r1_term, "your r1_term"):
        return False
    problems = []
    for step in range(steps):
        D, G, x_real, _ = _critic()
        due = step % every == 0
        reference = r1_penalty(D, x_real) * gamma / 2 * every if due else torch.zeros(())
        try:
            term = r1_term(D, x_real.clone(), step, every, gamma)
        except Exception as error:
            return _verdict(name, [_raised(f"r1_term at step {step}", error, _GP_HINTS)], "")
        if not due:
            value = term.item() if isinstance(term, torch.Tensor) and term.numel() == 1 else term
            if value != 0:
                problems.append(f"at step {step} the term is {value!r}: with every={every} it is computed only when "
                                f"step % every == 0, and is 0 in between")
                break
            continue
        if isinstance(term, torch.Tensor) and term.numel() == 1 and term.requires_grad and not torch.allclose(
                term.detach(), reference.detach(), rtol=1e-4):
            ratio = (term / reference).item()
            if abs(ratio - 1 / every) < 1e-3:
                problems.append(f"at step {step} the term is 1/{every} of the right one: a penalty applied every "
                                f"{every} steps is multiplied by {every}, so that on average it weighs as much as one "
                                f"applied every step")
            else:
                problems.append(f"at step {step} the term is {term.item():.5f}, the right one {reference.item():.5f} "
                                f"(gamma/2 * every * mean squared gradient norm)")
            break
        found = _penalty_problems(term, reference, D, G)
        if found:
            problems += [f"at step {step}: {p}" for p in found]
            break
    return _verdict(name, problems, f"computed at steps 0, {every}, ... only, weighted gamma/2 * every, with the "
                                    f"right gradients for D")


# Lesson 09 (GAN loop mechanics)
# --- lesson 09: a G step with D frozen, that puts everything back -------------------------------------------
class _Interrupt(Exception):
    """What the checker raises inside D's forward, standing in for a Ctrl-C or a bad batch."""


def _frozen_problem():
    """Seed 000's G and D; D's first layer frozen on purpose, D's .grad holding an earlier gradient."""
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(9)
    G, D = Generator(), Discriminator()
    D.net[0].requires_grad_(False)
    x_real = torch.rand(8, 1, 28, 28) * 2 - 1
    F.binary_cross_entropy_with_logits(D(x_real), torch.ones(8)).backward()
    return G, D, optim.Adam(G.parameters(), lr=1e-3), torch.randn(8, G.z_dim)


def reference_frozen_g_step(G, D, opt_G, z):
    """Lesson 09: G's step with D frozen, each of D's flags restored as it was, even on an error."""
    flags = [p.requires_grad for p in D.parameters()]
    D.requires_grad_(False)
    try:
        opt_G.zero_grad()
        logits = D(G(z))
        loss_G = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))
        loss_G.backward()
        opt_G.step()
    finally:
        for p, flag in zip(D.parameters(), flags):
            p.requires_grad_(flag)
    return loss_G


def _run_frozen(g_step, interrupt=False):
    """Run g_step once on _frozen_problem(); return what the checks need."""
    G, D, opt_G, z = _frozen_problem()
    names = {p: f"G.{n}" for n, p in G.named_parameters()}
    records, handles = grads_at_steps({"opt_G": opt_G}, names)
    run = {"flags": {n: p.requires_grad for n, p in D.named_parameters()},
           "grads": {n: None if p.grad is None else p.grad.clone() for n, p in D.named_parameters()},
           "weights": {n: p.detach().clone() for n, p in D.named_parameters()}, "at forward": None, "error": None}

    def at_forward(module, args):
        if run["at forward"] is None:
            run["at forward"] = {n: p.requires_grad for n, p in D.named_parameters()}
        if interrupt:
            raise _Interrupt("raised by the checker inside D's forward")
    handles.append(D.register_forward_pre_hook(at_forward))
    try:
        g_step(G, D, opt_G, z)
    except Exception as error:  # noqa: BLE001 -- reported by the checker
        run["error"] = error
    finally:
        for h in handles:
            h.remove()
    run["after"] = {n: p.requires_grad for n, p in D.named_parameters()}
    run["D"], run["records"] = D, records
    return run


def _flag_problems(run, when):
    changed = [n for n, flag in run["flags"].items() if run["after"][n] != flag]
    if not changed:
        return []
    n = changed[0]
    was = "frozen" if not run["flags"][n] else "trainable"
    return [f"{when}, D.{n} {'requires' if run['after'][n] else 'does not require'} grad, but it was {was} before "
            f"({len(changed)} of D's {len(run['flags'])} flags changed): remember each flag before freezing and put "
            f"each one back" + (" in a `finally:` block, so that it runs even when the step raises"
                                if "error" in when else ", not D.requires_grad_(True) for all")]


def check_frozen_g_step(g_step) -> bool:
    """Lesson 09. g_step(G, D, opt_G, z): one G step on bce(D(G(z)), 1) with D frozen during its forward and
    backward. D's .grad and weights must be left as they were, G must step on the right gradient, and each of D's
    requires_grad flags must be back as it was afterwards, also when the step raises (the error passes through)."""
    name = "g_step"
    if _not_solved(name, g_step, "your g_step"):
        return False
    reference = _run_frozen(reference_frozen_g_step)["records"]
    run = _run_frozen(g_step)
    if run["error"] is not None:
        return _verdict(name, [_raised("g_step", run["error"], _AUTOGRAD_HINTS + [
            ("does not require grad and does not have a grad_fn",
             "nothing in loss_G requires grad: D is frozen, so the graph must come from G; give D G(z) itself, "
             "not G(z).detach()")])] + _flag_problems(run, "after that error"), "")
    problems = _compare_steps(run["records"], reference, "G's loss is bce(D(G(z)), 1), through D, after "
                              "opt_G.zero_grad()", atol=1e-6, limit=3)
    D = run["D"]
    touched = [n for n, p in D.named_parameters() if not (
        (p.grad is None and run["grads"][n] is None)
        or (p.grad is not None and run["grads"][n] is not None and torch.equal(p.grad, run["grads"][n])))]
    if touched:
        problems.append(f"D's .grad changed (D.{touched[0]}, {len(touched)} of {len(run['grads'])}): loss_G's "
                        f"backward went into D's parameters; freeze D before its forward")
    elif run["at forward"] is not None and any(run["at forward"].values()):
        thawed = next(n for n, flag in run["at forward"].items() if flag)
        problems.append(f"D was not frozen when its forward ran (D.{thawed} required grad): D's .grad is "
                        f"untouched, but the forward saved activations for a D gradient nobody computes; call "
                        f"D.requires_grad_(False) before D(...)")
    if any(not torch.equal(p.detach(), run["weights"][n]) for n, p in D.named_parameters()):
        problems.append("D's weights changed: G's step must not step or modify D")
    problems += _flag_problems(run, "after the step")
    if not problems:
        interrupted = _run_frozen(g_step, interrupt=True)
        if interrupted["at forward"] is None:
            problems.append("g_step never calls D")
        elif not isinstance(interrupted["error"], _Interrupt):
            problems.append("an error raised inside D's forward did not come out of g_step: let it through "
                            "(try/finally, not try/except), so the caller sees that the step failed")
        problems += _flag_problems(interrupted, "after an error inside the step")
    return _verdict(name, problems, "G steps on the right gradient, D's .grad and weights are untouched, D was "
                                    "frozen for its forward, and every flag of D is back as it was, also after an "
                                    "error")
