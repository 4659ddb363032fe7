"""Seven ways to order one GAN training step (lesson 05), and WGAN-GP. Each is one plain function:
step(G, D, opt_G, opt_D, x_real, noise) -> (loss_D, loss_G), where noise(n) draws z.
D returns logits; in the seven, both losses are the non-saturating BCE-with-logits GAN losses. wgan_gp reads D's
output as a critic's score instead, with Wasserstein losses and a gradient penalty (gradient_penalty, r1_penalty)."""
import torch
import torch.nn.functional as F

from gan_lessons.i18n import _


def bce(logits, target: float):
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, target))


def retain_graph_seed003(G, D, opt_G, opt_D, x_real, noise):
    """1. Seed 003's "strategy 1": one forward, D steps, then G backpropagates through D's old graph.
    Raises the version error on torch >= 1.5 (before that: wrong gradients, silently)."""
    x_fake = G(noise(len(x_real)))
    logits_fake, logits_real = D(x_fake), D(x_real)
    opt_D.zero_grad()
    loss_D = (bce(logits_real, 1) + bce(logits_fake, 0)) / 2
    loss_D.backward(retain_graph=True)       # also fills G's grads, and keeps the graph
    opt_D.step()                             # D's weights change in place: the saved ones go stale
    opt_G.zero_grad()
    loss_G = bce(logits_fake, 1)
    loss_G.backward()                        # through D's stale graph: RuntimeError
    opt_G.step()
    return loss_D, loss_G


def one_forward(G, D, opt_G, opt_D, x_real, noise):
    """2. One forward, done correctly: G's gradients are taken through D *before* D steps.
    A different algorithm ("simultaneous"): G answers the D it was scored by, not the updated one."""
    x_fake = G(noise(len(x_real)))
    logits_fake, logits_real = D(x_fake), D(x_real)
    loss_D = (bce(logits_real, 1) + bce(logits_fake, 0)) / 2
    loss_G = bce(logits_fake, 1)
    opt_G.zero_grad()
    opt_D.zero_grad()
    loss_G.backward(inputs=list(G.parameters()), retain_graph=True)   # G's grads only
    loss_D.backward(inputs=list(D.parameters()))                      # D's grads only
    opt_D.step()
    opt_G.step()
    return loss_D, loss_G


def d_first_reuse_fake(G, D, opt_G, opt_D, x_real, noise):
    """3. D first on G(z).detach(), then G through the updated D on the same fake batch
    (the PyTorch DCGAN tutorial's order)."""
    x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake.detach()), 0)) / 2     # detach: D's loss must not reach G
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    loss_G = bce(D(x_fake), 1)                                        # a new D forward, with D's new weights
    loss_G.backward()
    opt_G.step()
    return loss_D, loss_G


def g_first(G, D, opt_G, opt_D, x_real, noise):
    """4. G first, then D on the detached fake (seed 003's "strategy 3", PyTorch-GAN's order)."""
    x_fake = G(noise(len(x_real)))
    opt_G.zero_grad()
    loss_G = bce(D(x_fake), 1)
    loss_G.backward()                        # also fills D's grads: cleared just below
    opt_G.step()
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake.detach()), 0)) / 2
    loss_D.backward()
    opt_D.step()
    return loss_D, loss_G


def d_first_fresh_fake(G, D, opt_G, opt_D, x_real, noise):
    """5. D first on a fake made without a graph, then a fresh G forward for G's step
    (seed 000's fix; d2l's order, which detaches where this uses no_grad)."""
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake), 0)) / 2
    loss_D.backward()
    opt_D.step()
    opt_G.zero_grad()
    loss_G = bce(D(G(noise(len(x_real)))), 1)
    loss_G.backward()
    opt_G.step()
    return loss_D, loss_G


def d_first_frozen_D(G, D, opt_G, opt_D, x_real, noise):
    """6. d_first_reuse_fake with D frozen during G's step (pix2pix's and CycleGAN's order, with their
    set_requires_grad): G's backward still goes through D, but computes no gradient for D's parameters."""
    x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake.detach()), 0)) / 2
    loss_D.backward()
    opt_D.step()
    D.requires_grad_(False)                  # frozen: D's weights are constants for G's step
    opt_G.zero_grad()
    loss_G = bce(D(x_fake), 1)
    loss_G.backward()
    opt_G.step()
    D.requires_grad_(True)
    return loss_D, loss_G


def g_first_inputs(G, D, opt_G, opt_D, x_real, noise):
    """7. g_first, with G's backward limited to G's parameters (backward(inputs=...)): no wasted D gradient."""
    x_fake = G(noise(len(x_real)))
    opt_G.zero_grad()
    loss_G = bce(D(x_fake), 1)
    loss_G.backward(inputs=list(G.parameters()))   # D's .grad is not touched
    opt_G.step()
    opt_D.zero_grad()
    loss_D = (bce(D(x_real), 1) + bce(D(x_fake.detach()), 0)) / 2
    loss_D.backward()
    opt_D.step()
    return loss_D, loss_G


def gradient_penalty(D, x_real, x_fake, eps=None):
    """WGAN-GP's penalty: the batch mean of (||grad_x D(x_hat)||_2 - 1)^2, at x_hat = eps * x_real + (1 - eps) * x_fake,
    one eps ~ U[0, 1] per sample (a point on the line between a real and a fake image)."""
    if eps is None:
        eps = torch.rand(len(x_real), device=x_real.device, dtype=x_real.dtype)
    eps = eps.reshape(-1, *[1] * (x_real.dim() - 1))                  # one eps per sample, over all its pixels
    x_hat = (eps * x_real + (1 - eps) * x_fake.detach()).requires_grad_(True)     # a leaf: grad_x is taken w.r.t. it
    out = D(x_hat)
    # create_graph=True: the gradient keeps a graph back to D's weights; without it the penalty is a constant
    grad, = torch.autograd.grad(outputs=out, inputs=x_hat, grad_outputs=torch.ones_like(out), create_graph=True)
    return ((grad.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def r1_penalty(D, x_real):
    """StyleGAN's R1: the batch mean of ||grad_x D(x_real)||^2 (weight 1: gamma / 2 is the caller's)."""
    x_real = x_real.detach().requires_grad_(True)
    out = D(x_real)
    # create_graph=True, as in gradient_penalty: without it the penalty is a constant that trains nothing
    grad, = torch.autograd.grad(outputs=out, inputs=x_real, grad_outputs=torch.ones_like(out), create_graph=True)
    return grad.flatten(1).pow(2).sum(1).mean()


def wgan_gp(G, D, opt_G, opt_D, x_real, noise, n_critic=5, gp_weight=10.0):
    """8. WGAN-GP (Gulrajani et al., 2017): D is a critic, its output a score (no sigmoid, no BCE). One critic step
    per call, on this batch; G steps once every n_critic calls, after the critic step whose count is a multiple of
    n_critic. The count is opt_D's own (Adam's "step" for D's first parameter), so the cadence survives a checkpoint
    and resume, which saves optimizer state (an optimizer that counts no steps, like SGD, cannot be used here).
    G's step freezes D (requires_grad_(False)) rather than backward(inputs=G's parameters): the same G gradient, but
    D's forward then saves less (its Linear layers keep no inputs for D's weight gradients). On the calls without a
    G step, loss_G is -D(x_fake).mean() from the critic's forward (D before its step), detached: free, no extra
    forward.
    The penalty is per sample, which is valid because this D has no BatchNorm (it would mix a batch's samples)."""
    with torch.no_grad():
        x_fake = G(noise(len(x_real)))
    opt_D.zero_grad()
    score_fake = D(x_fake).mean()
    loss_D = score_fake - D(x_real).mean() + gp_weight * gradient_penalty(D, x_real, x_fake)
    loss_D.backward()
    opt_D.step()
    critic_steps = int(opt_D.state[next(D.parameters())]["step"])     # Adam's own count, kept in checkpoints
    if critic_steps % n_critic:
        return loss_D, -score_fake.detach()
    D.requires_grad_(False)                  # frozen: D's weights are constants for G's step
    opt_G.zero_grad()
    loss_G = -D(G(noise(len(x_real)))).mean()
    loss_G.backward()
    opt_G.step()
    D.requires_grad_(True)
    return loss_D, loss_G


STRATEGIES = {
    "retain_graph_seed003": retain_graph_seed003,
    "one_forward": one_forward,
    "d_first_reuse_fake": d_first_reuse_fake,
    "g_first": g_first,
    "d_first_fresh_fake": d_first_fresh_fake,
    "d_first_frozen_D": d_first_frozen_D,
    "g_first_inputs": g_first_inputs,
}
# Not an order of the same two losses, but another loss: lesson 08, and `train --strategy wgan_gp`.
ALL = {**STRATEGIES, "wgan_gp": wgan_gp}


def get(name: str):
    """The strategy function called `name`."""
    if name not in ALL:
        raise ValueError(_("unknown strategy {name}; choose one of: {names}").format(name=repr(name), names=", ".join(ALL)))
    return ALL[name]
