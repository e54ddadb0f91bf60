"""Batched beam search over the incremental decoding API, for every decoder kind.

The source is encoded once per sentence and shared by its ``beam`` decoder rows
(``model.encode(src, beam=k)``); the decoder cache is preallocated for the longest
output and reordered in place after each step. Sentences whose search is over are
dropped from the batch (``reorder_cache`` selects whole sentences).

Conventions (fairseq's):

* ``len_penalty`` alpha: a finished hypothesis of n tokens scores
  ``sum(log p(tokens + EOS)) / (n + 1) ** alpha``: the length counts the EOS.
  Default alpha = 1.0 (fairseq's ``--lenpen`` default). With ``forced_length`` there
  is no EOS: the score is ``sum(log p(tokens)) / N ** alpha``.
* Maximum output length per sentence: ``floor(max_len_a * src_len + max_len_b)`` tokens
  before the EOS, where ``src_len`` counts the source's non-pad ids (its EOS included);
  at that length EOS is forced. ``min_len`` tokens must come before EOS.
* At each step the 2k best (row, token) candidates of a sentence are taken; an EOS
  candidate among the top k finishes a hypothesis, and the k best non-EOS candidates
  become the live beams. PAD and BOS are never generated.

Stopping (``stop``):

* ``"fairseq"`` (default): a sentence stops once it has k finished hypotheses, or at its
  maximum length. This is fairseq's rule and an approximation: with alpha > 0 a live beam
  could still end with a better normalised score than the finished ones.
* ``"exact"``: a sentence stops once its best finished score is at least an upper bound on
  what any live beam can still reach. Log-probabilities are <= 0, so a live beam with
  cumulative score s <= 0 ending at length L in [t+2, max_len+1] scores at most
  ``s / L**alpha``, which is monotone in L, so the bound is the larger of the two ends.
  No beam the search still holds can beat the returned best, so stopping changes nothing.

Banned tokens (PAD, BOS, EOS before ``min_len``): by default (``renormalize=False``, fairseq's
convention) their probability is removed and the rest is NOT renormalised, so every score is
the model's log-probability of the output (the tests pin this). ``renormalize=True``
renormalises over the tokens allowed at each step, as CTranslate2 (and Hugging Face) do by
masking logits before the softmax. With it, our beam search returns CTranslate2's outputs on
the same weights, except where a hypothesis reaches the maximum length: CTranslate2 ends it
there without an EOS, we force one (``tests/test_ctranslate.py`` checks this).

On CUDA, run the model in half precision (``model.half()``); ``captured=True`` replays each
step from a CUDA graph (:class:`GraphedDecoder`). On CPU the model stays in float32.
"""
from __future__ import annotations

import math
import time
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor

from canlib.model.seq2seq import DecoderCache, Seq2Seq

STOP_RULES = ("fairseq", "exact")


@dataclass
class SearchResult:
    """Best hypothesis per sentence (ids without BOS/EOS) and its length-normalised score."""

    tokens: list[list[int]]
    scores: list[float]
    hypotheses: list[list[tuple[list[int], float]]] | None = None  # every finished one, best first
    timing: dict[str, float] | None = None  # seconds: encode, layers, output, search, total; steps


class _Timer:
    """Accumulates wall time per named part, synchronising CUDA around each part."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.totals: dict[str, float] = {}
        self.part = ""

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def __call__(self, part: str) -> "_Timer":
        self.part = part
        return self

    def __enter__(self) -> None:
        self.sync()
        self.start = time.perf_counter()

    def __exit__(self, *exc) -> None:
        self.sync()
        self.totals[self.part] = self.totals.get(self.part, 0.0) + time.perf_counter() - self.start


class GraphedDecoder:
    """``decode_step`` replayed from CUDA graphs, one graph per step index.

    A CUDA graph replays fixed kernels on fixed memory, so the cache a graph reads and
    writes must outlive one search: this object keeps one cache (and its graphs, in their
    own memory pool) per shape (sentences, beam, source length, steps), for at most
    ``max_shapes`` shapes, and copies each new batch's encoder output into it. When a
    search drops finished sentences the buffers change, and the rest of that search runs
    eagerly (at batch size 1 that never happens). ``capture=False`` runs the same
    static-buffer path without graphs (how it is tested on CPU).
    """

    def __init__(self, model: Seq2Seq, capture: bool = True, max_shapes: int = 32) -> None:
        self.model = model
        self.capture = capture
        self.max_shapes = max_shapes
        self.entries: dict[tuple, dict] = {}

    @staticmethod
    def _buffers(cache: DecoderCache) -> list[int]:
        return [buf.data_ptr() for rows in cache.rows for buf in rows.values()]

    def init_cache(self, memory, max_len: int) -> DecoderCache:
        key = (tuple(memory.states.shape), memory.beam, max_len, memory.states.dtype)
        entry = self.entries.get(key)
        if entry is None or self._buffers(entry["cache"]) != entry["ptrs"]:
            if len(self.entries) >= self.max_shapes:
                self.entries.pop(next(iter(self.entries)))
            cache = self.model.init_cache(memory, max_len=max_len)
            cache.memory.score_bias(memory.states.dtype)  # built now, outside any graph
            self.entries[key] = dict(
                cache=cache, ptrs=self._buffers(cache), graphs={}, pool=None,
                tokens=torch.zeros(cache.num_rows, dtype=torch.long, device=memory.states.device),
            )
            return cache
        cache = entry["cache"]
        cache.memory.states.copy_(memory.states)
        cache.memory.pad_mask.copy_(memory.pad_mask)
        cache.memory.bias.copy_(memory.score_bias(cache.memory.bias.dtype))  # graphs read it in place
        for layer, source in zip(self.model.decoder_layers, cache.sources):
            for name, value in layer.project_source(cache.memory).items():
                source[name].copy_(value)
        for rows in cache.rows:  # AAN keeps a running sum; prefix buffers are written before read
            for buf in rows.values():
                buf.zero_()
        cache.step = 0
        return cache

    def decode_step(self, tokens: Tensor, cache: DecoderCache) -> Tensor:
        entry = next((e for e in self.entries.values() if e["cache"] is cache), None)
        if entry is None or self._buffers(cache) != entry["ptrs"]:
            return self.model.decode_step(tokens, cache)
        t = cache.step
        entry["tokens"].copy_(tokens)
        if not self.capture:
            return self.model.decode_step(entry["tokens"], cache)
        if t not in entry["graphs"]:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up (cuBLAS workspaces) before capture
                self.model.decode_step(entry["tokens"], cache)
            torch.cuda.current_stream().wait_stream(side)
            cache.step = t
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=entry["pool"]):  # steps replay in capture order
                out = self.model.decode_step(entry["tokens"], cache)
            entry["pool"] = graph.pool()
            entry["graphs"][t] = (graph, out)
        graph, out = entry["graphs"][t]
        graph.replay()  # rewrites position t of the cache, exactly what the eager step writes
        cache.step = t + 1
        return out


def output_lengths(src: Tensor, pad_id: int, a: float, b: float, min_len: int, limit: int) -> list[int]:
    """Per-sentence maximum output length ``floor(a * src_len + b)``, within [max(min_len, 1), limit]."""
    src_lens = src.ne(pad_id).sum(dim=1).tolist()
    return [min(max(int(math.floor(a * n + b)), min_len, 1), limit) for n in src_lens]


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    src: Tensor,
    beam: int = 4,
    len_penalty: float = 1.0,
    max_len_a: float = 1.2,
    max_len_b: float = 10,
    min_len: int = 1,
    forced_length: int | None = None,
    return_all: bool = False,
    timing: bool = False,
    stop: str = "fairseq",
    graphs: GraphedDecoder | None = None,
    renormalize: bool = False,
) -> SearchResult:
    """Translate a right-padded batch ``src`` (B, S) of source ids (each ending in EOS).

    ``forced_length=N`` generates exactly N tokens per sentence with EOS disallowed (speed
    measurement with random weights). ``graphs`` replays steps from CUDA graphs.
    See the module docstring for the scoring, length and stopping conventions.
    """
    if beam < 1:
        raise ValueError(f"beam={beam}: must be at least 1")
    if stop not in STOP_RULES:
        raise ValueError(f"stop={stop!r}: choose one of {', '.join(STOP_RULES)}")
    if forced_length is not None and forced_length < 1:
        raise ValueError(f"forced_length={forced_length}: must be at least 1")
    cfg = model.cfg
    device = model.embed.weight.device
    timer = _Timer(device) if timing else None
    part = timer if timer else (lambda name: nullcontext())
    total_start = time.perf_counter()
    src = src.to(device)
    n, k, vocab = src.size(0), beam, cfg.vocab_size
    limit = cfg.max_len - 1
    if forced_length is not None:
        if forced_length > cfg.max_len:
            raise ValueError(f"forced_length={forced_length} exceeds the model's max_len={cfg.max_len}")
        lengths = [forced_length] * n
        steps = forced_length
    else:
        lengths = output_lengths(src, cfg.pad_id, max_len_a, max_len_b, min_len, limit)
        steps = max(lengths) + 1  # the last step can only emit EOS

    with part("encode"):
        memory = model.encode(src, beam=k)
        cache = graphs.init_cache(memory, steps) if graphs else model.init_cache(memory, max_len=steps)
    step_fn = graphs.decode_step if graphs else model.decode_step

    def decode(tokens: Tensor) -> Tensor:
        if not timer:
            return step_fn(tokens, cache)
        with part("layers"):
            hidden = model.decode_hidden(tokens, cache)
        with part("output"):
            return model.output_log_probs(hidden)

    tokens = torch.full((n * k, steps + 1), cfg.pad_id, dtype=torch.long, device=device)
    tokens[:, 0] = cfg.bos_id
    cum = torch.zeros(n, k, device=device)
    cum[:, 1:] = float("-inf")  # at the first step only one beam per sentence is live
    alive = list(range(n))  # original index of each sentence still in the batch
    finished: list[list[tuple[list[int], float]]] = [[] for _ in range(n)]
    base = torch.arange(n, device=device)[:, None] * k
    rank = torch.arange(2 * k, device=device)

    for t in range(steps):
        m = len(alive)
        logp = decode(tokens[:, t])
        logp[:, cfg.pad_id] = float("-inf")
        logp[:, cfg.bos_id] = float("-inf")
        if forced_length is not None or t < min_len:
            logp[:, cfg.eos_id] = float("-inf")
        else:
            ending = [j for j, s in enumerate(alive) if lengths[s] == t]
            if ending:  # these sentences reached their maximum length: EOS only
                rows = torch.tensor([j * k + r for j in ending for r in range(k)], device=device)
                eos = logp[rows, cfg.eos_id]
                logp[rows] = float("-inf")
                logp[rows, cfg.eos_id] = eos
        if renormalize:
            logp = logp.log_softmax(dim=-1)
        cand = (cum[:, :, None] + logp.view(m, k, vocab)).view(m, k * vocab)

        if forced_length is not None:
            top_s, top_i = cand.topk(k, dim=1)
            index = (base[:m] + torch.div(top_i, vocab, rounding_mode="floor")).view(-1)
            tokens = tokens.index_select(0, index)
            tokens[:, t + 1] = (top_i % vocab).view(-1)
            cum = top_s
            if t + 1 < steps:
                model.reorder_cache(cache, index, validate=False)
            continue

        top_s, top_i = cand.topk(2 * k, dim=1)
        top_beam = torch.div(top_i, vocab, rounding_mode="floor")
        top_tok = top_i % vocab
        is_eos = top_tok.eq(cfg.eos_id)
        # the k best non-EOS candidates (rank order kept) become the live beams
        pick = (rank + is_eos * (2 * k)).topk(k, dim=1, largest=False).indices
        live_s, live_beam, live_tok = top_s.gather(1, pick), top_beam.gather(1, pick), top_tok.gather(1, pick)
        ended = is_eos[:, :k] & top_s[:, :k].isfinite()
        ended_c, top_s_c, beam_c, live_s_c = ended.cpu(), top_s.cpu(), top_beam.cpu(), live_s[:, 0].cpu()
        if bool(ended_c.any()):
            which = ended_c.nonzero().tolist()
            rows = torch.tensor([j * k + int(beam_c[j, r]) for j, r in which], device=device)
            texts = tokens.index_select(0, rows)[:, 1 : t + 1].tolist()
            for (j, r), text in zip(which, texts):
                score = float(top_s_c[j, r]) / (t + 1) ** len_penalty
                finished[alive[j]].append((text, score))
        keep = []
        for j, s in enumerate(alive):
            if lengths[s] <= t:
                continue
            if stop == "fairseq":
                over = len(finished[s]) >= k
            else:
                live = float(live_s_c[j])
                bound = max(live / (t + 2) ** len_penalty, live / (lengths[s] + 1) ** len_penalty)
                over = bool(finished[s]) and max(h[1] for h in finished[s]) >= bound
            if not over:
                keep.append(j)
        if not keep:
            break
        keep_t = torch.tensor(keep, device=device)
        index = (base[keep_t] + live_beam.index_select(0, keep_t)).view(-1)
        tokens = tokens.index_select(0, index)
        tokens[:, t + 1] = live_tok.index_select(0, keep_t).view(-1)
        cum = live_s.index_select(0, keep_t)
        alive = [alive[j] for j in keep]
        model.reorder_cache(cache, index, validate=False)

    if forced_length is not None:
        texts = tokens[:, 1 : steps + 1].tolist()
        scores = (cum / steps**len_penalty).view(-1).tolist()
        for row, (text, score) in enumerate(zip(texts, scores)):
            finished[alive[row // k]].append((text, score))
    for hyps in finished:
        hyps.sort(key=lambda h: -h[1])
    result = SearchResult(
        tokens=[hyps[0][0] for hyps in finished],
        scores=[hyps[0][1] for hyps in finished],
        hypotheses=finished if return_all else None,
    )
    if timer:
        timer.sync()
        totals = {name: timer.totals.get(name, 0.0) for name in ("encode", "layers", "output")}
        totals["total"] = time.perf_counter() - total_start
        totals["search"] = totals["total"] - totals["encode"] - totals["layers"] - totals["output"]
        totals["steps"] = t + 1
        result.timing = totals
    return result


def greedy_search(model: Seq2Seq, src: Tensor, **kwargs) -> SearchResult:
    """Beam search with one beam: the arg-max token at every step."""
    return beam_search(model, src, beam=1, **kwargs)


def make_batch(sentences: list[list[int]], pad_id: int, eos_id: int, device: torch.device | str = "cpu") -> Tensor:
    """Right-padded (B, S) source batch of id lists, each followed by EOS."""
    width = max(len(s) for s in sentences) + 1
    out = torch.full((len(sentences), width), pad_id, dtype=torch.long)
    for i, ids in enumerate(sentences):
        out[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        out[i, len(ids)] = eos_id
    return out.to(device)


__all__ = ["SearchResult", "beam_search", "greedy_search", "GraphedDecoder", "make_batch", "output_lengths", "STOP_RULES"]
