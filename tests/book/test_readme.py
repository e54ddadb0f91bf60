"""README and the book's first page say what the claims registry says: their generated sections are what the stored
results give now, every verdict they name is the registry's word for that claim, the tally is the registry's count,
and the headline numbers are the stored runs' (recomputed here from the JSON files with statistics only)."""

from __future__ import annotations

import json
import re
import statistics

import pytest
from conftest import REPO

from repro.studies import claims
from repro.studies.claims import BY_ID
from repro.studies.store import Store
from repro.studies.verdict import STATES

README = REPO / "README.md"
RESULTS = REPO / "book" / "results"
SAID = re.compile(r"(holds|does not hold|mixed|inconclusive|not run) \(`([^`]+)`\)")  # word (`id`)
MARK = re.compile(r'<span class="claim-verdict verdict-[a-z-]+" data-claim="([^"]+)"[^>]*>([^<]+)</span>')


def readme_findings() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("## What this reproduction found", 1)[1].split("\n## ", 1)[0]


@pytest.fixture
def env(monkeypatch, shared_data):
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    claims._JUDGED.clear()


def test_the_readme_sections_are_what_the_stored_results_give_now(env, tmp_path):
    """README cannot glue: its sections are generated (python -m _code.glance --readme), and
    this fails when the stored results or the code give another finding or table than README holds: rewriting a copy
    of README with what they give now changes nothing."""
    from _code import glance

    copy = tmp_path / "README.md"
    copy.write_text(README.read_text(encoding="utf-8"), encoding="utf-8")
    assert not glance.write_readme(copy, glance.readme_sections("small", RESULTS))
    assert copy.read_text(encoding="utf-8") == README.read_text(encoding="utf-8")


def test_the_plain_findings_of_readme_name_each_claim_with_the_registrys_word(claims_json):
    found = SAID.findall(readme_findings())
    assert len(found) >= 3  # the headline claims are named, not only counted
    for word, claim in found:
        assert claim in BY_ID, f"README names a claim the registry does not hold: {claim!r}"
        assert word == claims_json[claim]["verdict"], f"README says {claim}: {word!r}"
    assert {claim for _, claim in found} >= {"can-within-0.5", "can-faster", "balanced-speed-1.90x"}


def test_the_tally_of_readme_is_the_registrys_count(claims_json):
    paper = [row for row in claims_json.values() if BY_ID[row["id"]].source == "paper"]
    tally = re.search(r"The paper's claims: (.+?)\.\n", readme_findings()).group(1)
    counted = {w: int(n) for w, n in re.findall(r"([a-z ]+?) (\d+)(?:, |$)", tally)}
    assert counted == {w: sum(r["verdict"] == w for r in paper) for w in STATES}


def test_the_headline_gap_of_readme_is_the_stored_runs(claims_json):
    """CAN - Balanced over the four evaluation sets at the budget the registry leads with, recomputed from the run
    files: README's span is their smallest and largest."""
    lead = claims_json["can-within-0.5"]
    assert lead["budget"] == 2  # the stored results lead with twice the updates (3 seeds at both budgets)
    folder = RESULTS / "small" / "beyond" / "runs" / "multi30k-en-de"

    def mean(name: str, split: str) -> float:
        files = sorted(folder.glob(f"budget-{name}-x2-seed*.json"))
        assert len(files) == 3
        return statistics.fmean(json.loads(p.read_text())["result"]["scores"][split]["tok_bleu"] for p in files)

    gaps = [mean("can", s) - mean("balanced", s) for s in ("valid", "test", "test2017_flickr", "test2017_mscoco")]
    assert max(gaps) < 0
    assert (
        f"scores {-max(gaps):.2f} to {-min(gaps):.2f} BLEU below Balanced on every evaluation set" in readme_findings()
    )


def test_the_first_page_shows_the_findings_of_readme_with_marked_words(env, claims_json):
    from _code import glance

    html = glance.values(Store("small", RESULTS))["findings"]
    # one paragraph a sentence on the page, one line a finding in README; code as HTML there, in backticks here
    items = [
        re.sub(r"<code>(.*?)</code>", r"`\1`", item.replace("</p><p>", " ").removeprefix("<p>").removesuffix("</p>"))
        for item in re.findall(r"<li>(.*?)</li>", html)
    ]
    listed = re.findall(r"^\d+\. (.+)$", readme_findings(), re.M)
    assert [MARK.sub(r"\2 (`\1`)", item) for item in items] == listed and len(items) >= 3
    for claim, word in MARK.findall(html):
        assert word == claims_json[claim]["verdict"], claim


def test_readme_links_the_scorecard_for_every_claim_instead_of_listing_them(claims_json):
    """The verdict of every claim of the paper is the scorecard's to show, beside its evidence: README counts them
    as the registry does, links the scorecard, and holds no table with a verdict column."""
    paper = [k for k in claims_json if BY_ID[k].source == "paper"]
    text = README.read_text(encoding="utf-8")
    assert f"All {len(paper)} claims of the paper, each with its verdict" in readme_findings()
    assert "[the scorecard](book/scorecard.md)" in readme_findings()
    headers = [line for line in text.splitlines() if line.startswith("|") and "verdict" in line.lower()]
    assert not headers, f"README holds a verdict table: {headers}"


def code_lines(text: str) -> list[str]:
    """The command of every line of README's ```bash blocks, without its comment."""
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
    return [line.split("  #")[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_has_one_command_to_build_the_book_and_one_to_run_the_tests_which_ci_runs():
    """A reader finds one way to build the book and one to run the tests, in the section that names them, and CI
    (.ci/run) runs that very test command."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    book, test = code_lines(section)
    assert (book, test) == ("bash scripts/book.sh", "bash scripts/test.sh")
    every = code_lines(text)
    assert every.count(book) == 1 and every.count(test) == 1
    assert not [c for c in every if c not in (book, test) and re.search(r"scripts/(book|test)\.sh", c)]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert [line.strip() for line in ci if line.strip() and not line.startswith("#")][-1] == test
