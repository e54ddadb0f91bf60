"""Training throughput on one GPU, part by part; ``scripts/gpu_throughput.sh`` runs the parts in order
of value, each in its own process under its own timeout, and writes one JSON per part as it goes.

    python scripts/gpu_throughput.py t1 --preset small-can --variant as-is --out DIR    # one T1 case
    python scripts/gpu_throughput.py t2 --processes 4 --mps on --out DIR               # T2: concurrent runs
    python scripts/gpu_throughput.py t3 --out DIR                                       # T3: determinism, resume
    python scripts/gpu_throughput.py t4 --out DIR                                       # T4: d=512 at 32,768 tokens
    python scripts/gpu_throughput.py t5 --out DIR                                       # T5: evaluation batches
    python scripts/gpu_throughput.py gather --out DIR                                   # -> training_throughput.json
    (every part takes --dry-run: a CPU, tiny presets and a few updates, a check of the script)

Parts (real Multi30k En-De lengths: the prepared ``small`` corpus, or ``tiny`` in a dry run; bf16 on the GPU):

- T1, one process per (preset, variant): the first epoch's seconds (a cold process: cuDNN builds its attention
  plans on the way), 150 warm updates of the next epoch timed with CUDA events, then 5 updates under
  torch.profiler: GPU kernel milliseconds and kernel launches per update (``DIR/t1_<preset>_<variant>.txt``);
- T2, N processes at once, each one epoch + 200 updates of small-can (started together at a file barrier):
  whole-run and steady updates/s of all of them together, and each one's weights hash (with deterministic
  kernels, the same with and without MPS);
- T3, 30 updates twice (the weights' hash) and a run interrupted at update 15 and resumed, against a straight
  one, as-is and with deterministic kernels (``--variant`` one variant, e.g. compiled);
- T4, d=512 Baseline and CAN at 32,768 tokens, fixed shape (every sentence 31 tokens) and real lengths: target
  tokens/s and MFU (``scripts/gpu_smoke_train.py``'s FLOP count and peak table), as-is and with the options;
- T5, one T2 model's evaluation on the corpus's four sets: each set alone at 128 sentences a batch (today) and
  the four in one length-sorted pass at 1,024 (``translate_sets``): seconds, and whether the tokens are equal.

VARIANTS below are the TrainConfig options each case adds to the scale's budget.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

from gpu_profile import profiled  # noqa: E402
from gpu_smoke_train import device_peak_flops, measure  # noqa: E402

from canlib.catalogue import scale_spec  # noqa: E402
from canlib.data import load_prepared, prepare  # noqa: E402
from canlib.data.batching import PairList, collate  # noqa: E402
from canlib.io import origin  # noqa: E402
from canlib.model.checkpoint import save_model  # noqa: E402
from canlib.model.config import preset  # noqa: E402
from canlib.training import TrainConfig, Trainer  # noqa: E402

# TrainConfig options per variant ("as-is": today's defaults)
VARIANTS: dict[str, dict[str, Any]] = {
    "as-is": {},
    "bucket8": {"pad_multiple": 8},
    "efficient": {"sdpa_backend": "efficient"},
    "deterministic": {"deterministic": True},
    "online-loss": {"loss_vocab_block": 2048},
    "compile-bucket8": {"compile": True, "pad_multiple": 8},
    "fast": {"sdpa_backend": "efficient", "deterministic": True},
    "best": {"compile": True, "pad_multiple": 8, "sdpa_backend": "efficient", "loss_vocab_block": 2048},
    "best-deterministic": {
        "compile": True,
        "pad_multiple": 8,
        "sdpa_backend": "efficient",
        "loss_vocab_block": 2048,
        "deterministic": True,
    },
}
# the small scale's budget (canlib.catalogue), what every small run trains with
SMALL = {k: scale_spec("small").train[k] for k in ("lr", "warmup", "max_tokens", "label_smoothing")}
RUNS = Path(tempfile.gettempdir()) / "canlib-throughput-runs"  # T2's models, which T5 evaluates


def settings(dry_run: bool) -> dict[str, Any]:
    """Device, corpus scale, preset scale and sizes: the GPU's, or a CPU check's."""
    if dry_run:
        return dict(
            device="cpu",
            precision="fp32",
            scale="tiny",
            prefix="tiny-",
            max_tokens=1024,
            epoch_cap=3,
            warm=3,
            profile=1,
            after=3,
            t3_steps=4,
            t3_variants=("deterministic",),
            big_tokens=1024,
            big_steps=3,
            big_skip=1,
            big_systems=("can",),
            big_baseline=False,
            eval_sentences=12,
        )
    return dict(
        device="cuda",
        precision="bf16",
        scale="small",
        prefix="small-",
        max_tokens=8192,
        epoch_cap=0,
        warm=150,
        profile=5,
        after=200,
        t3_steps=30,
        t3_variants=("as-is", "deterministic", "fast"),
        big_tokens=32768,
        big_steps=30,
        big_skip=10,
        big_systems=("baseline", "can"),
        big_baseline=True,
        eval_sentences=0,
    )


def corpus(scale: str):
    """The prepared Multi30k En-De corpus of ``scale`` (prepared on first use from CANLIB_DATA_DIR)."""
    return load_prepared(prepare("multi30k-en-de", scale, progress=False))


def options(cfg: TrainConfig, variant: str) -> dict[str, Any]:
    """The options a case ran with (a dry run's stand-ins included)."""
    return {k: getattr(cfg, k) for k in VARIANTS[variant]}


def train_config(s: dict[str, Any], variant: str, **extra: Any) -> TrainConfig:
    fields = {
        **SMALL,
        "max_tokens": s["max_tokens"],
        "device": s["device"],
        "precision": s["precision"],
        "max_steps": 10**6,
        "log_every": 10**6,
        "keep_last": 1,
        "average_last": 1,
        "progress": False,
        **VARIANTS[variant],
        **extra,
    }
    if s["device"] == "cpu" and fields.get("sdpa_backend") in ("efficient", "cudnn"):
        fields["sdpa_backend"] = "math"  # a dry run: the GPU-only kernels' stand-in on a CPU
    return TrainConfig(**fields)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def weights_hash(model: torch.nn.Module) -> str:
    state = model.state_dict()
    return hashlib.sha256(
        b"".join(state[k].detach().float().cpu().numpy().tobytes() for k in sorted(state))
    ).hexdigest()[:16]


def dry_compile() -> None:
    """In a dry run torch.compile hands the function back: compiling on a CPU takes minutes (the compiled
    path's numbers are tested in tests/core/test_training_options.py)."""
    torch.compile = lambda fn=None, **kw: fn  # type: ignore[assignment]


def run_epoch(trainer: Trainer, cap: int) -> int:
    """The trainer's current epoch (at most ``cap`` updates when cap > 0); the number of updates."""
    done = 0
    for group in trainer._groups():
        trainer._update(group)
        done += 1
        if cap and done >= cap:
            break
    trainer.epoch += 1
    return done


def updates_ahead(trainer: Trainer, count: int) -> list[list[list[int]]]:
    """The next ``count`` updates' micro-batches, over as many epochs as they take (a small epoch at 8,192 tokens
    holds fewer updates than the warm-up and profile need)."""
    groups: list[list[list[int]]] = []
    while len(groups) < count:
        drawn = list(islice(trainer._groups(), count - len(groups)))
        if not drawn:
            raise ValueError("the training split yields no batch")
        groups += drawn
        if len(groups) < count:
            trainer.epoch += 1
    return groups


def t1(args: argparse.Namespace, s: dict[str, Any], out: Path) -> dict[str, Any]:
    """One preset and variant in a fresh process: first epoch, warm updates, a profile."""
    data = corpus(s["scale"])
    name = f"{s['prefix']}{args.preset}"
    cfg = train_config(s, args.variant)
    with tempfile.TemporaryDirectory() as run:
        trainer = Trainer(preset(name, vocab_size=data.vocab.size), cfg, data.split("train"), None, run)
        device, split, m = trainer.device, trainer.train_split, trainer.model_cfg
        shapes = {
            tuple(
                collate(split, b, m.pad_id, m.bos_id, m.eos_id, cfg.pad_multiple)[k].size(i)
                for k, i in (("src", 0), ("src", 1), ("tgt_in", 1))
            )
            for b in trainer.sampler
        }
        trainer.sampler.set_epoch(0)
        sync(device)
        tic = time.perf_counter()
        first = run_epoch(trainer, s["epoch_cap"])
        sync(device)
        first_s = time.perf_counter() - tic
        groups = updates_ahead(trainer, s["warm"] + s["profile"])
        warm, profile = groups[: s["warm"]], groups[s["warm"] :]
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for group in warm:
                trainer._update(group)
            end.record()
            sync(device)
            warm_ms = start.elapsed_time(end) / len(warm)
        else:
            tic = time.perf_counter()
            for group in warm:
                trainer._update(group)
            warm_ms = (time.perf_counter() - tic) * 1e3 / len(warm)
        label = f"t1_{args.preset}_{args.variant}"
        summary = profiled(lambda: [trainer._update(g) for g in profile], device, len(profile), out, label, warm_ms)
        memory = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    return {
        "part": "T1",
        "preset": name,
        "variant": args.variant,
        "options": options(cfg, args.variant),
        "processes": 1,
        "mps": False,
        "compile": bool(VARIANTS[args.variant].get("compile")),
        "first_epoch_updates": first,
        "first_epoch_s": round(first_s, 3),
        "first_epoch_ms_per_update": round(first_s * 1e3 / first, 3),
        "warm_ms_per_update": round(warm_ms, 3),
        "updates_per_s": round(1e3 / warm_ms, 2),
        "first_over_warm": round(first_s * 1e3 / first / warm_ms, 3),
        "gpu_kernel_ms": summary["gpu_kernel_ms"],
        "kernel_launches": summary["kernel_launches"],
        "cpu_ms": summary["cpu_ms"],
        "host_syncs": summary["host_syncs"],
        "top_kernels": summary["top_kernels"][:8],
        "distinct_batch_shapes": len(shapes),
        "peak_memory_gib": round(memory, 3) if memory is not None else None,
    }


def worker(args: argparse.Namespace, s: dict[str, Any], out: Path) -> dict[str, Any]:
    """One of T2's processes: wait at the barrier, train one epoch + ``after`` updates, report the clock."""
    data = corpus(s["scale"])
    name = f"{s['prefix']}can"
    cfg = train_config(s, args.variant, seed=args.seed)
    run = Path(args.run_dir)
    trainer = Trainer(preset(name, vocab_size=data.vocab.size), cfg, data.split("train"), None, run, overwrite=True)
    device = trainer.device
    torch.zeros(1, device=device).sum().item()  # CUDA context up before the barrier
    barrier = Path(args.barrier)
    (barrier / f"ready-{args.seed}").touch()
    while len(list(barrier.glob("ready-*"))) < args.processes:
        time.sleep(0.01)
    start = time.time()
    first = run_epoch(trainer, s["epoch_cap"])
    sync(device)
    epoch_end = time.time()
    after = len([trainer._update(g) for g in islice(trainer._groups(), s["after"])])
    sync(device)
    end = time.time()
    save_model(trainer.model, run / "model.pt", vocab_id=data.vocab.id)
    return {
        "seed": args.seed,
        "start": start,
        "epoch_end": epoch_end,
        "end": end,
        "first_epoch_updates": first,
        "after_updates": after,
        "weights": weights_hash(trainer.model),
    }


def t2(args: argparse.Namespace, s: dict[str, Any], out: Path) -> dict[str, Any]:
    """N workers at once; aggregate updates/s over the whole runs and over their steady parts."""
    n = args.processes
    tag = f"t2_{n}_{'mps' if args.mps == 'on' else 'nomps'}"
    with tempfile.TemporaryDirectory() as barrier:
        procs, files = [], []
        for seed in range(1, n + 1):
            files.append(out / f"{tag}_worker{seed}.json")
            cmd = [
                sys.executable,
                __file__,
                "worker",
                "--seed",
                str(seed),
                "--processes",
                str(n),
                "--barrier",
                barrier,
                "--run-dir",
                str(RUNS / f"{tag}_{seed}"),
                "--variant",
                args.variant,
                "--out",
                str(files[-1]),
            ] + (["--dry-run"] if args.dry_run else [])
            procs.append(subprocess.Popen(cmd))
        codes = [p.wait() for p in procs]
    if any(codes):
        raise RuntimeError(f"worker exit codes {codes}")
    rows = [json.loads(f.read_text()) for f in files]
    first = sum(r["first_epoch_updates"] for r in rows)
    after = sum(r["after_updates"] for r in rows)
    whole = max(r["end"] for r in rows) - min(r["start"] for r in rows)
    return {
        "part": "T2",
        "preset": f"{s['prefix']}can",
        "variant": args.variant,
        "options": options(train_config(s, args.variant), args.variant),
        "processes": n,
        "mps": args.mps == "on",
        "compile": bool(VARIANTS[args.variant].get("compile")),
        "updates_per_s": round((first + after) / whole, 2),
        "steady_updates_per_s": round(sum(r["after_updates"] / (r["end"] - r["epoch_end"]) for r in rows), 2),
        "whole_run_s": round(whole, 3),
        "first_epoch_s": round(float(np.mean([r["epoch_end"] - r["start"] for r in rows])), 3),
        "updates_per_process": first // n + after // n,
        "weights": [r["weights"] for r in rows],
    }


def t3(args: argparse.Namespace, s: dict[str, Any], out: Path) -> dict[str, Any]:
    """Two straight runs and one interrupted half-way and resumed, per variant: equal weights or not."""
    data = corpus(s["scale"])
    name, steps = f"{s['prefix']}can", s["t3_steps"]
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before the first product: every variant alike
    cases = []
    for variant in (args.variant,) if args.chosen else s["t3_variants"]:
        hashes = {}
        with tempfile.TemporaryDirectory() as tmp:
            for label, stops in (("straight_1", [steps]), ("straight_2", [steps]), ("resumed", [steps // 2, steps])):
                for i, stop in enumerate(stops):
                    cfg = train_config(s, variant, max_steps=stop, log_every=10)
                    trainer = Trainer(
                        preset(name, vocab_size=data.vocab.size),
                        cfg,
                        data.split("train"),
                        None,
                        Path(tmp) / label,
                        resume=i > 0,
                    )
                    trainer.fit()
                hashes[label] = weights_hash(trainer.model)
        cases.append(
            {
                "part": "T3",
                "preset": name,
                "variant": variant,
                "options": options(cfg, variant),
                "updates": steps,
                "resume_at": steps // 2,
                "processes": 1,
                "mps": False,
                "compile": False,
                "hashes": hashes,
                "same_twice": hashes["straight_1"] == hashes["straight_2"],
                "resume_exact": hashes["straight_1"] == hashes["resumed"],
            }
        )
    return {"part": "T3", "cases": cases}


def fixed_split(pairs: int, vocab: int, length: int) -> PairList:
    """Every source and target ``length`` tokens: one batch shape for a whole epoch."""
    rng = np.random.default_rng(0)
    return PairList(
        [rng.integers(4, vocab, length) for _ in range(pairs)], [rng.integers(4, vocab, length) for _ in range(pairs)]
    )


def t4(args: argparse.Namespace, s: dict[str, Any], out: Path) -> dict[str, Any]:
    """d=512 Baseline and CAN at 32,768 tokens, fixed shape and real lengths, as-is and with the options."""
    data = corpus(s["scale"])
    prefix = "tiny-" if args.dry_run else ""
    on_cuda = s["device"] == "cuda"
    peak = device_peak_flops(torch.cuda.get_device_name()) if on_cuda else None
    shapes = {
        "fixed": (fixed_split(16 * s["big_tokens"] // 32, 32000 if on_cuda else 500, 31), 32000 if on_cuda else 500),
        "real": (data.split("train"), data.vocab.size),
    }
    cases = []
    for system in s["big_systems"]:
        for shape, (split, vocab) in shapes.items():
            for variant in ("as-is", args.variant) if s["big_baseline"] else (args.variant,):
                cfg = train_config(
                    s, variant, max_tokens=s["big_tokens"], max_steps=s["big_steps"], warmup=4000, valid_every=10**6
                )  # no checkpoint at each (short) epoch's end
                row = measure(preset(f"{prefix}{system}", vocab_size=vocab), cfg, split, s["big_skip"], peak)
                cases.append(
                    {
                        "part": "T4",
                        "preset": f"{prefix}{system}",
                        "shape": shape,
                        "variant": variant,
                        "options": options(cfg, variant),
                        "processes": 1,
                        "mps": False,
                        "compile": bool(VARIANTS[variant].get("compile")),
                        "tokens": s["big_tokens"],
                        "updates_per_s": round(1 / row["seconds_per_update"], 2),
                        **row,
                    }
                )
                print(json.dumps(cases[-1]), flush=True)
    return {"part": "T4", "cases": cases}


def t5(args: argparse.Namespace, s: dict[str, Any], out: Path) -> dict[str, Any]:
    """A T2 model's four sets: today's evaluation batches against one sorted pass in large batches."""
    from canlib import load_model
    from canlib.decoding.translate import translate_lines, translate_sets

    data = corpus(s["scale"])
    found = sorted(RUNS.glob("*/model.pt"))
    if not found:
        raise FileNotFoundError(f"{RUNS}: no T2 model to evaluate (run T2 first)")
    device = torch.device(s["device"])
    model = load_model(found[0], map_location=device).eval()
    sets = {name: list(data.split(name).src_text) for name in ("valid", *data.meta["test_splits"])}
    if s["eval_sentences"]:
        sets = {k: v[: s["eval_sentences"]] for k, v in sets.items()}
    timings, outputs = {}, {}
    for label, batch in (("per_set_128", 128), ("one_pass_1024", 1024)):
        sync(device)
        tic = time.perf_counter()
        with torch.inference_mode():
            if label == "per_set_128":
                outputs[label] = {
                    k: translate_lines(model, data.vocab, v, beam=4, batch_size=batch) for k, v in sets.items()
                }
            else:
                outputs[label] = translate_sets(model, data.vocab, sets, beam=4, batch_size=batch)
        sync(device)
        timings[label] = round(time.perf_counter() - tic, 3)
    return {
        "part": "T5",
        "model": found[0].parent.name,
        "sentences": {k: len(v) for k, v in sets.items()},
        "eval_seconds": timings,
        "tokens_equal": outputs["per_set_128"] == outputs["one_pass_1024"],
        "differing_sentences": sum(
            a != b for k in sets for a, b in zip(outputs["per_set_128"][k], outputs["one_pass_1024"][k])
        ),
    }


def gather(args: argparse.Namespace, s: dict[str, Any], out: Path) -> dict[str, Any]:
    """Every part's JSON into training_throughput.json: provenance, then one row per case."""
    cases, parts = [], {}
    for path in sorted(out.glob("t[1-5]*.json")):
        if "_worker" in path.name:
            continue
        part = json.loads(path.read_text())
        parts[path.stem] = "error" if "error" in part else "ok"
        cases += part.get("cases", [part]) if "error" not in part else []
    mps = (out / "mps.txt").read_text().strip() if (out / "mps.txt").is_file() else None
    alone = {c["processes"]: c["weights"] for c in cases if c["part"] == "T2" and not c["mps"]}
    for case in cases:  # deterministic kernels: each process's weights the same with and without MPS
        if case["part"] == "T2" and case["mps"] and case["processes"] in alone:
            case["same_weights_as_without_mps"] = case["weights"] == alone[case["processes"]]
    report = {
        **origin(s["device"]),
        "dry_run": args.dry_run,
        "command": "bash scripts/gpu_throughput.sh" + (" --dry-run" if args.dry_run else ""),
        "mps_daemon": mps,
        "parts": parts,
        "cases": cases,
    }
    if args.commit:
        report["commit"] = args.commit
    (out / "training_throughput.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


PARTS = {"t1": t1, "worker": worker, "t2": t2, "t3": t3, "t4": t4, "t5": t5, "gather": gather}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("part", choices=sorted(PARTS))
    p.add_argument("--out", required=True, help="the part's JSON file (worker), or the folder of the parts' files")
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny presets and corpus, a few updates")
    p.add_argument("--preset", default="can", help="T1: system (small- or tiny- is prefixed)")
    p.add_argument(
        "--variant", default=None, choices=sorted(VARIANTS), help="T1/T2/T4: the options (T2, T4: default fast)"
    )
    p.add_argument("--processes", type=int, default=4)
    p.add_argument("--mps", choices=("on", "off"), default="off", help="T2: whether the MPS daemon runs (a label)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--barrier", default=None)
    p.add_argument("--run-dir", default=None)
    p.add_argument("--commit", default=None, help="gather: the commit to record (a clone's, when git is not here)")
    args = p.parse_args(argv)
    args.chosen = args.variant is not None
    args.variant = args.variant or ("as-is" if args.part == "t1" else "fast")
    s = settings(args.dry_run)
    if args.dry_run:
        dry_compile()
    elif not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU visible: use --dry-run on a CPU")
    out = Path(args.out)
    folder = out.parent if args.part == "worker" else out
    folder.mkdir(parents=True, exist_ok=True)
    tic = time.perf_counter()
    result = PARTS[args.part](args, s, folder)
    if args.part == "worker":
        out.write_text(json.dumps(result) + "\n")
        return 0
    if args.part != "gather":
        name = {
            "t1": f"t1_{args.preset}_{args.variant}",
            "t2": f"t2_{args.processes}_{args.mps}",
            "t3": f"t3_{args.variant}" if args.chosen else "t3",
        }.get(args.part, args.part)
        result["seconds"] = round(time.perf_counter() - tic, 1)
        (folder / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("top_kernels", "cases")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
