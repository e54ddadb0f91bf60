"""Training speed of the tiny-* presets on this CPU, on real WMT pairs.

    python scripts/cpu_train_speed.py [--steps 200] [--pairs 3000] [--threads 1] [--out speed.json]

Trains each preset for ``--steps`` updates (the first ``--skip`` untimed) on the first
``--pairs`` pairs of newstest2008-2012 (a throwaway 2000-piece vocabulary trained on them)
and reports target tokens/sec, the trainer's own measurement (update time only; ``measure``
logs every ``--skip`` updates).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_smoke_train import measure  # noqa: E402

from canlib.data.batching import PairList  # noqa: E402
from canlib.data.vocab import Vocabulary  # noqa: E402
from canlib.model.config import preset  # noqa: E402
from canlib.training import TrainConfig  # noqa: E402

PRESETS = ("baseline", "balanced", "san", "aan", "can", "can_attn", "can_ffn")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--data-dir",
        default=os.environ.get("CANLIB_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data")),
    )
    p.add_argument("--pairs", type=int, default=3000)
    p.add_argument("--vocab-size", type=int, default=2000)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--skip", type=int, default=10)
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--presets", default=",".join(PRESETS))
    p.add_argument("--out")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    folder = Path(args.data_dir) / "wmt14-en-de"
    en = (folder / "newstest2008-2012.en").read_text().splitlines()[: args.pairs]
    de = (folder / "newstest2008-2012.de").read_text().splitlines()[: args.pairs]
    if len(en) < args.pairs or len(de) < args.pairs:
        raise SystemExit(f"{folder}: fewer than {args.pairs} pairs in newstest2008-2012")
    vocab = Vocabulary.train(en + de, args.vocab_size)
    split = PairList(vocab.encode_batch(en), vocab.encode_batch(de))
    report = {
        "device": "cpu",
        "threads": args.threads,
        "torch": torch.__version__,
        "pairs": args.pairs,
        "vocab_size": vocab.size,
        "max_tokens": args.max_tokens,
        "steps": args.steps,
        "runs": {},
    }
    for name in args.presets.split(","):
        cfg = TrainConfig(max_steps=args.steps, max_tokens=args.max_tokens, keep_last=1, average_last=1, progress=False)
        run = measure(preset(f"tiny-{name}", vocab_size=vocab.size), cfg, split, args.skip, None)
        report["runs"][f"tiny-{name}"] = run
        print(
            f"tiny-{name:<10} {run['target_tokens_per_sec']:>9.0f} target tok/s  loss {run['final_train_loss']:.3f}",
            flush=True,
        )
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
