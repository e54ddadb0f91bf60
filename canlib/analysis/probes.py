"""Probes into trained models for the paper's analyses.

``subblock_inputs`` records what each decoder sub-layer receives, so the book can
measure the paper's Figure 2 premise: the input X of self-attention and the input
X' = X + Self(X) of cross-attention are nearly the same vector.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor

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
