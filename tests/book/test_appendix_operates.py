"""Chapters teach, the appendix operates: no page outside the Appendix part of _toc.yml holds a provenance table or
section (where, when and on what machine a result was made) or an operations section (how to run things).

What counts, read from a page's MyST source (no build):

* a heading or admonition title that names provenance or operations: "provenance", numbers/runs/results/models/
  measurements/counts "come from" (not "where the speed comes from", a chapter's question), "operations",
  "set up"/"setup", "install", "running it";
* a code cell that shows provenance: it calls a provenance display (``models_provenance``, ``cpu_provenance``,
  ``provenance_table``: any call named ``*provenance`` or ``*provenance_table``) or prints a provenance record's
  ``commit``, ``date`` or ``device``;
* a glue reference to a key named ``*provenance*`` (a glued provenance table);
* a shell block (```` ```bash ````, ``sh``, ``shell``, ``console``): commands to run are the appendix's.

A sentence may still name a commit or a device (the counts of a chapter say which code they count); the
provenance appendix (book/provenance.md) gathers the tables, and a chapter links it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

SECTION_WORDS = re.compile(
    r"\bprovenance\b|\b(numbers|runs|results|models|measurements|counts) comes? from\b"
    r"|\boperations?\b|\bset ?up\b|\binstall|\brunning it\b",
    re.IGNORECASE,
)
SHOWS_PROVENANCE = re.compile(
    r"\b\w*provenance(_table)?\s*\("  # models_provenance(...), cpu_provenance(...), provenance_table(...)
    r"|\bprov\w*\s*\[\s*[\"'](commit|date|device)[\"']\s*\]"  # provenance["commit"] and the like
)
GLUED_PROVENANCE = re.compile(r"\{glue(:\w+)?\}`[^`]*provenance[^`]*`|\{glue\}\s+\S*provenance", re.IGNORECASE)
SHELL = {"bash", "sh", "shell", "console", "zsh"}
FENCE = re.compile(r"^(`{3,}|:{3,})\s*(\S*)\s*(.*)$")


def pages(appendix: bool) -> list[Path]:
    """The pages of _toc.yml outside its Appendix part (root first), or with ``appendix=True`` those inside it."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text(encoding="utf-8"))
    inside = [c["file"] for p in toc["parts"] if p.get("caption") == "Appendix" for c in p["chapters"]]
    outside = [toc["root"]] + [c["file"] for p in toc["parts"] if p.get("caption") != "Appendix" for c in p["chapters"]]
    return [REPO / f"{f}.md" for f in (inside if appendix else outside)]


def operations_and_provenance(text: str) -> list[str]:
    """What of a page's MyST source is a provenance table or section or an operations section, one line each
    (line number and why); empty for a page that only teaches."""
    found = []
    lines = text.split("\n")
    closing = None  # the fence that ends the code cell or code block being read, None outside one
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if closing is not None:
            if fence and fence.group(1) == closing and not fence.group(2):
                closing = None
            elif SHOWS_PROVENANCE.search(line):
                found.append(f"line {number}: a code cell shows provenance: {line.strip()}")
            continue
        if GLUED_PROVENANCE.search(line):
            found.append(f"line {number}: a glued provenance: {line.strip()}")
        if fence and fence.group(2):
            kind = fence.group(2)
            if kind.startswith("{code-cell}") or not kind.startswith("{"):
                closing = fence.group(1)  # a code cell or a plain code block: its lines are code, not headings
                if kind.lower() in SHELL or (kind == "{code-block}" and fence.group(3).lower() in SHELL):
                    found.append(f"line {number}: a shell block (commands to run)")
            elif kind.startswith("{admonition}") and SECTION_WORDS.search(fence.group(3)):
                found.append(f"line {number}: an admonition titled {fence.group(3)!r}")
            elif kind.startswith("{code-block}") and fence.group(3).lower() in SHELL:
                found.append(f"line {number}: a shell block (commands to run)")
            continue
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading and SECTION_WORDS.search(heading.group(1)):
            found.append(f"line {number}: a section headed {heading.group(1)!r}")
    return found


def test_the_markers_find_provenance_and_operations_and_pass_teaching():
    """Each marker on a small page written here, and what is not one: a Python comment is no heading, a sentence
    naming a commit no table, a Python cell no shell block."""
    teaching = (
        "# A chapter\n\n## What the runs show\n\nThe counts are of commit abc1234.\n\n"
        "```{code-cell} ipython3\n# the provenance of nothing: a comment\nx = store.provenances(runs)\n```\n\n"
        "```python\n# Where it comes from\n```\n"
    )
    assert operations_and_provenance(teaching) == []
    assert operations_and_provenance("# Where the speed comes from (Table 2)\n") == []  # a question a chapter asks
    marked = {
        "## Where these numbers come from\n": "section headed",
        "### Provenance\n": "section headed",
        "## Operations\n": "section headed",
        "```{admonition} Where the 2x runs come from\n:class: dropdown\ntext\n```\n": "admonition titled",
        "```{code-cell} ipython3\nprint(models_provenance(store, ('baseline',), prov))\n```\n": "shows provenance",
        "```{code-cell} ipython3\nreading_table(cpu_provenance(p))\n```\n": "shows provenance",
        "```{code-cell} ipython3\nprint(f\"commit {provenance['commit'][:7]}\")\n```\n": "shows provenance",
        "````{admonition} Notes\n```{glue} provenance\n```\n````\n": "glued provenance",
        "The runs: {glue:text}`plan_provenance`.\n": "glued provenance",
        "```bash\npython -m repro experiment --scale small\n```\n": "shell block",
        "```{code-block} console\n$ make\n```\n": "shell block",
    }
    for page, why in marked.items():
        found = operations_and_provenance(page)
        assert len(found) == 1 and why in found[0], (page, found)


def test_the_appendix_holds_the_provenance_tables():
    """The provenance the chapters link is in the Appendix part: the tables move, they do not vanish."""
    appendix = {p.stem: p.read_text(encoding="utf-8") for p in pages(appendix=True)}
    assert "provenance" in appendix, "book/provenance.md is not in the Appendix part of _toc.yml"
    assert operations_and_provenance(appendix["provenance"]), "the provenance appendix shows no provenance"


@pytest.mark.parametrize("page", pages(appendix=False), ids=lambda p: p.stem)
def test_no_chapter_outside_the_appendix_holds_provenance_or_operations(page: Path):
    found = operations_and_provenance(page.read_text(encoding="utf-8"))
    assert not found, (
        f"{page.name} (outside the Appendix of _toc.yml) operates; move it to the appendix:\n" + "\n".join(found)
    )
