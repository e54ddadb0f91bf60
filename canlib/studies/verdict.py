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
interval lies wholly where it fails, and is ``within noise`` otherwise. Over the sets: ``held`` if it held on
every set, ``did not hold`` if it failed on every set, ``within noise`` otherwise. With fewer than ``MIN_SEEDS``
seeds of any system there is no seed interval and no verdict. A chapter's verdict words are chosen from these
three outcomes (:func:`word`), never typed.
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

from canlib.io import atomic_write_bytes, cache_dir

HELD, FAILED, NOISE = "held", "did not hold", "within noise"
# within noise over the sets, but decided one way on some of them and never the other (:attr:`Judgement.detail`)
PARTLY_HELD, PARTLY_FAILED = "held on some sets, within noise on the others", "did not hold on some sets, within noise on the others"
NOT_RUN = "not run yet"  # a claim the scale can test whose seeds are not (all) stored
QUALITY_SCALES = ("small", "full")  # the scales whose models translate well enough for a BLEU verdict
K_SPREAD = 2.0  # the seed interval: ± this many standard errors
MIN_SEEDS = 2
ON_PAR = 0.5  # BLEU: "keeps the BLEU" / "on par" claims hold at a difference >= -ON_PAR (every claim, every chapter)
BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's default number of paired-bootstrap resamples
BOOTSTRAP_SEED = 12345  # sacreBLEU's default seed (its SACREBLEU_SEED)
EVAL_SPLITS = ("valid", "test", "test2017_flickr", "test2017_mscoco")
SPLIT_NAMES = {"valid": "valid", "test": "test2016", "test2017_flickr": "test2017 Flickr",
               "test2017_mscoco": "test2017 MSCOCO"}
SPLIT_KEYS = {"valid": "valid", "test": "test", "test2017_flickr": "flickr", "test2017_mscoco": "mscoco"}  # glue-key suffixes


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
        return combine([s.verdict for s in self.sets])

    @property
    def detail(self) -> str:
        """The verdict, with "within noise" told apart when some sets decided it one way and none the other."""
        held, failed = self.count(HELD), self.count(FAILED)
        if self.verdict != NOISE or bool(held) == bool(failed):
            return self.verdict
        return PARTLY_HELD if held else PARTLY_FAILED

    def on(self, split: str = "test") -> OnSet:
        return next(s for s in self.sets if s.split == split)

    def count(self, verdict: str) -> int:
        return sum(s.verdict == verdict for s in self.sets)

    def values(self, prefix: str) -> dict[str, float | int | str]:
        """Plain values for a chapter to glue: ``<prefix>_<set>`` per evaluation set, ``<prefix>_pm`` (test2016's
        seed half-interval), ``<prefix>_verdict`` and ``<prefix>_sets_held|failed|noise``."""
        out: dict[str, float | int | str] = {f"{prefix}_{SPLIT_KEYS[s.split]}": float(s.value) for s in self.sets}
        out[f"{prefix}_pm"] = float(self.on("test").half_width)
        out[f"{prefix}_test_verdict"] = self.on("test").verdict
        out[f"{prefix}_verdict"] = self.verdict
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
    intervals of one set and the sets of one claim."""
    if not verdicts:
        raise ValueError("no verdict to combine")
    return HELD if all(v == HELD for v in verdicts) else FAILED if all(v == FAILED for v in verdicts) else NOISE



def seed_difference(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(mean(a) - mean(b), its standard error from the two seed spreads)."""
    return seed_contrast([(1.0, a), (-1.0, b)])


def seed_contrast(terms: Sequence[tuple[float, Sequence[float]]]) -> tuple[float, float]:
    """(sum of weight x mean over seeds, its standard error): each term's seed variance over its seeds."""
    short = [len(v) for _, v in terms if len(v) < MIN_SEEDS]
    if short:
        raise ValueError(f"a seed interval needs at least {MIN_SEEDS} seeds per system (got {[len(v) for _, v in terms]})")
    value = sum(w * statistics.fmean(v) for w, v in terms)
    se = math.sqrt(sum(w * w * statistics.variance(v) / len(v) for w, v in terms))
    return value, se


def _sacrebleu():
    """sacreBLEU's BLEU (13a, its defaults), imported where used like :mod:`canlib.bleu` does."""
    from sacrebleu.metrics import BLEU

    return BLEU()


def _sentence_stats(metric, hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """sacreBLEU's sufficient statistics of each sentence: one row per sentence."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    return np.asarray(metric._extract_corpus_statistics(list(hyps), [list(refs)]), dtype=np.float64)


def bootstrap_contrast(terms: Sequence[tuple[float, Sequence[Sequence[str]]]], refs: Sequence[str],
                       samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
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
    metric = _sacrebleu()
    sums = (_counts(len(refs), samples, seed) @ _sentence_stats(metric, hyps, refs)).round().astype(np.int64)
    scores = [metric._compute_score_from_stats(row).score for row in sums.tolist()]
    atomic_write_bytes(json.dumps(scores).encode(), path)
    return np.array(scores)


def central_95(values: np.ndarray) -> Interval:
    """The bounds sacreBLEU's ``estimate_ci`` reads: the sorted values' 1/40 from either end."""
    ordered = np.sort(values)
    k = len(ordered) // 40
    return Interval(float(ordered[k]), float(ordered[len(ordered) - k - 1]))


def judge(terms: Sequence[tuple[float, Runs]], ok: Callable[[float], bool],
          refs: Mapping[str, Sequence[str]] | None = None, splits: Sequence[str] = EVAL_SPLITS,
          samples: int = BOOTSTRAP_SAMPLES) -> Judgement | None:
    """The contrast sum(weight x runs) judged on every split of ``splits`` that all terms were scored on: the
    seed interval always, the test-set interval where every run's hypotheses and the split's references
    (``refs``) are given. None where a term has fewer than ``MIN_SEEDS`` seeds (no verdict)."""
    if any(len(r.seeds) < MIN_SEEDS for _, r in terms):
        return None
    sets = []
    for split in splits:
        if not all(split in r.scores for _, r in terms):
            continue
        value, se = seed_contrast([(w, r.scores[split]) for w, r in terms])
        seeds = Interval(value - K_SPREAD * se, value + K_SPREAD * se)
        test_set = None
        if refs and split in refs and all(split in r.hyps for _, r in terms):
            test_set = central_95(bootstrap_contrast([(w, r.hyps[split]) for w, r in terms], refs[split], samples))
        verdict = combine([interval_verdict(i.low, i.high, ok) for i in (seeds, test_set) if i is not None])
        sets.append(OnSet(split, value, seeds, test_set, verdict))
    if not sets:
        raise ValueError(f"no evaluation set is scored for every term ({', '.join(r.label for _, r in terms)})")
    return Judgement(tuple(sets), {r.label: len(r.seeds) for _, r in terms})


def word(verdict: str | Judgement, words: Mapping[str, str]) -> str:
    """The chapter's word for a verdict: ``words`` names one for each outcome (held, did not hold, within
    noise), so the evidence picks it. Given a Judgement, its :attr:`~Judgement.detail` picks a word for
    "held on some sets" or "did not hold on some sets" where ``words`` has one, else the within-noise word."""
    missing = [v for v in (HELD, FAILED, NOISE) if v not in words]
    if missing:
        raise ValueError(f"words {dict(words)} give no word for {missing}")
    if isinstance(verdict, Judgement):
        return words.get(verdict.detail, words[verdict.verdict])
    return words[verdict]


def gap_word(closes: Judgement, narrows: Judgement) -> str:
    """What a study does to a gap, from two judgements: ``closes`` (the gap after it within the on-par margin)
    and ``narrows`` (the gap after it minus the gap before it > 0)."""
    if closes.verdict == HELD:
        return "closes the gap"
    return word(narrows, {HELD: "narrows the gap", FAILED: "does not narrow the gap",
                          NOISE: "changes the gap within noise",
                          PARTLY_HELD: "narrows the gap on some sets and within noise on the others",
                          PARTLY_FAILED: "widens the gap on some sets and within noise on the others"})


def split_name(split: str) -> str:
    """A Multi30k split by the name the reader knows ("test" is test2016)."""
    return SPLIT_NAMES.get(split, split)


def describe(j: Judgement, decimals: int = 2) -> str:
    """One line per judgement: the contrast ± its seed interval on each set, the set's verdict, and how many
    sets held (for an evidence cell)."""
    parts = []
    for s in j.sets:
        boot = f", test-set [{s.test_set.low:+.{decimals}f}, {s.test_set.high:+.{decimals}f}]" if s.test_set else ""
        parts.append(f"{split_name(s.split)} {s.value:+.{decimals}f} ± {s.half_width:.{decimals}f}{boot}: {s.verdict}")
    return "; ".join(parts)
