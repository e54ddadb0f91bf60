"""The layer diagram draws what the chapters say: three pre-norm sub-layers against CAN's one."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from canlib.studies.figures import count_blocks, decoder_layers_figure, draw_can_layer, draw_standard_layer


@pytest.fixture(autouse=True)
def _headless_backend():
    """Agg for these tests only; the backend the session had is restored after each."""
    import matplotlib

    original = matplotlib.get_backend()
    plt.switch_backend("Agg")
    yield
    plt.switch_backend(original)


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
