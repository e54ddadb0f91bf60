"""CTranslate2 export: the same weights give the same outputs in both engines (CPU)."""

from __future__ import annotations

import pytest
import torch
from conftest import ending_early, small_config, small_model

from canlib import Seq2Seq
from canlib.decoding.search import SearchSettings, beam_search, make_batch
from canlib.model.config import EOS_ID, PAD_ID

ctranslate2 = pytest.importorskip("ctranslate2")
from canlib.decoding.ctranslate import CT2Translator, export_ctranslate2, token_names  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread(_deterministic_torch):
    """Tiny models gain nothing from threads, and on a shared 2-core machine OpenMP threads
    waiting for a busy core make every op many times slower."""
    torch.set_num_threads(1)


VOCAB = 40


def small_standard(enc_layers: int, dec_layers: int, seed: int) -> Seq2Seq:
    model = small_model(seed=seed, vocab_size=VOCAB, enc_layers=enc_layers, dec_layers=dec_layers, max_len=64)
    return ending_early(model, eos_bias=6.0)  # as in test_search: varied outputs that sometimes end early


def sources(seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, VOCAB, (n,), generator=g).tolist() for n in (5, 9, 3, 7, 12, 4)]


@pytest.mark.parametrize("enc_layers,dec_layers,seed", [(6, 6, 2), (12, 2, 1)])
def test_ctranslate2_greedy_equals_canlib(enc_layers, dec_layers, seed, tmp_path):
    model = small_standard(enc_layers, dec_layers, seed)
    ct2 = CT2Translator(export_ctranslate2(model, tmp_path / "ct2"), token_names(VOCAB), threads=1)
    srcs = sources(2)
    settings = SearchSettings(beam=1, max_len_a=0, max_len_b=20)
    ours = beam_search(model, make_batch(srcs, PAD_ID, EOS_ID), settings).tokens
    theirs = ct2.translate(srcs, beam=1, max_len_a=0, max_len_b=20)
    assert ours == theirs
    assert len({len(t) for t in ours}) > 1  # outputs end at different lengths: EOS handling is compared too


def test_ctranslate2_forced_length_greedy_equals_canlib(tmp_path):
    model = small_standard(12, 2, seed=3)
    ct2 = CT2Translator(export_ctranslate2(model, tmp_path / "ct2"), token_names(VOCAB), threads=1)
    srcs = sources(4)
    ours = beam_search(model, make_batch(srcs, PAD_ID, EOS_ID), SearchSettings(beam=1, forced_length=9)).tokens
    theirs = ct2.translate(srcs, beam=1, forced_length=9)
    assert theirs == ours
    assert all(len(t) == 9 for t in theirs)


@pytest.mark.parametrize("enc_layers,dec_layers,seed", [(6, 6, 2), (12, 2, 1), (6, 6, 5)])
def test_ctranslate2_beam_equals_canlib_once_banned_tokens_are_renormalised(enc_layers, dec_layers, seed, tmp_path):
    """Beam 4 and 5, length penalties 0, 0.6 and 1: the same best output in both engines.

    Sentences where either engine's output reaches the maximum length are left out (CTranslate2
    ends such a hypothesis without an EOS, we force one); enough others must remain."""
    model = small_standard(enc_layers, dec_layers, seed)
    ct2 = CT2Translator(export_ctranslate2(model, tmp_path / "ct2"), token_names(VOCAB), threads=1)
    limit, compared, lengths = 40, 0, set()
    for src_seed in range(3):
        srcs = sources(src_seed)
        batch = make_batch(srcs, PAD_ID, EOS_ID)
        for beam in (4, 5):
            for alpha in (0.0, 0.6, 1.0):
                settings = SearchSettings(beam=beam, len_penalty=alpha, max_len_a=0, max_len_b=limit, renormalize=True)
                ours = beam_search(model, batch, settings).tokens
                theirs = ct2.translate(srcs, beam=beam, len_penalty=alpha, max_len_a=0, max_len_b=limit)
                for mine, other in zip(ours, theirs):
                    if len(mine) < limit and len(other) < limit:
                        assert mine == other, (beam, alpha)
                        compared += 1
                        lengths.add(len(mine))
    assert compared >= 60 and len(lengths) > 2  # 108 sentences searched


def test_ctranslate2_forced_length_beam_equals_canlib(tmp_path):
    model = small_standard(12, 2, seed=1)
    ct2 = CT2Translator(export_ctranslate2(model, tmp_path / "ct2"), token_names(VOCAB), threads=1)
    srcs = sources(0) + sources(1)
    batch = make_batch(srcs, PAD_ID, EOS_ID)
    ours = beam_search(model, batch, SearchSettings(beam=4, forced_length=9, renormalize=True)).tokens
    assert ct2.translate(srcs, beam=4, forced_length=9) == ours
    # without renormalising, the EOS this model favours is banned after the softmax, and the beams rank differently
    assert beam_search(model, batch, SearchSettings(beam=4, forced_length=9)).tokens != ours


def test_only_standard_models_export(tmp_path):
    torch.manual_seed(0)
    model = Seq2Seq(small_config("can", vocab_size=VOCAB, dec_layers=1))
    with pytest.raises(ValueError, match="decoder_kind='can'"):
        export_ctranslate2(model, tmp_path / "ct2")


# -- canlib export ctranslate2 ---------------------------------------------------------------------------------------
def saved_model(tmp_path, kind: str) -> tuple:
    """A tiny model of decoder ``kind`` saved as RUN/model.pt, with a SentencePiece vocabulary in RUN."""
    from canlib.data.vocab import Vocabulary
    from canlib.model.checkpoint import save_model

    vocab = Vocabulary.train(["a dog runs in the park", "the cat sits on the mat", "zwei hunde spielen"] * 30, 40)
    run = tmp_path / kind
    run.mkdir()
    vocab.save(run / "vocab.model")
    model = small_model(kind, seed=1, vocab_size=vocab.size, enc_layers=2)
    ending_early(model, eos_bias=10.0)  # as small_standard: varied outputs that end at different lengths
    save_model(model, run / "model.pt", vocab_id=vocab.id)
    return run / "model.pt", model, vocab


@pytest.mark.parametrize(
    "kind, reason",
    [
        ("can", "CAN computes self-attention, cross-attention and the FFN as one compressed sub-layer"),
        ("aan", "the Average Attention Network's cumulative average"),
        ("san", "the Sharing Attention Network reuses attention maps across layers"),
    ],
)
def test_export_refuses_what_ctranslate2_cannot_express_in_one_line(kind, reason, tmp_path, capsys):
    from canlib.cli import main

    checkpoint, _, _ = saved_model(tmp_path, kind)
    assert main(["export", "ctranslate2", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "ct2")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"canlib export: error: {checkpoint}: decoder_kind={kind!r} cannot")
    assert reason in err[0] and not (tmp_path / "ct2").exists()


def test_the_exported_model_appends_the_source_eos_itself(tmp_path, capsys):
    """CTranslate2 given a sentence's pieces alone (no "</s>") translates it as canlib does: the EOS canlib's
    encoder reads is the exported model's to add."""
    from canlib.cli import main

    checkpoint, model, vocab = saved_model(tmp_path, "standard")
    translator = ctranslate2.Translator(str(export_ctranslate2(model, tmp_path / "api", vocab)), intra_threads=1)
    lines = ["a dog runs in the park", "the cat sits", "zwei hunde spielen in the park"]
    ids = [vocab.encode(line) for line in lines]
    pieces = [[vocab.sp.id_to_piece(i) for i in x] for x in ids]
    found = translator.translate_batch(
        pieces, beam_size=1, max_decoding_length=20, suppress_sequences=[["<blank>"], ["<s>"]]
    )
    ours = beam_search(model, make_batch(ids, PAD_ID, EOS_ID), SearchSettings(beam=1, max_len_a=0, max_len_b=20))
    assert [[vocab.sp.piece_to_id(p) for p in r.hypotheses[0]] for r in found] == ours.tokens
    assert len({len(t) for t in ours.tokens}) > 1  # outputs end at different lengths: the EOS handling is compared
    out = tmp_path / "ct2"  # the command writes the same model, with the vocabulary beside it
    assert main(["export", "ctranslate2", "--checkpoint", str(checkpoint), "--out", str(out)]) == 0
    assert {"model.bin", "vocab.model", "canlib.json"} <= {p.name for p in out.iterdir()}
    assert (out / "model.bin").read_bytes() == (tmp_path / "api" / "model.bin").read_bytes()
    assert main(["export", "ctranslate2", "--checkpoint", str(checkpoint), "--out", str(out)]) == 2
    assert "pass --overwrite to replace it" in capsys.readouterr().err
