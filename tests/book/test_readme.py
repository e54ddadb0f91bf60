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


def test_the_readme_verdicts_are_the_claims_commands_claim_by_claim(claims_json):
    """Every claim of the paper in `python -m repro claims --json` is a row of README's verdict table with the same
    verdict word, and README has no row the registry does not."""
    registry = {k: row["verdict"] for k, row in claims_json.items() if BY_ID[k].source == "paper"}
    section = README.read_text(encoding="utf-8").split("## Results in detail", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    table = next(i for i, line in enumerate(lines) if line.split("|")[1].strip() == "id")
    header = [c.strip() for c in lines[table].split("|")[1:-1]]
    rows = {}
    for line in lines[table + 2 :]:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) != len(header):
            break
        rows[cells[0]] = cells[header.index("verdict")]
    assert rows == registry
