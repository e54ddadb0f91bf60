"""The one store reader (repro.studies.store.Store): main-plan runs, a study's models through its summary or,
before
the summary exists, from their files, the reduced-budget filter applied once, hypotheses that must be where a run
says, GPU measurements and operator counts under the same folder."""

from __future__ import annotations

import json

import pytest

from repro.results.files import provenance, save_result
from repro.results.layout import Where
from repro.studies.store import Store


def put(root, name, seed, tok, *, reduced=False, hyps=True, split="test"):
    path = Where.of("small", root).path(f"{name}-seed{seed}")
    result = {"scores": {split: {"bleu": tok - 0.1, "tok_bleu": tok}}, "log": [], "hyp_files": {}}
    if hyps:
        result["hyp_files"][split] = f"{path.stem}.{split}.hyp"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_name(f"{path.stem}.{split}.hyp").write_text(f"hyp of seed {seed}\nsecond\n", encoding="utf-8")
    save_result(path, result, provenance("small", {"seed": seed}, reduced_budget=reduced))
    return path


def test_main_runs_read_every_full_budget_seed_and_their_hypotheses(tmp_path):
    for seed, tok in ((1, 30.0), (2, 31.0), (3, 32.0)):
        put(tmp_path, "runs/multi30k-en-de/can", seed, tok, reduced=seed == 3)
    put(tmp_path, "runs/multi30k-en-de/can_ffn", 1, 20.0)  # another system whose name starts alike
    store = Store("small", tmp_path)
    runs = store.runs("can")
    assert runs.seeds == (1, 2) and list(runs.scores["test"]) == [30.0, 31.0]
    assert [list(h) for h in runs.hyps["test"]] == [["hyp of seed 1", "second"], ["hyp of seed 2", "second"]]
    assert runs.files == ("runs/multi30k-en-de/can-seed1.json", "runs/multi30k-en-de/can-seed2.json")
    assert store.sacre(runs) == [pytest.approx(29.9), pytest.approx(30.9)]
    assert store.runs("aan") is None
    assert store.scores(["can", "aan"]) == {"can": [30.0, 31.0]}  # the same filter for the scores a table shows
    assert store.stored_seeds("can") == [1, 2, 3] and store.seeds("can") == [1, 2]
    everything = Store("small", tmp_path, full_budget=False)  # an end-to-end test's folder: its runs are read
    assert everything.runs("can").seeds == (1, 2, 3)


def test_a_study_is_read_from_its_files_until_its_summary_names_them(tmp_path):
    for seed in (1, 2):
        put(tmp_path, "beyond/runs/multi30k-en-de/budget-can-x2", seed, 36.0 + seed)
        put(tmp_path, "beyond/runs/multi30k-en-de/budget-balanced-x2", seed, 37.0 + seed)
    for seed in (1, 2):
        put(tmp_path, "runs/multi30k-en-de/can", seed, 33.0)
        put(tmp_path, "runs/multi30k-en-de/balanced", seed, 34.0)
    store = Store("small", tmp_path)
    assert store.budget_factors() == [1, 2]  # no budget.json yet: the x2 files count
    assert store.budget_runs("can", 2).scores["test"] == (37.0, 38.0)
    assert store.budget_runs("can", 1).scores["test"] == (33.0, 33.0)
    summary = {
        "study": "budget",
        "runs": [
            {"file": "beyond/runs/multi30k-en-de/budget-can-x2-seed1"},
            {"file": "beyond/runs/multi30k-en-de/budget-balanced-x2-seed1"},
        ],
    }
    save_result(Where.of("small", tmp_path).path("beyond/budget"), summary, provenance("small", {"study": "budget"}))
    assert Store("small", tmp_path).budget_runs("can", 2).seeds == (1,)  # the summary decides which models count


def test_a_run_whose_hypotheses_are_missing_is_an_error_naming_the_file(tmp_path):
    path = put(tmp_path, "runs/multi30k-en-de/can", 1, 30.0)
    path.with_name("can-seed1.test.hyp").unlink()
    with pytest.raises(ValueError, match="can-seed1.test.hyp: the hypotheses a stored run names are missing"):
        Store("small", tmp_path).runs("can")


def test_a_run_without_provenance_is_refused(tmp_path):
    path = Where.of("small", tmp_path).path("runs/multi30k-en-de/can-seed1")
    path.parent.mkdir(parents=True)
    path.write_text('{"result": {"scores": {}}}', encoding="utf-8")
    with pytest.raises(ValueError, match="needs the keys 'result' and 'provenance'"):
        Store("small", tmp_path).runs("can")


def test_a_missing_run_names_the_command_that_stores_it(tmp_path):
    with pytest.raises(
        FileNotFoundError,
        match="`python -m repro experiment --scale small --systems can --seeds 2 "
        "--corpora multi30k-en-de --studies runs`",
    ):
        Store("small", tmp_path).run("can", 2)


def test_gpu_measurements_and_operator_counts_are_read_from_the_same_folder(tmp_path):
    """A store opened on a folder reads that folder's gpu/ and cpu/ too, not book/results."""
    rows = {"can": {"eager": {"tok_per_s": 3.0, "tok_per_s_repeats": [3.0]}}}
    save_result(
        tmp_path / "gpu" / "run-a" / "speed.json",
        {"systems": rows, "dtype": "float16", "settings": {"repeats": 1}, "captured_matches_eager": {}},
        provenance("full", {"command": "test"}),
    )
    save_result(tmp_path / "cpu" / "ops.json", {"systems": {"can": {}}}, provenance("full", {"command": "test"}))
    store = Store("small", tmp_path)
    assert store.gpu_runs_with("speed") == ["run-a"] and store.gpu_runs_with("batch") == []
    assert store.gpu_speed("eager", "run-a")[0]["can"]["tok_per_s"] == 3.0
    assert json.loads((tmp_path / "cpu" / "ops.json").read_text())["result"] == store.ops()[0]
