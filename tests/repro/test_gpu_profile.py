"""scripts/gpu_profile.sh --dry-run: the GPU profile's whole path on a CPU (tiny models), one archive out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from canlib.decoding import fused

REPO = Path(__file__).resolve().parents[2]

CASES = (
    "train_small-can",
    "train_baseline",
    "train_can",
    "decode_balanced",
    "decode_can",
    *(("decode_balanced_fused", "decode_can_fused") if fused.available() else ()),
)  # fused: needs triton


def test_gpu_profile_dry_run_writes_one_archive_with_every_cases_table_and_summary(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_profile.sh"), "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with tarfile.open(tmp_path / "profile.tar.gz") as tar:
        names = set(tar.getnames())
    for case in CASES:
        assert {f"profile/{case}.txt", f"profile/{case}.json"} <= names, names
    assert {
        "profile/summary.json",
        "profile/sdpa_backends.json",
        "profile/environment.txt",
        "profile/profile.log",
    } <= names
    summary = json.loads((tmp_path / "profile" / "summary.json").read_text())
    assert summary["dry_run"] is True and set(summary["cases"]) == set(CASES)
    for case, row in summary["cases"].items():
        assert "error" not in row, (case, row)
        assert row["wall_ms"] > 0 and row["cpu_ms"] > 0 and row["host_syncs"] == 0, (case, row)
    assert summary["cases"]["decode_can"]["per"] == 3  # a search of 3 forced tokens, reported per step
    table = (tmp_path / "profile" / "train_can.txt").read_text()
    assert "aten::_fused_adam_" in table and "aten::mm" in table  # the whole update is in it, optimizer included
    backends = summary["sdpa_backends"]
    assert set(backends) == {"tiny-baseline", "tiny-can"} and isinstance(backends["tiny-baseline"]["math"], float)
    assert "gpu_profile: exit 0" in done.stdout
