"""The stored GPU results and the shared speed studies the chapters read."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from canlib.studies import gpu_results as gpu
from canlib.studies.results import ProvenanceError, load_result

REPO = Path(__file__).resolve().parents[1]
STORED = REPO / "book" / "results" / "gpu" / gpu.DEFAULT_RUN
RAW = REPO.parent.parent / "shared" / "measurements" / gpu.DEFAULT_RUN  # /work/shared/... beside the worktrees
if not RAW.is_dir():
    RAW = REPO.parent / "shared" / "measurements" / gpu.DEFAULT_RUN


@pytest.fixture
def results_here(monkeypatch):
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(REPO / "book" / "results"))


@pytest.mark.parametrize("kind", sorted(set(gpu.FILES.values())))
def test_every_stored_gpu_file_loads_with_its_provenance(results_here, kind):
    _, prov = gpu.load(kind)
    assert prov["commit"] == "df024e7" and prov["date"] == "2026-11-26" and prov["device"] == "NVIDIA H200"
    assert prov["config"]["command"].startswith("python ")
    assert "shared/measurements" in prov["source"]


def test_gpu_speed_ratios_are_the_measured_ones(results_here):
    eager, prov = gpu.gpu_speed("eager")
    assert round(eager["balanced"]["tok_per_s"] / eager["baseline"]["tok_per_s"], 2) == 2.28
    assert round(eager["can"]["ratio_to_balanced"], 2) == 1.21
    assert prov["dtype"] == "float16" and prov["captured_matches_eager"]["aan"] is False
    captured, _ = gpu.gpu_speed("captured")
    assert round(captured["balanced"]["tok_per_s"], 1) == 1340.3
    for row in eager.values():
        assert row["min"] <= row["median"] <= row["max"]


def test_gpu_breakdown_shows_search_is_a_quarter_of_balanced(results_here):
    parts, _ = gpu.gpu_breakdown()
    assert round(parts["balanced"]["search_share"], 2) == 0.25
    assert set(parts) == {"baseline", "balanced", "can"}


@pytest.mark.skipif(not RAW.is_dir(), reason="raw measurement folder not present")
def test_stored_figures_equal_the_raw_measurements(results_here):
    raw = json.loads((RAW / "gpu_bench.json").read_text())
    eager, _ = gpu.gpu_speed("eager")
    captured, _ = gpu.gpu_speed("captured")
    for system in ("baseline", "balanced", "san", "aan", "can"):
        assert eager[system]["tok_per_s"] == pytest.approx(raw[system]["eager_tok_per_s"], rel=1e-9)
        assert captured[system]["tok_per_s"] == pytest.approx(raw[system]["captured_tok_per_s"], rel=1e-9)
    batch, _ = gpu.gpu_batch()
    raw_batch = json.loads((RAW / "bench_batch.json").read_text())
    assert batch["can"][64] == raw_batch["can"]["by_batch"]["64"]
    runs, _ = gpu.gpu_training("training_32k")
    assert runs["baseline"]["mfu"] == json.loads((RAW / "smoke_32k.json").read_text())["runs"]["baseline"]["mfu"]


@pytest.mark.skipif(not RAW.is_dir(), reason="raw measurement folder not present")
def test_converting_again_reproduces_the_stored_results(tmp_path):
    gpu.convert_measurements(RAW, tmp_path)
    for path in STORED.glob("*.json"):
        assert load_result(tmp_path / path.name)[0] == load_result(path)[0]


def test_a_tampered_median_is_refused(tmp_path):
    if not RAW.is_dir():
        pytest.skip("raw measurement folder not present")
    shutil.copy(RAW / "gpu_bench.json", tmp_path / "gpu_bench.json")
    data = json.loads((tmp_path / "gpu_bench.json").read_text())
    data["can"]["eager_tok_per_s"] *= 1.1
    (tmp_path / "gpu_bench.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="can eager"):
        gpu.convert_measurements(tmp_path, tmp_path / "out")


def test_raw_files_without_commit_or_date_need_them_given(tmp_path):
    (tmp_path / "smoke_32k.json").write_text(json.dumps({"device": "GPU X", "runs": {}}))
    with pytest.raises(ValueError, match="_git_commit"):
        gpu.convert_measurements(tmp_path, tmp_path / "out")
    written = gpu.convert_measurements(tmp_path, tmp_path / "out", commit="abc1234", date="2026-01-01")
    assert load_result(written[0])[1]["commit"] == "abc1234"


def test_missing_gpu_run_names_the_converter(tmp_path, monkeypatch):
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="canlib.studies.gpu_results"):
        gpu.gpu_speed()


def test_unknown_mode_is_refused(results_here):
    with pytest.raises(ValueError, match="mode='graphs'"):
        gpu.gpu_speed("graphs")


def test_stored_file_without_provenance_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(tmp_path))
    (tmp_path / "gpu" / gpu.DEFAULT_RUN).mkdir(parents=True)
    (tmp_path / "gpu" / gpu.DEFAULT_RUN / "speed.json").write_text(json.dumps({"result": {}}))
    with pytest.raises(ProvenanceError):
        gpu.gpu_speed()
