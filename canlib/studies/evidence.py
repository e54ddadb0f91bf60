"""The stored runs a verdict reads: per system and setting, tokenized BLEU per seed on every evaluation set and
each seed's hypotheses, as :class:`canlib.studies.verdict.Runs`.

Main-plan runs are ``<results>/<scale>/runs/<corpus>/<system>-seed<k>.json``; the beyond studies' models are
``<results>/<scale>/beyond/runs/<corpus>/<study>-<system>[-<tag>]-seed<k>.json``, found through the study's
summary (``beyond/<study>.json``) where it is stored and from the run files alone where it is not (the budget
study's x2 models are stored before its summary). Runs trained with a reduced budget (end-to-end tests) are
never read. Hypotheses sit beside each result (its ``hyp_files``).
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from canlib.io import results_dir
from canlib.studies.scales import scale_spec
from canlib.studies.verdict import EVAL_SPLITS, QUALITY_SCALES, Runs

SEED = re.compile(r"^(?P<name>.+)-seed(?P<seed>\d+)\.json$")


def _root(root: Path | None) -> Path:
    return Path(root) if root is not None else results_dir()


def _read(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if "result" not in data or "provenance" not in data:
        raise ValueError(f"{path}: a stored run needs the keys 'result' and 'provenance'")
    return data


def require_judged(scale: str, what: str) -> None:
    """Chapters of stored results quote a judged scale only: tiny models do not translate, so asking for them is
    an error that names the command which stores the runs."""
    if scale not in QUALITY_SCALES:
        raise ValueError(f"scale {scale!r}: {what} quotes stored runs of a judged scale ({', '.join(QUALITY_SCALES)}); "
                         "store them with `python -m canlib experiment --scale small`")


def runs_of(files: Sequence[Path], label: str, splits: Sequence[str] = EVAL_SPLITS, folder: Path | None = None) -> Runs | None:
    """The full-budget runs among ``files`` (one per seed) as Runs; None if there is none. ``folder``: what the
    recorded file names are relative to."""
    kept = []
    for path in sorted(files, key=lambda p: int(SEED.match(p.name)["seed"])):
        data = _read(path)
        if not data["provenance"].get("reduced_budget"):
            kept.append((path, data["result"]))
    if not kept:
        return None
    scores, hyps = {}, {}
    for split in splits:
        if not all(split in r["scores"] for _, r in kept):
            continue
        scores[split] = tuple(float(r["scores"][split]["tok_bleu"]) for _, r in kept)
        if all(split in r.get("hyp_files", {}) for _, r in kept):
            hyps[split] = tuple(_hypotheses(p.with_name(r["hyp_files"][split])) for p, r in kept)
    base = folder or kept[0][0].parent
    return Runs(label, tuple(int(SEED.match(p.name)["seed"]) for p, _ in kept), scores, hyps,
                tuple(str(p.relative_to(base)) if p.is_relative_to(base) else str(p) for p, _ in kept))


def _hypotheses(path: Path) -> tuple[str, ...]:
    if not path.is_file():
        raise ValueError(f"{path}: the hypotheses a stored run names are missing")
    return _lines(str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=256)
def _lines(path: str, _mtime: int) -> tuple[str, ...]:
    return tuple(Path(path).read_text(encoding="utf-8").split("\n")[:-1])


def main_runs(scale: str, system: str, corpus: str | None = None, root: Path | None = None,
              label: str | None = None) -> Runs | None:
    """The stored main-plan runs of ``system`` (every full-budget seed); None where none is stored."""
    base = _root(root) / scale
    folder = base / "runs" / (corpus or scale_spec(scale).corpus)
    files = [p for p in folder.glob(f"{system}-seed*.json") if (m := SEED.match(p.name)) and m["name"] == system]
    return runs_of(files, label or system, folder=base)


def study_files(scale: str, study: str, root: Path | None = None) -> list[Path]:
    """The model files of a beyond study: those its stored summary names, else every stored run of it."""
    base = _root(root) / scale / "beyond"
    summary = base / f"{study}.json"
    if summary.is_file():
        return [base.parent / f"{row['file']}.json" for row in _read(summary)["result"]["runs"]]
    return sorted(p for p in base.glob("runs/*/*.json") if p.name.startswith(f"{study}-"))


def study_runs(scale: str, study: str, system: str, tag: str = "", root: Path | None = None,
               label: str | None = None) -> Runs | None:
    """The stored models of ``system`` in a beyond study (``tag``: "x2", "kd", ...); None where none is stored."""
    name = f"{study}-{system}{'-' + tag if tag else ''}"
    files = [p for p in study_files(scale, study, root) if (m := SEED.match(p.name)) and m["name"] == name]
    return runs_of(files, label or name, folder=_root(root) / scale)


def budget_runs(scale: str, system: str, factor: int, root: Path | None = None) -> Runs | None:
    """``system`` trained for ``factor`` times the scale's updates: the main plan's runs at 1x, the budget
    study's models otherwise (read from their files, so the x2 models count before the study's summary exists)."""
    label = f"{system} x{factor}"
    if factor == 1:
        return main_runs(scale, system, root=root, label=label)
    return study_runs(scale, "budget", system, f"x{factor}", root, label=label)


def budget_factors(scale: str, root: Path | None = None) -> list[int]:
    """The budget factors with stored models of every budget system (1, the main plan, first)."""
    found = {int(m["factor"]) for p in study_files(scale, "budget", root)
             if (m := re.match(r"budget-\w+-x(?P<factor>\d+)-seed\d+\.json$", p.name))}
    return [1, *sorted(f for f in found if all(budget_runs(scale, s, f, root) for s in ("balanced", "can")))]


def references(scale: str, corpus: str | None = None, splits: Sequence[str] = EVAL_SPLITS) -> dict[str, list[str]]:
    """The reference translations of each evaluation set (what the stored hypotheses are scored against), from the
    prepared corpus (prepared from the data folder on first use: a verdict's bootstrap reads text, loading does not)."""
    from canlib.data.preparation import prepared  # only here: reading stored results never prepares data

    spec = scale_spec(scale)
    data = prepared(corpus or spec.corpus, spec.corpus_scale)
    scored = ("valid", *(getattr(data, "test_splits", None) or ("test",)))
    return {split: list(data.split(split).tgt_text) for split in splits if split in scored}


def stored_log(scale: str, file: str, root: Path | None = None) -> list[dict[str, Any]]:
    """The training log (one record per logged step and validation) of a stored run, ``file`` relative to the
    scale's results folder (as :attr:`Runs.files` names it)."""
    return stored_result(scale, file, root)[0]["log"]


def stored_result(scale: str, file: str, root: Path | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result, provenance) of a stored run file (relative to the scale's results folder)."""
    data = _read(_root(root) / scale / file)
    return data["result"], data["provenance"]


def sacre_scores(scale: str, runs: Runs, split: str = "test", root: Path | None = None) -> list[float]:
    """sacreBLEU (13a) of each of ``runs``' seeds on ``split`` (Runs keep the paper's tokenized BLEU)."""
    return [float(stored_result(scale, f, root)[0]["scores"][split]["bleu"]) for f in runs.files]
