"""How the beyond chapter reads the studies: each study is shown as soon as its own models are stored, its
claims (the registry's) follow the verdict rule and flip with the evidence, and its tables show every set."""

from __future__ import annotations

import statistics

import pytest

from _code import beyond
from _code.training import seed_curves
from repro.results.files import provenance, save_result
from repro.results.layout import Where, model_name
from repro.studies import claims
from repro.studies.claims import judged
from repro.studies.store import Store

SPLITS = ("valid", "test")


def store(root, name, seed, tok, log=()):
    scores = {split: {"bleu": tok + i, "tok_bleu": tok + i} for i, split in enumerate(SPLITS)}
    save_result(
        Where.of("small", root).path(f"{name}-seed{seed}"),
        {"scores": scores, "log": list(log)},
        provenance("small", {"seed": seed}, reduced_budget=False),
    )


MAIN = {
    "baseline": [34.0, 34.2, 34.4],
    "balanced": [34.5, 34.7, 34.9],
    "can": [33.0, 33.1, 33.2],
    "san": [33.5, 33.6, 33.7],
    "aan": [33.8, 33.9, 34.0],
}


def fake_main(root):
    for system, values in MAIN.items():
        for seed, v in enumerate(values, 1):
            store(root, f"runs/multi30k-en-de/{system}", seed, v)


def fake_study(root, name, system, tag, values):
    for seed, v in enumerate(values, 1):
        log = [
            {"kind": "valid", "step": s, "valid_loss": 3.0 - s / 1e4, "valid_bleu": 30 + s / 1e3} for s in (400, 800)
        ]
        stem = model_name(name, system, tag, seed).rsplit("-seed", 1)[0]
        store(root, f"beyond/runs/multi30k-en-de/{stem}", seed, v, log)


def test_each_study_is_shown_as_soon_as_its_own_models_are_stored(tmp_path):
    assert beyond.default_scale(tmp_path) == "tiny"
    fake_main(tmp_path)
    assert beyond.default_scale(tmp_path) == "tiny"  # the main runs alone answer no study
    fake_study(tmp_path, "can-6-6", "can-6-6", "", [33.9, 34.1, 34.3])
    assert beyond.shown(Store("small", tmp_path)) == {"budget": False, "distill": False, "can-6-6": True}
    assert beyond.default_scale(tmp_path) == "small"
    for system, values in (("balanced", [35.0, 35.2]), ("can", [34.0, 34.2])):
        fake_study(tmp_path, "budget", system, "x2", values)  # the x2 models, no budget.json summary
    assert beyond.shown(Store("small", tmp_path))["budget"]
    assert not beyond.shown(Store("small", tmp_path))["distill"]


def fresh(root) -> Store:
    claims._JUDGED.clear()  # each test builds its own folder
    return Store("small", root)


def test_the_contrasts_are_the_stored_means(tmp_path):
    fake_main(tmp_path)
    kd = {"balanced": [35.0, 35.1, 35.2], "can": [34.9, 35.0, 35.1]}
    for system, values in kd.items():
        fake_study(tmp_path, "distill", system, "kd", values)
    found = judged(fresh(tmp_path))  # no hypotheses stored: the seed intervals alone
    mean = statistics.fmean
    assert found["can-within-0.5"].value == pytest.approx(mean(MAIN["can"]) - mean(MAIN["balanced"]))
    assert found["kd-can-within-0.5"].value == pytest.approx(mean(kd["can"]) - mean(kd["balanced"]))
    change = (mean(kd["can"]) - mean(kd["balanced"])) - (mean(MAIN["can"]) - mean(MAIN["balanced"]))
    assert found["kd-narrows-gap"].judgement.on("valid").value == pytest.approx(
        change
    )  # valid is test + 1 for every run
    assert found["kd-narrows-gap"].word == "holds"  # +1.5 with a spread of hundredths, on both sets
    sets = found["kd-narrows-gap"].judgement.sets
    assert [on.split for on in sets] == ["valid", "test"] and sets[1].value == pytest.approx(change)
    assert found["can-6-6-hurts-less"].word == "not run" and "--studies can-6-6" in found["can-6-6-hurts-less"].command


def test_the_claims_of_the_studies_flip_with_the_evidence(tmp_path):
    def case(root, can, balanced, kd_can):
        for seed, (c, b, k) in enumerate(zip(can, balanced, kd_can), 1):
            store(root, "runs/multi30k-en-de/can", seed, c)
            store(root, "runs/multi30k-en-de/balanced", seed, b)
            store(root, "runs/multi30k-en-de/baseline", seed, 27.4)
            store(root, "beyond/runs/multi30k-en-de/can-6-6-can-6-6", seed, 27.3 + 0.1 * seed)
            store(root, "beyond/runs/multi30k-en-de/distill-can-kd", seed, k)
            store(root, "beyond/runs/multi30k-en-de/distill-balanced-kd", seed, 27.8 + 0.1 * seed)

    case(tmp_path / "a", [25.9, 26.0, 26.1], [27.4, 27.5, 27.6], [28.0, 28.2, 28.1])
    case(tmp_path / "b", [27.4, 27.5, 27.6], [25.9, 26.0, 26.1], [26.0, 26.1, 26.2])
    a, b = judged(fresh(tmp_path / "a")), judged(fresh(tmp_path / "b"))
    assert (a["can-6-6-hurts-less"].word, b["can-6-6-hurts-less"].word) == ("holds", "does not hold")
    assert (a["kd-can-within-0.5"].word, b["kd-can-within-0.5"].word) == ("holds", "does not hold")
    assert a["can-6-6-hurts-less"].claim.chapter == "beyond"


def test_the_x2_learning_curves_are_the_seed_means_of_the_stored_logs(tmp_path):
    fake_main(tmp_path)
    for system, values in (("balanced", [35.0, 35.2]), ("can", [34.0, 34.2])):
        fake_study(tmp_path, "budget", system, "x2", values)
    small = Store("small", tmp_path)
    curve = seed_curves([small.log(f) for f in small.budget_runs("can", 2).files], "valid_bleu")
    assert list(curve["step"]) == [400, 800] and list(curve["mean"]) == pytest.approx([30.4, 30.8])


def test_a_learning_curve_band_is_the_sample_sd_and_range_over_seeds_at_the_logged_multiples():
    logs = [
        [{"step": 2, "valid_loss": v}, {"step": 3, "valid_loss": 9.0}, {"step": 4, "valid_loss": v - 0.5}]
        for v in (1.0, 2.0, 4.0)
    ]
    curve = seed_curves(logs, "valid_loss", every=2)  # step 3 ends an epoch off the logging grid: left out
    assert list(curve["step"]) == [2, 4] and curve["seeds"] == 3
    assert list(curve["mean"]) == pytest.approx([7 / 3, 7 / 3 - 0.5])
    assert list(curve["sd"]) == pytest.approx([statistics.stdev([1.0, 2.0, 4.0])] * 2)
    assert list(curve["min"]) == [1.0, 0.5] and list(curve["max"]) == [4.0, 3.5]
    assert list(seed_curves(logs[:1], "valid_loss")["sd"]) == [0.0, 0.0, 0.0]  # one seed: no spread
