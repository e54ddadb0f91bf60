"""``python -m canlib experiment``: train every run of a scale, evaluate it, run the analyses and the beyond
studies, store it all (:func:`canlib.repro.experiments.experiment.experiment`).

The runs share one GPU: training a ``small-*`` model is launch-bound (one run uses ~1% of an H200's matrix
throughput), so ``--jobs`` worker processes train concurrently (:mod:`canlib.repro.experiments.pool`). Each finished
run is written at once, so an interrupted command resumes: a stored run is skipped and an interrupted one resumes
from its checkpoints.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from canlib.catalogue import ALL_SYSTEMS, SCALES
from canlib.repro.experiments import beyond
from canlib.repro.experiments.experiment import DEFAULT_STUDIES, STUDIES, experiment, mark_complete
from canlib.repro.experiments.rescore import recheck, rescore
from canlib.repro.experiments.run import plan
from canlib.repro.results import studies as defined
from canlib.repro.results.layout import default_root


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Train every run of a scale (concurrently), evaluate it with beam search on valid and every test split, "
        "run the similarity, error, attention-map and conversion studies and the beyond studies, and store results "
        "with provenance and the test hypotheses under book/results/<scale>/ (at tiny: the cache). Resumable: run it "
        "again after an interruption. Time: tiny runs take CPU minutes each; a small run about 3 GPU-minutes at 9 "
        "at once on one H100 and about 2 hours on a 2-core CPU."
    )
    parser.add_argument("--scale", choices=SCALES, help="tiny (CPU, CI), small (GPU minutes), full (the paper)")
    parser.add_argument("--systems", default=",".join(ALL_SYSTEMS), help="comma-separated systems (default: all)")
    parser.add_argument("--seeds", default=None, help="comma-separated seeds (default: every seed of the scale's plan)")
    parser.add_argument(
        "--corpora",
        default=None,
        help="comma-separated corpora (default: every corpus of the scale; a corpus of your own files "
        "once `canlib data prepare NAME --files FOLDER` registered it)",
    )
    parser.add_argument(
        "--studies",
        default=",".join(DEFAULT_STUDIES),
        help=f"comma-separated, from {', '.join(STUDIES)} (runs: train and score every run, which gives "
        "Table 2, the depth and the ablation BLEU; speed: the CPU speed tables the chapters show, timed on this "
        "machine and stored in book/results/cpu/ whatever the scale; the next experiments "
        f"{', '.join(defined.NEXT)} run only when named)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="training processes at once (default: on CUDA min(runs, CPU cores, GPU memory / 4.5 GiB), on CPU 1)",
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="reduced training budget for end-to-end tests (recorded in the provenance; needs --out except at tiny)",
    )
    parser.add_argument("--out", default=None, help="results folder instead of book/results (files go to OUT/<scale>/)")
    parser.add_argument("--status-every", type=float, default=60.0, help="seconds between status lines (default 60)")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="start a queued run only if it can finish within SECONDS of the start (judged by the longest "
        "finished run; see canlib.repro.experiments.pool); the rest waits for the next call. Default: "
        "until $CANLIB_DEADLINE (UNIX seconds) where set, as scripts/gpu_small.sh sets it",
    )
    parser.add_argument(
        "--summarise",
        action="store_true",
        help="store the selected beyond studies' summaries from their stored models only; train nothing",
    )
    parser.add_argument(
        "--estimate",
        action="store_true",
        help="print what the selected beyond studies still have to train, in GPU-minutes; train nothing",
    )
    parser.add_argument(
        "--rescore",
        default=None,
        metavar="DIR",
        help="recompute sacreBLEU of every stored run under DIR from its hypotheses; fail on a difference",
    )


def names(value: str | None, what: str) -> list[str] | None:
    """A comma-separated option as a list (None when not given)."""
    if value is None:
        return None
    out = [v.strip() for v in value.split(",") if v.strip()]
    if not out:
        raise ValueError(f"--{what}: empty list")
    return out


def seeds(value: str | None) -> list[int] | None:
    out = names(value, "seeds")
    if out is None:
        return None
    bad = [n for n in out if not n.isdigit() or int(n) < 1]
    if bad:
        raise ValueError(f"--seeds: {', '.join(bad)} is not a positive integer")
    return [int(n) for n in out]


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


def run(args: argparse.Namespace) -> int:
    """Train, evaluate and store the selected runs and studies of a scale (see the module docstring)."""
    if args.rescore:
        rows = rescore(Path(args.rescore))
        print(
            f"{len(rows)} stored sacreBLEU scores of {len({r['file'] for r in rows})} runs reproduced "
            "from their hypotheses"
        )
        quoted = recheck(Path(args.rescore))
        if quoted:
            print(f"{quoted} scores quoted by the beyond studies' summaries equal their stored runs'")
        return 0
    if args.scale is None:
        raise ValueError("--scale is required (or --rescore DIR)")
    studies = names(args.studies, "studies") or []
    if args.max_steps is not None and args.out is None and args.scale != "tiny":
        raise ValueError(
            "--max-steps trains a reduced budget: give --out DIR (book/results holds full-budget results only)"
        )
    root = Path(args.out) if args.out else None
    named = [n for n in studies if n in defined.STUDIES]
    if args.estimate:
        for line in beyond.estimate(named, args.scale, seeds(args.seeds), root, reduced=args.max_steps):
            print(line)
        return 0
    if args.summarise:
        for name in named:
            stored = beyond.summarise(name, args.scale, seeds(args.seeds), args.max_steps, root)
            print(
                f"beyond/{name}: "
                + (f"stored from {len(stored[0]['runs'])} stored models" if stored else "no model stored")
            )
        return 0
    systems, corpora = names(args.systems, "systems"), names(args.corpora, "corpora")
    try:
        plan(args.scale, systems, seeds(args.seeds), corpora)
    except ValueError as exc:
        raise ValueError(f"--systems/--corpora: {exc}") from exc
    outcome = experiment(
        args.scale,
        systems=systems,
        seeds=seeds(args.seeds),
        corpora=corpora,
        studies=studies,
        root=root,
        reduced=args.max_steps,
        jobs=args.jobs,
        time_limit=time_limit(args.time_limit),
        status_every=args.status_every,
    )
    mark_complete(args.scale, root or default_root(args.scale, args.max_steps), args.max_steps)
    if outcome.failed:
        raise RuntimeError(
            f"{len(outcome.failed)} run(s) failed (run the command again to retry):\n" + "\n".join(outcome.failed)
        )
    print(f"stored in {(root or default_root(args.scale, args.max_steps)) / args.scale}")
    return 0
