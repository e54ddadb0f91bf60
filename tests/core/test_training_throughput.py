"""Training throughput on CPU terms: the chunked loss equals the plain one without its (tokens x V)
tensor, the step loop never reads a tensor on the host between log points, --compile is wired,
and the GPU smoke script knows each device's peak."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import small_config
from large_tensors import LargeTensors

from canlib.data.batching import PairList
from canlib.model import Seq2Seq
from canlib.model.config import ModelConfig
from canlib.training import TrainConfig, Trainer, chunked_label_smoothed_loss, label_smoothed_nll_loss
from canlib.training.objective import LabelSmoothedObjective

REPO = Path(__file__).resolve().parents[2]
CANLIB = str(REPO / "canlib")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def tiny(vocab_size: int = 60, **kw) -> ModelConfig:
    return small_config(vocab_size=vocab_size, **kw)


def random_split(pairs: int, vocab_size: int, seed: int = 0) -> PairList:
    rng = np.random.default_rng(seed)
    lens = rng.integers(3, 12, (pairs, 2))
    return PairList(
        [rng.integers(4, vocab_size, n) for n in lens[:, 0]], [rng.integers(4, vocab_size, n) for n in lens[:, 1]]
    )


def loss_inputs(dtype: torch.dtype, rows: int = 300, d: int = 32, vocab: int = 1000):
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(rows, d, generator=gen, dtype=dtype)
    weight = torch.randn(vocab, d, generator=gen, dtype=dtype) * 0.3
    target = torch.randint(1, vocab, (rows,), generator=gen)
    target[::7] = 0  # padding
    return hidden, weight, target


def plain_and_chunked(dtype: torch.dtype, chunk: int):
    """(loss, nll, d hidden, d weight) of the plain loss and of the chunked one, backward of 0.37 * loss."""
    out = []
    for chunked in (False, True):
        hidden, weight, target = (t.clone() for t in loss_inputs(dtype))
        hidden.requires_grad_(), weight.requires_grad_()
        if chunked:
            loss, nll = chunked_label_smoothed_loss(hidden, weight, target, 0.1, 0, chunk=chunk)
        else:
            loss, nll = label_smoothed_nll_loss(F.log_softmax(F.linear(hidden, weight), -1), target, 0.1, 0)
        (0.37 * loss).backward()
        out.append((loss.detach(), nll.detach(), hidden.grad, weight.grad))
    return out


# -- the chunked loss ----------------------------------------------------------------------------------
def test_chunked_loss_and_gradients_equal_the_plain_loss_in_float64():
    (l1, n1, gh1, gw1), (l2, n2, gh2, gw2) = plain_and_chunked(torch.float64, chunk=64)
    assert torch.allclose(l1, l2, rtol=1e-12) and torch.allclose(n1, n2, rtol=1e-12)
    assert torch.allclose(gh1, gh2, rtol=1e-10, atol=1e-12) and torch.allclose(gw1, gw2, rtol=1e-10, atol=1e-12)


def loss_and_grads(inputs, chunk: int) -> list[torch.Tensor]:
    """(loss, nll, d hidden, d weight) in float64 of the plain (chunk=0) or chunked loss of ``inputs``."""
    hidden, weight, target = inputs
    hidden, weight = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    if chunk:
        loss, nll = chunked_label_smoothed_loss(hidden, weight, target, 0.1, 0, chunk=chunk)
    else:
        loss, nll = label_smoothed_nll_loss(F.log_softmax(F.linear(hidden, weight), -1), target, 0.1, 0)
    (0.37 * loss).backward()
    return [t.detach().double() for t in (loss, nll, hidden.grad, weight.grad)]


def test_chunked_loss_in_float32_is_as_accurate_as_the_plain_loss_gradients_too():
    """Against the float64 loss of the same (float32) inputs, the chunked float32 loss and its
    gradients are no further off than twice the plain float32 loss's own rounding error (at least
    float32's machine epsilon): summing in chunks costs no accuracy."""
    inputs = loss_inputs(torch.float32)
    exact = loss_and_grads([t.double() if t.is_floating_point() else t for t in inputs], chunk=0)
    plain, chunked = loss_and_grads(inputs, chunk=0), loss_and_grads(inputs, chunk=64)  # 64 does not divide 300
    eps = torch.finfo(torch.float32).eps
    for name, ref, p, c in zip(("loss", "nll", "d hidden", "d weight"), exact, plain, chunked):
        plain_error = ((p - ref).abs().max() / ref.abs().max()).item()
        chunked_error = ((c - ref).abs().max() / ref.abs().max()).item()
        assert chunked_error <= 2 * max(plain_error, eps), f"{name}: {chunked_error:.2e} vs plain {plain_error:.2e}"


def test_chunked_loss_without_grad_gives_the_same_numbers():
    hidden, weight, target = loss_inputs(torch.float32)
    with torch.no_grad():
        loss, nll = chunked_label_smoothed_loss(hidden, weight, target, 0.1, 0, chunk=64)
    hidden.requires_grad_()
    loss_g, nll_g = chunked_label_smoothed_loss(hidden, weight, target, 0.1, 0, chunk=64)
    assert torch.equal(loss, loss_g.detach()) and torch.equal(nll, nll_g) and not nll_g.requires_grad


@pytest.mark.parametrize("chunk", [0, 50])
def test_the_chunked_loss_holds_one_chunk_by_vocabulary_tensor_at_a_time(chunk):
    rows, vocab = 300, 1000
    hidden, weight, target = loss_inputs(torch.float32, rows=rows, vocab=vocab)
    hidden.requires_grad_(), weight.requires_grad_()
    with LargeTensors(50 * vocab) as probe:
        if chunk:
            loss, _ = chunked_label_smoothed_loss(hidden, weight, target, 0.1, 0, chunk=chunk)
        else:  # the plain way: logits and log-probs (kept for the backward), each (tokens x V)
            loss, _ = label_smoothed_nll_loss(F.log_softmax(F.linear(hidden, weight), -1), target, 0.1, 0)
        loss.backward()
    if chunk:
        assert probe.largest == chunk * vocab and probe.peak == 1
    else:
        assert probe.largest == rows * vocab and probe.peak >= 2


def test_objective_module_gives_the_models_loss_and_gradients_chunked_tiled_or_not():
    cfg = tiny()
    src, tgt = torch.randint(4, 60, (3, 7)), torch.randint(4, 60, (3, 6))
    tgt[0, 4:] = cfg.pad_id
    results = []
    for chunk, vocab_block in ((0, 0), (5, 0), (5, 16)):  # full log-softmax, token chunks, vocabulary tiles
        torch.manual_seed(0)
        model = Seq2Seq(cfg)
        loss, nll = LabelSmoothedObjective(model, 0.1, cfg.pad_id, chunk, vocab_block=vocab_block)(src, tgt, tgt)
        loss.backward()
        results.append((loss.detach(), nll.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (l0, n0, g0), *others = results
    for l1, n1, g1 in others:
        assert abs(l0 - l1) / l0 < 1e-6 and abs(n0 - n1) / n0 < 1e-6
        for name in g0:
            assert torch.allclose(g0[name], g1[name], rtol=1e-4, atol=1e-6), name
    with pytest.raises(ValueError, match="needs a chunked loss"):
        LabelSmoothedObjective(Seq2Seq(cfg), 0.1, cfg.pad_id, 0, vocab_block=16)


# -- no host reads of tensors inside the step loop ------------------------------------------------------
SYNCS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__")


def test_the_step_loop_reads_no_tensor_on_the_host_between_log_points(tmp_path, monkeypatch):
    # Every host read of a tensor (t.item(), float(t), int(t), bool(t), t.tolist()) made by canlib code
    # is recorded; on a GPU each one waits for the device. Between log points there must be none.
    events: list[str] = []
    for name in SYNCS:
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            if sys._getframe(1).f_code.co_filename.startswith(CANLIB):
                events.append(f"sync:{_name}")
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    split = random_split(200, 60)
    cfg = TrainConfig(
        lr=1e-3, warmup=4, max_tokens=64, max_steps=12, log_every=4, keep_last=1, average_last=1, progress=False
    )
    trainer = Trainer(tiny(), cfg, split, None, tmp_path)
    assert len(trainer.sampler) > 12  # one epoch: no epoch-end point inside the run
    for method in ("_update", "_log_interval", "_checkpoint_point"):
        real = getattr(trainer, method)

        def marked(*args, _real=real, _method=method, **kwargs):
            events.append(_method)
            return _real(*args, **kwargs)

        monkeypatch.setattr(trainer, method, marked)
    trainer.fit()
    # the events from one update to the next, by the step the first update made
    windows: dict[int, list[str]] = {}
    step = 0
    for event in events:
        if event == "_update":
            step += 1
        windows.setdefault(step, []).append(event)
    quiet = [s for s in range(1, 13) if s % 4]  # steps that are no log point
    assert quiet == [1, 2, 3, 5, 6, 7, 9, 10, 11]
    for s in quiet:
        assert [e for e in windows[s] if e.startswith("sync:")] == [], (s, windows[s])
    assert any(e.startswith("sync:") for e in windows[4])  # the probe sees the log point's reads


def test_a_nan_between_log_points_is_caught_at_the_next_and_named_by_its_step(tmp_path):
    from canlib.training import NonFiniteLossError

    split = random_split(200, 60)
    cfg = TrainConfig(
        lr=1e-3, warmup=4, max_tokens=64, max_steps=12, log_every=4, keep_last=1, average_last=1, progress=False
    )
    trainer = Trainer(tiny(), cfg, split, None, tmp_path)
    real_update = trainer._update

    def poison(group):
        if trainer.step == 5:
            with torch.no_grad():
                trainer.model.embed.weight[4:].fill_(float("nan"))
        return real_update(group)

    trainer._update = poison
    with pytest.raises(NonFiniteLossError, match=r"training loss is nan at step 6 .*none \(no checkpoint"):
        trainer.fit()
    assert trainer.step == 8  # noticed at the log point after it
    assert not list(tmp_path.glob("checkpoints/step_*"))


# -- torch.compile ---------------------------------------------------------------------------------------
def test_compile_wraps_the_model_part_and_checkpoints_keep_plain_names(tmp_path, monkeypatch):
    compiled = []

    def fake_compile(module, **kwargs):
        compiled.append(module)
        return module

    monkeypatch.setattr(torch, "compile", fake_compile)
    cfg = TrainConfig(
        lr=1e-3,
        warmup=4,
        max_tokens=64,
        max_steps=2,
        log_every=1,
        keep_last=1,
        average_last=1,
        progress=False,
        compile=True,
    )
    trainer = Trainer(tiny(), cfg, random_split(40, 60), None, tmp_path)
    trainer.fit()
    assert compiled == [trainer.objective.features] and trainer.objective.model is trainer.model
    saved = torch.load(tmp_path / "checkpoints" / "step_0000002.pt", weights_only=True)["model"]
    assert set(saved) == set(Seq2Seq(tiny()).state_dict())
    assert json.loads((tmp_path / "config.json").read_text())["train"]["compile"] is True


def test_cli_flags_reach_the_train_config():
    import argparse

    from canlib.training.cli import add_arguments, train_config

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--preset", "tiny-can", "--data", "d", "--out", "o", "--compile", "--loss-chunk", "0"])
    cfg = train_config(args)
    assert cfg.compile is True and cfg.loss_chunk == 0 and cfg.precision == "fp32"
    assert train_config(parser.parse_args(["--preset", "p", "--data", "d", "--out", "o"])).compile is False
    assert train_config(parser.parse_args(["--preset", "p", "--data", "d", "--out", "o"])).optimizer == "fused"
    assert (
        train_config(parser.parse_args(["--preset", "p", "--data", "d", "--out", "o", "--optimizer", "loop"])).optimizer
        == "loop"
    )


# -- the GPU smoke script's peak table ---------------------------------------------------------------------
def test_smoke_script_takes_each_devices_own_peak_and_none_for_an_unknown_one():
    spec = importlib.util.spec_from_file_location("gpu_smoke_train", REPO / "scripts" / "gpu_smoke_train.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.device_peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert script.device_peak_flops("NVIDIA H200") == 989e12
    assert script.device_peak_flops("NVIDIA A100-SXM4-80GB") is None
