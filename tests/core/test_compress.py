"""The compression algebra: exact steps hold to 1e-10 in float64, approximations are measured, converters run."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import small_config

from canlib import ModelConfig, Seq2Seq
from canlib.model import compress as C
from canlib.model import conversion as V
from canlib.model.attention import SourceMemory, causal_mask
from canlib.model.config import BOS_ID, PAD_ID
from canlib.model.layers import CANDecoderLayer, StandardDecoderLayer
from repro.studies.paper import paper_numbers

TOL = 1e-10
B, T, S = 2, 5, 7


def config(**kw) -> ModelConfig:
    return small_config(**{"max_len": 32, **kw})


def random_layer(cfg: ModelConfig) -> StandardDecoderLayer:
    """A float64 standard layer whose LayerNorm gains/biases and linear biases are all non-trivial."""
    layer = StandardDecoderLayer(cfg)
    with torch.no_grad():
        for norm in (layer.self_norm, layer.cross_norm, layer.ffn_norm):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
        for m in layer.modules():
            if isinstance(m, torch.nn.Linear):
                m.bias.normal_(0.0, 0.2)
    return layer.double().eval()


def assert_close(a: torch.Tensor, b: torch.Tensor, tol: float, what: str) -> None:
    """The largest difference of ``a`` and ``b`` below ``tol``; else an error naming ``what``."""
    err = (a - b).abs().max().item()
    assert err < tol, f"{what}: max abs difference {err:.3e} exceeds {tol:.0e}"


def inputs(d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.randn(B, T, d, dtype=torch.float64) * 2 + 0.5
    h = torch.randn(B, S, d, dtype=torch.float64)
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[1, 4:] = True
    return x, h, pad


def run_layer(layer, x, h, pad):
    memory = SourceMemory(h, pad, 1)
    return layer(x, memory, layer.project_source(memory), causal_mask(x.size(1)), {})


@pytest.fixture(params=[1, 4], ids=["1head", "4heads"])
def case(request):
    cfg = config(heads=request.param)
    layer = random_layer(cfg)
    return layer, C.standard_weights(layer), *inputs(cfg.d_model)


def test_residual_stream_parts_are_what_the_layers_sublayers_read_and_write(case):
    layer, w, x, h, pad = case
    seen = {}

    def record(name):
        def hook(module, args, out):  # returns None: the layer's output is left alone
            seen[name] = (args[0], out)

        return hook

    hooks = [
        getattr(layer, name).register_forward_hook(record(name))
        for name in ("self_attn", "cross_norm", "cross_attn", "ffn_norm", "ffn")
    ]
    y = run_layer(layer, x, h, pad)
    for hook in hooks:
        hook.remove()
    parts = C.residual_stream(w, x, h, pad)
    assert_close(parts["y"], y, TOL, "X + S + C + F vs layer.forward")
    assert_close(parts["x_cross"], seen["cross_norm"][0], TOL, "X': what the cross-attention's LayerNorm reads")
    assert_close(parts["x_ffn"], seen["ffn_norm"][0], TOL, "X'': what the FFN's LayerNorm reads")
    for name, key in (("self_attn", "self"), ("cross_attn", "cross"), ("ffn", "ffn")):
        assert_close(parts[key], seen[name][1], TOL, f"{key}: the output of layer.{name}")


@pytest.mark.parametrize("query", ["concat", "absorb"])
def test_exact_shared_query_forms_reproduce_both_score_matrices(case, query):
    _, w, x, h, pad = case
    z = C.normalize(x, w.eps)
    for got, want in zip(C.attention_scores(w, z, h, pad, query), C.attention_scores(w, z, h, pad, "separate")):
        finite = torch.isfinite(want)
        assert torch.equal(finite, torch.isfinite(got))
        assert_close(got[finite], want[finite], TOL, f"{query} scores")


def test_d_over_h_shared_query_is_an_approximation_and_gram_fit_beats_the_mean(case):
    _, w, x, h, pad = case
    z = C.normalize(x, w.eps)
    want = torch.cat(C.attention_scores(w, z, h, None, "separate"), -1)
    errors = {
        m: C.relative_error(
            torch.cat(C.attention_scores(w, z, h, None, m), -1).nan_to_num(neginf=0), want.nan_to_num(neginf=0)
        )
        for m in ("gram", "mean")
    }
    assert 1e-3 < errors["gram"] <= errors["mean"]


def test_one_softmax_is_two_softmaxes_weighted_by_the_self_share():
    s_x, s_h = torch.randn(3, 4, 5, 6, dtype=torch.float64), torch.randn(3, 4, 5, 8, dtype=torch.float64) + 1
    alpha = C.self_share(s_x, s_h)
    scaled = torch.cat([alpha * torch.softmax(s_x, -1), (1 - alpha) * torch.softmax(s_h, -1)], -1)
    assert_close(C.one_softmax(s_x, s_h), scaled, TOL, "softmax over the concatenation")
    assert_close(C.two_softmax(s_x, s_h).sum(-1), torch.full((3, 4, 5), 2.0, dtype=torch.float64), TOL, "rows sum to 2")


def test_merged_ffn_with_wide_values_reproduces_the_reference_for_every_exact_query(case):
    _, w, x, h, pad = case
    ref = C.merged_ffn_reference(w, x, h, pad)
    for query in ("separate", "concat", "absorb"):
        assert_close(C.compressed_layer(w, x, h, pad, query=query), ref, TOL, f"Eq. 13 wide, query={query}")


def test_merged_ffn_reference_is_the_layers_own_ffn_reading_ln_f_x_plus_both_attentions(case):
    layer, w, x, h, pad = case
    memory = SourceMemory(h, pad, 1)
    with torch.no_grad():  # X + FFN(LN_f(X) + S + C), from the nn sub-layers, not from compress
        sc = layer.self_attn(layer.self_norm(x), causal_mask(x.size(1))) + layer.cross_attn(
            layer.cross_norm(x), memory, layer.project_source(memory)
        )
        want = x + layer.ffn(layer.ffn_norm(x) + sc)
    assert_close(C.merged_ffn_reference(w, x, h, pad), want, TOL, "merged FFN reference vs the nn sub-layers")


def test_check_detects_a_perturbed_weight(case):
    _, w, x, h, pad = case
    ref = C.merged_ffn_reference(w, x, h, pad)
    W = w.v2.W.clone()
    W[3, 5] += 1e-6
    perturbed = dataclasses.replace(w, v2=C.Affine(W, w.v2.b))
    assert_close(C.compressed_layer(w, x, h, pad), ref, TOL, "wide layer")
    with pytest.raises(AssertionError, match="wide layer"):
        assert_close(C.compressed_layer(perturbed, x, h, pad), ref, TOL, "wide layer")


def test_unknown_options_are_refused_with_their_values(case):
    layer, w, x, h, pad = case
    with pytest.raises(ValueError, match="softmax='three'"):
        C.compressed_layer(w, x, h, pad, softmax="three")
    with pytest.raises(ValueError, match="values='narrow'"):
        C.compressed_layer(w, x, h, pad, values="narrow")
    with pytest.raises(ValueError, match="method='median'"):
        C.compressed_layer(w, x, h, pad, query="median")
    with pytest.raises(ValueError, match=r"value_scale=\(1.0, 2.0, 3.0\)"):
        V.standard_to_can(layer, value_scale=(1.0, 2.0, 3.0))


def test_can_layer_filled_by_converter_computes_the_papers_form(case):
    layer, w, x, h, pad = case
    can = V.standard_to_can(layer)
    assert isinstance(can, CANDecoderLayer) and can.x_proj.weight.dtype == torch.float64
    want = C.compressed_layer(w, x, h, pad, query="gram", softmax="one", value_scale=2.0, values="split")
    assert_close(run_layer(can, x, h, pad), want, TOL, "CANDecoderLayer vs Eq. 13 split form")


def test_steps_mark_exact_stages_exact_and_approximate_ones_measurably_different(case):
    _, w, x, h, pad = case
    rows = C.step_errors(C.compression_steps(w, x, h, pad), x)
    assert [r["exact"] for r in rows] == [True, False, False, False, True, True, False, False, w.heads == 1]
    for r in rows[1:]:
        assert (r["max_abs_vs_prev"] < TOL) == r["exact"], r


def test_converted_balanced_model_is_a_working_can_model():
    torch.manual_seed(3)
    std = Seq2Seq(config(enc_layers=2, dec_layers=2)).eval()
    can = V.standard_to_can(std)
    assert can.cfg.decoder_kind == "can" and can.cfg.replace(decoder_kind="standard") == std.cfg
    assert torch.equal(can.embed.weight, std.embed.weight)
    assert torch.equal(can.encoder_layers[1].ffn.w2.weight, std.encoder_layers[1].ffn.w2.weight)
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, PAD_ID]])
    tgt = torch.tensor([[BOS_ID, 11, 12, 13], [BOS_ID, 14, 15, 16]])
    with torch.no_grad():
        full = can(src, tgt)
        cache = can.init_cache(can.encode(src), max_len=4)
        steps = torch.stack([can.decode_step(tgt[:, t], cache) for t in range(4)], dim=1)
    assert torch.isfinite(full).all()
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def test_converter_rejects_a_non_standard_model():
    with pytest.raises(ValueError, match="'can'"):
        V.standard_to_can(Seq2Seq(config(decoder_kind="can")))


def test_paper_numbers_ship_with_the_package():
    numbers = paper_numbers()
    assert numbers["table2_wmt14"]["en-de"]["CAN"] == [27.32, 26.47, 290.08]
    assert numbers["fig2_similarity"]["self_vs_cross"][0][0] == 0.8025
