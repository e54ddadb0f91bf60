"""The claims registry: every claim the book tests, declared once, judged once, in one vocabulary.

How the registry works:

* **Declared once.** :data:`CLAIMS` lists every claim as a :class:`Claim`: a stable short id (``can-speed-1.28x``), a
  name that states its criterion, whose claim it is (``paper``, or ``book`` for the book's own questions), the
  paper's value, the chapter that shows the evidence, and the evidence it reads (:class:`Contrast` of stored runs,
  :class:`SpeedRatio` of a GPU run, :class:`BatchCurve`, :class:`Similarity`, :class:`GateShare`, :class:`LossGap`,
  :class:`LossFalling`, :class:`CrossTask`).
* **Judged once.** ``judged(store)[id]`` judges a claim the first time a page asks for it, by the judge of its kind
  of evidence (:mod:`canlib.studies.judges`, which applies the one rule of :mod:`canlib.studies.verdict`), and keeps
  the :class:`Judged` value for the store's scale and folder: no contrast is judged twice in a process (and the
  bootstrap is cached on disk). No other module calls the verdict functions.
* **One vocabulary.** A verdict is a state (held, did not hold, mixed, held or failed on some sets, within noise, not
  run yet, not tested here) and its word is :data:`VOCABULARY`'s for the claim's source: "reproduced" for the paper's
  claims, "holds" for the book's own. Pages show it through :func:`mark`, which tags the word with the claim id, so a
  test can read every page and README and fail on two words for one claim.
* **Evidence in the open.** A BLEU claim reads four evaluation sets with the seed interval and the pooled bootstrap;
  where it compares Balanced and CAN and the budget study stored 2x models, its 2x verdict (at least two seeds) leads
  and the 1x verdict stands beside it (:attr:`Judged.beside`). A speed claim reads the per-repeat ratios of one named
  GPU run, :func:`speed_run` (the run that timed the most tokens per system, the latest among equals), with every
  other stored run's verdict beside it; a run that reaches the opposite verdict makes the claim mixed across runs.
* **Data, not only words.** :meth:`Judged.as_json` gives the per-set values, both intervals, the budget and the named
  evidence; ``python -m canlib claims`` prints the table and ``--json`` that list.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path

from canlib.model.config import LABELS
from canlib.results.studies import STUDENTS
from canlib.studies import paper
from canlib.studies.evidence import (  # noqa: F401  (the registry's types, read from here by the chapters)
    VOCABULARY,
    BatchCurve,
    Claim,
    Contrast,
    CrossTask,
    GateShare,
    Judged,
    LossFalling,
    LossGap,
    Similarity,
    SpeedRatio,
    Term,
    Threshold,
)
from canlib.studies.judges import JUDGES, run_name, speed_run, timed_tokens  # noqa: F401
from canlib.studies.store import Store, stored_scale
from canlib.studies.verdict import ON_PAR


def mark(j: Judged, budget: int | None = None) -> str:
    """The verdict word as HTML tagged with its claim id (and the budget it reads where there are several), the one
    way a page shows a verdict; ``budget`` shows the claim at that budget (:meth:`Judged.at`)."""
    shown = j.at(budget) if budget is not None else j
    if shown is None:
        raise ValueError(f"{j.claim.id}: no verdict at {budget}x")
    tag = f' data-budget="{shown.budget}"' if shown.budget is not None else ""
    return f'<span class="claim-verdict" data-claim="{j.claim.id}"{tag}>{escape(shown.word)}</span>'


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


# -- the claims ------------------------------------------------------------------------------------------------


def _paper_claims() -> list[Claim]:
    t2, t4, t5, f4 = paper.table2("en-de"), paper.table4(), paper.table5(), paper.figure4()
    f7 = paper.paper_numbers()["fig7_parallel_en-de"]
    diag = [row[i] for i, row in enumerate(paper.paper_numbers()["fig2_similarity"]["self_vs_cross"])]
    gains = [rows["CAN"].speed / rows["Balanced"].speed for rows in paper.tasks().values()]
    gaps = [rows["CAN"].test_bleu - rows["Balanced"].test_bleu for rows in paper.tasks().values()]
    can = t2["CAN"].speed / t2["Balanced"].speed
    low = round(min(gains), 2)
    par = Threshold(">=", -ON_PAR)

    def keeps(system: str, against: str) -> Contrast:
        return Contrast((Term(1.0, system), Term(-1.0, against)), par, budgets=True)

    return [
        Claim(
            "balanced-speed-1.8x",
            "Balanced 12/2 decodes at least 1.8x as fast as Baseline 6/6",
            "tokens/s ratio >= 1.8 over every timed repeat",
            "paper",
            f"{t2['Balanced'].speed / t2['Baseline'].speed:.2f}x (Table 2, En-De)",
            "speed",
            SpeedRatio("balanced", "baseline", Threshold(">=", 1.8)),
            over="runs",
        ),
        Claim(
            "balanced-keeps-bleu",
            f"Balanced 12/2 keeps Baseline 6/6's BLEU (at most {ON_PAR} below)",
            f"ΔBLEU >= -{ON_PAR} on every evaluation set",
            "paper",
            f"{t2['Balanced'].test_bleu - t2['Baseline'].test_bleu:+.2f} (Table 2, En-De)",
            "results",
            keeps("balanced", "baseline"),
        ),
        Claim(
            "can-speed-1.28x",
            f"CAN decodes at least {low:.2f}x as fast as Balanced (the paper's smallest gain)",
            f"tokens/s ratio >= {low:.2f} over every timed repeat",
            "paper",
            f"{can:.2f}x En-De; {min(gains):.2f}-{max(gains):.2f}x over Tables 2-3",
            "speed",
            SpeedRatio("can", "balanced", Threshold(">=", low)),
            over="runs",
        ),
        Claim(
            "can-faster",
            "CAN decodes faster than Balanced (more than 1x)",
            "tokens/s ratio > 1 over every timed repeat",
            "paper",
            f"{can:.2f}x (Table 2, En-De)",
            "speed",
            SpeedRatio("can", "balanced", Threshold(">", 1.0)),
            over="runs",
        ),
        Claim(
            "can-within-0.5",
            f"CAN stays within {ON_PAR} BLEU of Balanced",
            f"ΔBLEU >= -{ON_PAR} on every evaluation set",
            "paper",
            f"{t2['CAN'].test_bleu - t2['Balanced'].test_bleu:+.2f} (Table 2, En-De)",
            "results",
            keeps("can", "balanced"),
        ),
        Claim(
            "can-faster-than-san",
            "CAN decodes faster than SAN (more than 1x)",
            "tokens/s ratio > 1 over every timed repeat",
            "paper",
            f"{t2['CAN'].speed / t2['SAN'].speed:.2f}x (CAN {can:.2f}x, SAN "
            f"{t2['SAN'].speed / t2['Balanced'].speed:.2f}x Balanced)",
            "speed",
            SpeedRatio("can", "san", Threshold(">", 1.0)),
            over="runs",
        ),
        Claim(
            "can-faster-than-aan",
            "CAN decodes faster than AAN (more than 1x)",
            "tokens/s ratio > 1 over every timed repeat",
            "paper",
            f"{t2['CAN'].speed / t2['AAN'].speed:.2f}x (CAN {can:.2f}x, AAN "
            f"{t2['AAN'].speed / t2['Balanced'].speed:.2f}x Balanced)",
            "speed",
            SpeedRatio("can", "aan", Threshold(">", 1.0)),
            over="runs",
        ),
        Claim(
            "attn-faster-than-ffn",
            "Compress Attention decodes faster than Compress FFN (more than 1x, Table 5)",
            "Compress Attention / Compress FFN tokens/s > 1 over every timed repeat",
            "paper",
            f"{t5['Compress Attention'].speed / t5['Compress FFN'].speed:.2f}x",
            "ablation",
            SpeedRatio("can_attn", "can_ffn", Threshold(">", 1.0)),
            over="runs",
        ),
        Claim(
            "can-ffn-keeps-bleu",
            f"Compress FFN keeps Balanced's BLEU (at most {ON_PAR} below, Table 5)",
            f"ΔBLEU >= -{ON_PAR} on every evaluation set",
            "paper",
            f"{t5['Compress FFN'].test_bleu - t5['Balanced'].test_bleu:+.2f}",
            "ablation",
            keeps("can_ffn", "balanced"),
        ),
        Claim(
            "depth-14-1-loses",
            "A 14/1 model scores below 12/2 (Figure 4)",
            "ΔBLEU < 0 on every evaluation set (with one 14/1 seed: the seed-1 pair's test-set interval alone)",
            "paper",
            f"{f4['14/1']['bleu'] - f4['12/2']['bleu']:+.2f}",
            "depths",
            Contrast((Term(1.0, "depth-14-1"), Term(-1.0, "balanced")), Threshold("<", 0.0), one_seed=True),
        ),
        Claim(
            "batch-gain-shrinks",
            f"CAN's gain over Balanced is smaller at batch {f7['batch'][-1]} than at 1 (Figure 7)",
            f"(CAN/Balanced at batch {f7['batch'][0]}) - (at {f7['batch'][-1]}) > 0 over every timed repeat",
            "paper",
            f"{1 + f7['delta_speed_pct'][0] / 100:.2f}x at {f7['batch'][0]}, "
            f"{1 + f7['delta_speed_pct'][-1] / 100:.2f}x at {f7['batch'][-1]}",
            "speed",
            BatchCurve("can", "balanced", f7["batch"][0], f7["batch"][-1]),
            over="runs",
        ),
        Claim(
            "inputs-alike",
            f"Self- and cross-attention inputs are alike: cosine similarity at least "
            f"{round(min(diag), 2):.2f} in every decoder layer (Figure 2)",
            f"cosine similarity >= {round(min(diag), 2):.2f} (the paper's lowest) in every decoder layer",
            "paper",
            f"{min(diag):.2f}-{max(diag):.2f} over the 6 layers",
            "similarity",
            Similarity(Threshold(">=", round(min(diag), 2))),
            over="layers",
        ),
        Claim(
            "can-within-0.5-tasks",
            f"CAN stays within {ON_PAR} BLEU of Balanced on every direction (Tables 2-3)",
            f"ΔBLEU >= -{ON_PAR} on every evaluation set of every Multi30k direction",
            "paper",
            f"{min(gaps):+.2f} to {max(gaps):+.2f} over {len(gaps)} tasks",
            "tasks",
            CrossTask(par),
            over="directions",
        ),
        Claim(
            "kd-can-within-0.5",
            f"With distillation CAN stays within {ON_PAR} BLEU of Balanced (Table 4)",
            f"ΔBLEU >= -{ON_PAR} on every evaluation set, both distilled",
            "paper",
            f"{t4['CAN'].after_kd - t4['Balanced'].after_kd:+.2f} (Table 4, both distilled)",
            "beyond",
            Contrast(
                (
                    Term(1.0, "can", "CAN distilled", "distill", "kd"),
                    Term(-1.0, "balanced", "Balanced distilled", "distill", "kd"),
                ),
                par,
            ),
        ),
        Claim(
            "can-6-6-hurts-less",
            "CAN hurts less on 6/6 than on 12/2 (Results)",
            "(CAN 6/6 - Baseline) - (CAN - Balanced) > 0 on every evaluation set",
            "paper",
            f"{PAPER_CAN_ON['6/6']:+.2f} vs {PAPER_CAN_ON['12/2']:+.2f} on average (Results)",
            "beyond",
            Contrast(
                (
                    Term(1.0, "can-6-6", "CAN 6/6", "can-6-6"),
                    Term(-1.0, "baseline"),
                    Term(-1.0, "can"),
                    Term(1.0, "balanced"),
                ),
                Threshold(">", 0.0),
            ),
        ),
    ]


# quoted from the paper's Results section (not in a table): "applying CAN on the standard baseline hurt the
# performance less (-0.09 BLEU points on average) than on the balanced baseline (-0.25 BLEU points on average)"
PAPER_CAN_ON = {"6/6": -0.09, "12/2": -0.25}
DECISIVE, NEAR = 0.5, 0.1  # the gate is decisive when more than half its values lie within 0.1 of 0 or 1


def _book_claims() -> list[Claim]:
    below, above = Threshold("<", 0.0), Threshold(">", 0.0)

    def pair(system: str, against: str, ok: Threshold, budgets: bool = False) -> Contrast:
        return Contrast((Term(1.0, system), Term(-1.0, against)), ok, budgets=budgets)

    def x2(system: str) -> Contrast:
        return Contrast((Term(1.0, system, f"{LABELS[system]} 2x", factor=2), Term(-1.0, system, factor=1)), above)

    def kd(system: str) -> Contrast:
        return Contrast((Term(1.0, system, f"{LABELS[system]} distilled", "distill", "kd"), Term(-1.0, system)), above)

    claims = [
        Claim(
            "can-below-balanced",
            "CAN scores below Balanced",
            "ΔBLEU < 0 on every evaluation set",
            "book",
            "—",
            "errors",
            pair("can", "balanced", below, budgets=True),
        ),
        Claim(
            "can-attn-below-balanced",
            "Compress Attention scores below Balanced",
            "ΔBLEU < 0 on every evaluation set",
            "book",
            "—",
            "ablation",
            pair("can_attn", "balanced", below),
        ),
        Claim(
            "can-ffn-below-balanced",
            "Compress FFN scores below Balanced",
            "ΔBLEU < 0 on every evaluation set",
            "book",
            "—",
            "ablation",
            pair("can_ffn", "balanced", below),
        ),
        Claim(
            "can-above-can-attn",
            "CAN scores above Compress Attention (the paper's order)",
            "ΔBLEU > 0 on every evaluation set",
            "book",
            "—",
            "ablation",
            pair("can", "can_attn", above),
        ),
        Claim(
            "can-attn-below-can-ffn",
            "Compress Attention scores below Compress FFN (the paper's order)",
            "ΔBLEU < 0 on every evaluation set",
            "book",
            "—",
            "ablation",
            pair("can_attn", "can_ffn", below),
        ),
        Claim(
            "budget-adds-balanced",
            "Twice the updates adds BLEU to Balanced",
            "Balanced 2x - 1x > 0 on every evaluation set",
            "book",
            "—",
            "results",
            x2("balanced"),
        ),
        Claim(
            "budget-adds-can",
            "Twice the updates adds BLEU to CAN",
            "CAN 2x - 1x > 0 on every evaluation set",
            "book",
            "—",
            "results",
            x2("can"),
        ),
        Claim(
            "budget-narrows-gap",
            "Twice the updates narrows CAN's gap to Balanced",
            "(CAN - Balanced at 2x) - (at 1x) > 0 on every evaluation set",
            "book",
            "—",
            "beyond",
            Contrast(
                (
                    Term(1.0, "can", "CAN 2x", factor=2),
                    Term(-1.0, "balanced", "Balanced 2x", factor=2),
                    Term(-1.0, "can", factor=1),
                    Term(1.0, "balanced", factor=1),
                ),
                above,
            ),
        ),
        Claim(
            "kd-narrows-gap",
            "Distillation narrows CAN's gap to Balanced",
            "(CAN - Balanced distilled) - (on real targets) > 0 on every evaluation set",
            "book",
            "—",
            "beyond",
            Contrast(
                (
                    Term(1.0, "can", "CAN distilled", "distill", "kd"),
                    Term(-1.0, "balanced", "Balanced distilled", "distill", "kd"),
                    Term(-1.0, "can"),
                    Term(1.0, "balanced"),
                ),
                above,
            ),
        ),
        *[
            Claim(
                f"kd-adds-{s.replace('_', '-')}",
                f"Distillation adds BLEU to {LABELS[s]}",
                f"{LABELS[s]} distilled - on real targets > 0 on every evaluation set",
                "book",
                "—",
                "beyond",
                kd(s),
            )
            for s in STUDENTS
        ],
        Claim(
            "can-6-6-within-0.5",
            f"CAN on 6/6 stays within {ON_PAR} BLEU of Baseline 6/6",
            f"ΔBLEU >= -{ON_PAR} on every evaluation set",
            "book",
            "—",
            "beyond",
            Contrast((Term(1.0, "can-6-6", "CAN 6/6", "can-6-6"), Term(-1.0, "baseline")), Threshold(">=", -ON_PAR)),
        ),
        Claim(
            "loss-balanced-above-baseline",
            "Balanced ends with a higher validation loss than Baseline",
            "final validation loss difference > 0 (seed interval)",
            "book",
            "—",
            "training",
            LossGap("balanced", "baseline"),
        ),
        Claim(
            "loss-can-above-balanced",
            "CAN ends with a higher validation loss than Balanced",
            "final validation loss difference > 0 (seed interval)",
            "book",
            "—",
            "training",
            LossGap("can", "balanced"),
        ),
        Claim(
            "loss-still-falling",
            "The validation loss still falls at the end of training",
            "(validation loss at the one before last validation) - (at the last) > 0 in every run",
            "book",
            "—",
            "training",
            LossFalling(("baseline", "balanced", "can")),
            over="runs",
        ),
        Claim(
            "gate-decisive",
            f"CAN's gate is decisive in every layer (more than {DECISIVE:.0%} of its values within {NEAR} of 0 or 1)",
            f"more than {DECISIVE:.0%} of each layer's gate values within {NEAR} of 0 or 1",
            "book",
            "—",
            "attention",
            GateShare(Threshold(">", DECISIVE), NEAR),
            over="layers",
        ),
    ]
    return claims


CLAIMS: tuple[Claim, ...] = tuple(_paper_claims() + _book_claims())
BY_ID = {c.id: c for c in CLAIMS}
if len(BY_ID) != len(CLAIMS):
    raise RuntimeError("two claims share an id")


# -- judging -------------------------------------------------------------------------------------------------------


class Judgements:
    """Every claim of one store, each judged on first use and kept: ``judged(store)[id]``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._done: dict[str, Judged] = {}

    def __getitem__(self, claim_id: str) -> Judged:
        if claim_id not in BY_ID:
            raise KeyError(f"no claim {claim_id!r}; the registry holds {', '.join(BY_ID)}")
        if claim_id not in self._done:
            claim = BY_ID[claim_id]
            self._done[claim_id] = JUDGES[type(claim.evidence)](self.store, claim, claim.evidence)
        return self._done[claim_id]

    def all(self, source: str | None = None) -> list[Judged]:
        """Every claim (or those of one source), in the registry's order."""
        return [self[c.id] for c in CLAIMS if source in (None, c.source)]


_JUDGED: dict[tuple[str, str, bool], Judgements] = {}


def judged(store: Store) -> Judgements:
    """The judgements of ``store``'s scale and folder, one per process (see the module docstring)."""
    key = (store.scale, str(store.root), store.full_budget)
    if key not in _JUDGED:
        _JUDGED[key] = Judgements(store)
    return _JUDGED[key]


# -- the table and the command line ----------------------------------------------------------------------------


def table(rows: Sequence[Judged], *, marked: bool = False, link: Callable[[str], str] | None = None):
    """One row per claim: id, claim, the paper's, ours, the verdict (marked HTML with ``marked``), the chapter."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "id": j.claim.id,
                "claim": j.claim.name,
                "paper": j.claim.paper,
                "ours": j.ours,
                "verdict": mark(j) if marked else j.word,
                "chapter": link(j.claim.chapter) if link else j.claim.chapter,
            }
            for j in rows
        ]
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", default=None, help="the scale to judge (default: small once runs are stored there)")
    parser.add_argument("--out", default=None, help="a results folder instead of book/results")
    parser.add_argument(
        "--source", choices=("paper", "book"), default=None, help="only the paper's or the book's claims"
    )
    parser.add_argument(
        "--json", action="store_true", help="a JSON list: one object per claim, with its evidence as data"
    )


def run(args: argparse.Namespace) -> int:
    root = Path(args.out) if args.out else None
    store = Store(args.scale or stored_scale(root), root)
    rows = judged(store).all(args.source)
    if args.json:
        json.dump([j.as_json() for j in rows], sys.stdout, indent=1)
        print()
        return 0
    print(table(rows).set_index("id").to_string())
    return 0
