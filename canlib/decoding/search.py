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

Structure (fairseq keeps its search apart from the loss; canlib keeps the search apart from how the
decoder is run and timed):

* a *decoder* runs the model (:class:`canlib.decoding.decoder.Decoder`: encode, init_cache,
  decode_hidden, output_log_probs or output_logits, reorder, compact): :class:`~canlib.decoding.decoder.EagerDecoder`
  by default; :mod:`canlib.decoding.runners` replays steps from CUDA graphs and
  :mod:`canlib.bench.timing` times their parts;
* a *length policy* decides what a step may emit and when a hypothesis ends:
  :class:`FreeLength` (EOS, maximum lengths, finished hypotheses, stopping rules) or
  :class:`ForcedLength` (exactly N tokens, no EOS: speed measurement with random weights);
* :class:`BeamSearch` holds the search state in device tensors and advances it one step at a
  time, every write in place, with no host synchronisation inside a step: finished
  hypotheses, length penalty, EOS handling and reordering stay on the device. The host looks
  at the state only every ``check_every`` steps (is every sentence done? then stop, and drop
  finished sentences from the batch); on the CPU that look is free and happens every step;
* a step has three parts, :meth:`BeamSearch.hidden` (decoder layers), :meth:`BeamSearch.log_probs`
  (output projection) and :meth:`BeamSearch.select` (the search proper: masks, top-k, finished
  hypotheses, reorder); the top-k of a row of beam x V scores is taken in two rounds of short
  top-k's (:class:`ChunkedTopK`), a handful of GPU kernels instead of PyTorch's multi-block select.
  With a forced length the step keeps no token matrix: each step writes its (row, token) back-pointers
  with one gather from a lookup table, and :meth:`BeamSearch.result` follows them back once at the end;
  ``fused=True`` takes that select step from the raw logits in two Triton kernels (:mod:`canlib.decoding.fused`).

On CUDA, run the model in half precision (``model.half()``). On CPU the model stays in float32.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from canlib.decoding import fused as fused_step
from canlib.decoding.decoder import Decoder, EagerDecoder
from canlib.model.seq2seq import Seq2Seq

STOP_RULES = ("fairseq", "exact")
NEG_INF = float("-inf")


@dataclass
class SearchResult:
    """Best hypothesis per sentence (ids without BOS/EOS) and its length-normalised score."""

    tokens: list[list[int]]
    scores: list[float]
    hypotheses: list[list[tuple[list[int], float]]] | None = None  # every finished one, best first


# -- length policies: what a step may emit, when a hypothesis ends ----------------------------


def output_lengths(src: Tensor, pad_id: int, a: float, b: float, min_len: int, limit: int) -> list[int]:
    """Per-sentence maximum output length ``floor(a * src_len + b)``, within [max(min_len, 1), limit]."""
    src_lens = src.ne(pad_id).sum(dim=1).tolist()
    return [min(max(int(math.floor(a * n + b)), min_len, 1), limit) for n in src_lens]


@dataclass(frozen=True)
class ForcedLength:
    """Exactly ``length`` tokens per sentence, EOS never allowed; every live beam is a hypothesis
    at the end, scored ``sum(log p) / length ** alpha``."""

    length: int

    def __post_init__(self) -> None:
        if self.length < 1:
            raise ValueError(f"forced_length={self.length}: must be at least 1")


@dataclass(frozen=True)
class FreeLength:
    """Hypotheses end with EOS, by ``max_len_a * src_len + max_len_b`` at the latest, after at
    least ``min_len`` tokens; a sentence stops by the ``stop`` rule (see the module docstring)."""

    max_len_a: float = 1.2
    max_len_b: float = 10
    min_len: int = 1
    stop: str = "fairseq"

    def __post_init__(self) -> None:
        if self.stop not in STOP_RULES:
            raise ValueError(f"stop={self.stop!r}: choose one of {', '.join(STOP_RULES)}")


class ChunkedTopK:
    """The ``picks`` best of each row of an (m, width) score matrix, in two rounds of short top-k's.

    One top-k over a whole row (beam x V = 128,000 scores at V=32k) runs on a GPU as PyTorch's
    multi-block radix select, about 15 kernels, a fifth of a decode step's GPU time at batch 1
    (``scripts/gpu_profile.sh``). Cut the row into ``chunks`` pieces of ``chunk`` scores, take the
    ``picks`` best of every piece (one kernel over many short slices, unsorted), then the ``picks``
    best of those (one more, sorted): a score among the row's best is among its piece's best, so the
    same values come out in the same order; among equal scores the index picked may differ, as
    it may between any two top-k kernels. Rows that cannot be cut evenly into pieces of 128 to 1024
    scores use one plain top-k.
    """

    def __init__(self, width: int, picks: int, device: torch.device, longest: int = 1024, shortest: int = 128) -> None:
        self.width, self.picks = width, picks
        self.chunk = next((w for w in range(longest, shortest - 1, -1)
                           if width % w == 0 and width // w >= 2 and w >= 2 * picks), None)
        self.chunks = width // self.chunk if self.chunk else 1
        # where each piece starts in the row, as (1, chunks, 1) for a broadcast add
        self.starts = (torch.arange(self.chunks, device=device) * (self.chunk or 0)).view(1, -1, 1)

    def __call__(self, scores: Tensor, values: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Values (m, picks), best first, and their column indices in ``scores`` (m, width); ``values``:
        an (m, picks) tensor to write the values into (no copy)."""
        if self.chunk is None:
            top_s, top_i = scores.topk(self.picks, dim=1)
            return (values.copy_(top_s) if values is not None else top_s), top_i
        m, c, k = scores.size(0), self.chunks, self.picks
        piece_s, piece_i = scores.view(m * c, self.chunk).topk(k, dim=1, sorted=False)
        where = torch.empty(m, k, dtype=torch.long, device=scores.device)
        top_s = torch.topk(piece_s.view(m, c * k), k, dim=1, out=(values if values is not None else piece_s.new_empty(m, k), where))[0]
        return top_s, (piece_i.view(m, c, k) + self.starts).view(m, c * k).gather(1, where)


POLICY_OPTIONS = ("forced_length", "max_len_a", "max_len_b", "min_len", "stop")


def length_policy(forced_length: int | None = None, max_len_a: float = 1.2, max_len_b: float = 10, min_len: int = 1,
                  stop: str = "fairseq") -> ForcedLength | FreeLength:
    """The policy :func:`beam_search`'s length options describe."""
    return ForcedLength(forced_length) if forced_length is not None else FreeLength(max_len_a, max_len_b, min_len, stop)


# -- the search --------------------------------------------------------------------------------


class BeamSearch:
    """The state of one beam search over a batch, in device tensors, advanced by :meth:`step`.

    ``step(t)`` reads and writes only tensors allocated here (every write in place) and never
    reads a value back to the host, so a step can be replayed from a CUDA graph and a loop of
    steps runs ahead of the GPU. ``check()`` is the only place the host looks at the state.
    ``static=True`` keeps the shapes fixed (no sentence is dropped) and treats every step the
    same whatever the batch (what :class:`~canlib.decoding.runners.StepGraphs` needs).
    """

    def __init__(self, model: Seq2Seq, src: Tensor, beam: int, policy: ForcedLength | FreeLength,
                 len_penalty: float = 1.0, renormalize: bool = False, return_all: bool = False,
                 decoder: Decoder | None = None, static: bool = False, fused: bool = False) -> None:
        if beam < 1:
            raise ValueError(f"beam={beam}: must be at least 1")
        if fused and (not isinstance(policy, ForcedLength) or renormalize):
            raise ValueError("fused=True: the fused select step serves forced-length searches without renormalize")
        if fused and not fused_step.available() and model.embed.weight.device.type != "meta":  # meta: counted, not run
            raise ValueError("fused=True needs the triton package (PyTorch's CUDA wheels bring it)")
        cfg = model.cfg
        self.model, self.cfg, self.policy = model, cfg, policy
        self.decoder = decoder or EagerDecoder(model)
        self.forced = isinstance(policy, ForcedLength)
        self.k, self.len_penalty, self.renormalize, self.return_all, self.static = beam, len_penalty, renormalize, return_all, static
        device = model.embed.weight.device
        self.device = device
        src = src.to(device)
        n, k = src.size(0), beam
        self.n = n
        if self.forced:
            if policy.length > cfg.max_len:
                raise ValueError(f"forced_length={policy.length} exceeds the model's max_len={cfg.max_len}")
            self.steps = policy.length
            lengths = [policy.length] * n
        else:
            lengths = output_lengths(src, cfg.pad_id, policy.max_len_a, policy.max_len_b, policy.min_len, cfg.max_len - 1)
            self.steps = max(lengths) + 1  # the last step can only emit EOS
        self.ending_steps = set(lengths)
        memory = self.decoder.encode(src, beam)
        self.cache = self.decoder.init_cache(memory, self.steps)
        self.base = torch.arange(n, device=device)[:, None] * k
        self.rank = torch.arange(2 * k, device=device)
        self.top = ChunkedTopK(k * cfg.vocab_size, k if self.forced else 2 * k, device)
        self.never = torch.tensor([cfg.pad_id, cfg.bos_id], device=device)  # never generated
        self.no_eos = torch.tensor([cfg.pad_id, cfg.bos_id, cfg.eos_id], device=device)
        self.cum = torch.empty(n, k, device=device)
        self.fused = fused_step.FusedSelect(n * k, cfg.vocab_size, k, device, cfg.pad_id, cfg.bos_id, cfg.eos_id) if fused else None
        if self.forced:
            # history[t] = (the row each row's prefix came from, the token it read at step t): back-pointers,
            # written at once by one gather from ``pairs`` (candidate j of a sentence -> (j // V, j % V))
            self.history = torch.empty(self.steps + 1, 2, n * k, dtype=torch.long, device=device)
            j = torch.arange(k * cfg.vocab_size, device=device)
            self.pairs = torch.stack([torch.div(j, cfg.vocab_size, rounding_mode="floor"), j % cfg.vocab_size])
            self.first_row = self.base.view(-1).repeat_interleave(k)  # each sentence's first row, per row
        else:
            self.tokens = torch.empty(n * k, self.steps + 1, dtype=torch.long, device=device)
            width = self.steps
            slots = (2 * k if policy.stop == "fairseq" else k * self.steps) if return_all else 0
            self.alive = torch.arange(n, device=device)  # original index of each sentence in the batch
            self.lengths = torch.empty(n, dtype=torch.long, device=device)
            self.len_norm = torch.empty(n, dtype=torch.float64, device=device)  # (max length + 1) ** alpha
            self.done = torch.empty(n, dtype=torch.bool, device=device)
            self.count = torch.empty(n, dtype=torch.long, device=device)  # finished hypotheses
            self.best_score = torch.empty(n, dtype=torch.float64, device=device)
            self.best_tokens = torch.empty(n, width, dtype=torch.long, device=device)
            self.best_len = torch.empty(n, dtype=torch.long, device=device)
            # every finished hypothesis (return_all), in the order found; slot ``slots`` absorbs the rest
            self.all_tokens = torch.empty(n, slots + 1, width, dtype=torch.long, device=device)
            self.all_score = torch.empty(n, slots + 1, dtype=torch.float64, device=device)
            self.all_len = torch.empty(n, slots + 1, dtype=torch.long, device=device)
        self.reset(lengths)

    def state(self) -> list[Tensor]:
        """Every tensor a step writes (the search's and the cache's), e.g. to save and restore it."""
        names = ("history", "cum") if self.forced else (
            "tokens", "cum", "done", "count", "best_score", "best_tokens", "best_len", "all_tokens", "all_score", "all_len")
        return [getattr(self, name) for name in names] + list(self.cache.buffers)

    def reset(self, lengths: list[int]) -> None:
        """Start state (in place): BOS, one live beam per sentence, nothing finished."""
        self.cum.zero_()
        self.cum[:, 1:] = NEG_INF  # at the first step only one beam per sentence is live
        if self.forced:
            self.history.zero_()
            self.history[0, 0] = torch.arange(self.history.size(2), device=self.device)
            self.history[0, 1] = self.cfg.bos_id
        else:
            self.tokens.fill_(self.cfg.pad_id)
            self.tokens[:, 0] = self.cfg.bos_id
            self.lengths.copy_(torch.tensor(lengths))
            self.len_norm.copy_(torch.tensor([(n + 1) ** self.len_penalty for n in lengths], dtype=torch.float64))
            self.done.zero_()
            self.count.zero_()
            self.best_score.fill_(NEG_INF)
            self.best_tokens.fill_(self.cfg.pad_id)
            self.best_len.zero_()
            self.all_score.fill_(NEG_INF)

    def inputs(self, t: int) -> Tensor:
        """The token each row reads at step t (rows,)."""
        return self.history[t, 1] if self.forced else self.tokens[:, t]

    def hidden(self, t: int) -> Tensor:
        """Part 1 of a step: the decoder layers on the tokens of step t (rows, d)."""
        return self.decoder.decode_hidden(self.inputs(t), self.cache)

    def log_probs(self, hidden: Tensor) -> Tensor:
        """Part 2: final norm, output projection and log-softmax (rows, V); with ``fused``, the logits (the
        fused select takes the log-softmax itself)."""
        return self.decoder.output_logits(hidden) if self.fused else self.decoder.output_log_probs(hidden)

    def _mask(self, t: int, logp: Tensor) -> Tensor:
        """Remove the tokens step t may not emit (in place), renormalise if asked."""
        cfg = self.cfg
        if self.forced or t < self.policy.min_len:
            logp.index_fill_(1, self.no_eos, NEG_INF)
            return logp.log_softmax(dim=-1) if self.renormalize else logp
        logp.index_fill_(1, self.never, NEG_INF)
        if self.static or t in self.ending_steps:  # sentences at their maximum length: EOS only
            at_max = self.lengths.eq(t)[:, None].expand(-1, self.k).reshape(-1, 1)
            eos = logp[:, cfg.eos_id].clone()
            logp.masked_fill_(at_max, NEG_INF)
            logp[:, cfg.eos_id] = eos
        return logp.log_softmax(dim=-1) if self.renormalize else logp

    def _advance(self, t: int, index: Tensor, new_tokens: Tensor, scores: Tensor) -> None:
        """Live beams continue rows ``index`` with ``new_tokens``: tokens, scores and cache, in place."""
        self.tokens.copy_(self.tokens.index_select(0, index))
        self.tokens[:, t + 1] = new_tokens.view(-1)
        self.cum.copy_(scores)
        if t + 1 < self.steps:
            self.decoder.reorder(self.cache, index)

    def step(self, t: int) -> None:
        """Advance every sentence by one token (sentences already done run on, ignored)."""
        self.select(t, self.log_probs(self.hidden(t)))

    def select(self, t: int, logp: Tensor) -> None:
        """Part 3 of a step, the search proper: choose the continuations from ``logp`` (rows, V),
        record finished hypotheses, reorder tokens, scores and cache."""
        m, k, vocab = self.cum.size(0), self.k, self.cfg.vocab_size
        if self.fused:  # two kernels from the logits: canlib.decoding.fused
            self.fused(logp, self.cum, self.history[t + 1])
            if t + 1 < self.steps:
                self.decoder.reorder(self.cache, self.history[t + 1, 0])
            return
        logp = self._mask(t, logp)
        cand = (self.cum[:, :, None] + logp.view(m, k, vocab)).view(m, k * vocab)
        if self.forced:  # the best k of each sentence: scores straight into cum, back-pointers into history
            _, top_i = self.top(cand, values=self.cum)
            pointers = torch.index_select(self.pairs, 1, top_i.view(-1), out=self.history[t + 1])
            if self.n > 1:  # candidate j of sentence s continues row s * k + j // V
                pointers[0].add_(self.first_row)
            if t + 1 < self.steps:
                self.decoder.reorder(self.cache, pointers[0])
            return
        top_s, top_i = self.top(cand)
        top_beam = torch.div(top_i, vocab, rounding_mode="floor")
        top_tok = top_i % vocab
        is_eos = top_tok.eq(self.cfg.eos_id)
        # the k best non-EOS candidates (rank order kept) become the live beams
        pick = (self.rank + is_eos * (2 * k)).topk(k, dim=1, largest=False).indices
        live_s, live_beam, live_tok = top_s.gather(1, pick), top_beam.gather(1, pick), top_tok.gather(1, pick)
        ended = is_eos[:, :k] & top_s[:, :k].isfinite() & ~self.done[:, None]
        self._finish(t, m, ended, top_s[:, :k].double() / (t + 1) ** self.len_penalty, top_beam[:, :k])
        if self.policy.stop == "fairseq":
            over = self.count.index_select(0, self.alive) >= k
        else:  # no live beam can beat the best finished one (module docstring)
            live = live_s[:, 0].double()
            bound = torch.maximum(live / (t + 2) ** self.len_penalty, live / self.len_norm)
            over = self.count.index_select(0, self.alive).gt(0) & self.best_score.index_select(0, self.alive).ge(bound)
        self.done |= self.lengths.le(t) | over
        self._advance(t, (self.base[:m] + live_beam).view(-1), live_tok, live_s)

    def _finish(self, t: int, m: int, ended: Tensor, score: Tensor, beam_of: Tensor) -> None:
        """Record the hypotheses that ended with EOS at step t (``ended`` (m, k), rank order)."""
        k = self.k
        rows = self.base[:m] + beam_of  # (m, k) the row each candidate extends
        scored = torch.where(ended, score, NEG_INF)
        first_best = scored.argmax(dim=1, keepdim=True)  # ties: the earliest found wins, as a stable sort keeps it
        new_best = scored.gather(1, first_best).squeeze(1)
        old_best = self.best_score.index_select(0, self.alive)
        better = new_best > old_best
        best_text = self.tokens.index_select(0, rows.gather(1, first_best).squeeze(1))[:, 1:]  # columns > t are PAD
        self.best_score.index_copy_(0, self.alive, torch.where(better, new_best, old_best))
        self.best_tokens.index_copy_(0, self.alive, torch.where(better[:, None], best_text, self.best_tokens.index_select(0, self.alive)))
        self.best_len.index_copy_(0, self.alive, torch.where(better, t, self.best_len.index_select(0, self.alive)))
        if self.return_all:
            slots = self.all_score.size(1) - 1
            slot = self.count.index_select(0, self.alive)[:, None] + ended.cumsum(dim=1) - 1
            slot = torch.where(ended, slot.clamp(max=slots), slots)
            sentence = self.alive[:, None].expand(-1, k)
            texts = self.tokens.index_select(0, rows.view(-1))[:, 1:].view(m, k, -1)
            self.all_tokens.index_put_((sentence, slot), texts)
            self.all_score.index_put_((sentence, slot), score)
            self.all_len.index_put_((sentence, slot), torch.full_like(slot, t))
        self.count.index_add_(0, self.alive, ended.sum(dim=1))

    def check(self, compact: bool) -> bool:
        """The host's look at the state: True when every sentence is done; with ``compact``,
        drop the finished sentences from the batch (and the cache)."""
        if self.forced:
            return False
        done = self.done.tolist()
        if all(done):
            return True
        if compact and any(done):
            keep = torch.tensor([j for j, d in enumerate(done) if not d], device=self.device)
            rows = (self.base.index_select(0, keep) + torch.arange(self.k, device=self.device)).view(-1)
            self.tokens = self.tokens.index_select(0, rows)
            self.cum, self.alive, self.lengths, self.len_norm, self.done = (
                x.index_select(0, keep) for x in (self.cum, self.alive, self.lengths, self.len_norm, self.done))
            self.decoder.compact(self.cache, rows)
        return False

    def run(self, check_every: int | None = None, step=None) -> None:
        """All steps; the host checks for the end every ``check_every`` steps (default: every step
        on the CPU, where the check costs nothing, every 8 on a GPU). ``step`` replaces
        :meth:`step` (e.g. a graph replay)."""
        every = check_every or (1 if self.device.type == "cpu" else 8)
        step = step or self.step
        for t in range(self.steps):
            step(t)
            if (t + 1) % every == 0 and t + 1 < self.steps and self.check(compact=not self.static):
                break

    def result(self) -> SearchResult:
        """Copy the hypotheses to the host (once, after the loop); best first, ties in the order found."""
        if self.forced:
            steps = self.steps
            history, texts = self.history.tolist(), []
            for row in range(self.history.size(2)):  # follow the back-pointers from the last step to the first
                text = []
                for t in range(steps, 0, -1):
                    text.append(history[t][1][row])
                    row = history[t][0][row]
                texts.append(text[::-1])
            scores = (self.cum / steps**self.len_penalty).view(-1).tolist()
            hyps = [[] for _ in range(self.n)]
            for row, (text, score) in enumerate(zip(texts, scores)):
                hyps[row // self.k].append((text, score))
            for h in hyps:
                h.sort(key=lambda x: -x[1])
            return SearchResult([h[0][0] for h in hyps], [h[0][1] for h in hyps], hyps if self.return_all else None)
        lengths, texts, scores = self.best_len.tolist(), self.best_tokens.tolist(), self.best_score.tolist()
        result = SearchResult([text[:n] for text, n in zip(texts, lengths)], scores)
        if self.return_all:
            counts = self.count.tolist()
            all_texts, all_scores, all_lens = self.all_tokens.tolist(), self.all_score.tolist(), self.all_len.tolist()
            result.hypotheses = []
            for i, c in enumerate(counts):
                hyps = [(all_texts[i][j][: all_lens[i][j]], all_scores[i][j]) for j in range(c)]
                hyps.sort(key=lambda h: -h[1])
                result.hypotheses.append(hyps)
        return result


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
    stop: str = "fairseq",
    renormalize: bool = False,
    decoder: Decoder | None = None,
    graphs=None,
    check_every: int | None = None,
    fused: bool = False,
) -> SearchResult:
    """Translate a right-padded batch ``src`` (B, S) of source ids (each ending in EOS).

    ``forced_length=N`` generates exactly N tokens per sentence with EOS disallowed (speed
    measurement with random weights). ``decoder`` runs the model (default
    :class:`~canlib.decoding.decoder.EagerDecoder`; :class:`~canlib.decoding.runners.GraphedDecoder`,
    :class:`~canlib.bench.timing.TimedDecoder`); ``graphs``, a :class:`~canlib.decoding.runners.StepGraphs`,
    replays whole steps from CUDA graphs instead. ``fused=True`` (forced length only) takes each step's
    log-softmax, top-k and back-pointers in two Triton kernels (:mod:`canlib.decoding.fused`). See the
    module docstring for the scoring, length and stopping conventions.
    """
    policy = length_policy(forced_length, max_len_a, max_len_b, min_len, stop)
    if beam < 1:
        raise ValueError(f"beam={beam}: must be at least 1")
    with torch.no_grad():
        if graphs is not None:
            if decoder is not None:
                raise ValueError("beam_search: pass either decoder or graphs (a graph replays the decoder too)")
            if fused != graphs.fused:
                raise ValueError(f"beam_search: fused={fused} but the graphs were built with fused={graphs.fused}")
            return graphs.search(src, beam, policy, len_penalty, renormalize, return_all, check_every)
        search = BeamSearch(model, src, beam, policy, len_penalty, renormalize, return_all, decoder, fused=fused)
        search.run(check_every)
        return search.result()


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


__all__ = [
    "SearchResult", "beam_search", "greedy_search", "BeamSearch", "ForcedLength", "FreeLength", "ChunkedTopK",
    "make_batch", "output_lengths", "length_policy", "POLICY_OPTIONS", "STOP_RULES",
]
