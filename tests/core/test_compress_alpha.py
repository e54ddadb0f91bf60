"""Converting with a measured target share alpha: per-block value scales 1/alpha and 1/(1 - alpha)."""

from __future__ import annotations

import pytest
import torch
from conftest import small_config

from canlib import ModelConfig, Seq2Seq
from canlib.model import compress as C
from canlib.model import conversion as V
from canlib.model.layers import StandardDecoderLayer


def config() -> ModelConfig:
    """Its own widths (d=16, FFN 32): the converter test below slices the value rows by these numbers."""
    return small_config(d_model=16, heads=2, ffn_dim=32, max_len=32)


def test_per_block_scales_turn_one_softmax_into_two_when_alpha_is_constant():
    g = torch.Generator().manual_seed(0)
    s_x = torch.randn(3, 4, 5, generator=g, dtype=torch.float64)
    raw = torch.randn(3, 4, 7, generator=g, dtype=torch.float64)
    alpha = 0.3
    # shift each row's source scores so that every query gives the prefix exactly alpha
    s_h = raw - raw.logsumexp(-1, keepdim=True) + s_x.logsumexp(-1, keepdim=True) - torch.logit(torch.tensor(alpha))
    torch.testing.assert_close(C.self_share(s_x, s_h), torch.full((3, 4, 1), alpha, dtype=torch.float64))
    v = torch.randn(3, 12, 6, generator=g, dtype=torch.float64)
    a, b = V.alpha_value_scale(alpha)
    scaled = torch.cat([a * v[:, :5], b * v[:, 5:]], dim=1)
    torch.testing.assert_close(C.one_softmax(s_x, s_h) @ scaled, C.two_softmax(s_x, s_h) @ v)
    # the single factor 2 is right only at alpha = 1/2
    assert not torch.allclose(C.one_softmax(s_x, s_h) @ (2 * v), C.two_softmax(s_x, s_h) @ v)
    assert V.alpha_value_scale(0.5) == (2.0, 2.0)


def test_converter_scales_prefix_and_source_values_separately():
    layer = StandardDecoderLayer(config()).double().eval()
    base = V.standard_to_can(layer, value_scale=1.0)
    pair = V.standard_to_can(layer, value_scale=(3.0, 0.5))
    d, f = 16, 32
    x_rows, h_rows = slice(2 * d, 2 * d + f), slice(d, d + f)  # W~v1 rows of x_proj, W~v2 rows of h_proj
    torch.testing.assert_close(pair.x_proj.weight[x_rows], 3.0 * base.x_proj.weight[x_rows])
    torch.testing.assert_close(pair.x_proj.bias[x_rows], 3.0 * base.x_proj.bias[x_rows])
    torch.testing.assert_close(pair.h_proj.weight[h_rows], 0.5 * base.h_proj.weight[h_rows])
    torch.testing.assert_close(pair.x_proj.weight[: 2 * d], base.x_proj.weight[: 2 * d])  # query and keys untouched


def test_model_converter_takes_one_scale_per_decoder_layer():
    torch.manual_seed(1)
    std = Seq2Seq(config()).eval()
    can = V.standard_to_can(std, value_scale=[V.alpha_value_scale(0.4), 2.0])
    same = V.standard_to_can(std, value_scale=2.0)
    torch.testing.assert_close(can.decoder_layers[1].x_proj.weight, same.decoder_layers[1].x_proj.weight)
    assert not torch.allclose(can.decoder_layers[0].x_proj.weight, same.decoder_layers[0].x_proj.weight)
    with pytest.raises(ValueError, match="1 value scales for 2 decoder layers"):
        V.standard_to_can(std, value_scale=[2.0])


def test_alpha_outside_the_open_unit_interval_is_refused():
    for alpha in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            V.alpha_value_scale(alpha)
