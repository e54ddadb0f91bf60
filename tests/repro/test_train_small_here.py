"""The one explicit call that trains what a chapter reads (``repro.experiments.experiment.train_missing``): at
tiny
it trains on any machine, at small where small trains (a CUDA device); the chapter's loaders only read. On a CPU a
missing small result names the command and nothing trains. Tested on a CPU by forcing the device selection
(``CANLIB_TRAIN_SMALL=1``) with the small scale shrunk to a tiny budget, in temporary results and cache folders
(book/results is never touched)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from _code.readers import default_scale, similarity
from canlib import catalogue
from repro.experiments import pool
from repro.experiments.experiment import TRAIN_HERE_ENV, train_missing, trains_here
from repro.results import plan
from repro.results.layout import Where
from repro.studies.store import Store

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
    spec = catalogue._SCALES["small"]
    monkeypatch.setitem(
        catalogue._SCALES,
        "small",
        dataclasses.replace(
            spec,
            corpus_scale="tiny",
            beam=1,
            train=dict(
                lr=1e-3,
                warmup=2,
                max_tokens=1024,
                max_steps=3,
                valid_every=3,
                log_every=1,
                keep_last=1,
                average_last=1,
                progress=False,
            ),
        ),
    )
    monkeypatch.setitem(plan._PLANS, "small", dataclasses.replace(plan._PLANS["small"], seeds=2))
    return folders


def stored_runs(root) -> list[str]:
    folder = root / "results" / "small" / "runs" / MAIN
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


@pytest.mark.parametrize(
    "flag, cuda, scale, expected",
    [
        ("", True, "small", True),
        ("", False, "small", False),
        ("1", False, "small", True),
        ("0", True, "small", False),
        ("", False, "tiny", True),
        ("0", False, "tiny", True),
        ("", True, "full", False),
        ("1", True, "full", False),
    ],
)
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

    monkeypatch.setattr(pool, "train_and_store", no_training)
    with pytest.raises(FileNotFoundError, match="python -m repro experiment --scale small --studies runs"):
        train_missing("small", ["can"], seeds=[1])
    with pytest.raises(FileNotFoundError, match="errors"):
        train_missing("small", analyses_=["errors"])
    assert default_scale(["can"], seeds=[1]) == "tiny" and default_scale(analyses=["errors"]) == "tiny"
    with pytest.raises(FileNotFoundError, match="python -m repro experiment --scale small"):
        Store("small").run("can")
    assert Store("small").scores(["can"]) == {}
    assert not (folders / "results").exists() and capsys.readouterr().err == ""


def test_the_explicit_call_trains_and_stores_exactly_what_a_chapter_reads(small_in_seconds, capsys):
    root = small_in_seconds
    # a CPU forced to stand for a CUDA device: the training chapter's call, then its loaders
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(TRAIN_HERE_ENV, "1")
        assert train_missing("small", ["baseline"], seeds=[1]) == [f"runs/{MAIN}/baseline-seed1"]
        assert "multi30k-en-de baseline seed 1: test sacreBLEU" in capsys.readouterr().err  # one line per run
        assert stored_runs(root) == ["baseline-seed1"]
        result, prov = Store("small").run("baseline")
        stored = json.loads(Where.of("small").path(f"runs/{MAIN}/baseline-seed1").read_text())
        assert stored["result"]["scores"] == result["scores"] and stored["provenance"]["date"] == prov["date"]
        assert (prov["scale"], prov["budget"]["max_steps"], prov["reduced_budget"]) == ("small", 3, False)
        assert (
            prov["device"].startswith("CPU") and prov["precision"] == "fp32"
        )  # trained on the device it was forced to
        # the hypotheses beside it, as `python -m repro experiment` writes them
        for split in result["hyp_files"].values():
            assert (root / "results" / "small" / "runs" / MAIN / split).is_file()
        assert default_scale(["baseline"], seeds=[1]) == "small"
        assert train_missing("small", ["baseline"], seeds=[1]) == [] and capsys.readouterr().err == ""  # stored
        # every planned seed: the missing seed 2 is trained, seed 1 is not again
        assert train_missing("small", ["baseline"]) == [f"runs/{MAIN}/baseline-seed2"]
        # an analysis: computed from the stored seed-1 run, whose weights this machine holds
        assert train_missing("small", analyses_=["similarity"]) == []
        study, prov = similarity(Store("small"))
        assert prov["scale"] == "small" and set(study) == {"residual", "normalized"}
    assert stored_runs(root) == ["baseline-seed1", "baseline-seed2"]  # nothing else was trained


def test_reduced_budgets_never_go_to_the_default_results_folder(folders):
    with pytest.raises(ValueError, match="needs a results folder of its own"):
        train_missing("small", ["can"], reduced=2)
