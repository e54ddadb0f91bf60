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
from sacremoses import MosesTokenizer
from scipy.stats import t as student_t

from repro.studies import verdict as v
from repro.studies.evidence import Threshold

REFS = [
    "a man's red bike rides down the street, fast",
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
    "a man's bike, fast",
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


def test_the_seed_interval_is_the_weighted_mean_with_welchs_variance_and_degrees_of_freedom():
    a, b, c = [30.0, 31.0, 32.0], [29.0, 29.5], [28.0, 28.2, 28.4, 28.6]
    interval, seed_var, df = v.combined_interval(v.seed_groups([(1.0, a), (-1.0, b), (-1.0, c)]))
    value = statistics.fmean(a) - statistics.fmean(b) - statistics.fmean(c)
    assert (interval.low + interval.high) / 2 == pytest.approx(value)
    parts = [statistics.variance(a) / 3, statistics.variance(b) / 2, statistics.variance(c) / 4]
    assert seed_var == pytest.approx(sum(parts))
    assert df == pytest.approx(sum(parts) ** 2 / (parts[0] ** 2 / 2 + parts[1] ** 2 / 1 + parts[2] ** 2 / 3))
    with pytest.raises(ValueError, match="at least 2 seeds"):
        v.seed_interval([(1.0, [30.0]), (-1.0, b)])


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
    """The same claim (CAN at most 0.5 below Balanced) built from two opposite fake results: held, then not; the
    same translations for every run leave no sentence noise, so the one interval is the seed interval."""
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    refs = {"test": REFS}
    balanced = (-1.0, runs("balanced", [30.1, 30.2, 30.3], [GOOD] * 3))
    close = [(1.0, runs("can", [30.0, 30.1, 30.2], [GOOD] * 3)), balanced]
    far = [(1.0, runs("can", [27.0, 27.1, 27.2], [GOOD] * 3)), balanced]
    held = v.judge(close, lambda d: d >= -0.5, refs, samples=50)
    failed = v.judge(far, lambda d: d >= -0.5, refs, samples=50)
    assert (held.verdict, failed.verdict) == (v.HOLDS, v.FAILS)
    on = failed.on("test")
    assert on.sentence_var == 0 and (on.combined.low, on.combined.high) == pytest.approx((on.seeds.low, on.seeds.high))


def test_the_sentence_noise_widens_the_one_interval(tmp_path, monkeypatch):
    """Seeds clear of the criterion, but translations that differ sentence by sentence: the one interval holds both
    noises and crosses the bound, so the set is undecided where the seed interval alone would decide it."""
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    mixed = [GOOD[i] if i % 2 else BAD[i] for i in range(len(REFS))]
    seeds_far = [
        (1.0, runs("can", [29.0, 29.1, 29.2], [mixed, BAD, mixed])),
        (-1.0, runs("balanced", [30.1, 30.2, 30.3], [GOOD, mixed, GOOD])),
    ]
    j = v.judge(seeds_far, lambda d: d >= -0.5, {"test": REFS}, samples=200)
    on = j.on("test")
    assert on.seeds.high < -0.5 and on.sentence_var > 0
    assert on.combined.low < on.seeds.low and on.combined.high > -0.5
    assert j.verdict == v.INCONCLUSIVE


def test_no_interval_below_two_seeds():
    one = [(1.0, runs("a", [30.0])), (-1.0, runs("b", [29.0, 29.5]))]
    assert v.judge(one, lambda d: d > 0) is None


def test_a_speed_ratio_is_read_over_the_interleaved_repeats():
    assert v.repeat_ratios([300.0, 330.0], [200.0, 300.0]) == pytest.approx([1.5, 1.1])
    with pytest.raises(ValueError, match="the same number"):
        v.repeat_ratios([1.0, 2.0], [1.0])


# -- one interval, two noises, one metric ------------------------------------------------------------------------


def tok_corpus_bleu(hyps: list[str], refs: list[str]) -> float:
    """The paper's tokenized BLEU written out here: Moses-tokenized (German rules, no escaping), then sacreBLEU with
    no tokenization of its own."""
    moses = MosesTokenizer(lang="de")
    tok = [moses.tokenize(x, escape=False, return_str=True) for x in hyps]
    ref = [moses.tokenize(x, escape=False, return_str=True) for x in refs]
    return BLEU(tokenize="none", force=True).corpus_score(tok, [ref]).score


def brute_contrast(terms: list[tuple[float, list[list[str]]]], samples: int, seed: int) -> list[float]:
    """The paired bootstrap by brute force: sacreBLEU's draw of the sentence indices, every run's tokenized BLEU
    recomputed on each resampled corpus, the contrast of the seeds' means."""
    idx = np.random.default_rng(seed).choice(len(REFS), size=(samples, len(REFS)), replace=True)
    return [
        sum(
            w * statistics.fmean(tok_corpus_bleu([h[i] for i in rows], [REFS[i] for i in rows]) for h in hs)
            for w, hs in terms
        )
        for rows in idx
    ]


MIXED = [GOOD[i] if i % 2 else BAD[i] for i in range(len(REFS))]
HALF = [GOOD[i] if i < 4 else BAD[i] for i in range(len(REFS))]


def test_the_bootstrap_on_tokenized_bleu_is_sacrebleus_draw_scored_by_brute_force(tmp_path, monkeypatch):
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    terms = [(1.0, [GOOD, MIXED]), (-1.0, [BAD, HALF, MIXED])]
    got = v.bootstrap_contrast(terms, REFS, 30, 11, lang="de")
    assert got == pytest.approx(brute_contrast(terms, 30, 11), abs=1e-9)


def test_the_combined_interval_is_the_seed_variance_plus_the_sentence_variance_with_satterthwaites_t(
    tmp_path, monkeypatch
):
    """Written out here: V = var(a)/3 + var(b)/3 + var(bootstrap contrast); df = V^2 / ((var(a)/3)^2/2 +
    (var(b)/3)^2/2) (the sentence part known); the interval mean(a) - mean(b) +- t(0.975, df) sqrt(V)."""
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    a_scores, b_scores = [31.0, 32.5, 30.2], [29.0, 30.4, 29.9]
    a_hyps, b_hyps = [GOOD, MIXED, HALF], [BAD, HALF, MIXED]
    terms = [(1.0, runs("a", a_scores, a_hyps)), (-1.0, runs("b", b_scores, b_hyps))]
    on = v.judge(terms, lambda d: d > 0, {"test": REFS}, samples=60).on("test")
    sentence = statistics.variance(brute_contrast([(1.0, a_hyps), (-1.0, b_hyps)], 60, v.BOOTSTRAP_SEED))
    va, vb = statistics.variance(a_scores) / 3, statistics.variance(b_scores) / 3
    total = va + vb + sentence
    df = total**2 / (va**2 / 2 + vb**2 / 2)
    half = student_t.ppf(0.975, df) * math.sqrt(total)
    diff = statistics.fmean(a_scores) - statistics.fmean(b_scores)
    assert on.sentence_var == pytest.approx(sentence, rel=1e-9) and on.df == pytest.approx(df)
    assert (on.combined.low, on.combined.high) == pytest.approx((diff - half, diff + half))
    assert on.verdict == v.interval_verdict(diff - half, diff + half, lambda d: d > 0)


def test_runs_that_share_a_seed_are_paired_on_it():
    """1x and 2x of the same seeds: the per-seed differences, their variance over 3 and 2 degrees of freedom (the
    paired t), narrower than Welch's where the seeds move both together; unequal seeds refuse the pairing."""
    x2, x1 = [32.0, 34.0, 33.0], [29.5, 31.4, 30.6]
    terms = [(1.0, runs("x2", x2)), (-1.0, runs("x1", x1))]
    paired = v.judge(terms, lambda d: d > 0, pairs=[(0, 1)]).on("test")
    diffs = [a - b for a, b in zip(x2, x1)]
    half = 4.302652729911275 * math.sqrt(statistics.variance(diffs) / 3)  # t(0.975, 2), the printed table's
    assert (paired.combined.low, paired.combined.high) == pytest.approx(
        (statistics.fmean(diffs) - half, statistics.fmean(diffs) + half)
    )
    assert paired.df == pytest.approx(2.0)
    welch = v.judge(terms, lambda d: d > 0).on("test")
    assert paired.combined.high - paired.combined.low < welch.combined.high - welch.combined.low
    with pytest.raises(ValueError, match="paired on the seed"):
        v.judge([(1.0, runs("x2", x2)), (-1.0, runs("x1", x1[:2]))], lambda d: d > 0, pairs=[(0, 1)])


# -- which readings decide, and how they join ---------------------------------------------------------------------

UP, FLAT, DOWN = ([31.0, 31.1], [30.0, 30.1]), ([30.0, 31.0], [30.5, 30.4]), ([29.0, 29.1], [30.0, 30.1])


def on_sets(valid, test, flickr, mscoco, ok=lambda d: d > 0) -> v.Judgement:
    """A contrast of two systems of two seeds, each set given as (a's scores, b's scores)."""
    scores = dict(zip(v.EVAL_SPLITS, (valid, test, flickr, mscoco)))
    a = v.Runs("a", (1, 2), {k: x[0] for k, x in scores.items()})
    b = v.Runs("b", (1, 2), {k: x[1] for k, x in scores.items()})
    return v.judge([(1.0, a), (-1.0, b)], ok)


def test_the_validation_set_is_shown_never_judged():
    for tests in ((UP, UP, UP), (DOWN, DOWN, DOWN), (UP, FLAT, UP), (DOWN, FLAT, FLAT)):
        words = {on_sets(valid, *tests).verdict for valid in (UP, FLAT, DOWN)}
        assert len(words) == 1, tests  # the validation set alone changes nothing
        j = on_sets(DOWN, *tests)
        assert not j.on("valid").decides and j.deciding.split != "valid"
    assert on_sets(DOWN, FLAT, FLAT, FLAT).verdict == v.INCONCLUSIVE  # once decided "does not hold" by valid alone


def test_the_test_sets_join_symmetrically():
    assert on_sets(FLAT, UP, UP, UP).verdict == v.HOLDS
    assert on_sets(FLAT, DOWN, DOWN, DOWN).verdict == v.FAILS
    assert on_sets(FLAT, DOWN, FLAT, FLAT).verdict == v.INCONCLUSIVE  # one failing set among undecided ones
    assert on_sets(FLAT, UP, FLAT, FLAT).verdict == v.INCONCLUSIVE  # as one holding set
    assert on_sets(FLAT, DOWN, UP, FLAT).verdict == v.MIXED
    assert on_sets(FLAT, DOWN, UP, UP).verdict == v.MIXED
    assert v.outcome([v.FAILS, v.INCONCLUSIVE]) == v.INCONCLUSIVE and v.outcome([v.FAILS] * 3) == v.FAILS


def test_the_deciding_reading_is_the_test_set_nearest_the_bound():
    near = ([30.6, 30.7], [30.0, 30.1])  # +0.6, the seed interval nearest 0 of the three
    j = on_sets(DOWN, UP, near, UP, ok=Threshold(">", 0.0))
    assert j.verdict == v.HOLDS and j.deciding.split == "test2017_flickr"
    k = on_sets(UP, UP, FLAT, UP, ok=Threshold(">", 0.0))
    assert k.verdict == v.INCONCLUSIVE and k.deciding.split == "test2017_flickr"  # the set that stays undecided


def test_an_equivalence_claim_is_two_one_sided_tests():
    within = v.Within(0.5)
    assert v.interval_verdict(-0.4, 0.3, within) == v.HOLDS
    assert v.interval_verdict(-1.2, -0.6, within) == v.FAILS  # wholly below the margin
    assert v.interval_verdict(0.6, 0.9, within) == v.FAILS  # wholly above it: not "within" either
    assert v.interval_verdict(-0.7, 0.2, within) == v.INCONCLUSIVE
    assert v.interval_verdict(-0.3, 0.7, within) == v.INCONCLUSIVE  # a one-sided ">= -0.5" would say holds
    assert v.interval_verdict(-0.3, 0.7, lambda d: d >= -0.5) == v.HOLDS
    wide = ([30.0, 30.2], [30.1, 30.3])  # -0.1 +- t(0.975, 2) x sqrt(0.02/2 + 0.02/2) = -0.1 +- 0.61
    assert on_sets(FLAT, wide, wide, wide, ok=within).verdict == v.INCONCLUSIVE
    tight = ([30.0, 30.0001], [30.1, 30.1001])
    assert on_sets(FLAT, tight, tight, tight, ok=within).verdict == v.HOLDS


# -- how many seeds would settle it --------------------------------------------------------------------------------


def test_seeds_to_settle_solves_the_formula_written_out_here():
    """Two systems of seed s.d. s: the fewest n with t(0.975, 2(n - 1)) s sqrt(2/n) < d (Welch's degrees of freedom
    with equal spreads), d the observed difference's distance from the bound."""
    s, value, ok = 0.6, -0.7, Threshold("<", 0.0)
    by_hand = next(n for n in range(2, 1000) if student_t.ppf(0.975, 2 * (n - 1)) * s * math.sqrt(2 / n) < 0.7)
    assert v.seeds_to_settle(value, [s * s, s * s], ok) == by_hand == 7
    # unequal spreads: Welch's degrees of freedom (n - 1)(a + b)^2 / (a^2 + b^2)
    a, b = 0.5**2, 0.9**2
    welch = next(
        n
        for n in range(2, 1000)
        if student_t.ppf(0.975, (n - 1) * (a + b) ** 2 / (a * a + b * b)) * math.sqrt((a + b) / n) < 0.7
    )
    assert v.seeds_to_settle(value, [a, b], ok) == welch
    # an equivalence margin: the distance to its nearer end
    assert v.seeds_to_settle(-0.2, [s * s, s * s], v.Within(0.5)) == v.seeds_to_settle(-0.3 + 0.0, [s * s] * 2, ok)
    # on the bound, or within the sentences' own noise: no number of seeds
    assert v.seeds_to_settle(0.0, [s * s, s * s], ok) is None
    assert v.seeds_to_settle(value, [s * s, s * s], ok, sentence_var=(0.7 / 1.9) ** 2) is None


def test_a_set_no_seeds_settle_is_named_with_its_distance_and_its_sentences_noise_alone():
    """Where the test sentences' noise alone is wider than the distance to the bound, the reason names the set, that
    distance and that noise (1.96 sentence s.d.), and no other number: its value is the sets' sentence's."""
    sd = 0.26  # the sentences' s.d.: their noise 1.96 x 0.26 = 0.51 is wider than the distance 0.16
    on = v.OnSet("test2017_flickr", -0.16, None, None, v.INCONCLUSIVE, sentence_var=sd * sd, spreads=(0.04, 0.04))
    n, _, why = v.settle_sets([on], Threshold("<", 0.0))
    assert n is None
    assert why.startswith("test2017 Flickr lies 0.16 from the bound, ")
    assert f"(+-{1.959963984540054 * sd:.2f})" in why and "-0.16" not in why, why
