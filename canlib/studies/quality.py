"""Translation quality of trained runs: beam search on valid and every test split, BLEU, seed summaries.

Each run's result (scores per split, lengths, parameter count, training log) is one study named
``runs/<corpus>/<system>-seed<k>`` (:mod:`canlib.studies.store`): computed and cached at tiny, written
to ``<results>/<scale>/runs/...`` by ``canlib experiment``, loaded elsewhere. Its hypotheses are plain
text files beside it (``<system>-seed<k>.<split>.hyp``, one line per source sentence), so
:func:`rescore` can recompute every stored sacreBLEU from them.

BLEU follows :mod:`canlib.bleu`: sacreBLEU (13a) and the paper's tokenized BLEU, with the Moses
tokenizer of the corpus's target language.

Where small trains here (a CUDA device, :func:`canlib.studies.store.trains_here`), the functions the
chapters call (:func:`default_scale`, :func:`bleu_by_seed`, :func:`seed_table`, :func:`describe_runs`)
first train and store the small runs they read that are missing (:func:`train_missing`); on a CPU
they only read, and a missing result names the command that stores it.
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from canlib.model.seq2seq import Seq2Seq
from canlib.studies.runs import (ANALYSIS_RUNS, Run, RunSpec, budget, check_corpus, check_systems, default_jobs, plan,
                                 prepared, run_dir, set_worker_threads, target_lang, test_splits, trained, training_device)
from canlib.studies.scales import scale_spec
from canlib.studies.store import result_path, stored_path, study, trains_here

SCORE_KEYS = ("bleu", "tok_bleu", "signature")
COMPLETE = "complete"  # the stored result that marks a scale's plan as fully run


def translate_split(model: Seq2Seq, data: Any, split: str, beam: int) -> tuple[list[str], dict[str, Any]]:
    """Beam-search translations of a split of a prepared corpus, and their BLEU scores (sentences are
    batched, 128 at a time on a GPU, where one sentence at a time would leave it idle)."""
    from canlib.bleu import corpus_scores
    from canlib.decoding.translate import translate_lines

    part = data.split(split)
    batch_size = 128 if next(model.parameters()).device.type == "cuda" else 32
    hyps = translate_lines(model, data.vocab, list(part.src_text), beam=beam, batch_size=batch_size)
    return hyps, corpus_scores(hyps, list(part.tgt_text), lang=target_lang(data))


def hyp_file(json_path: Path, split: str) -> Path:
    """The hypotheses of ``split`` beside a run's result file."""
    return json_path.with_name(f"{json_path.name.removesuffix('.json')}.{split}.hyp")


def _write_lines(path: Path, lines: list[str]) -> None:
    from canlib.io import atomic_write_bytes

    if any("\n" in line for line in lines):
        raise ValueError(f"{path}: a hypothesis holds a line break")
    atomic_write_bytes("".join(line + "\n" for line in lines).encode("utf-8"), path)


def read_hypotheses(path: Path) -> list[str]:
    """The lines of a hypothesis file, as written (empty lines kept)."""
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def evaluate(run: Run, json_path: Path) -> dict[str, Any]:
    """Translate valid and every test split with the scale's beam; write the hypotheses beside
    ``json_path``; return scores, lengths, parameter count, training log and budget."""
    data = prepared(run.scale, run.corpus)
    beam = scale_spec(run.scale).beam
    model = run.model().to(training_device(run.scale))
    out: dict[str, Any] = {
        "system": run.system, "seed": run.seed, "corpus": run.corpus, "src_lang": data.meta.get("src_lang"),
        "tgt_lang": target_lang(data), "beam": beam, "test_splits": list(test_splits(data)),
        "params": model.num_parameters(), "scores": {}, "lengths": {}, "hyp_files": {},
        "training": {k: run.result.get(k) for k in ("stop_reason", "step", "epoch", "wall_s", "last_valid")},
        "log": run.log(),
    }
    for split in ("valid", *test_splits(data)):
        hyps, scores = translate_split(model, data, split, beam)
        refs = list(data.split(split).tgt_text)
        out["scores"][split] = {k: scores[k] for k in SCORE_KEYS}
        out["lengths"][split] = {"hyp_words_mean": float(np.mean([len(h.split()) for h in hyps])),
                                 "ref_words_mean": float(np.mean([len(r.split()) for r in refs])), "sentences": len(refs)}
        path = hyp_file(json_path, split)
        _write_lines(path, hyps)
        out["hyp_files"][split] = path.name
    return out


def run_config(system: str, scale: str, seed: int, corpus: str, max_steps: int | None = None) -> dict[str, Any]:
    spec = scale_spec(scale)
    return {"system": system, "preset": spec.preset(system), "corpus": f"{corpus}/{spec.corpus_scale}",
            "seed": seed, "train": budget(scale, seed, max_steps), "beam": spec.beam, "max_steps": max_steps}


def run_result(system: str, scale: str, seed: int = 1, corpus: str | None = None, *, store: bool = False,
               root: Path | None = None, max_steps: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result, provenance) of one run's evaluation (see the module docstring). With ``store=True`` a
    missing run is trained (or resumed) and evaluated; ``max_steps`` reduces the budget (recorded)."""
    check_systems([system])
    corpus = check_corpus(scale, corpus)
    config = run_config(system, scale, seed, corpus, max_steps)
    name = f"runs/{corpus}/{system}-seed{seed}"
    path = result_path(name, scale, config, store=store, root=root)

    if store and path.exists():
        check_stored_budget(path, config)

    def compute() -> dict[str, Any]:
        run = trained(system, scale, seed, corpus, train_now=True, max_steps=max_steps)
        return evaluate(run, path)

    device = training_device(scale)
    extra = {"seed": seed, "corpus": corpus, "budget": config["train"], "reduced_budget": max_steps is not None,
             "precision": "bf16" if device == "cuda" else "fp32"}
    return study(name, scale, config, compute, device, store=store, root=root, extra=extra)


def check_stored_budget(path: Path, config: dict[str, Any]) -> None:
    """A stored run made with another training budget is an error, never silently reused."""
    from canlib.studies.results import load_result

    _, prov = load_result(path)
    stored = prov["config"].get("train")
    if stored != config["train"]:
        diff = {k: (stored.get(k), config["train"].get(k)) for k in sorted(set(stored) | set(config["train"]))
                if stored.get(k) != config["train"].get(k)}
        raise ValueError(f"{path}: stored with another training budget (field: (stored, asked)) {diff}; "
                         "give another --out or delete the stored run")


def hypotheses(system: str, scale: str, split: str = "test", seed: int = 1, corpus: str | None = None, *,
               store: bool = False, root: Path | None = None, max_steps: int | None = None) -> list[str]:
    """The hypotheses of a run on ``split`` (read from the file beside its result; arguments as
    :func:`run_result`, which computes the run first where it may)."""
    corpus = check_corpus(scale, corpus)
    result, _ = run_result(system, scale, seed, corpus, store=store, root=root, max_steps=max_steps)
    if split not in result["hyp_files"]:
        raise ValueError(f"split {split!r}: the run of {system} has hypotheses for {', '.join(result['hyp_files'])}")
    path = result_path(f"runs/{corpus}/{system}-seed{seed}", scale, run_config(system, scale, seed, corpus, max_steps),
                       store=store, root=root)
    return read_hypotheses(path.with_name(result["hyp_files"][split]))


# -- several seeds ---------------------------------------------------------------------------------

def stored_seeds(system: str, scale: str, corpus: str | None = None, root: Path | None = None) -> list[int]:
    """Seeds of ``system`` whose results are stored at ``scale`` (sorted)."""
    folder = stored_path(f"runs/{check_corpus(scale, corpus)}/x", scale, root).parent
    prefix = f"{system}-seed"
    seeds = []
    for path in folder.glob(f"{prefix}*.json"):
        tail = path.name.removeprefix(prefix).removesuffix(".json")
        if tail.isdigit():
            seeds.append(int(tail))
    return sorted(seeds)


def bleu_by_seed(scale: str, systems: Sequence[str], corpus: str | None = None, split: str = "test",
                 metric: str = "bleu", root: Path | None = None, *, full_budget: bool = False) -> dict[str, list[float]]:
    """One score per available seed of each system: at tiny the seed-1 run (trained now); at small
    and full, or from a results folder ``root``, the stored runs only (a system with none is absent).
    ``full_budget`` leaves out runs trained with a reduced budget (``--max-steps``, an end-to-end test):
    what a verdict reads, since such models are not trained to translate."""
    if metric not in ("bleu", "tok_bleu"):
        raise ValueError(f"metric={metric!r}: choose bleu (sacreBLEU) or tok_bleu (the paper's tokenized BLEU)")
    check_systems(systems)
    fill_in(scale, systems, corpus, root)
    out: dict[str, list[float]] = {}
    for system in systems:
        seeds = [1] if scale == "tiny" and root is None else stored_seeds(system, scale, corpus, root)
        scores = []
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


# -- rescoring -------------------------------------------------------------------------------------

def rescore(folder: Path, tolerance: float = 1e-9) -> list[dict[str, Any]]:
    """Recompute sacreBLEU of every stored run under ``folder`` (a results folder or one scale of it)
    from its hypothesis files and the corpus's references; one row per run and split. A stored score
    that differs, or a missing hypothesis file, is a ValueError naming the file."""
    from canlib.bleu import corpus_scores
    from canlib.studies.results import load_result

    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*.json") if "runs" in p.relative_to(folder).parts)
    if not files:
        raise FileNotFoundError(f"{folder}: no stored run results (runs/<corpus>/<system>-seed<k>.json)")
    rows = []
    for path in files:
        result, prov = load_result(path)
        data = prepared(prov["scale"], result["corpus"])
        for split, name in result["hyp_files"].items():
            hyp_path = path.with_name(name)
            if not hyp_path.is_file():
                raise ValueError(f"{path}: its hypotheses {hyp_path} are missing")
            hyps = read_hypotheses(hyp_path)
            refs = list(data.split(split).tgt_text)
            if len(hyps) != len(refs):
                raise ValueError(f"{hyp_path}: {len(hyps)} lines, the {split} references have {len(refs)}")
            now = corpus_scores(hyps, refs, lang=result["tgt_lang"])["bleu"]
            stored = result["scores"][split]["bleu"]
            if abs(now - stored) > tolerance:
                raise ValueError(f"{path}: stored {split} sacreBLEU {stored} but its hypotheses score {now}")
            rows.append({"file": str(path), "split": split, "bleu": now})
    return rows


# -- what the chapters show ------------------------------------------------------------------------

def default_scale(systems: Sequence[str] | None = None, analyses: Sequence[str] = (), *,
                  seeds: Sequence[int] | None = None, corpora: Sequence[str] | None = None,
                  root: Path | None = None) -> str:
    """"small" where what a chapter shows is stored at small, else "tiny" (what CI trains).

    With no arguments: once ``canlib experiment --scale small`` has stored the whole plan (it then writes
    ``<results>/small/complete.json``). With ``systems`` and/or ``analyses``: once every planned small run
    of those systems (on the main corpus, or on ``corpora``; all their seeds, or ``seeds``) and those stored
    analyses exist, so a chapter shows real models as soon as its own runs are in, and never a half-finished
    set of them. Where small trains here (:func:`canlib.studies.store.trains_here`: a CUDA device) and
    ``root`` is the default results folder, the missing runs are trained now (:func:`train_missing`) and
    the answer is "small"; the missing analyses are then computed by their loaders. The whole plan (no
    arguments) is never trained here: that is ``canlib experiment --scale small``."""
    if stored_path(COMPLETE, "small", root).exists():
        return "small"
    if systems is None and not analyses:
        return "tiny"
    runs = plan("small", systems, seeds, corpora or [scale_spec("small").corpus]) if systems else []
    if systems and not runs:
        raise ValueError(f"default_scale: the small plan has no run of {list(systems)} with seeds {seeds} on {corpora}")
    if not missing_results("small", runs, analyses, root):
        return "small"
    if root is None and trains_here("small"):
        train_missing("small", runs, analyses)
        return "small"
    return "tiny"


def fill_in(scale: str, systems: Sequence[str], corpus: str | None = None, root: Path | None = None) -> list[str]:
    """Where ``scale`` trains here and ``root`` is the default results folder, train the planned runs of
    ``systems`` on ``corpus`` that are not stored yet (what a reader's ``SCALE = "small"`` reads on a GPU);
    elsewhere nothing. Returns the names trained."""
    if root is not None or not trains_here(scale):
        return []
    return train_missing(scale, plan(scale, systems, corpora_=[check_corpus(scale, corpus)]))


def train_missing(scale: str, runs: Sequence[RunSpec], analyses: Sequence[str] = (), root: Path | None = None, *,
                  max_steps: int | None = None, jobs: int | None = None) -> list[str]:
    """Train, evaluate and store (as ``canlib experiment`` does) the runs of ``runs`` not yet stored under
    ``<results>/<scale>/``, and the seed-1 runs that the missing ``analyses`` read (``ANALYSIS_RUNS``; their
    loaders then compute them from these runs): concurrently on a GPU (``jobs``, default as the command's),
    one at a time on a CPU, with a progress bar on stderr. Returns the names it trained; [] (and no bar)
    when nothing is missing. A failed run is a RuntimeError naming it; the runs already stored stay."""
    from tqdm import tqdm

    if max_steps is not None and root is None:
        raise ValueError("train_missing: a reduced budget (max_steps) needs a results folder `root` "
                         "(book/results holds full-budget results only)")
    todo = [r for r in runs if not stored_path(f"runs/{r.name}", scale, root).exists()]
    main = scale_spec(scale).corpus
    for name in analyses:
        if stored_path(name, scale, root).exists():
            continue
        for system in ANALYSIS_RUNS.get(name, ()):  # another study's loader trains what it reads itself
            spec = RunSpec(system, 1, main)
            cached = (run_dir(system, scale, main, budget(scale, 1, max_steps)) / "result.json").exists()
            stored = stored_path(f"runs/{spec.name}", scale, root).exists()
            if not (cached and stored) and spec not in todo:
                todo.append(spec)
    if not todo:
        return []
    for corpus in dict.fromkeys(r.corpus for r in todo):
        prepared(scale, corpus)  # once, here: concurrent workers must not prepare the same folder at once
    device = training_device(scale)
    jobs = jobs or default_jobs(len(todo), device)
    bar = tqdm(total=len(todo), unit="run", desc=f"training {len(todo)} {scale} run(s) on {device}, {jobs} at a time")
    try:
        if jobs <= 1:
            for spec in todo:
                bar.set_postfix_str(spec.name)
                try:
                    _train_and_store(scale, spec, root, max_steps)
                except Exception as exc:
                    raise RuntimeError(f"{scale} run {spec.name} failed: {type(exc).__name__}: {exc}") from exc
                bar.update()
        else:
            from concurrent.futures import ProcessPoolExecutor, as_completed
            from multiprocessing import get_context

            threads = max(1, (os.cpu_count() or 1) // jobs)
            with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=set_worker_threads,
                                     initargs=(threads,)) as pool:
                futures = {pool.submit(_train_and_store, scale, spec, root, max_steps): spec for spec in todo}
                for future in as_completed(futures):
                    if future.exception() is not None:
                        exc = future.exception()
                        raise RuntimeError(f"{scale} run {futures[future].name} failed: {type(exc).__name__}: {exc}") from exc
                    bar.update()
    finally:
        bar.close()
    return [spec.name for spec in todo]


def _train_and_store(scale: str, spec: RunSpec, root: Path | None, max_steps: int | None) -> None:
    """One run of :func:`train_missing`: trained (or resumed) in the cache, then evaluated and stored."""
    trained(spec.system, scale, spec.seed, spec.corpus, train_now=True, max_steps=max_steps)
    run_result(spec.system, scale, spec.seed, spec.corpus, store=True, root=root, max_steps=max_steps)


def missing_results(scale: str, runs: Sequence[RunSpec], analyses: Sequence[str], root: Path | None = None) -> list[str]:
    """The stored results (``runs/<corpus>/<system>-seed<k>`` of each RunSpec in ``runs``, then each analysis)
    that are not yet under ``<results>/<scale>/``."""
    names = [f"runs/{r.name}" for r in runs] + list(analyses)
    return [name for name in names if not stored_path(name, scale, root).exists()]


def seed_table(scale: str, systems: Sequence[str], corpus: str | None = None, metric: str = "tok_bleu",
               splits: Sequence[str] | None = None, root: Path | None = None):
    """One row per system with a result: ``<split> mean`` and ``<split> std`` over seeds for the valid
    split and every test split (default: those of the first result), and ``n`` seeds."""
    import pandas as pd

    corpus = check_corpus(scale, corpus)
    fill_in(scale, systems, corpus, root)
    if splits is None:
        trains_now = scale == "tiny" and root is None
        first = next((s for s in systems if trains_now or stored_seeds(s, scale, corpus, root)), None)
        if first is None:
            return pd.DataFrame(columns=["n"])
        result, _ = run_result(first, scale, 1 if trains_now else stored_seeds(first, scale, corpus, root)[0],
                               corpus, root=root)
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
    corpus = check_corpus(scale, corpus)
    fill_in(scale, systems, corpus, root)
    provs = []
    for system in systems:
        for seed in ([1] if scale == "tiny" and root is None else stored_seeds(system, scale, corpus, root)):
            provs.append(run_result(system, scale, seed, corpus, root=root)[1])
    if not provs:
        return (f"scale={scale} · {corpus}: no stored runs; train them with `python -m canlib experiment --scale {scale} "
                f"--systems {','.join(systems)} --corpora {corpus}` (on a GPU a chapter trains them itself)")
    dates = sorted(p["date"][:10] for p in provs)
    reduced = " · REDUCED BUDGET (end-to-end test)" if any(p.get("reduced_budget") for p in provs) else ""
    return (f"scale={scale} · {corpus} · {len(provs)} runs · device={', '.join(sorted({p['device'] for p in provs}))} · "
            f"commit={', '.join(sorted({str(p['commit'])[:12] for p in provs}))} · dates {dates[0]}..{dates[-1]} · "
            f"budget: {format_budget(provs[0].get('budget'))}{reduced}")
