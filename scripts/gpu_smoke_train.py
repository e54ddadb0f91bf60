"""GPU smoke test and throughput of the trainer: Baseline and CAN at d=512, bf16, 32,768 tokens per batch.

One command, no network, a few minutes on one H100 or H200::

    python scripts/gpu_smoke_train.py --out smoke.json               # synthetic random-token pairs
    python scripts/gpu_smoke_train.py --compile --out compiled.json  # the same under torch.compile
    python scripts/gpu_smoke_train.py --data PREPARED_DIR            # or a prepared corpus
    python scripts/gpu_smoke_train.py --tiny --steps 3 --device cpu  # CPU check of the script itself
    python scripts/gpu_smoke_train.py --device cpu --data PREPARED_DIR --presets small-can --max-tokens 8192 \
        --steps 8 --skip 2 --result book/results/cpu/train_small.json  # one update's time on a CPU, stored

Reports per preset: target tokens/sec and seconds per update (steady state: the first ``--skip`` updates are not
timed; the trainer waits for the GPU only at its log points, every ``--skip`` updates here),
model FLOPs utilisation against the device's own peak, and peak GPU memory.

MFU = achieved training FLOP/s / the device's peak dense bf16 FLOP/s, with training FLOPs per update

    6 * (P_enc * source_tokens + (P_dec + d * V) * target_tokens)

(forward + backward = 3 x 2 FLOPs per weight per token; P_enc / P_dec are the encoder /
decoder parameters, d*V the tied output projection; attention score and mixing products,
about 2*len/(12*d) of the total at these lengths, are left out, so MFU is slightly
understated). Peaks come from ``PEAK_BF16_DENSE`` (vendor datasheets); a device not in it
gets no MFU unless ``--peak-flops`` gives its peak.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canlib.catalogue import preset_scale  # noqa: E402
from canlib.data.batching import PairList, Split  # noqa: E402
from canlib.model.config import ModelConfig, preset  # noqa: E402
from canlib.training import TrainConfig, Trainer  # noqa: E402

# dense (no sparsity) bf16 tensor-core peak, FLOP/s, by a substring of torch.cuda.get_device_name()
PEAK_BF16_DENSE: dict[str, float] = {
    "H100": 989e12,  # H100 SXM5 datasheet; the PCIe card is lower (756e12): pass --peak-flops for it
    "H200": 989e12,  # same compute as the H100 SXM, more and faster memory
}


def device_peak_flops(device_name: str) -> float | None:
    """The table's peak for ``device_name`` (e.g. 'NVIDIA H100 80GB HBM3'); None for a device it lacks."""
    for key, peak in PEAK_BF16_DENSE.items():
        if key in device_name:
            return peak
    return None


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
    """Train ``cfg.max_steps`` updates; report the speed of the updates after the first ``skip``.

    The trainer logs (and so waits for the device) every ``skip`` updates: the timed stretch
    runs from the row at update ``skip`` to the last row, with no other host syncs in between."""
    cfg = dataclasses.replace(cfg, log_every=max(skip, 1))
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
    timed_updates = train[-1]["step"] - (start["step"] if start else 0)
    tok_s = sum(r["tokens"] for r in timed) / seconds
    f_src, f_tgt = flops_per_update_tokens(model_cfg)
    flops_s = tok_s * (f_tgt + f_src * src_per_tgt)
    return {
        "preset_d_model": model_cfg.d_model,
        "decoder_kind": model_cfg.decoder_kind,
        "enc_layers": model_cfg.enc_layers,
        "dec_layers": model_cfg.dec_layers,
        "updates": trainer.step,
        "timed_updates": timed_updates,
        "target_tokens_per_sec": round(tok_s, 1),
        "seconds_per_update": round(seconds / timed_updates, 4),
        "model_tflops_per_sec": round(flops_s / 1e12, 3),
        "final_train_loss": round(train[-1]["train_loss"], 4),
        "mfu": round(flops_s / peak_flops, 4) if peak_flops else None,
        "peak_memory_gib": round(torch.cuda.max_memory_allocated(trainer.device) / 2**30, 3)
        if trainer.device.type == "cuda"
        else None,
    }


def arguments() -> argparse.ArgumentParser:
    """The command line: which presets to train, on what data, how long and how precisely, and where to report."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="prepared corpus directory (default: synthetic random tokens)")
    p.add_argument("--presets", default="baseline,can", help="comma-separated presets (tiny- prefix added by --tiny)")
    p.add_argument("--tiny", action="store_true", help="tiny presets and data: a CPU check of the script")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--skip", type=int, default=20, help="untimed warm-up updates (and the log interval)")
    p.add_argument("--max-tokens", type=int, default=32768)
    p.add_argument("--device", default="cuda")
    p.add_argument("--precision", default=None, help="default bf16 on cuda, fp32 on cpu")
    p.add_argument("--compile", action="store_true", help="torch.compile the model and loss (TrainConfig.compile)")
    p.add_argument("--loss-chunk", type=int, default=TrainConfig().loss_chunk, help="0 = unchunked log-softmax")
    p.add_argument("--vocab-size", type=int, default=32000, help="synthetic vocabulary size")
    p.add_argument(
        "--peak-flops", type=float, default=None, help="peak FLOP/s for MFU (default: the device's, from the table)"
    )
    p.add_argument("--out", help="also write the JSON report here")
    p.add_argument(
        "--result",
        help="also store the report here as a result with provenance (commit, date, device, "
        "scale from the presets' names, this command), as book/results/ holds them",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    on_cuda = args.device.startswith("cuda")
    if on_cuda and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU visible: use --device cpu (with --tiny for a quick check)")
    device_name = torch.cuda.get_device_name() if on_cuda else "cpu"
    peak = args.peak_flops or (device_peak_flops(device_name) if on_cuda else None)
    if on_cuda and peak is None:
        print(
            f"MFU not reported: {device_name!r} is not in the peak table {sorted(PEAK_BF16_DENSE)}; pass --peak-flops",
            file=sys.stderr,
        )
    vocab_size = 1000 if args.tiny else args.vocab_size
    if args.data:
        from canlib.data import load_prepared

        corpus = load_prepared(args.data)
        split, vocab_size = corpus.split("train"), corpus.vocab.size
    else:
        split = synthetic_split(200 if args.tiny else 60000, vocab_size, 16 if args.tiny else 64)
    precision = args.precision or ("bf16" if on_cuda else "fp32")
    max_tokens = 256 if args.tiny else args.max_tokens
    skip = min(args.skip, max(args.steps - 2, 0))
    report = {
        "device": device_name,
        "torch": torch.__version__,
        "precision": precision,
        "max_tokens": max_tokens,
        "compile": args.compile,
        "loss_chunk": args.loss_chunk,
        "data": args.data or "synthetic",
        "peak_flops": peak,
        "peak_source": "--peak-flops" if args.peak_flops else ("table" if peak else None),
        "runs": {},
    }
    names = [f"tiny-{name}" if args.tiny else name for name in args.presets.split(",")]
    scales = {preset_scale(name) for name in names}
    if args.result and len(scales) != 1:  # before any training: a refused store loses no measurement
        raise SystemExit(f"--result: the presets mix scales ({', '.join(sorted(scales))}); store one scale per file")
    for name in names:
        model_cfg = preset(name, vocab_size=vocab_size)
        cfg = TrainConfig(
            max_steps=args.steps,
            warmup=4000,
            max_tokens=max_tokens,
            device=args.device,
            precision=precision,
            keep_last=1,
            average_last=1,
            progress=False,
            compile=args.compile,
            loss_chunk=args.loss_chunk,
        )
        report["runs"][name] = measure(model_cfg, cfg, split, skip, peak)
        print(name, json.dumps(report["runs"][name]), flush=True)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.result:
        from repro.results.files import provenance, save_result

        command = "python scripts/gpu_smoke_train.py " + " ".join(sys.argv[1:] if argv is None else argv)
        save_result(args.result, report, provenance(scales.pop(), {"command": command}, args.device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
