"""The bench contract: ``run_study(study, BenchSettings) -> BenchResult``; the CLI writes
``{"systems": {name: figures}, "meta": {...}}`` to one JSON file."""

from __future__ import annotations

import json
import multiprocessing
import time

import pytest
import torch
from conftest import small_model

from repro.bench.speed import System, time_systems
from repro.cli import main


@pytest.fixture(autouse=True)
def _one_thread(_deterministic_torch):
    """Tiny models gain nothing from threads, and on a shared 2-core machine OpenMP threads
    waiting for a busy core make every op many times slower."""
    torch.set_num_threads(1)


def test_bench_speed_writes_the_contract_json(tmp_path):
    out = tmp_path / "speed.json"
    argv = [
        "bench",
        "speed",
        "--systems",
        "baseline,balanced,can",
        "--scale",
        "tiny",
        "--vocab-size",
        "200",
        "--beam",
        "4",
        "--batch",
        "1",
        "--forced-length",
        "6",
        "--repeats",
        "2",
        "--sentences",
        "2",
        "--device",
        "cpu",
        "--json",
        str(out),
    ]
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert set(data) == {"systems", "meta"}
    systems = data["systems"]
    assert set(systems) == {"baseline", "balanced", "can"}
    for row in systems.values():
        assert row["tok_per_s"] > 0
        assert row["tokens"] == 2 * 6  # forced length: exactly 6 tokens per sentence
    assert systems["balanced"]["ratio_to_balanced"] == 1.0
    for key in ("device", "torch", "threads", "date", "git_commit", "command", "load_average"):
        assert key in data["meta"]
    assert data["meta"]["settings"]["scale"] == "tiny" and data["meta"]["study"] == "speed"
    assert out.with_suffix(".png").is_file()


def test_bench_breakdown_and_ct2_reference(tmp_path):
    pytest.importorskip("ctranslate2")
    out = tmp_path / "breakdown.json"
    argv = [
        "bench",
        "breakdown",
        "--systems",
        "tiny-balanced,ct2:tiny-balanced",
        "--vocab-size",
        "200",
        "--forced-length",
        "5",
        "--repeats",
        "1",
        "--sentences",
        "2",
        "--device",
        "cpu",
        "--json",
        str(out),
    ]
    assert main(argv) == 0
    data = json.loads(out.read_text())
    parts = data["systems"]["tiny-balanced"]["breakdown"]
    assert sum(parts[f"{p}_share"] for p in ("encode", "layers", "output", "search")) == pytest.approx(1.0)
    assert data["systems"]["ct2:tiny-balanced"]["tokens"] == 2 * 5
    assert not multiprocessing.active_children()  # the CTranslate2 worker process ended with the bench


def test_bench_store_keeps_each_rows_repeat_spread_with_its_provenance(tmp_path):
    """``--store``: the stored form a GPU run keeps (book/results/gpu/<run>/breakdown.json), each row's repeats
    turned into tokens/s here (tokens over each repeat's seconds), the settings and the command in its provenance."""
    import statistics

    from repro.results.files import load_result

    out = tmp_path / "breakdown.json"
    argv = ["bench", "breakdown", "--systems", "balanced,can", "--scale", "tiny", "--vocab-size", "200"]
    argv += ["--forced-length", "4", "--repeats", "3", "--sentences", "1", "--device", "cpu", "--store", str(out)]
    assert main(argv) == 0
    result, prov = load_result(out)
    assert set(result["systems"]) == {"balanced", "can"} and result["settings"]["repeats"] == 3
    for row in result["systems"].values():
        per_repeat = [row["tokens"] / s for s in row["seconds"]]
        assert len(per_repeat) == 3 and row["tok_per_s_repeats"] == per_repeat
        assert (row["min"], row["median"], row["max"]) == (
            min(per_repeat),
            statistics.median(per_repeat),
            max(per_repeat),
        )
        assert "breakdown" in row
    assert prov["scale"] == "tiny" and prov["config"]["settings"] == result["settings"]
    assert prov["config"]["command"] == "python -m repro " + " ".join(argv)  # as typed, whatever ran the process
    main([*argv[:-2], "--json", str(tmp_path / "b.json")])
    assert json.loads((tmp_path / "b.json").read_text())["meta"]["command"] == prov["config"]["command"].replace(
        f"--store {out}", f"--json {tmp_path / 'b.json'}"
    )
    assert prov["date"] == prov["measured_at"][:10]
    assert prov["environment"]["dirty"].endswith("changed files") and len(prov["commit"]) == 40


def test_speed_study_includes_the_reference_engine_by_default():
    pytest.importorskip("ctranslate2")
    from repro.bench.speed import default_systems

    assert default_systems("speed") == ["baseline", "balanced", "san", "aan", "can", "ct2:baseline", "ct2:balanced"]
    assert not any(name.startswith("ct2:") for name in default_systems("ablation"))


def test_ct2_worker_failure_names_the_system(tmp_path, monkeypatch):
    """The worker process cannot load the exported model: the parent raises, naming the system
    and carrying the worker's traceback, instead of hanging or timing nothing."""
    pytest.importorskip("ctranslate2")
    import canlib.decoding.ctranslate
    from repro.bench.speed import ct2_system

    def broken_export(model, folder, vocab=None):
        folder.mkdir(parents=True)
        (folder / "model.bin").write_bytes(b"not a model")
        return folder

    monkeypatch.setattr(canlib.decoding.ctranslate, "export_ctranslate2", broken_export)
    model = small_model(vocab_size=50, dec_layers=1)
    system = ct2_system("ct2:broken", model, 1, 1.0, torch.device("cpu"), 1, tmp_path)
    try:
        with pytest.raises(RuntimeError, match=r"ct2:broken: the CTranslate2 worker failed:(.|\n)*Traceback"):
            system.measure([[5, 6, 7]], 2, 3, torch.device("cpu"))
    finally:
        system.close()
    assert not multiprocessing.active_children()


def test_bench_beam_and_batch_studies_give_series(tmp_path):
    out = tmp_path / "beam.json"
    assert (
        main(
            [
                "bench",
                "beam",
                "--systems",
                "tiny-can",
                "--vocab-size",
                "100",
                "--beams",
                "1,2",
                "--lengths",
                "3,5",
                "--repeats",
                "1",
                "--sentences",
                "1",
                "--device",
                "cpu",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    row = json.loads(out.read_text())["systems"]["tiny-can"]
    assert list(row["by_beam"]) == ["1", "2"] and list(row["by_length"]) == ["3", "5"]
    out = tmp_path / "batch.json"
    assert (
        main(
            [
                "bench",
                "batch",
                "--systems",
                "tiny-can",
                "--vocab-size",
                "100",
                "--batches",
                "1,3",
                "--forced-length",
                "3",
                "--repeats",
                "1",
                "--sentences",
                "2",
                "--device",
                "cpu",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    assert list(json.loads(out.read_text())["systems"]["tiny-can"]["by_batch"]) == ["1", "3"]


def test_bench_rejects_a_malformed_checkpoint_option(capsys):
    for value in ("nopath", "=PATH", "name="):
        with pytest.raises(SystemExit) as refused:
            main(["bench", "speed", "--checkpoint", value, "--device", "cpu"])
        assert refused.value.code == 2
        assert f"argument --checkpoint: '{value}': expected name=PATH" in capsys.readouterr().err


def test_bench_in_process_leaves_the_matplotlib_backend_alone(tmp_path):
    import matplotlib

    from repro.cli import main

    original = matplotlib.get_backend()
    matplotlib.use("svg")  # stands for a notebook's inline backend
    try:
        before = matplotlib.get_backend()
        argv = [
            "bench",
            "speed",
            "--systems",
            "tiny-balanced",
            "--scale",
            "tiny",
            "--vocab-size",
            "100",
            "--forced-length",
            "3",
            "--sentences",
            "1",
            "--repeats",
            "1",
            "--device",
            "cpu",
            "--json",
            str(tmp_path / "s.json"),
        ]
        assert main(argv) == 0
        assert (tmp_path / "s.png").exists()
        assert matplotlib.get_backend() == before
    finally:
        matplotlib.use(original)  # later tests see the backend they started with


def test_ct2_worker_that_dies_gives_a_clear_error(tmp_path):
    pytest.importorskip("ctranslate2")
    from repro.bench.speed import ct2_system

    model = small_model(vocab_size=50, dec_layers=1)
    system = ct2_system("ct2:tiny", model, 1, 1.0, torch.device("cpu"), 1, tmp_path)
    try:
        assert system.measure([[5, 6, 7]], 2, 3, torch.device("cpu"))[0] == 3  # it works, then it is killed
        (worker,) = multiprocessing.active_children()
        worker.kill()
        worker.join()
        with pytest.raises(RuntimeError, match=r"ct2:tiny: the CTranslate2 worker process ended \(exit code -9\)"):
            system.measure([[5, 6, 7]], 2, 3, torch.device("cpu"))
    finally:
        system.close()


def test_run_study_is_a_function_of_its_settings():
    """The studies call the bench as a function: no argv, no files; the result carries its settings."""
    from repro.bench.settings import BenchResult, BenchSettings
    from repro.bench.speed import run_study

    settings = BenchSettings(
        systems=("can",), scale="tiny", vocab_size=100, forced_length=4, sentences=2, repeats=1, warmup=0, threads=1
    )
    result = run_study("speed", settings)
    assert isinstance(result, BenchResult)
    assert result.systems["can"]["tokens"] == 2 * 4
    assert result.meta["settings"]["systems"] == ("can",) and result.meta["settings"]["sentences"] == 2
    assert BenchSettings(**{**result.meta["settings"]}) == settings  # a stored result rebuilds its settings


def test_bench_settings_reject_bad_values_by_name():
    from repro.bench.settings import BenchSettings
    from repro.bench.speed import run_study

    with pytest.raises(ValueError, match="BenchSettings.beam=0"):
        BenchSettings(beam=0)
    with pytest.raises(ValueError, match="study='nope'"):
        run_study("nope", BenchSettings())
    with pytest.raises(ValueError, match="graphs=True needs a CUDA device"):
        run_study("speed", BenchSettings(graphs=True, device="cpu"))


def test_bench_warns_when_the_machine_is_busy(monkeypatch):
    """A load average above the bench's threads is recorded as a warning, on stderr and in meta."""
    import repro.bench.speed as speed
    from repro.bench.settings import BenchSettings
    from repro.bench.speed import run_study

    monkeypatch.setattr(speed.os, "getloadavg", lambda: (7.5, 7.0, 6.0))
    settings = BenchSettings(
        systems=("tiny-can",), vocab_size=100, forced_length=2, sentences=1, repeats=1, warmup=0, threads=1
    )
    with pytest.warns(RuntimeWarning, match="load average 7.50 exceeds the bench's 1 thread"):
        result = run_study("speed", settings)
    assert "7.50" in result.meta["busy_warning"]
    monkeypatch.setattr(speed.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert "busy_warning" not in run_study("speed", settings).meta


def test_every_timed_repeat_lasts_at_least_min_seconds():
    def run(sources, beam, forced):
        time.sleep(0.01 * len(sources))  # 10 ms a sentence
        return 3 * len(sources)

    rows = time_systems(
        [System("slow", run), System("fast", lambda s, b, f: run(s[: len(s) // 2], b, f))],
        [[5]] * 4,
        beam=1,
        forced=None,
        repeats=3,
        warmup=0,
        device=torch.device("cpu"),
        desc="t",
        progress=False,
        min_seconds=0.1,
    )
    assert rows["fast"]["passes"] == rows["slow"]["passes"] >= 5  # the fast one's pass takes ~20 ms
    assert min(rows["fast"]["seconds"]) >= 0.1
    assert rows["slow"]["tokens"] == 3 * 4 * rows["slow"]["passes"]


def test_a_slow_first_pass_does_not_shorten_the_timed_repeats():
    calls = []

    def run(sources, beam, forced):  # the first call after warm-up is slow, as a path that captures late is
        calls.append(1)
        time.sleep(0.01 * len(sources) + (0.2 if len(calls) == 1 else 0))
        return len(sources)

    rows = time_systems(
        [System("late", run)], [[5]] * 2, 1, None, 2, 0, torch.device("cpu"), "t", progress=False, min_seconds=0.1
    )
    assert min(rows["late"]["seconds"]) >= 0.1


def test_the_printed_table_names_the_system_each_ratio_is_relative_to(capsys):
    from repro.bench.cli import print_table
    from repro.bench.settings import BenchResult

    row = {"tok_per_s": 300.0, "ms_per_sentence": 100.0}
    result = BenchResult(
        systems={
            "balanced": row | {"ratio_to_balanced": 1.0},
            "can": row | {"tok_per_s": 450.0, "ratio_to_balanced": 1.5},
        },
        meta={"device": "cpu", "dtype": "float32", "threads": 1},
    )
    print_table("speed", result)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].split()[0] == "can" and lines[-1].endswith("x1.50 of balanced"), lines
