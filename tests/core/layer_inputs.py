"""The shapes and random inputs of one decoder layer checked against its equations written out in plain torch
(test_can_reference.py, test_can_variants.py, test_merged_ffn.py): the same d, heads and 4d-wide values, and the
same target inputs, encoder output and source padding. The layer's own widths, not the small model's (d=32, FFN 64):
CAN's values are 4d wide, as the paper's W~v, and the references split them head by head."""

from __future__ import annotations

from typing import Any

import torch
from conftest import small_config

from canlib.model.config import ModelConfig

D, HEADS, FFN = 16, 4, 64  # 4d-wide values, as the paper's W~v


def layer_config(kind: str, **changes: Any) -> ModelConfig:
    """One decoder layer of ``kind`` at these widths, no dropout; ``changes`` any other field."""
    widths = dict(vocab_size=20, d_model=D, heads=HEADS, ffn_dim=FFN, dec_layers=1, max_len=32)
    return small_config(kind, **{**widths, **changes})


def inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Target inputs (3, 5, d), an encoder output (3, 6, d) and a padding mask with different source lengths."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 5, D, generator=g, dtype=torch.float64)
    h = torch.randn(3, 6, D, generator=g, dtype=torch.float64)
    src_pad = torch.arange(6)[None, :] >= torch.tensor([6, 3, 1])[:, None]
    return x, h, src_pad
