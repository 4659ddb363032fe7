"""The graph renderer: saved tensors alive, freed and stale, parameter names, size cap, text fallback."""
import re

import torch
from torch import nn, optim

from gan_lessons import graphs


def _toy():
    torch.manual_seed(0)
    G, D = nn.Linear(2, 3), nn.Linear(3, 1)
    z = torch.randn(4, 2)
    loss = D(G(z)).mean()
    return G, D, loss, graphs.param_names(G=G, D=D)


def test_alive_saved_tensors_are_named_parameters():
    G, D, loss, names = _toy()
    g = graphs.draw({"loss": loss}, names)
    states = {(s.name, s.param): s.state for s in g.saved}
    assert states[("mat2", "D.weight.T")] == "alive"     # Linear saves weight.t() when its input needs grad
    assert ("mat2", "G.weight.T") not in states           # z needs no grad, so G's first layer saves only z
    assert states[("mat1", None)] == "alive"
    assert 'label="mat2 = D.weight.T (3, 1)\nalive"' in g.dot.source
    assert "fillcolor=palegreen" in g.dot.source
    assert "G.weight\n(3, 2)" in g.dot.source               # AccumulateGrad nodes carry the parameter name


def test_backward_frees_saved_tensors():
    G, D, loss, names = _toy()
    loss.backward()
    g = graphs.draw({"loss": loss}, names)                    # torchviz show_saved=True raises here
    assert g.saved and all(s.state == "freed" for s in g.saved)
    assert "fillcolor=lightgrey" in g.dot.source and "\nfreed" in g.dot.source


def test_retain_graph_keeps_them_alive():
    G, D, loss, names = _toy()
    loss.backward(retain_graph=True)
    assert all(s.state == "alive" for s in graphs.draw({"loss": loss}, names).saved)


def test_optimizer_step_makes_a_saved_weight_stale_with_versions():
    G, D, loss, names = _toy()
    loss.backward(retain_graph=True)
    optim.SGD(D.parameters(), lr=0.1).step()
    g = graphs.draw({"loss": loss}, names)                    # torchviz show_saved=True raises here
    stale = [s for s in g.saved if s.state == "stale"]
    assert [(s.param, s.shape) for s in stale] == [("D.weight.T", (3, 1))]
    assert stale[0].version_now == D.weight._version == stale[0].version_saved + 1
    assert f"stale: version {D.weight._version}, saved at {D.weight._version - 1}" in g.dot.source
    assert "fillcolor=tomato" in g.dot.source
    # the other saved tensors were not touched, so they are still alive
    assert sum(s.state == "alive" for s in g.saved) == len(g.saved) - 1


def test_stale_versions_match_pytorchs_own_error():
    G, D, loss, names = _toy()
    loss.backward(retain_graph=True)
    with torch.no_grad():
        D.weight.mul_(2)
        D.weight.add_(1)
    stale = next(s for s in graphs.draw({"loss": loss}, names).saved if s.state == "stale")
    try:
        loss.backward()
    except RuntimeError as error:
        assert f"is at version {stale.version_now}; expected version {stale.version_saved}" in str(error)
    else:
        raise AssertionError("backward through a stale graph should have raised")


def _autograd_nodes(source):
    return len(re.findall(r"^\tn\d+ \[", source, flags=re.M))


def test_legend_lists_the_three_states():
    _, _, loss, names = _toy()
    source = graphs.draw({"loss": loss}, names).dot.source
    for state, colour in graphs.STATES.items():
        assert f'legend_{state} [label={state} fillcolor={colour}' in source


def test_node_list_matches_the_grad_fn_chain():
    _, _, loss, names = _toy()
    g = graphs.draw({"loss": loss}, names, show_saved=False)
    walked, stack = set(), [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in walked:
            walked.add(fn)
            stack.extend(f for f, _ in fn.next_functions)
    assert _autograd_nodes(g.dot.source) == len(walked)


def test_big_graphs_are_capped():
    net = nn.Sequential(*[nn.Linear(4, 4) for _ in range(30)])
    out = net(torch.randn(2, 4)).sum()
    g = graphs.draw({"out": out}, graphs.param_names(net=net), max_nodes=20)
    assert "more autograd nodes" in g.dot.source
    assert _autograd_nodes(g.dot.source) == 20


def test_text_fallback_without_dot(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))                 # no `dot` on PATH
    G, D, loss, names = _toy()
    bundle = graphs.draw({"loss": loss}, names)._repr_mimebundle_()
    assert list(bundle) == ["text/plain"]
    assert "dot' not found" in bundle["text/plain"] and "mat2 = D.weight.T (3, 1) alive" in bundle["text/plain"]
    loss.backward()
    assert "mat1 freed" in graphs.draw({"loss": loss}, names)._repr_mimebundle_()["text/plain"]


def test_graph_carries_a_png_beside_the_svg():
    """An untrusted notebook in JupyterLab does not show SVG; the PNG of the same graph is what it shows."""
    import base64
    G, D, loss, names = _toy()
    bundle = graphs.draw({"loss": loss}, names, title="toy")._repr_mimebundle_()
    assert set(bundle) == {"image/svg+xml", "image/png", "text/plain"}
    png = base64.b64decode(bundle["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > 100 and height > 100
    assert "toy" in bundle["image/svg+xml"] and bundle["text/plain"].startswith("toy")


def test_on_cuda_the_message_says_torch_cuda_floattensor_and_is_read_the_same():
    message = ("one of the variables needed for gradient computation has been modified by an inplace operation: "
               "[torch.cuda.FloatTensor [512, 1]], which is output 0 of AsStridedBackward0, is at version 2; "
               "expected version 1 instead.")
    assert graphs.version_error(message) == ((512, 1), (2, 1))
    assert graphs.version_error(message.replace("torch.cuda.FloatTensor", "torch.FloatTensor")) == ((512, 1), (2, 1))


def test_a_stale_weight_is_named_from_a_cuda_message(monkeypatch):
    """Torch's messages as a CUDA tensor gives them, on this CPU: the stale saved weight is still named."""
    read = graphs.version_error
    monkeypatch.setattr(graphs, "version_error", lambda m: read(m.replace("torch.FloatTensor", "torch.cuda.FloatTensor")))
    G, D, loss, names = _toy()
    loss.backward(retain_graph=True)
    with torch.no_grad():
        D.weight.add_(1)
    stale = [s for s in graphs.draw({"loss": loss}, names).saved if s.state == "stale"]
    assert stale and all(s.param is not None and s.param.startswith("D.") for s in stale), stale
