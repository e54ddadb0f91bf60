"""GPU smoke test of the trainer: Balanced and CAN at d=512, bf16, a few hundred updates.

One command, no network, under 8 minutes on one H100::

    python scripts/gpu_smoke_train.py --out smoke.json            # synthetic random-token pairs
    python scripts/gpu_smoke_train.py --data PREPARED_DIR          # or a prepared corpus
    python scripts/gpu_smoke_train.py --tiny --steps 3 --device cpu   # CPU check of the script itself

Reports per preset: target tokens/sec (steady state: the first ``--skip`` updates are not
timed), model FLOPs utilisation and peak GPU memory.

MFU = achieved training FLOP/s / peak FLOP/s, with training FLOPs per update

    6 * (P_enc * source_tokens + (P_dec + d * V) * target_tokens)

(forward + backward = 3 x 2 FLOPs per weight per token; P_enc / P_dec are the encoder /
decoder parameters, d*V the tied output projection; attention score and mixing products,
about 2*len/(12*d) of the total at these lengths, are left out, so MFU is slightly
understated). Peak: 989e12 FLOP/s, dense bf16 of an H100 SXM (H200 has the same);
override with --peak-flops.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canlib.data.batching import PairList, Split  # noqa: E402
from canlib.model.config import ModelConfig, preset  # noqa: E402
from canlib.training.trainer import TrainConfig, Trainer  # noqa: E402

H100_BF16_DENSE = 989e12


def synthetic_split(pairs: int, vocab_size: int, max_len: int, seed: int = 0) -> PairList:
    """Random-token pairs with random lengths in [max_len/4, max_len] (target length near source length)."""
    rng = np.random.default_rng(seed)
    src_lens = rng.integers(max(1, max_len // 4), max_len + 1, pairs)
    tgt_lens = np.clip(src_lens + rng.integers(-3, 4, pairs), 1, max_len)
    src = [rng.integers(4, vocab_size, n) for n in src_lens]
    tgt = [rng.integers(4, vocab_size, n) for n in tgt_lens]
    return PairList(src, tgt)


def flops_per_update_tokens(cfg: ModelConfig) -> tuple[int, int]:
    """(FLOPs per source token, FLOPs per target token) of one training update: 6 x the weights each meets."""
    from canlib.model import Seq2Seq

    model = Seq2Seq(cfg)
    enc = sum(p.numel() for n, p in model.named_parameters() if n.startswith(("encoder_layers", "encoder_norm")))
    dec = sum(p.numel() for n, p in model.named_parameters() if n.startswith(("decoder_layers", "decoder_norm")))
    return 6 * enc, 6 * (dec + cfg.d_model * cfg.vocab_size)


def measure(model_cfg: ModelConfig, cfg: TrainConfig, split: Split, skip: int, peak_flops: float | None) -> dict:
    """Train ``cfg.max_steps`` updates; report the speed of the updates after the first ``skip``."""
    src_per_tgt = float((split.src_lens + 1).sum() / (split.tgt_lens + 1).sum())
    with tempfile.TemporaryDirectory() as run:
        trainer = Trainer(model_cfg, cfg, split, None, run)
        if trainer.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(trainer.device)
        trainer.fit()
        rows = [json.loads(line) for line in (Path(run) / "log.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    start = max((r for r in train if r["step"] <= skip), key=lambda r: r["step"], default=None)
    timed = [r for r in train if r["step"] > skip]
    seconds = train[-1]["wall"] - (start["wall"] if start else 0.0)
    tok_s = sum(r["tokens"] for r in timed) / seconds
    f_src, f_tgt = flops_per_update_tokens(model_cfg)
    flops_s = tok_s * (f_tgt + f_src * src_per_tgt)
    out = {
        "preset_d_model": model_cfg.d_model, "decoder_kind": model_cfg.decoder_kind,
        "enc_layers": model_cfg.enc_layers, "dec_layers": model_cfg.dec_layers,
        "updates": trainer.step, "timed_updates": len(timed), "target_tokens_per_sec": round(tok_s, 1),
        "model_tflops_per_sec": round(flops_s / 1e12, 3), "final_train_loss": round(train[-1]["train_loss"], 4),
        "mfu": round(flops_s / peak_flops, 4) if peak_flops else None,
        "peak_memory_gib": round(torch.cuda.max_memory_allocated(trainer.device) / 2**30, 3) if trainer.device.type == "cuda" else None,
    }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="prepared corpus directory (default: synthetic random tokens)")
    p.add_argument("--presets", default="balanced,can", help="comma-separated presets (tiny- prefix added by --tiny)")
    p.add_argument("--tiny", action="store_true", help="tiny presets and data: a CPU check of the script")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--skip", type=int, default=20, help="untimed warm-up updates")
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--device", default="cuda")
    p.add_argument("--precision", default=None, help="default bf16 on cuda, fp32 on cpu")
    p.add_argument("--vocab-size", type=int, default=32000, help="synthetic vocabulary size")
    p.add_argument("--peak-flops", type=float, default=H100_BF16_DENSE, help="peak FLOP/s for MFU (H100 SXM dense bf16)")
    p.add_argument("--out", help="also write the JSON report here")
    args = p.parse_args(argv)

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU visible: use --device cpu (with --tiny for a quick check)")
    vocab_size = 1000 if args.tiny else args.vocab_size
    if args.data:
        from canlib.data import load_prepared

        corpus = load_prepared(args.data)
        split, vocab_size = corpus.split("train"), corpus.vocab.size
    else:
        split = synthetic_split(200 if args.tiny else 60000, vocab_size, 16 if args.tiny else 64)
    precision = args.precision or ("bf16" if args.device.startswith("cuda") else "fp32")
    max_tokens = 256 if args.tiny else args.max_tokens
    skip = min(args.skip, max(args.steps - 2, 0))
    report = {"device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
              "torch": torch.__version__, "precision": precision, "max_tokens": max_tokens,
              "data": args.data or "synthetic", "peak_flops_assumed": args.peak_flops if args.device.startswith("cuda") else None,
              "runs": {}}
    for name in args.presets.split(","):
        name = f"tiny-{name}" if args.tiny else name
        model_cfg = preset(name, vocab_size=vocab_size)
        cfg = TrainConfig(max_steps=args.steps, warmup=4000, max_tokens=max_tokens, device=args.device,
                          precision=precision, log_every=1, keep_last=1, average_last=1, progress=False)
        report["runs"][name] = measure(model_cfg, cfg, split, skip, args.peak_flops if args.device.startswith("cuda") else None)
        print(name, json.dumps(report["runs"][name]), flush=True)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
