"""The values the tasks chapter glues into its prose: what the paper's Tables 2 and 3 say across its 14 tasks
(including what its own Table 3 says about its length-ratio explanation), which Multi30k directions are stored,
the one judged so far, and the command that trains the rest.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from canlib.studies.evidence import references
from canlib.studies.paper import paper_numbers
from canlib.studies.scales import DIRECTION_SYSTEMS, scale_spec
from canlib.studies.scorecard import (cross_task_claim, experiment_command, pair, paper_can_gap, quality_claim,
                                      runs_by_direction)
from canlib.studies.verdict import FAILED, HELD, K_SPREAD, MIN_SEEDS, NOISE, NOT_RUN, ON_PAR, seed_difference, word

WITHIN = {HELD: "holds", FAILED: "does not hold", NOISE: "is within noise", NOT_RUN: "is not run yet"}


def paper_values() -> dict[str, Any]:
    """The paper's CAN/Balanced speed and BLEU gap over its 14 tasks, and the tasks its length-ratio argument names."""
    p = paper_numbers()
    speed = {f"{t.split('_')[1]}_{task}": rows["CAN"][2] / rows["Balanced"][2] for t in ("table2_wmt14", "table3_wmt17")
             for task, rows in p[t].items() if not task.startswith("_")}
    gaps = [rows["CAN"][0] - rows["Balanced"][0] for t in ("table2_wmt14", "table3_wmt17")
            for task, rows in p[t].items() if not task.startswith("_")]
    setup = p["setup"]
    return {"tasks": len(speed), "speed_min": min(speed.values()), "speed_max": max(speed.values()),
            "gap_min": min(gaps), "gap_max": max(gaps),
            "speed_wmt14_de_en": speed["wmt14_de-en"], "speed_wmt17_de_en": speed["wmt17_de-en"],
            "speed_wmt14_en_fr": speed["wmt14_en-fr"],
            "ratio_de_en": setup["length_ratio_translation_to_source_de-en"],
            "ratio_en_fr": setup["length_ratio_translation_to_source_en-fr"],
            "wmt17_max": max(v for k, v in speed.items() if k.startswith("wmt17"))}


def values(root: Path | None = None, refs: dict[str, dict[str, list[str]]] | None = None) -> dict[str, Any]:
    """Everything the tasks chapter's prose quotes: the paper's numbers, the stored directions at small and the
    cross-task verdict (``refs``: {corpus: each evaluation set's references}, read when not given)."""
    spec = scale_spec("small")
    directions = (spec.corpus, *spec.directions)
    by, stored = stored_directions(root)
    missing = [c for c in directions if c not in stored]
    refs = {c: references("small", c) for c in stored} if refs is None else refs
    claim = cross_task_claim("small", by, paper_can_gap(), refs=refs)
    gaps = direction_gaps(by, stored)
    main = quality_claim(f"CAN within {ON_PAR} of Balanced", "", f"ΔBLEU >= -{ON_PAR}", lambda d: d >= -ON_PAR, "small",
                         pair("can", "balanced", by[spec.corpus]), refs.get(spec.corpus))
    v = paper_values() | {"directions": len(directions), "stored_directions": len(stored),
                          "missing_directions": len(missing), "direction_seeds": spec.direction_seeds,
                          "direction_systems": len(DIRECTION_SYSTEMS), "missing_runs": len(missing) * spec.direction_seeds * len(DIRECTION_SYSTEMS),
                          "stored_names": ", ".join(c.removeprefix("multi30k-") for c in stored),
                          "missing_names": ", ".join(c.removeprefix("multi30k-") for c in missing),
                          "tasks_command": experiment_command("small", DIRECTION_SYSTEMS, missing) if missing else "",
                          "cross_task_verdict": claim.verdict, "cross_task_word": word(claim.verdict, WITHIN),
                          "main_direction": spec.corpus.removeprefix("multi30k-"), "main_word": word(main.verdict, WITHIN)}
    if spec.corpus in gaps:
        v["main_gap"], v["main_pm"] = gaps[spec.corpus]
    return v


def stored_directions(root: Path | None = None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """({direction: {system: Runs}} at small, the directions with at least two seeds of CAN and Balanced)."""
    by = runs_by_direction("small", root)
    return by, [c for c, runs in by.items() if all(r is not None and len(r.seeds) >= MIN_SEEDS for r in runs.values())]


def direction_gaps(by: dict[str, dict[str, Any]], stored: list[str]) -> dict[str, tuple[float, float]]:
    """{direction: (CAN − Balanced on its test2016, two standard errors over seeds)} of the stored directions."""
    out = {}
    for c in stored:
        diff, se = seed_difference(by[c]["can"].scores["test"], by[c]["balanced"].scores["test"])
        out[c] = (diff, K_SPREAD * se)
    return out
