"""The speed page's one account of a decoding step and the GPU page's reconciliation: every timing is read from the
stored speed and profile files of one GPU run (expected values computed here with json and statistics), the
timeline picture is built as its caption says (one bar per launch at the profiled mean durations, the gaps filling
the bench's step), and the run-to-run table lists every stored run."""

from __future__ import annotations

import json
import statistics

import pytest
from conftest import REPO, stored_results

RESULTS = REPO / "book" / "results"
GPU = RESULTS / "gpu"


def raw(path):
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def store():
    from repro.studies.store import Store

    with stored_results(RESULTS):
        yield Store("small", RESULTS)


def both_run() -> str:
    """The run measured last that holds a speed run and a profile, by the profile's measured_at."""
    runs = [p.parent for p in GPU.glob("*/profile.json") if (p.parent / "speed.json").is_file()]
    return max(runs, key=lambda r: str(raw(r / "profile.json")["provenance"].get("measured_at"))).name


def test_the_timings_are_one_runs_bench_and_profile(store):
    from _code import speed

    run = both_run()
    t = speed.timings(store)
    bench = raw(GPU / run / "speed.json")["result"]["systems"]
    cases = raw(GPU / run / "profile.json")["result"]["cases"]
    for s in ("balanced", "can"):
        steps = [1e6 / x for x in bench[s]["eager"]["tok_per_s_repeats"]]
        assert t[f"bench_{s}_us"] == pytest.approx(1e6 / bench[s]["eager"]["tok_per_s"])
        assert (t[f"bench_{s}_low_us"], t[f"bench_{s}_high_us"]) == pytest.approx((min(steps), max(steps)))
        assert t[f"profile_{s}_us"] == pytest.approx(1000 * cases[f"decode_{s}"]["wall_ms"])
        busy, launches = 1000 * cases[f"decode_{s}"]["gpu_kernel_ms"], cases[f"decode_{s}"]["kernel_launches"]
        assert t[f"gap_{s}_us"] == pytest.approx((1e6 / bench[s]["eager"]["tok_per_s"] - busy) / launches)
        assert t[f"graph_gap_{s}_us"] == pytest.approx((1e6 / bench[s]["captured"]["tok_per_s"] - busy) / launches)
    ratios = [
        c / b
        for c, b in zip(bench["can"]["eager"]["tok_per_s_repeats"], bench["balanced"]["eager"]["tok_per_s_repeats"])
    ]
    assert t["bench_ratio"] == pytest.approx(statistics.median(ratios))
    assert t["bench_ratio_of_medians"] == pytest.approx(
        bench["can"]["eager"]["tok_per_s"] / bench["balanced"]["eager"]["tok_per_s"]
    )
    assert t["profile_ratio"] == pytest.approx(cases["decode_balanced"]["wall_ms"] / cases["decode_can"]["wall_ms"])


def test_the_page_says_where_the_profilers_wall_time_lies_among_the_bench_repeats(store):
    from _code import speed

    t = speed.timings(store)
    bench = raw(GPU / both_run() / "speed.json")["result"]["systems"]
    steps = [1e6 / x for x in bench["balanced"]["eager"]["tok_per_s_repeats"]]
    below = t["profile_balanced_us"] < min(steps)
    assert ("Balanced's" in t["profile_sentence"]) and (("below every one" in t["profile_sentence"]) == below)


def order(bars) -> list[int]:
    """The bars' indices from left to right."""
    return sorted(range(len(bars)), key=lambda i: min(bars[i][:, 0]))


def test_the_timeline_draws_one_bar_per_launch_at_the_profiled_durations_and_fills_the_benchs_step(store):
    import matplotlib

    matplotlib.use("Agg")
    from _code import speed

    cases = raw(GPU / both_run() / "profile.json")["result"]["cases"]
    t = speed.timings(store)
    fig = speed.plot_step_timeline(store)
    for ax, step in zip(fig.axes, ("bench_{}_us", "graph_{}_us")):
        rows = ax.collections  # one broken_barh per system, Balanced first
        for collection, s in zip(rows, ("balanced", "can")):
            case = cases[f"decode_{s}"]
            bars = [p.vertices for p in collection.get_paths()]
            starts = sorted(min(v[:, 0]) for v in bars)
            widths = [max(v[:, 0]) - min(v[:, 0]) for v in bars]
            assert len(bars) == round(case["kernel_launches"])
            assert sum(widths) == pytest.approx(1000 * case["gpu_kernel_ms"], rel=1e-6)
            gaps = [b - (a + w) for a, b, w in zip(starts, starts[1:], [widths[i] for i in order(bars)])]
            assert max(gaps) == pytest.approx(min(gaps), abs=1e-9)  # one gap after every kernel
            end = max(max(v[:, 0]) for v in bars) + gaps[0]
            assert end == pytest.approx(t[step.format(s)], rel=1e-6)  # the gaps fill the bench's measured step
            assert starts[0] == 0.0
    matplotlib.pyplot.close(fig)


def test_the_run_spread_table_lists_every_stored_run_and_marks_the_one_the_verdicts_read(store):
    from _code import speed
    from _code.readers import speed_runs

    frame = speed.run_spread_frame(store)
    timed = [
        p.parent.name
        for p in GPU.glob("*/speed.json")
        if all(
            raw(p)["result"]["systems"].get(s, {}).get("eager", {}).get("tok_per_s_repeats")
            for s in ("can", "balanced")
        )
    ]
    assert len(frame) == len(timed)
    decides = frame[frame["read"] == "decides"]
    read = speed_runs(store)
    commits = {str(raw(GPU / r / "speed.json")["provenance"]["commit"])[:7] for r in read}
    assert len(decides) == len(read) and all(any(c in name for c in commits) for name in decides.index)
