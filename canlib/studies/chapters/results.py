"""The values the results chapter (Table 2) glues into its prose: BLEU per system, CAN's and Balanced's gaps
judged by the verdict rule on the four evaluation sets, and what twice the budget and checkpoint averaging say
about how far the 1x models are trained (from the budget study's x2 models, whose logs pass through the 1x runs).

Every number is a plain ``float``/``int`` (MyST-NB's ``{glue:text}`` formats it); every word is picked by the
verdict rule from the words listed here. The chapter presents stored results: a scale whose models are not
judged (tiny) has none, and asking for it is an error that names the command which stores them.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from canlib.model.config import ALL_SYSTEMS, PAPER_SYSTEMS
from canlib.studies import evidence as ev
from canlib.studies.paper import paper_numbers
from canlib.studies.quality import format_budget
from canlib.studies.scales import scale_spec
from canlib.studies.verdict import EVAL_SPLITS, FAILED, HELD, NOISE, ON_PAR, PARTLY_HELD, judge, word

WITHIN = {HELD: "holds", FAILED: "does not hold", NOISE: "is within noise"}  # "CAN stays within 0.5 of Balanced ..."
GAINS = {HELD: "adds BLEU", FAILED: "does not add BLEU", NOISE: "changes BLEU within noise"}
CHANGE = {HELD: "narrows", FAILED: "widens", NOISE: "does not move beyond noise",
          PARTLY_HELD: "narrows on some sets and does not move beyond noise on the others"}



def values(scale: str, root: Path | None = None, refs: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Everything the results chapter's prose quotes at ``scale`` (``refs``: each evaluation set's references,
    read from the corpus when not given)."""
    t2 = paper_numbers()["table2_wmt14"]["en-de"]
    v: dict[str, Any] = {"scale": scale, "paper_gap_can": t2["CAN"][0] - t2["Balanced"][0],
                         "paper_gap_balanced": t2["Balanced"][0] - t2["Baseline"][0],
                         "paper_gap_san": t2["SAN"][0] - t2["Balanced"][0], "paper_gap_aan": t2["AAN"][0] - t2["Balanced"][0],
                         "margin": ON_PAR, "sets": len(EVAL_SPLITS)}
    ev.require_judged(scale, "the results chapter")
    refs = ev.references(scale) if refs is None else refs
    runs = {s: ev.main_runs(scale, s, root=root) for s in ALL_SYSTEMS}
    for s in PAPER_SYSTEMS:
        r = runs[s]
        key = s.replace("-", "_")
        v[f"{key}_test"], v[f"{key}_test_sd"], v[f"{key}_seeds"] = r.mean("test"), r.sd("test"), len(r.seeds)
        sacre = ev.sacre_scores(scale, r, "test", root)
        v[f"{key}_test_sacre"], v[f"{key}_test_sacre_sd"] = statistics.fmean(sacre), statistics.stdev(sacre)
    v["metric_gap"] = max(abs(v[f"{s}_test"] - v[f"{s}_test_sacre"]) for s in PAPER_SYSTEMS)
    can = judge([(1.0, runs["can"]), (-1.0, runs["balanced"])], lambda d: d >= -ON_PAR, refs)
    v |= can.values("gap_can")
    v["can_word"] = word(can.verdict, WITHIN)
    bal = judge([(1.0, runs["balanced"]), (-1.0, runs["baseline"])], lambda d: d >= -ON_PAR, refs)
    v |= bal.values("gap_balanced")
    v["balanced_word"] = word(bal.verdict, WITHIN)
    for s in ("san", "aan"):
        v[f"gap_{s}"] = runs[s].mean("test") - runs["balanced"].mean("test")
    stored = {s: r for s, r in runs.items() if r is not None}
    v["systems"] = len(stored)
    v["can_last"] = sum(min(stored, key=lambda s: stored[s].mean(split)) == "can" for split in EVAL_SPLITS)
    v |= budget_values(scale, runs, refs, root)
    v |= provenance_values(scale, [runs[s] for s in ALL_SYSTEMS if runs[s]], root)
    return v


def budget_values(scale: str, runs: dict[str, Any], refs: dict[str, list[str]], root: Path | None = None) -> dict[str, Any]:
    """Twice the updates (the budget study's x2 models against the 1x main-plan runs): each system's gain and the
    gap at 2x on every set, judged; the greedy valid BLEU of the x2 logs at the 1x run's averaged checkpoints; how
    many x2 validation losses turn up at the end; and whether the x2 logs pass through the 1x runs."""
    train = scale_spec(scale).train
    steps, every, averaged = train["max_steps"], train["valid_every"], train["average_last"]
    x2 = {s: ev.budget_runs(scale, s, 2, root) for s in ("balanced", "can")}
    v: dict[str, Any] = {"updates_1x": steps, "updates_2x": 2 * steps, "valid_every": every, "averaged": averaged,
                         "averaged_first": steps - (averaged - 1) * every, "budget_stored": all(x2.values())}
    if not v["budget_stored"]:
        return v
    v["seeds_2x"] = min(len(r.seeds) for r in x2.values())
    for s in ("balanced", "can"):
        gain = judge([(1.0, x2[s]), (-1.0, runs[s])], lambda d: d > 0, refs)
        v |= gain.values(f"gain_{s}")
        v[f"gain_{s}_word"] = word(gain.verdict, GAINS)
        v[f"{s}_test_2x"] = x2[s].mean("test")
    at2 = judge([(1.0, x2["can"]), (-1.0, x2["balanced"])], lambda d: d >= -ON_PAR, refs)
    v |= at2.values("gap_can_2x")
    v["gap_can_2x_word"] = word(at2.verdict, WITHIN)
    change = judge([(1.0, x2["can"]), (-1.0, x2["balanced"]), (-1.0, runs["can"]), (1.0, runs["balanced"])],
                   lambda d: d > 0, refs)
    v |= change.values("change_2x")
    v["change_2x_word"] = word(change, CHANGE)
    up, total, through = 0, 0, 0
    for s in ("balanced", "can"):
        curve = {}
        for file, seed in zip(x2[s].files, x2[s].seeds):
            points = [p for p in ev.stored_log(scale, file, root) if p.get("kind") == "valid"]
            for p in points:
                curve.setdefault(p["step"], []).append(p)
            total += 1
            up += points[-1]["valid_loss"] > points[-2]["valid_loss"]
            one, _ = ev.stored_result(scale, runs[s].files[runs[s].seeds.index(seed)], root)
            at_1x = next(p for p in points if p["step"] == steps)
            through += at_1x["valid_loss"] == one["training"]["last_valid"]["valid_loss"]
        for step in (v["averaged_first"], steps, 2 * steps):
            v[f"{s}_greedy_{step}"] = statistics.fmean(p["valid_bleu"] for p in curve[step])
        v[f"{s}_greedy_rise"] = v[f"{s}_greedy_{steps}"] - v[f"{s}_greedy_{v['averaged_first']}"]
        best = max(curve, key=lambda k: statistics.fmean(p["valid_bleu"] for p in curve[k]))
        v[f"{s}_greedy_best_step"] = best
        lowest = min(curve, key=lambda k: statistics.fmean(p["valid_loss"] for p in curve[k]))
        v[f"{s}_loss_best_step"] = lowest
    v |= {"loss_up": up, "runs_2x": total, "through_1x": through}
    stopped = up == total and all(v[f"{s}_greedy_best_step"] < 2 * steps for s in ("balanced", "can"))
    v["plateau_word"] = ("about where these models stop improving" if stopped
                         else "not yet where these models stop improving")
    return v


def provenance_values(scale: str, runs: list[Any], root: Path | None = None, prefix: str = "runs") -> dict[str, Any]:
    """Where the runs come from, for the chapter's provenance line: how many, devices, commits, dates, budget."""
    provs = [ev.stored_result(scale, f, root)[1] for r in runs for f in r.files]
    return {f"{prefix}_count": len(provs), f"{prefix}_device": ", ".join(sorted({p["device"] for p in provs})),
            f"{prefix}_commit": ", ".join(sorted({str(p["commit"])[:7] for p in provs})),
            f"{prefix}_date": ", ".join(sorted({str(p["date"])[:10] for p in provs})),
            f"{prefix}_budget": format_budget(provs[0].get("budget"))}
