"""Chapters train at small where small trains (a CUDA device): the runs and analyses a chapter reads are
trained, stored as ``canlib experiment`` stores them, then shown; on a CPU nothing trains and the command
is named. Tested on a CPU by forcing the device selection (``CANLIB_TRAIN_SMALL=1``) with the small
scale shrunk to a tiny budget, in temporary results and cache folders (book/results is never touched)."""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from canlib.studies import quality, runs, scales
from canlib.studies.store import TRAIN_HERE_ENV, stored_path, trains_here

MAIN = "multi30k-en-de"


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """Temporary results and cache folders; the device flag unset."""
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(TRAIN_HERE_ENV, raising=False)
    return tmp_path


@pytest.fixture
def small_in_seconds(folders, shared_data, monkeypatch):
    """The small scale with a budget a CPU trains in seconds: 3 updates on the 3,000-pair corpus, greedy
    search, two seeds; everything else (presets small-*, names, folders, code paths) is small's own."""
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    spec = scales._SPECS["small"]
    monkeypatch.setitem(scales._SPECS, "small", dataclasses.replace(
        spec, corpus_scale="tiny", beam=1, seeds=2,
        train=dict(lr=1e-3, warmup=2, max_tokens=1024, max_steps=3, valid_every=3, log_every=1, keep_last=1,
                   average_last=1, progress=False)))
    return folders


def stored_runs(root) -> list[str]:
    folder = root / "results" / "small" / "runs" / MAIN
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


@pytest.mark.parametrize("flag, cuda, scale, expected", [
    ("", True, "small", True), ("", False, "small", False), ("1", False, "small", True), ("0", True, "small", False),
    ("", True, "tiny", False), ("", True, "full", False), ("1", True, "full", False),
])
def test_small_trains_here_on_cuda_or_where_the_flag_says_so(monkeypatch, flag, cuda, scale, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setenv(TRAIN_HERE_ENV, flag)
    assert trains_here(scale) is expected


def test_a_flag_that_is_neither_0_nor_1_is_refused_by_name(monkeypatch):
    monkeypatch.setenv(TRAIN_HERE_ENV, "yes")
    with pytest.raises(ValueError, match="CANLIB_TRAIN_SMALL='yes'"):
        trains_here("small")


def test_on_a_cpu_a_chapter_trains_nothing_and_names_the_command(folders, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def no_training(*args, **kwargs):
        raise AssertionError("trained on a CPU without being asked")

    monkeypatch.setattr(runs, "train", no_training)
    assert quality.default_scale(["can"], seeds=[1]) == "tiny"
    assert quality.default_scale(analyses=["errors"]) == "tiny"
    with pytest.raises(FileNotFoundError, match="canlib experiment --scale small"):
        quality.run_result("can", "small")
    assert quality.bleu_by_seed("small", ["can"]) == {}
    assert "`python -m canlib experiment --scale small --systems can --corpora multi30k-en-de`" in \
        quality.describe_runs("small", ["can"])
    assert not (folders / "results").exists()
    assert capsys.readouterr().err == ""  # no progress bar where nothing trains


def test_a_chapter_at_small_on_a_training_device_trains_and_stores_exactly_what_it_reads(small_in_seconds, monkeypatch,
                                                                                        capsys):
    from canlib.studies.analyses import similarity

    root = small_in_seconds
    monkeypatch.setenv(TRAIN_HERE_ENV, "1")  # this CPU stands for a CUDA device
    # the training chapter's cell: SCALE = default_scale([...], seeds=[1]), then one run_result per system
    assert quality.default_scale(["baseline"], seeds=[1]) == "small"
    assert stored_runs(root) == ["baseline-seed1"]
    assert "training 1 small run(s) on cpu" in capsys.readouterr().err  # the progress bar
    result, prov = quality.run_result("baseline", "small")
    stored = json.loads(stored_path(f"runs/{MAIN}/baseline-seed1", "small").read_text())
    assert stored["result"]["scores"] == result["scores"] and stored["provenance"]["date"] == prov["date"]
    assert (prov["scale"], prov["budget"]["max_steps"], prov["reduced_budget"]) == ("small", 3, False)
    assert prov["device"].startswith("CPU") and prov["precision"] == "fp32"  # trained on the device it was forced to
    for split in result["hyp_files"].values():  # the hypotheses beside it, as `canlib experiment` writes them
        assert (root / "results" / "small" / "runs" / MAIN / split).is_file()
    assert quality.default_scale(["baseline"], seeds=[1]) == "small" and capsys.readouterr().err == ""  # stored: no bar

    # a reader's SCALE = "small": the seed table reads every planned seed, so the missing seed 2 is trained
    table = quality.seed_table("small", ["baseline"], splits=["test"])
    assert int(table.loc["baseline", "n"]) == 2 and stored_runs(root) == ["baseline-seed1", "baseline-seed2"]

    # an analysis chapter: its loader computes and stores the study from the stored seed-1 run
    assert quality.default_scale(analyses=["similarity"]) == "small"
    study, prov = similarity("small")
    assert stored_path("similarity", "small").is_file() and prov["scale"] == "small" and set(study) == {"residual", "normalized"}
    assert stored_runs(root) == ["baseline-seed1", "baseline-seed2"]  # nothing else was trained

    # an explicit results folder is only read, never trained into
    with pytest.raises(FileNotFoundError, match="no stored small result"):
        quality.run_result("can", "small", root=root / "elsewhere")


def test_reduced_budgets_never_go_to_the_default_results_folder(folders):
    with pytest.raises(ValueError, match="needs a results folder"):
        quality.train_missing("tiny", runs.plan("tiny", ["can"]), max_steps=2)


def test_missing_runs_train_in_worker_processes_and_are_stored(folders, shared_data, monkeypatch, capsys):
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))  # the spawned workers inherit the environment
    out = folders / "out"
    todo = runs.plan("tiny", ["baseline", "can"], seeds=[1])
    assert quality.train_missing("tiny", todo, root=out, max_steps=2, jobs=2) == [r.name for r in todo]
    assert "training 2 tiny run(s) on cpu, 2 at a time" in capsys.readouterr().err
    for r in todo:
        prov = json.loads(stored_path(f"runs/{r.name}", "tiny", out).read_text())["provenance"]
        assert prov["reduced_budget"] and prov["budget"]["max_steps"] == 2
    assert quality.train_missing("tiny", todo, root=out, max_steps=2, jobs=2) == []


def test_a_run_that_fails_is_named_and_the_runs_before_it_stay_stored(folders, monkeypatch):
    done = []

    def fake(scale, spec, root, max_steps):
        if spec.system == "can":
            raise ValueError("diverged")
        done.append(spec.name)

    monkeypatch.setattr(quality, "_train_and_store", fake)
    monkeypatch.setattr(quality, "prepared", lambda scale, corpus: None)
    todo = runs.plan("tiny", ["baseline", "can", "san"], seeds=[1])
    with pytest.raises(RuntimeError, match="tiny run multi30k-en-de/can-seed1 failed: ValueError: diverged"):
        quality.train_missing("tiny", todo, root=folders / "out", jobs=1)
    failed = [r.system for r in todo].index("can")
    assert failed > 0 and done == [r.name for r in todo[:failed]]  # those before it were trained, none after
