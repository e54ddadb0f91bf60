"""The verdict rule: the one rule behind every verdict word of the book, and its statistics.

**Five words** (each defined in :data:`repro.studies.evidence.MEANINGS`). A claim is judged on several
readings (evaluation sets, GPU runs, decoder layers, directions). Each reading holds, does not hold or is inconclusive
where its interval lies wholly where the criterion holds, wholly where it fails, or across it; :func:`outcome` joins
the readings symmetrically: holds where every reading holds, does not hold where every reading fails, mixed where some
hold and some fail, inconclusive otherwise.

**BLEU.** A BLEU claim is a **contrast**, a weighted sum of systems' mean scores over seeds ("CAN - Balanced" is
{CAN: +1, Balanced: -1}), judged on **one 95 % interval per evaluation set that holds both noises**, on one metric,
the paper's tokenized BLEU (:func:`judge`):

* the **seed variance** of the contrast (training noise): each system's variance over its seeds over their number,
  Welch's sum; runs that share a seed and a training trajectory (the same system at 1x and 2x the updates: the 2x run
  continues the 1x run's first 1,200 updates exactly) are **paired on the seed**: their per-seed difference is one
  term, with its own variance;
* the **sentence variance** (sampling noise of the test sentences): the variance of the contrast over 1,000
  resamples of the sentences, drawn as sacreBLEU's paired bootstrap draws them (its generator and seed), the same
  resampled sentences for every run of every system (**paired on the sentences**), each run's corpus BLEU recomputed
  from per-sentence tokenized-BLEU statistics (:func:`bootstrap_contrast`);
* the **combined interval**: value +- t x sqrt(seed variance + sentence variance), Student's t at the
  Welch-Satterthwaite degrees of freedom of the sum, the sentence part counted as known (its resamples are many),
  so with no sentence variance it is the seed interval and with no seed variance the normal one. The seed variance
  is measured on the one test set, so it already holds part of the seed-by-sentence interaction: the sum is, if
  anything, a little wide.

The seed interval alone and the bootstrap's central 95 % stay beside it as readings to show, never to judge.

**Test sets decide.** The validation set chose the checkpoints and the training's stopping: it is shown, never
judged (:data:`DECIDING`). **Equivalence** claims ("within 0.5", "keeps the BLEU") are two one-sided tests
(:class:`Within`): the interval must lie inside the margin to hold and wholly outside it to fail, each side at
2.5 %, the same 95 % interval every claim reads.

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

**What would settle it.** :func:`seeds_to_settle` solves t(0.975, df) x sqrt(s^2 x sum(w^2) / n + sentence variance)
< d for the seeds n per system, d the distance of the observed contrast from the criterion's bound and s the
observed seed s.d.s (for a pair of systems t x s x sqrt(2/n) < d, s their root mean square).

Which claims there are and which evidence each reads is declared once, in :mod:`repro.studies.claims`; each kind
of evidence's ``judge`` (:mod:`repro.studies.judges`) calls the functions here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from repro.studies.bootstrap import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, bootstrap_contrast  # noqa: F401 (the rule's names)

HOLDS, FAILS, MIXED, INCONCLUSIVE, NOT_RUN = "holds", "does not hold", "mixed", "inconclusive", "not run"
STATES = (HOLDS, FAILS, MIXED, INCONCLUSIVE, NOT_RUN)
CONFIDENCE = 0.95  # every interval of the book: seeds, test sentences, repeats
QUALITY_SCALES = ("small", "full")  # the scales whose models translate well enough for a BLEU verdict
ON_PAR = 0.5  # BLEU: "keeps the BLEU" / "on par" claims hold at a difference >= -ON_PAR (every claim, every chapter)
SPLITS = {  # each evaluation set: the name the reader knows, and its glue-key suffix
    "valid": ("valid", "valid"),
    "test": ("test2016", "test"),
    "test2017_flickr": ("test2017 Flickr", "flickr"),
    "test2017_mscoco": ("test2017 MSCOCO", "mscoco"),
}
EVAL_SPLITS = tuple(SPLITS)
DECIDING = tuple(k for k in SPLITS if k != "valid")  # the test sets; valid chose the checkpoints: shown, not judged
MAX_SEEDS = 100  # beyond this many seeds a system, "no number of seeds at this scale" settles a claim


@dataclass(frozen=True)
class Within:
    """An equivalence criterion, |x| <= bound (the margin), judged as two one-sided tests (Schuirmann's TOST): it
    holds where the interval lies inside the margin and fails where it lies wholly outside it."""

    bound: float
    op: ClassVar[str] = "within"

    def __call__(self, x: float) -> bool:
        return abs(x) <= self.bound

    def text(self, what: str) -> str:
        return f"|{what}| <= {self.bound:g} (two one-sided tests)"


@dataclass(frozen=True)
class Runs:
    """One system in one setting: per evaluation set, its tokenized BLEU per seed and (where stored) each seed's
    hypotheses in the same seed order; ``files``: where the runs are stored, for provenance; ``lang``: the target
    language, whose Moses tokenizer the tokenized BLEU of their hypotheses is scored with."""

    label: str
    seeds: tuple[int, ...]
    scores: Mapping[str, Sequence[float]]
    hyps: Mapping[str, Sequence[Sequence[str]]] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    lang: str = "de"

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
    """The contrast on one evaluation set: its value (tokenized BLEU), the one interval it is judged on
    (``combined``: seeds and sentences), the two parts shown beside it, the variances behind them, its degrees of
    freedom, whether the set decides (a test set) and the set's verdict."""

    split: str
    value: float
    seeds: Interval | None
    test_set: Interval | None
    verdict: str
    combined: Interval | None = None
    seed_var: float = math.nan
    sentence_var: float = math.nan
    df: float = math.nan
    decides: bool = True
    spreads: tuple[float, ...] = ()  # each independent seed part's variance over its seeds (seeds_to_settle)

    @property
    def half_width(self) -> float:
        """Half the seed interval, NaN without one."""
        return (self.seeds.high - self.seeds.low) / 2 if self.seeds else math.nan

    @property
    def interval(self) -> Interval | None:
        """The interval the set is judged on: the combined one, else (no hypotheses stored) the seed interval."""
        return self.combined or self.seeds

    def row(self) -> dict[str, Any]:
        """The set as data (a verdict's JSON): its value, the one interval it is judged on with its parts and
        their variances, its degrees of freedom, whether it decides, and its verdict."""
        pair = lambda i: [i.low, i.high] if i else None  # noqa: E731
        return {
            "set": split_name(self.split),
            "split": self.split,
            "value": self.value,
            "interval": pair(self.interval),
            "seed_interval": pair(self.seeds),
            "test_set_interval": pair(self.test_set),
            "seed_var": self.seed_var,
            "sentence_var": self.sentence_var,
            "df": self.df,
            "decides": self.decides,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class Judgement:
    """A contrast judged on every evaluation set both sides were scored on."""

    sets: tuple[OnSet, ...]
    pairing: str = ""  # how the runs are paired, in words (seeds and sentences)
    criterion: Callable[[float], bool] | None = field(default=None, compare=False, repr=False)

    @property
    def verdict(self) -> str:
        """The outcome over the deciding sets, the test sets (:func:`outcome`)."""
        return outcome([s.verdict for s in self.sets if s.decides])

    @property
    def deciding(self) -> OnSet:
        """The reading that decided the verdict, among the deciding sets: for holds or does not hold the one whose
        interval lies nearest the criterion (the first to turn); for inconclusive an undecided one (test2016 first);
        for mixed test2016 (the paper's set) or the first; a verdict's row names it."""
        verdict = self.verdict
        first = sorted([s for s in self.sets if s.decides] or self.sets, key=lambda s: s.split != "test")
        if verdict in (HOLDS, FAILS):
            agree = [s for s in first if s.verdict == verdict]
            return min(agree, key=lambda s: gap(s.interval, self.criterion) if s.interval else math.inf)
        if verdict == INCONCLUSIVE:
            return next((s for s in first if s.verdict == INCONCLUSIVE), first[0])
        return first[0]

    def on(self, split: str = "test") -> OnSet:
        return next(s for s in self.sets if s.split == split)

    def values(self, prefix: str) -> dict[str, float | int | str]:
        """Plain values for a chapter to glue: ``<prefix>_<set>`` per evaluation set, ``<prefix>_pm`` (test2016's
        seed half-interval), ``<prefix>_verdict`` and ``<prefix>_sets_held|failed|noise``."""
        out: dict[str, float | int | str] = {f"{prefix}_{SPLITS[s.split][1]}": float(s.value) for s in self.sets}
        out[f"{prefix}_pm"] = float(self.on("test").half_width)
        for v, key in ((HOLDS, "held"), (FAILS, "failed"), (INCONCLUSIVE, "noise")):
            out[f"{prefix}_sets_{key}"] = sum(s.verdict == v for s in self.sets if s.decides)
        return out


def interval_verdict(low: float, high: float, ok: Callable[[float], bool]) -> str:
    """holds if the criterion holds over the whole interval, does not hold if nowhere, else inconclusive. ``ok`` is
    a threshold (monotone, so the ends decide) or an equivalence margin (:class:`Within`: two one-sided tests, the
    interval inside the margin to hold, wholly above or wholly below it to fail)."""
    if ok(low) and ok(high):
        return HOLDS
    outside = high < -ok.bound or low > ok.bound if isinstance(ok, Within) else not ok(low) and not ok(high)
    return FAILS if outside else INCONCLUSIVE


def bounds(ok: Callable[[float], bool] | None) -> tuple[float, ...]:
    """Where a criterion changes its answer: a threshold's bound, an equivalence margin's two ends; none for a bare
    function."""
    if isinstance(ok, Within):
        return (-ok.bound, ok.bound)
    bound = getattr(ok, "bound", None)
    return () if bound is None else (float(bound),)


def gap(interval: Interval, ok: Callable[[float], bool] | None) -> float:
    """How far the interval lies from the criterion's nearest bound (0 where it crosses one; inf without bounds)."""
    return min((max(interval.low - b, b - interval.high, 0.0) for b in bounds(ok)), default=math.inf)


def outcome(verdicts: Sequence[str]) -> str:
    """The readings of one claim joined symmetrically: holds where every reading holds, does not hold where every
    reading fails, mixed where some hold and some fail, inconclusive otherwise (one failing reading among undecided
    ones decides nothing, as one holding reading does not)."""
    if not verdicts:
        raise ValueError("no verdict to join")
    held, failed = sum(v == HOLDS for v in verdicts), sum(v == FAILS for v in verdicts)
    if held and failed:
        return MIXED
    if held == len(verdicts):
        return HOLDS
    return FAILS if failed == len(verdicts) else INCONCLUSIVE


def seed_interval(terms: Sequence[tuple[float, Sequence[float]]]) -> Interval:
    """The contrast's 95 % interval over seeds: +- Student's t (Welch's degrees of freedom) x its s.e."""
    return combined_interval(seed_groups(terms))[0]


def seed_groups(
    terms: Sequence[tuple[float, Sequence[float]]], pairs: Sequence[tuple[int, int]] = ()
) -> list[list[float]]:
    """The contrast's independent parts over seeds, each a list of per-seed values whose means add up to the
    contrast: a weighted term alone, or two terms paired on the seed (``pairs``: their indices; the same seeds in
    the same order) as their per-seed weighted sum."""
    paired = {i for pair in pairs for i in pair}
    groups = [[w * x for x in values] for i, (w, values) in enumerate(terms) if i not in paired]
    for i, j in pairs:
        (wi, a), (wj, b) = terms[i], terms[j]
        groups.append([wi * x + wj * y for x, y in zip(a, b, strict=True)])
    return groups


def t_quantile(df: float) -> float:
    """Student's t quantile of a two-sided :data:`CONFIDENCE` interval at ``df`` degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(0.5 + CONFIDENCE / 2, df))


def combined_interval(groups: Sequence[Sequence[float]], sentence_var: float = 0.0) -> tuple[Interval, float, float]:
    """(interval, seed variance, degrees of freedom) of the contrast sum(mean(group)) with both noises: +- Student's
    t x sqrt(seed variance + ``sentence_var``), the seed variance Welch's sum of var(group)/n, the degrees of freedom
    Welch-Satterthwaite's over the seed parts with the sentence part counted as known."""
    if any(len(g) < 2 for g in groups):
        raise ValueError(f"a seed interval needs at least 2 seeds per system (got {[len(g) for g in groups]})")
    value = sum(statistics.fmean(g) for g in groups)
    parts = [statistics.variance(g) / len(g) for g in groups]
    seed_var = sum(parts)
    var = seed_var + sentence_var
    tails = sum(p * p / (len(g) - 1) for p, g in zip(parts, groups))
    df = var * var / tails if tails > 0 else math.inf
    half = t_quantile(df) * math.sqrt(var) if var > 0 else 0.0
    return Interval(value - half, value + half), seed_var, df


def seeds_to_settle(
    value: float, spreads: Sequence[float], ok: Callable[[float], bool], sentence_var: float = 0.0
) -> int | None:
    """The fewest seeds per system whose interval would clear the criterion if the observed ``value`` were the true
    contrast: t(df) x sqrt(sum(spreads) / n + sentence_var) < d, ``spreads`` each independent part's variance over
    seeds (w^2 s^2 of a system; a paired part's own), df Welch's (n - 1) sum^2 / sum of squares, d the distance of
    ``value`` from the criterion's nearest bound. None where no n up to :data:`MAX_SEEDS` does (the value sits on
    the bound, or the sentences alone are too noisy)."""
    d = min((abs(value - b) for b in bounds(ok)), default=math.inf)
    total, squares = sum(spreads), sum(x * x for x in spreads)
    if not d > 0 or not math.isfinite(d):
        return None
    for n in range(2, MAX_SEEDS + 1):
        df = (n - 1) * total * total / squares if squares > 0 else math.inf
        if t_quantile(df) * math.sqrt(total / n + sentence_var) < d:
            return n
    return None


def settle_sets(sets: Sequence[OnSet], ok: Callable[[float], bool]) -> tuple[int | None, str, str]:
    """(seeds per system that would decide every deciding set, the verdict they would reach, why none would): each
    set by :func:`seeds_to_settle` at its observed value, spreads and sentence variance; why none, set by set: the
    distance to the bound within the sentences' own noise (1.96 of its s.d.), or beyond :data:`MAX_SEEDS`."""
    deciding = [s for s in sets if s.decides]
    needed = [seeds_to_settle(s.value, s.spreads, ok, s.sentence_var) for s in deciding]
    would = outcome([HOLDS if ok(s.value) else FAILS for s in deciding])
    why = []
    for s, n in zip(deciding, needed):
        if n is None:
            d, floor = min(abs(s.value - b) for b in bounds(ok)), 1.959963984540054 * math.sqrt(s.sentence_var)
            near = (
                f"within the test sentences' own noise (+-{floor:.2f})" if floor >= d else f"too near for {MAX_SEEDS}"
            )
            why.append(f"{split_name(s.split)} lies {d:.2f} from the bound, {near}")  # its value: in the sets
    if why:
        return None, would, "; ".join(why) + " (the observed differences taken as true)"
    return max(needed), would, ""


def seed_reading(name: str, values: Sequence[float], ok: Callable[[float], bool]) -> dict[str, Any]:
    """One reading over seeds (a system's runs): the mean and its Student's t interval over the seeds (n - 1
    degrees of freedom), judged on the interval."""
    interval = seed_interval([(1.0, values)])
    return {
        "set": name,
        "value": statistics.fmean(values),
        "interval": [interval.low, interval.high],
        "seeds": len(values),
        "verdict": interval_verdict(interval.low, interval.high, ok),
    }


def median_ranks(n: int) -> tuple[int, int, float] | None:
    """The ranks (k, n+1-k) of the narrowest symmetric order-statistic interval that holds the median of the
    distribution n values are drawn from with at least :data:`CONFIDENCE` (binomial, any continuous distribution),
    and its exact coverage; None where n is too small for any (fewer than 6 values at 95 %)."""
    from scipy.stats import binom

    best = None
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * float(binom.cdf(k - 1, n, 0.5))
        if coverage >= CONFIDENCE:
            best = (k, n + 1 - k, coverage)
    return best


def median_interval(values: Sequence[float]) -> tuple[float, float, float] | None:
    """The values at :func:`median_ranks` (x_(k), x_(n+1-k)) and its coverage; None where n is too small."""
    xs = sorted(values)
    ranks = median_ranks(len(xs))
    return None if ranks is None else (xs[ranks[0] - 1], xs[ranks[1] - 1], ranks[2])


def repeat_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """The ratio a/b of each interleaved repeat (tokens per second of two systems timed in the same repeats)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"repeat_ratios: {len(a)} and {len(b)} repeats; the same number (at least one) is needed")
    return [x / y for x, y in zip(a, b)]


def runs_interval(medians: Sequence[float], log: bool = True) -> tuple[float, float] | None:
    """The 95 % interval over GPU runs of the typical ratio: exp(mean ± t(n-1) x s.e.) of the runs' log
    median ratios (a ratio's noise is a factor, so it is averaged in logs; ``log=False``: of the medians themselves,
    for a difference of ratios); None below 3 runs, where the t quantile (12.7 with 2) leaves no usable interval."""
    if len(medians) < 3:
        return None
    xs = [math.log(m) for m in medians] if log else list(medians)
    half = t_quantile(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
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
    else:  # the within-run and the across-run intervals must agree to decide
        word = within if within in (HOLDS, FAILS) and word_of(across) == within else INCONCLUSIVE
    return word, {"pooled": pooled, "within": within, "medians": medians, "across": across, "meets": meets}


def central_95(values: np.ndarray) -> Interval:
    """The bounds sacreBLEU's ``estimate_ci`` reads: the sorted values' 1/40 from either end."""
    ordered = np.sort(values)
    k = len(ordered) // 40
    return Interval(float(ordered[k]), float(ordered[len(ordered) - k - 1]))


def judge(
    terms: Sequence[tuple[float, Runs]],
    ok: Callable[[float], bool],
    refs: Mapping[str, Sequence[str]] | None = None,
    samples: int = BOOTSTRAP_SAMPLES,
    pairs: Sequence[tuple[int, int]] = (),
) -> Judgement | None:
    """The contrast sum(weight x runs) judged on every evaluation set that all terms were scored on, on one
    interval with both noises (the module docstring): the seed variance (the terms of ``pairs`` paired on the seed)
    plus, where every run's hypotheses and the split's references (``refs``) are given, the sentence variance of the
    paired bootstrap on tokenized BLEU (in the first term's target language). Only the test sets (:data:`DECIDING`)
    decide; where none is scored, every set does. None where a term has a single seed (no seed interval)."""
    if any(len(r.seeds) < 2 for _, r in terms):
        return None
    for i, j in pairs:
        if terms[i][1].seeds != terms[j][1].seeds:
            raise ValueError(
                f"{terms[i][1].label} and {terms[j][1].label} are paired on the seed but have seeds "
                f"{terms[i][1].seeds} and {terms[j][1].seeds}"
            )
    scored = [split for split in EVAL_SPLITS if all(split in r.scores for _, r in terms)]
    if not scored:
        raise ValueError(f"no evaluation set is scored for every term ({', '.join(r.label for _, r in terms)})")
    tests = any(split in DECIDING for split in scored)
    lang = terms[0][1].lang  # the target language the tokenized BLEU of the hypotheses is scored in
    sets, sentences = [], False
    for split in scored:
        value = sum(w * statistics.fmean(r.scores[split]) for w, r in terms)
        seeds = seed_interval([(w, r.scores[split]) for w, r in terms])
        groups = seed_groups([(w, r.scores[split]) for w, r in terms], pairs)
        test_set, sentence_var = None, 0.0
        if refs and split in refs and all(split in r.hyps for _, r in terms):
            boot = bootstrap_contrast([(w, r.hyps[split]) for w, r in terms], refs[split], samples, lang=lang)
            test_set, sentence_var, sentences = central_95(boot), float(np.var(boot, ddof=1)), True
        combined, seed_var, df = combined_interval(groups, sentence_var)
        verdict = interval_verdict(combined.low, combined.high, ok)
        spreads = tuple(statistics.variance(g) for g in groups)
        decides = split in DECIDING or not tests
        sets.append(
            OnSet(split, value, seeds, test_set, verdict, combined, seed_var, sentence_var, df, decides, spreads)
        )
    # how the runs are paired, in words, for the verdict's row
    on_seed = "; ".join(f"{terms[i][1].label} with {terms[j][1].label} on the seed" for i, j in pairs)
    paired = f"seeds paired: {on_seed}" if pairs else "seeds unpaired (Welch)"
    words = "sentences paired (the same resamples for every run of every system)" if sentences else "no sentences"
    return Judgement(tuple(sets), f"{words}; {paired}", ok)


def split_name(split: str) -> str:
    """A Multi30k split by the name the reader knows ("test" is test2016)."""
    return SPLITS[split][0] if split in SPLITS else split


def describe(j: Judgement) -> str:
    """One line per judgement: on each set the contrast with its combined interval and the set's verdict (the
    validation set marked shown, not judged), the seed and test-set intervals beside it (for an evidence cell)."""
    parts = []
    for s in j.sets:
        both = f" [{s.interval.low:+.2f}, {s.interval.high:+.2f}]"
        beside = f"seeds [{s.seeds.low:+.2f}, {s.seeds.high:+.2f}]"
        beside += f", test-set [{s.test_set.low:+.2f}, {s.test_set.high:+.2f}]" if s.test_set else ""
        word = s.verdict if s.decides else f"shown, not judged (by its interval: {s.verdict})"
        parts.append(f"{split_name(s.split)} {s.value:+.2f}{both} ({beside}): {word}")
    return "; ".join(parts) + (f"; {j.pairing}" if j.pairing else "")


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
