"""The beyond studies (training budget, distillation, CAN on 6/6) and the next experiments (distillation from the 2x
Balanced, 12/2 hybrids, CAN keeping its attention residual): their plan, their end-to-end dry run at tiny, the
rescore that covers them (how the chapter judges and renders stored results: tests/repro/test_beyond_reader.py)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil

import pytest

from repro.cli import main
from repro.experiments import beyond as engine
from repro.experiments.rescore import recheck, rescore
from repro.results import studies as beyond  # the study table: the studies as data
from repro.results.layout import Where, model_name

SMALL = Where.of("small")

# -- the plan --------------------------------------------------------------------------------------


def test_the_studies_train_their_models_with_the_teacher_before_its_students():
    runs = {name: beyond.study_record(name).models() for name in beyond.STUDIES}
    assert [len(runs[n]) for n in beyond.STUDIES] == [2 * 3, 1 + 4 * 3, 3, 2 * 3, 2 * 3, 3, 2 * 3]
    assert runs["distill"][0] == ("balanced", "teacher", 1)
    assert {s for s, _, _ in runs["distill"][1:]} == {"balanced", "san", "aan", "can"}
    assert {(s, t) for s, t, _ in runs["budget"]} == {("balanced", "x2"), ("can", "x2")}  # 1x is the main plan; no 4x
    assert {t for _, t, _ in runs["hybrid"]} == {"std-can", "can-std"}
    assert {(s, t) for s, t, _ in runs["averaging"]} == {("balanced", "last"), ("can", "last")}
    names = [model_name(name, *m) for name in beyond.STUDIES for m in beyond.study_record(name).models()]
    assert len(set(names)) == len(names) == 43  # every model has its own stored name
    with pytest.raises(ValueError, match="choose from budget, distill, can-6-6"):
        beyond.study_record("telepathy").models()


def test_budget_runs_multiply_the_updates_and_keep_the_schedule():
    small = {"lr": 1e-3, "warmup": 500, "max_steps": 1200, "valid_every": 400}  # the measured small recipe
    x2 = engine.study_runs("budget", SMALL, [2])[1]
    cfg = x2.budget
    assert (x2.system, cfg["max_steps"], cfg["lr"], cfg["warmup"], cfg["valid_every"], cfg["seed"]) == (
        "can",
        2400,
        small["lr"],
        small["warmup"],
        small["valid_every"],
        2,
    )
    assert engine.study_runs("can-6-6", SMALL)[0].steps == small["max_steps"]
    reduced = engine.study_runs("budget", Where.of("tiny", reduced=3), [1])[0].budget
    assert (reduced["max_steps"], reduced["valid_every"]) == (6, 1)  # 2 x 3 updates, validated 4 times (every 6 // 4)


def test_the_next_experiments_train_at_2x_with_their_decoders_and_the_stronger_teacher():
    x2_teacher = engine.study_runs("budget", SMALL, [1])[0]
    for run in engine.study_runs("distill-x2", SMALL):
        assert run.steps == 2400 and run.variant.targets == "distilled" and run.variant.parent == x2_teacher
        assert run.config["distilled"]["teacher_run"] == "beyond/runs/multi30k-en-de/budget-balanced-x2-seed1"
    hybrids = engine.study_runs("hybrid", SMALL)
    assert {r.variant.tag: r.variant.decoder for r in hybrids} == {
        "std-can": ("standard", "can"),
        "can-std": ("can", "standard"),
    }
    assert {(r.system, r.steps) for r in hybrids} == {("balanced", 2400)}
    residual = engine.study_runs("can-residual", SMALL)
    assert {(r.system, r.steps, r.variant.decoder) for r in residual} == {
        ("can", 2400, ("can_residual", "can_residual"))
    }


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
    """``python -m repro experiment --scale tiny --studies <every study> --max-steps 2 --seeds 1``, once."""
    from conftest import SHARED_DATA

    if not (SHARED_DATA / "multi30k-en-de").is_dir():
        pytest.skip("multi30k-en-de is not in the data folder")
    root = tmp_path_factory.mktemp("beyond")
    saved = {k: os.environ.get(k) for k in ("CANLIB_CACHE_DIR", "CANLIB_DATA_DIR")}
    os.environ["CANLIB_CACHE_DIR"], os.environ["CANLIB_DATA_DIR"] = str(root / "cache"), str(SHARED_DATA)
    out = root / "out"
    try:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert (
                main(
                    [
                        "experiment",
                        "--scale",
                        "tiny",
                        "--studies",
                        ",".join(beyond.STUDIES),
                        "--max-steps",
                        "2",
                        "--seeds",
                        "1",
                        "--out",
                        str(out),
                    ]
                )
                == 0
            )
        yield out, printed.getvalue()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


MODELS = (
    2 + 5 + 1 + 2 + 2 + 1 + 2
)  # budget, distill (teacher + 4), can-6-6, distill-x2, hybrid, can-residual, averaging
TWICE = ("budget", "distill-x2", "hybrid", "can-residual")  # the studies trained at 2x the updates (averaging: 1x)


def test_dry_run_stores_every_model_and_summary_with_provenance(dry_run):
    out, printed = dry_run
    assert f"{MODELS} runs, 0 already stored, {MODELS} to train" in printed
    folder = out / "tiny" / "beyond"
    for name in beyond.STUDIES:
        summary = json.loads((folder / f"{name}.json").read_text())
        assert (
            summary["provenance"]["commit"]
            and summary["provenance"]["date"]
            and summary["provenance"]["reduced_budget"]
        )
        assert [r["file"].rsplit("/", 1)[1] for r in summary["result"]["runs"]] == [
            model_name(name, *m) for m in beyond.study_record(name).models([1])
        ]
        for row in summary["result"]["runs"]:
            stored = json.loads((out / "tiny" / f"{row['file']}.json").read_text())
            result, prov = stored["result"], stored["provenance"]
            assert prov["commit"] and prov["device"] and prov["reduced_budget"] and prov["seed"] == 1
            steps = 2 * (2 if name in TWICE else 1)
            assert prov["budget"]["max_steps"] == steps == result["training"]["step"]
            assert ("weights" in prov["config"]) == (
                name == "averaging"
            )  # the scored weights are named where not averaged
            for split in ("valid", "test"):
                hyps = (out / "tiny" / row["file"]).with_name(result["hyp_files"][split]).read_text().split("\n")[:-1]
                assert len(hyps) == result["lengths"][split]["sentences"]
            if name in TWICE:  # validated 4 times, every steps // 4 updates, with greedy BLEU
                assert [p["step"] for p in row["curve"]] == [steps // 4 * i for i in range(1, 5)]
                assert all(p["valid_bleu"] is not None and p["valid_loss"] > 0 for p in row["curve"])


def test_dry_run_trains_each_next_experiment_with_its_own_decoder(dry_run):
    out, _ = dry_run
    runs = out / "tiny" / "beyond" / "runs" / "multi30k-en-de"
    for name, layers in (
        ("hybrid-balanced-std-can-seed1", ["standard", "can"]),
        ("hybrid-balanced-can-std-seed1", ["can", "standard"]),
        ("can-residual-can-seed1", ["can_residual", "can_residual"]),
    ):
        stored = json.loads((runs / f"{name}.json").read_text())
        assert stored["result"]["decoder_layers"] == stored["provenance"]["config"]["decoder_layers"] == layers
    # a different decoder is a different model: the parameter counts say so
    params = {
        n: json.loads((runs / f"{n}.json").read_text())["result"]["params"]
        for n in (
            "hybrid-balanced-std-can-seed1",
            "can-residual-can-seed1",
            "budget-can-x2-seed1",
            "budget-balanced-x2-seed1",
        )
    }
    # a CAN layer holds more weights than a standard one (19 d^2 against 16 d^2 at ffn = 4d), so the hybrid lies between
    assert params["budget-balanced-x2-seed1"] < params["hybrid-balanced-std-can-seed1"] < params["budget-can-x2-seed1"]
    assert params["can-residual-can-seed1"] > params["budget-can-x2-seed1"]


@pytest.mark.parametrize(
    "study, teacher", [("distill", "distill-balanced-teacher-seed1"), ("distill-x2", "budget-balanced-x2-seed1")]
)
def test_dry_run_records_the_distilled_corpus_and_its_teacher(dry_run, study, teacher):
    out, _ = dry_run
    summary = json.loads((out / "tiny" / "beyond" / f"{study}.json").read_text())["result"]
    record = summary["teacher"]
    assert (record["teacher"], record["beam"], record["pairs"]) == ("balanced", 4, beyond.REDUCED_PAIRS)
    assert len(record["sha256"]) == 64 and summary["corpora"] == [record["sha256"]]
    # the BLEU recorded with the corpus is the teacher model's: its stored run translated the same test set
    teacher_run = json.loads((out / "tiny" / "beyond" / "runs" / "multi30k-en-de" / f"{teacher}.json").read_text())[
        "result"
    ]
    assert record["teacher_bleu"]["test"]["bleu"] == pytest.approx(teacher_run["scores"]["test"]["bleu"])
    assert record["teacher_train"]["max_steps"] == teacher_run["training"]["step"]
    students = [r for r in summary["runs"] if r["tag"] == "kd"]
    assert sorted(r["system"] for r in students) == sorted(
        beyond.STUDENTS if study == "distill" else beyond.study_record("distill-x2").systems
    )


def test_rescore_recomputes_every_model_of_the_studies_and_rechecks_the_summaries(dry_run, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(dry_run[0], out)
    assert len(rescore(out)) == MODELS * 2  # (valid, test) of every model, recomputed from their hypotheses
    assert main(["rescore", str(out)]) == 0
    assert f"{MODELS * 2} stored sacreBLEU scores of {MODELS} runs reproduced" in capsys.readouterr().out
    path = out / "tiny" / "beyond" / "can-6-6.json"
    stored = json.loads(path.read_text())
    stored["result"]["runs"][0]["scores"]["test"]["bleu"] += 1.0  # a summary quoting another score than its run
    path.write_text(json.dumps(stored))
    with pytest.raises(
        ValueError, match="can-6-6.json: the scores of beyond/runs/multi30k-en-de/can-6-6-can-6-6-seed1"
    ):
        recheck(out)
    assert main(["rescore", str(out)]) == 2
