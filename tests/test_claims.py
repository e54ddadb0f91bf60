"""The claims registry (canlib.studies.claims): every claim declared once and judged once, in one vocabulary, from
evidence read in the open. Each kind of claim is built from two opposite fake stores and its word must flip; the
stored results give the verdicts the issue's readings ask for; no module outside the rule's module and the registry
calls the verdict functions; ``canlib claims --json`` carries the evidence as data."""

from __future__ import annotations

import ast
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHARED_DATA, missing

from canlib.results.files import provenance, save_result
from canlib.results.layout import stored_path
from canlib.studies import claims
from canlib.studies.claims import BY_ID, CLAIMS, judged, mark
from canlib.studies.store import Store

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


def put_run(
    root: Path,
    name: str,
    seed: int,
    tok: float,
    hyps: list[str] | None = None,
    budget: dict | None = None,
    log: list | None = None,
) -> None:
    """A stored run of ``name`` (``runs/<corpus>/<system>`` or ``beyond/runs/<corpus>/<study>-<system>-<tag>``) with
    tokenized BLEU ``tok`` on test2016 and, given ``hyps``, its hypotheses."""
    path = stored_path(f"{name}-seed{seed}", "small", root)
    result = {"scores": {"test": {"bleu": tok, "tok_bleu": tok}}, "log": log or [], "hyp_files": {}}
    if hyps is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        result["hyp_files"]["test"] = f"{path.stem}.test.hyp"
        path.with_name(result["hyp_files"]["test"]).write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    save_result(path, result, provenance("small", {"seed": seed}, budget=budget or {}))


def fresh(root: Path, **kwargs) -> Store:
    """A store of ``root`` whose judgements are not kept from an earlier test (each test builds its own folder)."""
    claims._JUDGED.clear()
    return Store("small", root, **kwargs)


def put_speed(
    root: Path, run: str, repeats: dict[str, list[float]], *, sentences: int = 8, measured: str = "2026-01-01"
):
    systems = {s: {"eager": {"tok_per_s": statistics.median(v), "tok_per_s_repeats": v}} for s, v in repeats.items()}
    save_result(
        root / "gpu" / run / "speed.json",
        {
            "systems": systems,
            "dtype": "float16",
            "captured_matches_eager": {},
            "settings": {"sentences": sentences, "repeats": len(next(iter(repeats.values()))), "forced_length": 30},
        },
        provenance("full", {"command": "test"}, measured_at=measured),
    )


# -- one word per state, chosen by the claim's source ---------------------------------------------------------------


def test_every_claim_has_a_unique_id_a_source_a_chapter_and_a_criterion_with_its_number():
    assert len({c.id for c in CLAIMS}) == len(CLAIMS)
    chapters = {p.stem for p in (REPO / "book").glob("*.md")}
    for c in CLAIMS:
        assert c.source in ("paper", "book") and c.chapter in chapters, c
        assert any(ch.isdigit() for ch in c.criterion), f"{c.id}: the criterion states no number: {c.criterion}"
    assert BY_ID["can-speed-1.28x"].name.startswith("CAN decodes at least 1.28x as fast as Balanced")
    assert BY_ID["can-faster"].name.startswith("CAN decodes faster than Balanced (more than 1x)")


def test_the_vocabulary_says_reproduced_for_the_paper_and_holds_for_the_book():
    assert claims.VOCABULARY["paper"]["held"] == "reproduced" and claims.VOCABULARY["book"]["held"] == "holds"
    words = {w for source in claims.VOCABULARY.values() for w in source.values()}
    assert {"within noise", "not run yet", "not tested here", "mixed across {over}"} <= words


# -- flip tests: the same claim from two opposite fake stores ------------------------------------------------------


def test_a_bleu_claim_flips_with_opposite_runs(tmp_path):
    """ "CAN stays within 0.5 BLEU of Balanced" from three seeds each, hypotheses included (both intervals)."""
    refs = {"multi30k-en-de": {"test": REFS}}
    for case, can, hyps in (("close", [30.0, 30.1, 30.2], REFS), ("far", [26.0, 26.1, 26.2], BAD)):
        for seed, tok in enumerate(can, 1):
            put_run(tmp_path / case, "runs/multi30k-en-de/can", seed, tok, hyps)
            put_run(tmp_path / case, "runs/multi30k-en-de/balanced", seed, 30.1 + 0.1 * seed, REFS)
    close = judged(fresh(tmp_path / "close", references=refs))["can-within-0.5"]
    far = judged(fresh(tmp_path / "far", references=refs))["can-within-0.5"]
    assert (close.word, far.word) == ("reproduced", "not reproduced")
    assert far.sets[0]["test_set_interval"][1] < -0.5  # the bad translations lose on every resample
    assert close.budget == 1 and not close.beside  # no budget study stored: the 1x verdict alone


def test_a_bleu_claim_failed_on_some_sets_and_held_on_none_says_so():
    from canlib.studies.evidence import Judged

    claim = BY_ID["balanced-keeps-bleu"]
    assert Judged(claim, "did not hold on some sets", "", "").word == "not reproduced on some sets"
    assert Judged(claim, "mixed", "", "").word == "mixed across sets"


def test_a_speed_claim_flips_with_opposite_repeats_and_names_its_run(tmp_path):
    put_speed(tmp_path / "fast", "gpu-a", {"can": [600.0, 610.0, 590.0], "balanced": [440.0, 450.0, 460.0]})
    put_speed(tmp_path / "slow", "gpu-a", {"can": [430.0, 440.0, 420.0], "balanced": [440.0, 450.0, 460.0]})
    fast = judged(fresh(tmp_path / "fast"))["can-faster"]
    slow = judged(fresh(tmp_path / "slow"))["can-faster"]
    assert (fast.word, slow.word) == ("reproduced", "not reproduced")
    assert fast.files == ("gpu-a",) and fast.sets[0]["ratios"] == pytest.approx([600 / 440, 610 / 450, 590 / 460])
    assert fast.interval == pytest.approx((590 / 460, 600 / 440))


def test_the_speed_run_is_the_one_that_timed_the_most_tokens_and_an_opposite_run_makes_it_mixed(tmp_path):
    put_speed(tmp_path, "gpu-a", {"can": [600.0, 610.0], "balanced": [440.0, 450.0]}, sentences=8)
    put_speed(tmp_path, "gpu-b", {"can": [430.0, 440.0], "balanced": [440.0, 450.0]}, sentences=10)  # more tokens
    j = judged(fresh(tmp_path))["can-faster"]
    assert j.files == ("gpu-b",) and [r["chosen"] for r in j.sets] == [False, True]
    assert j.word == "mixed across runs"  # gpu-a held where the chosen gpu-b failed
    put_speed(
        tmp_path, "gpu-c", {"can": [600.0, 610.0], "balanced": [440.0, 450.0]}, sentences=10, measured="2026-02-01"
    )
    assert judged(fresh(tmp_path))["can-faster"].files == ("gpu-c",)  # as many tokens, measured later


def test_a_batch_curve_flips_with_opposite_sweeps_and_medians_alone_are_not_judged(tmp_path):
    def sweep(root: Path, at64: list[float], repeats: bool = True) -> None:
        systems = {
            "balanced": {"by_batch": {"1": 400.0, "64": 28000.0}},
            "can": {"by_batch": {"1": 520.0, "64": 28000.0 * statistics.median(at64)}},
        }
        if repeats:
            systems["balanced"]["by_batch_repeats"] = {"1": [400.0, 400.0], "64": [28000.0, 28000.0]}
            systems["can"]["by_batch_repeats"] = {"1": [520.0, 530.0], "64": [28000.0 * r for r in at64]}
        save_result(
            root / "gpu" / "gpu-a" / "batch.json",
            {"systems": systems, "settings": {"repeats": 2}},
            provenance("full", {"command": "test"}),
        )

    sweep(tmp_path / "shrinks", [1.02, 1.05])
    sweep(tmp_path / "grows", [1.4, 1.5])
    sweep(tmp_path / "medians", [1.02, 1.05], repeats=False)
    assert judged(fresh(tmp_path / "shrinks"))["batch-gain-shrinks"].word == "reproduced"
    assert judged(fresh(tmp_path / "grows"))["batch-gain-shrinks"].word == "not reproduced"
    medians = judged(fresh(tmp_path / "medians"))["batch-gain-shrinks"]
    assert medians.word == "not tested here" and "no per-repeat times" in medians.evidence


def test_a_similarity_claim_flips_with_opposite_matrices(tmp_path):
    for case, diagonal in (("alike", 0.9), ("apart", 0.5)):
        matrix = [[diagonal if i == j else 0.1 for j in range(6)] for i in range(6)]
        save_result(
            stored_path("similarity", "small", tmp_path / case),
            {"residual": {"self_vs_cross": matrix, "cross_vs_ffn": matrix}},
            provenance("small", {"system": "baseline"}),
        )
    assert judged(fresh(tmp_path / "alike"))["inputs-alike"].word == "reproduced"
    apart = judged(fresh(tmp_path / "apart"))["inputs-alike"]
    assert apart.word == "not reproduced" and [r["value"] for r in apart.sets] == [0.5] * 6


# -- budgets, one seed, missing evidence --------------------------------------------------------------------------


def test_the_2x_verdict_leads_and_the_1x_stands_beside_it(tmp_path):
    for seed in (1, 2, 3):
        put_run(tmp_path, "runs/multi30k-en-de/can", seed, 27.0 + 0.1 * seed)  # 1x: CAN 3 below Balanced
        put_run(tmp_path, "runs/multi30k-en-de/balanced", seed, 30.0 + 0.1 * seed)
        put_run(tmp_path, "beyond/runs/multi30k-en-de/budget-can-x2", seed, 32.0 + 0.1 * seed)  # 2x: on par
        put_run(tmp_path, "beyond/runs/multi30k-en-de/budget-balanced-x2", seed, 32.1 + 0.1 * seed)
    j = judged(fresh(tmp_path))["can-within-0.5"]
    assert (j.budget, j.word) == (2, "reproduced")
    assert [(b.budget, b.word) for b in j.beside] == [(1, "not reproduced")]
    assert 'data-budget="1">not reproduced<' in mark(j, 1) and 'data-claim="can-within-0.5"' in mark(j)
    gain = judged(fresh(tmp_path))["budget-adds-can"]
    assert gain.word == "holds" and gain.value == pytest.approx(5.0)


def test_a_claim_whose_seeds_are_missing_is_not_run_yet_and_names_the_command(tmp_path):
    for seed in (1, 2, 3):
        put_run(tmp_path, "runs/multi30k-en-de/balanced", seed, 30.0 + 0.1 * seed)
    j = judged(fresh(tmp_path))["balanced-keeps-bleu"]
    assert j.word == "not run yet"
    assert j.command == (
        "python -m canlib experiment --scale small --systems baseline --seeds 1,2,3 "
        "--corpora multi30k-en-de --studies runs"
    )


def test_one_seed_of_14_1_is_judged_by_the_seed_1_pairs_test_set_interval_alone(tmp_path):
    refs = {"multi30k-en-de": {"test": REFS}}
    put_run(tmp_path, "runs/multi30k-en-de/depth-14-1", 1, 20.0, BAD)
    for seed in (1, 2, 3):
        put_run(tmp_path, "runs/multi30k-en-de/balanced", seed, 30.0, REFS)
    j = judged(fresh(tmp_path, references=refs))["depth-14-1-loses"]
    assert j.word == "reproduced" and j.sets[0]["seed_interval"] is None and j.sets[0]["test_set_interval"][1] < 0
    assert j.files == ("runs/multi30k-en-de/depth-14-1-seed1.json", "runs/multi30k-en-de/balanced-seed1.json")
    assert "test-set interval alone" in j.evidence


def test_at_tiny_no_claim_about_trained_models_is_judged(tmp_path):
    claims._JUDGED.clear()
    tiny = judged(Store("tiny", tmp_path))
    for c in CLAIMS:
        if c.evidence.__class__.__name__ in ("Contrast", "Similarity", "GateShare", "CrossTask"):
            assert tiny[c.id].word == "not tested here", c.id


# -- the stored results -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stored():
    if not (SHARED_DATA / "multi30k-en-de").is_dir():
        missing(f"real data {SHARED_DATA}/multi30k-en-de not present (the evaluation sets' references)")
    out = subprocess.run(
        [sys.executable, "-m", "canlib", "claims", "--json"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "CANLIB_DATA_DIR": str(SHARED_DATA), "CANLIB_RESULTS_DIR": str(RESULTS)},
        cwd=REPO,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return {row["id"]: row for row in json.loads(out.stdout)}


def test_the_json_lists_every_claim_with_its_evidence_as_data(stored):
    assert list(stored) == [c.id for c in CLAIMS]
    for row in stored.values():
        assert {"claim", "criterion", "paper", "ours", "verdict", "evidence", "chapter", "sets", "budget"} <= set(row)


def test_the_stored_results_give_the_readings_of_a_careful_reviewer(stored):
    v = {k: row["verdict"] for k, row in stored.items()}
    # CAN within 0.5 of Balanced: within noise at 2x (three seeds), not reproduced at the undertrained 1x beside it
    assert stored["can-within-0.5"]["budget"] == 2 and v["can-within-0.5"] == "within noise"
    assert [(b["budget"], b["verdict"]) for b in stored["can-within-0.5"]["beside"]] == [(1, "not reproduced")]
    # Balanced keeps Baseline's BLEU: failed beyond noise on valid and test2017 Flickr, held on none
    keeps = {s["split"]: s["verdict"] for s in stored["balanced-keeps-bleu"]["sets"]}
    assert v["balanced-keeps-bleu"] == "not reproduced on some sets"
    assert keeps["valid"] == keeps["test2017_flickr"] == "did not hold"
    # the speed claims read one named run, the one that timed the most tokens (the H200's 10 sentences)
    speed = [k for k, row in stored.items() if BY_ID[k].evidence.__class__.__name__ == "SpeedRatio" and row["files"]]
    assert {stored[k]["files"][0] for k in speed} == {"h200-2026-11-26"}
    assert (v["can-faster"], v["can-speed-1.28x"]) == ("reproduced", "within noise")
    assert v["inputs-alike"] == "reproduced" and v["batch-gain-shrinks"] == "not tested here"
    depth = {s["split"]: s for s in stored["depth-14-1-loses"]["sets"]}
    assert depth["test"]["seed_interval"] is None and depth["test"]["test_set_interval"][1] < 0


def test_the_numbers_of_a_judged_claim_are_the_raw_files(stored):
    """CAN - Balanced per set at 1x and 2x, recomputed from the stored JSON with json and statistics only."""

    def tok(folder: Path, name: str, split: str) -> list[float]:
        return [
            json.loads(p.read_text())["result"]["scores"][split]["tok_bleu"]
            for p in sorted(folder.glob(f"{name}-seed*.json"))
        ]

    main, beyond = (
        RESULTS / "small" / "runs" / "multi30k-en-de",
        RESULTS / "small" / "beyond" / "runs" / "multi30k-en-de",
    )
    lead, one = stored["can-within-0.5"], stored["can-within-0.5"]["beside"][0]
    for row in lead["sets"]:
        want = statistics.fmean(tok(beyond, "budget-can-x2", row["split"])) - statistics.fmean(
            tok(beyond, "budget-balanced-x2", row["split"])
        )
        assert row["value"] == pytest.approx(want, abs=1e-12)
    for row in one["sets"]:
        want = statistics.fmean(tok(main, "can", row["split"])) - statistics.fmean(tok(main, "balanced", row["split"]))
        assert row["value"] == pytest.approx(want, abs=1e-12)
    speed = json.loads((RESULTS / "gpu" / "h200-2026-11-26" / "speed.json").read_text())["result"]["systems"]
    ratios = [
        c / b
        for c, b in zip(speed["can"]["eager"]["tok_per_s_repeats"], speed["balanced"]["eager"]["tok_per_s_repeats"])
    ]
    assert stored["can-faster"]["value"] == pytest.approx(statistics.median(ratios))
    assert stored["can-faster"]["interval"] == pytest.approx([min(ratios), max(ratios)])


# -- one place judges ---------------------------------------------------------------------------------------------

VERDICT_FUNCTIONS = {
    "judge",
    "interval_verdict",
    "ratio_verdict",
    "seed_contrast",
    "seed_difference",
    "combine",
    "outcome",
    "bootstrap_contrast",
    "central_95",
}
ALLOWED = {"canlib/studies/verdict.py", "canlib/studies/judges.py", "canlib/studies/claims.py"}


def test_no_module_outside_the_rule_and_the_registry_calls_the_verdict_functions():
    calls = []
    for path in sorted((REPO / "canlib").rglob("*.py")):
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

MARK = re.compile(r'<span class="claim-verdict" data-claim="([^"]+)"(?: data-budget="(\d+)")?>([^<]+)</span>')


def shown_verdicts(html: str) -> list[tuple[str, str, str]]:
    """(claim id, budget or "", word) of every marked verdict in a page's HTML."""
    return [(m.group(1), m.group(2) or "", m.group(3)) for m in MARK.finditer(html)]


def readme_verdicts(text: str) -> list[tuple[str, str, str]]:
    """(claim id, "", word) of every row of README's verdict table (its columns named in its header row)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    out, header = [], None
    for line in lines:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if cells and cells[0] == "id" and "verdict" in cells:
            header = cells
            continue
        if header and len(cells) == len(header) and not set(cells[0]) <= set(":-"):
            out.append((cells[0], "", cells[header.index("verdict")]))
    return out


def disagreements(found: list[tuple[str, str, str, str]]) -> list[str]:
    """(page, id, budget, word) -> one line per claim (and budget) shown with two different words."""
    words: dict[tuple[str, str], dict[str, list[str]]] = {}
    for page, claim, budget, word in found:
        words.setdefault((claim, budget), {}).setdefault(word, []).append(page)
    return [
        f"{claim} ({budget or 'its verdict'}): "
        + "; ".join(f"{w!r} on {', '.join(sorted(set(p)))}" for w, p in ws.items())
        for (claim, budget), ws in words.items()
        if len(ws) > 1
    ]


def test_two_words_for_one_claim_are_found():
    found = [
        ("a.html", "can-faster", "", "reproduced"),
        ("b.html", "can-faster", "", "within noise"),
        ("a.html", "can-within-0.5", "1", "not reproduced"),
        ("b.html", "can-within-0.5", "2", "within noise"),
    ]
    assert disagreements(found) == ["can-faster (its verdict): 'reproduced' on a.html; 'within noise' on b.html"]
    html = mark(judged(fresh(Path("/nonexistent")))["attn-faster-than-ffn"])
    assert shown_verdicts(f"<p>x {html} y</p>") == [("attn-faster-than-ffn", "", "not tested here")]
    assert readme_verdicts("| id | claim | verdict |\n|:--|:--|:--|\n| can-faster | c | reproduced |\n") == [
        ("can-faster", "", "reproduced")
    ]


def test_every_page_that_shows_a_verdict_shows_the_registrys_word(stored):
    """What the chapters glue, glance's and the scorecard's tables and README's table, read as a reader sees them
    (the marks in the HTML the chapters glue, README's rows): one word per claim and budget, the registry's."""
    import os

    from canlib.studies.chapters import (
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
    found += [("glance", *m) for m in shown_verdicts(glance.linked(store))]
    found += [
        ("glance", *m)
        for m in shown_verdicts(" ".join(v for k, v in glance.values(store).items() if k.startswith("budget_mark")))
    ]
    found += [
        ("scorecard", *m) for m in shown_verdicts(claims.table(judged(store).all(), marked=True).to_html(escape=False))
    ]
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
    for page in ("glance", "scorecard", "README.md"):  # the pages that list every claim of the paper
        assert {c for p, c, _, _ in found if p == page} >= paper_ids, page
    assert {c for p, c, _, _ in found if p == "scorecard"} == {c.id for c in CLAIMS}
