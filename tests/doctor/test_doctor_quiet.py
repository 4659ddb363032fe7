"""Correct training code on which the doctor must say nothing: every pattern here once drew a
DoctorWarning. Each runs under the doctor with warnings turned into errors, so a false positive fails the test."""
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons import strategies
from gan_lessons.doctor import doctor
from gan_lessons.exercises import reference_seed000_step

pytestmark = pytest.mark.slow


def tiny_gan():
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1), nn.Flatten(0))
    return G, D, optim.Adam(G.parameters(), lr=1e-3), optim.Adam(D.parameters(), lr=1e-3)


def quietly(step, calls=3):
    """Run step() `calls` times under the doctor; any warning (the doctor's or torch's) fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with doctor() as doc:
            for _ in range(calls):
                step()
    assert doc.diagnoses == [] and doc.notes == []      # nor a bookkeeping failure of its own


@pytest.mark.parametrize("name", [n for n in strategies.ALL if n != "retain_graph_seed003"])
def test_every_runnable_strategy(name):
    G, D, opt_G, opt_D = tiny_gan()
    x_real = torch.randn(16, 2) + 3
    quietly(lambda: strategies.ALL[name](G, D, opt_G, opt_D, x_real, lambda n: torch.randn(n, 4)))


def test_seed000_step_fixed():
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(0)
    g, d = Generator(), Discriminator()
    g_optimizer, d_optimizer = optim.Adam(g.parameters()), optim.Adam(d.parameters())
    quietly(lambda: reference_seed000_step(g, d, g_optimizer, d_optimizer, torch.rand(8, 1, 28, 28) * 2 - 1,
                                           torch.randn(8, g.z_dim)), calls=2)


def test_two_optimizers_over_one_backward():
    """An autoencoder whose encoder and decoder have their own optimizers, both stepped on one loss."""
    torch.manual_seed(0)
    encoder, decoder = nn.Sequential(nn.Linear(6, 3), nn.Tanh()), nn.Linear(3, 6)
    opt_enc, opt_dec = optim.Adam(encoder.parameters()), optim.SGD(decoder.parameters(), lr=0.1)
    x = torch.randn(10, 6)

    def step():
        opt_enc.zero_grad()
        opt_dec.zero_grad()
        F.mse_loss(decoder(encoder(x)), x).backward()
        opt_dec.step()
        opt_enc.step()
    quietly(step)


def test_an_optimizer_over_part_of_a_model():
    """Fine-tuning a head: the backbone still requires grad, but only the head is optimized."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = optim.SGD(model[2].parameters(), lr=0.1)
    x, y = torch.randn(12, 5), torch.randint(0, 2, (12,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    quietly(step)


def test_lbfgs_with_a_closure():
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = optim.LBFGS(model.parameters(), max_iter=4)
    x, y = torch.randn(20, 3), torch.randn(20, 1)

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss
    quietly(lambda: opt.step(closure))


def test_pix2pix_style_generator_loss():
    """loss_G = adversarial + 100 * L1: G's loss runs through D and also straight to G's output."""
    torch.manual_seed(0)
    netG = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    netD = nn.Sequential(nn.Linear(8, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    opt_G, opt_D = optim.Adam(netG.parameters()), optim.Adam(netD.parameters())
    x, y = torch.randn(6, 4), torch.randn(6, 4)

    def step():
        fake = netG(x)
        opt_D.zero_grad()
        pred_fake, pred_real = netD(torch.cat([x, fake.detach()], 1)), netD(torch.cat([x, y], 1))
        loss_D = 0.5 * (F.binary_cross_entropy_with_logits(pred_fake, torch.zeros_like(pred_fake))
                        + F.binary_cross_entropy_with_logits(pred_real, torch.ones_like(pred_real)))
        loss_D.backward()
        opt_D.step()
        opt_G.zero_grad()
        pred = netD(torch.cat([x, fake], 1))
        loss_G = F.binary_cross_entropy_with_logits(pred, torch.ones_like(pred)) + 100 * F.l1_loss(fake, y)
        loss_G.backward()
        opt_G.step()
    quietly(step)


def test_wgan_with_weight_clipping_and_n_critic():
    G, D, _, _ = tiny_gan()
    opt_G, opt_D = optim.RMSprop(G.parameters(), lr=5e-5), optim.RMSprop(D.parameters(), lr=5e-5)
    x_real = torch.randn(16, 2)

    def step():
        for _ in range(3):                          # n_critic
            opt_D.zero_grad()
            loss_D = D(G(torch.randn(16, 4)).detach()).mean() - D(x_real).mean()
            loss_D.backward()
            opt_D.step()
            for p in D.parameters():
                p.data.clamp_(-0.01, 0.01)
        opt_G.zero_grad()
        loss_G = -D(G(torch.randn(16, 4))).mean()
        loss_G.backward()
        opt_G.step()
    quietly(step)


def test_wgan_gp_gradient_penalty():
    G, D, opt_G, opt_D = tiny_gan()
    x_real = torch.randn(16, 2)

    def step():
        x_fake = G(torch.randn(16, 4)).detach()
        alpha = torch.rand(16, 1)
        x_hat = (alpha * x_real + (1 - alpha) * x_fake).requires_grad_(True)
        grad, = torch.autograd.grad(D(x_hat).sum(), x_hat, create_graph=True)
        penalty = ((grad.norm(2, dim=1) - 1) ** 2).mean()
        opt_D.zero_grad()
        (D(x_fake).mean() - D(x_real).mean() + 10 * penalty).backward()
        opt_D.step()
        opt_G.zero_grad()
        (-D(G(torch.randn(16, 4))).mean()).backward()
        opt_G.step()
    quietly(step)


def test_wgan_gp_strategy_with_its_G_steps():
    """strategies.wgan_gp with n_critic=2: four calls, two of them with G's step (D frozen)."""
    G, D, opt_G, opt_D = tiny_gan()
    x_real = torch.randn(16, 2) + 3
    quietly(lambda: strategies.wgan_gp(G, D, opt_G, opt_D, x_real, lambda n: torch.randn(n, 4), n_critic=2), calls=4)


def test_non_saturating_loss_with_an_r1_penalty():
    """StyleGAN's D step: the R1 penalty on real images (create_graph=True), weighted gamma / 2, and a gradient norm
    logged without create_graph, never part of a loss."""
    G, D, opt_G, opt_D = tiny_gan()
    x_real = torch.randn(16, 2) + 3

    def step():
        x_fake = G(torch.randn(16, 4)).detach()
        opt_D.zero_grad()
        loss_D = F.softplus(D(x_fake)).mean() + F.softplus(-D(x_real)).mean() + 5.0 * strategies.r1_penalty(D, x_real)
        loss_D.backward()
        opt_D.step()
        x = x_real.clone().requires_grad_(True)
        logged = torch.autograd.grad(D(x).sum(), x)[0].norm(dim=1).mean().item()
        assert logged > 0
        opt_G.zero_grad()
        F.softplus(-D(G(torch.randn(16, 4)))).mean().backward(inputs=list(G.parameters()))
        opt_G.step()
    quietly(step)


def test_adversarial_training_with_fgsm_examples():
    """The input's gradient, taken without create_graph, makes an adversarial batch that the model then trains on:
    a constant fed to the model, rightly, not a penalty added to a loss."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(10, 4), torch.randint(0, 3, (10,))

    def step():
        x_in = x.clone().requires_grad_(True)
        grad, = torch.autograd.grad(F.cross_entropy(model(x_in), y), x_in)
        x_adv = (x + 0.1 * grad.sign()).detach()
        opt.zero_grad()
        (F.cross_entropy(model(x), y) + F.cross_entropy(model(x_adv), y)).backward()
        opt.step()
    quietly(step)


def test_gradient_accumulation_over_micro_batches():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 1))
    opt = optim.SGD(model.parameters(), lr=0.1)
    batches = [torch.randn(4, 3) for _ in range(4)]

    def step():
        opt.zero_grad()
        for x in batches:
            (model(x).pow(2).mean() / len(batches)).backward()
        opt.step()
    quietly(step)


def test_rnn_with_a_detached_hidden_state():
    torch.manual_seed(0)
    rnn, head = nn.GRU(3, 5, batch_first=True), nn.Linear(5, 1)
    opt = optim.Adam([*rnn.parameters(), *head.parameters()])
    state = {"h": torch.zeros(1, 2, 5)}

    def step():
        h = state["h"].detach()                     # truncated backprop through time
        out, h = rnn(torch.randn(2, 4, 3), h)
        opt.zero_grad()
        head(out).pow(2).mean().backward()
        opt.step()
        state["h"] = h
    quietly(step)


def test_zero_grad_without_set_to_none():
    G, D, opt_G, opt_D = tiny_gan()
    x_real = torch.randn(16, 2)

    def step():
        opt_D.zero_grad(set_to_none=False)
        loss_D = (F.softplus(-D(x_real)) + F.softplus(D(G(torch.randn(16, 4)).detach()))).mean()
        loss_D.backward()
        opt_D.step()
        opt_G.zero_grad(set_to_none=False)
        F.softplus(-D(G(torch.randn(16, 4)))).mean().backward()
        opt_G.step()
    quietly(step)


COMPILED_STEP = """
import warnings, torch, torch.nn.functional as F
from torch import nn, optim
from gan_lessons.doctor import doctor
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1), nn.Flatten(0))
opt_D = optim.Adam(D.parameters(), lr=1e-3)
x_real = torch.randn(16, 2)
loss_D = torch.compile(lambda x_fake: (F.softplus(-D(x_real)) + F.softplus(D(x_fake))).mean(), backend="eager")
with warnings.catch_warnings():
    warnings.simplefilter("error")
    with doctor() as doc:
        for _ in range(3):
            opt_D.zero_grad()
            loss_D(G(torch.randn(16, 4)).detach()).backward()
            opt_D.step()
assert doc.diagnoses == [], doc.diagnoses
print("quiet")
"""


def test_a_compiled_step():
    """In its own process: on torch 2.1, once torch.compile has run, optimizers' step hooks stop firing in that
    process, which would change what later tests see."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", COMPILED_STEP], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("quiet"), done.stderr[-2000:]


# The checks for one optimizer adding up its own steps, a penalty from weight gradients, a step over a
# frozen module, an out= write and a carried tensor must stay quiet on the correct code that looks like each bug.

def test_first_order_maml_with_weight_gradients_as_constants():
    """Weight gradients taken without create_graph make fast weights: first-order MAML, meant as constants."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    meta_opt = optim.Adam(model.parameters(), lr=1e-3)
    x_support, y_support, x_query, y_query = torch.randn(6, 3), torch.randn(6, 1), torch.randn(6, 3), torch.randn(6, 1)

    def step():
        names = [n for n, _ in model.named_parameters()]
        grads = torch.autograd.grad(F.mse_loss(model(x_support), y_support), model.parameters())
        fast = {n: p - 0.1 * g for n, p, g in zip(names, model.parameters(), grads)}
        meta_opt.zero_grad()
        F.mse_loss(torch.func.functional_call(model, fast, (x_query,)), y_query).backward()
        meta_opt.step()
    quietly(step)


def test_vqgan_adaptive_weight_from_a_weight_gradient():
    """VQGAN's adaptive weight: gradient norms with respect to the last layer, a constant that scales a loss."""
    torch.manual_seed(0)
    decoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    critic = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    opt = optim.Adam(decoder.parameters(), lr=1e-3)
    x = torch.randn(6, 4)

    def step():
        x_rec = decoder(x)
        nll_loss, g_loss = F.l1_loss(x_rec, x), -critic(x_rec).mean()
        last_layer = decoder[2].weight
        nll_grads = torch.autograd.grad(nll_loss, last_layer, retain_graph=True)[0]
        g_grads = torch.autograd.grad(g_loss, last_layer, retain_graph=True)[0]
        d_weight = torch.clamp(torch.norm(nll_grads) / (torch.norm(g_grads) + 1e-4), 0.0, 1e4).detach()
        opt.zero_grad()
        (nll_loss + d_weight * g_loss).backward()
        opt.step()
    quietly(step)


def test_a_gradient_norm_logged_from_weight_gradients():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 1))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    norms = []

    def step():
        loss = F.mse_loss(model(x), y)
        grads = torch.autograd.grad(loss, model.parameters(), retain_graph=True)
        norms.append(sum(g.pow(2).sum() for g in grads).sqrt().item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    quietly(step)


def test_one_optimizer_over_a_partly_frozen_model():
    """Fine-tuning with the backbone frozen and one optimizer over every parameter: the head still trains."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
    model[0].requires_grad_(False)
    opt = optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(12, 5), torch.randint(0, 2, (12,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    quietly(step)


def test_n_critic_with_zero_grad_after_each_step():
    G, D, opt_G, opt_D = tiny_gan()
    x_real = torch.randn(16, 2)

    def step():
        for _ in range(3):
            loss_D = D(G(torch.randn(16, 4)).detach()).mean() - D(x_real).mean()
            loss_D.backward()
            opt_D.step()
            opt_D.zero_grad()
        (-D(G(torch.randn(16, 4))).mean()).backward(inputs=list(G.parameters()))   # D's .grad stays empty
        opt_G.step()
        opt_G.zero_grad()
    quietly(step)


def test_a_running_average_buffer_kept_without_a_graph():
    """StyleGAN's w_avg, renewed in each forward under no_grad from the detached mapping output, then used for
    truncation in the loss: a carried tensor that carries a value, not a graph."""
    torch.manual_seed(0)

    class Mapping(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU(0.2), nn.Linear(4, 4))
            self.register_buffer("w_avg", torch.zeros(4))

        def forward(self, z, psi=0.7):
            w = self.net(z)
            with torch.no_grad():
                self.w_avg.copy_(w.detach().mean(0).lerp(self.w_avg, 0.99))
            return self.w_avg + psi * (w - self.w_avg)

    mapping = Mapping()
    opt = optim.Adam(mapping.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        mapping(torch.randn(5, 4)).pow(2).mean().backward()
        opt.step()
    quietly(step)


def test_torchs_spectral_norm_on_real_and_fake_with_one_backward():
    """torch's own spectral norm renews its vectors with out= writes, and clones them before the forward saves
    them: D on the real and the fake batch, one backward, is correct."""
    torch.manual_seed(0)
    D = nn.Sequential(nn.utils.parametrizations.spectral_norm(nn.Linear(2, 8)), nn.LeakyReLU(0.2),
                      nn.utils.parametrizations.spectral_norm(nn.Linear(8, 1)))
    opt_D = optim.Adam(D.parameters(), lr=1e-3)
    x_real, x_fake = torch.randn(6, 2), torch.randn(6, 2)

    def step():
        opt_D.zero_grad()
        (F.softplus(-D(x_real)) + F.softplus(D(x_fake))).mean().backward()
        opt_D.step()
    quietly(step)


def test_an_ema_copy_of_G_renewed_in_place():
    G, D, opt_G, _ = tiny_gan()
    G_ema = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).requires_grad_(False)
    G_ema.load_state_dict(G.state_dict())

    def step():
        opt_G.zero_grad()
        F.softplus(-D(G(torch.randn(16, 4)))).mean().backward()
        opt_G.step()
        with torch.no_grad():
            for p_ema, p in zip(G_ema.parameters(), G.parameters()):
                p_ema.lerp_(p, 0.001)
    quietly(step)


def test_two_discriminators_trained_on_one_summed_loss():
    """PyTorch-GAN's dualgan: loss_D = 0.5 * (loss_D_A + loss_D_B), one backward, each D's own optimizer steps.
    Each D's part of the loss reaches only that D (the fakes are detached): neither steps on the other's loss."""
    torch.manual_seed(0)
    G_AB, G_BA = nn.Linear(4, 4), nn.Linear(4, 4)
    D_A = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    D_B = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer_G = optim.Adam([*G_AB.parameters(), *G_BA.parameters()], lr=1e-3)
    optimizer_D_A, optimizer_D_B = optim.Adam(D_A.parameters(), lr=1e-3), optim.Adam(D_B.parameters(), lr=1e-3)

    def step():
        imgs_A, imgs_B = torch.randn(5, 4), torch.randn(5, 4)
        optimizer_D_A.zero_grad()
        optimizer_D_B.zero_grad()
        fake_A, fake_B = G_BA(imgs_B).detach(), G_AB(imgs_A).detach()
        loss_D_A = -D_A(imgs_A).mean() + D_A(fake_A).mean()
        loss_D_B = -D_B(imgs_B).mean() + D_B(fake_B).mean()
        (0.5 * (loss_D_A + loss_D_B)).backward()
        optimizer_D_A.step()
        optimizer_D_B.step()
        optimizer_G.zero_grad()
        loss_G = -D_A(G_BA(imgs_B)).mean() - D_B(G_AB(imgs_A)).mean()
        loss_G.backward()
        optimizer_G.step()
    quietly(step)


def test_a_shared_encoder_and_two_heads_trained_on_one_summed_loss():
    """Multi-task training: an encoder and two heads, each with its own optimizer, on the sum of the heads'
    losses. Both heads' backward runs on into the encoder on purpose."""
    torch.manual_seed(0)
    encoder, head_a, head_b = nn.Linear(6, 8), nn.Linear(8, 1), nn.Linear(8, 3)
    opt_enc = optim.SGD(encoder.parameters(), lr=0.1)
    opt_a, opt_b = optim.SGD(head_a.parameters(), lr=0.1), optim.SGD(head_b.parameters(), lr=0.1)

    def step():
        x = torch.randn(4, 6)
        h = torch.relu(encoder(x))
        loss = head_a(h).pow(2).mean() + F.cross_entropy(head_b(h), torch.tensor([0, 1, 2, 0]))
        for opt in (opt_enc, opt_a, opt_b):
            opt.zero_grad()
        loss.backward()
        for opt in (opt_enc, opt_a, opt_b):
            opt.step()
    quietly(step)


def test_gradients_set_by_hand_for_one_net_at_a_time_under_one_optimizer():
    """One optimizer over two nets, each step on .grad set by hand (p.grad = g) for one net, the other's .grad
    emptied: the parameters without .grad are meant to stay (a meta-learner's alternating updates)."""
    torch.manual_seed(0)
    student, meta = nn.Linear(3, 1), nn.Linear(1, 1)
    opt = optim.SGD(list(student.parameters()) + list(meta.parameters()), lr=0.1)
    x = torch.randn(4, 3)

    def step():
        for net in (student, meta):
            grads = torch.autograd.grad(meta(student(x)).pow(2).mean(), list(net.parameters()))
            for p, g in zip(net.parameters(), grads):
                p.grad = g
            opt.step()
            for p in net.parameters():
                p.grad = None
    quietly(step)



def test_a_step_after_zero_grad_set_to_none_false_applies_nothing_again():
    """zero_grad(set_to_none=False) zeroes .grad in place: a step right after it steps on zeros, not again on the
    earlier backward's gradient."""
    w = nn.Parameter(torch.ones(2))
    opt = optim.SGD([w], lr=0.1)

    def step():
        opt.zero_grad()
        (w * 2).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        opt.step()
    quietly(step)


class _Block(nn.Module):
    """Blocks whose first layer is an in-place activation, used the ways that are right: the block's input is not
    read again by its caller (a plain stack), or, changed, is what the block goes on with (x = act(x)); and a
    buffer the code fills in place (copy_) is meant to change."""

    def __init__(self, skip):
        super().__init__()
        self.skip = skip
        self.act, self.conv = nn.ReLU(inplace=True), nn.Linear(4, 4)

    def forward(self, x):
        if self.skip:
            x = self.act(x)               # the input returned, changed: what the caller then reads is meant
            return self.conv(x) + x
        return self.conv(self.act(x))


def test_an_in_place_first_layer_whose_input_is_not_read_again_or_is_returned():
    torch.manual_seed(0)
    stem, blocks = nn.Linear(4, 4), nn.Sequential(_Block(False), _Block(True), _Block(False))
    opt = optim.SGD([*stem.parameters(), *blocks.parameters()], lr=0.1)
    cache = torch.zeros(4)

    def step():
        opt.zero_grad()
        h = stem(torch.randn(3, 4))
        out = blocks(h)
        h2 = stem(torch.randn(3, 4))
        out = out + _Block(True)(h2)                  # h2 changed inside, and not read again
        cache.copy_(out.detach().mean(0))
        out.pow(2).mean().backward()
        opt.step()
    quietly(step)
