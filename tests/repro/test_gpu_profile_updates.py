"""scripts/gpu_profile.py's training cases replay one batch, so they never run out of batches.

On an H100 at e19dd56 the d=512 cases died with StopIteration: an epoch of the synthetic split at
32,768 tokens holds six batches and a case takes seven updates (three warm-up, three timed, one
profiled). Here an epoch holds two batches and the case still takes seven updates.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import gpu_profile  # noqa: E402
from gpu_smoke_train import synthetic_split  # noqa: E402


def test_training_case_takes_more_updates_than_an_epoch_holds_and_counts_its_batch_target_tokens(tmp_path):
    pairs, tokens, max_len = 80, 512, 16  # three batches an epoch, the fullest not first
    split = synthetic_split(pairs, 100, max_len)
    sizes = np.maximum(split.src_lens, split.tgt_lens) + 1  # padded length of a pair: the longer side + EOS/BOS
    assert sizes.sum() < 4 * tokens  # so an epoch holds a few batches, fewer than the 7 updates below
    row = gpu_profile.train_case(
        "train_can", "tiny-can", 100, tokens, max_len, torch.device("cpu"), tmp_path, warmup=3, repeats=3, pairs=pairs
    )
    assert "error" not in row and row["wall_ms"] > 0 and (tmp_path / "train_can.txt").is_file()
    # the replayed batch's target tokens (ids + EOS), counted here from the pairs it holds
    trainer, group, target = gpu_profile.profile_trainer(
        "tiny-can", 100, tokens, max_len, torch.device("cpu"), str(tmp_path / "run"), pairs
    )
    rows = [i for batch in group for i in batch]
    assert target == int((split.tgt_lens[rows] + 1).sum()) == row["target_tokens"]
    assert len(rows) * int(sizes[rows].max()) <= tokens  # one batch within the padded-token budget
    assert target == max(int((split.tgt_lens[b] + 1).sum()) for b in trainer.sampler._epoch_batches())


def test_the_throughput_cases_draw_more_updates_than_an_epoch_holds(tmp_path):
    import gpu_throughput

    trainer, _, _ = gpu_profile.profile_trainer("tiny-can", 100, 512, 16, torch.device("cpu"), str(tmp_path), 80)
    trainer.epoch = 1  # profile_trainer drew epoch 0
    per_epoch = len(list(trainer._groups()))
    trainer.epoch = 2
    groups = gpu_throughput.updates_ahead(trainer, 2 * per_epoch + 1)
    assert 1 <= per_epoch < 4 and len(groups) == 2 * per_epoch + 1
    assert trainer.epoch == 4  # epochs 2 and 3 whole, one update of epoch 4
