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
there without an EOS, we force one (``tests/core/test_ctranslate.py`` checks this).

Structure (fairseq keeps its search apart from the loss; canlib keeps the search apart from how the
decoder is run and timed):

* :class:`SearchSettings` holds every option above, one frozen value (``beam_search(model, src, settings)``);
* a *decoder* runs the model (:class:`canlib.decoding.decoder.Decoder`: encode, init_cache,
  decode_hidden, output_log_probs or output_logits, reorder, compact): :class:`~canlib.decoding.decoder.EagerDecoder`
  by default; :mod:`canlib.decoding.runners` replays steps from CUDA graphs and
  :mod:`canlib.decoding.timing` times their parts;
* :class:`BeamSearch` is the shared core: the search state in device tensors, advanced one step at a
  time, every write in place, with no host synchronisation inside a step. A step has three parts,
  :meth:`BeamSearch.hidden` (decoder layers), :meth:`BeamSearch.log_probs` (output projection) and
  ``select`` (the search proper); the top-k of a row of beam x V scores is taken in two rounds of short
  top-k's (:class:`ChunkedTopK`), a handful of GPU kernels instead of PyTorch's multi-block select. The
  host looks at the state only every ``check_every`` steps (is every sentence done? then stop, and drop
  finished sentences from the batch); on the CPU that look is free and happens every step;
* two searches over that core, :func:`new_search` picks one: :class:`FreeLengthSearch` (EOS, maximum
  lengths, finished hypotheses with their length penalty, stopping rules: what translation uses) and
  :class:`ForcedLengthSearch` (exactly N tokens, no EOS: speed measurement with random weights), which keeps
  no token matrix: each step writes its (row, token) back-pointers with one gather from a lookup table, and
  :meth:`ForcedLengthSearch.result` follows them back once at the end. :class:`FusedForcedLengthSearch`
  (``fused=True``) takes that select step from the raw logits in two Triton kernels (:mod:`canlib.decoding.fused`).

On CUDA, run the model in half precision (``model.half()``). On CPU the model stays in float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from canlib.decoding import fused as fused_step
from canlib.decoding.decoder import Decoder, EagerDecoder
from canlib.decoding.topk import ChunkedTopK
from canlib.model.config import ModelConfig
from canlib.model.seq2seq import Seq2Seq

STOP_RULES = ("fairseq", "exact")
NEG_INF = float("-inf")


@dataclass
class SearchResult:
    """Best hypothesis per sentence (ids without BOS/EOS) and its length-normalised score."""

    tokens: list[list[int]]
    scores: list[float]
    hypotheses: list[list[tuple[list[int], float]]] | None = None  # every finished one, best first


@dataclass(frozen=True)
class SearchSettings:
    """Every option of a beam search, one value (the conventions: the module docstring)."""

    beam: int = 4
    len_penalty: float = 1.0  # alpha: a hypothesis scores sum(log p) / length ** alpha
    max_len_a: float = 1.2  # free length: at most floor(a * src_len + b) tokens before EOS
    max_len_b: float = 10
    min_len: int = 1  # free length: tokens that must come before EOS
    stop: str = "fairseq"  # free length: when a sentence stops, one of STOP_RULES
    forced_length: int | None = None  # exactly this many tokens, EOS never allowed (speed measurement)
    renormalize: bool = False  # renormalise over the allowed tokens (CTranslate2's convention)
    return_all: bool = False  # keep every finished hypothesis, not only the best
    fused: bool = False  # forced length: the select step as two Triton kernels (canlib.decoding.fused)
    check_every: int | None = None  # steps between the host's looks (default: 1 on a CPU, 8 on a GPU)

    def __post_init__(self) -> None:
        if self.beam < 1:
            raise ValueError(f"beam={self.beam}: must be at least 1")
        if self.stop not in STOP_RULES:
            raise ValueError(f"stop={self.stop!r}: choose one of {', '.join(STOP_RULES)}")
        if self.forced_length is not None and self.forced_length < 1:
            raise ValueError(f"forced_length={self.forced_length}: must be at least 1")
        if self.fused and (self.forced_length is None or self.renormalize):
            raise ValueError("fused=True: the fused select step serves forced-length searches without renormalize")
        if self.check_every is not None and self.check_every < 1:
            raise ValueError(f"check_every={self.check_every}: must be at least 1")


def output_lengths(src: Tensor, cfg: ModelConfig, settings: SearchSettings) -> list[int]:
    """Per-sentence output length: ``forced_length``, or the maximum ``floor(a * src_len + b)`` within
    [max(min_len, 1), the model's max_len - 1] (``src_len`` counts the non-pad ids, EOS included)."""
    if settings.forced_length is not None:
        if settings.forced_length > cfg.max_len:
            raise ValueError(f"forced_length={settings.forced_length} exceeds the model's max_len={cfg.max_len}")
        return [settings.forced_length] * src.size(0)
    a, b, limit = settings.max_len_a, settings.max_len_b, cfg.max_len - 1
    src_lens = src.ne(cfg.pad_id).sum(dim=1).tolist()
    return [min(max(int(math.floor(a * n + b)), settings.min_len, 1), limit) for n in src_lens]


# -- the shared core ---------------------------------------------------------------------------


class BeamSearch:
    """What both searches share: the encoded batch and its decoder cache, the running scores ``cum``
    (sentences, beam), the three parts of a step and the loop that runs them.

    ``step(t)`` reads and writes only tensors allocated here (every write in place) and never
    reads a value back to the host, so a step can be replayed from a CUDA graph and a loop of
    steps runs ahead of the GPU. ``check()`` is the only place the host looks at the state.
    ``static=True`` keeps the shapes fixed (no sentence is dropped) and treats every step the
    same whatever the batch (what :class:`~canlib.decoding.runners.StepGraphs` needs). A subclass
    says what a step may emit and keeps (``select``), and what comes out (``result``).
    """

    picks: int  # candidates taken per sentence at each step, as a multiple of the beam
    state_names: tuple[str, ...]  # the tensors a step writes, besides the cache's

    def __init__(
        self,
        model: Seq2Seq,
        src: Tensor,
        settings: SearchSettings = SearchSettings(),
        decoder: Decoder | None = None,
        static: bool = False,
    ) -> None:
        cfg = model.cfg
        self.model, self.cfg, self.settings, self.static = model, cfg, settings, static
        self.decoder = decoder or EagerDecoder(model)
        self.k = k = settings.beam
        self.device = device = model.embed.weight.device
        src = src.to(device)
        self.n = n = src.size(0)
        lengths = output_lengths(src, cfg, settings)
        self.steps = self.steps_for(lengths)
        self.cache = self.decoder.init_cache(self.decoder.encode(src, k), self.steps)
        self.base = torch.arange(n, device=device)[:, None] * k  # each sentence's first row
        self.top = ChunkedTopK(k * cfg.vocab_size, self.picks * k, device)
        self.cum = torch.empty(n, k, device=device)
        self.no_eos = torch.tensor([cfg.pad_id, cfg.bos_id, cfg.eos_id], device=device)  # where EOS may not come
        self.allocate(lengths)
        self.reset(lengths)

    def steps_for(self, lengths: list[int]) -> int:
        """Steps the search runs for these output lengths."""
        raise NotImplementedError

    def allocate(self, lengths: list[int]) -> None:
        """The subclass's state tensors."""

    def reset(self, lengths: list[int]) -> None:
        """Start state (in place) for a batch of these output lengths: one live beam per sentence; a subclass
        adds its own."""
        self.cum.zero_()
        self.cum[:, 1:] = NEG_INF  # at the first step only one beam per sentence is live

    def state(self) -> list[Tensor]:
        """Every tensor a step writes (the search's and the cache's), e.g. to save and restore it."""
        return [getattr(self, name) for name in self.state_names] + list(self.cache.buffers)

    def inputs(self, t: int) -> Tensor:
        """The token each row reads at step t (rows,)."""
        raise NotImplementedError

    def hidden(self, t: int) -> Tensor:
        """Part 1 of a step: the decoder layers on the tokens of step t (rows, d)."""
        return self.decoder.decode_hidden(self.inputs(t), self.cache)

    def log_probs(self, hidden: Tensor) -> Tensor:
        """Part 2: final norm, output projection and log-softmax (rows, V)."""
        return self.decoder.output_log_probs(hidden)

    def select(self, t: int, logp: Tensor) -> None:
        """Part 3, the search proper: choose the continuations from ``logp`` (rows, V), reorder the cache."""
        raise NotImplementedError

    def step(self, t: int) -> None:
        """Advance every sentence by one token (sentences already done run on, ignored)."""
        self.select(t, self.log_probs(self.hidden(t)))

    def candidates(self, logp: Tensor) -> Tensor:
        """Every continuation's score, running score + log p, a row of beam x V per sentence (m, k * V)."""
        m, k, vocab = self.cum.size(0), self.k, self.cfg.vocab_size
        return (self.cum[:, :, None] + logp.view(m, k, vocab)).view(m, k * vocab)

    def renormalized(self, logp: Tensor) -> Tensor:
        """``logp`` (banned tokens at -inf) renormalised over the allowed ones with ``renormalize``, else as it is."""
        return logp.log_softmax(dim=-1) if self.settings.renormalize else logp

    def reorder(self, t: int, index: Tensor) -> None:
        """Row i of the cache continues row ``index[i]`` (after every step but the last)."""
        if t + 1 < self.steps:
            self.decoder.reorder(self.cache, index)

    def check(self, compact: bool) -> bool:
        """The host's look at the state: True when every sentence is done."""
        return False

    def run(self, step=None) -> None:
        """All steps; the host checks for the end every ``check_every`` steps. ``step`` replaces
        :meth:`step` (e.g. a graph replay)."""
        every = self.settings.check_every or (1 if self.device.type == "cpu" else 8)
        step = step or self.step
        for t in range(self.steps):
            step(t)
            if (t + 1) % every == 0 and t + 1 < self.steps and self.check(compact=not self.static):
                break

    def result(self) -> SearchResult:
        """Copy the hypotheses to the host (once, after the loop); best first, ties in the order found."""
        raise NotImplementedError


# -- free length: what translation uses -------------------------------------------------------


class FreeLengthSearch(BeamSearch):
    """Hypotheses end with EOS, by ``max_len_a * src_len + max_len_b`` tokens at the latest, after at least
    ``min_len``; a sentence stops by the ``stop`` rule (the module docstring). Keeps the token matrix of the
    live beams, the best finished hypothesis per sentence and, with ``return_all``, every finished one."""

    picks = 2  # up to k of the best 2k may end in EOS: k go on
    state_names = (
        "tokens",
        "cum",
        "done",
        "count",
        "best_score",
        "best_tokens",
        "best_len",
        "all_tokens",
        "all_score",
        "all_len",
    )

    def steps_for(self, lengths: list[int]) -> int:
        return max(lengths) + 1  # the last step can only emit EOS

    def allocate(self, lengths: list[int]) -> None:
        n, k, width, device = self.n, self.k, self.steps, self.device
        self.tokens = torch.empty(n * k, self.steps + 1, dtype=torch.long, device=device)
        self.rank = torch.arange(2 * k, device=device)
        self.never = torch.tensor([self.cfg.pad_id, self.cfg.bos_id], device=device)  # never generated
        self.alive = torch.arange(n, device=device)  # original index of each sentence in the batch
        self.lengths = torch.empty(n, dtype=torch.long, device=device)
        self.len_norm = torch.empty(n, dtype=torch.float64, device=device)  # (max length + 1) ** alpha
        self.done = torch.empty(n, dtype=torch.bool, device=device)
        self.count = torch.empty(n, dtype=torch.long, device=device)  # finished hypotheses
        self.best_score = torch.empty(n, dtype=torch.float64, device=device)
        self.best_tokens = torch.empty(n, width, dtype=torch.long, device=device)
        self.best_len = torch.empty(n, dtype=torch.long, device=device)
        # every finished hypothesis (return_all), in the order found; slot ``slots`` absorbs the rest
        slots = (2 * k if self.settings.stop == "fairseq" else k * self.steps) if self.settings.return_all else 0
        self.all_tokens = torch.empty(n, slots + 1, width, dtype=torch.long, device=device)
        self.all_score = torch.empty(n, slots + 1, dtype=torch.float64, device=device)
        self.all_len = torch.empty(n, slots + 1, dtype=torch.long, device=device)

    def reset(self, lengths: list[int]) -> None:
        """Start state: BOS, one live beam per sentence, nothing finished."""
        super().reset(lengths)
        self.ending_steps = set(lengths)  # the steps at which some sentence reaches its maximum length
        self.tokens.fill_(self.cfg.pad_id)
        self.tokens[:, 0] = self.cfg.bos_id
        self.lengths.copy_(torch.tensor(lengths))
        self.len_norm.copy_(torch.tensor([(n + 1) ** self.settings.len_penalty for n in lengths], dtype=torch.float64))
        self.done.zero_()
        self.count.zero_()
        self.best_score.fill_(NEG_INF)
        self.best_tokens.fill_(self.cfg.pad_id)
        self.best_len.zero_()
        self.all_score.fill_(NEG_INF)

    def inputs(self, t: int) -> Tensor:
        return self.tokens[:, t]

    def select(self, t: int, logp: Tensor) -> None:
        """Part 3 of a step: the continuations chosen from ``logp`` (rows, V), the
        hypotheses that end with EOS recorded, tokens, scores and cache reordered."""
        m, k, vocab = self.cum.size(0), self.k, self.cfg.vocab_size
        # each beam's running score plus every token's log p, banned tokens removed
        scores = self.candidates(self.allowed(t, logp))
        # the 2k best (beam, token) candidates of each sentence, best first
        top_s, top_i = self.top(scores)
        top_beam, top_tok = torch.div(top_i, vocab, rounding_mode="floor"), top_i % vocab
        # an EOS among the k best ends a hypothesis (unless its sentence is done)
        is_eos = top_tok.eq(self.cfg.eos_id)
        ended = is_eos[:, :k] & top_s[:, :k].isfinite() & ~self.done[:, None]
        normalised = top_s[:, :k].double() / (t + 1) ** self.settings.len_penalty
        self.finish(t, m, ended, normalised, top_beam[:, :k])
        # the k best candidates that do not end (in rank order) become the live beams
        pick = (self.rank + is_eos * (2 * k)).topk(k, dim=1, largest=False).indices
        live_s, live_beam = top_s.gather(1, pick), top_beam.gather(1, pick)
        live_tok = top_tok.gather(1, pick)
        # done: at its maximum length, or when no live beam can win (the stopping rule)
        self.done |= self.lengths.le(t) | self.stopped(t, live_s[:, 0])
        # the live beams continue their rows: tokens, running scores and cache follow
        rows = (self.base[:m] + live_beam).view(-1)
        self.tokens.copy_(self.tokens.index_select(0, rows))
        self.tokens[:, t + 1] = live_tok.view(-1)
        self.cum.copy_(live_s)
        self.reorder(t, rows)

    def allowed(self, t: int, logp: Tensor) -> Tensor:
        """Remove the tokens step t may not emit (in place): PAD and BOS always, EOS before ``min_len``,
        every token but EOS for a sentence at its maximum length; renormalise if asked."""
        if t < self.settings.min_len:
            logp.index_fill_(1, self.no_eos, NEG_INF)
            return self.renormalized(logp)
        logp.index_fill_(1, self.never, NEG_INF)
        if self.static or t in self.ending_steps:  # sentences at their maximum length: EOS only
            at_max = self.lengths.eq(t)[:, None].expand(-1, self.k).reshape(-1, 1)
            eos = logp[:, self.cfg.eos_id].clone()
            logp.masked_fill_(at_max, NEG_INF)
            logp[:, self.cfg.eos_id] = eos
        return self.renormalized(logp)

    def stopped(self, t: int, best_live: Tensor) -> Tensor:
        """Sentences the stopping rule ends after step t (``best_live``: each one's best live score)."""
        count = self.count.index_select(0, self.alive)
        if self.settings.stop == "fairseq":  # k finished hypotheses
            return count >= self.k
        # exact: no live beam can beat the best finished one (module docstring)
        alpha, live = self.settings.len_penalty, best_live.double()
        bound = torch.maximum(live / (t + 2) ** alpha, live / self.len_norm)
        return count.gt(0) & self.best_score.index_select(0, self.alive).ge(bound)

    def finish(self, t: int, m: int, ended: Tensor, score: Tensor, beam_of: Tensor) -> None:
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
        self.best_tokens.index_copy_(
            0, self.alive, torch.where(better[:, None], best_text, self.best_tokens.index_select(0, self.alive))
        )
        self.best_len.index_copy_(0, self.alive, torch.where(better, t, self.best_len.index_select(0, self.alive)))
        if self.settings.return_all:
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
        """True when every sentence is done; with ``compact``, drop the finished sentences from the batch
        (and the cache)."""
        done = self.done.tolist()
        if all(done):
            return True
        if compact and any(done):
            keep = torch.tensor([j for j, d in enumerate(done) if not d], device=self.device)
            rows = (self.base.index_select(0, keep) + torch.arange(self.k, device=self.device)).view(-1)
            self.tokens = self.tokens.index_select(0, rows)
            self.cum, self.alive, self.lengths, self.len_norm, self.done = (
                x.index_select(0, keep) for x in (self.cum, self.alive, self.lengths, self.len_norm, self.done)
            )
            self.decoder.compact(self.cache, rows)
        return False

    def result(self) -> SearchResult:
        lengths, texts, scores = self.best_len.tolist(), self.best_tokens.tolist(), self.best_score.tolist()
        result = SearchResult([text[:n] for text, n in zip(texts, lengths)], scores)
        if self.settings.return_all:
            counts = self.count.tolist()
            all_texts, all_scores, all_lens = self.all_tokens.tolist(), self.all_score.tolist(), self.all_len.tolist()
            result.hypotheses = []
            for i, c in enumerate(counts):
                hyps = [(all_texts[i][j][: all_lens[i][j]], all_scores[i][j]) for j in range(c)]
                hyps.sort(key=lambda h: -h[1])
                result.hypotheses.append(hyps)
        return result


# -- forced length: speed measurement -----------------------------------------------------------


class ForcedLengthSearch(BeamSearch):
    """Exactly ``forced_length`` tokens per sentence, EOS never allowed; every live beam is a hypothesis at
    the end, scored ``sum(log p) / length ** alpha``. Keeps back-pointers instead of a token matrix:
    ``history[t]`` = (the row each row's prefix came from, the token it read at step t)."""

    picks = 1
    state_names = ("history", "cum")

    def steps_for(self, lengths: list[int]) -> int:
        return lengths[0]

    def allocate(self, lengths: list[int]) -> None:
        n, k, vocab, device = self.n, self.k, self.cfg.vocab_size, self.device
        self.history = torch.empty(self.steps + 1, 2, n * k, dtype=torch.long, device=device)
        # written at once by one gather from ``pairs``: candidate j of a sentence -> (j // V, j % V)
        j = torch.arange(k * vocab, device=device)
        self.pairs = torch.stack([torch.div(j, vocab, rounding_mode="floor"), j % vocab])
        self.first_row = self.base.view(-1).repeat_interleave(k)  # each sentence's first row, per row

    def reset(self, lengths: list[int]) -> None:
        """Start state: every row reads BOS and points at itself."""
        super().reset(lengths)
        self.history.zero_()
        self.history[0, 0] = torch.arange(self.history.size(2), device=self.device)
        self.history[0, 1] = self.cfg.bos_id

    def inputs(self, t: int) -> Tensor:
        return self.history[t, 1]

    def select(self, t: int, logp: Tensor) -> None:
        """The k best of each sentence: scores straight into ``cum``, back-pointers into ``history[t + 1]``."""
        scores = self.candidates(self.renormalized(logp.index_fill_(1, self.no_eos, NEG_INF)))
        _, top_i = self.top(scores, values=self.cum)
        pointers = torch.index_select(self.pairs, 1, top_i.view(-1), out=self.history[t + 1])
        if self.n > 1:  # candidate j of sentence s continues row s * k + j // V
            pointers[0].add_(self.first_row)
        self.reorder(t, pointers[0])

    def result(self) -> SearchResult:
        steps = self.steps
        history, texts = self.history.tolist(), []
        for row in range(self.history.size(2)):  # follow the back-pointers from the last step to the first
            text = []
            for t in range(steps, 0, -1):
                text.append(history[t][1][row])
                row = history[t][0][row]
            texts.append(text[::-1])
        scored = list(zip(texts, (self.cum / steps**self.settings.len_penalty).view(-1).tolist()))
        hyps = [sorted(scored[s * self.k : (s + 1) * self.k], key=lambda h: -h[1]) for s in range(self.n)]
        every = hyps if self.settings.return_all else None
        return SearchResult([h[0][0] for h in hyps], [h[0][1] for h in hyps], every)


class FusedForcedLengthSearch(ForcedLengthSearch):
    """:class:`ForcedLengthSearch` whose select step takes the raw logits and runs as two Triton kernels
    (:mod:`canlib.decoding.fused`: the log-softmax, the bans, both top-k's and the back-pointers)."""

    def allocate(self, lengths: list[int]) -> None:
        if not fused_step.available() and self.device.type != "meta":  # meta: counted, not run
            raise ValueError("fused=True needs the triton package (PyTorch's CUDA wheels bring it)")
        super().allocate(lengths)
        cfg = self.cfg
        self.fused = fused_step.FusedSelect(
            self.n * self.k, cfg.vocab_size, self.k, self.device, cfg.pad_id, cfg.bos_id, cfg.eos_id
        )

    def log_probs(self, hidden: Tensor) -> Tensor:
        """Part 2 without its log-softmax: the logits (the fused select takes the log-softmax itself)."""
        return self.decoder.output_logits(hidden)

    def select(self, t: int, logits: Tensor) -> None:
        self.fused(logits, self.cum, self.history[t + 1])
        self.reorder(t, self.history[t + 1, 0])


def new_search(
    model: Seq2Seq,
    src: Tensor,
    settings: SearchSettings = SearchSettings(),
    decoder: Decoder | None = None,
    static: bool = False,
) -> BeamSearch:
    """The search ``settings`` ask for, over the batch ``src``, before its first step."""
    if settings.forced_length is None:
        kind = FreeLengthSearch
    else:
        kind = FusedForcedLengthSearch if settings.fused else ForcedLengthSearch
    return kind(model, src, settings, decoder, static)


def beam_search(
    model: Seq2Seq,
    src: Tensor,
    settings: SearchSettings = SearchSettings(),
    decoder: Decoder | None = None,
    graphs=None,
) -> SearchResult:
    """Translate a right-padded batch ``src`` (B, S) of source ids (each ending in EOS).

    ``settings``: beam, length penalty, length limits, stopping rule... (:class:`SearchSettings`; the module
    docstring gives the conventions). ``decoder`` runs the model (default
    :class:`~canlib.decoding.decoder.EagerDecoder`; :class:`~canlib.decoding.runners.GraphedDecoder`,
    :class:`~canlib.decoding.timing.TimedDecoder`); ``graphs``, a :class:`~canlib.decoding.runners.StepGraphs`,
    replays whole steps from CUDA graphs instead.
    """
    with torch.no_grad():
        if graphs is not None:
            if decoder is not None:
                raise ValueError("beam_search: pass either decoder or graphs (a graph replays the decoder too)")
            return graphs.search(src, settings)
        search = new_search(model, src, settings, decoder)
        search.run()
        return search.result()


def greedy_search(model: Seq2Seq, src: Tensor, settings: SearchSettings = SearchSettings()) -> SearchResult:
    """Beam search with one beam: the arg-max token at every step."""
    return beam_search(model, src, replace(settings, beam=1))


def make_batch(sentences: list[list[int]], pad_id: int, eos_id: int, device: torch.device | str = "cpu") -> Tensor:
    """Right-padded (B, S) source batch of id lists, each followed by EOS."""
    rows = [torch.tensor([*ids, eos_id], dtype=torch.long) for ids in sentences]
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=pad_id).to(device)


__all__ = [
    "SearchResult",
    "SearchSettings",
    "beam_search",
    "greedy_search",
    "new_search",
    "BeamSearch",
    "FreeLengthSearch",
    "ForcedLengthSearch",
    "FusedForcedLengthSearch",
    "ChunkedTopK",
    "make_batch",
    "output_lengths",
    "STOP_RULES",
]
