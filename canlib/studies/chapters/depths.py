"""The values the depths chapter (Figure 4) glues into its prose: BLEU over the four depths, how many seeds each
has, and the claims registry's verdict of the 14/1 drop (with one 14/1 seed: the seed-1 pair's test-set interval
alone, as the registry states; the second depth seed is queued in ``scripts/gpu_small.sh``).
"""

from __future__ import annotations

from typing import Any

from canlib.results.layout import experiment_command
from canlib.studies import paper
from canlib.studies.claims import BY_ID, judged, marks
from canlib.studies.store import Store

KEYS = {"baseline": "6_6", "depth-9-4": "9_4", "balanced": "12_2", "depth-14-1": "14_1"}
DEPTHS = {"baseline": "6/6", "depth-9-4": "9/4", "balanced": "12/2", "depth-14-1": "14/1"}


def graphs_values(store: Store) -> dict[str, int]:
    """On how many stored GPU runs the 12/2-over-6/6 speed-up is smaller with CUDA graphs than eager."""
    ratios = []
    for run in store.gpu_runs_with("speed"):
        eager, _ = store.gpu_speed("eager", run)
        graphs, _ = store.gpu_speed("captured", run)
        ratios.append(
            (
                eager["balanced"]["tok_per_s"] / eager["baseline"]["tok_per_s"],
                graphs["balanced"]["tok_per_s"] / graphs["baseline"]["tok_per_s"],
            )
        )
    return {"gpu_runs": len(ratios), "graphs_smaller": sum(g < e for e, g in ratios)}


def values(store: Store) -> dict[str, Any]:
    """Everything the depths chapter's prose quotes (a judged scale: the chapter presents stored runs)."""
    store.requires_judged("the depths chapter")
    f4 = paper.figure4()
    runs = {s: store.runs(s) for s in KEYS}
    v: dict[str, Any] = {
        "scale": store.scale,
        "planned_depth_seeds": store.spec.depth_seeds,
        "balanced_bar": BY_ID["balanced-speed-1.90x"].evidence.ok.bound,
    }
    for s, key in KEYS.items():
        v[f"seeds_{key}"] = len(runs[s].seeds)
        v[f"test_{key}"] = runs[s].mean("test")
    v["sd_12_2"] = runs["balanced"].sd("test")
    v["gap_14_1"] = v["test_14_1"] - v["test_12_2"]
    v["gap_9_4"] = v["test_9_4"] - v["test_6_6"]
    v["paper_14_1"] = f4["14/1"]["bleu"] - f4["12/2"]["bleu"]
    v["paper_9_4"] = f4["9/4"]["bleu"] - f4["6/6"]["bleu"]
    drop = judged(store)["depth-14-1-loses"]
    v |= marks(store, ["depth-14-1-loses", "balanced-speed-1.90x"]) | drop.values("drop")
    test = next((s for s in drop.sets if s["split"] == "test"), None)
    if test and test["test_set_interval"]:
        v |= {
            "pair_low": test["test_set_interval"][0],
            "pair_high": test["test_set_interval"][1],
            "pair_value": test["value"],
        }
    v["drop_seed_interval"] = bool(test and test["seed_interval"])
    v["seeds_command"] = experiment_command(
        store.scale,
        systems=["depth-9-4", "depth-14-1"],
        seeds=range(1, store.spec.depth_seeds + 1),
        corpora=[store.corpus],
    )
    return v | graphs_values(store)
