"""Regenerate images/ from real runs: python tools/make_images.py RUN_FOLDER

RUN_FOLDER is a folder written by `python -m gan_lessons train` (grids, losses, last.pt). The strategy-comparison
plot is measured afresh with gan_lessons.costs on seed 000's models. The FID-per-epoch plot comes from the records
of the two shipped generators (gan_lessons/assets/generator.json and generator_no_tanh.json)."""
import json
import shutil
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from gan_lessons import costs, metrics, plots, strategies, training

IMAGES = Path(__file__).resolve().parents[1] / "images"


def strategy_plot(path):
    names = [n for n in strategies.STRATEGIES if n != "retain_graph_seed003"]
    results = []
    for name in names:
        results.append(costs.measure(name, *costs.fresh_gan(), steps=3))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.2))
    x = range(len(names))
    for k, (field, label) in enumerate([("G_forward", "G fwd"), ("D_forward", "D fwd"),
                                        ("G_grad_passes", "G grad passes"), ("D_grad_passes", "D grad passes")]):
        ax1.bar([i + 0.2 * k - 0.3 for i in x], [getattr(c, field) for c in results], width=0.2, label=label)
    ax1.set_xticks(list(x), names, rotation=15, fontsize=8)
    ax1.set_title("passes per step (counted with hooks)")
    ax1.set_ylim(0, 4.2)
    ax1.legend(fontsize=7, ncol=4, loc="upper center")
    ax2.bar(list(x), [c.peak_mib for c in results], color="gray")
    ax2.set_xticks(list(x), names, rotation=15, fontsize=8)
    ax2.set_title(f"peak MiB ({results[0].memory}), batch 64", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(run):
    run = Path(run)
    grids = sorted(run.glob("grid_*.png"))
    shutil.copy(grids[-1], IMAGES / "samples.png")
    plots.save_gif(grids, IMAGES / "progress.gif")
    plots.save_losses(training.load_checkpoint(run / "last.pt")["history"], IMAGES / "losses.png")
    strategy_plot(IMAGES / "strategies.png")
    records = {label: json.loads((metrics.ASSETS / f"{stem}.json").read_text()) for label, stem in
               (("with Tanh (default)", "generator"), ("seed 000's G as written (--no-tanh)", "generator_no_tanh"))}
    fig = plots.fid_figure({label: r["eval_each_epoch"] for label, r in records.items()},
                           title="MNIST-FID after each epoch (2,000 samples), 2 CPU cores")
    fig.savefig(IMAGES / "tanh_fid.png", dpi=100)
    plt.close(fig)
    print("wrote", *sorted(p.name for p in IMAGES.glob("*.*")))


if __name__ == "__main__":
    main(sys.argv[1])
