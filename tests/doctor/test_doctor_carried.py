"""A state carried from one loop pass to the next (h = rnn(x, h)) is named by the variable that carries it, not by
another output of the same line; a tensor made once before the loop is not called carried."""
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.doctor import doctor
from gan_lessons.doctor.naming import rebound


def diagnosis_of(bug):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as raised:
            with doctor():
                bug()
    return raised.value.diagnosis


@pytest.mark.parametrize("code, names", [
    ("output, h = rnn(x, h)", ["h"]),
    ("out, (h, c) = lstm(x, (h, c))  # a comment", ["h", "c"]),
    ("out, self.hidden = self.lstm(x, self.hidden)", ["self.hidden"]),
    ("h = cell(x, h_prev)", []),
    ("total = total + loss", ["total"]),
    ("for k in range(3):", []),
])
def test_rebound_names_what_a_line_both_reads_and_makes(code, names):
    assert rebound(code) == names


def rnn_loop(retain):
    """nn.RNN over two batches, its hidden state carried without detach; retain_graph=True turns the freed-graph
    error into the version error at the second backward (the step changed the weights the first pass saved)."""
    torch.manual_seed(0)
    rnn = nn.RNN(3, 4, batch_first=True)
    opt = optim.SGD(rnn.parameters(), lr=0.1)
    h = torch.zeros(1, 2, 4)
    for _ in range(2):
        opt.zero_grad()
        output, h = rnn(torch.randn(2, 5, 3), h)
        loss = output.pow(2).mean()
        loss.backward(retain_graph=retain)
        opt.step()


def test_a_carried_state_with_retain_graph_is_named_by_the_variable_that_carries_it():
    d = diagnosis_of(lambda: rnn_loop(retain=True))
    assert d.kind == "version" and "through `h`" in d.summary and "`output`" not in d.summary, d.text()
    assert d.facts["carried"].startswith("`h`, made from its own last value at line"), d.text()
    assert "h.detach()" in d.text()


def test_a_carried_state_without_retain_graph_says_which_variable_carried_it():
    d = diagnosis_of(lambda: rnn_loop(retain=False))
    assert d.kind == "freed" and "carried" in d.summary, d.text()
    assert d.facts["carried by"].startswith("the previous pass's `h` from line"), d.text()


class _Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        z = y * 1.0
        ctx.save_for_backward(z)  # the-save
        return z

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * z


def test_a_custom_function_s_saved_tensor_is_placed_at_its_save_for_backward_line():
    def bug():
        x = torch.randn(4, requires_grad=True)
        out = _Exp.apply(x)
        out = torch.relu_(out)
        out.sum().backward()
    d = diagnosis_of(bug)
    assert d.kind == "version" and "ctx.save_for_backward(z)  # the-save" in d.facts["saved by"], d.text()
    assert "y = x.exp()" not in d.facts["saved by"], d.text()


class _BorderZeroed(torch.nn.Module):
    """A ReLU's output (which ReLU saved) written into four times in place."""

    def forward(self, x):
        att = torch.relu(x.sum(1, keepdim=True))  # the-relu
        att[:, :, :, 0] = 0  # first-write
        att[:, :, :, -1] = 0
        att[:, :, 0, :] = 0
        att[:, :, -1, :] = 0  # last-write
        return x + att * x


def test_several_writes_into_a_saved_tensor_name_the_first_and_count_them():
    """The first write after the save made it stale; a clone just before the last one would not help."""
    from pathlib import Path
    source = Path(__file__).read_text().splitlines()
    line = {m: next(i + 1 for i, t in enumerate(source) if t.rstrip().endswith(f"# {m}"))
            for m in ("the-relu", "first-write", "last-write")}
    d = diagnosis_of(lambda: _BorderZeroed()(torch.randn(2, 3, 5, 5, requires_grad=True)).sum().backward())
    assert d.kind == "version", d.text()
    assert f"line {line['first-write']}" in d.facts["modified by"], d.text()
    assert "the first of 4 in-place writes" in d.facts["modified by"], d.text()
    assert f"line {line['last-write']}" in d.facts["modified by"], d.text()
    assert d.facts["tensor"].startswith("the output of relu") and f"line {line['the-relu']}" in d.facts["tensor"]


def lstm_loop(retain):
    """nn.LSTM over two batches, both its states (h, c) carried without detach."""
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, batch_first=True)
    opt = optim.SGD(lstm.parameters(), lr=0.1)
    h, c = torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)
    for _ in range(2):
        opt.zero_grad()
        output, (h, c) = lstm(torch.randn(2, 5, 3), (h, c))
        output.pow(2).mean().backward(retain_graph=retain)
        opt.step()


def test_both_states_of_an_lstm_are_named_and_both_detached_in_the_fix():
    d = diagnosis_of(lambda: lstm_loop(retain=True))
    assert d.kind == "version" and "through `h`, `c`" in d.summary, d.text()
    assert d.facts["carried"].startswith("`h`, `c`, made from its own last value at line"), d.text()
    assert "keep h.detach(), c.detach()" in d.text()
    d = diagnosis_of(lambda: lstm_loop(retain=False))
    assert d.kind == "freed" and d.facts["carried by"].startswith("the previous pass's `h`, `c` from line"), d.text()


def _state_loop(reset):
    """A state carried over passes, reset at the start of each pass by `reset(state)` (which returns the state)."""
    w = torch.ones(3, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    state = torch.zeros(3)
    for _ in range(2):
        state = reset(state)
        state = (state + w).exp()
        opt.zero_grad()
        state.sum().backward()
        opt.step()
    return w.detach()


def test_a_state_reset_in_place_is_named_and_told_to_reset_with_a_new_tensor():
    """`state.zero_()` keeps the state's history (zero_ is recorded on top of it): the reset is named, and a reset
    with a new tensor (the fix) runs, as detach_() before zero_() does."""
    from gan_lessons.doctor.report import RESET_IN_PLACE_FIXES
    d = diagnosis_of(lambda: _state_loop(lambda s: s.zero_()))
    assert "s.zero_()" in d.facts["reset in place at"], d.text()
    assert d.fixes[0][0] == RESET_IN_PLACE_FIXES[0][0], d.text()
    assert "reset the state at its start" not in d.text(), d.text()
    fixed = _state_loop(lambda s: torch.zeros_like(s))
    assert torch.equal(fixed, _state_loop(lambda s: s.detach_().zero_()))


class _GeneratorLoss(nn.Module):
    """A loss module that keeps its terms as attributes, as many training scripts do for logging."""

    def forward(self, tex_labels, out_images, target_images):
        self.last_tex_loss = -torch.log(tex_labels + 1e-8).mean()
        self.last_col_loss = F.l1_loss(out_images, target_images)
        return self.last_col_loss + 0.005 * self.last_tex_loss


def test_the_tensor_made_before_the_step_is_named_not_a_loss_module_s_record_made_after_it():
    """D's scores of the fakes, taken before D's step and reused in G's loss: `fake_tex` is what carries the old
    graph, not the loss module's `last_tex_loss` (made after the step from it), and no term is in both losses."""
    def bug():
        torch.manual_seed(0)
        model_g, model_d = nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1),
                                                          nn.Sigmoid())
        optimizer_g, optimizer_d = optim.Adam(model_g.parameters()), optim.Adam(model_d.parameters())
        g_loss_module = _GeneratorLoss()
        for _ in range(2):
            input_img, disc_img = torch.rand(2, 4), torch.rand(2, 4)
            fake_img = model_g(input_img)
            real_tex, fake_tex = model_d(disc_img), model_d(fake_img)
            model_d.zero_grad()
            d_tex_loss = -(torch.log(real_tex + 1e-8).mean() + torch.log(1 - fake_tex + 1e-8).mean())
            d_tex_loss.backward(retain_graph=True)
            optimizer_d.step()
            model_g.zero_grad()
            g_loss = g_loss_module(fake_tex, fake_img, input_img)
            g_loss.backward()
            optimizer_g.step()
    d = diagnosis_of(bug)
    assert d.kind == "version" and d.facts["carried"].startswith("`fake_tex`, made before that step"), d.text()
    assert "last_tex_loss" not in d.text() and "in both losses" not in d.facts, d.text()
    assert d.fixes[0][0].startswith("make `fake_tex` again after the step"), d.text()


class _MappingNet(nn.Module):
    """A mapping network that keeps a running mean of its outputs, renewed with a graph in every forward."""

    def __init__(self):
        super().__init__()
        self.mapping = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
        self.register_buffer("mean_w", torch.zeros(1, 4))

    def forward(self, z):
        w = self.mapping(z)
        self.mean_w = 0.9 * self.mean_w + 0.1 * w.mean(dim=0, keepdim=True)  # RENEWED
        return w - self.mean_w


def test_a_state_a_module_renews_from_its_own_last_value_is_named_with_its_line_and_detached_where_renewed():
    netG = _MappingNet()
    optimizerG = optim.SGD(netG.parameters(), lr=0.1)

    def bug():
        for _ in range(2):
            optimizerG.zero_grad()
            netG(torch.randn(3, 4)).pow(2).mean().backward(retain_graph=True)
            optimizerG.step()
    d = diagnosis_of(bug)
    line = next(i + 1 for i, text in enumerate(Path(__file__).read_text().splitlines()) if text.endswith("# RENEWED"))
    assert d.kind == "version" and "renewed from its own last value" in d.summary, d.text()
    assert d.facts["carried"].startswith(f"`netG.mean_w`, made from its own last value at line {line}"), d.text()
    assert d.fixes[0][0].startswith("keep netG.mean_w.detach() where it is renewed"), d.text()


def test_another_net_s_output_carried_across_a_step_leads_with_the_detach_of_that_net_s_input():
    """FactorVAE's order: the VAE steps, then the discriminator's loss on d_z, made before the step from the
    encoder's latent: a fresh forward of the discriminator alone would still reach the old encoder."""
    def bug():
        torch.manual_seed(0)
        encoder = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        discriminator = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 2))
        optimizer, optimizer_d = optim.Adam(encoder.parameters()), optim.Adam(discriminator.parameters())
        for _ in range(2):
            latent_sample = encoder(torch.randn(5, 4))
            d_z = discriminator(latent_sample)
            vae_loss = latent_sample.pow(2).mean() + (d_z[:, 0] - d_z[:, 1]).mean()
            optimizer.zero_grad()
            vae_loss.backward(retain_graph=True)
            optimizer.step()
            d_tc_loss = F.cross_entropy(d_z, torch.zeros(5, dtype=torch.long))
            optimizer_d.zero_grad()
            d_tc_loss.backward()
            optimizer_d.step()
    d = diagnosis_of(bug)
    assert d.kind == "version" and "`d_z`" in d.facts["carried"], d.text()
    assert d.fixes[0][0].startswith("where the later loss must not train the stepped net, detach the input of the "
                                    "forward that made `d_z`"), d.text()
    assert "a forward of discriminator alone on the same input still reaches the old weights" in d.fixes[0][0]


def test_a_tensor_carried_across_the_steps_of_two_optimizers_leads_with_the_reorder():
    """BicycleGAN's order: E and G both step, then a loss through mu2 = E(G(z)), made before the steps: a fresh
    forward of E alone would still reach G's old weights, so the reorder comes first, the fresh forward second."""
    def bug():
        torch.manual_seed(0)
        netG = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
        netE = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        optimizer_G, optimizer_E = optim.Adam(netG.parameters()), optim.Adam(netE.parameters())
        fake_B_random = netG(torch.randn(3, 4))
        mu2 = netE(fake_B_random)
        loss_EG = fake_B_random.pow(2).mean() + mu2.pow(2).mean()
        optimizer_G.zero_grad()
        optimizer_E.zero_grad()
        loss_EG.backward(retain_graph=True)
        optimizer_G.step()
        optimizer_E.step()
        (mu2 - 1).abs().mean().backward()
    d = diagnosis_of(bug)
    assert d.kind == "version" and "`mu2`" in d.facts["carried"], d.text()
    assert d.fixes[0][0].startswith("reorder:") and d.fixes[1][0].startswith("make `mu2` again"), d.text()


class _Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

    def forward(self, x):
        h = self.net(x)
        return torch.sigmoid(h)


def test_a_module_run_by_its_forward_method_is_placed_at_the_line_that_called_it():
    """D.forward(x) runs no module hooks: the graph it makes is still placed at the line that called it (the line
    inside forward after it), so the carried tensor is named by the line that made it."""
    def bug():
        torch.manual_seed(0)
        G, D = nn.Linear(3, 4), _Critic()
        opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
        fake = G.forward(torch.randn(8, 3))
        d_fake = D.forward(fake)
        loss_D = F.binary_cross_entropy(d_fake, torch.zeros(8, 1))
        opt_D.zero_grad()
        loss_D.backward(retain_graph=True)
        opt_D.step()
        loss_G = F.binary_cross_entropy(d_fake, torch.ones(8, 1))
        opt_G.zero_grad()
        loss_G.backward()
        opt_G.step()
    d = diagnosis_of(bug)
    assert d.kind == "version" and "`d_fake`" in d.summary, d.text()
    assert "(`d_fake = D.forward(fake)`)" in d.facts["carried"], d.text()
    assert "(`h = self.net(x)`), called from line" in d.facts["saved by"] or \
        "(`return torch.sigmoid(h)`), called from line" in d.facts["saved by"], d.text()
    assert "`d_fake = D.forward(fake)`" in d.facts["saved by"], d.text()


class _Solver:
    """FactorVAE's shape: the nets are attributes of a trainer object, so the doctor knows them as self.VAE, self.D."""

    def __init__(self):
        torch.manual_seed(0)
        self.VAE, self.D = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4)), nn.Linear(4, 2)
        self.optim_VAE, self.optim_D = optim.Adam(self.VAE.parameters()), optim.Adam(self.D.parameters())

    def train(self, fixed):
        z = self.VAE(torch.randn(5, 6))
        D_z = self.D(z)
        vae_loss = z.pow(2).mean() + (D_z[:, 0] - D_z[:, 1]).mean()
        self.optim_VAE.zero_grad()
        vae_loss.backward(retain_graph=True)
        self.optim_VAE.step()
        D_z_for_D = self.D(z.detach()) if fixed else D_z
        D_loss = F.cross_entropy(D_z_for_D, torch.zeros(5, dtype=torch.long))
        self.optim_D.zero_grad()
        D_loss.backward()
        self.optim_D.step()


def test_another_net_s_output_is_told_by_its_attribute_name_and_the_detach_of_its_input_comes_first():
    solver = _Solver()
    d = diagnosis_of(lambda: solver.train(fixed=False))
    assert d.kind == "version" and "`D_z`" in d.summary, d.text()
    assert d.fixes[0][0].startswith("where the later loss must not train the stepped net, detach the input of the "
                                    "forward that made `D_z`"), d.text()
    assert "a forward of solver.D alone" in d.fixes[0][0], d.text()
    _Solver().train(fixed=True)                        # that fix runs
