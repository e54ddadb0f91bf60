"""``python -m canlib experiment``: train every run of a scale, evaluate it, run the analyses, store it all.

The runs share one GPU: training a ``small-*`` model is launch-bound (one run uses ~1% of an H200's
matrix throughput), so ``--jobs`` worker processes (spawned, not forked, because CUDA is not
fork-safe) train concurrently. Each finished run is written at once, so an interrupted command
resumes: a stored run is skipped and an interrupted one resumes from its checkpoints.
"""
from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from canlib.model.config import ALL_SYSTEMS
from canlib.studies.runs import (ANALYSIS_RUNS, RunSpec, corpora, default_jobs, plan, prepared, set_worker_threads,
                                 training_device)
from canlib.studies.scales import SCALES, scale_spec

BEYOND = ("budget", "distill", "can-6-6")  # canlib.studies.beyond: why CAN loses BLEU here (after the plan's runs)
STUDIES = ("runs", "similarity", "errors", "attention", "conversion", *BEYOND, "speed")
DEFAULT_STUDIES = ("runs", "similarity", "errors", "attention", "conversion", *BEYOND)
NEEDS = ANALYSIS_RUNS  # the seed-1 runs on the main corpus that each analysis reads


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Train every run of a scale (concurrently), evaluate it with beam search on valid and every test split, "
        "run the similarity, error, depth, ablation, attention-map and conversion studies, and store results with provenance and "
        "the test hypotheses under book/results/<scale>/. Resumable: run it again after an interruption. "
        "Time: tiny runs take CPU minutes each; small is meant to take under 8 minutes on one H100/H200 (not yet "
        "measured with this command) and about 2 hours a run on a 2-core CPU (days for the whole plan).")
    parser.add_argument("--scale", choices=SCALES, help="tiny (CPU, CI), small (GPU minutes), full (the paper)")
    parser.add_argument("--systems", default=",".join(ALL_SYSTEMS), help="comma-separated systems (default: all)")
    parser.add_argument("--seeds", default=None, help="comma-separated seeds (default: every seed of the scale's plan)")
    parser.add_argument("--corpora", default=None, help="comma-separated corpora (default: every corpus of the scale)")
    parser.add_argument("--studies", default=",".join(DEFAULT_STUDIES),
                        help=f"comma-separated, from {', '.join(STUDIES)} (runs: train and score every run, which gives Table 2, "
                             "the depth and the ablation BLEU; speed: the shared speed studies, book/results only)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="training processes at once (default: on CUDA min(runs, CPU cores, GPU memory / 4.5 GiB), on CPU 1)")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="reduced training budget for end-to-end tests (recorded in the provenance; needs --out)")
    parser.add_argument("--out", default=None, help="results folder instead of book/results (files go to OUT/<scale>/)")
    parser.add_argument("--status-every", type=float, default=60.0, help="seconds between status lines (default 60)")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="start a queued run only if it can finish within SECONDS of the start (judged by the longest "
                             "finished run; see canlib.studies.concurrency); the rest waits for the next call. Default: "
                             "until $CANLIB_DEADLINE (UNIX seconds) where set, as scripts/gpu_small.sh sets it")
    parser.add_argument("--rescore", default=None, metavar="DIR",
                        help="recompute sacreBLEU of every stored run under DIR from its hypotheses; fail on a difference")


def _names(value: str | None, what: str) -> list[str] | None:
    if value is None:
        return None
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise ValueError(f"--{what}: empty list")
    return names


def _seeds(value: str | None) -> list[int] | None:
    names = _names(value, "seeds")
    if names is None:
        return None
    bad = [n for n in names if not n.isdigit() or int(n) < 1]
    if bad:
        raise ValueError(f"--seeds: {', '.join(bad)} is not a positive integer")
    return [int(n) for n in names]


def time_limit(seconds: float | None, deadline: str | None = None) -> float | None:
    """``--time-limit``, else the seconds until ``$CANLIB_DEADLINE`` (a UNIX time; at least a microsecond, so
    the first runs still start), else None: no limit."""
    if seconds is not None:
        return seconds
    deadline = deadline if deadline is not None else os.environ.get("CANLIB_DEADLINE")
    if not deadline:
        return None
    try:
        return max(float(deadline) - time.time(), 1e-6)
    except ValueError:
        raise ValueError(f"CANLIB_DEADLINE={deadline!r}: not a UNIX time in seconds") from None


def run_one(scale: str, spec: RunSpec, root: Path | None, max_steps: int | None) -> dict[str, Any]:
    """Train (or resume), evaluate and store one run; a summary line's numbers."""
    from canlib.studies.quality import run_result

    result, prov = run_result(spec.system, scale, spec.seed, spec.corpus, store=True, root=root, max_steps=max_steps)
    return {"test": result["scores"]["test"]["bleu"], "valid": result["scores"]["valid"]["bleu"],
            "train_s": result["training"].get("wall_s"), "device": prov["device"]}


def _line(done: int, total: int, spec: RunSpec, summary: dict[str, Any]) -> str:
    return (f"[{done}/{total}] {spec.corpus} {spec.system} seed {spec.seed}: test sacreBLEU {summary['test']:.2f}, "
            f"valid {summary['valid']:.2f}, {summary['train_s']} s of training ({summary['device']})")


def train_all(scale: str, runs: list[RunSpec], root: Path | None, max_steps: int | None, jobs: int,
              status_every: float = 60.0, time_limit: float | None = None) -> None:
    """Train and store ``runs`` with ``jobs`` processes; one line per finished run, a status line every
    ``status_every`` seconds; a failed run does not stop the others and is reported at the end. With
    ``time_limit``, runs that could not finish in the time left are not started (``canlib.studies.concurrency``)."""
    from canlib.studies.concurrency import Deadline, summary_line

    total, done, failed = len(runs), 0, []
    deadline, skipped = Deadline(time_limit), []
    if jobs <= 1:
        for i, spec in enumerate(runs):
            if not deadline.may_start():
                skipped = runs[i:]
                break
            tic = time.monotonic()
            done += 1
            try:
                print(_line(done, total, spec, run_one(scale, spec, root, max_steps)), flush=True)
            except Exception as exc:  # noqa: BLE001 - reported with the run's name, the others go on
                failed.append(f"{spec.name}: {type(exc).__name__}: {exc}")
                print(f"[{done}/{total}] {spec.name} FAILED: {exc}", flush=True)
            deadline.record(time.monotonic() - tic)
    else:
        skipped = _train_concurrently(scale, runs, root, max_steps, jobs, status_every, failed, deadline)
    if runs:
        print(summary_line(len(runs) - len(skipped) - len(failed), time.monotonic() - deadline.start, skipped), flush=True)
    if failed:
        raise RuntimeError(f"{len(failed)} run(s) failed (run the command again to retry):\n" + "\n".join(failed))


def _train_concurrently(scale: str, runs: list[RunSpec], root: Path | None, max_steps: int | None, jobs: int,
                        status_every: float, failed: list[str], deadline: Any = None) -> list[RunSpec]:
    """``train_all`` with spawned worker processes (CUDA is not fork-safe); failures go to ``failed``.
    Returns the runs the deadline did not start (``canlib.studies.concurrency.run_queue``)."""
    from canlib.studies.concurrency import Deadline, run_queue

    total, done = len(runs), 0
    deadline = deadline or Deadline(None)
    threads = max(1, (os.cpu_count() or 1) // jobs)

    def finished(spec: RunSpec, future: Future) -> None:
        nonlocal done
        done += 1
        try:
            print(_line(done, total, spec, future.result()), flush=True)
        except Exception as exc:  # noqa: BLE001 - reported with the run's name, the others go on
            failed.append(f"{spec.name}: {type(exc).__name__}: {exc}")
            print(f"[{done}/{total}] {spec.name} FAILED: {exc}", flush=True)

    def idle(count: int, waiting: int) -> None:
        print(f"status: {count}/{total} runs finished after {time.monotonic() - deadline.start:.0f} s, "
              f"{waiting} in progress or queued", flush=True)

    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=set_worker_threads, initargs=(threads,)) as pool:
        return run_queue(runs, lambda spec: pool.submit(run_one, scale, spec, root, max_steps), jobs, deadline,
                         finished, idle, status_every)


def run(args: argparse.Namespace) -> int:
    """Train, evaluate and store the selected runs and studies of a scale (see the module docstring)."""
    from canlib.studies.quality import check_stored_budget, rescore, run_config
    from canlib.studies.store import result_path
    from canlib.studies import analyses

    if args.rescore:
        rows = rescore(Path(args.rescore))
        print(f"{len(rows)} stored sacreBLEU scores of {len({r['file'] for r in rows})} runs reproduced from their hypotheses")
        from canlib.studies.beyond import recheck

        quoted = recheck(Path(args.rescore))
        if quoted:
            print(f"{quoted} scores quoted by the beyond studies' summaries equal their stored runs'")
        return 0
    if args.scale is None:
        raise ValueError("--scale is required (or --rescore DIR)")
    scale = args.scale
    studies = _names(args.studies, "studies") or []
    unknown = sorted(set(studies) - set(STUDIES))
    if unknown:
        raise ValueError(f"--studies: unknown {', '.join(unknown)}; choose from {', '.join(STUDIES)}")
    if args.max_steps is not None and args.out is None:
        raise ValueError("--max-steps trains a reduced budget: give --out DIR (book/results holds full-budget results only)")
    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f"--jobs {args.jobs}: must be >= 1")
    root = Path(args.out) if args.out else None
    systems = _names(args.systems, "systems")
    try:
        runs = plan(scale, systems, _seeds(args.seeds), _names(args.corpora, "corpora"))
    except ValueError as exc:
        raise ValueError(f"--systems/--corpora: {exc}") from exc
    if not runs and "runs" in studies:
        raise ValueError(f"no run of scale {scale} matches --systems/--seeds/--corpora (corpora: {', '.join(corpora(scale))})")
    for name in dict.fromkeys(r.corpus for r in runs):
        prepared(scale, name)  # once, here: concurrent workers must not prepare the same folder at once
    if "runs" in studies:
        todo = []
        for r in runs:
            config = run_config(r.system, scale, r.seed, r.corpus, args.max_steps)
            path = result_path(f"runs/{r.name}", scale, config, store=True, root=root)
            if path.exists():
                check_stored_budget(path, config)  # before any training: a budget mismatch stops the command
            else:
                todo.append(r)
        device = training_device(scale)
        jobs = args.jobs or default_jobs(len(todo), device)
        print(f"{scale}: {len(runs)} runs, {len(runs) - len(todo)} already stored, {len(todo)} to train on {device} "
              f"with {jobs} process(es)", flush=True)
        train_all(scale, todo, root, args.max_steps, jobs, args.status_every, time_limit(getattr(args, "time_limit", None)))
    main_runs = {r.system for r in runs if r.seed == 1 and r.corpus == scale_spec(scale).corpus}
    for name in NEEDS:
        if name not in studies:
            continue
        if not set(NEEDS[name]) <= main_runs:
            print(f"{name}: skipped (needs seed 1 of {', '.join(NEEDS[name])} on {scale_spec(scale).corpus} in this selection)")
            continue
        fn = {"similarity": analyses.similarity, "errors": analyses.error_buckets, "attention": analyses.attention_study,
              "conversion": analyses.conversion_study}[name]
        fn(scale, store=True, root=root, max_steps=args.max_steps)
        print(f"{name}: stored", flush=True)
    beyond = [name for name in BEYOND if name in studies]
    if beyond:
        from canlib.studies.beyond import run_studies

        prepared(scale)
        failed = run_studies(scale, beyond, seeds=_seeds(args.seeds), max_steps=args.max_steps, root=root,
                             jobs=args.jobs)
        if failed:
            raise RuntimeError(f"{len(failed)} model(s) of the beyond studies failed (run the command again to retry):\n"
                               + "\n".join(failed))
    if "speed" in studies:
        if root is not None:
            raise ValueError("--studies speed stores into book/results only (it takes no --out)")
        from canlib.studies.speed import store_all

        store_all(scale)
    mark_complete(scale, root, args.max_steps)
    print(f"stored in {(root or _results()) / scale}")
    return 0


def mark_complete(scale: str, root: Path | None, max_steps: int | None) -> bool:
    """Store ``<results>/<scale>/complete.json`` once every run of the scale's plan and every analysis is
    stored (the chapters switch to a scale only then); say what is missing otherwise."""
    from canlib.studies.quality import COMPLETE, missing_results
    from canlib.studies.results import provenance, save_result
    from canlib.studies.store import stored_path

    everything = plan(scale)
    missing = missing_results(scale, everything, list(NEEDS), root)
    if missing:
        print(f"{scale}: {len(missing)} of {len(everything) + len(NEEDS)} results still missing "
              f"(e.g. {', '.join(missing[:3])}); the chapters show this scale once all are stored", flush=True)
        return False
    save_result(stored_path(COMPLETE, scale, root), {"runs": len(everything), "analyses": list(NEEDS)},
                provenance(scale, {"plan": [r.name for r in everything], "max_steps": max_steps}, training_device(scale)))
    return True


def _results() -> Path:
    from canlib.io import results_dir

    return results_dir()
