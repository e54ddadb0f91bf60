"""Diagrams drawn in code: a standard pre-norm decoder layer next to a CAN layer (the paper's Figs. 1 and 3).

A chapter calls ``decoder_layers_figure()`` in a one-line cell, so the picture is rebuilt with the book and
cannot drift from the code it explains. Every drawn block carries a ``gid`` (``"norm"``, ``"residual"``,
``"product"``, ...) so a test can count what the picture claims: three LayerNorms and three residual adds in
the standard layer, one of each in CAN.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Block:
    """A labelled box, centred at (x, y), in data coordinates of a 10 x 16 panel."""

    x: float
    y: float
    text: str
    kind: str
    w: float = 3.2
    h: float = 0.8


def _box(ax: Axes, b: Block) -> tuple[float, float, float, float]:
    patch = FancyBboxPatch(
        (b.x - b.w / 2, b.y - b.h / 2),
        b.w,
        b.h,
        boxstyle="round,pad=0.05,rounding_size=0.15",
        facecolor=COLORS.get(b.kind, "#eeeeee"),
        edgecolor="#333333",
        linewidth=1.0,
        gid=b.kind,
    )
    ax.add_patch(patch)
    ax.text(b.x, b.y, b.text, ha="center", va="center", fontsize=8.5)
    return b.x, b.y, b.w, b.h


def _add(ax: Axes, x: float, y: float) -> None:
    """A residual addition, drawn as a circled plus."""
    ax.add_patch(Circle((x, y), 0.28, facecolor="white", edgecolor="#333333", linewidth=1.0, gid="residual"))
    ax.text(x, y, "+", ha="center", va="center", fontsize=11)


def _arrow(
    ax: Axes, start: tuple[float, float], end: tuple[float, float], rad: float = 0.0, dashed: bool = False
) -> None:
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=10,
            linewidth=1.0,
            color="#333333",
            connectionstyle=f"arc3,rad={rad}",
            linestyle="--" if dashed else "-",
        )
    )


def _residual_path(ax: Axes, x_from: float, y_from: float, y_add: float, side: float) -> None:
    """The skip connection: from the stream at y_from, around the sub-layer on the left, into the add."""
    ax.plot([x_from, side, side], [y_from, y_from, y_add], color="#333333", linewidth=1.0)
    _arrow(ax, (side, y_add), (x_from - 0.3, y_add))


def _panel(ax: Axes, title: str) -> None:
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 16.5)
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
        _box(ax, Block(cx, y + 1.3, norm, "norm", h=0.7))
        _arrow(ax, (cx, y + 1.65), (cx, y + 2.1))
        _box(ax, Block(cx, y + 2.7, op, kind, w=4.6, h=1.1))
        if side_input:
            ax.text(9.85, y + 2.7, side_input, ha="right", va="bottom", fontsize=7.5, rotation=90)
            _arrow(ax, (9.6, y + 2.7), (cx + 2.35, y + 2.7))
        _arrow(ax, (cx, y + 3.25), (cx, y + 3.95))
        _add(ax, cx, y + 4.25)
        _residual_path(ax, cx, branch, y + 4.25, side)
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
    _box(ax, Block(cx, 2.05, "LayerNorm (the only one)", "norm", h=0.7))
    # one fused product of X: [Wq | Wk1 | W~v1 | W1] (canlib's x_proj)
    ax.add_patch(Rectangle((1.55, 2.85), 7.0, 1.45, fill=False, linestyle="--", edgecolor="#2a7a2a", gid="parallel"))
    ax.text(
        1.6, 4.42, r"one product $X[W_q\,|\,W_{k1}\,|\,\tilde W_{v1}\,|\,W_1]$ (x_proj)", fontsize=7.5, color="#2a7a2a"
    )
    xs = [2.45, 4.15, 5.9, 7.65]
    labels = [
        r"$XW_q$" + "\n" + r"$d$",
        r"$XW_{k1}$" + "\n" + r"$d$",
        r"$X\tilde W_{v1}$" + "\n" + r"$4d$",
        r"$XW_1$" + "\n" + r"$4d$",
    ]
    for x, label in zip(xs, labels):
        _arrow(ax, (cx, 2.4), (x, 3.05), rad=0.0)
        _box(ax, Block(x, 3.55, label, "product", w=1.55, h=0.95))
    # one softmax over [prefix ; source], fed by the shared query and both key blocks
    _box(
        ax, Block(3.3, 6.3, "ONE softmax over\n[prefix ; source]\n" + r"$A$: $t \times (t+s)$", "softmax", w=3.0, h=1.3)
    )
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
    _box(ax, Block(6.8, 6.25, r"$HW_{k2}$" + "\n" + r"$d$", "product", w=1.3, h=0.95))
    _box(ax, Block(8.35, 6.25, r"$H\tilde W_{v2}$" + "\n" + r"$4d$", "product", w=1.3, h=0.95))
    _arrow(ax, (6.15, 6.25), (4.82, 6.25))
    # A times the 4d-wide values of both blocks
    _box(
        ax,
        Block(5.6, 8.9, r"$A\,[X\tilde W_{v1} ; H\tilde W_{v2}]$" + "\n" + r"$t \times 4d$", "attention", w=3.4, h=1.0),
    )
    _arrow(ax, (3.3, 6.97), (4.4, 8.38))
    _arrow(ax, (5.9, 4.05), (5.6, 8.38))
    _arrow(ax, (8.35, 6.75), (6.8, 8.38))
    # the FFN's first product joins after the attention
    plus = (5.6, 10.3)
    _arrow(ax, (5.6, 9.42), (5.6, 10.0))
    ax.add_patch(Circle(plus, 0.28, facecolor="white", edgecolor="#333333", linewidth=1.0, gid="sum"))
    ax.text(*plus, "+", ha="center", va="center", fontsize=11)
    ax.plot([8.45, 9.45, 9.45], [3.55, 3.55, 10.3], color="#333333", linewidth=1.0)
    _arrow(ax, (9.45, 10.3), (5.9, 10.3))
    ax.text(9.55, 8.6, r"$XW_1 + b_1$", rotation=90, fontsize=7.5, va="center")
    _arrow(ax, (5.6, 10.58), (5.6, 11.1))
    _box(ax, Block(5.6, 11.55, r"ReLU, then $W_2$ ($4d \to d$), $+\,b_2$", "ffn", w=4.2, h=0.8))
    _arrow(ax, (5.6, 11.96), (5.6, 12.75))
    _add(ax, 5.6, 13.05)
    ax.plot([cx, side, side], [1.2, 1.2, 13.05], color="#333333", linewidth=1.0)
    _arrow(ax, (side, 13.05), (5.3, 13.05))
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


def count_blocks(ax: Axes, gid: str) -> int:
    """How many drawn blocks of one kind a panel holds (for tests, and for a reader's own figures)."""
    return sum(1 for p in ax.patches if p.get_gid() == gid)
