"""A trained standard decoder turned into the paper's CAN form (:func:`standard_to_can`) and the paper's
approximations measured on a trained decoder (:func:`layer_approximations`), both built on the derivation's steps
in :mod:`canlib.model.compress`. (The book's compression chapter writes a CAN layer from scratch in its own cells and
checks it against :class:`~canlib.model.layers.CANDecoderLayer`.)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from canlib.model.compress import (
    Affine,
    StandardWeights,
    attention_scores,
    compression_steps,
    concat_steps,
    identical_input_gap,
    merged_hidden,
    merged_values,
    normalize,
    query_key_maps,
    self_share,
    shared_query,
    standard_weights,
    step_errors,
)
from canlib.model.config import ModelConfig
from canlib.model.layers import CANDecoderLayer, StandardDecoderLayer
from canlib.model.seq2seq import Seq2Seq

# ---------------------------------------------------------------------------
# The converter: a trained standard layer or model -> the paper's CAN form


def _set(linear: nn.Linear, *blocks: Affine) -> None:
    """Write row-vector maps into an nn.Linear, side by side (a fused projection takes several, in order)."""
    with torch.no_grad():
        linear.weight.copy_(torch.cat([f.W for f in blocks], dim=1).T)
        linear.bias.copy_(torch.cat([f.b for f in blocks]))


ValueScale = float | tuple[float, float]


def alpha_value_scale(alpha: float) -> tuple[float, float]:
    """Per-block value scales (1/alpha, 1/(1 - alpha)) that undo one softmax for a constant target share alpha.

    One softmax gives the prefix block a share alpha of each row's mass and the source block the rest
    (``self_share``). Where alpha is the same for every query, these scales restore the two-softmax sum
    exactly; a half gives the converter's default, both blocks doubled.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha_value_scale: alpha={alpha!r} must lie strictly between 0 and 1")
    return 1.0 / alpha, 1.0 / (1.0 - alpha)


def fill_can_layer(
    can: CANDecoderLayer, layer: StandardDecoderLayer, value_scale: ValueScale = 2.0, query: str = "gram"
) -> None:
    """Write the paper's CAN form of ``layer`` into ``can`` (x_proj = [Wq | Wk1 | W~v1 | W1], h_proj = [Wk2 | W~v2]).

    The assumptions, in order:

    * X' := X (Eq. 6);
    * the attention residual S + C is dropped, and the FFN reads LN_f(X) + S + C;
    * one d/h-wide query per head (``query``, Eq. 9);
    * one softmax with the values times ``value_scale`` (Eq. 11; exact where the self and cross partitions are
      equal and the scale doubles them);
    * heads split ``W~v = Wv Wo W1`` into 4d/h-wide slices (Eq. 13; exact when all heads attend alike).

    CAN's LayerNorm becomes plain n(x): the original LayerNorms' gains and biases are folded into the projections.
    ``value_scale`` may be a (prefix, source) pair, e.g. ``alpha_value_scale(measured mean alpha)``.
    """
    scales = (value_scale, value_scale) if isinstance(value_scale, (int, float)) else tuple(value_scale)
    if len(scales) != 2:
        raise ValueError(f"value_scale={value_scale!r}: give one number or a (prefix, source) pair")
    scale_x, scale_h = scales
    w = standard_weights(layer)
    if (can.d, can.heads, can.f) != (w.q1.W.size(0), w.heads, w.w1.W.size(1)):
        raise ValueError(f"CAN layer (d, heads, ffn)={(can.d, can.heads, can.f)} does not match the standard layer's")
    q1, k1, q2, k2 = query_key_maps(w)
    v1, v2 = merged_values(w)
    _set(can.x_proj, shared_query(q1, k1, q2, k2, w.heads, query), k1, scale_x * v1, merged_hidden(w))
    _set(can.h_proj, k2, scale_h * v2)
    _set(can.ffn.w2, w.w2)
    with torch.no_grad():
        can.norm.weight.fill_(1.0)
        can.norm.bias.zero_()
        can.norm.eps = w.eps


def _can_config(layer: StandardDecoderLayer) -> ModelConfig:
    d = layer.self_norm.normalized_shape[0]
    return ModelConfig(
        d_model=d,
        heads=layer.self_attn.heads,
        ffn_dim=layer.ffn.w1.out_features,
        decoder_kind="can",
        dropout=layer.drop.p,
        attn_dropout=layer.self_attn.drop.p,
        relu_dropout=layer.ffn.drop.p,
    )


def standard_to_can(
    standard: StandardDecoderLayer | Seq2Seq, value_scale: ValueScale | list[ValueScale] = 2.0, query: str = "gram"
) -> CANDecoderLayer | Seq2Seq:
    """Convert, without training, a standard decoder layer or a whole standard Seq2Seq into CAN form.

    A model keeps its embeddings, encoder and final norms; each decoder layer is filled by
    :func:`fill_can_layer` (whose docstring lists the assumptions). The result has the
    source model's dtype and is a plain canlib model (forward, encode, decode_step).
    For a model, ``value_scale`` may be a list with one entry per decoder layer (e.g. per-layer
    ``alpha_value_scale`` of the measured mean target share).
    """
    if isinstance(standard, StandardDecoderLayer):
        can = CANDecoderLayer(_can_config(standard)).to(standard.self_norm.weight)
        fill_can_layer(can, standard, value_scale, query)
        return can
    if not isinstance(standard, Seq2Seq) or standard.cfg.decoder_kind != "standard":
        kind = getattr(getattr(standard, "cfg", None), "decoder_kind", type(standard).__name__)
        raise ValueError(f"standard_to_can: expected a 'standard' Seq2Seq or StandardDecoderLayer, got {kind!r}")
    model = Seq2Seq(standard.cfg.replace(decoder_kind="can")).to(standard.embed.weight)
    kept = {k: v for k, v in standard.state_dict().items() if not k.startswith("decoder_layers.")}
    missing, unexpected = model.load_state_dict(kept, strict=False)
    if unexpected or any(not k.startswith("decoder_layers.") for k in missing):
        raise ValueError(f"standard_to_can: state mismatch, missing={missing} unexpected={unexpected}")
    scales = value_scale if isinstance(value_scale, list) else [value_scale] * len(standard.decoder_layers)
    if len(scales) != len(standard.decoder_layers):
        raise ValueError(
            f"standard_to_can: {len(scales)} value scales for {len(standard.decoder_layers)} decoder layers"
        )
    for can, layer, scale in zip(model.decoder_layers, standard.decoder_layers, scales):
        fill_can_layer(can, layer, scale, query)
    return model.train(standard.training)


# ---------------------------------------------------------------------------
# The approximations measured on a trained standard decoder


def layer_inputs(model: Seq2Seq, pairs: list[tuple[list[int], list[int]]]) -> list[list[tuple[Tensor, Tensor]]]:
    """Per decoder layer, per sentence pair (source ids, target ids, without BOS/EOS): the (X, H) the layer
    receives in a teacher-forced pass, in float64; each pair runs alone, so nothing is padded."""
    seen: list[list[tuple[Tensor, Tensor]]] = [[] for _ in model.decoder_layers]
    hooks = [
        layer.register_forward_pre_hook(
            lambda m, args, i=i: seen[i].append((args[0].double(), args[1].states.double()))
        )
        for i, layer in enumerate(model.decoder_layers)
    ]
    cfg = model.cfg
    try:
        with torch.no_grad():
            for src, tgt in pairs:
                model(torch.tensor([list(src) + [cfg.eos_id]]), torch.tensor([[cfg.bos_id] + list(tgt)]))
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def cross_entropy_ratio(w: StandardWeights, x: Tensor, h: Tensor) -> float:
    """Mean entropy of the cross-attention rows over log(source length): 1 = uniform, 0 = one position."""
    probs = torch.softmax(attention_scores(w, normalize(x, w.eps), h, None, "separate")[1], dim=-1)
    entropy = -(probs * probs.clamp_min(1e-300).log()).sum(-1)
    return (entropy / torch.log(torch.tensor(float(h.size(1)), dtype=entropy.dtype))).mean().item()


def layer_approximations(model: Seq2Seq, pairs: list[tuple[list[int], list[int]]], bins: int = 40) -> list[dict]:
    """Every stage of the derivation measured on each decoder layer of a trained standard ``model`` over
    ``pairs``: per layer the stage errors (:func:`step_errors` over all positions), Eq. 6 measured three ways
    (:func:`identical_input_gap`, averaged over the sentences), the cross-attention entropy ratio, and the
    target share alpha of one softmax with the least-squares query (mean, spread, histogram over [0, 1])."""
    if model.cfg.decoder_kind != "standard":
        raise ValueError(f"layer_approximations: a standard decoder is needed, got {model.cfg.decoder_kind!r}")
    out = []
    for layer, inputs in zip(model.decoder_layers, layer_inputs(model.eval(), pairs)):
        w = standard_weights(layer)
        xs_all = torch.cat([x.flatten(0, 1) for x, _ in inputs])[None]
        rows = step_errors(concat_steps([compression_steps(w, x, h) for x, h in inputs]), xs_all)
        gaps = [identical_input_gap(w, x, h) for x, h in inputs]
        alpha = torch.cat(
            [self_share(*attention_scores(w, normalize(x, w.eps), h, None, "gram")).flatten() for x, h in inputs]
        )
        out.append(
            {
                "steps": rows,
                **{k: sum(g[k] for g in gaps) / len(gaps) for k in gaps[0]},
                "entropy": sum(cross_entropy_ratio(w, x, h) for x, h in inputs) / len(inputs),
                "alpha_mean": alpha.mean().item(),
                "alpha_std": alpha.std().item(),
                "alpha_histogram": torch.histc(alpha, bins=bins, min=0.0, max=1.0).long().tolist(),
            }
        )
    return out
