"""``canlib experiment`` end to end at a reduced budget: files, resume, rescoring (real Multi30k data)."""
from __future__ import annotations

import json

import pytest

from canlib.cli import main
from canlib.studies.quality import rescore, seed_summary


@pytest.fixture
def experiment(tmp_path, monkeypatch, shared_data):
    """Two systems x two seeds at 4 updates, two worker processes, stored under tmp_path/out."""
    if not (shared_data / "multi30k-en-de").is_dir():
        pytest.skip("multi30k-en-de is not in the data folder")
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    args = ["experiment", "--scale", "tiny", "--max-steps", "4", "--jobs", "2", "--out", str(out),
            "--systems", "baseline,can", "--seeds", "1,2", "--studies", "runs"]
    return out, args


def test_reduced_experiment_stores_resumes_and_rescores(experiment, capsys):
    out, args = experiment
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "4 to train" in first and first.count("test sacreBLEU") == 4
    folder = out / "tiny" / "runs" / "multi30k-en-de"
    for system in ("baseline", "can"):
        for seed in (1, 2):
            stored = json.loads((folder / f"{system}-seed{seed}.json").read_text())
            result, prov = stored["result"], stored["provenance"]
            assert (result["system"], result["seed"], prov["seed"]) == (system, seed, seed)
            assert prov["reduced_budget"] and prov["budget"]["max_steps"] == 4 and prov["corpus"] == "multi30k-en-de"
            assert result["params"] > 0 and result["log"] and set(result["scores"]) >= {"valid", "test"}
            hyps = (folder / result["hyp_files"]["test"]).read_text(encoding="utf-8").split("\n")[:-1]
            assert len(hyps) == result["lengths"]["test"]["sentences"]

    assert main(args) == 0  # the second time every run is stored: nothing is trained
    again = capsys.readouterr().out
    assert "4 already stored, 0 to train" in again and "test sacreBLEU" not in again

    rows = rescore(out)
    assert len(rows) == 8  # 4 runs x (valid, test)
    summary = seed_summary("tiny", ["baseline", "can"], root=out)
    assert list(summary["n"]) == [1, 1]  # at tiny, only the seed-1 run counts

    assert main(["experiment", "--rescore", str(out)]) == 0
    assert "8 stored sacreBLEU scores of 4 runs reproduced" in capsys.readouterr().out


def test_rescore_fails_when_a_stored_score_differs(experiment, capsys):
    out, args = experiment
    args = [a if a != "1,2" else "1" for a in args]
    args[args.index("baseline,can")] = "can"
    assert main(args) == 0
    path = out / "tiny" / "runs" / "multi30k-en-de" / "can-seed1.json"
    stored = json.loads(path.read_text())
    stored["result"]["scores"]["test"]["bleu"] += 1.0
    path.write_text(json.dumps(stored))
    with pytest.raises(ValueError, match="can-seed1.json: stored test sacreBLEU"):
        rescore(out)
    capsys.readouterr()
    assert main(["experiment", "--rescore", str(out)]) == 2
    assert "can-seed1.json" in capsys.readouterr().err
