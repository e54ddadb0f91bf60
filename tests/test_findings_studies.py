"""The sentences the similarity, attention, errors and training chapters print quote the stored results.

Every expected number here is recomputed from the raw JSON under book/results (json, statistics and numpy only,
no canlib helper) and from the paper's numbers, then compared with what canlib.studies.findings quotes. The
stored `small` results were trained on one H100 at e471a2a and are committed unchanged, so these tests read them
directly (no training, no data)."""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from canlib.studies import findings as F

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "book" / "results"
SMALL = RESULTS / "small"
RUNS = SMALL / "runs" / "multi30k-en-de"
PAPER = json.loads((REPO / "canlib" / "resources" / "paper_numbers.json").read_text(encoding="utf-8"))

pytestmark = pytest.mark.skipif(not (SMALL / "similarity.json").exists(), reason="the small results are not stored")


def raw(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def quoted(findings: list[F.Finding]) -> dict[str, float]:
    return {k: v for f in findings for k, v in f.values.items()}


def text(findings: list[F.Finding]) -> str:
    return " ".join(f.text for f in findings)


def diagonal(matrix: list[list[float]]) -> list[float]:
    return [matrix[i][i] for i in range(len(matrix))]


def test_similarity_findings_quote_the_stored_diagonals_and_the_gap_the_papers_argument_needs():
    ours = raw(SMALL / "similarity.json")["result"]["residual"]
    paper = PAPER["fig2_similarity"]
    gap = {who: statistics.mean(a - b for a, b in zip(diagonal(m["self_vs_cross"]), diagonal(m["cross_vs_ffn"])))
           for who, m in (("ours", ours), ("paper", paper))}
    got = F.similarity_findings("small", root=RESULTS)
    v = quoted(got)
    assert v["ours_gap"] == pytest.approx(gap["ours"], abs=1e-12)
    assert v["paper_gap"] == pytest.approx(gap["paper"], abs=1e-12)
    assert f"{gap['paper']:+.3f}" == "+0.036"  # the paper's own diagonals (its Fig. 2)
    assert v["ours_diag_mean"] == pytest.approx(statistics.mean(diagonal(ours["self_vs_cross"])), abs=1e-12)
    assert v["paper_layer1_left"] == 0.8025 and v["paper_layer1_right"] == 0.8592  # right > left at layer 1
    higher = sum(a > b for a, b in zip(diagonal(ours["self_vs_cross"]), diagonal(paper["self_vs_cross"])))
    assert v["layers_ours_higher"] == higher
    words = text(got)
    assert f"differ by {gap['ours']:+.3f}" in words and f"differ by {gap['paper']:+.3f}" in words
    assert ("is not seen here" in words) == (gap["ours"] <= 0)


def test_attention_findings_quote_the_stored_gate_and_its_share_near_zero_and_one():
    study = raw(SMALL / "attention.json")["result"]
    hist = study["alpha_histogram"]
    edges = hist["edges"]
    got = F.attention_findings("small", root=RESULTS)
    v = quoted(got)
    for row, counts in zip(study["alpha_summary"], hist["counts"]):
        near_ends = sum(c for lo, hi, c in zip(edges, edges[1:], counts) if hi <= 0.1 + 1e-9 or lo >= 0.9 - 1e-9)
        layer = row["layer"]
        assert v[f"layer{layer}_extreme_share"] == pytest.approx(near_ends / sum(counts), abs=1e-12)
        assert v[f"layer{layer}_p10"] == row["p10"] and v[f"layer{layer}_p90"] == row["p90"]
    layer1 = study["alpha_summary"][0]
    assert round(layer1["p10"], 3) == 0.004 and round(layer1["p90"], 3) == 0.995  # the reading of the gate
    assert "bimodal" in text(got)
    pos = study["alpha_by_position"]
    keep = [c >= 30 for c in pos["count"]]
    for i, row in enumerate(pos["alpha"]):
        assert v[f"layer{i + 1}_above_uniform"] == sum(k and a > u for k, a, u in zip(keep, row, pos["uniform"]))


def test_errors_findings_quote_only_buckets_with_enough_sentences_and_the_papers_differences():
    buckets = json.loads((SMALL / "errors.json").read_text(encoding="utf-8"))["result"]
    got = F.errors_findings("small", root=RESULTS)
    v = quoted(got)
    expected = {}
    for key in ("frequency", "length"):
        b, c = buckets["balanced"][key], buckets["can"][key]
        for label, n, x, y in zip(b["labels"], b["sentences"], b["bleu"], c["bleu"]):
            if n >= 30:
                expected[f"{key} {label}"] = y - x
            else:
                assert f"{key} {label}" not in v and f"{label} ({n} sentences)" in text(got)
    assert {k: v[k] for k in expected} == pytest.approx(expected, abs=1e-12)
    assert all(d < 0 for d in expected.values()) == ("in every bucket" in text(got))
    assert not any("nan" in f.text.lower() for f in got)
    # the paper's Fig. 6 differences, CAN - Balanced, as the paper's figure gives them
    paper = [round(v[f"paper frequency {x}"], 2) for x in ("6", "12", "18", "24", "30+")]
    assert paper == [-1.00, -1.10, 1.00, -0.47, -3.21]
    assert [round(v[f"paper length {x}"], 2) for x in ("10", "20", "30", "40", "50+")] == [-1.57, -0.52, 0.91, -0.08, -0.73]
    tok = {s: [raw(p)["result"]["scores"]["test"]["tok_bleu"] for p in sorted(RUNS.glob(f"{s}-seed*.json"))]
           for s in ("balanced", "can")}
    gaps = [c - b for b, c in zip(tok["balanced"], tok["can"])]
    assert v["seed1_gap"] == pytest.approx(gaps[0], abs=1e-12)
    assert v["mean_gap"] == pytest.approx(statistics.mean(gaps), abs=1e-12)
    assert v["sd_can"] == pytest.approx(statistics.stdev(tok["can"]), abs=1e-12)


def test_training_findings_quote_the_last_validation_of_every_stored_seed():
    final, drops = {}, []
    for system in ("baseline", "balanced", "can"):
        final[system] = []
        for path in sorted(RUNS.glob(f"{system}-seed*.json")):
            valid = [r["valid_loss"] for r in raw(path)["result"]["log"] if r.get("valid_loss") is not None]
            final[system].append(valid[-1])
            drops.append(valid[-2] - valid[-1])
    got = F.training_findings("small", root=RESULTS)
    v = quoted(got)
    for system, losses in final.items():
        assert len(losses) == 3
        assert v[f"{system}_mean"] == pytest.approx(statistics.mean(losses), abs=1e-12)
        assert v[f"{system}_sd"] == pytest.approx(statistics.stdev(losses), abs=1e-12)
    assert statistics.mean(final["baseline"]) < statistics.mean(final["balanced"]) < statistics.mean(final["can"])
    assert "This is the paper's order" in text(got)
    assert v["drop_min"] == pytest.approx(min(drops), abs=1e-12) and v["drop_max"] == pytest.approx(max(drops), abs=1e-12)
    assert min(drops) > 0 and "Still falling" in text(got)
    paper_valid = PAPER["fig8_curves_en-de"]["valid"]
    assert v["paper can-balanced"] == pytest.approx(paper_valid["CAN"][-1] - paper_valid["Balanced"][-1], abs=1e-12)


def test_the_h200_run_is_quoted_beside_the_h100_can_runs():
    h200 = raw(RESULTS / "gpu" / "h200-2026-11-26" / "translation_small.json")["result"]
    h100 = [raw(p)["result"]["scores"]["test"]["bleu"] for p in sorted(RUNS.glob("can-seed*.json"))]
    v = quoted(F.h200_run_findings(root=RESULTS))
    assert v["h200_bleu"] == h200["scores"]["bleu"]
    assert v["h100_mean"] == pytest.approx(statistics.mean(h100), abs=1e-12)
    assert v["h100_sd"] == pytest.approx(statistics.stdev(h100), abs=1e-12)


def test_models_provenance_names_the_gpu_and_commit_that_trained_the_models_and_where_the_study_ran():
    from canlib.studies.analyses import models_provenance

    study = raw(SMALL / "errors.json")["provenance"]
    run = raw(RUNS / "can-seed1.json")["provenance"]
    line = models_provenance("small", ("balanced", "can"), study, root=RESULTS)
    assert f"trained on {run['device']} at commit {run['commit'][:7]}" in line
    assert "H100" in run["device"] and f"study: computed on {study['device']}" in line


def test_error_bucket_rows_hide_buckets_under_the_minimum_and_the_figure_draws_only_the_others():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from canlib.studies.analyses import bucket_rows
    from canlib.studies.plots import plot_error_buckets

    side = {"labels": ["a", "b", "c"], "sentences": [40, 29, 0], "bleu": [20.0, 30.0, math.nan]}
    buckets = {"balanced": {k: dict(side) for k in ("frequency", "length")},
               "can": {k: {**side, "bleu": [18.5, 42.37, math.nan]} for k in ("frequency", "length")}}
    rows = {key: bucket_rows(buckets, key, min_sentences=30) for key in ("frequency", "length")}
    assert [r["shown"] for r in rows["length"]] == [True, False, False]
    assert rows["length"][0]["delta"] == -1.5 and math.isnan(rows["length"][1]["delta"])
    fig = plot_error_buckets(rows, PAPER["fig6_error_en-de"], ("Balanced", "CAN"))
    ours = fig.axes[1]  # length, ours
    assert [len(line.get_xdata()) for line in ours.get_lines()] == [1, 1]
    assert "b (n=29)" in ours.get_xlabel() and "c (n=0)" in ours.get_xlabel()
    plt.close(fig)


def test_similarity_is_drawn_as_the_paper_draws_it():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from canlib.studies.plots import plot_similarity

    ours = raw(SMALL / "similarity.json")["result"]["residual"]
    fig = plot_similarity(PAPER["fig2_similarity"], ours)
    paper_left, ours_left = fig.axes[0].images[0], fig.axes[2].images[0]
    for image in (paper_left, ours_left):
        assert image.origin == "lower" and image.get_clim() == (0.7, 0.95)  # layer 1 at the bottom, the paper's scale
    # drawn [row = self-attention layer][column = cross-attention layer]: the paper's table is stored [x][y]
    assert np.array(paper_left.get_array())[1, 0] == PAPER["fig2_similarity"]["self_vs_cross"][0][1]
    assert np.array(ours_left.get_array())[1, 0] == ours["self_vs_cross"][1][0]
    plt.close(fig)
