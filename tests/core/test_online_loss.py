"""The online (vocabulary-tiled) label-smoothed loss equals the plain formula, written here in float64, within
stated tolerances, gradients included, and never holds more than one (chunk x block) tile of logits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from large_tensors import LargeTensors

from canlib.training import label_smoothed_nll_loss, online_label_smoothed_loss

EPS, PAD = 0.1, 0


def inputs(dtype: torch.dtype, rows: int = 300, d: int = 32, vocab: int = 1000, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(rows, d, generator=gen, dtype=dtype)
    weight = torch.randn(vocab, d, generator=gen, dtype=dtype) * 0.3
    target = torch.randint(1, vocab, (rows,), generator=gen)
    target[::7] = PAD
    target[1] = vocab - 1  # the last column, which only the last (short) block holds
    return hidden, weight, target


def reference(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> list[torch.Tensor]:
    """(loss, nll, d loss/d hidden, d loss/d weight) in float64 from the definitions, by hand:
    loss_t = (1 - eps) (-log p_t) + eps/V sum_v (-log p_v) and its gradient softmax - q, q the smoothed target."""
    h, w = hidden.double(), weight.double()
    z = h @ w.T
    vocab = z.size(1)
    logp = z - torch.logsumexp(z, dim=1, keepdim=True)
    keep = (target != PAD).double()
    rows = torch.arange(len(target))
    nll = -logp[rows, target]
    loss = (1 - EPS) * nll + EPS / vocab * (-logp).sum(1)
    q = torch.full_like(z, EPS / vocab)
    q[rows, target] += 1 - EPS
    dz = (logp.exp() - q) * keep[:, None]
    return [(loss * keep).sum(), (nll * keep).sum(), dz @ w, dz.T @ h]


def online(hidden, weight, target, chunk: int = 64, block: int = 300) -> list[torch.Tensor]:
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    loss, nll = online_label_smoothed_loss(h, w, target, EPS, PAD, chunk=chunk, block=block)
    loss.backward()
    return [t.detach().double() for t in (loss, nll, h.grad, w.grad)]


def plain(hidden, weight, target) -> list[torch.Tensor]:
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    loss, nll = label_smoothed_nll_loss(F.log_softmax(F.linear(h, w).float(), -1), target, EPS, PAD)
    loss.backward()
    return [t.detach().double() for t in (loss, nll, h.grad, w.grad)]


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got - want).abs().max() / want.abs().max()).item()


NAMES = ("loss", "nll", "d hidden", "d weight")


@pytest.mark.parametrize("chunk,block", [(64, 300), (300, 1000), (16, 7), (512, 4096)])
def test_online_loss_and_gradients_equal_the_formula_in_float64(chunk, block):
    # 64 and 300 divide neither 300 rows nor 1000 columns; (16, 7): small uneven tiles; (512, 4096): one tile
    data = inputs(torch.float64)
    for name, got, want in zip(NAMES, online(*data, chunk=chunk, block=block), reference(*data)):
        assert relative_error(got, want) < 1e-12, name


def test_online_loss_in_float32_is_within_a_few_float32_epsilons_of_the_formula_as_the_plain_loss_is():
    """Stated tolerance: each of loss, nll and both gradients within 2x the plain float32 loss's own error
    (at least float32's epsilon, 1.2e-7) of the float64 formula; seen: loss 0, nll 1e-7, d hidden 2e-6."""
    data = inputs(torch.float32)
    exact = reference(*data)
    eps = torch.finfo(torch.float32).eps
    for name, got, base, want in zip(NAMES, online(*data), plain(*data), exact):
        assert relative_error(got, want) <= 2 * max(relative_error(base, want), eps), name


def test_online_loss_under_bfloat16_autocast_is_as_accurate_as_the_plain_loss():
    """Half-precision products, float32 softmax: within 2x the plain path's error under the same autocast
    (the products dominate both), and within 1 % of the float64 formula for the loss."""
    data = inputs(torch.float32, rows=200, vocab=600)
    exact = reference(*data)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, base = online(*data, chunk=48, block=128), plain(*data)
    for name, g, b, want in zip(NAMES, got, base, exact):
        assert relative_error(g, want) <= 2 * relative_error(b, want) + 1e-6, name
    assert relative_error(got[0], exact[0]) < 1e-2


def test_online_loss_without_grad_gives_the_same_numbers():
    hidden, weight, target = inputs(torch.float32)
    with torch.no_grad():
        loss, nll = online_label_smoothed_loss(hidden, weight, target, EPS, PAD, chunk=64, block=300)
    hidden.requires_grad_()
    loss_g, nll_g = online_label_smoothed_loss(hidden, weight, target, EPS, PAD, chunk=64, block=300)
    assert torch.equal(loss, loss_g.detach()) and torch.equal(nll, nll_g) and not nll_g.requires_grad


def test_online_loss_never_holds_more_than_one_chunk_by_block_tile():
    rows, vocab, chunk, block = 300, 1000, 50, 128
    hidden, weight, target = inputs(torch.float32, rows=rows, vocab=vocab)
    hidden.requires_grad_(), weight.requires_grad_()
    with LargeTensors(chunk * block) as probe:
        loss, _ = online_label_smoothed_loss(hidden, weight, target, EPS, PAD, chunk=chunk, block=block)
        loss.backward()
    assert probe.largest == vocab * hidden.size(1)  # the weight's own gradient; no (rows x V) logits
    assert probe.largest < chunk * vocab  # not even one chunk's full row of logits


def test_online_loss_refuses_empty_tiles_and_mismatched_targets():
    hidden, weight, target = inputs(torch.float32)
    with pytest.raises(ValueError, match="block=0"):
        online_label_smoothed_loss(hidden, weight, target, EPS, PAD, block=0)
    with pytest.raises(ValueError, match="300 hidden rows but 299 targets"):
        online_label_smoothed_loss(hidden, weight, target[1:], EPS, PAD)


def test_the_compiled_online_loss_is_within_the_float32_tolerance_of_the_formula(monkeypatch):
    """torch.compile (Inductor, C++ on a CPU) of the per-tile arithmetic: within 2x the plain float32 loss's
    error of the float64 formula, as the eager one (seen: loss 7e-8, d hidden 7e-7)."""
    from canlib.training import objective

    monkeypatch.setattr(objective, "_COMPILED", {})  # compile here, whatever another test compiled before
    data = inputs(torch.float32)
    exact = reference(*data)
    h, w = data[0].clone().requires_grad_(), data[1].clone().requires_grad_()
    loss, nll = online_label_smoothed_loss(h, w, data[2], EPS, PAD, chunk=64, block=300, compiled=True)
    loss.backward()
    assert set(objective._COMPILED) == {"stats", "grads"}
    eps = torch.finfo(torch.float32).eps
    got = [t.detach().double() for t in (loss, nll, h.grad, w.grad)]
    for name, g, base, want in zip(NAMES, got, plain(*data), exact):
        assert relative_error(g, want) <= 2 * max(relative_error(base, want), eps), name
