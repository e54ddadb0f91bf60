"""``canlib data list``, ``canlib data prepare CORPUS --scale S`` and ``canlib data inspect FOLDER``.

A corpus of your own files: ``canlib data prepare NAME --files FOLDER --src en --tgt de`` registers
``FOLDER/{train,valid,test}.{en,de}`` under NAME (in ``$CANLIB_CACHE_DIR``) and prepares it; every later
command, ``canlib experiment --corpora NAME`` included, then knows NAME.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from canlib.data.binarized import ParallelSplit, load_prepared
from canlib.data.corpora import REGISTRY, get_corpus, register_files, registered_files
from canlib.data.preparation import format_statistics, prepare


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
    p.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help="with --files: joint subword vocabulary size (default 2000 at tiny, 8000 at small, 32000 at full)",
    )
    p.add_argument("--scale", default="tiny", help="full, small or tiny (default tiny)")
    p.add_argument(
        "--out", type=Path, default=None, help="output folder (default $CANLIB_CACHE_DIR/prepared/CORPUS-SCALE)"
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the subsampling (default 1)")
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
    if args.files is not None:
        if not (args.src and args.tgt):
            raise ValueError("--files needs --src and --tgt (the two languages' file suffixes)")
        register_files(args.corpus, args.files, args.src, args.tgt, args.vocab_size)
    elif args.src or args.tgt or args.vocab_size:
        raise ValueError("--src, --tgt and --vocab-size describe a corpus of your own files: give --files FOLDER too")
    start = time.perf_counter()
    path = prepare(args.corpus, args.scale, args.out, seed=args.seed)
    prepared = load_prepared(path)
    print(f"prepared {path} in {time.perf_counter() - start:.1f} s")
    print(format_statistics(prepared.meta))
    return 0
