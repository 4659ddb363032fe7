"""The doctor on a fixed-seed sample of the generated fault corpus (tests/doctor/corpus.py; the benchmark
benchmarks/doctor_corpus.py runs thousands): each fault of every kind named (its kind, tensor and lines) in at least
95% of programs, and no word from the doctor on the same programs without the fault."""
import collections
import dataclasses

import corpus
import corpus_more
import pytest

corpus_more.register()
SEEDS = range(300)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    found = []
    for seed in SEEDS:
        for faulty in (True, False):
            program = corpus.generate(seed, faulty)
            outcome = corpus.run(program, folder / str(seed))
            found.append((program, outcome, corpus.judge(program, outcome)))
    return found


def test_every_kind_of_fault_is_named_in_95_percent_of_its_programs(verdicts):
    named, total, misses = collections.Counter(), collections.Counter(), collections.defaultdict(list)
    for program, _, verdict in verdicts:
        if program.faulty:
            total[program.kind] += 1
            named[program.kind] += verdict.named
            if not verdict.named:
                misses[program.kind].append((program.seed, verdict.missing))
    assert set(total) == set(corpus.KINDS)                # the sample draws every kind
    low = {kind: f"{named[kind]}/{total[kind]}" for kind in total if named[kind] < 0.95 * total[kind]}
    assert not low, (low, {k: misses[k][:3] for k in low})


def test_the_same_programs_without_the_fault_draw_nothing(verdicts):
    alarms = [(p.seed, p.kind, v.missing) for p, _, v in verdicts if not p.faulty and v.false_alarm]
    assert not alarms


def test_the_judge_refuses_a_diagnosis_that_names_the_wrong_lines_or_tensor(verdicts):
    """The check can fail: the same diagnoses, judged against a truth that points at a line they do not name, or
    at another tensor."""
    checked = 0
    for program, outcome, verdict in verdicts:
        if not (program.faulty and verdict.named):
            continue
        if program.truth["lines"]:
            text = outcome.diagnosis.text()
            lines = program.main.splitlines()
            unnamed = next(n for n, code in enumerate(lines, 1) if code.strip()
                           and f"line {n} (`{code.strip()}`)" not in text)
            what = next(iter(program.truth["lines"]))
            moved = dataclasses.replace(program, truth={**program.truth, "lines": {
                **program.truth["lines"], what: ("main", unnamed)}})
            assert not corpus.judge(moved, outcome).named, program.seed
            checked += 1
        if program.truth["tensor"]:
            other = dataclasses.replace(program, truth={**program.truth, "tensor": ["`nothing_named_so`"]})
            assert not corpus.judge(other, outcome).named, program.seed
    assert checked > 100


def test_programs_differ_in_names_placement_and_shape():
    """The generator draws: two seeds of one kind are different programs, and each kind comes in every context."""
    programs = [corpus.generate(seed, True) for seed in range(400)]   # about 10 of each kind
    assert len({p.main for p in programs}) == len(programs)
    contexts = collections.defaultdict(set)
    for p in programs:
        contexts[p.kind].add(p.context.split(",")[0])
    assert sum(len(c) >= 2 for c in contexts.values()) >= len(corpus.KINDS) - 2


def test_the_docs_table_is_the_benchmarks_results():
    """docs/doctor.md's corpus table is doctor_corpus.markdown() of the two results files it names."""
    import json
    import re
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    import doctor_corpus
    docs = (root / "docs" / "doctor.md").read_text()
    before, after = re.search(r"from `benchmarks/results/([\w-]+_doctor_corpus_before_cpu\.json)`.*?and\s+"
                              r"`benchmarks/results/([\w-]+_doctor_corpus_cpu\.json)`", docs, re.S).groups()
    read = lambda name: json.loads((root / "benchmarks" / "results" / name).read_text())      # noqa: E731
    assert doctor_corpus.markdown(read(after), read(before)) in docs
