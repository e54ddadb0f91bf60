"""Timing a search by its parts, without synchronising: encoder, decoder layers, output projection and
the search's own bookkeeping, on one timeline whose parts add up to the whole search."""

from __future__ import annotations

import time

import torch
from torch import Tensor

from canlib.decoding.decoder import Decoder
from canlib.decoding.runners import StepGraphs
from canlib.decoding.search import SearchResult, SearchSettings, beam_search
from canlib.model.attention import SourceMemory
from canlib.model.seq2seq import DecoderCache


class PartClock:
    """One timeline cut into labelled parts: ``mark(part)`` means "from here on, the time is
    ``part``'s", and :meth:`seconds` adds up each part's intervals, so the parts sum exactly to the
    time from the first mark to the last.

    On CUDA a mark is an event recorded on the stream, with no synchronisation: the search runs as
    it does untimed (the host still runs ahead of the GPU), and each part gets the GPU timeline
    between its marks, idle waits for the host included. Elsewhere a mark reads the host's clock."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.marks: list[tuple[str, object]] = []

    def mark(self, part: str) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append((part, event))
        else:
            self.marks.append((part, time.perf_counter()))

    def seconds(self) -> dict[str, float]:
        """Seconds per part, from the marks so far (waits for the GPU once)."""
        if self.cuda:
            torch.cuda.synchronize()
        totals: dict[str, float] = {}
        for (part, a), (_, b) in zip(self.marks, self.marks[1:]):
            totals[part] = totals.get(part, 0.0) + (a.elapsed_time(b) / 1000 if self.cuda else b - a)
        return totals


class TimedDecoder:
    """Wraps a decoder and marks its parts on a :class:`PartClock`: ``encode`` (encoder and cache
    set-up), ``layers`` (decoder layers) and ``output`` (final norm, projection, log-softmax).
    Whatever runs between them is the search's own bookkeeping (``search``)."""

    PARTS = ("encode", "layers", "output")

    def __init__(self, inner: Decoder, clock: PartClock) -> None:
        self.inner, self.clock = inner, clock
        self.model = inner.model

    def _timed(self, part: str, fn, *args):
        self.clock.mark(part)
        out = fn(*args)
        self.clock.mark("search")
        return out

    def encode(self, src: Tensor, beam: int) -> SourceMemory:
        return self._timed("encode", self.inner.encode, src, beam)

    def init_cache(self, memory: SourceMemory, max_len: int) -> DecoderCache:
        return self._timed("encode", self.inner.init_cache, memory, max_len)

    def decode_hidden(self, tokens: Tensor, cache: DecoderCache) -> Tensor:
        return self._timed("layers", self.inner.decode_hidden, tokens, cache)

    def output_log_probs(self, hidden: Tensor) -> Tensor:
        return self._timed("output", self.inner.output_log_probs, hidden)

    def output_logits(self, hidden: Tensor) -> Tensor:
        return self._timed("output", self.inner.output_logits, hidden)

    def reorder(self, cache: DecoderCache, index: Tensor) -> None:
        self.inner.reorder(cache, index)  # the search's own time

    def compact(self, cache: DecoderCache, rows: Tensor) -> None:
        self.inner.compact(cache, rows)


def timed_search(
    decoder: Decoder | StepGraphs, src: Tensor, settings: SearchSettings = SearchSettings()
) -> tuple[SearchResult, dict[str, float]]:
    """One search, its parts marked on a :class:`PartClock`: the result and seconds per part
    (encode, layers, output, search = the bookkeeping between them, total = their sum, the whole
    search). ``decoder`` is a decoder (wrapped in a :class:`TimedDecoder`) or a :class:`StepGraphs`
    built with ``parts=True`` (each step replayed as three graphs, the clock marked between them)."""
    clock = PartClock(decoder.model.embed.weight.device.type == "cuda")
    clock.mark("search")
    if isinstance(decoder, StepGraphs):
        with torch.no_grad():
            result = decoder.search(src, settings, clock=clock)
    else:
        result = beam_search(decoder.model, src, settings, decoder=TimedDecoder(decoder, clock))
    clock.mark("end")
    seconds = clock.seconds()
    totals = {part: seconds.get(part, 0.0) for part in TimedDecoder.PARTS + ("search",)}
    totals["total"] = sum(totals.values())
    return result, totals


__all__ = ["PartClock", "TimedDecoder", "timed_search"]
