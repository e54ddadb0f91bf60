"""Attention maps are the ones each layer really used, and alpha is the target share of CAN's one softmax."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import small_model

from canlib.analysis import attention_maps as am
from canlib.model.attention import causal_mask
from canlib.model.config import BOS_ID, EOS_ID, PAD_ID
from canlib.model.seq2seq import Seq2Seq


def model(kind: str) -> Seq2Seq:
    """Its own widths (d=16, two heads, FFN 64 = 4d as CAN's values): the tests below write out these shapes."""
    return small_model(kind, d_model=16, heads=2, ffn_dim=64)


SRC = [5, 6, 7, 8, EOS_ID]
TGT_IN = [BOS_ID, 9, 10]


def test_standard_maps_are_causal_distributions_of_the_right_shape():
    maps = am.attention_maps(model("standard"), SRC, TGT_IN)
    assert len(maps) == 2
    for m in maps:
        assert m["self"].shape == (3, 3) and m["cross"].shape == (3, 5)
        torch.testing.assert_close(m["self"].sum(-1), torch.ones(3))
        torch.testing.assert_close(m["cross"].sum(-1), torch.ones(3))
        assert torch.all(m["self"].triu(1) == 0)  # no query sees a later target position


def test_standard_self_map_reproduces_the_self_attention_output():
    net = model("standard")
    layer = net.decoder_layers[0]
    (x, memory, blocked), _ = am.decoder_inputs(net, torch.tensor([SRC]), torch.tensor([TGT_IN]))
    probs = am.standard_layer_maps(layer, x, memory, blocked)["self"]
    v = layer.self_attn.qkv(layer.self_norm(x)).chunk(3, dim=-1)[2]
    v = v.view(1, 3, 2, 8).transpose(1, 2)
    rebuilt = layer.self_attn.out(torch.matmul(probs, v).transpose(1, 2).reshape(1, 3, 16))
    torch.testing.assert_close(rebuilt, layer.self_attn(layer.self_norm(x), blocked))


def test_can_joint_map_reproduces_the_layer_output_and_alpha_is_its_prefix_mass():
    net = model("can")
    layer = net.decoder_layers[1]
    _, (x, memory, blocked) = am.decoder_inputs(net, torch.tensor([SRC]), torch.tensor([TGT_IN]))
    joint = am.joint_layer_map(layer, x, memory, blocked)
    assert joint.shape == (1, 2, 3, 3 + 5)
    with torch.no_grad():
        want = layer(x, memory, layer.project_source(memory), causal_mask(3), {})
        # x + W2 ReLU(z W1 + b1 + A [z W~v1 ; H W~v2]), the map's prefix columns mixing z W~v1, its source ones H W~v2
        _, _, v, hidden = layer._project(x)
        mixed = torch.matmul(joint[..., :3], v) + memory.mix(
            joint[..., 3:].contiguous(), layer.project_source(memory)["v"]
        )
        torch.testing.assert_close(layer._output(x, hidden, mixed), want)
    alpha = am.target_share(joint, 3)
    torch.testing.assert_close(alpha + joint[..., 3:].sum(-1), torch.ones(1, 2, 3))
    assert torch.all(joint[..., :3].triu(1) == 0)
    maps = am.attention_maps(net, SRC, TGT_IN)
    torch.testing.assert_close(maps[1]["alpha"], alpha[0].mean(0))


def test_alpha_per_layer_skips_padded_target_positions():
    net = model("can")
    src = torch.tensor([SRC, [5, 6, EOS_ID, PAD_ID, PAD_ID]])
    tgt = torch.tensor([TGT_IN, [BOS_ID, 9, PAD_ID]])
    alphas = am.alpha_statistics(net, [(src, tgt)])[0]
    assert len(alphas) == 2
    assert all(a.numel() == 5 * 2 for a in alphas)  # 5 real target positions x 2 heads
    assert all(((a > 0) & (a < 1)).all() for a in alphas)
    rows = am.alpha_summary(alphas)
    assert rows[0]["values"] == 10 and 0 < rows[0]["mean"] < 1


def test_alpha_is_refused_for_a_standard_decoder_and_in_training_mode():
    with pytest.raises(TypeError, match="joint-attention"):
        am.alpha_statistics(model("standard"), [(torch.tensor([SRC]), torch.tensor([TGT_IN]))])
    with pytest.raises(ValueError, match="eval mode"):
        am.attention_maps(model("can").train(), SRC, TGT_IN)
    with pytest.raises(ValueError, match="eval mode"):
        am.alpha_statistics(model("can").train(), [(torch.tensor([SRC]), torch.tensor([TGT_IN]))])


def test_target_share_rejects_a_map_without_source_columns():
    with pytest.raises(ValueError, match="3 columns"):
        am.target_share(torch.ones(1, 3, 3), 3)


def test_standard_cross_map_reads_the_input_after_self_attention():
    net = model("standard")
    layer = net.decoder_layers[0]
    (x, memory, blocked), _ = am.decoder_inputs(net, torch.tensor([SRC]), torch.tensor([TGT_IN]))
    probs = am.standard_layer_maps(layer, x, memory, blocked)["cross"]
    with torch.no_grad():
        x_cross = x + layer.self_attn(layer.self_norm(x), blocked)
        source = layer.cross_attn.project_source(memory)
        rebuilt = layer.cross_attn.out(memory.mix(probs, source["v"]).transpose(1, 2).reshape(1, 3, 16))
        torch.testing.assert_close(rebuilt, layer.cross_attn(layer.cross_norm(x_cross), memory, source))


def test_compress_attention_ablation_has_a_joint_map_too():
    maps = am.attention_maps(model("can_attn"), SRC, TGT_IN)
    assert all(m["joint"].shape == (3, 8) and m["alpha"].shape == (3,) for m in maps)


def test_alpha_by_position_averages_real_positions_and_gives_the_uniform_reference():
    net = model("can")
    src = torch.tensor([SRC, [5, 6, EOS_ID, PAD_ID, PAD_ID]])
    tgt = torch.tensor([TGT_IN, [BOS_ID, 9, PAD_ID]])
    out = am.alpha_statistics(net, [(src, tgt)], max_position=4)[1]
    assert out["alpha"].shape == (2, 4)
    assert out["count"].tolist() == [2, 2, 1, 0]
    # uniform attention: query i sees i prefix positions and s source positions (s = 5 and 3 here)
    torch.testing.assert_close(
        out["uniform"][:3], torch.tensor([(1 / 6 + 1 / 4) / 2, (2 / 7 + 2 / 5) / 2, 3 / 8], dtype=torch.float64)
    )
    assert torch.isnan(out["alpha"][:, 3]).all() and torch.isnan(out["uniform"][3])
    per_layer = am.alpha_statistics(net, [(src[:1], tgt[:1])])[0]
    torch.testing.assert_close(
        out["alpha"][0, 2].float(), per_layer[0].view(3, 2)[2].mean()
    )  # position-major, heads inner


def test_pick_pair_takes_the_first_pair_within_the_lengths_and_names_the_range_when_none_fits():
    split = [([1] * 3, [2] * 8), ([1] * 7, [2] * 13), ([1] * 6, [2] * 12), ([1] * 9, [2] * 9)]
    assert am.pick_pair(split) == 2
    with pytest.raises(ValueError, match="20-30 subwords"):
        am.pick_pair(split, low=20, high=30)


def test_alpha_histogram_counts_every_value_once_including_the_ends():
    hist = am.alpha_histogram([torch.tensor([0.0, 0.01, 0.5, 0.99, 1.0]), torch.tensor([0.3, 0.3])], bins=4)
    assert hist["edges"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert hist["counts"] == [[2, 0, 1, 2], [0, 2, 0, 0]]


def test_the_attention_study_stores_what_the_chapter_draws(shared_data, tmp_path, monkeypatch):
    from repro.cli import main
    from repro.results.files import load_result

    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    if not (shared_data / "multi30k-en-de").is_dir():
        pytest.skip("multi30k-en-de is not in the data folder")
    argv = ["--scale", "tiny", "--out", str(tmp_path / "out"), "--max-steps", "2", "--studies", "attention"]
    assert main(["experiment", *argv]) == 0
    study, prov = load_result(tmp_path / "out" / "tiny" / "attention.json")
    assert (tmp_path / "out" / "tiny" / "attention.json").is_file() and prov["scale"] == "tiny"
    t, s = len(study["pair"]["tgt_tokens"]), len(study["pair"]["src_tokens"])
    assert 6 < t <= 13 and 6 < s <= 13 and study["pair"]["src_tokens"][-1] == "</s>"
    for layer in study["maps"]["balanced"]:
        assert np.array(layer["self"]).shape == (t, t) and np.array(layer["cross"]).shape == (t, s)
    for layer in study["maps"]["can"]:
        joint = np.array(layer["joint"])
        assert joint.shape == (t, t + s)
        np.testing.assert_allclose(joint.sum(1), 1.0, rtol=1e-5)
        np.testing.assert_allclose(joint[:, :t].sum(1), layer["alpha"], rtol=1e-5)
    layers = study["models"]["can"]["dec_layers"]
    assert len(study["alpha_summary"]) == layers == len(study["alpha_histogram"]["counts"])
    assert [sum(c) for c in study["alpha_histogram"]["counts"]] == [row["values"] for row in study["alpha_summary"]]
    assert len(study["alpha_by_position"]["alpha"]) == layers
