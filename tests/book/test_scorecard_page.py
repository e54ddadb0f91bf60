"""The scorecard opens with its one takeaway: a sentence that counts the paper's claims by verdict, as the claims
registry judges them (``python -m repro claims --json``), and says which way the decided ones go."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import REPO

from _code import scorecard
from repro.studies.claims import BY_ID


def verdicts(**counts: int) -> list[SimpleNamespace]:
    """Judged stand-ins: ``holds=3`` gives three claims judged "holds"."""
    words = {"holds": "holds", "fails": "does not hold", "mixed": "mixed", "open": "inconclusive", "none": "not run"}
    return [SimpleNamespace(word=words[k]) for k, n in counts.items() for _ in range(n)]


def test_the_takeaway_says_how_many_claims_are_decided_and_which_way():
    assert scorecard.takeaway(verdicts(holds=3, open=24, none=1)) == (
        "Of the paper's 28 claims these runs decide 3, all of which hold; the rest stay open (24 inconclusive, "
        "1 not run): nothing here contradicts the paper, and the open claims await more evidence."
    )
    assert scorecard.takeaway(verdicts(holds=1, fails=1, mixed=2, open=1)) == (
        "Of the paper's 5 claims these runs decide 4: 1 holds, 1 does not hold and 2 are mixed; the rest stay open, "
        "and each claim that does not hold or is mixed goes against the paper on at least one reading."
    )
    assert scorecard.takeaway(verdicts(fails=2, open=1)).startswith("Of the paper's 3 claims these runs decide 2: 2 do")
    assert scorecard.takeaway(verdicts(holds=1)) == "Of the paper's 1 claim these runs decide 1, and it holds."
    assert scorecard.takeaway(verdicts(open=2, none=2)) == (
        "These runs decide none of the paper's 4 claims yet (2 inconclusive, 2 not run): nothing is confirmed or "
        "refuted."
    )
    assert "(2 inconclusive)" in scorecard.takeaway(verdicts(holds=1, open=2))  # a count of none is left out


def test_the_takeaway_of_the_stored_results_counts_the_registrys_verdicts(claims_json, shared_data, monkeypatch):
    from repro.studies import claims
    from repro.studies.store import Store

    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    claims._JUDGED.clear()
    words = [row["verdict"] for k, row in claims_json.items() if BY_ID[k].source == "paper"]
    said = scorecard.takeaway(claims.judged(Store("small", REPO / "book" / "results")).all("paper"))
    decided = sum(w in ("holds", "does not hold", "mixed") for w in words)
    assert said.startswith(f"Of the paper's {len(words)} claims these runs decide {decided}")
    kinds = [f"{words.count(w)} {w}" for w in ("inconclusive", "not run") if words.count(w)]
    assert f"({', '.join(kinds)})" in said


def test_the_scorecard_page_opens_with_the_takeaway_of_the_papers_claims():
    page = (REPO / "book" / "scorecard.md").read_text(encoding="utf-8")
    body = page.split("# Reproduction scorecard\n\n", 1)[1]
    assert body.startswith("**In one sentence:** {glue:md}`takeaway_sentence`\n")
    assert 'glue("takeaway_sentence", Markdown(scorecard.takeaway(card.all("paper"))), display=False)' in page
