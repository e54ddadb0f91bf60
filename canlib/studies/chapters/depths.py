"""The values the depths chapter (Figure 4) glues into its prose: BLEU over the four depths, how many seeds
each has, and the 14/1 drop judged by the verdict rule (it needs two seeds of 14/1: until they are stored it is
not judged, and only the test-set interval of the one seed pair is given).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from canlib.studies import evidence as ev, gpu_results as gpu
from canlib.studies.paper import paper_numbers
from canlib.studies.scorecard import experiment_command, pair, quality_claim
from canlib.studies.verdict import FAILED, HELD, NOISE, NOT_RUN, bootstrap_contrast, central_95, word

KEYS = {"baseline": "6_6", "depth-9-4": "9_4", "balanced": "12_2", "depth-14-1": "14_1"}
DROP = {HELD: "reproduces", FAILED: "does not reproduce", NOISE: "is within noise", NOT_RUN: "is not judged yet"}
SAMPLING = {True: "larger than the test set's sampling noise", False: "not clear of the test set's sampling noise"}


def graphs_values() -> dict[str, int]:
    """On how many stored GPU runs the 12/2-over-6/6 speed-up is smaller with CUDA graphs than eager."""
    ratios = []
    for run in gpu.speed_runs():
        eager, _ = gpu.gpu_speed("eager", run)
        graphs, _ = gpu.gpu_speed("captured", run)
        ratios.append((eager["balanced"]["tok_per_s"] / eager["baseline"]["tok_per_s"],
                       graphs["balanced"]["tok_per_s"] / graphs["baseline"]["tok_per_s"]))
    return {"gpu_runs": len(ratios), "graphs_smaller": sum(g < e for e, g in ratios)}


def values(scale: str, root: Path | None = None, refs: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Everything the depths chapter's prose quotes at ``scale`` (a judged scale: the chapter presents stored
    runs; ``refs``: each evaluation set's references, read from the corpus when not given)."""
    ev.require_judged(scale, "the depths chapter")
    f4 = paper_numbers()["fig4_balance_en-de"]
    paper = dict(zip(KEYS, f4["bleu"]))
    refs = ev.references(scale) if refs is None else refs
    runs = {s: ev.main_runs(scale, s, root=root) for s in KEYS}
    v: dict[str, Any] = {"scale": scale}
    for s, key in KEYS.items():
        v[f"seeds_{key}"] = len(runs[s].seeds)
        v[f"test_{key}"] = runs[s].mean("test")
    v["sd_12_2"] = runs["balanced"].sd("test")
    v["gap_14_1"] = v["test_14_1"] - v["test_12_2"]
    v["gap_9_4"] = v["test_9_4"] - v["test_6_6"]
    v["paper_14_1"] = paper["depth-14-1"] - paper["balanced"]
    v["paper_9_4"] = paper["depth-9-4"] - paper["baseline"]
    missing = [s for s in ("depth-14-1", "balanced") if len(runs[s].seeds) < 2]
    claim = quality_claim("14/1", "", "ΔBLEU < 0", lambda d: d < 0, scale, pair("depth-14-1", "balanced", runs), refs,
                          command=experiment_command(scale, missing) if missing else None)
    v["drop_verdict"] = claim.verdict
    v["drop_word"] = word(claim.verdict, DROP)
    v["seeds_command"] = experiment_command(scale, ["depth-9-4", "depth-14-1"])
    v |= graphs_values()
    shared = sorted(set(runs["depth-14-1"].seeds) & set(runs["balanced"].seeds))
    pick = [runs[s].seeds.index(shared[0]) for s in ("depth-14-1", "balanced")]
    interval = central_95(bootstrap_contrast([(1.0, [runs["depth-14-1"].hyps["test"][pick[0]]]),
                                              (-1.0, [runs["balanced"].hyps["test"][pick[1]]])], refs["test"]))
    v |= {"pair_seed": shared[0], "pair_low": interval.low, "pair_high": interval.high,
          "pair_word": SAMPLING[interval.high < 0 or interval.low > 0]}
    return v
