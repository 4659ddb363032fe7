"""Lesson 13's lab graders, each on: the broken script (fails, the hint names the wrong gradient or the error), the
reference fix and a second, differently written right fix (pass), a wrong fix that makes the error go away or
looks right (fails, named), and nbgrader's stub (not solved yet)."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gan_lessons import exercises
from gan_lessons.exercises.lesson13 import amp, biggan, compiled, grading, rnn, srgan, wgan_gp
from gan_lessons.exercises.variants import variant


def out_of(capsys, ok):
    return ok, capsys.readouterr().out


def stub(*args, **kwargs):
    # YOUR CODE HERE
    raise NotImplementedError()


# --- 1 · SRGAN ---------------------------------------------------------------------------------------------------
def srgan_broken(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    real_img, z = target, data
    fake_img = netG(z)
    netD.zero_grad()
    real_out = netD(real_img).mean()
    fake_out = netD(fake_img).mean()
    d_loss = 1 - real_out + fake_out
    d_loss.backward(retain_graph=True)
    optimizerD.step()
    netG.zero_grad()
    g_loss = generator_criterion(fake_out, fake_img, real_img)
    g_loss.backward()
    optimizerG.step()


def srgan_frozen(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """D's loss summed from two backwards; G's step through a frozen D, with backward(inputs=...)."""
    fake_img = netG(data)
    optimizerD.zero_grad(set_to_none=False)
    (1 - netD(target).mean()).backward()
    netD(fake_img.detach()).mean().backward()
    optimizerD.step()
    netD.requires_grad_(False)
    try:
        optimizerG.zero_grad()
        generator_criterion(netD(fake_img).mean(), fake_img, target).backward(inputs=list(netG.parameters()))
    finally:
        netD.requires_grad_(True)
    optimizerG.step()


def srgan_detached_g(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    fake_img = netG(data)
    netD.zero_grad()
    fake_out = netD(fake_img).mean()
    (1 - netD(target).mean() + fake_out).backward(retain_graph=True)
    optimizerD.step()
    netG.zero_grad()
    generator_criterion(fake_out.detach(), fake_img, target).backward()
    optimizerG.step()


def srgan_inputs(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """Right, a third way: D's loss on the undetached fake, kept out of netG by backward(inputs=...)."""
    fake_img = netG(data)
    optimizerD.zero_grad()
    (1 - netD(target).mean() + netD(fake_img).mean()).backward(inputs=list(netD.parameters()))
    optimizerD.step()
    optimizerG.zero_grad()
    generator_criterion(netD(fake_img).mean(), fake_img, target).backward(inputs=list(netG.parameters()))
    optimizerG.step()


def srgan_constant_label(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """Wrong: the adversarial term fed a constant instead of D's score, so nothing of it reaches netG."""
    fake_img = netG(data)
    netD.zero_grad()
    (1 - netD(target).mean() + netD(fake_img.detach()).mean()).backward()
    optimizerD.step()
    netG.zero_grad()
    generator_criterion(torch.tensor(0.5), fake_img, target).backward()
    optimizerG.step()


def srgan_g_first_frozen(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """Wrong: G's step first (through a frozen D), D's after it."""
    fake_img = netG(data)
    netD.requires_grad_(False)
    optimizerG.zero_grad()
    generator_criterion(netD(fake_img).mean(), fake_img, target).backward()
    optimizerG.step()
    netD.requires_grad_(True)
    optimizerD.zero_grad()
    (1 - netD(target).mean() + netD(fake_img.detach()).mean()).backward()
    optimizerD.step()


def srgan_wasted_backward(netG, netD, optimizerG, optimizerD, generator_criterion, data, target):
    """Right gradients, but D's loss still goes back into netG (retain_graph), thrown away by netG.zero_grad()."""
    fake_img = netG(data)
    netD.zero_grad()
    (1 - netD(target).mean() + netD(fake_img).mean()).backward(retain_graph=True)
    optimizerD.step()
    netG.zero_grad()
    generator_criterion(netD(fake_img).mean(), fake_img, target).backward()
    optimizerG.step()


def test_srgan_right_answers_written_three_ways_pass(capsys):
    for right in (srgan.reference_srgan_step, srgan_frozen, srgan_inputs):
        ok, out = out_of(capsys, exercises.check_srgan_step(right))
        assert ok and out.startswith("✓"), out


@pytest.mark.parametrize("wrong, words", [
    (srgan_constant_label, ["step 1: optimizerG", "of its norm apart", "image loss's gradient alone"]),
    (srgan_detached_g, ["step 1: optimizerG", "image loss's gradient alone"]),
    (srgan_g_first_frozen, ["step 1: optimizerG", "as it was before optimizerD.step()",
                            "G learns from the netD that has just stepped"]),
    (srgan_wasted_backward, ["call 1: 2 backward passes reached netG where the reference makes 1"]),
])
def test_srgan_wrong_fixes_are_named(capsys, wrong, words):
    ok, out = out_of(capsys, exercises.check_srgan_step(wrong))
    assert not ok and out.startswith("✗"), out
    for w in words:
        assert w in out, out
    assert "1x the reference's" not in out and ".detach()" not in out, out


def test_srgan(capsys):
    ok, out = out_of(capsys, exercises.check_srgan_step(srgan_broken))
    assert not ok and "modified by an inplace operation" in out and "Hint" in out
    for right in (srgan.reference_srgan_step, srgan_frozen):
        ok, out = out_of(capsys, exercises.check_srgan_step(right))
        assert ok and out.startswith("✓"), out
    ok, out = out_of(capsys, exercises.check_srgan_step(srgan._srgan_both_steps_last))
    assert not ok and "step 1: optimizerD stepped on gradients" in out and "g_loss's" in out, out
    ok, out = out_of(capsys, exercises.check_srgan_step(srgan._srgan_g_through_old_d))
    assert not ok and "step 1: optimizerG stepped on gradients" in out and "before 1.5" in out, out
    ok, out = out_of(capsys, exercises.check_srgan_step(srgan_detached_g))
    assert not ok and "step 1: optimizerG stepped on gradients" in out, out
    ok, out = out_of(capsys, exercises.check_srgan_step(stub))
    assert not ok and "not solved yet" in out


# --- 2 · BigGAN --------------------------------------------------------------------------------------------------
def biggan_broken(G, D, GD, z_, config, x):
    G.optim.zero_grad()
    D.optim.zero_grad()
    x = torch.split(x, config['batch_size'])
    counter = 0
    if config['toggle_grads']:
        biggan.toggle_grad(D, True)
        biggan.toggle_grad(G, False)
    for step_index in range(config['num_D_steps']):  # noqa: B007
        for accumulation_index in range(config['num_D_accumulations']):  # noqa: B007
            z_.normal_()
            D_fake, D_real = GD(z_[:config['batch_size']], x[counter], train_G=False)
            D_loss_real, D_loss_fake = biggan.discriminator_loss(D_fake, D_real)
            D_loss = (D_loss_real + D_loss_fake) / float(config['num_D_accumulations'])
            D_loss.backward()
            counter += 1
        D.optim.step()
    if config['toggle_grads']:
        biggan.toggle_grad(D, False)
        biggan.toggle_grad(G, True)
    G.optim.zero_grad()
    for accumulation_index in range(config['num_G_accumulations']):  # noqa: B007
        z_.normal_()
        G_loss = biggan.generator_loss(GD(z_, train_G=True)) / float(config['num_G_accumulations'])
        G_loss.backward()
    G.optim.step()


def biggan_set_to_none(G, D, GD, z_, config, x):
    """zero_grad(set_to_none=True) right after each D step instead of before it."""
    batches = iter(torch.split(x, config['batch_size']))
    biggan.toggle_grad(D, True)
    biggan.toggle_grad(G, False)
    D.optim.zero_grad(set_to_none=True)
    for _ in range(config['num_D_steps']):
        for _ in range(config['num_D_accumulations']):
            z_.normal_()
            D_fake, D_real = GD(z_[:config['batch_size']], next(batches), train_G=False)
            sum(biggan.discriminator_loss(D_fake, D_real)).div(config['num_D_accumulations']).backward()
        D.optim.step()
        D.optim.zero_grad(set_to_none=True)
    biggan.toggle_grad(D, False)
    biggan.toggle_grad(G, True)
    G.optim.zero_grad()
    z_.normal_()
    biggan.generator_loss(GD(z_, train_G=True)).backward()
    G.optim.step()


def biggan_zero_each_step_by_params(G, D, GD, z_, config, x):
    """A third right answer: the gradients reset by hand, parameter by parameter, at the start of each D step."""
    chunks = torch.split(x, config['batch_size'])
    biggan.toggle_grad(D, True)
    biggan.toggle_grad(G, False)
    k = 0
    for _step in range(config['num_D_steps']):
        for p in D.parameters():
            p.grad = None
        for _acc in range(config['num_D_accumulations']):
            z_.normal_()
            D_fake, D_real = GD(z_[:config['batch_size']], chunks[k], train_G=False)
            loss_real, loss_fake = biggan.discriminator_loss(D_fake, D_real)
            ((loss_real + loss_fake) / config['num_D_accumulations']).backward()
            k += 1
        D.optim.step()
    biggan.toggle_grad(D, False)
    biggan.toggle_grad(G, True)
    G.optim.zero_grad()
    for _acc in range(config['num_G_accumulations']):
        z_.normal_()
        (biggan.generator_loss(GD(z_, train_G=True)) / config['num_G_accumulations']).backward()
    G.optim.step()


def test_biggan(capsys):
    ok, out = out_of(capsys, exercises.check_biggan_train(biggan_broken))
    assert not ok and "step 2: D.optim stepped on gradients of norm 1.73, where the reference's have norm 0.866" in out, out
    assert "plus step 1" not in out and ".grad still held" not in out, out     # what was measured, not why
    for right in (biggan.reference_biggan_train, biggan_set_to_none, biggan_zero_each_step_by_params):
        ok, out = out_of(capsys, exercises.check_biggan_train(right))
        assert ok and out.startswith("✓"), out
    ok, out = out_of(capsys, exercises.check_biggan_train(biggan._biggan_zero_in_accumulation))
    assert not ok and "step 1: D.optim" in out and "accumulation loop" in out, out
    ok, out = out_of(capsys, exercises.check_biggan_train(stub))
    assert not ok and "not solved yet" in out
    ok, out = out_of(capsys, exercises.check_biggan_train(biggan_divided_by_the_steps))
    assert not ok and "step 1: D.optim stepped on gradients of norm" in out and "in the same direction" in out, out


biggan_divided_by_the_steps = variant(      # D's loss divided by num_D_steps, not by num_D_accumulations
    biggan.reference_biggan_train, replace={"float(config['num_D_accumulations'])": "float(config['num_D_steps'])"})


# --- 3 · WGAN-GP with a BatchNorm critic -------------------------------------------------------------------------
def broken_make_critic(channels):
    return wgan_gp.Discriminator(channels)


def broken_train_critic(D, G, d_optimizer, images, z, eta, lambda_term=10):
    one = torch.tensor(1.0)
    mone = one * -1
    D.zero_grad()
    d_loss_real = D(images).mean()
    d_loss_real.backward(mone)
    fake_images = G(z)
    d_loss_fake = D(fake_images).mean()
    d_loss_fake.backward(one)
    interpolated = (eta * images.data + (1 - eta) * fake_images.data).requires_grad_(True)
    prob_interpolated = D(interpolated)
    gradients = torch.autograd.grad(outputs=prob_interpolated, inputs=interpolated,
                                    grad_outputs=torch.ones(prob_interpolated.size()),
                                    create_graph=True, retain_graph=True)[0]
    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * lambda_term
    gradient_penalty.backward()
    d_optimizer.step()


class PerSampleCritic(nn.Module):
    """The critic written anew, GroupNorm with one group per channel (instance norm), same parameter names."""

    def __init__(self, channels):
        super().__init__()
        self.main_module = nn.Sequential(nn.Conv2d(channels, 4, 4, 2, 1), nn.GroupNorm(4, 4), nn.LeakyReLU(0.2),
                                         nn.Conv2d(4, 8, 4, 2, 1), nn.GroupNorm(8, 8), nn.LeakyReLU(0.2))
        self.output = nn.Sequential(nn.Conv2d(8, 1, 2, 1, 0))

    def forward(self, x):
        return self.output(self.main_module(x))


def train_critic_one_loss(D, G, d_optimizer, images, z, eta, lambda_term=10):
    """One loss, one backward; the penalty's norm from a sum of squares."""
    fake = G(z).detach()
    x_hat = torch.lerp(fake, images, eta).requires_grad_(True)
    out = D(x_hat)
    g, = torch.autograd.grad(out.sum(), x_hat, create_graph=True)
    penalty = lambda_term * ((g.pow(2).flatten(1).sum(1).sqrt() - 1) ** 2).mean()
    loss = D(fake).mean() - D(images).mean() + penalty
    d_optimizer.zero_grad()
    loss.backward()
    d_optimizer.step()


def group_norm_critic(channels):
    """Right, another layer: GroupNorm with a single group (a layer norm over each sample's channels and pixels)."""
    return nn.Sequential(nn.Conv2d(channels, 4, 4, 2, 1), nn.GroupNorm(1, 4), nn.LeakyReLU(0.2),
                         nn.Conv2d(4, 8, 4, 2, 1), nn.GroupNorm(1, 8), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 2))


def layer_norm_critic(channels):
    """Right: the layer norm the WGAN-GP paper recommends, written with nn.LayerNorm."""
    return nn.Sequential(nn.Conv2d(channels, 4, 4, 2, 1), nn.LayerNorm([4, 4, 4]), nn.LeakyReLU(0.2),
                         nn.Conv2d(4, 1, 4))


def train_critic_no_create_graph(D, G, d_optimizer, images, z, eta, lambda_term=10):
    """Wrong: the penalty's gradient taken without a graph of its own."""
    d_optimizer.zero_grad()
    fake = G(z).detach()
    (D(fake).mean() - D(images).mean()).backward()
    x_hat = (eta * images + (1 - eta) * fake).requires_grad_(True)
    g, = torch.autograd.grad(D(x_hat).sum(), x_hat)
    (lambda_term * ((g.flatten(1).norm(dim=1) - 1) ** 2).mean()).backward()
    d_optimizer.step()


def train_critic_norm_per_channel(D, G, d_optimizer, images, z, eta, lambda_term=10):
    """Wrong: one norm per channel of each sample (over H and W), the same number on one-channel images only."""
    d_optimizer.zero_grad()
    fake = G(z).detach()
    (D(fake).mean() - D(images).mean()).backward()
    x_hat = (eta * images + (1 - eta) * fake).requires_grad_(True)
    g, = torch.autograd.grad(D(x_hat).sum(), x_hat, create_graph=True)
    (lambda_term * ((g.norm(2, dim=(2, 3)) - 1) ** 2).mean()).backward()
    d_optimizer.step()


def batch_norm_eval_critic(channels):
    """Wrong: the BatchNorm critic, put in eval mode once (training mode comes back with the first D.train())."""
    return wgan_gp.Discriminator(channels).eval()


FIX_CODE = ("InstanceNorm2d(", "GroupNorm(", "LayerNorm(", ".view(gradients", "flatten first", "create_graph=True")


def test_wgan_gp_right_answers_written_differently_pass(capsys):
    for make, train in ((wgan_gp.reference_make_critic, wgan_gp.reference_train_critic), (PerSampleCritic, train_critic_one_loss),
                        (group_norm_critic, wgan_gp.reference_train_critic), (layer_norm_critic, train_critic_one_loss)):
        ok, out = out_of(capsys, exercises.check_wgan_gp(make, train))
        assert ok and out.startswith("✓"), (make, train, out)


@pytest.mark.parametrize("make, train, words", [
    (broken_make_critic, broken_train_critic, ["depends on the other images", "no longer a penalty per sample"]),
    (batch_norm_eval_critic, wgan_gp.reference_train_critic, ["depends on the other images"]),
    (wgan_gp.reference_make_critic, broken_train_critic, ["step 1: d_optimizer stepped on gradients",
                                                      "over dim 1 of a [batch, 1, H, W] gradient"]),
    (group_norm_critic, broken_train_critic, ["step 1: d_optimizer", "element by element"]),
    (wgan_gp.reference_make_critic, train_critic_no_create_graph, ["without a graph of its own", "a constant"]),
    (wgan_gp.reference_make_critic, train_critic_norm_per_channel, ["on images of 3 channels: step 1: d_optimizer"]),
])
def test_wgan_gp_wrong_answers_are_named_without_the_fix(capsys, make, train, words):
    ok, out = out_of(capsys, exercises.check_wgan_gp(make, train))
    assert not ok and out.startswith("✗"), out
    for w in words:
        assert w in out, out
    for code in FIX_CODE:
        assert code not in out, out


def test_wgan_gp(capsys):
    ok, out = out_of(capsys, exercises.check_wgan_gp(stub, stub))
    assert not ok and "not solved yet" in out
    ok, out = out_of(capsys, exercises.check_wgan_gp(wgan_gp.reference_make_critic, stub))
    assert not ok and "not solved yet" in out
    nothing = lambda *args, **kwargs: None                      # noqa: E731  (a body that forgot its return)
    ok, out = out_of(capsys, exercises.check_wgan_gp(nothing, wgan_gp.reference_train_critic))
    assert not ok and "make_critic returned NoneType, not the critic" in out and "raised" not in out, out


# --- 4 · AMP: one GradScaler, two optimizers ---------------------------------------------------------------------
def amp_broken(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    for p in net_d.parameters():
        p.requires_grad = False
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = net_g(lq)
        l_g_total = F.l1_loss(output, gt) + 0.1 * F.softplus(-net_d(output)).mean()
    optimizer_g.zero_grad()
    scaler.scale(l_g_total).backward()
    optimizer_g.step()
    for p in net_d.parameters():
        p.requires_grad = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        l_d = F.softplus(-net_d(gt)).mean() + F.softplus(net_d(output.detach())).mean()
    optimizer_d.zero_grad()
    scaler.scale(l_d).backward()
    scaler.step(optimizer_d)
    scaler.update()


def amp_two_updates(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """The step fixed, the second update() left in."""
    for p in net_d.parameters():
        p.requires_grad = False
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = net_g(lq)
        l_g_total = F.l1_loss(output, gt) + 0.1 * F.softplus(-net_d(output)).mean()
    optimizer_g.zero_grad()
    scaler.scale(l_g_total).backward()
    scaler.step(optimizer_g)
    scaler.update()
    for p in net_d.parameters():
        p.requires_grad = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        l_d = F.softplus(-net_d(gt)).mean() + F.softplus(net_d(output.detach())).mean()
    optimizer_d.zero_grad()
    scaler.scale(l_d).backward()
    scaler.step(optimizer_d)
    scaler.update()


def amp_inputs(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """backward(inputs=...) in place of the requires_grad flags; D's two terms scaled separately."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = net_g(lq)
        l_g_total = F.l1_loss(output, gt) + 0.1 * F.softplus(-net_d(output)).mean()
    optimizer_g.zero_grad()
    scaler.scale(l_g_total).backward(inputs=list(net_g.parameters()))
    scaler.step(optimizer_g)
    optimizer_d.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        l_d_real = F.softplus(-net_d(gt)).mean()
        l_d_fake = F.softplus(net_d(output.detach())).mean()
    scaler.scale(l_d_real).backward()
    scaler.scale(l_d_fake).backward()
    scaler.step(optimizer_d)
    scaler.update()


def _amp_g_loss(net_g, net_d, lq, gt):
    for p in net_d.parameters():
        p.requires_grad = False
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = net_g(lq)
        l_g_total = F.l1_loss(output, gt) + 0.1 * F.softplus(-net_d(output)).mean()
    for p in net_d.parameters():
        p.requires_grad = True
    return output, l_g_total


def _amp_d_loss(net_d, output, gt):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return F.softplus(-net_d(gt)).mean() + F.softplus(net_d(output.detach())).mean()


def _amp_d_step(net_d, optimizer_d, scaler, output, gt):
    """D's half of a right step: through the one scaler, then the call's one update()."""
    optimizer_d.zero_grad()
    scaler.scale(_amp_d_loss(net_d, output, gt)).backward()
    scaler.step(optimizer_d)
    scaler.update()


def amp_unscale_and_clip(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """Right, written another way: unscale_ first to clip G's gradient, then step through the scaler."""
    output, l_g_total = _amp_g_loss(net_g, net_d, lq, gt)
    optimizer_g.zero_grad(set_to_none=False)
    scaler.scale(l_g_total).backward()
    scaler.unscale_(optimizer_g)
    torch.nn.utils.clip_grad_norm_(net_g.parameters(), max_norm=1e6)
    scaler.step(optimizer_g)
    _amp_d_step(net_d, optimizer_d, scaler, output, gt)


def amp_unscale_then_step(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """G's gradient unscaled by the scaler, then G stepped by hand: right until a gradient is inf."""
    output, l_g_total = _amp_g_loss(net_g, net_d, lq, gt)
    optimizer_g.zero_grad()
    scaler.scale(l_g_total).backward()
    scaler.unscale_(optimizer_g)
    optimizer_g.step()
    _amp_d_step(net_d, optimizer_d, scaler, output, gt)


def amp_divide_by_hand(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    output, l_g_total = _amp_g_loss(net_g, net_d, lq, gt)
    optimizer_g.zero_grad()
    scaler.scale(l_g_total).backward()
    for p in net_g.parameters():
        p.grad /= scaler.get_scale()
    optimizer_g.step()
    _amp_d_step(net_d, optimizer_d, scaler, output, gt)


def amp_no_scaler_for_g(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    output, l_g_total = _amp_g_loss(net_g, net_d, lq, gt)
    optimizer_g.zero_grad()
    l_g_total.backward()
    optimizer_g.step()
    _amp_d_step(net_d, optimizer_d, scaler, output, gt)


def amp_second_scaler():
    """D gets a GradScaler of its own, kept across calls: its steps are right, and the shared scale never learns of
    D's inf."""
    scaler_d = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=1)

    def step(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
        output, l_g_total = _amp_g_loss(net_g, net_d, lq, gt)
        optimizer_g.zero_grad()
        scaler.scale(l_g_total).backward()
        scaler.step(optimizer_g)
        scaler.update()
        optimizer_d.zero_grad()
        scaler_d.scale(_amp_d_loss(net_d, output, gt)).backward()
        scaler_d.step(optimizer_d)
        scaler_d.update()
    return step


def amp_update_between(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """update() moved between the two steps: the same scales while no gradient is inf."""
    output, l_g_total = _amp_g_loss(net_g, net_d, lq, gt)
    optimizer_g.zero_grad()
    scaler.scale(l_g_total).backward()
    scaler.step(optimizer_g)
    scaler.update()
    optimizer_d.zero_grad()
    scaler.scale(_amp_d_loss(net_d, output, gt)).backward()
    scaler.step(optimizer_d)


def test_amp_right_answers_written_differently_pass(capsys):
    for right in (amp.reference_optimize_parameters, amp_inputs, amp_unscale_and_clip):
        ok, out = out_of(capsys, exercises.check_amp_lab(right))
        assert ok and out.startswith("✓") and "skips the call where one of its gradients is inf" in out, out


def test_amp_without_update_is_told_what_the_scaler_s_error_means(capsys):
    no_update = variant(amp.reference_optimize_parameters, drop="scaler.update()")
    ok, out = out_of(capsys, exercises.check_amp_lab(no_update))
    assert not ok and "step() has already been called since the last update()" in out, out
    assert "no scaler.update() came between the two calls" in out and "read the message" not in out, out


def test_amp_gradients_cleared_before_the_scaler_s_step_are_told_what_the_scaler_s_error_means(capsys):
    cleared = variant(amp.reference_optimize_parameters, move=("optimizer_g.zero_grad()", "scaler.step(optimizer_g)"))
    ok, out = out_of(capsys, exercises.check_amp_lab(cleared))
    assert not ok and "No inf checks were recorded for this optimizer" in out, out
    assert "every .grad of that optimizer's parameters was None when it ran" in out and "read the message" not in out


@pytest.mark.parametrize("wrong, words", [
    (amp_unscale_then_step, ["call 3: optimizer_g stepped although one of its gradients was inf",
                             "optimizer_g's weights now hold"]),
    (amp_divide_by_hand, ["call 3: optimizer_g stepped although one of its gradients was inf"]),
    (amp_no_scaler_for_g, ["call 3: optimizer_g stepped although one of its gradients was inf"]),
    (amp_second_scaler(), ["the scale after call 2 is 4096 where the reference's is 1024",
                           "the inf in optimizer_d's gradients at call 2 did not halve the scale the next call uses"]),
    (amp_update_between, ["the scale after call 2 is 4096 where the reference's is 1024"]),
])
def test_amp_wrong_fixes_are_named_by_what_their_step_does(capsys, wrong, words):
    ok, out = out_of(capsys, exercises.check_amp_lab(wrong))
    assert not ok and out.startswith("✗"), out
    for w in words:
        assert w in out, out
    for code in ("scaler.step(", "unscale_(", "GradScaler("):       # what the step did, not the code of a fix
        assert code not in out, out


def amp_d_first(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """D's step before G's: G's loss then goes through the D that has just stepped. In bfloat16 this is 0.29% of
    the largest gradient entry away from the reference, where right answers differ by up to 0.25%."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = net_g(lq)
    _amp_d_step_no_update(net_d, optimizer_d, scaler, output, gt)
    for p in net_d.parameters():
        p.requires_grad = False
    with torch.autocast("cpu", dtype=torch.bfloat16):
        l_g_total = F.l1_loss(output, gt) + 0.1 * F.softplus(-net_d(output)).mean()
    for p in net_d.parameters():
        p.requires_grad = True
    optimizer_g.zero_grad()
    scaler.scale(l_g_total).backward()
    scaler.step(optimizer_g)
    scaler.update()


def _amp_d_step_no_update(net_d, optimizer_d, scaler, output, gt):
    optimizer_d.zero_grad()
    scaler.scale(_amp_d_loss(net_d, output, gt)).backward()
    scaler.step(optimizer_d)


def amp_no_autocast():
    """The reference with its first autocast block run bare (the mutant generator's edit): G's forward and loss in
    float32, within 2e-2 of the bfloat16 reference."""
    from mutants import compiled, mutants
    bare = next(m for m in mutants(amp.reference_optimize_parameters) if m.what.startswith("no torch.autocast"))
    return compiled(amp.reference_optimize_parameters, bare)


def amp_g_never_zeroed(net_g, net_d, optimizer_g, optimizer_d, scaler, lq, gt):
    """No optimizer_g.zero_grad(): the unscaled leftover is 1/2048 of the new gradient until call 3's inf, which then
    stays in G's .grad, so G never steps again."""
    output, l_g_total = _amp_g_loss(net_g, net_d, lq, gt)
    scaler.scale(l_g_total).backward()
    scaler.step(optimizer_g)
    _amp_d_step(net_d, optimizer_d, scaler, output, gt)


@pytest.mark.parametrize("wrong, words", [
    (amp_d_first, ["with autocast switched off", "step 1: optimizer_g stepped on gradients"]),
    (amp_no_autocast(), ["net_g's first layer computed in float32"]),
    (amp_g_never_zeroed, ["call 4: optimizer_g did not step, where the reference's does"]),
])
def test_amp_differences_below_bfloat16s_noise_are_found(capsys, wrong, words):
    ok, out = out_of(capsys, exercises.check_amp_lab(wrong))
    assert not ok and out.startswith("✗"), out
    for w in words:
        assert w in out, out


def test_the_amp_labs_float32_tolerance_sits_well_between_right_answers_and_the_wrong_order():
    """With autocast off, right answers written differently stay 10x below EXACT_ATOL, and D's step first lies 10x
    above it (relative to each step's largest entry)."""
    from gan_lessons.exercises.steps import flat
    lab = grading.LABS["amp"]

    def worst(step):
        mine, ref = lab.run(step)[0], lab.run(amp.reference_optimize_parameters)[0]
        return max(((flat(a) - flat(b)).abs().max() / flat(b).abs().max()).item()
                   for opt in ref for a, b in zip(mine[opt], ref[opt]) if torch.isfinite(flat(b)).all())
    with amp._autocast_off():
        assert all(worst(right) < amp.EXACT_ATOL / 10 for right in (amp_inputs, amp_unscale_and_clip))
        assert worst(amp_d_first) > amp.EXACT_ATOL * 10


def test_the_amp_lab_switches_autocast_off_for_every_way_of_writing_it():
    """torch.autocast, torch.amp.autocast and torch.cpu.amp.autocast, enabled by keyword or by position, all come out
    disabled inside the block, and enabled again after it."""
    import warnings
    makers = [lambda: torch.autocast("cpu", dtype=torch.bfloat16), lambda: torch.amp.autocast("cpu", torch.bfloat16),
              lambda: torch.autocast("cpu", torch.bfloat16, True)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        makers.append(lambda: torch.cpu.amp.autocast(dtype=torch.bfloat16))
        for make in makers:
            with amp._autocast_off(), make():
                assert not torch.is_autocast_enabled("cpu")
            with make():
                assert torch.is_autocast_enabled("cpu")


def test_the_amp_lab_puts_an_inf_into_one_optimizers_gradients_at_calls_2_and_3():
    args, opts, names, state = grading.LABS["amp"].problem()
    for k in range(3):
        torch.manual_seed(100 + k)
        amp.reference_optimize_parameters(*args(k))
    assert state["stepped"] == [(1, "optimizer_g"), (1, "optimizer_d"), (2, "optimizer_g"), (3, "optimizer_d")]
    assert state["scales"] + [state["scaler"].get_scale()] == [1024.0, 2048.0, 1024.0, 512.0]
    assert all(torch.isfinite(p).all() for net in state["nets"].values() for p in net.parameters())


def test_amp(capsys):
    ok, out = out_of(capsys, exercises.check_amp_lab(amp_broken))
    assert not ok and "step 1: optimizer_g stepped on gradients of norm 1.41e+03, where the reference's have norm " \
        "1.37, in the same direction" in out, out
    assert "1024" not in out and "2^10" not in out, out
    for right in (amp.reference_optimize_parameters, amp_inputs):
        ok, out = out_of(capsys, exercises.check_amp_lab(right))
        assert ok and out.startswith("✓"), out
    ok, out = out_of(capsys, exercises.check_amp_lab(amp_two_updates))
    assert not ok and "the scale after call 1 is 4096 where the reference's is 2048: in that call it went from 1024 " \
        "to 4096" in out, out
    ok, out = out_of(capsys, exercises.check_amp_lab(stub))
    assert not ok and "not solved yet" in out


# --- 5 · a hidden state carried across batches -------------------------------------------------------------------
def rnn_broken(rnn, optimizer, loss_func, steps):
    h_state = None
    for step in range(steps):
        t = torch.linspace(step * math.pi, (step + 1) * math.pi, 10)
        prediction, h_state = rnn(torch.sin(t).view(1, 10, 1), h_state)
        loss = loss_func(prediction, torch.cos(t).view(1, 10, 1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def rnn_retain_graph(rnn, optimizer, loss_func, steps):
    h_state = None
    for step in range(steps):
        t = torch.linspace(step * math.pi, (step + 1) * math.pi, 10)
        prediction, h_state = rnn(torch.sin(t).view(1, 10, 1), h_state)
        loss = loss_func(prediction, torch.cos(t).view(1, 10, 1))
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()


def rnn_data(rnn, optimizer, loss_func, steps):
    """The tutorial's own line: h_state = h_state.data."""
    h_state = None
    for step in range(steps):
        start, end = step * math.pi, (step + 1) * math.pi
        t = torch.linspace(start, end, 10)
        prediction, h_state = rnn(torch.sin(t).view(1, 10, 1), h_state)
        h_state = h_state.data
        loss = loss_func(prediction, torch.cos(t).view(1, 10, 1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def rnn_detach_before_use(rnn, optimizer, loss_func, steps):
    """A third right answer: the state cut where it goes in, not where it comes out."""
    h_state = None
    for step in range(steps):
        t = torch.linspace(step * math.pi, (step + 1) * math.pi, 10)
        h_in = None if h_state is None else h_state.detach()
        prediction, h_state = rnn(torch.sin(t).view(1, 10, 1), h_in)
        loss = loss_func(prediction, torch.cos(t).view(1, 10, 1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_rnn(capsys):
    ok, out = out_of(capsys, exercises.check_rnn_train(rnn_broken))
    assert not ok and "backward through the graph a second time" in out, out
    for right in (rnn.reference_rnn_train, rnn_data, rnn_detach_before_use):
        ok, out = out_of(capsys, exercises.check_rnn_train(right))
        assert ok and out.startswith("✓"), out
    ok, out = out_of(capsys, exercises.check_rnn_train(rnn_retain_graph))
    assert not ok and "modified by an inplace operation" in out, out
    ok, out = out_of(capsys, exercises.check_rnn_train(rnn._rnn_reset))
    assert not ok and "step 2: optimizer stepped on gradients" in out and "starts afresh at every step" in out, out
    ok, out = out_of(capsys, exercises.check_rnn_train(stub))
    assert not ok and "not solved yet" in out


# --- 6 · a penalty through a compiled D, an EMA of a compiled G --------------------------------------------------
def compiled_broken(G, D, opt_G, opt_D, ema, x_real, z, r1_gamma=10.0):
    x_fake = G(z)
    x_real = x_real.detach().requires_grad_(True)
    real_pred = D(x_real)
    grad_real, = torch.autograd.grad(real_pred.sum(), x_real, create_graph=True)
    r1 = grad_real.pow(2).sum(1).mean()
    loss_D = F.softplus(-real_pred).mean() + F.softplus(D(x_fake.detach())).mean() + r1_gamma / 2 * r1
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    loss_G = F.softplus(-D(x_fake)).mean()
    opt_G.zero_grad()
    loss_G.backward()
    opt_G.step()
    ema.update(G)


def compiled_ema_left(G, D, opt_G, opt_D, ema, x_real, z, r1_gamma=10.0):
    """The penalty fixed, the EMA still fed the compiled G."""
    compiled.reference_compiled_step(G, D, opt_G, opt_D, compiled.EMA(nn.Linear(1, 1)), x_real, z, r1_gamma)
    ema.update(G)


def compiled_separate(G, D, opt_G, opt_D, ema, x_real, z, r1_gamma=10.0):
    """The penalty on its own backward, the EMA by names with the prefix stripped."""
    x_fake = G(z)
    opt_D.zero_grad()
    (F.softplus(-D(x_real)).mean() + F.softplus(D(x_fake.detach())).mean()).backward()
    x = x_real.clone().requires_grad_(True)
    g, = torch.autograd.grad(D._orig_mod(x).sum(), x, create_graph=True)
    (r1_gamma / 2 * (g ** 2).sum(1).mean()).backward()
    opt_D.step()
    opt_G.zero_grad()
    F.softplus(-D(x_fake)).mean().backward()
    opt_G.step()
    with torch.no_grad():
        for name, p in G.named_parameters():
            ema.shadow[name.removeprefix("_orig_mod.")].lerp_(p, 1 - ema.decay)


def compiled_eager_penalty_with_ema_map(G, D, opt_G, opt_D, ema, x_real, z, r1_gamma=10.0):
    """A third right answer: the penalty through D._orig_mod in the same loss, and the EMA updated from G._orig_mod."""
    x_fake = G(z)
    x = x_real.detach().requires_grad_(True)
    pred = D._orig_mod(x)
    g, = torch.autograd.grad(pred.sum(), x, create_graph=True)
    loss_D = F.softplus(-pred).mean() + F.softplus(D(x_fake.detach())).mean() + r1_gamma / 2 * g.pow(2).sum(1).mean()
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    F.softplus(-D(x_fake)).mean().backward()
    opt_G.step()
    ema.update(G._orig_mod)


def compiled_no_create_graph_alone(G, D, opt_G, opt_D, ema, x_real, z, r1_gamma=10.0):
    """The likeliest first try: create_graph=True dropped, nothing else changed."""
    x_fake = G(z)
    x_real = x_real.detach().requires_grad_(True)
    real_pred = D(x_real)
    grad_real, = torch.autograd.grad(real_pred.sum(), x_real)
    r1 = grad_real.pow(2).sum(1).mean()
    loss_D = F.softplus(-real_pred).mean() + F.softplus(D(x_fake.detach())).mean() + r1_gamma / 2 * r1
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()


def test_compiled_names_the_graph_autograd_grad_freed(capsys):
    ok, out = out_of(capsys, exercises.check_compiled_step(compiled_no_create_graph_alone))
    assert not ok and "autograd.grad went back through D's output on the real batch and freed" in out, out
    assert "detach the shared tensor" not in out, out


def test_compiled(capsys):
    ok, out = out_of(capsys, exercises.check_compiled_step(compiled_broken))
    assert not ok and "does not currently support double backward" in out and "AOT backend" in out
    assert "D._orig_mod" not in out, out                                  # the cause, not the fix's code
    for right in (compiled.reference_compiled_step, compiled_separate, compiled_eager_penalty_with_ema_map):
        ok, out = out_of(capsys, exercises.check_compiled_step(right))
        assert ok and out.startswith("✓"), out
    ok, out = out_of(capsys, exercises.check_compiled_step(compiled._compiled_no_create_graph))
    assert not ok and "step 1: opt_D stepped on gradients" in out and "trains nothing" in out, out
    assert "_orig_mod" not in out, out
    ok, out = out_of(capsys, exercises.check_compiled_step(compiled_ema_left))
    assert not ok and "still the initial ones" in out and "`_orig_mod.0.weight`" in out, out
    assert "G._orig_mod" not in out, out
    ok, out = out_of(capsys, exercises.check_compiled_step(stub))
    assert not ok and "not solved yet" in out


@pytest.mark.parametrize("check", ["check_srgan_step", "check_biggan_train", "check_amp_lab", "check_rnn_train",
                                   "check_compiled_step"])
def test_unanswered(capsys, check):
    ok, out = out_of(capsys, getattr(exercises, check)(...))
    assert not ok and "not solved yet" in out


# --- the lab as diagnosis: nothing before a grader names the bug, no message prints the fix ---------------------------------
LABS_IN_ORDER = [("srgan", srgan), ("biggan", biggan), ("wgan_gp", wgan_gp), ("amp", amp), ("rnn", rnn),
                 ("compiled", compiled)]


def _comments_and_docstrings(source: str) -> str:
    """A code cell's comments and docstrings: what a student reads in it besides the code."""
    import ast
    import io
    import tokenize
    parts = []
    try:
        parts += [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
        parts += [ast.get_docstring(n) or "" for n in ast.walk(ast.parse(source))
                  if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Module))]
    except (SyntaxError, tokenize.TokenError):
        parts += [line for line in source.splitlines() if line.lstrip().startswith("#")]
    return "\n".join(parts)


def _outputs(cell) -> str:
    return "\n".join(o.get("text", "") if o.get("output_type") == "stream" else
                     (o.get("data") or {}).get("text/plain", "") for o in cell.get("outputs", []))


def _before_each_grader(answered, copy):
    """For each lab, in order: (name, module, what a student sees before that lab's grader passes): the lesson's
    opening and the lab's cells up to its grader: from the student copy, the markdown and the comments and docstrings
    of the code (the broken step's and the stub's); from the answered lesson, every output there (the broken step
    run, the grader on it, each prediction's explanation)."""
    from pathlib import Path

    import nbformat
    root = Path(__file__).resolve().parents[2]
    lesson = nbformat.read(root / answered, as_version=4).cells
    student = nbformat.read(root / copy, as_version=4).cells

    def graders(cells):
        return [i for i, c in enumerate(cells) if c.cell_type == "code" and "my_answer" in c.source
                and "exercises.check_" in c.source]

    def opening(cells):
        return next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## 1 ·"))
    seen = []
    for cells, with_outputs in ((student, False), (lesson, True)):
        ends = graders(cells)
        assert len(ends) == len(LABS_IN_ORDER), ends
        start, texts = 0, []
        for end in ends:
            chosen = [c for a, b in ((0, opening(cells)), (start, end)) for c in cells[a:b]]
            if with_outputs:        # the answered lesson: its outputs (its markdown is placed for a reader, not a student)
                text = [_outputs(c) for c in chosen if c.cell_type == "code"]
            else:
                text = [c.source if c.cell_type == "markdown" else _comments_and_docstrings(c.source) for c in chosen]
            texts.append("\n".join(text).lower())
            start = end + 1
        seen.append(texts)
    return [(name, module, a + "\n" + b) for (name, module), a, b in zip(LABS_IN_ORDER, *seen)]


@pytest.mark.parametrize("answered, copy", [("notebooks/13_debugging_lab.ipynb", "notebooks/student/13_debugging_lab.ipynb"),
                                            ("notebooks/zh/13_debugging_lab.ipynb",
                                             "notebooks/zh/student/13_debugging_lab.ipynb")], ids=["en", "zh"])
def test_nothing_a_student_sees_before_a_grader_passes_names_the_bug_or_its_fix(answered, copy):
    """Markdown, the code's comments and docstrings, and every output (the broken step's error, the grader's lines
    on it, each prediction's explanation), from the lesson's opening to each lab's grader: none of that lab's TELLS,
    nor the code of its fix."""
    for name, module, text in _before_each_grader(answered, copy):
        said = [w for w in module.TELLS + module.FIX_CODE if w.lower() in text]
        assert not said, f"{answered}: before lab {name}'s grader, a student sees {said}"


def test_the_giveaway_check_reads_outputs_and_docstrings(monkeypatch):
    """The words a grader used to print on BigGAN's broken step, and the AMP stub's old docstring, are caught."""
    assert "still held" in biggan.TELLS and "update() per" in amp.TELLS
    assert "update() per" in _comments_and_docstrings('def f():\n    """one scaler, one update() per call."""\n')
    cell = {"outputs": [{"output_type": "stream", "text": "step 2: D.optim ... which its .grad still held"}]}
    assert "still held" in _outputs(cell)


def _wrong_answers():
    """Every broken or wrong step this file runs, by lab, as (checker, arguments)."""
    return {
        "srgan": [(exercises.check_srgan_step, (f,)) for f in
                  (srgan_broken, srgan_detached_g, srgan_constant_label, srgan_g_first_frozen, srgan_wasted_backward,
                   srgan._srgan_both_steps_last, srgan._srgan_g_through_old_d, srgan._srgan_no_adversarial,
                   srgan._srgan_g_first)],
        "biggan": [(exercises.check_biggan_train, (f,)) for f in (biggan_broken, biggan._biggan_zero_in_accumulation)],
        "wgan_gp": [(exercises.check_wgan_gp, pair) for pair in
                    ((broken_make_critic, broken_train_critic), (wgan_gp.reference_make_critic, broken_train_critic),
                     (wgan_gp.reference_make_critic, train_critic_no_create_graph))],
        "amp": [(exercises.check_amp_lab, (f,)) for f in
                (amp_broken, amp_two_updates, amp_unscale_then_step, amp_divide_by_hand, amp_no_scaler_for_g,
                 amp_update_between)],
        "rnn": [(exercises.check_rnn_train, (f,)) for f in (rnn_broken, rnn_retain_graph)],
        "compiled": [(exercises.check_compiled_step, (f,)) for f in
                     (compiled_broken, compiled_ema_left, compiled._compiled_no_create_graph)],
    }


@pytest.mark.parametrize("name, module", LABS_IN_ORDER, ids=[n for n, _ in LABS_IN_ORDER])
def test_no_grader_message_prints_the_fix(capsys, name, module):
    for check, args in _wrong_answers()[name]:
        ok, out = out_of(capsys, check(*args))
        assert not ok, (name, args)
        printed = [code for code in module.FIX_CODE if code in out]
        assert not printed, f"{name}: the grader printed the fix's code {printed}: {out}"


# --- the training log a silent lab opens with -----------------------------------------------------------------------
def test_the_training_log_holds_each_loss_a_backward_starts_from_unscaled_and_the_scale(capsys):
    """The AMP step as written: the same losses as the fix at first (Adam hides the scale), the scale after call 3
    differs (G stepped around the scaler, so the inf in G's gradient at call 3 halved nothing), and at call 4 the
    losses are nan (G stepped on that inf). Each loss is unscaled: the value loss.item() prints, not 1024 times it."""
    import math

    from gan_lessons.exercises.lesson13 import reference_log, training_log
    mine = training_log("amp", amp_broken)
    ref = reference_log("amp")
    assert [len(c) for c in mine.losses] == [2, 2, 2, 2] and all(0 < v < 5 for c in mine.losses[:3] for v in c), mine
    assert all(math.isnan(v) for v in mine.losses[3]) and all(0 < v < 5 for c in ref.losses for v in c), mine
    assert mine.losses[0] == pytest.approx(ref.losses[0])
    assert ref.scales == [2048.0, 1024.0, 512.0, 1024.0] and mine.scales[2] != ref.scales[2], (mine.scales, ref.scales)


def test_the_training_log_signs_a_loss_backed_from_with_a_gradient_and_records_an_error(capsys):
    """WGAN-GP's d_loss_real.backward(mone) backs from -D(real): the log shows that value; a step that raises is
    logged up to the call that raised."""
    from gan_lessons.exercises.lesson13 import show_log, training_log
    from gan_lessons.exercises.lesson13.wgan_gp import reference_make_critic

    def only_real(D, G, d_optimizer, images, z, eta, lambda_term=10):
        D.zero_grad()
        D(images).mean().backward(torch.tensor(-1.0))
        with torch.no_grad():
            expected.append(-D(images).mean().item())
        d_optimizer.step()
        if len(expected) == 2:
            raise RuntimeError("stop")
    expected = []
    log = training_log("wgan_gp", only_real, reference_make_critic)
    assert [c[0] for c in log.losses] == pytest.approx(expected, rel=1e-5)
    assert log.error == "RuntimeError at call 2" and len(log.losses) == 2
    expected.clear()
    show_log("wgan_gp", only_real, reference_make_critic)
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["call", "backward", "as", "written", "reference", "fix"]
    assert "the step as written raised RuntimeError at call 2" in out
