"""What a verdict reads from a results folder: main-plan runs, a study's models through its summary or, before the
summary exists, from their files, never a reduced-budget run, and hypotheses that must be where a run says."""
from __future__ import annotations

import pytest

from canlib.studies import evidence as ev
from canlib.studies.results import provenance, save_result
from canlib.studies.store import stored_path


def store(root, name, seed, tok, *, reduced=False, hyps=True, split="test"):
    path = stored_path(f"{name}-seed{seed}", "small", root)
    result = {"scores": {split: {"bleu": tok - 0.1, "tok_bleu": tok}}, "log": [], "hyp_files": {}}
    if hyps:
        result["hyp_files"][split] = f"{path.stem}.{split}.hyp"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_name(f"{path.stem}.{split}.hyp").write_text(f"hyp of seed {seed}\nsecond\n", encoding="utf-8")
    save_result(path, result, provenance("small", {"seed": seed}, reduced_budget=reduced))
    return path


def test_main_runs_read_every_full_budget_seed_and_their_hypotheses(tmp_path):
    for seed, tok in ((1, 30.0), (2, 31.0), (3, 32.0)):
        store(tmp_path, "runs/multi30k-en-de/can", seed, tok, reduced=seed == 3)
    store(tmp_path, "runs/multi30k-en-de/can_ffn", 1, 20.0)  # another system whose name starts alike
    runs = ev.main_runs("small", "can", root=tmp_path)
    assert runs.seeds == (1, 2) and list(runs.scores["test"]) == [30.0, 31.0]
    assert [list(h) for h in runs.hyps["test"]] == [["hyp of seed 1", "second"], ["hyp of seed 2", "second"]]
    assert runs.files == ("runs/multi30k-en-de/can-seed1.json", "runs/multi30k-en-de/can-seed2.json")
    assert ev.sacre_scores("small", runs, root=tmp_path) == [pytest.approx(29.9), pytest.approx(30.9)]
    assert ev.main_runs("small", "aan", root=tmp_path) is None


def test_a_study_is_read_from_its_files_until_its_summary_names_them(tmp_path):
    for seed in (1, 2):
        store(tmp_path, "beyond/runs/multi30k-en-de/budget-can-x2", seed, 36.0 + seed)
        store(tmp_path, "beyond/runs/multi30k-en-de/budget-balanced-x2", seed, 37.0 + seed)
    for seed in (1, 2):
        store(tmp_path, "runs/multi30k-en-de/can", seed, 33.0)
        store(tmp_path, "runs/multi30k-en-de/balanced", seed, 34.0)
    assert ev.budget_factors("small", tmp_path) == [1, 2]  # no budget.json yet: the x2 files count
    assert ev.budget_runs("small", "can", 2, tmp_path).scores["test"] == (37.0, 38.0)
    assert ev.budget_runs("small", "can", 1, tmp_path).scores["test"] == (33.0, 33.0)
    summary = {"study": "budget", "runs": [{"file": "beyond/runs/multi30k-en-de/budget-can-x2-seed1"},
                                           {"file": "beyond/runs/multi30k-en-de/budget-balanced-x2-seed1"}]}
    save_result(stored_path("beyond/budget", "small", tmp_path), summary, provenance("small", {"study": "budget"}))
    assert ev.budget_runs("small", "can", 2, tmp_path).seeds == (1,)  # the summary decides which models count


def test_a_run_whose_hypotheses_are_missing_is_an_error_naming_the_file(tmp_path):
    path = store(tmp_path, "runs/multi30k-en-de/can", 1, 30.0)
    path.with_name("can-seed1.test.hyp").unlink()
    with pytest.raises(ValueError, match="can-seed1.test.hyp: the hypotheses a stored run names are missing"):
        ev.main_runs("small", "can", root=tmp_path)


def test_a_run_without_provenance_is_refused(tmp_path):
    path = stored_path("runs/multi30k-en-de/can-seed1", "small", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"result": {"scores": {}}}', encoding="utf-8")
    with pytest.raises(ValueError, match="needs the keys 'result' and 'provenance'"):
        ev.main_runs("small", "can", root=tmp_path)
