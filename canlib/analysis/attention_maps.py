"""Attention maps of trained decoders, and CAN's target share alpha.

A standard decoder layer has two attention maps: self-attention over the target prefix (t x t, causal)
and cross-attention over the source (t x s). A CAN layer (and the "Compress Attention" ablation) has one
joint map over [prefix ; source] (t x (t+s)) from a single softmax. The mass a query puts on the prefix,

    alpha = sum_{j <= t} A[i, j],

is how much of its context comes from the target side; the rest, 1 - alpha, comes from the source. One
softmax over both blocks makes alpha a learned gate between the two kinds of context (compress.md derives
``SoftMax([s_x, s_h]) = [alpha SoftMax(s_x), (1 - alpha) SoftMax(s_h)]``).

The maps are recomputed from each layer's own modules and the inputs the layer really received in a
teacher-forced pass (captured by forward pre-hooks), so they are exactly what ``forward`` used; the tests
check this by rebuilding each layer's output from the maps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from canlib.model.attention import SourceMemory, self_scores, split_heads
from canlib.model.layers import CANAttnDecoderLayer, CANDecoderLayer, StandardDecoderLayer

JOINT_LAYERS = (CANDecoderLayer, CANAttnDecoderLayer)


def standard_layer_maps(
    layer: StandardDecoderLayer, x: Tensor, memory: SourceMemory, blocked: Tensor
) -> dict[str, Tensor]:
    """Self-attention (rows, h, t, t) and cross-attention (rows, h, t, s) probabilities of one standard layer.

    ``x`` is the layer's input; cross-attention reads ``x + Self(LN(x))``, as in ``forward`` (dropout off).
    """
    z = layer.self_norm(x)
    q, k, _ = (split_heads(part, layer.self_attn.heads) for part in layer.self_attn.qkv(z).chunk(3, dim=-1))
    self_probs = torch.softmax(self_scores(q, k, blocked), dim=-1)
    x_cross = x + layer.self_attn(z, blocked)
    source = layer.cross_attn.project_source(memory)
    q_cross = split_heads(layer.cross_attn.q(layer.cross_norm(x_cross)), layer.cross_attn.heads)
    cross_probs = torch.softmax(memory.scores(q_cross, source["k"]), dim=-1)
    return {"self": self_probs, "cross": cross_probs}


def joint_layer_map(
    layer: CANDecoderLayer | CANAttnDecoderLayer, x: Tensor, memory: SourceMemory, blocked: Tensor
) -> Tensor:
    """The single softmax of a CAN (or Compress Attention) layer: (rows, h, t, t + s), prefix columns first."""
    q, k = layer._project(x)[:2]
    source = layer.project_source(memory)
    scores = torch.cat([self_scores(q, k, blocked), memory.scores(q, source["k"])], dim=-1)
    return torch.softmax(scores, dim=-1)


def pick_pair(split: Any, low: int = 6, high: int = 12) -> int:
    """Index of the first pair of ``split`` whose source and target lengths (subwords) lie in [low, high]:
    short enough to read a map cell by cell, long enough to show structure."""
    for i in range(len(split)):
        src, tgt = split[i]
        if low <= len(src) <= high and low <= len(tgt) <= high:
            return i
    raise ValueError(f"no pair with {low}-{high} subwords on both sides")


def target_share(joint: Tensor, target_len: int) -> Tensor:
    """alpha: the mass each query puts on the target prefix, ``joint[..., :target_len].sum(-1)``."""
    if joint.size(-1) <= target_len:
        raise ValueError(f"joint map has {joint.size(-1)} columns; expected more than the {target_len} target ones")
    return joint[..., :target_len].sum(-1)


def decoder_inputs(model: nn.Module, src: Tensor, tgt_in: Tensor) -> list[tuple[Tensor, SourceMemory, Tensor]]:
    """(x, memory, blocked) that each decoder layer receives in a teacher-forced pass (forward pre-hooks)."""
    seen: list[tuple[Tensor, SourceMemory, Tensor]] = []

    def grab(module: nn.Module, args: tuple) -> None:
        seen.append((args[0], args[1], args[3]))

    hooks = [layer.register_forward_pre_hook(grab) for layer in model.decoder_layers]
    try:
        with torch.no_grad():
            model.decode(tgt_in, model.encode(src))
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def attention_maps(model: nn.Module, src: list[int] | Tensor, tgt_in: list[int] | Tensor) -> list[dict[str, Tensor]]:
    """Per decoder layer, the maps of one sentence pair, averaged over heads and also per head.

    ``src`` are source ids (with EOS), ``tgt_in`` the decoder input (BOS + target). Each entry holds
    ``"self"`` (t x t) and ``"cross"`` (t x s) for a standard layer, or ``"joint"`` (t x (t+s)) and
    ``"alpha"`` (t) for a joint layer; ``"heads"`` keeps the per-head maps (h x ...).
    """
    if model.training:
        raise ValueError("attention_maps needs the model in eval mode (dropout would change the maps)")
    src_t = torch.as_tensor(src).reshape(1, -1)
    tgt_t = torch.as_tensor(tgt_in).reshape(1, -1)
    out: list[dict[str, Tensor]] = []
    with torch.no_grad():
        for layer, (x, memory, blocked) in zip(model.decoder_layers, decoder_inputs(model, src_t, tgt_t)):
            if isinstance(layer, JOINT_LAYERS):
                joint = joint_layer_map(layer, x, memory, blocked)[0]
                out.append({"joint": joint.mean(0), "alpha": target_share(joint, x.size(1)).mean(0), "heads": joint})
            elif isinstance(layer, StandardDecoderLayer):
                heads = {k: v[0] for k, v in standard_layer_maps(layer, x, memory, blocked).items()}
                out.append({**{k: v.mean(0) for k, v in heads.items()}, "heads": heads})
            else:
                raise TypeError(
                    f"{type(layer).__name__}: no attention maps for this decoder kind (standard, can, can_attn)"
                )
    return out


def alpha_statistics(
    model: nn.Module, batches: Iterable[tuple[Tensor, Tensor]], max_position: int = 30
) -> tuple[list[Tensor], dict[str, Tensor]]:
    """alpha per decoder layer and per target position, from one teacher-forced pass over ``batches``, which yields
    (src, tgt_in) id tensors (e.g. ``repro.experiments.corpus.teacher_forced_batches``).

    Returns, first, one 1-D tensor per joint decoder layer: alpha of every (non-padded target position, head), in
    batch order, the h heads of each position together; its mean is the share of attention CAN gives the target
    prefix there. Second, the mean alpha per layer and target position (1-based, up to ``max_position``) beside the
    alpha that uniform attention would give, ``i / (i + s)`` for query i and source length s: ``"alpha"`` (layers,
    max_position), ``"uniform"`` (max_position) and ``"count"`` (max_position, the number of target positions
    averaged; NaN means where it is 0). A trained gate that differs from ``"uniform"`` is what the single softmax
    learned, not what the lengths impose.
    """
    if model.training:
        raise ValueError("alpha needs the model in eval mode (dropout would change the maps)")
    if not all(isinstance(layer, JOINT_LAYERS) for layer in model.decoder_layers):
        raise TypeError("alpha is defined for joint-attention decoders (can, can_attn) only")
    pad_id = model.cfg.pad_id
    per_layer: list[list[Tensor]] = [[] for _ in model.decoder_layers]
    sums = torch.zeros(len(model.decoder_layers), max_position, dtype=torch.float64)
    uniform = torch.zeros(max_position, dtype=torch.float64)
    count = torch.zeros(max_position, dtype=torch.float64)
    with torch.no_grad():
        for src, tgt_in in batches:
            real = tgt_in.ne(pad_id)  # (rows, t)
            keep = min(tgt_in.size(1), max_position)
            kept = real[:, :keep].double()
            src_len = src.ne(pad_id).sum(1, keepdim=True).double()
            position = torch.arange(1, keep + 1, dtype=torch.float64)[None]
            count[:keep] += kept.sum(0)
            uniform[:keep] += (kept * position / (position + src_len)).sum(0)
            for i, (layer, (x, memory, blocked)) in enumerate(
                zip(model.decoder_layers, decoder_inputs(model, src, tgt_in))
            ):
                alpha = target_share(joint_layer_map(layer, x, memory, blocked), x.size(1))  # (rows, h, t)
                per_layer[i].append(alpha.transpose(1, 2)[real].flatten())
                sums[i, :keep] += (alpha.mean(1)[:, :keep].double() * kept).sum(0)
        if not per_layer[0]:
            raise ValueError("alpha: no batches")
        seen = count.clamp_min(1)
        nan = torch.where(count > 0, 0.0, float("nan"))
        by_position = {"alpha": sums / seen + nan, "uniform": uniform / seen + nan, "count": count}
    return [torch.cat(chunks) for chunks in per_layer], by_position


def alpha_summary(alphas: list[Tensor]) -> list[dict[str, Any]]:
    """Mean, spread and quartiles of alpha per layer (rows for a table)."""
    rows = []
    for i, a in enumerate(alphas, 1):
        q = torch.quantile(a.double(), torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)).tolist()
        rows.append(
            {
                "layer": i,
                "mean": a.mean().item(),
                "std": a.std().item(),
                "p10": q[0],
                "median": q[1],
                "p90": q[2],
                "values": a.numel(),
            }
        )
    return rows


def alpha_histogram(alphas: list[Tensor], bins: int = 40) -> dict[str, Any]:
    """Counts of alpha per layer in ``bins`` equal bins over [0, 1] (what a stored study keeps of the values)."""
    return {
        "edges": torch.linspace(0, 1, bins + 1, dtype=torch.float64).tolist(),
        "counts": [torch.histc(a.double(), bins=bins, min=0.0, max=1.0).long().tolist() for a in alphas],
    }


__all__ = [
    "standard_layer_maps",
    "joint_layer_map",
    "target_share",
    "decoder_inputs",
    "pick_pair",
    "attention_maps",
    "alpha_statistics",
    "alpha_summary",
    "alpha_histogram",
]
