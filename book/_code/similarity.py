"""The similarity chapter (Figure 2): the diagonals of our sub-layer similarity matrices beside the paper's, and
the claims registry's verdict of "self- and cross-attention inputs are alike".

The 6/6 Baseline is the paper's model; CAN compresses the 12/2 decoder, so the premise must also hold in Balanced's
two layers: the engine's ``similarity-balanced`` study, loaded like the Baseline's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from _code.marks import marks
from _code.prose import ORDINALS, by_verdict, span
from _code.readers import similarity, similarity_study
from canlib.model.config import preset
from repro.experiments.experiment import trains_here
from repro.studies.claims import BY_ID, judged
from repro.studies.evidence import Judged
from repro.studies.paper import paper_numbers
from repro.studies.store import Store
from repro.studies.verdict import FAILS, HOLDS

KEYS = ("self_vs_cross", "cross_vs_ffn")
NEAR_ZERO = 0.01  # a mean left-minus-right difference smaller than this is no difference between the diagonals


def at_layers(holds: np.ndarray) -> str:
    """Where a per-layer condition holds, in words: "at every layer", "at no layer", "at every layer but the first",
    "at 4 of the 6 layers"."""
    n, k = holds.size, int(holds.sum())
    if k == n:
        return "at every layer"
    if k == 0:
        return "at no layer"
    if k == 1 and n <= len(ORDINALS):
        return f"at the {ORDINALS[int(np.flatnonzero(holds)[0])]} layer only"
    if n - k == 1 and n <= len(ORDINALS):
        return f"at every layer but the {ORDINALS[int(np.flatnonzero(~holds)[0])]}"
    return f"at {k} of the {n} layers"


def gap_reading(gap: float) -> str:
    """What a mean left-minus-right difference of the diagonals says about the paper's premise."""
    if gap > NEAR_ZERO:
        return "positive, as in the paper: the cross-attention update moves the stream more than the self-attention one"
    what = "near zero" if gap > -NEAR_ZERO else "negative"
    return (
        f"{what}: in our model the inputs of cross-attention and FFN are as alike as those of self- and "
        "cross-attention, and the argument for treating the two pairs differently does not come from this figure"
    )


def stored(system: str, store: Store) -> bool:
    """Whether a system's similarity study is stored (at tiny: computed by the chapter's explicit ``train_missing``
    call, cached)."""
    return store.has(similarity_study(system))


def balanced_scale(scale: str, store: Store) -> str:
    """The scale Balanced's two layers are read at: the page's own where that study is stored or trained here, else
    tiny (CPU minutes), so the chapter and the appendix that gives its provenance read the same measurement."""
    return scale if stored("balanced", store) or trains_here(scale) else "tiny"


def diagonal(matrix: list[list[float]]) -> np.ndarray:
    return np.diag(np.array(matrix, dtype=float))


def values(store: Store) -> dict[str, Any]:
    """The numbers the chapter's prose quotes: our Baseline's diagonals against the paper's (Figure 2), the gap
    between the two matrices' diagonals that the paper's argument needs, and the bar of "alike"."""
    measured, _ = similarity(store)
    found = judged(store)
    paper = paper_numbers()["fig2_similarity"]
    ours = {k: diagonal(measured["residual"][k]) for k in KEYS}
    theirs = {k: diagonal(paper[k]) for k in KEYS}
    matrices = {"ours": ours, "paper": theirs, "normed": {k: diagonal(measured["normalized"][k]) for k in KEYS}}
    diff = {name: m["self_vs_cross"] - m["cross_vs_ffn"] for name, m in matrices.items()}  # left minus right
    return {
        "ours_diag_min": float(ours["self_vs_cross"].min()),
        "ours_diag_max": float(ours["self_vs_cross"].max()),
        "paper_diag_min": float(theirs["self_vs_cross"].min()),
        "paper_diag_max": float(theirs["self_vs_cross"].max()),
        "ours_gap": float(diff["ours"].mean()),
        "paper_gap": float(diff["paper"].mean()),
        "normalized_gap": float(diff["normed"].mean()),
        "higher_words": at_layers(ours["self_vs_cross"] > theirs["self_vs_cross"]),
        "paper_left_words": at_layers(diff["paper"] > 0),
        "ours_left_words": at_layers(diff["ours"] > 0),
        "gap_reading": gap_reading(float(diff["ours"].mean())),
        "balanced_layers": int(preset("balanced").dec_layers),
        "alike_threshold": BY_ID["inputs-alike"].evidence.ok.bound,
        "takeaway_sentence": takeaway(found["inputs-alike"], found["ffn-inputs-less-alike"], ours["self_vs_cross"]),
    } | marks(store, ["inputs-alike", "ffn-inputs-less-alike"])


def takeaway(alike: Judged, less: Judged, baseline: np.ndarray) -> str:
    """The chapter's one sentence, from the registry's judgements of its two claims: the cosines it read layer by
    layer against the claim's bar, and what each verdict word says of the paper's premise. A scale the registry
    does not judge has no readings: there the sentence reads the Baseline's diagonal, ``baseline``."""
    bar = alike.claim.evidence.ok.bound
    cosines = [r["value"] for r in alike.sets] or [float(c) for c in baseline]
    above = sum(r["by_value"] == HOLDS for r in alike.sets) if alike.sets else int((baseline > bar).sum())
    read = (
        f"self- and cross-attention read inputs with a cosine of {span(cosines)} over {len(cosines)} decoder "
        f"layers, above the paper's bar of {bar:g} at {above} of them"
    )
    premise = by_verdict(
        alike.word,
        f"Our decoders bear out the paper's premise: {read}",
        f"Our decoders do not bear out the paper's premise: {read}",
        f"Our decoders neither confirm nor refute the paper's premise yet: {read}",
        f"Our decoders bear out the paper's premise in some layers only: {read}",
    )
    ffn = by_verdict(
        less.word,
        "cross-attention and FFN inputs are less alike, as the paper argues",
        "cross-attention and FFN inputs are no less alike, against the paper's argument",
        "whether cross-attention and FFN inputs are less alike is undecided too"
        if alike.word not in (HOLDS, FAILS)
        else "whether cross-attention and FFN inputs are less alike is undecided",
        "cross-attention and FFN inputs are less alike in some layers and not in others",
    )
    return f"{premise}; {ffn}."


def balanced_findings(measured: dict[str, Any], threshold: float) -> str:
    """What Balanced's two matrices show (Markdown): its left diagonal against the claim's bar, and whether the left
    diagonal is above the right, as the paper's premise needs."""
    left, right = (diagonal(measured["residual"][k]) for k in KEYS)
    return (
        f"In Balanced, self- and cross-attention read inputs with a cosine of {span(left)} over its layers, at or "
        f"above the claim's bar of {threshold:.2f} {at_layers(left >= threshold)}. The left diagonal is above the "
        f"right {at_layers(left > right)}: "
        + (
            "the paper's premise holds in the decoder CAN compresses."
            if (left > right).all()
            else "where it is not, the inputs of cross-attention and FFN are the more alike pair, and the premise "
            "for compressing the first pair and merging the second fails there."
        )
    )
