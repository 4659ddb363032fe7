"""Figures from real runs: sample grids, the progress GIF, loss and FID curves (lesson 06, tools/make_images.py),
and the font that draws their labels in the language in use."""
import subprocess
import sys

import matplotlib.pyplot as plt
from matplotlib import font_manager, ticker
from PIL import Image

from gan_lessons import import_torchvision
from gan_lessons.files import atomic_write  # every file is written whole or not at all
from gan_lessons.i18n import _, language

# Fonts with Chinese glyphs, the first one found wins: Debian's and conda-forge's Noto CJK, Adobe's Source Han,
# WenQuanYi, and what Windows and macOS ship.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
             "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Microsoft YaHei", "SimHei", "PingFang SC", "Heiti SC")
COLAB_FONT = "apt-get install -y -qq fonts-noto-cjk"


def cjk_fonts() -> list:
    """The CJK font families matplotlib can use, in CJK_FONTS's order. Fonts installed after matplotlib built its
    font cache (e.g. `apt-get install fonts-noto-cjk` in a running session) are added from the system's folders."""
    def known():
        return {f.name for f in font_manager.fontManager.ttflist}
    if not any(name in known() for name in CJK_FONTS):
        for path in font_manager.findSystemFonts():
            if any(word in path for word in ("CJK", "SourceHan", "wqy", "msyh", "simhei", "PingFang")):
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):
                    continue
    have = known()
    return [name for name in CJK_FONTS if name in have]


def use_language_font() -> str:
    """For Chinese, put a CJK font first in matplotlib's sans-serif list (on Colab, install Noto CJK when none is
    there). Returns "" when figures will draw, else one line saying how to get a font."""
    if language() != "zh":
        return ""
    found = cjk_fonts()
    if not found and "google.colab" in sys.modules:
        subprocess.run(COLAB_FONT.split(), capture_output=True, check=False)
        found = cjk_fonts()
    if not found:
        return _("No font with Chinese glyphs was found, so Chinese labels in figures would show as boxes. Install "
                 "one (Debian/Ubuntu: sudo apt-get install fonts-noto-cjk; conda: conda install -c conda-forge "
                 "font-ttf-noto-cjk; Colab: !{command}) and run the setup cell again.").format(command=COLAB_FONT)
    plt.rcParams["font.sans-serif"] = [*found, *[f for f in plt.rcParams["font.sans-serif"] if f not in found]]
    plt.rcParams["font.family"] = "sans-serif"
    plt.rcParams["axes.unicode_minus"] = False       # CJK fonts often lack U+2212, the minus sign of tick labels
    return ""


def save_grid(images, path, nrow=8):
    """Images in [-1, 1] as one PNG grid."""
    save_image = import_torchvision().utils.save_image
    atomic_write(path, lambda tmp: save_image(images, tmp, format="png", nrow=nrow, normalize=True,
                                              value_range=(-1, 1), padding=2))


def grid_array(images, nrow=8):
    """The same grid as an HxWx3 uint8 array, for imshow."""
    grid = import_torchvision().utils.make_grid(images, nrow=nrow, normalize=True, value_range=(-1, 1), padding=2)
    return (grid.permute(1, 2, 0) * 255).round().byte().cpu().numpy()


def save_gif(grid_paths, path, ms_per_frame=400):
    frames = [Image.open(p).convert("P") for p in grid_paths]
    if frames:
        atomic_write(path, lambda tmp: frames[0].save(tmp, format="GIF", save_all=True, append_images=frames[1:],
                                                      duration=ms_per_frame, loop=0))


def loss_figure(curves: dict, title=None):
    """curves: {label: history}, history as written by the trainer (list of dicts with loss_D, loss_G)."""
    fig, ax = plt.subplots(figsize=(6, 3))
    title = _("losses per epoch") if title is None else title
    for label, history in curves.items():
        epochs = [h["epoch"] for h in history]
        ax.plot(epochs, [h["loss_D"] for h in history], label=f"{label} loss_D")
        ax.plot(epochs, [h["loss_G"] for h in history], "--", label=f"{label} loss_G")
    ax.set_xlabel(_("epoch"))
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_losses(history, path):
    fig = loss_figure({"": history})
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    plt.close(fig)


def fid_figure(curves: dict, title=None):
    """curves: {label: per-epoch scores}, as `train --eval-each N` records them (list of dicts with mnist_fid)."""
    fig, ax = plt.subplots(figsize=(6, 3))
    title = _("MNIST-FID after each epoch") if title is None else title
    for label, scores in curves.items():
        ax.plot([e["epoch"] for e in scores], [e["mnist_fid"] for e in scores], marker=".", label=label)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_yticks([10, 20, 50, 100, 200, 500, 1000])
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_xlabel(_("epoch"))
    ax.set_ylabel(_("MNIST-FID (log scale)"))
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
