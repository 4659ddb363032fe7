"""The view errors, each kind on its own: a write in place into a full backward hook's wrapper (the writing module
hooked itself, or the module before it), into one of several views one op returned, into a view a custom
autograd.Function returned, and into a view made under no_grad. Each diagnosis names the view or module, and
each kind is told apart by the error's own words, not by the case."""
import torch
import torch.nn as nn
from test_doctor import diagnose  # the doctor's diagnosis of the error a block raises


def test_the_module_before_an_inplace_activation_carries_the_hook():
    net = nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU(0.2, inplace=True), nn.Linear(4, 1))

    def keep(module, grad_input, grad_output):
        pass
    net[0].register_full_backward_hook(keep)               # only the Linear: its output is the wrapper's
    error, dx = diagnose(lambda: net(torch.randn(3, 4)), net=net)
    assert "BackwardHookFunction" in str(error) and dx.kind == "view_inplace"
    assert dx.summary.startswith("net.1 (LeakyReLU(inplace=True)) writes in place into the output of net.0")
    assert "hook on net.0" in dx.summary and dx.facts["hook"].startswith(
        "test_the_module_before_an_inplace_activation_carries_the_hook.<locals>.keep, defined at line")


def test_a_global_full_backward_hook_wraps_every_module():
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True))
    handle = torch.nn.modules.module.register_module_full_backward_hook(lambda m, gi, go: None)
    try:
        error, dx = diagnose(lambda: net(torch.randn(3, 4)), net=net)
    finally:
        handle.remove()
    assert dx.kind == "view_inplace" and dx.summary.startswith("net.1 (ReLU(inplace=True)) writes in place into its "
                                                               "input, which a full backward hook on net.1 wrapped")


def test_one_of_the_views_split_returned():
    w = torch.randn(6, 3, requires_grad=True)

    def block():
        first, second = (w * 2).split(3)
        second.mul_(0.5)
    error, dx = diagnose(block)
    assert "returns multiple views" in str(error)
    assert dx.summary.startswith("`second` is one of the views a single op returned (split)")
    assert dx.facts["made by"].startswith("split at line")


def test_a_view_of_a_piece_is_named_with_the_piece_it_writes_into():
    """Another view made earlier (`H`) is not the one written; of the three pieces, the one whose elements the
    write reaches: the last rows of a chunk along dim 0, and the last column of one along dim 1."""
    w = torch.randn(9, requires_grad=True)

    def rows():
        H = w.reshape(3, 3)
        a, b, t = torch.chunk(H @ torch.ones(3, 2), 3, dim=0)
        t_flat = t.reshape(-1)
        t_flat[t_flat.abs() < 0.5] = 0.5
        return H, a, b
    error, dx = diagnose(rows)
    assert dx.summary.startswith("`t_flat` (a view of `t`) is one of the views a single op returned (chunk)"), dx.text()
    assert dx.facts["made by"].startswith("chunk at line")

    def columns():
        x, y, t = torch.chunk(w.reshape(3, 3) * 2, 3, dim=1)
        tail = t[1:]
        tail.mul_(2)
        return x, y
    error, dx = diagnose(columns)
    assert dx.summary.startswith("`tail` (a view of `t`) is one of the views"), dx.text()


class _LSTMWithForgetBias(nn.Module):
    """An init that sets the forget gate's bias through chunk(), outside torch.no_grad()."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4)
        self.rnn.bias_hh_l0.chunk(4)[1].fill_(1)


def test_a_piece_of_a_parameter_written_in_place_is_told_no_grad_not_a_clone():
    """Out of place or into a clone, the values would never reach the parameter: the one fix is torch.no_grad()."""
    error, dx = diagnose(_LSTMWithForgetBias)
    assert "returns multiple views" in str(error)
    assert "a piece of self.rnn.bias_hh_l0" in dx.summary, dx.text()
    assert "torch.no_grad()" in dx.text() and "clone() the view" not in dx.text(), dx.text()
    with torch.no_grad():                                        # the fix it gives does what it says
        lstm = nn.LSTM(3, 4)
        lstm.bias_hh_l0.chunk(4)[1].fill_(1)
    assert lstm.bias_hh_l0[4:8].eq(1).all() and lstm.bias_hh_l0.requires_grad


def test_a_custom_function_that_returns_its_input():
    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g
    w = torch.randn(3, requires_grad=True)

    def block():
        y = Identity.apply(w * 1)
        y.mul_(2)
    error, dx = diagnose(block)
    assert "custom Function" in str(error)
    assert dx.summary.startswith("`y` is what the custom autograd.Function Identity returned")


def test_a_view_made_under_no_grad():
    w = torch.randn(3, 2, requires_grad=True)

    def block():
        with torch.no_grad():
            row = w[0]
        row.add_(1)
    error, dx = diagnose(block)
    assert "no_grad mode" in str(error) and "custom Function" not in str(error)
    assert dx.summary.startswith("`row` is a view made under torch.no_grad() and written in place")
