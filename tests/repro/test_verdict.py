"""The verdict rule (repro.studies.verdict): the seed interval against Student's t written out here, the median's
order-statistic interval against the binomial, the pooled paired bootstrap against sacreBLEU itself, the joining of
the readings into five words (two opposite fake results flip the verdict)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from sacrebleu.metrics import BLEU
from sacrebleu.significance import estimate_ci

from repro.studies import verdict as v

REFS = [
    "a man rides a red bike down the street",
    "two dogs play in the green grass",
    "a woman sings on a stage",
    "children run along the sandy beach",
    "an old man reads a newspaper",
    "a cat sleeps on the warm sofa",
    "people wait for the train at night",
    "a boy throws a ball to his dog",
]
GOOD = list(REFS)  # a perfect system
BAD = [
    "a man rides a bike",
    "dogs play grass",
    "a woman on stage",
    "children run",
    "a man reads",
    "a cat sleeps",
    "people wait at night",
    "a boy throws a ball",
]


def runs(label: str, scores: list[float], hyps: list[list[str]] | None = None, split: str = "test") -> v.Runs:
    return v.Runs(label, tuple(range(1, len(scores) + 1)), {split: scores}, {split: hyps} if hyps else {})


def test_interval_verdict_reads_both_ends_of_the_interval():
    assert v.interval_verdict(0.1, 0.4, lambda d: d > 0) == v.HOLDS
    assert v.interval_verdict(-0.4, -0.1, lambda d: d > 0) == v.FAILS
    assert v.interval_verdict(-0.1, 0.4, lambda d: d > 0) == v.INCONCLUSIVE


def test_seed_contrast_is_the_weighted_mean_with_its_standard_error_and_welchs_degrees_of_freedom():
    a, b, c = [30.0, 31.0, 32.0], [29.0, 29.5], [28.0, 28.2, 28.4, 28.6]
    value, se, df = v.seed_contrast([(1.0, a), (-1.0, b), (-1.0, c)])
    assert value == pytest.approx(statistics.fmean(a) - statistics.fmean(b) - statistics.fmean(c))
    parts = [statistics.variance(a) / 3, statistics.variance(b) / 2, statistics.variance(c) / 4]
    assert se == pytest.approx(math.sqrt(sum(parts)))
    assert df == pytest.approx(sum(parts) ** 2 / (parts[0] ** 2 / 2 + parts[1] ** 2 / 1 + parts[2] ** 2 / 3))
    with pytest.raises(ValueError, match="at least 2 seeds"):
        v.seed_contrast([(1.0, [30.0]), (-1.0, b)])


def test_the_seed_interval_uses_students_t_not_two_standard_errors():
    """Two systems of 3 seeds with equal spread: Welch's degrees of freedom are 4, the 95 % quantile 2.7764451 (the
    printed table's value), so the interval is 1.39 times as wide as +- 2 s.e."""
    a, b = [30.0, 31.0, 32.0], [28.0, 29.0, 30.0]
    interval = v.seed_interval([(1.0, a), (-1.0, b)])
    se = math.sqrt(1.0 / 3 + 1.0 / 3)
    assert (interval.low, interval.high) == pytest.approx((2.0 - 2.7764451 * se, 2.0 + 2.7764451 * se), abs=1e-6)


def test_the_median_interval_holds_the_median_with_at_least_95_percent_by_the_binomial():
    """The coverage of (x_(k), x_(n+1-k)) is 1 - 2 P(Binomial(n, 1/2) <= k - 1), summed here with math.comb."""
    for n in (6, 10, 20):
        values = [float(x) for x in range(n, 0, -1)]
        low, high, coverage = v.median_interval(values)
        k = int(low)  # values are 1..n, so the k-th smallest is k
        assert high == n + 1 - k
        want = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n
        assert coverage == pytest.approx(want) and coverage >= 0.95
        wider_k = k + 1  # the next narrower interval would miss 95 %
        assert 1 - 2 * sum(math.comb(n, i) for i in range(wider_k)) / 2**n < 0.95
    assert v.median_interval([1.0, 2.0, 3.0]) is None  # three repeats cannot hold the median with 95 %


def test_the_pooled_bootstrap_is_sacrebleus_resampling_scored_by_sacrebleu(tmp_path, monkeypatch):
    """Brute force: draw the indices as sacreBLEU does, score each resampled corpus with sacreBLEU's corpus_score."""
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    samples, seed = 25, 7
    a_runs = [GOOD, GOOD[:4] + BAD[4:]]
    b_runs = [BAD, BAD[:2] + GOOD[2:], BAD]
    got = v.bootstrap_contrast([(1.0, a_runs), (-1.0, b_runs)], REFS, samples, seed)
    idx = np.random.default_rng(seed).choice(len(REFS), size=(samples, len(REFS)), replace=True)
    bleu = BLEU()

    def score(hyps, rows):
        return bleu.corpus_score([hyps[i] for i in rows], [[REFS[i] for i in rows]]).score

    want = [
        statistics.fmean(score(h, rows) for h in a_runs) - statistics.fmean(score(h, rows) for h in b_runs)
        for rows in idx
    ]
    assert got == pytest.approx(want, abs=1e-9)
    again = v.bootstrap_contrast([(1.0, a_runs), (-1.0, b_runs)], REFS, samples, seed)  # from the disk cache
    assert again == pytest.approx(want, abs=1e-9) and any(tmp_path.glob("bootstrap/*.json"))


def test_the_central_interval_is_sacrebleus_confidence_interval():
    values = np.random.default_rng(0).normal(size=1000)
    interval = v.central_95(values)
    mean, half = estimate_ci(values)
    assert interval.high - interval.low == pytest.approx(2 * half)
    assert interval.low < mean < interval.high


def test_a_verdict_flips_with_opposite_fake_results(tmp_path, monkeypatch):
    """The same claim (CAN at most 0.5 below Balanced) built from two opposite fake results: held, then not."""
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    refs = {"test": REFS}
    close = [
        (1.0, runs("can", [30.0, 30.1, 30.2], [GOOD] * 3)),
        (-1.0, runs("balanced", [30.1, 30.2, 30.3], [GOOD] * 3)),
    ]
    far = [(1.0, runs("can", [27.0, 27.1, 27.2], [BAD] * 3)), (-1.0, runs("balanced", [30.1, 30.2, 30.3], [GOOD] * 3))]
    held = v.judge(close, lambda d: d >= -0.5, refs, samples=50)
    failed = v.judge(far, lambda d: d >= -0.5, refs, samples=50)
    assert (held.verdict, failed.verdict) == (v.HOLDS, v.FAILS)
    assert failed.on("test").test_set.high < -0.5  # the bad system loses on every resample of the sentences


def test_both_intervals_must_agree_on_a_set(tmp_path, monkeypatch):
    """Seeds clear of the criterion but a test-set interval across it: inconclusive on that set."""
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    seeds_far = [
        (1.0, runs("can", [27.0, 27.1, 27.2], [GOOD] * 3)),
        (-1.0, runs("balanced", [30.1, 30.2, 30.3], [GOOD] * 3)),
    ]
    j = v.judge(seeds_far, lambda d: d >= -0.5, {"test": REFS}, samples=30)
    assert j.on("test").seeds.high < -0.5 and j.on("test").test_set.low == j.on("test").test_set.high == 0
    assert j.verdict == v.INCONCLUSIVE


def test_the_sets_combine_into_one_outcome():
    def judged(*per_set):
        scores = {split: s for split, s in zip(v.EVAL_SPLITS, per_set)}
        a = v.Runs("a", (1, 2), {k: x[0] for k, x in scores.items()})
        b = v.Runs("b", (1, 2), {k: x[1] for k, x in scores.items()})
        return v.judge([(1.0, a), (-1.0, b)], lambda d: d > 0)

    up, flat, down = ([31.0, 31.1], [30.0, 30.1]), ([30.0, 31.0], [30.5, 30.4]), ([29.0, 29.1], [30.0, 30.1])
    assert judged(up, up, up, up).verdict == v.HOLDS
    assert judged(down, down, down, down).verdict == v.FAILS
    assert judged(down, flat, flat, down).verdict == v.FAILS  # the criterion asks for every set: one failure decides
    assert judged(up, flat, up, flat).verdict == v.INCONCLUSIVE  # held on some, undecided on the rest
    assert judged(up, down, up, up).verdict == v.MIXED  # decided both ways
    assert judged(flat, flat, flat, flat).verdict == v.INCONCLUSIVE


def test_no_interval_below_two_seeds():
    one = [(1.0, runs("a", [30.0])), (-1.0, runs("b", [29.0, 29.5]))]
    assert v.judge(one, lambda d: d > 0) is None


def test_a_speed_ratio_is_read_over_the_interleaved_repeats():
    assert v.repeat_ratios([300.0, 330.0], [200.0, 300.0]) == pytest.approx([1.5, 1.1])
    with pytest.raises(ValueError, match="the same number"):
        v.repeat_ratios([1.0, 2.0], [1.0])
