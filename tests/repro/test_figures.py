"""The layer diagram draws what the chapters say: three pre-norm sub-layers against CAN's one."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from _code.figures import decoder_layers_figure, draw_can_layer, draw_standard_layer


@pytest.fixture(autouse=True)
def _headless_backend():
    """Agg for these tests only; the backend the session had is restored after each."""
    import matplotlib

    original = matplotlib.get_backend()
    plt.switch_backend("Agg")
    yield
    plt.switch_backend(original)


def count_blocks(ax, gid: str) -> int:
    """How many drawn patches of one kind (their gid) a panel holds."""
    return sum(p.get_gid() == gid for p in ax.patches)


def test_standard_layer_has_three_norms_and_three_residual_adds():
    fig, ax = plt.subplots()
    draw_standard_layer(ax)
    assert count_blocks(ax, "norm") == 3
    assert count_blocks(ax, "residual") == 3
    assert count_blocks(ax, "parallel") == 0
    plt.close(fig)


def test_can_layer_has_one_norm_one_residual_and_parallel_products():
    fig, ax = plt.subplots()
    draw_can_layer(ax)
    assert count_blocks(ax, "norm") == 1
    assert count_blocks(ax, "residual") == 1
    assert count_blocks(ax, "parallel") == 2  # x_proj and h_proj
    assert count_blocks(ax, "product") == 6  # X Wq, X Wk1, X W~v1, X W1; H Wk2, H W~v2
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "ONE softmax" in texts and "4d" in texts
    plt.close(fig)


def test_figure_puts_both_layers_side_by_side():
    fig = decoder_layers_figure()
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == 2 and titles[0].startswith("Standard") and titles[1].startswith("CAN")
    plt.close(fig)


def test_a_claims_figure_draws_the_judgements_points_and_the_raw_seed_means(monkeypatch):
    """plot_claim draws the registry's numbers: each point and bar of CAN − Balanced equals the judgement's, and the
    1x test2016 point is the seed means' difference recomputed from the stored run files with statistics.mean."""
    import json
    import statistics

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from conftest import REPO, SHARED_DATA

    if not (SHARED_DATA / "multi30k-en-de").is_dir():
        pytest.skip("real data not present (the bootstrap reads the references)")
    monkeypatch.setenv("CANLIB_DATA_DIR", str(SHARED_DATA))
    from _code.plots import claim_points, plot_claim
    from repro.studies.claims import judged
    from repro.studies.store import Store

    j = judged(Store("small", REPO / "book" / "results"))["can-within-0.5"]
    ax = plot_claim(j, plt.subplots()[1])
    drawn = [
        (x, y)
        for line in ax.lines
        if line.get_marker() in ("o", "s")
        for x, y in zip(line.get_xdata(), line.get_ydata())
    ]
    points = claim_points(j)
    assert sorted(y for _, y in drawn) == pytest.approx(sorted(p["value"] for p in points), abs=1e-12)
    assert {p["budget"] for p in points} == {1, 2} and len(points) == 8
    thick = sorted(v for line in ax.lines if line.get_linewidth() > 3 for v in line.get_ydata())
    assert thick == pytest.approx(sorted(v for p in points for v in p["seed_interval"]), abs=1e-12)
    runs = REPO / "book" / "results" / "small" / "runs" / "multi30k-en-de"

    def mean(system: str) -> float:
        return statistics.mean(
            json.loads(p.read_text())["result"]["scores"]["test"]["tok_bleu"]
            for p in sorted(runs.glob(f"{system}-seed*.json"))
        )

    at1 = next(p for p in points if p["budget"] == 1 and p["split"] == "test")
    assert at1["value"] == pytest.approx(mean("can") - mean("balanced"), abs=1e-9)
    assert any(line.get_linestyle() == "--" and line.get_ydata()[0] == -0.5 for line in ax.lines)  # the criterion
    plt.close("all")


def stub_claim(claim_id: str, paper: str, seed_interval, bootstrap):
    """A judged BLEU claim as plot_claim reads it: one 1x reading on test2016, with or without its intervals."""
    from types import SimpleNamespace

    row = {"split": "test", "set": "test2016", "value": -0.4, "verdict": "inconclusive"}
    row |= {"seed_interval": seed_interval, "test_set_interval": bootstrap}
    ok = SimpleNamespace(op=">=", bound=-0.5)
    claim = SimpleNamespace(id=claim_id, name=claim_id, paper=paper, evidence=SimpleNamespace(ok=ok))
    return SimpleNamespace(claim=claim, beside=(), sets=[row], budget=1, word="inconclusive")


def legend_labels(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_a_claims_legend_lists_only_what_some_panel_draws():
    """No paper line, no seed interval: neither is in the legend; once a panel draws them, both are."""
    from _code.plots import plot_claims

    bare = stub_claim("a", "—", None, (-0.9, 0.1))
    labels = legend_labels(plot_claims([bare, stub_claim("b", "—", None, None)]))
    assert "bootstrap 95 %" in labels and "criterion: >= -0.5" in labels
    assert not any(label.startswith(("paper", "seed interval")) for label in labels), labels
    full = stub_claim("c", "-0.14 (Table 2, En-De)", (-1.0, 0.2), (-0.9, 0.1))
    labels = legend_labels(plot_claims([bare, full]))
    assert {"paper (each panel's value)", "seed interval (95 %, t)", "bootstrap 95 %"} <= set(labels), labels
    plt.close("all")


def test_the_head_split_picture_draws_one_wide_map_per_head_above_one_map_cut_into_slices():
    from _code.figures import head_split_figure

    top, bottom = head_split_figure(heads=4).axes
    assert count_blocks(top, "head-map") == 4 and count_blocks(top, "slice") == 0
    slices = [p for p in bottom.patches if p.get_gid() == "slice"]
    assert len(slices) == 4 and len({round(p.get_width(), 9) for p in slices}) == 1  # equal column slices
    widest = max(p.get_width() for p in top.patches if p.get_gid() == "head-map")
    assert sum(p.get_width() for p in slices) == widest  # the slices of one map, as wide as one head's map
    plt.close("all")
