"""The beyond studies (training budget, distillation, CAN on 6/6): their plan, their end-to-end dry run at tiny,
the rescore that covers them (how the chapter judges and renders stored results: tests/test_beyond_reader.py)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil

import pytest

from canlib.cli import main
from canlib.studies import beyond


# -- the plan --------------------------------------------------------------------------------------

def test_the_studies_train_24_models_with_the_teacher_before_its_students():
    runs = {name: beyond.study_runs(name) for name in beyond.STUDIES}
    assert [len(runs[n]) for n in ("budget", "distill", "can-6-6")] == [2 * 2 * 2, 1 + 4 * 3, 3]
    assert runs["distill"][0].tag == "teacher" and runs["distill"][0].system == "balanced"
    assert {r.system for r in runs["distill"][1:]} == {"balanced", "san", "aan", "can"}
    assert {(r.system, r.tag) for r in runs["budget"]} == {(s, t) for s in ("balanced", "can") for t in ("x2", "x4")}
    assert len({r.name for rs in runs.values() for r in rs}) == 24  # every model has its own stored name
    with pytest.raises(ValueError, match="choose from budget, distill, can-6-6"):
        beyond.study_runs("telepathy")


def test_budget_runs_multiply_the_updates_and_keep_the_schedule():
    small = {"lr": 1e-3, "warmup": 500, "max_steps": 1200, "valid_every": 400}  # the measured small recipe
    for tag, steps in (("x2", 2400), ("x4", 4800)):
        cfg = beyond.train_config("small", beyond.BeyondRun("budget", "can", 2, tag))
        assert (cfg["max_steps"], cfg["lr"], cfg["warmup"], cfg["valid_every"], cfg["seed"]) == (
            steps, small["lr"], small["warmup"], small["valid_every"], 2)
    assert beyond.train_config("small", beyond.BeyondRun("can-6-6", "can-6-6", 1))["max_steps"] == small["max_steps"]
    reduced = beyond.train_config("tiny", beyond.BeyondRun("budget", "balanced", 1, "x4"), max_steps=3)
    assert (reduced["max_steps"], reduced["valid_every"]) == (12, 3)  # 4 x 3 updates, validated 4 times


def test_can_6_6_preset_is_the_baseline_depth_with_can_decoder_layers():
    from canlib.model.config import preset
    from canlib.model.seq2seq import Seq2Seq

    for name, d in (("can-6-6", 512), ("small-can-6-6", 256), ("tiny-can-6-6", 64)):
        cfg = preset(name, vocab_size=100)
        assert (cfg.enc_layers, cfg.dec_layers, cfg.decoder_kind, cfg.d_model) == (6, 6, "can", d)
    model = Seq2Seq(preset("tiny-can-6-6", vocab_size=100))
    assert len(model.encoder_layers) == 6 and len(model.decoder_layers) == 6
    assert {type(layer).__name__ for layer in model.decoder_layers} == {"CANDecoderLayer"}


# -- the dry run: real training at tiny, a reduced budget -------------------------------------------

@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """``canlib experiment --scale tiny --studies budget,distill,can-6-6 --max-steps 2 --seeds 1``, once."""
    from tests.conftest import SHARED_DATA

    if not (SHARED_DATA / "multi30k-en-de").is_dir():
        pytest.skip("multi30k-en-de is not in the data folder")
    root = tmp_path_factory.mktemp("beyond")
    saved = {k: os.environ.get(k) for k in ("CANLIB_CACHE_DIR", "CANLIB_DATA_DIR")}
    os.environ["CANLIB_CACHE_DIR"], os.environ["CANLIB_DATA_DIR"] = str(root / "cache"), str(SHARED_DATA)
    out = root / "out"
    try:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main(["experiment", "--scale", "tiny", "--studies", "budget,distill,can-6-6", "--max-steps", "2",
                         "--seeds", "1", "--out", str(out)]) == 0
        yield out, printed.getvalue()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_dry_run_stores_every_model_and_summary_with_provenance(dry_run):
    out, printed = dry_run
    assert "10 models, 0 already stored, 10 to train" in printed
    folder = out / "tiny" / "beyond"
    for name in beyond.STUDIES:
        summary = json.loads((folder / f"{name}.json").read_text())
        assert summary["provenance"]["commit"] and summary["provenance"]["date"] and summary["provenance"]["reduced_budget"]
        for row in summary["result"]["runs"]:
            stored = json.loads((out / "tiny" / f"{row['file']}.json").read_text())
            result, prov = stored["result"], stored["provenance"]
            assert prov["commit"] and prov["device"] and prov["reduced_budget"] and prov["seed"] == 1
            steps = 2 * (int(row["tag"][1:]) if name == "budget" else 1)
            assert prov["budget"]["max_steps"] == steps == result["training"]["step"]
            for split in ("valid", "test"):
                hyps = (out / "tiny" / row["file"]).with_name(result["hyp_files"][split]).read_text().split("\n")[:-1]
                assert len(hyps) == result["lengths"][split]["sentences"]
            if name == "budget":  # validated 4 times, every steps // 4 updates, with greedy BLEU
                assert [p["step"] for p in row["curve"]] == [steps // 4 * i for i in range(1, 5)]
                assert all(p["valid_bleu"] is not None and p["valid_loss"] > 0 for p in row["curve"])


def test_dry_run_records_the_distilled_corpus_and_its_teacher(dry_run):
    out, _ = dry_run
    summary = json.loads((out / "tiny" / "beyond" / "distill.json").read_text())["result"]
    teacher = summary["teacher"]
    assert (teacher["teacher"], teacher["beam"], teacher["pairs"]) == ("balanced", 4, beyond.REDUCED_PAIRS)
    assert len(teacher["sha256"]) == 64 and summary["corpora"] == [teacher["sha256"]]
    # the BLEU recorded with the corpus is the teacher model's: the stored teacher run translated the same test set
    teacher_run = json.loads((out / "tiny" / "beyond" / "runs" / "multi30k-en-de" /
                              "distill-balanced-teacher-seed1.json").read_text())["result"]
    assert teacher["teacher_bleu"]["test"]["bleu"] == pytest.approx(teacher_run["scores"]["test"]["bleu"])
    students = [r for r in summary["runs"] if r["tag"] == "kd"]
    assert sorted(r["system"] for r in students) == sorted(beyond.STUDENTS)


def test_rescore_recomputes_every_model_of_the_studies_and_rechecks_the_summaries(dry_run, tmp_path, capsys):
    from canlib.studies.quality import rescore

    out = tmp_path / "out"
    shutil.copytree(dry_run[0], out)
    assert len(rescore(out)) == 10 * 2  # 10 models x (valid, test), recomputed from their hypotheses
    assert main(["experiment", "--rescore", str(out)]) == 0
    assert "20 stored sacreBLEU scores of 10 runs reproduced" in capsys.readouterr().out
    path = out / "tiny" / "beyond" / "can-6-6.json"
    stored = json.loads(path.read_text())
    stored["result"]["runs"][0]["scores"]["test"]["bleu"] += 1.0  # a summary quoting another score than its run
    path.write_text(json.dumps(stored))
    with pytest.raises(ValueError, match="can-6-6.json: the scores of beyond/runs/multi30k-en-de/can-6-6-can-6-6-seed1"):
        beyond.recheck(out)
    assert main(["experiment", "--rescore", str(out)]) == 2
