"""A state carried from one loop pass to the next (h = rnn(x, h)) is named by the variable that carries it, not by
another output of the same line; a tensor made once before the loop is not called carried."""
import warnings

import pytest
import torch
from torch import nn, optim

from gan_lessons.doctor import doctor
from gan_lessons.doctor.naming import rebound


def diagnosis_of(bug):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as raised:
            with doctor():
                bug()
    return raised.value.diagnosis


@pytest.mark.parametrize("code, names", [
    ("output, h = rnn(x, h)", ["h"]),
    ("out, (h, c) = lstm(x, (h, c))  # a comment", ["h", "c"]),
    ("out, self.hidden = self.lstm(x, self.hidden)", ["self.hidden"]),
    ("h = cell(x, h_prev)", []),
    ("total = total + loss", ["total"]),
    ("for k in range(3):", []),
])
def test_rebound_names_what_a_line_both_reads_and_makes(code, names):
    assert rebound(code) == names


def rnn_loop(retain):
    """nn.RNN over two batches, its hidden state carried without detach; retain_graph=True turns the freed-graph
    error into the version error at the second backward (the step changed the weights the first pass saved)."""
    torch.manual_seed(0)
    rnn = nn.RNN(3, 4, batch_first=True)
    opt = optim.SGD(rnn.parameters(), lr=0.1)
    h = torch.zeros(1, 2, 4)
    for _ in range(2):
        opt.zero_grad()
        output, h = rnn(torch.randn(2, 5, 3), h)
        loss = output.pow(2).mean()
        loss.backward(retain_graph=retain)
        opt.step()


def test_a_carried_state_with_retain_graph_is_named_by_the_variable_that_carries_it():
    d = diagnosis_of(lambda: rnn_loop(retain=True))
    assert d.kind == "version" and "through `h`" in d.summary and "`output`" not in d.summary, d.text()
    assert d.facts["carried"].startswith("`h`, made before that step at line"), d.text()
    assert "h.detach()" in d.text()


def test_a_carried_state_without_retain_graph_says_which_variable_carried_it():
    d = diagnosis_of(lambda: rnn_loop(retain=False))
    assert d.kind == "freed" and "carried" in d.summary, d.text()
    assert d.facts["carried by"].startswith("the previous pass's `h` from line"), d.text()


class _Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        z = y * 1.0
        ctx.save_for_backward(z)  # the-save
        return z

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * z


def test_a_custom_function_s_saved_tensor_is_placed_at_its_save_for_backward_line():
    def bug():
        x = torch.randn(4, requires_grad=True)
        out = _Exp.apply(x)
        out = torch.relu_(out)
        out.sum().backward()
    d = diagnosis_of(bug)
    assert d.kind == "version" and "ctx.save_for_backward(z)  # the-save" in d.facts["saved by"], d.text()
    assert "y = x.exp()" not in d.facts["saved by"], d.text()


class _BorderZeroed(torch.nn.Module):
    """A ReLU's output (which ReLU saved) written into four times in place."""

    def forward(self, x):
        att = torch.relu(x.sum(1, keepdim=True))  # the-relu
        att[:, :, :, 0] = 0  # first-write
        att[:, :, :, -1] = 0
        att[:, :, 0, :] = 0
        att[:, :, -1, :] = 0  # last-write
        return x + att * x


def test_several_writes_into_a_saved_tensor_name_the_first_and_count_them():
    """The first write after the save made it stale; a clone just before the last one would not help."""
    from pathlib import Path
    source = Path(__file__).read_text().splitlines()
    line = {m: next(i + 1 for i, t in enumerate(source) if t.rstrip().endswith(f"# {m}"))
            for m in ("the-relu", "first-write", "last-write")}
    d = diagnosis_of(lambda: _BorderZeroed()(torch.randn(2, 3, 5, 5, requires_grad=True)).sum().backward())
    assert d.kind == "version", d.text()
    assert f"line {line['first-write']}" in d.facts["modified by"], d.text()
    assert "the first of 4 in-place writes" in d.facts["modified by"], d.text()
    assert f"line {line['last-write']}" in d.facts["modified by"], d.text()
    assert d.facts["tensor"].startswith("the output of relu") and f"line {line['the-relu']}" in d.facts["tensor"]


def lstm_loop(retain):
    """nn.LSTM over two batches, both its states (h, c) carried without detach."""
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, batch_first=True)
    opt = optim.SGD(lstm.parameters(), lr=0.1)
    h, c = torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)
    for _ in range(2):
        opt.zero_grad()
        output, (h, c) = lstm(torch.randn(2, 5, 3), (h, c))
        output.pow(2).mean().backward(retain_graph=retain)
        opt.step()


def test_both_states_of_an_lstm_are_named_and_both_detached_in_the_fix():
    d = diagnosis_of(lambda: lstm_loop(retain=True))
    assert d.kind == "version" and "through `h`, `c`" in d.summary, d.text()
    assert d.facts["carried"].startswith("`h`, `c`, made before that step at line"), d.text()
    assert "keep h.detach(), c.detach()" in d.text()
    d = diagnosis_of(lambda: lstm_loop(retain=False))
    assert d.kind == "freed" and d.facts["carried by"].startswith("the previous pass's `h`, `c` from line"), d.text()


def _state_loop(reset):
    """A state carried over passes, reset at the start of each pass by `reset(state)` (which returns the state)."""
    w = torch.ones(3, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    state = torch.zeros(3)
    for _ in range(2):
        state = reset(state)
        state = (state + w).exp()
        opt.zero_grad()
        state.sum().backward()
        opt.step()
    return w.detach()


def test_a_state_reset_in_place_is_named_and_told_to_reset_with_a_new_tensor():
    """`state.zero_()` keeps the state's history (zero_ is recorded on top of it): the reset is named, and a reset
    with a new tensor (the fix) runs, as detach_() before zero_() does."""
    from gan_lessons.doctor.report import RESET_IN_PLACE_FIXES
    d = diagnosis_of(lambda: _state_loop(lambda s: s.zero_()))
    assert "s.zero_()" in d.facts["reset in place at"], d.text()
    assert d.fixes[0][0] == RESET_IN_PLACE_FIXES[0][0], d.text()
    assert "reset the state at its start" not in d.text(), d.text()
    fixed = _state_loop(lambda s: torch.zeros_like(s))
    assert torch.equal(fixed, _state_loop(lambda s: s.detach_().zero_()))
