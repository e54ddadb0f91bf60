"""``python -m repro experiment``: the runs of a scale's plan, the analyses that read them and the beyond studies,
trained by one pool, evaluated and stored; and the explicit call a chapter makes for what it reads.

:func:`run` is what ``python -m repro experiment`` runs: :func:`queued`, the pool's
:func:`~repro.experiments.pool.train_all`, :func:`store_studies` (so a reader reaches a model's ``fit`` in four
steps). :func:`train_missing`, which makes the same three calls, is the one visible call with which a chapter
(at ``tiny``, on any machine, cached) or a GPU reader (at ``small``) trains what the chapter reads and is not
stored yet; the chapter's reader (the book's store, which does not import this package) then only reads.

The runs share one GPU: training a ``small-*`` model is launch-bound (one run uses a few percent of a card's
arithmetic), so ``--jobs`` worker processes train concurrently (:mod:`repro.experiments.pool`). Each finished
run is written at once, so an interrupted command resumes: a stored run is skipped and an interrupted one resumes
from its checkpoints.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

import torch

from canlib.catalogue import scale_spec
from canlib.io import option_type
from repro.bench.cpu import store_all
from repro.experiments import analyses, cli
from repro.experiments.beyond import study_runs, to_train
from repro.experiments.evaluate import check_stored_budget
from repro.experiments.pool import RUN_GIB, Outcome, device_jobs, summary_line, train_all
from repro.experiments.run import Run, plan, training_device
from repro.experiments.summarise import summarise
from repro.results import studies as defined
from repro.results.files import provenance, save_result
from repro.results.layout import COMPLETE, Where, default_root, experiment_command

STUDIES = ("runs", *defined.ANALYSES, *defined.STUDIES, *defined.CONVERGED, "speed")
DEFAULT_STUDIES = ("runs", *defined.ANALYSES, *defined.ORIGINAL)  # the next experiments run when named
# "1": a chapter trains missing small results on this device, even a CPU; "0": never
TRAIN_HERE_ENV = "CANLIB_TRAIN_SMALL"


def queued(
    where: Where,
    systems: Sequence[str] | None,
    seeds: Sequence[int] | None,
    corpora: Sequence[str] | None,
    studies: Sequence[str],
    jobs: int | None,
    say: Callable[[str], None],
) -> tuple[list[Run], list[Run], list[str], int]:
    """What a call hands the pool, said in one line: (the runs to train and store; the runs trained for
    their weights only: parents and runs an analysis reads whose results are stored but whose weights this machine
    lacks, and the runs an analysis trains for its own use; the analyses it computes; the processes). An analysis
    whose runs the selection leaves out is skipped, and said so; a stored run of another budget stops it before any
    training."""
    if unknown := sorted(set(studies) - set(STUDIES)):
        raise ValueError(f"--studies: unknown {', '.join(unknown)}; choose from {', '.join(STUDIES)}")
    runs = plan(where, systems, seeds, corpora) if "runs" in studies else []
    if "runs" in studies and not runs:
        raise ValueError(f"no run of scale {where.scale} matches --systems/--seeds/--corpora")
    chosen = {(r.system, r.corpus) for r in runs if r.seed == 1} if "runs" in studies else None
    wanted, train_only = [], []
    for name in (a for a in defined.ANALYSES if a in studies):
        reads, own = analyses.runs_needed(name, where)
        if chosen is not None and not {(r.system, r.corpus) for r in reads} <= chosen:
            say(
                f"{name}: skipped (needs seed 1 of {', '.join(r.system for r in reads)} on "
                f"{reads[0].corpus} in this selection)"
            )
            continue
        wanted.append(name)
        runs += reads
        if not where.path(name).is_file():  # computing it needs the weights of every model it reads
            train_only += [r for r in [*reads, *own] if not (r.folder / "result.json").is_file()]
    for name in (n for n in (*defined.STUDIES, *defined.CONVERGED) if n in studies):
        runs += [r for r in study_runs(name, where, seeds) if systems is None or r.system in systems]
    runs = list({r.name: r for r in runs}.values())  # once each, in order
    for r in runs:
        check_stored_budget(r)  # before any training: a budget mismatch stops the command
    todo, parents = to_train(runs)  # the runs whose result is not stored, and parents to train again
    folders = {r.folder for r in todo}
    train_only = list({r.folder: r for r in [*parents, *train_only] if r.folder not in folders}.values())
    device, _ = training_device(where.scale)
    jobs = jobs or device_jobs(len(todo) + len(train_only), device)
    say(
        f"{where.scale}: {len(runs)} runs, {len(runs) - len(todo)} already stored, {len(todo)} to train"
        + (f" (+ {len(train_only)} trained for their weights only)" if train_only else "")
        + f" on {device} with {jobs} process(es)"
    )
    return todo, train_only, wanted, jobs


def store_studies(
    where: Where,
    outcome: Outcome,
    wanted: Sequence[str],
    studies: Sequence[str],
    seeds: Sequence[int] | None,
    say: Callable[[str], None],
) -> None:
    """After the pool: its summary line, then the analyses ``wanted``, the beyond studies' summaries and the CPU
    speed tables of ``studies``."""
    if outcome.stored or outcome.failed or outcome.skipped:
        say(summary_line(len(outcome.stored), outcome.seconds, outcome.skipped))
    for name in wanted:
        analyses.compute(name, where)
        say(f"{name}: stored")
    for name in (n for n in (*defined.STUDIES, *defined.CONVERGED) if n in studies):
        if summarise(name, where, seeds) is not None:
            say(f"beyond/{name}: stored")
    if "speed" in studies:
        if where.root != default_root(where.scale):
            raise ValueError("--studies speed stores into book/results only (it takes no --out)")
        store_all()


def mark_complete(where: Where) -> bool:
    """Store ``<results>/<scale>/complete.json`` once every run of the scale's plan and every analysis is stored
    (the chapters switch to a scale only then); say what is missing otherwise."""
    everything = plan(where)
    if absent := where.missing([r.name for r in everything] + list(defined.ANALYSES)):
        print(
            f"{where.scale}: {len(absent)} of {len(everything) + len(defined.ANALYSES)} results still missing "
            f"(e.g. {', '.join(absent[:3])}); the chapters show this scale once all are stored"
        )
        return False
    save_result(
        where.path(COMPLETE),
        {"runs": len(everything), "analyses": list(defined.ANALYSES)},
        provenance(
            where.scale,
            {"plan": [r.name.removeprefix("runs/") for r in everything], "max_steps": where.reduced},
            training_device(where.scale)[0],
        ),
    )
    return True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Train the runs of a scale (concurrently), evaluate them with beam search on valid and every test split, "
        "compute the analyses and beyond studies of --studies, and store the results with provenance and the test "
        "hypotheses under book/results/<scale>/ (at tiny: the cache). Run it again to resume after an interruption."
    )
    cli.add_where(parser)
    parser.add_argument(
        "--systems",
        type=cli.names,
        help="comma-separated systems; narrows the plan's runs and the named studies' models (default: all)",
    )
    parser.add_argument("--seeds", type=cli.seeds, help="comma-separated seeds (default: every seed of the plan)")
    parser.add_argument(
        "--corpora",
        type=cli.names,
        help="comma-separated corpora (default: every corpus of the scale; a corpus of your own files "
        "once `canlib data prepare NAME --files FOLDER` registered it)",
    )
    parser.add_argument(
        "--studies",
        type=cli.names,
        default=",".join(DEFAULT_STUDIES),
        help=f"comma-separated, from {', '.join(STUDIES)} (runs: train and score every run, which gives "
        "Table 2, the depth and the ablation BLEU; speed: the CPU speed tables the chapters show, timed on this "
        "machine and stored in book/results/cpu/ whatever the scale; the next experiments "
        f"{', '.join(defined.NEXT)} run only when named)",
    )
    parser.add_argument(
        "--jobs",
        type=option_type(int, "at least 1"),
        help=f"training processes at once (default: on CUDA min(runs, CPU cores, GPU memory / {RUN_GIB} GiB); CPU: 1)",
    )
    parser.add_argument("--status-every", type=float, default=60.0, help="seconds between status lines (default 60)")
    parser.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help="start a queued run only if it can finish within SECONDS of the start (judged by the longest "
        "finished run; see repro.experiments.pool); the rest waits for the next call. Default: "
        "until $CANLIB_DEADLINE (UNIX seconds) where set, as scripts/gpu_small.sh sets it",
    )
    # measurements/h200-2026-11-28-5af6bb5: five stacked seeds trained 16 model-updates/s, fewer than one run alone
    parser.add_argument(
        "--stack",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="train the queued seeds of one system as one stacked model, where their recipe has counter-hashed "
        "dropout (canlib.training.stacked); off by default: on a GPU it measured slower than side-by-side processes",
    )


def run(args: argparse.Namespace) -> int:
    """``python -m repro experiment``: train (concurrently where the device allows), evaluate and store the selected
    runs and studies of a scale (:func:`queued`), then mark the scale complete if its whole plan is stored. Stored
    results are skipped and interrupted runs resume, so a second call goes on where the first stopped; a failed run
    does not stop the others."""
    where = cli.where(args)
    systems, seeds, corpora, studies = args.systems, args.seeds, args.corpora, args.studies
    try:
        plan(where, systems, seeds, corpora)
    except ValueError as exc:
        raise ValueError(f"--systems/--corpora: {exc}") from exc
    time_limit = cli.time_limit(args.time_limit)
    # the pool called from here: the command reaches a model's fit in four calls (tests/repro/test_experiments.py)
    todo, train_only, wanted, jobs = queued(where, systems, seeds, corpora, studies, args.jobs, print)
    outcome = train_all(
        todo, jobs=jobs, time_limit=time_limit, status_every=args.status_every, train_only=train_only, stack=args.stack
    )
    store_studies(where, outcome, wanted, studies, seeds, print)
    mark_complete(where)
    if outcome.failed:
        raise RuntimeError(
            f"{len(outcome.failed)} run(s) failed (run the command again to retry):\n" + "\n".join(outcome.failed)
        )
    print(f"stored in {where.folder}")
    return 0


# -- the explicit call of a chapter ------------------------------------------------------------------


def trains_here(scale: str) -> bool:
    """Whether :func:`train_missing` trains a missing result of ``scale`` on this machine: always at tiny (CPU
    minutes), at small where CUDA is available (GPU minutes), never at full (GPU days: ``python -m repro experiment``).
    ``CANLIB_TRAIN_SMALL=1`` treats this device as able to train small (a patient CPU: hours a run, as
    ``book/results/cpu/train_small.json`` measured),
    ``CANLIB_TRAIN_SMALL=0`` refuses on a GPU too."""
    if scale != "small":
        return scale == "tiny"  # CPU minutes; full is GPU days
    flag = os.environ.get(TRAIN_HERE_ENV, "").strip()
    if flag not in ("", "0", "1"):
        raise ValueError(
            f"{TRAIN_HERE_ENV}={flag!r}: set 1 (train missing small results here) or 0 (never), "
            "or leave it unset (train where CUDA is available)"
        )
    return flag == "1" if flag else torch.cuda.is_available()


def train_missing(
    scale: str,
    systems: Sequence[str] = (),
    *,
    analyses_: Sequence[str] = (),
    studies: Sequence[str] = (),
    seeds: Sequence[int] | None = None,
    corpora: Sequence[str] | None = None,
    reduced: int | None = None,
) -> list[str]:
    """Train, evaluate and store what a chapter reads at ``scale`` and is not stored yet: the plan's runs of
    ``systems`` (on the main corpus or ``corpora``, every planned seed or ``seeds``), the stored analyses
    ``analyses_`` and the beyond ``studies`` (``reduced``: their end-to-end budget). At tiny it always trains
    (CPU minutes, cached per code version, silently); at small only where :func:`trains_here` (a GPU), one line
    per run on stderr; elsewhere a missing result is an error naming the command. Returns the names it stored."""
    where = Where.of(scale, reduced=reduced)
    selected = [*(["runs"] if systems else []), *analyses_, *studies]
    corpora = corpora or ([scale_spec(scale).corpus] if systems else None)
    wanted = [r.name for r in plan(where, systems, seeds, corpora)] if systems else []
    absent = where.missing([*wanted, *analyses_, *(f"beyond/{n}" for n in studies)])
    if not absent:
        return []
    if not trains_here(scale):
        raise FileNotFoundError(
            f"{scale}: {', '.join(absent[:3])}{' ...' if len(absent) > 3 else ''} not stored; "
            f"`{experiment_command(scale, studies=selected)}` on a "
            f"GPU stores them ({TRAIN_HERE_ENV}=1 trains them on this device)"
        )
    say = (lambda line: None) if scale == "tiny" else (lambda line: print(line, file=sys.stderr, flush=True))
    todo, train_only, wanted, jobs = queued(
        where, list(systems) or None, seeds, corpora, selected, 1 if scale == "tiny" else None, say
    )
    outcome = train_all(todo, jobs=jobs, log=say, train_only=train_only)
    store_studies(where, outcome, wanted, selected, seeds, say)
    if outcome.failed:
        raise RuntimeError(f"{len(outcome.failed)} run(s) failed:\n" + "\n".join(outcome.failed))
    return [r.name for r in outcome.stored]
