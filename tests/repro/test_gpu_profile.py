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


def test_gpu_profile_dry_run_writes_one_archive_with_every_cases_table_and_the_stored_profile(tmp_path):
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
        "profile/profile.json",
        "profile/sdpa_backends.json",
        "profile/environment.txt",
        "profile/profile.log",
    } <= names
    stored = json.loads((tmp_path / "profile" / "profile.json").read_text())
    summary, prov = stored["result"], stored["provenance"]
    assert prov["scale"] == "tiny" and "--dry-run" in prov["config"]["command"]  # a check of the script, never stored
    assert set(summary["cases"]) == set(CASES) and summary["errors"] == {}
    for case, row in summary["cases"].items():
        raw = json.loads((tmp_path / "profile" / f"{case}.json").read_text())  # the case's own file, written first
        assert {k: v for k, v in row.items() if k != "top_kernels"} == {k: raw[k] for k in row if k != "top_kernels"}
        assert row["top_kernels"] == raw["top_kernels"][:5]
        assert row["wall_ms"] > 0 and row["cpu_ms"] > 0 and row["host_syncs"] == 0, (case, row)
    assert summary["cases"]["decode_can"]["per"] == 3  # a search of 3 forced tokens, reported per step
    table = (tmp_path / "profile" / "train_can.txt").read_text()
    assert "aten::_fused_adam_" in table and "aten::mm" in table  # the whole update is in it, optimizer included
    backends = summary["sdpa_backends"]
    assert set(backends) == {"tiny-baseline", "tiny-can"} and isinstance(backends["tiny-baseline"]["math"], float)
    assert "gpu_profile: exit 0" in done.stdout
