"""The experiment engine: a run is a frozen value, loading never trains, and the engine asks for exactly what is
stored; the readers find what the engine stores."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_toy_corpus

from _code import beyond
from repro.experiments import analyses as engine_analyses
from repro.experiments import beyond as engine_beyond
from repro.experiments import estimate, summarise
from repro.experiments.run import MAIN, Run, Variant, load, plan, run, trained
from repro.results import studies as table
from repro.results.files import load_result
from repro.results.layout import Where, model_name

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "book" / "results" / "small"
STORED = Where("small", SMALL.parent)  # the stored small results, read in place
# what loading must never import: the trainer, data preparation and downloads, decoding, the engine's verbs
NEVER_LOADED = (
    "canlib.training",
    "canlib.data.preparation",
    "canlib.data.download",
    "canlib.decoding",
    "repro.bench",
    "repro.experiments.train",
    "repro.experiments.evaluate",
    "repro.experiments.pool",
    "repro.experiments.distill",
    "repro.experiments.corpus",
    "repro.experiments.experiment",
    "repro.experiments.analyses",
    "repro.experiments.summarise",
    "repro.experiments.estimate",
    "repro.experiments.rescore",
)


def test_a_run_is_a_frozen_value_with_its_paths():
    r = run("can", STORED, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.seed = 3  # type: ignore[misc]
    assert r == run("can", STORED, 2) and hash(r) == hash(run("can", STORED, 2)) and r != run("can", STORED, 3)
    assert (r.preset, r.corpus, r.steps, r.variant) == ("small-can", "multi30k-en-de", 1200, MAIN)
    assert r.name == "runs/multi30k-en-de/can-seed2" and r.result_path == SMALL / "runs/multi30k-en-de/can-seed2.json"
    x2 = run("can", STORED, 2, variant=Variant("budget", "x2", budget_factor=2, valid_bleu=True))
    assert x2.steps == 2400 and x2.budget["lr"] == r.budget["lr"] and x2.budget["warmup"] == r.budget["warmup"]
    assert x2.name == "beyond/runs/multi30k-en-de/budget-can-x2-seed2" and x2.folder != r.folder
    with pytest.raises(ValueError, match="parent run"):
        Variant("distill", "kd", targets="distilled")


def test_a_study_model_that_trains_like_a_plan_run_shares_its_training_folder():
    """The distillation teacher's row is the main plan's Balanced seed 1: trained once, evaluated under both names."""
    teacher_row, student = engine_beyond.study_runs("distill", STORED)[:2]
    main = run("balanced", STORED, 1)
    assert teacher_row.name != main.name and teacher_row.folder == main.folder
    assert student.variant.parent == main and student.folder != main.folder
    hybrid = engine_beyond.study_runs("hybrid", STORED)[0]
    cfg = hybrid.model_config(100)
    assert (cfg.decoder_kind, cfg.layer_kinds(), cfg.enc_layers) == ("mixed", ("standard", "can"), 12)
    residual = engine_beyond.study_runs("can-residual", STORED)[0].model_config(100)
    assert residual.layer_kinds() == ("can_residual", "can_residual")


@pytest.mark.parametrize("name", table.STUDIES)
def test_the_engine_trains_the_models_the_readers_name(name):
    assert [r.name.rsplit("/", 1)[1] for r in engine_beyond.study_runs(name, STORED)] == [
        model_name(name, *m) for m in table.study_record(name).models()
    ]


def test_the_engine_asks_for_exactly_the_configuration_of_every_stored_run():
    """Every stored small run (the plan's and the beyond studies') is one the engine plans, stored with the
    configuration the engine's Run value gives it today, so they load unchanged and `python -m repro experiment` skips
    them."""
    runs = plan(STORED, corpora_=["multi30k-en-de"]) + [
        r for n in table.STUDIES for r in engine_beyond.study_runs(n, STORED)
    ]
    stored = {r.name: r for r in runs if r.result_path.is_file()}
    on_disk = {str(p.relative_to(SMALL).with_suffix("")) for p in SMALL.rglob("runs/*/*.json")}
    assert on_disk == set(stored)
    for name, r in stored.items():
        config = load(r)[1]["config"]
        assert {k: v for k, v in config.items() if k != "code_version"} == json.loads(json.dumps(r.config)), name


def test_loading_every_stored_result_imports_no_training_or_data_preparation(tmp_path):
    """In a fresh interpreter: every stored JSON, every reader a chapter calls at small, and the engine's load verb
    for every stored run. None of it may import the trainer, data preparation, decoding or the engine's verbs."""
    code = f"""
import json, sys
from pathlib import Path
from repro.experiments.run import load, plan
from repro.results.layout import Where, model_name
sys.path.insert(0, {str(REPO / "book")!r})  # the pages' glue: the readers a chapter calls beside the store
from _code import beyond, readers
from repro.studies import claims
from repro.studies.store import Store
from repro.results.files import load_result
from canlib.catalogue import ALL_SYSTEMS
loaded = 0
for path in sorted(Path({str(REPO / "book" / "results")!r}).rglob("*.json")):
    load_result(path)
    loaded += 1
for r in plan(Where.of("small"), corpora_=["multi30k-en-de"]):
    if r.result_path.is_file():
        load(r)
        loaded += 1
store = Store("small")
scores = store.scores(ALL_SYSTEMS)
hyps = store.hypotheses("can", "test", 1)
scale = readers.default_scale(["balanced", "can"]), readers.default_scale(analyses=["errors"])
studies = [readers.similarity(store), readers.error_buckets(store), readers.attention_study(store)]
sums = [name for name, shown in beyond.shown(store).items() if shown]  # (BLEU verdicts also read references)
x2 = [store.log(f) for s in ("balanced", "can") for f in store.budget_runs(s, 2).files]
gpu = [store.gpu_speed(mode, run) for run in store.gpu_runs_with("speed") for mode in ("eager", "captured")]
speed = [claims.judged(store)[c].word for c in ("can-faster", "inputs-alike", "gate-decisive", "loss-still-falling")]
print(json.dumps({{"loaded": loaded, "systems": len(scores), "sums": len(sums), "hyps": len(hyps),
                  "modules": sorted(m for m in sys.modules if m.startswith("canlib"))}}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={**__import__("os").environ, "CANLIB_RESULTS_DIR": str(REPO / "book" / "results")},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    stored = len(list((REPO / "book" / "results").rglob("*.json")))
    plan_runs = len(list((SMALL / "runs" / "multi30k-en-de").glob("*.json")))  # loaded again through the engine
    assert (
        report["loaded"] == stored + plan_runs
        and report["systems"] == 9
        and report["sums"] == 3
        and report["hyps"] == 1000
    )
    assert [m for m in report["modules"] if m.startswith(NEVER_LOADED)] == []


def test_a_reader_never_trains_a_missing_result_it_names_the_call_that_stores_it(tmp_path, monkeypatch):
    from _code.readers import error_buckets
    from repro.studies.store import Store

    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))  # an empty tiny folder: nothing trained here
    with pytest.raises(FileNotFoundError, match="python -m repro experiment --scale tiny --systems can --seeds 1"):
        Store("tiny").run("can")
    with pytest.raises(FileNotFoundError, match=r"train_missing\(SCALE, analyses_=\['errors'\]\)"):
        error_buckets(Store("tiny"))
    assert beyond.default_scale(tmp_path) == "tiny"  # nothing stored: the chapter says so, it trains nothing
    with pytest.raises(FileNotFoundError, match="is not trained on this machine"):
        trained(run("can", Where.of("tiny")))
    assert not list(tmp_path.rglob("*.pt"))


def test_the_budget_summary_is_the_stored_2x_runs_summarised(tmp_path):
    """book/results/small/beyond/budget.json (no training: `python -m repro summarise --scale small --studies budget`)
    quotes the stored 2x runs' scores and curves, and says which commit and device trained them; summarising the same
    runs again gives the same rows."""
    summary, prov = load_result(SMALL / "beyond" / "budget.json")
    rows = {r["file"]: r for r in summary["runs"]}
    on_disk = sorted(
        p.with_suffix("").name for p in (SMALL / "beyond" / "runs" / "multi30k-en-de").glob("budget-*.json")
    )
    assert sorted(f.rsplit("/", 1)[1] for f in rows) == on_disk
    for name, row in rows.items():
        result, run_prov = load_result(SMALL / f"{name}.json")
        assert row["scores"] == {s: {k: v[k] for k in ("bleu", "tok_bleu")} for s, v in result["scores"].items()}
        assert row["curve"] == [
            {"step": p["step"], "valid_loss": p["valid_loss"], "valid_bleu": p["valid_bleu"]}
            for p in result["log"]
            if p.get("kind") == "valid"
        ]
        assert run_prov["commit"] in prov["models"]["commit"] and run_prov["device"] in prov["models"]["device"]
    seeds = sorted({int(f.rsplit("seed", 1)[1]) for f in rows})
    assert summary["factors"] == [2] and summary["base_steps"] == 1200 and prov["config"]["seeds"] == seeds
    assert prov["models"]["commit"] == sorted({load_result(SMALL / f"{f}.json")[1]["commit"] for f in rows})
    shutil_copy = __import__("shutil").copytree
    shutil_copy(SMALL / "beyond" / "runs", tmp_path / "small" / "beyond" / "runs")
    assert summarise.summarise("budget", Where("small", tmp_path))[0]["runs"] == summary["runs"]
    (tmp_path / "small" / "beyond" / "budget.json").unlink()
    from repro.cli import main

    assert main(["summarise", "--scale", "small", "--studies", "budget", "--out", str(tmp_path)]) == 0
    assert load_result(tmp_path / "small" / "beyond" / "budget.json")[0]["runs"] == summary["runs"]


def test_the_validation_loss_of_every_stored_2x_run_turns_up_before_2400_updates():
    """Why the budget study stops at 2x (its docstring): in each stored 2x run the validation loss is lowest at
    1,600 or 2,000 updates and higher at 2,400 than at 2,000, so a 4x run would train on past the turn."""
    for path in sorted((SMALL / "beyond" / "runs" / "multi30k-en-de").glob("budget-*-x2-seed*.json")):
        curve = {p["step"]: p["valid_loss"] for p in load_result(path)[0]["log"] if p.get("kind") == "valid"}
        assert min(curve, key=curve.get) in (1600, 2000) and curve[2400] > curve[2000], path.name


def test_the_gpu_minutes_come_from_the_measured_rate():
    rate, where = estimate.measured_rate(STORED)
    runs = [
        load_result(p)[0]["training"] for p in (SMALL / "beyond" / "runs" / "multi30k-en-de").glob("budget-*-x2-*.json")
    ]
    assert rate == pytest.approx(sum(r["step"] for r in runs) / max(r["wall_s"] for r in runs))
    lines = estimate.estimate(["hybrid"], STORED, rate=60.0)
    assert lines == [
        "hybrid: 6 model(s) to train, 14,400 updates: ~4.0 GPU-minutes at 60 updates/s"
    ]  # 6 x 2,400 / 60 / 60


def test_a_plan_on_your_own_corpus_trains_the_systems_you_name(tmp_path, monkeypatch):
    from canlib.data.corpora import register_files

    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    for stem in ("train", "valid", "test"):
        for lang in ("en", "de"):
            (tmp_path / f"{stem}.{lang}").write_text("a b\n")
    register_files("mine", tmp_path, "en", "de")
    runs = plan(Where.of("tiny"), ["can", "balanced"], seeds=[1, 2], corpora_=["mine"])
    assert [(r.system, r.seed, r.corpus) for r in runs] == [
        ("can", 1, "mine"),
        ("balanced", 1, "mine"),
        ("can", 2, "mine"),
        ("balanced", 2, "mine"),
    ]
    assert isinstance(runs[0], Run) and runs[0].name == "runs/mine/can-seed1"
    with pytest.raises(ValueError, match="canlib data prepare NAME --files"):
        plan(Where.of("tiny"), ["can"], corpora_=["theirs"])


# -- a researcher's own corpus, end to end ----------------------------------------------------------


def test_your_own_corpus_of_plain_files_trains_and_evaluates_end_to_end_at_tiny(tmp_path, monkeypatch, capsys):
    from canlib.cli import main as canlib_main
    from repro.cli import main
    from repro.experiments.rescore import rescore
    from repro.studies.store import Store

    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    files = write_toy_corpus(tmp_path / "my-en-de", {"train": 120, "valid": 12, "test": 10})
    assert (
        canlib_main(
            [
                "data",
                "prepare",
                "toy",
                "--files",
                str(files),
                "--src",
                "en",
                "--tgt",
                "de",
                "--vocab-size",
                "60",
                "--scale",
                "tiny",
            ]
        )
        == 0
    )
    assert "valid" in capsys.readouterr().out  # the Table 1 statistics of the prepared corpus
    out = tmp_path / "out"
    assert (
        main(
            [
                "experiment",
                "--scale",
                "tiny",
                "--corpora",
                "toy",
                "--systems",
                "can,balanced",
                "--seeds",
                "1",
                "--studies",
                "runs",
                "--max-steps",
                "3",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "2 runs, 0 already stored, 2 to train" in printed and printed.count("test sacreBLEU") == 2
    store = Store("tiny", out, full_budget=False)  # an end-to-end test's folder: its reduced-budget runs are read
    for system in ("can", "balanced"):
        result, prov = store.run(system, 1, "toy")
        assert (result["corpus"], result["src_lang"], result["tgt_lang"], prov["corpus"]) == ("toy", "en", "de", "toy")
        assert result["lengths"]["valid"]["sentences"] == 12 and result["lengths"]["test"]["sentences"] == 10
        assert prov["budget"]["max_steps"] == result["training"]["step"] == 3
        assert len(store.hypotheses(system, "test", 1, "toy")) == 10
    assert len(rescore(out)) == 4  # 2 runs x (valid, test), rescored against the files' own references


@pytest.mark.parametrize(
    "break_it, message",
    [
        (
            lambda f: (f / "train.de").write_text("".join((f / "train.de").read_text().splitlines(True)[:-1])),
            r"train\.en has 120 lines but .*train\.de has 119: .*train\.en:120 has no partner",
        ),
        (
            lambda f: (f / "valid.en").write_text("\n".join(["x"] * 4 + [""] + ["y"] * 7) + "\n"),
            r"valid\.en:5: empty line \(its partner .*valid\.de:5 is",
        ),
    ],
)
def test_misaligned_or_empty_lines_of_your_files_are_named_by_file_and_line(
    tmp_path, monkeypatch, capsys, break_it, message
):
    from canlib.cli import main

    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    files = write_toy_corpus(tmp_path / "bad", {"train": 120, "valid": 12, "test": 10})
    break_it(files)
    assert (
        main(["data", "prepare", "bad", "--files", str(files), "--src", "en", "--tgt", "de", "--vocab-size", "60"]) == 2
    )
    err = capsys.readouterr().err
    assert __import__("re").search(message, err), err
    assert not (tmp_path / "cache" / "prepared").exists() or not any((tmp_path / "cache" / "prepared").iterdir())


def test_a_corpus_of_files_needs_all_six_files_and_its_languages(tmp_path, monkeypatch, capsys):
    from canlib.cli import main

    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    files = write_toy_corpus(tmp_path / "half", {"train": 20, "valid": 5})
    assert main(["data", "prepare", "half", "--files", str(files), "--src", "en", "--tgt", "de"]) == 2
    assert "no test.en, test.de" in capsys.readouterr().err
    assert main(["data", "prepare", "half", "--files", str(files)]) == 2
    assert "--files needs --src and --tgt" in capsys.readouterr().err
    assert main(["data", "prepare", "multi30k-en-de", "--files", str(files), "--src", "en", "--tgt", "de"]) == 2
    assert "not a registered corpus's name" in capsys.readouterr().err


def test_the_averaging_variant_scores_the_last_checkpoint_alone_from_the_recipes_own_training(
    tmp_path, monkeypatch, shared_data
):
    """Variant(weights="last") trains in the main run's folder (training is the recipe's) and its model is the newest
    step checkpoint's weights, read here straight from the file, not the average of the last two."""
    import re

    import torch

    from repro.experiments.run import budget
    from repro.experiments.train import trainer

    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    # checkpoints at 2 and 4, both after the warm-up (averaging leaves out a checkpoint from inside it)
    recipe = {**budget("tiny", 1, 4), "valid_every": 2, "keep_last": 2, "average_last": 2, "warmup": 2}
    tiny = Where.of("tiny")
    last = run("balanced", tiny, 1, variant=Variant("averaging", "last", weights="last"), train=recipe)
    averaged = run("balanced", tiny, 1, train=recipe)
    assert last.folder == averaged.folder and last.name != averaged.name
    trainer(last).fit()
    steps = {
        int(m.group(1)): p
        for p in (last.folder / "checkpoints").iterdir()
        if (m := re.fullmatch(r"step_(\d+)\.pt", p.name))
    }
    assert sorted(steps) == [2, 4]
    newest = torch.load(steps[4], map_location="cpu", weights_only=False)["model"]
    older = torch.load(steps[2], map_location="cpu", weights_only=False)["model"]
    got, avg = trained(last).model().state_dict(), trained(averaged).model().state_dict()
    assert all(torch.equal(got[k], newest[k]) for k in newest)
    assert all(torch.allclose(avg[k].float(), (newest[k].float() + older[k].float()) / 2, atol=1e-6) for k in newest)
    assert any(not torch.equal(got[k], avg[k]) for k in newest)
    with pytest.raises(ValueError, match="weights"):
        Variant("averaging", "last", weights="best")


def test_the_command_reaches_the_training_step_in_at_most_six_calls(tmp_path, monkeypatch, shared_data):
    """From ``python -m repro experiment`` (its module's ``run``) to ``Trainer._update``, read off the stack of a tiny
    run: every call on the way is a layer that does work of its own, so the path stays six calls deep or less."""
    import traceback

    from canlib.training.trainer import Trainer
    from repro.cli import main

    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    stacks = []

    class Reached(Exception):
        pass

    def update(self, group):
        stacks.append(traceback.extract_stack())
        raise Reached("the training step was reached")

    monkeypatch.setattr(Trainer, "_update", update)
    args = ["--scale", "tiny", "--systems", "can", "--seeds", "1", "--studies", "runs", "--max-steps", "1"]
    main(["experiment", *args, "--out", str(tmp_path / "out")])
    assert len(stacks) == 1
    frames = stacks[0]
    entry = next(i for i, f in enumerate(frames) if f.name == "main" and Path(f.filename) == REPO / "canlib" / "cli.py")
    path = frames[entry + 1 :]  # the command's run, the calls it makes, the patched update last
    ours = (REPO / "canlib", REPO / "repro")
    assert all(any(Path(f.filename).is_relative_to(d) for d in ours) for f in path[:-1]), [f.filename for f in path]
    chain = " -> ".join(f"{Path(f.filename).stem}.{f.name}" for f in path)
    assert path[0].name == "run" and path[-2].name == "fit", chain
    assert len(path) - 1 <= 6, chain


def test_a_new_study_is_one_record_of_the_table_and_the_engine_trains_what_it_says(monkeypatch):
    """Adding a study is adding its record: a made-up one (CAN and Balanced at 3x the updates with a mixed decoder,
    distilled from the budget study's 2x Balanced) gives runs that depart from the recipe exactly as the record says,
    and a made-up analysis reads the runs its record names, with no code of their own."""
    probe = table.Study(
        "probe",
        ("can", "balanced"),
        ("mix",),
        seeds=(2,),
        factor=3,
        valid_bleu=True,
        teacher=("budget", "balanced", "x2", 1),
        decoders={"mix": ("can", "standard")},
    )
    monkeypatch.setitem(table.TABLE, "probe", probe)
    runs = engine_beyond.study_runs("probe", STORED)
    assert [r.name for r in runs] == [f"beyond/runs/multi30k-en-de/probe-{s}-mix-seed2" for s in ("can", "balanced")]
    base = run("can", STORED, 2)
    for r in runs:
        assert (r.steps, r.budget["lr"], r.budget["warmup"]) == (3 * 1200, base.budget["lr"], base.budget["warmup"])
        assert r.variant.valid_bleu and r.variant.targets == "distilled"
        assert r.model_config(100).layer_kinds() == ("can", "standard")
        teacher = r.variant.parent
        assert (teacher.name, teacher.steps) == ("beyond/runs/multi30k-en-de/budget-balanced-x2-seed1", 2400)
    errors = table.Analysis("errors-balanced", ("balanced",), "error_buckets")
    monkeypatch.setitem(table.TABLE, "errors-balanced", errors)
    reads, own = engine_analyses.runs_needed("errors-balanced", STORED)
    assert [r.name for r in reads] == ["runs/multi30k-en-de/balanced-seed1"] and own == []
    assert engine_analyses.CONFIGS["runs"](reads, STORED) == {"systems": ["balanced"], "balanced": reads[0].config}
    with pytest.raises(ValueError, match="choose from budget, distill, can-6-6"):
        engine_beyond.study_runs("errors-balanced", STORED)  # an analysis is not a beyond study


def test_where_results_live_is_one_value_the_command_line_builds_and_every_run_carries(tmp_path):
    import argparse

    from repro.experiments import cli as engine_cli
    from repro.experiments.experiment import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    where = engine_cli.where(parser.parse_args(["--scale", "tiny", "--max-steps", "3", "--out", str(tmp_path)]))
    assert where == Where("tiny", tmp_path, 3)
    runs = plan(where, ["can"], [1]) + engine_beyond.study_runs("budget", where, [1])
    assert {r.where for r in runs} == {where} and {r.result_path.parent.parent.parent for r in runs} == {
        tmp_path / "tiny",
        tmp_path / "tiny" / "beyond",
    }
    assert [(r.steps, r.config["max_steps"], r.provenance["reduced_budget"]) for r in runs] == [
        (3, 3, True),
        (6, 3, True),
        (6, 3, True),
    ]
    with pytest.raises(ValueError, match="needs a results folder of its own"):  # never a reduced run in book/results
        engine_cli.where(parser.parse_args(["--scale", "small", "--max-steps", "3"]))
