"""Diagrams drawn in code: a standard pre-norm decoder layer next to a CAN layer (the paper's Figs. 1 and 3).

A chapter calls ``decoder_layers_figure()`` in a one-line cell, so the picture is rebuilt with the book and
cannot drift from the code it explains. Every drawn block carries a ``gid`` (``"norm"``, ``"residual"``,
``"product"``, ...) so a test can count what the picture claims: three LayerNorms and three residual adds in
the standard layer, one of each in CAN.
"""

from __future__ import annotations

from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

COLORS = {
    "norm": "#f2e6c9",
    "attention": "#f6c7a8",
    "ffn": "#bcdcf0",
    "product": "#d8ecd0",
    "softmax": "#f6c7a8",
    "io": "#ffffff",
}


def _box(ax: Axes, x: float, y: float, text: str, kind: str, w: float = 3.2, h: float = 0.8) -> None:
    """A labelled box centred at (x, y), coloured and tagged (``gid``) by its kind."""
    patch = FancyBboxPatch(
        (x - w / 2, y - h / 2),
        w,
        h,
        boxstyle="round,pad=0.05,rounding_size=0.15",
        facecolor=COLORS.get(kind, "#eeeeee"),
        edgecolor="#333333",
        linewidth=1.0,
        gid=kind,
    )
    ax.add_patch(patch)
    ax.text(x, y, text, ha="center", va="center", fontsize=8.5)


def _add(ax: Axes, x: float, y: float, gid: str = "residual", radius: float = 0.28) -> None:
    """An addition drawn as a circled plus: a residual add, or a ``"sum"`` inside the FFN."""
    ax.add_patch(Circle((x, y), radius, facecolor="white", edgecolor="#333333", linewidth=1.0, gid=gid))
    ax.text(x, y, "+", ha="center", va="center", fontsize=11)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float]) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, linewidth=1.0, color="#333333"))


def _elbow(ax: Axes, start: tuple[float, float], side: float, end: tuple[float, float]) -> None:
    """A path around the blocks between: out sideways from ``start`` to x = ``side``, along it, and into ``end``
    (a skip connection into its add, or X W1 into the sum)."""
    ax.plot([start[0], side, side], [start[1], start[1], end[1]], color="#333333", linewidth=1.0)
    _arrow(ax, (side, end[1]), end)


def _panel(ax: Axes, title: str, height: float = 16.5) -> None:
    ax.set_xlim(0, 10)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=10)


def draw_standard_layer(ax: Axes) -> None:
    """Pre-norm Transformer decoder layer: three sub-layers, each LayerNorm -> op -> residual add, in sequence."""
    _panel(ax, "Standard decoder layer: 3 sub-layers, run one after another")
    cx, side = 5.2, 1.6
    ax.text(cx, 0.35, r"target prefix $X$ ($t \times d$)", ha="center", fontsize=8.5)
    y = 0.8
    stages = [
        ("LayerNorm", r"self-attention: $A_x\, X W_{v1} W_{o1}$" + "\n(causal, over the prefix)", "attention", None),
        ("LayerNorm", r"cross-attention: $A_h\, H W_{v2} W_{o2}$", "attention", r"encoder $H$ ($s\times d$)"),
        ("LayerNorm", r"FFN: ReLU$(\cdot W_1 + b_1) W_2 + b_2$" + "\n" + r"$W_1$: $d\times 4d$", "ffn", None),
    ]
    for i, (norm, op, kind, side_input) in enumerate(stages):
        branch = y + 0.4
        _arrow(ax, (cx, y), (cx, y + 0.9))
        _box(ax, cx, y + 1.3, norm, "norm", h=0.7)
        _arrow(ax, (cx, y + 1.65), (cx, y + 2.1))
        _box(ax, cx, y + 2.7, op, kind, w=4.6, h=1.1)
        if side_input:
            ax.text(9.85, y + 2.7, side_input, ha="right", va="bottom", fontsize=7.5, rotation=90)
            _arrow(ax, (9.6, y + 2.7), (cx + 2.35, y + 2.7))
        _arrow(ax, (cx, y + 3.25), (cx, y + 3.95))
        _add(ax, cx, y + 4.25)
        _elbow(ax, (cx, branch), side, (cx - 0.3, y + 4.25))
        ax.text(0.15, y + 2.7, f"sub-layer {i + 1}", rotation=90, va="center", fontsize=8, color="#555555")
        y += 4.55
    _arrow(ax, (cx, y - 0.02), (cx, y + 0.5))
    ax.text(cx, y + 0.75, r"output $Y$ ($t \times d$)", ha="center", fontsize=8.5)


def draw_can_layer(ax: Axes) -> None:
    """CAN layer: one LayerNorm, all products of X (and of H) in parallel, one softmax, ReLU, W2, one residual."""
    _panel(ax, "CAN layer: 1 sub-layer; the products in a box run in parallel")
    cx, side = 5.2, 0.9
    ax.text(cx, 0.35, r"target prefix $X$ ($t \times d$)", ha="center", fontsize=8.5)
    _arrow(ax, (cx, 0.8), (cx, 1.7))
    _box(ax, cx, 2.05, "LayerNorm (the only one)", "norm", h=0.7)
    # one fused product of X: [Wq | Wk1 | W~v1 | W1] (canlib's x_proj)
    ax.add_patch(Rectangle((1.55, 2.85), 7.0, 1.45, fill=False, linestyle="--", edgecolor="#2a7a2a", gid="parallel"))
    ax.text(
        1.6, 4.42, r"one product $X[W_q\,|\,W_{k1}\,|\,\tilde W_{v1}\,|\,W_1]$ (x_proj)", fontsize=7.5, color="#2a7a2a"
    )
    products = (
        (2.45, r"$XW_q$", "d"),
        (4.15, r"$XW_{k1}$", "d"),
        (5.9, r"$X\tilde W_{v1}$", "4d"),
        (7.65, r"$XW_1$", "4d"),
    )
    for x, product, width in products:
        _arrow(ax, (cx, 2.4), (x, 3.05))
        _box(ax, x, 3.55, f"{product}\n${width}$", "product", w=1.55, h=0.95)
    # one softmax over [prefix ; source], fed by the shared query and both key blocks
    _box(ax, 3.3, 6.3, "ONE softmax over\n[prefix ; source]\n" + r"$A$: $t \times (t+s)$", "softmax", w=3.0, h=1.3)
    for x in (2.45, 4.15):
        _arrow(ax, (x, 4.05), (x, 5.62))
    # the source side: computed once per sentence (h_proj), shared by all steps and beams
    ax.add_patch(Rectangle((6.05, 5.55), 3.05, 1.45, fill=False, linestyle="--", edgecolor="#2a7a2a", gid="parallel"))
    ax.text(
        6.05,
        7.08,
        r"encoder $H[W_{k2}|\tilde W_{v2}]$, once" + "\nper sentence (h_proj)",
        fontsize=7.5,
        color="#2a7a2a",
        va="bottom",
    )
    _box(ax, 6.8, 6.25, r"$HW_{k2}$" + "\n" + r"$d$", "product", w=1.3, h=0.95)
    _box(ax, 8.35, 6.25, r"$H\tilde W_{v2}$" + "\n" + r"$4d$", "product", w=1.3, h=0.95)
    _arrow(ax, (6.15, 6.25), (4.82, 6.25))
    # A times the 4d-wide values of both blocks
    _box(
        ax,
        5.6,
        8.9,
        r"$A\,[X\tilde W_{v1} ; H\tilde W_{v2}]$" + "\n" + r"$t \times 4d$",
        "attention",
        w=3.4,
        h=1.0,
    )
    _arrow(ax, (3.3, 6.97), (4.4, 8.38))
    _arrow(ax, (5.9, 4.05), (5.6, 8.38))
    _arrow(ax, (8.35, 6.75), (6.8, 8.38))
    # the FFN's first product joins after the attention
    _arrow(ax, (5.6, 9.42), (5.6, 10.0))
    _add(ax, 5.6, 10.3, gid="sum")
    _elbow(ax, (8.45, 3.55), 9.45, (5.9, 10.3))
    ax.text(9.55, 8.6, r"$XW_1 + b_1$", rotation=90, fontsize=7.5, va="center")
    _arrow(ax, (5.6, 10.58), (5.6, 11.1))
    _box(ax, 5.6, 11.55, r"ReLU, then $W_2$ ($4d \to d$), $+\,b_2$", "ffn", w=4.2, h=0.8)
    _arrow(ax, (5.6, 11.96), (5.6, 12.75))
    _add(ax, 5.6, 13.05)
    _elbow(ax, (cx, 1.2), side, (5.3, 13.05))
    ax.text(side - 0.35, 7.5, "the one residual", rotation=90, va="center", fontsize=8, color="#555555")
    _arrow(ax, (5.6, 13.33), (5.6, 14.0))
    ax.text(5.6, 14.25, r"output $Y$ ($t \times d$)", ha="center", fontsize=8.5)


def decoder_layers_figure(figsize: tuple[float, float] = (11.0, 8.5)) -> Figure:
    """The paper's Figs. 1 and 3 side by side: what a decoding step runs in a standard layer and in CAN."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=figsize)
    draw_standard_layer(left)
    draw_can_layer(right)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------
# The three ideas of the paper's chain (Eqs. 7-13), drawn from the tensors a chapter computes

PREFIX, SOURCE = "#3b75af", "#e08a2c"  # the target prefix's columns and the source's, in every picture below


def _mass_bars(ax: Axes, prefix: list[float], source: list[float], limit: float) -> None:
    """One horizontal bar per query row: the mass on the prefix block, then the mass on the source block."""
    rows = range(len(prefix))
    ax.barh(rows, prefix, color=PREFIX, height=0.6, gid="prefix-mass")
    ax.barh(rows, source, left=prefix, color=SOURCE, height=0.6, gid="source-mass")
    for r, (a, b) in enumerate(zip(prefix, source)):
        ax.text(a + b + 0.04 * limit, r, f"{a + b:.0f}", va="center", fontsize=10)
    ax.set_xlim(0, limit * 1.25)
    ax.set_ylim(len(prefix) - 0.5, -0.5)
    ax.set_yticks([])
    ax.set_xticks(range(int(limit) + 1))
    ax.tick_params(labelsize=10)
    ax.set_xlabel("row mass: prefix, source", fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)


def joint_softmax_figure(two: Any, one: Any, prefix: int) -> Figure:
    """Eq. 10 beside Eq. 11 on the same scores: each a t x (t + s) map (prefix columns, a white line, source
    columns) and, per query row, the mass each block holds. Two softmaxes give each block a unit of its own (rows sum
    to 2); one softmax shares a single unit, alpha on the prefix and 1 - alpha on the source."""
    import matplotlib.pyplot as plt
    import numpy as np

    maps = [np.asarray(m, dtype=float) for m in (two, one)]
    t, width = maps[0].shape
    fig, axes = plt.subplots(
        2, 2, figsize=(7.5, 4.8), gridspec_kw={"width_ratios": [width, 2.6], "wspace": 0.08, "hspace": 0.55}
    )
    titles = ("Eq. 10: two softmaxes, each block a unit of its own", "Eq. 11: one softmax over [X ; H], one unit")
    keys = [f"x{j + 1}" for j in range(prefix)] + [f"h{j + 1}" for j in range(width - prefix)]
    for k, (values, title) in enumerate(zip(maps, titles)):
        ax, bars = axes[k]
        ax.imshow(values, cmap="Greys", vmin=0.0, vmax=1.0, aspect="equal")
        for (r, c), value in np.ndenumerate(values):
            shade = "white" if value > 0.55 else "black"
            ax.text(c, r, f"{value:.2f}", ha="center", va="center", fontsize=9, color=shade)
        ax.axvline(prefix - 0.5, color="white", linewidth=3)
        ax.axvline(prefix - 0.5, color="#555555", linewidth=0.8)
        ax.set_xticks(range(width), keys, fontsize=10)
        for label, color in zip(ax.get_xticklabels(), [PREFIX] * prefix + [SOURCE] * (width - prefix)):
            label.set_color(color)
        ax.set_yticks(range(t), [f"query {r + 1}" for r in range(t)], fontsize=10)
        ax.set_title(title, fontsize=10.5, loc="left")
        _mass_bars(bars, list(values[:, :prefix].sum(1)), list(values[:, prefix:].sum(1)), 2.0)
    return fig


def _matrix(ax: Axes, x: float, y: float, rows: float, cols: float, label: str, color: str, gid: str, **kw) -> None:
    """A matrix drawn to scale (``rows`` high, ``cols`` wide, in data units), its name inside."""
    ax.add_patch(Rectangle((x, y - rows), cols, rows, facecolor=color, edgecolor="#333333", gid=gid, **kw))
    ax.text(x + cols / 2, y - rows / 2, label, ha="center", va="center", fontsize=10)


def absorbed_values_figure() -> Figure:
    """Eq. 12 to Eq. 13 as shapes, drawn to scale (d is one unit): the attention mixes the d-wide values, and W1
    (d x 4d) multiplies the result; by associativity W1 moves into the value maps, W~v = Wv W1 (d x 4d; canlib's
    output map Wo sits between them, dashed), so the attention mixes 4d-wide values and nothing waits after it."""
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 4.6))
    d, t, s = 1.0, 1.2, 1.6  # drawn sizes: the width d, the prefix and source lengths
    rows = t + s

    def mixed(ax: Axes, width: float, tilde: str) -> float:
        """A times [X W ; H W] stacked, the prefix rows above the source rows; returns where the values end."""
        ax.set_xlim(-0.2, 17.5)
        ax.set_ylim(-0.6, rows + 0.9)
        ax.set_aspect("equal")
        ax.axis("off")
        _matrix(ax, 0, rows, t, rows, "$A$", "#dddddd", "attention")
        ax.text(rows + 0.25, rows / 2, r"$\times$", fontsize=12, va="center")
        _matrix(ax, rows + 0.8, rows, t, width, rf"$X{tilde}_{{v1}}$", PREFIX + "55", "values")
        _matrix(ax, rows + 0.8, s, s, width, rf"$H{tilde}_{{v2}}$", SOURCE + "55", "values")
        return rows + 0.8 + width

    # Eq. 12: A [X Wv1 ; H Wv2] W1 -- the product with W1 waits for the attention
    top.set_title(
        r"Eq. 12: $A\,[XW_{v1} ; HW_{v2}]\,W_1$: the attention mixes $d$-wide values, then $W_1$", fontsize=10
    )
    end = mixed(top, d, "W")
    top.text(end + 0.25, rows / 2, r"$\times$", fontsize=12, va="center")
    _matrix(top, end + 0.8, rows / 2 + d / 2, d, 4 * d, "$W_1$", "#bcdcf0", "w1")
    top.text(end + 0.8 + 2 * d, rows / 2 - d / 2 - 0.45, r"$d \times 4d$", ha="center", fontsize=10)
    top.text(end + 1.2 + 4 * d, rows / 2, r"$=\ t \times 4d$", fontsize=10, va="center")
    # Eq. 13: W~v = Wv (Wo) W1 first, once; the attention then mixes 4d-wide values
    bottom.set_title(
        r"Eq. 13: $\widetilde W_v = W_v\,W_1$ (canlib: $W_v W_o W_1$) first, once: $A\,[X\widetilde W_{v1} ; "
        r"H\widetilde W_{v2}]$",
        fontsize=10,
    )
    end = mixed(bottom, 4 * d, r"\widetilde W")
    bottom.text(end + 0.3, rows / 2, "where", fontsize=10, va="center")
    x = end + 1.4
    y = rows / 2 + d / 2
    _matrix(bottom, x, y, d, d, "$W_v$", "#d8ecd0", "wv")
    _matrix(bottom, x + d + 0.3, y, d, d, "$W_o$", "#ffffff", "wo", linestyle="--")
    _matrix(bottom, x + 2 * d + 0.6, y, d, 4 * d, "$W_1$", "#bcdcf0", "w1")
    bottom.text(x + 6 * d + 0.75, y - d / 2, r"$= \widetilde W_v$", fontsize=10, va="center")
    bottom.text(x + d + 0.3 + d / 2, y - d - 0.45, "canlib only", ha="center", fontsize=9, color="#555555")
    fig.tight_layout()
    return fig


def ffn_entry_figure() -> Figure:
    """Where the attention meets the FFN. Left, Eq. 12: the attention's output is added to X and the sum passes
    W1, so W1 waits for the attention. Right, Eq. 13: X W1 is computed beside the query, keys and values, and the
    4d-wide attention output joins it inside the ReLU: nothing of the FFN but ReLU and W2 follows the attention."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(7.5, 4.6))
    for ax, title in ((left, "Eq. 12: W1 after the attention"), (right, "Eq. 13: the attention inside the ReLU")):
        _panel(ax, title, height=11.4)
        ax.text(5, 0.3, r"$X$ ($t \times d$), $H$", ha="center", fontsize=9)
    # Eq. 12
    _arrow(left, (5, 0.7), (5, 1.4))
    _box(left, 5, 1.9, r"$A\,[XW_{v1} ; HW_{v2}]$: $t \times d$", "attention", w=5.0, h=0.8)
    _arrow(left, (5, 2.35), (5, 3.2))
    _box(left, 5, 3.6, r"$X + \cdot$", "io", w=2.2, h=0.7)
    _arrow(left, (5, 3.95), (5, 4.8))
    _box(left, 5, 5.3, r"$\cdot\, W_1 + b_1$: $t \times 4d$" + "\nwaits for the attention", "ffn", w=5.0, h=1.0)
    _ffn_end(left, 5.85)
    # Eq. 13
    _arrow(right, (3.2, 0.7), (3.2, 1.4))
    _arrow(right, (7.6, 0.7), (7.6, 1.4))
    mixed = r"$A\,[X\widetilde W_{v1} ; H\widetilde W_{v2}]$" + "\n" + r"$t \times 4d$"
    _box(right, 3.2, 1.9, mixed, "attention", w=4.6, h=1.0)
    _box(right, 7.6, 1.9, r"$XW_1 + b_1$" + "\n" + r"$t \times 4d$", "product", w=2.6, h=1.0)
    _add(right, 5, 4.6, gid="sum", radius=0.3)
    _arrow(right, (3.2, 2.45), (4.75, 4.4))
    _arrow(right, (7.6, 2.45), (5.25, 4.4))
    right.text(4.75, 5.9, "side by side:\none product of X", ha="right", fontsize=9, color="#2a7a2a")
    _ffn_end(right, 4.9)
    fig.tight_layout()
    return fig


def _ffn_end(ax: Axes, y: float) -> None:
    """What follows in both forms: from ``y`` up through ReLU and W2 to the FFN's output."""
    _arrow(ax, (5, y), (5, 6.9))
    _box(ax, 5, 7.3, "ReLU", "ffn", w=2.2, h=0.7)
    _arrow(ax, (5, 7.65), (5, 8.5))
    _box(ax, 5, 8.9, r"$\cdot\, W_2 + b_2$", "ffn", w=2.6, h=0.7)
    _arrow(ax, (5, 9.25), (5, 10.0))
    ax.text(5, 10.3, r"$Y_f$ ($t \times d$)", ha="center", fontsize=9)


HEAD_COLOURS = ("#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6")  # head 1, 2, 3, 4


def head_split_figure(heads: int) -> Figure:
    """What h heads do with 4d-wide values, drawn to scale (d is two units). Above, the exact form: head i has its
    own d x 4d map Wv^i Wo^i W1 and mixes all 4d columns; the h outputs are summed. Below, canlib's: one d x 4d map
    Wv Wo W1 is cut into h column slices, head i mixes slice i alone, and the slices stand side by side."""
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 4.6))
    d = 2.0
    for ax in (top, bottom):
        ax.set_xlim(-0.2, 17.5)
        ax.set_aspect("equal")
        ax.axis("off")
    top.set_ylim(-0.6, 4 * 0.75 + 0.4)
    top.set_title(r"exact: $h$ maps $W_v^i W_o^i W_1$, each $d \times 4d$; the $h$ outputs summed", fontsize=10)
    for i in range(heads):  # one full-width map per head, and its output
        y = (heads - i) * 0.75
        mixed = rf"head {i + 1}: $A^{i + 1}\,(z\,W_v^{i + 1} W_o^{i + 1} W_1)$"
        _matrix(top, 0, y, 0.6, 4 * d, mixed, HEAD_COLOURS[i % 4], "head-map")
        top.text(4 * d + 0.3, y - 0.3, "+" if i < heads - 1 else "=", fontsize=12, va="center")
    _matrix(top, 4 * d + 1.2, heads * 0.75 / 2 + 0.6, 1.2, 4 * d, r"$t \times 4d$", "#eeeeee", "output")
    bottom.set_ylim(-0.9, 2.4)
    bottom.set_title(
        r"canlib: one map $W_v W_o W_1$ ($d \times 4d$) cut into $h$ column slices; head $i$ mixes slice $i$",
        fontsize=10,
    )
    width = 4 * d / heads
    for i in range(heads):  # the one map's slices, and the output's
        _matrix(bottom, i * width, 1.8, 1.2, width, f"head {i + 1}", HEAD_COLOURS[i % 4], "slice")
        _matrix(bottom, 4 * d + 1.2 + i * width, 1.8, 1.2, width, rf"$A^{i + 1}$", HEAD_COLOURS[i % 4], "output")
    bottom.text(4 * d + 0.3, 1.2, r"$\to$", fontsize=12, va="center")
    bottom.text(2 * d, 0.25, r"$W_v W_o W_1$: $d \times 4d$", ha="center", fontsize=9)
    bottom.text(4 * d + 1.2 + 2 * d, 0.25, r"$t \times 4d$, slices side by side", ha="center", fontsize=9)
    bottom.text(8.6, -0.6, "equal to the sum above only where every head attends alike", ha="center", fontsize=9)
    fig.tight_layout()
    return fig
