"""The tables and figures of the compression chapters: the stages of canlib's choices (``compress_layer.md``) and
the approximations measured on a trained decoder (``compress_trained.md``, from the stored ``approximations``
analysis), and Eq. 8 as the layer chapter checks it (:func:`joint_self_cross`). Formatting only: every number comes
from :mod:`canlib.model.compress`."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from _code.prose import span
from _code.tables import reading_table
from canlib.model.compress import StandardWeights, attention_scores, normalize, self_cross_values, two_softmax

STAGE_COLUMNS = {
    "eq": "Eq.",
    "exact": "exact?",
    "max_abs_vs_prev": "largest change",
    "rel_vs_prev": "relative change",
    "rel_vs_standard": "relative error vs standard",
}


def _sig(value: float, digits: int = 2) -> str:
    """A number with ``digits`` significant digits, as a reader writes it (0 stays 0)."""
    return "0" if value == 0 else f"{value:.{digits}g}"


def joint_self_cross(w: StandardWeights, x: Tensor, h: Tensor, pad: Tensor | None = None) -> Tensor:
    """Eq. 8: ``Self(X) + Cross(X, H) = sum_i A^i [V_1^i ; V_2^i] + bo1 + bo2`` (exact).

    Self and Cross have different output maps, so each head's values absorb theirs
    (d wide per head). Two softmaxes, original queries: only the products are joined.
    """
    z = normalize(x, w.eps)
    s_x, s_h = attention_scores(w, z, h, pad, query="separate")
    values = self_cross_values(w, z, h, w.o1.W, w.o2.W)
    return (two_softmax(s_x, s_h) @ values).sum(1) + w.o1.b + w.o2.b


def step_table(rows: list[dict[str, Any]]):
    """The stages of :func:`canlib.model.compress.step_errors` as a table: the change of the layer's update Y - X
    from the stage before (largest entry, and relative to its size) and its error against the standard layer."""
    import pandas as pd

    frame = pd.DataFrame(
        [{"stage": r["step"], **{label: r[key] for key, label in STAGE_COLUMNS.items()}} for r in rows]
    )
    frame["exact?"] = frame["exact?"].map({True: "yes", False: "no"})
    numbers = {label: _sig for key, label in STAGE_COLUMNS.items() if key not in ("eq", "exact")}
    return reading_table(frame, formats=numbers)


def layer_table(result: dict[str, Any], paper_fig2: list[list[float]]):
    """Per decoder layer (one column each) of the stored ``approximations`` analysis: Eq. 6 measured three ways,
    how uniform the cross-attention is, the target share alpha of one softmax, and the paper's Fig. 2 diagonal."""
    import pandas as pd

    measures = {
        "cos(X, X')": "cos_input",
        "cos(LN X, LN X')": "cos_normed",
        "Cross: relative error": "cross_rel_err",
        "cross-attention entropy / log S": "entropy",
        "alpha: mean": "alpha_mean",
        "alpha: sd": "alpha_std",
    }
    layers = result["layers"]
    per_layer = {name: [layer[key] for layer in layers] for name, key in measures.items()}
    per_layer["the paper's Fig. 2 diagonal (its layers)"] = [paper_fig2[i][i] for i in range(len(layers))]
    rows = [
        {"measure": name, **{f"layer {i}": _sig(x, 3) for i, x in enumerate(xs, 1)}} for name, xs in per_layer.items()
    ]
    return reading_table(pd.DataFrame(rows))


def stage_table(result: dict[str, Any]):
    """The stages on every decoder layer of the stored analysis: relative change from the stage before and
    relative error against the standard layer, per layer."""
    import pandas as pd

    layers = result["layers"]
    rows = []
    for j, step in enumerate(layers[0]["steps"]):
        row = {"stage": step["step"], "Eq.": step["eq"]}
        for i, layer in enumerate(layers, 1):
            row[f"layer {i}: change"] = layer["steps"][j]["rel_vs_prev"]
            row[f"layer {i}: vs standard"] = layer["steps"][j]["rel_vs_standard"]
        rows.append(row)
    frame = pd.DataFrame(rows)
    return reading_table(frame, formats={c: _sig for c in frame.columns[2:]})


def conversion_table(result: dict[str, Any]):
    """Validation NLL of the trained standard model, its conversions to CAN without training and an untrained
    CAN, beside a uniform guess."""
    import pandas as pd

    nll = {**result["conversion"], "a uniform guess over the vocabulary": result["uniform_nll"]}
    rows = [{"model": name, "validation NLL (nats per token)": value} for name, value in nll.items()]
    return reading_table(pd.DataFrame(rows), formats={"validation NLL (nats per token)": "{:.2f}"})


def stages_figure(result: dict[str, Any]):
    """Above: each stage's relative change of the layer update, per decoder layer (log scale, stages named on the
    vertical axis so that they read horizontally). Below: the target share alpha of one softmax per layer."""
    import matplotlib.pyplot as plt
    import numpy as np

    layers = result["layers"]
    stages = [s["step"] for s in layers[0]["steps"][1:]]  # stage 0 is the standard layer itself
    fig, (ax, ax_alpha) = plt.subplots(2, 1, figsize=(7.5, 7.2), gridspec_kw={"height_ratios": [1.7, 1]})
    height = 0.8 / len(layers)
    for k, layer in enumerate(layers):
        y = np.arange(len(stages)) + (k - (len(layers) - 1) / 2) * height
        ax.barh(
            y, [max(s["rel_vs_prev"], 1e-17) for s in layer["steps"][1:]], height=height, label=f"decoder layer {k + 1}"
        )
    ax.set_yticks(range(len(stages)), stages, fontsize=11)
    ax.invert_yaxis()  # the derivation's order, top to bottom
    ax.set_xscale("log")
    ax.set_xlim(1e-17, 10)
    ax.set_xlabel("relative change of the update Y - X from the stage before", fontsize=11)
    ax.axvline(1e-10, color="gray", lw=1, ls=":")  # exact stages sit left of it
    ax.legend(fontsize=10, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(layers), frameon=False)
    edges = np.linspace(0, 1, len(layers[0]["alpha_histogram"]) + 1)
    for k, layer in enumerate(layers):
        counts = np.asarray(layer["alpha_histogram"], dtype=float)
        ax_alpha.stairs(counts / counts.sum(), edges, fill=True, alpha=0.5, label=f"decoder layer {k + 1}")
    ax_alpha.axvline(0.5, color="k", lw=1)
    ax_alpha.set_xlabel(r"target share $\alpha$ of one softmax (per position and head)", fontsize=11)
    ax_alpha.set_ylabel("share of the values", fontsize=11)
    ax_alpha.legend(fontsize=10)
    fig.tight_layout()
    return fig


# -- what compress_trained says, written from the stored numbers -------------------------------------------------

LEARNT_LITTLE = 0.2  # below this share of a uniform guess's loss removed, a model has learnt almost nothing
NEAR_UNIFORM = 0.9  # cross-attention rows with more than this share of the largest entropy are nearly uniform
NEAR_HALF = 0.1  # a mean target share alpha within this of 1/2 is what the value scale 2 assumes


def trained_findings(result: dict[str, Any], paper_fig2: list[list[float]]) -> list[str]:
    """The page's reading of the stored ``approximations`` analysis, one short paragraph per finding, each sentence
    chosen by the numbers (how much the model learnt, how far X' is from X, how peaked cross-attention is, which stage
    costs most, alpha against 1/2, and the conversion against an untrained CAN)."""
    layers = result["layers"]
    learnt = (result["uniform_nll"] - result["valid_nll"]) / result["uniform_nll"]
    out = [
        f"**What the model learnt.** Its validation loss is {result['valid_nll']:.2f} nats per token, against "
        f"{result['uniform_nll']:.2f} for a uniform guess over the vocabulary: "
        + (
            "it has learnt almost nothing, so the sizes below demonstrate the method, not the paper's assumptions."
            if learnt < LEARNT_LITTLE
            else "it translates, so the sizes below are those of a decoder that has learnt where to look."
        )
    ]
    cosines = [layer["cos_input"] for layer in layers]
    above = sum(c > paper_fig2[i][i] for i, c in enumerate(cosines))
    where = {0: "below it at every one", len(layers): "above it at every one"}.get(
        above, f"above it at {above} of the {len(layers)}"
    )
    out.append(
        f"**Eq. 6.** The cosine of X and X′ is {span(cosines)} over the decoder layers. Beside the paper's own "
        f"diagonal at the same layers (of a deeper decoder, on WMT), ours is {where}."
    )
    entropy = [layer["entropy"] for layer in layers]
    cross = [layer["cross_rel_err"] for layer in layers]
    peaked = min(entropy) <= NEAR_UNIFORM
    out.append(
        f"**Where cross-attention looks.** Its rows have {span(entropy)} of the largest possible entropy: "
        + ("they pick source positions, " if peaked else "nearly uniform rows, which hide Eq. 6's error (exercise 1), ")
        + f"and reading X instead of X′ moves its output by {span(cross)} of its size."
    )
    stages = [(s["rel_vs_prev"], s["step"], s["eq"]) for layer in layers for s in layer["steps"] if not s["exact"]]
    worst, step, eq = max(stages)
    total = [layer["steps"][-1]["rel_vs_standard"] for layer in layers]
    out.append(
        f"**The costliest stage** is '{step}' ({eq}), a change of up to {worst:.2f} of the update's size. All stages "
        f"together move a layer's update by {span(total)} of its size against the standard layer."
    )
    alpha = [layer["alpha_mean"] for layer in layers]
    half = all(abs(a - 0.5) <= NEAR_HALF for a in alpha)
    out.append(
        f"**One softmax** gives the target prefix a mean share α of {span(alpha)} per layer: "
        + (
            "close to the half that the converter's factor 2 assumes."
            if half
            else "not the half that the converter's factor 2 assumes, and it varies from query to query (the figure)."
        )
    )
    nll = result["conversion"]
    trained, converted = nll["trained standard (Balanced)"], nll["converted: shared query (least squares), values x2"]
    untrained = nll["untrained CAN"]
    variants = {k: v for k, v in nll.items() if k.startswith("converted")}
    best = min(variants, key=variants.get)
    keeps = converted < result["uniform_nll"] and converted < untrained
    out.append(
        f"**The converted model.** Without training, its loss rises from {trained:.2f} to {converted:.2f} nats per "
        f"token (the best variant, '{best.removeprefix('converted: ')}', {variants[best]:.2f}); an untrained CAN's "
        f"is {untrained:.2f}. "
        + (
            "The conversion keeps part of what the model learnt: a starting point, not a replacement."
            if keeps
            else "The conversion keeps nothing an untrained CAN does not have."
        )
    )
    return out
