"""README and the book's first page say what the claims registry says: their generated sections are what the stored
results give now, every verdict they name is the registry's word for that claim, the tally is the registry's count,
and the headline numbers are the stored runs' (recomputed here from the JSON files with statistics only)."""

from __future__ import annotations

import json
import re
import statistics

import pytest
from conftest import REPO

from canlib.studies import claims
from canlib.studies.claims import BY_ID, CLAIMS
from canlib.studies.store import Store
from canlib.studies.verdict import STATES

README = REPO / "README.md"
RESULTS = REPO / "book" / "results"
QUOTED = re.compile(r"\u201c([^\u201d]+)\u201d: ([a-z ]+?)(?=[;.,]|$)", re.M)  # “claim name”: word
MARKED = re.compile(r'\u201c([^\u201d]+)\u201d: <span class="claim-verdict" data-claim="([^"]+)"[^>]*>([^<]+)</span>')
NAMES = {c.name: c.id for c in CLAIMS}


def readme_findings() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("## What this reproduction found", 1)[1].split("\n## ", 1)[0]


@pytest.fixture
def env(monkeypatch, shared_data):
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    claims._JUDGED.clear()


def test_the_readme_sections_are_what_the_stored_results_give_now(env):
    """README cannot glue: its sections are generated (python -m canlib.studies.chapters.glance --readme), and this
    fails when the stored results or the code give another finding or table than README holds."""
    from canlib.studies.chapters import glance

    want = glance.readme_sections("small", RESULTS)
    got = glance.readme_text(README)
    assert got == {k: v + "\n" for k, v in want.items()}


def test_the_plain_findings_of_readme_name_each_claim_with_the_registrys_word(claims_json):
    found = QUOTED.findall(readme_findings())
    assert len(found) >= 5  # the headline claims are named, not only counted
    for name, word in found:
        assert name in NAMES, f"README names a claim the registry does not hold: {name!r}"
        assert word == claims_json[NAMES[name]]["verdict"], f"README says {name!r}: {word!r}"
    assert {NAMES[n] for n, _ in found} >= {"can-within-0.5", "can-faster", "balanced-speed-1.90x"}


def test_the_tally_of_readme_is_the_registrys_count(claims_json):
    paper = [row for row in claims_json.values() if BY_ID[row["id"]].source == "paper"]
    tally = re.search(r"The paper's (\d+) claims: (.+?)\.", readme_findings())
    assert int(tally.group(1)) == len(paper)
    counted = dict((w, int(n)) for w, n in re.findall(r"([a-z ]+?) (\d+)(?:,|$)", tally.group(2).strip()))
    assert {w.strip(): n for w, n in counted.items()} == {w: sum(r["verdict"] == w for r in paper) for w in STATES}


def test_the_headline_gap_of_readme_is_the_stored_runs(claims_json):
    """CAN - Balanced over the four evaluation sets at the budget the registry leads with, recomputed from the run
    files: README's span is their smallest and largest."""
    lead = claims_json["can-within-0.5"]
    folder = RESULTS / "small" / "beyond" / "runs" / "multi30k-en-de" if lead["budget"] == 2 else None
    assert folder is not None  # the stored results lead with twice the updates (3 seeds at both budgets)

    def mean(name: str, split: str) -> float:
        files = sorted(folder.glob(f"budget-{name}-x2-seed*.json"))
        assert len(files) == 3
        return statistics.fmean(json.loads(p.read_text())["result"]["scores"][split]["tok_bleu"] for p in files)

    gaps = [mean("can", s) - mean("balanced", s) for s in ("valid", "test", "test2017_flickr", "test2017_mscoco")]
    assert f"CAN − Balanced is {min(gaps):+.2f} to {max(gaps):+.2f} BLEU" in readme_findings()


def test_the_first_page_shows_the_same_findings_as_readme_with_marked_words(env, claims_json):
    from canlib.studies.chapters import glance

    html = glance.values(Store("small", RESULTS))["findings"]
    marked = MARKED.findall(html)
    assert marked and all(BY_ID[claim].name == name for name, claim, _ in marked)
    assert all(word == claims_json[claim]["verdict"] for _, claim, word in marked)
    plain = {(n, w) for n, w in QUOTED.findall(readme_findings())}
    assert {(name, word) for name, _, word in marked} == plain


def test_the_readme_verdicts_are_the_claims_commands_claim_by_claim(claims_json):
    """Every claim of the paper in `python -m canlib claims --json` is a row of README's verdict table with the same
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
