"""``python -m repro ingest --from-device FOLDER``: keep a GPU run's output and copy its stored results into the book.

The speed and profile figures of the book come from GPU runs of the repository's own scripts
(``scripts/gpu_check.sh``, ``scripts/gpu_profile.sh``, ``python -m repro bench ... --store``). They write their results
on the device in the one format the registry and the chapters read (:mod:`repro.bench.stored`: every figure computed
where it is measured, with its provenance). Bring their output back (``gpu_check.tar.gz`` and ``profile.tar.gz``, or
the two folders unpacked, with ``nvidia_smi.txt`` and logs) and this command, in one step (:func:`store_device_run`),
checks each stored result (a malformed one is named with its file and field, and nothing is written), copies
every file unchanged to ``measurements/<run>/`` with a drafted README, and the stored results unchanged to
``book/results/gpu/<run>/``::

    python -m repro ingest --from-device FOLDER --profile-command "LIMIT=150 bash scripts/gpu_profile.sh"

It names the run ``<gpu>-<date>-<commit>`` (``-dirty`` for a changed work tree; the commit its first 7 digits). Then
edit the drafted README with what the files cannot say (why a step failed), and, when the run stored a training rate,
add its full-recipe hours and rate (``_code.training.full_cost()``, one row per stored rate) to the "What `full`
costs" paragraph of ``measurements/README.md``: ``tests/book/test_full_cost.py`` checks that it quotes them.
"""

from __future__ import annotations

import argparse

from repro.ingest.device import COMMANDS, store_device_run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from-device",
        metavar="FOLDER",
        required=True,
        help="a GPU run's output (gpu_check/ and profile/, or gpu_check.tar.gz and profile.tar.gz; nvidia_smi.txt, "
        "logs): copied unchanged to measurements/<run>/ with a README, its stored results to book/results/gpu/<run>/",
    )
    parser.add_argument("--run", help="the run's name (default <gpu>-<date>-<commit>)")
    for flag, folder in (("--profile-command", "profile"), ("--check-command", "gpu_check")):
        script = COMMANDS[folder].rsplit("/", 1)[1]  # gpu_profile.sh, gpu_check.sh
        parser.add_argument(flag, default=COMMANDS[folder], help=f"how {script} was called, for the README")


def run(args: argparse.Namespace) -> int:
    """Keep a GPU run's output and copy its stored results (--from-device)."""
    commands = {"gpu_check": args.check_command, "profile": args.profile_command}
    raw_dir, written = store_device_run(args.from_device, run=args.run, commands=commands)
    print(f"raw files: {raw_dir} (README.md drafted from them: add what they cannot say)")
    for path in written:
        print(path)
    if any(path.name.startswith("training_") for path in written):
        print(
            "a training rate was stored: measurements/README.md's full-cost paragraph must quote its hours and "
            "tok/s (tests/book/test_full_cost.py; _code.training.full_cost() computes them)"
        )
    return 0
