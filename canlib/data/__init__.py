"""Corpora for canlib: registry, downloads, preparation and memory-mapped binarized splits.

The names below load on first use (PEP 562): ``import canlib.data.vocab`` (what the model's special ids
come from) or reading a prepared folder never pulls in the downloader and the preparation code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "prepare": "preparation",
    "prepared": "preparation",
    "default_out_dir": "preparation",
    "format_statistics": "preparation",
    "load_prepared": "binarized",
    "PreparedCorpus": "binarized",
    "ParallelSplit": "binarized",
    "REGISTRY": "corpora",
    "Corpus": "corpora",
    "Scale": "corpora",
    "Remote": "corpora",
    "Member": "corpora",
    "get_corpus": "corpora",
    "register_files": "corpora",
    "cache_dir": "download",
    "fetch": "download",
    "normalize": "text",
    "read_parallel": "text",
    "sgm_segments": "text",
}
__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from canlib.data.binarized import ParallelSplit, PreparedCorpus, load_prepared
    from canlib.data.corpora import REGISTRY, Corpus, Member, Remote, Scale, get_corpus, register_files
    from canlib.data.download import cache_dir, fetch
    from canlib.data.preparation import default_out_dir, format_statistics, prepare, prepared
    from canlib.data.text import normalize, read_parallel, sgm_segments


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"canlib.data.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'canlib.data' has no attribute {name!r}")
