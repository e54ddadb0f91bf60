"""The reproduction chapters' figures drawn from stored results: Figure 8 (loss curves, one run or the spread of
several seeds; the 2x runs' learning curves beside it), Figure 2 (sub-layer similarity, drawn as the paper draws
it, for the paper's 6/6 model and for Balanced's two layers), Figure 6 (BLEU per bucket), a decoding step's kernels, and
one figure per BLEU claim (:func:`plot_claim`: the claims registry's judgement per evaluation set and budget, with
its seed and bootstrap intervals, drawn the same way on every page that judges a claim)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from _code.tables import reading_table

# One colour per system in every figure of the book, keyed by the name the pages print (catalogue.LABELS): a reader
# who has found CAN in one figure finds it in the same colour in the next
SYSTEM_COLOURS = {
    "Baseline": "#1f77b4",
    "Balanced": "#ff7f0e",
    "CAN": "#2ca02c",
    "SAN": "#d62728",
    "AAN": "#9467bd",
    "Compress Attention": "#8c564b",
    "Compress FFN": "#e377c2",
    "9/4": "#17becf",
    "14/1": "#bcbd22",
    "CAN 6/6": "#7f7f7f",
}


def system_colour(label: str) -> str:
    """The colour of the system a label names (a label may add words after the system's name: "CAN 2x")."""
    for name in sorted(SYSTEM_COLOURS, key=len, reverse=True):
        if label == name or label.startswith(name + " "):
            return SYSTEM_COLOURS[name]
    raise KeyError(f"no colour for {label!r}: add it to SYSTEM_COLOURS (book/_code/plots.py)")


def _spread(ax, curve: dict[str, Any], color: str, label: str, **style) -> None:
    """A curve of :func:`_code.training.seed_curves` as points at the mean over seeds with bars from
    the lowest seed to the highest."""
    low, high = curve["mean"] - curve["min"], curve["max"] - curve["mean"]
    ax.errorbar(
        curve["step"], curve["mean"], [low, high], color=color, marker="o", ms=4, capsize=3, label=label, **style
    )


def plot_seed_curves(curves: dict[str, dict[str, dict[str, Any]]], ax):
    """Train loss (line: mean over seeds, band: min to max) and validation loss (dots with bars: min to max) per
    update, on ``ax``. ``curves[label]`` holds ``"train"`` and ``"valid"``, each from
    :func:`_code.training.seed_curves`."""
    for label, c in curves.items():
        color, train, valid = system_colour(label), c["train"], c["valid"]
        seeds = train["seeds"]
        ax.plot(
            train["step"], train["mean"], color=color, label=f"{label} train ({seeds} seed{'s' if seeds > 1 else ''})"
        )
        if seeds > 1:
            ax.fill_between(train["step"], train["min"], train["max"], color=color, alpha=0.2, linewidth=0)
        _spread(ax, valid, color, f"{label} valid", linestyle="--")
    ax.set_xlabel("update")
    ax.set_ylabel("label-smoothed loss (nats/token)")
    ax.legend(fontsize="small")
    return ax


def plot_budget_curves(
    curves: dict[str, dict[str, dict[str, Any]]], paper: dict[str, Any], averaged: tuple[int, ...], stop: int
):
    """The 2x learning curves beside the paper's Figure 8: greedy validation BLEU and validation loss per update
    (mean over seeds, bars from min to max), the updates a 1x run averages (dotted) and where it stops (solid),
    and the paper's validation loss per epoch. ``curves[label]`` holds ``"bleu"`` and ``"loss"``, each from
    :func:`_code.training.seed_curves`; ``paper`` is ``paper_numbers()["fig8_curves_en-de"]``."""
    import matplotlib.pyplot as plt

    # three panels stacked, at the text column's width, so that their labels keep a legible size on the page
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 9.0), constrained_layout=True)
    for label, c in curves.items():
        for ax, key in zip(axes, ("bleu", "loss")):
            _spread(ax, c[key], system_colour(label), f"{label} 2x ({c[key]['seeds']} seeds)")
    for ax, ylabel in zip(axes, ("greedy valid BLEU", "valid loss (nats/token)")):
        for step in averaged:
            ax.axvline(step, color="gray", linestyle=":", linewidth=1)
        ax.axvline(stop, color="gray", linewidth=1)
        ax.set_xlabel("update")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize="small")
    for label in ("Baseline", "Balanced", "CAN"):
        axes[2].plot(paper["epochs"], paper["valid"][label], "--", color=system_colour(label), label=label)
    axes[2].set_xlabel("epoch")
    axes[2].set_ylabel("valid loss (unit not stated)")
    axes[2].set_title("paper (WMT14 En-De, Figure 8)", fontsize=10)
    axes[2].legend(fontsize="small")
    return fig


SIMILARITY_PANELS = (
    ("self_vs_cross", "Self-attention input (layer)", "Cross-attention input (layer)"),
    ("cross_vs_ffn", "Cross-attention input (layer)", "FFN input (layer)"),
)


def _similarity_figure(rows: list[tuple[Any, str]], vmin: float, vmax: float, colorbar: str):
    """One row of panels per (matrices, whose) in ``rows``, both matrices of each side by side, drawn as the paper
    draws them: layer 1 at the bottom, x labels on top, grey scale clipped to [vmin, vmax], each cell's value in it.
    ``matrices[key][i][j]`` has the first-named sub-layer's layer i."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(len(rows), 2, figsize=(7.5 + 0.5 * (len(rows) - 1), 3.9 * len(rows)), squeeze=False)
    fig.set_layout_engine("constrained")
    for ax_row, (matrices, who) in zip(axes, rows):
        for ax, (key, ylabel, xlabel) in zip(ax_row, SIMILARITY_PANELS):
            matrix = np.array(matrices[key], dtype=float)
            image = ax.imshow(matrix, origin="lower", vmin=vmin, vmax=vmax, cmap="gray")
            n = matrix.shape[0]
            ax.set_xticks(range(n), range(1, n + 1))
            ax.set_yticks(range(n), range(1, n + 1))
            ax.xaxis.set_label_position("top")
            ax.xaxis.tick_top()
            ax.set(xlabel=xlabel, ylabel=ylabel)
            ax.set_title(f"{who}: {key.replace('_', ' ')}", fontsize=10, pad=28)
            for (i, j), value in np.ndenumerate(matrix):
                shade = "black" if value > (vmin + vmax) / 2 else "white"
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7 if n > 3 else 10, color=shade)
    fig.colorbar(image, ax=axes, shrink=0.6 if len(rows) > 1 else 0.8, label=colorbar)
    return fig


def plot_similarity(
    paper: dict[str, Any], ours: dict[str, Any], label: str = "ours", vmin: float = 0.7, vmax: float = 0.95
):
    """Figure 2 as the paper draws it, the paper's matrices above ours on one colour scale: black at ``vmin`` and
    below, white at ``vmax`` and above (the paper's pgfplots settings).

    ``paper[key][x][y]`` is stored as the paper's table (x: the second-named sub-layer's layer); ``ours[key][i][j]``
    has the first-named sub-layer's layer i, so the paper's matrix is transposed to draw both alike."""
    theirs = {key: [list(row) for row in zip(*paper[key])] for key, _, _ in SIMILARITY_PANELS}
    rows = [(theirs, "paper (WMT14 En-De)"), (ours, label)]
    return _similarity_figure(rows, vmin, vmax, f"cosine similarity (clipped to {vmin}-{vmax}, as the paper)")


def plot_layer_similarity(ours: dict[str, Any], label: str, vmin: float = 0.7, vmax: float = 0.95):
    """Both matrices of one model side by side (as :func:`plot_similarity` draws ours), on the paper's colour scale:
    for a decoder the paper did not draw, such as Balanced's two layers."""
    return _similarity_figure([(ours, label)], vmin, vmax, f"cosine ({vmin}-{vmax})")


def plot_error_buckets(
    rows: dict[str, list[dict[str, Any]]], paper: dict[str, Any], labels: tuple[str, str], title: str = "ours"
):
    """Figure 6: our BLEU per bucket (top; only the rows marked ``shown``, the others named under the axis) above
    the paper's (bottom). ``rows[key]`` is :func:`_code.errors.bucket_rows`; ``labels`` name its two
    systems; ``paper`` is ``paper_numbers()["fig6_error_en-de"]``."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(9, 7.5), constrained_layout=True)  # near the column's width
    systems = [k for k in rows["frequency"][0] if k not in ("bucket", "sentences", "delta", "shown")]
    panels = (
        ("frequency", "word_freq_x1e5", "subword frequency (quantiles)", "word frequency (x1e5)"),
        ("length", "length", "length (words)", "translation length"),
    )
    for col, (key, paper_key, ours_by, paper_by) in enumerate(panels):
        ax = axes[0, col]
        shown = [r for r in rows[key] if r["shown"]]
        hidden = [r for r in rows[key] if not r["shown"]]
        ticks = [f"{r['bucket']}\n(n={r['sentences']})" for r in shown]
        for system, label in zip(systems, labels):
            ax.plot(ticks, [r[system] for r in shown], "o-", color=system_colour(label), label=label)
        ax.set_title(f"{title}: by source {ours_by}", fontsize=10)
        ax.set_ylabel("tokenized BLEU")
        if hidden:
            ax.set_xlabel(
                "not drawn (too few sentences): " + ", ".join(f"{r['bucket']} (n={r['sentences']})" for r in hidden),
                fontsize=8,
            )
        ax.legend()
        ax = axes[1, col]
        series = paper[paper_key]
        for label in ("Balanced", "CAN"):
            ax.plot(series["x"], series[label], "s--", color=system_colour(label), label=label)
        ax.set_title(f"paper (Fig. 6, WMT14 En-De): by {paper_by}", fontsize=10)
        ax.set_ylabel("BLEU")
        ax.legend()
    return fig


LAYER_COLOURS = ("#1f78b4", "#a6cee3")  # alternating, so that each decoder layer reads as one block
PART_COLOURS = {
    "embedding": "#8c8c8c",
    "decoder layers": LAYER_COLOURS[0],
    "output projection": "#6a3d9a",
    "search": "#b15928",
}


def plot_step_kernels(ops: dict[str, Any], systems: dict[str, str]):
    """One beam-search step as the kernels it launches, one box per kernel, part after part (embedding, each decoder
    layer, the output projection, the search's bookkeeping), one row per system, the first on top. ``ops`` is a
    stored operator count (:meth:`repro.studies.store.Store.ops`), which counts kernels per part, not their
    order within a part or their duration: the boxes are counted launches of equal width, not a timeline."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    _, ax = plt.subplots(figsize=(11, 1.1 + 0.9 * len(systems)), constrained_layout=True)
    width = 0
    for row, (system, label) in enumerate(systems.items()):
        c = ops["systems"][system]["cuda"]
        y, x = -row, 0
        embedding, per_layer = c["embedding"]["kernel_operators"], c["per_layer"]["kernel_operators"]
        blocks = [("embedding", embedding, PART_COLOURS["embedding"])]
        blocks += [(f"layer {i + 1}", per_layer, LAYER_COLOURS[i % 2]) for i in range(c["decoder_layers"])]
        rest = c["decoder"]["kernel_operators"] - embedding - per_layer * c["decoder_layers"]  # the decoder's own
        if rest:
            blocks.append(("decoder, other", rest, PART_COLOURS["embedding"]))
        blocks += [
            ("output", c["output"]["kernel_operators"], PART_COLOURS["output projection"]),
            ("search", c["search"]["kernel_operators"], PART_COLOURS["search"]),
        ]
        for name, count, colour in blocks:
            for k in range(round(count)):
                ax.add_patch(Rectangle((x + k + 0.06, y - 0.3), 0.88, 0.6, color=colour, lw=0))
            ax.text(x + count / 2, y - 0.38, f"{name}: {count:g}", ha="center", va="top", fontsize=8)
            x += count
        ax.text(-1, y, f"{label}\n{c['step']['kernel_operators']} kernels", ha="right", va="center", fontsize=10)
        width = max(width, x)
    ax.set_xlim(-12, width + 1)
    ax.set_xticks(range(0, int(width) + 1, 10))
    ax.set_ylim(-len(systems) + 0.35, 0.55)
    ax.set_yticks([])
    ax.set_xlabel("kernels launched one after another in one decoding step (counted, equal widths: not durations)")
    ax.spines[["top", "right", "left"]].set_visible(False)
    handles = [Patch(color=colour, label=part) for part, colour in PART_COLOURS.items()]
    ax.legend(handles=handles, ncol=4, fontsize=8, loc="lower right", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return ax


# -- one figure per claim -------------------------------------------------------------------------------------

BUDGET_STYLE = {None: ("o", "C0"), 1: ("o", "C0"), 2: ("s", "C1")}  # marker and colour of each budget's points
SPLIT_ORDER = ("valid", "test", "test2017_flickr", "test2017_mscoco")


def paper_value(claim: Any) -> float | None:
    """The paper's number for a claim whose paper column is one signed number (``-0.14 (Table 2, En-De)``), else
    None: a quoted range or pair is not one point a figure can mark."""
    import re

    match = re.match(r"^([+-]?\d+(?:\.\d+)?)(?:\s*\(|$)", claim.paper.strip())
    return float(match.group(1)) if match else None


def claim_points(j: Any) -> list[dict[str, Any]]:
    """The points :func:`plot_claim` draws, one per judged budget and evaluation set: the registry's ``sets`` rows
    (split, set name, the contrast, the seed and bootstrap intervals, the set's verdict) of the judgement and of the
    budgets beside it, each with its budget."""
    shown = sorted((x for x in (j, *j.beside) if x.sets), key=lambda x: x.budget or 0)
    return [
        {"budget": x.budget, **row}
        for x in shown
        for row in sorted(x.sets, key=lambda r: SPLIT_ORDER.index(r["split"]))
    ]


def _interval_keys(points: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The legend's keys for the intervals a claim's figure draws: the seed interval, the bootstrap and the one
    interval the verdict reads, each only where some point has it (a legend lists nothing the figure does not draw)."""
    from matplotlib.lines import Line2D

    keys = {}
    if any(p["seed_interval"] for p in points):
        keys["seed interval (95 %, t)"] = Line2D([], [], color="grey", lw=3.5, alpha=0.55)
    if any(p["test_set_interval"] for p in points):
        keys["bootstrap 95 %"] = Line2D([], [], color="grey", lw=0.9, marker="_", ms=5)
    if any(p.get("interval") for p in points):
        keys["one interval, both noises (95 %, judged)"] = Line2D([], [], color="black", lw=1.2, ls=":")
    return keys


def plot_claim(j: Any, ax, *, paper: float | None = None, legend: bool = True):
    """One BLEU claim of the registry as a picture: its contrast on each evaluation set (a point per budget, 1x
    circles, 2x squares), the seed interval as a thick bar, sacreBLEU's paired bootstrap as a thin capped bar beside
    it, the one interval the verdict reads (both noises, test sets only) dotted black on the other side, the
    claim's threshold dashed and the paper's value dotted (``paper``; default :func:`paper_value`). ``j`` is a
    :class:`~repro.studies.evidence.Judged` of a BLEU contrast; nothing is recomputed here."""
    import textwrap

    points = claim_points(j)
    if not points:
        raise ValueError(f"{j.claim.id}: no judged evaluation set to draw ({j.word})")
    splits = [s for s in SPLIT_ORDER if any(p["split"] == s for p in points)]
    names = {p["split"]: p["set"] for p in points}
    shown = sorted({p["budget"] for p in points}, key=lambda b: b or 0)
    width = 0.36 / max(len(shown), 1)
    for k, budget in enumerate(shown):
        marker, colour = BUDGET_STYLE.get(budget, ("D", f"C{k + 2}"))
        offset = (k - (len(shown) - 1) / 2) * width * 1.6
        label = f"{budget}x budget" if budget else "ours"
        for p in (p for p in points if p["budget"] == budget):
            x = splits.index(p["split"]) + offset
            if p["seed_interval"]:
                low, high = p["seed_interval"]
                ax.plot([x, x], [low, high], color=colour, lw=3.5, alpha=0.55, solid_capstyle="butt")
            if p["test_set_interval"]:
                low, high = p["test_set_interval"]
                ax.errorbar(
                    x + width * 0.45,
                    p["value"],
                    yerr=[[p["value"] - low], [high - p["value"]]],
                    fmt="none",
                    ecolor=colour,
                    elinewidth=0.9,
                    capsize=2.5,
                )
            if p.get("interval") and p.get("decides", True):  # the one interval the verdict reads
                ax.plot([x - width * 0.45] * 2, p["interval"], color="black", lw=1.2, ls=":")
            ax.plot(x, p["value"], marker=marker, color=colour, ms=6, ls="none", label=label)
            label = None
    ok = getattr(j.claim.evidence, "ok", None)
    if ok is not None and ok.op == "within":  # an equivalence margin: both of its ends
        for k, end in enumerate((-ok.bound, ok.bound)):
            ax.axhline(end, color="black", ls="--", lw=1, label=None if k else f"criterion: within +-{ok.bound:g}")
    elif ok is not None:
        ax.axhline(ok.bound, color="black", ls="--", lw=1, label=f"criterion: {ok.op} {ok.bound:+g}")
    if ok is None or ok.bound != 0:
        ax.axhline(0, color="grey", lw=0.6)
    paper = paper_value(j.claim) if paper is None else paper
    if paper is not None:
        ax.axhline(paper, color="tab:green", ls=":", lw=1.6, label=f"paper: {paper:+.2f}")
    ax.set_xticks(range(len(splits)), [names[s].replace("test2017 ", "test2017\n") for s in splits])
    ax.set_xlim(-0.6, len(splits) - 0.4)
    ax.set_ylabel("Δ tokenized BLEU")
    ax.set_title("\n".join(textwrap.wrap(j.claim.name, 44)), fontsize=9)
    if legend:  # below the axes, where it covers no point
        handles, labels = ax.get_legend_handles_labels()
        keys = dict(zip(labels, handles)) | _interval_keys(points)
        ax.legend(
            keys.values(), keys, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=3, frameon=False
        )
    ax.tick_params(labelsize=8)
    ax.grid(axis="y", color="#dddddd", lw=0.6)
    return ax


def plot_claims(claims: Sequence[Any], *, papers: dict[str, float] | None = None, ncols: int = 2):
    """Several claims of one page, one panel each (:func:`plot_claim`), on a grid of ``ncols`` columns."""
    import matplotlib.pyplot as plt

    nrows = -(-len(claims) // ncols)
    cols = min(ncols, len(claims))
    fig, axes = plt.subplots(nrows, cols, figsize=(3.9 * cols, 3.0 * nrows + 0.5), layout="constrained", squeeze=False)
    labels: dict[str, Any] = {}
    papers_drawn = False
    for ax, j in zip(axes.flat, claims):
        plot_claim(j, ax, paper=(papers or {}).get(j.claim.id), legend=False)
        handles, names = ax.get_legend_handles_labels()
        labels |= {name: handle for handle, name in zip(handles, names) if not name.startswith("paper")}
        papers_drawn |= any(name.startswith("paper") for name in names)
    for ax in list(axes.flat)[len(claims) :]:
        ax.axis("off")
    from matplotlib.lines import Line2D

    labels |= _interval_keys([p for j in claims for p in claim_points(j)])
    if papers_drawn:  # the key of a line some panel draws, not of one none does
        labels["paper (each panel's value)"] = Line2D([], [], color="tab:green", ls=":", lw=1.6)
    fig.legend(list(labels.values()), list(labels), loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return fig


def claim_table(claims: Sequence[Any]):
    """The numbers of :func:`plot_claims` as one compact table (:func:`reading_table`): a row per claim, budget and
    evaluation set, with the contrast, half its 95 % seed interval (Student's t), the bootstrap interval and that
    set's verdict; the claim's name is given on its first row only."""
    from html import escape

    import pandas as pd

    def word(verdict: str) -> str:  # a set's verdict in its word's colour (book/_static/outputs.css)
        return f'<span class="set-verdict verdict-{verdict.replace(" ", "-")}">{escape(verdict)}</span>'

    rows = []
    for j in claims:
        for k, p in enumerate(claim_points(j)):
            seed, boot = p["seed_interval"], p["test_set_interval"]
            rows.append(
                {
                    "claim": "" if k else escape(j.claim.name),
                    **({"budget": f"{p['budget']}x"} if p["budget"] else {}),
                    "set": escape(p["set"]),
                    "Δ": f"{p['value']:+.2f}",
                    "± seeds (95 %)": f"{(seed[1] - seed[0]) / 2:.2f}" if seed else "—",
                    "bootstrap 95 %": f"{boot[0]:+.2f} to {boot[1]:+.2f}" if boot else "—",
                    "one interval (judged)": f"{p['interval'][0]:+.2f} to {p['interval'][1]:+.2f}"
                    if p.get("interval")
                    else "—",
                    "this set": word(p["verdict"]) if p.get("decides", True) else "shown, not judged",
                }
            )
    frame = pd.DataFrame(rows)
    if "budget" in frame:  # a claim judged at one budget only shares the table with one judged at several
        frame["budget"] = frame["budget"].fillna("—")
        frame = frame[["claim", "budget", *[c for c in frame.columns if c not in ("claim", "budget")]]]
    return reading_table(frame, escape=False)  # every cell escaped above, the verdicts marked
