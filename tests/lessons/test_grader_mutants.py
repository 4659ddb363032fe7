"""Graders tested by mutation: mutants of each declared exercise's reference answer (tests/lessons/mutants.py), each
classified by what it does on the exercise's problem, not by what the grader says; the grader must reject every one
that does something else and accept every one that does the same. A fixed-seed sample per exercise runs here;
benchmarks/grader_mutants.py runs them all and reports each checker's score."""
import contextlib
import io
import sys
import warnings
from pathlib import Path

import pytest

from gan_lessons.exercises import EXERCISES
from gan_lessons.exercises.exercise import outcome, same

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants import compiled, mutants, sample

pytestmark = pytest.mark.slow

PER_EXERCISE = 4
SEED = 2026


def _verdict(check, function):
    with contextlib.redirect_stdout(io.StringIO()) as said, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        accepted = check(function)
    return accepted, said.getvalue()


def _cases():
    for exercise in EXERCISES:
        for mutant in sample(mutants(exercise.reference), PER_EXERCISE, SEED):
            yield pytest.param(exercise, mutant, id=f"{exercise.name}: {mutant.what[:60]}")


@pytest.mark.parametrize("exercise, mutant", list(_cases()))
def test_a_mutant_is_rejected_exactly_when_it_does_something_else(exercise, mutant):
    function = compiled(exercise.reference, mutant)
    alike = same(outcome(exercise, function), outcome(exercise, exercise.reference)) and \
        not mutant.what.startswith(exercise.forbids)
    accepted, said = _verdict(exercise.check, function)
    assert accepted is alike, f"{mutant.what}: {'does the same' if alike else 'does something else'}, yet {said}"


def test_every_exercise_has_mutants_of_every_kind_it_can_have():
    whats = [m.what for exercise in EXERCISES for m in mutants(exercise.reference)]
    for kind in ("deleted:", "swapped:", "moved to", "under torch.no_grad()", "no .detach()", "retain_graph=True",
                 "no keywords", "sum for mean", "mean for sum", "left out:", "input detached", "not scaled",
                 "no torch.autocast", "graph made, then detached"):
        assert any(w.startswith(kind) for w in whats), kind
    assert any(" for opt" in w or " for optimizer" in w for w in whats)


def test_the_outcome_tells_a_doubled_gradient_from_the_reference_and_a_rerun_from_itself():
    exercise = next(e for e in EXERCISES if e.name == "chain_step")
    reference = outcome(exercise, exercise.reference)
    assert same(reference, outcome(exercise, exercise.reference))
    doubled = next(m for m in mutants(exercise.reference) if m.what.startswith("deleted: for optimizer in"))
    assert not same(reference, outcome(exercise, compiled(exercise.reference, doubled)))
