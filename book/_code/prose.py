"""Sentences the chapters generate from the claims registry's judgements, so that what a page says about a verdict
is what its numbers show: on how many evaluation sets the criterion was met or missed, which body of evidence the
verdict reads and why. The verdict words themselves are never written here: a page glues them as the registry's marks
(:func:`_code.marks.mark`)."""

from __future__ import annotations

from collections.abc import Sequence

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


def count(n: int) -> str:
    """A count in words (``none``, ``one`` ... ``six``), digits beyond."""
    return NUMBER_WORDS.get(n, str(n))


def sets_sentence(j: Judged, said: tuple[str, str, str], undecided: str) -> str:
    """Where the intervals decided a claim on the sets that decide (the test sets; the validation set is shown,
    never judged), in the chapter's own words, so that no sentence repeats from page to page. ``said`` holds three
    clauses: the sets that meet the criterion (formatted with ``met`` and ``total``: the sentence's subject and
    head, always said), those that miss it (``missed``) and those left undecided (``open``), each of the last two
    said only where it counts a set; a count is in words, ``all`` where it is every set. ``undecided`` (formatted
    with ``total``) where no set is decided."""
    rows = [r for r in j.sets if r.get("decides", True)]
    if not rows:
        return ""
    met = sum(r["verdict"] == HOLDS for r in rows)
    missed = sum(r["verdict"] == FAILS for r in rows)
    counts = {"met": met, "missed": missed, "open": len(rows) - met - missed}
    if not met and not missed:
        return undecided.format(total=count(len(rows)))
    words = {k: "all" if n == len(rows) > 1 else count(n) for k, n in counts.items()} | {"total": count(len(rows))}
    head, *rest = (clause.format(**words) for clause, k in zip(said, counts) if k == "met" or counts[k])
    if len(rest) == 2:
        return f"{head}, {rest[0]}, and {rest[1]}."
    return f"{head} and {rest[0]}." if rest else f"{head}."


def seeds_of(j: Judged) -> int:
    """The fewest seeds of a system in a body of BLEU evidence (what its standard counts)."""
    return min(j.seeds.values(), default=0)


def body_name(j: Judged) -> str:
    """A body of BLEU evidence in a word: its recipe ("converged"), else its budget ("2x")."""
    return j.recipe or f"{j.budget}x"


def lead_sentence(j: Judged, said: str) -> str:
    """Which body of evidence a claim's verdict reads and why (the registry's rule: a body that meets its standard
    first, then the most seeds of its weakest system, then the converged models, then the longest budget), in the
    chapter's own words: ``said`` is formatted with ``budget`` (the body it reads, :func:`body_name`: ``2x``,
    ``converged``), ``seeds`` (of every system there), ``others`` (the other bodies) and ``rule`` (why they do not
    lead, from their seeds); empty for a claim with one body."""
    others = [b for b in j.beside if (b.budget is not None or b.recipe) and not (b.meets and not j.meets)]
    if not others or (j.budget is None and not j.recipe):
        return ""
    lead_seeds = seeds_of(j)
    fewer = [body_name(b) for b in others if seeds_of(b) < lead_seeds]
    short = [body_name(b) for b in others if seeds_of(b) > lead_seeds]  # more seeds, short of their standard
    rules = [f"{names(fewer)} has fewer seeds"] if fewer else []
    rules += [f"{names(short)} falls short of its standard"] if short else []
    if len(fewer) + len(short) < len(others):
        rules.append(
            "at equal seeds the converged models lead" if j.recipe else "at equal seeds the longer budget leads"
        )
    return said.format(
        budget=body_name(j), seeds=lead_seeds, others=names([body_name(b) for b in others]), rule="; ".join(rules)
    )


def by_verdict(word: str, holds: str, fails: str, open_: str, mixed: str | None = None) -> str:
    """The phrase a chapter's takeaway uses for a verdict word: what holds, what fails, and what the runs leave open
    (inconclusive or not run; ``mixed`` where the readings disagree, else the open phrase)."""
    if word == HOLDS:
        return holds
    if word == FAILS:
        return fails
    return mixed if word == MIXED and mixed is not None else open_
