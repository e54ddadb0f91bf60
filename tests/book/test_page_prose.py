"""No generated sentence repeats from page to page: each reproduction chapter words what its numbers show in its own
sentences. A sentence's template is the sentence with its numbers (digits, and counts in words) masked; a template of
eight words or more may appear on one page only. The pages' prose is read the cheap way: each chapter module's
``values(store)`` on the stored results, kept to the keys its page glues."""

from __future__ import annotations

import importlib
import re
from collections import defaultdict
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO, stored_results

RESULTS = REPO / "book" / "results"
LEAST_WORDS = 8
COUNTS = "none|no|one|two|three|four|five|six|seven|eight|nine|ten|all|first|second|third|fourth|fifth|sixth"


def template(sentence: str) -> str:
    """The sentence with its markup dropped and its numbers masked: ``+0.21``, ``2x``, ``1,200``, ``three`` -> ``#``."""
    text = re.sub(r"<[^>]+>|[*`]", "", sentence)
    text = re.sub(r"[-+−]?\d[\d.,]*(?:x|%)?", "#", text)
    return re.sub(rf"\b(?:{COUNTS})\b", "#", text, flags=re.IGNORECASE).strip()


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]


def repeated(prose: dict[str, list[str]]) -> dict[str, set[str]]:
    """The templates of at least ``LEAST_WORDS`` words that more than one page says, with the pages that say them."""
    where: dict[str, set[str]] = defaultdict(set)
    for page, texts in prose.items():
        for text in texts:
            for s in sentences(text):
                if len(template(s).split()) >= LEAST_WORDS:
                    where[template(s)].add(page)
    return {t: pages for t, pages in where.items() if len(pages) > 1}


def glued_keys(page: str) -> set[str]:
    """The keys a page's glue roles paste (``{glue:md}`key```, ``{glue:text}`key:.2f```)."""
    text = (REPO / "book" / f"{page}.md").read_text(encoding="utf-8")
    return {k.split(":")[0] for k in re.findall(r"\{glue(?::\w+)?\}`([^`]+)`", text)}


def reproduction_chapters() -> list[str]:
    """The pages of _toc.yml's "Reproducing the paper" part whose glue module has a ``values(store)``."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "Reproducing the paper")
    pages = [c["file"].removeprefix("book/") for c in part["chapters"]]
    modules = [p for p in pages if (REPO / "book" / "_code" / f"{p}.py").is_file()]
    return [p for p in modules if hasattr(importlib.import_module(f"_code.{p}"), "values")]


def test_a_sentence_template_said_on_two_pages_is_found():
    prose = {
        "results": [
            "Balanced is close. Of the three test sets, the intervals meet the criterion on two and leave one."
        ],
        "ablation": ["Of the four test sets, the intervals meet the criterion on all and leave none."],
        "depths": ["Of the three test sets, the depths differ on two and agree on one, as the figure shows."],
    }
    assert repeated(prose) == {
        "Of the # test sets, the intervals meet the criterion on # and leave #.": {"results", "ablation"}
    }
    assert repeated({"a": ["The gap is +0.21 at 2x."], "b": ["The gap is -1.37 at 1x."]}) == {}  # under 8 words


def test_the_reproduction_chapters_are_read():
    assert {"similarity", "results", "tasks", "speed", "beyond"} <= set(reproduction_chapters())


@pytest.fixture(scope="module")
def page_values() -> dict[str, dict]:
    """Each reproduction chapter's values on the stored results."""
    from repro.studies.store import Store

    with stored_results(RESULTS):
        store = Store("small", RESULTS)
        return {page: importlib.import_module(f"_code.{page}").values(store) for page in reproduction_chapters()}


def test_no_generated_sentence_repeats_across_pages(page_values):
    prose = {
        page: [v for k, v in values.items() if k in glued_keys(page) and isinstance(v, str)]
        for page, values in page_values.items()
    }
    assert sum(map(len, prose.values())) > 40  # the pages' generated prose was read
    assert repeated(prose) == {}


def test_each_chapter_opens_with_its_own_takeaway(page_values):
    """Every chapter glues a takeaway under its title, and no two open with the same three words (numbers masked)."""
    for page in page_values:
        head = (REPO / "book" / f"{page}.md").read_text(encoding="utf-8").split("\n# ", 1)[1].split("\n\n")[1]
        assert head.startswith("**In one sentence:** {glue:") and "`takeaway_sentence`" in head, page
    openings = {page: " ".join(template(v["takeaway_sentence"]).split()[:3]) for page, v in page_values.items()}
    assert len(set(openings.values())) == len(openings), openings


SAID = (
    "CAN is surely within the margin on {met} of the {total} test sets",
    "surely outside on {missed}",
    "open on {open}",
)


def test_a_sets_sentence_says_only_the_counts_it_has():
    from _code.prose import sets_sentence
    from repro.studies.verdict import FAILS, HOLDS, INCONCLUSIVE

    def claim(*verdicts: str) -> SimpleNamespace:
        shown = {"verdict": HOLDS, "decides": False}  # the validation set: shown, never counted
        return SimpleNamespace(sets=(shown, *({"verdict": v} for v in verdicts)))

    assert sets_sentence(claim(HOLDS, FAILS, INCONCLUSIVE), SAID, "-") == (
        "CAN is surely within the margin on one of the three test sets, surely outside on one, and open on one."
    )
    assert sets_sentence(claim(HOLDS, INCONCLUSIVE, INCONCLUSIVE), SAID, "-") == (
        "CAN is surely within the margin on one of the three test sets and open on two."
    )
    assert sets_sentence(claim(HOLDS, HOLDS, HOLDS), SAID, "-") == (
        "CAN is surely within the margin on all of the three test sets."
    )
    assert sets_sentence(claim(FAILS, INCONCLUSIVE), SAID, "-") == (
        "CAN is surely within the margin on none of the two test sets, surely outside on one, and open on one."
    )
    assert sets_sentence(claim(INCONCLUSIVE, INCONCLUSIVE), SAID, "None of the {total} decides.") == (
        "None of the two decides."
    )


def test_a_lead_sentence_says_why_the_other_budget_does_not_lead():
    from _code.prose import lead_sentence

    def body(budget: int, seeds: int) -> SimpleNamespace:
        return SimpleNamespace(
            budget=budget, recipe="", seeds={"balanced": seeds, "can": seeds + 1}, meets=False, beside=()
        )

    said = "The {budget} runs ({seeds} seeds) lead over the {others}: {rule}."
    equal = SimpleNamespace(**vars(body(2, 3)) | {"beside": (body(1, 3),)})
    assert (
        lead_sentence(equal, said) == "The 2x runs (3 seeds) lead over the 1x: at equal seeds the longer budget leads."
    )
    fewer = SimpleNamespace(**vars(body(1, 3)) | {"beside": (body(2, 2),)})
    assert lead_sentence(fewer, said) == "The 1x runs (3 seeds) lead over the 2x: 2x has fewer seeds."
    assert lead_sentence(body(1, 3), said) == ""  # one body: nothing to say
    converged = SimpleNamespace(**vars(body(None, 3)) | {"recipe": "converged", "beside": (body(1, 3), body(2, 3))})
    assert lead_sentence(converged, said) == (
        "The converged runs (3 seeds) lead over the 1x and 2x: at equal seeds the converged models lead."
    )
