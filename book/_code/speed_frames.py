"""The speed tables and counts the speed, depths and ablation pages show, from the measurements
:mod:`repro.bench.cpu` stores (and the decoder layers' weights, counted from the layer classes)."""

from __future__ import annotations

from typing import Any

from canlib.analysis.probes import decoding_costs
from canlib.catalogue import ABLATION_SYSTEMS, LABELS


def setting(prov: dict[str, Any]) -> str:
    """How a speed was measured, in words, for the line under a table."""
    s = prov["config"]["settings"]
    meta = prov.get("meta", {})
    return (
        f"{prov['device']} ({meta.get('dtype', 'float32')}), beam {s['beam']}, batch {s['batch']}, forced length "
        f"{s['forced_length']}, {s['sentences']} sentences x {s['repeats']} repeats, d=512 presets, random weights, "
        f"commit {str(prov['commit'])[:12]}, {str(prov['date'])[:10]}"
    )


# -- tables the chapters show ---------------------------------------------------------------------------


def comparison_frame(
    systems: tuple[str, ...] | list[str],
    cpu: dict[str, dict[str, float]] | None,
    gpu_eager: dict[str, dict[str, float]] | None,
    gpu_graphs: dict[str, dict[str, float]] | None,
    paper: dict[str, float] | None,
    reference_system: str = "balanced",
):
    """One row per system: CPU min/median/max, GPU eager and graphs (median, min-max), the paper's, each
    with its ratio to ``reference_system``; a column is left out when its source is missing."""
    import pandas as pd

    frame = pd.DataFrame(index=[LABELS.get(s, s) for s in systems])
    frame.index.name = "system"

    def add(prefix: str, rows: dict[str, dict[str, float]] | None, with_spread: bool) -> None:
        if not rows:
            return
        have = [s for s in systems if s in rows]
        labels = [LABELS.get(s, s) for s in have]
        if with_spread:
            frame.loc[labels, f"{prefix} min"] = [rows[s]["min"] for s in have]
        frame.loc[labels, f"{prefix} median" if with_spread else prefix] = [rows[s]["tok_per_s"] for s in have]
        if with_spread:
            frame.loc[labels, f"{prefix} max"] = [rows[s]["max"] for s in have]
        if reference_system in rows:
            frame.loc[labels, f"{prefix} x {LABELS[reference_system]}"] = [
                rows[s]["tok_per_s"] / rows[reference_system]["tok_per_s"] for s in have
            ]

    add("CPU tok/s", cpu, True)
    add("GPU eager tok/s", gpu_eager, True)
    add("GPU graphs tok/s", gpu_graphs, True)
    if paper:
        add("paper tok/s", {s: {"tok_per_s": v} for s, v in paper.items()}, False)
    return frame


def breakdown_frame(parts: dict[str, dict[str, float]]):
    """Milliseconds per sentence and share of each part (encoder, decoder layers, output, search)."""
    import pandas as pd

    rows = {}
    for system, p in parts.items():
        row = {f"{k} (ms)": p[f"{k}_ms"] for k in ("encode", "layers", "output", "search", "total")}
        row.update({f"{k} share": p[f"{k}_share"] for k in ("encode", "layers", "output", "search")})
        rows[LABELS.get(system, system)] = row
    return pd.DataFrame(rows).T


def weights_per_token() -> dict[str, float]:
    """Decoder-layer matrix weights read per generated token, in units of d² (source-side projections,
    computed once per sentence, left out), counted from the layer classes at the paper's d=512."""
    return {system: decoding_costs(system)["weights_per_step_d2"] for system in ABLATION_SYSTEMS}
