"""The throughput options of TrainConfig (issue 32): shape buckets, the attention backend, deterministic
kernels, the vocabulary-tiled loss. Off, nothing changes; on, each gives the losses of the plain run within
a stated tolerance, a run interrupted and resumed equals a straight one bit for bit, and the kernel settings
hold inside an update and are restored after it."""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pytest
import torch
from conftest import small_config

from canlib.data.batching import PairList, TokenBatchSampler, collate, example_sizes, sorted_batches
from canlib.model.config import ModelConfig
from canlib.training import TrainConfig, Trainer
from canlib.training.cli import add_arguments, train_config

OPTIONS = {
    "pad_multiple": dict(pad_multiple=8),
    "sdpa_backend": dict(sdpa_backend="math"),
    "deterministic": dict(deterministic=True),
    "loss_vocab_block": dict(loss_vocab_block=16),
    "all": dict(pad_multiple=8, sdpa_backend="math", deterministic=True, loss_vocab_block=16),
}


def tiny(dropout: float = 0.1) -> ModelConfig:
    return small_config(vocab_size=60, dropout=dropout)


def random_split(pairs: int, seed: int = 0) -> PairList:
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, 14, (pairs, 2))
    return PairList([rng.integers(4, 60, n) for n in lens[:, 0]], [rng.integers(4, 60, n) for n in lens[:, 1]])


def config(**kw) -> TrainConfig:
    base = dict(
        lr=5e-3,
        warmup=4,
        max_tokens=96,
        update_freq=2,
        valid_every=3,
        max_steps=8,
        log_every=1,
        keep_last=2,
        average_last=2,
        progress=False,
    )
    return TrainConfig(**{**base, **kw})


def trainer(run, resume: bool = False, dropout: float = 0.1, **kw) -> Trainer:
    return Trainer(tiny(dropout), config(**kw), random_split(60), random_split(12, seed=1), run, resume=resume)


def train_losses(run) -> list[float]:
    import json

    return [
        json.loads(line)["train_loss"]
        for line in (run / "log.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "train"
    ]


# -- shape buckets in the batching ---------------------------------------------------------------------------
def test_bucketed_batches_round_every_length_up_and_keep_the_budget_and_each_example_once():
    split = random_split(300)
    sampler = TokenBatchSampler(split.src_lens, split.tgt_lens, 96, seed=3, pad_multiple=8)
    sizes = example_sizes(split.src_lens, split.tgt_lens, 8)
    assert set(np.unique(sizes)) <= {8, 16}
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert sorted(i for b in batches for i in b) == list(range(300))
        for batch in batches:
            tensors = collate(split, batch, pad_id=0, bos_id=2, eos_id=3, pad_multiple=8)
            for key in ("src", "tgt_in", "tgt_out"):
                assert tensors[key].size(1) % 8 == 0 and tensors[key].numel() <= 96, key
            # the rounding only adds padding: the same ids as an unbucketed batch, then zeros
            plain = collate(split, batch, pad_id=0, bos_id=2, eos_id=3)
            for key in ("src", "tgt_in", "tgt_out"):
                width = plain[key].size(1)
                assert torch.equal(tensors[key][:, :width], plain[key]) and not tensors[key][:, width:].any(), key


def test_off_the_sampler_cuts_todays_batches_and_its_state_has_no_new_key():
    split = random_split(300)
    a, b = (TokenBatchSampler(split.src_lens, split.tgt_lens, 96, seed=3, pad_multiple=m) for m in (1, 1))
    assert list(a) == list(b) and "pad_multiple" not in a.state_dict()
    # today's rule, written out: sort by (source, target) length with seeded ties, cut greedily, shuffle
    rng = np.random.default_rng([3, 0])
    ties = rng.permutation(300)
    order = ties[np.lexsort((split.tgt_lens[ties], split.src_lens[ties]))]
    sizes = np.maximum(split.src_lens, split.tgt_lens) + 1
    cuts, start = [], 0
    for pos in range(1, 301):
        if pos == 300 or sizes[order[start : pos + 1]].max() * (pos + 1 - start) > 96:
            cuts.append(order[start:pos].tolist())
            start = pos
    expected = [cuts[i] for i in rng.permutation(len(cuts))]
    a.set_epoch(0)
    assert list(a) == expected


def test_a_sampler_state_resumes_only_with_the_same_buckets():
    split = random_split(100)
    state = TokenBatchSampler(split.src_lens, split.tgt_lens, 96, pad_multiple=8).state_dict()
    with pytest.raises(ValueError, match="pad_multiple=8, this sampler has pad_multiple=1"):
        TokenBatchSampler(split.src_lens, split.tgt_lens, 96).load_state_dict(state)
    with pytest.raises(ValueError, match="pad_multiple=0: must be >= 1"):
        TokenBatchSampler(split.src_lens, split.tgt_lens, 96, pad_multiple=0)


def test_buckets_leave_a_handful_of_batch_shapes_on_real_multi30k(shared_data, tmp_path, monkeypatch):
    """An epoch of Multi30k En-De (small, 28,196 pairs) at 8,192 tokens: one shape per batch or nearly
    (62 distinct (rows, source, target) of 64 batches), and about ten with lengths in multiples of 8."""
    from canlib.data import load_prepared, prepare

    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))  # the shared folder, not a download
    train = load_prepared(prepare("multi30k-en-de", "small", out_dir=tmp_path / "prepared", progress=False)).split(
        "train"
    )
    shapes = {}
    for multiple in (1, 8):
        sampler = TokenBatchSampler(train.src_lens, train.tgt_lens, 8192, seed=1, pad_multiple=multiple)
        shapes[multiple] = {
            tuple(collate(train, b, 0, 2, 3, multiple)["tgt_out"].shape)
            + (collate(train, b, 0, 2, 3, multiple)["src"].size(1),)
            for b in sampler
        }
    assert len(shapes[1]) >= 50 and len(shapes[8]) <= 12, {k: len(v) for k, v in shapes.items()}


def test_the_same_batch_bucketed_or_not_gives_the_same_loss_and_gradients():
    """Extra padding columns change no number beyond float32 rounding: loss within 1e-6 relative, each gradient
    within 1e-5 of its largest element (seen: at most 1.1e-6, float32 sums over other lengths)."""
    from canlib.model import Seq2Seq
    from canlib.training.objective import LabelSmoothedObjective

    split, cfg = random_split(40), tiny(dropout=0.0)
    torch.manual_seed(0)
    model = Seq2Seq(cfg)
    out = []
    for multiple in (1, 8):
        model.zero_grad()
        batch = collate(split, list(range(12)), cfg.pad_id, cfg.bos_id, cfg.eos_id, multiple)
        loss, nll = LabelSmoothedObjective(model, 0.1, cfg.pad_id, 4096)(
            batch["src"], batch["tgt_in"], batch["tgt_out"]
        )
        loss.backward()
        out.append((loss.item(), nll.item(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (l1, n1, g1), (l8, n8, g8) = out
    assert abs(l1 - l8) / l1 < 1e-6 and abs(n1 - n8) / n1 < 1e-6
    for name in g1:
        assert (g1[name] - g8[name]).abs().max() <= 1e-5 * g1[name].abs().max(), name


def test_validation_batches_take_the_same_buckets():
    split = random_split(50)
    for batch in sorted_batches(split, 96, pad_multiple=8):
        assert example_sizes(split.src_lens[batch], split.tgt_lens[batch], 8).max() * len(batch) <= 96


# -- the trainer with each option ----------------------------------------------------------------------------
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_with_each_option_a_resumed_run_equals_a_straight_one_and_a_second_straight_one(option, tmp_path):
    straight = trainer(tmp_path / "a", **OPTIONS[option])
    straight.fit()
    again = trainer(tmp_path / "b", **OPTIONS[option])
    again.fit()
    trainer(tmp_path / "c", max_steps=4, **OPTIONS[option]).fit()  # stops after update 4, mid-epoch
    resumed = trainer(tmp_path / "c", resume=True, **OPTIONS[option])
    assert resumed.step == 4 and resumed.sampler.pad_multiple == OPTIONS[option].get("pad_multiple", 1)
    resumed.fit()
    for other in (again, resumed):
        for name, value in straight.model.state_dict().items():
            assert torch.equal(value, other.model.state_dict()[name]), (option, name)
    assert train_losses(tmp_path / "a") == train_losses(tmp_path / "c")


@pytest.mark.parametrize("option", ["sdpa_backend", "deterministic", "loss_vocab_block"])
def test_with_each_kernel_option_the_losses_are_the_plain_runs_within_1e_5(option, tmp_path):
    """Same batches, other kernels: eight updates (dropout on) lose no more than float32 rounding."""
    plain = trainer(tmp_path / "plain")
    plain.fit()
    other = trainer(tmp_path / option, **OPTIONS[option])
    other.fit()
    a, b = train_losses(tmp_path / "plain"), train_losses(tmp_path / option)
    assert len(a) == len(b) == 8
    assert max(abs(x - y) / x for x, y in zip(a, b)) < 1e-5, (a, b)


def test_the_kernel_settings_hold_inside_updates_and_validation_and_are_restored_after(tmp_path):
    seen = []

    def probe(module, args):
        seen.append(
            (
                module.training,
                torch.are_deterministic_algorithms_enabled(),
                torch.backends.cuda.math_sdp_enabled(),
                torch.backends.cuda.flash_sdp_enabled(),
            )
        )

    run = trainer(tmp_path, sdpa_backend="math", deterministic=True, max_steps=3)
    run.model.encoder_layers[0].register_forward_pre_hook(probe)
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cuda.flash_sdp_enabled())
    run.fit()
    assert {s[0] for s in seen} == {True, False}  # updates (train mode) and validation (eval mode) seen
    assert set(seen) == {(True, True, True, False), (False, True, True, False)}
    assert (
        (torch.are_deterministic_algorithms_enabled(), torch.backends.cuda.flash_sdp_enabled())
        == before
        == (False, True)
    )


def test_with_buckets_every_batch_the_model_sees_has_lengths_in_multiples_of_8(tmp_path):
    lengths = []
    run = trainer(tmp_path, pad_multiple=8, max_steps=4)
    run.model.encoder_layers[0].register_forward_pre_hook(lambda module, args: lengths.append(args[0].size(1)))
    run.model.decoder_layers[0].register_forward_pre_hook(lambda module, args: lengths.append(args[0].size(1)))
    run.fit()
    assert len(lengths) >= 16 and all(n % 8 == 0 for n in lengths), lengths


@pytest.mark.parametrize("block", [0, 16])
def test_with_vocabulary_tiles_no_update_holds_a_row_of_all_logits(block, tmp_path):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Shapes(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.widths: set[int] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and t.dim() == 2 and t.size(0) > 60:
                    self.widths.add(t.size(1))  # (target tokens, columns) tensors
            return out

    run = trainer(tmp_path, dropout=0.0, loss_vocab_block=block, max_steps=1)
    group = next(run._groups())
    with Shapes() as probe:
        run._update(group)
    assert (60 in probe.widths) == (block == 0) and (16 in probe.widths) == (block == 16), probe.widths


def test_an_unavailable_backend_is_refused_by_pytorch_inside_the_update(tmp_path):
    # on a CPU only math and flash exist: asking for cuDNN's kernels proves the choice reaches the attention
    if torch.cuda.is_available():
        pytest.skip("CPU-only check")
    with pytest.raises(RuntimeError, match="No viable backend|No available kernel"):
        trainer(tmp_path, sdpa_backend="cudnn", max_steps=1).fit()


def test_resuming_with_other_kernel_settings_warns(tmp_path):
    trainer(tmp_path, max_steps=2).fit()
    with pytest.warns(UserWarning, match=r"other kernel settings .*'sdpa_backend': \('default', 'math'\)"):
        trainer(tmp_path, resume=True, sdpa_backend="math")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer(tmp_path, resume=True)


def test_bad_option_values_are_refused_by_name():
    with pytest.raises(ValueError, match="sdpa_backend='fast': choose default, math"):
        TrainConfig(sdpa_backend="fast")
    with pytest.raises(ValueError, match="pad_multiple=0: must be >= 1"):
        TrainConfig(pad_multiple=0)
    with pytest.raises(ValueError, match="loss_vocab_block=512 needs loss_chunk > 0"):
        TrainConfig(loss_chunk=0, loss_vocab_block=512)


def test_cli_flags_reach_the_options_and_default_to_off():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    base = ["--preset", "tiny-can", "--data", "d", "--out", "o"]
    off = train_config(parser.parse_args(base))
    assert (off.pad_multiple, off.sdpa_backend, off.deterministic, off.loss_vocab_block) == (1, "default", False, 0)
    on = train_config(
        parser.parse_args(
            base
            + ["--pad-multiple", "16", "--sdpa-backend", "efficient", "--deterministic", "--loss-vocab-block", "2048"]
        )
    )
    assert (on.pad_multiple, on.sdpa_backend, on.deterministic, on.loss_vocab_block) == (16, "efficient", True, 2048)


# -- torch.compile ----------------------------------------------------------------------------------------------
def test_compiled_training_gives_the_eager_losses_and_resumes_bit_for_bit(tmp_path, monkeypatch):
    """The compiled path (the model's forward and the tiled loss's arithmetic, traced by dynamo and AOTAutograd;
    the aot_eager backend stands in for Inductor's code generation, which takes minutes on a CPU): without
    dropout its losses are the eager run's within 1e-6, and interrupted at update 2 and resumed it equals a
    straight compiled run bit for bit."""
    from canlib.training import objective

    real = torch.compile
    compiled = []

    def traced(fn=None, **kw):
        compiled.append(fn)
        return real(fn, **{**kw, "backend": "aot_eager"})

    monkeypatch.setattr(torch, "compile", traced)
    monkeypatch.setattr(objective, "_COMPILED", {})
    options = dict(dropout=0.0, compile=True, pad_multiple=8, loss_vocab_block=16, max_steps=4, valid_every=2)
    straight = trainer(tmp_path / "straight", **options)
    straight.fit()
    trainer(tmp_path / "cut", **{**options, "max_steps": 2}).fit()
    resumed = trainer(tmp_path / "cut", resume=True, **options)
    resumed.fit()
    eager = trainer(tmp_path / "eager", **{**options, "compile": False})
    eager.fit()
    assert len(compiled) >= 3  # the model's forward (each trainer) and the loss's two per-tile functions
    for name, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name
    a, b = train_losses(tmp_path / "straight"), train_losses(tmp_path / "eager")
    assert len(a) == 4 and max(abs(x - y) / x for x, y in zip(a, b)) < 1e-6, (a, b)
