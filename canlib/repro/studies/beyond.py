"""Beyond the paper: why does CAN lose more BLEU to Balanced here than in the paper? The studies, as read.

The studies are defined as data in the study table (:mod:`canlib.repro.results.studies`: budget, distillation, CAN on
6/6 and the next experiments); the engine trains and stores their models. Here they are read from a
:class:`~canlib.repro.studies.store.Store`, each as soon as its own models are stored, and every verdict is the claims
registry's (:mod:`canlib.repro.studies.claims`): :data:`STUDY_CLAIMS` names the claims each study answers.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from canlib.repro.results.studies import BUDGET_SYSTEMS, STUDENTS
from canlib.repro.studies.claims import Judged
from canlib.repro.studies.paper import paper_numbers
from canlib.repro.studies.store import Store
from canlib.repro.studies.verdict import split_name

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


def contrast_table(columns: Sequence[tuple[Judged, int | None, str]]):
    """One row per evaluation set, one column per (judged claim, budget, heading): the contrast ± its seed interval
    (tokenized BLEU), the test-set interval in brackets and the set's verdict, from the registry's judgement."""
    import pandas as pd

    rows: dict[str, dict[str, str]] = {}
    for j, budget, heading in columns:
        shown_ = j.at(budget) if budget is not None else j
        if shown_ is None or shown_.judgement is None:
            continue
        for on in shown_.judgement.sets:
            row = rows.setdefault(split_name(on.split), {})
            test = f" [{on.test_set.low:+.2f}, {on.test_set.high:+.2f}]" if on.test_set else ""
            row[heading] = f"{on.value:+.2f} ± {on.half_width:.2f}{test}: {on.verdict}"
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.columns.name = "evaluation set"  # in the header's corner: one header row, not two
    return frame


def curves(store: Store, factor: int) -> dict[str, dict[str, list[float]]]:
    """{system: {"step", "valid_loss", "valid_bleu"}} of the budget study's ``factor``x models, each validation
    point averaged over seeds (greedy valid sacreBLEU and the label-smoothed validation loss, from their logs)."""
    out = {}
    for system in BUDGET_SYSTEMS:
        runs = store.budget_runs(system, factor)
        if runs is None:
            continue
        by_step: dict[int, list[dict[str, Any]]] = {}
        for point in (p for file in runs.files for p in store.log(file) if p.get("kind") == "valid"):
            by_step.setdefault(point["step"], []).append(point)
        steps = sorted(by_step)
        out[system] = {
            "step": steps,
            **{m: [statistics.fmean(p[m] for p in by_step[k]) for k in steps] for m in ("valid_loss", "valid_bleu")},
        }
    return out


def budget_figure(store: Store, factor: int = 2, averaged: Sequence[int] = ()):
    """Left: greedy validation sacreBLEU of Balanced and CAN against updates (the ``factor``x models, mean over
    seeds); middle: their validation losses; right: CAN - Balanced validation loss in the paper's Fig. 8.
    ``averaged``: the updates whose checkpoints a 1x model averages, marked."""
    import matplotlib.pyplot as plt

    c = curves(store, factor)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for system, colour in (("balanced", "tab:red"), ("can", "tab:blue")):
        if system in c:
            label = f"{'Balanced' if system == 'balanced' else 'CAN'} ({factor}x)"
            axes[0].plot(c[system]["step"], c[system]["valid_bleu"], "o-", color=colour, label=label)
            axes[1].plot(c[system]["step"], c[system]["valid_loss"], "o-", color=colour, label=label)
    for ax in axes[:2]:
        for step in averaged:
            ax.axvline(step, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("updates")
        ax.legend(fontsize=8)
    axes[0].set(ylabel="valid sacreBLEU (greedy)", title=f"ours ({store.scale})")
    axes[1].set(ylabel="valid loss (label-smoothed)", title=f"ours ({store.scale})")
    f8 = paper_numbers()["fig8_curves_en-de"]
    axes[2].plot(
        f8["epochs"], [a - b for a, b in zip(f8["valid"]["CAN"], f8["valid"]["Balanced"])], "s-", color="black"
    )
    axes[2].axhline(0, color="grey", lw=0.8)
    axes[2].set(xlabel="epoch", ylabel="valid loss: CAN − Balanced", title="paper, Fig. 8 (WMT14 En-De)")
    fig.tight_layout()
    return fig
