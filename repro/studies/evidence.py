"""What a claim of the registry (:mod:`repro.studies.claims`) is held to and what its judgement holds: the five
verdict words, the standard each kind of evidence is held to, a claim's row, its :class:`Judged` and what more runs
would cost. No word is decided here: the kinds of evidence (:mod:`repro.studies.judges`) decide them, by the rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from repro.bench.settings import SpeedPlan
from repro.studies.store import Store
from repro.studies.verdict import (
    CONFIDENCE,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    MIXED,
    NOT_RUN,
    Judgement,
    Runs,
    median_ranks,
)

# -- the five words, each defined once ----------------------------------------------------------------------------

MEANINGS = {
    HOLDS: "the criterion is met beyond its interval on every deciding reading (test set, GPU run, decoder layer), "
    "by evidence that meets its standard",
    FAILS: "the criterion is missed beyond its interval on every deciding reading",
    MIXED: "the criterion is met beyond the intervals on some readings and missed on others",
    INCONCLUSIVE: "neither: some reading's interval cannot decide it, or the evidence is below its standard; the "
    "claim says what would settle it",
    NOT_RUN: "the evidence is not stored yet; the claim gives the command that stores it",
}
METRIC = "tok-BLEU"  # the seed intervals' metric: the paper's tokenized BLEU


# -- the standards -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Standard:
    """The least evidence that can decide a claim of one kind, and how its intervals are read."""

    kind: str
    least: str  # the least evidence, in words
    interval: str  # how its spread is read, with the interval's coverage
    seeds: int = 0  # trained models per system
    repeats: int = 0  # interleaved repeats per GPU run
    seconds: float = 0.0  # the shortest repeat
    runs: int = 0  # GPU runs of the same code


BLEU = Standard(
    "bleu",
    "3 seeds of every system at the budget the claim reads (Clark et al., 2011), on a scale whose models translate "
    "(small or full)",
    f"per test set (the validation set is shown, never judged), one {CONFIDENCE:.0%} interval of tokenized BLEU with "
    "both noises: the seeds' variance of the mean (paired on the seed where runs share one) plus the variance over "
    "1,000 paired bootstrap resamples of the sentences (sacreBLEU's draw, the same for every run), Student's t at "
    "the Welch-Satterthwaite degrees of freedom; equivalence claims as two one-sided tests",
    seeds=3,
)


def speed_standard(plan: SpeedPlan | None = None, runs: int = 3) -> Standard:
    """The speed standard: a GPU run's repeats, their shortest length and the forced length are those of the speed
    plan the GPU scripts time with (:class:`~repro.bench.settings.SpeedPlan`'s defaults), so its defaults meet it."""
    plan = plan or SpeedPlan()
    n, seconds = plan.repeats, plan.min_seconds
    ranks = median_ranks(n)  # the order statistics the interval of n repeats reads
    order = f"{n} repeats give none"
    if ranks:
        order = f"with {n} repeats the {ordinal(ranks[0])} to the {ordinal(ranks[1])} smallest ratio"
    return Standard(
        "speed",
        f"{runs} GPU runs of the same decoder code, each of at least {n} interleaved repeats per system of at least "
        f"{seconds:g} s (fp16, batch 1, beam 4, d=512 random weights, forced length {plan.forced_length}): the run is "
        "the unit, the newest code's runs pooled",
        f"the median of the pooled per-repeat ratios with its distribution-free interval from the order statistics (at "
        f"least {CONFIDENCE:.0%}; {order}), beside the runs' medians and, from {runs} runs, their Student's t interval "
        f"over runs ({CONFIDENCE:.0%}, on log ratios); both must clear the criterion",
        repeats=n,
        seconds=seconds,
        runs=runs,
    )


def ordinal(k: int) -> str:
    """2 -> "2nd", 9 -> "9th", 21 -> "21st"."""
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


SPEED = speed_standard()
ANALYSIS = Standard(
    "analysis",
    "the stored analysis of 3 seeds of each trained model at small or full (one model is a measurement of that "
    "model: no spread over seeds, so no interval and no verdict beyond inconclusive)",
    f"per decoder layer, the seeds' interval (Student's t, {CONFIDENCE:.0%}); one model's layers are shown with the "
    "criterion read on each value, not judged",
    seeds=3,
)
LOSS = Standard(
    "loss",
    "3 seeds of every system at small or full, with their validation logs",
    f"the seed interval of the final validation loss (Student's t, Welch's degrees of freedom, {CONFIDENCE:.0%}), "
    "or of each system's mean over its seeds",
    seeds=3,
)
STANDARDS = {s.kind: s for s in (BLEU, SPEED, ANALYSIS, LOSS)}


@dataclass(frozen=True)
class Threshold:
    """A criterion on one number: ``value op bound`` (monotone, so the ends of an interval decide it)."""

    op: str  # ">=", ">" or "<"
    bound: float

    def __call__(self, x: float) -> bool:
        return x >= self.bound if self.op == ">=" else x > self.bound if self.op == ">" else x < self.bound

    def text(self, what: str) -> str:
        return f"{what} {self.op} {self.bound:g}"


SIDE_BY_SIDE = 4  # small runs a GPU trains at once in one `python -m repro experiment` call, each a run's time


# -- a claim and its judgement ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """One claim, declared once: its id, a name that states its criterion, the criterion in symbols, the paper's
    figure, the chapter that shows the evidence, the evidence it reads and whose claim it is (``paper``: the paper
    states it; ``book``: the book's own question)."""

    id: str
    name: str
    criterion: str
    paper: str
    chapter: str
    evidence: Evidence = field(repr=False)
    source: str = "paper"


class Evidence(Protocol):
    """What a claim reads: a kind of evidence (:mod:`repro.studies.judges`), held to its standard, judging itself."""

    @property
    def standard(self) -> Standard: ...

    def judge(self, store: Store, claim: Claim) -> Judged: ...


@dataclass(frozen=True)
class Judged:
    """A claim judged from its strongest body of evidence: the word (one of the five), our number, the
    evidence in words and as data, its strength against the standard, and what would settle it."""

    claim: Claim
    word: str
    ours: str
    evidence: str
    value: float | None = None
    interval: tuple[float, float] | None = None
    budget: int | None = None  # the budget factor this verdict reads (BLEU claims of the main plan)
    recipe: str = ""  # "converged": the verdict reads the converged models (the study of that name), not a budget
    sets: tuple[dict[str, Any], ...] = ()  # per reading: evaluation set, GPU run, layer or direction
    beside: tuple[Judged, ...] = ()  # the weaker bodies of evidence (other budgets, older code), shown, never leading
    seeds: dict[str, int] = field(default_factory=dict)
    files: tuple[str, ...] = ()  # the named evidence: run files relative to the scale's folder, or GPU runs
    command: str = ""  # what stores the missing evidence
    strength: dict[str, Any] = field(default_factory=dict)  # seeds, budget, repeats, seconds, runs, code
    meets: bool = False  # whether the evidence meets the claim's standard
    settle: str = ""  # what would settle an inconclusive or missing claim (runs, GPU-minutes, the command)
    cost: str = ""  # what settling it costs, in runs and GPU-minutes (the middle of ``settle``)
    minutes: float | None = None  # the GPU-minutes of ``cost``, where known
    deciding: dict[str, Any] | None = None  # the reading that decided the verdict, with its one interval
    pairing: str = ""  # how the runs behind the interval are paired (seeds, sentences)
    seeds_to_settle: int | None = None  # seeds per system that would settle an inconclusive contrast, if any would
    judgement: Judgement | None = field(default=None, compare=False, repr=False)

    @property
    def standard(self) -> Standard:
        return self.claim.evidence.standard

    def values(self, prefix: str) -> dict[str, Any]:
        """A BLEU contrast's numbers for a chapter to glue (:meth:`repro.studies.verdict.Judgement.values`);
        empty for a claim not judged."""
        return self.judgement.values(prefix) if self.judgement is not None else {}

    def at(self, budget: int) -> Judged | None:
        """The claim at budget ``budget`` (itself, or the body beside it)."""
        return next((j for j in (self, *self.beside) if j.budget == budget), None)

    def as_json(self, beside: bool = True) -> dict[str, Any]:
        c, s = self.claim, self.standard
        out = {
            "id": c.id,
            "claim": c.name,
            "criterion": c.criterion,
            "source": c.source,
            "paper": c.paper,
            "ours": self.ours,
            "verdict": self.word,
            "evidence": self.evidence,
            "chapter": c.chapter,
            "budget": self.budget,
            "value": self.value,
            "interval": list(self.interval) if self.interval else None,
            "sets": list(self.sets),
            "seeds": self.seeds,
            "files": list(self.files),
            "strength": self.strength,
            "standard": {"kind": s.kind, "least": s.least, "interval": s.interval, "met": self.meets},
            "settle": self.settle,
            "cost": self.cost,
            "gpu_minutes": self.minutes,
            "command": self.command,
            "deciding": self.deciding,
            "pairing": self.pairing,
            "seeds_to_settle": self.seeds_to_settle,
        }
        if self.recipe:
            out["recipe"] = self.recipe
        if beside:
            out["beside"] = [j.as_json(beside=False) for j in self.beside]
        return out


def runs_minutes(store: Store, runs: Sequence[tuple[str, int]]) -> tuple[str, float | None]:
    """What training ``runs`` ((system, budget factor) each) costs, in words and in GPU-minutes: the runs and about
    how many GPU-minutes, from the wall time of the stored runs of the same budget (they train :data:`SIDE_BY_SIDE`
    at once)."""
    known = train_walls(store, [store.budget_runs(s, f) for s, f in set(runs)])
    count = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    if not known:
        return count, None
    minutes = max(known) * math.ceil(len(runs) / SIDE_BY_SIDE) / 60
    return f"{count}, about {minutes:.0f} GPU-minutes" + (" side by side" if len(runs) > 1 else ""), minutes


def train_walls(store: Store, runs: Sequence[Runs | None]) -> list[float]:
    """The training wall times (s) stored with the files of ``runs``: what one more such run takes."""
    return [w for r in runs if r for f in r.files if (w := store.result(f)[0].get("training", {}).get("wall_s"))]
