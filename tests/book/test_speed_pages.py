"""The speed numbers of the results, speed, depths and ablation pages: every ratio of a GPU run is the median of its
per-repeat ratios with the order-statistic 95 % interval (the range, said so, where the repeats are too few), the
same on every page; the CPU tables are read from a stored measurement and never timed while a page builds, so a busy
machine changes nothing; a noisy CPU run shows no ratio and says why; a live run is timed only on request. Expected
values are computed here from the stored JSON with json, math and statistics."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHARED_DATA, missing

from canlib.repro.results.files import provenance, save_result

RESULTS = REPO / "book" / "results"
GPU = RESULTS / "gpu"


def ratios(run: str, system: str, against: str, mode: str = "eager") -> list[float]:
    rows = json.loads((GPU / run / "speed.json").read_text())["result"]["systems"]
    a, b = rows[system][mode]["tok_per_s_repeats"], rows[against][mode]["tok_per_s_repeats"]
    return sorted(x / y for x, y in zip(a, b))


def order_interval(xs: list[float]) -> tuple[float, float] | None:
    """The widest k with P(Binomial(n, 1/2) < k) <= 2.5 %: (x_(k), x_(n+1-k)), written out here."""
    n, best = len(xs), None
    for k in range(1, n // 2 + 1):
        tail = sum(math.comb(n, i) for i in range(k)) / 2**n
        if 1 - 2 * tail >= 0.95:
            best = (xs[k - 1], xs[n - k])
    return best


def cell(xs: list[float]) -> str:
    """What a table cell shows: the median [its interval], or (the range) of too few repeats."""
    ci = order_interval(xs)
    head = f"{statistics.median(xs):.2f}"
    return f"{head} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{head} ({xs[0]:.2f}-{xs[-1]:.2f})"


@pytest.fixture(scope="module")
def store():
    if not (SHARED_DATA / "multi30k-en-de").is_dir():
        missing(f"real data {SHARED_DATA}/multi30k-en-de not present (the evaluation sets' references)")
    from canlib.repro.studies.store import Store

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CANLIB_DATA_DIR", str(SHARED_DATA))
        patch.setenv("CANLIB_RESULTS_DIR", str(RESULTS))
        patch.delenv("CANLIB_LIVE_CPU_SPEED", raising=False)
        yield Store("small", RESULTS)


RUNS = sorted(p.parent.name for p in GPU.glob("*/speed.json"))


@pytest.mark.parametrize("run", RUNS)
def test_every_page_shows_a_runs_ratio_as_the_median_of_its_per_repeat_ratios(store, run):
    from canlib.repro.studies import gpu_results as gpu
    from canlib.repro.studies.chapters import depths, results, speed

    can = ratios(run, "can", "balanced")
    prov = gpu.gpu_speed("eager", run, RESULTS)[1]
    summary = gpu.speed_summary(run, RESULTS)["CAN / Balanced eager"]
    assert summary.startswith(f"{statistics.median(can):.2f}x"), summary
    assert summary.endswith("no interval)") == (order_interval(can) is None)
    label = f"{gpu.gpu_label(prov)} {gpu.commit_label(prov)}"
    assert results.speed_frame(store).loc[f"{label}, eager", "CAN"] == cell(can)
    assert results.speed_frame(store).loc[f"{label}, graphs", "CAN"] == cell(ratios(run, "can", "balanced", "captured"))
    row = next(r for r in speed.ratio_rows(store) if r["GPU run"] == label)
    assert row["CAN / Balanced eager"] == cell(can)
    assert row["CAN / SAN eager"] == cell(ratios(run, "can", "san"))
    assert depths.gpu_frame(store).loc[gpu.run_label(prov), "eager"] == cell(ratios(run, "balanced", "baseline"))


def test_the_first_h100_run_reads_one_ratio_everywhere(store):
    """The median of the per-repeat ratios, not the ratio of the two medians, which disagreed with it."""
    from canlib.repro.studies import gpu_results as gpu

    run = "h100-2026-11-26"
    rows = json.loads((GPU / run / "speed.json").read_text())["result"]["systems"]
    of_medians = rows["can"]["eager"]["tok_per_s"] / rows["balanced"]["eager"]["tok_per_s"]
    median = statistics.median(ratios(run, "can", "balanced"))
    assert f"{of_medians:.2f}" != f"{median:.2f}"  # the two statistics this run once showed on two pages
    assert gpu.speed_summary(run, RESULTS)["CAN / Balanced eager"].startswith(f"{median:.2f}x")


def test_a_run_too_short_for_an_interval_shows_its_range_and_says_so():
    from canlib.repro.studies.gpu_results import ratio_text
    from canlib.repro.studies.verdict import ratio_reading

    three = ratio_reading([1.2, 1.0, 1.4])
    assert three["interval"] is None and ratio_text(three) == "1.20x (1.00-1.40, 3 repeats: no interval)"
    ten = [1.0 + k / 100 for k in (5, 3, 9, 1, 7, 2, 8, 4, 6, 10)]
    got = ratio_reading(ten)
    assert got["interval"] == pytest.approx(order_interval(sorted(ten)))
    assert order_interval(sorted(ten)) == pytest.approx((1.02, 1.09))
    assert ratio_text(got) == "1.06x [1.02, 1.09]" and got["coverage"] >= 0.95


def test_the_san_sentence_counts_the_stored_runs(store):
    """How often SAN came out ahead of CAN is counted from the runs, not written by hand."""
    from canlib.repro.studies.chapters import speed

    v = speed.values(store)
    per_run = [ratios(run, "can", "san") for run in RUNS]
    assert v["san_runs"] == len(RUNS)
    assert v["san_ahead_runs"] == sum(statistics.median(r) < 1 for r in per_run)
    assert v["san_ahead_repeats"] == sum(x < 1 for r in per_run for x in r) and v["san_repeats"] == sum(
        map(len, per_run)
    )
    assert v["san_closest"] == pytest.approx(min(statistics.median(r) for r in per_run))


# -- the CPU tables: stored, never timed while a page builds ---------------------------------------------------


def cpu_outputs(store) -> dict:
    """Every CPU table and sentence the results, speed, depths and ablation pages show."""
    from canlib.repro.studies.chapters import ablation, depths, results, speed

    return {
        "results": results.speed_frame(store),
        "speed table": speed.cpu_frame(store),
        "speed reference": speed.reference_frame(store),
        "speed prose": speed.cpu_values(store)["cpu_sentence"],
        "depths table": depths.cpu_frame(store),
        "depths prose": depths.values(store)["cpu_sentence"],
        "ablation table": ablation.cpu_frame(store),
        "ablation prose": ablation.values(store)["cpu_sentence"],
        "provenance": depths.cpu_provenance(store),
    }


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k].equals(b[k]) if hasattr(a[k], "equals") else a[k] == b[k] for k in a)


def test_the_cpu_tables_are_read_not_timed_and_a_busy_machine_changes_nothing(store, monkeypatch, tmp_path):
    if not (RESULTS / "cpu" / "speed.json").is_file():
        pytest.fail(
            "book/results/cpu/speed.json is not stored: `python -m canlib experiment --scale small --studies speed`"
        )
    from canlib.repro.bench import chapters as sp
    from canlib.repro.bench import speed as bench

    def timed(*args, **kwargs):
        raise AssertionError("a page timed the CPU while it built")

    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))  # nothing cached from an earlier live run
    for module, name in ((bench, "run_study"), (bench, "time_systems"), (sp, "run_bench"), (sp, "measure_cpu")):
        monkeypatch.setattr(module, name, timed)
    quiet = cpu_outputs(store)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded = cpu_outputs(store)
    finally:
        busy.kill()
        busy.wait()
    assert same(quiet, loaded)


def fake_run(root: Path, seconds: dict[str, list[float]], other: float = 0.05) -> None:
    """A stored CPU run: each system's seconds per repeat over the same tokens."""
    systems = {s: {"tok_per_s": 240 / statistics.median(v), "tokens": 240, "seconds": v} for s, v in seconds.items()}
    settings = {"sentences": 8, "repeats": len(next(iter(seconds.values()))), "beam": 4, "batch": 1}
    settings |= {"forced_length": 30, "threads": 1, "systems": list(seconds)}
    prov = provenance("full", {"settings": settings}, machine="a test machine", other_cores=other)
    save_result(root / "cpu" / "speed.json", {"systems": systems, "meta": {"load_average": [0.1]}}, prov)


NINE = ("baseline", "balanced", "san", "aan", "can", "depth-9-4", "depth-14-1", "can_attn", "can_ffn")


def steady(k: int, base: float) -> float:
    return base * (1 + 0.001 * ((7 * k) % 10))


def test_a_quiet_cpu_run_shows_the_median_of_its_per_repeat_ratios(tmp_path):
    from canlib.repro.studies.cpu_speed import cpu_table

    seconds = {s: [steady(k, 2.0 + 0.1 * i) for k in range(20)] for i, s in enumerate(NINE)}
    fake_run(tmp_path, seconds)
    rows, prov = cpu_table(("balanced", "can"), root=tmp_path, live=False)
    expected = sorted(b / c for b, c in zip(seconds["balanced"], seconds["can"]))  # tok/s ratio: seconds inverted
    assert prov["noisy"] is None and rows["can"]["ratio"] == pytest.approx(statistics.median(expected))
    assert rows["can"]["interval"] == pytest.approx(order_interval(expected))


def test_a_noisy_cpu_run_shows_no_ratio_and_says_why(tmp_path):
    from canlib.repro.studies.chapters import depths
    from canlib.repro.studies.cpu_speed import OTHER_BOUND, cpu_table
    from canlib.repro.studies.store import Store

    seconds = {s: [steady(k, 2.0 + 0.1 * i) for k in range(20)] for i, s in enumerate(NINE)}
    seconds["can"] = [2.4 * (1 + 0.05 * (k % 7)) for k in range(20)]  # a third apart: another process meddled
    fake_run(tmp_path, seconds)
    _, prov = cpu_table(("balanced", "can"), root=tmp_path, live=False)
    assert "CAN's ratio to Balanced spans" in prov["noisy"]
    fake_run(tmp_path, {s: [steady(k, 2.0) for k in range(20)] for s in NINE}, other=OTHER_BOUND + 0.1)
    _, prov = cpu_table(("balanced", "can"), root=tmp_path, live=False)
    assert "other processes took" in prov["noisy"]
    frame = depths.cpu_frame(Store("small", tmp_path))
    assert set(frame["CPU x 6/6"]) == {"noisy run"}
    assert depths.cpu_values(Store("small", tmp_path))["cpu_sentence"].startswith("The stored CPU run is noisy")


def test_a_live_cpu_run_is_timed_only_on_request_and_once(tmp_path, monkeypatch):
    from canlib.repro.bench import chapters as sp
    from canlib.repro.studies.cpu_speed import cpu_table

    calls = []

    def bench(study, settings):
        calls.append(settings["systems"])
        rows = {
            s: {"tok_per_s": 100.0, "tokens": 240, "seconds": [2.4] * settings["repeats"]} for s in settings["systems"]
        }
        return {"systems": rows, "meta": {"device": "CPU", "load_average": [0.0], "threads": 1}}

    monkeypatch.setattr(sp, "run_bench", bench)
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match="canlib experiment --scale small --studies speed"):
        cpu_table(("balanced",), root=tmp_path)  # nothing stored, no live run asked for: nothing timed
    assert calls == []
    monkeypatch.setenv(sp.LIVE_ENV, "1")
    cpu_table(("balanced", "can"), root=tmp_path)
    cpu_table(("baseline",), root=tmp_path)
    assert calls == [list(sp.SPEED_SYSTEMS)]  # one interleaved run of the nine, timed once, then read
