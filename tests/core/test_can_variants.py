"""The decoder variants of the next experiments against references written out here in plain torch.

* CAN keeping the attention's residual S + C (``can_residual``): the paper's Eq. 13 as
  ``tests/core/test_can_reference.py`` writes it, plus the attention output of the standard layer's residual,
  mixed by the same softmax from d-wide values and an output map Wo:

      A_i = SoftMax(z Wq_i [z Wk1_i ; H Wk2_i]^T / sqrt(d/h))
      y   = x + concat_i(A_i [z Wr1_i ; H Wr2_i]) Wo + bo
            + ReLU(z W1 + b1 + concat_i(A_i [z W~v1_i ; H W~v2_i])) W2 + b2

* CAN without the head split of its 4d-wide values (``can_nosplit``): the paper's Eqs. 11 and 13 as printed, one
  softmax and one attention matrix A for the whole width, scores scaled by sqrt(d):

      A = SoftMax(z Wq [z Wk1 ; H Wk2]^T / sqrt(d))
      y = x + ReLU(z W1 + b1 + A [z W~v1 ; H W~v2]) W2 + b2

* A decoder layer mix (``decoder_kind="mixed"``): layer i of the stack is the kind ``decoder_layer_kinds[i]``,
  bottom first, checked against the two layers composed by hand.

The reference uses the layer's weights but none of canlib's functions, and runs in float64.
"""

from __future__ import annotations

import math

import pytest
import torch
from layer_inputs import FFN, HEADS, D, inputs, layer_config  # the same shapes and inputs as CAN's own reference test

from canlib import ModelConfig
from canlib.model.attention import SourceMemory, causal_mask
from canlib.model.layers import (
    CANDecoderLayer,
    CANNoSplitDecoderLayer,
    CANResidualDecoderLayer,
    StandardDecoderLayer,
    row_caches,
)
from canlib.model.seq2seq import Seq2Seq


def config(**changes) -> ModelConfig:
    return layer_config("can_residual", **changes)


VARIANTS = {"can_residual": CANResidualDecoderLayer, "can_nosplit": CANNoSplitDecoderLayer}


def random_layer(kind: str, seed: int) -> CANDecoderLayer:
    """The layer of ``kind`` with every parameter random (biases and the norm's gain around 1 included), in
    float64."""
    torch.manual_seed(seed)
    layer = VARIANTS[kind](layer_config(kind)).double().eval()
    layer.load_state_dict({k: torch.randn_like(v) * 0.5 + (k == "norm.weight") for k, v in layer.state_dict().items()})
    return layer


def whole_sequence(layer: CANDecoderLayer, x: torch.Tensor, h: torch.Tensor, src_pad: torch.Tensor) -> torch.Tensor:
    """The layer's output (B, T, d) for the whole target sequence at once, each position seeing its prefix."""
    memory = SourceMemory(h, src_pad)
    with torch.no_grad():
        return layer(x, memory, layer.project_source(memory), causal_mask(x.size(1)), {})


def decoded_step_by_step(
    layer: CANDecoderLayer, x: torch.Tensor, h: torch.Tensor, src_pad: torch.Tensor, beam: int
) -> torch.Tensor:
    """The layer's output (B * beam, T, d) computed one position at a time through its decoding cache, each
    sentence read by ``beam`` rows."""
    rows, memory = x.repeat_interleave(beam, dim=0), SourceMemory(h, src_pad, beam)
    steps = []
    with torch.no_grad():
        source = layer.project_source(memory)
        _, (cache,), _ = row_caches([layer], memory, [source], x.size(1))  # the decoding state, source part filled
        for t in range(x.size(1)):
            steps.append(layer.step(rows[:, t : t + 1], memory, source, cache, t, {}))
    return torch.cat(steps, dim=1)


def reference(layer: CANResidualDecoderLayer, x: torch.Tensor, h: torch.Tensor, src_pad: torch.Tensor) -> torch.Tensor:
    """y for target inputs x (B, T, d), encoder output h (B, S, d), source padding (B, S) (True = pad)."""
    wq, wk1, wv1, wr1, w1 = layer.x_proj.weight.split([D, D, FFN, D, FFN], dim=0)
    bq, bk1, bv1, br1, b1 = layer.x_proj.bias.split([D, D, FFN, D, FFN])
    wk2, wv2, wr2 = layer.h_proj.weight.split([D, FFN, D], dim=0)
    bk2, bv2, br2 = layer.h_proj.bias.split([D, FFN, D])
    mean = x.mean(-1, keepdim=True)
    z = (x - mean) / torch.sqrt(
        ((x - mean) ** 2).mean(-1, keepdim=True) + layer.norm.eps
    ) * layer.norm.weight + layer.norm.bias
    dq, dv, dr = D // HEADS, FFN // HEADS, D // HEADS
    y = torch.empty_like(x)
    for b in range(x.size(0)):
        for t in range(x.size(1)):
            q = z[b, t] @ wq.T + bq
            keys = torch.cat([z[b, : t + 1] @ wk1.T + bk1, h[b] @ wk2.T + bk2])
            to_ffn = torch.cat([z[b, : t + 1] @ wv1.T + bv1, h[b] @ wv2.T + bv2])
            to_residual = torch.cat([z[b, : t + 1] @ wr1.T + br1, h[b] @ wr2.T + br2])
            visible = torch.cat([torch.ones(t + 1, dtype=torch.bool), ~src_pad[b]])
            mixed_ffn, mixed_residual = [], []
            for i in range(HEADS):
                scores = keys[:, i * dq : (i + 1) * dq] @ q[i * dq : (i + 1) * dq] / math.sqrt(D / HEADS)
                scores = torch.where(visible, scores, torch.tensor(-math.inf, dtype=x.dtype))
                a = torch.exp(scores - scores.max())
                a = a / a.sum()
                mixed_ffn.append(a @ to_ffn[:, i * dv : (i + 1) * dv])
                mixed_residual.append(a @ to_residual[:, i * dr : (i + 1) * dr])
            s_plus_c = torch.cat(mixed_residual) @ layer.out.weight.T + layer.out.bias
            w2 = layer.ffn.w2
            ffn = torch.clamp(z[b, t] @ w1.T + b1 + torch.cat(mixed_ffn), min=0.0) @ w2.weight.T + w2.bias
            y[b, t] = x[b, t] + s_plus_c + ffn
    return y


@pytest.mark.parametrize("seed", [0, 1])
def test_can_with_the_attention_residual_is_eq_13_plus_s_plus_c(seed):
    layer = random_layer("can_residual", seed)
    x, h, src_pad = inputs(seed)
    assert (whole_sequence(layer, x, h, src_pad) - reference(layer, x, h, src_pad)).abs().max().item() < 1e-10


@pytest.mark.parametrize("beam", [1, 2])
def test_can_residual_decode_steps_compute_the_same_equations(beam):
    layer = random_layer("can_residual", 5)
    x, h, src_pad = inputs(5)
    expected = reference(layer, x, h, src_pad).repeat_interleave(beam, dim=0)
    assert (decoded_step_by_step(layer, x, h, src_pad, beam) - expected).abs().max() < 1e-10


def test_the_residual_term_is_what_separates_the_variant_from_can():
    """With the residual's output map set to zero the variant is CAN itself (same weights otherwise): the
    reference above is not satisfied by CAN, so it can tell the two apart."""
    layer = random_layer("can_residual", 2)
    x, h, src_pad = inputs(2)
    with torch.no_grad():
        expected = reference(layer, x, h, src_pad)
        layer.out.weight.zero_()
        layer.out.bias.zero_()
        without = reference(layer, x, h, src_pad)
    assert (expected - without).abs().max().item() > 1e-3


def eq_13_unsplit(layer: CANDecoderLayer, x: torch.Tensor, h: torch.Tensor, src_pad: torch.Tensor) -> torch.Tensor:
    """Eq. 13 by brute force: per target position one softmax over [prefix ; real source] of d-wide scores, and
    its probabilities times the whole 4d-wide values."""
    wq, wk1, wv1, w1 = layer.x_proj.weight.split([D, D, FFN, FFN], dim=0)
    bq, bk1, bv1, b1 = layer.x_proj.bias.split([D, D, FFN, FFN])
    wk2, wv2 = layer.h_proj.weight.split([D, FFN], dim=0)
    bk2, bv2 = layer.h_proj.bias.split([D, FFN])
    mean = x.mean(-1, keepdim=True)
    z = (x - mean) / torch.sqrt(
        ((x - mean) ** 2).mean(-1, keepdim=True) + layer.norm.eps
    ) * layer.norm.weight + layer.norm.bias
    y = torch.empty_like(x)
    for b in range(x.size(0)):
        for t in range(x.size(1)):
            keys = torch.cat([z[b, : t + 1] @ wk1.T + bk1, h[b] @ wk2.T + bk2])
            values = torch.cat([z[b, : t + 1] @ wv1.T + bv1, h[b] @ wv2.T + bv2])  # (t + 1 + S, 4d)
            scores = keys @ (z[b, t] @ wq.T + bq) / math.sqrt(D)
            visible = torch.cat([torch.ones(t + 1, dtype=torch.bool), ~src_pad[b]])
            a = torch.exp(torch.where(visible, scores, torch.tensor(-math.inf, dtype=x.dtype)) - scores.max())
            mixed = (a / a.sum()) @ values
            w2 = layer.ffn.w2
            y[b, t] = x[b, t] + torch.clamp(z[b, t] @ w1.T + b1 + mixed, min=0.0) @ w2.weight.T + w2.bias
    return y


@pytest.mark.parametrize("seed", [0, 1])
def test_can_without_the_head_split_is_eq_13_with_one_softmax_over_the_whole_width(seed):
    layer = random_layer("can_nosplit", seed)
    x, h, src_pad = inputs(seed)
    assert (whole_sequence(layer, x, h, src_pad) - eq_13_unsplit(layer, x, h, src_pad)).abs().max().item() < 1e-10


@pytest.mark.parametrize("beam", [1, 2])
def test_can_nosplit_decode_steps_compute_the_same_equation(beam):
    layer = random_layer("can_nosplit", 6)
    x, h, src_pad = inputs(6)
    expected = eq_13_unsplit(layer, x, h, src_pad).repeat_interleave(beam, dim=0)
    assert (decoded_step_by_step(layer, x, h, src_pad, beam) - expected).abs().max() < 1e-10


def test_the_head_split_is_what_separates_can_from_its_unsplit_control():
    """With the same weights CAN (h heads, each a 4d/h-wide slice) is not the unsplit Eq. 13: the reference can
    tell them apart, and CAN's maps are the control's, name for name and shape for shape."""
    layer = random_layer("can_nosplit", 3)
    can = CANDecoderLayer(layer_config("can")).double().eval()
    can.load_state_dict(layer.state_dict())
    x, h, src_pad = inputs(3)
    assert (whole_sequence(can, x, h, src_pad) - eq_13_unsplit(layer, x, h, src_pad)).abs().max().item() > 1e-3


def test_a_mixed_decoder_runs_its_layer_kinds_bottom_first():
    """Layer 0 standard and layer 1 CAN (and the other order) equal the two layers composed by hand."""
    for kinds in (("standard", "can"), ("can", "standard")):
        cfg = config(dec_layers=2, decoder_kind="mixed", decoder_layer_kinds=kinds)
        torch.manual_seed(0)
        model = Seq2Seq(cfg).double().eval()
        classes = {"standard": StandardDecoderLayer, "can": CANDecoderLayer}
        assert [type(layer) for layer in model.decoder_layers] == [classes[k] for k in kinds]
        src, tgt = torch.randint(4, 20, (2, 6)), torch.randint(4, 20, (2, 4))
        with torch.no_grad():
            memory = model.encode(src)
            x = model.embed_tokens(tgt)
            for kind, layer in zip(kinds, model.decoder_layers):  # by hand: a fresh layer of each kind with its weights
                alone = classes[kind](cfg).double().eval()
                alone.load_state_dict(layer.state_dict())
                x = alone(x, memory, alone.project_source(memory), causal_mask(4), {})
            assert (model.decode(tgt, memory) - x).abs().max().item() < 1e-12


def test_a_layer_mix_is_refused_unless_it_names_every_layer_with_a_mixable_kind():
    with pytest.raises(ValueError, match="decoder_layer_kinds"):
        config(dec_layers=2, decoder_kind="mixed", decoder_layer_kinds=("standard",))
    with pytest.raises(ValueError, match="decoder_layer_kinds"):
        config(dec_layers=2, decoder_kind="mixed", decoder_layer_kinds=("standard", "san"))
    with pytest.raises(ValueError, match="decoder_layer_kinds"):
        config(dec_layers=2, decoder_kind="can", decoder_layer_kinds=("standard", "can"))
    cfg = config(dec_layers=2, decoder_kind="mixed", decoder_layer_kinds=["can", "standard"])
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg and cfg.layer_kinds() == ("can", "standard")


@pytest.mark.parametrize(
    "kinds",
    [
        dict(decoder_kind="can"),
        dict(decoder_kind="can_residual"),
        dict(decoder_kind="mixed", decoder_layer_kinds=("standard", "can")),
    ],
)
def test_ffn_wide_values_that_do_not_split_across_the_heads_are_refused_alone_or_in_a_mix(kinds):
    with pytest.raises(ValueError, match=r"ffn_dim=66: the can\S* values are ffn_dim wide .* heads=4"):
        ModelConfig(vocab_size=50, d_model=32, heads=4, ffn_dim=66, dec_layers=2, **kinds)
    ModelConfig(vocab_size=50, d_model=32, heads=4, ffn_dim=66, dec_layers=2)  # a standard layer's FFN has no heads
