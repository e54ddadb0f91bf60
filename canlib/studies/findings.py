"""What the stored results show, as sentences whose numbers are computed from them, never typed.

A chapter's prose may not type a result (``tests/test_book_text.py`` refuses an unlabelled decimal), so
every sentence that quotes one of our numbers is a :class:`Finding` built here from the stored results
and rendered by a chapter cell with :func:`markdown`. Each finding keeps the numbers it quotes and the
stored files they come from, so a test can recompute them independently from those files.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Finding:
    """One sentence of a chapter: ``text`` (Markdown, numbers formatted in), the numbers it quotes by
    name, and the stored results they come from (paths relative to the results folder)."""

    text: str
    values: dict[str, float] = field(default_factory=dict)
    sources: tuple[str, ...] = ()


def markdown(findings: Iterable[Finding]):
    """The findings as a Markdown bullet list, for a chapter cell (tagged ``remove-input``)."""
    from IPython.display import Markdown

    return Markdown("\n".join(f"* {f.text}" for f in findings))
