"""Translation quality of stored runs: scores per split, hypotheses, seed summaries, what a chapter shows.

Each run's result (scores per split, lengths, parameter count, training log) is stored by the engine
(:mod:`canlib.experiments`) as ``<results>/<scale>/runs/<corpus>/<system>-seed<k>.json`` with its provenance,
its hypotheses beside it as plain text (``<system>-seed<k>.<split>.hyp``, one line per source sentence).
Everything here only reads them (:func:`canlib.studies.store.stored_path`): at ``small``/``full`` from
``book/results``, at ``tiny`` from the cache folder where the chapter's own explicit call
(``canlib.experiments.experiment.train_missing``) stored them. Nothing here trains; a missing result is an
error naming the command that stores it.

BLEU follows :mod:`canlib.bleu`: sacreBLEU (13a) and the paper's tokenized BLEU, with the Moses
tokenizer of the corpus's target language.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from canlib.studies.results import load_result
from canlib.studies.scales import planned_seeds, scale_spec
from canlib.studies.store import stored_path

SCORE_KEYS = ("bleu", "tok_bleu", "signature")
COMPLETE = "complete"  # the stored result that marks a scale's plan as fully run
ANALYSES = ("similarity", "similarity-balanced", "errors", "attention", "conversion", "approximations")  # the stored analyses of a scale's plan
TRAIN_COMMAND = "python -m canlib experiment"


def hyp_file(json_path: Path, split: str) -> Path:
    """The hypotheses of ``split`` beside a run's result file."""
    return json_path.with_name(f"{json_path.name.removesuffix('.json')}.{split}.hyp")


def read_hypotheses(path: Path) -> list[str]:
    """The lines of a hypothesis file, as written (empty lines kept)."""
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def main_corpus(scale: str, corpus: str | None) -> str:
    """``corpus``, or the scale's main corpus."""
    return corpus or scale_spec(scale).corpus


def run_path(system: str, scale: str, seed: int = 1, corpus: str | None = None, root: Path | None = None) -> Path:
    """Where the stored result of a run of the main plan lies."""
    return stored_path(f"runs/{main_corpus(scale, corpus)}/{system}-seed{seed}", scale, root)


def run_result(system: str, scale: str, seed: int = 1, corpus: str | None = None, *,
               root: Path | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result, provenance) of one stored run; a missing one is an error naming the command that stores it."""
    path = run_path(system, scale, seed, corpus, root)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no stored {scale} result of {system} (seed {seed}); train and store it with `{TRAIN_COMMAND} "
            f"--scale {scale} --systems {system} --seeds {seed} --corpora {main_corpus(scale, corpus)} --studies runs`"
            + (" (on a GPU; at tiny a chapter's first cell does it)" if scale != "full" else ""))
    return load_result(path)


def hypotheses(system: str, scale: str, split: str = "test", seed: int = 1, corpus: str | None = None, *,
               root: Path | None = None) -> list[str]:
    """The hypotheses of a stored run on ``split`` (read from the file beside its result)."""
    result, _ = run_result(system, scale, seed, corpus, root=root)
    if split not in result["hyp_files"]:
        raise ValueError(f"split {split!r}: the run of {system} has hypotheses for {', '.join(result['hyp_files'])}")
    return read_hypotheses(run_path(system, scale, seed, corpus, root).with_name(result["hyp_files"][split]))


# -- several seeds ---------------------------------------------------------------------------------

def seeds_read(system: str, scale: str, corpus: str | None = None, root: Path | None = None) -> list[int]:
    """The seeds of ``system`` a chapter reads: at tiny (default folder) seed 1, which the chapter's explicit
    call trained (CPU minutes); elsewhere every stored seed."""
    return [1] if scale == "tiny" and root is None else stored_seeds(system, scale, corpus, root)



def stored_seeds(system: str, scale: str, corpus: str | None = None, root: Path | None = None) -> list[int]:
    """Seeds of ``system`` whose results are stored at ``scale`` (sorted)."""
    folder = run_path(system, scale, 1, corpus, root).parent
    prefix = f"{system}-seed"
    seeds = []
    for path in folder.glob(f"{prefix}*.json"):
        tail = path.name.removeprefix(prefix).removesuffix(".json")
        if tail.isdigit():
            seeds.append(int(tail))
    return sorted(seeds)


def bleu_by_seed(scale: str, systems: Sequence[str], corpus: str | None = None, split: str = "test",
                 metric: str = "bleu", root: Path | None = None, *, full_budget: bool = False) -> dict[str, list[float]]:
    """One score per available seed of each system: at tiny the seed-1 run (see :func:`seeds_read`); at small
    and full, or from a results folder ``root``, the stored runs only (a system with none is absent).
    ``full_budget`` leaves out runs trained with a reduced budget (``--max-steps``, an end-to-end test):
    what a verdict reads, since such models are not trained to translate."""
    if metric not in ("bleu", "tok_bleu"):
        raise ValueError(f"metric={metric!r}: choose bleu (sacreBLEU) or tok_bleu (the paper's tokenized BLEU)")
    out: dict[str, list[float]] = {}
    for system in systems:
        scores = []
        seeds = seeds_read(system, scale, corpus, root)
        for seed in seeds:
            result, prov = run_result(system, scale, seed, corpus, root=root)
            if full_budget and prov.get("reduced_budget"):
                continue
            if split not in result["scores"]:
                raise ValueError(f"split {split!r}: the run of {system} (seed {seed}) was scored on "
                                 f"{', '.join(result['scores'])}")
            scores.append(float(result["scores"][split][metric]))
        if scores:
            out[system] = scores
    return out


def seed_summary(scale: str, systems: Sequence[str], corpus: str | None = None, split: str = "test",
                 metric: str = "bleu", root: Path | None = None):
    """A DataFrame indexed by system: mean, std (sample, n-1; NaN for one seed) and n of the scores
    that :func:`bleu_by_seed` returns."""
    import pandas as pd

    scores = bleu_by_seed(scale, systems, corpus, split, metric, root)
    rows = {s: {"mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)) if len(v) > 1 else math.nan, "n": len(v)}
            for s, v in scores.items()}
    return pd.DataFrame.from_dict(rows, orient="index", columns=["mean", "std", "n"])


# -- what the chapters show ------------------------------------------------------------------------

def default_scale(systems: Sequence[str] | None = None, analyses: Sequence[str] = (), *,
                  seeds: Sequence[int] | None = None, corpora: Sequence[str] | None = None,
                  root: Path | None = None) -> str:
    """"small" where what a chapter shows is stored at small, else "tiny" (what CI trains); it only looks.

    With no arguments: once ``canlib experiment --scale small`` has stored the whole plan (it then writes
    ``<results>/small/complete.json``). With ``systems`` and/or ``analyses``: once every planned small run
    of those systems (on the main corpus, or on ``corpora``; all their seeds, or ``seeds``) and those stored
    analyses exist, so a chapter shows real models as soon as its own runs are in, and never a half-finished
    set of them. Training what is missing is a separate, explicit call
    (``canlib.experiments.experiment.train_missing``, or the ``canlib experiment`` command)."""
    if stored_path(COMPLETE, "small", root).exists():
        return "small"
    if systems is None and not analyses:
        return "tiny"
    names = []
    for corpus in corpora or [scale_spec("small").corpus]:
        for system in systems or ():
            names += [f"runs/{corpus}/{system}-seed{k}" for k in planned_seeds("small", system, corpus)
                      if seeds is None or k in seeds]
    if systems and not names:
        raise ValueError(f"default_scale: the small plan has no run of {list(systems)} with seeds {seeds} on {corpora}")
    return "tiny" if missing_results("small", names + list(analyses), root) else "small"


def missing_results(scale: str, names: Sequence[str], root: Path | None = None) -> list[str]:
    """Those of the stored results ``names`` (``runs/<corpus>/<system>-seed<k>``, ``errors``, ``beyond/budget``...)
    that are not yet under ``<results>/<scale>/``."""
    return [name for name in names if not stored_path(name, scale, root).exists()]


def seed_table(scale: str, systems: Sequence[str], corpus: str | None = None, metric: str = "tok_bleu",
               splits: Sequence[str] | None = None, root: Path | None = None):
    """One row per system with a result: ``<split> mean`` and ``<split> std`` over seeds for the valid
    split and every test split (default: those of the first result), and ``n`` seeds."""
    import pandas as pd

    if splits is None:
        first = next((s for s in systems if seeds_read(s, scale, corpus, root)), None)
        if first is None:
            return pd.DataFrame(columns=["n"])
        result, _ = run_result(first, scale, seeds_read(first, scale, corpus, root)[0], corpus, root=root)
        splits = ["valid", *result["test_splits"]]
    columns = {}
    for split in splits:
        summary = seed_summary(scale, systems, corpus, split, metric, root)
        columns[f"{split} mean"], columns[f"{split} std"], columns["n"] = summary["mean"], summary["std"], summary["n"]
    return pd.DataFrame(columns)


def format_budget(budget: dict[str, Any] | None) -> str:
    """A training budget in words ("1,200 updates x 8,192 tokens, lr 0.001, ...") instead of a raw dict."""
    if not budget:
        return "budget not recorded"
    b = budget
    steps = f"{b['max_steps']:,} updates" if b.get("max_steps") else f"up to {b.get('max_epochs')} epochs"
    parts = [f"{steps} x {b.get('max_tokens', 0) * b.get('update_freq', 1):,} tokens", f"lr {b.get('lr'):g}",
             f"warm-up {b.get('warmup', 0):,}"]
    if b.get("label_smoothing"):
        parts.append(f"label smoothing {b['label_smoothing']:g}")
    if b.get("average_last"):
        parts.append(f"last {b['average_last']} checkpoints averaged")
    return ", ".join(parts)


def describe_runs(scale: str, systems: Sequence[str], corpus: str | None = None, root: Path | None = None) -> str:
    """One line saying where the runs' numbers come from: scale, corpus, devices, commits, dates, budget."""
    corpus = main_corpus(scale, corpus)
    provs = []
    for system in systems:
        for seed in seeds_read(system, scale, corpus, root):
            provs.append(run_result(system, scale, seed, corpus, root=root)[1])
    if not provs:
        return (f"scale={scale} · {corpus}: no stored runs; train them with `python -m canlib experiment --scale {scale} "
                f"--systems {','.join(systems)} --corpora {corpus}` (on a GPU)")
    dates = sorted(p["date"][:10] for p in provs)
    reduced = " · REDUCED BUDGET (end-to-end test)" if any(p.get("reduced_budget") for p in provs) else ""
    return (f"scale={scale} · {corpus} · {len(provs)} runs · device={', '.join(sorted({p['device'] for p in provs}))} · "
            f"commit={', '.join(sorted({str(p['commit'])[:12] for p in provs}))} · dates {dates[0]}..{dates[-1]} · "
            f"budget: {format_budget(provs[0].get('budget'))}{reduced}")
