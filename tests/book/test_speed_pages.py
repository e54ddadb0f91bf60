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
from conftest import REPO, stored_results

from repro.results.files import provenance, save_result

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
    head = f"{statistics.median(xs):.2f}x"
    return f"{head} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{head} ({xs[0]:.2f}-{xs[-1]:.2f})"


@pytest.fixture(scope="module")
def store():
    from repro.studies.store import Store

    with stored_results(RESULTS) as patch:
        patch.delenv("CANLIB_LIVE_CPU_SPEED", raising=False)
        yield Store("small", RESULTS)


RUNS = sorted(p.parent.name for p in GPU.glob("*/speed.json"))


READ = "h200-2026-11-28-e1befc3"  # the run the CAN/Balanced verdicts read: the newest code, 10 repeats, meeting it
OLDER = "h200-2026-11-27-81cbcbb"  # the newest run that timed the Baseline, SAN and AAN: their pairs read it


@pytest.mark.parametrize("run", RUNS)
def test_every_runs_ratio_is_the_median_of_its_per_repeat_ratios(run, store):
    from _code import gpu_results as gpu

    can = ratios(run, "can", "balanced")
    stat = gpu.ratio_stat(store.gpu_speed("eager", run)[0], "can", "balanced")
    assert stat["median"] == pytest.approx(statistics.median(can))
    assert (stat["interval"] is None) == (order_interval(can) is None)


def test_every_page_shows_the_read_runs_ratio_as_the_median_of_its_per_repeat_ratios(store):
    from _code import scorecard, speed
    from _code.readers import speed_runs
    from repro.studies.claims import judged

    assert speed_runs(store) == [READ]
    paper = {s: 1.0 for s in ("baseline", "balanced", "san", "aan", "can")}
    table = speed.speed_table(store, list(paper), paper)
    assert table.loc["CAN", "ours, every kernel launched"] == cell(ratios(READ, "can", "balanced"))
    assert table.loc["CAN", "ours, CUDA graphs"] == cell(ratios(READ, "can", "balanced", "captured"))
    depths = speed.speed_table(store, ["baseline", "balanced"], paper, "baseline")
    assert depths.loc["Balanced", "ours, every kernel launched"] == cell(ratios(OLDER, "balanced", "baseline"))
    rows = scorecard.speed_runs_table([judged(store)["can-faster-than-san"]], beside=False)
    assert len(rows) == 1 and "81cbcbb" in rows["GPU run"][0]
    assert rows["on this run alone"][0].startswith(cell(ratios(OLDER, "can", "san")))


def test_a_run_below_the_speed_standard_reads_inconclusive_whatever_its_interval(store):
    """The graph-mode repeats of the run the verdicts read lasted under a second: its row says "inconclusive", not
    the word its interval alone would give, so the table and the claim's verdict agree."""
    from _code import scorecard
    from repro.studies.claims import judged

    systems = json.loads((GPU / OLDER / "speed.json").read_text())["result"]["systems"]
    shortest = min(min(systems[s]["captured"]["seconds"]) for s in ("can", "balanced"))
    table = scorecard.speed_runs_table([judged(store)["can-speed-1.28x-graphs"]])
    row = table[table["GPU run"].str.contains("81cbcbb")].iloc[0]
    interval = order_interval(ratios(OLDER, "can", "balanced", "captured"))
    assert shortest < 1.0 and interval[0] >= 1.28  # below the standard, though its interval clears the bound
    assert row["on this run alone"].split(": ", 1)[1] == "inconclusive (by its interval: holds)"


def test_the_first_h100_run_reads_one_ratio_everywhere(store):
    """The median of the per-repeat ratios, not the ratio of the two medians, which disagreed with it."""
    from _code import gpu_results as gpu

    run = "h100-2026-11-26"
    rows = json.loads((GPU / run / "speed.json").read_text())["result"]["systems"]
    of_medians = rows["can"]["eager"]["tok_per_s"] / rows["balanced"]["eager"]["tok_per_s"]
    median = statistics.median(ratios(run, "can", "balanced"))
    assert f"{of_medians:.2f}" != f"{median:.2f}"  # the two statistics this run once showed on two pages
    assert f"{gpu.ratio_stat(store.gpu_speed('eager', run)[0], 'can', 'balanced')['median']:.2f}" == f"{median:.2f}"


def test_a_run_too_short_for_an_interval_shows_its_range():
    from _code.speed import ratio_cell
    from repro.studies.verdict import ratio_reading

    three = ratio_reading([1.2, 1.0, 1.4])
    assert three["interval"] is None and three["n"] == 3
    assert ratio_cell(three["median"], three["interval"], three["range"]) == "1.20x (1.00-1.40)"
    ten = [1.0 + k / 100 for k in (5, 3, 9, 1, 7, 2, 8, 4, 6, 10)]
    got = ratio_reading(ten)
    assert got["interval"] == pytest.approx(order_interval(sorted(ten)))
    assert order_interval(sorted(ten)) == pytest.approx((1.02, 1.09))
    assert ratio_cell(got["median"], got["interval"], got["range"]) == "1.06x [1.02, 1.09]" and got["coverage"] >= 0.95


def test_the_san_sentence_counts_the_repeats_the_verdicts_read(store):
    """How often SAN came out ahead of CAN is counted from the run the verdicts read, not written by hand."""
    from _code import speed

    v = speed.values(store)
    read = ratios(OLDER, "can", "san")
    assert (v["san_ahead_repeats"], v["san_repeats"]) == (sum(x < 1 for x in read), len(read))


# -- the CPU tables: stored, never timed while a page builds ---------------------------------------------------


def cpu_outputs(store) -> dict:
    """Every CPU table and sentence the results, speed, depths and ablation pages show."""
    from _code import ablation, depths, speed
    from _code.cpu_speed import cpu_provenance, cpu_table

    speeds = {s: 1.0 for s in NINE}
    return {
        "table": speed.speed_table(store, NINE, speeds),
        "depths table": speed.speed_table(store, NINE, speeds, "baseline"),
        "speed reference": speed.reference_frame(store),
        "speed prose": speed.values(store)["cpu_sentence"],
        "depths prose": depths.values(store)["cpu_sentence"],
        "ablation prose": ablation.values(store)["cpu_sentence"],
        "provenance": cpu_provenance(cpu_table(against="baseline", root=store.measurements)[1]),
    }


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k].equals(b[k]) if hasattr(a[k], "equals") else a[k] == b[k] for k in a)


def test_the_cpu_tables_are_read_not_timed_and_a_busy_machine_changes_nothing(store, monkeypatch, tmp_path):
    if not (RESULTS / "cpu" / "speed.json").is_file():
        pytest.fail(
            "book/results/cpu/speed.json is not stored: `python -m repro experiment --scale small --studies speed`"
        )
    from repro.bench import cpu as sp
    from repro.bench import speed as bench

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
    from _code.cpu_speed import cpu_table

    seconds = {s: [steady(k, 2.0 + 0.1 * i) for k in range(20)] for i, s in enumerate(NINE)}
    fake_run(tmp_path, seconds)
    rows, prov = cpu_table(("balanced", "can"), root=tmp_path, live=False)
    expected = sorted(b / c for b, c in zip(seconds["balanced"], seconds["can"]))  # tok/s ratio: seconds inverted
    assert prov["noisy"] is None and rows["can"]["ratio"] == pytest.approx(statistics.median(expected))
    assert rows["can"]["interval"] == pytest.approx(order_interval(expected))


def test_a_noisy_cpu_run_shows_no_ratio_and_says_why(tmp_path):
    from _code import depths
    from _code.cpu_speed import OTHER_BOUND, cpu_table
    from repro.studies.store import Store

    seconds = {s: [steady(k, 2.0 + 0.1 * i) for k in range(20)] for i, s in enumerate(NINE)}
    seconds["can"] = [2.4 * (1 + 0.05 * (k % 7)) for k in range(20)]  # a third apart: another process meddled
    fake_run(tmp_path, seconds)
    _, prov = cpu_table(("balanced", "can"), root=tmp_path, live=False)
    assert "CAN's ratio to Balanced spans" in prov["noisy"]
    fake_run(tmp_path, {s: [steady(k, 2.0) for k in range(20)] for s in NINE}, other=OTHER_BOUND + 0.1)
    _, prov = cpu_table(("balanced", "can"), root=tmp_path, live=False)
    assert "other processes took" in prov["noisy"]
    from _code.speed import speed_table

    depth = ("baseline", "depth-9-4", "balanced", "depth-14-1")
    frame = speed_table(Store("small", tmp_path), depth, {s: 1.0 for s in depth}, "baseline")
    assert set(frame["ours, CPU fp32"]) == {"noisy run"}
    assert depths.cpu_values(Store("small", tmp_path))["cpu_sentence"].startswith("The stored CPU run is noisy")


def test_a_live_cpu_run_is_timed_only_on_request_and_once(tmp_path, monkeypatch):
    from _code.cpu_speed import LIVE_ENV, cpu_table
    from repro.bench import cpu as sp

    calls = []

    def bench(study, settings):
        calls.append(settings["systems"])
        rows = {
            s: {"tok_per_s": 100.0, "tokens": 240, "seconds": [2.4] * settings["repeats"]} for s in settings["systems"]
        }
        return {"systems": rows, "meta": {"device": "CPU", "load_average": [0.0], "threads": 1}}

    monkeypatch.setattr(sp, "run_bench", bench)
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match="python -m repro experiment --scale small --studies speed"):
        cpu_table(("balanced",), root=tmp_path)  # nothing stored, no live run asked for: nothing timed
    assert calls == []
    monkeypatch.setenv(LIVE_ENV, "1")
    cpu_table(("balanced", "can"), root=tmp_path)
    cpu_table(("baseline",), root=tmp_path)
    assert calls == [list(sp.SPEED_SYSTEMS)]  # one interleaved run of the nine, timed once, then read
