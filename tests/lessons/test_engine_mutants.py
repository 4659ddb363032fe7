"""The engine's checkers (lessons 11 and 12) tested by mutation: mutants of each reference method and function
(tests/lessons/engine_mutants.py), each classified by what the engine then does on programs and expressions no
checker runs; the checker must reject every one that does something else and accept every one that does the same.
A fixed-seed sample per step runs here; benchmarks/grader_mutants.py runs them all and reports each score."""
import re
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_mutants import (
    STEPS,
    compiled,
    differs_on_programs,
    engine_mutants,
    fit_differs,
    judged,
    keeps_otherwise,
    numerical_grad_differs,
)
from mutants import sample

from gan_lessons.exercises.lesson11 import Value

pytestmark = pytest.mark.slow

PER_STEP = 8
SEED = 2026


def _cases():
    for step in STEPS:
        for mutant in sample(engine_mutants(step.reference), PER_STEP, SEED):
            yield pytest.param(step, mutant, id=f"{step.name}: {mutant.what[:60]}")


@pytest.mark.parametrize("step, mutant", list(_cases()))
def test_a_mutant_engine_is_rejected_exactly_when_it_does_something_else(step, mutant):
    found = judged(step, mutant)
    assert found["accepted"] is (found["does"] == "same"), found


def test_the_reference_does_the_same_and_passes_every_step():
    for step in STEPS:
        assert not step.differs(step.reference), step.name
        assert step.check(step.reference) is True, step.name


def test_every_step_has_mutants_of_the_engines_own_kinds():
    whats = [m.what for step in STEPS for m in engine_mutants(step.reference)]
    for kind in ("turned round:", "negated:", "or for and:", "True for False", "no transpose:", "no reversed:",
                 "no sum_to_size:", '"self" for "other"', "deleted:", "swapped:"):
        assert any(w.startswith(kind) for w in whats), kind
    assert any(re.match(r"\d+ for \d+", w) for w in whats)           # a whole number one more


def test_the_truth_tells_each_kind_of_wrong_engine_from_torch():
    """Each judge finds a fault it exists for: a backward that frees nothing (a second backward runs where torch
    raises), a mul that keeps its own operand (what it keeps), a version check by values (a change undone), a
    one-sided difference, a loop that never resets .grad."""
    def frees_nothing(self, retain_graph=False):
        return Value.backward(self, retain_graph=True)

    def keeps_self(self, other):
        out = Value.__mul__(self, other)
        if out._saved:
            out._saved = {name: (self, self._version) for name in out._saved}
        return out

    def by_values(self):
        return {name: value.data for name, (value, _version) in self._saved.items()}

    def one_sided(f, x, eps=1e-3):
        grad = torch.zeros_like(x)
        for i in range(x.numel()):
            moved = x.clone()
            moved.view(-1)[i] += eps
            grad.view(-1)[i] = (f(moved) - f(x)) / eps
        return grad

    def never_reset(params, x, y, steps, lr):
        losses = []
        for _step in range(steps):
            pred = (x @ params[0] + params[1]).tanh() @ params[2] + params[3]
            loss = ((pred - y) * (pred - y)).sum() * (1 / len(y.data))
            loss.backward()
            with Value.no_grad():
                for p in params:
                    p.add_(p.grad * -lr)
            losses.append(loss.data.item())
        return losses

    engine = lambda **methods: type("Value", (Value,), methods)   # noqa: E731
    assert differs_on_programs(engine(backward=frees_nothing), 2)
    assert keeps_otherwise(engine(__mul__=keeps_self), ("mul",))
    assert differs_on_programs(engine(unpack=by_values), 3)
    assert numerical_grad_differs(one_sided)
    assert fit_differs(Value, never_reset)
    assert not differs_on_programs(Value, 4) and not keeps_otherwise(Value, ("mul", "exp", "matmul", "tanh"))


def test_a_mutant_is_the_reference_with_one_edit():
    step = next(s for s in STEPS if s.name.endswith("unpack"))
    turned = next(m for m in engine_mutants(step.reference) if m.what.startswith("turned round:"))
    assert "value._version == version" in turned.source
    function = compiled(step.reference, turned)
    assert function.__name__ == "unpack" and step.differs(function)
