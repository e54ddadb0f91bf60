"""Where a study's result comes from: computed now, cached, or loaded from ``book/results`` with its provenance.

One function, :func:`study`, decides from its arguments alone:

* ``store=True`` (what ``canlib experiment`` passes): compute the result if
  ``results_dir()/<scale>/<name>.json`` is missing and write it there with its provenance.
* ``tiny`` otherwise: compute on first use and cache it under ``cache_dir()/studies`` keyed by the
  code and the configuration, so a second execution of the book reuses it.
* ``small``/``full`` otherwise: load the stored result; a missing one is an error that names the
  command which produces it, except where :func:`trains_here` (small on a CUDA device): there it is
  computed now and stored as ``store=True`` would, so a chapter opened on a GPU fills in what it reads.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from canlib.io import PACKAGE_DIR, cache_dir, results_dir
from canlib.studies.results import load_result, provenance, save_result


@lru_cache(maxsize=1)
def code_version() -> str:
    """A hash of canlib's own source: cached tiny results are reused only by the code that made them."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE_DIR)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def key(*parts: Any) -> str:
    """A short stable hash of JSON-able parts (run folders and cache files are named by it)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def stored_path(name: str, scale: str, root: Path | None = None) -> Path:
    """Where ``canlib experiment --scale <scale>`` stores the study ``name`` (``root``: its ``--out``,
    else ``results_dir()``)."""
    return (Path(root) if root is not None else results_dir()) / scale / f"{name}.json"


def result_path(name: str, scale: str, config: dict[str, Any], *, store: bool = False, root: Path | None = None) -> Path:
    """The file :func:`study` reads or writes for these arguments (files that belong to a result, such
    as a run's hypotheses, are written beside it)."""
    if store or scale != "tiny" or root is not None:
        return stored_path(name, scale, root)
    return cache_dir() / "studies" / scale / f"{name}-{key(code_version(), config)}.json"


TRAIN_HERE_ENV = "CANLIB_TRAIN_SMALL"  # "1": train missing small results on this device, even a CPU; "0": never


def trains_here(scale: str) -> bool:
    """Whether a missing stored result of ``scale`` is trained here and now rather than named as a command:
    at small on a machine with CUDA (GPU minutes), never at tiny (always computed) or full (GPU days).
    ``CANLIB_TRAIN_SMALL=1`` treats this device as able to (a test on a CPU with a tiny budget, a patient
    CPU: about 2 hours a run); ``CANLIB_TRAIN_SMALL=0`` refuses on a GPU too."""
    if scale != "small":
        return False
    flag = os.environ.get(TRAIN_HERE_ENV, "").strip()
    if flag not in ("", "0", "1"):
        raise ValueError(f"{TRAIN_HERE_ENV}={flag!r}: set 1 (train missing small results here) or 0 (never), "
                         "or leave it unset (train where CUDA is available)")
    if flag:
        return flag == "1"
    import torch

    return torch.cuda.is_available()


def study(name: str, scale: str, config: dict[str, Any], compute: Callable[[], Any], device: str = "cpu", *,
          store: bool = False, root: Path | None = None, extra: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """(result, provenance) of the study ``name`` at ``scale`` (see the module docstring); ``root``
    replaces ``results_dir()`` for stored results (given without ``store``, it is only read, at tiny too); ``extra`` adds top-level provenance keys (seed, budget)."""
    path = result_path(name, scale, config, store=store, root=root)
    if not store and (scale != "tiny" or root is not None):  # a folder of stored results: load only
        if not path.exists():
            if root is None and trains_here(scale):
                return study(name, scale, config, compute, device, store=True, extra=extra)
            raise FileNotFoundError(
                f"{path}: no stored {scale} result; produce it with `python -m canlib experiment --scale {scale}` "
                f"(on a GPU, where a chapter also trains what it reads; {TRAIN_HERE_ENV}=1 trains it on this device) "
                "and commit the JSON it writes")
        return load_result(path)
    if not path.exists():
        save_result(path, compute(), provenance(scale, {**config, "code_version": code_version()}, device, **(extra or {})))
        return load_result(path)
    result, prov = load_result(path)
    stored = {k: v for k, v in prov["config"].items() if k != "code_version"}  # code changes keep a stored result
    if store and json.loads(json.dumps(stored)) != json.loads(json.dumps(config)):
        raise ValueError(f"{path}: stored with another configuration ({stored}); this asks for {config}: "
                         "give another results folder or delete the stored file")
    return result, prov
