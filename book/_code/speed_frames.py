"""The speed tables and counts the speed, depths and ablation pages show, from the measurements
:mod:`repro.bench.cpu` stores (and the decoder layers' weights, counted from the layer classes)."""

from __future__ import annotations

from typing import Any

import torch

from canlib.catalogue import ABLATION_SYSTEMS, LABELS
from canlib.model.attention import SourceMemory
from canlib.model.config import preset
from canlib.model.seq2seq import Seq2Seq

# decoder-layer modules applied to the source once per sentence, not at every decoding step
SOURCE_PROJECTIONS = ("cross_attn.kv", "h_proj")
H100_BANDWIDTH = 3.35e12  # bytes/s: HBM3 of the H100 SXM5 80GB (NVIDIA's data sheet; an input, not a measurement)


def bytes_per_decode_step(model: Seq2Seq, bytes_per_weight: int = 4) -> dict[str, int]:
    """Bytes of weights one decoding step must read: the decoder layers (without the source-side
    projections, computed once per sentence) and the tied output projection.

    When a step is limited by memory bandwidth, as batch-1 decoding on a CPU is, its time is
    roughly these bytes over the bandwidth, whatever the number of operations.
    """
    layers = sum(
        p.numel()
        for name, p in model.decoder_layers.named_parameters()
        if not name.split(".", 1)[1].startswith(SOURCE_PROJECTIONS)
    )
    output = model.embed.weight.numel()
    return {
        "layers": layers * bytes_per_weight,
        "output": output * bytes_per_weight,
        "total": (layers + output) * bytes_per_weight,
    }


def decoding_costs(system: str) -> dict[str, Any]:
    """What one decoder layer of ``system`` (a preset name; d=512 for the paper's) costs per decoding step,
    read from the layer class itself: the matrix weights a step reads (in d², source projections left
    out), and the numbers its cache holds per target position and per source position (in d)."""
    cfg = preset(system, vocab_size=8)
    layer = Seq2Seq(cfg).decoder_layers[0]
    d = cfg.d_model
    per_step = sum(
        m.weight.numel()
        for name, m in layer.named_modules()
        if isinstance(m, torch.nn.Linear) and not name.startswith(SOURCE_PROJECTIONS)
    )
    like = torch.zeros(1)
    cached = [sum(t.numel() for t in layer.new_cache(1, length, like).values()) for length in (1, 2)]
    with torch.no_grad():
        source = layer.project_source(SourceMemory(torch.zeros(1, 1, d), torch.zeros(1, 1, dtype=torch.bool)))
    return {
        "decoder_kind": cfg.decoder_kind,
        "weights_per_step_d2": per_step / d**2,
        "cache_per_target_position_d": (cached[1] - cached[0]) / d,
        "cache_per_source_position_d": sum(t.numel() for t in source.values()) / d,
    }


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
