"""The shapes and random inputs of one decoder layer checked against its equations written out in plain torch
(test_can_reference.py, test_can_variants.py, test_merged_ffn.py): the same d, heads and 4d-wide values, and the
same target inputs, encoder output and source padding."""

from __future__ import annotations

import torch

D, HEADS, FFN = 16, 4, 64  # 4d-wide values, as the paper's W~v


def inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Target inputs (3, 5, d), an encoder output (3, 6, d) and a padding mask with different source lengths."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 5, D, generator=g, dtype=torch.float64)
    h = torch.randn(3, 6, D, generator=g, dtype=torch.float64)
    src_pad = torch.arange(6)[None, :] >= torch.tensor([6, 3, 1])[:, None]
    return x, h, src_pad
