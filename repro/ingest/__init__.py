"""``python -m repro ingest``: store measurements made on another machine (a GPU) as results with provenance.

The speed and training-throughput figures of the book come from GPU runs of the repository's own scripts
(``scripts/gpu_check.sh``, ``scripts/gpu_profile.sh``, ``scripts/gpu_bench.py``, ``python -m repro bench``). Run them on
a GPU machine, bring their output folder back, and this command turns what they wrote into the stored results the
chapters load (:mod:`_code.gpu_results`), every figure computed from the raw files, never typed::

    python -m repro ingest MEASUREMENTS_DIR book/results/gpu/<device>-<date>

The output of one GPU call (``gpu_check.tar.gz`` of ``scripts/gpu_check.sh`` and ``profile.tar.gz`` of
``scripts/gpu_profile.sh``, or the two folders unpacked, with ``nvidia_smi.txt`` and logs) is added in one
command, which keeps its raw files in the repository so that the tests can check every stored figure against
them, drafts their README and converts them (:func:`store_device_run`)::

    python -m repro ingest --from-device FOLDER --profile-command "LIMIT=150 bash scripts/gpu_profile.sh"

It names the run ``<gpu>-<date>-<commit>`` (``-dirty`` for a changed work tree; the commit its first 7 digits):
the raw files go unchanged to ``measurements/<run>/`` and the stored results to ``book/results/gpu/<run>/``.
Then edit the drafted README with what the files cannot say (why a step failed), and, when the run stored a
training rate, add its full-recipe hours and rate (``_code.training.full_cost()``, one row per
stored rate) to the "What `full` costs" paragraph of ``measurements/README.md``: ``tests/book/test_full_cost.py`` checks
that it quotes them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from canlib.data.preparation import prepared

# the public API; its parts: the converters (repro.ingest.convert) and a GPU run kept
# (repro.ingest.device)
from repro.ingest.convert import (
    SOURCE,
    TRANSLATION,
    TRANSLATION_CORPUS,
    convert_ab,
    convert_measurements,
    convert_translation,
    parse_train_log,
    raw_path,
    read_environment,
    readme_commands,
)
from repro.ingest.device import (
    MEASUREMENTS_DIR,
    RAW_MAX_BYTES,
    device_run_facts,
    device_run_name,
    draft_readme,
    store_device_run,
)
from repro.results.files import load_result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        nargs="?",
        help="folder of raw JSON written by scripts/gpu_bench.py, python -m repro bench, "
        "gpu_smoke_train.py (and profile/summary.json of gpu_profile.sh)",
    )
    parser.add_argument("out", nargs="?", help="the stored results folder, book/results/gpu/<run>")
    parser.add_argument(
        "--from-device",
        metavar="FOLDER",
        help="a GPU run's output (gpu_check/ and profile/, or "
        "gpu_check.tar.gz and profile.tar.gz; nvidia_smi.txt, logs): copy it unchanged to "
        "measurements/<run>/ with a README and convert it into book/results/gpu/<run>/ (no SOURCE/OUT)",
    )
    parser.add_argument("--run", help="with --from-device: the run's name (default <gpu>-<date>-<commit>)")
    parser.add_argument(
        "--profile-command",
        default="bash scripts/gpu_profile.sh",
        help="with --from-device: how gpu_profile.sh was called, for the README",
    )
    parser.add_argument(
        "--check-command",
        default="bash scripts/gpu_check.sh",
        help="with --from-device: how gpu_check.sh was called, for the README",
    )
    parser.add_argument("--commit", help="the commit measured, when the raw files do not record it")
    parser.add_argument("--date", help="YYYY-MM-DD, when the raw files do not record it")
    parser.add_argument(
        "--source-note", default=SOURCE, help="how and where it was measured, stored as provenance.source"
    )


def run(args: argparse.Namespace) -> int:
    """Convert a measurement folder (SOURCE OUT), or keep and convert a GPU run's output (--from-device)."""
    if args.from_device:
        if args.source or args.out:
            raise ValueError("--from-device takes no SOURCE or OUT")
        raw_dir, written = store_device_run(
            args.from_device,
            run=args.run,
            profile_command=args.profile_command,
            check_command=args.check_command,
            note=None if args.source_note == SOURCE else args.source_note,
        )
        print(f"raw files: {raw_dir} (README.md drafted from them: add what they cannot say)")
        for path in written:
            print(path)
        if any(path.name.startswith("training_") for path in written):
            print(
                "a training rate was stored: measurements/README.md's full-cost paragraph must quote its hours and "
                "tok/s (tests/book/test_full_cost.py; _code.training.full_cost() computes them)"
            )
        return 0
    if not (args.source and args.out):
        raise ValueError("give SOURCE and OUT, or --from-device FOLDER")
    written = convert_measurements(args.source, args.out, commit=args.commit, date=args.date, note=args.source_note)
    source = Path(args.source)
    if all((source / name).exists() for name in TRANSLATION.values()):
        corpus, scale, split = TRANSLATION_CORPUS
        test = prepared(corpus, scale).split(split)
        _, prov = load_result(written[0])  # the call's device, commit and date
        commands = readme_commands(source / "README.md") if (source / "README.md").exists() else {}
        written.append(
            convert_translation(
                source,
                args.out,
                list(test.src_text),
                list(test.tgt_text),
                device=prov["device"],
                commit=prov["commit"],
                date=prov["date"],
                command=commands.get(TRANSLATION["log"], ""),
                note=args.source_note,
            )
        )
    for path in written:
        print(path)
    return 0
