"""``canlib train``: a model preset on a prepared corpus (resumable; CPU or CUDA; torchrun for several GPUs)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from canlib.data import load_prepared
from canlib.model.config import preset
from canlib.training.config import OPTIMIZERS, SDPA_BACKENDS, TrainConfig
from canlib.training.run_folder import check_run_dir
from canlib.training.trainer import Trainer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = TrainConfig()
    parser.add_argument(
        "--preset", required=True, help="model preset, e.g. tiny-can, can, balanced (see `canlib info`)"
    )
    parser.add_argument("--data", required=True, help="prepared corpus directory (canlib.data.prepare)")
    parser.add_argument("--out", required=True, help="run directory to write")
    parser.add_argument(
        "--max-tokens", type=int, default=d.max_tokens, help="tokens per micro-batch and device (default 4096)"
    )
    parser.add_argument(
        "--update-freq", type=int, default=d.update_freq, help="micro-batches per update (8 on 1 GPU = paper's 8x4096)"
    )
    parser.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (default 7e-4)")
    parser.add_argument("--warmup", type=int, default=d.warmup, help="linear warm-up updates (default 8000)")
    parser.add_argument("--label-smoothing", type=float, default=d.label_smoothing)
    parser.add_argument("--clip-norm", type=float, default=d.clip_norm, help="gradient norm clip; 0 = off")
    parser.add_argument("--dropout", type=float, default=None, help="override the preset's dropout (all three rates)")
    stop = parser.add_argument_group("stopping")
    stop.add_argument("--max-epochs", type=int, default=d.max_epochs)
    stop.add_argument("--max-steps", type=int, default=d.max_steps)
    stop.add_argument(
        "--patience", type=int, default=d.patience, help="validations without improvement before stopping; 0 = off"
    )
    parser.add_argument(
        "--valid-every", type=int, default=d.valid_every, help="validate every K updates; 0 = every epoch"
    )
    parser.add_argument("--keep-last", type=int, default=d.keep_last)
    parser.add_argument("--average-last", type=int, default=d.average_last)
    parser.add_argument(
        "--log-every", type=int, default=d.log_every, help="updates per log row (the host reads the device's sums then)"
    )
    parser.add_argument("--device", default=d.device, help="cpu or cuda")
    parser.add_argument(
        "--precision", choices=("fp32", "bf16", "fp16"), default=None, help="default: bf16 on cuda, fp32 on cpu"
    )
    parser.add_argument("--compile", action="store_true", help="torch.compile the model and loss")
    parser.add_argument(
        "--loss-chunk",
        type=int,
        default=d.loss_chunk,
        help=f"target tokens per chunk of the output layer and loss (default {d.loss_chunk}); 0 = unchunked",
    )
    parser.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default=d.optimizer,
        help="Adam's implementation: fused (default; one operator per update), foreach, or loop (per tensor)",
    )
    fast = parser.add_argument_group("throughput (each changes the last bits of the numbers, not the recipe)")
    fast.add_argument(
        "--pad-multiple",
        type=int,
        default=d.pad_multiple,
        help="shape buckets: round padded lengths up to a multiple of this (8 or 16 on a GPU); 1 = off",
    )
    fast.add_argument(
        "--sdpa-backend",
        choices=SDPA_BACKENDS,
        default=d.sdpa_backend,
        help="attention kernels while training (default: PyTorch picks per call)",
    )
    fast.add_argument(
        "--deterministic",
        action="store_true",
        help="deterministic kernels only, so that a resumed GPU run equals an uninterrupted one bit for bit",
    )
    fast.add_argument(
        "--loss-vocab-block",
        type=int,
        default=d.loss_vocab_block,
        help="vocabulary columns per tile of the chunked loss (online logsumexp); 0 = whole rows",
    )
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--no-progress", action="store_true", help="no tqdm bar")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    mode.add_argument("--overwrite", action="store_true", help="delete the run in --out and start over")


def train_config(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig the parsed arguments ask for (bf16 on CUDA and fp32 on CPU unless --precision says)."""
    precision = args.precision or ("bf16" if args.device.startswith("cuda") else "fp32")
    return TrainConfig(
        lr=args.lr,
        warmup=args.warmup,
        label_smoothing=args.label_smoothing,
        max_tokens=args.max_tokens,
        update_freq=args.update_freq,
        clip_norm=args.clip_norm,
        max_epochs=args.max_epochs,
        max_steps=args.max_steps,
        patience=args.patience,
        valid_every=args.valid_every,
        keep_last=args.keep_last,
        average_last=args.average_last,
        seed=args.seed,
        device=args.device,
        precision=precision,
        log_every=args.log_every,
        progress=not args.no_progress,
        compile=args.compile,
        loss_chunk=args.loss_chunk,
        optimizer=args.optimizer,
        pad_multiple=args.pad_multiple,
        sdpa_backend=args.sdpa_backend,
        deterministic=args.deterministic,
        loss_vocab_block=args.loss_vocab_block,
    )


def run(args: argparse.Namespace) -> int:
    check_run_dir(args.out)  # before the corpus is loaded: a wrong --out fails at once
    corpus = load_prepared(args.data)
    overrides = (
        {} if args.dropout is None else dict(dropout=args.dropout, attn_dropout=args.dropout, relu_dropout=args.dropout)
    )
    model_cfg = preset(args.preset, vocab_size=corpus.vocab.size, **overrides)
    trainer = Trainer(
        model_cfg,
        train_config(args),
        corpus.split("train"),
        corpus.split("valid"),
        args.out,
        vocab=corpus.vocab,
        data_path=str(Path(args.data).resolve()),
        resume=args.resume,
        overwrite=args.overwrite,
    )
    result = trainer.fit()
    if trainer.is_main:
        print(json.dumps({k: result[k] for k in ("stop_reason", "step", "epoch", "best", "last_valid")}))
    return 0
