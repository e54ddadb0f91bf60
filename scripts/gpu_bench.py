"""The GPU speed check, as one command (no network), built to give a verdict against stated goals.

Times the paper's Table 2 systems (baseline, balanced, san, aan, can) with random weights at the
d=512 presets, in float16, beam 4, batch 1, forced output length 30, once eagerly and once with whole
search steps replayed from CUDA graphs; checks that the captured path gives the same outputs as the
eager one; writes the stored result ``speed.json`` (:mod:`repro.bench.stored`: per system and mode the repeats'
tokens/s and spread, with the token checks, goals and ratios; its provenance: commit, date, device, command).

Sources: ``--sources test2016`` takes the first ``--sentences`` English sources of Multi30k's test2016
(``$CANLIB_DATA_DIR/multi30k-en-de/test_2016_flickr.en``) at their real lengths, one token per word or
punctuation mark (ids from a checksum of the word: the weights are random, only the lengths matter);
``--sources random`` draws 25-30 random ids per sentence (where no test2016 file is at hand).

Every repeat times every system once, in turn (A, B, A, B ...), so a drift of the machine hits all of
them alike. Per system: the median of the repeats; per repeat, each system's ratio to Balanced (the same
tokens, so the ratio of the times), whose median and spread (min, quartiles, max) ``result["ratios"]``
holds. The goals (``result["goals"]``): captured Balanced >= 6,000 tok/s and CAN >= 8,000, captured
CAN/Balanced >= 1.35, eager CAN/Balanced >= 1.30 (medians over the repeats). ``--fused`` and ``--compiled``
time the same two modes again with the fused select step or with the encoder, decoder layers and output compiled by
``torch.compile`` (Inductor: the element-wise work of a step fused), and check their tokens against eager;
``--only`` times only those variants (a separate call with its own time limit).

    python scripts/gpu_bench.py --sources test2016 --sentences 50 --json speed.json   # repeats: SpeedPlan's
    python scripts/gpu_bench.py --dry-run --json /tmp/q.json   # CPU, tiny presets: a check of the script

``--dry-run`` (or ``--quick``) uses the tiny presets on a CPU, a few sentences and short outputs; the
"captured" rows then run the same static-buffer path without graphs (only the plumbing is exercised).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import traceback
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from canlib.catalogue import PAPER_SYSTEMS  # noqa: E402
from canlib.decoding.decoder import CompiledDecoder  # noqa: E402
from canlib.decoding.runners import GraphedDecoder, StepGraphs  # noqa: E402
from canlib.decoding.search import SearchSettings, beam_search, make_batch  # noqa: E402
from canlib.io import origin  # noqa: E402
from repro.bench.settings import BenchSettings, SpeedPlan  # noqa: E402
from repro.bench.speed import canlib_system, source_sentences, system_model, time_systems  # noqa: E402
from repro.bench.stored import gpu_provenance, speed_result  # noqa: E402
from repro.results.files import save_result  # noqa: E402

GOALS = {
    "eager can/balanced": 1.30,
    "captured balanced tok/s": 6000.0,
    "captured can tok/s": 8000.0,
    "captured can/balanced": 1.35,
}  # the decoding speed this check aims at (result["goals"])
TEST2016 = Path("multi30k-en-de") / "test_2016_flickr.en"


def test2016_sources(count: int, vocab_size: int, data_dir: Path) -> list[list[int]]:
    """The first ``count`` test2016 English sources at their real lengths: one id per word or punctuation
    mark, from a checksum of it (random weights: only the lengths matter)."""
    path = data_dir / TEST2016
    if not path.is_file():
        raise SystemExit(f"gpu_bench: {path}: no such file (set CANLIB_DATA_DIR to the folder holding multi30k-en-de)")
    lines = path.read_text(encoding="utf-8").splitlines()[:count]
    if len(lines) < count:
        raise SystemExit(f"gpu_bench: {path} has {len(lines)} lines, fewer than --sentences {count}")
    return [[4 + zlib.crc32(w.encode()) % (vocab_size - 4) for w in re.findall(r"\w+|[^\w\s]", line)] for line in lines]


def spread(values: list[float]) -> dict[str, float]:
    """Median, quartiles and range of per-repeat values."""
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {
        "median": statistics.median(values),
        "q1": q[0],
        "q3": q[2],
        "min": min(values),
        "max": max(values),
        "repeats": len(values),
    }


def tokens_match(
    model, sources: list[list[int]], beam: int, forced: int, variants: list[tuple[dict, dict]], free: bool
) -> bool:
    """Same tokens from every variant (settings fields, and the ``decoder`` or ``graphs`` of ``beam_search``) as from
    the eager search, on every source, forced-length (and free, with ``free``) decoding; each variant twice, so that
    the second call replays the graphs the first captured."""
    for ids in sources:
        src = make_batch([ids], model.cfg.pad_id, model.cfg.eos_id, model.embed.weight.device)
        for options in (dict(forced_length=forced), dict()) if free else (dict(forced_length=forced),):
            want = beam_search(model, src, SearchSettings(beam=beam, **options)).tokens
            for _ in range(2):
                for fields, runner in variants:
                    if beam_search(model, src, SearchSettings(beam=beam, **options, **fields), **runner).tokens != want:
                        return False
    return True


def checked_variants(model, kind: str, capture: bool, backend: str | None) -> list[tuple[dict, dict]]:
    """What each token check runs against eager, as (settings fields, runner): "captured" (whole steps as graphs; the
    decoder alone as graphs), "fused" (the fused select step, eager and in whole-step graphs), "compiled" (the
    compiled model, likewise)."""
    if kind == "captured":
        return [
            ({}, dict(graphs=StepGraphs(model, capture=capture))),
            ({}, dict(decoder=GraphedDecoder(model, capture=capture))),
        ]
    if kind == "fused":
        return [(dict(fused=True), {}), (dict(fused=True), dict(graphs=StepGraphs(model, capture=capture)))]
    return [
        ({}, dict(decoder=CompiledDecoder(model, backend=backend))),
        ({}, dict(graphs=StepGraphs(model, capture=capture, compiled=backend))),
    ]


def arguments() -> argparse.ArgumentParser:
    """The command line: what to time (systems, variants, sources) and how (repeats, sentences, length)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default="speed.json", help="the stored result (book/results/gpu/<run>/speed.json)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--quick",
        "--dry-run",
        dest="quick",
        action="store_true",
        help="CPU, tiny presets, few short sentences: a check of the script",
    )
    parser.add_argument("--sources", choices=("test2016", "random"), default="test2016")
    parser.add_argument(
        "--fused",
        action="store_true",
        help="also time both modes with the fused select step (two Triton kernels): eager_fused, captured_fused",
    )
    parser.add_argument(
        "--compiled",
        nargs="?",
        const="inductor",
        default=None,
        metavar="BACKEND",
        help="also time both modes with the encoder, decoder layers and output compiled by torch.compile "
        "(backend, default inductor): eager_compiled, captured_compiled",
    )
    parser.add_argument(
        "--only", action="store_true", help="time only the --fused/--compiled variants (and compare only their tokens)"
    )
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("CANLIB_DATA_DIR", "../shared/data"),
        help="folder holding multi30k-en-de/ (default: $CANLIB_DATA_DIR)",
    )
    parser.add_argument("--systems", default=",".join(PAPER_SYSTEMS), help="systems to time")
    parser.add_argument(
        "--check-systems", help="systems whose captured and eager tokens are compared (default: --systems)"
    )
    plan = SpeedPlan()  # the speed standard's repeats, forced length and shortest repeat
    parser.add_argument("--repeats", type=int, default=plan.repeats)
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--forced-length", type=int, default=plan.forced_length)
    parser.add_argument(
        "--min-seconds",
        type=float,
        default=plan.min_seconds,
        help="each repeat translates the sources as many times over as makes the fastest system's repeat last at "
        f"least this long (default {plan.min_seconds:g}; 0: one pass)",
    )
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (0: 1 with --quick, else torch's default)"
    )
    return parser


def time_modes(
    args: argparse.Namespace, models: dict, sources: list, names: list[str], modes: tuple[str, ...], device
) -> tuple[dict, dict, dict, dict]:
    """(results per system, ratio spreads per mode, passes per mode, errors per mode): each mode timed on every
    system, interleaved; a mode that fails leaves the others' numbers and says what failed."""
    ratios: dict[str, dict] = {}
    results: dict = {name: {} for name in names}
    errors: dict[str, str] = {}
    passes: dict[str, int] = {}
    for mode in modes:
        try:
            systems = [
                canlib_system(
                    name,
                    models[name],
                    1,
                    1.0,
                    graphs=mode.startswith("captured"),
                    max_shapes=len(sources),
                    fused=mode.endswith("fused"),
                    compiled=args.compiled if mode.endswith("compiled") else None,
                )
                for name in names
            ]
            rows = time_systems(
                systems,
                sources,
                args.beam,
                args.forced_length,
                args.repeats,
                1,
                device,
                mode,
                min_seconds=args.min_seconds,
            )
            passes[mode] = next(iter(rows.values()))["passes"]
            if "balanced" in rows:  # per repeat: the same tokens in both, so the ratio of the times
                ratios[mode] = {
                    name: spread([b / x for b, x in zip(rows["balanced"]["seconds"], row["seconds"])])
                    for name, row in rows.items()
                    if name != "balanced"
                }
            for name, row in rows.items():
                results[name][f"{mode}_tok_per_s"] = row["tok_per_s"]
                results[name][f"{mode}_seconds"] = row["seconds"]
            for name in names:
                results[name][f"{mode}_ratio_to_balanced"] = (
                    rows[name]["tok_per_s"] / rows["balanced"]["tok_per_s"] if "balanced" in rows else None
                )
        except Exception as exc:  # keep the other mode's numbers; say what failed
            errors[mode] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
    return results, ratios, passes, errors


def check_tokens(
    args: argparse.Namespace, models: dict, sources: list, names: list[str], checked: list[str], device, errors: dict
) -> dict:
    """Whether each variant's tokens match eager's, per kind and system (a failed check is added to ``errors``)."""
    meta: dict = {}
    checks = (
        ([("captured", checked, True)] if not args.only else [])
        + ([("fused", names, False)] if args.fused else [])
        + ([("compiled", names, False)] if args.compiled else [])
    )  # (kind, systems, free-length decoding too)
    for kind, systems, free in checks:
        try:
            meta[f"{kind}_matches_eager"] = {
                name: tokens_match(
                    models[name],
                    sources[:2],
                    args.beam,
                    args.forced_length,
                    checked_variants(models[name], kind, device.type == "cuda", args.compiled),
                    free,
                )
                for name in systems
            }
        except Exception as exc:
            errors["check" if kind == "captured" else f"{kind}_check"] = f"{type(exc).__name__}: {exc}"
    return meta


def goals(results: dict, ratios: dict, suffixes: list[str], compiled: str | None) -> dict:
    """Each goal of :data:`GOALS` per timed variant: its value, target and whether it is met."""
    bal, can = results.get("balanced", {}), results.get("can", {})
    found: dict = {}
    labels = {"": "", "_fused": " (fused select)", "_compiled": f" (compiled, {compiled})"}
    for suffix in suffixes:
        values = {
            "eager can/balanced": ratios.get(f"eager{suffix}", {}).get("can", {}).get("median"),
            "captured balanced tok/s": bal.get(f"captured{suffix}_tok_per_s"),
            "captured can tok/s": can.get(f"captured{suffix}_tok_per_s"),
            "captured can/balanced": ratios.get(f"captured{suffix}", {}).get("can", {}).get("median"),
        }
        found.update(
            {
                k + labels[suffix]: {
                    "value": values[k],
                    "target": target,
                    "met": values[k] is not None and values[k] >= target,
                }
                for k, target in GOALS.items()
            }
        )
    return found


def report(names: list[str], modes: tuple[str, ...], results: dict, ratios: dict, goals_: dict, errors: dict) -> None:
    """Tokens per second per system and mode, the ratios' spreads, the goals and the errors, printed."""
    for name in names:
        row = results[name]
        print(
            f"{name:<10} "
            + "   ".join(f"{mode} {row.get(f'{mode}_tok_per_s', float('nan')):8.1f} tok/s" for mode in modes)
        )
    for mode, by_system in ratios.items():
        for name, r in by_system.items():
            print(
                f"{mode} {name}/balanced over {r['repeats']} repeats: median {r['median']:.3f} "
                f"(quartiles {r['q1']:.3f}-{r['q3']:.3f}, range {r['min']:.3f}-{r['max']:.3f})"
            )
    for k, goal in goals_.items():
        print(f"goal {k} >= {goal['target']}: {goal['value']} ({'met' if goal['met'] else 'NOT met'})")
    if errors:
        print("errors:", json.dumps(errors, indent=1), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    if args.threads or args.quick:
        torch.set_num_threads(args.threads or 1)
    device = torch.device("cpu" if args.quick else args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_bench: no CUDA device; use --dry-run for the smoke test")
    if args.quick:
        args.repeats, args.sentences, args.forced_length = (
            min(args.repeats, 3),
            min(args.sentences, 3),
            min(args.forced_length, 6),
        )
    size, vocab_size = ("tiny", 1000) if args.quick else ("full", 32000)
    half = device.type == "cuda"
    names = args.systems.split(",")
    torch.set_grad_enabled(False)
    started = time.time()
    settings = BenchSettings(scale=size, vocab_size=vocab_size, seed=0)
    checked = args.check_systems.split(",") if args.check_systems else names
    models = {name: system_model(name, settings, device, half) for name in dict.fromkeys(names + checked)}
    if args.sources == "test2016":
        sources = test2016_sources(args.sentences, vocab_size, Path(args.data_dir))
    else:
        sources = source_sentences(args.sentences, vocab_size, seed=0)
    suffixes = (
        ([] if args.only else [""]) + (["_fused"] if args.fused else []) + (["_compiled"] if args.compiled else [])
    )
    if not suffixes:
        raise SystemExit("gpu_bench: --only times the --fused or --compiled variants: name one")
    modes = tuple(f"{mode}{suffix}" for suffix in suffixes for mode in ("eager", "captured"))
    results, ratios, passes, errors = time_modes(args, models, sources, names, modes, device)
    meta = check_tokens(args, models, sources, names, checked, device, errors)
    meta["goals"] = goals(results, ratios, suffixes, args.compiled)
    meta["ratios"] = ratios  # {mode: {system: spread of its per-repeat ratio to Balanced}}
    meta["sources"] = {
        "kind": args.sources,
        "lengths": [len(s) for s in sources],
        "file": str(TEST2016) if args.sources == "test2016" else None,
    }
    meta.update(
        {
            "dtype": "float16" if half else "float32",
            "settings": {
                "beam": args.beam,
                "batch": 1,
                "forced_length": args.forced_length,
                "sentences": len(sources),
                "repeats": args.repeats,
                "min_seconds": args.min_seconds,
                "passes": passes,  # {mode: times each repeat translates the sources}
                "scale": size,
                "vocab_size": vocab_size,
                "sources": args.sources,
                "interleaved": True,
                "compiled": args.compiled,
            },
            "errors": errors,
        }
    )
    prov = gpu_provenance(
        origin(device),
        scale=size,
        command=" ".join(["python", *sys.argv]),
        settings=meta["settings"],
        threads=torch.get_num_threads(),
        wall_seconds=round(time.time() - started, 1),
    )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    save_result(args.json, speed_result(results, meta), prov)
    report(names, modes, results, ratios, meta["goals"], errors)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
