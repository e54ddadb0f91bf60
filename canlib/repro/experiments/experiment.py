"""One experiment: the runs of a scale's plan, the analyses that read them and the beyond studies, trained by one
pool, evaluated and stored; and the explicit call a chapter makes for what it reads.

:func:`experiment` is what ``canlib experiment`` runs (:mod:`canlib.repro.experiments.cli`). :func:`train_missing` is
the
one visible call with which a chapter (at ``tiny``, on any machine, cached) or a GPU reader (at ``small``) trains
what the chapter reads and is not stored yet; the chapter's reader (the book's store, which does not import this
package) then only reads.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from canlib.catalogue import scale_spec
from canlib.repro.bench.chapters import store_all
from canlib.repro.experiments import analyses, beyond
from canlib.repro.experiments.evaluate import check_stored_budget
from canlib.repro.experiments.pool import Outcome, device_jobs, summary_line, train_all
from canlib.repro.experiments.run import plan, training_device
from canlib.repro.results import studies as defined
from canlib.repro.results.files import provenance, save_result
from canlib.repro.results.layout import COMPLETE, default_root, experiment_command, missing, stored_path
from canlib.repro.results.studies import ANALYSES

STUDIES = ("runs", *ANALYSES, *defined.STUDIES, "speed")
DEFAULT_STUDIES = ("runs", *ANALYSES, *defined.ORIGINAL)  # the next experiments run when named
TRAIN_HERE_ENV = (
    "CANLIB_TRAIN_SMALL"  # "1": a chapter trains missing small results on this device, even a CPU; "0": never
)


def experiment(
    scale: str,
    *,
    systems: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    corpora: Sequence[str] | None = None,
    studies: Sequence[str] = DEFAULT_STUDIES,
    root: Path | None = None,
    reduced: int | None = None,
    jobs: int | None = None,
    time_limit: float | None = None,
    status_every: float = 60.0,
    log: Callable[[str], None] | None = print,
) -> Outcome:
    """Train (concurrently where the device allows), evaluate and store the selected runs, analyses and studies of
    ``scale`` under ``root`` (default: the scale's results folder, see
    :func:`canlib.repro.results.layout.default_root`):
    the plan's runs (``"runs"``, narrowed by ``systems``, ``seeds`` and ``corpora``), the models every selected
    analysis and beyond study needs, in one queue; then the analyses and the studies' summaries. Stored results
    are skipped and interrupted runs resume, so a second call goes on where the first stopped. ``reduced``:
    ``max_steps`` of an end-to-end test (its own results folder). Returns what the pool did; failures are named
    in it and do not stop the others."""
    unknown = sorted(set(studies) - set(STUDIES))
    if unknown:
        raise ValueError(f"--studies: unknown {', '.join(unknown)}; choose from {', '.join(STUDIES)}")
    say = log or (lambda line: None)
    root = Path(root) if root is not None else default_root(scale, reduced)
    runs = plan(scale, systems, seeds, corpora, reduced=reduced) if "runs" in studies else []
    if "runs" in studies and not runs:
        raise ValueError(f"no run of scale {scale} matches --systems/--seeds/--corpora")
    chosen = {(r.system, r.corpus) for r in runs if r.seed == 1} if "runs" in studies else None
    wanted, train_only = [], []
    for name in (a for a in ANALYSES if a in studies):
        reads, own = analyses.runs_needed(name, scale, reduced)
        if chosen is not None and not {(r.system, r.corpus) for r in reads} <= chosen:
            say(
                f"{name}: skipped (needs seed 1 of {', '.join(r.system for r in reads)} on "
                f"{reads[0].corpus} in this selection)"
            )
            continue
        wanted.append(name)
        runs += reads
        if not stored_path(name, scale, root).is_file():  # computing it needs the weights of every model it reads
            train_only += [r for r in [*reads, *own] if not (r.folder / "result.json").is_file()]
    named = [n for n in defined.STUDIES if n in studies]
    for name in named:
        runs += beyond.study_runs(name, scale, seeds, reduced)
    runs = list({r.name: r for r in runs}.values())  # once each, in order
    for r in runs:
        check_stored_budget(r, root)  # before any training: a budget mismatch stops the command
    todo, parents = beyond.to_train(runs, root)
    folders = {r.folder for r in todo}
    train_only = list({r.folder: r for r in [*parents, *train_only] if r.folder not in folders}.values())
    device, _ = training_device(scale)
    jobs = jobs or device_jobs(len(todo) + len(train_only), device)
    if jobs < 1:
        raise ValueError(f"--jobs {jobs}: must be >= 1")
    say(
        f"{scale}: {len(runs)} runs, {len(runs) - len(todo)} already stored, {len(todo)} to train"
        + (f" (+ {len(train_only)} trained for their weights only)" if train_only else "")
        + f" on {device} with {jobs} process(es)"
    )
    outcome = train_all(
        todo, root, jobs=jobs, time_limit=time_limit, status_every=status_every, log=log, train_only=train_only
    )
    if todo or train_only:
        say(summary_line(len(outcome.stored), outcome.seconds, outcome.skipped))
    for name in wanted:
        analyses.compute(name, scale, root, reduced)
        say(f"{name}: stored")
    for name in named:
        if beyond.summarise(name, scale, seeds, reduced, root) is not None:
            say(f"beyond/{name}: stored")
    if "speed" in studies:
        if root != default_root(scale):
            raise ValueError("--studies speed stores into book/results only (it takes no --out)")
        store_all()
    return outcome


def mark_complete(
    scale: str, root: Path | None, reduced: int | None, log: Callable[[str], None] | None = print
) -> bool:
    """Store ``<results>/<scale>/complete.json`` once every run of the scale's plan and every analysis is stored
    (the chapters switch to a scale only then); say what is missing otherwise."""
    everything = plan(scale, reduced=reduced)
    absent = missing(scale, [r.name for r in everything] + list(ANALYSES), root)
    if absent:
        (log or (lambda line: None))(
            f"{scale}: {len(absent)} of {len(everything) + len(ANALYSES)} results still missing "
            f"(e.g. {', '.join(absent[:3])}); the chapters show this scale once all are stored"
        )
        return False
    save_result(
        stored_path(COMPLETE, scale, root),
        {"runs": len(everything), "analyses": list(ANALYSES)},
        provenance(
            scale,
            {"plan": [r.name.removeprefix("runs/") for r in everything], "max_steps": reduced},
            training_device(scale)[0],
        ),
    )
    return True


# -- the explicit call of a chapter ------------------------------------------------------------------


def trains_here(scale: str) -> bool:
    """Whether :func:`train_missing` trains a missing result of ``scale`` on this machine: always at tiny (CPU
    minutes), at small where CUDA is available (GPU minutes), never at full (GPU days: ``canlib experiment``).
    ``CANLIB_TRAIN_SMALL=1`` treats this device as able to train small (a patient CPU: about 2 hours a run),
    ``CANLIB_TRAIN_SMALL=0`` refuses on a GPU too."""
    if scale == "tiny":
        return True
    if scale != "small":
        return False
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
    selected = [*(["runs"] if systems else []), *analyses_, *studies]
    corpora = corpora or ([scale_spec(scale).corpus] if systems else None)
    wanted = [r.name for r in plan(scale, systems, seeds, corpora, reduced=reduced)] if systems else []
    absent = missing(scale, [*wanted, *analyses_, *(f"beyond/{n}" for n in studies)], default_root(scale, reduced))
    if not absent:
        return []
    if not trains_here(scale):
        raise FileNotFoundError(
            f"{scale}: {', '.join(absent[:3])}{' ...' if len(absent) > 3 else ''} not stored; "
            f"`{experiment_command(scale, studies=selected)}` on a "
            f"GPU stores them ({TRAIN_HERE_ENV}=1 trains them on this device)"
        )
    log = None if scale == "tiny" else (lambda line: print(line, file=sys.stderr, flush=True))
    outcome = experiment(
        scale,
        systems=list(systems) or None,
        seeds=seeds,
        corpora=corpora,
        studies=selected,
        reduced=reduced,
        jobs=1 if scale == "tiny" else None,
        log=log,
    )
    if outcome.failed:
        raise RuntimeError(f"{len(outcome.failed)} run(s) failed:\n" + "\n".join(outcome.failed))
    return [r.name for r in outcome.stored]
