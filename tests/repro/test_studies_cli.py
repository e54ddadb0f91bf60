"""``python -m repro experiment`` end to end at a reduced budget: files, resume, rescoring (real Multi30k data)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import missing as missing_data

from repro.cli import main
from repro.experiments.rescore import rescore
from repro.studies.store import Store

SYSTEMS, SEEDS = ("baseline", "can"), (1, 2)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """Two systems x two seeds at 4 updates with two worker processes, run once for the module:
    (results folder, command arguments, what the first run printed)."""
    from conftest import SHARED_DATA

    if not (SHARED_DATA / "multi30k-en-de").is_dir():
        missing_data("multi30k-en-de is not in the data folder")
    root = tmp_path_factory.mktemp("experiment")
    saved = os.environ.get("CANLIB_CACHE_DIR")
    saved_data = os.environ.get("CANLIB_DATA_DIR")
    os.environ["CANLIB_CACHE_DIR"] = str(root / "cache")
    os.environ["CANLIB_DATA_DIR"] = str(SHARED_DATA)  # offline: the workers read the real data there
    out = root / "out"
    args = [
        "experiment",
        "--scale",
        "tiny",
        "--max-steps",
        "4",
        "--jobs",
        "2",
        "--out",
        str(out),
        "--systems",
        ",".join(SYSTEMS),
        "--seeds",
        ",".join(map(str, SEEDS)),
        "--studies",
        "runs",
    ]
    try:
        import contextlib
        import io

        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main(args) == 0
        yield out, args, printed.getvalue()
    finally:
        for name, value in (("CANLIB_CACHE_DIR", saved), ("CANLIB_DATA_DIR", saved_data)):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def test_reduced_experiment_stores_every_run_with_provenance_and_hypotheses(experiment):
    out, _, printed = experiment
    assert "4 to train" in printed and printed.count("test sacreBLEU") == 4
    folder = out / "tiny" / "runs" / "multi30k-en-de"
    for system in SYSTEMS:
        for seed in SEEDS:
            stored = json.loads((folder / f"{system}-seed{seed}.json").read_text())
            result, prov = stored["result"], stored["provenance"]
            assert (result["system"], result["seed"], prov["seed"]) == (system, seed, seed)
            assert prov["reduced_budget"] and prov["budget"]["max_steps"] == 4 and prov["corpus"] == "multi30k-en-de"
            assert prov["commit"] and prov["device"] and prov["date"]
            assert result["params"] > 0 and result["log"] and set(result["scores"]) >= {"valid", "test"}
            hyps = (folder / result["hyp_files"]["test"]).read_text(encoding="utf-8").split("\n")[:-1]
            assert len(hyps) == result["lengths"]["test"]["sentences"]


def test_a_second_run_of_the_command_trains_nothing(experiment, capsys):
    _, args, _ = experiment
    assert main(args) == 0
    again = capsys.readouterr().out
    assert "4 already stored, 0 to train" in again and "test sacreBLEU" not in again


def test_rescoring_the_stored_hypotheses_reproduces_the_stored_scores(experiment, capsys):
    out = experiment[0]
    assert len(rescore(out)) == 8  # 4 runs x (valid, test)
    assert main(["rescore", str(out)]) == 0
    assert "8 stored sacreBLEU scores of 4 runs reproduced" in capsys.readouterr().out
    scores = Store("tiny", out, full_budget=False).scores(list(SYSTEMS))  # an end-to-end test's folder, read as such
    assert [len(scores[s]) for s in SYSTEMS] == [2, 2]  # a results folder is read, not trained: both stored seeds count
    assert Store("tiny", out).scores(list(SYSTEMS)) == {}  # its reduced-budget runs are never evidence


def test_rescore_fails_when_a_stored_score_differs(experiment, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(experiment[0], out)
    path = out / "tiny" / "runs" / "multi30k-en-de" / "can-seed1.json"
    stored = json.loads(path.read_text())
    stored["result"]["scores"]["test"]["bleu"] += 1.0
    path.write_text(json.dumps(stored))
    with pytest.raises(ValueError, match="can-seed1.json: stored test sacreBLEU"):
        rescore(out)
    assert main(["rescore", str(out)]) == 2
    assert "can-seed1.json" in capsys.readouterr().err


def test_hypotheses_of_a_stored_run_are_read_back_line_for_line(experiment):
    out = experiment[0]
    stored = json.loads((out / "tiny" / "runs" / "multi30k-en-de" / "can-seed2.json").read_text())["result"]
    store = Store("tiny", out, full_budget=False)
    hyps = store.hypotheses("can", "test", seed=2)
    assert len(hyps) == stored["lengths"]["test"]["sentences"]
    with pytest.raises(ValueError, match="test2017_flickr"):
        store.hypotheses("can", "test2017_flickr", seed=2)


def test_an_interrupted_run_resumes_from_its_checkpoints(tmp_path, monkeypatch, capsys, shared_data):
    """A run whose training stopped before the end (its last checkpoint kept, nothing stored) is
    continued from that checkpoint, not restarted."""
    if not (shared_data / "multi30k-en-de").is_dir():
        missing_data("multi30k-en-de is not in the data folder")
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    base = ["experiment", "--scale", "tiny", "--systems", "can", "--seeds", "1", "--studies", "runs"]
    from repro.experiments.run import run
    from repro.results.layout import Where

    # the "interrupted" run: 2 of 4 updates, checkpoint at 2
    assert main([*base, "--max-steps", "2", "--out", str(tmp_path / "out2")]) == 0
    first = run("can", Where.of("tiny", tmp_path / "out2", 2), 1).folder
    second = run("can", Where.of("tiny", tmp_path / "out4", 4), 1).folder
    shutil.copytree(first / "checkpoints", second / "checkpoints")
    for name in ("config.json", "log.jsonl", "vocab.model"):
        shutil.copy(first / name, second / name)
    config = json.loads((second / "config.json").read_text())  # as the 4-update run wrote it before it stopped
    config["train"]["valid_every"] = run("can", Where.of("tiny", tmp_path / "out4", 4), 1).budget["valid_every"]
    (second / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    assert main([*base, "--max-steps", "4", "--out", str(tmp_path / "out4")]) == 0
    assert "resumed from" in capsys.readouterr().err and "step_0000002.pt" in str(
        sorted((second / "checkpoints").iterdir())
    )
    log = [json.loads(line) for line in (second / "log.jsonl").read_text().splitlines() if line.strip()]
    assert [r["step"] for r in log if r.get("kind") == "valid"] == [2, 4]


def test_an_interrupted_and_resumed_experiment_equals_an_uninterrupted_one(tmp_path, monkeypatch, capsys, shared_data):
    """A 4-update run that validates and checkpoints every 2 updates is stopped right after its
    step-2 checkpoint (an exception raised there, as a killed process leaves it); running the
    command again continues it. Parameters, hypotheses and BLEU equal those of the run that was
    never stopped."""
    import torch

    import repro.experiments.run as runs
    from canlib.training.trainer import Trainer
    from repro.results.layout import Where

    if not (shared_data / "multi30k-en-de").is_dir():
        missing_data("multi30k-en-de is not in the data folder")
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    budget = runs.budget
    monkeypatch.setattr(runs, "budget", lambda *a, **kw: {**budget(*a, **kw), "valid_every": 2})
    args = [
        "experiment",
        "--scale",
        "tiny",
        "--systems",
        "can",
        "--seeds",
        "1",
        "--studies",
        "runs",
        "--max-steps",
        "4",
    ]
    folder = runs.run("can", Where.of("tiny", reduced=4), 1).folder
    stored = lambda out: tmp_path / out / "tiny" / "runs" / "multi30k-en-de"  # noqa: E731

    assert main([*args, "--out", str(tmp_path / "uninterrupted")]) == 0
    folder.rename(tmp_path / "uninterrupted_run")

    save = Trainer.save_checkpoint

    def save_then_die(self, is_best):
        path = save(self, is_best)
        if self.step == 2:
            raise RuntimeError("interrupted (test)")
        return path

    monkeypatch.setattr(Trainer, "save_checkpoint", save_then_die)
    assert main([*args, "--out", str(tmp_path / "resumed")]) != 0
    assert [p.name for p in (folder / "checkpoints").glob("step_*.pt")] == ["step_0000002.pt"]
    monkeypatch.setattr(Trainer, "save_checkpoint", save)
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "resumed")]) == 0
    assert "resumed from" in capsys.readouterr().err

    weights = lambda run: torch.load(run / "average.pt", weights_only=True)["model"]  # noqa: E731
    reference, resumed = weights(tmp_path / "uninterrupted_run"), weights(folder)
    assert list(resumed) == list(reference)
    assert all(torch.equal(resumed[k], reference[k]) for k in reference)
    for split in ("valid", "test"):
        hyp = f"can-seed1.{split}.hyp"
        assert (stored("resumed") / hyp).read_text() == (stored("uninterrupted") / hyp).read_text()
    scores = [
        json.loads((stored(out) / "can-seed1.json").read_text())["result"]["scores"]
        for out in ("uninterrupted", "resumed")
    ]
    assert scores[0] == scores[1]


def test_a_stored_run_of_another_budget_is_refused_not_reused(experiment, capsys):
    out, args, _ = experiment
    other = [a if a != "4" else "3" for a in args]
    assert main(other) == 2
    err = capsys.readouterr().err
    assert "another training budget" in err and "'max_steps': (4, 3)" in err
