"""``canlib info``: every preset with its shape and parameter count."""
from __future__ import annotations

import argparse
import json

from canlib.model.config import PRESETS, preset
from canlib.model.seq2seq import Seq2Seq


def preset_table(vocab_size: int) -> list[dict]:
    """One row per preset: name, decoder kind, depths, width, parameter count."""
    rows = []
    for name in PRESETS:
        cfg = preset(name, vocab_size=vocab_size)
        rows.append(
            {
                "preset": name,
                "kind": cfg.decoder_kind,
                "enc_layers": cfg.enc_layers,
                "dec_layers": cfg.dec_layers,
                "d_model": cfg.d_model,
                "heads": cfg.heads,
                "ffn_dim": cfg.ffn_dim,
                "params": Seq2Seq(cfg).num_parameters(),
            }
        )
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vocab-size", type=int, default=32000, help="joint vocabulary size (default 32000)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    if args.vocab_size <= 0:
        raise ValueError(f"--vocab-size={args.vocab_size}: must be positive")
    rows = preset_table(args.vocab_size)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'preset':<20}{'kind':<10}{'enc/dec':>8}{'d':>6}{'heads':>6}{'ffn':>6}{'params':>14}")
    for r in rows:
        depth = f"{r['enc_layers']}/{r['dec_layers']}"
        print(f"{r['preset']:<20}{r['kind']:<10}{depth:>8}{r['d_model']:>6}{r['heads']:>6}{r['ffn_dim']:>6}{r['params']:>14,}")
    print(f"(vocabulary {args.vocab_size:,}, shared source/target/output embedding)")
    return 0
