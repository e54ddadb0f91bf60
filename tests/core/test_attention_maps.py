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
        torch.testing.assert_close(am.joint_layer_output(layer, x, memory, joint), want)
    alpha = am.target_share(joint, 3)
    torch.testing.assert_close(alpha + joint[..., 3:].sum(-1), torch.ones(1, 2, 3))
    assert torch.all(joint[..., :3].triu(1) == 0)
    maps = am.attention_maps(net, SRC, TGT_IN)
    torch.testing.assert_close(maps[1]["alpha"], alpha[0].mean(0))


def test_alpha_per_layer_skips_padded_target_positions():
    net = model("can")
    src = torch.tensor([SRC, [5, 6, EOS_ID, PAD_ID, PAD_ID]])
    tgt = torch.tensor([TGT_IN, [BOS_ID, 9, PAD_ID]])
    alphas = am.alpha_per_layer(net, [(src, tgt)])
    assert len(alphas) == 2
    assert all(a.numel() == 5 * 2 for a in alphas)  # 5 real target positions x 2 heads
    assert all(((a > 0) & (a < 1)).all() for a in alphas)
    rows = am.alpha_summary(alphas)
    assert rows[0]["values"] == 10 and 0 < rows[0]["mean"] < 1


def test_alpha_is_refused_for_a_standard_decoder_and_in_training_mode():
    with pytest.raises(TypeError, match="joint-attention"):
        am.alpha_per_layer(model("standard"), [(torch.tensor([SRC]), torch.tensor([TGT_IN]))])
    with pytest.raises(ValueError, match="eval mode"):
        am.attention_maps(model("can").train(), SRC, TGT_IN)
    with pytest.raises(ValueError, match="eval mode"):
        am.alpha_by_position(model("can").train(), [(torch.tensor([SRC]), torch.tensor([TGT_IN]))])


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


def test_can_layer_parts_end_in_the_layer_output_with_4d_wide_values():
    net = model("can")
    layer = net.decoder_layers[0]
    (x, memory, blocked), _ = am.decoder_inputs(net, torch.tensor([SRC]), torch.tensor([TGT_IN]))
    with torch.no_grad():
        parts = am.can_layer_parts(layer, x, memory, blocked)
        torch.testing.assert_close(parts["output"], layer(x, memory, layer.project_source(memory), blocked, {}))
    assert parts["v_x"].shape == (1, 2, 3, 32) and parts["v_h"].shape == (1, 2, 5, 32)  # 4d/h = 64/2
    assert parts["joint"].shape == (1, 2, 3, 8) and parts["hidden"].shape == (1, 3, 64)


def test_alpha_by_position_averages_real_positions_and_gives_the_uniform_reference():
    net = model("can")
    src = torch.tensor([SRC, [5, 6, EOS_ID, PAD_ID, PAD_ID]])
    tgt = torch.tensor([TGT_IN, [BOS_ID, 9, PAD_ID]])
    out = am.alpha_by_position(net, [(src, tgt)], max_position=4)
    assert out["alpha"].shape == (2, 4)
    assert out["count"].tolist() == [2, 2, 1, 0]
    # uniform attention: query i sees i prefix positions and s source positions (s = 5 and 3 here)
    torch.testing.assert_close(
        out["uniform"][:3], torch.tensor([(1 / 6 + 1 / 4) / 2, (2 / 7 + 2 / 5) / 2, 3 / 8], dtype=torch.float64)
    )
    assert torch.isnan(out["alpha"][:, 3]).all() and torch.isnan(out["uniform"][3])
    per_layer = am.alpha_per_layer(net, [(src[:1], tgt[:1])])
    torch.testing.assert_close(
        out["alpha"][0, 2].float(), per_layer[0].view(3, 2)[2].mean()
    )  # position-major, heads inner


def test_plot_pair_maps_draws_one_row_per_layer():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    std, can = am.attention_maps(model("standard"), SRC, TGT_IN), am.attention_maps(model("can"), SRC, TGT_IN)
    fig = am.plot_pair_maps(std, can, [f"s{i}" for i in range(5)], ["<s>", "a", "b"])
    maps = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(maps) == 6 and maps[2].get_title().startswith("CAN layer 1")
    assert len(fig.axes) == 12  # every map with its colour bar
    plt.close(fig)


def test_pick_pair_takes_the_first_pair_within_the_lengths_and_names_the_range_when_none_fits():
    split = [([1] * 3, [2] * 8), ([1] * 7, [2] * 13), ([1] * 6, [2] * 12), ([1] * 9, [2] * 9)]
    assert am.pick_pair(split) == 2
    with pytest.raises(ValueError, match="20-30 subwords"):
        am.pick_pair(split, low=20, high=30)


def test_alpha_histogram_counts_every_value_once_including_the_ends():
    hist = am.alpha_histogram([torch.tensor([0.0, 0.01, 0.5, 0.99, 1.0]), torch.tensor([0.3, 0.3])], bins=4)
    assert hist["edges"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert hist["counts"] == [[2, 0, 1, 2], [0, 2, 0, 0]]


def test_plot_pair_maps_draws_every_layers_three_maps_from_stored_nested_lists():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    std, can = am.attention_maps(model("standard"), SRC, TGT_IN), am.attention_maps(model("can"), SRC, TGT_IN)
    stored = [[{k: v.tolist() for k, v in layer.items() if k != "heads"} for layer in maps] for maps in (std, can)]
    src_tokens, tgt_tokens = [f"s{i}" for i in range(5)], ["<s>", "a", "b"]
    fig = am.plot_pair_maps(*stored, src_tokens, tgt_tokens)
    drawn = [ax for ax in fig.axes if ax.images]
    assert len(drawn) == 3 * 2  # self, cross and joint of both decoder layers, each drawn once
    expected = [m for i in range(2) for m in (std[i]["self"], std[i]["cross"], can[i]["joint"])]
    for ax, probs in zip(drawn, expected):  # the image is the map itself, queries down and keys across
        np.testing.assert_allclose(ax.images[0].get_array(), probs.numpy(), rtol=1e-6)
        assert [t.get_text() for t in ax.get_yticklabels()] == tgt_tokens
    assert [t.get_text() for t in drawn[2].get_xticklabels()] == tgt_tokens + src_tokens
    assert all(t.get_fontsize() >= 10 for ax in drawn for t in ax.get_xticklabels())  # readable at page width
    plt.close(fig)


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
