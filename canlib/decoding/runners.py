"""How the beam search's steps are run on a GPU: replayed from CUDA graphs.

A CUDA graph replays fixed kernels on fixed memory, so whatever a graph reads and writes (the decoder
cache, the search state) must outlive one search. Both runners here keep, per shape of search, one such
set of buffers and its graphs in a :class:`GraphCache` (at most ``max_shapes`` shapes, each with its own
memory pool), and copy each new batch into it:

* :class:`GraphedDecoder`, a :class:`~canlib.decoding.decoder.Decoder`: per step index, one graph for the
  decoder layers and, per shape, one for the output projection and log-softmax;
* :class:`StepGraphs`: whole search steps (decoder, output projection, top-k, bookkeeping, cache reorder)
  from one graph per step index, and the encoder from one more, each shape's in a :class:`CapturedSearch`
  (``capture(t)`` records step t, ``replay(t)`` runs it).

``capture=False`` runs the same static-buffer paths without graphs: how they are tested on a CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from canlib.decoding.decoder import CompiledDecoder, EagerDecoder
from canlib.decoding.search import BeamSearch, SearchResult, SearchSettings, new_search, output_lengths
from canlib.model.attention import SourceMemory
from canlib.model.seq2seq import DecoderCache, Seq2Seq


def capture(fn: Callable[[], Any], owner: dict) -> tuple[torch.cuda.CUDAGraph, Any]:
    """Warm ``fn`` up on a side stream (cuBLAS workspaces), then capture it as a CUDA graph in ``owner["pool"]``,
    the memory pool that the graphs of ``owner`` share (the first capture makes it)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=owner["pool"]):
        out = fn()
    if owner["pool"] is None:
        owner["pool"] = graph.pool()
    return graph, out


class GraphCache(dict):
    """Entries keyed by the shape of a search, at most ``max_shapes`` (the oldest dropped first), each a
    dict of the buffers its graphs use, its ``graphs`` and the memory ``pool`` they share."""

    def __init__(self, max_shapes: int) -> None:
        super().__init__()
        self.max_shapes = max_shapes

    def add(self, key: tuple, **buffers: Any) -> dict:
        if len(self) >= self.max_shapes:
            self.pop(next(iter(self)))
        entry = self[key] = dict(buffers, graphs={}, pool=None)
        return entry


class GraphedDecoder(EagerDecoder):
    """Decode steps replayed from CUDA graphs: per step index, one graph for the decoder layers
    and, per shape, one for the output projection and log-softmax (two, so that
    :class:`~canlib.decoding.timing.TimedDecoder` can time them apart).

    A CUDA graph replays fixed kernels on fixed memory, so the cache a graph reads and writes
    must outlive one search: this object keeps one cache (and its graphs, in their own memory
    pool) per shape (sentences, beam, source length, steps), for at most ``max_shapes`` shapes,
    and copies each new batch's encoder output into it. When a search drops finished sentences
    the buffers change, and the rest of that search runs eagerly. ``capture=False`` runs the
    same static-buffer path without graphs (how it is tested on CPU).

    The warm-up before a capture really runs the step; the decoder layers' steps are therefore
    written to be repeatable (a step reads positions < t and writes position t of its cache, so
    running it twice leaves the same state: ``tests/core/test_model.py`` pins this for every kind).
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
                key,
                cache=cache,
                buffers=cache.buffers,
                output=None,  # the buffers its graphs read and write
                tokens=torch.zeros(cache.num_rows, dtype=torch.long, device=device),
                hidden=torch.zeros(cache.num_rows, self.model.cfg.d_model, dtype=memory.states.dtype, device=device),
            )
            return cache
        self.model.load_memory(entry["cache"], memory)
        return entry["cache"]

    def _entry(self, cache: DecoderCache) -> dict | None:
        return next((e for e in self.graphs.values() if e["cache"] is cache and cache.buffers is e["buffers"]), None)

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
                cache.seek(t)  # the warm-up ran the step once: run it again from step t
                return self.model.decode_hidden(entry["tokens"], cache)

            entry["graphs"][t] = capture(step, entry)
        graph, out = entry["graphs"][t]
        graph.replay()  # rewrites position t of the cache, exactly what the eager step writes
        cache.seek(t, written=True)
        return out

    def output_log_probs(self, hidden: Tensor) -> Tensor:
        entry = next((e for e in self.graphs.values() if e["hidden"].shape == hidden.shape), None)
        if entry is None or not self.capture:
            return self.model.output_log_probs(hidden)
        entry["hidden"].copy_(hidden)
        if entry["output"] is None:
            entry["output"] = capture(lambda: self.model.output_log_probs(entry["hidden"]), entry)
        graph, out = entry["output"]
        graph.replay()
        return out

    # output_logits (the fused search: eager here, whole-step graphs in StepGraphs), reorder and compact are the
    # eager decoder's: when a search drops finished sentences the buffers change, and the rest of it runs eagerly


class CapturedSearch:
    """One static search (:class:`~canlib.decoding.search.BeamSearch` with ``static=True``: its tensors outlive a
    search, so a graph can read and write them) and the CUDA graphs of its steps and of its encoder.

    :meth:`capture` records step t (once, at its first use), :meth:`replay` runs it, :meth:`encode` copies a new
    batch in. Before a capture, CUDA's warm-up runs the step once for real; the state is saved before and
    restored after it, so that nothing runs twice. A replay changes the buffers, not the cache's Python view of
    them, which :meth:`~canlib.model.seq2seq.DecoderCache.seek` sets. ``parts=True`` captures each step as three
    graphs (the decoder layers, the output projection, the search proper), so that a clock can be marked
    between them. ``capture=False`` runs the same static path eagerly (how it is tested on a CPU).
    """

    PARTS = ("layers", "output", "search")

    def __init__(self, search: BeamSearch, src: Tensor, capture: bool, parts: bool) -> None:
        self.search, self.cache = search, search.cache
        self.capturing, self.parts = capture, parts
        self.src = src.clone()  # the encoder graph's input
        self.encode_graph: torch.cuda.CUDAGraph | None = None
        self.graphs: dict[int, list[torch.cuda.CUDAGraph]] = {}
        self.between: dict[int, tuple[Tensor, Tensor]] = {}  # parts: what one graph passes the next, kept alive
        self.pool: dict = {"pool": None}  # the memory pool every graph of this search shares (:func:`capture`)

    def encode(self, src: Tensor, lengths: list[int]) -> None:
        """A new batch of this shape: encoded into the cache (the encoder, the source projections and the cache
        reset, replayed as one graph), the search state reset for these output lengths."""
        model, cache, beam, encode = self.search.model, self.cache, self.search.k, self.search.decoder.encode
        if not self.capturing:
            model.load_memory(cache, encode(src, beam))
        else:
            self.src.copy_(src)
            if self.encode_graph is None:
                self.encode_graph, _ = capture(lambda: model.load_memory(cache, encode(self.src, beam)), self.pool)
            self.encode_graph.replay()
            cache.seek(0)
        self.search.reset(lengths)

    def capture(self, t: int) -> None:
        """Record the graph(s) of step t, each run from the view of the cache it replays on."""
        search, cache = self.search, self.cache
        saved = [x.clone() for x in search.state()]
        if not self.parts:
            graphs = [capture(lambda: (cache.seek(t), search.step(t)), self.pool)[0]]
        else:
            layers, hidden = capture(lambda: (cache.seek(t), search.hidden(t))[1], self.pool)
            layers.replay()  # the next warm-up reads real hidden states
            output, logp = capture(lambda: search.log_probs(hidden), self.pool)
            output.replay()
            select, _ = capture(lambda: (cache.seek(t, written=True), search.select(t, logp)), self.pool)
            graphs = [layers, output, select]
            self.between[t] = (hidden, logp)
        for x, s in zip(search.state(), saved):  # undo the warm-ups
            x.copy_(s)
        self.graphs[t] = graphs

    def replay(self, t: int, mark: Callable[[str], None]) -> None:
        """Step t from its graph(s), captured at the first use; ``mark(part)`` before each part (``parts``)."""
        search, mark = self.search, mark if self.parts else (lambda part: None)
        if not self.capturing:  # the same static step, eagerly: BeamSearch.step, its parts marked
            mark("layers")
            hidden = search.hidden(t)
            mark("output")
            logp = search.log_probs(hidden)
            mark("search")
            search.select(t, logp)
            return
        if t not in self.graphs:
            self.capture(t)
        for part, graph in zip(self.PARTS, self.graphs[t]):
            mark(part)
            graph.replay()
        self.cache.seek(t + 1)


class StepGraphs:
    """Whole search steps (decoder, output projection, log-softmax, top-k, bookkeeping and cache
    reorder) replayed from one CUDA graph per step index, and the encoder (with the source
    projections) from one more.

    Graphs replay fixed kernels on fixed memory, so this object keeps, per shape of search
    (sentences, beam, source length, steps, settings), one :class:`CapturedSearch` whose tensors
    persist across searches, for at most ``max_shapes`` shapes. Each new batch is copied into it.
    ``capture=False`` runs the same static path without graphs (how it is tested on CPU).

    ``compiled="inductor"`` runs the encoder, the decoder layers and the output through a
    :class:`~canlib.decoding.decoder.CompiledDecoder` (compiled at the warm-up before each capture, so a
    capture records the compiled kernels).

    ``parts=True`` captures each step as three graphs, the decoder layers, the output projection
    and the search proper, replayed back to back, so that a :class:`~canlib.decoding.timing.PartClock`
    passed to :meth:`search` can mark the time between them (:func:`~canlib.decoding.timing.timed_search`): the
    benchmark's
    breakdown of the graphed search, whose parts add up to what a whole-step graph takes plus
    two graph launches per step.
    """

    def __init__(
        self,
        model: Seq2Seq,
        capture: bool = True,
        max_shapes: int = 8,
        parts: bool = False,
        compiled: str | None = None,
    ) -> None:
        self.model, self.capture, self.parts = model, capture, parts
        # the encoder, decoder layers and output compiled with this torch.compile backend ("inductor"), their
        # kernels captured
        self.decoder = CompiledDecoder(model, backend=compiled) if compiled else None
        self.graphs = GraphCache(max_shapes)

    def search(self, src: Tensor, settings: SearchSettings = SearchSettings(), clock: Any = None) -> SearchResult:
        """One search (``clock``: a :class:`~canlib.decoding.timing.PartClock` to mark the parts on)."""
        model = self.model
        mark = clock.mark if clock is not None else (lambda part: None)
        src = src.to(model.embed.weight.device)
        mark("encode")
        lengths = output_lengths(src, model.cfg, settings)
        # the shape of the search: its tensors' sizes and the steps it runs (how often the host looks changes neither)
        key = (tuple(src.shape), max(lengths), replace(settings, check_every=None), model.embed.weight.dtype)
        entry = self.graphs.get(key)
        if entry is None:
            search = new_search(model, src, settings, self.decoder, static=True)
            entry = self.graphs.add(key, steps=CapturedSearch(search, src, self.capture, self.parts))
        else:
            entry["steps"].encode(src, lengths)
        steps: CapturedSearch = entry["steps"]
        mark("search")
        steps.search.run(step=lambda t: steps.replay(t, mark))
        return steps.search.result()


__all__ = ["CapturedSearch", "GraphCache", "GraphedDecoder", "StepGraphs", "capture"]
