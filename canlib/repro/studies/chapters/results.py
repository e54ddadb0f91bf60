"""The values the results chapter (Table 2) glues into its prose: BLEU per system, the registry's verdicts of CAN's
and Balanced's gaps on the four evaluation sets, and what twice the budget and checkpoint averaging say about how
far the 1x models are trained (from the budget study's x2 models, whose logs pass through the 1x runs).

Every number is a plain ``float``/``int`` (MyST-NB's ``{glue:text}`` formats it); every verdict is the claims
registry's (:mod:`canlib.repro.studies.claims`), glued as its marked word (``{glue}``). The chapter presents stored
results: a scale whose models are not judged (tiny) has none, and asking for it is an error that names the command
which stores them.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from canlib.catalogue import ALL_SYSTEMS, LABELS, PAPER_SYSTEMS
from canlib.data.preparation import prepared
from canlib.io import CHECKOUT_DIR  # the corpus a chapter quotes (prepared once, from the data folder)
from canlib.model.config import preset
from canlib.repro.studies import gpu_results as gpu
from canlib.repro.studies import paper
from canlib.repro.studies.chapters.prose import lead_sentence, sets_sentence
from canlib.repro.studies.claims import judged, marks
from canlib.repro.studies.cpu_speed import cpu_cell, cpu_table
from canlib.repro.studies.judges import speed_runs
from canlib.repro.studies.store import Store, describe_provenances
from canlib.repro.studies.verdict import EVAL_SPLITS, ON_PAR

CLAIMS = ("can-within-0.5", "balanced-keeps-bleu", "budget-adds-balanced", "budget-adds-can", "budget-narrows-gap")


def values(store: Store) -> dict[str, Any]:
    """Everything the results chapter's prose quotes."""
    t2 = paper.table2("en-de")
    v: dict[str, Any] = {
        "scale": store.scale,
        "paper_gap_can": t2["CAN"].test_bleu - t2["Balanced"].test_bleu,
        "paper_gap_balanced": t2["Balanced"].test_bleu - t2["Baseline"].test_bleu,
        "paper_gap_san": t2["SAN"].test_bleu - t2["Balanced"].test_bleu,
        "paper_gap_aan": t2["AAN"].test_bleu - t2["Balanced"].test_bleu,
        "margin": ON_PAR,
        "sets": len(EVAL_SPLITS),
    }
    store.requires_judged("the results chapter")
    runs = {s: store.runs(s) for s in ALL_SYSTEMS}
    for s in PAPER_SYSTEMS:
        r = runs[s]
        key = s.replace("-", "_")
        v[f"{key}_test"], v[f"{key}_test_sd"], v[f"{key}_seeds"] = r.mean("test"), r.sd("test"), len(r.seeds)
        sacre = store.sacre(r, "test")
        v[f"{key}_test_sacre"], v[f"{key}_test_sacre_sd"] = statistics.fmean(sacre), statistics.stdev(sacre)
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
    can, keeps = judged(store)["can-within-0.5"], judged(store)["balanced-keeps-bleu"]
    v |= can.at(1).values("gap_can") | keeps.values("gap_balanced")
    v |= {"can_lead": lead_sentence(can), "can_sets": sets_sentence(can), "can_sets_1x": sets_sentence(can.at(1))}
    v |= {"balanced_sets": sets_sentence(keeps), "keeps_seeds": min(keeps.seeds.values())}
    for s in ("san", "aan"):
        v[f"gap_{s}"] = runs[s].mean("test") - runs["balanced"].mean("test")
    stored = {s: r for s, r in runs.items() if r is not None}
    v["systems"] = len(stored)
    v["can_last"] = sum(min(stored, key=lambda s: stored[s].mean(split)) == "can" for split in EVAL_SPLITS)
    v |= marks(store, CLAIMS) | budget_values(store) | provenance_values(store, [runs[s] for s in ALL_SYSTEMS])
    read = speed_runs(store)
    v["speed_runs"] = ", ".join(gpu.run_label(store.gpu_speed("eager", r)[1]) for r in read) or "no stored GPU run"
    return v | corpus_values(store) | {"d_small": preset("small-can").d_model, "d_paper": preset("can").d_model}


def corpus_values(store: Store) -> dict[str, Any]:
    """The prepared training corpus of the scale (its ``meta.json``): the pairs it trains on after the length filter,
    the raw pairs, how many the length-ratio filter left out, its bound, and the joint vocabulary's size."""
    meta = prepared(store.corpus, store.spec.corpus_scale).meta
    return {
        "train_pairs": meta["counts"]["train"],
        "raw_pairs": meta["cleaning"]["raw_pairs"],
        "ratio_removed": meta["cleaning"]["ratio"],
        "max_ratio": meta["recipe"]["spec"]["max_ratio"],
        "vocab": meta["vocab_size"],
    }


def speed_frame(store: Store, systems: tuple[str, ...] = PAPER_SYSTEMS, against: str = "balanced"):
    """Decoding speed relative to ``against``, one row per measurement, each labelled with its device, regime and the
    commit it timed: the paper's GPU, every stored GPU run (eager fp16 and CUDA graphs) and the stored CPU run, every
    ratio the median of the per-repeat ratios [its 95 % interval] or (the range of too few repeats for one)."""
    import pandas as pd

    t2 = paper.table2("en-de")
    rows = {"paper (its GPU, Table 2)": {s: f"{t2[LABELS[s]].speed / t2[LABELS[against]].speed:.2f}" for s in systems}}
    for run in store.gpu_runs_with("speed"):
        for mode, words in (("eager", "eager"), ("captured", "graphs")):
            speed, prov = store.gpu_speed(mode, run)
            rows[f"{gpu.gpu_label(prov)} {gpu.commit_label(prov)}, {words}"] = {
                s: gpu.ratio_cell(gpu.ratio_stat(speed, s, against)) if s in speed else "not timed" for s in systems
            }
    cpu, prov = cpu_table(systems, against=against, root=store.measurements)
    rows["CPU, fp32 (not the paper's)"] = {s: "noisy" if prov["noisy"] else cpu_cell(cpu[s]) for s in systems}
    frame = pd.DataFrame.from_dict(rows, orient="index")[[s for s in systems if s != against]]
    frame.columns = [LABELS[s] for s in frame.columns]
    frame.index.name = f"tokens/s x {LABELS[against]}"
    return frame


def nowrap(frame):
    """A table whose cells keep their lines (a number and its interval are read as one)."""
    return frame.style.set_properties(**{"white-space": "nowrap"})


def budget_values(store: Store) -> dict[str, Any]:
    """Twice the updates (the budget study's x2 models against the 1x main-plan runs): each system's gain and the
    gap at 2x (the registry's judgements), the greedy valid BLEU of the x2 logs at the 1x run's averaged checkpoints,
    how many x2 validation losses turn up at the end, and whether the x2 logs pass through the 1x runs."""
    train = store.spec.train
    steps, every, averaged = train["max_steps"], train["valid_every"], train["average_last"]
    x2 = {s: store.budget_runs(s, 2) for s in ("balanced", "can")}
    one = {s: store.runs(s) for s in ("balanced", "can")}
    v: dict[str, Any] = {
        "updates_1x": steps,
        "updates_2x": 2 * steps,
        "valid_every": every,
        "averaged": averaged,
        "averaged_first": steps - (averaged - 1) * every,
        "budget_stored": all(x2.values()),
    }
    if not v["budget_stored"]:
        return v
    v["seeds_2x"] = min(len(r.seeds) for r in x2.values())
    for s in ("balanced", "can"):
        v |= judged(store)[f"budget-adds-{s}"].values(f"gain_{s}")
        v[f"{s}_test_2x"] = x2[s].mean("test")
    v |= judged(store)["can-within-0.5"].at(2).values("gap_can_2x")
    v |= judged(store)["budget-narrows-gap"].values("change_2x")
    v["change_sets"] = sets_sentence(judged(store)["budget-narrows-gap"])
    up, total, through = 0, 0, 0
    for s in ("balanced", "can"):
        curve: dict[int, list[dict[str, Any]]] = {}
        for file, seed in zip(x2[s].files, x2[s].seeds):
            points = [p for p in store.log(file) if p.get("kind") == "valid"]
            for p in points:
                curve.setdefault(p["step"], []).append(p)
            total += 1
            up += points[-1]["valid_loss"] > points[-2]["valid_loss"]
            first, _ = store.result(one[s].files[one[s].seeds.index(seed)])
            at_1x = next(p for p in points if p["step"] == steps)
            through += at_1x["valid_loss"] == first["training"]["last_valid"]["valid_loss"]
        for step in (v["averaged_first"], steps, 2 * steps):
            v[f"{s}_greedy_{step}"] = statistics.fmean(p["valid_bleu"] for p in curve[step])
        v[f"{s}_greedy_rise"] = v[f"{s}_greedy_{steps}"] - v[f"{s}_greedy_{v['averaged_first']}"]
        v[f"{s}_greedy_best_step"] = max(curve, key=lambda k: statistics.fmean(p["valid_bleu"] for p in curve[k]))
        v[f"{s}_loss_best_step"] = min(curve, key=lambda k: statistics.fmean(p["valid_loss"] for p in curve[k]))
    v |= {"loss_up": up, "runs_2x": total, "through_1x": through}
    return v


def provenance_values(store: Store, runs: list[Any], prefix: str = "runs") -> dict[str, Any]:
    """Where the runs come from, for the chapter's provenance drop-down: how many, devices, commits, dates, budget,
    and the same as a table (``<prefix>_table``: a drop-down's numbers belong in a table, not a sentence)."""
    provs = store.provenances(runs)
    described = describe_provenances(provs)
    out = {f"{prefix}_{k}": v for k, v in described.items()}
    out[f"{prefix}_table"] = provenance_frame(described, provs)
    return out


def provenance_frame(described: dict[str, Any], provs: list[dict[str, Any]]):
    """A two-column table of where runs come from, with the repository's folders of the device calls that trained
    them (``measurements/<call>/``, found by the commits their notes name)."""
    import pandas as pd

    commits = sorted({str(p["commit"]).removesuffix("+dirty") for p in provs})
    folder = CHECKOUT_DIR / "measurements"

    def names_them(call: Path) -> bool:
        notes = [*call.glob("*.txt"), *call.glob("README.md")]
        return any(c[:7] in note.read_text(encoding="utf-8") for note in notes for c in commits)

    calls = (
        [call.name for call in sorted(folder.iterdir()) if call.is_dir() and names_them(call)]
        if folder.is_dir()
        else []
    )
    rows = {
        "models": str(described["count"]),
        "devices": described["device"],
        "commits": described["commit"],
        "dates": described["date"],
        "budget": described["budget"],
        "device calls (measurements/)": ", ".join(calls) or "not kept in the repository",
    }
    return pd.DataFrame({"": rows}).rename_axis("trained")
