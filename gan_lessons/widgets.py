"""The strategy switch of lesson 05: pick a strategy, see its one-step graph, its measured cost row and a short
training curve. Only widget API shared by ipywidgets 7.7 (Colab) and 8 (JupyterLab 4) is used."""
import copy

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython.display import Markdown, display

from gan_lessons import graphs, strategies


def cost_row(c) -> str:
    """One markdown table row for a costs.Cost."""
    if c.error:
        return f"| `{c.strategy}` | raises: {c.error[:90]}... | | | | | |"
    return (f"| `{c.strategy}` | {c.G_forward:g} / {c.G_backward:g} | {c.D_forward:g} / {c.D_backward:g} | "
            f"{c.G_grad_passes:g} | {c.D_grad_passes:g} | {c.ms_per_step:.1f} | {c.peak_mib:.2f} |")


COST_HEADER = ("| strategy | G fwd / bwd | D fwd / bwd | G grad passes | D grad passes | ms / step (median) | "
               "peak MiB |\n|---|---|---|---|---|---|---|")


def train_curve(name, G, D, sample_real, noise, steps, lr=1e-3):
    """Train copies of G and D for `steps` steps of strategy `name`; return per-step (loss_D, loss_G)."""
    G, D = copy.deepcopy(G), copy.deepcopy(D)
    opt_G = torch.optim.Adam(G.parameters(), lr=lr, betas=(0.5, 0.999))
    opt_D = torch.optim.Adam(D.parameters(), lr=lr, betas=(0.5, 0.999))
    step, history = strategies.get(name), []
    for _ in range(steps):
        loss_D, loss_G = step(G, D, opt_G, opt_D, sample_real(), noise)
        history.append((loss_D.item(), loss_G.item()))
    return history


def one_step_graph(name, G, D, sample_real, noise):
    """The graph behind one step's two losses, drawn after the step (saved tensors mostly freed)."""
    G, D = copy.deepcopy(G), copy.deepcopy(D)
    opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
    loss_D, loss_G = strategies.get(name)(G, D, opt_G, opt_D, sample_real(), noise)
    return graphs.draw({"loss_D": loss_D, "loss_G": loss_G}, graphs.param_names(G=G, D=D),
                       title=f"one step of {name}: the graph behind loss_D and loss_G, after the step")


class StrategyPanel:
    """ToggleButtons + one Output. Draws the default strategy once when created, so headless runs have output."""

    def __init__(self, G, D, sample_real, noise, cost_table, steps=200, value="d_first_reuse_fake"):
        self.G, self.D, self.sample_real, self.noise = G, D, sample_real, noise
        self.cost_table, self.steps, self.shown = cost_table, steps, {}
        self.buttons = widgets.ToggleButtons(options=list(strategies.STRATEGIES), value=value,
                                             description="strategy")
        self.out = widgets.Output()
        self.buttons.observe(lambda change: self.show(change["new"]), names="value")
        self.widget = widgets.VBox([self.buttons, self.out])
        self.show(value)

    def show(self, name):
        torch.manual_seed(0)
        with self.out:
            self.out.clear_output(wait=True)
            display(Markdown(COST_HEADER + "\n" + cost_row(self.cost_table[name])))
            try:
                graph = one_step_graph(name, self.G, self.D, self.sample_real, self.noise)
                history = train_curve(name, self.G, self.D, self.sample_real, self.noise, self.steps)
            except RuntimeError as error:
                display(Markdown(f"**`{name}` raises** `RuntimeError: {str(error).split('. Hint')[0]}`"))
                self.shown[name] = {"error": str(error)}
                return
            display(graph)
            display(_plot(name, history))
            self.shown[name] = {"graph": graph.text, "final": history[-1]}

    def _ipython_display_(self):
        display(self.widget)


def _plot(name, history):
    fig, ax = plt.subplots(figsize=(6, 2.4))
    ax.plot([h[0] for h in history], label="loss_D")
    ax.plot([h[1] for h in history], label="loss_G")
    ax.set_xlabel("step")
    ax.set_title(f"{name}: {len(history)} steps")
    ax.legend()
    fig.tight_layout()
    plt.close(fig)
    return fig
