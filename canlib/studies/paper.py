"""The paper's reported numbers (tables and figures), shipped with the package.

Quoted as the paper's: chapters print them beside our measurements, never instead of them.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=1)
def _load() -> dict:
    return json.loads(resources.files("canlib").joinpath("resources/paper_numbers.json").read_text(encoding="utf-8"))


def paper_numbers() -> dict:
    """The paper's numbers, keyed by table/figure (e.g. ``table2_wmt14``, ``fig2_similarity``); a fresh copy."""
    return json.loads(json.dumps(_load()))
