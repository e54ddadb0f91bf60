"""The stored analyses the claims registry reads, each one stored result: the attention study's gate values and a
training log's last losses.

The engine computes each from the seed-1 runs of a scale's main corpus and stores it (``python -m repro experiment
--studies similarity,errors,attention,conversion``; at tiny, a chapter's explicit ``train_missing`` call); they are
loaded through a :class:`~repro.studies.store.Store`. The readers the pages alone use are the pages' glue
(``book/_code/readers.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def final_losses(log: list[dict[str, Any]]) -> tuple[float, float]:
    """(train loss, valid loss) at the last validation of a training log."""
    rows = [r for r in log if r.get("valid_loss") is not None]
    if not rows:
        raise ValueError("the training log holds no validation record")
    train_rows = [r["train_loss"] for r in log if r.get("train_loss") is not None]
    return float(train_rows[-1]) if train_rows else float("nan"), float(rows[-1]["valid_loss"])


def gate_shares(
    study: dict[str, Any], near: float = 0.1, middle: tuple[float, float] = (0.4, 0.6)
) -> list[dict[str, Any]]:
    """Per CAN layer of the stored attention study: the share of its gate values (alpha over every target position
    and head of the test split) within ``near`` of 0 or 1, and in the ``middle`` band, read from the stored
    histogram."""
    edges = np.array(study["alpha_histogram"]["edges"])
    near_ends = (edges[1:] <= near + 1e-12) | (edges[:-1] >= 1 - near - 1e-12)
    band = (edges[:-1] >= middle[0] - 1e-12) & (edges[1:] <= middle[1] + 1e-12)
    counts = np.array(study["alpha_histogram"]["counts"], dtype=float)  # a row of counts per layer
    return [
        {
            "layer": row["layer"],
            "near_ends": float(c[near_ends].sum() / c.sum()),
            "middle": float(c[band].sum() / c.sum()),
        }
        for row, c in zip(study["alpha_summary"], counts)
    ]
