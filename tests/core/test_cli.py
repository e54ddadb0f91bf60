"""The command line: ``canlib info`` (presets, parameter counts per scale), ``canlib bleu`` (inputs and errors), and
the bad inputs of ``canlib train`` and ``canlib translate``: one line naming the file, exit status 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import small_model

from canlib.model.config import PRESETS


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "canlib", *args], capture_output=True, text=True, timeout=300)


def test_info_lists_every_preset_with_parameters():
    out = run_cli("info", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["preset"]: r for r in json.loads(out.stdout)}
    assert set(rows) == set(PRESETS)
    for name in (
        "baseline",
        "balanced",
        "san",
        "aan",
        "can",
        "can_attn",
        "can_ffn",
        "depth-9-4",
        "depth-14-1",
        "tiny-can",
        "small-can",
    ):
        assert rows[name]["params"] > 0
    # each system reports its own count: the decoder kinds really differ
    assert len({rows[n]["params"] for n in ("balanced", "san", "aan", "can")}) == 4
    assert abs(rows["baseline"]["params"] - rows["balanced"]["params"]) / rows["balanced"]["params"] < 0.05


def test_info_vocabulary_size_is_a_parameter():
    small = {r["preset"]: r["params"] for r in json.loads(run_cli("info", "--json", "--vocab-size", "1000").stdout)}
    big = {r["preset"]: r["params"] for r in json.loads(run_cli("info", "--json").stdout)}
    assert big["can"] - small["can"] == (32000 - 1000) * 512


def test_info_text_table_names_presets():
    out = run_cli("info")
    assert out.returncode == 0
    assert "can_ffn" in out.stdout and "tiny-balanced" in out.stdout


def test_bad_vocab_size_is_a_clear_error():
    out = run_cli("info", "--vocab-size", "0")
    assert out.returncode == 2
    assert "--vocab-size=0" in out.stderr


def test_info_counts_each_scale_at_its_own_vocabulary():
    """tiny runs use a 2,000-piece vocabulary and small runs 8,000: info counts them so by default."""
    from canlib.catalogue import scale_spec

    rows = {r["preset"]: r for r in json.loads(run_cli("info", "--json").stdout)}
    assert (rows["tiny-can"]["vocab_size"], rows["small-can"]["vocab_size"], rows["can"]["vocab_size"]) == (
        2000,
        8000,
        32000,
    )
    assert rows["tiny-can"]["scale"] == "tiny" and scale_spec("tiny").vocab_size == 2000
    at_32k = {r["preset"]: r["params"] for r in json.loads(run_cli("info", "--json", "--vocab-size", "32000").stdout)}
    assert at_32k["tiny-can"] - rows["tiny-can"]["params"] == (32000 - 2000) * 64
    assert at_32k["can"] == rows["can"]["params"]


def test_bleu_of_two_empty_files_is_a_clear_error(tmp_path):
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("")
    out = run_cli("bleu", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--lang", "de")
    assert out.returncode == 2
    assert "empty: no sentences to score" in out.stderr and "Traceback" not in out.stderr
    out = run_cli("bleu", "/dev/null", "/dev/null", "--lang", "de")  # a readable path that is not a regular file
    assert out.returncode == 2 and "no sentences to score" in out.stderr and "no such file" not in out.stderr


def test_bleu_reads_stdin_and_pipes(tmp_path):
    ref = tmp_path / "ref.txt"
    ref.write_text("the cat sat on the mat\nthe dog ran\n")
    out = subprocess.run(
        [sys.executable, "-m", "canlib", "bleu", "-", str(ref), "--lang", "en"],
        input=ref.read_text(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1])["bleu"] == pytest.approx(100.0)
    out = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m canlib bleu <(cat "{ref}") "{ref}" --lang en'],
        capture_output=True,
        text=True,
        timeout=300,
    )  # process substitution: /dev/fd/N
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1])["bleu"] == pytest.approx(100.0)
    missing = run_cli("bleu", str(tmp_path / "nope.txt"), str(ref), "--lang", "en")
    assert missing.returncode == 2 and "nope.txt: no such file" in missing.stderr


def test_train_refuses_an_out_that_is_a_file_in_one_line_and_leaves_the_file_alone(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n")
    for out in (notes, notes / "run"):  # the file itself, or a folder inside it
        res = run_cli("train", "--preset", "tiny-can", "--data", str(tmp_path / "corpus"), "--out", str(out))
        assert res.returncode == 2
        assert res.stderr.splitlines()[0].startswith(f"canlib train: error: {notes}: is a file, not a folder")
        assert len(res.stderr.splitlines()) == 1 and "Traceback" not in res.stderr
    assert notes.read_text() == "keep me\n"


@pytest.fixture
def tiny_checkpoint(tmp_path):
    """A randomly initialised tiny model saved as a checkpoint, its vocabulary one folder up."""
    from canlib.data.vocab import Vocabulary
    from canlib.model.checkpoint import save_model

    vocab = Vocabulary.train(
        ["a dog runs in the park", "the cat sits on the mat", "zwei hunde spielen"] * 30, vocab_size=40
    )
    vocab.save(tmp_path / "vocab.model")
    model = small_model(vocab_size=vocab.size, dec_layers=1, max_len=16)
    (tmp_path / "run").mkdir()
    save_model(model, tmp_path / "run" / "model.pt", vocab_id=vocab.id)
    return tmp_path / "run" / "model.pt"


def test_translate_names_the_file_and_line_of_invalid_utf8_in_one_line(tiny_checkpoint, tmp_path):
    bad = tmp_path / "input.en"
    bad.write_bytes("a dog runs\nthe caf\xe9 ".encode("latin-1") + b"\n")  # line 2: Latin-1, not UTF-8
    common = ("translate", "--checkpoint", str(tiny_checkpoint), "--device", "cpu")
    res = run_cli(*common, "--input", str(bad))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [f"canlib translate: error: {bad}:2: invalid UTF-8 (invalid continuation byte)"]
    piped = subprocess.run(
        [sys.executable, "-m", "canlib", *common], input=bad.read_bytes(), capture_output=True, timeout=300
    )
    assert piped.returncode == 2
    expected = "canlib translate: error: <stdin>:2: invalid UTF-8 (invalid continuation byte)"
    assert piped.stderr.decode().splitlines() == [expected]
