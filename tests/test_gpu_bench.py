"""scripts/gpu_bench.py in its quick mode on the CPU: it runs and writes the JSON the GPU session reads."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_gpu_bench_quick_mode_writes_both_paths_and_goals(tmp_path):
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu_bench.py"), "--quick", "--device", "cpu", "--json", str(out),
         "--systems", "baseline,balanced,can"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    systems, meta = data["systems"], data["meta"]
    for name in ("baseline", "balanced", "can"):
        assert systems[name]["eager_tok_per_s"] > 0 and systems[name]["captured_tok_per_s"] > 0
    assert meta["captured_matches_eager"] == {"baseline": True, "balanced": True, "can": True}
    assert set(meta["goals"]) == {"eager can/balanced", "captured balanced tok/s", "captured can/balanced"}
    assert meta["errors"] == {}
