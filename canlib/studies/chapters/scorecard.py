"""The scorecard's evidence table: one short line per claim, the whole evidence in a collapsed ``<details>`` beside
it, commands shown as code. The words and numbers are the claims registry's (:mod:`canlib.studies.claims`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

from canlib.studies.claims import Judged

SHORT = 90  # characters of the one-line summary


def as_code(text: str) -> str:
    """Escaped HTML with every `backticked` span shown as code (no literal backticks)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text, quote=False))


def summary(j: Judged) -> str:
    """The evidence in one line: its first clause (what was measured, at which scale and budget), without a command."""
    first = j.evidence.split(" | ")[0].split("; ")[0].split(": `")[0].strip()
    return first if len(first) <= SHORT else first[: SHORT - 1].rsplit(" ", 1)[0] + " …"


def evidence_cell(j: Judged) -> str:
    """A cell of the evidence table: the summary, then the whole evidence (one item per part, the budgets beside the
    lead one on their own line) in a ``<details>`` a reader opens."""
    parts = [p.strip() for p in j.evidence.split(" | ")]
    body = "<br>".join(as_code(p) for p in parts)
    return (
        f'{escape(summary(j), quote=False)}<details class="evidence"><summary>details</summary><p>{body}</p></details>'
    )


def evidence_table(rows: Sequence[Judged]) -> str:
    """The scorecard's "criterion and evidence" table as HTML: id, criterion, evidence (short, details collapsed)."""
    import pandas as pd

    frame = pd.DataFrame(
        [
            {"id": j.claim.id, "criterion": escape(j.claim.criterion, quote=False), "evidence": evidence_cell(j)}
            for j in rows
        ]
    )
    return frame.to_html(index=False, escape=False)
