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
