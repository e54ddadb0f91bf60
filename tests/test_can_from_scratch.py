"""A CAN layer written from Eqs. 11 and 13 in plain PyTorch (conversion.ScratchCAN) computes what canlib's
CANDecoderLayer computes with the same weights; the trained-decoder measurements (conversion.layer_approximations)
keep the exact stages exact and count every position and head."""

from __future__ import annotations

import torch

from canlib import ModelConfig
from canlib.model import conversion as V
from canlib.model.attention import SourceMemory, causal_mask
from canlib.model.layers import CANDecoderLayer
from canlib.model.seq2seq import Seq2Seq


def random_can(d: int = 16, heads: int = 4, ffn: int = 64) -> CANDecoderLayer:
    cfg = ModelConfig(
        vocab_size=20,
        d_model=d,
        heads=heads,
        ffn_dim=ffn,
        dropout=0.0,
        attn_dropout=0.0,
        relu_dropout=0.0,
        decoder_kind="can",
    )
    layer = CANDecoderLayer(cfg).double().eval()
    with torch.no_grad():
        for p in layer.parameters():  # LayerNorm gains and every bias away from their defaults
            p.normal_(0.0, 0.5)
    return layer


def test_scratch_can_equals_canlibs_layer_with_shared_weights_and_padding():
    torch.manual_seed(3)
    layer = random_can()
    scratch = V.scratch_from(layer).eval()
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    h = torch.randn(3, 7, 16, dtype=torch.float64)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 4:] = True
    pad[2, 6:] = True
    memory = SourceMemory(h, pad)
    with torch.no_grad():
        want = layer(x, memory, layer.project_source(memory), causal_mask(5), {})
        got = scratch(x, h, pad)
    assert (got - want).abs().max().item() < 1e-12
    assert sum(p.numel() for p in scratch.parameters()) == sum(p.numel() for p in layer.parameters())


def test_scratch_can_ignores_padded_source_positions_and_the_future():
    torch.manual_seed(4)
    scratch = V.scratch_from(random_can()).eval()
    x, h = torch.randn(1, 4, 16, dtype=torch.float64), torch.randn(1, 6, 16, dtype=torch.float64)
    pad = torch.tensor([[False] * 4 + [True] * 2])
    changed_h, changed_x = h.clone(), x.clone()
    changed_h[0, 4:] += 100.0  # padding: never attended
    changed_x[0, 3] += 100.0  # the last position: no earlier query may see it
    with torch.no_grad():
        y = scratch(x, h, pad)
        assert torch.equal(scratch(x, changed_h, pad), y)
        assert torch.allclose(scratch(changed_x, h, pad)[0, :3], y[0, :3], atol=1e-12, rtol=0)


def test_layer_approximations_keep_exact_stages_exact_and_count_every_position_and_head():
    torch.manual_seed(5)
    cfg = ModelConfig(
        vocab_size=30,
        d_model=16,
        heads=4,
        ffn_dim=64,
        enc_layers=1,
        dec_layers=2,
        dropout=0.0,
        attn_dropout=0.0,
        relu_dropout=0.0,
    )
    model = Seq2Seq(cfg).eval()
    pairs = [([5, 6, 7, 8], [9, 10, 11]), ([12, 13], [14, 15, 16, 17, 18])]
    layers = V.layer_approximations(model, pairs, bins=10)
    assert len(layers) == 2
    positions = sum(len(t) + 1 for _, t in pairs)  # BOS + target, one sentence at a time
    for layer in layers:
        assert sum(layer["alpha_histogram"]) == positions * cfg.heads
        for row in layer["steps"]:
            assert (row["max_abs_vs_prev"] < 1e-10) == row["exact"], row["step"]
        assert 0.0 < layer["entropy"] <= 1.0 and 0.0 < layer["alpha_mean"] < 1.0
