"""Sub-layer input probes (paper Figure 2)."""

from __future__ import annotations

import pytest
import torch
from conftest import small_config, small_model

from canlib import Seq2Seq
from canlib.analysis.probes import record_subblock_inputs, sublayer_similarity
from canlib.model.config import BOS_ID, PAD_ID


def standard_model(dec_layers: int = 3) -> Seq2Seq:
    return small_model(vocab_size=30, dec_layers=dec_layers)


def batch():
    src = torch.randint(4, 30, (2, 5))
    tgt = torch.randint(4, 30, (2, 6))
    tgt[:, 0] = BOS_ID
    tgt[1, 4:] = PAD_ID
    return src, tgt


def test_similarity_matrices_have_one_row_and_column_per_layer():
    sims = sublayer_similarity(standard_model(3), [batch()], PAD_ID)
    assert sims["self_vs_cross"].shape == (3, 3)
    assert sims["cross_vs_ffn"].shape == (3, 3)
    assert (sims["self_vs_cross"].abs() <= 1 + 1e-9).all()


def test_cross_input_equals_self_input_when_self_attention_outputs_zero():
    model = standard_model(2)
    with torch.no_grad():
        for layer in model.decoder_layers:
            layer.self_attn.out.weight.zero_()
            layer.self_attn.out.bias.zero_()
    sims = sublayer_similarity(model, [batch()], PAD_ID)
    assert torch.allclose(sims["self_vs_cross"].diagonal(), torch.ones(2, dtype=torch.float64))
    # the FFN input differs from the cross-attention input (cross-attention is not zero)
    assert sims["cross_vs_ffn"].diagonal().max() < 1 - 1e-6


def test_hooks_are_removed_after_recording():
    model = standard_model(1)
    with record_subblock_inputs(model):
        pass
    assert not model.decoder_layers[0].self_norm._forward_hooks


def test_non_standard_decoder_is_refused():
    cfg = small_config("can", vocab_size=30, dec_layers=1)
    with pytest.raises(ValueError, match="standard"):
        with record_subblock_inputs(Seq2Seq(cfg)):
            pass
