"""The strategy switch of lesson 05: pick a strategy, see its one-step graph, its measured cost row and a short
training curve. Only widget API shared by ipywidgets 7.7 (Colab) and 8 (JupyterLab 4) is used."""
import base64
import copy
import html
import io

import graphviz
import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython.display import HTML, Markdown, display

from gan_lessons import costs, graphs, strategies
from gan_lessons.i18n import _
from gan_lessons.lesson import headline


def train_curve(name, G, D, sample_real, noise, steps, lr=1e-3):
    """Train copies of G and D for `steps` steps of strategy `name`; return per-step (loss_D, loss_G)."""
    G, D = copy.deepcopy(G), copy.deepcopy(D)
    opt_G = torch.optim.Adam(G.parameters(), lr=lr, betas=(0.5, 0.999))
    opt_D = torch.optim.Adam(D.parameters(), lr=lr, betas=(0.5, 0.999))
    step, history = strategies.get(name), []
    for _step in range(steps):
        loss_D, loss_G = step(G, D, opt_G, opt_D, sample_real(), noise)
        history.append((loss_D.item(), loss_G.item()))
    return history


def one_step_graph(name, G, D, sample_real, noise):
    """The graph behind one step's two losses, drawn after the step (saved tensors mostly freed)."""
    G, D = copy.deepcopy(G), copy.deepcopy(D)
    opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
    loss_D, loss_G = strategies.get(name)(G, D, opt_G, opt_D, sample_real(), noise)
    return graphs.draw({"loss_D": loss_D, "loss_G": loss_G}, graphs.param_names(G=G, D=D),
                       title=_("one step of {name}: the graph behind loss_D and loss_G, after the step").format(
                           name=name))


def _scroll_box(img_html: str, title: str) -> str:
    """A graph at its natural size in a box as wide as the output: wide graphs scroll instead of being cropped or
    shrunk to unreadable labels. Its title stands above the box, in the page's width, so it is read whole however
    wide the graph."""
    return (f'<div class="gan-lessons-graph-title" style="font-family: monospace; margin: 0.4em 0">'
            f'{html.escape(title)}</div>'
            f'<div class="gan-lessons-graph" style="overflow-x: auto; max-width: 100%">{img_html}</div>')


def _svg_img(graph) -> str:
    svg = graph.dot.pipe(format="svg", encoding="utf-8")
    alt = html.escape(graph.text.splitlines()[0], quote=True)
    return (f'<img alt="{alt}" style="max-width: none" '
            f'src="data:image/svg+xml;base64,{base64.b64encode(svg.encode()).decode()}">')


def _png_img(png: bytes, alt: str, natural: bool = False) -> str:
    """An <img> of a PNG; `natural` keeps its own size (a graph scrolls in its box instead of shrinking)."""
    style = ' style="max-width: none"' if natural else ""
    return (f'<img alt="{html.escape(alt, quote=True)}"{style} '
            f'src="data:image/png;base64,{base64.b64encode(png).decode()}">')


class StrategyPanel:
    """ToggleButtons + one Output. Draws the default strategy once when created, so headless runs have output.

    Stored in a notebook, the widget needs a live kernel; the output also carries a static HTML picture of the
    default choice (its cost row, graph and curve), which front ends show where the widget cannot be (an untrusted
    notebook in JupyterLab, a notebook viewer)."""

    def __init__(self, G, D, sample_real, noise, cost_table, steps=200, value="d_first_reuse_fake"):
        self.G, self.D, self.sample_real, self.noise = G, D, sample_real, noise
        self.cost_table, self.steps, self.shown = cost_table, steps, {}
        self.buttons = widgets.ToggleButtons(options=list(strategies.STRATEGIES), value=value,
                                             description=_("strategy"), style={"button_width": "auto"})
        self.out = widgets.Output()
        self.buttons.observe(lambda change: self.show(change["new"]), names="value")
        self.widget = widgets.VBox([self.buttons, self.out])
        self.show(value)

    def show(self, name):
        torch.manual_seed(0)
        with self.out:
            self.out.clear_output(wait=True)
            shown = {"table": costs.cost_table_markdown([self.cost_table[name]]),
                     "table_html": costs.cost_table_html([self.cost_table[name]])}     # one row, two forms
            display(Markdown(shown["table"]))
            try:
                graph = one_step_graph(name, self.G, self.D, self.sample_real, self.noise)
                history = train_curve(name, self.G, self.D, self.sample_real, self.noise, self.steps)
            except RuntimeError as error:
                display(Markdown(_("**`{name}` raises** `RuntimeError: {error}`").format(
                    name=name, error=headline(str(error)))))
                self.shown[name] = {"error": str(error), **shown}
                return
            figure = _plot(name, history)
            graph.dot.graph_attr.pop("label", None)          # the title goes above the graph's scrolling box
            svg = _svg_img(graph)
            display(HTML(_scroll_box(svg, graph.text.splitlines()[0])))
            display(figure)
            self.shown[name] = {"graph": graph.text, "graph_svg": svg, "final": history[-1], **shown, "figure": figure}
            try:
                self.shown[name]["graph_img"] = _png_img(graph.dot.pipe(format="png"), graph.text.splitlines()[0],
                                                         natural=True)
            except (graphviz.CalledProcessError, OSError):  # a `dot` without a PNG renderer (it may exit before
                # reading the graph: a broken pipe): the SVG picture instead
                self.shown[name]["graph_img"] = svg

    def static_html(self) -> str:
        """The default choice as plain HTML with PNG pictures: what a front end without the widget shows."""
        name = self.buttons.value
        shown = self.shown[name]
        parts = [_("<p><b>strategy: {name}</b> (a stored picture of the default choice; run the notebook to switch "
                   "between {names})</p>").format(name=html.escape(name),
                                                  names=", ".join(map(html.escape, self.buttons.options))),
                 shown["table_html"]]
        if "graph_img" in shown:
            buffer = io.BytesIO()
            shown["figure"].savefig(buffer, format="png", dpi=80)
            parts += [_scroll_box(shown["graph_img"], shown["graph"].splitlines()[0]),
                      _png_img(buffer.getvalue(), _("{name}: training curve").format(name=name))]
        return "\n".join(parts)

    def _repr_mimebundle_(self, include=None, exclude=None):
        """The widget's own view (what a live front end shows), plus the static HTML beside it."""
        return {"application/vnd.jupyter.widget-view+json":
                    {"version_major": 2, "version_minor": 0, "model_id": self.widget.model_id},
                "text/html": self.static_html(),
                "text/plain": _("StrategyPanel(strategy={name}): a widget; run the notebook to use it").format(
                    name=repr(self.buttons.value))}


def _plot(name, history):
    fig, ax = plt.subplots(figsize=(6, 2.4))
    ax.plot([h[0] for h in history], label="loss_D")
    ax.plot([h[1] for h in history], label="loss_G")
    ax.set_xlabel(_("step"))
    ax.set_title(_("{name}: {n} steps").format(name=name, n=len(history)))
    ax.legend()
    fig.tight_layout()
    plt.close(fig)
    return fig
