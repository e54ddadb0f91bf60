"""The compression chapter's own code, run outside the book: the paper's chain (section 1) keeps its identities exact
and its two assumptions measurable, the CAN layer written there cell by cell (section 3) and its cached step compute
what canlib's CANDecoderLayer and its step compute, and the exercise's checker rejects wrong answers. The
trained-decoder measurements (conversion.layer_approximations) keep the exact stages exact and count every position
and head."""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest
import torch
from conftest import small_config

from canlib.model import conversion as V
from canlib.model.attention import SourceMemory, causal_mask
from canlib.model.layers import CANDecoderLayer, row_caches
from canlib.model.seq2seq import Seq2Seq

PAGE = Path(__file__).resolve().parents[2] / "book" / "compress.md"


def page_cells(until: str) -> list[str]:
    """The code cells of the chapter up to the heading ``until``, IPython magics removed."""
    cells = []
    for cell in jupytext.read(PAGE).cells:
        if cell.cell_type == "markdown" and re.search(rf"^## {re.escape(until)}", cell.source, re.M):
            break
        if cell.cell_type == "code":
            cells.append("\n".join(line for line in cell.source.splitlines() if not line.startswith("%")))
    return cells


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> dict:
    """The namespace the chapter's sections 1-3 leave behind (their figures drawn off-screen)."""
    import matplotlib

    matplotlib.use("Agg")
    namespace: dict = {"__name__": "compress_page"}
    for source in page_cells("4. "):
        exec(compile(source, str(PAGE), "exec"), namespace)
    return namespace


def random_can(d: int = 16, heads: int = 4) -> CANDecoderLayer:
    cfg = small_config("can", vocab_size=20, d_model=d, heads=heads, ffn_dim=4 * d)  # the page's layer: FFN = 4d
    layer = CANDecoderLayer(cfg).double().eval()
    with torch.no_grad():
        for p in layer.parameters():  # LayerNorm gains and every bias away from their defaults
            p.normal_(0.0, 0.5)
    return layer


def test_the_papers_chain_is_exact_except_at_its_two_assumptions(page):
    ledger = page["chain"]
    assumptions = [(eq, step) for eq, step, exact, _ in ledger if exact == "no"]
    assert [eq for eq, _ in assumptions] == ["Eq. 6", "Eq. 9"], assumptions
    for eq, step, exact, error in ledger:
        assert (error < 1e-12) == (exact == "yes"), (eq, step, error)
    assert {eq for eq, *_ in ledger} >= {f"Eq. {n}" for n in (6, 8, 9, 10, 11, 12, 13)}


def test_the_chains_one_softmax_splits_each_row_by_alpha(page):
    a11, alpha, t = page["A11"], page["alpha"], page["t"]
    assert torch.allclose(a11.sum(-1), torch.ones_like(alpha), atol=1e-12)
    assert torch.allclose(a11[:, :t].sum(-1), alpha, atol=1e-12)
    assert alpha.std() > 0.05  # a different share per query: one softmax is not a fixed rescaling of two


def test_the_pages_scratch_can_equals_canlibs_layer_with_padding(page):
    torch.manual_seed(3)
    layer = random_can()
    scratch = page["scratch_from"](layer)
    x, h = torch.randn(3, 5, 16, dtype=torch.float64), torch.randn(3, 7, 16, dtype=torch.float64)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 4:] = True
    pad[2, 6:] = True
    memory = SourceMemory(h, pad)
    with torch.no_grad():
        want = layer(x, memory, layer.project_source(memory), causal_mask(5), {})
        got = scratch(x, h, pad)
    assert (got - want).abs().max().item() < 1e-12
    assert sum(p.numel() for p in scratch.parameters()) == sum(p.numel() for p in layer.parameters())


def test_the_pages_scratch_can_ignores_padded_source_positions_and_the_future(page):
    torch.manual_seed(4)
    scratch = page["scratch_from"](random_can())
    x, h = torch.randn(1, 4, 16, dtype=torch.float64), torch.randn(1, 6, 16, dtype=torch.float64)
    pad = torch.tensor([[False] * 4 + [True] * 2])
    changed_h, changed_x = h.clone(), x.clone()
    changed_h[0, 4:] += 100.0  # padding: never attended
    changed_x[0, 3] += 100.0  # the last position: no earlier query may see it
    with torch.no_grad():
        y = scratch(x, h, pad)
        assert torch.equal(scratch(x, changed_h, pad), y)
        assert torch.allclose(scratch(changed_x, h, pad)[0, :3], y[0, :3], atol=1e-12, rtol=0)
        assert not torch.allclose(scratch(changed_x, h, pad)[0, 3], y[0, 3])


def test_the_pages_cached_step_equals_canlibs_step_and_the_whole_prefix(page):
    torch.manual_seed(5)
    layer = random_can()
    scratch = page["scratch_from"](layer)
    steps = 6
    x, h = torch.randn(2, steps, 16, dtype=torch.float64), torch.randn(2, 5, 16, dtype=torch.float64)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    memory = SourceMemory(h, pad)
    with torch.no_grad():
        cache = page["start"](scratch, h, pad)
        ours = torch.cat([page["step"](scratch, x[:, i : i + 1], cache) for i in range(steps)], dim=1)
        projected = layer.project_source(memory)
        _, (state,), _ = row_caches([layer], memory, [projected], max_len=steps)
        canlib = torch.cat([layer.step(x[:, i : i + 1], memory, projected, state, i, {}) for i in range(steps)], 1)
        whole = layer(x, memory, projected, causal_mask(steps), {})
    assert (ours - canlib).abs().max().item() < 1e-12
    assert (ours - whole).abs().max().item() < 1e-12
    assert cache["k"].size(2) == 5 + steps  # the source once, then one key per step


def test_the_exercises_checker_accepts_the_solution_and_rejects_wrong_masks(page, capsys):
    check, solution = page["check_joint_mask"], page["joint_mask"]
    assert check(solution)

    def no_future(t, pad):  # padding only: a query sees the future
        return torch.cat([torch.zeros(pad.size(0), t, t, dtype=torch.bool), pad[:, None].expand(-1, t, -1)], -1)

    def source_first(t, pad):  # the blocks in the other order
        mask = solution(t, pad)
        return torch.cat([mask[..., t:], mask[..., :t]], -1)

    def diagonal_blocked(t, pad):  # a query may not see itself
        mask = solution(t, pad).clone()
        mask[..., :t] |= torch.eye(t, dtype=torch.bool)
        return mask

    def unwritten(t, pad):
        return None

    for wrong in (no_future, source_first, diagonal_blocked, unwritten):
        assert not check(wrong), wrong.__name__
    assert "write it" in capsys.readouterr().out


def test_layer_approximations_keep_exact_stages_exact_and_count_every_position_and_head():
    torch.manual_seed(5)
    cfg = small_config(vocab_size=30)
    model = Seq2Seq(cfg).eval()
    pairs = [([5, 6, 7, 8], [9, 10, 11]), ([12, 13], [14, 15, 16, 17, 18])]
    layers = V.layer_approximations(model, pairs, bins=10)
    assert len(layers) == 2
    positions = sum(len(t) + 1 for _, t in pairs)  # BOS + target, one sentence at a time
    for layer in layers:
        assert sum(layer["alpha_histogram"]) == positions * cfg.heads
        for row in layer["steps"]:
            assert (row["max_abs_vs_prev"] < 1e-10) == row["exact"], row["step"]
        assert 0.0 < layer["entropy"] <= 1.0 and 0.0 < layer["alpha_mean"] < 1.0


@pytest.mark.parametrize("heads", [1, 4])
def test_the_layer_chapters_eq8_equals_self_plus_cross_under_identical_inputs(heads):
    """``_code.compress.joint_self_cross`` (the layer chapter's Eq. 8): one product of two softmaxes with values that
    absorb each attention's output map gives Self(X) + Cross(X, H), LayerNorms and biases away from their defaults."""
    from _code.compress import joint_self_cross
    from canlib.model import compress as C
    from canlib.model.layers import StandardDecoderLayer

    layer = StandardDecoderLayer(small_config(heads=heads, max_len=32)).double().eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(torch.randn_like(p), alpha=0.3)
    w = C.standard_weights(layer)
    x, h = (
        torch.randn(2, 5, w.q1.W.size(0), dtype=torch.float64),
        torch.randn(2, 7, w.q1.W.size(0), dtype=torch.float64),
    )
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, 4:] = True
    want = C.self_attention(w, x) + C.cross_attention(w, x, h, pad)
    assert (joint_self_cross(w, x, h, pad) - want).abs().max().item() < 1e-10
