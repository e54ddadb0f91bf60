"""scripts/gpu_bench.py in its quick mode on the CPU: it runs and writes the stored result the registry reads."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_gpu_bench_dry_run_writes_both_paths_the_goals_and_the_ratio_spread_over_interleaved_repeats(
    tmp_path, shared_data
):
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "gpu_bench.py"),
            "--dry-run",
            "--json",
            str(out),
            "--systems",
            "baseline,balanced,can",
            "--sources",
            "test2016",
            "--data-dir",
            str(shared_data),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    meta, prov = data["result"], data["provenance"]
    systems = meta["systems"]
    assert prov["scale"] == "tiny" and prov["config"]["settings"] == meta["settings"]  # a dry run: never a verdict
    assert (
        prov["device"].startswith("CPU")
        and prov["date"] == prov["measured_at"][:10]
        and "--dry-run" in prov["config"]["command"]
    )
    settings = meta["settings"]
    for name in ("baseline", "balanced", "can"):
        for mode in ("eager", "captured"):  # tokens: sentences x forced length x the times a repeat translated them
            row = systems[name][mode]
            tokens = settings["sentences"] * settings["forced_length"] * settings["passes"][mode]
            assert row["tok_per_s"] == tokens / statistics.median(row["seconds"]) > 0
            assert row["tok_per_s_repeats"] == [tokens / s for s in row["seconds"]]
            assert (row["min"], row["max"]) == (tokens / max(row["seconds"]), tokens / min(row["seconds"]))
    assert meta["captured_matches_eager"] == {"baseline": True, "balanced": True, "can": True}
    assert set(meta["goals"]) == {
        "eager can/balanced",
        "captured balanced tok/s",
        "captured can tok/s",
        "captured can/balanced",
    }
    assert meta["errors"] == {}
    # the first three test2016 sources, counted by hand: words and punctuation marks
    # ("A man in an orange hat starring at something." is 9 words and a full stop)
    assert meta["sources"]["lengths"] == [10, 16, 13]
    for mode in ("eager", "captured"):  # per repeat, Balanced's seconds over CAN's: the same tokens in both
        per_repeat = [b / c for b, c in zip(systems["balanced"][mode]["seconds"], systems["can"][mode]["seconds"])]
        assert len(per_repeat) == settings["repeats"] == 3
        assert meta["ratios"][mode]["can"]["median"] == statistics.median(per_repeat)
        assert meta["ratios"][mode]["can"]["min"] == min(per_repeat)
    assert meta["goals"]["eager can/balanced"]["value"] == meta["ratios"]["eager"]["can"]["median"]


def test_gpu_bench_times_as_the_speed_plan_says_by_default(monkeypatch):
    """Its defaults are the speed plan's (the record the speed standard reads): change the plan, the defaults follow."""
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    import gpu_bench

    from repro.bench.settings import SpeedPlan

    monkeypatch.setattr(gpu_bench, "SpeedPlan", lambda: SpeedPlan(repeats=13, forced_length=7, min_seconds=0.5))
    args = gpu_bench.arguments().parse_args([])
    assert (args.repeats, args.forced_length, args.min_seconds) == (13, 7, 0.5)
