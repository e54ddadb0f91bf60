"""Attention building blocks shared by every encoder and decoder layer.

Shapes follow one convention: activations are (rows, length, features); per-head
tensors are (rows, heads, length, head_width). During beam search the decoder has
``beam`` rows per source sentence, while everything computed from the source (keys,
values, padding mask) is stored once per sentence. :class:`SourceMemory` hides that
difference: it attends the ``rows = sentences * beam`` queries to the shared source
by folding the beam into the query-length axis, so the source is never copied per beam.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def split_heads(x: Tensor, heads: int) -> Tensor:
    """(rows, length, heads*w) -> (rows, heads, length, w)."""
    rows, length, width = x.shape
    return x.view(rows, length, heads, width // heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(rows, heads, length, w) -> (rows, length, heads*w)."""
    rows, heads, length, width = x.shape
    return x.transpose(1, 2).reshape(rows, length, heads * width)


def causal_mask(length: int, device: torch.device | None = None) -> Tensor:
    """Boolean (length, length) mask, True where a query must NOT see a key (the future)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu_(1)


def sinusoidal_table(max_len: int, dim: int) -> Tensor:
    """The Transformer's fixed sinusoidal positions (Vaswani et al. 2017), sin and cos interleaved."""
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float64) * (-math.log(10000.0) / dim))
    table = torch.zeros(max_len, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: dim // 2])
    return table.float()


@dataclass
class SourceMemory:
    """The encoder output of B sentences, seen by ``beam`` decoder rows each.

    ``pad_mask`` is (B, S), True at padded source positions. Projections of the
    source (keys, values) live in each layer's source cache, also with B rows.
    """

    states: Tensor  # (B, S, d), final-LayerNorm'd encoder output
    pad_mask: Tensor  # (B, S) bool
    beam: int = 1
    bias: Tensor | None = field(default=None, repr=False)  # score_bias, built once, not per layer and step
    row_bias: Tensor | None = field(default=None, repr=False)  # joint_bias, likewise

    @property
    def sentences(self) -> int:
        return self.states.size(0)

    def score_bias(self, dtype: torch.dtype) -> Tensor:
        """Additive (B, 1, 1, S) bias: -inf on padded source positions (cached)."""
        if self.bias is None or self.bias.dtype != dtype:
            self.bias = padded_bias(self.pad_mask, 0, dtype)
        return self.bias

    def joint_bias(self, length: int, dtype: torch.dtype) -> Tensor:
        """Additive (B * beam, 1, 1, S + steps) bias over a decoder row's [source ; prefix] keys
        (``length`` = S + steps): -inf on its sentence's padded source positions, 0 on the prefix (cached)."""
        bias = self.row_bias
        if bias is None or bias.dtype != dtype or bias.size(-1) != length:
            self.row_bias = padded_bias(
                self.pad_mask.repeat_interleave(self.beam, dim=0), length - self.pad_mask.size(1), dtype
            )
        return self.row_bias

    def fold(self, x: Tensor) -> Tensor:
        """Row queries (B*beam, h, T, w) as (B, h, beam*T, w): each sentence's beams as one longer query."""
        _, heads, length, width = x.shape
        return x.view(-1, self.beam, heads, length, width).transpose(1, 2).reshape(-1, heads, self.beam * length, width)

    def unfold(self, x: Tensor, length: int) -> Tensor:
        """:meth:`fold` undone on a result (B, h, beam*T, n): (B*beam, h, T, n)."""
        heads, width = x.size(1), x.size(-1)
        return x.view(-1, heads, self.beam, length, width).transpose(1, 2).reshape(-1, heads, length, width)

    def scores(self, q: Tensor, keys: Tensor, prescaled: bool = False) -> Tensor:
        """Scaled scores of row queries q (B*beam, h, T, w) against shared keys (B, h, S, w)
        (``prescaled``: q already carries the 1/sqrt(w)).

        Returns (B*beam, h, T, S), padded source positions at -inf.
        """
        s = torch.matmul(self.fold(q), keys.transpose(-1, -2))
        s = (s if prescaled else s * (q.size(-1) ** -0.5)) + self.score_bias(q.dtype)
        return self.unfold(s, q.size(2))

    def mix(self, probs: Tensor, values: Tensor) -> Tensor:
        """probs (B*beam, h, T, S) times shared values (B, h, S, v) -> (B*beam, h, T, v)."""
        return self.unfold(torch.matmul(self.fold(probs), values), probs.size(2))

    def attend(self, q: Tensor, keys: Tensor, values: Tensor, dropout: nn.Module) -> Tensor:
        """``mix(softmax(scores(q, keys)), values)`` in one fused kernel
        (``scaled_dot_product_attention``): the teacher-forced (training) path."""
        return self.unfold(fused_attention(self.fold(q), keys, values, self.score_bias(q.dtype), dropout), q.size(2))

    def select(self, index: Tensor) -> SourceMemory:
        """Keep sentences ``index`` (used when a search drops finished sentences)."""
        return SourceMemory(self.states.index_select(0, index), self.pad_mask.index_select(0, index), self.beam)


def padded_bias(pad_mask: Tensor, extra: int, dtype: torch.dtype) -> Tensor:
    """(N, 1, 1, S + extra) additive bias, -inf where ``pad_mask`` (N, S) is True, 0 elsewhere, in rows
    allocated to a multiple of 16 entries: a GPU's memory-efficient attention kernel reads such a mask
    as it is, where an unaligned one is first copied into a padded buffer (one more kernel per call)."""
    rows, width = pad_mask.size(0), pad_mask.size(1) + extra
    stored = -(-width // 16) * 16
    blocked = F.pad(pad_mask, (0, stored - pad_mask.size(1)), value=False)  # out of place: vmap can batch it
    store = torch.zeros(rows, stored, dtype=dtype, device=pad_mask.device).masked_fill(blocked, float("-inf"))
    return store[:, None, None, :width]


def project_source(proj: nn.Linear, memory: SourceMemory, heads: int) -> dict[str, Tensor]:
    """Per-sentence source keys and values from a fused [W_k | W_v] projection of H.

    Keys are d wide (``proj.in_features``); values take the rest (d, or 4d in CAN's merged FFN).
    Computed once per sentence and shared by its beams.
    """
    k, v = proj(memory.states).split([proj.in_features, proj.out_features - proj.in_features], dim=-1)
    return {"k": split_heads(k, heads), "v": split_heads(v, heads)}


def self_scores(q: Tensor, keys: Tensor, blocked: Tensor | None) -> Tensor:
    """Scaled scores of q (N, h, T, w) against keys (N, h, K, w) of the same sequence.

    ``blocked`` (broadcastable to (N, h, T, K), True = not allowed) is the causal mask
    in the decoder and the source padding mask in the encoder; None during a decode step,
    where the cache holds only the visible prefix.
    """
    s = torch.matmul(q, keys.transpose(-1, -2)) * (q.size(-1) ** -0.5)
    if blocked is not None:
        s = s.masked_fill(blocked, float("-inf"))
    return s


def fused_attention(
    q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, dropout: nn.Module, parts: tuple[int, ...] = ()
) -> Tensor:
    """``softmax(q k^T / sqrt(w) + mask) v`` with dropout on the probabilities, as one
    ``scaled_dot_product_attention`` call (flash / memory-efficient kernels where they apply).
    ``mask``: boolean (True = may attend) or additive float, broadcastable to the scores. A dropout whose masks
    the fused kernels cannot draw (a counter-hashed one, ``canlib.training.hash_dropout``) gets the probabilities
    written out; ``parts``: the lengths of joined key blocks, which it keys apart."""
    p = dropout.p if dropout.training else 0.0
    if p and not isinstance(dropout, nn.Dropout):
        s = torch.matmul(q, keys.transpose(-1, -2)) * (q.size(-1) ** -0.5)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
        return torch.matmul(dropout(torch.softmax(s, dim=-1), parts), values)
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=p)


def joint_attention(
    q: Tensor,
    self_keys: Tensor,
    self_values: Tensor,
    blocked: Tensor | None,
    memory: SourceMemory,
    source: dict[str, Tensor],
    dropout: nn.Module,
) -> Tensor:
    """ONE softmax per head over [target prefix ; source] (paper Eq. 11), then A [V_x ; V_h].

    Teacher forcing with one row per sentence (``blocked`` given, beam 1) concatenates the keys
    and values of both blocks and makes one fused attention call. Otherwise the two score blocks
    are computed apart, joined for one softmax, split again, and each multiplies its own values:
    the same function, with each sentence's source keys and values kept once and shared by its
    beam rows (a decode step passes ``blocked=None``).
    """
    if blocked is not None and memory.beam == 1:  # teacher forcing: one fused kernel over the joined keys
        length, src_len = q.size(2), source["k"].size(2)
        causal = torch.zeros(blocked.shape, dtype=q.dtype, device=q.device).masked_fill_(blocked, float("-inf"))
        mask = torch.cat(
            [causal.expand(q.size(0), 1, length, -1), memory.score_bias(q.dtype).expand(-1, -1, length, src_len)],
            dim=-1,
        )
        return fused_attention(
            q,
            torch.cat([self_keys, source["k"]], dim=2),
            torch.cat([self_values, source["v"]], dim=2),
            mask,
            dropout,
            (self_keys.size(2), src_len),
        )
    if blocked is None:  # a decode step: q scaled once for both score blocks, one kernel fewer per layer
        # (bit-identical to scaling the scores: the scale is a power of two at every preset)
        q = q * (q.size(-1) ** -0.5)
        s_self, s_src = torch.matmul(q, self_keys.transpose(-1, -2)), memory.scores(q, source["k"], prescaled=True)
    else:
        s_self, s_src = self_scores(q, self_keys, blocked), memory.scores(q, source["k"])
    probs = dropout(torch.softmax(torch.cat([s_self, s_src], dim=-1), dim=-1))
    p_self, p_src = probs.split([s_self.size(-1), s_src.size(-1)], dim=-1)
    return torch.matmul(p_self, self_values) + memory.mix(p_src, source["v"])


# -- CPU inference fast paths: the only CPU-specific code of the model ---------------------------
#
# A decode step multiplies a few rows (sentences x beam) by each weight matrix. CPU BLAS computes
# that product as ``x W^T`` several times slower than the same product written ``(W x^T)^T``:
# measured 1.5x (512 x 512) to 3.8x (the 32k x 512 output embedding) on this project's 2-core CPU.
# A single row (greedy search, batch 1) is worse still: there MKL runs a matrix-vector kernel
# that, with the weights coming from memory rather than cache, took 2.3x (1536 x 512) to 3.6x
# (32k x 512) longer than the product with the row repeated twice, so one row is computed as two.
# The layers are written with plain ``nn.Linear``s; ``Seq2Seq`` converts them once, when it is built,
# into :class:`RowsLinear`s (:func:`fast_cpu_linears`), which take that form in CPU inference only.
# Training, autograd and GPUs keep the ordinary path.

FAST_ROWS = 64  # up to this many rows a product takes the (W x^T)^T form


def rows_linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)``, computed as ``(W x^T)^T`` for a few rows in CPU inference."""
    rows = x.numel() // weight.size(1)
    if x.device.type != "cpu" or torch.is_grad_enabled() or rows > FAST_ROWS:
        return F.linear(x, weight, bias)
    flat = x.reshape(rows, weight.size(1))
    if rows == 1:  # greedy search at batch 1: two copies of the row beat one (see above)
        flat = flat.repeat(2, 1)
    flat = flat.t()  # a transposed view, the layout the fast few-column kernels take
    out = torch.mm(weight, flat) if bias is None else torch.addmm(bias[:, None], weight, flat)
    return out[:, :rows].t().contiguous().view(*x.shape[:-1], weight.size(0))


class RowsLinear(nn.Linear):
    """An ``nn.Linear`` whose product is :func:`rows_linear`: the ``(W x^T)^T`` form for a few rows in CPU
    inference, ``F.linear`` everywhere else. Made from an ``nn.Linear`` by :func:`fast_cpu_linears`."""

    def forward(self, x: Tensor) -> Tensor:
        return rows_linear(x, self.weight, self.bias)


def fast_cpu_linears(module: nn.Module) -> nn.Module:
    """Convert ``module`` in place and return it: every ``nn.Linear`` in it becomes a :class:`RowsLinear` over
    the same parameters, so the state dict, an optimizer's parameters and every path but CPU inference stay
    as they were."""
    plain = [
        (parent, name, child)
        for parent in module.modules()
        for name, child in parent.named_children()
        if type(child) is nn.Linear
    ]
    for parent, name, linear in plain:
        rows = RowsLinear(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
        rows.weight, rows.bias = linear.weight, linear.bias
        setattr(parent, name, rows.train(linear.training))
    return module


def reorder_moved_rows(prefix: Tensor, index: Tensor) -> bool:
    """CPU inference: make row i of ``prefix`` (positions, rows, width) continue row ``index[i]`` in place,
    copying only the rows that change (beams often keep their rows, and CAN's prefix values are 4d wide,
    so this saves memory traffic). Returns False when every row moves and a gather into the other buffer
    is the better choice. On a GPU the test below would read back to the host, so it is CPU-only."""
    moved = index.ne(torch.arange(index.numel())).nonzero().squeeze(1)
    if moved.numel() == index.numel():
        return False
    if moved.numel():
        prefix.index_copy_(1, moved, prefix.index_select(1, index.index_select(0, moved)))
    return True


def init_linear(linear: nn.Linear, splits: list[int] | None = None) -> None:
    """Xavier-uniform weights, zero bias; a fused projection is initialised slice by slice
    so each logical matrix gets the scale it would have on its own."""
    with torch.no_grad():
        for block in linear.weight.split(splits or [linear.out_features], dim=0):
            nn.init.xavier_uniform_(block)
        if linear.bias is not None:
            linear.bias.zero_()


def prefix_heads(state: Tensor, length: int, heads: int) -> Tensor:
    """The first ``length`` positions of a time-major decoder state (positions, rows, heads * w), as the
    (rows, heads, length, w) view an attention kernel reads: no copy."""
    rows, width = state.size(1), state.size(2)
    return state[:length].view(length, rows, heads, width // heads).permute(1, 2, 0, 3)


def attend_prefix(
    q: Tensor, state: Tensor, length: int, key_width: int, heads: int, mask: Tensor | None, dropout: nn.Module
) -> Tensor:
    """One decode step's attention over the first ``length`` positions of a time-major key|value state
    (positions, rows, key_width + value_width): ``q`` (rows, heads, 1, w) -> (rows, 1, heads * v), one
    ``scaled_dot_product_attention`` call reading keys and values where they lie."""
    prefix = state[:length]
    keys = prefix_heads(prefix[..., :key_width], length, heads)
    values = prefix_heads(prefix[..., key_width:], length, heads)
    return merge_heads(fused_attention(q, keys, values, mask, dropout))


class SelfAttention(nn.Module):
    """Multi-head causal self-attention with a fused QKV projection and a preallocated cache."""

    def __init__(self, d: int, heads: int, attn_dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.drop = nn.Dropout(attn_dropout)
        init_linear(self.qkv, [d, d, d])
        init_linear(self.out)

    def forward(self, x: Tensor, blocked: Tensor) -> Tensor:
        q, k, v = (split_heads(t, self.heads) for t in self.qkv(x).chunk(3, dim=-1))
        return self.out(merge_heads(fused_attention(q, k, v, ~blocked, self.drop)))

    def step(self, x: Tensor, cache: dict[str, Tensor], t: int) -> Tensor:
        """One position: its keys and values written to ``cache["kv"]`` (positions, rows, 2d) as one copy,
        then one attention call over positions 0..t."""
        d = self.out.in_features
        qkv = self.qkv(x)  # (rows, 1, 3d): [q | k | v], k and v side by side as the cache keeps them
        cache["kv"][t] = qkv[:, 0, d:]
        mixed = attend_prefix(split_heads(qkv[..., :d], self.heads), cache["kv"], t + 1, d, self.heads, None, self.drop)
        return self.out(mixed)

    def cache_layout(self) -> dict[str, int]:
        """The per-row decoding state: its name and width per position (keys and values side by side)."""
        return {"kv": 2 * self.out.in_features}


class CrossAttention(nn.Module):
    """Multi-head attention from the target to the (beam-shared) source."""

    def __init__(self, d: int, heads: int, attn_dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, d)
        self.drop = nn.Dropout(attn_dropout)
        init_linear(self.q)
        init_linear(self.kv, [d, d])
        init_linear(self.out)

    def project_source(self, memory: SourceMemory) -> dict[str, Tensor]:
        return project_source(self.kv, memory, self.heads)

    def forward(self, x: Tensor, memory: SourceMemory, source: dict[str, Tensor]) -> Tensor:
        """One fused attention kernel, teacher-forced or a decode step (the beams' queries against their
        sentence's keys)."""
        q = split_heads(self.q(x), self.heads)
        return self.out(merge_heads(memory.attend(q, source["k"], source["v"], self.drop)))


class FeedForward(nn.Module):
    """Position-wise FFN: ReLU(x W1 + b1) W2 + b2, dropout on the hidden layer."""

    def __init__(self, d: int, ffn_dim: int, relu_dropout: float) -> None:
        super().__init__()
        self.w1 = nn.Linear(d, ffn_dim)
        self.w2 = nn.Linear(ffn_dim, d)
        self.drop = nn.Dropout(relu_dropout)
        init_linear(self.w1)
        init_linear(self.w2)

    def forward(self, x: Tensor, scale: float = 1.0) -> Tensor:
        """FFN(scale * x): ``scale`` is AAN's 1 / count, which inference folds into the first product."""
        if torch.is_grad_enabled():  # training
            return self.w2(self.drop(F.relu(self.w1(x if scale == 1 else x * scale))))
        return self.w2(linear_relu(x, self.w1, scale))  # inference: no dropout, the ReLU inside the first product


def linear_relu(x: Tensor, linear: nn.Linear, scale: float = 1.0) -> Tensor:
    """``relu(linear(scale * x))`` for inference: on a GPU one GEMM whose epilogue adds the bias and applies the
    ReLU (``torch._addmm_activation``: cuBLASLt's RELU_BIAS epilogue), ``scale`` its alpha; on a CPU the product
    of :func:`rows_linear` (the epilogue's GEMM takes the slow ``x W^T`` form there), then the ReLU."""
    if x.device.type == "cpu":
        return F.relu(rows_linear(x if scale == 1 else x * scale, linear.weight, linear.bias))
    flat = torch._addmm_activation(linear.bias, x.reshape(-1, linear.in_features), linear.weight.t(), alpha=scale)
    return flat.view(*x.shape[:-1], linear.out_features)


class MergedFFN(nn.Module):
    """Eq. 13's FFN with the attention inside it: ``ReLU(hidden + mixed) W2 + b2``, dropout on the ReLU.

    ``hidden`` is ``z W1 + b1`` (the layer computes it in its fused projection of z) and ``mixed`` the attention's
    values, ffn_dim wide (rows, length, ffn_dim): the attention reaches the output through the FFN's ReLU instead of
    an output map and a residual of its own. CAN, its Compress FFN ablation and CAN keeping its residual share it.
    ``w2`` is initialised by the layer with its other matrices, in the order that gives a seed its weights.
    """

    def __init__(self, ffn_dim: int, d: int, relu_dropout: float) -> None:
        super().__init__()
        self.w2 = nn.Linear(ffn_dim, d)
        self.drop = nn.Dropout(relu_dropout)

    def forward(self, hidden: Tensor, mixed: Tensor) -> Tensor:
        return self.w2(self.drop(F.relu(hidden + mixed)))
