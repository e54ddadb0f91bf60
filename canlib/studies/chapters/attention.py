"""The attention chapter: how decisive CAN's gate alpha is, and how it compares with what uniform attention gives."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from canlib.studies.analyses import attention_study
from canlib.studies.scorecard import interval_verdict

THRESHOLD = 0.1  # alpha below this or above 1 - this: the head reads (almost) one side only
MIDDLE = (0.4, 0.6)  # alpha in this band: the head mixes both sides
MIN_POSITIONS = 30  # target positions with fewer test sentences are left out of the per-position comparison
DECISIVE = 0.5  # a layer's gate is decisive when more than this share of its values is near 0 or 1


def values(scale: str, root: Path | None = None) -> dict[str, Any]:
    """Per CAN layer: the share of (target position, head) values of alpha near 0 or 1 and in the middle band, its
    quantiles and mean (``layer{i}_...``), the range of those over layers, whether every layer is decisive (the
    book's interval rule over the layers' shares), and alpha at position 1 and above uniform attention's."""
    study, _ = attention_study(scale, root=root)
    hist = study["alpha_histogram"]
    edges = np.array(hist["edges"])
    near_ends = (edges[1:] <= THRESHOLD + 1e-12) | (edges[:-1] >= 1 - THRESHOLD - 1e-12)
    middle = (edges[:-1] >= MIDDLE[0] - 1e-12) & (edges[1:] <= MIDDLE[1] + 1e-12)
    out: dict[str, Any] = {"scale": scale, "threshold": THRESHOLD, "high_threshold": 1 - THRESHOLD,
                           "middle_low": MIDDLE[0], "middle_high": MIDDLE[1], "min_positions": MIN_POSITIONS,
                           "decisive_share": DECISIVE, "test_sentences": int(study["test_sentences"]),
                           "layers": len(study["alpha_summary"])}
    extreme = []
    for row, counts in zip(study["alpha_summary"], hist["counts"]):
        counts = np.array(counts, dtype=float)
        i = row["layer"]
        share = float(counts[near_ends].sum() / counts.sum())
        extreme.append(share)
        out |= {f"layer{i}_extreme_share": share, f"layer{i}_middle_share": float(counts[middle].sum() / counts.sum()),
                **{f"layer{i}_{k}": float(row[k]) for k in ("p10", "median", "p90", "mean")}}
    out |= {"extreme_min": min(extreme), "extreme_max": max(extreme),
            "mean_min": min(float(r["mean"]) for r in study["alpha_summary"]),
            "mean_max": max(float(r["mean"]) for r in study["alpha_summary"]),
            "decisive": interval_verdict(min(extreme), max(extreme), lambda share: share > DECISIVE)}
    pos = study["alpha_by_position"]
    keep = np.array(pos["count"]) >= MIN_POSITIONS
    uniform = np.array(pos["uniform"], dtype=float)
    out |= {"positions": int(keep.sum()), "uniform_first": float(uniform[0])}
    for i, alpha in enumerate(pos["alpha"], 1):
        alpha = np.array(alpha, dtype=float)
        out |= {f"layer{i}_first": float(alpha[0]), f"layer{i}_above_uniform": int((alpha[keep] > uniform[keep]).sum())}
    above = [out[f"layer{i}_above_uniform"] for i in range(1, len(pos["alpha"]) + 1)]
    out |= {"above_uniform_min": min(above), "above_uniform_max": max(above)}
    return out
