"""Sentences the chapters generate from the claims registry's judgements, so that what a page says about a verdict
is what its numbers show: on how many evaluation sets the criterion was met or missed, which body of evidence the
verdict reads and why. The verdict words themselves are never written here: a page glues them as the registry's marks
(:func:`repro.studies.claims.mark`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from repro.studies.evidence import Judged
from repro.studies.verdict import FAILS, HOLDS, MIXED

SENTENCES = ("_sets", "_sets_1x", "_lead", "_sentence", "_reading", "_order", "_agreement")  # keys of generated prose


def is_sentence(key: str) -> bool:
    """Whether a chapter's glued value is a generated sentence, shown as prose (``{glue:md}``), not as a value."""
    return key.endswith(SENTENCES)


def names(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    if not items:
        return "none"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def span(values: Sequence[float], digits: int = 2) -> str:
    """ "0.84 to 0.94" over the layers, or one number where they agree at that precision."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low} to {high}"


ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
NUMBER_WORDS = {0: "none", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def sets_sentence(j: Judged, what: str = "test sets") -> str:
    """Where the intervals decided the criterion on the sets that decide (the test sets; the validation set is
    shown, never judged), in one sentence: ``Of the three test sets, the intervals meet the criterion on two and
    leave one undecided.`` (``The intervals decide none of the three test sets.``)."""
    rows = [r for r in j.sets if r.get("decides", True)]
    if not rows:
        return ""
    met = sum(r["verdict"] == HOLDS for r in rows)
    missed = sum(r["verdict"] == FAILS for r in rows)
    open_ = len(rows) - met - missed
    total = NUMBER_WORDS.get(len(rows), str(len(rows)))
    if not met and not missed:
        return f"The intervals decide none of the {total} {what}."
    parts = [f"meet the criterion on {NUMBER_WORDS.get(met, met)}"] if met else []
    parts += [f"miss it on {NUMBER_WORDS.get(missed, missed)}"] if missed else []
    parts += [f"leave {NUMBER_WORDS.get(open_, open_)} undecided"] if open_ else []
    if not met:
        parts[0] = parts[0].replace("miss it", "miss the criterion")
    return f"Of the {total} {what}, the intervals " + names(parts) + "."


def seeds_of(j: Judged) -> int:
    """The fewest seeds of a system in a body of BLEU evidence (what its standard counts)."""
    return min(j.seeds.values(), default=0)


def body_name(j: Judged) -> str:
    """A body of BLEU evidence in words: the converged models, or a budget ("the 2x budget")."""
    return f"the {j.recipe} models" if j.recipe else f"the {j.budget}x budget"


def lead_sentence(j: Judged) -> str:
    """Which body of evidence a claim's verdict reads and why (the registry's rule: a body that meets its standard
    first, then the most seeds of its weakest system, then the converged models, then the longest budget), from the
    bodies' own numbers; empty for a claim with one body."""
    others = [b for b in j.beside if b.budget is not None or b.recipe]
    if not others or (j.budget is None and not j.recipe):
        return ""
    lead_seeds = seeds_of(j)
    parts = []
    for b in others:
        if b.meets and not j.meets:
            continue
        if seeds_of(b) < lead_seeds:
            parts.append(f"{body_name(b)} has {seeds_of(b)} (fewer seeds never lead)")
        elif seeds_of(b) == lead_seeds:
            rule = "converged models lead" if j.recipe else "the longer budget leads"
            parts.append(f"{body_name(b)} has as many, and with equal seeds {rule}")
    why = "; ".join(parts)
    has = "they have" if j.recipe else "it has"
    return f"The verdict reads {body_name(j)}: {has} {lead_seeds} seeds of every system" + (f"; {why}." if why else ".")


def verdict_values(j: Judged, prefix: str) -> dict[str, Any]:
    """A judgement's sentences for a chapter to glue: ``<prefix>_sets`` (:func:`sets_sentence`) and
    ``<prefix>_lead`` (:func:`lead_sentence`)."""
    return {f"{prefix}_sets": sets_sentence(j), f"{prefix}_lead": lead_sentence(j)}


def by_verdict(word: str, holds: str, fails: str, open_: str, mixed: str | None = None) -> str:
    """The phrase a chapter's takeaway uses for a verdict word: what holds, what fails, and what the runs leave open
    (inconclusive or not run; ``mixed`` where the readings disagree, else the open phrase)."""
    if word == HOLDS:
        return holds
    if word == FAILS:
        return fails
    return mixed if word == MIXED and mixed is not None else open_
