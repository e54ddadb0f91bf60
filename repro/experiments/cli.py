"""The options the engine's commands share (``python -m repro experiment``, ``estimate``, ``summarise``), and the one
value they build from them: where the results live (:class:`~repro.results.layout.Where`: ``--scale``, ``--out``,
``--max-steps``), built once here and passed down.

Each command lives in the module that does its work: ``experiment`` in :mod:`repro.experiments.experiment`,
``rescore`` in :mod:`repro.experiments.rescore`, ``estimate`` in :mod:`repro.experiments.estimate`,
``summarise`` in :mod:`repro.experiments.summarise`.
"""

from __future__ import annotations

import argparse
import os
import time

from canlib.catalogue import SCALES
from repro.results import studies as defined
from repro.results.layout import Where


def add_where(parser: argparse.ArgumentParser) -> None:
    """``--scale``, ``--out`` and ``--max-steps``: where the results live."""
    parser.add_argument(
        "--scale", required=True, choices=SCALES, help="tiny (CPU, CI), small (GPU minutes), full (the paper)"
    )
    parser.add_argument("--out", help="results folder instead of book/results (files go to OUT/<scale>/)")
    parser.add_argument(
        "--max-steps",
        type=int,
        help="reduced training budget for end-to-end tests (recorded in the provenance; needs --out except at tiny)",
    )


def where(args: argparse.Namespace) -> Where:
    """The one value of where the results live, from ``--scale``, ``--out`` and ``--max-steps``."""
    return Where.of(args.scale, args.out, args.max_steps)


def add_studies(parser: argparse.ArgumentParser) -> None:
    """Where the results live (:func:`add_where`), ``--studies`` (beyond studies) and ``--seeds``: the options of
    the commands that read the beyond studies."""
    add_where(parser)
    parser.add_argument(
        "--studies",
        type=names,
        default=",".join(defined.ORIGINAL),
        help=f"comma-separated beyond studies, from {', '.join(defined.STUDIES)} (default: the first three)",
    )
    parser.add_argument("--seeds", type=seeds, help="comma-separated seeds (default: each study's own)")


def studies(args: argparse.Namespace) -> list[str]:
    """The beyond studies of ``--studies``; an unknown one is an error that lists them."""
    known = (*defined.STUDIES, *defined.CONVERGED)
    if unknown := [n for n in args.studies if n not in known]:
        raise ValueError(f"--studies: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    return args.studies


def names(text: str) -> list[str]:
    """An argparse ``type``: a comma-separated option as a list (an empty one is refused)."""
    out = [v.strip() for v in text.split(",") if v.strip()]
    if not out:
        raise argparse.ArgumentTypeError("empty list")
    return out


def seeds(text: str) -> list[int]:
    """An argparse ``type``: comma-separated seeds, each a positive integer."""
    out = names(text)
    if bad := [n for n in out if not n.isdigit() or int(n) < 1]:
        raise argparse.ArgumentTypeError(f"{', '.join(bad)} is not a positive integer")
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
