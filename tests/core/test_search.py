"""Beam search: greedy equivalence, exact scores, batching independence, every decoder kind."""

from __future__ import annotations

import platform
import sys
from dataclasses import replace

import pytest
import torch
from conftest import ending_early, small_config, small_model

from canlib import DECODER_KINDS, Seq2Seq
from canlib.decoding.decoder import CompiledDecoder, EagerDecoder
from canlib.decoding.runners import GraphedDecoder, StepGraphs
from canlib.decoding.search import ChunkedTopK, SearchSettings, beam_search, greedy_search, make_batch, new_search
from canlib.decoding.timing import PartClock, timed_search
from canlib.model.config import BOS_ID, EOS_ID, PAD_ID


@pytest.fixture(autouse=True)
def _one_thread(_deterministic_torch):
    """Tiny models gain nothing from threads, and on a shared 2-core machine OpenMP threads
    waiting for a busy core make every op many times slower."""
    torch.set_num_threads(1)


VOCAB = 40


def tiny_model(kind: str = "standard", seed: int = 0, dec_layers: int = 2) -> Seq2Seq:
    model = small_model(kind, seed=seed, vocab_size=VOCAB, enc_layers=2, dec_layers=dec_layers, max_len=64)
    return ending_early(model, eos_bias=6.0)


def sources(seed: int = 0, lengths=(5, 9, 3, 7)) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, VOCAB, (n,), generator=g).tolist() for n in lengths]


def rescore(model: Seq2Seq, src_ids: list[int], out: list[int], alpha: float, eos: bool = True) -> float:
    """Teacher-forced log-probability of ``out`` (+ EOS), length-normalised."""
    src = make_batch([src_ids], PAD_ID, EOS_ID)
    target = out + [EOS_ID] if eos else out
    tgt_in = torch.tensor([[BOS_ID] + target[:-1]])
    with torch.no_grad():
        logp = model(src, tgt_in)[0]
    total = logp.gather(1, torch.tensor(target)[:, None]).sum().item()
    return total / len(target) ** alpha


def reference_greedy(model: Seq2Seq, src_ids: list[int], max_len: int) -> list[int]:
    """Arg-max decoding by re-running the whole teacher-forced model at every step."""
    src = make_batch([src_ids], PAD_ID, EOS_ID)
    out: list[int] = []
    with torch.no_grad():
        for t in range(max_len + 1):
            logp = model(src, torch.tensor([[BOS_ID] + out]))[0, -1]
            logp[[PAD_ID, BOS_ID]] = float("-inf")
            if t < 1:
                logp[EOS_ID] = float("-inf")
            if t == max_len:
                return out
            nxt = int(logp.argmax())
            if nxt == EOS_ID:
                return out
            out.append(nxt)
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_beam_one_equals_reference_greedy(seed):
    model = tiny_model(seed=seed)
    srcs = sources(seed)
    result = greedy_search(model, make_batch(srcs, PAD_ID, EOS_ID), SearchSettings(max_len_a=1.0, max_len_b=3))
    expected = [reference_greedy(model, s, len(s) + 1 + 3) for s in srcs]
    assert result.tokens == expected
    assert any(len(t) < len(s) + 4 for t, s in zip(result.tokens, srcs))  # some ended by EOS, not the cap


@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("stop", ["fairseq", "exact"])
def test_every_hypothesis_score_is_its_rescored_log_probability(alpha, stop):
    model = tiny_model(seed=3)
    srcs = sources(3)
    result = beam_search(
        model, make_batch(srcs, PAD_ID, EOS_ID), SearchSettings(beam=4, len_penalty=alpha, return_all=True, stop=stop)
    )
    checked = 0
    for s, hyps in zip(srcs, result.hypotheses):
        assert hyps[0][1] == max(h[1] for h in hyps)
        for out, score in hyps:
            assert score == pytest.approx(rescore(model, s, out, alpha), abs=1e-4)
            checked += 1
    assert checked >= (4 if stop == "fairseq" else 1) * len(srcs)
    assert result.scores == [h[0][1] for h in result.hypotheses]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_beam_four_never_scores_worse_than_greedy(seed):
    model = tiny_model(seed=seed)
    srcs = sources(seed + 10)
    batch = make_batch(srcs, PAD_ID, EOS_ID)
    greedy = greedy_search(model, batch, SearchSettings(len_penalty=1.0))
    wide = beam_search(model, batch, SearchSettings(beam=4, len_penalty=1.0, stop="exact"))
    for g, w in zip(greedy.scores, wide.scores):
        assert w >= g - 1e-5
    assert wide.scores != greedy.scores  # the wider search found something better somewhere


@pytest.mark.parametrize("stop", ["fairseq", "exact"])
def test_results_do_not_depend_on_batching(stop):
    model = tiny_model(seed=4)
    srcs = sources(4, lengths=(6, 2, 11, 4, 8))
    together = beam_search(model, make_batch(srcs, PAD_ID, EOS_ID), SearchSettings(beam=3, stop=stop))
    for i, s in enumerate(srcs):
        alone = beam_search(model, make_batch([s], PAD_ID, EOS_ID), SearchSettings(beam=3, stop=stop))
        assert alone.tokens[0] == together.tokens[i]
        assert alone.scores[0] == pytest.approx(together.scores[i], abs=1e-4)


@pytest.mark.parametrize("kind", DECODER_KINDS)
def test_every_decoder_kind_decodes_and_forced_length_is_exact(kind):
    model = tiny_model(kind, seed=6, dec_layers=3)
    batch = make_batch(sources(6), PAD_ID, EOS_ID)
    free = beam_search(model, batch, SearchSettings(beam=2))
    assert all(0 < len(t) <= 1.2 * (len(s) + 1) + 10 for t, s in zip(free.tokens, sources(6)))
    forced = beam_search(model, batch, SearchSettings(beam=4, forced_length=7, return_all=True, len_penalty=0.0))
    assert [len(t) for t in forced.tokens] == [7] * 4
    assert all(EOS_ID not in t for t in forced.tokens)
    for s, out, score in zip(sources(6), forced.tokens, forced.scores):
        assert score == pytest.approx(rescore(model, s, out, 0.0, eos=False), abs=1e-4)


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(beam=0), "beam=0"),
        (dict(stop="never"), "stop='never'"),
        (dict(forced_length=0), "forced_length=0"),
        (dict(fused=True), "fused=True"),
        (dict(fused=True, forced_length=3, renormalize=True), "fused=True"),
        (dict(check_every=0), "check_every=0"),
    ],
)
def test_search_settings_refuse_what_no_search_can_do_naming_the_value(fields, message):
    with pytest.raises(ValueError, match=message):
        SearchSettings(**fields)


def test_min_and_max_length_are_respected():
    model = tiny_model(seed=7)
    srcs = sources(7)
    batch = make_batch(srcs, PAD_ID, EOS_ID)
    short = beam_search(model, batch, SearchSettings(beam=3, max_len_a=0.0, max_len_b=2))
    assert all(len(t) <= 2 for t in short.tokens)
    long = beam_search(model, batch, SearchSettings(beam=3, min_len=6, max_len_a=0.0, max_len_b=8))
    assert all(6 <= len(t) <= 8 for t in long.tokens)


@pytest.mark.parametrize("kind", DECODER_KINDS)
def test_static_buffer_paths_match_eager_across_searches(kind):
    """The CUDA-graph plumbing, replayed eagerly on the CPU: static decoder buffers reused across
    searches, and whole static search steps (state reset in place per batch), give eager's outputs."""
    model = tiny_model(kind, seed=8)
    decoder = GraphedDecoder(model, capture=False)
    steps = StepGraphs(model, capture=False)
    split = StepGraphs(model, capture=False, parts=True)  # each step in three parts, as the timed breakdown runs it
    for seed, lengths in ((8, (6,)), (9, (6,)), (10, (6,)), (11, (6, 2, 9)), (12, (4, 8, 3))):
        batch = make_batch(sources(seed, lengths=lengths), PAD_ID, EOS_ID)
        for options in (dict(forced_length=9), dict(len_penalty=0.6, return_all=True)):
            settings = SearchSettings(beam=4, **options)
            eager = beam_search(model, batch, settings)
            for static in (
                beam_search(model, batch, settings, decoder=decoder),
                beam_search(model, batch, settings, graphs=steps),
                timed_search(split, batch, settings)[0],
            ):
                assert static.tokens == eager.tokens
                assert static.scores == pytest.approx(eager.scores, abs=1e-5)
                if eager.hypotheses:  # the static path never drops sentences: float sums may differ in the last bits
                    assert [[h[0] for h in x] for x in static.hypotheses] == [
                        [h[0] for h in x] for x in eager.hypotheses
                    ]


@pytest.mark.parametrize("width, picks", [(2048, 4), (2048, 8), (3000, 8), (128_000, 4)])
def test_chunked_topk_returns_each_rows_best_scores_best_first(width, picks):
    g = torch.Generator().manual_seed(width + picks)
    scores = torch.randn(3, width, generator=g)
    scores[1, : width // 2] = float("-inf")  # half a row banned, as dead beams are at the first step
    top = ChunkedTopK(width, picks, torch.device("cpu"))
    assert top.chunk is not None and top.chunks >= 2
    values, index = top(scores)
    best = scores.sort(dim=1, descending=True)  # brute force; random floats have no ties
    assert torch.equal(values, best.values[:, :picks])
    assert torch.equal(index, best.indices[:, :picks])


def test_chunked_topk_falls_back_to_one_topk_when_rows_do_not_cut_evenly():
    top = ChunkedTopK(1009, 4, torch.device("cpu"))  # a prime width
    assert top.chunk is None
    scores = torch.randn(2, 1009, generator=torch.Generator().manual_seed(0))
    assert torch.equal(top(scores)[1], scores.topk(4, dim=1).indices)


@pytest.mark.parametrize("kind", DECODER_KINDS)
def test_search_with_chunked_topk_equals_search_with_one_topk(kind):
    """The search's candidates from pieces of the row give the same hypotheses and scores as one top-k
    over the whole row (VOCAB x beam = 160 is cut here into pieces of 40, as 128,000 is into 1,024)."""
    model = tiny_model(kind, seed=13)
    batch = make_batch(sources(13, lengths=(6, 2, 9)), PAD_ID, EOS_ID)
    for policy in (dict(forced_length=9), dict(), dict(stop="exact")):
        outputs = []
        for longest, shortest in ((1024, 128), (64, 8)):  # no piece of 128 to 1024 fits 160 twice: one plain top-k
            with torch.no_grad():
                search = new_search(model, batch, SearchSettings(beam=4, len_penalty=0.6, return_all=True, **policy))
                search.top = ChunkedTopK(4 * VOCAB, search.top.picks, torch.device("cpu"), longest, shortest)
                assert (search.top.chunk is None) == (longest == 1024)
                search.run()
                outputs.append(search.result())
        plain, chunked = outputs
        assert chunked.tokens == plain.tokens and chunked.scores == plain.scores
        assert chunked.hypotheses == plain.hypotheses


class _FakeTime:
    """A clock that moves only when told to: each part of a search takes a known time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_timed_search_gives_each_part_the_time_it_took(monkeypatch):
    """Encode, init_cache, layers, output and the search's reorders take 7, 11, 3, 5 and 2 units on a
    fake clock: the parts must come out as those durations times how often each ran."""
    import canlib.decoding.timing

    clock = _FakeTime()
    monkeypatch.setattr(canlib.decoding.timing.time, "perf_counter", clock)
    model = tiny_model(seed=9)

    class Slow(EagerDecoder):
        def encode(self, src, beam):
            clock.now += 7
            return super().encode(src, beam)

        def init_cache(self, memory, max_len):
            clock.now += 11
            return super().init_cache(memory, max_len)

        def decode_hidden(self, tokens, cache):
            clock.now += 3
            return super().decode_hidden(tokens, cache)

        def output_log_probs(self, hidden):
            clock.now += 5
            return super().output_log_probs(hidden)

        def reorder(self, cache, index):
            clock.now += 2
            super().reorder(cache, index)

    batch = make_batch(sources(9), PAD_ID, EOS_ID)
    steps = 6
    settings = SearchSettings(beam=2, forced_length=steps)
    result, parts = timed_search(Slow(model), batch, settings)
    assert result.tokens == beam_search(model, batch, settings).tokens
    assert parts == {
        "encode": 18,
        "layers": 3 * steps,
        "output": 5 * steps,
        "search": 2 * (steps - 1),
        "total": 18 + 10 * steps - 2,
    }


def test_graphed_parts_mark_every_part_of_every_step_and_give_the_eager_tokens():
    model = tiny_model(seed=9)
    batch = make_batch(sources(9)[:1], PAD_ID, EOS_ID)
    graphs = StepGraphs(model, capture=False, parts=True)
    clock = PartClock(cuda=False)
    with torch.no_grad():
        result = graphs.search(batch, SearchSettings(beam=2, forced_length=5), clock=clock)
    assert result.tokens == beam_search(model, batch, SearchSettings(beam=2, forced_length=5)).tokens
    assert [part for part, _ in clock.marks] == ["encode", "search"] + ["layers", "output", "search"] * 5


class _HostReads(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts every read of a tensor's value by the host: ``_local_scalar_dense`` (item, bool,
    float, int), device-to-host copies, ops whose output size depends on values (nonzero), and
    (patched on Tensor) tolist."""

    VALUE_OPS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::unique")

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        to_cpu = name in ("aten::_to_copy", "aten::copy_") and any(
            isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args
        )
        if name in self.VALUE_OPS or to_cpu:
            self.count += 1
        return func(*args, **kwargs)


@pytest.mark.parametrize("options", [dict(forced_length=12), dict(), dict(stop="exact", return_all=True)])
def test_the_step_loop_reads_nothing_back_to_the_host(options, monkeypatch):
    """A step keeps the search on the device: over a whole loop the host reads the state only at
    the checks (every ``check_every`` steps), never inside a step. The CPU-only cache-reorder
    shortcut (which finds the moved rows with ``nonzero``) is switched off: what runs is the
    code a GPU runs."""
    import canlib.model.seq2seq

    monkeypatch.setattr(canlib.model.seq2seq, "reorder_moved_rows", lambda *args: False)
    model = tiny_model(seed=12)
    batch = make_batch(sources(12), PAD_ID, EOS_ID)
    forced = options.get("forced_length")
    search = new_search(model, batch, SearchSettings(beam=4, **options))
    reads = _HostReads()
    tolist = torch.Tensor.tolist

    def counted_tolist(self):
        reads.count += 1
        return tolist(self)

    monkeypatch.setattr(torch.Tensor, "tolist", counted_tolist)
    with torch.no_grad(), reads:
        for t in range(search.steps):
            search.step(t)
    steps_reads = reads.count
    search = new_search(model, batch, SearchSettings(beam=4, check_every=4, **options))
    reads.count = 0
    with torch.no_grad(), reads:
        search.run()
    monkeypatch.setattr(torch.Tensor, "tolist", tolist)
    assert steps_reads == 0
    assert reads.count <= search.steps // 4 * (0 if forced else 1)


def test_checking_rarely_gives_the_same_result_as_checking_every_step():
    model = tiny_model(seed=13)
    batch = make_batch(sources(13, lengths=(6, 2, 11, 4, 8)), PAD_ID, EOS_ID)
    for stop in ("fairseq", "exact"):
        every = beam_search(model, batch, SearchSettings(beam=3, stop=stop, return_all=True, check_every=1))
        rarely = beam_search(model, batch, SearchSettings(beam=3, stop=stop, return_all=True, check_every=1000))
        # (dropping finished sentences changes the batch shape, so float sums may differ in the last bits)
        assert rarely.tokens == every.tokens and rarely.scores == pytest.approx(every.scores, abs=1e-5)
        assert [[h[0] for h in hyps] for hyps in rarely.hypotheses] == [
            [h[0] for h in hyps] for hyps in every.hypotheses
        ]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kind", DECODER_KINDS)
def test_cuda_step_loop_never_synchronises_and_graphs_match_eager(kind):
    model = tiny_model(kind, seed=14).cuda().half()
    batch = make_batch(sources(14, lengths=(7,)), PAD_ID, EOS_ID, "cuda")
    for options in (dict(forced_length=10), dict()):
        search = new_search(model, batch, SearchSettings(beam=4, check_every=10_000, **options))
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            with torch.no_grad():
                search.run()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        eager = search.result()
        graphs = StepGraphs(model)
        for _ in range(2):  # the first call captures, the second replays
            assert beam_search(model, batch, SearchSettings(beam=4, **options), graphs=graphs).tokens == eager.tokens
        graphed = beam_search(model, batch, SearchSettings(beam=4, **options), decoder=GraphedDecoder(model))
        assert graphed.tokens == eager.tokens


# -- translate: text in, text out ----------------------------------------------------------

TEXT = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "we like green tea",
    "it rained all day long",
    "der hund lief im park",
    "die katze sass auf der matte",
    "wir trinken gerne gruenen tee",
] * 20


@pytest.fixture
def tiny_checkpoint(tmp_path):
    from canlib.data.vocab import Vocabulary
    from canlib.model.checkpoint import save_model

    vocab = Vocabulary.train(TEXT, vocab_size=60)
    vocab.save(tmp_path / "vocab.model")
    model = Seq2Seq(small_config(vocab_size=vocab.size, dec_layers=1, max_len=24))
    (tmp_path / "run").mkdir()
    save_model(model, tmp_path / "run" / "model.pt", vocab_id=vocab.id)
    return tmp_path / "run" / "model.pt", vocab


def test_translate_cli_round_trip_keeps_order_and_empty_lines(tiny_checkpoint, tmp_path):
    from canlib.cli import main
    from canlib.decoding.translate import load_translator, translate_lines

    checkpoint, vocab = tiny_checkpoint
    lines = ["the cat sat on the mat", "", "we like green tea", "a dog", "   ", "die katze sass auf der matte"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    argv = [
        "translate",
        "--checkpoint",
        str(checkpoint),
        "--input",
        str(tmp_path / "in.txt"),
        "--output",
        str(tmp_path / "out.txt"),
        "--beam",
        "3",
        "--batch-size",
        "2",
        "--device",
        "cpu",
    ]
    assert main(argv) == 0  # vocab.model found one folder above the checkpoint
    out = (tmp_path / "out.txt").read_text().split("\n")[:-1]
    assert len(out) == len(lines)
    assert out[1] == "" and out[4] == ""
    model, _ = load_translator(checkpoint)
    one_by_one = [translate_lines(model, vocab, [line], beam=3)[0] for line in lines]
    assert out == one_by_one
    assert any(out)


def test_translate_truncates_overlong_input_with_a_warning(tiny_checkpoint):
    from canlib.decoding.translate import load_translator, translate_lines

    model, vocab = load_translator(tiny_checkpoint[0])
    with pytest.warns(UserWarning, match="input line 2: .* truncated"):
        out = translate_lines(model, vocab, ["a dog", " ".join(["green tea"] * 40)], beam=2)
    assert len(out) == 2


def test_translate_refuses_a_different_vocabulary(tiny_checkpoint, tmp_path):
    from canlib.cli import main
    from canlib.data.vocab import Vocabulary

    checkpoint, _ = tiny_checkpoint
    other = Vocabulary.train(TEXT[::-1] + ["zebra quagga"] * 5, vocab_size=60)
    other.save(tmp_path / "other.model")
    (tmp_path / "in.txt").write_text("a dog\n")
    argv = [
        "translate",
        "--checkpoint",
        str(checkpoint),
        "--vocab",
        str(tmp_path / "other.model"),
        "--input",
        str(tmp_path / "in.txt"),
        "--device",
        "cpu",
    ]
    assert other.id != tiny_checkpoint[1].id
    assert main(argv) == 2


def test_cpu_inference_output_projection_equals_plain_product_and_follows_weight_updates():
    model = tiny_model(seed=11)
    h = torch.randn(3, 32)
    with torch.no_grad():
        before = model.output_log_probs(h)  # the (W h^T)^T fast path
        model.embed.weight.mul_(1.5)  # an in-place update, as an optimizer step makes
        after = model.output_log_probs(h)
    with torch.enable_grad():
        reference = model.output_log_probs(h)  # the plain F.linear path
    assert (after - reference).abs().max().item() < 1e-5
    assert (before - after).abs().max().item() > 1e-3


def test_graph_cache_keeps_at_most_max_shapes_and_drops_the_oldest():
    from canlib.decoding.runners import GraphCache

    cache = GraphCache(max_shapes=2)
    for key in ("a", "b", "c"):
        cache.add((key,), value=key)
    assert [e["value"] for e in cache.values()] == ["b", "c"]
    assert cache.get(("a",)) is None and cache.get(("c",))["graphs"] == {}


# triton is a test dependency where it has wheels (Linux on x86_64, pyproject's test extra): there these tests run,
# the fused kernels in Triton's interpreter on a CPU, and a missing triton fails them
needs_triton = pytest.mark.skipif(
    not (sys.platform == "linux" and platform.machine() == "x86_64"),
    reason=f"triton has no wheel for {sys.platform} on {platform.machine()}",
)


@needs_triton
@pytest.mark.parametrize("kind", ["standard", "can"])
def test_fused_select_gives_the_pytorch_steps_tokens_and_scores(kind):
    """The two Triton kernels (in the interpreter here) against the PyTorch select: three sentences of a
    batch, beam 3, every path (eager, whole-step static graphs)."""
    model = tiny_model(kind, seed=21)
    batch = make_batch(sources(21, lengths=(6, 2, 9)), PAD_ID, EOS_ID)
    settings = SearchSettings(beam=3, forced_length=7, len_penalty=0.6, return_all=True)
    want = beam_search(model, batch, settings)
    fused = replace(settings, fused=True)
    for got in (
        beam_search(model, batch, fused),
        beam_search(model, batch, fused, graphs=StepGraphs(model, capture=False)),
    ):
        assert got.tokens == want.tokens
        assert got.scores == pytest.approx(want.scores, abs=1e-5)
        assert [[h[0] for h in x] for x in got.hypotheses] == [[h[0] for h in x] for x in want.hypotheses]


@needs_triton
def test_fused_kernels_choose_a_reference_top_k_over_pieces_of_a_long_row():
    """A vocabulary wider than one piece (1,024 logits): the log-sum-exp from pieces and the candidates
    across pieces, against log_softmax and one top-k over each sentence's beam x V scores."""
    from canlib.decoding.fused import FusedSelect

    g = torch.Generator().manual_seed(5)
    sentences, k, vocab = 2, 4, 2500
    logits = torch.randn(sentences * k, vocab, generator=g) * 4
    logits[:, [PAD_ID, BOS_ID, EOS_ID]] = 20.0  # the likeliest tokens, and banned: they count in the log-sum-exp only
    cum = torch.randn(sentences, k, generator=g)
    cum[1, 2:] = float("-inf")  # dead beams never continue
    scores, pointers = cum.clone(), torch.empty(2, sentences * k, dtype=torch.long)
    FusedSelect(sentences * k, vocab, k, torch.device("cpu"), PAD_ID, BOS_ID, EOS_ID)(logits, scores, pointers)
    logp = torch.log_softmax(logits.double(), dim=-1)
    logp[:, [PAD_ID, BOS_ID, EOS_ID]] = float("-inf")  # banned, not renormalised
    top_s, top_i = (cum.double()[:, :, None] + logp.view(sentences, k, vocab)).view(sentences, -1).topk(k, dim=1)
    assert torch.allclose(scores.double(), top_s, atol=1e-5)
    assert pointers[0].tolist() == (torch.arange(sentences)[:, None] * k + top_i // vocab).view(-1).tolist()
    assert pointers[1].tolist() == (top_i % vocab).view(-1).tolist()
    assert set(pointers[0, k:].tolist()) <= {k, k + 1}  # sentence 1 continues only its live beams


def test_fused_select_is_refused_where_it_does_not_apply():
    model = tiny_model(seed=2)
    batch = make_batch(sources(2), PAD_ID, EOS_ID)
    with pytest.raises(ValueError, match="fused"):
        beam_search(model, batch, SearchSettings(beam=2, fused=True))  # free length: EOS handling stays in PyTorch
    with pytest.raises(ValueError, match="fused"):
        beam_search(model, batch, SearchSettings(beam=2, forced_length=3, fused=True, renormalize=True))


@pytest.mark.parametrize("parts", [False, True])
@pytest.mark.parametrize("kind", ["standard", "can"])
def test_replayed_steps_read_and_write_the_buffers_their_capture_recorded(kind, parts, monkeypatch):
    """CUDA graphs, emulated on the CPU: a "graph" replays what its capture run did with the host's view of
    the cache as it was then (step, buffer parity), and the capture run's Python effects stay while its
    tensor writes do not (StepGraphs undoes them). Replayed searches must still give eager's outputs: the
    two cache buffers alternate step by step, so each step's graph must have been captured on the right one."""
    import canlib.decoding.runners as runners
    import canlib.model.seq2seq

    model = tiny_model(kind, seed=31)
    steps = StepGraphs(model, capture=True, parts=parts)

    class Replay:
        def __init__(self, fn, caches, states):
            self.fn, self.caches, self.states, self.out = fn, caches, states, None

        def replay(self):
            outer = [(c.step, c.flips) for c in self.caches]
            for c, (step, flips) in zip(self.caches, self.states):
                c.step, c.flips = step, flips
            out = self.fn()
            if isinstance(out, torch.Tensor):  # a graph's output lives where the capture put it
                self.out.copy_(out)
            for c, (step, flips) in zip(self.caches, outer):
                c.step, c.flips = step, flips

        def pool(self):
            return None

    def fake_capture(fn, owner):
        fn()  # the warm-up
        caches = [entry["steps"].cache for entry in steps.graphs.values()]
        states = [(c.step, c.flips) for c in caches]
        graph = Replay(fn, caches, states)
        graph.out = fn()  # the capture run
        return graph, graph.out

    monkeypatch.setattr(runners, "capture", fake_capture)
    monkeypatch.setattr(canlib.model.seq2seq, "reorder_moved_rows", lambda *args: False)  # a GPU's reorder
    for seed in (31, 32, 33):  # the first search captures, the next ones replay
        batch = make_batch(sources(seed, lengths=(6,)), PAD_ID, EOS_ID)
        for options in (dict(forced_length=8), dict(len_penalty=0.6)):
            with torch.no_grad():
                eager = beam_search(model, batch, SearchSettings(beam=3, **options))
                replayed = beam_search(model, batch, SearchSettings(beam=3, **options), graphs=steps)
            assert replayed.tokens == eager.tokens
            assert replayed.scores == pytest.approx(eager.scores, abs=1e-5)


# -- the compiled decoder: Inductor on a GPU, the same graphs traced by aot_eager here ------


@pytest.mark.parametrize("kind", ["standard", "can"])
def test_a_compiled_decoder_gives_eager_tokens_alone_and_inside_static_steps(kind):
    """The encoder, decoder layers and output through torch.compile (aot_eager: the graphs Inductor would generate code
    for, traced the same way) give the eager search's tokens, free and forced length, eager and as static steps."""
    torch._dynamo.reset()
    model = tiny_model(kind, seed=13)
    decoder = CompiledDecoder(model, backend="aot_eager")
    steps = StepGraphs(model, capture=False, compiled="aot_eager")
    batch = make_batch(sources(14, lengths=(6, 2, 9)), PAD_ID, EOS_ID)  # free length drops finished sentences
    again = make_batch(sources(15, lengths=(6, 2, 9)), PAD_ID, EOS_ID)  # other words, the same shape
    for options in (dict(forced_length=9), dict(len_penalty=0.6)):
        for src in (batch, again):  # the second reuses the static steps' state and encodes into it
            settings = SearchSettings(beam=4, **options)
            eager = beam_search(model, src, settings)
            for compiled in (
                beam_search(model, src, settings, decoder=decoder),
                beam_search(model, src, settings, graphs=steps),
            ):
                assert compiled.tokens == eager.tokens
                assert compiled.scores == pytest.approx(eager.scores, abs=1e-5)


def test_one_compiled_graph_of_the_decoder_serves_every_step_and_source_length():
    """The step index and the shapes are symbolic: 12 steps compile the encoder and the output once and the decoder
    layers once per buffer parity, and a second sentence of another length compiles nothing more (a step index
    baked in as a
    constant would compile 8 graphs, then give up and run eagerly)."""
    torch._dynamo.reset()
    model = tiny_model("can", seed=15)
    decoder = CompiledDecoder(model, backend="aot_eager")
    before, counted = torch._dynamo.utils.counters["stats"]["unique_graphs"], []
    for seed, length in ((15, 5), (16, 8)):
        batch = make_batch(sources(seed, lengths=(length,)), PAD_ID, EOS_ID)
        beam_search(model, batch, SearchSettings(beam=2, forced_length=12), decoder=decoder)
        counted.append(torch._dynamo.utils.counters["stats"]["unique_graphs"] - before)
    assert counted[0] <= 4 and counted[1] == counted[0]
