"""The attention chapter: how decisive CAN's gate alpha is (the claims registry's "CAN's gate is decisive in every
layer"), and how it compares with what uniform attention gives."""

from __future__ import annotations

from typing import Any

import numpy as np

from _code.marks import marks
from _code.prose import ORDINALS, by_verdict, names
from _code.readers import attention_study
from _code.tables import reading_table
from repro.studies.analyses import gate_shares
from repro.studies.claims import NEAR, judged
from repro.studies.store import Store

THRESHOLD = NEAR  # alpha below this or above 1 - this: the head reads (almost) one side only
MIDDLE = (0.4, 0.6)  # alpha in this band: the head mixes both sides
MIN_POSITIONS = 30  # target positions with fewer test sentences are left out of the per-position comparison


def values(store: Store) -> dict[str, Any]:
    """The range of the CAN layers' mean alpha, the registry's verdict of "the gate is decisive in every layer", and
    per layer in words: alpha at position 1 and at how many positions it is above uniform attention's."""
    study, _ = attention_study(store)
    pos = study["alpha_by_position"]
    keep = np.array(pos["count"]) >= MIN_POSITIONS
    uniform = np.array(pos["uniform"], dtype=float)
    alpha = [np.array(a, dtype=float) for a in pos["alpha"]]
    means = [float(r["mean"]) for r in study["alpha_summary"]]
    return {
        "min_positions": MIN_POSITIONS,
        "test_sentences": int(study["test_sentences"]),
        "layers": len(study["alpha_summary"]),
        "mean_min": min(means),
        "mean_max": max(means),
        "positions": int(keep.sum()),
        "uniform_first": float(uniform[0]),
        "first_words": in_order(f"{a[0]:.3f}" for a in alpha),
        "above_words": in_order(str(int((a[keep] > uniform[keep]).sum())) for a in alpha),
        "first_reading": first_reading([float(a[0]) for a in alpha], float(uniform[0])),
        "takeaway_sentence": by_verdict(
            judged(store)["gate-decisive"].word,
            "CAN's one softmax works as a switch: in every layer most of its shares lie near one end, a head reading "
            "the target prefix or the source, rarely a mix of both.",
            "CAN's one softmax mostly mixes the target prefix and the source: it is not a decisive gate.",
            "CAN's one softmax may work as a switch between the target prefix and the source, but the stored study "
            "does not decide it.",
            "CAN's one softmax works as a switch in some layers and mixes both sides in others.",
        ),
    } | marks(store, ["gate-decisive"])


def first_reading(first: list[float], uniform: float) -> str:
    """What each layer does at the first target position, read from its mean alpha there: most of the query's unit
    on the prefix (which holds only ``<s>``), more than uniform attention would give it but mostly the source, or no
    more than uniform attention (the source)."""
    said = []
    for i, a in enumerate(first, 1):
        if a > 0.5:
            said.append(f"layer {i} puts most of the query's unit on the prefix, that is on `<s>`")
        elif a > uniform:
            said.append(f"layer {i} gives the prefix more than uniform attention would, but reads mostly the source")
        else:
            said.append(f"layer {i} gives the prefix no more than uniform attention would and reads the source")
    return "At the first position, " + "; ".join(said) + "."


def in_order(items) -> str:
    """Per-layer values in the layers' order, in words: "0.732 and 0.035 (the first layer, then the second)"."""
    items = list(items)
    if len(items) == 1:
        return items[0]
    which = "in order" if len(items) > len(ORDINALS) else "the " + ", then the ".join(ORDINALS[: len(items)]) + " layer"
    return f"{names(items)} ({which})"


def gate_table(store: Store):
    """Per CAN layer: the share of alpha values near either end and in the middle band, and the mean alpha."""
    import pandas as pd

    study, _ = attention_study(store)
    rows = [
        {
            "layer": share["layer"],
            f"alpha below {THRESHOLD:g} or above {1 - THRESHOLD:g}": share["near_ends"],
            f"alpha from {MIDDLE[0]:g} to {MIDDLE[1]:g}": share["middle"],
            "mean alpha": float(row["mean"]),
        }
        for row, share in zip(study["alpha_summary"], gate_shares(study, THRESHOLD, MIDDLE))
    ]
    frame = pd.DataFrame(rows)
    shares = {c: "{:.0%}" for c in frame.columns[1:3]}
    return reading_table(frame, "How decisive CAN's gate is, per layer", formats=shares | {"mean alpha": "{:.2f}"})


TICK_FONT = 11  # points: the figures are about 9 inches wide and shown at page width, so ticks stay readable


def plot_map(ax, probs: Any, rows: list[str], cols: list[str], title: str, split: int | None = None) -> None:
    """A heatmap of one attention map (queries down, keys across), from 0 to the map's largest weight, with a
    colour bar that says which weight each colour is; ``split`` draws the prefix | source border. ``probs`` is a
    tensor or nested lists (a stored study)."""
    values = np.asarray(probs, dtype=float)
    image = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=max(float(values.max()), 1e-9), aspect="auto")
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
    bar.ax.tick_params(labelsize=TICK_FONT - 2)
    ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=TICK_FONT)
    ax.set_yticks(range(len(rows)), rows, fontsize=TICK_FONT)
    ax.set_title(title, fontsize=TICK_FONT + 1)
    if split is not None:
        ax.axvline(split - 0.5, color="white", linewidth=2)


def plot_pair_maps(
    standard: list[dict[str, Any]],
    joint: list[dict[str, Any]],
    src_tokens: list[str],
    tgt_tokens: list[str],
    title: str = "",
    width: float = 9.0,
):
    """Two rows per decoder layer: a standard model's self map beside its cross map, then below them a CAN model's
    joint map over [prefix | source], whose t + s columns line up with the t + s columns of the two maps above
    (the maps of :func:`canlib.analysis.attention_maps.attention_maps`, as tensors or as the nested lists a stored
    study holds)."""
    import matplotlib.pyplot as plt

    layers = max(len(standard), len(joint))
    t, s = len(tgt_tokens), len(src_tokens)
    cell = width / (t + s + 4)  # inches per key column, leaving room for the row labels
    row_height = cell * t + 1.9  # the map, its rotated column labels and its title
    fig = plt.figure(figsize=(width, 2 * layers * row_height), constrained_layout=True)
    grid = fig.add_gridspec(2 * layers, 2, width_ratios=[t, s])
    for i in range(layers):
        if i < len(standard):
            for column, (kind, cols) in enumerate((("self", tgt_tokens), ("cross", src_tokens))):
                axes = fig.add_subplot(grid[2 * i, column])
                plot_map(axes, standard[i][kind], tgt_tokens, cols, f"standard layer {i + 1}: {kind}")
        if i < len(joint):
            plot_map(
                fig.add_subplot(grid[2 * i + 1, :]),
                joint[i]["joint"],
                tgt_tokens,
                tgt_tokens + src_tokens,
                f"CAN layer {i + 1}: one softmax over [prefix | source]",
                split=t,
            )
    if title:
        fig.suptitle(title, fontsize=TICK_FONT + 1)
    return fig
