"""How a page shows a verdict: the registry's word as HTML tagged with its claim id (:func:`mark`), so that a test
can read every built page and README and fail on a word not the registry's (``python -m repro claims --json``); the
marks a chapter glues into its prose (:func:`marks`), and the registry's table with its words marked (:func:`table`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from repro.studies import claims
from repro.studies.claims import judged
from repro.studies.evidence import Judged
from repro.studies.store import Store


def mark(j: Judged, budget: int | None = None) -> str:
    """The verdict word as HTML tagged with its claim id (and the budget it reads where there are several), the one
    way a page shows a verdict; ``budget`` shows the claim at that budget (:meth:`Judged.at`)."""
    shown = j.at(budget) if budget is not None else j
    if shown is None:
        raise ValueError(f"{j.claim.id}: no verdict at {budget}x")
    tag = f' data-budget="{shown.budget}"' if shown.budget is not None else ""
    word = "verdict-" + shown.word.replace(" ", "-")  # one CSS class per word: book/_static/outputs.css colours it
    return f'<span class="claim-verdict {word}" data-claim="{j.claim.id}"{tag}>{escape(shown.word)}</span>'


def marks(store: Store, ids: Sequence[str]) -> dict[str, str]:
    """The marked verdict of each claim of ``ids`` on ``store``, and of each budget it was judged at, under
    :func:`glue_key` names: what a chapter glues so that its prose shows the registry's word."""
    out: dict[str, str] = {}
    for claim_id in ids:
        j = judged(store)[claim_id]
        out[glue_key(claim_id)] = mark(j)
        for other in (j, *j.beside):
            if other.budget is not None:
                out[glue_key(claim_id, other.budget)] = mark(j, other.budget)
    return out


def glue_key(claim_id: str, budget: int | None = None) -> str:
    """The name a chapter glues a claim's marked verdict under: ``verdict_can_speed_1_28x`` (``_1x`` for a budget)."""
    key = "verdict_" + "".join(ch if ch.isalnum() else "_" for ch in claim_id)
    return key + (f"_{budget}x" if budget is not None else "")


def table(rows: Sequence[Judged], *, marked: bool = False, link: Callable[[str], str] | None = None):
    """The registry's table (:func:`repro.studies.claims.table`), its verdicts marked (HTML, :func:`mark`) with
    ``marked`` and its chapters passed through ``link``."""
    frame = claims.table(rows)
    if marked:
        frame["verdict"] = [mark(j) for j in rows]
    if link:
        frame["chapter"] = [link(j.claim.chapter) for j in rows]
    return frame
