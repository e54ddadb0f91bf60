"""The study table: every stored analysis and beyond study of a scale's plan, one record each (:data:`TABLE`).

The engine (:mod:`repro.experiments`) trains, computes and stores what a record says; the readers
(:mod:`repro.studies`) read it by the same names. Neither defines a study itself, so adding a study is one
record here (and, for an analysis, the function that computes it).

**Analyses** (:class:`Analysis`), each computed from the seed-1 runs of the main corpus it reads and stored under
its name: ``similarity`` (Figure 2, the 6/6 Baseline), ``similarity-balanced`` (the same for Balanced's two decoder
layers), ``errors`` (Figure 6), ``attention`` (maps and CAN's gate), ``conversion`` (Balanced converted to CAN) and
``approximations`` (how far each of the paper's approximations moves a trained Balanced layer).

**Beyond studies** (:class:`Study`): why CAN loses more BLEU to Balanced here than in the paper.

* ``budget``: Balanced and CAN trained for twice the scale's updates with the schedule continued, not rescaled (the
  same peak lr and warm-up, the inverse-square-root decay simply continued), so a longer run passes through the 1x
  run and the only change is "more updates"; greedy validation BLEU is logged at every validation. 1x is the main
  plan. The validation loss of the 2x runs turns up before their end, so a longer budget would train past that turn
  and is not part of the design.
* ``distill``: sequence-level knowledge distillation as in the paper's Table 4: the teacher is Balanced seed 1
  (the paper's choice), its beam-4 translations of the training set the students' targets (Balanced, SAN, AAN, CAN).
* ``can-6-6``: CAN's decoder layers on the 6/6 Baseline, read beside the main plan's Baseline.

The converged models (``converged``: the Table 2 and Table 5 systems; ``converged-residual``, ``converged-nosplit``:
the controls), ten seeds each at the scale's converged recipe (``Scale.recipe("converged")``), run when named, each
seed a run of its own (``--stack`` trains a system's seeds as one model, :mod:`canlib.training.stacked`).

The next experiments (run only when named), at the 2x budget, read against the budget study's 2x models:
``distill-x2`` (the 2x Balanced as a stronger teacher), ``hybrid`` (12/2 with one standard and one CAN decoder
layer, both orders), ``can-residual`` (CAN keeping the attention's own residual). At 1x: ``averaging`` (Balanced and
CAN scored with their last checkpoint alone instead of the average of the last two).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from repro.results.plan import SEEDED_SYSTEMS


@dataclass(frozen=True)
class Analysis:
    """A stored analysis: the seed-1 runs of the main corpus it reads, the function of
    :mod:`repro.experiments.analyses` that computes it from them, and the configuration it is stored with
    (``"run"``: the one run's; ``"runs"``: the systems and each run's; ``"finetune"``: CAN's and the fine-tune's).
    ``finetunes``: the starts of the CAN models it fine-tunes for its own use from the first run it reads (those
    it scores on the runs' device; the others are computed on the CPU). Stored as ``<name>``."""

    name: str
    reads: tuple[str, ...]
    compute: str
    config: str = "runs"
    finetunes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Study:
    """A beyond study: its models (``systems`` x ``tags`` for each seed, in that order, a teacher's own row first)
    and how they depart from the recipe: ``factor`` times the updates with the schedule unchanged, greedy
    validation BLEU at every validation, distilled targets from ``teacher`` (``(study, system, tag, seed)``, study
    ``""``: the main plan) for every model but the teacher's own row, the decoder layer kinds of a tag, the weights
    scored. Its summary adds ``sections`` (``budget``, ``teacher``, ``layers``). Stored as ``beyond/<name>``."""

    name: str
    systems: tuple[str, ...]
    tags: tuple[str, ...] = ("",)
    seeds: tuple[int, ...] = (1, 2, 3)
    factor: int = 1
    valid_bleu: bool = False
    teacher: tuple[str, str, str, int] | None = None
    teacher_row: bool = False  # the teacher's own training, stored again under the study's name ("teacher")
    decoders: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    weights: str = "average"  # "last": the last step checkpoint alone, not the average of the last ones
    sections: tuple[str, ...] = ()
    when_named: bool = False  # a next experiment: run only when named
    recipe: str = ""  # the scale's recipe its models train with (canlib.catalogue.Scale.recipe)

    def models(self, seeds: Sequence[int] | None = None) -> list[tuple[str, str, int]]:
        """(system, tag, seed) of each model, in training order (a teacher before its students)."""
        seeds = list(seeds) if seeds is not None else list(self.seeds)
        if not seeds or any(int(k) < 1 for k in seeds):
            raise ValueError(f"seeds {seeds}: give at least one seed, every seed >= 1")
        first = [(self.teacher[1], "teacher", self.teacher[3])] if self.teacher_row else []
        return first + [(s, t, k) for k in seeds for t in self.tags for s in self.systems]


X2 = dict(factor=2, valid_bleu=True, when_named=True)  # the next experiments: the 2x budget, its curves
STUDENTS = ("balanced", "san", "aan", "can")
MAIN_TEACHER = ("", "balanced", "", 1)  # the paper's teacher for Table 4: Balanced seed 1 of the main plan
X2_TEACHER = ("budget", "balanced", "x2", 1)  # a stronger teacher: the budget study's 2x Balanced seed 1
HYBRIDS = {"std-can": ("standard", "can"), "can-std": ("can", "standard")}  # decoder layer kinds, bottom first
CONVERGED_RUNS = dict(seeds=tuple(range(1, 11)), recipe="converged", when_named=True)  # ten seeds each
TABLE: dict[str, Analysis | Study] = {
    record.name: record
    for record in (
        Analysis("similarity", ("baseline",), "similarity", config="run"),
        Analysis("similarity-balanced", ("balanced",), "similarity", config="run"),
        Analysis("errors", ("balanced", "can"), "error_buckets"),
        Analysis("attention", ("balanced", "can"), "attention"),
        Analysis(
            "conversion", ("balanced", "can"), "conversion", "finetune", finetunes=("converted", "random-decoder")
        ),
        Analysis("approximations", ("balanced",), "approximations"),
        Study("budget", ("balanced", "can"), ("x2",), factor=2, valid_bleu=True, sections=("budget",)),
        Study("distill", STUDENTS, ("kd",), teacher=MAIN_TEACHER, teacher_row=True, sections=("teacher",)),
        Study("can-6-6", ("can-6-6",)),
        Study("distill-x2", ("balanced", "can"), ("kd",), teacher=X2_TEACHER, sections=("teacher",), **X2),
        Study("hybrid", ("balanced",), tuple(HYBRIDS), decoders=HYBRIDS, sections=("layers",), **X2),
        Study("can-residual", ("can",), decoders={"": ("can_residual",) * 2}, sections=("layers",), **X2),
        Study("averaging", ("balanced", "can"), ("last",), weights="last", when_named=True),
        # the seeds of the verdicts, converged: the Table 2 and Table 5 systems, then the controls
        Study("converged", SEEDED_SYSTEMS, **CONVERGED_RUNS),
        Study("converged-residual", ("can",), decoders={"": ("can_residual",) * 2}, **CONVERGED_RUNS),
        Study("converged-nosplit", ("can_nosplit",), **CONVERGED_RUNS),
    )
}

# the names other modules read, each a view of the table
ANALYSES = tuple(n for n, r in TABLE.items() if isinstance(r, Analysis))  # stored analyses of a plan
STUDIES = tuple(n for n, r in TABLE.items() if isinstance(r, Study) and not r.recipe)  # the beyond studies
# the models trained at the converged recipe (stored as studies: beyond/converged...), run when named
CONVERGED = tuple(n for n, r in TABLE.items() if isinstance(r, Study) and r.recipe == "converged")
ORIGINAL = tuple(n for n in STUDIES if not TABLE[n].when_named)  # the three explanations the beyond chapter weighs
NEXT = tuple(n for n in STUDIES if TABLE[n].when_named)  # the next experiments, run when named
SEEDS = {n: TABLE[n].seeds for n in STUDIES}
BUDGET_SYSTEMS = TABLE["budget"].systems
DISTILL_BEAM = 4  # the beam of a teacher's translations
REDUCED_PAIRS = 64  # an end-to-end test (a reduced budget) distils only the first pairs of the training set


def _record(name: str, kind: type[Analysis | Study]) -> Any:
    """The record of ``kind`` named ``name``; an unknown name is an error that lists the known ones."""
    record = TABLE.get(name)
    if not isinstance(record, kind):
        known = ", ".join(n for n, r in TABLE.items() if isinstance(r, kind))
        raise ValueError(f"{kind.__name__.lower()} {name!r}: choose from {known}")
    return record


def study_record(name: str) -> Study:
    """The record of beyond study ``name``; an unknown name is an error that lists the known ones."""
    return _record(name, Study)


def analysis_record(name: str) -> Analysis:
    """The record of analysis ``name``; an unknown name is an error that lists the known ones."""
    return _record(name, Analysis)
