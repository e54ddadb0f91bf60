"""Token-budget batching: budgets respected, each example once per epoch, seeded, resumable, rank-disjoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from canlib.data.batching import PairList, TokenBatchSampler, collate, example_sizes


def lengths(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(1, 60, n), rng.integers(1, 60, n)


def epoch_batches(sampler: TokenBatchSampler, epoch: int) -> list[list[int]]:
    sampler.set_epoch(epoch)
    return list(sampler)


def test_batches_respect_max_tokens_including_eos():
    src, tgt = lengths()
    sampler = TokenBatchSampler(src, tgt, max_tokens=200)
    sizes = example_sizes(src, tgt)
    for batch in epoch_batches(sampler, 0):
        assert len(batch) * sizes[batch].max() <= 200
    # greedy packing: batches are not trivially tiny
    assert np.mean([len(b) for b in epoch_batches(sampler, 0)]) > 3


def test_every_example_appears_exactly_once_per_epoch():
    src, tgt = lengths()
    sampler = TokenBatchSampler(src, tgt, max_tokens=256)
    for epoch in (0, 1):
        seen = sorted(i for b in epoch_batches(sampler, epoch) for i in b)
        assert seen == list(range(len(src)))


def test_same_seed_same_order_and_epochs_differ():
    src, tgt = lengths()
    a = epoch_batches(TokenBatchSampler(src, tgt, 256, seed=3), 0)
    b = epoch_batches(TokenBatchSampler(src, tgt, 256, seed=3), 0)
    assert a == b
    assert epoch_batches(TokenBatchSampler(src, tgt, 256, seed=3), 1) != a
    assert epoch_batches(TokenBatchSampler(src, tgt, 256, seed=4), 0) != a


def test_unshuffled_batches_are_length_sorted():
    src, tgt = lengths()
    batches = epoch_batches(TokenBatchSampler(src, tgt, 256, shuffle=False), 0)
    firsts = [src[b[0]] for b in batches]
    assert firsts == sorted(firsts)


def test_resume_mid_epoch_continues_identically():
    src, tgt = lengths()
    full = epoch_batches(TokenBatchSampler(src, tgt, 256, seed=7), 2)
    first = TokenBatchSampler(src, tgt, 256, seed=7)
    first.set_epoch(2)
    it = iter(first)
    head = [next(it) for _ in range(5)]
    state = first.state_dict()
    assert state["epoch"] == 2 and state["position"] == 5
    second = TokenBatchSampler(src, tgt, 256, seed=7)
    second.load_state_dict(state)
    assert head + list(second) == full


def test_resume_refuses_a_different_batching_setup():
    src, tgt = lengths()
    state = TokenBatchSampler(src, tgt, 256).state_dict()
    with pytest.raises(ValueError, match="max_tokens=256"):
        TokenBatchSampler(src, tgt, 512).load_state_dict(state)


def test_ranks_get_disjoint_equal_shares():
    src, tgt = lengths(301)
    shares = [epoch_batches(TokenBatchSampler(src, tgt, 256, seed=1, rank=r, world_size=3), 0) for r in range(3)]
    assert len({len(s) for s in shares}) == 1
    flat = [i for s in shares for b in s for i in b]
    assert len(flat) == len(set(flat))
    single = epoch_batches(TokenBatchSampler(src, tgt, 256, seed=1), 0)
    assert len(shares[0]) == len(single) // 3


def test_example_longer_than_budget_is_refused_by_index():
    src, tgt = np.array([3, 4, 90, 2]), np.array([3, 4, 5, 2])
    with pytest.raises(ValueError, match=r"example 2 needs 91 tokens .*max_tokens=64"):
        TokenBatchSampler(src, tgt, max_tokens=64)


def test_collate_adds_eos_and_bos_and_pads_right():
    split = PairList([[5, 6, 7], [8]], [[9, 10], [11, 12, 13]])
    batch = collate(split, [0, 1], pad_id=0, bos_id=2, eos_id=3)
    assert batch["src"].tolist() == [[5, 6, 7, 3], [8, 3, 0, 0]]
    assert batch["tgt_in"].tolist() == [[2, 9, 10, 0], [2, 11, 12, 13]]
    assert batch["tgt_out"].tolist() == [[9, 10, 3, 0], [11, 12, 13, 3]]
    assert batch["ntokens"] == 7 and batch["src"].dtype == torch.long


def test_pair_list_protocol_and_mismatch():
    split = PairList([[1, 2], [3]], [[4], [5, 6, 7]], src_text=["a b", "c"])
    assert len(split) == 2 and split.src_lens.tolist() == [2, 1] and split.tgt_lens.dtype == np.int64
    assert split[1][1].tolist() == [5, 6, 7] and split.tgt_text is None
    with pytest.raises(ValueError, match="2 source but 1 target"):
        PairList([[1], [2]], [[3]])
