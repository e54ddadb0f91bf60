"""The command line's small manners, run as a user runs it: a reader that stops early (``| head``) ends a command
without a traceback, ``--train-pairs`` beyond the corpus and a missing ``--files`` folder are said as such, and
``canlib info`` counts the presets' parameters without loading PyTorch's compiler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, small_model, write_toy_corpus

LINES = ["a dog runs in the park", "the cat sits on the mat", "zwei hunde spielen"]


def canlib(*args: str, cache: Path | None = None, **options) -> subprocess.CompletedProcess:
    """``python -m canlib ARGS`` as a user runs it (one thread, this checkout's canlib)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    if cache is not None:
        env["CANLIB_CACHE_DIR"] = str(cache)
    options.setdefault("stderr", subprocess.PIPE)
    return subprocess.run(
        [sys.executable, "-m", "canlib", *args], text=True, env=env, timeout=300, check=False, **options
    )


def into_a_closed_pipe(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    """The command with its stdout a pipe whose reader is gone, as ``canlib ... | head -1`` once head has its line."""
    read, write = os.pipe()
    os.close(read)
    try:
        return canlib(*args, cache=cache, stdout=write)
    finally:
        os.close(write)


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    from canlib.data.vocab import Vocabulary
    from canlib.model.checkpoint import save_model

    vocab = Vocabulary.train(LINES * 30, vocab_size=40)
    vocab.save(tmp_path / "vocab.model")
    torch.manual_seed(0)
    (tmp_path / "run").mkdir()
    save_model(small_model(vocab_size=vocab.size, dec_layers=1, max_len=64), tmp_path / "run" / "model.pt",
               vocab_id=vocab.id)  # fmt: skip
    return tmp_path / "run" / "model.pt"


def test_a_reader_that_stops_early_ends_each_command_without_a_traceback(checkpoint, tmp_path):
    source = tmp_path / "input.en"
    source.write_text("".join(line + "\n" for line in LINES))
    for command in (
        ["translate", "--checkpoint", str(checkpoint), "--device", "cpu", "--input", str(source)],
        ["bleu", str(source), str(source), "--lang", "en"],
        ["data", "list"],
    ):
        done = into_a_closed_pipe(*command, cache=tmp_path / "cache")
        assert done.returncode == 1, (command, done.stderr)
        assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, (command, done.stderr)


def test_more_training_pairs_than_the_corpus_has_are_refused_with_the_count(tmp_path):
    write_toy_corpus(tmp_path / "mine", {"train": 30, "valid": 5, "test": 5})
    done = canlib("data", "prepare", "mine", "--files", str(tmp_path / "mine"), "--src", "en", "--tgt", "de",
                  "--vocab-size", "40", "--train-pairs", "50", "--out", str(tmp_path / "p"),
                  cache=tmp_path / "cache", stdout=subprocess.PIPE)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "canlib data: error: --train-pairs 50: mine/train has only 30 training pairs with text on both "
        "sides; ask for fewer, or leave --train-pairs out to keep them all"
    ]
    assert not (tmp_path / "p").exists()


def test_a_missing_files_folder_is_said_to_be_missing(tmp_path):
    folder = tmp_path / "no-such-folder"
    done = canlib("data", "prepare", "mine", "--files", str(folder), "--src", "en", "--tgt", "de",
                  cache=tmp_path / "cache", stdout=subprocess.PIPE)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"canlib data: error: {folder}: no such folder"]


def test_info_counts_parameters_without_pytorchs_compiler_and_as_a_meta_model_has_them():
    """The table's counts equal those of the models built on PyTorch's meta device (shapes alone), and building
    the table imports no ``torch._dynamo`` (whose import made ``canlib info`` take seconds)."""
    code = (
        "import json, sys; from canlib.info import preset_table; rows = preset_table(); "
        "print(json.dumps({'dynamo': 'torch._dynamo' in sys.modules, 'rows': rows}))"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["dynamo"] is False
    from canlib.model.config import preset
    from canlib.model.seq2seq import Seq2Seq

    for row in printed["rows"][::7]:
        with torch.device("meta"):
            model = Seq2Seq(preset(row["preset"], vocab_size=row["vocab_size"]))
        assert row["params"] == sum(p.numel() for p in model.parameters()), row["preset"]
