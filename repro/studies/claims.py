"""The claims registry: every claim the book tests, declared once as a row, judged once, in five words.

* **Declared once.** :data:`CLAIMS` is a table: one :class:`~repro.studies.evidence.Claim` row per claim,
  under a stable short id (``can-speed-1.28x``). Adding a claim is adding a row.
* **Held to a standard** (:data:`repro.studies.evidence.STANDARDS`) by its evidence's ``judge``
  (:mod:`repro.studies.judges`): below it a claim is inconclusive and says what would settle it.
* **Five words** (:data:`repro.studies.evidence.MEANINGS`). Pages show a verdict through their glue's ``mark``
  (``book/_code/marks.py``), which tags the word with the claim id, so a test can read every page and README and fail
  on a word not the registry's.
* **Data, not only words.** ``python -m repro claims`` prints the table and ``--json`` every
  :meth:`~repro.studies.evidence.Judged.as_json`: readings, intervals, strength and standard.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from canlib.catalogue import LABELS
from repro.results.studies import STUDENTS
from repro.studies import paper
from repro.studies.evidence import Claim, Judged, Threshold
from repro.studies.judges import (
    SETTLE,
    BatchCurve,
    Contrast,
    CrossTask,
    GateShare,
    LossFalling,
    LossGap,
    Similarity,
    SpeedRatio,
    Term,
)
from repro.studies.store import Store, stored_scale
from repro.studies.verdict import ON_PAR, Within

# -- the paper's figures the rows quote ---------------------------------------------------------------------------

T2, T4, T5, F4 = paper.table2("en-de"), paper.table4(), paper.table5(), paper.figure4()
F7 = paper.paper_numbers()["fig7_parallel_en-de"]
TASKS = paper.tasks().values()
CAN_GAINS = [t["CAN"].speed / t["Balanced"].speed for t in TASKS]
BALANCED_GAINS = [t["Balanced"].speed / t["Baseline"].speed for t in TASKS]
GAPS = [t["CAN"].test_bleu - t["Balanced"].test_bleu for t in TASKS]
CAN_LOW, BALANCED_LOW = round(min(CAN_GAINS), 2), round(min(BALANCED_GAINS), 2)  # the paper's smallest gains
ALIKE = 0.9  # the paper's text: "a high similarity >0.9 for the diagonal entries" (Figure 2, left)
# quoted from the paper's Results section (not in a table): "applying CAN on the standard baseline hurt the
# performance less (-0.09 BLEU points on average) than on the balanced baseline (-0.25 BLEU points on average)"
PAPER_CAN_ON = {"6/6": -0.09, "12/2": -0.25}
DECISIVE, NEAR = 0.5, 0.1  # the gate is decisive when more than half its values lie within 0.1 of 0 or 1
PAR, BELOW, ABOVE = Within(ON_PAR), Threshold("<", 0.0), Threshold(">", 0.0)
EVERY_SET = "on every test set"
# the controls of canlib's choices, each the converged models of a study of its own beside CAN's (repro.results.studies)
CONTROLS = (
    Term(0.5, "can", "CAN keeping the attention's residual", study="converged-residual"),
    Term(0.5, "can_nosplit", "CAN without the head split", study="converged-nosplit"),
)


def _diag(name: str) -> list[float]:
    return [row[i] for i, row in enumerate(paper.paper_numbers()["fig2_similarity"][name])]


def _gap(rows: dict[str, Any], a: str, b: str, where: str) -> str:
    """The paper's BLEU of ``a`` minus ``b`` in one of its tables."""
    return f"{rows[a].test_bleu - rows[b].test_bleu:+.2f} ({where})"


def _faster(a: str, b: str) -> str:
    """Table 2's speed of ``a`` over ``b`` (En-De)."""
    return f"{T2[a].speed / T2[b].speed:.2f}x"


def _over_tasks(gains: list[float]) -> str:
    return f"{min(gains):.2f}-{max(gains):.2f}x over Tables 2-3"


def _than(other: str) -> str:
    """CAN over ``other`` in Table 2, and each over Balanced."""
    return f"{_faster('CAN', other)} (CAN {_faster('CAN', 'Balanced')}, {other} {_faster(other, 'Balanced')} Balanced)"


def _pair(system: str, against: str) -> tuple[Term, Term]:
    return Term(1.0, system), Term(-1.0, against)


def _kd(system: str, weight: float = 1.0) -> Term:
    return Term(weight, system, f"{LABELS[system]} distilled", "distill", "kd")


def _x2(system: str, weight: float = 1.0) -> Term:
    return Term(weight, system, f"{LABELS[system]} 2x", factor=2)


CAN_6_6 = Term(1.0, "can-6-6", "CAN 6/6", "can-6-6")
MINUS_GAP = (Term(-1.0, "can"), Term(1.0, "balanced"))  # "... - (CAN - Balanced)": the main plan's gap taken away


def _bleu(
    claim_id: str,
    name: str,
    paper_value: str,
    chapter: str,
    terms: tuple[Term, ...],
    ok: Threshold = PAR,
    *,
    what: str = "ΔBLEU",
    source: str = "paper",
    criterion: str = "",
    **contrast: Any,
) -> Claim:
    """A BLEU contrast's row; its criterion, ``what`` against ``ok``, is read on every test set (``contrast``: the
    :class:`~repro.studies.judges.Contrast`'s ``budgets`` and ``command``)."""
    criterion = criterion or f"{ok.text(what)} {EVERY_SET}"
    return Claim(claim_id, name, criterion, paper_value, chapter, Contrast(terms, ok, **contrast), source)


def _book(claim_id: str, name: str, chapter: str, terms: tuple[Term, ...], ok: Threshold = ABOVE, **kw: Any) -> Claim:
    """One of the book's own BLEU questions, which the paper gives no figure for (by default: ``terms`` above 0)."""
    return _bleu(claim_id, name, "—", chapter, terms, ok, source="book", **kw)


T5_NAMES = {"can": "Compress All"}  # Table 5 calls CAN "Compress All"


def _ablation(claim_id: str, system: str, against: str, ok: Threshold) -> Claim:
    """A Table 5 BLEU row: ``system`` keeps ``against``'s BLEU (on par), or scores below or above it."""
    a, b = LABELS[system], LABELS[against]
    if ok == PAR:
        says = f"keeps {b}'s BLEU (within {ON_PAR} either way, Table 5)"
    else:
        says = f"scores {'below' if ok.op == '<' else 'above'} {b} (Table 5)"
    paper_value = _gap(T5, T5_NAMES.get(system, a), T5_NAMES.get(against, b), "Table 5")
    return _bleu(claim_id, f"{a} {says}", paper_value, "ablation", _pair(system, against), ok)


def _speed(
    claim_id: str, system: str, against: str, bound: float, paper_value: str, name: str = "", mode: str = "eager"
) -> Claim:
    """A speed ratio's row: at least ``bound`` times as fast (or faster, at a bound of 1), its interval included."""
    op = ">=" if bound > 1 else ">"
    name = name or f"{LABELS[system]} decodes faster than {LABELS[against]}"
    criterion = f"median tokens/s ratio {op} {bound:g}, its interval included"
    chapter = "ablation" if system.startswith("can_") else "speed"
    evidence = SpeedRatio(system, against, Threshold(op, bound), mode)
    return Claim(claim_id, name, criterion, paper_value, chapter, evidence)


def _loss_gap(claim_id: str, system: str, against: str) -> Claim:
    """Figure 8: ``system`` ends training with a higher validation loss than ``against``."""
    return Claim(
        claim_id,
        f"{LABELS[system]} ends with a higher validation loss than {LABELS[against]} (Figure 8)",
        "final validation loss difference > 0, its seed interval included",
        "higher (Figure 8)",
        "training",
        LossGap(system, against),
    )


# -- the claims: one row each --------------------------------------------------------------------------------------

CLAIMS: tuple[Claim, ...] = (
    # speed (Tables 2, 3 and 5, Figure 7)
    _speed(
        "balanced-speed-1.90x",
        "balanced",
        "baseline",
        BALANCED_LOW,
        f"{_faster('Balanced', 'Baseline')} En-De; {_over_tasks(BALANCED_GAINS)}",
        f"Balanced 12/2 decodes at least {BALANCED_LOW:.2f}x as fast as Baseline 6/6 (the paper's smallest gain)",
    ),
    _speed(
        "can-speed-1.28x",
        "can",
        "balanced",
        CAN_LOW,
        f"{_faster('CAN', 'Balanced')} En-De; {_over_tasks(CAN_GAINS)}",
        f"CAN decodes at least {CAN_LOW:.2f}x as fast as Balanced (the paper's smallest gain)",
    ),
    _speed(
        "can-speed-1.28x-graphs",
        "can",
        "balanced",
        CAN_LOW,
        f"{_over_tasks(CAN_GAINS)} (its decoder launches every kernel)",
        f"With CUDA graphs, CAN still decodes at least {CAN_LOW:.2f}x as fast as Balanced",
        mode="captured",
    ),
    _speed("can-faster", "can", "balanced", 1.0, f"{_faster('CAN', 'Balanced')} (Table 2, En-De)"),
    _speed("can-faster-than-san", "can", "san", 1.0, _than("SAN")),
    _speed("can-faster-than-aan", "can", "aan", 1.0, _than("AAN")),
    _speed(
        "attn-faster-than-ffn",
        "can_attn",
        "can_ffn",
        1.0,
        f"{T5['Compress Attention'].speed / T5['Compress FFN'].speed:.2f}x (Table 5)",
        "Compress Attention decodes faster than Compress FFN (Table 5)",
    ),
    Claim(
        "batch-gain-shrinks",
        f"CAN's gain over Balanced is smaller at batch {F7['batch'][-1]} than at 1 (Figure 7)",
        f"(CAN/Balanced at batch {F7['batch'][0]}) - (at {F7['batch'][-1]}) > 0, its interval included",
        f"{1 + F7['delta_speed_pct'][0] / 100:.2f}x at {F7['batch'][0]}, "
        f"{1 + F7['delta_speed_pct'][-1] / 100:.2f}x at {F7['batch'][-1]} (Figure 7)",
        "speed",
        BatchCurve("can", "balanced", F7["batch"][0], F7["batch"][-1]),
    ),
    # BLEU (Tables 2 to 5, Figure 4, the Results section)
    _bleu(
        "balanced-keeps-bleu",
        f"Balanced 12/2 keeps Baseline 6/6's BLEU (within {ON_PAR} either way)",
        _gap(T2, "Balanced", "Baseline", "Table 2, En-De"),
        "results",
        _pair("balanced", "baseline"),
        budgets=True,
    ),
    _bleu(
        "can-within-0.5",
        f"CAN stays within {ON_PAR} BLEU of Balanced",
        _gap(T2, "CAN", "Balanced", "Table 2, En-De"),
        "results",
        _pair("can", "balanced"),
        budgets=True,
    ),
    _bleu(
        "can-below-balanced",
        "CAN scores below Balanced (it \u201cslightly underperforms\u201d)",
        _gap(T2, "CAN", "Balanced", "Table 2, En-De"),
        "errors",
        _pair("can", "balanced"),
        BELOW,
        budgets=True,
    ),
    Claim(
        "can-within-0.5-tasks",
        f"CAN stays within {ON_PAR} BLEU of Balanced on every direction (Tables 2-3)",
        f"{PAR.text('ΔBLEU')} {EVERY_SET} of every Multi30k direction",
        f"{min(GAPS):+.2f} to {max(GAPS):+.2f} over {len(GAPS)} tasks",
        "tasks",
        CrossTask(PAR),
    ),
    _bleu(
        "depth-14-1-loses",
        "A 14/1 model scores below 12/2 (Figure 4)",
        f"{F4['14/1']['bleu'] - F4['12/2']['bleu']:+.2f} (Figure 4)",
        "depths",
        _pair("depth-14-1", "balanced"),
        BELOW,
    ),
    _ablation("can-ffn-keeps-bleu", "can_ffn", "balanced", PAR),
    _ablation("can-attn-below-balanced", "can_attn", "balanced", BELOW),
    _ablation("can-above-can-attn", "can", "can_attn", ABOVE),
    _ablation("can-attn-below-can-ffn", "can_attn", "can_ffn", BELOW),
    *(
        _bleu(
            f"kd-adds-{s}",
            f"Distillation adds BLEU to {LABELS[s]} (Table 4)",
            f"{T4[LABELS[s]].after_kd - T4[LABELS[s]].before_kd:+.2f} (Table 4)",
            "beyond",
            (_kd(s), Term(-1.0, s)),
            ABOVE,
            what=f"{LABELS[s]} distilled - on real targets",
        )
        for s in STUDENTS
    ),
    _bleu(
        "kd-narrows-gap",
        "Distillation narrows CAN's gap to Balanced (Table 4: it \u201ccloses the performance gap\u201d)",
        f"{(T4['CAN'].after_kd - T4['Balanced'].after_kd) - (T4['CAN'].before_kd - T4['Balanced'].before_kd):+.2f}"
        " (Table 4)",
        "beyond",
        (_kd("can"), _kd("balanced", -1.0), *MINUS_GAP),
        ABOVE,
        what="(CAN - Balanced distilled) - (on real targets)",
    ),
    _bleu(
        "kd-can-within-0.5",
        f"With distillation CAN stays within {ON_PAR} BLEU of Balanced (Table 4)",
        f"{T4['CAN'].after_kd - T4['Balanced'].after_kd:+.2f} (Table 4, both distilled)",
        "beyond",
        (_kd("can"), _kd("balanced", -1.0)),
        criterion=f"{PAR.text('ΔBLEU')} {EVERY_SET}, both distilled",
    ),
    _bleu(
        "can-6-6-hurts-less",
        "CAN hurts less on 6/6 than on 12/2 (Results)",
        f"{PAPER_CAN_ON['6/6']:+.2f} vs {PAPER_CAN_ON['12/2']:+.2f} on average (Results)",
        "beyond",
        (CAN_6_6, Term(-1.0, "baseline"), *MINUS_GAP),
        ABOVE,
        what="(CAN 6/6 - Baseline) - (CAN - Balanced)",
    ),
    # what the paper measured inside trained models (Figures 2 and 8)
    Claim(
        "inputs-alike",
        f"Self- and cross-attention inputs are alike: cosine similarity above {ALIKE} in every decoder layer "
        "(Figure 2)",
        f"cosine similarity > {ALIKE} in every decoder layer of Baseline 6/6 and of Balanced 12/2",
        f"> {ALIKE} (its text); its figure: {min(_diag('self_vs_cross')):.2f}-{max(_diag('self_vs_cross')):.2f}",
        "similarity",
        Similarity(Threshold(">", ALIKE)),
    ),
    Claim(
        "ffn-inputs-less-alike",
        "Cross-attention and FFN inputs are less alike than self- and cross-attention inputs (Figure 2)",
        "similarity(self, cross) - similarity(cross, FFN) > 0 in every decoder layer of Baseline 6/6 and Balanced 12/2",
        "its figure: "
        + ", ".join(f"{a - b:+.2f}" for a, b in zip(_diag("self_vs_cross"), _diag("cross_vs_ffn")))
        + " by layer",
        "similarity",
        Similarity(ABOVE, than="cross_vs_ffn"),
    ),
    _loss_gap("loss-balanced-above-baseline", "balanced", "baseline"),
    _loss_gap("loss-can-above-balanced", "can", "balanced"),
    # the book's own questions
    *(
        _book(
            f"budget-adds-{s}",
            f"Twice the updates adds BLEU to {LABELS[s]}",
            "results",
            (_x2(s), Term(-1.0, s, factor=1)),
            what=f"{LABELS[s]} 2x - 1x",
        )
        for s in ("balanced", "can")
    ),
    _book(
        "budget-narrows-gap",
        "Twice the updates narrows CAN's gap to Balanced",
        "beyond",
        (_x2("can"), _x2("balanced", -1.0), *MINUS_GAP),
        what="(CAN - Balanced at 2x) - (at 1x)",
    ),
    _book(
        "can-6-6-within-0.5",
        f"CAN on 6/6 stays within {ON_PAR} BLEU of Baseline 6/6",
        "beyond",
        (CAN_6_6, Term(-1.0, "baseline")),
        PAR,
    ),
    _book(
        "choices-explain-gap",
        "canlib's choices explain part of CAN's gap: CAN without them (the mean of its two controls, keeping the "
        "attention's residual and without the head split of its 4d values) scores above CAN",
        "results",
        (*CONTROLS, Term(-1.0, "can", "CAN", study="converged")),
        what="(CAN keeping the residual + CAN without the head split) / 2 - CAN",
        command=SETTLE,
    ),
    Claim(
        "loss-still-falling",
        "The validation loss still falls at the end of training",
        "(validation loss at the one before last validation) - (at the last) > 0 in every run",
        "—",
        "training",
        LossFalling(("baseline", "balanced", "can")),
        "book",
    ),
    Claim(
        "gate-decisive",
        f"CAN's gate is decisive in every layer (more than {DECISIVE:.0%} of its values within {NEAR} of 0 or 1)",
        f"more than {DECISIVE:.0%} of each layer's gate values within {NEAR} of 0 or 1",
        "—",
        "attention",
        GateShare(Threshold(">", DECISIVE), NEAR),
        "book",
    ),
)
BY_ID = {c.id: c for c in CLAIMS}
if len(BY_ID) != len(CLAIMS):
    raise RuntimeError("two claims share an id")


# -- judging -------------------------------------------------------------------------------------------------------


class Judgements(dict[str, Judged]):
    """Every claim of one store, each judged on first use and kept: ``judged(store)[id]``."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def __missing__(self, claim_id: str) -> Judged:
        if claim_id not in BY_ID:
            raise KeyError(f"no claim {claim_id!r}; the registry holds {', '.join(BY_ID)}")
        claim = BY_ID[claim_id]
        self[claim_id] = claim.evidence.judge(self.store, claim)
        return self[claim_id]

    def all(self, source: str | None = None) -> list[Judged]:
        """Every claim (or those of one source), in the registry's order."""
        return [self[c.id] for c in CLAIMS if source in (None, c.source)]


_JUDGED: dict[tuple[str, str, bool], Judgements] = {}


def judged(store: Store) -> Judgements:
    """The judgements of ``store``'s scale and folder, one per process (see the module docstring)."""
    return _JUDGED.setdefault((store.scale, str(store.root), store.full_budget), Judgements(store))


# -- the table and the command line ----------------------------------------------------------------------------


def table(rows: Sequence[Judged]):
    """One row per claim: id, claim, the paper's, ours, the verdict, the chapter."""
    import pandas as pd

    columns = ["id", "claim", "paper", "ours", "verdict", "chapter"]
    return pd.DataFrame([j.as_json(beside=False) for j in rows], columns=columns)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", help="the scale to judge (default: small once runs are stored there)")
    parser.add_argument("--out", type=Path, help="a results folder instead of book/results")
    parser.add_argument("--source", choices=("paper", "book"), help="only the paper's or the book's claims")
    parser.add_argument("--json", action="store_true", help="a JSON list of the claims, each with its evidence as data")


def run(args: argparse.Namespace) -> int:
    rows = judged(Store(args.scale or stored_scale(args.out), args.out)).all(args.source)
    if args.json:
        print(json.dumps([j.as_json() for j in rows], indent=1))
    else:
        print(table(rows).set_index("id").to_string())
    return 0
