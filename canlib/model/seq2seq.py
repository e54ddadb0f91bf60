"""The encoder-decoder model and its incremental-decoding API.

``Seq2Seq.forward`` is the teacher-forced pass used for training. Search and
benchmarks use the incremental API instead::

    memory = model.encode(src)  # once per batch of sentences
    cache = model.init_cache(memory, beam=4, max_len=T)
    for t in range(T):
        logp = model.decode_step(tokens, cache)  # (sentences*beam, vocab)
        ...
        model.reorder_cache(cache, index)  # after pruning beams

Both paths run the same layer code and give the same log-probabilities (tests pin
this to 1e-5), the way fairseq keeps its incremental state honest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from canlib.model.attention import (
    FeedForward,
    SelfAttention,
    SourceMemory,
    causal_mask,
    fast_cpu_linears,
    reorder_moved_rows,
    rows_linear,
    sinusoidal_table,
)
from canlib.model.config import ModelConfig
from canlib.model.layers import build_decoder_layers, carve, fill_sources, row_caches


class EncoderLayer(nn.Module):
    """Pre-norm Transformer encoder layer: self-attention then FFN."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_norm = nn.LayerNorm(cfg.d_model)
        self.self_attn = SelfAttention(cfg.d_model, cfg.heads, cfg.attn_dropout)
        self.ffn_norm = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.relu_dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, pad_blocked: Tensor) -> Tensor:
        x = x + self.drop(self.self_attn(self.self_norm(x), pad_blocked))
        return x + self.drop(self.ffn(self.ffn_norm(x)))


@dataclass
class DecoderCache:
    """Decoding state of ``memory.sentences * memory.beam`` rows.

    ``sources[i]`` holds layer i's per-sentence tensors (never copied per beam);
    ``rows[i]`` holds its per-row state, views of ``buffer`` (lead + max_len, rows, width), the
    one time-major buffer of every layer (:func:`canlib.model.layers.row_caches`): prefix position t
    of every layer lies at ``buffer[lead + t]``. There are two such buffers: a reorder gathers the
    current one's rows into the other, in one kernel, and the other becomes current (``flips`` counts
    the reorders; :meth:`Seq2Seq.reorder_rows`).
    """

    memory: SourceMemory
    sources: list[dict[str, Tensor]]
    max_len: int
    buffers: tuple[Tensor, Tensor]
    views: tuple[list[dict[str, Tensor]], list[dict[str, Tensor]]]  # the layers' views of each buffer
    lead: int = 0  # positions in front of the prefix: a joint layer's source keys|values
    step: int = 0
    flips: int = 0

    @property
    def num_rows(self) -> int:
        return self.memory.sentences * self.memory.beam

    @property
    def buffer(self) -> Tensor:
        """The current buffer: what the next step reads and writes."""
        return self.buffers[self.flips % 2]

    @property
    def spare(self) -> Tensor:
        return self.buffers[(self.flips + 1) % 2]

    @property
    def rows(self) -> list[dict[str, Tensor]]:
        """Each layer's state in the current buffer."""
        return self.views[self.flips % 2]

    def seek(self, t: int, written: bool = False) -> None:
        """Set the host's view to step t of a search whose every step reorders by a gather into the other buffer
        (a GPU's reorder): before step t's decoder layers, or after them with ``written`` (position t written).
        After t such reorders buffer t % 2 is current. A CUDA graph replays a step's writes to the buffers but none
        of its Python, so a runner that replays steps sets the view with this."""
        self.step = t + 1 if written else t
        self.flips = t % 2


class Seq2Seq(nn.Module):
    """Pre-norm Transformer with a pluggable decoder-layer kind and tied embeddings.

    One embedding matrix serves the source, the target and the output projection
    (a joint vocabulary, as the paper uses for En-De); embeddings are scaled by
    sqrt(d) and added to fixed sinusoidal positions; both stacks end in a LayerNorm.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, d, padding_idx=cfg.pad_id)
        nn.init.normal_(self.embed.weight, mean=0.0, std=d**-0.5)
        with torch.no_grad():
            self.embed.weight[cfg.pad_id].zero_()
        self.register_buffer("positions", sinusoidal_table(cfg.max_len, d), persistent=False)
        self.drop = nn.Dropout(cfg.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.enc_layers))
        self.encoder_norm = nn.LayerNorm(d)
        self.decoder_layers = build_decoder_layers(cfg)
        self.decoder_norm = nn.LayerNorm(d)
        fast_cpu_linears(self)  # few-row products in CPU inference (``canlib.model.attention``'s CPU section)

    # -- shared pieces ---------------------------------------------------------
    def embed_tokens(self, tokens: Tensor, offset: int = 0) -> Tensor:
        """sqrt(d) * embedding + position, the scale and the sum in one kernel."""
        length = tokens.size(1)
        if offset + length > self.cfg.max_len:
            raise ValueError(
                f"sequence length {offset + length} exceeds max_len={self.cfg.max_len} of the position table"
            )
        positions = self.positions[offset : offset + length].to(self.embed.weight.dtype)
        return self.drop(torch.add(positions, self.embed(tokens), alpha=math.sqrt(self.cfg.d_model)))

    def output_logits(self, hidden: Tensor) -> Tensor:
        """Final LayerNorm and tied output projection: the logits, in the model's precision."""
        return rows_linear(self.decoder_norm(hidden), self.embed.weight)

    def output_log_probs(self, hidden: Tensor) -> Tensor:
        """:meth:`output_logits`, then log-softmax in float32 (the cast inside the softmax's kernel on a
        GPU, not a separate copy of the logits)."""
        return F.log_softmax(self.output_logits(hidden), dim=-1, dtype=torch.float32)

    # -- teacher forcing ---------------------------------------------------------
    def encode(self, src: Tensor, beam: int = 1) -> SourceMemory:
        """Encode (B, S) source ids; ``beam`` is how many decoder rows will read each sentence."""
        pad = src.eq(self.cfg.pad_id)
        x = self.embed_tokens(src)
        blocked = pad[:, None, None, :]
        for layer in self.encoder_layers:
            x = layer(x, blocked)
        return SourceMemory(self.encoder_norm(x), pad, beam)

    def decode(self, tgt_in: Tensor, memory: SourceMemory) -> Tensor:
        """Teacher-forced decoder hidden states (rows, T, d) for target inputs (rows, T)."""
        x = self.embed_tokens(tgt_in)
        blocked = causal_mask(tgt_in.size(1), tgt_in.device)
        shared: dict = {}
        for layer in self.decoder_layers:
            x = layer(x, memory, layer.project_source(memory), blocked, shared)
        return x

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Log-probabilities (B, T, V) of the next target token at each position."""
        return self.output_log_probs(self.decode(tgt_in, self.encode(src)))

    # -- incremental decoding ------------------------------------------------------
    def init_cache(self, memory: SourceMemory, beam: int | None = None, max_len: int | None = None) -> DecoderCache:
        """Per-sentence source projections (once) and per-row buffers for ``max_len`` steps."""
        if beam is not None:
            memory = SourceMemory(memory.states, memory.pad_mask, beam)
        max_len = max_len or self.cfg.max_len
        if max_len > self.cfg.max_len:
            raise ValueError(f"max_len={max_len} exceeds the model's position table ({self.cfg.max_len})")
        sources = self.project_sources(memory)
        buffer, rows, lead = row_caches(self.decoder_layers, memory, sources, max_len)
        return self._cache(memory, sources, max_len, buffer, lead)

    def _cache(
        self, memory: SourceMemory, sources: list[dict[str, Tensor]], max_len: int, buffer: Tensor, lead: int
    ) -> DecoderCache:
        """A cache around ``buffer`` and a copy of it (the reorder's target, same source part)."""
        buffers = (buffer, buffer.clone())
        views = tuple(carve(b, self.decoder_layers, lead) for b in buffers)
        return DecoderCache(memory=memory, sources=sources, max_len=max_len, buffers=buffers, views=views, lead=lead)

    @torch.no_grad()
    def load_memory(self, cache: DecoderCache, memory: SourceMemory) -> None:
        """Reuse ``cache`` (built for the same shapes) for a new batch's ``memory``, in place (a CUDA graph
        reads these buffers at fixed addresses): its encoder output, source projections and source part,
        and a cleared prefix."""
        cache.memory.states.copy_(memory.states)
        cache.memory.pad_mask.copy_(memory.pad_mask)
        cache.memory.bias.copy_(memory.score_bias(cache.memory.bias.dtype))
        if cache.memory.row_bias is not None:
            cache.memory.row_bias.copy_(memory.joint_bias(cache.memory.row_bias.size(-1), cache.memory.row_bias.dtype))
        for source, values in zip(cache.sources, self.project_sources(cache.memory)):
            for name, value in values.items():
                source[name].copy_(value)
        cache.seek(0)
        for buffer, views in zip(cache.buffers, cache.views):
            buffer[cache.lead :].zero_()
            fill_sources(views, self.decoder_layers, cache.sources, cache.memory)

    def project_sources(self, memory: SourceMemory) -> list[dict[str, Tensor]]:
        """Every decoder layer's per-sentence source tensors (cross-attention keys and values)."""
        return [layer.project_source(memory) for layer in self.decoder_layers]

    def decode_step(self, tokens: Tensor, cache: DecoderCache) -> Tensor:
        """Feed one token per row (shape (rows,)); return next-token log-probs (rows, V)."""
        return self.output_log_probs(self.decode_hidden(tokens, cache))

    def decode_hidden(self, tokens: Tensor, cache: DecoderCache) -> Tensor:
        """The decoder-stack half of ``decode_step``: hidden states (rows, d) before the final
        LayerNorm and output projection (timed separately by the benchmarks)."""
        t = cache.step
        if t >= cache.max_len:
            raise ValueError(f"decode_step: the cache holds max_len={cache.max_len} steps and is full")
        if tokens.shape != (cache.num_rows,):
            raise ValueError(f"decode_step: tokens has shape {tuple(tokens.shape)}, expected ({cache.num_rows},)")
        x = self.embed_tokens(tokens[:, None], offset=t)
        shared: dict = {}
        for layer, source, rows in zip(self.decoder_layers, cache.sources, cache.rows):
            x = layer.step(x, cache.memory, source, rows, t, shared)
        cache.step = t + 1
        return x[:, 0]

    @torch.no_grad()
    def reorder_cache(self, cache: DecoderCache, index: Tensor, validate: bool = True) -> None:
        """Make new row i continue old row ``index[i]``, in place.

        Each consecutive group of ``beam`` new rows must come from one sentence (beam
        search reorders within a sentence). ``index`` may also drop whole sentences
        (finished ones): then the per-sentence tensors are selected too. With
        ``beam == 1`` any permutation or selection of rows is allowed.
        ``validate=False`` skips the check (and its device sync) in a hot loop.
        """
        beam = cache.memory.beam
        same_rows = index.numel() == cache.num_rows
        index = index.to(cache.memory.states.device)
        if index.dim() != 1 or index.numel() == 0 or index.numel() % beam:
            raise ValueError(f"reorder_cache: index must be a non-empty 1-D tensor of a multiple of beam={beam} rows")
        groups = torch.div(index.view(-1, beam), beam, rounding_mode="floor")
        if validate and not bool((groups == groups[:, :1]).all()):
            raise ValueError(
                "reorder_cache: a group of beam rows mixes sentences; rows may only move within their sentence"
            )
        sentences = groups[:, 0]
        keep_all = sentences.numel() == cache.memory.sentences
        if keep_all and bool((sentences == torch.arange(sentences.numel(), device=index.device)).all()):
            self.reorder_rows(cache, index)  # rows move within their sentences: the source part stays
            return
        cache.memory = cache.memory.select(sentences)
        cache.sources = [{k: v.index_select(0, sentences) for k, v in src.items()} for src in cache.sources]
        moved = cache.buffer.index_select(1, index)  # sentences moved or dropped: their source parts too
        if same_rows:
            for buffer in cache.buffers:
                buffer.copy_(moved)
        else:
            replaced = self._cache(cache.memory, cache.sources, cache.max_len, moved, cache.lead)
            cache.buffers, cache.views, cache.flips = replaced.buffers, replaced.views, 0
        if cache.lead:
            cache.memory.joint_bias(cache.buffer.size(0), cache.buffer.dtype)

    @torch.no_grad()
    def reorder_rows(self, cache: DecoderCache, index: Tensor) -> None:
        """Make row i continue row ``index[i]``, in place, for the written prefix of every buffer.

        The beam search's hot path: ``index`` keeps the number of rows and moves rows only within
        their sentence (unchecked), nothing is reallocated and nothing is read back to the host,
        so the call can be captured in a CUDA graph. Every layer's prefix lies in one buffer, gathered
        into the other buffer in one kernel whatever the depth, which then becomes current (the source
        part in front is the same for a sentence's rows and in both buffers).
        """
        span = slice(cache.lead, cache.lead + cache.step)
        if index.device.type == "cpu" and reorder_moved_rows(cache.buffer[span], index):
            return  # a CPU copies the few moved rows in place (no graphs there to keep in step)
        torch.index_select(cache.buffer[span], 1, index, out=cache.spare[span])
        cache.flips += 1  # the spare buffer, just written, becomes the current one

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
