"""Lesson 05's strategy panel: its live view, the static picture stored beside it, and table cells that never cut
an error message mid-word."""
import base64
import math
import os
import re
import shutil

import torch
from torch import nn

from gan_lessons import costs, strategies, widgets
from gan_lessons.lesson import headline


def _panel(value="d_first_reuse_fake"):
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
    gen = torch.Generator().manual_seed(0)

    def ring(n=32):
        return torch.stack([torch.cos(a := torch.rand(n, generator=gen) * 2 * math.pi), torch.sin(a)], 1)

    table = {name: costs.measure(name, G, D, ring(), lambda n: torch.randn(n, 8), steps=1, warmup=0)
             for name in strategies.STRATEGIES}
    return widgets.StrategyPanel(G, D, ring, lambda n: torch.randn(n, 8), table, steps=3, value=value)


def test_bundle_has_the_live_widget_and_a_static_picture_of_the_default_choice():
    panel = _panel()
    bundle = panel._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.widget.model_id
    page = bundle["text/html"]
    assert "strategy: d_first_reuse_fake" in page and "<td>d_first_reuse_fake</td>" in page
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 2                                   # the graph and the training curve
    assert all(base64.b64decode(i)[:4] == b"\x89PNG" for i in images)
    assert 'alt="one step of d_first_reuse_fake' in page      # the graph drawn is this strategy's
    # the title stands above the graph's scrolling box as text, not inside the (possibly wide) picture
    title = re.search(r'<div class="gan-lessons-graph-title"[^>]*>([^<]+)</div>\s*<div class="gan-lessons-graph"', page)
    assert title and title[1].startswith("one step of d_first_reuse_fake")
    live = panel.shown["d_first_reuse_fake"]["graph_svg"]                # the picture the live view shows
    svg = base64.b64decode(re.search(r'data:image/svg\+xml;base64,([^"]+)', live)[1]).decode()
    assert "<svg" in svg and "the graph behind loss_D" not in svg
    assert "VBox(" not in bundle["text/plain"]


def test_every_strategy_label_is_shown_whole():
    panel = _panel()
    assert panel.buttons.style.button_width == "auto"
    assert set(panel.buttons.options) == set(strategies.STRATEGIES)


def test_a_raising_strategy_stores_its_table_and_message_and_no_picture():
    panel = _panel(value="retain_graph_seed003")
    error = panel.shown["retain_graph_seed003"]["error"]          # the real error, raised by show()
    panel.cost_table["retain_graph_seed003"] = costs.Cost("retain_graph_seed003", error=error)
    panel.show("retain_graph_seed003")
    page = panel._repr_mimebundle_()["text/html"]
    assert "raises: one of the variables needed for gradient computation has been modified by an inplace operation<" in page
    assert "data:image/png" not in page


def test_headline_keeps_whole_words():
    version = ("one of the variables needed for gradient computation has been modified by an inplace operation: "
               "[torch.FloatTensor [512, 1]], which is output 0 of AsStridedBackward0, is at version 2")
    freed = ("Trying to backward through the graph a second time (or directly access saved tensors after they have "
             "already been freed). Saved intermediate values of the graph are freed")
    assert headline(version).endswith("by an inplace operation")
    assert headline(freed).endswith("after they have already been freed)")


def test_a_dot_without_a_png_renderer_gives_the_svg_picture_instead(monkeypatch, tmp_path):
    real = shutil.which("dot")
    fake = tmp_path / "dot"                    # a graphviz built without PNG output, as minimal builds are
    fake.write_text(f'#!/bin/sh\ncase "$*" in *-Tpng*) echo \'Format: "png" not recognized\' >&2; exit 1;; esac\n'
                    f'exec {real} "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    page = _panel()._repr_mimebundle_()["text/html"]
    graph = re.findall(r'<img alt="one step of d_first_reuse_fake[^>]*src="data:image/svg\+xml;base64,([^"]+)"', page)
    assert len(graph) == 1 and b"<svg" in base64.b64decode(graph[0])
    assert len(re.findall(r'src="data:image/png;base64,', page)) == 1       # the training curve, from matplotlib


def test_a_dot_that_exits_before_reading_the_graph_gives_the_svg_picture_too(monkeypatch):
    """Such a `dot` can end the pipe before the graph is written to it: a BrokenPipeError, not a CalledProcessError
    (which of the two depends on timing, so each is raised here on purpose)."""
    import graphviz
    real_pipe = graphviz.Digraph.pipe

    def pipe(self, format=None, **kw):
        if format == "png":
            raise BrokenPipeError(32, "Broken pipe")
        return real_pipe(self, format=format, **kw)
    monkeypatch.setattr(graphviz.Digraph, "pipe", pipe)
    page = _panel()._repr_mimebundle_()["text/html"]
    assert re.search(r'<img alt="one step of d_first_reuse_fake[^>]*src="data:image/svg\+xml;base64,', page)
