"""The sentences of the results, ablation and depths chapters quote the stored runs: every number a finding
carries is recomputed here from the raw JSON of book/results/small and from paper_numbers.json, with json and
statistics only (no canlib helper), and every difference it quotes appears in its text as computed."""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from canlib.studies import findings

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "book" / "results" / "small" / "runs" / "multi30k-en-de"
PAPER = json.loads((REPO / "canlib" / "resources" / "paper_numbers.json").read_text())
# the paper's row names, written out here rather than read from canlib
TABLE2 = {"baseline": "Baseline", "balanced": "Balanced", "san": "SAN", "aan": "AAN", "can": "CAN"}
TABLE5 = {"balanced": "Balanced", "can_attn": "Compress Attention", "can_ffn": "Compress FFN", "can": "Compress All"}


def raw_scores(split: str) -> dict[str, list[float]]:
    """{system: [tokenized BLEU per seed]} of ``split``, read from the run files."""
    out: dict[str, list[float]] = {}
    for path in sorted(RUNS.glob("*-seed*.json")):
        result = json.loads(path.read_text())["result"]
        out.setdefault(result["system"], []).append(result["scores"][split]["tok_bleu"])
    return out


def expected(key: str) -> float:
    """The value a finding's key names, recomputed from the raw files."""
    kind, *rest = key.split("/")
    if kind == "mean":
        split, system = rest
        return statistics.fmean(raw_scores(split)[system])
    if kind == "sd":
        split, system = rest
        return statistics.stdev(raw_scores(split)[system])
    if kind == "gap":
        split, a, b = rest
        scores = raw_scores(split)
        return statistics.fmean(scores[a]) - statistics.fmean(scores[b])
    if kind == "se2":
        split, a, b = rest
        scores = raw_scores(split)
        return 2 * math.sqrt(statistics.variance(scores[a]) / len(scores[a]) + statistics.variance(scores[b]) / len(scores[b]))
    if kind == "paper":
        table, pair = rest
        if table == "t2":
            a, b = pair.split("-")
            rows = PAPER["table2_wmt14"]["en-de"]
            return rows[TABLE2[a]][0] - rows[TABLE2[b]][0]
        if table == "t5":
            a, b = pair.split("-")
            rows = PAPER["table5_ablation_en-de"]
            return rows[TABLE5[a]][0] - rows[TABLE5[b]][0]
        if table == "f4":
            first, second = pair.split("_minus_")
            depths = PAPER["fig4_balance_en-de"]["depths"]
            bleu = PAPER["fig4_balance_en-de"]["bleu"]
            return bleu[depths.index(first.replace("-", "/"))] - bleu[depths.index(second.replace("-", "/"))]
    if key == "last_count":  # on how many of the three test sets CAN has the lowest mean of all systems
        splits = ("test", "test2017_flickr", "test2017_mscoco")
        return sum(min(raw_scores(s).items(), key=lambda kv: statistics.fmean(kv[1]))[0] == "can" for s in splits)
    raise KeyError(f"no independent recomputation for the finding value {key!r}")


def check(finding: findings.Finding) -> None:
    """Every value equals its recomputation; every gap, mean and paper difference appears in the text as printed."""
    for key, value in finding.values.items():
        want = expected(key)
        assert abs(value - want) < 1e-9, f"{key}: the finding says {value}, the stored runs give {want}"
        if key.startswith(("gap/", "paper/")):
            assert f"{want:+.2f}" in finding.text, f"{key}: {want:+.2f} is not in {finding.text!r}"
        elif key.startswith(("mean/", "sd/")):
            assert f"{want:.2f}" in finding.text, f"{key}: {want:.2f} is not in {finding.text!r}"


@pytest.fixture
def stored(shared_data, monkeypatch):
    """The stored small results and the real data (the paired bootstrap reads the test references)."""
    if not RUNS.is_dir():
        pytest.skip("book/results/small holds no runs")
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(REPO / "book" / "results"))


@pytest.mark.parametrize("chapter", ["results", "ablation", "depths"])
def test_every_number_a_chapter_finding_quotes_is_the_stored_runs(stored, chapter):
    found = getattr(findings, f"{chapter}_findings")("small")
    assert found and sum(len(f.values) for f in found) >= 3
    for finding in found:
        check(finding)


def test_the_headline_findings_say_what_the_runs_show(stored):
    text = " ".join(f.text for f in findings.results_findings("small"))
    gap = expected("gap/test/can/balanced")
    assert f"CAN loses about {abs(gap):.1f} BLEU to Balanced" in text
    assert "CAN is last of the 9 trained systems on every test set" in text
    assert "p < 0.05 in 3 of 3 seed pairs" in text  # sacreBLEU's paired bootstrap on every seed pair
    ablation = " ".join(f.text for f in findings.ablation_findings("small"))
    assert expected("gap/test/can_attn/balanced") < expected("gap/test/can_ffn/balanced")
    assert "keeps the paper's order" in ablation and "average of 3 runs" in ablation
    depths = " ".join(f.text for f in findings.depths_findings("small"))
    assert "**One seed** of 9/4 and 14/1" in depths


def test_a_finding_that_misquotes_the_runs_is_caught(stored):
    """The check can fail: a finding whose number is off by a hundredth, or whose text prints another number."""
    good = findings.results_findings("small")[0]
    wrong_value = findings.Finding(good.text, {**good.values, "gap/test/can/balanced": good.values["gap/test/can/balanced"] + 0.01})
    with pytest.raises(AssertionError, match="gap/test/can/balanced"):
        check(wrong_value)
    gap = f"{good.values['gap/test/can/balanced']:+.2f}"
    wrong_text = findings.Finding(good.text.replace(gap, "-1.00"), good.values)
    with pytest.raises(AssertionError, match="is not in"):
        check(wrong_text)
