"""CAN's decoder layer against the paper's equations written out here in plain torch.

Paper Eqs. 10-13 (the "Compressed-Attention" sub-layer), with README's decisions for what the
paper leaves open: pre-norm (z = LayerNorm(x)); per head i a d/h-wide query and key and a
4d/h-wide slice of the values; scores scaled by sqrt(d/h); one softmax per head over the target
prefix and the (unpadded) source together; one residual around the whole layer:

    A_i = SoftMax(z Wq_i [z Wk1_i ; H Wk2_i]^T / sqrt(d/h))
    y   = x + ReLU(z W1 + b1 + concat_i(A_i [z W~v1_i ; H W~v2_i])) W2 + b2

The reference uses the layer's weights but none of canlib's functions (no attention, masking,
head-splitting or norm helper), and runs in float64.
"""

from __future__ import annotations

import math

import pytest
import torch
from layer_inputs import FFN, HEADS, D, inputs, layer_config

from canlib.model.attention import SourceMemory
from canlib.model.layers import CANDecoderLayer, row_caches


def random_layer(seed: int) -> CANDecoderLayer:
    """A CAN layer with every parameter (biases and norm gains included) random, in float64."""
    torch.manual_seed(seed)
    layer = CANDecoderLayer(layer_config("can")).double().eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
        layer.norm.weight.add_(1.0)
    return layer


def reference_layer(layer: CANDecoderLayer, x: torch.Tensor, h: torch.Tensor, src_pad: torch.Tensor) -> torch.Tensor:
    """y for target inputs x (B, T, d), encoder output h (B, S, d) and source padding (B, S), True = pad;
    target position t sees target positions <= t and every real source position."""
    w_x, b_x = layer.x_proj.weight, layer.x_proj.bias  # rows: [Wq | Wk1 | W~v1 | W1]
    w_h, b_h = layer.h_proj.weight, layer.h_proj.bias  # rows: [Wk2 | W~v2]
    wq, wk1, wv1, w1 = w_x.split([D, D, FFN, FFN], dim=0)
    bq, bk1, bv1, b1 = b_x.split([D, D, FFN, FFN])
    wk2, wv2 = w_h.split([D, FFN], dim=0)
    bk2, bv2 = b_h.split([D, FFN])

    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    z = (x - mean) / torch.sqrt(var + layer.norm.eps) * layer.norm.weight + layer.norm.bias

    batch, length, _ = x.shape
    dq, dv = D // HEADS, FFN // HEADS
    y = torch.empty_like(x)
    for b in range(batch):
        for t in range(length):
            q = z[b, t] @ wq.T + bq
            keys = torch.cat([z[b, : t + 1] @ wk1.T + bk1, h[b] @ wk2.T + bk2])  # (t+1+S, d)
            values = torch.cat([z[b, : t + 1] @ wv1.T + bv1, h[b] @ wv2.T + bv2])  # (t+1+S, 4d)
            visible = torch.cat([torch.ones(t + 1, dtype=torch.bool), ~src_pad[b]])
            mixed = []
            for i in range(HEADS):
                scores = keys[:, i * dq : (i + 1) * dq] @ q[i * dq : (i + 1) * dq] / math.sqrt(D / HEADS)
                scores = torch.where(visible, scores, torch.tensor(-math.inf, dtype=x.dtype))
                a = torch.exp(scores - scores.max())
                a = a / a.sum()
                mixed.append(a @ values[:, i * dv : (i + 1) * dv])
            inner = z[b, t] @ w1.T + b1 + torch.cat(mixed)
            y[b, t] = x[b, t] + torch.clamp(inner, min=0.0) @ layer.ffn.w2.weight.T + layer.ffn.w2.bias
    return y


@pytest.mark.parametrize("seed", [0, 1])
def test_teacher_forced_can_layer_computes_the_papers_equations(seed):
    layer = random_layer(seed)
    x, h, src_pad = inputs(seed)
    blocked = torch.ones(x.size(1), x.size(1), dtype=torch.bool).triu(1)  # True = future position
    memory = SourceMemory(h, src_pad)
    with torch.no_grad():
        out = layer(x, memory, layer.project_source(memory), blocked, {})
    expected = reference_layer(layer, x, h, src_pad)
    assert (out - expected).abs().max().item() < 1e-10


@pytest.mark.parametrize("beam", [1, 2])
def test_can_decode_steps_compute_the_papers_equations(beam):
    """One position at a time through the layer's cache, each sentence read by ``beam`` rows."""
    layer = random_layer(7)
    x, h, src_pad = inputs(7)
    memory = SourceMemory(h, src_pad, beam)
    rows = x.repeat_interleave(beam, dim=0)
    with torch.no_grad():
        source = layer.project_source(memory)
        _, (cache,), _ = row_caches([layer], memory, [source], x.size(1))
        out = torch.cat([layer.step(rows[:, t : t + 1], memory, source, cache, t, {}) for t in range(x.size(1))], dim=1)
    expected = reference_layer(layer, x, h, src_pad).repeat_interleave(beam, dim=0)
    assert (out - expected).abs().max().item() < 1e-10


def test_the_reference_is_sensitive_to_padding_and_the_future():
    """The reference's masks matter on these inputs: a padded source vector or a later target
    position changes nothing, a real source vector changes the output."""
    layer = random_layer(3)
    x, h, src_pad = inputs(3)
    base = reference_layer(layer, x, h, src_pad)
    h2 = h.clone()
    h2[1, 4] += 5.0  # padded position of sentence 1
    x2 = x.clone()
    x2[:, -1] += 5.0  # the last target position
    assert torch.equal(reference_layer(layer, x, h2, src_pad), base)
    assert torch.equal(reference_layer(layer, x2, h, src_pad)[:, :-1], base[:, :-1])
    h2[1, 0] += 5.0  # a real one
    assert (reference_layer(layer, x, h2, src_pad)[1] - base[1]).abs().max() > 1e-3
