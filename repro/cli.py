"""``python -m repro <command>``: the reproduction's commands, run by the same machinery as ``canlib``'s.

Each command lives in the module that does the work; this file only lists them (a command module provides
``add_arguments(parser)`` and ``run(args) -> int``; see :mod:`canlib.cli`).
"""

from __future__ import annotations

import sys

from canlib.cli import main as run_command

# command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "experiment": (
        "repro.experiments.experiment",
        "train (concurrently), evaluate and store every run and study of a scale under book/results/",
    ),
    "claims": ("repro.studies.claims", "every claim the book tests, judged from the stored results (--json: as data)"),
    "ingest": ("repro.ingest", "store measurements made on another machine (a GPU) as results with provenance"),
    "bench": ("repro.bench.cli", "decoding-speed studies of the paper (JSON and plots)"),
    "rescore": ("repro.experiments.rescore", "recompute every stored sacreBLEU under DIR from its hypotheses"),
    "estimate": ("repro.experiments.estimate", "GPU-minutes the selected beyond studies still have to train"),
    "summarise": ("repro.experiments.summarise", "store beyond studies' summaries from their stored models"),
}


def main(argv: list[str] | None = None) -> int:
    return run_command(argv, COMMANDS, prog="python -m repro", description="The reproduction of the CAN paper")


if __name__ == "__main__":
    sys.exit(main())
