"""The attention chapter: how decisive CAN's gate alpha is (the claims registry's "CAN's gate is decisive in every
layer"), and how it compares with what uniform attention gives."""

from __future__ import annotations

from typing import Any

import numpy as np

from canlib.repro.studies.analyses import attention_study, gate_shares
from canlib.repro.studies.claims import DECISIVE, NEAR, marks
from canlib.repro.studies.store import Store
from canlib.repro.studies.tables import reading_table

THRESHOLD = NEAR  # alpha below this or above 1 - this: the head reads (almost) one side only
MIDDLE = (0.4, 0.6)  # alpha in this band: the head mixes both sides
MIN_POSITIONS = 30  # target positions with fewer test sentences are left out of the per-position comparison


def values(store: Store) -> dict[str, Any]:
    """Per CAN layer: the share of (target position, head) values of alpha near 0 or 1 and in the middle band, its
    quantiles and mean (``layer{i}_...``), the range of those over layers, the registry's verdict of "the gate is
    decisive in every layer", and alpha at position 1 and above uniform attention's."""
    study, _ = attention_study(store)
    out: dict[str, Any] = {
        "scale": store.scale,
        "threshold": THRESHOLD,
        "high_threshold": 1 - THRESHOLD,
        "middle_low": MIDDLE[0],
        "middle_high": MIDDLE[1],
        "min_positions": MIN_POSITIONS,
        "decisive_share": DECISIVE,
        "test_sentences": int(study["test_sentences"]),
        "layers": len(study["alpha_summary"]),
    }
    extreme = []
    for row, share in zip(study["alpha_summary"], gate_shares(study, THRESHOLD, MIDDLE)):
        i = row["layer"]
        extreme.append(share["near_ends"])
        out |= {
            f"layer{i}_extreme_share": share["near_ends"],
            f"layer{i}_middle_share": share["middle"],
            **{f"layer{i}_{k}": float(row[k]) for k in ("p10", "median", "p90", "mean")},
        }
    out |= {
        "extreme_min": min(extreme),
        "extreme_max": max(extreme),
        "mean_min": min(float(r["mean"]) for r in study["alpha_summary"]),
        "mean_max": max(float(r["mean"]) for r in study["alpha_summary"]),
    }
    out |= marks(store, ["gate-decisive"])
    pos = study["alpha_by_position"]
    keep = np.array(pos["count"]) >= MIN_POSITIONS
    uniform = np.array(pos["uniform"], dtype=float)
    out |= {"positions": int(keep.sum()), "uniform_first": float(uniform[0])}
    for i, alpha in enumerate(pos["alpha"], 1):
        alpha = np.array(alpha, dtype=float)
        out |= {f"layer{i}_first": float(alpha[0]), f"layer{i}_above_uniform": int((alpha[keep] > uniform[keep]).sum())}
    above = [out[f"layer{i}_above_uniform"] for i in range(1, len(pos["alpha"]) + 1)]
    first = [out[f"layer{i}_first"] for i in range(1, len(pos["alpha"]) + 1)]
    out |= {
        "above_uniform_min": min(above),
        "above_uniform_max": max(above),
        "first_words": in_order(f"{a:.3f}" for a in first),
        "above_words": in_order(str(a) for a in above),
    }
    return out


def in_order(items) -> str:
    """Per-layer values in the layers' order, in words: "0.732 and 0.035 (the first layer, then the second)"."""
    items = list(items)
    ordinals = ("first", "second", "third", "fourth", "fifth", "sixth")
    if len(items) == 1:
        return items[0]
    named = ", then the ".join(ordinals[: len(items)]) if len(items) <= len(ordinals) else "in order"
    return (
        f"{', '.join(items[:-1])} and {items[-1]} ({'in order' if named == 'in order' else 'the ' + named + ' layer'})"
    )


def gate_table(store: Store):
    """Per CAN layer: the share of alpha values near either end and in the middle band, and the mean alpha."""
    import pandas as pd

    v = values(store)
    rows = [
        {
            "layer": i,
            f"alpha below {THRESHOLD:g} or above {1 - THRESHOLD:g}": v[f"layer{i}_extreme_share"],
            f"alpha from {MIDDLE[0]:g} to {MIDDLE[1]:g}": v[f"layer{i}_middle_share"],
            "mean alpha": v[f"layer{i}_mean"],
        }
        for i in range(1, v["layers"] + 1)
    ]
    frame = pd.DataFrame(rows)
    shares = {c: "{:.0%}" for c in frame.columns[1:3]}
    return reading_table(frame, "How decisive CAN's gate is, per layer", formats=shares | {"mean alpha": "{:.2f}"})
