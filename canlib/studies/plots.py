"""Figures from training logs: the paper's Figure 8 (train and valid loss of several systems)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_log(run: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a run's log.jsonl (``run`` is the run directory or the log file itself)."""
    path = Path(run)
    if path.is_dir():
        path = path / "log.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no training log")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line ({exc})") from exc
    return rows


def plot_loss_curves(runs: dict[str, str | os.PathLike | list[dict[str, Any]]], ax=None, x: str = "step"):
    """Train (solid) and validation (dashed, dots) loss per update of several runs on one axes.

    Each run is a run directory, its log.jsonl, or the log's rows (as a stored result keeps them)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for i, (label, run) in enumerate(runs.items()):
        rows = run if isinstance(run, list) else read_log(run)
        color = f"C{i}"
        train = [(r[x], r["train_loss"]) for r in rows if r.get("train_loss") is not None]
        valid = [(r[x], r["valid_loss"]) for r in rows if r.get("valid_loss") is not None]
        if train:
            ax.plot(*zip(*train), color=color, label=f"{label} train")
        if valid:
            ax.plot(*zip(*valid), color=color, linestyle="--", marker=".", label=f"{label} valid")
    ax.set_xlabel("update" if x == "step" else x)
    ax.set_ylabel("label-smoothed loss (nats/token)")
    ax.legend(fontsize="small")
    return ax
