"""The verdict rule (canlib.studies.verdict): intervals, the pooled paired bootstrap against sacreBLEU itself, the
combination over sets (two opposite fake results flip the verdict), the test-set interval alone, and the speed rule
over interleaved repeats."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from sacrebleu.metrics import BLEU
from sacrebleu.significance import estimate_ci

from canlib.studies import verdict as v

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
    assert v.interval_verdict(0.1, 0.4, lambda d: d > 0) == v.HELD
    assert v.interval_verdict(-0.4, -0.1, lambda d: d > 0) == v.FAILED
    assert v.interval_verdict(-0.1, 0.4, lambda d: d > 0) == v.NOISE


def test_seed_contrast_is_the_weighted_mean_with_its_standard_error():
    a, b, c = [30.0, 31.0, 32.0], [29.0, 29.5], [28.0, 28.2, 28.4, 28.6]
    value, se = v.seed_contrast([(1.0, a), (-1.0, b), (-1.0, c), (1.0, b)])
    assert value == pytest.approx(statistics.fmean(a) - statistics.fmean(c))
    want = math.sqrt(statistics.variance(a) / 3 + 2 * statistics.variance(b) / 2 + statistics.variance(c) / 4)
    assert se == pytest.approx(want)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        v.seed_contrast([(1.0, [30.0]), (-1.0, b)])


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
    assert (held.verdict, failed.verdict) == (v.HELD, v.FAILED)
    assert failed.on("test").test_set.high < -0.5  # the bad system loses on every resample of the sentences


def test_both_intervals_must_agree_on_a_set(tmp_path, monkeypatch):
    """Seeds clear of the criterion but a test-set interval across it: within noise on that set."""
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    seeds_far = [
        (1.0, runs("can", [27.0, 27.1, 27.2], [GOOD] * 3)),
        (-1.0, runs("balanced", [30.1, 30.2, 30.3], [GOOD] * 3)),
    ]
    j = v.judge(seeds_far, lambda d: d >= -0.5, {"test": REFS}, samples=30)
    assert j.on("test").seeds.high < -0.5 and j.on("test").test_set.low == j.on("test").test_set.high == 0
    assert j.verdict == v.NOISE


def test_the_sets_combine_into_one_outcome():
    def judged(*per_set):
        scores = {split: s for split, s in zip(v.EVAL_SPLITS, per_set)}
        a = v.Runs("a", (1, 2), {k: x[0] for k, x in scores.items()})
        b = v.Runs("b", (1, 2), {k: x[1] for k, x in scores.items()})
        return v.judge([(1.0, a), (-1.0, b)], lambda d: d > 0)

    up, flat, down = ([31.0, 31.1], [30.0, 30.1]), ([30.0, 31.0], [30.5, 30.4]), ([29.0, 29.1], [30.0, 30.1])
    assert judged(up, up, up, up).verdict == v.HELD
    assert judged(down, down, down, down).verdict == v.FAILED
    partly = judged(up, flat, up, flat)
    assert (partly.verdict, partly.count(v.HELD)) == (v.PARTLY_HELD, 2)
    assert judged(down, flat, flat, down).verdict == v.PARTLY_FAILED  # failed on some, held on none: said so
    assert judged(up, down, up, up).verdict == v.MIXED  # decided both ways
    assert judged(flat, flat, flat, flat).verdict == v.NOISE


def test_no_verdict_below_two_seeds():
    one = [(1.0, runs("a", [30.0])), (-1.0, runs("b", [29.0, 29.5]))]
    assert v.judge(one, lambda d: d > 0) is None


def test_one_seed_is_judged_by_the_test_set_interval_alone(tmp_path, monkeypatch):
    """seed_interval=False: no seed interval, the bootstrap of the single runs decides; it needs hypotheses."""
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    terms = [(1.0, runs("a", [20.0], [BAD])), (-1.0, runs("b", [30.0], [GOOD]))]
    j = v.judge(terms, lambda d: d < 0, {"test": REFS}, samples=40, seed_interval=False)
    assert j.on("test").seeds is None and j.on("test").test_set.high < 0 and j.verdict == v.HELD
    assert j.on("test").value == pytest.approx(-10.0)
    with pytest.raises(ValueError, match="needs every run's hypotheses"):
        v.judge(
            [(1.0, runs("a", [20.0])), (-1.0, runs("b", [30.0]))], lambda d: d < 0, {"test": REFS}, seed_interval=False
        )


def test_a_speed_ratio_is_read_over_the_interleaved_repeats():
    assert v.repeat_ratios([300.0, 330.0], [200.0, 300.0]) == pytest.approx([1.5, 1.1])
    assert v.ratio_verdict([1.5, 1.1], lambda r: r > 1) == v.HELD
    assert v.ratio_verdict([1.5, 0.9], lambda r: r > 1) == v.NOISE
    assert v.ratio_verdict([0.8, 0.9], lambda r: r > 1) == v.FAILED
    with pytest.raises(ValueError, match="the same number"):
        v.repeat_ratios([1.0, 2.0], [1.0])
