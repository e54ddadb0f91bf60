"""Fast checks of the book's text (no execution): citations resolve, every chapter ends with exercises and
collapsed solutions, and numbers the prose quotes from the paper agree with paper_numbers.json."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from canlib.studies.paper import paper_numbers

REPO = Path(__file__).resolve().parents[1]


def chapters() -> list[Path]:
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part["chapters"]]
    return [REPO / f"{f}.md" for f in files if not f.endswith("references")]


def test_every_cited_key_is_in_references_bib():
    keys = set(re.findall(r"@\w+\{([^,\s]+),", (REPO / "book" / "references.bib").read_text()))
    for path in chapters():
        for group in re.findall(r"\{cite[:a-z]*\}`([^`]+)`", path.read_text()):
            for key in group.split(","):
                assert key.strip() in keys, f"{path.name}: {{cite}} key {key.strip()!r} is not in book/references.bib"


def test_every_chapter_ends_with_exercises_and_collapsed_solutions():
    for path in chapters():
        text = path.read_text()
        assert "\n## Exercises\n" in text, f"{path.name}: no '## Exercises' section"
        tail = text.split("\n## Exercises\n")[-1]
        assert "\n## " not in tail, f"{path.name}: the Exercises section is not the last one"
        assert re.search(r"```\{admonition\} Solutions\n:class: dropdown\n", tail), f"{path.name}: no collapsed solutions"
        assert len(re.findall(r"^\d\. ", tail.split("```{admonition}")[0], flags=re.M)) >= 2, f"{path.name}: < 2 exercises"


def test_the_speedups_the_introduction_quotes_are_the_papers_maxima_not_means():
    paper = paper_numbers()
    ratios = [(rows["CAN"][2] / rows["Balanced"][2], rows["CAN"][2] / rows["Baseline"][2])
              for table in ("table2_wmt14", "table3_wmt17") for task, rows in paper[table].items() if not task.startswith("_")]
    assert len(ratios) == 14
    assert round(max(r[0] for r in ratios), 2) == 1.42 and round(max(r[1] for r in ratios), 2) == 2.82
    assert sum(r[0] for r in ratios) / 14 < 1.42 and sum(r[1] for r in ratios) / 14 < 2.82
    intro = (REPO / "book" / "intro.md").read_text()
    assert "**maxima**" in intro


def test_the_fig2_diagonal_quoted_in_the_derivation_matches_the_paper():
    diagonal = [row[i] for i, row in enumerate(paper_numbers()["fig2_similarity"]["self_vs_cross"])]
    text = (REPO / "book" / "compress.md").read_text()
    assert f"gives {diagonal[0]:.2f} and {diagonal[1]:.2f} for layers 1-2" in text
    assert f"and {min(diagonal[2:]):.2f}-{max(diagonal[2:]):.2f} for layers 3-6" in text
    assert "above 0.9 between the two" not in text
