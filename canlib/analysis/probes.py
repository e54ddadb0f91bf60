"""Probes into trained models for the paper's analyses.

``subblock_inputs`` records what each decoder sub-layer receives, so the book can
measure the paper's Figure 2 premise: the input X of self-attention and the input
X' = X + Self(X) of cross-attention are nearly the same vector.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from canlib.model.attention import SourceMemory
from canlib.model.config import preset
from canlib.model.layers import StandardDecoderLayer
from canlib.model.seq2seq import Seq2Seq

SUBLAYERS = ("self", "cross", "ffn")


@contextmanager
def record_subblock_inputs(model: Seq2Seq, normalized: bool = False) -> Iterator[dict[str, list[Tensor]]]:
    """Record, per standard decoder layer, the input of each sub-layer during a forward pass.

    With pre-norm, a sub-layer's input is the residual stream entering its LayerNorm
    (``normalized=False``, the X of the paper) or that LayerNorm's output (True).
    Yields ``{"self": [...], "cross": [...], "ffn": [...]}``, one tensor per layer.
    """
    layers = list(model.decoder_layers)
    if not all(isinstance(layer, StandardDecoderLayer) for layer in layers):
        raise ValueError("record_subblock_inputs needs a model whose decoder layers are all 'standard'")
    seen: dict[str, list[Tensor]] = {name: [None] * len(layers) for name in SUBLAYERS}
    handles = []
    for i, layer in enumerate(layers):
        for name, norm in zip(SUBLAYERS, (layer.self_norm, layer.cross_norm, layer.ffn_norm)):

            def hook(module, args, output, name=name, i=i):
                seen[name][i] = (output if normalized else args[0]).detach()

            handles.append(norm.register_forward_hook(hook))
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def cosine_matrix(a: list[Tensor], b: list[Tensor], mask: Tensor) -> Tensor:
    """M[i, j] = mean over real target tokens of cos(a[i], b[j]) (tokens where ``mask`` is True)."""
    out = torch.zeros(len(a), len(b), dtype=torch.float64)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i, j] = F.cosine_similarity(x[mask].double(), y[mask].double(), dim=-1).mean()
    return out


@torch.no_grad()
def sublayer_similarity(model: Seq2Seq, batches, pad_id: int, normalized: bool = False) -> dict[str, Tensor]:
    """Token-weighted mean cosine similarity between sub-layer inputs over ``batches``.

    ``batches`` yields (src, tgt_in) tensors. Returns the paper's two Figure 2 matrices:
    ``self_vs_cross[i, j]`` (self-attention input of layer i vs cross-attention input of
    layer j) and ``cross_vs_ffn[i, j]``.
    """
    model.eval()
    totals = {"self_vs_cross": 0.0, "cross_vs_ffn": 0.0}
    count = 0
    with record_subblock_inputs(model, normalized) as seen:  # each forward pass overwrites what it saw
        for src, tgt_in in batches:
            mask = tgt_in.ne(pad_id)
            model(src, tgt_in)
            n = int(mask.sum())
            totals["self_vs_cross"] = totals["self_vs_cross"] + cosine_matrix(seen["self"], seen["cross"], mask) * n
            totals["cross_vs_ffn"] = totals["cross_vs_ffn"] + cosine_matrix(seen["cross"], seen["ffn"], mask) * n
            count += n
    if count == 0:
        raise ValueError("sublayer_similarity: the batches hold no target tokens")
    return {k: v / count for k, v in totals.items()}


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
