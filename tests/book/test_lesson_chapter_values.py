"""The values the similarity, attention, errors, training, context and speed chapters glue into their prose.

Every expected number is recomputed here from the raw JSON under book/results (and the raw measurement files in
measurements/) with json, statistics and math only, no canlib reader, then compared with the chapter's values
module. The stored `small` results were trained on H100s and are committed unchanged, so nothing trains here."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import numpy as np
import pytest
from conftest import missing

from _code import attention, context, decoding, errors, similarity, speed, training
from repro.studies import claims
from repro.studies.store import Store
from repro.studies.verdict import FAILS, HOLDS, INCONCLUSIVE, MIXED

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "book" / "results"
SMALL = RESULTS / "small"
RUNS = SMALL / "runs" / "multi30k-en-de"
BEYOND = SMALL / "beyond" / "runs" / "multi30k-en-de"
GPU = RESULTS / "gpu"
PAPER = json.loads((REPO / "repro" / "resources" / "paper_numbers.json").read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def results_here(monkeypatch):
    if not (SMALL / "similarity.json").exists():
        missing(f"the small results are not stored in {SMALL}")  # a skip, or under CANLIB_REQUIRE_DATA=1 a failure
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(RESULTS))


def small() -> Store:
    """The stored small results (book/results), as every chapter reads them."""
    return Store("small", RESULTS)


def verdict(claim_id: str) -> str:
    """The registry's word for a claim on the stored small results (its leading body of evidence)."""
    return claims.judged(small())[claim_id].word


def raw(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def diagonal(matrix: list[list[float]]) -> list[float]:
    return [matrix[i][i] for i in range(len(matrix))]


def t_half(*terms: list[float]) -> float:
    """Half the 95 % interval of a sum of ± means over seeds: Student's t at the Welch-Satterthwaite degrees of
    freedom times its standard error (written out here, the registry's rule checked against it)."""
    from scipy.stats import t

    parts = [statistics.variance(x) / len(x) for x in terms]
    df = sum(parts) ** 2 / sum(v * v / (len(x) - 1) for v, x in zip(parts, terms))
    return float(t.ppf(0.975, df)) * math.sqrt(sum(parts))


def over(readings: list[bool]) -> str:
    """The five-word rule over readings each decided one way (a measurement has no interval)."""
    return HOLDS if all(readings) else FAILS if not any(readings) else MIXED


def stored_bleu(system_glob: str, folder: Path = RUNS, split: str = "test") -> list[float]:
    return [raw(p)["result"]["scores"][split]["tok_bleu"] for p in sorted(folder.glob(system_glob))]


# -- every glued key exists and renders ---------------------------------------------------------------

CHAPTERS = {
    "similarity": lambda: similarity.values(small()),
    "attention": lambda: attention.values(small()),
    "errors": lambda: errors.values(small()),
    "training": lambda: training.values(small()),
    "context": lambda: context.values(small()),
    "speed": lambda: speed.values(small()),
}


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_every_key_a_chapter_glues_is_a_plain_value_its_format_accepts(chapter):
    """A missing key or a numpy scalar (whose text is ``np.float64(...)``) fails the book build with -W; a verdict
    (``{glue}`` of a ``verdict_`` key) is the registry's marked word."""
    text = (REPO / "book" / f"{chapter}.md").read_text(encoding="utf-8")
    used = re.findall(r"\{glue:text\}`([A-Za-z0-9_]+)(?::([^`]*))?`", text)
    assert used, f"{chapter}.md glues nothing"
    values = CHAPTERS[chapter]()
    for key, spec in used:
        assert key in values, f"{chapter}.md glues {key!r}, which values() does not return"
        value = values[key]
        assert type(value) in (int, float, str, bool), f"{key}: {type(value).__name__}"
        format(value, spec or "")  # the role formats the value with its spec
        assert not (isinstance(value, float) and math.isnan(value)), f"{key} is NaN"
    for key in re.findall(r"\{glue\}`(verdict_[A-Za-z0-9_]+)`", text):
        assert key in values and values[key].startswith('<span class="claim-verdict verdict-'), key


# -- similarity -----------------------------------------------------------------------------------


def test_similarity_values_are_the_stored_diagonals_and_the_gap_the_papers_argument_needs():
    ours = raw(SMALL / "similarity.json")["result"]
    paper = PAPER["fig2_similarity"]
    left, right = diagonal(ours["residual"]["self_vs_cross"]), diagonal(ours["residual"]["cross_vs_ffn"])
    p_left, p_right = diagonal(paper["self_vs_cross"]), diagonal(paper["cross_vs_ffn"])
    v = similarity.values(small())
    assert v["ours_gap"] == pytest.approx(statistics.mean(a - b for a, b in zip(left, right)), abs=1e-12)
    assert v["paper_gap"] == pytest.approx(statistics.mean(a - b for a, b in zip(p_left, p_right)), abs=1e-12)
    assert f"{v['paper_gap']:+.3f}" == "+0.036"  # the paper's own diagonals (its Fig. 2)
    assert (v["ours_diag_min"], v["ours_diag_max"]) == (min(left), max(left))
    assert v["higher_words"] == similarity.at_layers(np.array(left) > np.array(p_left))
    assert v["ours_left_words"] == similarity.at_layers(np.array(left) > np.array(right))
    assert (p_left[0], p_right[0]) == (0.8025, 0.8592)  # the paper's right above its left at layer 1
    # "alike": above the paper's text's 0.9 in every decoder layer of the Baseline and of Balanced
    balanced = diagonal(raw(SMALL / "similarity-balanced.json")["result"]["residual"]["self_vs_cross"])
    # one model of each: every layer's value read against 0.9, the claim inconclusive without an interval over seeds
    rows = claims.judged(small())["inputs-alike"].sets
    assert [r["by_value"] for r in rows] == [HOLDS if x > 0.9 else FAILS for x in left + balanced]
    assert v["alike_threshold"] == 0.9 and verdict("inputs-alike") == INCONCLUSIVE
    n_left, n_right = diagonal(ours["normalized"]["self_vs_cross"]), diagonal(ours["normalized"]["cross_vs_ffn"])
    assert v["normalized_gap"] == pytest.approx(statistics.mean(a - b for a, b in zip(n_left, n_right)), abs=1e-12)


def test_the_similarity_chapter_reads_balanced_at_small_once_stored_and_leads_with_the_command_before(tmp_path):
    """similarity.md's Balanced section reads the stored small study (its words from its numbers); where that study
    is missing it leads with the fact, the command that stores it and its GPU-minutes instead."""
    from _code.analysis_notes import not_stored_note

    assert (SMALL / "similarity-balanced.json").exists() and similarity.stored("balanced", small())
    assert not_stored_note("similarity-balanced", "measurement", ["balanced"], RESULTS) == ""
    balanced = raw(SMALL / "similarity-balanced.json")["result"]["residual"]
    left, right = diagonal(balanced["self_vs_cross"]), diagonal(balanced["cross_vs_ffn"])
    text = similarity.balanced_findings({"residual": balanced}, 0.8)
    assert f"{min(left):.2f} to {max(left):.2f}" in text
    above = [a > b for a, b in zip(left, right)]
    assert ("premise holds" in text) == all(above) and ("fails there" in text) == (not all(above))
    assert similarity.values(small())["balanced_layers"] == len(left) == 2
    # a results folder without the study: the note names it, the command and the minutes of Balanced's stored run
    (tmp_path / "small" / "runs").mkdir(parents=True)
    (tmp_path / "small" / "runs" / "multi30k-en-de").symlink_to(RUNS)
    note = not_stored_note("similarity-balanced", "measurement", ["balanced"], tmp_path)
    minutes = math.ceil((60 + raw(RUNS / "balanced-seed1.json")["result"]["training"]["wall_s"]) / 60)
    assert "not stored yet" in note and "--studies similarity-balanced" in note and f"about {minutes} minutes" in note


# -- attention ------------------------------------------------------------------------------------


def test_attention_values_are_the_stored_gates_share_near_zero_and_one():
    study = raw(SMALL / "attention.json")["result"]
    hist = study["alpha_histogram"]
    edges = hist["edges"]
    v = attention.values(small())
    table = attention.gate_table(small()).data.set_index("layer")
    shares = []
    for row, counts in zip(study["alpha_summary"], hist["counts"]):
        near_ends = sum(c for lo, hi, c in zip(edges, edges[1:], counts) if hi <= 0.1 + 1e-9 or lo >= 0.9 - 1e-9)
        shares.append(near_ends / sum(counts))
        layer = table.loc[row["layer"]]
        assert layer["alpha below 0.1 or above 0.9"] == pytest.approx(shares[-1], abs=1e-12)
        assert layer["mean alpha"] == row["mean"]
    assert (v["mean_min"], v["mean_max"]) == (
        min(r["mean"] for r in study["alpha_summary"]),
        max(r["mean"] for r in study["alpha_summary"]),
    )
    rows = claims.judged(small())["gate-decisive"].sets  # one CAN model: each layer read, no interval over seeds
    assert [r["by_value"] for r in rows] == [HOLDS if x > 0.5 else FAILS for x in shares]
    assert verdict("gate-decisive") == INCONCLUSIVE
    pos = study["alpha_by_position"]
    keep = [c >= 30 for c in pos["count"]]
    assert v["positions"] == sum(keep) and v["uniform_first"] == pos["uniform"][0]
    first, second = pos["alpha"]  # the two CAN layers, named in order
    above = [sum(k and a > u for k, a, u in zip(keep, row, pos["uniform"])) for row in (first, second)]
    assert v["above_words"] == f"{above[0]} and {above[1]} (the first, then the second layer)"
    assert v["first_words"] == f"{first[0]:.3f} and {second[0]:.3f} (the first, then the second layer)"
    for layer, row in ((1, first), (2, second)):  # the exercise's solution says what each layer does at query 1
        said = v["first_reading"].split("; ")[layer - 1]
        assert said.startswith(("At the first position, " if layer == 1 else "") + f"layer {layer} ")
        assert ("most of the query's unit on the prefix" in said) == (row[0] > 0.5)
        assert ("reads the source" in said) == (row[0] <= pos["uniform"][0])


def test_the_first_position_reading_follows_alpha_against_half_and_uniform():
    from _code.attention import first_reading

    said = first_reading([0.732, 0.2, 0.01], 0.05).split("; ")
    assert "most of the query's unit on the prefix" in said[0]
    assert "more than uniform attention would, but reads mostly the source" in said[1]
    assert "no more than uniform attention would and reads the source" in said[2]


def test_the_attention_prose_names_two_can_layers_because_every_scale_has_two():
    from canlib.model.config import preset

    assert {preset(name).dec_layers for name in ("tiny-can", "small-can", "can")} == {2}
    assert attention.values(small())["layers"] == 2


# -- errors ---------------------------------------------------------------------------------------


def test_errors_values_count_only_buckets_with_enough_sentences():
    buckets = raw(SMALL / "errors.json")["result"]
    v = errors.values(small())
    deltas, hidden = {}, 0
    for key in ("frequency", "length"):
        b, c = buckets["balanced"][key], buckets["can"][key]
        for label, n, x, y in zip(b["labels"], b["sentences"], b["bleu"], c["bleu"]):
            if n >= 30:
                deltas[key, label] = y - x
            else:
                hidden += 1
    assert v["min_sentences"] == 30 and v["buckets_hidden"] == hidden and v["buckets_shown"] == len(deltas)
    assert v["buckets_behind"] == sum(d < 0 for d in deltas.values())
    assert v["bucket_gap_min"] == pytest.approx(min(deltas.values()), abs=1e-12)
    worst = min((k for k in deltas if k[0] == "frequency"), key=deltas.get)
    assert v["worst_frequency"] == worst[1] and v["worst_frequency_gap"] == pytest.approx(deltas[worst], abs=1e-12)
    assert v["test_sentences"] == 1000  # test2016 (the chapter once said "a few hundred")
    lengths = buckets["balanced"]["length"]["sentences"]
    assert v["long_sentences"] == sum(lengths[2:]) and v["long_words"] == 20
    fig6 = PAPER["fig6_error_en-de"]["word_freq_x1e5"]
    assert v["paper_frequency_ahead"] == sum(c > b for b, c in zip(fig6["Balanced"], fig6["CAN"])) == 1


def test_the_whole_test_sets_gap_is_the_seed_mean_with_its_95_percent_interval_and_the_registry_s_verdict():
    bal, can = stored_bleu("balanced-seed*.json"), stored_bleu("can-seed*.json")
    gap = errors.whole_set_gap(small())
    diff, spread = statistics.mean(can) - statistics.mean(bal), t_half(can, bal)
    assert gap["CAN − Balanced"] == pytest.approx(diff, abs=1e-12)
    assert gap["± seed interval (95 %)"] == pytest.approx(spread, abs=1e-9)
    one = claims.judged(small())["can-below-balanced"].at(1)
    test = next(s for s in one.sets if s["split"] == "test")
    if diff + spread < 0:  # the seed interval below zero: holds, unless the test-set interval crosses it
        assert test["verdict"] in (HOLDS, INCONCLUSIVE)
    else:
        assert test["verdict"] in (FAILS, INCONCLUSIVE) if diff - spread >= 0 else test["verdict"] == INCONCLUSIVE
    assert errors.values(small())["seed1_gap"] == pytest.approx(can[0] - bal[0], abs=1e-12)


# -- training -------------------------------------------------------------------------------------


def test_training_values_are_the_last_validation_of_every_stored_seed():
    final, drops = {}, []
    for system in ("baseline", "balanced", "can"):
        final[system] = []
        for path in sorted(RUNS.glob(f"{system}-seed*.json")):
            valid = [r["valid_loss"] for r in raw(path)["result"]["log"] if r.get("valid_loss") is not None]
            final[system].append(valid[-1])
            drops.append(valid[-2] - valid[-1])
    v = training.loss_values(small())
    for system, losses in final.items():
        assert len(losses) == 3 and v[f"valid_{system}"] == pytest.approx(statistics.mean(losses), abs=1e-12)
    assert v["order_ours"] == " < ".join(
        s
        for s, _ in sorted(
            (("Baseline", final["baseline"]), ("Balanced", final["balanced"]), ("CAN", final["can"])),
            key=lambda item: statistics.mean(item[1]),
        )
    )
    gap = statistics.mean(final["can"]) - statistics.mean(final["balanced"])
    spread = t_half(final["can"], final["balanced"])
    assert v["loss_gap_can_balanced"] == pytest.approx(gap, abs=1e-12)
    assert verdict("loss-can-above-balanced") == (
        HOLDS if gap - spread > 0 else FAILS if gap + spread <= 0 else INCONCLUSIVE
    )
    assert (v["drop_min"], v["drop_max"]) == pytest.approx((min(drops), max(drops)), abs=1e-12)
    assert verdict("loss-still-falling") == over([d > 0 for d in drops])
    paper_valid = PAPER["fig8_curves_en-de"]["valid"]
    assert v["paper_loss_gap_can_balanced"] == pytest.approx(paper_valid["CAN"][-1] - paper_valid["Balanced"][-1])


def test_twice_the_updates_adds_bleu_to_both_systems_computed_from_the_raw_x2_runs():
    v = training.undertraining_values(small())
    for system in ("balanced", "can"):
        x1, x2 = stored_bleu(f"{system}-seed*.json"), stored_bleu(f"budget-{system}-x2-seed*.json", BEYOND)
        assert (len(x1), len(x2)) == (3, 3)
        gain, spread = statistics.mean(x2) - statistics.mean(x1), t_half(x2, x1)
        assert v[f"{system}_gain_test"] == pytest.approx(gain, abs=1e-12)
        assert v[f"{system}_gain_pm"] == pytest.approx(spread)
        test = next(s for s in claims.judged(small())[f"budget-adds-{system}"].sets if s["split"] == "test")
        assert test["seed_interval"] == pytest.approx([gain - spread, gain + spread])
        logs = [raw(p)["result"]["log"] for p in sorted(BEYOND.glob(f"budget-{system}-x2-seed*.json"))]
        bleu = {
            step: statistics.mean(
                next(r["valid_bleu"] for r in log if r.get("valid_bleu") is not None and r["step"] == step)
                for log in logs
            )
            for step in (800, 1200, 2000, 2400)
        }
        assert v[f"{system}_bleu_averaged_first"] == pytest.approx(bleu[800], abs=1e-12)
        assert v[f"{system}_bleu_rise"] == pytest.approx(bleu[1200] - bleu[800], abs=1e-12)
        assert v[f"{system}_bleu_last"] == pytest.approx(bleu[2400], abs=1e-12)
        losses = {}
        for log in logs:
            for r in log:
                if r.get("valid_loss") is not None:
                    losses.setdefault(r["step"], []).append(r["valid_loss"])
        lowest = min(losses, key=lambda s: statistics.mean(losses[s]))
        assert v[f"{system}_loss_lowest_at"] == lowest
        highest = max(bleu, key=bleu.get) if max(bleu, key=bleu.get) != 2000 else 2000
        assert v[f"{system}_bleu_highest_at"] in (highest, 1600)
    assert (v["updates_1x"], v["updates_2x"], v["averaged_first"], v["averaged_last"]) == (1200, 2400, 800, 1200)
    continued = 0  # a 2x run is its 1x run continued where its losses up to update 1,200 are the 1x run's
    x2_paths = sorted(BEYOND.glob("budget-*-x2-seed*.json"))
    for system in ("balanced", "can"):
        for path in sorted(BEYOND.glob(f"budget-{system}-x2-seed*.json")):
            seed = path.stem.rsplit("seed", 1)[1]
            keys = ("step", "train_loss", "train_nll", "lr", "valid_loss", "valid_nll")

            def losses(log: list[dict]) -> list[tuple]:
                return [tuple(r.get(k) for k in keys) for r in log if r["step"] <= 1200]

            continued += losses(raw(path)["result"]["log"]) == losses(
                raw(RUNS / f"{system}-seed{seed}.json")["result"]["log"]
            )
    assert v["budget_runs"] == 6 and v["continued_runs"] == continued
    valid = [[r["valid_loss"] for r in raw(p)["result"]["log"] if r.get("valid_loss") is not None] for p in x2_paths]
    assert v["loss_up"] == sum(log[-1] > log[-2] for log in valid)  # the 2x runs whose loss turns up at the end
    assert v["averaging_status"] == "not stored yet"
    # training.md reads these as "undertrained" and "the loss and BLEU turn at about the same update": rewrite if not
    assert verdict("budget-adds-balanced") == verdict("budget-adds-can") == HOLDS
    assert v["balanced_loss_rise_after"] > 0 and v["can_loss_rise_after"] > 0
    for system in ("balanced", "can"):
        assert abs(v[f"{system}_loss_lowest_at"] - v[f"{system}_bleu_highest_at"]) <= 400


def test_a_2x_run_whose_log_differs_from_its_1x_run_is_not_counted_as_its_continuation(tmp_path):
    import shutil

    shutil.copytree(RUNS, tmp_path / "small" / "runs" / "multi30k-en-de")
    shutil.copytree(BEYOND, tmp_path / "small" / "beyond" / "runs" / "multi30k-en-de")
    path = tmp_path / "small" / "beyond" / "runs" / "multi30k-en-de" / "budget-can-x2-seed2.json"
    data = raw(path)
    next(r for r in data["result"]["log"] if r.get("train_loss") is not None)["train_loss"] += 1e-9
    path.write_text(json.dumps(data))
    assert training.undertraining_values(Store("small", tmp_path))["continued_runs"] == 3


def test_can_within_half_a_point_is_judged_at_each_budget_on_all_four_sets():
    claim = claims.judged(small())["can-within-0.5"]
    for factor in (1, 2):
        assert [r["split"] for r in claim.at(factor).sets] == ["valid", "test", "test2017_flickr", "test2017_mscoco"]
    for split in ("valid", "test2017_mscoco"):
        for factor, (bal_glob, can_glob, folder) in {
            1: ("balanced-seed*.json", "can-seed*.json", RUNS),
            2: ("budget-balanced-x2-seed*.json", "budget-can-x2-seed*.json", BEYOND),
        }.items():
            can, bal = stored_bleu(can_glob, folder, split), stored_bleu(bal_glob, folder, split)
            diff, spread = statistics.mean(can) - statistics.mean(bal), t_half(can, bal)
            row = next(r for r in claim.at(factor).sets if r["split"] == split)
            assert row["value"] == pytest.approx(diff, abs=1e-12)
            assert row["seed_interval"] == pytest.approx([diff - spread, diff + spread], abs=1e-9)
            # a set holds only where the seed interval is inside the criterion, fails only where it is outside, and
            # is inconclusive where the seed interval crosses it (the test-set interval can only add doubt)
            outcome = row["verdict"]
            if diff - spread >= -0.5:
                assert outcome in (HOLDS, INCONCLUSIVE)
            elif diff + spread < -0.5:
                assert outcome in (FAILS, INCONCLUSIVE)
            else:
                assert outcome == INCONCLUSIVE


def test_the_full_recipe_costs_tokens_times_epochs_over_eight_measured_rates():
    v = training.cost_values()
    assert v["tokens_per_epoch_m"] == pytest.approx((220_000_000 / 2 + 4_500_000) / 1e6)
    assert v["cost_epochs"] == 21 and v["cost_rows"] == sum(
        len(raw(p)["result"]["runs"]) for p in GPU.glob("*/training_*k.json")
    )
    rates = [raw(p)["result"]["runs"]["baseline"]["target_tokens_per_sec"] for p in GPU.glob("*/training_32k.json")]
    assert v["rate_spread"] == pytest.approx(max(rates) / min(rates))  # the disagreement training.md explains


# -- context --------------------------------------------------------------------------------------


def test_distillation_values_are_the_stored_students_and_teacher():
    real = {s: stored_bleu(f"{s}-seed*.json") for s in ("balanced", "can")}
    kd = {s: stored_bleu(f"distill-{s}-kd-seed*.json", BEYOND) for s in ("balanced", "can")}
    teacher = stored_bleu("distill-balanced-teacher-seed*.json", BEYOND)
    v = context.values(small())
    gap_real = statistics.mean(real["can"]) - statistics.mean(real["balanced"])
    gap_kd = statistics.mean(kd["can"]) - statistics.mean(kd["balanced"])
    change = gap_kd - gap_real
    spread = t_half(kd["can"], kd["balanced"], real["can"], real["balanced"])
    assert (v["real_gap"], v["kd_gap"], v["kd_change"]) == pytest.approx((gap_real, gap_kd, change), abs=1e-12)
    assert v["kd_change_2se"] == pytest.approx(spread, abs=1e-9)
    # the verdict is the beyond chapter's, read on four sets (test2016's seed interval alone straddles nothing)
    assert 'data-claim="kd-narrows-gap"' in v["verdict_kd_narrows_gap"] and verdict("kd-narrows-gap") != HOLDS
    assert v["teacher_bleu"] == teacher[0] and v["student_minus_teacher"] == pytest.approx(
        statistics.mean(kd["balanced"]) - teacher[0], abs=1e-12
    )
    assert (round(gap_real, 2), round(gap_kd, 2)) == (-1.58, -0.48)  # the h100-2026-11-27 README's numbers
    assert v["student_minus_teacher"] < 0, "context.md says the teacher is no better than its students: rewrite it"


# -- speed ----------------------------------------------------------------------------------------


def ops() -> dict:
    return raw(RESULTS / "cpu" / "ops.json")["result"]["systems"]


def test_the_speed_chapter_counts_kernels_from_ops_json_and_shows_no_missing_cells():
    counts = ops()
    v = speed.values(small())
    for system in ("balanced", "can"):
        assert v[f"{system}_kernels_step"] == counts[system]["cuda"]["step"]["kernel_operators"]
        assert v[f"{system}_kernels_per_layer"] == counts[system]["cuda"]["per_layer"]["kernel_operators"]
    assert (
        v["common_kernels"]
        == counts["balanced"]["cuda"]["step"]["kernel_operators"]
        - counts["balanced"]["cuda"]["decoder"]["kernel_operators"]
    )
    frame = decoding.ops_frame(small().ops()[0], list(counts))
    assert len(frame) == len(counts) and not frame.isna().any().any()
    assert list(frame["kernels per step"]) == [c["cuda"]["step"]["kernel_operators"] for c in counts.values()]


def test_the_memory_floor_is_the_fp16_weights_of_a_step_over_the_bandwidth():
    d, vocab = 512, 32000
    matrices = 2 * 14 * d * d * 2 + vocab * d * 2  # two layers of 14 d^2 weights and the embedding, in fp16
    v = speed.values(small())
    assert v["balanced_weights_mb"] == pytest.approx(matrices / 1e6, rel=2e-3)  # biases and norms are the rest
    bandwidth = {"H100": 3.35e12, "H200": 4.8e12}  # bytes/s, NVIDIA's data sheets
    gpu = next(name for name in bandwidth if name in v["profile_device"])
    assert v["balanced_floor_us"] == pytest.approx(v["balanced_weights_mb"] * 1e6 / bandwidth[gpu] * 1e6, rel=1e-12)


def latest(kind: str) -> str:
    """The stored GPU run measured last that holds ``kind``.json (by its measured_at, else its date)."""
    runs = [p.parent for p in GPU.glob(f"*/{kind}.json")]
    when = {r: raw(r / f"{kind}.json")["provenance"] for r in runs}
    return max(runs, key=lambda r: str(when[r].get("measured_at") or when[r]["date"])).name


def test_the_profile_and_graph_values_are_the_last_runs_raw_figures():
    run = latest("profile")
    bal, can = (raw(REPO / "measurements" / run / "profile" / f"decode_{s}.json") for s in ("balanced", "can"))
    v = speed.values(small())
    assert v["profile_balanced_busy"] == bal["gpu_busy_share"] and v["profile_can_busy"] == can["gpu_busy_share"]
    assert v["profile_cpu_ratio"] == pytest.approx(bal["cpu_ms"] / can["cpu_ms"], rel=1e-12)
    assert v["profile_balanced_launches"] == bal["kernel_launches"]
    breakdown = raw(GPU / latest("breakdown") / "breakdown.json")["result"]
    per = breakdown["settings"]["forced_length"]
    graphs = {s: breakdown["systems"][s]["breakdown_graphs"] for s in ("balanced", "can")}
    assert v["graph_balanced_layers_us"] == pytest.approx(1000 * graphs["balanced"]["layers_ms"] / per, rel=1e-12)
    common = 1000 * sum(graphs["balanced"][f"{p}_ms"] for p in ("encode", "output", "search")) / per
    assert v["graph_ceiling"] == pytest.approx(
        (common + 1000 * graphs["balanced"]["layers_ms"] / per) / (common + 1000 * graphs["can"]["layers_ms"] / per),
        rel=1e-12,
    )


# -- figures --------------------------------------------------------------------------------------


def test_models_provenance_names_the_gpu_and_commit_that_trained_the_models_and_where_the_study_ran():
    from _code.readers import models_provenance

    study = raw(SMALL / "errors.json")["provenance"]
    run = raw(RUNS / "can-seed1.json")["provenance"]
    line = models_provenance(small(), ("balanced", "can"), study)
    assert f"trained on {run['device']} at commit {run['commit'][:7]}" in line
    assert "H100" in run["device"] and f"study: computed on {study['device']}" in line


def test_error_bucket_rows_hide_buckets_under_the_minimum_and_the_figure_draws_only_the_others():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from _code.errors import bucket_rows
    from _code.plots import plot_error_buckets

    side = {"labels": ["a", "b", "c"], "sentences": [40, 29, 0], "bleu": [20.0, 30.0, math.nan]}
    buckets = {
        "balanced": {k: dict(side) for k in ("frequency", "length")},
        "can": {k: {**side, "bleu": [18.5, 42.37, math.nan]} for k in ("frequency", "length")},
    }
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

    from _code.plots import plot_layer_similarity, plot_similarity

    ours = raw(SMALL / "similarity.json")["result"]["residual"]
    fig = plot_similarity(PAPER["fig2_similarity"], ours)
    paper_left, ours_left = fig.axes[0].images[0], fig.axes[2].images[0]
    for image in (paper_left, ours_left):
        assert image.origin == "lower" and image.get_clim() == (0.7, 0.95)  # layer 1 at the bottom, the paper's scale
    # drawn [row = self-attention layer][column = cross-attention layer]: the paper's table is stored [x][y]
    assert np.array(paper_left.get_array())[1, 0] == PAPER["fig2_similarity"]["self_vs_cross"][0][1]
    assert np.array(ours_left.get_array())[1, 0] == ours["self_vs_cross"][1][0]
    plt.close(fig)
    two = {k: [row[:2] for row in m[:2]] for k, m in ours.items()}  # a 2-layer decoder's matrices
    fig = plot_layer_similarity(two, "Balanced")
    drawn = [ax.images[0] for ax in fig.axes if ax.images]
    assert [np.array(im.get_array()).tolist() for im in drawn] == [two["self_vs_cross"], two["cross_vs_ffn"]]
    plt.close(fig)


def test_the_2x_curves_are_drawn_with_the_papers_figure_8_beside_them():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from _code.plots import plot_budget_curves
    from _code.training import seed_curves

    logs = [raw(p)["result"]["log"] for p in sorted(BEYOND.glob("budget-can-x2-seed*.json"))]
    curves = {"CAN": {"bleu": seed_curves(logs, "valid_bleu"), "loss": seed_curves(logs, "valid_loss")}}
    fig = plot_budget_curves(curves, PAPER["fig8_curves_en-de"], averaged=(800, 1200), stop=1200)
    bleu_line = fig.axes[0].lines[0]
    assert list(bleu_line.get_xdata()) == [400, 800, 1200, 1600, 2000, 2400]
    assert list(bleu_line.get_ydata()) == pytest.approx(
        [
            statistics.mean(
                r["valid_bleu"] for log in logs for r in log if r.get("valid_bleu") is not None and r["step"] == s
            )
            for s in (400, 800, 1200, 1600, 2000, 2400)
        ]
    )
    assert [line.get_label() for line in fig.axes[2].lines] == ["Baseline", "Balanced", "CAN"]
    marks = [
        (line.get_xdata()[0], line.get_linestyle()) for line in fig.axes[1].lines if len(set(line.get_xdata())) == 1
    ]
    assert marks == [(800, ":"), (1200, ":"), (1200, "-")]  # the averaged checkpoints, then where a 1x run stops
    plt.close(fig)


def test_checkpoint_averaging_is_not_run_until_the_averaging_study_is_stored(tmp_path):
    """training.md's averaging sentence is written for a study that is not stored: it flips to "stored" once both
    systems have two seeds of it (fake files here), and the repository holds none yet (rewrite the text when it
    does)."""
    assert training.averaging_status(small()) == "not stored yet"
    assert not list(BEYOND.glob("averaging-*.json")), "the averaging study is stored now: rewrite its sentences"
    from repro.results.files import provenance, save_result

    folder = tmp_path / "small" / "beyond" / "runs" / "multi30k-en-de"
    folder.mkdir(parents=True)
    for system in ("balanced", "can"):
        for seed in (1, 2):
            scores = {
                s: {"bleu": 30.0, "tok_bleu": 30.0} for s in ("valid", "test", "test2017_flickr", "test2017_mscoco")
            }
            save_result(
                folder / f"averaging-{system}-last-seed{seed}.json",
                {"scores": scores},
                provenance("small", {"seed": seed}, reduced_budget=False),
            )
            status = training.averaging_status(Store("small", tmp_path))
            assert status == ("not stored yet" if (system, seed) != ("can", 2) else "stored")
