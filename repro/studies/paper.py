"""The paper's reported numbers (tables and figures), shipped with the package.

Quoted as the paper's: chapters print them beside our measurements, never instead of them. Each table row is read
by name through a small accessor (:func:`table2`, :func:`tasks`, :func:`table4`, :func:`table5`,
:func:`figure4`), whose fields are the columns the paper's table gives, so no caller indexes a bare position.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import NamedTuple


@lru_cache(maxsize=1)
def _load() -> dict:
    return json.loads(resources.files("repro").joinpath("resources/paper_numbers.json").read_text(encoding="utf-8"))


def paper_numbers() -> dict:
    """The paper's numbers, keyed by table/figure (e.g. ``table2_wmt14``, ``fig2_similarity``); a fresh copy."""
    return json.loads(json.dumps(_load()))


class Table2Row(NamedTuple):
    """One system on one task of Tables 2 and 3: test BLEU, valid BLEU, decoding speed (target tokens/s)."""

    test_bleu: float
    valid_bleu: float
    speed: float  # paper_numbers.json: speed_tok_per_s


class Table4Row(NamedTuple):
    """One system of Table 4: test BLEU trained on real targets and on the Balanced teacher's translations."""

    before_kd: float
    after_kd: float


class Table5Row(NamedTuple):
    """One row of Table 5 (the ablation, WMT14 En-De): test BLEU and decoding speed (target tokens/s)."""

    test_bleu: float
    speed: float


def _rows(key: str, row: type[NamedTuple]) -> dict[str, object]:
    """A table's rows (``_``-prefixed entries left out), after checking that its stored columns are the row's
    fields, in order."""
    table = _load()[key]
    if [c.removesuffix("_tok_per_s") for c in table["_columns"]] != list(row._fields):
        raise ValueError(f"paper_numbers.json {key}: columns {table['_columns']}, the accessor reads {row._fields}")
    return {k: v for k, v in table.items() if not k.startswith("_")}


def _by_task(key: str) -> dict[str, dict[str, Table2Row]]:
    return {task: {s: Table2Row(*v) for s, v in rows.items()} for task, rows in _rows(key, Table2Row).items()}


def table2(task: str = "en-de") -> dict[str, Table2Row]:
    """Table 2 (WMT14) on ``task`` ("en-de", "de-en", "en-fr", "fr-en"): {system label: row}."""
    return _by_task("table2_wmt14")[task]


def tasks() -> dict[str, dict[str, Table2Row]]:
    """The paper's 14 tasks of Tables 2 (WMT14) and 3 (WMT17): {"wmt14 en-de": {system label: row}, ...}."""
    wmt14, wmt17 = _by_task("table2_wmt14"), _by_task("table3_wmt17")
    return {f"wmt14 {t}": rows for t, rows in wmt14.items()} | {f"wmt17 {t}": rows for t, rows in wmt17.items()}


def table4() -> dict[str, Table4Row]:
    """Table 4 (knowledge distillation, WMT14 En-De): {system label: row}."""
    return {s: Table4Row(*v) for s, v in _rows("table4_kd_en-de", Table4Row).items()}


def table5() -> dict[str, Table5Row]:
    """Table 5 (the ablation, WMT14 En-De): {"Balanced", "Compress Attention", "Compress FFN", "Compress All": row}."""
    return {s: Table5Row(*v) for s, v in _rows("table5_ablation_en-de", Table5Row).items()}


def figure4() -> dict[str, dict[str, float]]:
    """Figure 4 (depth balance, WMT14 En-De): {"6/6": {"bleu", "speed"}, "9/4": ..., "12/2": ..., "14/1": ...}."""
    f4 = _load()["fig4_balance_en-de"]
    return {d: {"bleu": b, "speed": s} for d, b, s in zip(f4["depths"], f4["bleu"], f4["speed"])}
