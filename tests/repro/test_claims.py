"""The claims registry (repro.studies.claims): every claim one row, judged once, in five words, from the
strongest
body of evidence held to its standard. Each kind of claim is built from two opposite fake stores and its word must
flip; each is made inconclusive by taking its evidence below the standard; a weaker body never overrides a stronger
one; the stored results give the readings a careful reviewer would; ``python -m repro claims --json`` carries the
evidence, its strength and its standard as data."""

from __future__ import annotations

import ast
import json
import statistics
from pathlib import Path

import pytest
from conftest import REPO, SHARED_DATA
from verdict_marks import disagreements, readme_verdicts, shown_verdicts

from _code.marks import mark, table
from _code.prose import lead_sentence
from repro.results.files import provenance, save_result
from repro.results.layout import Where
from repro.studies import claims
from repro.studies.claims import BY_ID, CLAIMS, judged
from repro.studies.evidence import MEANINGS
from repro.studies.store import Store
from repro.studies.verdict import STATES

RESULTS = REPO / "book" / "results"
REFS = [
    "a man rides a red bike down the street",
    "two dogs play in the green grass",
    "a woman sings on a stage",
    "children run along the sandy beach",
    "an old man reads a newspaper",
    "a cat sleeps on the warm sofa",
]
BAD = ["a man rides a bike", "dogs play grass", "a woman on stage", "children run", "a man reads", "a cat sleeps"]
MAIN = "runs/multi30k-en-de"
X2 = "beyond/runs/multi30k-en-de/budget"


def put_run(
    root: Path,
    name: str,
    seed: int,
    tok: float,
    hyps: list[str] | None = None,
    log: list | None = None,
    wall_s: float | None = None,
):
    """A stored run of ``name`` (``runs/<corpus>/<system>`` or ``beyond/runs/<corpus>/<study>-<system>-<tag>``) with
    tokenized BLEU ``tok`` on test2016 and, given ``hyps``, its hypotheses (``wall_s``: its training time)."""
    path = Where.of("small", root).path(f"{name}-seed{seed}")
    result = {"scores": {"test": {"bleu": tok, "tok_bleu": tok}}, "log": log or [], "hyp_files": {}}
    if wall_s is not None:
        result["training"] = {"wall_s": wall_s}
    if hyps is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        result["hyp_files"]["test"] = f"{path.stem}.test.hyp"
        path.with_name(result["hyp_files"]["test"]).write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    save_result(path, result, provenance("small", {"seed": seed}, budget={}))


def pair(root: Path, a: str, b: str, a_scores: list[float], b_scores: list[float], prefix: str = MAIN) -> None:
    for seed, (x, y) in enumerate(zip(a_scores, b_scores), 1):
        put_run(root, f"{prefix}/{a}" if prefix == MAIN else f"{prefix}-{a}-x2", seed, x)
        put_run(root, f"{prefix}/{b}" if prefix == MAIN else f"{prefix}-{b}-x2", seed, y)


def fresh(root: Path, scale: str = "small", **kwargs) -> Store:
    """A store of ``root`` whose judgements are not kept from an earlier test (each test builds its own folder)."""
    claims._JUDGED.clear()
    return Store(scale, root, **kwargs)


def put_speed(
    root: Path,
    run: str,
    repeats: dict[str, list[float]],
    *,
    seconds: float = 1.5,
    commit: str = "a" * 40,
    measured: str = "2026-01-01",
    mode: str = "eager",
):
    """A stored GPU speed run: per system its tokens/s per interleaved repeat, each repeat ``seconds`` long."""
    systems = {
        s: {mode: {"tok_per_s": statistics.median(v), "tok_per_s_repeats": v, "seconds": [seconds] * len(v)}}
        for s, v in repeats.items()
    }
    settings = {"sentences": 20, "repeats": len(next(iter(repeats.values()))), "forced_length": 30}
    save_result(
        root / "gpu" / run / "speed.json",
        {"systems": systems, "dtype": "float16", "captured_matches_eager": {}, "settings": settings},
        provenance("full", {"command": "test"}, commit=commit, measured_at=measured),
    )


def ten(center: float, spread: float = 5.0) -> list[float]:
    return [center + spread * (k - 4.5) / 4.5 for k in range(10)]


# -- one row per claim, five words ---------------------------------------------------------------------------------


def test_every_claim_is_one_row_with_a_unique_id_a_source_a_chapter_and_a_criterion_with_its_number():
    assert len({c.id for c in CLAIMS}) == len(CLAIMS)
    chapters = {p.stem for p in (REPO / "book").glob("*.md")}
    for c in CLAIMS:
        assert c.source in ("paper", "book") and c.chapter in chapters, c
        assert any(ch.isdigit() for ch in c.criterion), f"{c.id}: the criterion states no number: {c.criterion}"
    assert BY_ID["can-speed-1.28x"].name.startswith("CAN decodes at least 1.28x as fast as Balanced")
    # claims of the paper's tables, figures and text are the paper's, not the book's
    for paper_claim in ("can-above-can-attn", "kd-adds-balanced", "kd-narrows-gap", "loss-can-above-balanced"):
        assert BY_ID[paper_claim].source == "paper", paper_claim


def test_five_words_each_defined_once():
    assert set(MEANINGS) == set(STATES) and len(STATES) == 5
    assert all(len(m.split(". ")) == 1 for m in MEANINGS.values())  # one sentence each


# -- flip tests: the same claim from two opposite fake stores ------------------------------------------------------


def test_a_bleu_claim_flips_with_opposite_runs(tmp_path):
    """ "CAN stays within 0.5 BLEU of Balanced" from three seeds each, hypotheses included (one interval, both
    noises); the same translations everywhere leave the seeds' noise alone; translations that differ sentence by
    sentence widen the one interval until it cannot decide."""
    refs = {"multi30k-en-de": {"test": REFS}}
    for case, can, hyps in (
        ("close", [30.1, 30.2, 30.3], REFS),
        ("far", [26.0, 26.1, 26.2], REFS),
        ("noisy", [26.0, 26.1, 26.2], BAD),
    ):
        for seed, tok in enumerate(can, 1):
            put_run(tmp_path / case, f"{MAIN}/can", seed, tok, hyps)
            put_run(tmp_path / case, f"{MAIN}/balanced", seed, 30.1 + 0.1 * seed, REFS)
    close, far, noisy = (
        judged(fresh(tmp_path / c, references=refs))["can-within-0.5"] for c in ("close", "far", "noisy")
    )
    assert (close.word, far.word, noisy.word) == ("holds", "does not hold", "inconclusive")
    assert far.deciding["split"] == "test" and far.interval == pytest.approx(far.deciding["seed_interval"])
    assert noisy.deciding["sentence_var"] > 0 and noisy.interval[0] < noisy.deciding["seed_interval"][0]
    assert "sentences paired" in noisy.pairing and "seeds unpaired" in noisy.pairing
    assert close.meets and close.budget == 1 and not close.beside  # no budget study stored: the 1x body alone


def test_a_speed_claim_flips_with_opposite_repeats(tmp_path):
    """Three GPU runs of one code each (the speed standard's), their repeats pooled."""
    for run in ("gpu-a", "gpu-b", "gpu-c"):
        put_speed(tmp_path / "fast", run, {"can": ten(600.0), "balanced": ten(440.0)})
        put_speed(tmp_path / "slow", run, {"can": ten(420.0), "balanced": ten(440.0)})
    fast = judged(fresh(tmp_path / "fast"))["can-faster"]
    slow = judged(fresh(tmp_path / "slow"))["can-faster"]
    assert (fast.word, slow.word) == ("holds", "does not hold")
    ratios = sorted(3 * [c / b for c, b in zip(ten(600.0), ten(440.0))])
    assert fast.value == pytest.approx(statistics.median(ratios))
    assert fast.interval == pytest.approx((ratios[9], ratios[20]))  # 30 repeats: the 10th to the 21st (95.7 %)
    assert fast.strength["repeats"] == 30 and fast.strength["runs"] == ["gpu-a", "gpu-b", "gpu-c"] and fast.meets
    one = judged(fresh(tmp_path / "fast" / "one"))  # no run: not run
    assert one["can-faster"].word == "not run"
    put_speed(tmp_path / "single", "gpu-a", {"can": ten(600.0), "balanced": ten(440.0)})
    single = judged(fresh(tmp_path / "single"))["can-faster"]
    assert single.word == "inconclusive" and "1 GPU run" in single.evidence and not single.meets


def test_a_batch_curve_flips_with_opposite_sweeps(tmp_path):
    def sweep(root: Path, at64: list[float], repeats: bool = True, run: str = "gpu-a") -> None:
        systems = {
            "balanced": {"by_batch": {"1": 400.0, "64": 28000.0}},
            "can": {"by_batch": {"1": 520.0, "64": 28000.0 * statistics.median(at64)}},
        }
        if repeats:
            systems["balanced"]["by_batch_repeats"] = {"1": [400.0] * 10, "64": [28000.0] * 10}
            systems["can"]["by_batch_repeats"] = {"1": [520.0] * 10, "64": [28000.0 * r for r in at64]}
        save_result(
            root / "gpu" / run / "batch.json",
            {"systems": systems, "settings": {"repeats": 10}},
            provenance("full", {"command": "test"}),
        )

    for run in ("gpu-a", "gpu-b", "gpu-c"):  # three sweeps of one code: the speed standard's runs
        sweep(tmp_path / "shrinks", [1.02 + 0.001 * k for k in range(10)], run=run)
        sweep(tmp_path / "grows", [1.4 + 0.01 * k for k in range(10)], run=run)
    sweep(tmp_path / "medians", [1.02] * 10, repeats=False)
    sweep(tmp_path / "one", [1.02 + 0.001 * k for k in range(10)])
    assert judged(fresh(tmp_path / "shrinks"))["batch-gain-shrinks"].word == "holds"
    assert judged(fresh(tmp_path / "grows"))["batch-gain-shrinks"].word == "does not hold"
    one = judged(fresh(tmp_path / "one"))["batch-gain-shrinks"]
    assert one.word == "inconclusive" and "1 GPU run" in one.evidence
    medians = judged(fresh(tmp_path / "medians"))["batch-gain-shrinks"]
    assert medians.word == "inconclusive" and "no per-repeat times" in medians.evidence and medians.cost


def test_a_batch_sweep_meets_the_speed_standard_at_exactly_its_repeats(tmp_path):
    """Three sweeps of ten interleaved repeats each (the standard's count) decide; nine repeats each do not."""

    def sweeps(root: Path, n: int) -> None:
        for run in ("gpu-a", "gpu-b", "gpu-c"):
            systems = {
                "balanced": {"by_batch": {"1": 400.0, "64": 28000.0}},
                "can": {"by_batch": {"1": 520.0, "64": 28560.0}},
            }
            systems["balanced"]["by_batch_repeats"] = {"1": [400.0] * n, "64": [28000.0] * n}
            systems["can"]["by_batch_repeats"] = {
                "1": [520.0] * n,
                "64": [28000.0 * (1.02 + 0.001 * k) for k in range(n)],
            }
            save_result(
                root / "gpu" / run / "batch.json",
                {"systems": systems, "settings": {"repeats": n}},
                provenance("full", {"command": "test"}),
            )

    sweeps(tmp_path / "ten", 10)
    sweeps(tmp_path / "nine", 9)
    ten = judged(fresh(tmp_path / "ten"))["batch-gain-shrinks"]
    nine = judged(fresh(tmp_path / "nine"))["batch-gain-shrinks"]
    assert (ten.word, ten.meets) == ("holds", True)
    assert (nine.word, nine.meets) == ("inconclusive", False)


def similarity(root: Path, baseline: float, balanced: float, ffn: float = 0.5) -> None:
    for name, diagonal, layers in (("similarity", baseline, 6), ("similarity-balanced", balanced, 2)):
        alike = [[diagonal if i == j else 0.1 for j in range(layers)] for i in range(layers)]
        other = [[ffn if i == j else 0.1 for j in range(layers)] for i in range(layers)]
        save_result(
            Where.of("small", root).path(name),
            {"residual": {"self_vs_cross": alike, "cross_vs_ffn": other}},
            provenance("small", {"system": name}),
        )


def test_a_similarity_claim_flips_with_opposite_matrices_and_reads_both_decoders(tmp_path):
    """One model of each decoder has no interval over seeds: every layer's value is shown with the criterion read
    on it, and the claim stays inconclusive, saying that seeds would settle it."""
    similarity(tmp_path / "alike", 0.95, 0.93)
    similarity(tmp_path / "apart", 0.5, 0.5)
    similarity(tmp_path / "mixed", 0.95, 0.85)
    alike = judged(fresh(tmp_path / "alike"))["inputs-alike"]
    assert alike.word == "inconclusive" and {r["by_value"] for r in alike.sets} == {"holds"}
    assert not alike.meets and "3 seeds" in alike.settle
    apart = judged(fresh(tmp_path / "apart"))["inputs-alike"]
    assert apart.word == "inconclusive" and [r["value"] for r in apart.sets] == [0.5] * 8  # 6 + 2 layers
    assert {r["by_value"] for r in apart.sets} == {"does not hold"}
    mixed = judged(fresh(tmp_path / "mixed"))["inputs-alike"]  # the Balanced decoder CAN replaces
    assert [r["by_value"] for r in mixed.sets] == ["holds"] * 6 + ["does not hold"] * 2
    darker = judged(fresh(tmp_path / "alike"))["ffn-inputs-less-alike"]
    assert darker.word == "inconclusive" and darker.sets[0]["value"] == pytest.approx(0.95 - 0.5)


def log_of(loss: float) -> list[dict]:
    return [
        {"kind": "valid", "step": 400, "valid_loss": loss + 0.2},
        {"kind": "valid", "step": 800, "valid_loss": loss},
    ]


def test_a_loss_claim_flips_with_opposite_logs(tmp_path):
    for case, can in (("above", [3.3, 3.31, 3.32]), ("below", [2.9, 2.91, 2.92])):
        for seed in (1, 2, 3):
            put_run(tmp_path / case, f"{MAIN}/can", seed, 30.0, log=log_of(can[seed - 1]))
            put_run(tmp_path / case, f"{MAIN}/balanced", seed, 30.0, log=log_of(3.0 + 0.01 * seed))
    assert judged(fresh(tmp_path / "above"))["loss-can-above-balanced"].word == "holds"
    assert judged(fresh(tmp_path / "below"))["loss-can-above-balanced"].word == "does not hold"


# -- below the standard: inconclusive, with what would settle it --------------------------------------------------


def test_each_kind_of_claim_is_inconclusive_below_its_standard(tmp_path):
    refs = {"multi30k-en-de": {"test": REFS}}
    # BLEU: the holding store of the flip test, one seed of CAN removed
    for seed, tok in enumerate([30.1, 30.2], 1):
        put_run(tmp_path / "bleu", f"{MAIN}/can", seed, tok, REFS)
    for seed in (1, 2, 3):
        put_run(tmp_path / "bleu", f"{MAIN}/balanced", seed, 30.1 + 0.1 * seed, REFS)
    bleu = judged(fresh(tmp_path / "bleu", references=refs))["can-within-0.5"]
    assert (bleu.word, bleu.meets) == ("inconclusive", False) and bleu.seeds == {"CAN": 2, "Balanced": 3}
    assert (
        "--systems can --seeds 1,2,3" in bleu.settle and bleu.cost == "1 run"
    )  # the fake runs record no training time
    # speed: the fast store of the flip test with 3 repeats, then with 10 repeats of half a second
    put_speed(tmp_path / "few", "gpu-a", {"can": ten(600.0)[:3], "balanced": ten(440.0)[:3]})
    put_speed(tmp_path / "short", "gpu-a", {"can": ten(600.0), "balanced": ten(440.0)}, seconds=0.5)
    for case in ("few", "short"):
        speed = judged(fresh(tmp_path / case))["can-faster"]
        assert (speed.word, speed.meets) == ("inconclusive", False) and "gpu_check.sh" in speed.settle, case
    # analyses of trained models: the same matrices at tiny, whose models show the mechanics only
    similarity(tmp_path / "tiny" / "tiny", 0.95, 0.93)
    tiny = judged(fresh(tmp_path / "tiny", "tiny"))["inputs-alike"]
    assert tiny.word == "inconclusive" and "--scale small" in tiny.settle
    # the training logs: two seeds of CAN
    for seed in (1, 2):
        put_run(tmp_path / "loss", f"{MAIN}/can", seed, 30.0, log=log_of(3.3))
    for seed in (1, 2, 3):
        put_run(tmp_path / "loss", f"{MAIN}/balanced", seed, 30.0, log=log_of(3.0 + 0.01 * seed))
    assert judged(fresh(tmp_path / "loss"))["loss-can-above-balanced"].word == "inconclusive"


def test_a_contrast_short_of_seeds_costs_its_missing_runs_at_the_longest_stored_run(tmp_path):
    for seed, wall in ((1, 600.0), (2, 900.0)):
        put_run(tmp_path, f"{MAIN}/can", seed, 30.0 + seed, wall_s=wall)
        put_run(tmp_path, f"{MAIN}/balanced", seed, 30.5 + seed, wall_s=300.0)
    j = judged(fresh(tmp_path))["can-within-0.5"]
    # a third seed of each: 2 runs trained side by side (4 at once), each as long as the longest stored run, 900 s
    assert (j.cost, j.minutes) == ("2 runs, about 15 GPU-minutes side by side", 900 / 60)


def test_a_claim_whose_runs_are_missing_is_not_run_and_names_the_command(tmp_path):
    for seed in (1, 2, 3):
        put_run(tmp_path, f"{MAIN}/balanced", seed, 30.0 + 0.1 * seed)
    j = judged(fresh(tmp_path))["balanced-keeps-bleu"]
    assert j.word == "not run"
    assert j.command == (
        "python -m repro experiment --scale small --systems baseline --seeds 1,2,3 "
        "--corpora multi30k-en-de --studies runs"
    )


# -- the strongest body of evidence leads -------------------------------------------------------------------------


def test_a_two_seed_body_never_overrides_a_three_seed_one(tmp_path):
    pair(tmp_path, "can", "balanced", [27.1, 27.2, 27.3], [30.1, 30.2, 30.3])  # 1x, 3 seeds: CAN 3 below
    pair(tmp_path, "can", "balanced", [32.1, 32.2], [32.2, 32.3], X2)  # 2x, 2 seeds: on par
    j = judged(fresh(tmp_path))["can-within-0.5"]
    assert (j.budget, j.word) == (1, "does not hold") and [(b.budget, b.word) for b in j.beside] == [
        (2, "inconclusive")
    ]
    put_run(tmp_path, f"{X2}-can-x2", 3, 32.3)
    put_run(tmp_path, f"{X2}-balanced-x2", 3, 32.4)
    j = judged(fresh(tmp_path))["can-within-0.5"]  # 3 seeds at both budgets: the longer budget leads
    assert (j.budget, j.word) == (2, "holds") and [(b.budget, b.word) for b in j.beside] == [(1, "does not hold")]
    assert 'data-budget="1">does not hold<' in mark(j, 1) and 'data-claim="can-within-0.5"' in mark(j)
    assert judged(fresh(tmp_path))["budget-adds-can"].value == pytest.approx(5.0)


def test_converged_models_lead_a_bleu_claim_once_they_have_the_most_seeds(tmp_path):
    """The converged study's models (beyond/converged) are read as a body of their own: with as many seeds as the
    budgets' they lead (trained to the optimum, where a budget stops short of it or past it), with fewer they stand
    beside, and a claim that reads no budget (SAN against Balanced) gets them too."""
    conv = "beyond/runs/multi30k-en-de/converged"
    pair(tmp_path, "can", "balanced", [30.1, 30.2, 30.3], [30.2, 30.3, 30.4])  # 1x: on par
    pair(tmp_path, "can", "balanced", [32.1, 32.2, 32.3], [32.2, 32.3, 32.4], X2)  # 2x: on par
    for seed, (can, balanced) in enumerate(zip([27.1, 27.2], [30.1, 30.2]), 1):  # converged: CAN 3 below
        put_run(tmp_path, f"{conv}-can", seed, can)
        put_run(tmp_path, f"{conv}-balanced", seed, balanced)
    j = judged(fresh(tmp_path))["can-within-0.5"]
    assert (j.budget, j.recipe, j.word) == (2, "", "holds")  # two converged seeds never lead three
    assert [(b.recipe, b.word) for b in j.beside] == [("", "holds"), ("converged", "inconclusive")]
    put_run(tmp_path, f"{conv}-can", 3, 27.3)
    put_run(tmp_path, f"{conv}-balanced", 3, 30.3)
    j = judged(fresh(tmp_path))["can-within-0.5"]
    assert (j.recipe, j.budget, j.word) == ("converged", None, "does not hold")
    assert j.value == pytest.approx(-3.0) and {b.budget for b in j.beside} == {1, 2}
    assert j.ours.startswith("converged: -3.00") and "converged recipe" in j.evidence
    assert j.as_json()["recipe"] == "converged" and "recipe" not in j.beside[0].as_json()
    assert lead_sentence(j, "{budget} ({seeds} seeds) over {others}: {rule}") == (
        "converged (3 seeds) over 1x and 2x: at equal seeds the converged models lead"
    )
    pair(tmp_path, "can_attn", "balanced", [30.0, 30.1, 30.2], [30.0, 30.1, 30.2])  # a claim of no budgets
    for seed in (1, 2, 3):
        put_run(tmp_path, f"{conv}-can_attn", seed, 20.0 + seed / 10)
    j = judged(fresh(tmp_path))["can-attn-below-balanced"]
    assert (j.recipe, j.word, j.value) == ("converged", "holds", pytest.approx(-10.0))


def test_the_choices_claim_reads_the_converged_controls_against_converged_can(tmp_path):
    conv = "beyond/runs/multi30k-en-de/converged"
    for seed in (1, 2, 3):
        put_run(tmp_path, f"{conv}-residual-can", seed, 31.0 + seed / 10)
        put_run(tmp_path, f"{conv}-nosplit-can_nosplit", seed, 29.0 + seed / 10)
        put_run(tmp_path, f"{conv}-can", seed, 28.0 + seed / 10)
    j = judged(fresh(tmp_path))["choices-explain-gap"]
    assert j.word == "holds" and j.value == pytest.approx((31.0 + 29.0) / 2 - 28.0)
    assert len(j.files) == 9 and all("/converged-" in f for f in j.files)


def test_the_newest_code_that_meets_the_standard_leads_and_older_code_stands_beside(tmp_path):
    for k, run in enumerate(("old-a", "old-b", "old-c")):
        put_speed(
            tmp_path, run, {"can": ten(600.0), "balanced": ten(440.0)}, commit="1" * 40, measured=f"2026-01-0{k + 1}"
        )
    put_speed(
        tmp_path, "new-few", {"can": ten(420.0)[:3], "balanced": ten(440.0)[:3]}, commit="2" * 40, measured="2026-02"
    )
    j = judged(fresh(tmp_path))["can-faster"]  # the newer run is below the standard: the old code's runs decide
    assert (j.word, j.strength["code"], set(j.files)) == ("holds", "1111111", {"old-a", "old-b", "old-c"})
    assert [(b.strength["code"], b.word) for b in j.beside] == [("2222222", "inconclusive")]
    put_speed(tmp_path, "new-a", {"can": ten(420.0), "balanced": ten(440.0)}, commit="3" * 40, measured="2026-03")
    newer = judged(fresh(tmp_path))["can-faster"]  # newer code, one run: it leads, below the standard's runs
    assert newer.word == "inconclusive" and newer.files == ("new-a",) and "1 GPU run" in newer.evidence
    put_speed(tmp_path, "new-b", {"can": ten(600.0), "balanced": ten(440.0)}, commit="3" * 40, measured="2026-03-02")
    two = judged(fresh(tmp_path))["can-faster"]  # two runs of that code disagree, still below 3 runs
    assert two.word == "inconclusive" and {r["verdict"] for r in two.sets} == {"holds", "does not hold"}
    put_speed(tmp_path, "new-c", {"can": ten(600.0), "balanced": ten(440.0)}, commit="3" * 40, measured="2026-03-03")
    three = judged(fresh(tmp_path))["can-faster"]
    assert three.word == "mixed" and set(three.files) == {"new-a", "new-b", "new-c"}
    assert three.strength["repeats"] == 30


def test_the_graph_mode_is_a_claim_of_its_own(tmp_path):
    for run in ("gpu-a", "gpu-b", "gpu-c"):
        put_speed(tmp_path, run, {"can": ten(600.0), "balanced": ten(440.0)}, mode="captured")
    store = fresh(tmp_path)
    assert judged(store)["can-speed-1.28x-graphs"].word == "holds"
    assert judged(store)["can-faster"].word == "not run"  # no eager repeats stored


# -- the stored results -------------------------------------------------------------------------------------------


@pytest.fixture
def stored(claims_json):
    return claims_json


def test_the_json_gives_every_claim_its_evidence_its_strength_and_its_standard(stored):
    assert list(stored) == [c.id for c in CLAIMS]
    for row in stored.values():
        assert {"claim", "criterion", "paper", "ours", "verdict", "evidence", "sets", "strength", "settle"} <= set(row)
        assert row["verdict"] in STATES and {"kind", "least", "interval", "met"} <= set(row["standard"])
        if row["verdict"] in ("inconclusive", "not run") and not row["standard"]["met"]:
            assert row["settle"], row["id"]  # what would settle it


def test_a_claim_decided_at_its_standard_has_nothing_left_to_settle(stored):
    bodies = [b for row in stored.values() for b in (row, *row["beside"])]
    decided = [b for b in bodies if b["standard"]["met"] and b["verdict"] != "inconclusive"]
    assert decided  # the stored results decide some claims
    for b in decided:
        assert (b["settle"], b["cost"], b["gpu_minutes"], b["command"]) == ("", "", None, ""), b["id"]


def test_the_stored_results_give_the_readings_of_a_careful_reviewer(stored):
    v = {k: row["verdict"] for k, row in stored.items()}
    # CAN within 0.5 of Balanced: 3 seeds at both budgets, the 2x body leads; two one-sided tests on the test sets:
    # every test set's one interval crosses -0.5 at 2x; at 1x MSCOCO fails and the others cannot decide
    keeps = stored["can-within-0.5"]
    assert keeps["budget"] == 2 and keeps["strength"]["seeds"] == {"CAN 2x": 3, "Balanced 2x": 3}
    assert v["can-within-0.5"] == "inconclusive" and [(b["budget"], b["verdict"]) for b in keeps["beside"]] == [
        (1, "inconclusive")
    ]
    assert {r["split"]: r["verdict"] for r in keeps["beside"][0]["sets"] if r["decides"]}["test2017_mscoco"] == (
        "does not hold"
    )
    # ... while CAN scores below Balanced on all three test sets at 2x
    assert v["can-below-balanced"] == "holds"
    # no verdict is decided by the validation set
    for row in stored.values():
        if row["deciding"]:
            assert row["deciding"]["split"] != "valid" and row["deciding"]["decides"], row["id"]
            assert row["interval"] == row["deciding"]["interval"] and row["pairing"], row["id"]
    # the speed claims pool the runs of the newest decoder code that meet the per-run standard: today that is one
    # H200 run of 10 repeats, where the standard asks for 3 runs, so every speed claim is inconclusive and says so
    speed = [k for k, row in stored.items() if row["standard"]["kind"] == "speed" and row["verdict"] != "not run"]
    # (the newest run timed Balanced and CAN and the ablations; Baseline, SAN and AAN only the run before it)
    older = {"balanced-speed-1.90x", "can-faster-than-san", "can-faster-than-aan", "batch-gain-shrinks"}
    assert {tuple(stored[k]["files"]) for k in speed if k not in older} == {("h200-2026-11-28-e1befc3",)}
    assert {tuple(stored[k]["files"]) for k in older - {"batch-gain-shrinks"}} == {("h200-2026-11-27-81cbcbb",)}
    assert not any(stored[k]["standard"]["met"] for k in speed)
    assert (v["can-faster"], v["balanced-speed-1.90x"]) == ("inconclusive", "inconclusive")
    assert "1 GPU run" in stored["can-faster"]["evidence"]
    # with CUDA graphs, 10 repeats over a second each at e1befc3: 1.32 [1.32, 1.33], still one run
    graphs = stored["can-speed-1.28x-graphs"]
    assert (
        graphs["verdict"] == "inconclusive"
        and graphs["interval"][0] > 1.28
        and graphs["files"] == ["h200-2026-11-28-e1befc3"]
    )
    assert v["batch-gain-shrinks"] == "inconclusive" and v["attn-faster-than-ffn"] == "inconclusive"
    # three seeds of 14/1 now: at the standard, and still inconclusive
    depth = stored["depth-14-1-loses"]
    assert (
        v["depth-14-1-loses"] == "inconclusive" and depth["strength"]["seeds"]["14/1"] == 3 and depth["standard"]["met"]
    )
    # the controls of canlib's reading are not stored: not run, with the call that stores them
    assert (
        v["choices-explain-gap"] == "not run"
        and stored["choices-explain-gap"]["command"] == "bash scripts/gpu_settle.sh"
    )


def test_the_numbers_of_a_judged_claim_are_the_raw_files(stored):
    """CAN - Balanced per set at 1x and 2x, and CAN/Balanced with its interval, recomputed from the stored JSON with
    json and statistics only."""

    def tok(folder: Path, name: str, split: str) -> list[float]:
        return [
            json.loads(p.read_text())["result"]["scores"][split]["tok_bleu"]
            for p in sorted(folder.glob(f"{name}-seed*.json"))
        ]

    main, beyond = RESULTS / "small" / MAIN, RESULTS / "small" / "beyond" / "runs" / "multi30k-en-de"
    lead, one = stored["can-within-0.5"], stored["can-within-0.5"]["beside"][0]
    for row in lead["sets"]:
        want = statistics.fmean(tok(beyond, "budget-can-x2", row["split"])) - statistics.fmean(
            tok(beyond, "budget-balanced-x2", row["split"])
        )
        assert row["value"] == pytest.approx(want, abs=1e-12)
    for row in one["sets"]:
        want = statistics.fmean(tok(main, "can", row["split"])) - statistics.fmean(tok(main, "balanced", row["split"]))
        assert row["value"] == pytest.approx(want, abs=1e-12)
    speed = json.loads((RESULTS / "gpu" / "h200-2026-11-28-e1befc3" / "speed.json").read_text())["result"]["systems"]
    ratios = sorted(
        c / b
        for c, b in zip(speed["can"]["eager"]["tok_per_s_repeats"], speed["balanced"]["eager"]["tok_per_s_repeats"])
    )
    assert stored["can-faster"]["value"] == pytest.approx(statistics.median(ratios))
    assert stored["can-faster"]["interval"] == pytest.approx([ratios[1], ratios[8]])
    # twice the updates for CAN: 2x and 1x of each seed paired, the seed variance that of the per-seed differences
    adds = stored["budget-adds-can"]
    assert "budget-can-x2 with can on the seed" in adds["pairing"]
    for row in adds["sets"]:
        diffs = [x - y for x, y in zip(tok(beyond, "budget-can-x2", row["split"]), tok(main, "can", row["split"]))]
        assert row["seed_var"] == pytest.approx(statistics.variance(diffs) / len(diffs), rel=1e-9)
        total = row["seed_var"] + row["sentence_var"]  # Satterthwaite: the paired seeds' n - 1, the sentences known
        assert row["df"] == pytest.approx(total**2 / (row["seed_var"] ** 2 / 2), rel=1e-9)


# -- one place judges ---------------------------------------------------------------------------------------------

VERDICT_FUNCTIONS = {
    "judge",
    "interval_verdict",
    "seed_interval",
    "median_interval",
    "combined_interval",
    "seeds_to_settle",
    "outcome",
    "bootstrap_contrast",
    "central_95",
}
ALLOWED = {
    "repro/studies/verdict.py",
    "repro/studies/judges.py",
    "repro/studies/claims.py",
}


def test_no_module_outside_the_rule_and_the_registry_calls_the_verdict_functions():
    calls = []
    for path in sorted(p for folder in ("canlib", "repro", "book/_code") for p in (REPO / folder).rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel in ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in VERDICT_FUNCTIONS:
                    calls.append(f"{rel}:{node.lineno} calls {name}")
    assert not calls, "\n".join(calls)


# -- one word per claim on every page ----------------------------------------------------------------------------


def test_two_words_for_one_claim_are_found():
    found = [
        ("a.html", "can-faster", "", "holds"),
        ("b.html", "can-faster", "", "inconclusive"),
        ("a.html", "can-within-0.5", "1", "does not hold"),
        ("b.html", "can-within-0.5", "2", "inconclusive"),
    ]
    assert disagreements(found) == ["can-faster (its verdict): 'holds' on a.html; 'inconclusive' on b.html"]
    html = mark(judged(fresh(Path("/nonexistent")))["attn-faster-than-ffn"])
    assert shown_verdicts(f"<p>x {html} y</p>") == [("attn-faster-than-ffn", "", "not run")]
    said = "CAN faster: holds (`can-faster`); within: does not hold (`can-within-0.5`). Tally: holds 3."
    assert readme_verdicts(said) == [("can-faster", "", "holds"), ("can-within-0.5", "", "does not hold")]


def test_every_page_that_shows_a_verdict_shows_the_registrys_word(stored):
    """What the chapters glue, glance's findings and tables, the scorecard's table and README's findings, read as a
    reader sees them (the marks in the HTML the chapters glue, README's ``word (`id`)``): one word per claim and
    budget, the registry's."""
    import os

    from _code import (
        ablation,
        attention,
        beyond,
        context,
        depths,
        errors,
        glance,
        results,
        similarity,
        speed,
        tasks,
        training,
    )

    os.environ.setdefault("CANLIB_DATA_DIR", str(SHARED_DATA))
    claims._JUDGED.clear()
    store = Store("small", RESULTS)
    found = []
    for module in (ablation, attention, beyond, context, depths, errors, results, similarity, speed, tasks, training):
        for key, value in module.values(store).items():
            if key.startswith("verdict_"):
                found += [(module.__name__, *m) for m in shown_verdicts(value)]
    glanced = glance.values(store)
    found += [("glance", *m) for key in glance.HTML_KEYS for m in shown_verdicts(glanced[key])]
    found += [("scorecard", *m) for m in shown_verdicts(table(judged(store).all(), marked=True).to_html(escape=False))]
    found += [("README.md", *m) for m in readme_verdicts((REPO / "README.md").read_text(encoding="utf-8"))]
    assert not disagreements(found), "\n".join(disagreements(found))
    for page, claim, budget, word in found:
        row = (
            stored[claim]
            if not budget or stored[claim]["budget"] == int(budget)
            else next(b for b in stored[claim]["beside"] if b["budget"] == int(budget))
        )
        assert word == row["verdict"], (
            f"{page} shows {claim} ({budget}) as {word!r}, the registry as {row['verdict']!r}"
        )
    paper_ids = {c.id for c in CLAIMS if c.source == "paper"}
    assert {c for p, c, _, _ in found if p == "README.md"} >= {"can-faster", "can-within-0.5"}  # its findings
    for page in ("glance", "scorecard"):  # the pages that list every claim of the paper (README links the scorecard)
        assert {c for p, c, _, _ in found if p == page} >= paper_ids, page
    assert {c for p, c, _, _ in found if p == "scorecard"} == {c.id for c in CLAIMS}
