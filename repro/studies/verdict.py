"""The verdict rule: the one rule behind every verdict word of the book, and its statistics.

**Five words** (each defined in :data:`repro.studies.evidence.MEANINGS`). A claim is judged on several
readings (evaluation sets, GPU runs, decoder layers, directions). Each reading holds, does not hold or is inconclusive
where its interval lies wholly where the criterion holds, wholly where it fails, or across it; :func:`outcome` joins
the readings.

**BLEU.** A BLEU claim is a **contrast**, a weighted sum of systems' mean scores over seeds ("CAN - Balanced" is
{CAN: +1, Balanced: -1}), with a threshold criterion. On each evaluation set it gets two 95 % intervals:

* the **seed interval** (training noise): the contrast of tokenized-BLEU means (the paper's metric) ± Student's t
  quantile times its standard error, with Welch-Satterthwaite degrees of freedom (with 3 seeds a system the quantile
  is about 3 to 4, not 2: :func:`seed_interval`);
* the **test-set interval** (the sampling noise of the sentences): sacreBLEU's paired bootstrap pooled over seeds,
  the same resampled sentences for every run, the central 95 % of the recomputed contrasts (sacreBLEU's
  ``estimate_ci`` bounds).

A set holds where both intervals lie wholly where the criterion holds, fails where both lie wholly where it fails,
and is inconclusive otherwise.

**Speed.** A speed claim is a ratio of two systems' tokens per second, one ratio per interleaved repeat (each repeat
times every system once, in turn). **The unit of a speed measurement is a GPU run**: repeats inside one run share its
machine, driver, clocks and load, and the spread between runs is the larger noise. The GPU runs that timed the same
decoder code are pooled, and a claim is read three ways:

* **within runs**: the **median of all the runs' per-repeat ratios** and its distribution-free interval from the
  order statistics (:func:`median_interval`: at least 95 % for any distribution of the ratios; with 10 repeats the
  2nd to the 9th smallest);
* **each run alone**: its own median and interval (a run that holds beside one that fails makes the claim mixed);
* **across runs**: each run's median ratio, their range, and from 3 runs on the 95 % Student's t interval of the mean
  log ratio over runs, exponentiated (:func:`runs_interval`).

**The speed standard asks for 3 runs** of the same decoder code (each of at least 10 interleaved repeats of at least
1 s): below it a claim is inconclusive whatever its intervals say, and its evidence names its number of runs ("1 GPU
run"). At the standard it holds where the within-run and the across-run intervals both lie where the criterion
holds, fails where both lie where it fails, and is inconclusive otherwise. Each claim is decided by one reading,
eager (every kernel launched by the host) or from CUDA graphs (the claims registry's ``mode``), which its evidence
names; the other reading is judged the same way and shown beside it, never deciding.

Which claims there are and which evidence each reads is declared once, in :mod:`repro.studies.claims`; the
judges (:mod:`repro.studies.judges`) call the functions here.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from canlib.bleu import bleu_of_statistics, sentence_statistics
from canlib.io import atomic_write_bytes, cache_dir

HOLDS, FAILS, MIXED, INCONCLUSIVE, NOT_RUN = "holds", "does not hold", "mixed", "inconclusive", "not run"
STATES = (HOLDS, FAILS, MIXED, INCONCLUSIVE, NOT_RUN)
CONFIDENCE = 0.95  # every interval of the book: seeds, test sentences, repeats
QUALITY_SCALES = ("small", "full")  # the scales whose models translate well enough for a BLEU verdict
ON_PAR = 0.5  # BLEU: "keeps the BLEU" / "on par" claims hold at a difference >= -ON_PAR (every claim, every chapter)
BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's default number of paired-bootstrap resamples
BOOTSTRAP_SEED = 12345  # sacreBLEU's default seed (its SACREBLEU_SEED)
SPLITS = {  # each evaluation set: the name the reader knows, and its glue-key suffix
    "valid": ("valid", "valid"),
    "test": ("test2016", "test"),
    "test2017_flickr": ("test2017 Flickr", "flickr"),
    "test2017_mscoco": ("test2017 MSCOCO", "mscoco"),
}
EVAL_SPLITS = tuple(SPLITS)


@dataclass(frozen=True)
class Runs:
    """One system in one setting: per evaluation set, its tokenized BLEU per seed and (where stored) each seed's
    hypotheses in the same seed order; ``files``: where the runs are stored, for provenance."""

    label: str
    seeds: tuple[int, ...]
    scores: Mapping[str, Sequence[float]]
    hyps: Mapping[str, Sequence[Sequence[str]]] = field(default_factory=dict)
    files: tuple[str, ...] = ()

    def mean(self, split: str = "test") -> float:
        return statistics.fmean(self.scores[split])

    def sd(self, split: str = "test") -> float:
        return statistics.stdev(self.scores[split]) if len(self.scores[split]) > 1 else math.nan


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class OnSet:
    """The contrast on one evaluation set: its value (tokenized BLEU), both intervals and the set's verdict."""

    split: str
    value: float
    seeds: Interval | None
    test_set: Interval | None
    verdict: str

    @property
    def half_width(self) -> float:
        """Half the seed interval, NaN without one."""
        return (self.seeds.high - self.seeds.low) / 2 if self.seeds else math.nan


@dataclass(frozen=True)
class Judgement:
    """A contrast judged on every evaluation set both sides were scored on."""

    sets: tuple[OnSet, ...]

    @property
    def verdict(self) -> str:
        """The outcome over the sets (:func:`outcome`)."""
        return outcome([s.verdict for s in self.sets])

    def on(self, split: str = "test") -> OnSet:
        return next(s for s in self.sets if s.split == split)

    def values(self, prefix: str) -> dict[str, float | int | str]:
        """Plain values for a chapter to glue: ``<prefix>_<set>`` per evaluation set, ``<prefix>_pm`` (test2016's
        seed half-interval), ``<prefix>_verdict`` and ``<prefix>_sets_held|failed|noise``."""
        out: dict[str, float | int | str] = {f"{prefix}_{SPLITS[s.split][1]}": float(s.value) for s in self.sets}
        out[f"{prefix}_pm"] = float(self.on("test").half_width)
        for v, key in ((HOLDS, "held"), (FAILS, "failed"), (INCONCLUSIVE, "noise")):
            out[f"{prefix}_sets_{key}"] = sum(s.verdict == v for s in self.sets)
        return out


def interval_verdict(low: float, high: float, ok: Callable[[float], bool]) -> str:
    """holds if the criterion holds over the whole interval, does not hold if nowhere, else inconclusive. ``ok`` must
    be monotone in its argument (a threshold), so checking the ends suffices."""
    lo_ok, hi_ok = ok(low), ok(high)
    return HOLDS if lo_ok and hi_ok else FAILS if not lo_ok and not hi_ok else INCONCLUSIVE


def combine(verdicts: Sequence[str]) -> str:
    """The intervals of one reading joined: holds if every one holds, does not hold if every one fails."""
    if not verdicts:
        raise ValueError("no verdict to combine")
    return HOLDS if all(v == HOLDS for v in verdicts) else FAILS if all(v == FAILS for v in verdicts) else INCONCLUSIVE


def outcome(verdicts: Sequence[str]) -> str:
    """The readings of one claim joined (the module docstring): holds, does not hold, mixed or inconclusive."""
    if not verdicts:
        raise ValueError("no verdict to join")
    held, failed = sum(v == HOLDS for v in verdicts), sum(v == FAILS for v in verdicts)
    if held and failed:
        return MIXED
    if failed:
        return FAILS
    return HOLDS if held == len(verdicts) else INCONCLUSIVE


def seed_contrast(terms: Sequence[tuple[float, Sequence[float]]]) -> tuple[float, float, float]:
    """(sum of weight x mean over seeds, its standard error, Welch-Satterthwaite degrees of freedom): each term's
    seed variance over its seeds."""
    if any(len(v) < 2 for _, v in terms):
        raise ValueError(f"a seed interval needs at least 2 seeds per system (got {[len(v) for _, v in terms]})")
    value = sum(w * statistics.fmean(v) for w, v in terms)
    parts = [w * w * statistics.variance(v) / len(v) for w, v in terms]
    var = sum(parts)
    tails = sum(p * p / (len(v) - 1) for p, (_, v) in zip(parts, terms))
    df = var * var / tails if tails > 0 else math.inf
    return value, math.sqrt(var), df


def seed_interval(terms: Sequence[tuple[float, Sequence[float]]], confidence: float = CONFIDENCE) -> Interval:
    """The contrast's ``confidence`` interval over seeds: ± Student's t (Welch's degrees of freedom) x its s.e."""
    from scipy.stats import t

    value, se, df = seed_contrast(terms)
    half = float(t.ppf(0.5 + confidence / 2, df)) * se if se > 0 else 0.0
    return Interval(value - half, value + half)


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float] | None:
    """The narrowest symmetric order-statistic interval (x_(k), x_(n+1-k)) that holds the median of the distribution
    the values were drawn from with at least ``confidence`` (binomial, any continuous distribution), and its exact
    coverage; None where n is too small for any (fewer than 6 values at 95 %)."""
    from scipy.stats import binom

    xs, n = sorted(values), len(values)
    best = None
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * float(binom.cdf(k - 1, n, 0.5))
        if coverage >= confidence:
            best = (xs[k - 1], xs[n - k], coverage)
    return best


def repeat_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """The ratio a/b of each interleaved repeat (tokens per second of two systems timed in the same repeats)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"repeat_ratios: {len(a)} and {len(b)} repeats; the same number (at least one) is needed")
    return [x / y for x, y in zip(a, b)]


def runs_interval(
    medians: Sequence[float], confidence: float = CONFIDENCE, log: bool = True
) -> tuple[float, float] | None:
    """The ``confidence`` interval over GPU runs of the typical ratio: exp(mean ± t(n-1) x s.e.) of the runs' log
    median ratios (a ratio's noise is a factor, so it is averaged in logs; ``log=False``: of the medians themselves,
    for a difference of ratios); None below 3 runs, where the t quantile (12.7 with 2) leaves no usable interval."""
    from scipy.stats import t

    if len(medians) < 3:
        return None
    xs = [math.log(m) for m in medians] if log else list(medians)
    half = float(t.ppf(0.5 + confidence / 2, len(xs) - 1)) * statistics.stdev(xs) / math.sqrt(len(xs))
    low, high = statistics.fmean(xs) - half, statistics.fmean(xs) + half
    return (math.exp(low), math.exp(high)) if log else (low, high)


def runs_word(n: int) -> str:
    """``1 GPU run``, ``2 GPU runs``: how many runs a speed reading rests on, as its evidence says it."""
    return f"{n} GPU run{'' if n == 1 else 's'}"


def speed_word(
    rows: Sequence[dict[str, Any]], ok: Callable[[float], bool], least_runs: int, log: bool = True
) -> tuple[str, dict[str, Any]]:
    """The speed rule (the module docstring) on the readings of one decoder code, one per GPU run (``ratios``: its
    per-repeat ratios; ``meets``: the per-run standard): the word, and what it read (``pooled``: the within-run
    reading of all repeats; ``medians``: each run's median; ``across``: the interval over runs, None below 3 runs).
    Each row gains its own ``value``, ``interval``, ``range`` and ``verdict``. Below ``least_runs`` runs, or with a
    run below its per-run standard, the word is inconclusive whatever the intervals say. ``log=False``: the readings
    are differences (the batch curve), averaged over runs as they are."""

    def word_of(interval: tuple[float, float] | None) -> str:
        return interval_verdict(*interval, ok) if interval else INCONCLUSIVE

    for row in rows:
        own = ratio_reading(row["ratios"])
        row |= {"value": own["median"], "interval": own["interval"], "range": own["range"]}
        row["verdict"] = word_of(own["interval"])
    pooled = ratio_reading([x for row in rows for x in row["ratios"]])
    medians = [row["value"] for row in rows]
    across = runs_interval(medians, log=log)
    within = word_of(pooled["interval"])
    meets = len(rows) >= least_runs and all(row["meets"] for row in rows)
    if not meets:
        word = INCONCLUSIVE
    elif {HOLDS, FAILS} <= {row["verdict"] for row in rows}:
        word = MIXED
    else:
        word = combine([within, word_of(across)])
    return word, {"pooled": pooled, "within": within, "medians": medians, "across": across, "meets": meets}


def bootstrap_contrast(
    terms: Sequence[tuple[float, Sequence[Sequence[str]]]],
    refs: Sequence[str],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> np.ndarray:
    """The contrast of sacreBLEU means on each of ``samples`` resamples of the sentences, the same resampled
    sentences for every run of every term (sacreBLEU's paired bootstrap, pooled over seeds)."""
    refs = tuple(refs)
    out = np.zeros(samples)
    for weight, runs in terms:
        out += weight * np.mean([_resampled(tuple(hyps), refs, samples, seed) for hyps in runs], axis=0)
    return out


@lru_cache(maxsize=16)
def _counts(n: int, samples: int, seed: int) -> np.ndarray:
    """How often each of ``n`` sentences is drawn in each resample, drawn as sacreBLEU draws its indices."""
    idx = np.random.default_rng(seed).choice(n, size=(samples, n), replace=True)
    counts = np.zeros((samples, n))
    np.add.at(counts, (np.arange(samples)[:, None], idx), 1.0)
    return counts


@lru_cache(maxsize=1024)
def _resampled(hyps: tuple[str, ...], refs: tuple[str, ...], samples: int, seed: int) -> np.ndarray:
    """One run's sacreBLEU on each resample. A run appears in many contrasts and chapters, so its scores are
    kept per process and on disk (``cache_dir()/bootstrap``, keyed by the sentences, the draw and sacreBLEU's
    version)."""
    import sacrebleu

    digest = hashlib.sha256(json.dumps([hyps, refs, samples, seed, sacrebleu.__version__]).encode()).hexdigest()[:20]
    path = cache_dir() / "bootstrap" / f"{digest}.json"
    if path.is_file():
        return np.array(json.loads(path.read_text(encoding="utf-8")))
    stats = np.asarray(sentence_statistics(list(hyps), list(refs)), dtype=np.float64)
    sums = (_counts(len(refs), samples, seed) @ stats).round().astype(np.int64)
    scores = [bleu_of_statistics(row) for row in sums.tolist()]
    atomic_write_bytes(json.dumps(scores).encode(), path)
    return np.array(scores)


def central_95(values: np.ndarray) -> Interval:
    """The bounds sacreBLEU's ``estimate_ci`` reads: the sorted values' 1/40 from either end."""
    ordered = np.sort(values)
    k = len(ordered) // 40
    return Interval(float(ordered[k]), float(ordered[len(ordered) - k - 1]))


def judge(
    terms: Sequence[tuple[float, Runs]],
    ok: Callable[[float], bool],
    refs: Mapping[str, Sequence[str]] | None = None,
    splits: Sequence[str] = EVAL_SPLITS,
    samples: int = BOOTSTRAP_SAMPLES,
) -> Judgement | None:
    """The contrast sum(weight x runs) judged on every split of ``splits`` that all terms were scored on: the seed
    interval, and the test-set interval where every run's hypotheses and the split's references (``refs``) are
    given. None where a term has a single seed (no seed interval)."""
    if any(len(r.seeds) < 2 for _, r in terms):
        return None
    sets = []
    for split in splits:
        if not all(split in r.scores for _, r in terms):
            continue
        value = sum(w * statistics.fmean(r.scores[split]) for w, r in terms)
        seeds = seed_interval([(w, r.scores[split]) for w, r in terms])
        test_set = None
        if refs and split in refs and all(split in r.hyps for _, r in terms):
            test_set = central_95(bootstrap_contrast([(w, r.hyps[split]) for w, r in terms], refs[split], samples))
        verdict = combine([interval_verdict(i.low, i.high, ok) for i in (seeds, test_set) if i is not None])
        sets.append(OnSet(split, value, seeds, test_set, verdict))
    if not sets:
        raise ValueError(f"no evaluation set is scored for every term ({', '.join(r.label for _, r in terms)})")
    return Judgement(tuple(sets))


def split_name(split: str) -> str:
    """A Multi30k split by the name the reader knows ("test" is test2016)."""
    return SPLITS[split][0] if split in SPLITS else split


def describe(j: Judgement) -> str:
    """One line per judgement: the contrast with its seed interval on each set, the test-set interval and the set's
    verdict (for an evidence cell)."""
    parts = []
    for s in j.sets:
        boot = f", test-set [{s.test_set.low:+.2f}, {s.test_set.high:+.2f}]" if s.test_set else ""
        parts.append(
            f"{split_name(s.split)} {s.value:+.2f} seeds [{s.seeds.low:+.2f}, {s.seeds.high:+.2f}]{boot}: {s.verdict}"
        )
    return "; ".join(parts)


def ratio_reading(ratios: Sequence[float]) -> dict[str, Any]:
    """One ratio of two systems' speeds, as every speed claim and page reads it: the median of its per-repeat
    ratios, the order-statistic 95 % interval of that median (None with fewer than 6 repeats) with its exact
    coverage, the lowest and highest ratio, and their number."""
    if not ratios:
        raise ValueError("ratio_reading: no per-repeat ratio")
    ci = median_interval(ratios)
    return {
        "median": statistics.median(ratios),
        "interval": (ci[0], ci[1]) if ci else None,
        "coverage": ci[2] if ci else None,
        "range": (min(ratios), max(ratios)),
        "n": len(ratios),
    }


def difference_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """The 95 % seed interval of mean(a) - mean(b) (Student's t, Welch's degrees of freedom), the interval every BLEU
    claim reads, for a figure that judges nothing; None where a side has fewer than 2 seeds."""
    if min(len(a), len(b)) < 2:
        return None
    ci = seed_interval([(1.0, a), (-1.0, b)])
    return ci.low, ci.high
