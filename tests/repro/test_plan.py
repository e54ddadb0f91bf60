"""The study plan (:mod:`repro.results.plan`): its rows at each scale against lists written here, the one plan the
engine trains and the store waits for, and the library's scales free of it."""

from __future__ import annotations

from dataclasses import fields

import pytest

import canlib.catalogue
from repro.experiments.run import plan
from repro.results.layout import Where
from repro.results.plan import planned_seeds, rows

EN_DE = "multi30k-en-de"
FURTHER = ("multi30k-de-en", "multi30k-en-fr", "multi30k-fr-en", "multi30k-en-cs", "multi30k-cs-en")
# the small plan: Table 2's systems and Table 5's ablations x 3 seeds, 9/4 and 14/1 x 3 (book/results.md, depths.md,
# ablation.md), then Baseline, Balanced and CAN x 2 seeds on each further direction (book/tasks.md)
SMALL = [
    ("baseline", EN_DE, (1, 2, 3)),
    ("balanced", EN_DE, (1, 2, 3)),
    ("san", EN_DE, (1, 2, 3)),
    ("aan", EN_DE, (1, 2, 3)),
    ("can", EN_DE, (1, 2, 3)),
    ("can_attn", EN_DE, (1, 2, 3)),
    ("can_ffn", EN_DE, (1, 2, 3)),
    ("depth-9-4", EN_DE, (1, 2, 3)),
    ("depth-14-1", EN_DE, (1, 2, 3)),
] + [(system, corpus, (1, 2)) for corpus in FURTHER for system in ("baseline", "balanced", "can")]


def test_the_small_plan_holds_its_rows_in_training_order():
    assert [(r.system, r.corpus, r.seeds) for r in rows("small")] == SMALL


def test_the_tiny_and_full_plans_train_the_nine_systems_once_on_their_corpus():
    nine = ["baseline", "balanced", "san", "aan", "can", "can_attn", "can_ffn", "depth-9-4", "depth-14-1"]
    assert [(r.system, r.corpus, r.seeds) for r in rows("tiny")] == [(s, EN_DE, (1,)) for s in nine]
    assert [(r.system, r.corpus, r.seeds) for r in rows("full")] == [(s, "wmt14-en-de", (1,)) for s in nine]


def test_planned_seeds_reads_a_row_and_is_empty_off_the_plan():
    assert planned_seeds("small", "can") == (1, 2, 3) and planned_seeds("small", "depth-14-1", EN_DE) == (1, 2, 3)
    assert planned_seeds("small", "balanced", "multi30k-en-cs") == (1, 2)
    assert planned_seeds("small", "san", "multi30k-en-fr") == () and planned_seeds("small", "can-6-6") == ()
    assert planned_seeds("small", "can", "mine") == ()
    with pytest.raises(ValueError, match="SCALE='huge'"):
        planned_seeds("huge", "can")


def test_the_engine_trains_every_seed_of_the_plan_and_nothing_else():
    trained = sorted((r.system, r.corpus, r.seed) for r in plan(Where.of("small")))
    assert trained == sorted((s, c, k) for s, c, seeds in SMALL for k in seeds)


def test_the_library_scales_hold_no_seeds_or_directions_of_the_plan():
    """A user of canlib trains any system with any seed: the counts and the further directions are the plan's."""
    assert {f.name for f in fields(canlib.catalogue.Scale)}.isdisjoint(
        {"seeds", "depth_seeds", "directions", "direction_seeds"}
    )
    for name in ("planned_seeds", "SEEDED_SYSTEMS", "DIRECTION_SYSTEMS"):
        assert not hasattr(canlib.catalogue, name), name
