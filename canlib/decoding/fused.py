"""The forced-length search step fused into two Triton kernels, from the raw logits.

The PyTorch step (:meth:`canlib.decoding.search.ForcedLengthSearch.select`) runs log-softmax over the logits, bans
PAD/BOS/EOS, adds the running scores, takes two rounds of top-k, gathers indices and writes the back-pointers:
nine kernels with the output's log-softmax. Here:

1. :func:`row_partials`, one program per (row, piece of ``BLOCK`` logits): the piece's max and sum of
   exponentials over every token (the log-sum-exp of the row, in pieces) and its ``k`` best allowed tokens
   (PAD, BOS and EOS banned, the rest not renormalised: fairseq's convention, as the PyTorch step);
2. :func:`merge_top`, one program per sentence: each row's log-sum-exp from its pieces, every candidate's
   score (running score + logit - log-sum-exp), the sentence's ``k`` best, written straight into the running
   scores and the (row, token) back-pointers.

A row's ``k`` best tokens are among its pieces' ``k`` best, and a sentence's ``k`` best candidates among its
rows' ``k`` best, so the two kernels choose what the PyTorch step chooses; among exactly equal scores the lowest
row, then the lowest index, wins (PyTorch's top-k leaves that order unspecified). Each kernel is registered as
an operator (``canlib::beam_row_partials``, ``canlib::beam_merge_top``), so that CUDA graphs capture it and
:class:`canlib.decoding.ops.OpCounter` counts one launch each, on the ``meta`` device too. On a CPU the kernels run
in Triton's interpreter (``TRITON_INTERPRET=1``, set at import where no CUDA device is visible): slow, but the
same program, which is how the tests check it. Needs the ``triton`` package (PyTorch's CUDA wheels bring it).
"""

from __future__ import annotations

import importlib.util
import os

import torch
from torch import Tensor

BLOCK = 1024  # logits per program of the first kernel


def available() -> bool:
    """Whether Triton is installed (on a machine without CUDA its interpreter runs the kernels)."""
    return importlib.util.find_spec("triton") is not None


if available():
    if not torch.cuda.is_available():  # read when a kernel is decorated: no GPU, so the interpreter
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import triton
    import triton.language as tl

    @triton.jit
    def row_partials_kernel(
        logits,
        row_stride,
        vocab,
        part_max,
        part_sum,
        cand_val,
        cand_idx,
        pieces,
        pad_id,
        bos_id,
        eos_id,
        BLOCK: tl.constexpr,
        K: tl.constexpr,
    ):
        row, piece = tl.program_id(0), tl.program_id(1)
        cols = tl.arange(0, BLOCK)
        offs = piece * BLOCK + cols
        inside = offs < vocab
        x = tl.load(logits + row * row_stride + offs, mask=inside, other=float("-inf")).to(tl.float32)
        top = tl.max(x, axis=0)
        out = row * pieces + piece
        tl.store(part_max + out, top)
        tl.store(part_sum + out, tl.sum(tl.exp(x - top), axis=0))
        x = tl.where((offs == pad_id) | (offs == bos_id) | (offs == eos_id), float("-inf"), x)
        for j in tl.static_range(K):
            i = tl.argmax(x, axis=0)
            tl.store(cand_val + out * K + j, tl.max(x, axis=0))
            tl.store(cand_idx + out * K + j, piece * BLOCK + i)
            x = tl.where(cols == i, float("-inf"), x)

    @triton.jit
    def merge_top_kernel(
        part_max,
        part_sum,
        cand_val,
        cand_idx,
        cum,
        pointers,
        rows,
        pieces,
        K: tl.constexpr,
        BEAM: tl.constexpr,
        BEAM2: tl.constexpr,
        PIECES2: tl.constexpr,
        CAND2: tl.constexpr,
    ):
        s = tl.program_id(0)
        b = tl.arange(0, BEAM2)[:, None]
        live = b < BEAM
        c = tl.arange(0, PIECES2)[None, :]
        at = (s * BEAM + b) * pieces + c
        ok = live & (c < pieces)
        pm = tl.load(part_max + at, mask=ok, other=float("-inf"))
        top = tl.max(pm, axis=1)
        top = tl.where(top == float("-inf"), 0.0, top)
        total = tl.sum(tl.load(part_sum + at, mask=ok, other=0.0) * tl.exp(pm - top[:, None]), axis=1)
        lse = top + tl.log(tl.where(total > 0, total, 1.0))  # padding rows (b >= BEAM): 0, never chosen
        j = tl.arange(0, CAND2)[None, :]
        has = live & (j < pieces * K)
        where = (s * BEAM + b) * pieces * K + j
        running = tl.load(cum + s * BEAM + b, mask=live, other=float("-inf"))
        score = running + tl.load(cand_val + where, mask=has, other=float("-inf")) - lse[:, None]
        score = tl.where(has, score, float("-inf"))
        for i in tl.static_range(BEAM):
            best_row = tl.max(score, axis=1)
            b_star = tl.argmax(best_row, axis=0)
            j_star = tl.argmax(tl.max(tl.where(b == b_star, score, float("-inf")), axis=0), axis=0)
            tl.store(cum + s * BEAM + i, tl.max(best_row, axis=0))
            tl.store(pointers + s * BEAM + i, s * BEAM + b_star)
            tl.store(pointers + rows + s * BEAM + i, tl.load(cand_idx + (s * BEAM + b_star) * pieces * K + j_star))
            score = tl.where((b == b_star) & (j == j_star), float("-inf"), score)


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


@torch.library.custom_op("canlib::beam_row_partials", mutates_args=("part_max", "part_sum", "cand_val", "cand_idx"))
def row_partials(
    logits: Tensor,
    part_max: Tensor,
    part_sum: Tensor,
    cand_val: Tensor,
    cand_idx: Tensor,
    pad_id: int,
    bos_id: int,
    eos_id: int,
) -> None:
    """Kernel 1: per (row, piece) the max and sum of exponentials of the logits, and the piece's k best
    allowed tokens (values and indices): ``cand_val`` / ``cand_idx`` (rows, pieces, k)."""
    rows, vocab = logits.shape
    pieces, k = cand_val.size(1), cand_val.size(2)
    row_partials_kernel[(rows, pieces)](
        logits,
        logits.stride(0),
        vocab,
        part_max,
        part_sum,
        cand_val,
        cand_idx,
        pieces,
        pad_id,
        bos_id,
        eos_id,
        BLOCK=min(BLOCK, _pow2(vocab)),
        K=k,
    )


row_partials.register_fake(lambda *args: None)  # on the meta device: counted, not run


@torch.library.custom_op("canlib::beam_merge_top", mutates_args=("cum", "pointers"))
def merge_top(
    part_max: Tensor, part_sum: Tensor, cand_val: Tensor, cand_idx: Tensor, cum: Tensor, pointers: Tensor
) -> None:
    """Kernel 2: per sentence, the k best of its rows' candidates scored running score + logit -
    log-sum-exp; writes them into ``cum`` (sentences, k) and ``pointers`` (2, rows): (source row, token)."""
    sentences, beam = cum.shape
    rows, pieces, k = cand_val.shape
    merge_top_kernel[(sentences,)](
        part_max,
        part_sum,
        cand_val,
        cand_idx,
        cum,
        pointers,
        rows,
        pieces,
        K=k,
        BEAM=beam,
        BEAM2=_pow2(beam),
        PIECES2=_pow2(pieces),
        CAND2=_pow2(pieces * k),
    )


merge_top.register_fake(lambda *args: None)


class FusedSelect:
    """The buffers of the two kernels for a search of ``rows`` rows over ``vocab`` tokens, beam ``k``."""

    def __init__(
        self, rows: int, vocab: int, k: int, device: torch.device, pad_id: int, bos_id: int, eos_id: int
    ) -> None:
        pieces = -(-vocab // min(BLOCK, _pow2(vocab)))
        self.part_max = torch.empty(rows, pieces, device=device)
        self.part_sum = torch.empty(rows, pieces, device=device)
        self.cand_val = torch.empty(rows, pieces, k, device=device)
        self.cand_idx = torch.empty(rows, pieces, k, dtype=torch.long, device=device)
        self.special = (pad_id, bos_id, eos_id)

    def __call__(self, logits: Tensor, cum: Tensor, pointers: Tensor) -> None:
        """Choose each sentence's k continuations from ``logits`` (rows, V): new scores into ``cum`` and
        (source row, token) into ``pointers`` (2, rows), in place."""
        row_partials(logits, self.part_max, self.part_sum, self.cand_val, self.cand_idx, *self.special)
        merge_top(self.part_max, self.part_sum, self.cand_val, self.cand_idx, cum, pointers)
