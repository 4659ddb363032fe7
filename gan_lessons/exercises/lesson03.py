"""Lesson 03's exercise: counting the bytes autograd saves (check_saved_bytes)."""
import torch
from torch import nn

from gan_lessons.exercises.feedback import raised, unanswered, verdict
from gan_lessons.lesson import headline


def _saved_graphs():
    """(description, make_graph) pairs; make_graph builds a small graph and returns its output."""
    def exp_graph():
        a = torch.linspace(-1, 1, 1000, requires_grad=True)
        return a.exp()

    def square_graph():
        a = torch.linspace(-1, 1, 300, requires_grad=True)
        return a * a

    def linear_tanh_graph():
        torch.manual_seed(0)
        layer = nn.Linear(16, 32)
        return torch.tanh(layer(torch.randn(8, 16)))

    return [("y = a.exp(), a of 1000 floats", exp_graph),
            ("y = a * a, a of 300 floats", square_graph),
            ("tanh(Linear(16, 32)(x)), x of shape [8, 16]", linear_tanh_graph)]


def reference_saved_bytes(make_graph):
    """Bytes of every tensor autograd saves while make_graph() runs (a tensor saved twice counts twice)."""
    sizes = []

    def pack(t):
        sizes.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        make_graph()
    return sum(sizes)


def _elements_saved(make_graph):
    counts = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: counts.append(t.numel()) or t, lambda t: t):
        make_graph()
    return sum(counts)


def _keeping(make_graph, made):
    """make_graph, with each output it returns also appended to `made` (for a backward through it afterwards)."""
    def run():
        made.append(make_graph())
        return made[-1]
    return run


def check_saved_bytes(count_saved_bytes) -> bool:
    """Lesson 03. count_saved_bytes(make_graph) runs make_graph() under torch.autograd.graph.saved_tensors_hooks
    and returns the bytes of the tensors autograd saved; the graph's backward must still work afterwards."""
    name = "count_saved_bytes"
    if unanswered(name, count_saved_bytes, "your count_saved_bytes"):
        return False
    problems = []
    for description, make_graph in _saved_graphs():
        right = reference_saved_bytes(make_graph)
        made = []
        try:
            got = count_saved_bytes(_keeping(make_graph, made))
        except Exception as error:
            problems.append(raised("count_saved_bytes", error, []))
            break
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            problems.append(f"on {description}: it returned {got!r}; return the total number of bytes, an int")
            continue
        if got != right:
            if got == 0 or not made:
                hint = ("your pack hook never ran: call make_graph() inside `with saved_tensors_hooks(pack, unpack):`"
                        if made else "call make_graph() inside the with-block")
            elif got == _elements_saved(make_graph):
                hint = "you counted elements, not bytes: multiply t.numel() by t.element_size() (4 for float32)"
            else:
                hint = "add t.numel() * t.element_size() once per call of pack: each call is one saved tensor"
            diff = got - right
            problems.append(f"on {description}: you counted {got} bytes, autograd saved {right} "
                            f"({abs(diff)} {'too many' if diff > 0 else 'too few'}). Hint: {hint}")
            continue
        try:
            made[-1].sum().backward()
        except Exception as error:
            problems.append(f"on {description}: the count is right, but backward() then failed "
                            f"({headline(str(error))}): unpack must return the tensor pack returned")
    return verdict(name, problems, "right on all three graphs, and backward still works through them")
