"""``python -m repro estimate``: what the beyond studies still have to train, in GPU-minutes, at the rate the stored
runs of the budget study measured on one GPU (training only: evaluation and distillation add a little).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from repro.experiments import cli
from repro.experiments.beyond import study_runs, to_train
from repro.results.files import load_result
from repro.results.layout import Where


def measured_rate(small: Where | None = None) -> tuple[float, str]:
    """Updates per second in total of the small runs that trained concurrently on one GPU, from the budget study's
    2x runs stored in ``small`` (default: book/results; each JSON's ``training.wall_s`` and ``step``): the sum of
    their updates over the longest wall time. Returns (rate, where it comes from)."""
    folder = (small or Where.of("small")).folder / "beyond" / "runs" / "multi30k-en-de"
    loaded = [load_result(p) for p in sorted(folder.glob("budget-*-x2-seed*.json"))]
    if not loaded:
        raise FileNotFoundError(f"{folder}: no stored 2x runs of the budget study to measure the rate from")
    steps = sum(r["training"]["step"] for r, _ in loaded)
    wall = max(r["training"]["wall_s"] for r, _ in loaded)
    devices = ", ".join(sorted({p["device"] for _, p in loaded}))
    commits = ", ".join(sorted({str(p["commit"])[:7] for _, p in loaded}))
    return (
        steps / wall,
        f"{len(loaded)} concurrent 2x runs on {devices} at commit {commits}: {steps:,} updates in {wall:.0f} s",
    )


def estimate(
    names: Sequence[str], where: Where, seeds: Sequence[int] | None = None, rate: float | None = None
) -> list[str]:
    """One line per study: the models still to train (and parents to train again for their weights), their updates
    and the GPU-minutes they take at ``rate`` updates/s (default: :func:`measured_rate`; training only, evaluation
    not counted)."""
    source = ""
    if rate is None:
        rate, source = measured_rate()
    lines = []
    for name in names:
        todo, parents = to_train(study_runs(name, where, seeds))
        updates = sum(r.steps for r in [*todo, *parents])
        again = f" + {len(parents)} teacher(s) trained again for their weights" if parents else ""
        lines.append(
            f"{name}: {len(todo)} model(s) to train{again}, {updates:,} updates: "
            f"~{updates / rate / 60:.1f} GPU-minutes at {rate:.0f} updates/s"
        )
    if source:
        lines.append(f"rate measured from {source} (training only; evaluation and distillation add a little)")
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print what the selected beyond studies still have to train and the GPU-minutes it takes, at the rate the "
        "stored 2x runs of the budget study measured; train nothing."
    )
    cli.add_studies(parser)


def run(args: argparse.Namespace) -> int:
    """``python -m repro estimate``: one line per study, then where the rate comes from."""
    for line in estimate(cli.studies(args), cli.where(args), args.seeds):
        print(line)
    return 0
