"""The study table: every stored analysis and beyond study of a scale's plan, as data.

The engine (:mod:`canlib.repro.experiments`) trains and stores what this table names; the readers
(:mod:`canlib.repro.studies`) read it by the same names. Neither defines a study itself.

**Analyses** (:data:`ANALYSES`), each computed from the seed-1 runs of the main corpus (:data:`ANALYSIS_RUNS`):
``similarity`` (Figure 2, the 6/6 Baseline), ``similarity-balanced`` (the same for Balanced's two decoder layers),
``errors`` (Figure 6), ``attention`` (maps and CAN's gate), ``conversion`` (Balanced converted to CAN) and
``approximations`` (how far each of the paper's approximations moves a trained Balanced layer).

**Beyond studies**: why CAN loses more BLEU to Balanced here than in the paper.

* ``budget``: Balanced and CAN trained for :data:`BUDGET_FACTORS` times the scale's updates with the schedule
  continued, not rescaled (the same peak lr and warm-up, the inverse-square-root decay simply continued), so a
  longer run passes through the 1x run and the only change is "more updates"; greedy validation BLEU is logged at
  every validation. 1x is the main plan. The validation loss of the 2x runs turns up before their end, so a longer
  budget would train past that turn and is not part of the design.
* ``distill``: sequence-level knowledge distillation as in the paper's Table 4: the teacher is Balanced seed 1
  (the paper's choice), its beam-4 translations of the training set the students' targets (Balanced, SAN, AAN, CAN).
* ``can-6-6``: CAN's decoder layers on the 6/6 Baseline, read beside the main plan's Baseline.

The next experiments, at the 2x budget (:data:`NEXT_FACTOR`), read against the budget study's 2x models:
``distill-x2`` (the 2x Balanced as a stronger teacher), ``hybrid`` (12/2 with one standard and one CAN decoder
layer, both orders), ``can-residual`` (CAN keeping the attention's own residual). At 1x: ``averaging`` (Balanced and
CAN scored with their last checkpoint alone instead of the average of the last two).

Every model is a run result like the main plan's, stored as ``beyond/runs/<corpus>/<study>-<system>[-<tag>]-seed<k>``
(:func:`canlib.repro.results.layout.study_model_name`); each study's summary is ``beyond/<study>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from canlib.repro.results.layout import model_name

ANALYSES = (
    "similarity",
    "similarity-balanced",
    "errors",
    "attention",
    "conversion",
    "approximations",
)  # stored analyses of a plan
# the seed-1 runs on a scale's main corpus that each stored analysis reads
ANALYSIS_RUNS = {
    "similarity": ("baseline",),
    "similarity-balanced": ("balanced",),
    "errors": ("balanced", "can"),
    "attention": ("balanced", "can"),
    "conversion": ("balanced", "can"),
    "approximations": ("balanced",),
}

ORIGINAL = ("budget", "distill", "can-6-6")  # the three explanations the beyond chapter weighs
NEXT = ("distill-x2", "hybrid", "can-residual", "averaging")  # the next experiments, run when named
STUDIES = ORIGINAL + NEXT
BUDGET_SYSTEMS = ("balanced", "can")
BUDGET_FACTORS = (2,)  # 1x is the main plan
NEXT_FACTOR = 2  # the budget of the next experiments
STUDENTS = ("balanced", "san", "aan", "can")
X2_STUDENTS = ("balanced", "can")
TEACHER = "balanced"  # the paper's teacher for Table 4
TEACHER_SEED = 1
DISTILL_BEAM = 4
REDUCED_PAIRS = 64  # an end-to-end test (a reduced budget) distils only the first pairs of the training set
HYBRIDS = {"std-can": ("standard", "can"), "can-std": ("can", "standard")}  # decoder layer kinds, bottom first
RESIDUAL_LAYERS = ("can_residual", "can_residual")
SEEDS = {
    "budget": (1, 2, 3),
    "distill": (1, 2, 3),
    "can-6-6": (1, 2, 3),
    "distill-x2": (1, 2, 3),
    "hybrid": (1, 2, 3),
    "can-residual": (1, 2, 3),
    "averaging": (1, 2, 3),
}


def study_models(name: str, seeds: Sequence[int] | None = None) -> list[tuple[str, str, int]]:
    """(system, tag, seed) of each model of study ``name``, in training order (a teacher before its students)."""
    if name not in STUDIES:
        raise ValueError(f"study {name!r}: choose from {', '.join(STUDIES)}")
    seeds = list(seeds) if seeds is not None else list(SEEDS[name])
    if not seeds or any(int(k) < 1 for k in seeds):
        raise ValueError(f"seeds {seeds}: give at least one seed, every seed >= 1")
    if name == "budget":
        return [(s, f"x{f}", k) for f in BUDGET_FACTORS for k in seeds for s in BUDGET_SYSTEMS]
    if name == "distill":
        return [(TEACHER, "teacher", TEACHER_SEED)] + [(s, "kd", k) for k in seeds for s in STUDENTS]
    if name == "distill-x2":
        return [(s, "kd", k) for k in seeds for s in X2_STUDENTS]
    if name == "hybrid":
        return [("balanced", tag, k) for k in seeds for tag in HYBRIDS]
    if name == "averaging":
        return [(s, "last", k) for k in seeds for s in BUDGET_SYSTEMS]
    return [("can" if name == "can-residual" else "can-6-6", "", k) for k in seeds]


def study_model_names(name: str, seeds: Sequence[int] | None = None) -> list[str]:
    """The stored names (without folder) of the models of study ``name`` (see :func:`study_models`)."""
    return [model_name(name, *m) for m in study_models(name, seeds)]
