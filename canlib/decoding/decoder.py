"""What the beam search calls to run the model: the :class:`Decoder` protocol and the plain eager decoder.

The search (:mod:`canlib.decoding.search`) touches the model only through these calls, so a runner
can replay them from CUDA graphs (:mod:`canlib.decoding.runners`), compile them
(:class:`CompiledDecoder`) or time them (:mod:`canlib.decoding.timing`) without the search knowing.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.fx.experimental._config as shape_config
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


class CompiledDecoder(EagerDecoder):
    """The encoder, the decoder layers and the output as ``torch.compile`` functions: a step's element-wise work
    (bias and ReLU, residual add and LayerNorm, the embedding's scale and position) fused into fewer kernels.

    On a GPU at batch 1 a step costs what it launches (the decoding chapter), so fewer kernels are the point.
    The step index and the sizes are symbolic (``dynamic=True``), so one compiled graph per cache buffer (the
    reorder alternates two) serves every step and every source length; a batch of several sentences compiles once
    more (PyTorch specialises sizes of 1). Compiling happens at a call, so a runner that captures CUDA graphs
    must warm each step up first (:class:`~canlib.decoding.runners.StepGraphs` does). Run it under
    ``torch.no_grad`` (``beam_search`` does), not ``inference_mode``, whose tensors symbolic sizes refuse.
    ``backend="aot_eager"`` traces the same graphs without generating code: how the CPU tests check the tokens.
    """

    def __init__(self, model: Seq2Seq, backend: str = "inductor") -> None:
        super().__init__(model)
        self._encode = torch.compile(model.encode, backend=backend, dynamic=True)
        self._hidden = torch.compile(model.decode_hidden, backend=backend, dynamic=True)
        self._log_probs = torch.compile(model.output_log_probs, backend=backend, dynamic=True)
        self._logits = torch.compile(model.output_logits, backend=backend, dynamic=True)

    def encode(self, src: Tensor, beam: int) -> SourceMemory:
        return self._encode(src, beam=beam)

    def decode_hidden(self, tokens: Tensor, cache: DecoderCache) -> Tensor:
        # no duck sizing: the tokens are a view into the search's history at a moving offset, which would otherwise
        # be equated with whichever size it happens to match at the first call, and recompiled when it stops matching
        with shape_config.patch(use_duck_shape=False):
            return self._hidden(tokens, cache)

    def output_log_probs(self, hidden: Tensor) -> Tensor:
        return self._log_probs(hidden)

    def output_logits(self, hidden: Tensor) -> Tensor:
        return self._logits(hidden)
