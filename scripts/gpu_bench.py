"""The GPU speed check, as one command (under 8 minutes on one H100, no network).

Times the paper's Table 2 systems (baseline, balanced, san, aan, can) with random
weights at the d=512 presets, in float16, beam 4, batch 1, forced output length 30,
once eagerly and once with whole search steps replayed from CUDA graphs; checks that the
captured path gives the same outputs as the eager one; writes one JSON file with the
tokens/s, ratios to Balanced, the goals (eager CAN/Balanced >= 1.3, captured Balanced
>= 5000 tok/s and captured CAN/Balanced >= 1.25, issue 23) and metadata, as ``{"systems": {name: figures}, "meta": {...}}`` like the bench.

    python scripts/gpu_bench.py --json gpu_bench.json
    python scripts/gpu_bench.py --quick --device cpu --json /tmp/q.json   # tiny smoke test

``--quick`` uses the tiny presets and a few short sentences; on a CPU the "captured"
rows run the same static-buffer path without graphs (only the plumbing is exercised).
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from canlib.io import device_name, git_commit  # noqa: E402
from canlib.bench.settings import BenchSettings  # noqa: E402
from canlib.bench.speed import canlib_system, source_sentences, system_model, time_systems  # noqa: E402
from canlib.model.config import PAPER_SYSTEMS  # noqa: E402
from canlib.decoding.runners import GraphedDecoder, StepGraphs  # noqa: E402
from canlib.decoding.search import beam_search, make_batch  # noqa: E402

GOALS = {"eager can/balanced": 1.3, "captured balanced tok/s": 5000.0, "captured can/balanced": 1.25}  # issue 23


def captured_matches_eager(model, sources: list[list[int]], beam: int, forced: int) -> bool:
    """Same tokens from both captured paths (whole steps as graphs; the decoder alone as graphs)
    as from the eager one, on every source, free and forced-length decoding."""
    device = model.embed.weight.device
    capture = device.type == "cuda"
    steps, decoder = StepGraphs(model, capture=capture), GraphedDecoder(model, capture=capture)
    for ids in sources:
        src = make_batch([ids], model.cfg.pad_id, model.cfg.eos_id, device)
        for options in (dict(forced_length=forced), dict()):
            eager = beam_search(model, src, beam=beam, **options)
            for _ in range(2):  # the second call replays graphs captured by the first
                if beam_search(model, src, beam=beam, graphs=steps, **options).tokens != eager.tokens:
                    return False
                if beam_search(model, src, beam=beam, decoder=decoder, **options).tokens != eager.tokens:
                    return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default="gpu_bench.json")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny presets, few short sentences (smoke test)")
    parser.add_argument("--systems", default=",".join(PAPER_SYSTEMS), help="systems to time")
    parser.add_argument("--check-systems", help="systems whose captured and eager tokens are compared (default: --systems)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--forced-length", type=int, default=30)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: 1 with --quick, else torch's default)")
    args = parser.parse_args(argv)
    if args.threads or args.quick:
        torch.set_num_threads(args.threads or 1)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_bench: no CUDA device; use --device cpu --quick for the smoke test")
    if args.quick:
        args.repeats, args.sentences, args.forced_length = min(args.repeats, 2), min(args.sentences, 2), min(args.forced_length, 6)
    size, vocab_size = ("tiny", 1000) if args.quick else ("full", 32000)
    half = device.type == "cuda"
    names = args.systems.split(",")
    torch.set_grad_enabled(False)
    started = time.time()
    settings = BenchSettings(scale=size, vocab_size=vocab_size, seed=0)
    checked = args.check_systems.split(",") if args.check_systems else names
    models = {name: system_model(name, settings, device, half) for name in dict.fromkeys(names + checked)}
    sources = source_sentences(args.sentences, vocab_size, seed=0)
    results: dict = {name: {} for name in names}
    errors: dict[str, str] = {}
    for mode in ("eager", "captured"):
        try:
            systems = [canlib_system(name, models[name], 1, 1.0, graphs=(mode == "captured")) for name in names]
            rows = time_systems(systems, sources, args.beam, args.forced_length, args.repeats, 1, device, mode)
            for name, row in rows.items():
                results[name][f"{mode}_tok_per_s"] = row["tok_per_s"]
                results[name][f"{mode}_seconds"] = row["seconds"]
            for name in names:
                results[name][f"{mode}_ratio_to_balanced"] = rows[name]["tok_per_s"] / rows["balanced"]["tok_per_s"] if "balanced" in rows else None
        except Exception as exc:  # keep the other mode's numbers; say what failed
            errors[mode] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
    meta: dict = {}
    try:
        meta["captured_matches_eager"] = {
            name: captured_matches_eager(models[name], sources[:2], args.beam, args.forced_length) for name in checked
        }
    except Exception as exc:
        errors["check"] = f"{type(exc).__name__}: {exc}"
    bal, can = results.get("balanced", {}), results.get("can", {})
    values = {
        "eager can/balanced": can.get("eager_tok_per_s", 0) / bal["eager_tok_per_s"] if bal.get("eager_tok_per_s") else None,
        "captured balanced tok/s": bal.get("captured_tok_per_s"),
        "captured can/balanced": (can.get("captured_tok_per_s", 0) / bal["captured_tok_per_s"]
                                  if bal.get("captured_tok_per_s") else None),
    }
    meta["goals"] = {
        k: {"value": values[k], "target": target, "met": values[k] is not None and values[k] >= target}
        for k, target in GOALS.items()
    }
    meta.update({
        "device": device_name(device), "dtype": "float16" if half else "float32", "torch": torch.__version__,
        "threads": torch.get_num_threads(), "git_commit": git_commit(), "command": " ".join(sys.argv),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": {"beam": args.beam, "batch": 1, "forced_length": args.forced_length, "sentences": args.sentences,
                     "repeats": args.repeats, "scale": size, "vocab_size": vocab_size},
        "errors": errors, "wall_seconds": round(time.time() - started, 1),
    })
    Path(args.json).write_text(json.dumps({"systems": results, "meta": meta}, indent=1) + "\n")
    for name in names:
        row = results[name]
        print(f"{name:<10} eager {row.get('eager_tok_per_s', float('nan')):8.1f} tok/s   "
              f"captured {row.get('captured_tok_per_s', float('nan')):8.1f} tok/s")
    for k, goal in meta["goals"].items():
        print(f"goal {k} >= {goal['target']}: {goal['value']} ({'met' if goal['met'] else 'NOT met'})")
    if errors:
        print("errors:", json.dumps(errors, indent=1), file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
