"""Seven ways to order one GAN training step (lesson 05). Each is one plain function:
step(G, D, opt_G, opt_D, x_real, noise) -> (loss_D, loss_G), where noise(n) draws z.
D returns logits; both losses are the non-saturating BCE-with-logits GAN losses."""
import torch
import torch.nn.functional as F


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


STRATEGIES = {
    "retain_graph_seed003": retain_graph_seed003,
    "one_forward": one_forward,
    "d_first_reuse_fake": d_first_reuse_fake,
    "g_first": g_first,
    "d_first_fresh_fake": d_first_fresh_fake,
    "d_first_frozen_D": d_first_frozen_D,
    "g_first_inputs": g_first_inputs,
}


def get(name: str):
    """The strategy function called `name`."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}")
    return STRATEGIES[name]
