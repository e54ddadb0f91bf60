"""What the beam search calls to run the model: the :class:`Decoder` protocol and the plain eager decoder.

The search (:mod:`canlib.decoding.search`) touches the model only through these calls, so a runner
can replay them from CUDA graphs (:mod:`canlib.decoding.runners`) or time them
(:mod:`canlib.bench.timing`) without the search knowing.
"""
from __future__ import annotations

from typing import Protocol

from torch import Tensor

from canlib.model.attention import SourceMemory
from canlib.model.seq2seq import DecoderCache, Seq2Seq


class Decoder(Protocol):
    """The model as the search sees it; wrappers add graphs or timing around it."""

    model: Seq2Seq

    def encode(self, src: Tensor, beam: int) -> SourceMemory: ...
    def init_cache(self, memory: SourceMemory, max_len: int) -> DecoderCache: ...
    def decode_hidden(self, tokens: Tensor, cache: DecoderCache) -> Tensor: ...
    def output_log_probs(self, hidden: Tensor) -> Tensor: ...
    def output_logits(self, hidden: Tensor) -> Tensor: ...
    def reorder(self, cache: DecoderCache, index: Tensor) -> None: ...
    def compact(self, cache: DecoderCache, rows: Tensor) -> None: ...


class EagerDecoder:
    """The model as it is: every step launches its kernels one by one."""

    def __init__(self, model: Seq2Seq) -> None:
        self.model = model

    def encode(self, src: Tensor, beam: int) -> SourceMemory:
        return self.model.encode(src, beam=beam)

    def init_cache(self, memory: SourceMemory, max_len: int) -> DecoderCache:
        return self.model.init_cache(memory, max_len=max_len)

    def decode_hidden(self, tokens: Tensor, cache: DecoderCache) -> Tensor:
        """The decoder layers on one token per row: (rows,) -> hidden states (rows, d)."""
        return self.model.decode_hidden(tokens, cache)

    def output_log_probs(self, hidden: Tensor) -> Tensor:
        """Final norm, output projection, log-softmax: (rows, d) -> (rows, V)."""
        return self.model.output_log_probs(hidden)

    def output_logits(self, hidden: Tensor) -> Tensor:
        """Final norm and output projection only (the fused search takes the log-softmax itself)."""
        return self.model.output_logits(hidden)

    def reorder(self, cache: DecoderCache, index: Tensor) -> None:
        """Row i continues row ``index[i]``, within its sentence (the hot path: no check, no host read)."""
        self.model.reorder_rows(cache, index)

    def compact(self, cache: DecoderCache, rows: Tensor) -> None:
        """Keep only ``rows`` (whole sentences: the search drops the finished ones)."""
        self.model.reorder_cache(cache, rows, validate=False)
