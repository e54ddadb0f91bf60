"""The similarity chapter (Figure 2): the diagonals of our sub-layer similarity matrices beside the paper's.

The 6/6 Baseline is the paper's model; CAN compresses the 12/2 decoder, so the premise must also hold in Balanced's
two layers. :func:`decoder_similarity` measures any standard-decoder system (the engine's
``canlib.studies.analyses.similarity`` measures the Baseline only).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from canlib.model.config import preset
from canlib.studies.analyses import similarity
from canlib.studies.paper import paper_numbers
from canlib.studies.probes import sublayer_similarity
from canlib.studies.quality import run_config
from canlib.studies.runs import teacher_forced_batches, trained
from canlib.studies.scales import scale_spec
from canlib.studies.scorecard import NOT_RUN
from canlib.studies.store import stored_path, study, trains_here

KEYS = ("self_vs_cross", "cross_vs_ffn")


def study_name(system: str) -> str:
    """The stored name of a system's similarity study: ``similarity`` for the Baseline (the paper's model)."""
    return "similarity" if system == "baseline" else f"similarity-{system}"


def decoder_similarity(system: str, scale: str, *, store: bool = False, root: Path | None = None,
                       max_steps: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Figure 2's two matrices for the seed-1 run of a standard-decoder ``system`` (raw and LayerNorm'd inputs,
    over the validation split), as one study: computed at tiny (from the cached run), loaded at small/full."""
    def compute() -> dict[str, Any]:
        run = trained(system, scale, train_now=True, max_steps=max_steps)
        model = run.model()
        return {("normalized" if normalized else "residual"):
                {k: v.tolist() for k, v in sublayer_similarity(model, teacher_forced_batches(run, "valid"),
                                                                model.cfg.pad_id, normalized=normalized).items()}
                for normalized in (False, True)}

    config = run_config(system, scale, 1, scale_spec(scale).corpus, max_steps)
    return study(study_name(system), scale, config, compute, store=store, root=root)


def available(system: str, scale: str, root: Path | None = None) -> bool:
    """Whether a system's study can be shown at ``scale`` here: computed at tiny, stored (or trainable here) else."""
    return scale == "tiny" or stored_path(study_name(system), scale, root).exists() or (root is None and trains_here(scale))


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
        "balanced_small": "stored" if available("balanced", "small", root) else NOT_RUN,
        "balanced_layers": int(preset("balanced").dec_layers),
        "small_updates": int(scale_spec("small").train["max_steps"]),
    }
    return out


def balanced_values(scale: str, root: Path | None = None) -> dict[str, Any]:
    """Balanced's two layers at ``scale`` (where :func:`available`): its diagonals and their gap."""
    measured, _ = decoder_similarity("balanced", scale, root=root)
    left, right = (diagonal(measured["residual"][k]) for k in KEYS)
    return {"balanced_scale": scale, "balanced_diag_min": float(left.min()), "balanced_diag_max": float(left.max()),
            "balanced_gap": float((left - right).mean()), "balanced_left_higher": int((left > right).sum())}
