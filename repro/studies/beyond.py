"""Beyond the paper: why does CAN lose more BLEU to Balanced here than in the paper? The studies, as read.

The studies are defined as data in the study table (:mod:`repro.results.studies`: budget, distillation, CAN on
6/6 and the next experiments); the engine trains and stores their models. Here they are read from a
:class:`~repro.studies.store.Store`, each as soon as its own models are stored, and every verdict is the claims
registry's (:mod:`repro.studies.claims`): :data:`STUDY_CLAIMS` names the claims each study answers.
"""

from __future__ import annotations

from typing import Any

from repro.results.studies import BUDGET_SYSTEMS, STUDENTS
from repro.studies.store import Store

# the claims (registry ids) each study answers, the main gap first
STUDY_CLAIMS = {
    "budget": ("can-within-0.5", "budget-narrows-gap", "budget-adds-balanced", "budget-adds-can"),
    "distill": ("kd-can-within-0.5", "kd-narrows-gap", *(f"kd-adds-{s}" for s in STUDENTS)),
    "can-6-6": ("can-6-6-within-0.5", "can-6-6-hurts-less"),
}


def shown(store: Store) -> dict[str, bool]:
    """Which study has its own models stored with at least two seeds of every system it compares (and the main
    plan's Balanced and CAN)."""

    def enough(*runs: Any) -> bool:
        return all(r is not None and len(r.seeds) >= 2 for r in runs)

    if not store.judged:
        return {name: False for name in STUDY_CLAIMS}
    main = enough(store.runs("balanced"), store.runs("can"))
    return {
        "budget": main
        and any(enough(*(store.budget_runs(s, f) for s in BUDGET_SYSTEMS)) for f in store.budget_factors() if f > 1),
        "distill": main
        and enough(store.study_runs("distill", "balanced", "kd"), store.study_runs("distill", "can", "kd")),
        "can-6-6": main and enough(store.study_runs("can-6-6", "can-6-6"), store.runs("baseline")),
    }


def default_scale(root: Any = None) -> str:
    """ "small" once any study's own models (and the main runs it compares with) are stored at small, else
    "tiny", where the chapter shows what each study does and its command, not numbers."""
    return "small" if any(shown(Store("small", root)).values()) else "tiny"
