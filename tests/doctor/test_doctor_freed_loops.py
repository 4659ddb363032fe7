"""The freed-graph error where a tensor or a loss outlives the pass that made it, told apart by what autograd's
records and the optimizers in sight say, each fix and wrong fix run to show it does what its line says:

- a loss made once before the loop, backward in every pass: compute it inside the loop; retain_graph=True gives
  the same gradient every pass;
- a tensor made once from something no optimizer holds (data made with a weight that requires grad): make it
  without a graph; detach is right there, not ruled out;
- one net's output kept for a loop over nets, and used as a target in another net's loss (mutual learning): detach
  it there; detached copies where the outputs are kept leave no loss a graph;
- two losses sharing a graph with a write into its weights between them (SAM's climb under no_grad): recompute,
  never retain_graph=True; and no detach where the second loss reaches nothing but the shared part;
- one backward stepped on by two optimizers: a GAN's G and D are warned at once; an encoder two heads share is not
  told anything false."""
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gan_lessons.doctor import DoctorWarning, doctor
from gan_lessons.doctor.report import (
    DETACH_WRONG,
    FREED_FIXES,
    LOSS_ONCE_FIXES,
    LOSS_ONCE_WRONG,
    REUSED_WRONG,
    TARGET_FIXES,
    TARGET_WRONG,
    UNTRAINED_FIXES,
)

FREED = "backward through the graph a second time"


def diagnosis_of(bug):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match=FREED) as raised:
            with doctor():
                bug()
    return raised.value.diagnosis


def texts(pairs):
    return [text for text, _ in pairs]


def loss_made_once(retain=False):
    """The forward before the loop; each pass a backward and an update through .data. Returns each pass's grad."""
    torch.manual_seed(0)
    W = torch.randn(3, 3, requires_grad=True)
    x = torch.randn(4, 3)
    loss = (x @ W).exp().mean()
    grads = []
    for _ in range(3):
        W.grad = None
        loss.backward(retain_graph=retain)
        grads.append(W.grad.clone())
        W.data -= 0.1 * W.grad
    return grads


def test_a_loss_made_before_the_loop_is_told_to_be_made_in_it_and_retain_graph_repeats_one_gradient():
    d = diagnosis_of(loss_made_once)
    assert d.summary.startswith("the loss was made once, before the loop"), d.text()
    assert texts(d.fixes) == texts(LOSS_ONCE_FIXES) and texts(d.wrong) == texts(LOSS_ONCE_WRONG)
    grads = loss_made_once(retain=True)          # the wrong fix: the gradient of the weights the loss was made with
    assert all(torch.equal(g, grads[0]) for g in grads)


def labels_from_a_weight(detached=False):
    """Targets made once with a "true" weight that requires grad and that no optimizer holds."""
    torch.manual_seed(0)
    true_w = torch.randn(2, 1, requires_grad=True)
    X = torch.randn(8, 2)
    Y = (X @ true_w).detach() if detached else X @ true_w
    w = torch.zeros(2, 1, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    for _ in range(2):
        loss = ((X @ w - Y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return w.detach()


def test_a_tensor_made_from_what_no_optimizer_holds_is_told_to_be_made_without_a_graph():
    d = diagnosis_of(labels_from_a_weight)
    assert "no optimizer trains what it was made from" in d.summary and d.facts["made from"] == "`true_w`", d.text()
    assert texts(d.fixes) == texts(UNTRAINED_FIXES)
    assert not set(texts(REUSED_WRONG)) & set(texts(d.wrong))        # detach is the fix here, not a wrong one
    assert torch.isfinite(labels_from_a_weight(detached=True)).all()


def mutual_learning(fix=None):
    """Two nets, one forward each before the loop; each pass trains one net on its output and a KL term towards
    the other's output."""
    torch.manual_seed(0)
    models = [nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4)) for _ in range(2)]
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
    x = torch.randn(5, 3)
    outputs = [m(x).detach() if fix == "kept detached" else m(x) for m in models]
    for i in range(2):
        peer = outputs[1 - i].detach() if fix == "target detached" else outputs[1 - i]
        loss = outputs[i].pow(2).mean() + F.kl_div(F.log_softmax(outputs[i], 1), F.softmax(peer, 1),
                                                   reduction="batchmean")
        opts[i].zero_grad()
        loss.backward()
        opts[i].step()
    return models


def test_another_nets_output_used_as_a_target_is_told_to_be_detached_there():
    d = diagnosis_of(mutual_learning)
    assert "went on into models[1]" in d.summary and "`outputs[1]` served that loss as a target" in d.summary, \
        d.text()
    assert texts(d.fixes) == texts(TARGET_FIXES) and texts(d.wrong) == texts(TARGET_WRONG)
    mutual_learning("target detached")                                   # the fix runs
    with pytest.raises(RuntimeError, match="does not require grad"):     # the first wrong fix: no loss has a graph
        mutual_learning("kept detached")


def climb_then_descend(recompute=False, retain=False):
    """SAM's two passes: a backward, a climb written into the weights under no_grad, a second backward."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    x = torch.randn(4, 3)
    out = model(x)
    out.pow(2).mean().backward(retain_graph=retain)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * p.grad)  # climb
    (model(x) if recompute else out).pow(2).mean().backward()


def test_a_write_into_the_shared_weights_between_two_backwards_rules_out_retain_graph_and_detach():
    d = diagnosis_of(climb_then_descend)
    assert d.facts["stepped between"].startswith("add_ at line"), d.text()
    assert texts(d.fixes) == [FREED_FIXES[1][0]], d.text()                  # recompute, alone
    assert set(texts(DETACH_WRONG)) <= set(texts(d.wrong))
    climb_then_descend(recompute=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        climb_then_descend(retain=True)


def one_backward_two_steps(G_name, D_name):
    torch.manual_seed(0)
    nets = {G_name: nn.Linear(2, 4), D_name: nn.Linear(4, 1)}
    head = nn.Linear(4, 3)
    opt_a = torch.optim.SGD(list(nets[G_name].parameters()) + list(head.parameters()), lr=0.1)
    opt_b = torch.optim.SGD(nets[D_name].parameters(), lr=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(opt_a=opt_a, opt_b=opt_b, **nets) as doc:
            for _ in range(2):                  # the second pass's steps judge the first's backward
                h = nets[G_name](torch.randn(6, 2))
                loss = nets[D_name](h).mean() + head(h).pow(2).mean()
                opt_a.zero_grad()
                opt_b.zero_grad()
                loss.backward()
                opt_a.step()
                opt_b.step()
    return [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)], doc.diagnoses


def test_one_backward_stepped_by_g_then_d_is_warned_and_an_encoder_two_heads_share_is_told_nothing_false():
    said, _ = one_backward_two_steps("G", "D")
    assert any("opt_a.step() and opt_b.step() both step on the gradients" in s for s in said), said
    said, diagnoses = one_backward_two_steps("enc", "critic")
    assert not said and not any("cleared before" in d.summary for d in diagnoses), (said, diagnoses)


class _Cached(nn.Module):
    """A module that keeps its first forward's normalised weights and serves them again in training mode."""

    def __init__(self):
        super().__init__()
        self.lin, self.cache = nn.Linear(3, 1), None

    def forward(self, x, w):
        if self.training and self.cache is not None:
            wn = self.cache
        else:
            wn = self.cache = w / w.sum()
        return self.lin(x * wn)


def cached_by_hand(through_autograd):
    """w trained by a hand-written update (no optimizer); the backward as loss.backward() or
    torch.autograd.backward(loss)."""
    torch.manual_seed(0)
    net, x, w = _Cached(), torch.randn(4, 3), torch.ones(3, requires_grad=True)
    for _ in range(2):
        loss = net(x, w).pow(2).mean()
        torch.autograd.backward(loss) if through_autograd else loss.backward()
        with torch.no_grad():
            w -= 0.5 * w.grad
        w.grad = None


@pytest.mark.parametrize("through_autograd", [False, True])
def test_a_tensor_made_from_a_weight_updated_by_hand_is_not_called_untrained(through_autograd):
    """torch.autograd.backward is recorded as loss.backward() is (the same diagnosis); w, which a hand-written update
    trains, is not told to be detached."""
    d = diagnosis_of(lambda: cached_by_hand(through_autograd))
    assert "no optimizer trains" not in d.summary and d.facts["freed by"].startswith("the backward at line"), d.text()
    assert texts(d.fixes) != texts(UNTRAINED_FIXES)


def helper_already_backwarded(retain=False):
    """A helper runs each loss's backward itself (an adaptive weighting of D's two terms), and the caller then runs
    the backward of their sum again. Returns D's gradient."""
    torch.manual_seed(0)
    D = nn.Linear(4, 1)
    x_real, x_fake = torch.randn(6, 4), torch.randn(6, 4)
    loss_real = F.softplus(-D(x_real)).mean()
    loss_fake = F.softplus(D(x_fake)).mean()
    for loss in (loss_real, loss_fake):
        loss.backward(retain_graph=retain)
    total = loss_real + loss_fake
    total.backward()
    return D.weight.grad.clone()


def test_a_loss_made_of_losses_whose_backward_already_ran_is_told_to_backward_once():
    d = diagnosis_of(helper_already_backwarded)
    assert "whose backward already ran" in d.summary and "retain_graph" not in " ".join(texts(d.fixes)), d.text()
    once = helper_already_backwarded(retain=True)           # the wrong fix: the same gradient added again
    torch.manual_seed(0)
    D = nn.Linear(4, 1)
    x_real, x_fake = torch.randn(6, 4), torch.randn(6, 4)
    (F.softplus(-D(x_real)).mean() + F.softplus(D(x_fake)).mean()).backward()
    assert torch.allclose(once, 2 * D.weight.grad)
