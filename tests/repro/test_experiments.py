"""The engine's plan and the readers' stored results: where results live, what the plan holds, what is refused."""

from __future__ import annotations

import pytest

from canlib.catalogue import scale_spec
from repro.cli import main
from repro.experiments.experiment import mark_complete
from repro.experiments.run import plan
from repro.results.layout import Where, study


def test_store_never_recomputes_a_stored_result(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"value": len(calls)}

    where = Where.of("small", tmp_path)
    first, _ = study("demo", where, {"budget": 1}, compute)
    again, prov = study("demo", where, {"budget": 1}, compute)
    assert first == again == {"value": 1} and calls == [1]
    assert (tmp_path / "small" / "demo.json").is_file() and prov["scale"] == "small" and prov["config"]["budget"] == 1
    with pytest.raises(ValueError, match="stored with another configuration"):
        study("demo", where, {"budget": 2}, compute)
    assert calls == [1]


def test_unknown_scale_is_refused():
    with pytest.raises(ValueError, match="SCALE='huge'"):
        scale_spec("huge")


def test_small_plan_holds_the_seeded_grid():
    runs = plan(Where.of("small"))
    en_de = [r for r in runs if r.corpus == "multi30k-en-de"]
    assert len(en_de) == 7 * 3 + 2 * 3  # Table 2 systems and ablations x 3 seeds, 9/4 and 14/1 x 3
    others = [r for r in runs if r.corpus != "multi30k-en-de"]
    assert len(others) == 5 * 3 * 2 and {r.system for r in others} == {"baseline", "balanced", "can"}
    assert {r.seed for r in plan(Where.of("small"), systems=["can"], seeds=[2])} == {2}
    first = runs[:9]  # seed 1 of every main-corpus system comes first: a run cut short leaves whole sets
    assert {(r.corpus, r.seed) for r in first} == {("multi30k-en-de", 1)} and len({r.system for r in first}) == 9
    assert len({r.name for r in runs}) == len(runs) and len({r.folder for r in runs}) == len(runs)


def test_small_budget_is_the_measured_recipe(measurements):
    """The small recipe is the one every raw GPU-trained small run recorded (not numbers copied here)."""
    import json

    train = scale_spec("small").train
    recorded = [
        json.loads(p.read_text())["provenance"]["config"]["train"]
        for p in sorted(measurements.glob("*/small/runs/multi30k-en-de/*.json"))
    ]
    assert recorded, f"no raw small runs under {measurements}"
    assert all({k: v for k, v in r.items() if k != "seed"} == train for r in recorded)


def test_experiment_command_refuses_unknown_systems(capsys):
    assert main(["experiment", "--scale", "tiny", "--systems", "transformer-big"]) == 2
    err = capsys.readouterr().err
    assert "transformer-big" in err and "--systems" in err


def test_experiment_command_refuses_unknown_corpora(capsys):
    assert main(["experiment", "--scale", "tiny", "--corpora", "wmt99-xx-yy"]) == 2
    err = capsys.readouterr().err
    assert "wmt99-xx-yy" in err and "multi30k-en-de" in err


def test_reduced_budget_is_refused_for_the_default_results_folder(capsys):
    assert main(["experiment", "--scale", "small", "--max-steps", "4"]) == 2
    assert "--out" in capsys.readouterr().err


def test_the_store_reads_every_stored_seed_and_skips_missing_systems(tmp_path):
    from repro.results.files import provenance, save_result
    from repro.studies.store import Store

    for seed, score in ((1, 30.0), (2, 32.0), (3, 31.0)):
        save_result(
            Where.of("small", tmp_path).path(f"runs/multi30k-en-de/can-seed{seed}"),
            {"scores": {"test": {"bleu": score, "tok_bleu": score + 0.5}}},
            provenance("small", {"seed": seed}),
        )
    save_result(
        Where.of("small", tmp_path).path("runs/multi30k-en-de/balanced-seed1"),
        {"scores": {"test": {"bleu": 29.0, "tok_bleu": 29.0}}},
        provenance("small", {"seed": 1}),
    )
    store = Store("small", tmp_path)
    assert store.scores(["can", "balanced", "san"], metric="bleu") == {"can": [30.0, 32.0, 31.0], "balanced": [29.0]}
    assert store.scores(["can"]) == {"can": [30.5, 32.5, 31.5]}  # tokenized BLEU, the paper's, by default


def test_verdicts_read_only_runs_trained_with_the_full_budget(tmp_path):
    from repro.results.files import provenance, save_result
    from repro.studies import claims
    from repro.studies.store import Store

    for seed in (1, 2, 3):
        for system, score in (("can", 30.0 + seed), ("balanced", 29.0 + seed)):
            save_result(
                Where.of("small", tmp_path).path(f"runs/multi30k-en-de/{system}-seed{seed}"),
                {"scores": {"test": {"bleu": score, "tok_bleu": score}}},
                provenance("small", {"seed": seed}, reduced_budget=seed > 1),
            )
    assert Store("small", tmp_path).scores(["can", "balanced"]) == {"can": [31.0], "balanced": [30.0]}
    everything = Store("small", tmp_path, full_budget=False)
    assert everything.scores(["can", "balanced"]) == {"can": [31.0, 32.0, 33.0], "balanced": [30.0, 31.0, 32.0]}
    claims._JUDGED.clear()
    claim = claims.judged(Store("small", tmp_path))["can-within-0.5"]
    assert claim.word == "inconclusive" and claim.seeds == {"CAN": 1, "Balanced": 1}  # reduced runs never count


def test_chapters_default_to_small_only_once_its_whole_plan_is_stored(tmp_path):
    from _code.readers import default_scale
    from repro.results.files import provenance, save_result

    assert default_scale(root=tmp_path) == "tiny"
    small = Where("small", tmp_path)
    runs = plan(small)
    for r in runs[:-1]:
        save_result(Where.of("small", tmp_path).path(r.name), {"scores": {}}, provenance("small", {}))
    for name in (
        "similarity",
        "similarity-balanced",
        "errors",
        "attention",
        "conversion",
        "approximations",
    ):  # every stored analysis
        save_result(Where.of("small", tmp_path).path(name), {}, provenance("small", {}))
    assert not mark_complete(small) and default_scale(root=tmp_path) == "tiny"  # one run missing
    save_result(Where.of("small", tmp_path).path(runs[-1].name), {"scores": {}}, provenance("small", {}))
    assert mark_complete(small) and default_scale(root=tmp_path) == "small"


def test_a_chapter_shows_small_once_every_seed_of_its_own_runs_is_stored(tmp_path):
    from _code.readers import default_scale
    from repro.results.files import provenance, save_result

    def store(name):
        save_result(Where.of("small", tmp_path).path(name), {"scores": {}}, provenance("small", {}))

    runs = plan(Where("small", tmp_path), ["balanced", "can"], corpora_=["multi30k-en-de"])
    assert len(runs) == 6  # 3 seeds each
    for r in runs[:-1]:
        store(r.name)
    assert default_scale(["balanced", "can"], root=tmp_path) == "tiny"  # one seed missing
    assert default_scale(["balanced", "can"], seeds=[1], root=tmp_path) == "small"
    store(runs[-1].name)
    assert default_scale(["balanced", "can"], root=tmp_path) == "small"
    assert default_scale(["balanced", "can"], analyses=["errors"], root=tmp_path) == "tiny"
    store("errors")
    assert default_scale(["balanced", "can"], analyses=["errors"], root=tmp_path) == "small"
    assert default_scale(analyses=["errors"], root=tmp_path) == "small"
    assert default_scale(["san"], root=tmp_path) == "tiny"
    assert default_scale(["can"], corpora=["multi30k-de-en"], root=tmp_path) == "tiny"  # another direction
    assert default_scale(root=tmp_path) == "tiny"  # the whole plan is not stored
    with pytest.raises(ValueError, match="no run of"):
        default_scale(["san"], corpora=["multi30k-de-en"], root=tmp_path)  # SAN is not trained on other directions


def test_experiment_command_refuses_unknown_studies(capsys):
    assert main(["experiment", "--scale", "tiny", "--studies", "runs,telepathy"]) == 2
    assert "telepathy" in capsys.readouterr().err


def test_a_failed_run_is_named_and_does_not_stop_the_others(monkeypatch, capsys):
    from repro.experiments import pool
    from repro.experiments.run import run

    def fake(job):
        if job.run.system == "san":
            raise ValueError("diverged")
        return "test sacreBLEU 1.00, valid 2.00, 3.0 s of training (cpu)"

    monkeypatch.setattr(pool, "train_and_store", fake)
    tiny = Where.of("tiny")
    outcome = pool.train_all([run("san", tiny), run("can", tiny)], jobs=1)
    assert outcome.failed == ["runs/multi30k-en-de/san-seed1: ValueError: diverged"]
    printed = capsys.readouterr().out
    assert "[1/2] multi30k-en-de san seed 1 FAILED: diverged" in printed
    assert "[2/2] multi30k-en-de can seed 1: test sacreBLEU 1.00" in printed


def test_the_stored_small_results_rescore_from_their_hypotheses(shared_data, monkeypatch, capsys):
    """book/results/small holds the 26 GPU-trained runs of the plan (7 systems x 3 seeds, 9/4 x 2, 14/1 x 3) and its
    studies, and `python -m repro rescore` recomputes every stored sacreBLEU from the hypotheses."""
    import json
    from pathlib import Path

    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    small = Path(__file__).resolve().parents[2] / "book" / "results" / "small"
    runs = sorted(p.stem for p in (small / "runs" / "multi30k-en-de").glob("*.json"))
    seeded = ("baseline", "balanced", "san", "aan", "can", "can_attn", "can_ffn")
    depths = [f"depth-9-4-seed{k}" for k in (1, 2)] + [f"depth-14-1-seed{k}" for k in (1, 2, 3)]  # 3rd: e1befc3
    assert runs == sorted([f"{s}-seed{k}" for s in seeded for k in (1, 2, 3)] + depths)
    for name in ("similarity", "errors", "attention"):
        assert json.loads((small / f"{name}.json").read_text())["provenance"]["scale"] == "small"
    beyond = sorted(p.stem for p in (small / "beyond" / "runs" / "multi30k-en-de").glob("*.json"))
    assert beyond == sorted(  # measurements/h100-2026-11-27 (20 models) and h200-2026-11-27-81cbcbb (the third 2x seed)
        [f"budget-{s}-x2-seed{k}" for s in ("balanced", "can") for k in (1, 2, 3)]
        + [f"can-6-6-can-6-6-seed{k}" for k in (1, 2, 3)]
        + ["distill-balanced-teacher-seed1"]
        + [f"distill-{s}-kd-seed{k}" for s in ("balanced", "san", "aan", "can") for k in (1, 2, 3)]
    )
    assert main(["rescore", str(small)]) == 0
    out = capsys.readouterr().out
    assert "192 stored sacreBLEU scores of 48 runs reproduced" in out  # 4 splits x (26 plan runs + 22 beyond models)
    # budget: 6 runs (2x, summarised here), distill: 13 runs, can-6-6: 3 runs, each with its 4 splits x (bleu, tok_bleu)
    # quoted in the summary
    assert f"{(6 + 13 + 3) * 4 * 2} scores quoted by the beyond studies' summaries equal their stored runs'" in out


def test_each_engine_verb_is_a_command_of_its_own(capsys):
    """`python -m repro experiment` trains; rescoring, estimating and summarising are commands of their own, each in the
    module that does the work, and `experiment` takes none of their options."""
    from repro.cli import COMMANDS

    engine = "repro.experiments."
    verbs = {v: COMMANDS[v][0].removeprefix(engine) for v in ("experiment", "rescore", "estimate", "summarise")}
    assert verbs == {v: v for v in verbs}
    for flag in ("--rescore", "--estimate", "--summarise"):
        with pytest.raises(SystemExit) as refused:
            main(["experiment", "--scale", "small", flag])
        assert refused.value.code == 2 and f"unrecognized arguments: {flag}" in capsys.readouterr().err
    assert main(["estimate", "--scale", "small", "--studies", "hybrid"]) == 0
    assert capsys.readouterr().out.startswith("hybrid: 6 model(s) to train, 14,400 updates: ~")  # 6 x 2,400
    assert main(["summarise", "--scale", "small", "--studies", "telepathy"]) == 2
    assert "--studies: unknown telepathy" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["experiment", "--scale", "tiny", "--seeds", "1,0,x"], "argument --seeds: 0, x is not a positive integer"),
        (["experiment", "--scale", "tiny", "--systems", ","], "argument --systems: empty list"),
        (["summarise", "--scale", "small", "--seeds", "2,-1"], "argument --seeds: -1 is not a positive integer"),
        (["estimate", "--scale", "small", "--studies", " , "], "argument --studies: empty list"),
    ],
)
def test_a_malformed_list_option_is_refused_as_it_is_parsed(argv, message, capsys):
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2 and message in capsys.readouterr().err


def test_the_experiment_command_reaches_a_models_fit_in_four_calls(tmp_path, monkeypatch, capsys):
    """From the command's ``run`` to ``fit`` the stack holds at most four calls (run -> train_all -> run_queue ->
    train_and_store -> fit), so a reader follows the command to the training step in four hops."""
    import inspect
    from pathlib import Path

    from repro.experiments import pool

    depths: list[int] = []

    class Recording:
        def fit(self) -> None:
            frames = [(f.function, Path(f.filename).parts[-3:]) for f in inspect.stack()]  # this fit's frame first
            depths.append(frames.index(("run", ("repro", "experiments", "experiment.py"))))
            raise RuntimeError("stopped at fit")

    monkeypatch.setattr(pool, "trainer", lambda run: Recording())
    argv = ["experiment", "--scale", "tiny", "--systems", "san", "--seeds", "1", "--studies", "runs"]
    assert main([*argv, "--out", str(tmp_path)]) != 0
    assert "stopped at fit" in capsys.readouterr().err
    assert depths and depths[0] <= 4, depths
