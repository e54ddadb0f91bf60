"""The scorecard's evidence table: one short line per claim, the whole evidence in a collapsed ``<details>`` beside
it, commands shown as code. The words and numbers are the claims registry's (:mod:`canlib.studies.claims`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

from canlib.studies.claims import Judged
from canlib.studies.tables import reading_table

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


def strength(j: Judged) -> str:
    """How strong the evidence is, in a few words: seeds and budget, repeats and runs, or models and layers."""
    s = j.strength
    if "seeds" in s and isinstance(s["seeds"], dict) and s["seeds"]:
        seeds = f"{min(s['seeds'].values())} seeds" if s["seeds"] else "no seeds"
        return seeds + (f", {s['budget']}x" if s.get("budget") else "") + f", {s.get('scale', '')}".rstrip(", ")
    if "repeats" in s:
        runs = len(s["runs"])
        return f"{s['repeats']} repeats in {runs} run{'s' if runs > 1 else ''}, shortest {s['shortest_repeat_s']:.2f} s"
    if "layers" in s:
        return f"{s['layers']} layers of {', '.join(s['models'])}"
    if "directions" in s:
        return f"{s['directions']} directions"
    return "—"


def evidence_table(rows: Sequence[Judged]) -> str:
    """The scorecard's evidence table as HTML: id, criterion, the standard's kind and whether the evidence meets it,
    the evidence's strength, the evidence (short, details collapsed) and what would settle the claim."""
    import pandas as pd

    frame = pd.DataFrame(
        [
            {
                "id": j.claim.id,
                "criterion": escape(j.claim.criterion, quote=False),
                "standard": f"{j.standard.kind}: {'met' if j.meets else 'not met'}",
                "strength": escape(strength(j), quote=False),
                "evidence": evidence_cell(j),
                "what would settle it": as_code(j.settle) if j.settle else "",
            }
            for j in rows
        ]
    )
    return reading_table(frame, escape=False).to_html()


def speed_runs_table(rows: Sequence[Judged]):
    """One row per stored GPU run that a speed claim reads or shows beside: its code, repeats, shortest repeat,
    whether it meets the standard, and each speed claim's median ratio [interval] and verdict on it alone."""
    import pandas as pd

    out: dict[str, dict[str, str]] = {}
    for j in rows:
        for body in (j, *j.beside):
            for r in body.sets:
                mode = "graphs" if r["mode"] == "captured" else "eager"
                row = out.setdefault(
                    f"{r['set']}, {mode}",
                    {
                        "code": r["code"],
                        "repeats": str(r["repeats"]),
                        "shortest repeat": f"{r['shortest_repeat_s']:.2f} s",
                        "meets the standard": "yes" if r["meets"] else "no",
                    },
                )
                if r["shortest_repeat_s"] < float(row["shortest repeat"].removesuffix(" s")):  # the run's shortest
                    row["shortest repeat"] = f"{r['shortest_repeat_s']:.2f} s"
                if not r["meets"]:
                    row["meets the standard"] = "no"
                shown = (
                    f"[{r['interval'][0]:.2f}, {r['interval'][1]:.2f}]"
                    if r["interval"]
                    else f"(range {r['range'][0]:.2f}-{r['range'][1]:.2f})"
                )
                row[j.claim.id] = f"{r['value']:.2f}x {shown}: {r['verdict']}"
    frame = pd.DataFrame.from_dict(out, orient="index").fillna("")
    frame.index.name = "GPU run, mode"
    return frame
