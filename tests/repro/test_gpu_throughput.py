"""scripts/gpu_throughput.sh --dry-run: every part of the training-throughput script on a CPU (tiny models), one
JSON per part, training_throughput.json with provenance and the issue's fields, one archive, resumable; and
scripts/mps.sh falls back cleanly where the MPS daemon cannot start or serve."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PARTS = ("t1_can_best", "t2_2_off", "t3", "t4", "t5")


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    from conftest import SHARED_DATA, missing

    if not SHARED_DATA.is_dir():
        missing(f"real data folder {SHARED_DATA} not present")
    tmp = tmp_path_factory.mktemp("throughput")
    env = {
        **os.environ,
        "OUT": str(tmp / "out"),
        "THROUGHPUT_DIR": str(tmp / "parts"),
        "PYTHON": sys.executable,
        "CANLIB_DATA_DIR": str(SHARED_DATA),
        "CANLIB_CACHE_DIR": str(tmp / "cache"),
        "OMP_NUM_THREADS": "1",
        "TORCHINDUCTOR_CACHE_DIR": str(tmp / "compile"),
        "TRITON_CACHE_DIR": str(tmp / "compile"),
    }
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_throughput.sh"), "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return tmp, env, done


def test_the_dry_run_writes_every_part_and_one_archive(dry_run):
    tmp, _, done = dry_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with tarfile.open(tmp / "out" / "throughput.tar.gz") as tar:
        names = set(tar.getnames())
    for part in PARTS:
        assert f"parts/{part}.json" in names and f"parts/{part}.log" in names, part
    assert {
        "parts/training_throughput.json",
        "parts/environment.txt",
        "parts/status.txt",
        "parts/t1_can_best.txt",
    } <= names
    assert "mps: off: nvidia-cuda-mps-control not found" in done.stdout


def test_the_report_has_provenance_and_the_issues_fields_per_case(dry_run):
    tmp, _, _ = dry_run
    report = json.loads((tmp / "out" / "training_throughput.json").read_text())
    assert (
        report["dry_run"] is True
        and len(report["commit"]) >= 40
        and report["date"]
        and report["device"].startswith("CPU")
    )
    assert report["parts"] == {part: "ok" for part in PARTS}
    cases = {(c["part"], c.get("variant"), c.get("shape")): c for c in report["cases"]}
    assert {k[0] for k in cases} == {"T1", "T2", "T3", "T4", "T5"}
    for case in report["cases"]:
        if case["part"] in ("T1", "T2", "T4"):
            assert {"updates_per_s", "processes", "mps", "compile"} <= set(case) and case["updates_per_s"] > 0, case
    t1 = cases[("T1", "best", None)]
    assert t1["compile"] is True and t1["first_epoch_s"] > 0 and t1["warm_ms_per_update"] > 0
    assert t1["options"] == {"compile": True, "pad_multiple": 8, "sdpa_backend": "math", "loss_vocab_block": 2048}
    t2 = cases[("T2", "fast", None)]
    assert t2["processes"] == 2 and t2["mps"] is False and len(t2["weights"]) == 2 and t2["first_epoch_s"] > 0
    assert t2["weights"][0] != t2["weights"][1]  # two seeds, two models
    t3 = cases[("T3", "deterministic", None)]
    assert t3["same_twice"] is True and t3["resume_exact"] is True  # on a CPU even as-is; on a GPU the question
    assert {c["shape"] for c in report["cases"] if c["part"] == "T4"} == {"fixed", "real"}
    assert all("mfu" in c for c in report["cases"] if c["part"] == "T4")
    t5 = cases[("T5", None, None)]
    assert t5["tokens_equal"] is True and set(t5["eval_seconds"]) == {"per_set_128", "one_pass_1024"}


def test_a_second_call_keeps_the_parts_done_and_gathers_again(dry_run):
    tmp, env, _ = dry_run
    again = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_throughput.sh"), "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stdout[-2000:]
    for part in PARTS:
        assert f"{part}: done before, kept" in again.stdout
    assert json.loads((tmp / "out" / "training_throughput.json").read_text())["parts"] == {p: "ok" for p in PARTS}


# -- scripts/mps.sh -------------------------------------------------------------------------------------------
def mps(tmp_path: Path, control: str, probe_ok: bool) -> dict[str, str]:
    """Source scripts/mps.sh with stand-ins for nvidia-smi, nvidia-cuda-mps-control (``control``: its script body)
    and the python probe; report the state after mps_start and mps_stop, and what the daemon was sent."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (
        ("nvidia-smi", "exit 0"),
        ("nvidia-cuda-mps-control", control),
        ("python-probe", "exit 0" if probe_ok else "echo 'CUDA error: MPS client failed'; exit 1"),
    ):
        (bin_dir / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = (
        f'. "{REPO}/scripts/mps.sh"; mps_start; echo "start=$MPS_STATE"; echo "pipe=${{CUDA_MPS_PIPE_DIRECTORY:-}}"; '
        'mps_stop; echo "stop=$MPS_STATE"; echo "after=${CUDA_MPS_PIPE_DIRECTORY:-}"'
    )
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PY": str(bin_dir / "python-probe"),
        "CANLIB_MPS_DIR": str(tmp_path / "mps"),
        "CALLS": str(tmp_path / "calls.txt"),
    }
    out = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60).stdout
    state = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    state["calls"] = (tmp_path / "calls.txt").read_text() if (tmp_path / "calls.txt").exists() else ""
    return state


RECORD = 'if [ "${1:-}" = -d ]; then echo start >> "$CALLS"; else echo "sent $(cat)" >> "$CALLS"; fi'


def test_mps_starts_serves_and_is_stopped(tmp_path):
    state = mps(tmp_path, RECORD, probe_ok=True)
    assert state["start"] == "on" and state["pipe"].endswith("mps/pipe")
    assert state["stop"] == "off: stopped" and state["after"] == "" and state["calls"] == "start\nsent quit\n"


def test_mps_that_cannot_start_leaves_everything_as_it_was(tmp_path):
    state = mps(tmp_path, "echo 'An instance of this daemon is already running' >&2; exit 1", probe_ok=True)
    assert state["start"].startswith("off: the daemon did not start: An instance of this daemon is already running")
    assert state["pipe"] == "" and state["after"] == ""


def test_mps_under_which_cuda_fails_is_stopped_again(tmp_path):
    state = mps(tmp_path, RECORD, probe_ok=False)
    assert state["start"] == "off: a CUDA process failed under the daemon: CUDA error: MPS client failed"
    assert state["pipe"] == "" and state["calls"] == "start\nsent quit\n"
