"""Stacked seeds against separate processes, in one run on one device: aggregate model-updates per second of K
separate training processes side by side and of one process training the K seeds stacked
(``canlib.training.stacked``), for K = 1, 4, 8, 16, and the first epoch's seconds per update against the later
ones' (the cost of attention plans built per batch shape). The first row is today's separate run (torch's dropout,
PyTorch's default attention kernels); the others train the converged recipe (counter-hashed dropout, planless
attention kernels), separately and stacked.

    python scripts/bench_stacked.py                    # on the GPU: small-can, bf16, the prepared small corpus
    python scripts/bench_stacked.py --dry-run          # on a CPU: tiny-can, a few updates, the same table in seconds
    python scripts/bench_stacked.py --json OUT.json    # also the numbers, with provenance

A case trains ``--epochs`` epochs of the corpus (the first one cold) and no validation; its updates per second
count model-updates (a stacked update of K seeds is K), over the whole timed run and over the updates after the
first epoch. The separate processes start together at a file barrier. Not a test: the numbers depend on the
machine; the tests check the table's structure (``tests/core/test_bench_stacked.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from canlib.catalogue import scale_spec  # noqa: E402
from canlib.data.batching import PairList, TokenBatchSampler  # noqa: E402
from canlib.data.preparation import prepared  # noqa: E402
from canlib.io import origin  # noqa: E402
from canlib.model.config import preset  # noqa: E402
from canlib.training import TrainConfig, Trainer  # noqa: E402
from canlib.training.stacked import StackedTrainer  # noqa: E402
from canlib.training.trainer import LongWarmupWarning  # noqa: E402

KS = (1, 4, 8, 16)
DRY_KS = (1, 2)  # a dry run's stacks
DRY_PAIRS = 120  # a dry run's training pairs
PADDING_UPDATES = 60  # batches per seed that --padding counts
HEADER = ("case", "K", "model-updates", "seconds", "updates/s", "first epoch s/update", "later s/update")


def setup(dry: bool) -> tuple[Any, Any, TrainConfig]:
    """(model config, training split, TrainConfig) of the benchmark: small-can on the small corpus in bf16 on a GPU,
    tiny-can with a smaller batch on a CPU (a dry run)."""
    scale = scale_spec("tiny" if dry else "small")
    data = prepared(scale.corpus, scale.corpus_scale)
    mc = preset(scale.preset("can"), vocab_size=data.vocab.size)
    split = data.split("train")
    if dry:  # a few updates an epoch
        pairs = [split[i] for i in range(DRY_PAIRS)]
        split = PairList([p[0] for p in pairs], [p[1] for p in pairs])
    device = "cuda" if torch.cuda.is_available() and not dry else "cpu"
    train = {**scale.recipe("converged"), "valid_every": 0, "log_every": 1000, "keep_last": 1, "average_last": 1}
    cfg = TrainConfig(**{**train, "device": device, "precision": "bf16" if device == "cuda" else "fp32"})
    if dry:
        cfg = replace(cfg, max_tokens=256)
    return mc, split, cfg


def epoch_split(log: Path, updates: int) -> tuple[float, float]:
    """(seconds per update of the first epoch, of the later updates) from a run's log.jsonl: the train row that
    closes epoch 1 holds the update time so far (``wall``), the last row the whole run's."""
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    rows = [r for r in rows if r["kind"] == "train"]
    first = next(r for r in rows if r["epoch"] >= 1)
    later = rows[-1]["wall"] - first["wall"]
    return first["wall"] / first["step"], later / max(updates - first["step"], 1)


def train_one(args: argparse.Namespace) -> None:
    """A worker: one separate run (the Trainer), started at the barrier; prints its timing as one JSON line."""
    mc, split, cfg = setup(args.dry_run)
    cfg = replace(cfg, seed=args.seed, max_steps=args.updates, sdpa_backend=args.sdpa)
    if args.sdpa == "default":  # today's separate run: torch's dropout inside the fused attention kernels
        cfg = replace(cfg, dropout_rng="torch")
    trainer = Trainer(mc, cfg, split, None, args.folder)
    while time.time() < args.start_at:
        time.sleep(0.01)
    tic = time.time()
    trainer.fit()
    print(json.dumps({"start": tic, "end": time.time(), "wall": trainer.wall}))


def planned_updates(dry: bool, epochs: int) -> int:
    """``epochs`` epochs of seed 1's batches."""
    _, split, cfg = setup(dry)
    return epochs * len(TokenBatchSampler(split.src_lens, split.tgt_lens, cfg.max_tokens, seed=1))


def separate(k: int, updates: int, dry: bool, sdpa: str, root: Path) -> dict[str, Any]:
    """K separate processes side by side, started together; aggregate model-updates per second."""
    start_at = time.time() + (20 if not dry else 5) + k  # every process built and waiting by then
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", "--seed", str(s + 1), "--updates", str(updates), "--sdpa", sdpa]
            + ["--folder", str(root / f"sep{k}-{sdpa}-{s}"), "--start-at", str(start_at)]
            + (["--dry-run"] if dry else []),
            stdout=subprocess.PIPE,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            text=True,
        )
        for s in range(k)
    ]
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError(f"a separate process of K={k} failed")
    seconds = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    first, later = epoch_split(root / f"sep{k}-{sdpa}-0" / "log.jsonl", updates)
    return row(f"separate ({sdpa})", k, k * updates, seconds, first, later)


def stacked(k: int, updates: int, dry: bool, sdpa: str, root: Path) -> dict[str, Any]:
    """One process training K seeds stacked; aggregate model-updates per second."""
    mc, split, cfg = setup(dry)
    cfgs = [replace(cfg, seed=s + 1, max_steps=updates, sdpa_backend=sdpa) for s in range(k)]
    folders = [root / f"stack{k}-{sdpa}-{s}" for s in range(k)]
    trainer = StackedTrainer(mc, cfgs, split, None, folders)
    tic = time.time()
    trainer.fit()
    seconds = time.time() - tic
    first, later = epoch_split(folders[0] / "log.jsonl", updates)
    return row(f"stacked ({sdpa})", k, k * updates, seconds, first, later)


def row(case: str, k: int, updates: int, seconds: float, first: float, later: float) -> dict[str, Any]:
    return {
        "case": case,
        "K": k,
        "model-updates": updates,
        "seconds": round(seconds, 2),
        "updates/s": round(updates / seconds, 2),
        "first epoch s/update": round(first, 4),
        "later s/update": round(later, 4),
    }


def padded_share(src_lens: Any, tgt_lens: Any, max_tokens: int, k: int, updates: int) -> float:
    """Token slots one stacked update of seeds 1..``k`` computes over those ``k`` separate updates compute, over the
    first ``updates`` batches: the stack pads every seed's batch to the largest rows and lengths of the step
    (:func:`canlib.training.stacked.padded_stack`), a separate run pads only within its own batch. Counted on a CPU
    from the batch samplers alone; a stacked step's arithmetic grows by this factor."""
    samplers = [iter(TokenBatchSampler(src_lens, tgt_lens, max_tokens, seed=s + 1)) for s in range(k)]
    stacked_slots = separate_slots = 0
    for _ in range(updates):
        batches = [next(s) for s in samplers]
        shapes = [(len(b), max(src_lens[i] for i in b), max(tgt_lens[i] for i in b)) for b in batches]
        rows, src, tgt = (max(x[j] for x in shapes) for j in range(3))
        stacked_slots += k * rows * (src + tgt)
        separate_slots += sum(r * (s + t) for r, s, t in shapes)
    return stacked_slots / separate_slots


def table(rows: list[dict[str, Any]]) -> str:
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in HEADER]
    lines = [" | ".join(h.ljust(w) for h, w in zip(HEADER, widths))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(str(r[h]).ljust(w) for h, w in zip(HEADER, widths)) for r in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny-can on the CPU, a few updates: the script's check")
    parser.add_argument("--ks", default=",".join(map(str, KS)), help="stack sizes, comma-separated (default 1,4,8,16)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per case, the first one cold (default 2)")
    parser.add_argument("--json", type=Path, help="also write the rows and their provenance here")
    parser.add_argument(
        "--padding",
        action="store_true",
        help="only print, for each K, the token slots a stacked update computes over K separate updates' (CPU)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--updates", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--sdpa", default="default", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.simplefilter("ignore", LongWarmupWarning)  # a benchmark's runs are short on purpose
    if args.worker:
        train_one(args)
        return 0
    ks = [int(k) for k in args.ks.split(",")]
    if args.dry_run:
        torch.set_num_threads(1)
        ks = list(DRY_KS)
    if args.padding:
        _, split, cfg = setup(args.dry_run)
        for k in ks:
            share = padded_share(split.src_lens, split.tgt_lens, cfg.max_tokens, k, PADDING_UPDATES)
            print(f"K={k}: a stacked update computes {share:.2f}x the token slots of {k} separate updates")
        return 0
    updates = planned_updates(args.dry_run, args.epochs)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows.append(separate(1, updates, args.dry_run, "default", root))  # today's run: cuDNN plans per shape
        for k in ks:
            rows.append(separate(k, updates, args.dry_run, "planless", root))
            rows.append(stacked(k, updates, args.dry_run, "planless", root))
    print(table(rows))
    device = "cuda" if torch.cuda.is_available() and not args.dry_run else "cpu"
    print(f"device: {origin(torch.device(device))['device']}; {updates} updates per seed ({args.epochs} epochs)")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "provenance": origin(torch.device(device))}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
