"""How the beam search's steps are run on a GPU: replayed from CUDA graphs.

A CUDA graph replays fixed kernels on fixed memory, so whatever a graph reads and writes (the decoder
cache, the search state) must outlive one search. Both runners here keep, per shape of search, one such
set of buffers and its graphs in a :class:`GraphCache` (at most ``max_shapes`` shapes, each with its own
memory pool), and copy each new batch into it:

* :class:`GraphedDecoder`, a :class:`~canlib.decoding.decoder.Decoder`: per step index, one graph for the
  decoder layers and, per shape, one for the output projection and log-softmax;
* :class:`StepGraphs`: whole search steps (decoder, output projection, top-k, bookkeeping, cache reorder)
  from one graph per step index, and the encoder from one more.

``capture=False`` runs the same static-buffer paths without graphs: how they are tested on a CPU.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from canlib.decoding.decoder import CompiledDecoder, EagerDecoder
from canlib.decoding.search import BeamSearch, ForcedLength, FreeLength, SearchResult, output_lengths
from canlib.model.attention import SourceMemory
from canlib.model.seq2seq import DecoderCache, Seq2Seq


def capture(fn: Callable[[], Any], pool: Any) -> tuple[torch.cuda.CUDAGraph, Any]:
    """Warm ``fn`` up on a side stream (cuBLAS workspaces), then capture it as a CUDA graph in ``pool``."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = fn()
    return graph, out


class GraphCache:
    """Entries keyed by the shape of a search, at most ``max_shapes`` (the oldest dropped first), each a
    dict of the buffers its graphs use, its ``graphs`` and the memory ``pool`` they share."""

    def __init__(self, max_shapes: int) -> None:
        self.max_shapes = max_shapes
        self.entries: dict[tuple, dict] = {}

    def get(self, key: tuple) -> dict | None:
        return self.entries.get(key)

    def add(self, key: tuple, **buffers: Any) -> dict:
        if len(self.entries) >= self.max_shapes:
            self.entries.pop(next(iter(self.entries)))
        entry = self.entries[key] = dict(buffers, graphs={}, pool=None)
        return entry

    def pop(self, key: tuple) -> None:
        self.entries.pop(key, None)

    def values(self):
        return self.entries.values()

    @staticmethod
    def capture(entry: dict, fn: Callable[[], Any]) -> tuple[torch.cuda.CUDAGraph, Any]:
        """:func:`capture` in the entry's memory pool (the first capture makes it)."""
        graph, out = capture(fn, entry["pool"])
        if entry["pool"] is None:
            entry["pool"] = graph.pool()
        return graph, out


class GraphedDecoder(EagerDecoder):
    """Decode steps replayed from CUDA graphs: per step index, one graph for the decoder layers
    and, per shape, one for the output projection and log-softmax (two, so that
    :class:`~canlib.bench.timing.TimedDecoder` can time them apart).

    A CUDA graph replays fixed kernels on fixed memory, so the cache a graph reads and writes
    must outlive one search: this object keeps one cache (and its graphs, in their own memory
    pool) per shape (sentences, beam, source length, steps), for at most ``max_shapes`` shapes,
    and copies each new batch's encoder output into it. When a search drops finished sentences
    the buffers change, and the rest of that search runs eagerly. ``capture=False`` runs the
    same static-buffer path without graphs (how it is tested on CPU).

    The warm-up before a capture really runs the step; the decoder layers' steps are therefore
    written to be repeatable (a step reads positions < t and writes position t of its cache, so
    running it twice leaves the same state: ``tests/test_model.py`` pins this for every kind).
    """

    def __init__(self, model: Seq2Seq, capture: bool = True, max_shapes: int = 32) -> None:
        super().__init__(model)
        self.capture = capture
        self.graphs = GraphCache(max_shapes)

    def init_cache(self, memory: SourceMemory, max_len: int) -> DecoderCache:
        key = (tuple(memory.states.shape), memory.beam, max_len, memory.states.dtype)
        entry = self.graphs.get(key)
        if entry is None or entry["cache"].buffers is not entry["buffers"]:
            cache = self.model.init_cache(memory, max_len=max_len)  # every tensor, score biases included
            device = memory.states.device
            self.graphs.add(
                key, cache=cache, buffers=cache.buffers, output=None,  # the buffers its graphs read and write
                tokens=torch.zeros(cache.num_rows, dtype=torch.long, device=device),
                hidden=torch.zeros(cache.num_rows, self.model.cfg.d_model, dtype=memory.states.dtype, device=device),
            )
            return cache
        self.model.load_memory(entry["cache"], memory)
        return entry["cache"]

    def _entry(self, cache: DecoderCache) -> dict | None:
        entry = next((e for e in self.graphs.values() if e["cache"] is cache), None)
        return entry if entry is not None and cache.buffers is entry["buffers"] else None

    def decode_hidden(self, tokens: Tensor, cache: DecoderCache) -> Tensor:
        entry = self._entry(cache)
        if entry is None:
            return self.model.decode_hidden(tokens, cache)
        t = cache.step
        entry["tokens"].copy_(tokens)
        if not self.capture:
            return self.model.decode_hidden(entry["tokens"], cache)
        if t not in entry["graphs"]:
            def step() -> Tensor:
                cache.step = t
                return self.model.decode_hidden(entry["tokens"], cache)

            entry["graphs"][t] = self.graphs.capture(entry, step)
        graph, out = entry["graphs"][t]
        graph.replay()  # rewrites position t of the cache, exactly what the eager step writes
        cache.step = t + 1
        return out

    def output_log_probs(self, hidden: Tensor) -> Tensor:
        entry = next((e for e in self.graphs.values() if e["hidden"].shape == hidden.shape), None)
        if entry is None or not self.capture:
            return self.model.output_log_probs(hidden)
        entry["hidden"].copy_(hidden)
        if entry["output"] is None:
            entry["output"] = self.graphs.capture(entry, lambda: self.model.output_log_probs(entry["hidden"]))
        graph, out = entry["output"]
        graph.replay()
        return out

    # output_logits (the fused search: eager here, whole-step graphs in StepGraphs), reorder and compact are the
    # eager decoder's: when a search drops finished sentences the buffers change, and the rest of it runs eagerly


class StepGraphs:
    """Whole search steps (decoder, output projection, log-softmax, top-k, bookkeeping and cache
    reorder) replayed from one CUDA graph per step index, and the encoder (with the source
    projections) from one more.

    Graphs replay fixed kernels on fixed memory, so this object keeps, per shape of search
    (sentences, beam, source length, steps, policy, ...), one :class:`BeamSearch` whose tensors
    persist across searches, and its graphs, for at most ``max_shapes`` shapes. Each new batch
    is copied into that state. Before a capture, the step runs once for real on a side stream
    (CUDA's warm-up); the state is saved before and restored after it, so that nothing runs
    twice. ``capture=False`` runs the same static path without graphs (how it is tested on CPU).

    ``compiled="inductor"`` runs the encoder, the decoder layers and the output through a
    :class:`~canlib.decoding.decoder.CompiledDecoder` (compiled at the warm-up before each capture, so a
    capture records the compiled kernels).

    ``parts=True`` captures each step as three graphs, the decoder layers, the output projection
    and the search proper, replayed back to back, so that a :class:`~canlib.bench.timing.PartClock`
    passed to :meth:`search` can mark the time between them (:func:`~canlib.bench.timing.timed_search`): the benchmark's
    breakdown of the graphed search, whose parts add up to what a whole-step graph takes plus
    two graph launches per step.
    """

    def __init__(self, model: Seq2Seq, capture: bool = True, max_shapes: int = 8, parts: bool = False,
                 fused: bool = False, compiled: str | None = None) -> None:
        self.model = model
        self.capture = capture
        self.parts = parts
        self.fused = fused  # the forced-length select step as two Triton kernels (canlib.decoding.fused)
        # the encoder, decoder layers and output compiled with this torch.compile backend ("inductor"), their kernels captured
        self.decoder = CompiledDecoder(model, backend=compiled) if compiled else None
        self.graphs = GraphCache(max_shapes)

    def search(self, src: Tensor, beam: int, policy: ForcedLength | FreeLength, len_penalty: float = 1.0,
               renormalize: bool = False, return_all: bool = False, check_every: int | None = None,
               clock: Any = None) -> SearchResult:
        """One search (``clock``: a :class:`~canlib.bench.timing.PartClock` to mark the parts on)."""
        model = self.model
        src = src.to(model.embed.weight.device)
        key = (tuple(src.shape), beam, policy, len_penalty, renormalize, return_all, model.embed.weight.dtype)
        entry = self.graphs.get(key)
        if clock is not None:
            clock.mark("encode")
        if entry is None:
            search = BeamSearch(model, src, beam, policy, len_penalty, renormalize, return_all, self.decoder,
                                static=True, fused=self.fused)
            entry = self.graphs.add(key, search=search, src=src.clone(), encode=None)
        else:
            search = entry["search"]
            self._encode(entry, src, beam)
            if search.forced:
                search.reset([policy.length] * src.size(0))
            else:
                lengths = output_lengths(src, model.cfg.pad_id, policy.max_len_a, policy.max_len_b, policy.min_len,
                                         model.cfg.max_len - 1)
                if max(lengths) + 1 != search.steps:  # another step count: not this shape after all
                    self.graphs.pop(key)
                    return self.search(src, beam, policy, len_penalty, renormalize, return_all, check_every, clock)
                search.ending_steps = set(lengths)
                search.reset(lengths)
        mark = clock.mark if clock is not None else (lambda part: None)
        mark("search")

        def at(t: int, step: int | None = None) -> None:
            """The host's view of the cache at step t. On a GPU every step gathers the cache into the other
            buffer, so after t steps the current one is the (t % 2)-th; a replayed graph changes the buffers,
            not these Python numbers, so they are set here. Without graphs the eager steps keep them."""
            search.cache.step = t if step is None else step
            if self.capture:
                search.cache.flips = t % 2

        def whole(t: int) -> None:
            at(t)
            search.step(t)

        def capture(t: int) -> None:
            """The graph(s) of step t; the warm-ups ran the step for real: undo that."""
            saved = [x.clone() for x in search.state()]
            if not self.parts:
                graphs = [self.graphs.capture(entry, lambda: whole(t))[0]]
            else:
                def layers() -> Tensor:
                    at(t)
                    return search.hidden(t)

                def select() -> None:
                    at(t, step=t + 1)  # after the layers' step, before the reorder
                    search.select(t, logp)

                g1, hidden = self.graphs.capture(entry, layers)
                g1.replay()  # the next warm-up reads real hidden states
                g2, logp = self.graphs.capture(entry, lambda: search.log_probs(hidden))
                g2.replay()
                g3, _ = self.graphs.capture(entry, select)
                graphs = [g1, g2, g3]
                entry.setdefault("between", {})[t] = (hidden, logp)  # alive: the graphs pass them on
            for x, s in zip(search.state(), saved):
                x.copy_(s)
            entry["graphs"][t] = graphs

        def replay(t: int) -> None:
            if self.capture and t not in entry["graphs"]:
                capture(t)
            if not self.parts:
                if self.capture:
                    entry["graphs"][t][0].replay()
                else:
                    whole(t)
            elif self.capture:
                for part, graph in zip(("layers", "output", "search"), entry["graphs"][t]):
                    mark(part)
                    graph.replay()
            else:
                at(t)
                mark("layers")
                hidden = search.hidden(t)
                mark("output")
                logp = search.log_probs(hidden)
                mark("search")
                search.select(t, logp)
            search.cache.step = t + 1

        search.run(check_every, step=replay)
        return search.result()

    def _encode(self, entry: dict, src: Tensor, beam: int) -> None:
        """Encode ``src`` into the entry's cache: the encoder, the source projections and the
        cache reset replayed as one more graph."""
        model, cache = self.model, entry["search"].cache
        encode = self.decoder.encode if self.decoder is not None else lambda x, beam: model.encode(x, beam=beam)
        if not self.capture:
            model.load_memory(cache, encode(src, beam))
            return
        entry["src"].copy_(src)
        if entry["encode"] is None:
            entry["encode"], _ = self.graphs.capture(entry, lambda: model.load_memory(cache, encode(entry["src"], beam)))
        entry["encode"].replay()
        cache.step = 0


__all__ = ["GraphCache", "GraphedDecoder", "StepGraphs", "capture"]
