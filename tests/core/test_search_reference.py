"""Beam search against references that share no code with it: brute-force enumeration of every
output of a toy model, and a plain-Python beam search loop written here from the documented
conventions (canlib.decoding.search's module docstring).

The toy model has 6 tokens it may emit besides EOS (UNK and ids 4..8; PAD and BOS are never
generated) and outputs of at most 4 tokens, so every possible output (6 + 36 + 216 + 1296 = 1554)
is scored by one teacher-forced pass. A beam of 1600 keeps every prefix, so with a sound stop
rule the search is exhaustive and must return the global optimum; a stop rule that ends too
early returns something worse.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from conftest import ending_early, small_model

from canlib import Seq2Seq
from canlib.decoding.search import SearchSettings, beam_search, make_batch

PAD, UNK, BOS, EOS = 0, 1, 2, 3  # written out: the reference does not take them from canlib
VOCAB = 9
EMITTED = [UNK] + list(range(4, VOCAB))  # the 6 tokens an output may hold
WIDE = 1600  # > 1554 outputs and > 216 * 7 candidates at any step: nothing is ever pruned


@pytest.fixture(autouse=True)
def _one_thread(_deterministic_torch):
    torch.set_num_threads(1)


def toy_model(seed: int, eos_bias: float = 4.0) -> Seq2Seq:
    """A random model whose outputs end at varied lengths (an EOS bias on the final norm). Its own width (d=16, two
    heads, FFN 32): the same seed draws other weights at another width, and the cases below were written for these."""
    model = small_model(seed=seed, vocab_size=VOCAB, d_model=16, heads=2, ffn_dim=32, max_len=40)
    return ending_early(model, eos_bias)


def toy_sources(seed: int, lengths=(3, 5, 2)) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, VOCAB, (n,), generator=g).tolist() for n in lengths]


def source_tensor(ids: list[int]) -> torch.Tensor:
    return torch.tensor([ids + [EOS]])


@torch.no_grad()
def next_log_probs(model: Seq2Seq, src_ids: list[int], prefixes: list[list[int]]) -> torch.Tensor:
    """(len(prefixes), VOCAB) log-probs of the token after BOS + prefix (all prefixes equally long),
    from the teacher-forced forward pass."""
    src = source_tensor(src_ids).expand(len(prefixes), -1)
    tgt_in = torch.tensor([[BOS] + p for p in prefixes])
    return model(src, tgt_in)[:, -1].double()


@torch.no_grad()
def brute_force(model: Seq2Seq, src_ids: list[int], max_len: int, alpha: float) -> tuple[list[int], float]:
    """The best output of 1..max_len emitted tokens, scored sum(log p(out + EOS)) / (n + 1) ** alpha."""
    best: tuple[list[int], float] = ([], -math.inf)
    for n in range(1, max_len + 1):
        outs = [list(o) for o in itertools.product(EMITTED, repeat=n)]
        src = source_tensor(src_ids).expand(len(outs), -1)
        tgt_in = torch.tensor([[BOS] + o for o in outs])
        target = torch.tensor([o + [EOS] for o in outs])
        logp = model(src, tgt_in).double().gather(2, target[:, :, None]).squeeze(2).sum(1) / (n + 1) ** alpha
        i = int(logp.argmax())
        if logp[i].item() > best[1]:
            best = (outs[i], logp[i].item())
    return best


def reference_beam(
    model: Seq2Seq, src_ids: list[int], k: int, alpha: float, max_len: int, stop_early: bool = True, min_len: int = 1
) -> tuple[list[int], float]:
    """fairseq's beam search, one prefix at a time: at step t the 2k best (prefix, token)
    candidates are taken; an EOS among the top k finishes a hypothesis, scored
    sum(log p) / (t + 1) ** alpha; the k best non-EOS candidates live on. PAD and BOS are never
    emitted, EOS not before ``min_len`` tokens, and only EOS at ``max_len`` tokens. With
    ``stop_early`` the sentence stops once k hypotheses finished, else it runs to ``max_len``."""
    beams: list[tuple[float, list[int]]] = [(0.0, [])]
    finished: list[tuple[list[int], float]] = []
    for t in range(max_len + 1):
        logp = next_log_probs(model, src_ids, [p for _, p in beams])
        candidates = []
        for (score, prefix), row in zip(beams, logp.tolist()):
            for tok, lp in enumerate(row):
                if tok in (PAD, BOS) or (tok == EOS and t < min_len) or (tok != EOS and t == max_len):
                    continue
                candidates.append((score + lp, prefix + [tok]))
        candidates.sort(key=lambda c: -c[0])  # stable: ties keep row-major order
        top = candidates[: 2 * k]
        finished += [(seq[:-1], s / (t + 1) ** alpha) for s, seq in top[:k] if seq[-1] == EOS]
        beams = [(s, seq) for s, seq in top if seq[-1] != EOS][:k]
        if not beams or (stop_early and len(finished) >= k):
            break
    return max(finished, key=lambda h: h[1])  # max keeps the first of equal scores: the earliest found


def max_output_length(src_ids: list[int], a: float = 1.2, b: float = 10) -> int:
    """floor(a * source length (with its EOS) + b), the documented default."""
    return math.floor(a * (len(src_ids) + 1) + b)


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("stop", ["exact", "fairseq"])
def test_a_beam_wide_enough_to_keep_every_prefix_finds_the_brute_force_optimum(alpha, stop):
    model = toy_model(seed=21)
    srcs = toy_sources(21)
    result = beam_search(
        model,
        make_batch(srcs, PAD, EOS),
        SearchSettings(beam=WIDE, len_penalty=alpha, stop=stop, max_len_a=0.0, max_len_b=4),
    )
    optima = [brute_force(model, s, 4, alpha) for s in srcs]
    assert result.tokens == [out for out, _ in optima]
    assert result.scores == pytest.approx([score for _, score in optima], abs=1e-4)
    if alpha > 0:  # the optimum is longer than the first outputs to finish, so an early stop misses it
        assert any(len(out) > 1 for out, _ in optima)


@pytest.mark.parametrize("seed", [31, 32])
@pytest.mark.parametrize("beam", [1, 3, 5])
def test_the_default_search_equals_a_plain_fairseq_beam_loop(seed, beam):
    model = toy_model(seed)
    srcs = toy_sources(seed, lengths=(4, 7, 2, 5))
    result = beam_search(model, make_batch(srcs, PAD, EOS), SearchSettings(beam=beam))  # the defaults: fairseq, alpha 1
    expected = [reference_beam(model, s, beam, alpha=1.0, max_len=max_output_length(s)) for s in srcs]
    assert result.tokens == [out for out, _ in expected]
    assert result.scores == pytest.approx([score for _, score in expected], abs=1e-4)


@pytest.mark.parametrize("alpha", [0.6, 1.0, 2.0])
def test_exact_stop_finds_the_same_best_as_running_to_the_end(alpha):
    """The exact rule stops a sentence as soon as no live beam can still win: its answer equals
    that of the same beam search that never stops before the maximum length."""
    model = toy_model(seed=42)
    srcs = toy_sources(42, lengths=(4, 7, 2, 5, 3))
    result = beam_search(model, make_batch(srcs, PAD, EOS), SearchSettings(beam=3, len_penalty=alpha, stop="exact"))
    to_the_end = [reference_beam(model, s, 3, alpha, max_output_length(s), stop_early=False) for s in srcs]
    assert result.tokens == [out for out, _ in to_the_end]
    assert result.scores == pytest.approx([score for _, score in to_the_end], abs=1e-4)
    if alpha >= 1.0:  # the check has teeth: stopping at k finished hypotheses (fairseq) misses something
        fairseq = [reference_beam(model, s, 3, alpha, max_output_length(s)) for s in srcs]
        assert fairseq != to_the_end


def reference_forced(model: Seq2Seq, src_ids: list[int], k: int, length: int, alpha: float) -> tuple[list[int], float]:
    """Exactly ``length`` tokens, EOS/PAD/BOS never: at each step the k best (prefix, token) candidates of
    every live prefix; the best final prefix scored sum(log p) / length ** alpha."""
    beams: list[tuple[float, list[int]]] = [(0.0, [])]
    for _ in range(length):
        logp = next_log_probs(model, src_ids, [p for _, p in beams])
        candidates = [
            (score + lp, prefix + [tok])
            for (score, prefix), row in zip(beams, logp.tolist())
            for tok, lp in enumerate(row)
            if tok not in (PAD, BOS, EOS)
        ]
        candidates.sort(key=lambda c: -c[0])
        beams = candidates[:k]
    score, best = beams[0]
    return best, score / length**alpha


@pytest.mark.parametrize("seed", [0, 1])
def test_forced_length_search_follows_its_back_pointers_to_the_reference_beam(seed):
    """The forced-length search keeps no token matrix, only (row, token) back-pointers per step: the
    outputs it rebuilds from them, for three sentences in one batch, are the reference's."""
    model = toy_model(seed)
    sources = toy_sources(seed)
    batch = make_batch(sources, PAD, EOS)
    result = beam_search(model, batch, SearchSettings(beam=3, forced_length=5, len_penalty=0.6))
    for ids, tokens, score in zip(sources, result.tokens, result.scores):
        want_tokens, want_score = reference_forced(model, ids, 3, 5, 0.6)
        assert tokens == want_tokens
        assert score == pytest.approx(want_score, abs=1e-5)
