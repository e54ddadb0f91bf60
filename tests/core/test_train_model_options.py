"""``canlib train``'s model options, run as a user runs them: sizes on top of a preset (``--layers``, ``--d-model``,
``--heads``, ``--ffn``), and ``--init-from CKPT``: a new run from a checkpoint's weights alone, with a fresh
schedule, said so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, prepare_toy_corpus


def canlib(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "CANLIB_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "canlib", *args], capture_output=True, text=True, env=env, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return prepare_toy_corpus(tmp_path_factory.mktemp("sizes"), {"train": 200, "valid": 10, "test": 10}, canlib)


SHORT = ["--max-tokens", "512", "--warmup", "4", "--no-progress", "--threads", "1"]


def test_model_sizes_override_the_preset(prepared, tmp_path):
    run = tmp_path / "run"
    done = canlib("train", "--preset", "tiny-baseline", "--layers", "2,1", "--d-model", "32", "--heads", "2",
                  "--ffn", "48", "--data", str(prepared), "--out", str(run), "--max-steps", "2", *SHORT,
                  cache=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    model = json.loads((run / "config.json").read_text())["model"]
    assert (model["enc_layers"], model["dec_layers"], model["d_model"], model["heads"], model["ffn_dim"]) == (
        2, 1, 32, 2, 48,
    )  # fmt: skip
    weights = torch.load(run / "average.pt", weights_only=True)["model"]
    assert f"{sum(t.numel() for t in weights.values()):,} parameters" in done.stdout
    resumed = canlib("train", "--out", str(run), "--resume", "--max-steps", "3", "--heads", "4", cache=tmp_path)
    assert resumed.returncode == 2 and resumed.stderr.splitlines() == [
        f"canlib train: error: heads=4 differs from the run's 2 ({run / 'config.json'}): a resumed run keeps its "
        "model; leave the size options out to continue it"
    ]
    both = canlib("train", "--preset", "tiny-baseline", "--layers", "2,1", "--encoder-layers", "3",
                  "--data", str(prepared), "--out", str(tmp_path / "other"), cache=tmp_path)  # fmt: skip
    assert both.returncode == 2 and "--layers ENC,DEC or --encoder-layers/--decoder-layers, not both" in both.stderr


def test_init_from_starts_from_the_checkpoints_weights_with_a_fresh_schedule(prepared, tmp_path):
    first = tmp_path / "first"
    done = canlib("train", "--preset", "tiny-baseline", "--data", str(prepared), "--out", str(first),
                  "--max-steps", "3", *SHORT, cache=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    second = tmp_path / "second"
    start = first / "average.pt"
    done = canlib("train", "--init-from", str(start), "--data", str(prepared), "--out", str(second),
                  "--max-steps", "1", "--lr", "1e-12", "--log-every", "1", *SHORT, cache=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"from the weights of {start} (weights only: a fresh optimizer, schedule and step count)" in done.stdout
    rows = [json.loads(line) for line in (second / "log.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 1 and rows[0]["lr"] == pytest.approx(1e-12 * 1 / 4)  # the warm-up's first update
    before = torch.load(start, weights_only=True)["model"]
    after = torch.load(second / "average.pt", weights_only=True)["model"]
    assert max((after[k].float() - before[k].float()).abs().max().item() for k in before) < 1e-9
    assert json.loads((second / "config.json").read_text())["init_from"] == str(start.resolve())
    other = canlib("train", "--init-from", str(start), "--preset", "tiny-can", "--data", str(prepared),
                   "--out", str(tmp_path / "third"), *SHORT, cache=tmp_path)  # fmt: skip
    assert other.returncode == 2 and len(other.stderr.splitlines()) == 1
    assert f"--init-from {start}: its model has" in other.stderr and not (tmp_path / "third").exists()
