"""The tempting wrong fixes the doctor names, each run on a tiny case to show it fail the way its
line says. Every test first checks that the doctor's diagnosis of the bug says that line (`  not: ...`), chosen by
cause as the right fixes are, then runs the wrong fix:

- a step between two backwards: retain_graph=True still raises the same version error; an older torch (its
  optimizers updated `p.data`: emulated so, as lesson 05 does) raises nothing and gives a gradient that is neither
  the one through the D of the forward nor through the stepped D; `.detach()` in G's loss leaves G's gradients None
  and G's weights unchanged by its step (another net's loss: the same, for the net before it);
- an in-place op on a saved tensor, or on a leaf: `.data` raises nothing and gives a gradient other than the true
  one, where torch.no_grad() (on the leaf) still raises; when the values written into the leaf require grad,
  torch.no_grad() around the write raises nothing and their gradient is lost (what the out-of-place write gives);
- a freed graph: retain_graph=True trades the error for the version error when a step changes a saved weight in
  between; with no step between it is right (the gradients of a fresh forward) and keeps the saved tensors alive;
- a tensor carried across passes: retain_graph=True makes each backward reach every earlier pass, and the first
  step turns the error into the version error;
- a tensor made once before a loop and used by every pass: detach() leaves the net that made it without gradients,
  and retain_graph=True gives the version error once that net steps;
- one loss differentiated twice: retain_graph=True doubles .grad;
- an inference tensor: detach() leaves it one (still refused for saving), requires_grad_() is refused; a gradient accumulator replaced by set_: allow_unused=True returns None for a tensor the graph used;
  requires_grad changed on a computed tensor: torch.no_grad() around it still raises (numpy() under no_grad, which
  works, is offered as a fix);
- an out= call of a factory (torch.arange) into a parameter: the same call under torch.no_grad() raises nothing and
  leaves the parameter not requiring grad, where p.copy_() under no_grad keeps it trainable."""
import contextlib
import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons import graphs
from gan_lessons.doctor import doctor
from gan_lessons.doctor.report import (
    CARRIED_WRONG,
    DETACH_WRONG,
    FREED_WRONG,
    GAN_WRONG,
    GRAD_WRITE_FIXES,
    GRAD_WRITE_WRONG,
    INPLACE_WRONG,
    LEAF_WRONG,
    REUSED_WRONG,
    SELF_WRITE_FIXES,
    SELF_WRITE_WRONG,
    SHARED_TERM_FIXES,
    SHARED_TERM_WRONG,
    STEP_WRONG,
    TWICE_WRONG,
    UNREGISTERED_FIXES,
    UNREGISTERED_WRONG,
)

VERSION_ERROR = "modified by an inplace operation"


def diagnosis_of(bug, **named):
    """The doctor's diagnosis of the error bug() raises, with `named` given to doctor(...)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as raised:
            with doctor(**named):
                bug()
    return raised.value.diagnosis


def says(diagnosis, wrong, not_=()):
    text = diagnosis.text()
    for line, _ in wrong:
        assert f"\n  not: {line}" in text, text
    for line, _ in not_:
        assert line not in text, text


def nets(first="G", second="D"):
    """Two small nets, the first feeding the second, each with its optimizer (a GAN's G and D by default)."""
    torch.manual_seed(0)
    a = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    b = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1), nn.Flatten(0))
    return {first: a, second: b, f"opt_{first}": optim.SGD(a.parameters(), lr=0.1),
            f"opt_{second}": optim.SGD(b.parameters(), lr=0.1)}


def step_between(G, D, opt_G, opt_D, retain=False, detach_in_G=False, old_torch=False):
    """Seed 003's "strategy 1": G's loss comes from a D forward made before D's step, and its backward runs after.
    Returns G's gradients."""
    z, x_real = torch.randn(16, 4), torch.randn(16, 2) + 3
    x_fake = G(z)
    d_for_G = D(x_fake.detach() if detach_in_G else x_fake)
    loss_D = F.softplus(D(x_fake.detach())).mean() + F.softplus(-D(x_real)).mean()
    opt_D.zero_grad()
    loss_D.backward(retain_graph=retain)
    if old_torch:                       # torch 1.4's SGD: p.data.add_(-lr, d_p), which moves no version counter
        for p in D.parameters():
            p.data.add_(p.grad, alpha=-0.1)
    else:
        opt_D.step()
    loss_G = F.softplus(-d_for_G).mean()
    opt_G.zero_grad()
    loss_G.backward(retain_graph=retain)
    return [p.grad for p in G.parameters()]


def test_a_step_between_backwards_names_its_three_wrong_fixes():
    n = nets()
    d = diagnosis_of(lambda: step_between(**n), **n)
    assert d.kind == "version" and d.facts["modified by"].startswith("opt_D.step()")
    says(d, STEP_WRONG + GAN_WRONG, not_=DETACH_WRONG)


def test_retain_graph_still_raises_the_version_error():
    with pytest.raises(RuntimeError, match=VERSION_ERROR) as plain:
        step_between(**nets())
    with pytest.raises(RuntimeError, match=VERSION_ERROR) as retained:
        step_between(**nets(), retain=True)
    assert str(retained.value) == str(plain.value)          # the same tensor, the same versions


def test_an_older_torch_gives_a_silently_wrong_gradient():
    """No error, and G's gradient matches neither the D that made the forward nor the D after its step."""
    n = nets()
    before = copy.deepcopy(n["D"])
    torch.manual_seed(1)
    old = step_between(**n, old_torch=True)
    after = copy.deepcopy(n["D"])

    def through(D):                                        # G's gradient through one consistent D
        m = nets()
        m["D"].load_state_dict(D.state_dict())
        torch.manual_seed(1)
        z = torch.randn(16, 4)
        m["G"].zero_grad()
        F.softplus(-m["D"](m["G"](z))).mean().backward()
        return [p.grad for p in m["G"].parameters()]

    for right in (through(before), through(after)):
        assert not all(torch.allclose(a, b, atol=1e-6) for a, b in zip(old, right))


def test_detach_in_G_loss_stops_G_learning():
    """D(fake.detach()) in G's loss: G's gradients stay None, its step changes nothing (here the error even stays:
    D's deeper layers still saved the weights D's step changed)."""
    with pytest.raises(RuntimeError, match=VERSION_ERROR):
        step_between(**nets(), detach_in_G=True)
    n = nets()
    G, D, opt_G = n["G"], n["D"], n["opt_G"]
    weights = [p.detach().clone() for p in G.parameters()]
    opt_G.zero_grad()
    F.softplus(-D(G(torch.randn(16, 4)).detach())).mean().backward()      # after D's step: no error at all
    opt_G.step()
    assert all(p.grad is None for p in G.parameters())
    assert all(torch.equal(p, w) for p, w in zip(G.parameters(), weights))


def test_another_net_s_loss_names_the_detach_for_that_net():
    """Not a GAN (an actor trained through a Q-net stepped first): the detach line names no G, and detaching the
    actor's output leaves the actor's gradients None."""
    n = nets("actor", "q_net")
    d = diagnosis_of(lambda: step_between(n["actor"], n["q_net"], n["opt_actor"], n["opt_q_net"]), **n)
    assert d.facts["tensor"].startswith("q_net.2.weight.T")
    says(d, STEP_WRONG + DETACH_WRONG, not_=GAN_WRONG)
    n = nets("actor", "q_net")
    (-n["q_net"](n["actor"](torch.randn(16, 4)).detach()).mean()).backward()
    assert all(p.grad is None for p in n["actor"].parameters())


def sigmoid_then_inplace(how):
    """y = sigmoid(lin(x)) is saved by sigmoid's backward; then y is halved in place, `how`. Returns lin's grad."""
    torch.manual_seed(0)
    lin = nn.Linear(3, 3)
    y = torch.sigmoid(lin(torch.randn(5, 3)))
    if how == "in place":
        y.mul_(0.5)
    elif how == ".data":
        y.data.mul_(0.5)
    else:                                   # the right fix: clone, then change the copy
        y = y.clone().mul_(0.5)
    (y * torch.arange(3.0)).sum().backward()
    return lin.weight.grad


def test_an_inplace_op_names_data_and_data_gives_a_wrong_gradient():
    d = diagnosis_of(lambda: sigmoid_then_inplace("in place"))
    assert d.kind == "version"
    says(d, INPLACE_WRONG, not_=STEP_WRONG)
    assert not torch.allclose(sigmoid_then_inplace(".data"), sigmoid_then_inplace("clone"))


def test_a_leaf_inplace_names_data_and_data_gives_a_wrong_gradient():
    torch.manual_seed(0)
    w = torch.randn(4, requires_grad=True)

    def bug():
        w.add_(1.0)                         # a manual update without no_grad
    d = diagnosis_of(bug)
    assert d.kind == "leaf_inplace"
    says(d, LEAF_WRONG)

    def update_after_a_forward(how):
        v = w.detach().clone().requires_grad_(True)
        loss = (v ** 3).sum()               # saves v
        if how == ".data":
            v.data.add_(1.0)
        else:
            with torch.no_grad():
                v.add_(1.0)
        loss.backward()
        return v.grad
    true = 3 * w.detach() ** 2
    assert not torch.allclose(update_after_a_forward(".data"), true)          # silently wrong
    with pytest.raises(RuntimeError, match=VERSION_ERROR):                     # where no_grad is loud
        update_after_a_forward("no_grad")


def shared_fake(G, D, opt_G, opt_D, retain=False, step=True):
    """G's loss, then D's loss on the same, not detached, fake: the second backward needs G's freed graph. With
    `step`, G's step runs between the two backwards. Returns D's gradients."""
    torch.manual_seed(1)
    x_fake = G(torch.randn(16, 4))
    opt_G.zero_grad()
    F.softplus(-D(x_fake)).mean().backward(retain_graph=retain)
    if step:
        opt_G.step()
    opt_D.zero_grad()
    loss_D = F.softplus(D(x_fake)).mean()
    loss_D.backward()
    return [p.grad.clone() for p in D.parameters()]


def test_a_leaf_written_with_values_that_require_grad_names_no_grad_and_no_grad_loses_their_gradient():
    """Image features merged into a frozen embedding's output that a hook made require grad (a leaf)."""
    torch.manual_seed(0)
    visual, rows = nn.Linear(3, 4), torch.tensor([0, 2])

    def merged(how):
        embeds = torch.randn(5, 4).requires_grad_(True)           # a leaf, as the hook makes it
        features = visual(torch.randn(2, 3))
        if how == "in place":
            embeds.index_copy_(0, rows, features)
        elif how == "no_grad":
            with torch.no_grad():
                embeds.index_copy_(0, rows, features)
        else:
            embeds = embeds.index_copy(0, rows, features)
        visual.zero_grad()
        embeds.pow(2).sum().backward()
        return visual.weight.grad

    dx = diagnosis_of(lambda: merged("in place"), visual=visual)
    says(dx, GRAD_WRITE_WRONG, not_=LEAF_WRONG)
    assert merged("no_grad") is None                                   # raises nothing; the features learn nothing
    assert merged("out of place").abs().sum() > 0                      # the right fix: their gradient arrives


def test_a_weight_scaled_by_its_own_norm_is_told_to_clip_its_grad_and_the_out_of_place_write_changes_nothing():
    """A clip helper that takes the norm of the parameter and scales the parameter, where its .grad was meant."""
    max_norm = 0.1

    def clipped(how):
        torch.manual_seed(0)
        w = nn.Parameter(torch.randn(5) * 3)
        opt = optim.SGD([w], lr=0.1)
        (w * torch.arange(5.0)).sum().backward()
        p = w
        coef = max_norm / (torch.norm(p) + 1e-6)
        if how == "in place":
            p.mul_(coef)
        elif how == "out of place":
            p = p * coef
        else:                                                       # the first fix
            torch.nn.utils.clip_grad_norm_([w], max_norm)
        norm = w.grad.norm().item()
        opt.step()
        return norm

    dx = diagnosis_of(lambda: clipped("in place"))
    assert [f for f, _ in dx.fixes] == [f for f, _ in SELF_WRITE_FIXES] and dx.facts["made from"].startswith("w itself")
    says(dx, SELF_WRITE_WRONG, not_=GRAD_WRITE_WRONG)
    assert clipped("out of place") > 5 * max_norm                      # the wrong fix: nothing clipped
    assert abs(clipped("clip_grad_norm_") - max_norm) < 1e-6


def shared_term(how):
    """A trunk T feeds a net A and a head B; a term `ent` made from A is added to both losses; optA trains A, optB T
    and B. Returns A's gradient at optA's step and the gradient of A's own loss."""
    torch.manual_seed(0)
    T, A, B = nn.Linear(3, 3), nn.Linear(3, 3), nn.Linear(3, 1)
    optA = optim.SGD(A.parameters(), lr=0.1)
    optB = optim.SGD([*T.parameters(), *B.parameters()], lr=0.1)
    e = T(torch.randn(4, 3))
    h = A(e)
    ent = -(h.softmax(1) * h.log_softmax(1)).sum(1).mean()
    lossA = h.pow(2).mean() + ent
    lossB = B(e).pow(2).mean() + (ent.detach() if how == "left out" else ent)
    own = torch.autograd.grad(lossA, A.weight, retain_graph=True)[0]
    optA.zero_grad()
    lossA.backward(retain_graph=True)
    if how == "reordered":
        optB.zero_grad()
        lossB.backward()
        at_step = A.weight.grad.clone()
        optA.step()
        optB.step()
    else:
        at_step = A.weight.grad.clone()
        optA.step()
        optB.zero_grad()
        lossB.backward()
        optB.step()
    return at_step, own


def test_a_term_in_both_losses_is_told_to_be_left_out_of_the_later_one_and_reordering_counts_it_twice():
    dx = diagnosis_of(lambda: shared_term("as written"))
    assert dx.facts["in both losses"].startswith("`ent`") and [f for f, _ in dx.fixes][0] == SHARED_TERM_FIXES[0][0]
    says(dx, SHARED_TERM_WRONG)
    at_step, own = shared_term("left out")              # the fix: A steps on its own loss's gradient alone
    assert torch.allclose(at_step, own)
    at_step, own = shared_term("reordered")             # the wrong fix: ent's gradient added twice
    assert (at_step - own).norm() > 0.1 * own.norm()


def test_a_freed_graph_names_when_retain_graph_is_right():
    d = diagnosis_of(lambda: shared_fake(**nets()))
    assert d.kind == "freed" and "two losses share" in d.summary
    says(d, FREED_WRONG)


def test_retain_graph_with_a_step_between_trades_the_error_for_the_version_error():
    with pytest.raises(RuntimeError, match=VERSION_ERROR):
        shared_fake(**nets(), retain=True)


def test_retain_graph_without_a_step_between_is_right_and_keeps_the_saved_tensors():
    retained = shared_fake(**nets(), retain=True, step=False)
    n = nets()                                                # the same, with a fresh forward for D's loss
    torch.manual_seed(1)
    z = torch.randn(16, 4)
    n["opt_D"].zero_grad()
    F.softplus(n["D"](n["G"](z))).mean().backward()
    fresh = [p.grad for p in n["D"].parameters()]
    assert all(torch.allclose(a, b) for a, b in zip(retained, fresh))
    kept = {}
    for retain in (True, False):                             # the cost: what the first backward leaves alive
        n = nets()
        loss = F.softplus(-n["D"](n["G"](torch.randn(16, 4)))).mean()
        loss.backward(retain_graph=retain)
        params = [*n["G"].parameters(), *n["D"].parameters()]
        kept[retain] = graphs.saved_bytes({"loss": loss}, exclude=params)
    assert kept[True] > 0 and kept[False] == 0


def carried(retain=False, step=True, passes=3):
    """An RNN cell whose hidden state is carried from pass to pass without detach. Returns the number of autograd
    nodes each backward reached."""
    torch.manual_seed(0)
    cell = nn.RNNCell(3, 5)
    opt = optim.SGD(cell.parameters(), lr=0.1)
    h, reached = torch.zeros(2, 5), []
    for _ in range(passes):
        h = cell(torch.randn(2, 3), h)
        loss = h.pow(2).mean()
        reached.append(sum(1 for _ in graphs.walk([loss])))
        opt.zero_grad()
        loss.backward(retain_graph=retain)
        if step:
            opt.step()
    return reached


def reused(fix=None, passes=2):
    """G's fake batch made once, before a loop of G steps, and used by each of them (`fix`: "detach" or "retain").
    Returns G's .grad after the last pass."""
    torch.manual_seed(0)
    G, D = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6)), nn.Linear(6, 1)
    opt_G = optim.SGD(G.parameters(), lr=0.1)
    fake = G(torch.randn(5, 4))
    if fix == "detach":
        fake = fake.detach()
    for _ in range(passes):
        opt_G.zero_grad()
        loss_G = -D(fake).mean()
        loss_G.backward(retain_graph=fix == "retain")
        opt_G.step()
    return [p.grad for p in G.parameters()]


def test_a_tensor_made_once_before_the_loop_is_not_called_carried_and_its_wrong_fixes_fail():
    d = diagnosis_of(reused)
    assert d.kind == "freed" and "made once, before the loop" in d.summary and "carried" not in d.text(), d.text()
    assert "make it again in each pass" in d.text() and "h.detach()" not in d.text()
    says(d, REUSED_WRONG)
    assert reused(fix="detach") == [None] * 4             # the error goes, and G gets no gradient
    with pytest.raises(RuntimeError, match=VERSION_ERROR):
        reused(fix="retain")                              # opt_G's first step changed what the old forward saved


def test_a_carried_tensor_names_retain_graph_and_it_fails():
    d = diagnosis_of(carried)
    assert d.kind == "freed" and "carried" in d.summary
    says(d, CARRIED_WRONG)
    with pytest.raises(RuntimeError, match=VERSION_ERROR):
        carried(retain=True)                                  # the first step turns it into the version error
    reached = carried(retain=True, step=False)               # without a step: a longer graph each pass
    assert reached[0] < reached[1] < reached[2]


def test_one_loss_twice_names_retain_graph_and_it_doubles_grad():
    def twice(retain):
        torch.manual_seed(0)
        lin = nn.Linear(3, 1)
        loss = lin(torch.randn(4, 3)).pow(2).mean()
        loss.backward(retain_graph=retain)
        once = lin.weight.grad.clone()
        loss.backward()
        return once, lin.weight.grad
    d = diagnosis_of(lambda: twice(False))
    assert d.kind == "freed" and "differentiated twice" in d.summary
    says(d, TWICE_WRONG)
    once, after = twice(True)
    assert torch.allclose(after, 2 * once)


def made_in_inference_mode():
    with torch.inference_mode():
        return torch.randn(4, 3)


def test_an_inference_tensor_names_detach_and_requires_grad_and_both_fail():
    from gan_lessons.doctor.misuse import INFERENCE_WRONG

    def bug():
        w = made_in_inference_mode()
        (torch.randn(2, 4, requires_grad=True) @ w).sum()
    d = diagnosis_of(bug)
    assert d.kind == "inference_saved"
    says(d, INFERENCE_WRONG)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved"):
        (torch.randn(2, 4, requires_grad=True) @ made_in_inference_mode().detach()).sum()
    with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor"):
        made_in_inference_mode().requires_grad_()


def test_a_replaced_accumulator_names_allow_unused_and_it_gives_none():
    from gan_lessons.doctor.misuse import SET_WRONG

    def replaced(allow_unused=False):
        x = torch.randn(3, requires_grad=True)
        y = (x * 2).sum()
        with torch.no_grad():
            x.set_(torch.zeros(3))
        return torch.autograd.grad(y, x, allow_unused=allow_unused)
    d = diagnosis_of(replaced)
    assert d.kind == "unused_input"
    says(d, SET_WRONG)
    assert replaced(allow_unused=True) == (None,)         # the graph did use x: its gradient is lost


def test_a_flag_on_a_computed_tensor_names_no_grad_and_it_still_raises():
    from gan_lessons.doctor.misuse import FLAG_WRONG

    def flagged(quiet=False):
        y = nn.Linear(2, 2)(torch.randn(3, 2))
        with torch.no_grad() if quiet else contextlib.nullcontext():
            y.requires_grad = False
    d = diagnosis_of(flagged)
    assert d.kind == "nonleaf_flag"
    says(d, FLAG_WRONG)
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        flagged(quiet=True)


def test_numpy_under_no_grad_is_offered_as_a_fix_and_works():
    x = torch.randn(3, requires_grad=True)
    d = diagnosis_of(lambda: x.numpy())
    assert d.kind == "numpy_grad" and any("torch.no_grad()" in fix for fix, _ in d.fixes)
    with torch.no_grad():
        assert x.numpy().shape == (3,)


def test_an_in_place_op_at_the_start_of_a_checkpointed_block_names_both_wrong_fixes_and_they_fail():
    """Reentrant checkpointing runs the block again in the backward on a detached copy of its input, a leaf: its
    in-place ReLU raises there. Out of place gives the gradient of the same net without checkpointing; no_grad around
    the ReLU raises nothing and gives another gradient (the ReLU's mask is lost); use_reentrant=False with the op in
    place raises the version error."""
    from torch.utils.checkpoint import checkpoint

    from gan_lessons.doctor.report import RECOMPUTED_FIXES, RECOMPUTED_WRONG

    def run(mode="inplace", reentrant=True, checkpointed=True):
        torch.manual_seed(0)
        stem, fc, head = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 1)

        def block(h):
            if mode == "no_grad":
                with torch.no_grad():
                    h = torch.relu_(h)
            else:
                h = torch.relu_(h) if mode == "inplace" else torch.relu(h)
            return fc(h)
        h = stem(torch.randn(3, 4))
        h = checkpoint(block, h, use_reentrant=reentrant) if checkpointed else block(h)
        head(h).pow(2).mean().backward()
        return stem.weight.grad.clone()

    d = diagnosis_of(run)
    assert d.kind == "leaf_inplace" and "relu_" in d.summary and "checkpoint" in d.summary
    assert d.facts["backward of"] == "CheckpointFunction"
    assert any(fix == RECOMPUTED_FIXES[0][0] for fix, _ in d.fixes)
    says(d, RECOMPUTED_WRONG, not_=LEAF_WRONG)
    true = run("out_of_place", checkpointed=False)
    assert torch.allclose(run("out_of_place"), true) and torch.allclose(run("out_of_place", reentrant=False), true)
    assert not torch.allclose(run("no_grad"), true)
    with pytest.raises(RuntimeError, match=VERSION_ERROR):
        run(reentrant=False)


def test_an_activation_written_into_an_input_that_requires_grad_is_told_out_of_place_and_no_grad_is_wrong():
    """F.relu(x, inplace=True) on an input leaf: no weight update, so no_grad is not a fix: it gives x the gradient
    of no ReLU at all, where the out-of-place ReLU gives its mask."""
    from gan_lessons.doctor.report import INPUT_LEAF_FIXES, INPUT_LEAF_WRONG

    def relu_on_input(how="in place"):
        torch.manual_seed(0)
        x = torch.randn(6, requires_grad=True)
        if how == "no_grad":
            with torch.no_grad():
                y = F.relu(x, inplace=True)
        else:
            y = F.relu(x, inplace=how == "in place")
        (y * torch.arange(6.0)).sum().backward()
        return x.grad
    d = diagnosis_of(relu_on_input)
    assert d.kind == "leaf_inplace" and [fix for fix, _ in d.fixes] == [fix for fix, _ in INPUT_LEAF_FIXES]
    says(d, INPUT_LEAF_WRONG, not_=LEAF_WRONG)
    right = relu_on_input("out of place")
    assert not torch.equal(relu_on_input("no_grad"), right) and (right == 0).any()


def test_a_write_whose_values_require_grad_into_a_flagged_leaf_is_not_told_no_grad():
    """A leaf made by requires_grad_(True) in a forward hook, written with a value that requires grad (to keep a
    module in the graph): no_grad would cut that module off, so it is named as the wrong fix."""
    embed = nn.Embedding(10, 4).requires_grad_(False)
    embed.register_forward_hook(lambda module, args, out: out.requires_grad_(True))
    proj = nn.Linear(3, 4)

    def bug():
        emb = embed(torch.tensor([1, 2, 3]))
        emb += proj(torch.zeros(1, 3)).sum() * 0
    d = diagnosis_of(bug)
    assert "a leaf because" in d.facts and not any("torch.no_grad()" in fix for fix, _ in d.fixes), d.text()
    says(d, GRAD_WRITE_WRONG)


class _Scale(nn.Module):
    """A scale made once in __init__ from an nn.Parameter the module does not keep (registered=False), or the
    parameter kept and the scale made from it in forward (the fix)."""

    def __init__(self, registered=False, frozen=False):
        super().__init__()
        if registered:
            self.log_scale = nn.Parameter(torch.zeros(()))
        elif frozen:
            with torch.no_grad():
                self.scale = torch.exp(nn.Parameter(torch.zeros(())))
        else:
            self.scale = torch.exp(nn.Parameter(torch.zeros(())))

    def forward(self, x):
        return x * (self.log_scale.exp() if hasattr(self, "log_scale") else self.scale)


def _fit_scale(m, passes=3):
    """A few SGD passes fitting m(1) * w to 2; returns the scale at the end."""
    w = nn.Parameter(torch.ones(()))
    opt = optim.SGD(list(m.parameters()) + [w], lr=0.1)
    for _ in range(passes):
        loss = ((m(torch.ones(3)) * w - 2) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return m(torch.ones(1)).item()


def test_a_tensor_made_once_from_an_unkept_parameter_is_told_to_keep_it_and_detach_is_a_wrong_fix():
    """Made from an nn.Parameter no optimizer holds: the fix keeps it on the module and trains it (the scale moves);
    detach/no_grad, offered for a tensor made from nothing trainable, runs and freezes the scale at 1."""
    d = diagnosis_of(lambda: _fit_scale(_Scale()))
    assert "an nn.Parameter that no optimizer holds" in d.summary and "an nn.Parameter of shape ()" in d.text()
    assert [f for f, _ in d.fixes] == [f for f, _ in UNREGISTERED_FIXES]
    assert [f for f, _ in d.wrong] == [f for f, _ in UNREGISTERED_WRONG]
    assert _fit_scale(_Scale(registered=True)) != 1.0          # the fix: the scale trains
    assert _fit_scale(_Scale(frozen=True)) == 1.0              # the wrong fix: it runs, and never changes


def test_an_input_updated_in_place_inside_a_forward_is_told_to_write_out_of_place():
    """`coord += lin(coord)` on an input that requires grad (forces as -dE/dx): not a weight, so not the weight's
    fixes; out of place trains lin, no_grad around the write leaves lin without a gradient."""
    torch.manual_seed(0)
    lin = nn.Linear(3, 3)

    def forces_loss(update):
        x = torch.randn(4, 3, requires_grad=True)
        energy = update(x).pow(2).sum()
        forces = -torch.autograd.grad(energy, x, create_graph=True)[0]
        lin.zero_grad()
        forces.pow(2).mean().backward()
        return lin.weight.grad

    def in_place(coord):
        coord += lin(coord)
        return coord
    d = diagnosis_of(lambda: forces_loss(in_place), lin=lin)
    assert [f for f, _ in d.fixes] == [f for f, _ in GRAD_WRITE_FIXES], d.text()
    assert [f for f, _ in d.wrong] == [f for f, _ in GRAD_WRITE_WRONG], d.text()
    assert forces_loss(lambda coord: coord + lin(coord)) is not None      # out of place: lin gets its gradient

    def under_no_grad(coord):
        with torch.no_grad():
            coord += lin(coord)
        return coord
    assert forces_loss(under_no_grad) is None     # no_grad around the write: runs, lin drops out, silently


def test_a_gradient_with_create_graph_then_a_step_is_offered_copies_of_the_weights_and_they_run():
    """A meta-gradient through an update: the graph of a create_graph gradient saved the weights a step then
    changes. Besides reorder, the fix of taking that gradient through copies of the weights is offered, and it runs
    (the step changes the weights, not what the graph saved)."""
    from gan_lessons.doctor.report import THROUGH_COPIES_FIXES
    torch.manual_seed(0)
    x = torch.randn(5, 3)
    net = nn.Sequential(nn.Linear(3, 2), nn.Tanh(), nn.Linear(2, 1))
    meta = nn.Parameter(torch.ones(()))
    opt = optim.SGD(net.parameters(), lr=0.1)

    def meta_gradient(through_copies):
        params = dict(net.named_parameters())
        used = {n: p.clone() for n, p in params.items()} if through_copies else params
        inner = torch.sigmoid(meta) * torch.func.functional_call(net, used, (x,)).pow(2).mean()
        g = torch.autograd.grad(inner, list(used.values()), create_graph=True)
        for p, gi in zip(params.values(), g):
            p.grad = gi.detach()
        opt.step()
        first = params["0.weight"]
        gv = torch.autograd.grad(net(x).mean(), first)
        return torch.autograd.grad(first + 0.1 * g[0], meta, grad_outputs=gv)
    d = diagnosis_of(lambda: meta_gradient(through_copies=False), net=net)
    assert THROUGH_COPIES_FIXES[0][0] in [f for f, _ in d.fixes], d.text()
    assert meta_gradient(through_copies=True)[0].isfinite()


def _gan_step_reusing_scores(how):
    """G steps on log D(fake) first, then D's loss reuses the scores D_fake computed before that step: `how` is
    "bug", "scores detached" (the tempting fix) or "input detached" (D(fake.detach()) made again). Returns D's
    gradient at its step."""
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 2))
    dis = nn.Sequential(nn.Linear(2, 1), nn.Sigmoid())
    opt_g, opt_d = optim.Adam(gen.parameters(), 1e-3), optim.Adam(dis.parameters(), 1e-3)
    fake = gen(torch.randn(4, 2))
    D_real, D_fake = dis(torch.randn(4, 2)), dis(fake)
    opt_g.zero_grad()
    (-torch.log(D_fake).mean()).backward(retain_graph=True)
    opt_g.step()
    opt_d.zero_grad()
    scores = {"bug": D_fake, "scores detached": D_fake.detach(), "input detached": dis(fake.detach())}[how]
    (-torch.log(D_real) - torch.log(1 - scores)).mean().backward()
    return dis[0].weight.grad.clone()


def test_another_net_s_output_carried_across_a_step_is_not_told_to_be_detached():
    """D's scores on the fakes, computed before G's step, in D's loss after it: detaching the scores runs and
    drops the fake term from D's gradient, so the doctor names it as a wrong fix; the input detached (a fresh
    forward of D) keeps it."""
    d = diagnosis_of(lambda: _gan_step_reusing_scores("bug"))
    assert any("D_fake.detach(): `D_fake` is the output of dis" in f for f, _ in d.wrong), d.text()
    assert not any("keep D_fake.detach()" in f for f, _ in d.fixes), d.text()
    with_fake, without = _gan_step_reusing_scores("input detached"), _gan_step_reusing_scores("scores detached")
    assert not torch.allclose(with_fake, without)      # the wrong fix changes D's gradient: the fake term is gone


class _Bessel(nn.Module):
    """DimeNet's radial basis: its frequencies, a parameter, set by an out= call at init (the fix: copied in)."""

    def __init__(self, way):
        super().__init__()
        self.frequencies = nn.Parameter(torch.empty(6))
        if way == "out":
            torch.arange(1, 7, out=self.frequencies).mul_(3.14159)
        elif way == "out under no_grad":
            with torch.no_grad():
                torch.arange(1, 7, out=self.frequencies).mul_(3.14159)
        else:
            with torch.no_grad():
                self.frequencies.copy_(torch.arange(1, 7) * 3.14159)


def test_an_out_call_into_a_parameter_leads_with_a_copy_under_no_grad_not_the_same_call_under_it():
    d = diagnosis_of(lambda: _Bessel("out"))
    assert d.kind == "out_grad"
    assert d.fixes[0][0].startswith("copy the values into the parameter under torch.no_grad()"), d.text()
    assert d.wrong[0][0].startswith("the same out= call under torch.no_grad()"), d.text()
    fixed = _Bessel("copied")                            # the fix: still the same trainable parameter
    assert isinstance(fixed.frequencies, nn.Parameter) and fixed.frequencies.requires_grad
    assert torch.allclose(fixed.frequencies, torch.arange(1, 7) * 3.14159)
    wrong = _Bessel("out under no_grad")                 # the wrong fix: raises nothing, and freezes it
    assert isinstance(wrong.frequencies, nn.Parameter) and not wrong.frequencies.requires_grad
