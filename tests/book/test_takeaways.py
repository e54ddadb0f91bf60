"""Each reproduction chapter opens with its one takeaway, a sentence generated from its claims' verdicts: it says
what each verdict word means for that chapter's claims, and no two chapters share its wording."""

from __future__ import annotations

import itertools

import pytest

from _code import ablation, depths, results, training
from repro.studies.verdict import FAILS, HOLDS, INCONCLUSIVE, MIXED, NOT_RUN

WORDS = (HOLDS, FAILS, MIXED, INCONCLUSIVE, NOT_RUN)


def test_the_results_takeaway_says_each_claims_verdict():
    assert results.takeaway(HOLDS, HOLDS) == (
        "In these runs CAN stays within half a BLEU point of Balanced, and Balanced keeps the Baseline's BLEU."
    )
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
