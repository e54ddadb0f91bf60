"""Each reproduction chapter opens with its one takeaway, a sentence generated from its claims' verdicts: it says
what each verdict word means for that chapter's claims, and no two chapters share its wording."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from _code import ablation, beyond, depths, results, similarity, speed, tasks, training
from repro.studies.verdict import FAILS, HOLDS, INCONCLUSIVE, MIXED, NOT_RUN

WORDS = (HOLDS, FAILS, MIXED, INCONCLUSIVE, NOT_RUN)


def test_the_results_takeaway_says_each_claims_verdict():
    assert results.takeaway(HOLDS, HOLDS) == (
        "In these runs CAN stays within half a BLEU point of Balanced, and Balanced keeps the Baseline's BLEU."
    )
    assert results.takeaway(INCONCLUSIVE, INCONCLUSIVE).startswith("These runs cannot yet tell whether CAN stays")
    assert "CAN falls more than half a BLEU point below Balanced" in results.takeaway(FAILS, INCONCLUSIVE)
    assert "whether Balanced keeps the Baseline's BLEU is still open" in results.takeaway(FAILS, INCONCLUSIVE)
    assert "on some evaluation sets and not on others" in results.takeaway(MIXED, HOLDS)
    assert "cannot yet tell" in results.takeaway(NOT_RUN, HOLDS)


def test_the_training_takeaway_follows_the_paper_only_where_both_orders_hold():
    assert training.takeaway(HOLDS, HOLDS, HOLDS).startswith("As in the paper's Figure 8, each compression")
    mixed = training.takeaway(HOLDS, FAILS, INCONCLUSIVE)
    assert not mixed.startswith("As in the paper") and "CAN's does not end above Balanced's" in mixed
    assert mixed.endswith("Balanced's.")  # an open last claim adds nothing
    assert "still falling" in training.takeaway(HOLDS, HOLDS, HOLDS)


def test_the_depths_takeaway_reads_the_speed_up_and_the_drop():
    said = depths.takeaway(HOLDS, FAILS)
    assert said.startswith("Moving decoder layers into the encoder buys at least")
    assert "a single decoder layer does not score below Balanced's two" in said


@pytest.mark.parametrize("words", list(itertools.product(WORDS, repeat=2)))
def test_no_two_chapters_share_a_takeaway(words):
    said = [results.takeaway(*words), depths.takeaway(*words), training.takeaway(*words, HOLDS)]
    said.append(ablation.takeaway(*words))
    assert len(set(said)) == 4
    first_words = {s.split(",")[0].split(";")[0] for s in said}
    assert len(first_words) == 4, said


def judged_like(word: str, value: float | None = None, bound: float = 0.0, sets: tuple = ()) -> SimpleNamespace:
    """What a takeaway reads of a registry judgement: its word, its value, its claim's bar and its readings."""
    claim = SimpleNamespace(evidence=SimpleNamespace(ok=SimpleNamespace(bound=bound)))
    return SimpleNamespace(word=word, value=value, sets=sets, claim=claim)


PAPER_TASKS = {"gap_min": -0.48, "gap_max": -0.08, "tasks": 14, "stored_directions": 1, "directions": 6, "margin": 0.5}


def test_the_tasks_takeaway_says_how_few_directions_are_trained():
    assert tasks.takeaway(NOT_RUN, PAPER_TASKS, []) == (
        "The paper's 14 tasks put CAN -0.48 to -0.08 BLEU from Balanced, but with one of our six Multi30k directions "
        "trained nothing here decides yet whether that consistency carries over to other language pairs."
    )
    assert "0.5 BLEU behind Balanced on en-fr, so the consistency" in tasks.takeaway(FAILS, PAPER_TASKS, ["en-fr"])
    two = PAPER_TASKS | {"stored_directions": 2}
    assert "each of the two Multi30k directions we trained keeps CAN within 0.5 BLEU" in tasks.takeaway(HOLDS, two, [])


def test_the_speed_takeaway_reads_both_ways_of_launching():
    eager, graphs = judged_like(HOLDS, 1.4253, 1.28), judged_like(INCONCLUSIVE, 1.3208, 1.28)
    assert speed.takeaway(eager, graphs, 1.3218, "one run", "H200") == (
        "In one run on an H200, CAN decodes 1.43 times as fast as Balanced with every kernel launched and 1.32 times "
        "with CUDA graphs, against the paper's 1.32; the paper's smallest gain, 1.28x, is reached eagerly and is not "
        "yet shown to be reached with graphs."
    )
    same = speed.takeaway(judged_like(FAILS, 1.1, 1.28), judged_like(FAILS, 1.2, 1.28), 1.32, "three runs", "H100")
    assert same.endswith("the paper's smallest gain, 1.28x, is missed either way.")


def test_the_similarity_takeaway_counts_the_layers_above_the_bar():
    layers = tuple({"value": v, "by_value": HOLDS if v > 0.9 else FAILS} for v in (0.84, 0.95, 0.99))
    said = similarity.takeaway(judged_like(INCONCLUSIVE, bound=0.9, sets=layers), judged_like(NOT_RUN), np.zeros(6))
    assert said == (
        "Our decoders neither confirm nor refute the paper's premise yet: self- and cross-attention read inputs "
        "with a cosine of 0.84 to 0.99 over 3 decoder layers, above the paper's bar of 0.9 at 2 of them; whether "
        "cross-attention and FFN inputs are less alike is undecided too."
    )
    unjudged = similarity.takeaway(judged_like(NOT_RUN, bound=0.9), judged_like(NOT_RUN), np.array([0.8, 0.95]))
    assert "a cosine of 0.80 to 0.95 over 2 decoder layers, above the paper's bar of 0.9 at 1 of them" in unjudged
    held = similarity.takeaway(judged_like(HOLDS, bound=0.9, sets=layers), judged_like(FAILS), np.zeros(6))
    assert held.startswith("Our decoders bear out the paper's premise:")
    assert held.endswith("cross-attention and FFN inputs are no less alike, against the paper's argument.")


def test_the_beyond_takeaway_sorts_the_three_causes_by_verdict():
    words = {"budget": HOLDS, "distill": FAILS, "can-6-6": INCONCLUSIVE}
    assert beyond.takeaway(-1.58, -0.14, "larger than", words) == (
        "Our CAN's gap to Balanced at the plan's budget, -1.58 tokenized BLEU on test2016, is larger than the paper's "
        "-0.14; of the three causes the paper's own results suggest, these runs support a short budget, rule out "
        "training without a teacher and leave a two-layer decoder open."
    )
    open_ = beyond.takeaway(-1.58, -0.14, "larger than", dict.fromkeys(words, NOT_RUN))
    assert open_.endswith(
        "neither support nor rule out any yet (a short budget, training without a teacher and a two-layer decoder)."
    )
