"""The scorecard judges a claim only with evidence that can test it, and gives one verdict per claim."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from canlib.studies import scorecard as sc
from canlib.studies.verdict import Runs

RESULTS = Path(__file__).resolve().parents[1] / "book" / "results"
GPU = {  # tok/s with the spread of the timed repeats
    "baseline": {"tok_per_s": 200.0, "min": 195.0, "max": 205.0},
    "balanced": {"tok_per_s": 450.0, "min": 440.0, "max": 460.0},
    "can": {"tok_per_s": 600.0, "min": 590.0, "max": 610.0},
    "san": {"tok_per_s": 500.0, "min": 490.0, "max": 510.0},
    "aan": {"tok_per_s": 480.0, "min": 470.0, "max": 490.0},
}


def runs(bleu: dict[str, list[float]] | None) -> dict[str, Runs] | None:
    """Fake stored runs: test2016 tokenized BLEU per seed, no hypotheses (the seed interval alone)."""
    if bleu is None:
        return None
    return {s: Runs(s, tuple(range(1, len(v) + 1)), {"test": v}) for s, v in bleu.items()}


def by_name(rows, name):
    return [r for r in rows if r.name == name]


def judge(scale="small", bleu=None, gpu=None, cpu=None, batch=None, more=()):
    gpus = [(gpu, "GPU eager fp16"), *more] if gpu else list(more)
    return sc.claims(scale, runs=runs(bleu), gpus=gpus, cpu=cpu, cpu_evidence="test CPU",
                     gpu_batch=batch, batch_evidence="GPU batch sweep")


def test_quality_claims_at_tiny_are_not_tested_even_with_seeds():
    bleu = {"can": [30.0, 30.1], "balanced": [30.0, 30.1], "baseline": [30.0, 30.1]}
    rows = judge("tiny", bleu=bleu)
    quality = [r for r in rows if r.kind == "quality"]
    assert quality and all(r.verdict == sc.NOT_TESTED for r in quality)


def test_a_quality_claim_with_one_seed_is_not_tested():
    row = sc.quality_claim("c", "p", "ΔBLEU >= -0.5", lambda d: d >= -0.5, "small",
                           sc.pair("can", "balanced", runs({"can": [30.0], "balanced": [30.0, 30.2]})))
    assert row.verdict == sc.NOT_TESTED and "CAN has 1 full-budget seed" in row.evidence


def test_quality_claims_without_the_studies_api_are_not_tested():
    assert all(r.verdict == sc.NOT_TESTED for r in judge("small", bleu=None) if r.kind == "quality")


def test_a_difference_whose_seed_spread_straddles_the_threshold_is_within_noise():
    # CAN - Balanced = -0.40, standard error 0.14: the 2-s.e. interval [-0.68, -0.12] straddles -0.5
    row = by_name(judge(bleu={"can": [27.0, 27.2], "balanced": [27.4, 27.6]}), "CAN is within 0.5 BLEU of Balanced")[0]
    assert row.verdict == sc.NOISE
    assert row.ours.startswith("-0.40")


def test_a_difference_clear_of_the_threshold_is_judged():
    held = by_name(judge(bleu={"can": [27.3, 27.35], "balanced": [27.4, 27.45]}), "CAN is within 0.5 BLEU of Balanced")[0]
    assert held.verdict == sc.HELD
    failed = by_name(judge(bleu={"can": [26.0, 26.1], "balanced": [27.4, 27.5]}), "CAN is within 0.5 BLEU of Balanced")[0]
    assert failed.verdict == sc.FAILED


def test_a_speed_claim_with_only_cpu_rows_gives_no_verdict():
    rows = by_name(judge(gpu=None, cpu=GPU), "CAN decodes faster than Balanced")
    assert [r.verdict for r in rows] == [sc.NOT_TESTED, sc.NO_VERDICT_CPU]
    assert "not the paper's regime" in rows[1].evidence


def test_a_speed_claim_is_judged_from_the_gpu_rows_and_the_cpu_row_still_is_not():
    rows = by_name(judge(gpu=GPU, cpu=GPU), "Balanced 12/2 decodes about 2x faster than Baseline 6/6")
    assert [r.verdict for r in rows] == [sc.HELD, sc.NO_VERDICT_CPU]
    assert rows[0].evidence == "GPU eager fp16"


def test_a_speed_ratio_whose_repeats_straddle_the_criterion_is_within_noise():
    gpu = {**GPU, "can": {"tok_per_s": 570.0, "min": 500.0, "max": 650.0}}  # 1.27x, repeats 1.09-1.48x
    row = by_name(judge(gpu=gpu), "CAN decodes faster than Balanced")[0]
    assert row.verdict == sc.NOISE


def test_ablation_speed_without_gpu_rows_of_the_ablations_is_not_tested():
    row = by_name(judge(gpu=GPU), "Compressing attention gains more speed than compressing the FFN (Table 5)")[0]
    assert row.verdict == sc.NOT_TESTED


def test_batch_claim_uses_the_gpu_batch_sweep():
    batch = {"balanced": {1: 400.0, 64: 28000.0}, "can": {1: 520.0, 64: 30000.0}}
    assert by_name(judge(batch=batch), "CAN's gain over Balanced shrinks at large batch (Figure 7)")[0].verdict == sc.HELD
    assert by_name(judge(batch=None), "CAN's gain over Balanced shrinks at large batch (Figure 7)")[0].verdict == sc.NOT_TESTED


def test_seed_difference_refuses_a_single_seed():
    with pytest.raises(ValueError, match="at least 2 seeds"):
        sc.seed_difference([1.0], [1.0, 2.0])


def test_every_stored_gpu_run_gives_its_own_table2_speed_verdicts(monkeypatch):
    import json
    from pathlib import Path

    results = Path(__file__).resolve().parents[1] / "book" / "results"
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(results))
    rows = by_name(sc.scorecard("tiny", cpu=False), "Balanced 12/2 decodes about 2x faster than Baseline 6/6")
    stored = sorted((results / "gpu").glob("*/speed.json"))
    assert {p.parent.name for p in stored} >= {"h100-2026-11-26", "h100-2026-11-26-e19dd56", "h200-2026-11-26"}
    for path in stored:  # every stored run, two of them on the same GPU model: one row each, told apart by commit
        speed = json.loads(path.read_text())
        device, commit = speed["provenance"]["device"], speed["provenance"]["commit"][:7]
        eager = {s: r["eager"]["tok_per_s"] for s, r in speed["result"]["systems"].items()}
        row = [r for r in rows if f"{device}, commit {commit}," in r.evidence]
        assert len(row) == 1, (path, [r.evidence for r in rows])
        assert row[0].ours.startswith(f"{eager['balanced'] / eager['baseline']:.2f}x")
    assert len([r for r in rows if r.evidence.startswith("GPU")]) == len(stored)
    h200 = [r for r in rows if "H200" in r.evidence][0]
    assert h200.verdict == sc.HELD and h200.ours.startswith("2.28x")
    h100 = [r for r in rows if "H100" in r.evidence and "e471a2a" in r.evidence][0]
    assert h100.verdict == sc.NOISE  # its Baseline repeats span 141-238 tok/s: 1.66-3.83x straddles 1.8x


def test_the_gpu_summary_rows_are_the_stored_speed_files(monkeypatch):
    """Each stored GPU run's summary row, recomputed from its raw speed.json (medians of the timed repeats)."""
    from canlib.studies import gpu_results

    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(RESULTS))
    for path in sorted((RESULTS / "gpu").glob("*/speed.json")):
        data = json.loads(path.read_text())
        systems = data["result"]["systems"]
        median = {mode: {s: statistics.median(r[mode]["tok_per_s_repeats"]) for s, r in systems.items() if mode in r}
                  for mode in ("eager", "captured")}
        row = gpu_results.speed_summary(path.parent.name)
        assert row["CAN / Balanced eager"] == pytest.approx(median["eager"]["can"] / median["eager"]["balanced"])
        assert row["CAN / Balanced graphs"] == pytest.approx(median["captured"]["can"] / median["captured"]["balanced"])
        same = data["result"]["captured_matches_eager"]
        assert row["captured == eager"] == f"{sum(map(bool, same.values()))} of {len(same)} systems"


def test_at_tiny_the_scorecard_judges_no_quality_claim(monkeypatch):
    rows = sc.scorecard("tiny", cpu=False)
    assert all(r.verdict == sc.NOT_TESTED for r in rows if r.kind == "quality")
    assert sc.frame(rows).index.name == "name"


def test_a_claim_whose_seeds_are_not_stored_is_not_run_yet_and_names_the_command():
    bleu = {"can": [27.3, 27.35, 27.2], "balanced": [27.4, 27.45, 27.5], "depth-14-1": [26.0]}
    rows = sc.claims("small", runs=runs(bleu), commands=True)
    keeps = by_name(rows, "Balanced keeps Baseline's BLEU")[0]
    assert keeps.verdict == sc.NOT_RUN and keeps.ours == "—"
    assert "`python -m canlib experiment --scale small --systems baseline --seeds 1,2,3 --studies runs`" in keeps.evidence
    deep = by_name(rows, "A 14/1 model loses BLEU against 12/2 (Figure 4)")[0]
    assert deep.verdict == sc.NOT_RUN and deep.ours.startswith(f"{26.0 - (27.4 + 27.45 + 27.5) / 3:+.2f} (1 seed")
    assert "--systems depth-14-1 --seeds 1,2 " in deep.evidence
    assert by_name(rows, "CAN is within 0.5 BLEU of Balanced")[0].verdict == sc.HELD  # its own seeds are in


def test_the_cross_task_claim_names_the_directions_not_run_yet():
    close = runs({"can": [30.0, 30.2, 29.8], "balanced": [30.1, 30.3, 29.9]})
    row = sc.cross_task_claim("small", {"multi30k-en-de": close, "multi30k-de-en": {"can": None, "balanced": None}}, "paper")
    assert row.verdict == sc.NOT_RUN and "--corpora multi30k-de-en --studies runs" in row.evidence
    assert "--seeds 1,2 " in row.evidence  # the plan's two seeds per direction


def test_cross_task_claim_holds_only_when_every_direction_holds():
    from canlib.studies.scorecard import FAILED, HELD, NOISE, NOT_TESTED, cross_task_claim

    close = runs({"can": [30.0, 30.2, 29.8], "balanced": [30.1, 30.3, 29.9]})
    far = runs({"can": [27.0, 27.2, 26.8], "balanced": [30.1, 30.3, 29.9]})
    noisy = runs({"can": [29.0, 31.0, 30.0], "balanced": [30.5, 28.5, 32.5]})
    assert cross_task_claim("small", {"a": close, "b": close}, "paper").verdict == HELD
    assert cross_task_claim("small", {"a": far, "b": far}, "paper").verdict == FAILED
    assert cross_task_claim("small", {"a": close, "b": far}, "paper").verdict == NOISE  # the directions disagree
    assert cross_task_claim("small", {"a": close, "b": noisy}, "paper").verdict == NOISE
    assert cross_task_claim("tiny", {"a": close, "b": close}, "paper").verdict == NOT_TESTED
    one_seed = runs({"can": [30.0], "balanced": [30.0]})
    assert cross_task_claim("small", {"a": close, "b": one_seed}, "paper").verdict == sc.NOT_RUN  # b's seeds are missing


def test_the_scorecard_judges_the_stored_small_runs_on_four_sets(shared_data, monkeypatch):
    """With the 23 H100 runs stored, each quality claim is judged at small from its own seeds on the four
    evaluation sets; its headline number is recomputed here from the raw JSON (tokenized BLEU, mean over seeds)."""
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(RESULTS))
    assert sc.stored_scale() == "small"
    tok = {}
    for path in (RESULTS / "small" / "runs" / "multi30k-en-de").glob("*.json"):
        result = json.loads(path.read_text())["result"]
        tok.setdefault(result["system"], []).append(result["scores"]["test"]["tok_bleu"])
    rows = sc.scorecard("small", cpu=False)
    can = by_name(rows, "CAN is within 0.5 BLEU of Balanced")[0]
    assert can.verdict == sc.FAILED and can.chapter == "results"
    assert can.ours.startswith(f"{statistics.fmean(tok['can']) - statistics.fmean(tok['balanced']):+.2f}")
    assert "0 held, 4 did not hold, 0 within noise of 4 sets" in can.evidence and "pooled over seeds" in can.evidence
    assert by_name(rows, "Compress FFN loses no BLEU against Balanced (Table 5)")[0].verdict == sc.NOISE
    assert by_name(rows, "A 14/1 model loses BLEU against 12/2 (Figure 4)")[0].verdict == sc.NOT_RUN
    assert by_name(rows, "CAN stays within 0.5 BLEU of Balanced across tasks (Tables 2-3)")[0].verdict == sc.NOT_RUN


def test_one_verdict_per_claim_comes_from_the_best_powered_gpu_run():
    """Two GPU runs judge one claim: the one with the narrower repeat interval decides, unless the other reaches
    the opposite verdict; CPU rows never decide."""
    wide = {**GPU, "balanced": {"tok_per_s": 450.0, "min": 300.0, "max": 600.0}}  # its ratios straddle everything
    rows = judge(gpu=GPU, cpu=GPU, more=[(wide, "GPU eager fp16: a noisy host")])
    name = "Balanced 12/2 decodes about 2x faster than Baseline 6/6"
    assert [r.verdict for r in by_name(rows, name)] == [sc.HELD, sc.NOISE, sc.NO_VERDICT_CPU]
    one = by_name(sc.headline(rows), name)
    assert len(one) == 1 and one[0].verdict == sc.HELD and "best-powered of 2 GPU runs" in one[0].evidence
    slow = {**GPU, "balanced": {"tok_per_s": 300.0, "min": 299.0, "max": 301.0}}  # 1.5x, a narrow interval: fails
    clash = by_name(sc.headline(judge(gpu=GPU, more=[(slow, "GPU eager fp16: another machine")])), name)[0]
    assert clash.verdict == sc.NOISE and "reach the opposite verdict" in clash.evidence
    assert len(sc.headline(judge(gpu=GPU))) == len({r.name for r in judge(gpu=GPU)})  # one row per claim
