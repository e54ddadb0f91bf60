"""A beam search step's top-k over beam x vocabulary scores, in two rounds of short top-k's (:class:`ChunkedTopK`)."""

from __future__ import annotations

import torch
from torch import Tensor


class ChunkedTopK:
    """The ``picks`` best of each row of an (m, width) score matrix, in two rounds of short top-k's.

    One top-k over a whole row (beam x V = 128,000 scores at V=32k) runs on a GPU as PyTorch's
    multi-block radix select, about 15 kernels, a fifth of a decode step's GPU time at batch 1
    (``scripts/gpu_profile.sh``). Cut the row into ``chunks`` pieces of ``chunk`` scores, take the
    ``picks`` best of every piece (one kernel over many short slices, unsorted), then the ``picks``
    best of those (one more, sorted): a score among the row's best is among its piece's best, so the
    same values come out in the same order; among equal scores the index picked may differ, as
    it may between any two top-k kernels. Rows that cannot be cut evenly into pieces of 128 to 1024
    scores use one plain top-k.
    """

    def __init__(self, width: int, picks: int, device: torch.device, longest: int = 1024, shortest: int = 128) -> None:
        self.width, self.picks = width, picks
        self.chunk = next(
            (w for w in range(longest, shortest - 1, -1) if width % w == 0 and width // w >= 2 and w >= 2 * picks), None
        )
        self.chunks = width // self.chunk if self.chunk else 1
        # where each piece starts in the row, as (1, chunks, 1) for a broadcast add
        self.starts = (torch.arange(self.chunks, device=device) * (self.chunk or 0)).view(1, -1, 1)

    def __call__(self, scores: Tensor, values: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Values (m, picks), best first, and their column indices in ``scores`` (m, width); ``values``:
        an (m, picks) tensor to write the values into (no copy)."""
        if self.chunk is None:
            top_s, top_i = scores.topk(self.picks, dim=1)
            return (values.copy_(top_s) if values is not None else top_s), top_i
        m, c, k = scores.size(0), self.chunks, self.picks
        piece_s, piece_i = scores.view(m * c, self.chunk).topk(k, dim=1, sorted=False)
        where = torch.empty(m, k, dtype=torch.long, device=scores.device)
        top_s = torch.topk(
            piece_s.view(m, c * k), k, dim=1, out=(values if values is not None else piece_s.new_empty(m, k), where)
        )[0]
        return top_s, (piece_i.view(m, c, k) + self.starts).view(m, c * k).gather(1, where)
