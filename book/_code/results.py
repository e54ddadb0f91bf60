"""The values the results chapter (Table 2) glues into its prose: BLEU per system, the registry's verdicts of CAN's
and Balanced's gaps on the four evaluation sets, and what twice the budget says about how far the 1x models are
trained (the training chapter's numbers, :func:`~_code.training.undertraining_values`).

Every number is a plain ``float``/``int`` (MyST-NB's ``{glue:text}`` formats it); every verdict is the claims
registry's (:mod:`repro.studies.claims`), glued as its marked word (``{glue}``). The chapter presents stored
results: a scale whose models are not judged (tiny) has none, and asking for it is an error that names the command
which stores them.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from _code import gpu_results as gpu
from _code.marks import marks
from _code.prose import by_verdict, lead_sentence, sets_sentence
from _code.readers import describe_provenances, requires_judged, speed_runs
from _code.tables import reading_table
from _code.training import undertraining_values
from canlib.catalogue import ALL_SYSTEMS, PAPER_SYSTEMS
from canlib.data.preparation import prepared
from canlib.io import CHECKOUT_DIR  # the corpus a chapter quotes (prepared once, from the data folder)
from repro.studies import paper
from repro.studies.claims import judged
from repro.studies.store import Store
from repro.studies.verdict import EVAL_SPLITS

CLAIMS = ("can-within-0.5", "balanced-keeps-bleu", "budget-adds-balanced", "budget-adds-can", "budget-narrows-gap")


def values(store: Store) -> dict[str, Any]:
    """Everything the results chapter's prose quotes."""
    t2 = paper.table2("en-de")
    v: dict[str, Any] = {
        "paper_gap_can": t2["CAN"].test_bleu - t2["Balanced"].test_bleu,
        "paper_gap_balanced": t2["Balanced"].test_bleu - t2["Baseline"].test_bleu,
        "sets": len(EVAL_SPLITS),
    }
    requires_judged(store, "the results chapter")
    runs = {s: store.runs(s) for s in ALL_SYSTEMS}
    for s in PAPER_SYSTEMS:
        r = runs[s]
        v[f"{s}_test"], v[f"{s}_test_sd"], v[f"{s}_seeds"] = r.mean("test"), r.sd("test"), len(r.seeds)
        sacre = store.sacre(r, "test")
        v[f"{s}_test_sacre"], v[f"{s}_test_sacre_sd"] = statistics.fmean(sacre), statistics.stdev(sacre)
    v["metric_gap"] = max(abs(v[f"{s}_test"] - v[f"{s}_test_sacre"]) for s in PAPER_SYSTEMS)
    # the two BLEUs of one run on one set, over every stored run of the plan and every evaluation set
    v["metric_gap_run"] = max(
        abs(t - b)
        for r in runs.values()
        if r is not None
        for split in EVAL_SPLITS
        if split in r.scores
        for t, b in zip(r.scores[split], store.sacre(r, split))
    )
    j = judged(store)
    can, keeps = j["can-within-0.5"], j["balanced-keeps-bleu"]
    v |= can.at(1).values("gap_can") | can.at(2).values("gap_can_2x") | keeps.values("gap_balanced")
    v["can_lead"] = lead_sentence(
        can, "This verdict reads the {budget} models, {seeds} seeds of each system, not the {others} ones: {rule}."
    )
    v["can_sets"] = sets_sentence(
        can,
        (
            "Test set by test set, CAN comes within half a point of Balanced on {met} of the {total}",
            "falls further behind on {missed}",
            "is too close to call on {open}",
        ),
        "On each of the {total} test sets the seeds' interval of CAN's gap straddles the half-point line.",
    )
    v["can_sets_1x"] = sets_sentence(
        can.at(1),
        (
            "There the gap is surely inside half a point on {met} of the {total} test sets",
            "surely beyond it on {missed}",
            "unresolved on {open}",
        ),
        "There, too, none of the {total} test sets settles it.",
    )
    v["balanced_sets"] = sets_sentence(
        keeps,
        (
            "Balanced's BLEU is within half a point of the Baseline's on {met} of the {total} test sets",
            "further off on {missed}",
            "too near the line to tell on {open}",
        ),
        "No test set decides it: on all {total}, the interval of Balanced − Baseline crosses a half-point line.",
    )
    v["change_sets"] = sets_sentence(
        j["budget-narrows-gap"],
        (
            "The longer budget narrows the gap on {met} of the {total} test sets",
            "keeps or widens it on {missed}",
            "leaves {open} unresolved",
        ),
        "On every one of the {total} test sets the seeds' spread swallows the change.",
    )
    for s in ("san", "aan"):
        v[f"gap_{s}"] = runs[s].mean("test") - runs["balanced"].mean("test")
    stored = {s: r for s, r in runs.items() if r is not None}
    v["systems"] = len(stored)
    v["can_last"] = sum(min(stored, key=lambda s: stored[s].mean(split)) == "can" for split in EVAL_SPLITS)
    read = [gpu.run_label(store.gpu_speed("eager", r)[1]) for r in speed_runs(store)]
    v["speed_runs"] = ", ".join(read) or "no stored GPU run"
    v["takeaway_sentence"] = takeaway(j["can-within-0.5"].word, j["balanced-keeps-bleu"].word)
    out = v | marks(store, CLAIMS) | undertraining_values(store) | corpus_values(store)
    return out | {"can_lead": v["can_lead"]}  # the chapter's own sentence, not the training chapter's


def takeaway(can: str, balanced: str) -> str:
    """The chapter's one sentence, from the verdicts of its two claims."""
    can_says = by_verdict(
        can,
        "in these runs CAN stays within half a BLEU point of Balanced",
        "in these runs CAN falls more than half a BLEU point below Balanced",
        "these runs cannot yet tell whether CAN stays within half a BLEU point of Balanced",
        "in these runs CAN stays within half a BLEU point of Balanced on some evaluation sets and not on others",
    )
    balanced_says = by_verdict(
        balanced,
        "Balanced keeps the Baseline's BLEU",
        "Balanced loses more than half a point to the Baseline",
        "whether Balanced keeps the Baseline's BLEU is still open",
        "Balanced keeps the Baseline's BLEU on some evaluation sets and not on others",
    )
    return f"{can_says[0].upper()}{can_says[1:]}, and {balanced_says}."


def corpus_values(store: Store) -> dict[str, Any]:
    """The prepared training corpus of the scale (its ``meta.json``): the pairs it trains on after the length filter,
    and the raw pairs."""
    meta = prepared(store.corpus, store.spec.corpus_scale).meta
    return {"train_pairs": meta["counts"]["train"], "raw_pairs": meta["cleaning"]["raw_pairs"]}


def provenance_table(store: Store, runs: list[Any]):
    """Where runs come from, for a chapter's provenance drop-down, as a two-column table: how many, devices, commits,
    dates, budget, and the repository's folders of the device calls that trained them (``measurements/<call>/``,
    found by the commits their notes name)."""
    import pandas as pd

    provs = store.provenances(runs)
    described = describe_provenances(provs)
    commits = sorted({str(p["commit"]).removesuffix("+dirty")[:7] for p in provs})
    folder = CHECKOUT_DIR / "measurements"

    def names_them(call: Path) -> bool:
        notes = [*call.glob("*.txt"), *call.glob("README.md")]
        return any(c in note.read_text(encoding="utf-8") for note in notes for c in commits)

    calls = [call.name for call in sorted(folder.glob("*/")) if names_them(call)]
    rows = {
        "models": str(described["count"]),
        "devices": described["device"],
        "commits": described["commit"],
        "dates": described["date"],
        "budget": described["budget"],
        "device calls (measurements/)": ", ".join(calls) or "not kept in the repository",
    }
    return reading_table(pd.DataFrame({"": rows}).rename_axis("trained"))
