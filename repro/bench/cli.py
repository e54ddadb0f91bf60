"""``python -m repro bench <study>``: argparse -> :class:`BenchSettings` -> ``run_study`` -> JSON and a plot.

The JSON file holds the ``BenchResult``: ``{"systems": {name: figures}, "meta": {...}}``; ``--store`` writes the
stored result a GPU run keeps (:func:`repro.bench.stored.save_bench`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from dataclasses import asdict, fields
from pathlib import Path

import torch

from canlib.catalogue import SCALES
from canlib.io import atomic_write_bytes, require
from repro.bench.settings import BenchResult, BenchSettings
from repro.bench.speed import PARTS, STUDIES, run_study
from repro.bench.stored import save_bench


def int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers") from None


def checkpoint(text: str) -> tuple[str, str]:
    name, _, path = text.partition("=")
    if not name or not path:
        raise argparse.ArgumentTypeError(f"{text!r}: expected name=PATH")
    return name, path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = BenchSettings()
    parser.add_argument(
        "study",
        choices=sorted(STUDIES) + ["ops"],
        help="which study to run (ops: operators per beam-search step, counted, not timed)",
    )
    parser.add_argument(
        "--systems",
        help="comma-separated systems (presets, ct2:<preset>, or checkpoint names); "
        "default: the study's systems (speed: with CTranslate2's Baseline and Balanced where installed)",
    )
    parser.add_argument(
        "--checkpoint", type=checkpoint, action="append", default=[], metavar="NAME=PATH", help="time a trained model"
    )
    parser.add_argument("--scale", choices=SCALES, default=d.scale, help="preset scale of random-weight models")
    parser.add_argument("--vocab-size", type=int, default=d.vocab_size, help="random-weight vocabulary size")
    parser.add_argument("--beam", type=int, default=d.beam)
    parser.add_argument("--beams", type=int_list, default=d.beams, help="beam study: beam sizes")
    parser.add_argument("--lengths", type=int_list, default=d.lengths, help="beam study: output lengths")
    parser.add_argument("--batch", type=int, default=d.batch, help="sentences per search call")
    parser.add_argument("--batches", type=int_list, default=d.batches, help="batch study: batch sizes")
    parser.add_argument(
        "--forced-length", type=int, default=d.forced_length, help="generate exactly N tokens (0: free decoding)"
    )
    parser.add_argument("--sentences", type=int, default=d.sentences, help="source sentences per timed repeat")
    parser.add_argument("--repeats", type=int, default=d.repeats)
    parser.add_argument("--warmup", type=int, default=d.warmup)
    parser.add_argument("--warmup-steps", type=int, default=5, help="ops study: decode steps before the counted one")
    parser.add_argument("--len-penalty", type=float, default=d.len_penalty)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=d.threads, help="torch CPU threads (0: leave torch's default)")
    parser.add_argument("--fp32", action="store_true", help="float32 on CUDA (default there: float16)")
    parser.add_argument("--graphs", action="store_true", help="CUDA: replay decode steps from CUDA graphs")
    parser.add_argument("--breakdown", action="store_true", help="also time the components of each canlib system")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (e.g. inside a notebook)")
    parser.add_argument("--json", help="write the results here (JSON)")
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="also store the result with its provenance and the spread of its repeats, as a GPU run keeps it "
        "(gpu_check/<study>.json, copied to book/results/gpu/<run>/ by python -m repro ingest --from-device)",
    )
    parser.add_argument("--plot", help="write a plot here (default: the JSON path with .png)")


def settings_from_args(args: argparse.Namespace) -> BenchSettings:
    """The settings the options name (an option of a setting's name is that setting; lists become tuples)."""
    given = {f.name: getattr(args, f.name) for f in fields(BenchSettings) if hasattr(args, f.name)}
    given["systems"] = tuple(args.systems.split(",")) if args.systems else None
    return BenchSettings(**given, checkpoints=args.checkpoint, progress=not args.no_progress)


def run_ops(args: argparse.Namespace) -> int:
    """``python -m repro bench ops``: operators per beam-search step of each system on the GPU's code path (counted
    on the meta device, float16) and this CPU's (float32); see :mod:`canlib.decoding.ops`."""
    from canlib.decoding.ops import ops_study

    result = ops_study(
        args.systems.split(",") if args.systems else None,
        scale=args.scale,
        vocab_size=args.vocab_size,
        beam=args.beam,
        batch=args.batch,
        warmup=args.warmup_steps,
        seed=args.seed,
    )
    print(f"# operators per beam-search step (beam {args.beam}, batch {args.batch}, after {args.warmup_steps} steps)")
    for name, paths in result["result"]["systems"].items():
        for path, c in paths.items():
            print(
                f"{name:<12}{path:<5} step {c['step']['kernel_operators']:>4} kernels "
                f"{c['step']['operators']:>4} operators"
                f" | per layer {c['per_layer']['kernel_operators']:>5.1f} {c['per_layer']['operators']:>6.1f}"
                f" | search {c['search']['kernel_operators']:>3} {c['search']['operators']:>3} | host "
                f"syncs {c['step']['host_syncs']}"
            )
    if args.json:
        atomic_write_bytes((json.dumps(result, indent=1) + "\n").encode(), args.json)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.study == "ops":
        return run_ops(args)
    result = run_study(args.study, settings_from_args(args))
    print_table(args.study, result)
    result.meta["command"] = args.command_line  # as typed, for the stored result and the JSON alike
    if args.store:
        save_bench(args.store, result.systems, result.meta)
    if args.json:
        atomic_write_bytes((json.dumps(asdict(result), indent=1) + "\n").encode(), args.json)
    if args.plot or (args.json and importlib.util.find_spec("matplotlib") is not None):
        plot(args.study, result, args.plot or str(Path(args.json).with_suffix(".png")))
    elif args.json:  # a GPU machine may hold torch and numpy alone: the JSON is the result, the plot a view of it
        print(
            f"python -m repro bench: no plot beside {args.json}: matplotlib is not installed (pip install matplotlib)",
            file=sys.stderr,
        )
    return 0


def print_table(study: str, result: BenchResult) -> None:
    meta = result.meta
    print(f"# {study} on {meta['device']} ({meta['dtype']}, {meta['threads']} threads)")
    if "busy_warning" in meta:
        print(f"# warning: {meta['busy_warning']}")
    for name, row in result.systems.items():
        if "tok_per_s" in row:
            ref, ratio = next(
                ((k.removeprefix("ratio_to_"), v) for k, v in row.items() if k.startswith("ratio_to_")), ("?", math.nan)
            )
            line = (
                f"{name:<16}{row['tok_per_s']:>10.1f} tok/s  {row['ms_per_sentence']:>8.1f} ms/sent  "
                f"x{ratio:.2f} of {ref}"
            )
            if "breakdown" in row:
                b = row["breakdown"]
                line += "  | " + "  ".join(f"{p} {b[p + '_ms']:.1f}ms ({100 * b[p + '_share']:.0f}%)" for p in PARTS)
            print(line)
        else:
            for key, series in row.items():
                print(f"{name:<16}{key}: " + ", ".join(f"{x}={v:.1f}" for x, v in series.items()))


def plot(study: str, result: BenchResult, path: str) -> None:
    """Save the study's plot. Uses matplotlib's object API, never pyplot, so running the bench
    inside a notebook leaves the notebook's backend (and its inline figures) alone."""
    Figure = require("matplotlib.figure", "the bench's plot").Figure

    rows = result.systems
    panels = sorted({k for row in rows.values() for k in row if k.startswith("by_")}) or ["tok_per_s"]
    fig = Figure(figsize=(5 * len(panels), 3.5))
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, key in zip(axes[0], panels):
        ax.set_ylabel("target tokens / s")
        if key == "tok_per_s":
            ax.bar(list(rows), [row["tok_per_s"] for row in rows.values()], color="tab:blue")
            ax.tick_params(axis="x", rotation=30)
        else:
            for name, row in rows.items():
                ax.plot([int(x) for x in row[key]], list(row[key].values()), marker="o", label=name)
            ax.set_xscale("log", base=2)
            ax.set_xlabel(key[3:])
            ax.legend()
    fig.suptitle(f"{study}: {result.meta['device']} ({result.meta['dtype']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
