"""The similarity chapter (Figure 2): the diagonals of our sub-layer similarity matrices beside the paper's.

The 6/6 Baseline is the paper's model; CAN compresses the 12/2 decoder, so the premise must also hold in Balanced's
two layers: the engine's ``similarity-balanced`` study, loaded like the Baseline's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from canlib.model.config import preset
from canlib.studies.analyses import similarity, similarity_study
from canlib.studies.paper import paper_numbers
from canlib.studies.scales import scale_spec
from canlib.studies.scorecard import NOT_RUN
from canlib.studies.store import stored_path

KEYS = ("self_vs_cross", "cross_vs_ffn")


def stored(system: str, scale: str, root: Path | None = None) -> bool:
    """Whether a system's similarity study is stored at ``scale`` (at tiny: computed by the chapter's explicit
    ``train_missing`` call, cached)."""
    return stored_path(similarity_study(system), scale, root).exists()


def diagonal(matrix: list[list[float]]) -> np.ndarray:
    return np.diag(np.array(matrix, dtype=float))


def values(scale: str, root: Path | None = None) -> dict[str, Any]:
    """The numbers the chapter's prose quotes: our Baseline's diagonals against the paper's (Figure 2), the gap
    between the two matrices' diagonals that the paper's argument needs, and whether Balanced is measured at
    ``scale`` and at ``small``."""
    measured, _ = similarity(scale, root=root)
    paper = paper_numbers()["fig2_similarity"]
    ours = {k: diagonal(measured["residual"][k]) for k in KEYS}
    normed = {k: diagonal(measured["normalized"][k]) for k in KEYS}
    theirs = {k: diagonal(paper[k]) for k in KEYS}
    diff = {"ours": ours["self_vs_cross"] - ours["cross_vs_ffn"], "paper": theirs["self_vs_cross"] - theirs["cross_vs_ffn"]}
    out: dict[str, Any] = {
        "scale": scale, "layers": int(ours["self_vs_cross"].size),
        "ours_diag_min": float(ours["self_vs_cross"].min()), "ours_diag_max": float(ours["self_vs_cross"].max()),
        "ours_diag_mean": float(ours["self_vs_cross"].mean()),
        "paper_diag_min": float(theirs["self_vs_cross"].min()), "paper_diag_max": float(theirs["self_vs_cross"].max()),
        "paper_diag_mean": float(theirs["self_vs_cross"].mean()),
        "layers_ours_higher": int((ours["self_vs_cross"] > theirs["self_vs_cross"]).sum()),
        "ours_gap": float(diff["ours"].mean()), "paper_gap": float(diff["paper"].mean()),
        "ours_left_higher": int((diff["ours"] > 0).sum()), "paper_left_higher": int((diff["paper"] > 0).sum()),
        "ours_diff_min": float(diff["ours"].min()), "ours_diff_max": float(diff["ours"].max()),
        "paper_layer1_left": float(theirs["self_vs_cross"][0]), "paper_layer1_right": float(theirs["cross_vs_ffn"][0]),
        "normalized_gap": float((normed["self_vs_cross"] - normed["cross_vs_ffn"]).mean()),
        "balanced_small": "stored" if stored("balanced", "small", root) else NOT_RUN,
        "balanced_layers": int(preset("balanced").dec_layers),
        "small_updates": int(scale_spec("small").train["max_steps"]),
    }
    return out
