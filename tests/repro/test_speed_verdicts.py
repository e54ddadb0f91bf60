"""Speed verdicts with the GPU run as the unit: the runs of one decoder code pool, a claim one run supports says "1 GPU
run" and stays inconclusive below the standard's 3 runs, and a within-run interval that clears the bound does not
decide a claim whose runs spread across it. The expected numbers are written here: the order statistic from the
binomial (math.comb), the interval over runs from Student's t quantile for 2 degrees of freedom (4.3027)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from repro.results.files import save_result
from repro.studies.claims import BY_ID
from repro.studies.store import Store
from repro.studies.verdict import FAILS, HOLDS, INCONCLUSIVE, MIXED, runs_interval

T_975_DF2 = 4.302652729911275  # Student's t, 97.5 % quantile, 2 degrees of freedom (tables)
CLAIM = BY_ID["can-faster"]  # CAN/Balanced tokens/s > 1, eager


def store_with(tmp_path: Path, runs: dict[str, tuple[str, list[float]]]) -> Store:
    """A results folder holding one GPU speed run per entry: {run: (commit, CAN/Balanced ratio per repeat)}, every
    repeat 1.2 s long, Balanced at 1000 tokens/s, both modes alike."""
    for day, (run, (commit, ratios)) in enumerate(sorted(runs.items())):
        balanced = [1000.0] * len(ratios)
        timed = {
            "balanced": {"tok_per_s_repeats": balanced, "seconds": [1.2] * len(ratios)},
            "can": {"tok_per_s_repeats": [1000.0 * r for r in ratios], "seconds": [1.2] * len(ratios)},
        }
        systems = {s: {"eager": row, "captured": row} for s, row in timed.items()}
        prov = {
            "commit": commit,
            "date": f"2026-11-{10 + day}",
            "measured_at": f"2026-11-{10 + day}T12:00:00+00:00",
            "device": "NVIDIA H200",
            "scale": "full",
            "config": {"command": "a test"},
            "torch": "2",
            "source": "written by a test",
        }
        save_result(tmp_path / "gpu" / run / "speed.json", {"systems": systems, "settings": {}}, prov)
    return Store("small", tmp_path)


def judge(store: Store):
    return CLAIM.evidence.judge(store, CLAIM)


def lower_order_statistic(xs: list[float]) -> float:
    """x_(k) for the largest k with 1 - 2 P(Binomial(n, 1/2) <= k - 1) >= 95 %."""
    xs, n = sorted(xs), len(xs)
    k = max(k for k in range(1, n // 2 + 1) if 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n >= 0.95)
    return xs[k - 1]


FAST = [1.40, 1.45, 1.50, 1.48, 1.52, 1.47, 1.44, 1.55, 1.49, 1.46]  # every repeat well above 1


def test_one_run_alone_says_so_and_stays_inconclusive(tmp_path):
    j = judge(store_with(tmp_path, {"run-a": ("a" * 40, FAST)}))
    assert lower_order_statistic(FAST) > 1  # its own interval clears the bound
    assert j.word == INCONCLUSIVE and not j.meets
    assert "1 GPU run" in j.evidence and "1 GPU run" in j.ours
    assert "2 more GPU runs" in j.settle


def test_pooling_runs_of_one_code_changes_the_verdict_as_the_rule_says(tmp_path):
    commit = "b" * 40
    second = [r * 1.02 for r in FAST]
    two = judge(store_with(tmp_path / "two", {"run-a": (commit, FAST), "run-b": (commit, second)}))
    assert two.word == INCONCLUSIVE and "2 GPU runs" in two.evidence  # below the standard's 3 runs
    third = [r * 0.98 for r in FAST]
    runs = {"run-a": (commit, FAST), "run-b": (commit, second), "run-c": (commit, third)}
    three = judge(store_with(tmp_path / "three", runs))
    assert three.word == HOLDS and three.meets and "3 GPU runs" in three.evidence
    assert three.value == pytest.approx(statistics.median(FAST + second + third))
    medians = [statistics.median(x) for x in (FAST, second, third)]
    logs = [math.log(m) for m in medians]
    half = T_975_DF2 * statistics.stdev(logs) / math.sqrt(3)
    expected = (math.exp(statistics.fmean(logs) - half), math.exp(statistics.fmean(logs) + half))
    assert three.strength["over_runs"] == pytest.approx(expected)
    assert sorted(three.strength["run_medians"]) == pytest.approx(sorted(medians))


def test_runs_of_different_code_are_not_pooled(tmp_path):
    runs = {"run-a": ("c" * 40, FAST), "run-b": ("d" * 40, FAST), "run-c": ("e" * 40, FAST)}
    j = judge(store_with(tmp_path, runs))
    assert j.word == INCONCLUSIVE and "1 GPU run" in j.evidence and len(j.beside) == 2


def test_a_lower_bound_of_1_0006_within_runs_is_inconclusive_when_the_runs_spread(tmp_path):
    a = [0.95] * 5 + [1.0006] + [1.05] * 4
    b = [0.97] * 4 + [1.6] * 6
    c = [1.8] * 10
    assert lower_order_statistic(a + b + c) == 1.0006  # the pooled repeats alone would say "holds"
    medians = [statistics.median(x) for x in (a, b, c)]
    logs = [math.log(m) for m in medians]
    half = T_975_DF2 * statistics.stdev(logs) / math.sqrt(3)
    assert math.exp(statistics.fmean(logs) - half) < 1 < math.exp(statistics.fmean(logs) + half)
    commit = "f" * 40
    j = judge(store_with(tmp_path, {"run-a": (commit, a), "run-b": (commit, b), "run-c": (commit, c)}))
    assert j.interval[0] == 1.0006
    assert j.word == INCONCLUSIVE and "3 GPU runs" in j.evidence


def test_runs_that_decide_both_ways_read_mixed(tmp_path):
    commit = "0" * 40
    slow = [r - 0.6 for r in FAST]  # every repeat below 1: that run alone fails
    j = judge(store_with(tmp_path, {"run-a": (commit, FAST), "run-b": (commit, FAST), "run-c": (commit, slow)}))
    assert {r["verdict"] for r in j.sets} == {HOLDS, FAILS}
    assert j.word == MIXED


def test_every_claim_names_the_reading_that_decides_it_and_shows_the_other(tmp_path):
    j = judge(store_with(tmp_path, {"run-a": ("1" * 40, FAST)}))
    assert "decided by the eager reading" in j.evidence
    assert "beside it, not deciding: with CUDA graphs" in j.evidence


def test_no_interval_over_fewer_than_three_runs():
    assert runs_interval([1.2, 1.4]) is None
    low, high = runs_interval([1.0, 2.0, 4.0])  # logs 0, ln 2, 2 ln 2: mean ln 2, s.d. ln 2
    half = T_975_DF2 * math.log(2) / math.sqrt(3)
    assert (low, high) == pytest.approx((2 * math.exp(-half), 2 * math.exp(half)))


def test_the_speed_standard_reads_the_repeats_of_the_speed_plan(monkeypatch):
    """One value: the standard's repeats (and the order statistics it names), shortest repeat and forced length follow
    the speed plan's, and the plan's defaults, which the GPU scripts time with, meet the standard."""
    from repro.bench.settings import BenchSettings, SpeedPlan
    from repro.studies import evidence

    assert evidence.SPEED.repeats == SpeedPlan().repeats <= BenchSettings().repeats
    assert evidence.SPEED.seconds == SpeedPlan().min_seconds
    monkeypatch.setattr(evidence, "SpeedPlan", lambda: SpeedPlan(repeats=17, forced_length=12, min_seconds=2.5))
    standard = evidence.speed_standard()
    # 17 repeats: P(X <= 4) for X ~ Binomial(17, 1/2) is 2,517 / 131,072 < 2.5 %, P(X <= 5) is 0.0717: x_(5)..x_(13)
    assert sum(math.comb(17, i) for i in range(5)) / 2**17 < 0.025 < sum(math.comb(17, i) for i in range(6)) / 2**17
    assert (standard.repeats, standard.seconds) == (17, 2.5) and "at least 17 interleaved repeats" in standard.least
    assert "per system of at least 2.5 s" in standard.least
    assert (
        "forced length 12" in standard.least
        and "with 17 repeats the 5th to the 13th smallest ratio" in standard.interval
    )
