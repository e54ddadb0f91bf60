"""The stored GPU results and the shared speed studies the chapters read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import MEASUREMENTS, REQUIRE_DATA

from repro.results.files import ProvenanceError, load_result
from repro.studies.store import Store

REPO = Path(__file__).resolve().parents[2]
RUN = "h200-2026-11-26"  # the stored run whose raw files live in ../shared/measurements
STORED = REPO / "book" / "results" / "gpu" / RUN
RAW = MEASUREMENTS / RUN  # CANLIB_MEASUREMENTS_DIR, else ../shared/measurements
NO_RAW = not RAW.is_dir() and not REQUIRE_DATA  # CI (CANLIB_REQUIRE_DATA=1) fails instead of skipping


def raw_json(name: str) -> dict:
    return json.loads((RAW / name).read_text())


@pytest.fixture
def results_here(monkeypatch):
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(REPO / "book" / "results"))


@pytest.mark.skipif(NO_RAW, reason="raw measurement folder not present")
@pytest.mark.parametrize("kind", ["batch", "breakdown", "speed", "training_32k", "training_4k", "training_small"])
def test_every_stored_gpu_file_loads_with_its_provenance(results_here, kind):
    _, prov = Store("small").gpu(kind, RUN)
    raw = raw_json("gpu_bench.json")
    assert (prov["commit"], prov["date"], prov["device"]) == (raw["_git_commit"], raw["_date"][:10], raw["_device"])
    assert prov["config"]["command"].startswith("python ")
    assert "shared/measurements" in prov["source"]


@pytest.mark.skipif(NO_RAW, reason="raw measurement folder not present")
def test_gpu_speed_ratios_are_the_measured_ones(results_here):
    raw = raw_json("gpu_bench.json")
    eager, prov = Store("small").gpu_speed("eager", RUN)
    assert eager["balanced"]["tok_per_s"] / eager["baseline"]["tok_per_s"] == pytest.approx(
        raw["balanced"]["eager_tok_per_s"] / raw["baseline"]["eager_tok_per_s"], rel=1e-9
    )
    assert eager["can"]["tok_per_s"] / eager["balanced"]["tok_per_s"] == pytest.approx(
        raw["can"]["eager_tok_per_s"] / raw["balanced"]["eager_tok_per_s"], rel=1e-9
    )
    assert prov["dtype"] == raw["_dtype"] and prov["captured_matches_eager"] == raw["_captured_matches_eager"]
    captured, _ = Store("small").gpu_speed("captured", RUN)
    assert captured["balanced"]["tok_per_s"] == pytest.approx(raw["balanced"]["captured_tok_per_s"], rel=1e-9)
    for row in eager.values():
        assert row["min"] <= row["median"] <= row["max"]


@pytest.mark.skipif(NO_RAW, reason="raw measurement folder not present")
def test_gpu_breakdown_search_share_is_the_measured_one(results_here):
    result, _ = Store("small").gpu("breakdown", RUN)
    parts = {system: row["breakdown"] for system, row in result["systems"].items() if "breakdown" in row}
    ms = raw_json("breakdown.json")["balanced"]["breakdown"]
    total = sum(ms[f"{p}_ms"] for p in ("encode", "layers", "output", "search"))
    assert parts["balanced"]["search_share"] == pytest.approx(ms["search_ms"] / total, rel=1e-6)
    assert set(parts) == {"baseline", "balanced", "can"}


@pytest.mark.skipif(NO_RAW, reason="raw measurement folder not present")
def test_stored_figures_equal_the_raw_measurements(results_here):
    raw = json.loads((RAW / "gpu_bench.json").read_text())
    eager, _ = Store("small").gpu_speed("eager", RUN)
    captured, _ = Store("small").gpu_speed("captured", RUN)
    for system in ("baseline", "balanced", "san", "aan", "can"):
        assert eager[system]["tok_per_s"] == pytest.approx(raw[system]["eager_tok_per_s"], rel=1e-9)
        assert captured[system]["tok_per_s"] == pytest.approx(raw[system]["captured_tok_per_s"], rel=1e-9)
    batch, _ = Store("small").gpu_batch(RUN)
    raw_batch = json.loads((RAW / "bench_batch.json").read_text())
    assert batch["can"][64] == raw_batch["can"]["by_batch"]["64"]
    runs, _ = Store("small").gpu("training_32k", RUN, "runs")
    assert runs["baseline"]["mfu"] == json.loads((RAW / "smoke_32k.json").read_text())["runs"]["baseline"]["mfu"]


@pytest.mark.skipif(NO_RAW, reason="raw measurement folder not present")
def test_the_stored_gpu_translation_is_rescored_from_its_hypotheses(shared_data):
    """The stored translation's scores recomputed here from the raw hypotheses and the test2016 references, and its
    examples the raw lines they name."""
    from canlib.bleu import corpus_scores
    from canlib.data.text import read_parallel

    folder = shared_data / "multi30k-en-de"
    sources, references = read_parallel(folder / "test_2016_flickr.en", folder / "test_2016_flickr.de")
    hyps = (RAW / "multi30k_small-can_test2016.hyp.de").read_text(encoding="utf-8").split("\n")[:-1]
    result, prov = load_result(STORED / "translation_small.json")
    scores = corpus_scores(hyps, references)
    assert result["sentences"] == len(hyps) == len(references)
    for key in ("bleu", "tok_bleu"):
        assert result["scores"][key] == pytest.approx(scores[key], abs=1e-9)
        assert result["scores"][key] == pytest.approx(result["recorded_scores"][key], abs=1e-6)
    for example in result["examples"]:
        i = example["index"]
        assert (example["source"], example["reference"], example["hypothesis"]) == (sources[i], references[i], hyps[i])
    assert prov["scale"] == "small" and len(result["examples"]) == 5 and result["examples"][-1]["index"] == 999


def test_missing_gpu_run_names_the_command_that_stores_it(tmp_path, monkeypatch):
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="python -m repro ingest"):
        Store("small").gpu_speed("eager", RUN)


def test_unknown_mode_is_refused(results_here):
    with pytest.raises(ValueError, match="mode='graphs'"):
        Store("small").gpu_speed("graphs", RUN)


def test_stored_file_without_provenance_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(tmp_path))
    (tmp_path / "gpu" / RUN).mkdir(parents=True)
    (tmp_path / "gpu" / RUN / "speed.json").write_text(json.dumps({"result": {}}))
    with pytest.raises(ProvenanceError):
        Store("small").gpu_speed("eager", RUN)


# -- repro.bench.cpu: one measurement per setting, shared, with its spread -----------------------

from _code import cpu_speed, speed_frames  # noqa: E402
from repro.bench import cpu as sp  # noqa: E402


def fake_bench(calls):
    def bench(study_name, settings):
        calls.append((study_name, settings["systems"]))
        systems = {
            s: {"tok_per_s": 100.0 + i, "tokens": 30, "seconds": [0.3, 0.25, 0.35]}
            for i, s in enumerate(settings["systems"])
        }
        return {
            "systems": systems,
            "meta": {"device": "cpu", "dtype": "float32", "load_average": [0.1, 0.1, 0.1], "device_type": "cpu"},
        }

    return bench


def test_every_chapter_reads_one_measurement_of_a_setting(tmp_path, monkeypatch):
    """A live CPU run (asked for) times all nine systems once; every chapter's rows come from it."""
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(cpu_speed.LIVE_ENV, "1")
    calls = []
    monkeypatch.setattr(sp, "run_bench", fake_bench(calls))
    table2, _ = cpu_speed.cpu_table(("baseline", "balanced", "can"))
    depths, _ = cpu_speed.cpu_table(("baseline", "depth-9-4", "balanced", "depth-14-1"))
    ablation, prov = cpu_speed.cpu_table(("balanced", "can_attn", "can_ffn", "can"))
    assert len(calls) == 1 and calls[0][1] == list(sp.SPEED_SYSTEMS)
    assert table2["balanced"] == depths["balanced"] == ablation["balanced"]
    assert prov["config"]["settings"]["systems"] == list(sp.SPEED_SYSTEMS)


def test_speed_rows_carry_min_median_max_of_the_repeats(tmp_path, monkeypatch):
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(cpu_speed.LIVE_ENV, "1")
    monkeypatch.setattr(sp, "run_bench", fake_bench([]))
    rows, _ = cpu_speed.cpu_table(("balanced", "can"))
    assert rows["balanced"]["min"] == pytest.approx(30 / 0.35)
    assert rows["balanced"]["median"] == pytest.approx(30 / 0.3)
    assert rows["balanced"]["max"] == pytest.approx(30 / 0.25)
    # every system's repeats take the same seconds here: each per-repeat ratio, and their median, is 1
    assert rows["can"]["ratio"] == pytest.approx(1.0) and rows["can"]["interval"] is None  # 3 repeats: no interval


def test_a_system_outside_the_shared_run_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(cpu_speed.LIVE_ENV, "1")
    monkeypatch.setattr(sp, "run_bench", fake_bench([]))
    with pytest.raises(KeyError, match="'small-can'"):
        cpu_speed.cpu_table(("small-can",))


def test_the_bench_runs_without_printing_or_warning(capsys, monkeypatch):
    import warnings

    from repro.bench import speed as bench

    monkeypatch.setattr(bench, "busy_warning", lambda *a: "the machine is busy (test)")
    settings = {
        **sp.cpu_settings("speed"),
        "systems": ["balanced", "can"],
        "scale": "tiny",
        "sentences": 1,
        "repeats": 2,
        "forced_length": 2,
        "warmup": 0,
        "vocab_size": 64,
        "threads": 0,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = sp.run_bench("speed", settings)
    assert capsys.readouterr().out == ""
    assert result["meta"]["busy_warning"] == "the machine is busy (test)"
    assert set(result["systems"]) == {"balanced", "can"} and result["meta"]["dtype"] == "float32"
    assert len(result["systems"]["can"]["seconds"]) == 2
    assert cpu_speed.spread(result["systems"]["can"])["min"] > 0


def test_comparison_frame_leaves_out_missing_sources():
    rows = {
        "balanced": {"tok_per_s": 10.0, "min": 9.0, "max": 11.0},
        "can": {"tok_per_s": 12.0, "min": 11.0, "max": 13.0},
    }
    frame = speed_frames.comparison_frame(("balanced", "can"), rows, None, rows, {"balanced": 219.53, "can": 290.08})
    assert "GPU eager tok/s median" not in frame and frame.loc["CAN", "CPU tok/s x Balanced"] == pytest.approx(1.2)
    assert frame.loc["CAN", "paper tok/s"] == 290.08
    assert frame.loc["CAN", "paper tok/s x Balanced"] == pytest.approx(290.08 / 219.53)


def test_weights_per_token_are_14_12_13_14_d2():
    counts = {s: round(v) for s, v in speed_frames.weights_per_token().items()}
    assert counts == {"balanced": 14, "can_attn": 12, "can_ffn": 13, "can": 14}
