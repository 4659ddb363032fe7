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
    ACCUMULATED_FIXES,
    ACCUMULATED_WRONG,
    CACHED_FIXES,
    CACHED_WRONG,
    DETACH_WRONG,
    FREED_FIXES,
    LOSS_ONCE_FIXES,
    LOSS_ONCE_WRONG,
    REUSED_WRONG,
    SKIPPED_FIXES,
    SKIPPED_WRONG,
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


def test_two_backward_calls_on_one_line_are_not_called_a_loop():
    """`loss.backward(); loss.backward()` on one line, no loop: two calls, not one call run by every pass."""
    def twice_on_one_line():
        W = torch.randn(3, 3, requires_grad=True)
        loss = (torch.randn(4, 3) @ W).exp().mean()
        loss.backward(); loss.backward()  # noqa: E702
    d = diagnosis_of(twice_on_one_line)
    assert d.summary.startswith("the same loss was differentiated twice"), d.text()
    assert "loop" not in d.summary, d.text()


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


class _Climber(torch.optim.SGD):
    """SAM's shape: the climb is a method of the optimizer, called from the loop."""

    @torch.no_grad()
    def first_step(self):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(0.05 * p.grad)  # climb


def climb_in_an_optimizer_method():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    opt = _Climber(model.parameters(), lr=0.1)
    x = torch.randn(4, 3)
    out = model(x)
    out.pow(2).mean().backward()
    opt.first_step()
    out.pow(2).mean().backward()


def test_a_write_in_an_optimizer_s_own_method_is_placed_at_the_line_that_called_the_method():
    d = diagnosis_of(climb_in_an_optimizer_method)
    said = d.facts["stepped between"]
    assert said.startswith("add_ at line") and "(`p.add_(0.05 * p.grad)  # climb`)" in said, d.text()
    assert ", in _Climber.first_step, called from line" in said and "(`opt.first_step()`)" in said, d.text()


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
    """A module that keeps its first forward's normalised weights and serves them again in training mode; `fixed`
    makes them anew in every call, `detached` keeps them detached."""

    def __init__(self, fixed=False, detached=False):
        super().__init__()
        self.lin, self.cache, self.fixed, self.detached = nn.Linear(3, 1), None, fixed, detached

    def forward(self, x, w):
        if self.training and self.cache is not None and not self.fixed:
            wn = self.cache
        else:
            wn = w / w.sum()
            self.cache = wn.detach() if self.detached else wn
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


class EarlyReturn:
    """A model whose forward returns early on a short batch (as a skip of the last, odd-sized batch does), leaving
    the last batch's output in self.fake."""
    def __init__(self):
        torch.manual_seed(0)
        self.G = nn.Linear(4, 4)
        self.opt = torch.optim.SGD(self.G.parameters(), lr=0.1)
        self.grads = []

    def forward(self, x):
        if len(x) < 3:
            return
        self.fake = self.G(x)

    def update(self, x, skip_short=False, retain=False):
        if skip_short and len(x) < 3:          # the fix: the whole step skipped for that batch
            return
        self.forward(x)
        self.opt.zero_grad()
        loss = self.fake.pow(2).mean()
        loss.backward(retain_graph=retain)
        self.grads.append(self.G.weight.grad.clone())
        self.opt.step()


def batches():
    torch.manual_seed(1)
    return [torch.randn(3, 4), torch.randn(3, 4), torch.randn(1, 4)]


def test_a_forward_that_returned_early_is_named_and_its_fix_runs_where_retain_graph_trains_on_the_last_batch():
    def bug():
        m = EarlyReturn()
        for x in batches():
            m.update(x)
    d = diagnosis_of(bug)
    assert d.summary.startswith("the forward that makes `m.fake`") and "ran in an earlier pass but not in this one" \
        in d.summary, d.text()
    assert texts(d.fixes) == texts(SKIPPED_FIXES) and texts(d.wrong) == texts(SKIPPED_WRONG)
    assert "made at" in d.facts and "self.fake = self.G(x)" in d.facts["made at"]
    fixed = EarlyReturn()
    for x in batches():
        fixed.update(x, skip_short=True)       # runs, one gradient per full batch
    assert len(fixed.grads) == 2
    wrong = EarlyReturn()
    for x in batches():
        wrong.update(x, retain=True)           # the wrong fix: the short batch's step is the last batch's again
    assert len(wrong.grads) == 3 and torch.equal(wrong.grads[2], wrong.grads[1])


def cached_run(**kw):
    torch.manual_seed(0)
    net, x = _Cached(**kw), torch.randn(4, 3)
    w = torch.ones(3, requires_grad=True)
    grads = []
    for _ in range(3):
        loss = net(x, w).pow(2).mean()
        w.grad = None
        loss.backward()
        grads.append(w.grad)
        if w.grad is not None:
            with torch.no_grad():
                w -= 0.1 * w.grad
    return grads


def test_a_tensor_a_module_kept_from_an_earlier_call_is_named_and_not_called_made_before_the_loop():
    d = diagnosis_of(cached_run)
    assert d.summary.startswith("net kept a tensor an earlier pass made"), d.text()
    assert "before the loop" not in d.summary
    assert texts(d.fixes) == texts(CACHED_FIXES) and texts(d.wrong) == texts(CACHED_WRONG)
    assert all(g is not None for g in cached_run(fixed=True))      # the fix: a gradient reaches w every pass
    grads = cached_run(detached=True)       # the wrong fix: it runs, and w gets nothing from the second pass on
    assert grads[0] is not None and grads[1] is None and grads[2] is None


def strict_warnings(run, **names):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(**names):
            result = run()
    return [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)], result


def vae_and_its_discriminator(detach_z=False):
    """A VAE's loss goes through the discriminator D (a total-correlation term); D is cleared before its own loss,
    whose input z is not detached: the VAE's step adds D's loss to its own. Returns the VAE's gradient at its step
    minus its own loss's gradient."""
    torch.manual_seed(0)
    VAE, D = nn.Linear(6, 3), nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 2))
    optim_VAE, optim_D = torch.optim.SGD(VAE.parameters(), lr=0.1), torch.optim.SGD(D.parameters(), lr=0.1)
    zeros, ones = torch.zeros(4, dtype=torch.long), torch.ones(4, dtype=torch.long)
    extra = []
    for _ in range(2):
        z = VAE(torch.randn(4, 6))
        D_z = D(z)
        vae_loss = z.pow(2).mean() + (D_z[:, :1] - D_z[:, 1:]).mean()
        optim_VAE.zero_grad()
        vae_loss.backward(retain_graph=True)
        own = VAE.weight.grad.clone()
        D_tc_loss = F.cross_entropy(D(z.detach()) if detach_z else D_z, zeros) + \
            F.cross_entropy(D(z[torch.randperm(4)].detach()), ones)
        optim_D.zero_grad()
        D_tc_loss.backward()
        extra.append((VAE.weight.grad - own).abs().max().item())
        optim_VAE.step()
        optim_D.step()
    return extra


def test_a_net_stepping_on_a_loss_another_optimizer_was_cleared_for_is_warned_and_the_detach_fix_is_silent():
    said, extra = strict_warnings(vae_and_its_discriminator)
    assert any(s.startswith("autograd doctor: optim_VAE.step() steps on the gradients of the backward at") and
               "cleared D for that loss" in s for s in said), said
    assert max(extra) > 1e-3                         # D's loss did reach the VAE's step
    said, extra = strict_warnings(lambda: vae_and_its_discriminator(detach_z=True))
    assert not said and max(extra) == 0.0, said


def vae_gan_both_backwards_then_steps(inputs=False):
    """A VAE-GAN's encoder loss reaches the encoder only through the decoder; the encoder is cleared for it, both
    backwards run, then both steps: the decoder steps on the encoder's loss too. Returns the decoder's extra
    gradient from it at each step."""
    torch.manual_seed(0)
    encoder, decoder = nn.Linear(6, 3), nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 6))
    opt_enc, opt_dec = torch.optim.SGD(encoder.parameters(), lr=0.1), torch.optim.SGD(decoder.parameters(), lr=0.1)
    extra = []
    for _ in range(2):
        x = torch.randn(4, 6)
        z = encoder(x)
        x_rec = decoder(z)
        err_dec = F.mse_loss(x_rec, x)                # a decoder's loss that also reaches the encoder
        err_enc = 0.5 * F.mse_loss(x_rec, x) + z.pow(2).mean()
        opt_dec.zero_grad()
        err_dec.backward(retain_graph=True)
        own = decoder[0].weight.grad.clone()
        opt_enc.zero_grad()
        err_enc.backward(inputs=list(encoder.parameters())) if inputs else err_enc.backward()
        extra.append((decoder[0].weight.grad - own).abs().max().item())
        opt_enc.step()
        opt_dec.step()
    return extra


def test_a_loss_that_reaches_the_other_net_only_through_this_one_is_told_backward_inputs_not_a_detach():
    said, extra = strict_warnings(vae_gan_both_backwards_then_steps)
    warned = [s for s in said if s.startswith("autograd doctor: opt_dec.step() steps on the gradients of the backward")]
    assert warned and max(extra) > 1e-4, said
    assert "fix: backward(inputs=...) with encoder's parameters for that loss" in warned[0], warned[0]
    assert "detach, in that loss" not in warned[0], warned[0]
    said, extra = strict_warnings(lambda: vae_gan_both_backwards_then_steps(inputs=True))
    assert not said and max(extra) == 0.0, said


def per_net_zero_grad_between(once=False):
    """An encoder's own loss and a decoder's loss of one forward, every backward before the steps; zero_grad() of
    both nets between the backwards (as a loop that zeroes all before each backward does) wipes the encoder's own
    gradient. Returns the cosine of the encoder's gradient at its step with its own loss's."""
    torch.manual_seed(0)
    enc, dec = nn.Linear(6, 3), nn.Linear(3, 6)
    opt_enc, opt_dec = torch.optim.SGD(enc.parameters(), lr=0.1), torch.optim.SGD(dec.parameters(), lr=0.1)
    cosines = []
    for _ in range(2):
        x = torch.randn(4, 6)
        mu = enc(x)
        loss_enc, loss_dec = mu.pow(2).sum(1).mean(), (dec(mu) - x).pow(2).mean()
        own = torch.autograd.grad(loss_enc, enc.weight, retain_graph=True)[0]
        enc.zero_grad(), dec.zero_grad()
        loss_enc.backward(retain_graph=True)
        if not once:
            enc.zero_grad(), dec.zero_grad()
        loss_dec.backward()
        cosines.append(F.cosine_similarity(enc.weight.grad.flatten(), own.flatten(), dim=0).item())
        opt_enc.step()
        opt_dec.step()
    return cosines


def test_a_step_without_its_own_loss_cleared_between_backwards_is_warned_and_one_zero_grad_is_silent():
    said, cosines = strict_warnings(per_net_zero_grad_between)
    assert any("opt_enc.step() runs without the gradient of the backward at" in s for s in said), said
    said, _ = strict_warnings(lambda: per_net_zero_grad_between(once=True))
    assert not said, said


def gan_g_first_then_d(detach=True):
    """G's loss first (its backward runs on into D), then D cleared and its own loss on the detached fake: right."""
    torch.manual_seed(0)
    G, D = nn.Linear(2, 4), nn.Linear(4, 1)
    opt_G, opt_D = torch.optim.SGD(G.parameters(), lr=0.1), torch.optim.SGD(D.parameters(), lr=0.1)
    for _ in range(2):
        fake = G(torch.randn(6, 2))
        opt_G.zero_grad()
        F.softplus(-D(fake)).mean().backward(retain_graph=not detach)
        opt_D.zero_grad()
        loss_D = F.softplus(D(fake.detach() if detach else fake)).mean() + F.softplus(-D(torch.randn(6, 4))).mean()
        loss_D.backward()
        opt_D.step()
        opt_G.step()


def test_g_first_with_d_cleared_for_its_own_loss_is_silent_and_an_undetached_fake_is_warned():
    said, _ = strict_warnings(gan_g_first_then_d)
    assert not said, said
    said, _ = strict_warnings(lambda: gan_g_first_then_d(detach=False))
    assert any("opt_G.step() steps on the gradients of the backward at" in s for s in said), said


def sum_kept_over_passes(reset=False, retain=False):
    """A sum of terms backpropagated, a write into the weight under no_grad (SAM's climb), and the second pass's
    terms added to the same sum. Returns w's gradient after the second backward and w itself."""
    torch.manual_seed(0)
    w, x = nn.Parameter(torch.randn(3)), torch.randn(3)
    loss = 0
    for t in range(2):
        loss += (w * x * (t + 1)).sum()
    loss.backward(retain_graph=retain)
    with torch.no_grad():
        w.add_(0.01 * w.grad)
    w.grad = None
    if reset:
        loss = 0
    for t in range(2):
        loss += (w * x * (t + 1)).pow(2).sum()
    loss.backward()
    return w.grad, w, x


def test_a_sum_kept_from_one_pass_into_the_next_is_told_to_start_anew():
    d = diagnosis_of(sum_kept_over_passes)
    assert d.summary.startswith("`loss` still holds a loss whose backward already ran at line"), d.text()
    assert texts(d.fixes) == texts(ACCUMULATED_FIXES) and texts(d.wrong) == texts(ACCUMULATED_WRONG)
    grad, w, x = sum_kept_over_passes(reset=True)       # the fix: this pass's gradient alone
    assert torch.allclose(grad, 2 * w.detach() * x ** 2 * (1 + 4))
    again, _, _ = sum_kept_over_passes(retain=True)     # the wrong fix: the earlier pass's gradient added again
    assert torch.allclose(again - grad, x * (1 + 2))


def test_a_loss_of_losses_already_backpropagated_is_still_told_to_backward_once():
    """Only sums of backpropagated losses, no terms of their own: not a sum kept too long."""
    d = diagnosis_of(helper_already_backwarded)
    assert d.summary.startswith("this loss is made from"), d.text()


def lazy_r1_step(cut=False):
    """D's own loss and step, then an R1 penalty (gradient of D's output with respect to its input, create_graph)
    stepped on its own: the penalty cannot reach D's last bias, which its input gradient does not depend on. `cut`
    detaches D's first layer's output in its own loss, a real mistake (that layer gets no .grad from it)."""
    torch.manual_seed(0)
    D = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    opt_D = torch.optim.Adam(D.parameters(), lr=1e-3)
    for _ in range(2):
        x = torch.randn(5, 3)
        opt_D.zero_grad()
        out = D[2](D[1](D[0](x).detach())) if cut else D(x)
        out.mean().backward()
        opt_D.step()
        opt_D.zero_grad()
        x = x.requires_grad_(True)
        g, = torch.autograd.grad(D(x).sum(), x, create_graph=True)
        g.pow(2).sum().backward()
        opt_D.step()


def test_a_lazy_r1_step_is_not_warned_for_the_bias_it_cannot_reach_and_a_cut_layer_still_is():
    said, _ = strict_warnings(lazy_r1_step)
    assert not said, said
    said, _ = strict_warnings(lambda: lazy_r1_step(cut=True))
    assert any("opt_D.step() runs while 2 of its 4 parameters have no .grad" in s for s in said), said


class _Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.discriminator = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        self.generator = nn.Linear(3, 3)

    def optimizer_step(self, optimizer, k, x):
        """D's optimizer steps twice: on its loss, then on a second loss whose first layer is cut off."""
        optimizer.step()
        if k == 1:
            return
        optimizer.zero_grad()
        d = self.discriminator
        d[2](d[1](d[0](x).detach())).sum().backward()
        optimizer.step()


class _Fit:
    """A trainer that keeps the optimizers in a list and hands each to the model's step method, where it is called
    `optimizer`: the name the doctor finds for D's optimizer there changes once G's step has run."""
    def fit(self, model):
        optimizers = [torch.optim.Adam(model.discriminator.parameters(), lr=1e-3),
                      torch.optim.Adam(model.generator.parameters(), lr=1e-3)]
        for _ in range(3):
            x = torch.randn(2, 3)
            for k, optimizer in enumerate(optimizers):
                source = x if k == 0 else model.generator(x)
                model.discriminator(source).sum().backward()
                model.optimizer_step(optimizer, k, x)
                optimizer.zero_grad()


def one_optimizer_two_names():
    _Fit().fit(_Pair())


def test_one_warning_at_one_line_is_given_once_whatever_the_optimizer_is_called_there():
    said, _ = strict_warnings(one_optimizer_two_names)
    assert sum("have no .grad" in s for s in said) == 1, said


def shared_trunk(in_both=True):
    """Two heads on one trunk, both backwards before both steps; the trunk in both optimizers, or in the first only."""
    torch.manual_seed(0)
    trunk, head1, head2 = nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 1)
    opt1 = torch.optim.SGD([*trunk.parameters(), *head1.parameters()], lr=0.1)
    opt2 = torch.optim.SGD([*trunk.parameters(), *head2.parameters()] if in_both else head2.parameters(), lr=0.1)
    for _ in range(2):
        z = trunk(torch.randn(3, 4))
        opt1.zero_grad()
        opt2.zero_grad()
        head1(z).pow(2).mean().backward(retain_graph=True)
        head2(z).mean().backward()
        opt1.step()
        opt2.step()


def test_a_parameter_two_optimizers_step_on_the_same_gradients_is_warned():
    said, _ = strict_warnings(shared_trunk)
    assert any("opt2.step() steps 2 parameter(s) that opt1.step() already stepped" in s for s in said), said
    said, _ = strict_warnings(lambda: shared_trunk(in_both=False))
    assert not said, said


def loss_inside_loss(separate=False):
    """loss2 is part of loss1, and each is backpropagated: the step counts loss2's gradient twice."""
    w = nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([w], lr=0.1)
    grads = []
    for _ in range(2):
        opt.zero_grad()
        loss2 = (w * 3).sum()
        loss1 = (w * w).sum() + (0 if separate else loss2)
        loss1.backward(retain_graph=True)
        loss2.backward()
        grads.append(w.grad.item() - (2 * w + 3).item())
        opt.step()
    return grads


def test_a_loss_backpropagated_alone_and_as_a_part_of_another_is_warned():
    said, extra = strict_warnings(loss_inside_loss)
    assert any("adds the gradient of the loss backpropagated at" in s and "twice" in s for s in said), said
    assert extra[0] == pytest.approx(3.0)            # loss2's gradient, once too many
    said, extra = strict_warnings(lambda: loss_inside_loss(separate=True))
    assert not said and extra[0] == pytest.approx(0.0), said


def grads_assigned():
    """Gradients from autograd.grad assigned to .grad, then a step: no zero_grad() is needed."""
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(3))
    opt = torch.optim.SGD([w], lr=0.1)
    for _ in range(3):
        (g,) = torch.autograd.grad((torch.randn(4, 3) @ w).pow(2).mean(), [w])
        w.grad = g
        opt.step()


def test_gradients_assigned_to_grad_are_not_taken_for_gradients_applied_again():
    said, _ = strict_warnings(grads_assigned)
    assert not said, said


def made_once_from_leaves_whose_grad_is_read():
    """A tensor made once before the loop from leaves the code made, whose .grad it reads after the loop."""
    w = torch.ones(2, requires_grad=True)
    b = torch.full((2,), 0.5, requires_grad=True)
    y = w * b
    for _ in range(2):
        (w * y).sum().backward()
    return w.grad, b.grad


def test_leaves_whose_grad_the_code_reads_are_not_called_untrained():
    d = diagnosis_of(made_once_from_leaves_whose_grad_is_read)
    assert "no optimizer trains" not in d.summary and texts(d.fixes) != texts(UNTRAINED_FIXES), d.text()


def two_carriers(detach=()):
    """Net A, then net B on A's output; A's loss compares out1 with out2, B's loss is on out2: both A's loss and B's
    go through A and B, and A steps between the two backwards. Each of out1, out2 carries the shared part."""
    torch.manual_seed(0)
    A, B = nn.Linear(3, 3), nn.Linear(3, 3)
    optA, optB = torch.optim.SGD(A.parameters(), lr=0.1), torch.optim.SGD(B.parameters(), lr=0.1)
    x, t = torch.randn(4, 3), torch.randn(4, 3)
    out1 = A(x)
    out2 = B(out1.detach() if "out1" in detach else out1)
    loss_A = F.mse_loss(out1, out2.detach() if "out2" in detach else out2)
    loss_B = F.mse_loss(out2, t)
    optA.zero_grad()
    loss_A.backward()
    optA.step()
    optB.zero_grad()
    loss_B.backward()
    optB.step()


def test_a_shared_part_reached_through_two_tensors_is_told_to_detach_each():
    d = diagnosis_of(two_carriers)
    assert any("detach each of `out1`, `out2`" in f or "detach each of `out2`, `out1`" in f for f in texts(d.fixes)), \
        d.text()
    two_carriers(detach=("out1", "out2"))            # each cut: it runs
    for one in ("out1", "out2"):                     # one alone: the same error
        with pytest.raises(RuntimeError, match=FREED):
            two_carriers(detach=(one,))


def test_d_s_loss_on_g_s_output_after_g_s_step_leads_with_the_detach_not_a_fresh_forward_of_g():
    """G steps on its loss, then D's loss reads the same fake batch: a fresh forward of G for D's loss would send
    D's loss into G's .grad, so the first fix is the detach, said for D's loss (and a fresh forward for G's own)."""
    torch.manual_seed(0)
    netG, netD = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4)), nn.Sequential(nn.Linear(4, 1))
    optG, optD = torch.optim.Adam(netG.parameters()), torch.optim.Adam(netD.parameters())
    with pytest.raises(RuntimeError) as raised:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with doctor(netG=netG, netD=netD, optG=optG, optD=optD):
                fake_batch = netG(torch.randn(6, 4))
                optG.zero_grad()
                F.softplus(-netD(fake_batch)).mean().backward()
                optG.step()
                optD.zero_grad()
                (F.softplus(-netD(torch.randn(6, 4))) + F.softplus(netD(fake_batch))).mean().backward()
    d = raised.value.diagnosis
    assert d.kind == "freed" and d.fixes[0][0].startswith("where the second loss is D's"), d.text()


def test_two_losses_of_one_forward_with_no_step_between_are_offered_one_backward_of_their_sum():
    """WAE's reconstruction and MMD terms, each backpropagated alone: both are meant to train the encoder, so beside
    the detach (for a loss that must not reach the shared part) the diagnosis offers one backward of the sum."""
    torch.manual_seed(0)
    encoder, decoder = nn.Linear(6, 2), nn.Linear(2, 6)
    with pytest.raises(RuntimeError) as raised:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with doctor(encoder=encoder, decoder=decoder):
                x = torch.randn(5, 6)
                z_real = torch.tanh(encoder(x))
                recon_loss = F.mse_loss(decoder(z_real), x)
                mmd_loss = (z_real.mean(0) - torch.randn(5, 2).mean(0)).pow(2).sum()
                recon_loss.backward()
                mmd_loss.backward()
    d = raised.value.diagnosis
    texts = [fix for fix, _n in d.fixes]
    assert d.kind == "freed" and any(t.startswith("if both losses are meant to train the shared part") for t in texts)
    assert texts.index(next(t for t in texts if t.startswith("if both losses"))) < texts.index(
        "recompute: run a fresh forward for the second loss"), d.text()
