"""What a user would otherwise run: a DCGAN-tutorial-style loop over torchvision's MNIST with a DataLoader, the usual
transforms (ToTensor, Normalize to [-1, 1]), shuffling and worker processes, training the same G and D with the same
strategy as `python -m gan_lessons train`. benchmarks/bench.py times it beside the trainer.

    python benchmarks/dcgan_style.py --steps 200 --workers 2"""
import argparse
import time

import torch
from torch.utils.data import DataLoader

# isort: off
from gan_lessons import data, strategies        # first: it makes torchvision importable on a CPU torch build
from gan_lessons.models import Discriminator, Generator
from torchvision import datasets, transforms
# isort: on


def make_loader(root=data.DEFAULT_ROOT, batch_size=64, workers=2, limit=None):
    data.load_mnist(root)                                   # the IDX files, fetched (or checked) as the trainer does
    mnist = datasets.MNIST(root, train=True, download=False,
                           transform=transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))]))
    if limit:
        mnist = torch.utils.data.Subset(mnist, range(limit))   # the first `limit` images, as the trainer's --limit
    return DataLoader(mnist, batch_size=batch_size, shuffle=True, num_workers=workers, drop_last=True,
                      persistent_workers=workers > 0)


def make_gan(z_dim=64, seed=0, lr=2e-4, betas=(0.5, 0.999), device="cpu"):
    torch.manual_seed(seed)
    G, D = Generator(z_dim, tanh=True).to(device), Discriminator().to(device)
    return G, D, torch.optim.Adam(G.parameters(), lr=lr, betas=betas), torch.optim.Adam(D.parameters(), lr=lr, betas=betas)


def batches(loader):
    """Batches forever, epoch after epoch (labels dropped)."""
    while True:
        for x_real, _ in loader:
            yield x_real


def train_steps(gan, stream, steps, strategy="d_first_reuse_fake", z_dim=64):
    G, D, opt_G, opt_D = gan
    device = next(G.parameters()).device
    step = strategies.get(strategy)
    noise = lambda n: torch.randn(n, z_dim, device=device)   # noqa: E731
    for _ in range(steps):
        x_real = next(stream).to(device, non_blocking=True)  # the tutorial's copy of each batch to the GPU
        loss_D, loss_G = step(G, D, opt_G, opt_D, x_real, noise)
    return loss_D.item(), loss_G.item()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args()
    stream, gan = batches(make_loader(workers=a.workers)), make_gan()
    t0 = time.perf_counter()
    losses = train_steps(gan, stream, a.steps)
    seconds = time.perf_counter() - t0
    print(f"{a.steps} steps in {seconds:.1f} s ({a.steps * 64 / seconds:.0f} images/s); last losses {losses}")


if __name__ == "__main__":
    main()
