"""Timing claims (gan_lessons/timing.py): decided by a paired interval that may say "cannot decide", never by an idle
machine. tests/package/test_timing_under_load.py runs the lessons' timing cells on a busy machine."""
import math

import pytest

from gan_lessons import timing
from gan_lessons.i18n import speaking
from gan_lessons.lesson import ClaimFailed, claim


def _binomial_interval(n, confidence):
    """The ranks of the median's interval, by brute force over every rank (what median_interval must agree with)."""
    ks = [k for k in range(n + 1)
          if sum(math.comb(n, i) for i in range(k)) / 2 ** n <= (1 - confidence) / 2]
    return max(ks)


@pytest.mark.parametrize("n", [1, 5, 6, 8, 10, 15, 20, 30, 50])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_median_interval_is_the_order_statistics_the_binomial_gives(n, confidence):
    values = [float(v) for v in range(n, 0, -1)]             # unsorted on purpose: n, n-1, ..., 1
    k = _binomial_interval(n, confidence)
    low, high = timing.median_interval(values, confidence)
    if k == 0:
        assert (low, high) == (-math.inf, math.inf)          # too few rounds to reach that confidence
    else:
        assert (low, high) == (float(k), float(n + 1 - k))


def test_fifteen_rounds_at_99_percent_use_the_third_smallest_and_largest_ratios():
    assert timing.median_interval(range(1, 16), 0.99) == (3, 13)


def _timing(ratios, confidence=0.99):
    return timing.paired({"a": [100.0 * r for r in ratios], "b": [100.0] * len(ratios)}, "a", "b", confidence)


def test_verdict_holds_fails_or_cannot_decide():
    assert _timing([0.8 + 0.01 * i for i in range(15)]).verdict() == "holds"         # 0.80 .. 0.94, all below 1
    assert _timing([1.1 + 0.01 * i for i in range(15)]).verdict() == "fails"         # all above 1
    mixed = _timing([0.7, 1.3] * 10)                                                 # as wide on both sides
    assert mixed.verdict() == "undecided" and mixed.low < 1 < mixed.high
    assert _timing([0.8, 0.9]).verdict() == "undecided"                             # 2 rounds decide nothing
    assert _timing([0.8 + 0.01 * i for i in range(15)]).verdict(below=0.85) == "undecided"


def test_a_timing_that_cannot_decide_says_so_in_one_line_and_the_lesson_goes_on(capsys):
    noisy = _timing([0.6, 1.4, 0.9, 1.2, 1.0] * 10)
    assert timing.claim_timing("a is faster than b", noisy) == "undecided"           # no exception
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("? a is faster than b: this machine's timing cannot decide")
    assert "50 rounds" in lines[0] and "which contains 1" in lines[0] and "60.0 to 140.0 ms" in lines[0]
    assert "torch" not in lines[0]                          # the machine is the cause, not the torch version
    with speaking("zh"):
        timing.claim_timing("a 比 b 快", noisy)
    zh = capsys.readouterr().out
    assert zh.startswith("? a 比 b 快：这台机器上的计时无法判定") and "共 50 轮" in zh


def test_a_timing_that_holds_prints_its_evidence(capsys):
    assert timing.claim_timing("a is faster than b", _timing([0.8 + 0.01 * i for i in range(15)])) == "holds"
    assert capsys.readouterr().out.strip() == ("✓ a is faster than b  (median paired ratio 0.87, 99% interval 0.82 "
                                               "to 0.92, 15 rounds)")


def test_a_timing_that_decides_against_names_this_machine_not_torch():
    with pytest.raises(ClaimFailed) as failed:
        timing.claim_timing("a is faster than b", _timing([1.1 + 0.01 * i for i in range(15)]))
    message = str(failed.value)
    assert "timed on this machine it does not hold" in message and "not a rule of torch" in message
    assert "does not hold on torch" not in message


def test_a_claim_about_something_else_than_torch_names_it():
    with pytest.raises(ClaimFailed, match=r"does not hold for the shipped run  \(3\)$"):
        claim("the run learned every digit", False, shown=3, on="the shipped run")
    with pytest.raises(ClaimFailed, match="does not hold on torch"):
        claim("x", False)


def test_until_decided_adds_rounds_while_undecided_and_stops_at_the_cap():
    calls = []

    def measure(steady):
        def run(rounds):
            calls.append(rounds)
            i = len(calls)
            # the first two calls: half the rounds twice as slow, so the interval contains 1; then steady
            a = [80.0] * rounds if steady or i > 2 else [80.0] * (rounds - 5) + [200.0] * 5
            return {"a": a, "b": [100.0] * rounds}
        return run

    timed = timing.until_decided(measure(steady=True), "a", "b", rounds=10)
    assert calls == [10] and len(timed["a"]) == 10                      # decided at once: 10 ratios of 0.8
    calls.clear()
    timed = timing.until_decided(measure(steady=False), "a", "b", rounds=10)
    assert len(calls) >= 2 and len(timed["a"]) == 10 * len(calls)       # pooled, not replaced
    calls.clear()
    never = timing.until_decided(lambda r: (calls.append(r), {"a": [90.0, 110.0] * (r // 2),
                                                              "b": [100.0] * r})[1], "a", "b", rounds=10,
                                 max_rounds=30)
    assert calls == [10, 10, 10] and len(never["a"]) == 30


def test_paired_timings_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="same number of rounds"):
        timing.paired({"a": [1.0, 2.0], "b": [1.0]}, "a", "b")
