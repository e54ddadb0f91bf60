"""What a claim of the registry (:mod:`canlib.studies.claims`) reads and what its judgement holds: the verdict
vocabulary, one type per kind of evidence (a BLEU contrast, a speed ratio, a batch curve, a stored analysis, the
training logs, the other directions), the claim itself and its judgement. The judges that fill a judgement from the
stored results are in :mod:`canlib.studies.judges`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from canlib.studies.verdict import (
    FAILED,
    HELD,
    MIXED,
    NOISE,
    NOT_RUN,
    NOT_TESTED,
    PARTLY_FAILED,
    PARTLY_HELD,
    Judgement,
)

# -- the vocabulary ------------------------------------------------------------------------------------------

STATES = (HELD, FAILED, MIXED, PARTLY_HELD, PARTLY_FAILED, NOISE, NOT_RUN, NOT_TESTED)
VOCABULARY = {
    "paper": {
        HELD: "reproduced",
        FAILED: "not reproduced",
        MIXED: "mixed across {over}",
        PARTLY_HELD: "reproduced on some {over}",
        PARTLY_FAILED: "not reproduced on some {over}",
        NOISE: "within noise",
        NOT_RUN: "not run yet",
        NOT_TESTED: "not tested here",
    },
    "book": {
        HELD: "holds",
        FAILED: "does not hold",
        MIXED: "mixed across {over}",
        PARTLY_HELD: "holds on some {over}",
        PARTLY_FAILED: "fails on some {over}",
        NOISE: "within noise",
        NOT_RUN: "not run yet",
        NOT_TESTED: "not tested here",
    },
}
METRIC = "tok-BLEU"  # the seed intervals' metric: the paper's tokenized BLEU


@dataclass(frozen=True)
class Threshold:
    """A criterion on one number: ``value op bound`` (monotone, so the ends of an interval decide it)."""

    op: str  # ">=", ">" or "<"
    bound: float

    def __call__(self, x: float) -> bool:
        return x >= self.bound if self.op == ">=" else x > self.bound if self.op == ">" else x < self.bound

    def text(self, what: str) -> str:
        return f"{what} {self.op} {self.bound:g}"


# -- what a claim reads --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    """One system in a BLEU contrast: its weight, its label, and where its runs are stored (the main plan, or a
    beyond study's models with ``study``/``tag``; ``factor``: a fixed budget, else the claim's)."""

    weight: float
    system: str
    label: str = ""
    study: str = ""
    tag: str = ""
    factor: int | None = None


@dataclass(frozen=True)
class Contrast:
    """sum(weight x system) on the four evaluation sets, judged by the verdict rule against ``ok``. ``budgets``: judged
    at every stored budget factor too (only where every term is a main-plan system of the budget study).
    ``one_seed``: with fewer than two seeds of a system, the test-set interval of the seed-1 pair alone."""

    terms: tuple[Term, ...]
    ok: Threshold
    budgets: bool = False
    one_seed: bool = False


@dataclass(frozen=True)
class SpeedRatio:
    """tokens/s of ``system`` over ``against`` (GPU, eager fp16, batch 1), per interleaved repeat of one run."""

    system: str
    against: str
    ok: Threshold


@dataclass(frozen=True)
class BatchCurve:
    """``system``/``against`` at batch ``first`` minus at batch ``last`` (> 0: the gain shrinks), per repeat."""

    system: str
    against: str
    first: int
    last: int


@dataclass(frozen=True)
class Similarity:
    """The cosine similarity of each layer's self- and cross-attention inputs (the stored ``similarity`` study)."""

    ok: Threshold


@dataclass(frozen=True)
class GateShare:
    """The share of CAN's gate values within ``near`` of 0 or 1, per decoder layer (the stored ``attention`` study)."""

    ok: Threshold
    near: float


@dataclass(frozen=True)
class LossGap:
    """Final validation loss of ``system`` minus ``against`` over seeds (seed interval), > 0."""

    system: str
    against: str


@dataclass(frozen=True)
class LossFalling:
    """The validation loss falls between the last two validations of every run of ``systems``."""

    systems: tuple[str, ...]


@dataclass(frozen=True)
class CrossTask:
    """CAN - Balanced on every Multi30k direction of the scale, each judged by the verdict rule."""

    ok: Threshold


Evidence = Contrast | SpeedRatio | BatchCurve | Similarity | GateShare | LossGap | LossFalling | CrossTask


@dataclass(frozen=True)
class Claim:
    """One claim, declared once: ``over`` names what the verdict joins (evaluation sets, GPU runs, directions)."""

    id: str
    name: str
    criterion: str
    source: str  # "paper" or "book"
    paper: str
    chapter: str
    evidence: Evidence = field(repr=False)
    over: str = "sets"


@dataclass(frozen=True)
class Judged:
    """A claim judged: its state and word, our number, the evidence in words and as data."""

    claim: Claim
    state: str
    ours: str
    evidence: str
    value: float | None = None
    interval: tuple[float, float] | None = None
    budget: int | None = None  # the budget factor this verdict reads (BLEU claims of the main plan: 1, or 2)
    sets: tuple[dict[str, Any], ...] = ()  # per evaluation set, GPU run, layer or direction
    beside: tuple[Judged, ...] = ()  # the same claim at the other stored budgets
    seeds: dict[str, int] = field(default_factory=dict)
    files: tuple[str, ...] = ()  # the named evidence: run files relative to the scale's folder, or GPU runs
    command: str = ""  # what stores the missing evidence of a claim not run yet
    judgement: Judgement | None = field(default=None, compare=False, repr=False)

    @property
    def word(self) -> str:
        return VOCABULARY[self.claim.source][self.state].format(over=self.claim.over)

    def values(self, prefix: str) -> dict[str, Any]:
        """A BLEU contrast's numbers for a chapter to glue (:meth:`canlib.studies.verdict.Judgement.values`: per set,
        test2016's half-interval, sets held / failed / within noise); empty for a claim not judged."""
        return self.judgement.values(prefix) if self.judgement is not None else {}

    def at(self, budget: int) -> Judged | None:
        """The claim at budget ``budget`` (itself, or the one beside it)."""
        return next((j for j in (self, *self.beside) if j.budget == budget), None)

    def as_json(self) -> dict[str, Any]:
        c = self.claim
        out = {
            "id": c.id,
            "claim": c.name,
            "criterion": c.criterion,
            "source": c.source,
            "paper": c.paper,
            "ours": self.ours,
            "verdict": self.word,
            "state": self.state,
            "evidence": self.evidence,
            "chapter": c.chapter,
            "budget": self.budget,
            "value": self.value,
            "interval": list(self.interval) if self.interval else None,
            "sets": list(self.sets),
            "seeds": self.seeds,
            "files": list(self.files),
            "command": self.command,
        }
        out["beside"] = [
            {
                k: v
                for k, v in j.as_json().items()
                if k in ("budget", "verdict", "state", "ours", "value", "interval", "sets", "seeds", "files")
            }
            for j in self.beside
        ]
        return out
