"""What `full` costs: the costs appendix's hours for the paper's WMT14 recipe, recomputed here from the stored
files with the arithmetic written out, so a changed formula or a misread file fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _code.training import cost_frame, full_cost

REPO = Path(__file__).resolve().parents[2]


def test_the_full_recipe_hours_are_tokens_times_epochs_over_eight_measured_rates():
    paper = json.loads((REPO / "repro" / "resources" / "paper_numbers.json").read_text())
    pairs, words = paper["table1_data"]["wmt14_en-de"][:2]
    assert (pairs, words) == (4_500_000, 220_000_000)  # the paper's Table 1 row
    tokens = 110_000_000 + 4_500_000  # target half of the words, one EOS per sentence
    epochs = 21  # the paper's Figure 8 plots epochs 1..21
    expected = {}
    for path in sorted((REPO / "book" / "results" / "gpu").glob("*/training_*k.json")):
        for system, run in json.loads(path.read_text())["result"]["runs"].items():
            expected[f"{path.parent.name}_{path.stem}_{system}_hours"] = (
                tokens * epochs / (8 * run["target_tokens_per_sec"]) / 3600
            )
    assert expected, "no stored d=512 training rate to cost"
    cost = full_cost()
    assert cost["tokens_per_epoch"] == tokens and cost["epochs"] == epochs
    values = {f"{r['run']}_{r['kind']}_{r['system']}_hours": r["hours"] for r in cost["rows"]}
    assert values.keys() == expected.keys()
    for key, hours in expected.items():
        assert values[key] == pytest.approx(hours, rel=1e-12), key
    # the H100 Baseline at 62,347 tok/s: 114.5M x 21 / (8 x 62,347) s = 1.34 h, as the chapter's table shows it
    table = cost_frame().reset_index()
    row = table[(table["run"] == "H100 e471a2a") & (table["system"] == "Baseline")].iloc[0]
    assert f"{row['target tok/s (one GPU)']:,.0f}" == "62,347" and f"{row['hours on 8 GPUs']:.2f}" == "1.34"


def test_more_gpus_or_fewer_epochs_cost_proportionally_less():
    base, more = full_cost(8), full_cost(16, epochs=7)
    assert base["rows"] and len(base["rows"]) == len(more["rows"]), "no stored training rate to cost"
    for a, b in zip(base["rows"], more["rows"]):
        assert b["hours"] == pytest.approx(a["hours"] / 2 / 3, rel=1e-12)


def test_the_gpu_plan_quotes_the_computed_costs():
    """measurements/README.md's "What `full` costs" paragraph quotes every computed cost and rate."""
    readme = " ".join((REPO / "measurements" / "README.md").read_text(encoding="utf-8").split())
    cost = full_cost()
    assert cost["rows"], "no stored d=512 training rate: the page's costs would be checked against nothing"
    assert f"at least {cost['tokens_per_epoch'] / 1e6:.1f}M target tokens an epoch" in readme
    assert f"trains {cost['epochs']} epochs" in readme
    for r in cost["rows"]:
        assert f"{r['hours']:.2f} h" in readme, r
        assert r["kind"] != "training_32k" or f"{r['tok_s']:,.0f}" in readme, r
