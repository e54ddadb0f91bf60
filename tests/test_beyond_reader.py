"""How the beyond chapter reads the studies: each study is shown as soon as its own models are stored, its
contrasts and scorecard rows follow the verdict rule, and its tables show every evaluation set."""
from __future__ import annotations

import statistics

import pytest

from canlib.studies import beyond
from canlib.studies.results import provenance, save_result
from canlib.studies.scorecard import FAILED, HELD, NOT_RUN, NOT_TESTED
from canlib.studies.store import stored_path
from canlib.studies.verdict import Runs

SPLITS = ("valid", "test")


def store(root, name, seed, tok, log=()):
    scores = {split: {"bleu": tok + i, "tok_bleu": tok + i} for i, split in enumerate(SPLITS)}
    save_result(stored_path(f"{name}-seed{seed}", "small", root), {"scores": scores, "log": list(log)},
                provenance("small", {"seed": seed}, reduced_budget=False))


MAIN = {"baseline": [34.0, 34.2, 34.4], "balanced": [34.5, 34.7, 34.9], "can": [33.0, 33.1, 33.2],
        "san": [33.5, 33.6, 33.7], "aan": [33.8, 33.9, 34.0]}


def fake_main(root):
    for system, values in MAIN.items():
        for seed, v in enumerate(values, 1):
            store(root, f"runs/multi30k-en-de/{system}", seed, v)


def fake_study(root, name, system, tag, values):
    for seed, v in enumerate(values, 1):
        log = [{"kind": "valid", "step": s, "valid_loss": 3.0 - s / 1e4, "valid_bleu": 30 + s / 1e3} for s in (400, 800)]
        stem = beyond.model_name(name, system, tag, seed).rsplit("-seed", 1)[0]
        store(root, f"beyond/runs/multi30k-en-de/{stem}", seed, v, log)


def test_each_study_is_shown_as_soon_as_its_own_models_are_stored(tmp_path):
    assert beyond.default_scale(tmp_path) == "tiny"
    fake_main(tmp_path)
    assert beyond.default_scale(tmp_path) == "tiny"  # the main runs alone answer no study
    fake_study(tmp_path, "can-6-6", "can-6-6", "", [33.9, 34.1, 34.3])
    assert beyond.stored("small", tmp_path).shown() == {"budget": False, "distill": False, "can-6-6": True}
    assert beyond.default_scale(tmp_path) == "small"
    for system, values in (("balanced", [35.0, 35.2]), ("can", [34.0, 34.2])):
        fake_study(tmp_path, "budget", system, "x2", values)  # the x2 models, no budget.json summary
    assert beyond.stored("small", tmp_path).shown()["budget"]
    assert not beyond.stored("small", tmp_path).shown()["distill"]


def test_the_contrasts_are_the_stored_means(tmp_path):
    fake_main(tmp_path)
    kd = {"balanced": [35.0, 35.1, 35.2], "can": [34.9, 35.0, 35.1]}
    for system, values in kd.items():
        fake_study(tmp_path, "distill", system, "kd", values)
    s = beyond.stored("small", tmp_path)
    found = beyond.judgements("small", tmp_path, refs={}, s=s)  # no references: the seed intervals alone
    mean = statistics.fmean
    assert found["main"].on("test").value == pytest.approx(mean(MAIN["can"]) - mean(MAIN["balanced"]))
    assert found["kd"].on("test").value == pytest.approx(mean(kd["can"]) - mean(kd["balanced"]))
    change = (mean(kd["can"]) - mean(kd["balanced"])) - (mean(MAIN["can"]) - mean(MAIN["balanced"]))
    assert found["kd_change"].on("valid").value == pytest.approx(change)  # valid is test + 1 for every run
    assert found["kd_change"].verdict == HELD  # +1.5 with a spread of hundredths, on both sets
    table = beyond.contrast_table(found, {"kd": "distilled", "kd_change": "change"})
    assert list(table.index) == ["valid", "test2016"] and table.loc["test2016", "change"].startswith(f"{change:+.2f} ±")
    assert "budget_x2" not in found and "can66" not in found  # not stored: not judged


def runs(label, values):
    return Runs(label, tuple(range(1, len(values) + 1)), {"test": values})


def stored(kd_can, kd_bal, can66, baseline, can, balanced):
    main = {"baseline": runs("baseline", baseline), "balanced": runs("balanced", balanced), "can": runs("can", can)}
    kd = {"can": runs("kd can", kd_can) if kd_can else None, "balanced": runs("kd balanced", kd_bal) if kd_bal else None}
    return beyond.Stored(main, kd, runs("can-6-6", can66) if can66 else None, {})


def test_the_scorecard_rows_of_the_studies_flip_with_the_evidence():
    s = stored([28.0, 28.2, 28.1], [27.8, 27.9, 28.0], [27.3, 27.2, 27.4], [27.4, 27.3, 27.5],
               [25.9, 26.0, 26.1], [27.4, 27.5, 27.6])
    table4, six = beyond.claims("small", refs={}, s=s)
    assert table4.verdict == HELD and table4.ours.startswith("+0.20") and table4.paper.startswith("+0.26")
    # (-0.1) - (-1.5) = +1.4; se = sqrt(4 x 0.01 / 3) = 0.1155, so +1.4 ± 0.23 is above 0 throughout
    assert six.verdict == HELD and six.ours.startswith("+1.40 ± 0.23") and six.chapter == "beyond"
    swapped = stored([28.0, 28.2, 28.1], [27.8, 27.9, 28.0], [27.3, 27.2, 27.4], [27.4, 27.3, 27.5],
                     [27.4, 27.5, 27.6], [25.9, 26.0, 26.1])
    assert beyond.claims("small", refs={}, s=swapped)[1].verdict == FAILED
    assert all(c.verdict == NOT_TESTED for c in beyond.claims("tiny", s=s))
    no_kd = stored(None, None, [27.3, 27.2, 27.4], [27.4, 27.3, 27.5], [25.9, 26.0, 26.1], [27.4, 27.5, 27.6])
    missing = beyond.claims("small", refs={}, s=no_kd)
    assert missing[0].verdict == NOT_RUN and "--studies distill" in missing[0].evidence
    assert missing[1].verdict == HELD  # the 6/6 row needs no distillation


def test_the_budget_figure_draws_the_x2_curves(tmp_path):
    fake_main(tmp_path)
    for system, values in (("balanced", [35.0, 35.2]), ("can", [34.0, 34.2])):
        fake_study(tmp_path, "budget", system, "x2", values)
    c = beyond.curves("small", 2, tmp_path)
    assert c["can"]["step"] == [400, 800] and c["can"]["valid_bleu"] == pytest.approx([30.4, 30.8])
    fig = beyond.budget_figure("small", 2, tmp_path, averaged=(400,))
    assert len(fig.axes) == 3 and len(fig.axes[0].lines) == 3  # two systems and the averaged checkpoint
