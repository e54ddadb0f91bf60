"""``canlib translate``'s n-best lists and run folders, run as a user runs it: ``--nbest N`` writes N scored
translations per line in Moses' and Marian's format, best first; a run folder as ``--checkpoint`` translates with its
best.pt and says so."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, small_model

LINES = ["a dog runs in the park", "the cat sits on the mat", "", "zwei hunde spielen"]


def canlib(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "canlib", *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


@pytest.fixture
def run_folder(tmp_path) -> Path:
    """A run folder as `canlib train` leaves it: config.json, vocab.model and checkpoints/best.pt."""
    from canlib.data.vocab import Vocabulary
    from canlib.model.checkpoint import save_model

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    vocab = Vocabulary.train([line for line in LINES if line] * 30, vocab_size=40)
    vocab.save(run / "vocab.model")
    (run / "config.json").write_text("{}\n")
    torch.manual_seed(0)
    save_model(small_model(vocab_size=vocab.size, dec_layers=1, max_len=64), run / "checkpoints" / "best.pt",
               vocab_id=vocab.id)  # fmt: skip
    return run


@pytest.fixture
def source(tmp_path) -> Path:
    path = tmp_path / "input.en"
    path.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    return path


def best_translations(checkpoint: Path) -> list[str]:
    from canlib.decoding.translate import load_translator, translate_lines

    model, vocab = load_translator(checkpoint)
    return translate_lines(model, vocab, LINES)


def test_nbest_writes_n_scored_translations_per_line_best_first(run_folder, source, tmp_path):
    out = tmp_path / "nbest.txt"
    done = canlib("translate", "--checkpoint", str(run_folder / "checkpoints" / "best.pt"), "--device", "cpu",
                  "--input", str(source), "--output", str(out), "--nbest", "3")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [re.fullmatch(r"(\d+) \|\|\| (.*) \|\|\| (-?\d+\.\d{6})", line) for line in out.read_text().splitlines()]
    assert all(rows), out.read_text()
    by_line: dict[int, list[tuple[str, float]]] = {}
    for row in rows:
        by_line.setdefault(int(row.group(1)), []).append((row.group(2), float(row.group(3))))
    assert sorted(by_line) == [0, 1, 2, 3]
    assert by_line[2] == [("", 0.0)]  # an empty line: one empty translation
    for i in (0, 1, 3):
        hyps = by_line[i]
        assert 1 <= len(hyps) <= 3 and len({h for h, _ in hyps}) == len(hyps)
        assert [s for _, s in hyps] == sorted((s for _, s in hyps), reverse=True) and hyps[0][1] < 0
    assert [by_line[i][0][0] for i in range(4)] == best_translations(run_folder / "checkpoints" / "best.pt")
    more = canlib("translate", "--checkpoint", str(run_folder), "--input", str(source), "--nbest", "5")
    assert more.returncode == 2
    assert more.stderr.splitlines() == ["canlib translate: error: --nbest 5: at most --beam (4) translations per line"]


def test_a_run_folder_translates_with_its_best_checkpoint_and_says_so(run_folder, source, tmp_path):
    out = tmp_path / "out.de"
    done = canlib("translate", "--checkpoint", str(run_folder), "--device", "cpu", "--input", str(source),
                  "--output", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    best = run_folder / "checkpoints" / "best.pt"
    assert f"canlib translate: {run_folder} is a run folder: translating with its {best}" in done.stderr
    assert out.read_text().splitlines() == best_translations(best)
    assert any(line.startswith(f"canlib translate: 4 lines translated to {out}") for line in done.stderr.splitlines())
