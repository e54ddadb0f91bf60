"""The verdict rule: the one rule behind every verdict word of the book.

A BLEU claim is a **contrast**: a weighted sum of systems' mean scores over seeds ("CAN - Balanced" is
{CAN: +1, Balanced: -1}; "the gap narrows with twice the budget" is (CAN x2 - Balanced x2) - (CAN - Balanced),
four terms) and a **criterion** on it, a threshold (``ok(x)``: x >= -0.5, x > 0, ...). On each evaluation set
(valid, test2016, test2017 Flickr, test2017 MSCOCO) the contrast gets two intervals:

* the **seed interval**: the contrast of tokenized-BLEU means (the paper's metric) ± ``K_SPREAD`` standard
  errors, each system's seed variance divided by its number of seeds (training noise);
* the **test-set interval**: sacreBLEU's paired bootstrap pooled over seeds: ``BOOTSTRAP_SAMPLES`` resamples of
  the set's sentences (sacreBLEU's generator and seed), the *same* resampled sentences for every run of every
  system, the contrast of sacreBLEU (13a) means recomputed on each, and the central 95 % of those contrasts
  (sacreBLEU's own ``estimate_ci`` bounds) (test-set sampling noise).

On one set the criterion ``held`` where every interval lies wholly where it holds, ``did not hold`` where every
interval lies wholly where it fails, and is ``within noise`` otherwise. Over the sets (:func:`outcome`): ``held``
if it held on every set, ``did not hold`` if it failed on every set, ``mixed`` if it held on some and failed on
others, held or failed on some sets with the rest within noise (:data:`PARTLY_HELD`, :data:`PARTLY_FAILED`), and
``within noise`` where every set is. With fewer than ``MIN_SEEDS`` seeds of any system there is no seed interval:
no verdict, unless the claim reads the test-set interval alone (``judge(..., seed_interval=False)``, said so).

A **speed** claim is a ratio of two systems' tokens per second over the interleaved repeats of one timing run
(each repeat times every system once, in turn): the ratio of each repeat, and the criterion read over their
range, lowest to highest (:func:`repeat_ratios`, :func:`ratio_verdict`).

Which claims there are and which evidence each reads is declared once, in :mod:`canlib.studies.claims`; no other
module calls the functions here to reach a verdict.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from canlib.bleu import bleu_of_statistics, sentence_statistics
from canlib.io import atomic_write_bytes, cache_dir

HELD, FAILED, NOISE = "held", "did not hold", "within noise"
# decided one way on some sets and never the other, within noise on the rest; decided both ways
PARTLY_HELD, PARTLY_FAILED, MIXED = "held on some sets", "did not hold on some sets", "mixed"
NOT_RUN = "not run yet"  # a claim the scale can test whose evidence is not (all) stored
NOT_TESTED = "not tested here"  # a claim no stored evidence of this book can test
QUALITY_SCALES = ("small", "full")  # the scales whose models translate well enough for a BLEU verdict
K_SPREAD = 2.0  # the seed interval: ± this many standard errors
MIN_SEEDS = 2
ON_PAR = 0.5  # BLEU: "keeps the BLEU" / "on par" claims hold at a difference >= -ON_PAR (every claim, every chapter)
BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's default number of paired-bootstrap resamples
BOOTSTRAP_SEED = 12345  # sacreBLEU's default seed (its SACREBLEU_SEED)
EVAL_SPLITS = ("valid", "test", "test2017_flickr", "test2017_mscoco")
SPLIT_NAMES = {
    "valid": "valid",
    "test": "test2016",
    "test2017_flickr": "test2017 Flickr",
    "test2017_mscoco": "test2017 MSCOCO",
}
SPLIT_KEYS = {
    "valid": "valid",
    "test": "test",
    "test2017_flickr": "flickr",
    "test2017_mscoco": "mscoco",
}  # glue-key suffixes


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
        """Half the seed interval (``K_SPREAD`` standard errors), NaN without one."""
        return (self.seeds.high - self.seeds.low) / 2 if self.seeds else math.nan


@dataclass(frozen=True)
class Judgement:
    """A contrast judged on every evaluation set both sides were scored on."""

    sets: tuple[OnSet, ...]
    seeds: dict[str, int]

    @property
    def verdict(self) -> str:
        """The outcome over the sets (:func:`outcome`)."""
        return outcome([s.verdict for s in self.sets])

    def on(self, split: str = "test") -> OnSet:
        return next(s for s in self.sets if s.split == split)

    def count(self, verdict: str) -> int:
        return sum(s.verdict == verdict for s in self.sets)

    def values(self, prefix: str) -> dict[str, float | int | str]:
        """Plain values for a chapter to glue: ``<prefix>_<set>`` per evaluation set, ``<prefix>_pm`` (test2016's
        seed half-interval), ``<prefix>_verdict`` and ``<prefix>_sets_held|failed|noise``."""
        out: dict[str, float | int | str] = {f"{prefix}_{SPLIT_KEYS[s.split]}": float(s.value) for s in self.sets}
        out[f"{prefix}_pm"] = float(self.on("test").half_width)
        for v, key in ((HELD, "held"), (FAILED, "failed"), (NOISE, "noise")):
            out[f"{prefix}_sets_{key}"] = self.count(v)
        return out


def interval_verdict(low: float, high: float, ok: Callable[[float], bool]) -> str:
    """held if the criterion holds over the whole interval, did not hold if nowhere, else within noise.
    ``ok`` must be monotone in its argument (a threshold), so checking the ends suffices."""
    lo_ok, hi_ok = ok(low), ok(high)
    return HELD if lo_ok and hi_ok else FAILED if not lo_ok and not hi_ok else NOISE


def combine(verdicts: Sequence[str]) -> str:
    """held if every verdict held, did not hold if every one failed, else within noise: the rule that joins the
    intervals of one set."""
    if not verdicts:
        raise ValueError("no verdict to combine")
    return HELD if all(v == HELD for v in verdicts) else FAILED if all(v == FAILED for v in verdicts) else NOISE


def outcome(verdicts: Sequence[str]) -> str:
    """The sets of one claim joined: held (every set), did not hold (every set), mixed (held on some, failed on
    others), held or did not hold on some sets and within noise on the rest, or within noise (every set)."""
    if not verdicts:
        raise ValueError("no verdict to join")
    held, failed = sum(v == HELD for v in verdicts), sum(v == FAILED for v in verdicts)
    if held == len(verdicts):
        return HELD
    if failed == len(verdicts):
        return FAILED
    if held and failed:
        return MIXED
    return PARTLY_HELD if held else PARTLY_FAILED if failed else NOISE


def repeat_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """The ratio a/b of each interleaved repeat (tokens per second of two systems timed in the same repeats)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"repeat_ratios: {len(a)} and {len(b)} repeats; the same number (at least one) is needed")
    return [x / y for x, y in zip(a, b)]


def ratio_verdict(ratios: Sequence[float], ok: Callable[[float], bool]) -> str:
    """A speed criterion over the repeats' ratios: held if it holds for the lowest and the highest, did not hold
    if for neither, within noise otherwise (the interval rule over the repeats)."""
    return interval_verdict(min(ratios), max(ratios), ok)


def seed_difference(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(mean(a) - mean(b), its standard error from the two seed spreads)."""
    return seed_contrast([(1.0, a), (-1.0, b)])


def seed_contrast(terms: Sequence[tuple[float, Sequence[float]]]) -> tuple[float, float]:
    """(sum of weight x mean over seeds, its standard error): each term's seed variance over its seeds."""
    short = [len(v) for _, v in terms if len(v) < MIN_SEEDS]
    if short:
        raise ValueError(
            f"a seed interval needs at least {MIN_SEEDS} seeds per system (got {[len(v) for _, v in terms]})"
        )
    value = sum(w * statistics.fmean(v) for w, v in terms)
    se = math.sqrt(sum(w * w * statistics.variance(v) / len(v) for w, v in terms))
    return value, se


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
    *,
    seed_interval: bool = True,
) -> Judgement | None:
    """The contrast sum(weight x runs) judged on every split of ``splits`` that all terms were scored on: the
    seed interval, and the test-set interval where every run's hypotheses and the split's references (``refs``)
    are given. None where a term has fewer than ``MIN_SEEDS`` seeds (no verdict). ``seed_interval=False``: the
    test-set interval alone, for evidence of fewer seeds (every split must then have hypotheses and references)."""
    if seed_interval and any(len(r.seeds) < MIN_SEEDS for _, r in terms):
        return None
    sets = []
    for split in splits:
        if not all(split in r.scores for _, r in terms):
            continue
        if seed_interval:
            value, se = seed_contrast([(w, r.scores[split]) for w, r in terms])
            seeds = Interval(value - K_SPREAD * se, value + K_SPREAD * se)
        else:
            value, seeds = sum(w * statistics.fmean(r.scores[split]) for w, r in terms), None
            if not (refs and split in refs and all(split in r.hyps for _, r in terms)):
                raise ValueError(
                    f"{split}: the test-set interval alone needs every run's hypotheses and the references"
                )
        test_set = None
        if refs and split in refs and all(split in r.hyps for _, r in terms):
            test_set = central_95(bootstrap_contrast([(w, r.hyps[split]) for w, r in terms], refs[split], samples))
        verdict = combine([interval_verdict(i.low, i.high, ok) for i in (seeds, test_set) if i is not None])
        sets.append(OnSet(split, value, seeds, test_set, verdict))
    if not sets:
        raise ValueError(f"no evaluation set is scored for every term ({', '.join(r.label for _, r in terms)})")
    return Judgement(tuple(sets), {r.label: len(r.seeds) for _, r in terms})


def split_name(split: str) -> str:
    """A Multi30k split by the name the reader knows ("test" is test2016)."""
    return SPLIT_NAMES.get(split, split)


def describe(j: Judgement, decimals: int = 2) -> str:
    """One line per judgement: the contrast ± its seed interval on each set, the set's verdict, and how many
    sets held (for an evidence cell)."""
    parts = []
    for s in j.sets:
        boot = f", test-set [{s.test_set.low:+.{decimals}f}, {s.test_set.high:+.{decimals}f}]" if s.test_set else ""
        spread = f" ± {s.half_width:.{decimals}f}" if s.seeds else " (no seed interval)"
        parts.append(f"{split_name(s.split)} {s.value:+.{decimals}f}{spread}{boot}: {s.verdict}")
    return "; ".join(parts)
