"""Operators, kernel-launching operators and host syncs per training update, counted on a CPU.

A GPU runs each operator of a training update as at least one kernel launch; at the small scale
(d=256, 8,192 tokens) the launches, not the FLOPs, set the pace (a GPU fully busy at a few percent of its
peak FLOP/s). This counts them without a GPU, with ``canlib.decoding.ops.OpCounter``::

    python scripts/cpu_train_ops.py --result book/results/cpu/train_ops.json
    python scripts/cpu_train_ops.py --presets tiny-can --max-tokens 256 --d512-tokens 0   # a quick look

Per preset it builds the ``Trainer`` exactly as ``canlib train`` does (``--device cpu``), runs
``--warmup`` updates (the optimizer creates its state in the first), then counts ONE update, split
into phases: ``batches`` (collating the micro-batches and copying them to the device: host work on
any device, no GPU kernels), ``forward`` (model and loss), ``backward``, ``optimizer`` and ``rest``
(gradient scaling, the loss and token sums the trainer keeps on the device). ``small-*`` presets
train on the prepared Multi30k corpus at ``--max-tokens`` (8,192, the small plan's batch); the
d=512 presets (``--d512``) on synthetic pairs with a 32k vocabulary at ``--d512-tokens`` (fewer
than the GPU's 32,768, to stay CPU-cheap: only the loss's chunks, one per 4,096 tokens, depend
on the batch size, and the counts say how many there were).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

from canlib.decoding.ops import OpCounter  # noqa: E402
from canlib.model.config import preset  # noqa: E402
from canlib.training import TrainConfig, Trainer  # noqa: E402


def _count_phases(trainer: Trainer, group: list[list[int]]) -> dict[str, Any]:
    """Count one update of ``group``, split by nested counters into: ``batches`` (collating the
    micro-batches on the host and copying them to the device: host work on a GPU too), ``forward``
    (model and loss), ``backward``, ``optimizer`` (its step) and ``rest`` (the trainer's bookkeeping)."""
    phases = {name: OpCounter() for name in ("batches", "forward", "backward", "optimizer")}

    def counted(fn: Any, counter: OpCounter) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with counter:
                return fn(*args, **kwargs)

        return wrapper

    patched = [
        (trainer, "_batch_to_device", "batches"),
        (trainer.ddp, "forward", "forward"),
        (torch.autograd, "backward", "backward"),
        (trainer.optimizer, "step", "optimizer"),
    ]
    saved = [getattr(obj, attr) for obj, attr, _ in patched]
    for obj, attr, phase in patched:  # instance attributes (and torch.autograd.backward, restored below)
        setattr(obj, attr, counted(getattr(obj, attr), phases[phase]))
    try:
        with OpCounter() as whole:
            interval = {"loss": 0.0, "nll": 0.0, "tokens": 0}  # what Trainer.fit() runs per update
            loss, nll, tokens = trainer._update(group)
            for key, value in (("loss", loss), ("nll", nll), ("tokens", tokens)):
                interval[key] += value
    finally:
        for (obj, attr, _), fn in zip(patched, saved):
            if obj is torch.autograd:
                setattr(obj, attr, fn)
            else:
                delattr(obj, attr)
    keys = ("operators", "kernel_operators", "host_syncs")
    out: dict[str, Any] = {"update": whole.summary()}
    for name, counter in phases.items():
        summary = counter.summary()
        out[name] = {**{k: summary[k] for k in keys}, "by_name": dict(list(summary["by_name"].items())[:12])}
    out["rest"] = {k: out["update"][k] - sum(out[p][k] for p in phases) for k in keys}
    return out


def count_update(name: str, split: Any, vocab_size: int, max_tokens: int, warmup: int, **train: Any) -> dict[str, Any]:
    """The counts of one update of preset ``name`` after ``warmup`` updates (see the module docstring)."""
    model_cfg = preset(name, vocab_size=vocab_size)
    cfg = TrainConfig(
        max_tokens=max_tokens, max_steps=warmup + 1, warmup=4000, progress=False, keep_last=1, average_last=1, **train
    )
    with tempfile.TemporaryDirectory() as run:
        trainer = Trainer(model_cfg, cfg, split, None, run)
        groups = trainer._groups()
        for _ in range(warmup):
            trainer._update(next(groups))
        group = next(groups)
        tokens = int(sum(split.tgt_lens[i] + 1 for indices in group for i in indices))
        counts = _count_phases(trainer, group)
    counts["update"]["by_name"] = dict(list(counts["update"]["by_name"].items())[:25])  # the 25 most frequent
    return {"target_tokens": tokens, "sentences": sum(len(g) for g in group), **counts}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--data",
        default=str(
            Path(os.environ.get("CANLIB_CACHE_DIR", REPO / ".cache" / "canlib")) / "prepared" / "multi30k-en-de-small"
        ),
        help="prepared corpus for the small/tiny presets (default: the small Multi30k En-De)",
    )
    p.add_argument("--presets", default="small-can,small-baseline", help="presets trained on --data")
    p.add_argument("--max-tokens", type=int, default=8192)
    p.add_argument("--d512", default="baseline,can", help="d=512 presets on synthetic data; '' = none")
    p.add_argument("--d512-tokens", type=int, default=4096, help="tokens per d=512 update; 0 = skip them")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--result", help="store the counts here with provenance (commit, date, device, this command)")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    report: dict[str, Any] = {"device": "cpu", "threads": args.threads, "warmup_updates": args.warmup, "runs": {}}
    names = [n for n in args.presets.split(",") if n]
    if names:
        from canlib.data import load_prepared

        corpus = load_prepared(args.data)
        split = corpus.split("train")
        for name in names:
            report["runs"][name] = count_update(name, split, corpus.vocab.size, args.max_tokens, args.warmup)
            print(
                name,
                json.dumps({k: v for k, v in report["runs"][name]["update"].items() if k != "by_name"}),
                flush=True,
            )
    if args.d512 and args.d512_tokens:
        from gpu_smoke_train import synthetic_split

        split = synthetic_split(4000, 32000, 64)
        for name in args.d512.split(","):
            report["runs"][name] = count_update(name, split, 32000, args.d512_tokens, args.warmup)
            print(
                name,
                json.dumps({k: v for k, v in report["runs"][name]["update"].items() if k != "by_name"}),
                flush=True,
            )
    if args.result:
        from repro.results.files import provenance, save_result

        command = "python scripts/cpu_train_ops.py " + " ".join(sys.argv[1:] if argv is None else argv)
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True
        ).stdout.split("\n")
        scale = "small" if any(n.startswith("small-") for n in names) else "tiny"
        save_result(
            args.result,
            report,
            provenance(scale, {"command": command, "changed_files": [c.strip() for c in changed if c.strip()]}, "cpu"),
        )
        print(f"stored in {args.result}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
