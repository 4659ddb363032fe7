"""Figures from real runs: sample grids, the progress GIF, loss and FID curves (lesson 06, tools/make_images.py)."""

import matplotlib.pyplot as plt
from matplotlib import ticker
from PIL import Image
from torchvision.utils import make_grid, save_image

from gan_lessons.files import atomic_write     # every file is written whole or not at all


def save_grid(images, path, nrow=8):
    """Images in [-1, 1] as one PNG grid."""
    atomic_write(path, lambda tmp: save_image(images, tmp, format="png", nrow=nrow, normalize=True,
                                              value_range=(-1, 1), padding=2))


def grid_array(images, nrow=8):
    """The same grid as an HxWx3 uint8 array, for imshow."""
    grid = make_grid(images, nrow=nrow, normalize=True, value_range=(-1, 1), padding=2)
    return (grid.permute(1, 2, 0) * 255).round().byte().cpu().numpy()


def save_gif(grid_paths, path, ms_per_frame=400):
    frames = [Image.open(p).convert("P") for p in grid_paths]
    if frames:
        atomic_write(path, lambda tmp: frames[0].save(tmp, format="GIF", save_all=True, append_images=frames[1:],
                                                      duration=ms_per_frame, loop=0))


def loss_figure(curves: dict, title="losses per epoch"):
    """curves: {label: history}, history as written by the trainer (list of dicts with loss_D, loss_G)."""
    fig, ax = plt.subplots(figsize=(6, 3))
    for label, history in curves.items():
        epochs = [h["epoch"] for h in history]
        ax.plot(epochs, [h["loss_D"] for h in history], label=f"{label} loss_D")
        ax.plot(epochs, [h["loss_G"] for h in history], "--", label=f"{label} loss_G")
    ax.set_xlabel("epoch")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_losses(history, path):
    fig = loss_figure({"": history})
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    plt.close(fig)


def fid_figure(curves: dict, title="MNIST-FID after each epoch"):
    """curves: {label: per-epoch scores}, as `train --eval-each N` records them (list of dicts with mnist_fid)."""
    fig, ax = plt.subplots(figsize=(6, 3))
    for label, scores in curves.items():
        ax.plot([e["epoch"] for e in scores], [e["mnist_fid"] for e in scores], marker=".", label=label)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_yticks([10, 20, 50, 100, 200, 500, 1000])
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("MNIST-FID (log scale)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
