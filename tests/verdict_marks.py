"""The verdict words a reader sees, read back from a page: the marked verdicts of the built HTML and the verdicts
README's findings name, and which claims two pages show with two different words. The claims registry's tests read
the pages it renders (repro/test_claims.py), the book's tests the pages it builds (book/test_book.py)."""

from __future__ import annotations

import re

MARK = re.compile(
    r'<span class="claim-verdict verdict-[a-z-]+" data-claim="([^"]+)"(?: data-budget="(\d+)")?>([^<]+)</span>'
)
SAID = re.compile(r"\b(holds|does not hold|mixed|inconclusive|not run) \(`([^`]+)`\)")  # README: word (`id`)


def shown_verdicts(html: str) -> list[tuple[str, str, str]]:
    """(claim id, budget or "", word) of every marked verdict in a page's HTML."""
    return [(m.group(1), m.group(2) or "", m.group(3)) for m in MARK.finditer(html)]


def readme_verdicts(text: str) -> list[tuple[str, str, str]]:
    """(claim id, "", word) of every verdict README names in its findings, written ``word (`id`)``."""
    return [(m.group(2), "", m.group(1)) for m in SAID.finditer(text)]


def disagreements(found: list[tuple[str, str, str, str]]) -> list[str]:
    """(page, id, budget, word) -> one line per claim (and budget) shown with two different words."""
    words: dict[tuple[str, str], dict[str, list[str]]] = {}
    for page, claim, budget, word in found:
        words.setdefault((claim, budget), {}).setdefault(word, []).append(page)
    return [
        f"{claim} ({budget or 'its verdict'}): "
        + "; ".join(f"{w!r} on {', '.join(sorted(set(p)))}" for w, p in ws.items())
        for (claim, budget), ws in words.items()
        if len(ws) > 1
    ]
