"""The scorecard's evidence table: one short line per claim, the whole evidence in a collapsed ``<details>`` beside
it, commands shown as code. The words and numbers are the claims registry's (:mod:`repro.studies.claims`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import Any

from _code.prose import names
from _code.tables import reading_table
from repro.studies.evidence import Judged
from repro.studies.verdict import CONFIDENCE, FAILS, HOLDS, INCONCLUSIVE, MIXED, NOT_RUN

SHORT = 90  # characters of the one-line summary


def _count(n: int, one: str, more: str) -> str:
    """``1 holds``, ``3 hold``."""
    return f"{n} {one if n == 1 else more}"


def takeaway(paper: Sequence[Judged]) -> str:
    """The page's one sentence, from the verdicts of the paper's claims: how many these runs decide, which way, and
    what the open ones are (at most five numbers, so that a reader takes it in at once)."""
    n = {w: sum(j.word == w for j in paper) for w in (HOLDS, FAILS, MIXED, INCONCLUSIVE, NOT_RUN)}
    decided, still = n[HOLDS] + n[FAILS] + n[MIXED], n[INCONCLUSIVE] + n[NOT_RUN]
    kinds = [f"{n[w]} {w}" for w in (INCONCLUSIVE, NOT_RUN) if n[w]]
    open_ = f" ({', '.join(kinds)})" if kinds else ""
    if not decided:
        return f"These runs decide none of the paper's {len(paper)} claims yet{open_}: nothing is confirmed or refuted."
    against = n[FAILS] + n[MIXED]
    if against:
        ways = [
            (n[HOLDS], "holds", "hold"),
            (n[FAILS], "does not hold", "do not hold"),
            (n[MIXED], "is mixed", "are mixed"),
        ]
        said = ": " + names([_count(k, one, more) for k, one, more in ways if k])
    else:
        said = ", and it holds" if decided == 1 else ", all of which hold"
    head = f"Of the paper's {_count(len(paper), 'claim', 'claims')} these runs decide {decided}{said}"
    if not still:
        return head + "."
    if against:
        return (
            head
            + "; the rest stay open, and each claim that does not hold or is mixed goes against the paper on at least "
            "one reading."
        )
    return (
        head
        + f"; the rest stay open{open_}: nothing here contradicts the paper, and the open claims await more evidence."
    )


def as_code(text: str) -> str:
    """Escaped HTML with every `backticked` span shown as code (no literal backticks)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text, quote=False))


def summary(j: Judged) -> str:
    """The evidence in one line: its first clause (what was measured, at which scale and budget), without a command."""
    first = j.evidence.split(" | ")[0].split("; ")[0].split(": `")[0].strip()
    return first if len(first) <= SHORT else first[: SHORT - 1].rsplit(" ", 1)[0] + " …"


def evidence_cell(j: Judged) -> str:
    """A cell of the evidence table: whether it meets its standard and its strength, the summary, then the whole
    evidence (one item per part, the budgets beside the lead one on their own line) in a ``<details>`` a reader
    opens."""
    head = f"<b>{j.standard.kind}, standard {'met' if j.meets else 'not met'}:</b> {escape(strength(j), quote=False)}"
    body = "<br>".join(as_code(p.strip()) for p in j.evidence.split(" | "))
    details = f'<details class="evidence"><summary>details</summary><p>{body}</p></details>'
    return f"{head}<br>{escape(summary(j), quote=False)}{details}"


def strength(j: Judged) -> str:
    """How strong the evidence is, in a few words: seeds and budget, repeats and runs, or models and layers."""
    s = j.strength
    if isinstance(s.get("seeds"), dict) and s["seeds"]:
        seeds = f"{min(s['seeds'].values())} seeds"
        setting = f", {s['recipe']}" if s.get("recipe") else f", {s['budget']}x" if s.get("budget") else ""
        return seeds + setting + f", {s.get('scale', '')}".rstrip(", ")
    if "repeats" in s:
        runs = len(s["runs"])
        return f"{s['repeats']} repeats in {runs} run{'s' if runs > 1 else ''}, shortest {s['shortest_repeat_s']:.2f} s"
    if "layers" in s:
        return f"{s['layers']} layers of {', '.join(s['models'])}"
    if "directions" in s:
        return f"{s['directions']} directions"
    return "—"


def evidence_table(rows: Sequence[Judged]) -> str:
    """The scorecard's evidence table as HTML: id, criterion, the evidence (whether it meets its standard, its
    strength, a one-line summary, the whole of it collapsed) and what would settle the claim."""
    import pandas as pd

    frame = pd.DataFrame(
        [
            {
                "id": j.claim.id,
                "criterion": escape(j.claim.criterion, quote=False),
                "evidence": evidence_cell(j),
                "what would settle it": as_code(j.settle) if j.settle else "",
            }
            for j in rows
        ]
    )
    return reading_table(frame, escape=False).to_html()


def family_text(rows: Sequence[Judged]) -> str:
    """The family the scorecard judges, as HTML paragraphs: how many claims, how many judged and decided, and how many
    wrong verdicts chance alone would give (:func:`family`)."""
    f = family(rows)
    paragraphs = [
        f"The scorecard judges a family of {f['judged']} claims (of the {f['claims']} in the registry; the rest are "
        f"not run), each on its own {100 * CONFIDENCE:.0f} % intervals, and decides {f['decided']} of them (holds, "
        "does not hold or mixed).",
        "A decided verdict needs its intervals wholly on one side of the criterion, which chance alone does with at "
        f"most {f['per_claim']:.1%} where the truth lies on the other side.",
        f"Among the {f['decided']} decided claims chance alone would give at most {f['expected_wrong']:.2f} wrong "
        f"verdicts on average, and the chance that any of them is wrong is at most {f['any_wrong_at_most']:.0%} "
        "(Bonferroni's bound, no independence assumed).",
        "Inconclusive verdicts assert nothing and cannot be wrong this way. No correction is applied to the verdicts "
        "themselves; the count says how far to trust them together.",
    ]
    return "".join(f"<p>{p}</p>" for p in paragraphs)


def speed_runs_table(rows: Sequence[Judged], beside: bool = True):
    """One row per speed claim and stored GPU run it reads (and, with ``beside``, shows beside: eager claims on the
    eager timings, the graph claim on the graph ones): the run, its code, repeats, shortest repeat, whether they
    meet the standard for one run, and the claim read on that run alone (median ratio [interval]: verdict; a run too
    short for an interval shows its range; a run below the standard is inconclusive, whatever its interval says)."""
    import pandas as pd

    def row(claim: str, r: dict[str, Any]) -> dict[str, Any]:
        low, high = r["interval"] or r["range"]
        shown = f"[{low:.2f}, {high:.2f}]" if r["interval"] else f"(range {low:.2f}-{high:.2f})"
        word = (
            r["verdict"]
            if r["meets"] or r["verdict"] == INCONCLUSIVE
            else f"{INCONCLUSIVE} (by its interval: {r['verdict']})"
        )
        return {
            "claim": claim,
            "GPU run": r["set"],
            "repeats": r["repeats"],
            "shortest": f"{r['shortest_repeat_s']:.2f} s",
            "repeats meet the standard": "yes" if r["meets"] else "no",
            "on this run alone": f"{r['value']:.2f}x {shown}: {word}",
        }

    bodies = [(j.claim.id, body) for j in rows for body in ((j, *j.beside) if beside else (j,))]
    return pd.DataFrame([row(claim, r) for claim, body in bodies for r in body.sets])


def family(rows: Sequence[Judged]) -> dict[str, Any]:
    """The family of claims judged together and what chance alone would do to it. A decided verdict (holds, does not
    hold, mixed) needs a 95 % interval wholly on one side of the criterion's bound; if the truth lay on the other
    side, each such interval misses it on that side with at most 2.5 %, so each decided verdict is wrong by chance
    with at most 2.5 %: the expected number of wrong verdicts is at most 2.5 % of the decided ones, and the chance
    that any is wrong at most that sum (Bonferroni's bound; Holm's correction would test each at 2.5 % over the
    rank). An inconclusive verdict asserts nothing and cannot be wrong this way; a claim not run is not judged."""
    judged_rows = [j for j in rows if j.word != NOT_RUN]
    decided = [j for j in judged_rows if j.word in (HOLDS, FAILS, MIXED)]
    per_claim = (1 - CONFIDENCE) / 2
    return {
        "claims": len(rows),
        "judged": len(judged_rows),
        "decided": len(decided),
        "per_claim": per_claim,
        "expected_wrong": per_claim * len(decided),
        "any_wrong_at_most": min(1.0, per_claim * len(decided)),
        "decided_ids": [j.claim.id for j in decided],
    }
