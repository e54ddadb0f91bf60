"""A run's sets translated in one length-sorted pass, in large batches, give every sentence the tokens that
today's evaluation (each set on its own, 32 sentences a batch) gives it, in each set's own order."""

from __future__ import annotations

import pytest
import torch
from conftest import small_config

from canlib.training import TrainConfig, Trainer


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A d=32 model trained for 150 updates on the tiny Multi30k En-De corpus (it emits EOS, so beams end at
    different lengths) and the corpus's validation and test sources."""
    from conftest import SHARED_DATA, missing

    from canlib.data import load_prepared, prepare

    if not SHARED_DATA.is_dir():
        missing(f"real data folder {SHARED_DATA} not present")
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("translate")
    with (
        pytest.MonkeyPatch.context() as env
    ):  # the shared folder, not a download, whether or not scripts/test.sh set it
        env.setenv("CANLIB_DATA_DIR", str(SHARED_DATA))
        corpus = load_prepared(prepare("multi30k-en-de", "tiny", out_dir=folder / "prepared", progress=False))
    train = corpus.split("train")
    cfg = small_config(vocab_size=corpus.vocab.size, dec_layers=1, max_len=128)
    run = TrainConfig(
        lr=3e-3, warmup=30, max_tokens=1024, max_steps=150, log_every=50, keep_last=1, average_last=1, progress=False
    )
    trainer = Trainer(cfg, run, train, None, folder / "run")
    trainer.fit()
    model = trainer.model.eval()
    sets = {"valid": list(corpus.split("valid").src_text), "test2016": list(corpus.split("test").src_text)[:120]}
    return model, corpus.vocab, sets


def test_one_pass_in_large_batches_gives_todays_tokens_in_each_sets_order(trained):
    from canlib.decoding.translate import translate_lines, translate_sets

    model, vocab, sets = trained
    sets = {**sets, "odd": ["", "a man .", "   ", sets["valid"][3]]}  # empty lines and a repeat across sets
    today = {name: translate_lines(model, vocab, lines, beam=4, batch_size=32) for name, lines in sets.items()}
    for batch_size in (1024, 7):
        assert translate_sets(model, vocab, sets, beam=4, batch_size=batch_size) == today, batch_size
    assert today["odd"][0] == today["odd"][2] == "" and today["odd"][3] == today["valid"][3]
    lengths = {len(line.split()) for line in today["valid"]}
    assert len(lengths) > 3  # the outputs end at many lengths: the batches mix finished and live sentences


def test_the_default_batch_is_todays_on_a_cpu_and_larger_on_a_gpu(trained):
    from canlib.decoding.translate import evaluation_batch_size, translate_sets

    assert evaluation_batch_size("cpu") == 32 and evaluation_batch_size("cuda:0") == 1024
    model, vocab, sets = trained
    with pytest.warns(UserWarning, match="odd line 2: .* truncated"):
        out = translate_sets(model, vocab, {"odd": ["a dog", " ".join(["a man in a red shirt ."] * 60)]}, beam=2)
    assert len(out["odd"]) == 2


def test_a_batch_size_below_one_is_refused(trained):
    from canlib.decoding.translate import translate_sets

    model, vocab, _ = trained
    with pytest.raises(ValueError, match="batch_size=0"):
        translate_sets(model, vocab, {"a": ["a dog"]}, batch_size=0)


def test_the_pass_cuts_its_batches_from_length_sorted_sentences_of_all_sets(trained, monkeypatch):
    import canlib.decoding.translate as translate

    model, vocab, sets = trained
    widths = []
    real = translate.beam_search

    def recorded(model, src, settings):
        widths.append((src.size(0), src.size(1)))
        return real(model, src, settings)

    monkeypatch.setattr(translate, "beam_search", recorded)
    translate.translate_sets(model, vocab, sets, beam=2, batch_size=64)
    total = sum(len(v) for v in sets.values())
    assert [rows for rows, _ in widths] == [64] * (total // 64) + ([total % 64] if total % 64 else [])
    assert [w for _, w in widths] == sorted((w for _, w in widths), reverse=True)  # longest first, across the sets
