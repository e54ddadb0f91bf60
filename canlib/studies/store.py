"""Where a stored result lives, and the measurement studies' compute-once rule.

* :func:`stored_path`: ``<root>/<scale>/<name>.json``. Unless a folder is given, ``root`` is the scale's
  :func:`default_root`: ``book/results`` for ``small`` and ``full`` (GPU-trained, committed), and at
  ``tiny`` (what CI recomputes on every machine) a folder of the cache per code version, so a result is
  reused only by the code that made it. Results of a reduced budget (an end-to-end test) get their own
  folder: never ``book/results``.
* :func:`study`: a measurement (the speed studies of :mod:`canlib.studies.speed`) computed on first use at
  tiny and cached, stored with ``store=True``, loaded elsewhere. Trained models are never made here: runs
  are trained, evaluated and stored by the engine (:mod:`canlib.experiments`); this layer only reads them.
"""
from __future__ import annotations

import hashlib
import json
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


def default_root(scale: str, reduced: int | None = None) -> Path:
    """The results folder of ``scale`` when none is given (see the module docstring); ``reduced``: the
    ``max_steps`` of an end-to-end test, which has a folder of its own at tiny and none elsewhere."""
    if scale == "tiny":
        return cache_dir() / "results" / (code_version() + (f"-steps{reduced}" if reduced is not None else ""))
    if reduced is not None:
        raise ValueError(f"a reduced budget (max_steps={reduced}) needs a results folder of its own (--out DIR): "
                         "book/results holds full-budget results only")
    return results_dir()


def stored_path(name: str, scale: str, root: Path | None = None) -> Path:
    """Where the result ``name`` of ``scale`` is stored (``root``: a results folder, e.g. ``canlib experiment
    --out``; else :func:`default_root`)."""
    return (Path(root) if root is not None else default_root(scale)) / scale / f"{name}.json"


def study(name: str, scale: str, config: dict[str, Any], compute: Callable[[], Any], device: str = "cpu", *,
          store: bool = False, root: Path | None = None, extra: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """(result, provenance) of the measurement ``name``: at tiny computed on first use and cached under a key
    of the code and ``config``; with ``store=True`` computed if ``<root>/<scale>/<name>.json`` is missing and
    stored there; otherwise loaded, a missing one being an error that names the command which stores it.
    ``extra`` adds top-level provenance keys."""
    if store or scale != "tiny" or root is not None:
        path = stored_path(name, scale, root)
    else:
        path = cache_dir() / "studies" / scale / f"{name}-{key(code_version(), config)}.json"
    if not store and (scale != "tiny" or root is not None):  # a folder of stored results: load only
        if not path.exists():
            raise FileNotFoundError(f"{path}: no stored {scale} result; produce it with `python -m canlib experiment "
                                    f"--scale {scale}` and commit the JSON it writes")
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
