"""SAN's and AAN's decoder layers against their algorithms written out here in plain torch, in float64.

SAN (Xiao et al. 2019): in a sharing group the leader computes self-attention probabilities and the
cross-attention output; each follower mixes its own values with the leader's probabilities and adds the
leader's cross-attention output. AAN (Zhang et al. 2018): the self-attention sub-layer is

    avg_t = (z_0 + ... + z_t) / (t + 1),  g = FFN(avg_t),  [i; f] = sigmoid([z_t; g] Wg^T + bg)
    y     = x + i * z_t + f * g

The references use the layers' weights (slices of the fused maps by row) but none of canlib's functions, and
compute each position from the whole prefix, the probabilities by exp and sum: what the decode steps before
their fusing computed, written plainly. The steps run with several rows per sentence and padded sources.
"""

from __future__ import annotations

import math

import pytest
import torch
from layer_inputs import HEADS, D, inputs, layer_config
from torch import Tensor, nn

from canlib.model.attention import SourceMemory, causal_mask
from canlib.model.layers import AANDecoderLayer, SANDecoderLayer, build_decoder_layers, row_caches
from canlib.model.seq2seq import Seq2Seq


def random_layers(kind: str, seed: int, **changes) -> nn.ModuleList:
    """The decoder stack of ``kind`` with every parameter random (biases, norm gains around 1), in float64."""
    torch.manual_seed(seed)
    layers = build_decoder_layers(layer_config(kind, **changes)).double().eval()
    with torch.no_grad():
        for name, p in layers.named_parameters():
            p.copy_(torch.randn_like(p) * 0.5 + ("norm" in name and name.endswith("weight")))
    return layers


def norm(x: Tensor, ln: nn.LayerNorm) -> Tensor:
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + ln.eps) * ln.weight + ln.bias


def linear(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    return x @ weight.T + bias


def probabilities(q: Tensor, keys: Tensor, visible: Tensor) -> list[Tensor]:
    """Per head, the softmax of one query (d,) against keys (L, d) over the ``visible`` (L,) positions."""
    w = D // HEADS
    out = []
    for i in range(HEADS):
        scores = keys[:, i * w : (i + 1) * w] @ q[i * w : (i + 1) * w] / math.sqrt(w)
        scores = torch.where(visible, scores, torch.tensor(-math.inf, dtype=q.dtype))
        a = torch.exp(scores - scores.max())
        out.append(a / a.sum())
    return out


def mix(probs: list[Tensor], values: Tensor) -> Tensor:
    """Head i's probabilities times head i's slice of the values (L, d), the heads side by side."""
    w = values.size(1) // HEADS
    return torch.cat([a @ values[:, i * w : (i + 1) * w] for i, a in enumerate(probs)])


def cross_attention(layer: nn.Module, x: Tensor, h: Tensor, src_pad: Tensor) -> Tensor:
    """The leader's (or AAN's) cross-attention output for inputs x (B, T, d)."""
    att = layer.cross_attn
    z = norm(x, layer.cross_norm)
    k, v = linear(h, att.kv.weight, att.kv.bias).split(D, dim=-1)
    out = torch.empty_like(x)
    for b in range(x.size(0)):
        for t in range(x.size(1)):
            q = linear(z[b, t], att.q.weight, att.q.bias)
            out[b, t] = linear(mix(probabilities(q, k[b], ~src_pad[b]), v[b]), att.out.weight, att.out.bias)
    return out


def ffn(ff: nn.Module, z: Tensor) -> Tensor:
    """ReLU(z W1 + b1) W2 + b2."""
    return linear(torch.clamp(linear(z, ff.w1.weight, ff.w1.bias), min=0.0), ff.w2.weight, ff.w2.bias)


def san_reference(layers: nn.ModuleList, x: Tensor, h: Tensor, src_pad: Tensor) -> Tensor:
    """A SAN stack's output: leaders keep separate query, key and value maps (rows of ``qkv``)."""
    for layer in layers:
        z = norm(x, layer.self_norm)
        if layer.leader:
            wq, wk, wv = layer.qkv.weight.split(D)
            bq, bk, bv = layer.qkv.bias.split(D)
            q, k, v = linear(z, wq, bq), linear(z, wk, bk), linear(z, wv, bv)
            probs = {
                (b, t): probabilities(q[b, t], k[b, : t + 1], torch.ones(t + 1, dtype=torch.bool))
                for b in range(x.size(0))
                for t in range(x.size(1))
            }
        else:
            v = linear(z, layer.v.weight, layer.v.bias)
        mixed = torch.stack(
            [torch.stack([mix(probs[b, t], v[b, : t + 1]) for t in range(x.size(1))]) for b in range(x.size(0))]
        )
        x = x + linear(mixed, layer.self_out.weight, layer.self_out.bias)
        if layer.leader:
            cross = cross_attention(layer, x, h, src_pad)
        x = x + cross
        x = x + ffn(layer.ffn, norm(x, layer.ffn_norm))
    return x


def aan_reference(layers: nn.ModuleList, x: Tensor, h: Tensor, src_pad: Tensor) -> Tensor:
    """An AAN stack's output: the average, its FFN, two sigmoid gates, the gated sum, then cross-attention and FFN."""
    for layer in layers:
        z = norm(x, layer.avg_norm)
        y = torch.empty_like(x)
        for t in range(x.size(1)):
            avg = z[:, : t + 1].sum(dim=1) / (t + 1)
            g = ffn(layer.avg_ffn, avg)
            gates = linear(torch.cat([z[:, t], g], dim=-1), layer.gate.weight, layer.gate.bias)
            i, f = 1 / (1 + torch.exp(-gates[:, :D])), 1 / (1 + torch.exp(-gates[:, D:]))
            y[:, t] = x[:, t] + i * z[:, t] + f * g
        x = y + cross_attention(layer, y, h, src_pad)
        x = x + ffn(layer.ffn, norm(x, layer.ffn_norm))
    return x


KINDS = {
    "san": (dict(dec_layers=3, san_groups=(2, 1)), san_reference),  # a leader, its follower, a leader alone
    "aan": (dict(dec_layers=2), aan_reference),
}


def stepped(layers: nn.ModuleList, x: Tensor, memory: SourceMemory) -> Tensor:
    """The stack's output one position at a time through its decoding state, ``memory.beam`` rows per sentence."""
    rows, steps = x.repeat_interleave(memory.beam, dim=0), []
    with torch.no_grad():
        sources = [layer.project_source(memory) for layer in layers]
        _, caches, _ = row_caches(layers, memory, sources, x.size(1))
        for t in range(x.size(1)):
            out, shared = rows[:, t : t + 1], {}
            for layer, source, cache in zip(layers, sources, caches):
                out = layer.step(out, memory, source, cache, t, shared)
            steps.append(out)
    return torch.cat(steps, dim=1)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("beam", [1, 3])
def test_decode_steps_equal_the_algorithm_written_out(kind, beam):
    changes, reference = KINDS[kind]
    layers = random_layers(kind, seed=beam, **changes)
    x, h, src_pad = inputs(beam)
    with torch.no_grad():
        expected = reference(layers, x, h, src_pad).repeat_interleave(beam, dim=0)
    out = stepped(layers, x, SourceMemory(h, src_pad, beam))
    assert (out - expected).abs().max().item() < 1e-10


@pytest.mark.parametrize("kind", KINDS)
def test_teacher_forcing_equals_the_algorithm_written_out(kind):
    changes, reference = KINDS[kind]
    layers = random_layers(kind, seed=7, **changes)
    x, h, src_pad = inputs(7)
    memory, shared = SourceMemory(h, src_pad), {}
    with torch.no_grad():
        out = x
        for layer in layers:
            out = layer(out, memory, layer.project_source(memory), causal_mask(x.size(1)), shared)
        assert (out - reference(layers, x, h, src_pad)).abs().max().item() < 1e-10


def test_the_aan_reference_tells_the_gate_of_the_input_from_the_gate_of_the_average():
    """Swapping the two gates changes the reference: it is not blind to which sigmoid multiplies which term."""
    layers = random_layers("aan", seed=3, dec_layers=1)
    x, h, src_pad = inputs(3)
    with torch.no_grad():
        expected = aan_reference(layers, x, h, src_pad)
        for p in (layers[0].gate.weight, layers[0].gate.bias):
            p.copy_(torch.cat(p.chunk(2)[::-1]))
        assert (aan_reference(layers, x, h, src_pad) - expected).abs().max().item() > 1e-3


def test_a_san_leader_stored_with_separate_query_key_and_value_maps_loads_into_its_fused_map():
    """Checkpoints written before the leader's maps were fused hold ``qk`` (rows [Wq ; Wk]) and ``v``; they load
    into ``qkv`` unchanged, and the same seed still draws the same weights."""
    torch.manual_seed(0)
    model = Seq2Seq(layer_config("san", dec_layers=3, san_groups=(2, 1))).eval()
    state = model.state_dict()
    old = {}
    for key, value in state.items():
        if key.startswith("decoder_layers.") and ".qkv." in key:  # the old layout by hand: 2d rows qk, d rows v
            old[key.replace(".qkv.", ".qk.")], old[key.replace(".qkv.", ".v.")] = value[: 2 * D], value[2 * D :]
        else:
            old[key] = value
    assert len(old) == len(state) + 4  # two leaders, each weight and bias in two tensors
    torch.manual_seed(1)
    fresh = Seq2Seq(model.cfg)
    fresh.load_state_dict(old)
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in state.items())

    # the leader's draws, in the order of separate maps: qk made and initialised, then v and the output map
    cfg = layer_config("san")
    torch.manual_seed(2)
    leader = SANDecoderLayer(cfg, leader=True)
    torch.manual_seed(2)
    qk = nn.Linear(D, 2 * D)
    for block in qk.weight.split(D):
        nn.init.xavier_uniform_(block)
    v, out = nn.Linear(D, D), nn.Linear(D, D)
    nn.init.xavier_uniform_(v.weight)
    nn.init.xavier_uniform_(out.weight)
    assert torch.equal(leader.qkv.weight, torch.cat([qk.weight, v.weight]))
    assert torch.equal(leader.self_out.weight, out.weight)


def test_an_aan_step_keeps_one_prefix_sum_per_position():
    layers = random_layers("aan", seed=4, dec_layers=1)
    layer: AANDecoderLayer = layers[0]
    x, h, src_pad = inputs(4)
    memory = SourceMemory(h, src_pad)
    with torch.no_grad():
        source = layer.project_source(memory)
        _, (cache,), _ = row_caches(layers, memory, [source], x.size(1))
        for t in range(x.size(1)):
            layer.step(x[:, t : t + 1], memory, source, cache, t, {})
        expected = norm(x, layer.avg_norm).cumsum(dim=1).transpose(0, 1)
    assert (cache["sum"] - expected).abs().max().item() < 1e-12
