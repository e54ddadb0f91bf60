"""``canlib train --eval-bleu``, run as a user runs it: each validation also scores the model's translations of the
first validation sentences with sacreBLEU, and best.pt and ``--patience`` follow that BLEU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, write_toy_corpus

sacrebleu = pytest.importorskip("sacrebleu")


def canlib(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "CANLIB_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "canlib", *args], capture_output=True, text=True, env=env, timeout=600, check=False
    )


def test_validation_bleu_is_sacrebleu_of_the_checkpoints_translations_and_patience_follows_it(tmp_path):
    from canlib.decoding.translate import load_translator, translate_lines

    write_toy_corpus(tmp_path / "files", {"train": 200, "valid": 20, "test": 10})
    prepared = tmp_path / "prepared"
    done = canlib("data", "prepare", "toy", "--files", str(tmp_path / "files"), "--src", "en", "--tgt", "de",
                  "--vocab-size", "60", "--out", str(prepared), cache=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = tmp_path / "run"
    # 40 updates at a high rate: translations that differ from sentence to sentence, so a BLEU scored against the
    # wrong references would differ too
    done = canlib("train", "--preset", "tiny-baseline", "--data", str(prepared), "--out", str(run), "--max-steps",
                  "40", "--lr", "3e-3", "--warmup", "4", "--max-tokens", "512", "--valid-every", "10", "--eval-bleu",
                  "--eval-bleu-sentences", "8", "--patience", "2", "--keep-last", "4", "--no-progress",
                  "--threads", "1", cache=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "validation BLEU: sacreBLEU of the first 8 validation sentences, beam 1" in done.stdout
    valid = [json.loads(x) for x in (run / "log.jsonl").read_text().splitlines() if '"valid"' in x]
    sources = (prepared / "valid.src.txt").read_text().splitlines()[:8]
    references = (prepared / "valid.tgt.txt").read_text().splitlines()[:8]
    for row in valid:
        model, vocab = load_translator(run / "checkpoints" / f"step_{row['step']:07d}.pt", run / "vocab.model")
        hyps = translate_lines(model, vocab, sources, beam=1)
        assert row["valid_bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [references]).score, abs=1e-9)
    # patience on BLEU (higher is better): the run stops at the second validation in a row without a new best
    best, bad, stopped_at = None, 0, None
    for row in valid:
        if best is None or row["valid_bleu"] > best[0]:
            best, bad = (row["valid_bleu"], row["step"]), 0
        else:
            bad += 1
        if bad >= 2:
            stopped_at = row["step"]
            break
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["best"]["step"] == best[1] and result["best"]["metric"] == pytest.approx(best[0])
    assert result["stop_reason"] == ("early_stopping" if stopped_at else "max_steps")
    assert result["step"] == (stopped_at or 40)
    assert max(row["valid_bleu"] for row in valid) > 1  # a model that translates, not one empty line after another
