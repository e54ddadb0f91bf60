"""The command line: ``python -m canlib info`` lists every preset with its parameter count."""
from __future__ import annotations

import json
import subprocess
import sys

from canlib.model.config import PRESETS


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "canlib", *args], capture_output=True, text=True, timeout=300)


def test_info_lists_every_preset_with_parameters():
    out = run_cli("info", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["preset"]: r for r in json.loads(out.stdout)}
    assert set(rows) == set(PRESETS)
    for name in ("baseline", "balanced", "san", "aan", "can", "can_attn", "can_ffn", "depth-9-4", "depth-14-1", "tiny-can", "small-can"):
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
