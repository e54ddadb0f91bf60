"""What the teaching chapters draw and say, checked without building the book: the three pictures of the paper's
chain, the table layout every chapter uses (reading_table), the prose compress_trained writes from the stored
small analysis, recomputed here from the raw JSON, and the attention chapter's maps of a small model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from conftest import small_model

from _code import attention, compress, figures, similarity
from _code.tables import reading_table, reads_as_number
from canlib.analysis.attention_maps import attention_maps
from canlib.model.config import BOS_ID, EOS_ID

matplotlib.use("Agg")
REPO = Path(__file__).resolve().parents[2]
APPROXIMATIONS = REPO / "book" / "results" / "small" / "approximations.json"
PAPER = json.loads((REPO / "repro" / "resources" / "paper_numbers.json").read_text(encoding="utf-8"))


# -- the pictures of the chain -------------------------------------------------------------------------


def test_the_joint_softmax_figure_draws_each_rows_mass_per_block_from_the_maps_it_is_given():
    t = 3
    two = torch.tensor([[1.0, 0, 0, 0.2, 0.8], [0.5, 0.5, 0, 0.6, 0.4], [0.2, 0.3, 0.5, 1.0, 0.0]])
    one = torch.tensor([[0.1, 0, 0, 0.2, 0.7], [0.3, 0.3, 0, 0.2, 0.2], [0.1, 0.1, 0.2, 0.6, 0.0]])
    fig = figures.joint_softmax_figure(two, one, prefix=t)
    bars = [ax for ax in fig.axes if any(p.get_gid() == "prefix-mass" for p in ax.patches)]
    assert len(bars) == 2
    for ax, drawn in zip(bars, (two, one)):
        prefix = [p.get_width() for p in ax.patches if p.get_gid() == "prefix-mass"]
        source = [p.get_width() for p in ax.patches if p.get_gid() == "source-mass"]
        assert prefix == pytest.approx(drawn[:, :t].sum(1).tolist())
        assert source == pytest.approx(drawn[:, t:].sum(1).tolist())
    labels = [text.get_text() for text in bars[1].texts]
    assert labels == ["1", "1", "1"]  # one softmax: each row one unit


def test_the_absorbed_values_figure_draws_w1_four_times_as_wide_as_the_value_map_and_wo_as_canlibs():
    fig = figures.absorbed_values_figure()
    bottom = fig.axes[1]
    shapes = {p.get_gid(): (p.get_width(), p.get_height()) for p in bottom.patches}
    assert shapes["w1"][0] == pytest.approx(4 * shapes["wv"][0]) and shapes["w1"][1] == shapes["wv"][1]
    assert shapes["wo"] == shapes["wv"] and any(t.get_text() == "canlib only" for t in bottom.texts)
    widths = sorted({round(p.get_width(), 6) for p in bottom.patches if p.get_gid() == "values"})
    assert widths == [4 * shapes["wv"][0]]  # the mixed values are 4d wide in Eq. 13
    top_values = {round(p.get_width(), 6) for p in fig.axes[0].patches if p.get_gid() == "values"}
    assert top_values == {shapes["wv"][0]}  # and d wide in Eq. 12


def test_the_ffn_entry_figure_adds_the_attention_inside_the_relu_only_in_eq13():
    fig = figures.ffn_entry_figure()
    left, right = fig.axes
    sums = [sum(p.get_gid() == "sum" for p in ax.patches) for ax in (left, right)]
    assert sums == [0, 1]
    assert any("waits for the attention" in t.get_text() for t in left.texts)
    assert not any("waits" in t.get_text() for t in right.texts)


# -- reading_table -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("+0.54 (+1.5%)", True),
        ("28.40 ± 0.31", True),
        ("1,200", True),
        ("12/2", True),
        ("en-de", False),
        ("too few", False),
        ("shared query (gram)", False),
        ("0.45x (0.32-0.48x)", True),
    ],
)
def test_a_cell_reads_as_a_number_when_it_is_digits_and_their_signs(text, number):
    assert reads_as_number(text) is number


def table_css(styler) -> dict[str, str]:
    """{selector: declarations} of a Styler's own CSS (the table id stripped)."""
    html = styler.to_html()
    css = html[html.index("<style") : html.index("</style>")]
    return {sel.split(" ", 1)[1]: body.strip() for sel, body in re.findall(r"(#T_\w+ [^{]+?) \{([^}]*)\}", css)}


def test_reading_table_keeps_numbers_and_one_word_cells_on_one_line_and_lets_text_wrap():
    frame = pd.DataFrame(
        {"Δ": ["+0.54 (+1.5%)", "too few"], "BLEU": [34.71, 33.1], "note": ["a long remark", "x y"]},
        index=pd.Index(["en-de", "de-en"], name="task"),
    )
    styler = reading_table(frame, "A caption <b>")
    css = table_css(styler)
    assert css["td.col0"].startswith("white-space: nowrap") and "left" in css["td.col0"]  # the index: words
    assert "nowrap" in css["td.col1"] and "right" in css["td.col1"] and "right" in css["th.col1"]
    assert "nowrap" in css["td.col2"] and "tabular-nums" in css["td.col2"]
    assert "nowrap" not in css["td.col3"] and "left" in css["th.col3"]
    html = styler.to_html()
    assert html.count("<tr>") == 3  # one header row (the index name is a column header), two rows
    assert "<caption>A caption &lt;b&gt;</caption>" in html or "<caption>A caption <b></caption>" in html
    assert ">34.71<" in html and ">en-de<" in html


def test_reading_table_escapes_cells_and_headers_and_drops_a_default_index():
    styler = reading_table(pd.DataFrame({"a < b": ["<s>"], "n": [1200]}))
    html = styler.to_html()
    assert "&lt;s&gt;" in html and "a &lt; b" in html and ">1,200<" in html
    assert "row_heading" not in html


# -- the prose compress_trained writes ---------------------------------------------------------------


@pytest.fixture
def approximations() -> dict:
    if not APPROXIMATIONS.is_file():
        pytest.skip(f"{APPROXIMATIONS} is not stored")
    return json.loads(APPROXIMATIONS.read_text(encoding="utf-8"))["result"]


def test_compress_trained_says_what_the_stored_numbers_show(approximations):
    fig2 = PAPER["fig2_similarity"]["self_vs_cross"]
    text = "\n".join(compress.trained_findings(approximations, fig2))
    layers = approximations["layers"]
    learnt = 1 - approximations["valid_nll"] / approximations["uniform_nll"]
    assert f"{approximations['valid_nll']:.2f} nats per token" in text
    assert ("it translates" in text) == (learnt >= compress.LEARNT_LITTLE)
    cos = [layer["cos_input"] for layer in layers]
    assert f"{min(cos):.2f} to {max(cos):.2f}" in text
    above = sum(c > fig2[i][i] for i, c in enumerate(cos))
    assert ("above it at every one" in text) == (above == len(layers))
    worst = max((s["rel_vs_prev"], s["step"]) for layer in layers for s in layer["steps"] if not s["exact"])
    assert f"'{worst[1]}'" in text and f"{worst[0]:.2f}" in text
    alpha = [layer["alpha_mean"] for layer in layers]
    assert ("not the half" in text) == any(abs(a - 0.5) > compress.NEAR_HALF for a in alpha)
    nll = approximations["conversion"]
    best = min((v, k) for k, v in nll.items() if k.startswith("converted"))
    assert f"'{best[1].removeprefix('converted: ')}', {best[0]:.2f}" in text
    assert "$" not in text  # Markdown a cell displays is not typeset: no TeX


def test_compress_trained_says_a_model_that_learnt_nothing_demonstrates_the_method_only(approximations):
    idle = dict(approximations, valid_nll=approximations["uniform_nll"] * 0.95)
    text = compress.trained_findings(idle, PAPER["fig2_similarity"]["self_vs_cross"])[0]
    assert "learnt almost nothing" in text and "translates" not in text


# -- words the chapters choose from their numbers -----------------------------------------------------


@pytest.mark.parametrize(
    ("holds", "words"),
    [
        ([True] * 6, "at every layer"),
        ([False] * 6, "at no layer"),
        ([False] + [True] * 5, "at every layer but the first"),
        ([False, True], "at the second layer only"),
        ([True, False, True, False, True, True], "at 4 of the 6 layers"),
    ],
)
def test_the_similarity_chapter_names_the_layers_where_a_condition_holds(holds, words):
    import numpy as np

    assert similarity.at_layers(np.array(holds)) == words


def test_the_similarity_chapter_reads_the_gap_of_the_diagonals_by_its_sign():
    assert similarity.gap_reading(0.05).startswith("positive")
    assert similarity.gap_reading(-0.003).startswith("near zero")
    assert similarity.gap_reading(-0.05).startswith("negative")


def test_the_attention_chapter_names_per_layer_values_in_the_layers_order():
    assert attention.in_order(["0.732", "0.035"]) == "0.732 and 0.035 (the first, then the second layer)"
    assert attention.in_order(["28"]) == "28"


# -- the attention chapter's maps -------------------------------------------------------------------------


def maps_model(kind: str):
    """A two-layer model of d=16 and two heads, so that a figure of its maps is small."""
    return small_model(kind, d_model=16, heads=2, ffn_dim=64)


SRC = [5, 6, 7, 8, EOS_ID]
TGT_IN = [BOS_ID, 9, 10]


def test_plot_pair_maps_draws_one_row_per_layer():
    std, can = attention_maps(maps_model("standard"), SRC, TGT_IN), attention_maps(maps_model("can"), SRC, TGT_IN)
    fig = attention.plot_pair_maps(std, can, [f"s{i}" for i in range(5)], ["<s>", "a", "b"])
    maps = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(maps) == 6 and maps[2].get_title().startswith("CAN layer 1")
    assert len(fig.axes) == 12  # every map with its colour bar
    plt.close(fig)


def test_plot_pair_maps_draws_every_layers_three_maps_from_stored_nested_lists():
    std, can = attention_maps(maps_model("standard"), SRC, TGT_IN), attention_maps(maps_model("can"), SRC, TGT_IN)
    stored = [[{k: v.tolist() for k, v in layer.items() if k != "heads"} for layer in maps] for maps in (std, can)]
    src_tokens, tgt_tokens = [f"s{i}" for i in range(5)], ["<s>", "a", "b"]
    fig = attention.plot_pair_maps(*stored, src_tokens, tgt_tokens)
    drawn = [ax for ax in fig.axes if ax.images]
    assert len(drawn) == 3 * 2  # self, cross and joint of both decoder layers, each drawn once
    expected = [m for i in range(2) for m in (std[i]["self"], std[i]["cross"], can[i]["joint"])]
    for ax, probs in zip(drawn, expected):  # the image is the map itself, queries down and keys across
        np.testing.assert_allclose(ax.images[0].get_array(), probs.numpy(), rtol=1e-6)
        assert [t.get_text() for t in ax.get_yticklabels()] == tgt_tokens
    assert [t.get_text() for t in drawn[2].get_xticklabels()] == tgt_tokens + src_tokens
    assert all(t.get_fontsize() >= 10 for ax in drawn for t in ax.get_xticklabels())  # readable at page width
    plt.close(fig)
