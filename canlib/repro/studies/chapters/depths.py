"""The values the depths chapter (Figure 4) glues into its prose: BLEU over the four depths, how many seeds each
has, the claims registry's verdict of the 14/1 drop (its value, interval, strength and what would settle it), and the
speed of each depth from the stored CPU run and the stored GPU runs, each sentence about them generated from their
numbers.
"""

from __future__ import annotations

from typing import Any

from canlib.catalogue import DEPTH_SYSTEMS
from canlib.model.config import preset
from canlib.repro.studies import gpu_results as gpu
from canlib.repro.studies import paper
from canlib.repro.studies.chapters.prose import names, sets_sentence
from canlib.repro.studies.claims import BY_ID, judged, marks
from canlib.repro.studies.cpu_speed import cpu_cell, cpu_table, noisy_sentence
from canlib.repro.studies.cpu_speed import cpu_provenance as speed_provenance
from canlib.repro.studies.store import Store

KEYS = {"baseline": "6_6", "depth-9-4": "9_4", "balanced": "12_2", "depth-14-1": "14_1"}
DEPTHS = {"baseline": "6/6", "depth-9-4": "9/4", "balanced": "12/2", "depth-14-1": "14/1"}


def gpu_rows(store: Store) -> list[dict[str, Any]]:
    """One row per stored GPU speed run: 12/2 over 6/6 eagerly and from CUDA graphs, by the claims' statistic."""
    rows = []
    for run in store.gpu_runs_with("speed"):
        eager, prov = store.gpu_speed("eager", run)
        graphs, _ = store.gpu_speed("captured", run)
        rows.append(
            {
                "run": gpu.run_label(prov),
                "eager": gpu.ratio_stat(eager, "balanced", "baseline"),
                "graphs": gpu.ratio_stat(graphs, "balanced", "baseline"),
            }
        )
    return rows


def gpu_frame(store: Store):
    """12/2 over 6/6 on the paper's GPU and on each stored GPU run, eager and from CUDA graphs."""
    import pandas as pd

    f4 = paper.figure4()
    rows = {
        "paper (Figure 4, its GPU)": {"eager": f"{f4['12/2']['speed'] / f4['6/6']['speed']:.2f}x", "CUDA graphs": "—"}
    }
    for r in gpu_rows(store):
        rows[r["run"]] = {"eager": gpu.ratio_cell(r["eager"]), "CUDA graphs": gpu.ratio_cell(r["graphs"])}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "12/2 over 6/6"
    return frame


def graphs_values(store: Store) -> dict[str, int]:
    """On how many stored GPU runs the 12/2-over-6/6 speed-up is smaller with CUDA graphs than eager (medians)."""
    rows = gpu_rows(store)
    return {"gpu_runs": len(rows), "graphs_smaller": sum(r["graphs"]["median"] < r["eager"]["median"] for r in rows)}


def cpu_frame(store: Store):
    """Tokens per second of each depth in the stored CPU run and its ratio to 6/6 (the median of the per-repeat ratios
    [95 % interval]), beside the paper's GPU speeds; a noisy run shows no ratio."""
    import pandas as pd

    rows, prov = cpu_table(DEPTH_SYSTEMS, against="baseline", root=store.measurements)
    f4 = paper.figure4()
    frame = pd.DataFrame(
        {
            DEPTHS[s]: {
                "CPU tok/s (median repeat)": "noisy run" if prov["noisy"] else f"{rows[s]['tok_per_s']:.1f}",
                "CPU x 6/6": "noisy run" if prov["noisy"] else cpu_cell(rows[s]),
                "paper tok/s (its GPU)": f"{f4[DEPTHS[s]]['speed']:.2f}",
                "paper x 6/6": f"{f4[DEPTHS[s]]['speed'] / f4['6/6']['speed']:.2f}",
            }
            for s in DEPTH_SYSTEMS
        }
    ).T
    frame.index.name = "depth"
    return frame


def cpu_provenance(store: Store):
    """Where the stored CPU run comes from (:func:`canlib.repro.bench.chapters.cpu_provenance`)."""
    return speed_provenance(cpu_table(DEPTH_SYSTEMS, against="baseline", root=store.measurements)[1])


def cpu_values(store: Store) -> dict[str, Any]:
    """The sentence under the CPU table, generated from its numbers: whether every decoder layer moved to the encoder
    made the step faster (each depth's interval above the one before), and the fastest depth against 6/6."""
    rows, prov = cpu_table(DEPTH_SYSTEMS, against="baseline", root=store.measurements)
    if prov["noisy"]:
        return {"cpu_sentence": noisy_sentence(prov)}
    order = sorted(DEPTH_SYSTEMS, key=lambda s: -preset(s).dec_layers)  # 6/6, 9/4, 12/2, 14/1
    low = {s: (rows[s]["interval"] or (rows[s]["low"], rows[s]["high"]))[0] for s in order}
    high = {s: (rows[s]["interval"] or (rows[s]["low"], rows[s]["high"]))[1] for s in order}
    rising = [b for a, b in zip(order, order[1:]) if low[b] > high[a]]
    not_rising = [DEPTHS[b] for a, b in zip(order, order[1:]) if b not in rising]
    fastest = max(order, key=lambda s: rows[s]["ratio"])
    if not not_rising:
        head = "On the stored CPU run every decoder layer moved to the encoder makes the step faster"
    else:
        head = (
            "On the stored CPU run not every decoder layer moved to the encoder makes the step faster: "
            f"the intervals do not separate {names(not_rising)} from the depth before"
        )
    return {
        "cpu_sentence": f"{head}; the fastest, {DEPTHS[fastest]}, decodes {rows[fastest]['ratio']:.2f} times as fast "
        f"as the Baseline with {preset(fastest).dec_layers} of its {preset('baseline').dec_layers} decoder layers."
    }


def values(store: Store) -> dict[str, Any]:
    """Everything the depths chapter's prose quotes (a judged scale: the chapter presents stored runs)."""
    store.requires_judged("the depths chapter")
    f4 = paper.figure4()
    runs = {s: store.runs(s) for s in KEYS}
    drop = judged(store)["depth-14-1-loses"]
    v: dict[str, Any] = {
        "scale": store.scale,
        "planned_depth_seeds": store.spec.depth_seeds,
        "balanced_bar": BY_ID["balanced-speed-1.90x"].evidence.ok.bound,
        "standard_seeds": drop.standard.seeds,
    }
    for s, key in KEYS.items():
        v[f"seeds_{key}"] = len(runs[s].seeds)
        v[f"test_{key}"] = runs[s].mean("test")
    v["sd_12_2"] = runs["balanced"].sd("test")
    v["gap_9_4"] = v["test_9_4"] - v["test_6_6"]
    v["paper_14_1"] = f4["14/1"]["bleu"] - f4["12/2"]["bleu"]
    v["paper_9_4"] = f4["9/4"]["bleu"] - f4["6/6"]["bleu"]
    v |= marks(store, ["depth-14-1-loses", "balanced-speed-1.90x"]) | drop.values("drop")
    v["gap_14_1"] = drop.value  # the registry's number: 14/1 minus 12/2, means over every stored seed
    v["drop_low"], v["drop_high"] = drop.interval if drop.interval else (float("nan"), float("nan"))
    v["drop_sets"] = sets_sentence(drop)
    v["drop_settle"] = drop.cost or "nothing: the evidence meets its standard"
    v["drop_meets"] = drop.meets
    v["drop_command"] = drop.command
    return v | graphs_values(store) | cpu_values(store)
