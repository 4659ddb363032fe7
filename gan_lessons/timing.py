"""Timing claims a busy machine cannot get wrong (taught in lesson 05).

A timing is evidence that varies with everything else the machine does. So a lesson that says one step is faster
than another measures single steps in turn (costs.interleaved_ms), takes each round's ratio, and lets the median
ratio's confidence interval decide: below the bound, the claim holds; above it, the claim fails on this machine;
containing it, the timing cannot decide, and the lesson says so and goes on. More rounds are measured while the
timing is undecided, up to a cap, so a quiet machine decides in a few seconds and a busy one does not guess."""
import math
import os
from dataclasses import dataclass

import torch

from gan_lessons.i18n import _
from gan_lessons.lesson import ClaimFailed


@dataclass(frozen=True)
class PairedTiming:
    """`name`'s step time over `reference`'s, one ratio per round (steps timed side by side), and what they say."""
    name: str
    reference: str
    ratios: tuple            # per round, in the order measured
    low: float               # the median ratio's confidence interval (distribution-free: order statistics)
    high: float
    confidence: float
    fastest_ms: float        # the fastest and slowest single step of the two, the noise the ratios ride on
    slowest_ms: float

    @property
    def rounds(self) -> int:
        return len(self.ratios)

    @property
    def median(self) -> float:
        ordered = sorted(self.ratios)
        n = len(ordered)
        return (ordered[(n - 1) // 2] + ordered[n // 2]) / 2

    def verdict(self, below: float = 1.0) -> str:
        """"holds" when the whole interval is below `below`, "fails" when it is above, else "undecided"."""
        if self.high < below:
            return "holds"
        if self.low > below:
            return "fails"
        return "undecided"


def median_interval(values, confidence: float = 0.99):
    """A confidence interval for the median of `values` that assumes no distribution: the k-th smallest and the
    k-th largest value, with k the largest rank such that P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2.
    Too few values for that confidence give (-inf, inf): nothing is decided."""
    ordered, n = sorted(values), len(values)
    tail, cumulative, k = (1 - confidence) / 2, 0.0, 0
    while k < n and cumulative + math.comb(n, k) / 2 ** n <= tail:
        cumulative += math.comb(n, k) / 2 ** n
        k += 1
    if k == 0:
        return -math.inf, math.inf
    return ordered[k - 1], ordered[n - k]


def paired(timed: dict, name: str, reference: str, confidence: float = 0.99) -> PairedTiming:
    """The paired ratios of `name` to `reference` from interleaved timings {strategy: [ms per round]}."""
    a, b = timed[name], timed[reference]
    if len(a) != len(b) or not a:
        raise ValueError(_("paired timings need the same number of rounds for both, and at least one: "
                           "{name} has {n}, {reference} has {m}").format(name=name, n=len(a), reference=reference,
                                                                         m=len(b)))
    ratios = tuple(x / y for x, y in zip(a, b))
    low, high = median_interval(ratios, confidence)
    return PairedTiming(name, reference, ratios, low, high, confidence, min(a + b), max(a + b))


def until_decided(measure, name: str, reference: str, below: float = 1.0, rounds: int = 10,
                  max_rounds: int = 50, confidence: float = 0.99) -> dict:
    """Call `measure(rounds)` (which returns {strategy: [ms per round]}) and pool what it returns until the paired
    ratio of `name` to `reference` decides, for or against `below`, or `max_rounds` rounds are pooled."""
    timed: dict = {}
    while True:
        for key, values in measure(rounds).items():
            timed.setdefault(key, []).extend(values)
        p = paired(timed, name, reference, confidence)
        if p.verdict(below) != "undecided" or p.rounds >= max_rounds:
            return timed


def _load() -> str:
    """The machine's one-minute load average and its number of cores, where the system gives them."""
    try:
        return _(", load average {load:.1f} on {cores} cores").format(load=os.getloadavg()[0], cores=os.cpu_count())
    except (AttributeError, OSError):
        return ""


def claim_timing(statement: str, timing: PairedTiming, below: float = 1.0) -> str:
    """claim() for a timing: ✓ when the interval lies below `below`; one "undecided" line, and the lesson goes on,
    when it contains it; ClaimFailed naming this machine (not torch) when it lies above. Returns the verdict."""
    evidence = _("median paired ratio {median:.2f}, {percent:g}% interval {low:.2f} to {high:.2f}, {rounds} rounds"
                 ).format(median=timing.median, percent=100 * timing.confidence, low=timing.low, high=timing.high,
                          rounds=timing.rounds)
    verdict = timing.verdict(below)
    if verdict == "holds":
        print("✓ " + statement + _("  ({shown})").format(shown=evidence))
    elif verdict == "undecided":
        print(_("? {statement}: this machine's timing cannot decide ({evidence}, which contains {below:g}). Single "
                "steps took {fastest:.1f} to {slowest:.1f} ms{load}: the noise is larger than the difference, as on "
                "a busy machine, or the two take about the same time. Nothing else depends on this timing; run the "
                "cell again when the machine is quiet.").format(
            statement=statement, evidence=evidence, below=below, fastest=timing.fastest_ms,
            slowest=timing.slowest_ms, load=_load()))
    else:
        raise ClaimFailed(_("✗ {statement}: timed on this machine it does not hold ({evidence}: the interval lies "
                            "above {below:g}). This is a measurement of this machine with torch {version}, not a "
                            "rule of torch: on a quiet machine, run the cell again.").format(
            statement=statement, evidence=evidence, below=below, version=torch.__version__))
    return verdict
