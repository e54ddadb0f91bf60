"""One class per decoder-layer kind.

Every layer is pre-norm (LayerNorm before each sub-layer, residual around it) and
offers the same four methods, so the decoder, the beam search and the benchmarks
never look at the kind:

* ``project_source(memory)``: per-sentence tensors computed once from the encoder
  output (cross-attention keys and values; for CAN the 4d-wide ``H W~v2``);
* ``forward(x, memory, source, blocked, shared)``: teacher-forced, whole target;
* ``cache_layout()``: the per-row decoding state, by name and width per position (``joint`` layers
  also keep their sentence's source keys|values in front of the prefix: :func:`row_caches`);
* ``step(x, memory, source, cache, t, shared)``: one target position, updating the cache.

Every layer's per-row state lives in ONE time-major buffer (positions, rows, width), so that the beam
search reorders every layer's state with one gather per step, whatever the depth (:func:`row_caches`).

``shared`` is a dict that lives for one pass through the decoder stack: SAN's
followers read the attention maps and cross-attention output their group leader
wrote there. Dropout sits in three places, the same in every kind: on attention
probabilities (``attn_dropout``), on the ReLU hidden layer (``relu_dropout``) and on
each sub-layer output before the residual add (``dropout``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from canlib.model.attention import (
    CrossAttention,
    FeedForward,
    MergedFFN,
    SelfAttention,
    SourceMemory,
    attend_prefix,
    fused_attention,
    init_linear,
    joint_attention,
    merge_heads,
    prefix_heads,
    project_source,
    self_scores,
    split_heads,
)
from canlib.model.config import ModelConfig

Cache = dict[str, Tensor]


class DecoderLayer(nn.Module):
    """What every decoder-layer kind shares: how its per-row decoding state is laid out."""

    joint = False  # keeps its sentence's source keys|values in front of the prefix (one attention over both)

    def cache_layout(self) -> dict[str, int]:
        raise NotImplementedError

    def project_source(self, memory: SourceMemory) -> Cache:
        """Per-sentence source keys and values of the layer's [Wk2 | Wv2] projection of H (``h_proj``); a layer with
        a cross-attention sub-layer takes that sub-layer's."""
        return project_source(self.h_proj, memory, self.heads)

    def new_cache(self, rows: int, max_len: int, like: Tensor) -> Cache:
        """Zeroed prefix buffers (max_len, rows, width) of :meth:`cache_layout` alone (what a target position
        costs); decoding uses :func:`row_caches`, which adds a joint layer's source part."""
        return {name: like.new_zeros(max_len, rows, width) for name, width in self.cache_layout().items()}


def carve(buffer: Tensor, layers: Sequence[DecoderLayer], lead: int) -> list[Cache]:
    """Each layer's state as views of ``buffer`` (lead + max_len, rows, total width), side by side along the
    last axis; a joint layer's view spans the ``lead`` source positions too, the others start after them."""
    caches, start = [], 0
    for layer in layers:
        cache = {}
        for name, width in layer.cache_layout().items():
            cache[name] = buffer[0 if layer.joint else lead :, :, start : start + width]
            start += width
        caches.append(cache)
    return caches


def fill_sources(
    caches: list[Cache], layers: Sequence[DecoderLayer], sources: list[Cache], memory: SourceMemory
) -> None:
    """Write each joint layer's per-sentence source keys and values (B, h, S, w) into the lead positions of its
    rows' state (S, B * beam, keys | values), each sentence's into its ``beam`` rows."""
    for cache, layer, source in zip(caches, layers, sources):
        if layer.joint:
            lead, width = memory.states.size(1), source["k"].size(1) * source["k"].size(3)
            for part, (start, stop) in (("k", (0, width)), ("v", (width, cache["kv"].size(-1)))):
                per_sentence = merge_heads(source[part]).transpose(0, 1)  # (S, B, heads * w)
                cache["kv"][:lead, :, start:stop] = per_sentence.repeat_interleave(memory.beam, dim=1)


def row_caches(
    layers: Sequence[DecoderLayer], memory: SourceMemory, sources: list[Cache], max_len: int
) -> tuple[Tensor, list[Cache], int]:
    """Every layer's per-row decoding state as views of ONE zeroed time-major buffer
    (lead + max_len, sentences * beam, width), and ``lead``: the source length when a layer is joint
    (its rows keep their sentence's source keys|values there, so that one attention call reads
    [source ; prefix]), else 0. Returns (buffer, per-layer caches, lead)."""
    rows = memory.sentences * memory.beam
    lead = memory.states.size(1) if any(layer.joint for layer in layers) else 0
    width = sum(w for layer in layers for w in layer.cache_layout().values())
    buffer = memory.states.new_zeros(lead + max_len, rows, width)
    caches = carve(buffer, layers, lead)
    fill_sources(caches, layers, sources, memory)
    # the score biases are built here, before any graph capture or compiled step (made inside one, a capture
    # would record their allocation and a compiled step would recompile once they exist)
    memory.score_bias(memory.states.dtype)
    if lead:
        memory.joint_bias(lead + max_len, memory.states.dtype)
    return buffer, caches, lead


def joint_step(
    q: Tensor, kv: Tensor, state: Tensor, memory: SourceMemory, source: Cache, t: int, heads: int, dropout: nn.Module
) -> Tensor:
    """A joint layer's decode step: write position t's keys|values ``kv`` (rows, width)
    behind the source part of ``state`` (lead + steps, rows, width), then one attention
    call of ``q`` (rows, 1, d) over [source ; prefix 0..t]."""
    lead = source["k"].size(2)  # the source positions in front of the prefix
    state[lead + t] = kv
    length = lead + t + 1
    mask = memory.joint_bias(state.size(0), state.dtype)[..., :length]  # -inf: padding
    q = split_heads(q, heads)  # (rows, heads, 1, d / heads)
    return attend_prefix(q, state, length, q.size(-1) * heads, heads, mask, dropout)


class CrossThenFFN(DecoderLayer):
    """A layer that ends in the Transformer's cross-attention and FFN sub-layers (``cross_norm``, ``cross_attn``,
    ``ffn_norm``, ``ffn``), after its own first sub-layer: Standard and AAN."""

    def project_source(self, memory: SourceMemory) -> Cache:
        return self.cross_attn.project_source(memory)

    def _cross_then_ffn(self, x: Tensor, memory: SourceMemory, source: Cache) -> Tensor:
        x = x + self.drop(self.cross_attn(self.cross_norm(x), memory, source))
        return x + self.drop(self.ffn(self.ffn_norm(x)))


class StandardDecoderLayer(CrossThenFFN):
    """Self-attention, cross-attention, FFN: the Transformer decoder layer (Baseline, Balanced)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.self_norm = nn.LayerNorm(d)
        self.self_attn = SelfAttention(d, cfg.heads, cfg.attn_dropout)
        self.cross_norm = nn.LayerNorm(d)
        self.cross_attn = CrossAttention(d, cfg.heads, cfg.attn_dropout)
        self.ffn_norm = nn.LayerNorm(d)
        self.ffn = FeedForward(d, cfg.ffn_dim, cfg.relu_dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, memory: SourceMemory, source: Cache, blocked: Tensor, shared: dict) -> Tensor:
        x = x + self.drop(self.self_attn(self.self_norm(x), blocked))
        return self._cross_then_ffn(x, memory, source)

    def cache_layout(self) -> dict[str, int]:
        return self.self_attn.cache_layout()

    def step(self, x: Tensor, memory: SourceMemory, source: Cache, cache: Cache, t: int, shared: dict) -> Tensor:
        x = x + self.drop(self.self_attn.step(self.self_norm(x), cache, t))
        return self._cross_then_ffn(x, memory, source)


class AANDecoderLayer(CrossThenFFN):
    """Average Attention Network layer (Zhang, Xiong, Su 2018) in place of self-attention.

    The self-attention sub-layer becomes a cumulative average of the (normalised) inputs,
    passed through an FFN and a gate: ``out = sigmoid(i) * z + sigmoid(f) * FFN(avg)`` with
    ``[i; f] = Linear_2d->2d([z; FFN(avg)])``. Decoding keeps no keys or values, only the sum of the inputs so far,
    once per target position (:meth:`cache_layout`).

    A decode step launches what these maths need:

    - the average: LayerNorm, the prefix sum (one add that writes the cache) and the average's FFN (W1 with
      its ReLU, the division by the count as the product's scale, then W2), where Balanced's self-attention
      launches LayerNorm, QKV, one key|value write and attention (4 each);
    - the gate: ``[z; FFN(avg)]`` concatenated, one product by the stored 2d x 2d map, one sigmoid over both
      gates and ``+ f g`` as one multiply-add (4);
    - the residual ``x + i z`` as one multiply-add, where Balanced's output product and add are 2;
    - cross-attention (5) and the FFN (4).

    That is 18 a layer, within Balanced's 15 and the gate's 4.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.avg_norm = nn.LayerNorm(d)
        self.avg_ffn = FeedForward(d, cfg.ffn_dim, cfg.relu_dropout)
        self.gate = nn.Linear(2 * d, 2 * d)
        init_linear(self.gate, [d, d])
        self.cross_norm = nn.LayerNorm(d)
        self.cross_attn = CrossAttention(d, cfg.heads, cfg.attn_dropout)
        self.ffn_norm = nn.LayerNorm(d)
        self.ffn = FeedForward(d, cfg.ffn_dim, cfg.relu_dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def _gated(self, x: Tensor, z: Tensor, total: Tensor, scale: float = 1.0) -> Tensor:
        """``x + sigmoid(i) * z + sigmoid(f) * g`` with ``g = FFN(scale * total)``: one sigmoid over both gates,
        and without dropout the two products added as two multiply-adds."""
        g = self.avg_ffn(total, scale)
        i, f = torch.sigmoid(self.gate(torch.cat([z, g], dim=-1))).chunk(2, dim=-1)
        if self.drop.training and self.drop.p > 0:
            return x + self.drop(i * z + f * g)
        return torch.addcmul(x, i, z).addcmul_(f, g)

    def forward(self, x: Tensor, memory: SourceMemory, source: Cache, blocked: Tensor, shared: dict) -> Tensor:
        z = self.avg_norm(x)
        counts = torch.arange(1, z.size(1) + 1, device=z.device, dtype=z.dtype)[None, :, None]
        x = self._gated(x, z, z.cumsum(dim=1) / counts)
        return self._cross_then_ffn(x, memory, source)

    def cache_layout(self) -> dict[str, int]:
        """Prefix sums, one per position: ``sum[t]`` = z_0 + ... + z_t.

        Step t reads position t-1 and writes position t, as the attention layers' key/value caches do,
        so running a step twice leaves the same state (a CUDA graph's capture runs it once to warm up,
        then the graph replays it); one running sum updated with ``+=`` would add z_t twice."""
        return {"sum": self.gate.in_features // 2}

    def step(self, x: Tensor, memory: SourceMemory, source: Cache, cache: Cache, t: int, shared: dict) -> Tensor:
        z = self.avg_norm(x)
        total = cache["sum"][t]
        if t and torch.compiler.is_compiling():  # Dynamo takes no strided out=; Inductor fuses the add and the write
            cache["sum"][t] = cache["sum"][t - 1] + z[:, 0]
        elif t:  # sum[t-1] + z_t, one kernel writing where it is kept
            torch.add(cache["sum"][t - 1], z[:, 0], out=total)
        else:
            total.copy_(z[:, 0])
        x = self._gated(x, z, total[:, None], 1.0 / (t + 1))  # the average, divided inside W1's product
        return self._cross_then_ffn(x, memory, source)


class SANDecoderLayer(DecoderLayer):
    """Sharing Attention Network layer (Xiao et al. 2019).

    Within a sharing group, the first layer (the leader) computes self-attention
    probabilities and the cross-attention output as usual and puts them in ``shared``;
    the followers reuse both, keeping only their own value/output projections for
    self-attention (and no query/key or cross-attention weights at all).

    The leader's queries, keys and values are one fused projection (``qkv``), as in
    :class:`~canlib.model.attention.SelfAttention`. A decode step is Balanced's, 15 kernels for the leader:

    - self-attention: LayerNorm, the QKV product, one key|value write, one attention kernel, the output
      product and the residual add (6);
    - cross-attention: LayerNorm, query product, attention, output product, add (5);
    - the FFN: LayerNorm, W1 with its ReLU, W2, add (4).

    A follower launches 11:

    - self-attention: LayerNorm, its value product, one value write, one attention kernel that reads the
      leader's queries and keys (the same softmax, recomputed inside the kernel instead of stored), its
      output product and the residual add (6);
    - the shared cross-attention's residual add (1);
    - the FFN (4).
    """

    def __init__(self, cfg: ModelConfig, leader: bool) -> None:
        super().__init__()
        d = cfg.d_model
        self.leader = leader
        self.heads, self.d = cfg.heads, d
        self.self_norm = nn.LayerNorm(d)
        # made and initialised as separate query|key and value maps, in the order that gives a seed its weights
        if leader:
            qk = nn.Linear(d, 2 * d)
            init_linear(qk, [d, d])
        v = nn.Linear(d, d)
        self.self_out = nn.Linear(d, d)
        init_linear(v)
        init_linear(self.self_out)
        if leader:
            self.qkv = stacked_linear([qk, v])  # [Wq | Wk | Wv]
        else:
            self.v = v
        self.attn_drop = nn.Dropout(cfg.attn_dropout)
        if leader:
            self.cross_norm = nn.LayerNorm(d)
            self.cross_attn = CrossAttention(d, cfg.heads, cfg.attn_dropout)
        self.ffn_norm = nn.LayerNorm(d)
        self.ffn = FeedForward(d, cfg.ffn_dim, cfg.relu_dropout)
        self.drop = nn.Dropout(cfg.dropout)
        if leader:
            self.register_load_state_dict_pre_hook(fuse_query_key_value)

    def project_source(self, memory: SourceMemory) -> Cache:
        return self.cross_attn.project_source(memory) if self.leader else {}

    def _cross_then_ffn(self, x: Tensor, memory: SourceMemory, source: Cache, shared: dict) -> Tensor:
        if self.leader:
            shared["cross"] = self.cross_attn(self.cross_norm(x), memory, source)
        x = x + self.drop(shared["cross"])
        return x + self.drop(self.ffn(self.ffn_norm(x)))

    def forward(self, x: Tensor, memory: SourceMemory, source: Cache, blocked: Tensor, shared: dict) -> Tensor:
        z = self.self_norm(x)
        if self.leader:
            q, k, v = (split_heads(t, self.heads) for t in self.qkv(z).chunk(3, dim=-1))
            shared["self_probs"] = torch.softmax(self_scores(q, k, blocked), dim=-1)
        else:
            v = split_heads(self.v(z), self.heads)
        x = x + self.drop(self.self_out(merge_heads(torch.matmul(self.attn_drop(shared["self_probs"]), v))))
        return self._cross_then_ffn(x, memory, source, shared)

    def cache_layout(self) -> dict[str, int]:
        return {"kv": 2 * self.d} if self.leader else {"v": self.d}  # followers reuse the leader's keys

    def step(self, x: Tensor, memory: SourceMemory, source: Cache, cache: Cache, t: int, shared: dict) -> Tensor:
        z, d = self.self_norm(x), self.d
        if self.leader:
            qkv = self.qkv(z)  # (rows, 1, 3d): [q | k | v], k and v side by side as the cache keeps them
            cache["kv"][t] = qkv[:, 0, d:]
            # the followers attend with these queries over these keys: the leader's softmax, in their kernel
            shared["self_query"] = split_heads(qkv[..., :d], self.heads)
            shared["self_keys"] = prefix_heads(cache["kv"][..., :d], t + 1, self.heads)
            mixed = attend_prefix(shared["self_query"], cache["kv"], t + 1, d, self.heads, None, self.attn_drop)
        else:
            cache["v"][t] = self.v(z)[:, 0]
            values = prefix_heads(cache["v"], t + 1, self.heads)
            query, keys = shared["self_query"], shared["self_keys"]
            mixed = merge_heads(fused_attention(query, keys, values, None, self.attn_drop))
        x = x + self.drop(self.self_out(mixed))
        return self._cross_then_ffn(x, memory, source, shared)


def stacked_linear(parts: list[nn.Linear]) -> nn.Linear:
    """One ``nn.Linear`` whose output is the outputs of ``parts`` side by side (their rows stacked)."""
    fused = nn.Linear(parts[0].in_features, sum(p.out_features for p in parts), device="meta")
    fused.weight = nn.Parameter(torch.cat([p.weight.detach() for p in parts]))
    fused.bias = nn.Parameter(torch.cat([p.bias.detach() for p in parts]))
    return fused


def fuse_query_key_value(module: nn.Module, state: dict, prefix: str, *args: object) -> None:
    """Load a SAN leader stored with separate query|key (``qk``) and value (``v``) maps into its fused ``qkv``
    (a state-dict pre-hook): the rows [Wq ; Wk ; Wv] stacked in that order, as the fused map holds them."""
    if prefix + "qk.weight" in state and prefix + "qkv.weight" not in state:
        for name in ("weight", "bias"):
            state[prefix + "qkv." + name] = torch.cat(
                [state.pop(prefix + "qk." + name), state.pop(prefix + "v." + name)]
            )


class CANDecoderLayer(DecoderLayer):
    """Compressed-Attention layer: self-attention, cross-attention and FFN as ONE sub-layer.

    Paper Eq. 11 (the single softmax) and Eq. 13 (the merged FFN), with z = LayerNorm(x)::

        A = SoftMax(z Wq [z Wk1 ; H Wk2]^T / sqrt(d/h))  (per head)
        y = x + ReLU(z W1 + A [z W~v1 ; H W~v2] + b1) W2 + b2

    Decisions the paper leaves open, made here (and derived in the book):

    * Heads split the 4d-wide values: head i attends with d/h-wide queries/keys and
      mixes its own 4d/h-wide slice of ``[z W~v1 ; H W~v2]``; the h slices are
      concatenated back to 4d and added to ``z W1``. This is a reparametrisation of the
      merged ``Wv Wo W1`` form (exact only if every head kept a full 4d-wide value map).
    * Scores are scaled by sqrt(d/h), as in every other attention here, not sqrt(d).
    * The residual of the attention output itself (``x + Self + Cross``) is dropped: the
      attention reaches the output only through the FFN; one residual wraps the layer.
    * ``z W_q``, ``z W_k1``, ``z W~v1`` and ``z W1`` are one fused matrix product
      (``x_proj``), ``H W_k2`` and ``H W~v2`` another (``h_proj``), computed once per
      sentence and shared by its beams.

    Decoding keeps, per row, its sentence's ``[H Wk2 | H W~v2]`` in front of the prefix's
    ``[z Wk1 | z W~v1]`` in one buffer, so that a step writes one position (one copy) and attends
    over [source ; prefix] in one call.
    """

    joint = True

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d, f = cfg.d_model, cfg.ffn_dim
        self.heads, self.d, self.f = cfg.heads, d, f
        self.norm = nn.LayerNorm(d)
        self.x_proj = nn.Linear(d, 2 * d + 2 * f)  # [Wq | Wk1 | W~v1 | W1]; its W1 bias is b1
        self.h_proj = nn.Linear(d, d + f)  # [Wk2 | W~v2]
        self.ffn = MergedFFN(f, d, cfg.relu_dropout)  # ReLU(hidden + mixed) W2 + b2
        init_linear(self.x_proj, [d, d, f, f])
        init_linear(self.h_proj, [d, f])
        init_linear(self.ffn.w2)
        self.attn_drop = nn.Dropout(cfg.attn_dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def _project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        q, k, v, hidden = self.x_proj(self.norm(x)).split([self.d, self.d, self.f, self.f], dim=-1)
        return split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads), hidden

    def _output(self, x: Tensor, hidden: Tensor, mixed: Tensor) -> Tensor:
        """``mixed`` (rows, heads, length, f/h): each head's values."""
        return x + self.drop(self.ffn(hidden, merge_heads(mixed)))

    def forward(self, x: Tensor, memory: SourceMemory, source: Cache, blocked: Tensor, shared: dict) -> Tensor:
        q, k, v, hidden = self._project(x)
        return self._output(x, hidden, joint_attention(q, k, v, blocked, memory, source, self.attn_drop))

    def cache_layout(self) -> dict[str, int]:
        return {"kv": self.d + self.f}

    def step(self, x: Tensor, memory: SourceMemory, source: Cache, cache: Cache, t: int, shared: dict) -> Tensor:
        d, f = self.d, self.f
        proj = self.x_proj(self.norm(x))  # (rows, 1, 2d + 2f): [q | k1 | v1 | hidden]
        q, kv, hidden = proj[..., :d], proj[:, 0, d : 2 * d + f], proj[..., 2 * d + f :]
        state = cache["kv"]  # each row's source and prefix keys|values
        mixed = joint_step(q, kv, state, memory, source, t, self.heads, self.attn_drop)
        return x + self.drop(self.ffn(hidden, mixed))  # ReLU(hidden + mixed) W2 + b2


class CANAttnDecoderLayer(DecoderLayer):
    """ "Compress Attention" ablation (paper Table 5): self- and cross-attention merged into one
    attention (shared queries, one softmax over [prefix ; source], d-wide values, output
    projection, residual), followed by an ordinary FFN sub-layer."""

    joint = True

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.heads, self.d = cfg.heads, d
        self.norm = nn.LayerNorm(d)
        self.x_proj = nn.Linear(d, 3 * d)  # [Wq | Wk1 | Wv1]
        self.h_proj = nn.Linear(d, 2 * d)  # [Wk2 | Wv2]
        self.out = nn.Linear(d, d)
        init_linear(self.x_proj, [d, d, d])
        init_linear(self.h_proj, [d, d])
        init_linear(self.out)
        self.attn_drop = nn.Dropout(cfg.attn_dropout)
        self.ffn_norm = nn.LayerNorm(d)
        self.ffn = FeedForward(d, cfg.ffn_dim, cfg.relu_dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def _project(self, x: Tensor) -> tuple[Tensor, ...]:
        return tuple(split_heads(t, self.heads) for t in self.x_proj(self.norm(x)).chunk(3, dim=-1))

    def _output(self, x: Tensor, merged: Tensor) -> Tensor:
        """``merged`` (rows, length, d): the heads' values, merged."""
        x = x + self.drop(self.out(merged))
        return x + self.drop(self.ffn(self.ffn_norm(x)))

    def forward(self, x: Tensor, memory: SourceMemory, source: Cache, blocked: Tensor, shared: dict) -> Tensor:
        q, k, v = self._project(x)
        return self._output(x, merge_heads(joint_attention(q, k, v, blocked, memory, source, self.attn_drop)))

    def cache_layout(self) -> dict[str, int]:
        return {"kv": 2 * self.d}

    def step(self, x: Tensor, memory: SourceMemory, source: Cache, cache: Cache, t: int, shared: dict) -> Tensor:
        d, proj = self.d, self.x_proj(self.norm(x))  # (rows, 1, 3d): [q | k1 | v1]
        mixed = joint_step(proj[..., :d], proj[:, 0, d:], cache["kv"], memory, source, t, self.heads, self.attn_drop)
        return self._output(x, mixed)


class CANFFNDecoderLayer(DecoderLayer):
    """ "Compress FFN" ablation (paper Table 5): an ordinary self-attention sub-layer, then
    cross-attention merged into the FFN: ``y = x + ReLU(z W1 + A_h H W~v2 + b1) W2 + b2``
    with ``A_h = SoftMax(z Wq (H Wk2)^T)`` per head and 4d/h-wide value slices per head."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d, f = cfg.d_model, cfg.ffn_dim
        self.heads, self.d, self.f = cfg.heads, d, f
        self.self_norm = nn.LayerNorm(d)
        self.self_attn = SelfAttention(d, cfg.heads, cfg.attn_dropout)
        self.norm = nn.LayerNorm(d)
        self.x_proj = nn.Linear(d, d + f)  # [Wq | W1]
        self.h_proj = nn.Linear(d, d + f)  # [Wk2 | W~v2]
        self.ffn = MergedFFN(f, d, cfg.relu_dropout)  # ReLU(hidden + mixed) W2 + b2
        init_linear(self.x_proj, [d, f])
        init_linear(self.h_proj, [d, f])
        init_linear(self.ffn.w2)
        self.attn_drop = nn.Dropout(cfg.attn_dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def _merged_ffn(self, x: Tensor, memory: SourceMemory, source: Cache) -> Tensor:
        q, hidden = self.x_proj(self.norm(x)).split([self.d, self.f], dim=-1)
        mixed = merge_heads(memory.attend(split_heads(q, self.heads), source["k"], source["v"], self.attn_drop))
        return x + self.drop(self.ffn(hidden, mixed))

    def forward(self, x: Tensor, memory: SourceMemory, source: Cache, blocked: Tensor, shared: dict) -> Tensor:
        x = x + self.drop(self.self_attn(self.self_norm(x), blocked))
        return self._merged_ffn(x, memory, source)

    def cache_layout(self) -> dict[str, int]:
        return self.self_attn.cache_layout()

    def step(self, x: Tensor, memory: SourceMemory, source: Cache, cache: Cache, t: int, shared: dict) -> Tensor:
        x = x + self.drop(self.self_attn.step(self.self_norm(x), cache, t))
        return self._merged_ffn(x, memory, source)


class CANResidualDecoderLayer(CANDecoderLayer):
    """CAN keeping the attention's own residual: Eq. 13 plus ``S + C``, a control on the choice above.

    The standard layer's output holds the attention's output ``S + C`` twice: through the FFN and
    directly, on the residual stream. :class:`CANDecoderLayer` drops the direct term; this layer keeps it,
    mixed by the same softmax from d-wide values and an output map::

        y = x + concat_i(A_i [z Wr1_i ; H Wr2_i]) Wo + bo
              + ReLU(z W1 + b1 + concat_i(A_i [z W~v1_i ; H W~v2_i])) W2 + b2

    Head i's values are its 4d/h-wide slice for the FFN and its d/h-wide slice for the residual, side by
    side, so one attention per head serves both.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        d, f = cfg.d_model, cfg.ffn_dim
        self.x_proj = nn.Linear(d, 3 * d + 2 * f)  # [Wq | Wk1 | W~v1 | Wr1 | W1]
        self.h_proj = nn.Linear(d, 2 * d + f)  # [Wk2 | W~v2 | Wr2]
        self.out = nn.Linear(d, d)  # Wo of the residual S + C
        init_linear(self.x_proj, [d, d, f, d, f])
        init_linear(self.h_proj, [d, f, d])
        init_linear(self.out)

    def _values(self, ffn_part: Tensor, residual_part: Tensor) -> Tensor:
        """Each head's FFN slice and residual slice side by side: (rows, heads, length, (f + d) / h)."""
        return torch.cat([split_heads(ffn_part, self.heads), split_heads(residual_part, self.heads)], dim=-1)

    def project_source(self, memory: SourceMemory) -> Cache:
        k, v, r = self.h_proj(memory.states).split([self.d, self.f, self.d], dim=-1)
        return {"k": split_heads(k, self.heads), "v": self._values(v, r)}

    def _project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        q, k, v, r, hidden = self.x_proj(self.norm(x)).split([self.d, self.d, self.f, self.d, self.f], dim=-1)
        return split_heads(q, self.heads), split_heads(k, self.heads), self._values(v, r), hidden

    def _output(self, x: Tensor, hidden: Tensor, mixed: Tensor) -> Tensor:
        to_ffn, residual = mixed.split([self.f // self.heads, self.d // self.heads], dim=-1)
        ffn = self.ffn(hidden, merge_heads(to_ffn))
        return x + self.drop(self.out(merge_heads(residual))) + self.drop(ffn)

    def cache_layout(self) -> dict[str, int]:
        return {"kv": 2 * self.d + self.f}

    def step(self, x: Tensor, memory: SourceMemory, source: Cache, cache: Cache, t: int, shared: dict) -> Tensor:
        q, k, v, hidden = self._project(x)  # values: each head's FFN slice and residual slice side by side
        kv = torch.cat([merge_heads(k), merge_heads(v)], dim=-1)[:, 0]  # (rows, d + f + d), as fill_sources lays it
        mixed = joint_step(merge_heads(q), kv, cache["kv"], memory, source, t, self.heads, self.attn_drop)
        return self._output(x, hidden, split_heads(mixed, self.heads))


class CANNoSplitDecoderLayer(CANDecoderLayer):
    """CAN without the head split of its 4d-wide values: Eqs. 11 and 13 as the paper writes them, one head.

    The paper's equations have one softmax and one attention matrix ``A`` over [prefix ; source], which mixes
    the whole 4d-wide values; :class:`CANDecoderLayer` reads them with h heads, head i mixing its own 4d/h-wide
    slice. Here one head attends with the d-wide queries and keys, scores scaled by sqrt(d) (the head width, as
    everywhere in canlib, and the paper's sqrt(d)), a control on that reading::

        A = SoftMax(z Wq [z Wk1 ; H Wk2]^T / sqrt(d))
        y = x + ReLU(z W1 + b1 + A [z W~v1 ; H W~v2]) W2 + b2

    The weights are CAN's, map for map; a decode step launches CAN's kernels (one attention call, one head).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.heads = 1


def build_decoder_layers(cfg: ModelConfig) -> nn.ModuleList:
    """The decoder stack of ``cfg.decoder_kind``, or of ``cfg.decoder_layer_kinds`` one layer at a time
    ("mixed"); SAN: leaders at the start of each group."""
    simple = {
        "standard": StandardDecoderLayer,
        "aan": AANDecoderLayer,
        "can": CANDecoderLayer,
        "can_attn": CANAttnDecoderLayer,
        "can_ffn": CANFFNDecoderLayer,
        "can_residual": CANResidualDecoderLayer,
        "can_nosplit": CANNoSplitDecoderLayer,
    }
    if cfg.decoder_kind != "san":
        return nn.ModuleList(simple[kind](cfg) for kind in cfg.layer_kinds())
    layers = []
    for size in cfg.sharing_groups():
        layers += [SANDecoderLayer(cfg, leader=(i == 0)) for i in range(size)]
    return nn.ModuleList(layers)
