"""The merged FFN, ReLU(hidden + mixed) W2 + b2: one module, written out here, and the one path by which CAN, its
Compress FFN ablation and CAN keeping its residual reach their output; the Compress FFN layer against its equations."""

from __future__ import annotations

import math

import pytest
import torch
from layer_inputs import FFN, HEADS, D, inputs, layer_config

from canlib.model.attention import MergedFFN, SourceMemory
from canlib.model.layers import CANFFNDecoderLayer, build_decoder_layers, row_caches

MERGED_KINDS = ("can", "can_ffn", "can_residual")


def random_layer(kind: str, seed: int) -> torch.nn.Module:
    """A decoder layer of ``kind`` with every parameter random (biases and norm gains included), in float64."""
    torch.manual_seed(seed)
    layer = build_decoder_layers(layer_config(kind))[0].double().eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return layer


def test_the_merged_ffn_is_relu_of_hidden_plus_mixed_times_w2_plus_b2():
    torch.manual_seed(0)
    ffn = MergedFFN(FFN, D, relu_dropout=0.0).double().eval()
    hidden, mixed = torch.randn(2, 3, FFN, dtype=torch.float64), torch.randn(2, 3, FFN, dtype=torch.float64)
    expected = torch.zeros(2, 3, D, dtype=torch.float64)
    for i in range(2):
        for j in range(3):
            inner = [max(a + b, 0.0) for a, b in zip(hidden[i, j].tolist(), mixed[i, j].tolist())]
            for o in range(D):
                expected[i, j, o] = sum(v * w for v, w in zip(inner, ffn.w2.weight[o].tolist())) + ffn.w2.bias[o]
    with torch.no_grad():
        assert torch.allclose(ffn(hidden, mixed), expected, atol=1e-12)
    assert (hidden + mixed).lt(0).any()  # the ReLU has something to cut


@pytest.mark.parametrize("kind", MERGED_KINDS)
def test_every_merged_kind_reaches_its_output_through_one_merged_ffn_per_call(kind):
    """Each of the three layers holds one MergedFFN and calls it once per teacher-forced pass and once per decode
    step, with its 4d-wide hidden and mixed parts; with W2 and b2 zero, CAN's output is its input."""
    layer = random_layer(kind, seed=1)
    assert type(layer.ffn) is MergedFFN
    x, h, pad = inputs(1)
    memory = SourceMemory(h, pad)
    calls = []
    layer.ffn.register_forward_hook(lambda module, args, out: calls.append(tuple(a.shape for a in args)))
    blocked = torch.ones(5, 5, dtype=torch.bool).triu(1)
    with torch.no_grad():
        source = layer.project_source(memory)
        layer(x, memory, source, blocked, {})
        _, (cache,), _ = row_caches([layer], memory, [source], x.size(1))
        layer.step(x[:, :1], memory, source, cache, 0, {})
        assert calls == [((3, 5, FFN), (3, 5, FFN)), ((3, 1, FFN), (3, 1, FFN))]
        if kind == "can":
            layer.ffn.w2.weight.zero_()
            layer.ffn.w2.bias.zero_()
            assert torch.equal(layer(x, memory, source, blocked, {}), x)


def reference_can_ffn(layer: CANFFNDecoderLayer, x: torch.Tensor, h: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    """The Compress FFN layer written out, none of canlib's functions: a standard self-attention sub-layer, then
    ``y = y1 + ReLU(z W1 + b1 + concat_i(SoftMax(z Wq_i (H Wk2_i)^T / sqrt(d/h)) H W~v2_i)) W2 + b2``, z = LN(y1)."""

    def norm(v, ln):
        mean = v.mean(-1, keepdim=True)
        return (v - mean) / torch.sqrt(((v - mean) ** 2).mean(-1, keepdim=True) + ln.eps) * ln.weight + ln.bias

    def attend(q, keys, values, visible):
        dq, dv = D // HEADS, values.size(1) // HEADS
        out = []
        for i in range(HEADS):
            scores = keys[:, i * dq : (i + 1) * dq] @ q[i * dq : (i + 1) * dq] / math.sqrt(D / HEADS)
            a = torch.exp(torch.where(visible, scores, torch.tensor(-math.inf, dtype=x.dtype)) - scores.max())
            out.append((a / a.sum()) @ values[:, i * dv : (i + 1) * dv])
        return torch.cat(out)

    sa = layer.self_attn
    wq1, wk1, wv1 = sa.qkv.weight.split(D)
    bq1, bk1, bv1 = sa.qkv.bias.split(D)
    wq, w1 = layer.x_proj.weight.split([D, FFN])
    bq, b1 = layer.x_proj.bias.split([D, FFN])
    wk2, wv2 = layer.h_proj.weight.split([D, FFN])
    bk2, bv2 = layer.h_proj.bias.split([D, FFN])
    y = torch.empty_like(x)
    for b in range(x.size(0)):
        z1 = norm(x[b], layer.self_norm)
        for t in range(x.size(1)):
            mixed = attend(
                z1[t] @ wq1.T + bq1,
                z1[: t + 1] @ wk1.T + bk1,
                z1[: t + 1] @ wv1.T + bv1,
                torch.ones(t + 1, dtype=torch.bool),
            )
            y1 = x[b, t] + mixed @ sa.out.weight.T + sa.out.bias
            z = norm(y1, layer.norm)
            cross = attend(z @ wq.T + bq, h[b] @ wk2.T + bk2, h[b] @ wv2.T + bv2, ~pad[b])
            inner = torch.clamp(z @ w1.T + b1 + cross, min=0.0)
            y[b, t] = y1 + inner @ layer.ffn.w2.weight.T + layer.ffn.w2.bias
    return y


@pytest.mark.parametrize("beam", [1, 2])
def test_the_compress_ffn_layer_computes_its_equations_teacher_forced_and_step_by_step(beam):
    layer = random_layer("can_ffn", seed=3)
    x, h, pad = inputs(3)
    expected = reference_can_ffn(layer, x, h, pad)
    memory = SourceMemory(h, pad, beam)
    rows = x.repeat_interleave(beam, dim=0)
    with torch.no_grad():
        source = layer.project_source(memory)
        if beam == 1:
            forced = layer(x, SourceMemory(h, pad), source, torch.ones(5, 5, dtype=torch.bool).triu(1), {})
            assert (forced - expected).abs().max().item() < 1e-10
        _, (cache,), _ = row_caches([layer], memory, [source], x.size(1))
        steps = torch.cat([layer.step(rows[:, t : t + 1], memory, source, cache, t, {}) for t in range(x.size(1))], 1)
    assert (steps - expected.repeat_interleave(beam, dim=0)).abs().max().item() < 1e-10
