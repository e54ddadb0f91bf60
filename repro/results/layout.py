"""Where each stored result lives, how runs and study models are named, and the command that stores one.

Unless a call names a results folder, it is the scale's :func:`default_root`: ``book/results`` for ``small`` and
``full`` (GPU-trained, committed), and at ``tiny`` (what CI recomputes on every machine) a folder of the cache per
code version, so a result is reused only by the code that made it. Results of a reduced budget (an end-to-end test)
get their own folder: never ``book/results``. Under ``<root>/<scale>/`` lie the main plan's runs (:func:`run_name`),
the beyond studies' models (``beyond/runs/<corpus>/`` :func:`model_name`) and summaries (``beyond/<study>``), the
analyses and :data:`COMPLETE`; GPU and CPU measurements are not per scale (``<root>/gpu/<run>/<kind>.json``,
``<root>/cpu/<name>.json``). Every error that finds a result missing names :func:`experiment_command`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from canlib.io import PACKAGE_DIR, cache_dir, results_dir
from repro.results.files import load_result, provenance, save_result

REPRO_DIR = Path(__file__).resolve().parents[1]  # this package, hashed with canlib by code_version
SCORE_KEYS = ("bleu", "tok_bleu", "signature")  # what a run stores per split
COMPLETE = "complete"  # the stored result that marks a scale's plan as fully run
INGEST_COMMAND = "python -m repro ingest --from-device FOLDER"  # stores a GPU device call's results
OPS_COMMAND = "python -m repro bench ops --json book/results/cpu/ops.json"
# what a GPU run stores (``<root>/gpu/<run>/<kind>.json``), written on the device by repro.bench.stored's callers
GPU_KINDS = ("speed", "breakdown", "batch", "profile", "training_4k", "training_32k", "training_small")


@lru_cache(maxsize=1)
def code_version() -> str:
    """A hash of the source of canlib and of this package: cached tiny results are reused only by the code that made
    them."""
    h = hashlib.sha256()
    for package in (PACKAGE_DIR, REPRO_DIR):
        for path in sorted(package.rglob("*.py")):
            h.update(str(path.relative_to(package.parent)).encode())
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
        raise ValueError(
            f"a reduced budget (max_steps={reduced}) needs a results folder of its own (--out DIR): "
            "book/results holds full-budget results only"
        )
    return results_dir()


@dataclass(frozen=True)
class Where:
    """Where one call's results live: the ``scale``, its results folder ``root`` (files go to ``<root>/<scale>/``)
    and ``reduced``, the ``max_steps`` of an end-to-end test (None: the scale's own budget). Built once, by a
    command line (:meth:`of` its ``--scale``, ``--out`` and ``--max-steps``) or a chapter's call, and passed: a
    :class:`~repro.experiments.run.Run` carries the one it is stored under."""

    scale: str
    root: Path
    reduced: int | None = None

    @classmethod
    def of(cls, scale: str, out: str | Path | None = None, reduced: int | None = None) -> Where:
        """The results folder ``out``, else the scale's :func:`default_root` (which refuses a reduced budget in
        ``book/results``)."""
        if reduced is not None and reduced < 1:
            raise ValueError(f"max_steps={reduced}: must be >= 1")
        return cls(scale, Path(out) if out is not None else default_root(scale, reduced), reduced)

    @property
    def folder(self) -> Path:
        """The scale's folder of results: ``<root>/<scale>``."""
        return self.root / self.scale

    def path(self, name: str) -> Path:
        """Where the result ``name`` is stored: ``<root>/<scale>/<name>.json``."""
        return self.folder / f"{name}.json"

    def missing(self, names: Sequence[str]) -> list[str]:
        """Those of the stored results ``names`` that are not stored yet."""
        return [name for name in names if not self.path(name).exists()]


def run_name(system: str, seed: int, corpus: str) -> str:
    """A main-plan run's name under its scale's folder: ``runs/multi30k-en-de/can-seed1``."""
    return f"runs/{corpus}/{system}-seed{seed}"


def model_name(study: str, system: str, tag: str, seed: int) -> str:
    """A study model's stored name without its folder: ``budget-can-x2-seed1``."""
    return f"{study}-{system}{'-' + tag if tag else ''}-seed{seed}"


def hyp_file(json_path: Path, split: str) -> Path:
    """The hypotheses of ``split`` beside a run's result file."""
    return json_path.with_name(f"{json_path.name.removesuffix('.json')}.{split}.hyp")


def read_hypotheses(path: Path) -> list[str]:
    """The lines of a hypothesis file, as written (empty lines kept)."""
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def experiment_command(
    scale: str,
    *,
    systems: Sequence[str] = (),
    seeds: Sequence[int] = (),
    corpora: Sequence[str] = (),
    studies: Sequence[str] = ("runs",),
    reduced: int | None = None,
) -> str:
    """The ``python -m repro experiment`` call that trains, evaluates and stores what is named (stored results are
    skipped, so it only adds what is missing): every error about a missing result names it."""
    parts = ["python -m repro experiment", f"--scale {scale}"]
    for flag, values in (("systems", systems), ("seeds", seeds), ("corpora", corpora), ("studies", studies)):
        if values or flag == "studies":  # the studies are always named
            parts.append(f"--{flag} {','.join(str(v) for v in values)}")
    if reduced is not None:
        parts.append(f"--max-steps {reduced}")
    return " ".join(parts)


def study(
    name: str, where: Where, config: dict[str, Any], compute: Callable[[], Any], device: str = "cpu"
) -> tuple[Any, dict[str, Any]]:
    """(result, provenance) of the measurement ``name`` stored ``where``: computed and stored with ``config`` if
    missing, else loaded (never computed again); a stored one of another configuration is an error."""
    path = where.path(name)
    if not path.exists():
        save_result(path, compute(), provenance(where.scale, {**config, "code_version": code_version()}, device))
    result, prov = load_result(path)
    stored = {k: v for k, v in prov["config"].items() if k != "code_version"}  # code changes keep a stored result
    if json.loads(json.dumps(stored)) != json.loads(json.dumps(config)):
        raise ValueError(
            f"{path}: stored with another configuration ({stored}); this asks for {config}: "
            "give another results folder or delete the stored file"
        )
    return result, prov
