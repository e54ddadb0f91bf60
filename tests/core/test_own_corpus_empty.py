"""``canlib data prepare --files --drop-empty``, run as a user runs it: training pairs with an empty side are left out
and counted in the summary; without it they are refused, naming the line; valid and test stay strict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from conftest import REPO, write_toy_corpus


def prepare(files: Path, out: Path, *more: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "CANLIB_CACHE_DIR": str(out.parent / "c")}
    return subprocess.run(
        [sys.executable, "-m", "canlib", "data", "prepare", "mine", "--files", str(files), "--src", "en", "--tgt",
         "de", "--vocab-size", "50", "--out", str(out), *more],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip


def blank(path: Path, numbers: list[int]) -> None:
    """Empty the lines ``numbers`` (counted from 1) of ``path``."""
    lines = path.read_text().splitlines()
    for n in numbers:
        lines[n - 1] = ""
    path.write_text("".join(line + "\n" for line in lines))


def test_drop_empty_leaves_out_and_counts_training_pairs_with_an_empty_side(tmp_path):
    files = write_toy_corpus(tmp_path / "files", {"train": 80, "valid": 8, "test": 8})
    blank(files / "train.en", [5])
    blank(files / "train.de", [9, 40])
    refused = prepare(files, tmp_path / "strict")
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1
    assert f"{files / 'train.en'}:5: empty line" in refused.stderr and "--drop-empty" in refused.stderr
    done = prepare(files, tmp_path / "p", "--drop-empty")
    assert done.returncode == 0, done.stderr
    assert "train: 77 of 80 pairs kept; left out: 3 with an empty side" in done.stdout
    assert json.loads((tmp_path / "p" / "meta.json").read_text())["counts"]["train"] == 77
    assert len(np.load(tmp_path / "p" / "train.src.offsets.npy")) == 77 + 1  # where each pair starts, and the end


def test_valid_and_test_stay_strict_with_drop_empty(tmp_path):
    files = write_toy_corpus(tmp_path / "files", {"train": 80, "valid": 8, "test": 8})
    blank(files / "valid.de", [3])
    done = prepare(files, tmp_path / "p", "--drop-empty")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert f"{files / 'valid.de'}:3: empty line" in done.stderr
