"""The numbers and verdicts the results, ablation, depths, beyond, tasks and glance pages glue into their prose,
against the raw stored JSON (read here with json and statistics only) and the paper's numbers (README's generated
sections are tests/book/test_readme.py's)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from conftest import REPO, stored_results

from repro.studies.verdict import FAILS, HOLDS, INCONCLUSIVE, MIXED

RESULTS = REPO / "book" / "results"
RUNS = RESULTS / "small" / "runs" / "multi30k-en-de"
BEYOND = RESULTS / "small" / "beyond" / "runs" / "multi30k-en-de"
PAPER = json.loads((REPO / "repro" / "resources" / "paper_numbers.json").read_text(encoding="utf-8"))
SPLITS = {"valid": "valid", "test": "test", "test2017_flickr": "flickr", "test2017_mscoco": "mscoco"}
SYSTEMS = ("baseline", "balanced", "san", "aan", "can", "can_attn", "can_ffn", "depth-9-4", "depth-14-1")


def raw(folder: Path, name: str) -> list[dict]:
    """The results of ``<name>-seed<k>.json`` in ``folder``, by seed."""
    paths = sorted(folder.glob(f"{name}-seed*.json"), key=lambda p: int(p.stem.rsplit("seed", 1)[1]))
    return [json.loads(p.read_text(encoding="utf-8"))["result"] for p in paths if p.stem.rsplit("-seed", 1)[0] == name]


def tok(folder: Path, name: str, split: str = "test", metric: str = "tok_bleu") -> list[float]:
    return [r["scores"][split][metric] for r in raw(folder, name)]


def contrast(terms: list[tuple[float, list[float]]]) -> tuple[float, float]:
    """(value, half its 95 % seed interval) of sum(weight x mean): Student's t with Welch's degrees of freedom, the
    formula written out here (scipy's t quantile)."""
    from scipy.stats import t

    value = sum(w * statistics.fmean(x) for w, x in terms)
    parts = [w * w * statistics.variance(x) / len(x) for w, x in terms]
    var = sum(parts)
    df = var**2 / sum(p * p / (len(x) - 1) for p, (_, x) in zip(parts, terms))
    return value, float(t.ppf(0.975, df)) * math.sqrt(var)


@pytest.fixture(scope="module")
def env():
    """The real data and the stored results for this module's tests, undone after them (a module-wide monkeypatch)."""
    with stored_results(RESULTS):
        yield


@pytest.fixture(scope="module")
def store(env):
    from repro.studies.store import Store

    return Store("small", RESULTS)


@pytest.fixture(scope="module")
def judged(store):
    from repro.studies.claims import judged

    return judged(store)


@pytest.fixture(scope="module")
def results(store):
    from _code import results

    return results.values(store)


@pytest.fixture(scope="module")
def beyond_values(store):
    from _code import beyond

    return beyond.values(store)


def test_the_results_chapter_quotes_the_stored_runs(results):
    t2 = PAPER["table2_wmt14"]["en-de"]
    for s in ("baseline", "balanced", "san", "aan", "can"):
        assert results[f"{s}_test"] == pytest.approx(statistics.fmean(tok(RUNS, s)), abs=1e-12)
        assert results[f"{s}_test_sd"] == pytest.approx(statistics.stdev(tok(RUNS, s)), abs=1e-12)
        assert results[f"{s}_test_sacre"] == pytest.approx(statistics.fmean(tok(RUNS, s, metric="bleu")), abs=1e-12)
    assert results["metric_gap"] == pytest.approx(
        max(
            abs(statistics.fmean(tok(RUNS, s)) - statistics.fmean(tok(RUNS, s, metric="bleu")))
            for s in ("baseline", "balanced", "san", "aan", "can")
        ),
        abs=1e-12,
    )
    # the two spreads issue 30 found printed without their metric: 0.55 (tokenized) and 0.54 (sacreBLEU)
    assert (f"{results['can_test_sd']:.2f}", f"{results['can_test_sacre_sd']:.2f}") == ("0.55", "0.54")
    for split, key in SPLITS.items():
        value, pm = contrast([(1, tok(RUNS, "can", split)), (-1, tok(RUNS, "balanced", split))])
        assert results[f"gap_can_{key}"] == pytest.approx(value, abs=1e-12)
    assert results["gap_can_pm"] == pytest.approx(contrast([(1, tok(RUNS, "can")), (-1, tok(RUNS, "balanced"))])[1])
    assert results["paper_gap_can"] == pytest.approx(t2["CAN"][0] - t2["Balanced"][0])
    means = {split: {s: statistics.fmean(tok(RUNS, s, split)) for s in SYSTEMS} for split in SPLITS}
    assert results["can_last"] == sum(min(m, key=m.get) == "can" for m in means.values())
    assert results["systems"] == len(SYSTEMS)


def tost(low: float, high: float, margin: float = 0.5) -> str:
    """Two one-sided tests, written out here: inside the margin holds, wholly outside it fails."""
    if -margin <= low and high <= margin:
        return HOLDS
    return FAILS if high < -margin or low > margin else INCONCLUSIVE


def test_the_results_chapters_verdicts_follow_the_test_sets_intervals(results, judged):
    """Each set's value and seed part from the raw files; the verdict the symmetric join of two one-sided tests on
    the test sets' one interval (the validation set shown, not judged)."""
    for claim, a, b in (("can-within-0.5", "can", "balanced"), ("balanced-keeps-bleu", "balanced", "baseline")):
        rows = {r["split"]: r for r in judged[claim].at(1).sets}
        words = []
        for split in SPLITS:
            value, pm = contrast([(1, tok(RUNS, a, split)), (-1, tok(RUNS, b, split))])
            assert rows[split]["value"] == pytest.approx(value, abs=1e-12)
            assert rows[split]["seed_interval"] == pytest.approx([value - pm, value + pm])
            assert rows[split]["decides"] == (split != "valid")
            if split != "valid":
                words.append(tost(*rows[split]["interval"]))
        joined = HOLDS if set(words) == {HOLDS} else FAILS if set(words) == {FAILS} else INCONCLUSIVE
        joined = MIXED if {HOLDS, FAILS} <= set(words) else joined
        assert judged[claim].at(1).word == joined, claim
    # at 1x CAN fails on test2017 MSCOCO and the other two test sets cannot decide: inconclusive, not "does not hold"
    one = {r["split"]: r["verdict"] for r in judged["can-within-0.5"].at(1).sets}
    assert one["test2017_mscoco"] == FAILS and judged["can-within-0.5"].at(1).word == INCONCLUSIVE
    assert judged["balanced-keeps-bleu"].word == INCONCLUSIVE  # every test set's interval across the margin
    assert 'data-claim="can-within-0.5" data-budget="1">inconclusive<' in results["verdict_can_within_0_5_1x"]


def test_the_beyond_chapter_quotes_the_three_studies(beyond_values):
    v = beyond_values
    main = {s: tok(RUNS, s) for s in ("baseline", "balanced", "can")}
    kd = {s: tok(BEYOND, f"distill-{s}-kd") for s in ("balanced", "san", "aan", "can")}
    x2 = {s: tok(BEYOND, f"budget-{s}-x2") for s in ("balanced", "can")}
    c66 = tok(BEYOND, "can-6-6-can-6-6")
    assert v["gap_kd_test"] == pytest.approx(contrast([(1, kd["can"]), (-1, kd["balanced"])])[0], abs=1e-12)
    assert v["gap_kd_pm"] == pytest.approx(contrast([(1, kd["can"]), (-1, kd["balanced"])])[1], abs=1e-12)
    change = contrast([(1, kd["can"]), (-1, kd["balanced"]), (-1, main["can"]), (1, main["balanced"])])
    assert v["change_kd_test"] == pytest.approx(change[0], abs=1e-12) and v["change_kd_pm"] == pytest.approx(change[1])
    assert v["change_2x_test"] == pytest.approx(
        contrast([(1, x2["can"]), (-1, x2["balanced"]), (-1, main["can"]), (1, main["balanced"])])[0], abs=1e-12
    )
    assert v["gap_66_test"] == pytest.approx(statistics.fmean(c66) - statistics.fmean(main["baseline"]), abs=1e-12)
    assert v["kd_gain_balanced_test"] == pytest.approx(
        statistics.fmean(kd["balanced"]) - statistics.fmean(main["balanced"])
    )
    teacher = json.loads((RESULTS / "small" / "beyond" / "distill.json").read_text())["result"]["teacher"]
    assert v["teacher_test"] == teacher["teacher_bleu"]["test"]["tok_bleu"] and v["teacher_pairs"] == teacher["pairs"]
    assert v["teacher_minus_balanced"] == pytest.approx(
        teacher["teacher_bleu"]["test"]["tok_bleu"] - statistics.fmean(main["balanced"])
    )
    for split, key in SPLITS.items():  # the budget's change on every set, from the raw files
        want = contrast(
            [
                (1, tok(BEYOND, "budget-can-x2", split)),
                (-1, tok(BEYOND, "budget-balanced-x2", split)),
                (-1, tok(RUNS, "can", split)),
                (1, tok(RUNS, "balanced", split)),
            ]
        )[0]
        assert v[f"change_2x_{key}"] == pytest.approx(want, abs=1e-12)
    assert v["paper_kd_balanced"] == pytest.approx(
        PAPER["table4_kd_en-de"]["Balanced"][1] - PAPER["table4_kd_en-de"]["Balanced"][0]
    )
    assert (
        v["budget_shown"] and v["distill_shown"] and v["can66_shown"]
    )  # each study is shown once its models are stored


def test_the_beyond_verdicts_are_what_the_careful_reader_found(beyond_values, judged):
    """The readings of a careful reader, computed: test2016 alone does not move, the budget narrows the gap on some
    sets only, distillation narrows it on some sets and does not close it, the teacher is no better than its
    students."""
    v = beyond_values
    assert v["change_2x_test_set"] == INCONCLUSIVE and judged["budget-narrows-gap"].word == INCONCLUSIVE
    assert v["change_2x_sets_held"] == v["change_2x_sets_failed"] == 0
    assert judged["kd-narrows-gap"].word == INCONCLUSIVE and v["change_kd_sets_held"] >= 1
    assert judged["kd-can-within-0.5"].word != HOLDS
    assert v["teacher_word"] == "no better than its students" and v["closed_count"] == 0


def test_the_beyond_chapter_presents_no_number_at_tiny(env, tmp_path):
    from _code import beyond
    from repro.studies.store import Store

    tiny = beyond.values(Store("tiny", tmp_path))
    ours = {k for k in tiny if k.startswith(("gap", "change", "kd_", "teacher", "gain", "verdict"))}
    assert not ours and tiny["gpu_command"] == "bash scripts/gpu_small.sh" and tiny["models"] >= 3
    # the three studies the chapter weighs, and only they, train with the command it quotes
    assert (
        tiny["original_models"] == 2 * 3 + 1 + 4 * 3 + 3 == 22
        and tiny["models"] == tiny["original_models"] + tiny["next_models"]
    )
    assert tiny["original_command"].endswith("--studies budget,distill,can-6-6")


def test_the_ablation_chapter_quotes_the_runs_and_the_kernel_counts(store, judged):
    from _code import ablation

    v = ablation.values(store)
    t5 = PAPER["table5_ablation_en-de"]
    for system, key, row in (
        ("can_attn", "attn", "Compress Attention"),
        ("can_ffn", "ffn", "Compress FFN"),
        ("can", "all", "Compress All"),
    ):
        assert v[f"{key}_test"] == pytest.approx(contrast([(1, tok(RUNS, system)), (-1, tok(RUNS, "balanced"))])[0])
        assert v[f"paper_{key}"] == pytest.approx(t5[row][0] - t5["Balanced"][0])
    assert v["all_minus_attn_test"] == pytest.approx(
        statistics.fmean(tok(RUNS, "can")) - statistics.fmean(tok(RUNS, "can_attn"))
    )
    assert v["paper_all_minus_attn"] > 0 > v["all_minus_attn_test"]  # the reversal the chapter states
    assert judged["can-above-can-attn"].word in (FAILS, MIXED, INCONCLUSIVE)
    ops = json.loads((RESULTS / "cpu" / "ops.json").read_text())["result"]["systems"]
    for system, key in (("balanced", "balanced"), ("can_attn", "attn"), ("can_ffn", "ffn"), ("can", "all")):
        assert v[f"kernels_{key}"] == ops[system]["cuda"]["per_layer"]["kernel_operators"]
    assert v["kernels_saved_attn"] > v["kernels_saved_ffn"]  # the count that orders +20 % before +6 %
    removed = ablation.kernels_removed(store)
    assert removed.sum().to_dict() == {
        "Compress Attention": v["kernels_saved_attn"],
        "Compress FFN": v["kernels_saved_ffn"],
        "Compress All": v["kernels_saved_all"],
    }


def per_repeat_median(run_systems: dict, system: str, against: str, mode: str) -> float:
    """The median of one run's per-repeat ratios, from the raw stored JSON."""
    a, b = run_systems[system][mode]["tok_per_s_repeats"], run_systems[against][mode]["tok_per_s_repeats"]
    return statistics.median(x / y for x, y in zip(a, b))


def test_the_depths_chapter_shows_one_number_for_the_14_1_drop_the_registrys(store, judged):
    """14/1 - 12/2 is one number on the page: the registry's, the means over every stored seed with its seed interval
    (no seed-1 pair beside it), and its verdict says what would settle it."""
    from _code import depths

    v = depths.values(store)
    assert (v["seeds_14_1"], v["seeds_9_4"]) == (len(tok(RUNS, "depth-14-1")), len(tok(RUNS, "depth-9-4")))
    from scipy.stats import t

    a, b = tok(RUNS, "depth-14-1"), tok(RUNS, "balanced")
    value = statistics.fmean(a) - statistics.fmean(b)
    drop = judged["depth-14-1-loses"]
    assert v["gap_14_1"] == drop.value == pytest.approx(value, abs=1e-12) and drop.deciding["split"] == "test"
    # the one interval: the seeds' variance (from the raw files) plus the sentences', Satterthwaite's t
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    total = va + vb + drop.deciding["sentence_var"]
    half = float(t.ppf(0.975, total**2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)))) * math.sqrt(total)
    assert (v["drop_low"], v["drop_high"]) == pytest.approx((value - half, value + half), abs=1e-9)
    assert not {k for k in v if k.startswith("pair_")}  # the seed-1 pair's number once stood beside the mean's
    assert v["seeds_14_1"] == v["standard_seeds"] == 3 and drop.word == INCONCLUSIVE
    assert "--seeds 1,2,3" in v["drop_command"] and v["drop_settle"].startswith("no number of seeds at this scale")
    read = json.loads((RESULTS / "gpu" / "h200-2026-11-27-81cbcbb" / "speed.json").read_text())["result"]["systems"]
    assert (v["eager_12_2"], v["graphs_12_2"]) == pytest.approx(
        [per_repeat_median(read, "balanced", "baseline", mode) for mode in ("eager", "captured")]
    )  # the run every speed verdict reads


def test_the_corpus_size_is_the_prepared_corpus_after_its_length_filter(results, store):
    """The pairs a page quotes are those the models trained on: the prepared corpus's count after the length-ratio
    filter, not the raw corpus's."""
    from _code import tasks
    from canlib.data.preparation import prepared

    meta = json.loads((prepared(store.corpus, "small").path / "meta.json").read_text())
    assert (
        results["train_pairs"]
        == meta["counts"]["train"]
        == meta["cleaning"]["raw_pairs"]
        - sum(meta["cleaning"][k] for k in ("empty", "subsampled_out", "too_long", "ratio"))
    )
    assert (
        results["train_pairs"] < results["raw_pairs"] and tasks.values(store)["train_pairs"] == results["train_pairs"]
    )
    for page in ("results", "tasks"):
        assert f"{results['raw_pairs']:,}" not in (REPO / "book" / f"{page}.md").read_text(encoding="utf-8"), page


def test_the_training_recipe_table_names_every_difference_from_the_configs():
    """Heads, vocabulary, precision and the length filter are rows of the recipe table, read from the presets, the
    corpora and the stored runs, beside the paper's."""
    from _code.training import training_recipes
    from canlib.data.corpora import get_corpus
    from canlib.model.config import preset

    rows = {r["scale"]: r for r in training_recipes()}
    for scale in ("tiny", "small", "full"):
        assert rows[scale]["heads"].startswith(str(preset(f"{scale}-can" if scale != "full" else "can").heads))
        corpus = get_corpus(rows[scale]["corpus"].split(" ")[0]).scales[scale]
        assert f"{corpus.vocab_size:,}" in rows[scale]["vocabulary"]
        assert f"{corpus.max_ratio:g} x" in rows[scale]["length filter"]
    small = json.loads((RUNS / "can-seed1.json").read_text())["provenance"]["precision"]
    assert rows["small"]["precision"].startswith(small) and "fp16" in rows["full"]["precision"]
    assert "8 (the paper: 8)" == rows["full"]["heads"] and "32,000 BPE merges" in rows["full"]["vocabulary"]


def test_the_tasks_chapter_reads_the_papers_tables(store, judged):
    from _code import tasks

    v = tasks.values(store)
    t2, t3 = PAPER["table2_wmt14"], PAPER["table3_wmt17"]
    assert v["speed_wmt14_de_en"] == pytest.approx(t2["de-en"]["CAN"][2] / t2["de-en"]["Balanced"][2])
    assert v["speed_wmt17_de_en"] == pytest.approx(t3["de-en"]["CAN"][2] / t3["de-en"]["Balanced"][2])
    assert v["speed_wmt17_de_en"] < v["speed_wmt14_de_en"]  # the paper's own Table 3 against its length-ratio reading
    assert (v["stored_directions"], v["missing_directions"]) == (1, 5)
    tasks_claim = judged["can-within-0.5-tasks"]  # one direction that misses the margin decides it alone
    assert tasks_claim.word == (FAILS if any(r["verdict"] == FAILS for r in tasks_claim.sets) else "not run")
    assert "--corpora multi30k-de-en," in v["tasks_command"]


def test_the_glance_tables_are_the_stored_runs(store):
    from _code import glance

    t = glance.tables(store)
    for label, name in (("CAN", "can"), ("Balanced", "balanced")):
        x = tok(RUNS, name)
        assert (
            t["table2"].loc[label, "ours tok-BLEU (seeds)"]
            == f"{statistics.fmean(x):.2f} ± {statistics.stdev(x):.2f} (3)"
        )
    kd = tok(BEYOND, "distill-can-kd")
    assert t["table4"].loc["CAN", "ours distilled"] == f"{statistics.fmean(kd):.2f} ± {statistics.stdev(kd):.2f} (3)"
    assert t["table5"].loc["Compress FFN", "paper BLEU"] == f"{PAPER['table5_ablation_en-de']['Compress FFN'][0]:.2f}"
    can, bal = statistics.fmean(tok(RUNS, "can")), statistics.fmean(tok(RUNS, "balanced"))
    assert t["table2"].loc["CAN", "ours Δ"] == f"{can - bal:+.2f} ({100 * (can - bal) / bal:+.1f} %)"
    # Table 2's speed column is the run every speed verdict reads: the H200's of today's code, 10 repeats, its
    # median per-repeat ratio with the 2nd and 9th smallest (the order-statistic 95 % interval of 10)
    speed = json.loads((RESULTS / "gpu" / "h200-2026-11-28-e1befc3" / "speed.json").read_text())["result"]["systems"]
    ratios = sorted(
        c / b
        for c, b in zip(speed["can"]["eager"]["tok_per_s_repeats"], speed["balanced"]["eager"]["tok_per_s_repeats"])
    )
    assert len(ratios) == 10
    assert t["speed"].loc["CAN", "ours, every kernel launched"] == (
        f"{statistics.median(ratios):.2f}x [{ratios[1]:.2f}, {ratios[8]:.2f}]"
    )
    assert t["provenance"]["speed_run"] == "h200-2026-11-28-e1befc3"


@pytest.mark.parametrize(
    "systems",
    [
        ("baseline", "balanced", "san", "aan", "can"),
        ("balanced", "can_attn", "can_ffn", "can"),
        ("baseline", "depth-9-4", "balanced", "depth-14-1"),
    ],
)
def test_the_bleu_tables_show_the_stored_runs(env, systems):
    """The table of the results, ablation and depths chapters: seeds, mean ± sd, sacreBLEU and the difference to
    Balanced, recomputed from the raw files."""
    from _code import tables
    from repro.studies.store import Store

    table = tables.bleu_table(Store("small", RESULTS), systems, labels={s: s for s in systems})
    for s in systems:
        row, x = table.loc[s], tok(RUNS, s)
        assert int(row["seeds"]) == len(x)
        cell = f"{statistics.fmean(x):.2f} ± {statistics.stdev(x):.2f}" if len(x) > 1 else f"{x[0]:.2f} (1 seed)"
        assert row["test2016 tok-BLEU"] == cell
        assert row["sacreBLEU"] == pytest.approx(statistics.fmean(tok(RUNS, s, metric="bleu")), abs=0.006)
        assert row["Δ to balanced"] == pytest.approx(
            statistics.fmean(x) - statistics.fmean(tok(RUNS, "balanced")), abs=0.006
        )
