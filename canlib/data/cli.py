"""``canlib data list``, ``canlib data prepare CORPUS --scale S`` and ``canlib data inspect FOLDER``.

A corpus of your own files: ``canlib data prepare NAME --files FOLDER --src en --tgt de`` prepares
``FOLDER/{train,valid,test}.{en,de}`` whole (every line kept unless ``--train-pairs``, ``--max-len`` or
``--max-ratio`` ask otherwise; what is left out is counted by cause in the summary) and, once that succeeded,
registers it under NAME (in ``$CANLIB_CACHE_DIR``); every later command, ``python -m repro experiment --corpora NAME``
included, then knows NAME. ``--force`` prepares again, and gives NAME other files or settings.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from canlib.catalogue import SCALES, scale_spec
from canlib.data.binarized import ParallelSplit, load_prepared
from canlib.data.corpora import (
    REGISTRY,
    check_registration,
    files_corpus,
    files_record,
    get_corpus,
    register,
    registered_files,
)
from canlib.data.preparation import format_statistics, prepare
from canlib.io import add_threads_option, default_threads, option_type

FILE_SETTINGS = ("vocab_size", "train_pairs", "max_len", "max_ratio", "drop_empty")  # the options of a corpus of files


def iteration_speed(split: ParallelSplit) -> float:
    """Sentence pairs per second of ``split[i]`` over the whole split (what a batch sampler pays)."""
    start = time.perf_counter()
    for i in range(len(split)):
        split[i]
    return len(split) / (time.perf_counter() - start)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    sub.add_parser("list", help="list the registered corpora and their scales")
    p = sub.add_parser("prepare", help="prepare a corpus: vocabulary + binarized train/valid/test")
    p.add_argument("corpus", help="a registered corpus name (see `canlib data list`), or the name to give --files")
    p.add_argument(
        "--files",
        type=Path,
        default=None,
        metavar="FOLDER",
        help="your own corpus: FOLDER holds train, valid and test files per language (train.en, train.de, ...; "
        "plain text or .gz, one sentence a line, every line with a partner); registers it as CORPUS",
    )
    p.add_argument("--src", help="with --files: the source language's file suffix (e.g. en)")
    p.add_argument("--tgt", help="with --files: the target language's file suffix (e.g. de)")
    sizes = ", ".join(f"{scale_spec(s).vocab_size} at {s}" for s in SCALES)
    count = option_type(int, "at least 1")
    for flag, kind, text in (
        ("--vocab-size", count, f"joint subword vocabulary size (default {sizes})"),
        ("--train-pairs", count, "train on a seeded sample of this many pairs (default: every pair)"),
        (
            "--max-len",
            count,
            "leave out training pairs with a side over this many subwords (default: only what the models cannot hold, "
            "1023; fairseq's WMT recipe: 250)",
        ),
        (
            "--max-ratio",
            option_type(float, "nonnegative"),
            "leave out training pairs whose longer side has over this many times the subwords of the shorter "
            "(default: off; fairseq's WMT recipe: 1.5)",
        ),
    ):
        p.add_argument(flag, type=kind, default=None, help=f"with --files: {text}")
    p.add_argument(
        "--drop-empty",
        action="store_true",
        default=None,
        help="with --files: leave out training pairs with an empty side (counted in the summary) instead of refusing "
        "them; valid and test lines must still all have text",
    )
    p.add_argument(
        "--scale",
        default="tiny",
        help="full, small or tiny (default tiny); with --files it sets the default vocabulary size only",
    )
    p.add_argument(
        "--out", type=Path, default=None, help="output folder (default $CANLIB_CACHE_DIR/prepared/CORPUS-SCALE)"
    )
    p.add_argument("--seed", type=option_type(int, "nonnegative"), default=1, help="seed of any sampling (default 1)")
    p.add_argument(
        "--force", action="store_true", help="prepare again even if done; with --files, re-register NAME with these"
    )
    add_threads_option(p)
    p = sub.add_parser("inspect", help="print a prepared folder's statistics and its iteration speed")
    p.add_argument("path", type=Path, help="a prepared folder")
    p.add_argument("--split", default="train", help="split whose `split[i]` loop is timed (default train)")


def run(args: argparse.Namespace) -> int:
    if args.data_command == "list":
        for corpus in [*REGISTRY.values(), *map(get_corpus, registered_files())]:
            print(f"{corpus.name:<16}{corpus.description}")
            for name, scale in corpus.scales.items():
                print(f"  --scale {name:<6}vocab {scale.vocab_size:>6}  {scale.description}")
        return 0
    if args.data_command == "inspect":
        prepared = load_prepared(args.path)
        print(format_statistics(prepared.meta))
        split = prepared.split(args.split)
        print(
            f"iterating {args.split}: {iteration_speed(split):,.0f} sentence pairs/s (split[i] over all {len(split):,})"
        )
        return 0
    settings = {name: getattr(args, name) for name in FILE_SETTINGS}
    corpus, record = args.corpus, None
    if args.files is not None:
        if not (args.src and args.tgt):
            raise ValueError("--files needs --src and --tgt (the two languages' file suffixes)")
        if args.max_ratio and args.max_ratio < 1:
            raise ValueError(f"--max-ratio {args.max_ratio:g}: must be at least 1 (or 0: off)")
        corpus = files_corpus(args.corpus, args.files, args.src, args.tgt, **settings)
        record = files_record(args.corpus, args.files, args.src, args.tgt, **settings)
        check_registration(record, args.force)  # before any work: a name taken by other files is refused
    elif args.src or args.tgt or any(v is not None for v in settings.values()):
        raise ValueError(
            "--src, --tgt, --vocab-size, --train-pairs, --max-len, --max-ratio and --drop-empty describe a corpus of "
            "your own files: give --files FOLDER too"
        )
    threads = args.threads or default_threads()  # the encoding's; the vocabulary is learnt on one (deterministic)
    start = time.perf_counter()
    path = prepare(
        corpus, args.scale, args.out, seed=args.seed, progress=sys.stderr.isatty(), force=args.force, threads=threads
    )
    if record is not None:
        register(record)  # only once the preparation succeeded
    prepared = load_prepared(path)
    print(f"prepared {path} in {time.perf_counter() - start:.1f} s (encoded on {threads} thread(s))")
    print(format_statistics(prepared.meta))
    return 0
