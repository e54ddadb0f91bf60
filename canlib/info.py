"""``canlib info``: every preset with its shape and parameter count, at the joint vocabulary its scale
uses (``canlib.catalogue``'s ``Scale.vocab_size``) unless ``--vocab-size`` sets one for all."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from canlib.catalogue import SCALES, preset_scale, scale_spec
from canlib.model.config import PRESETS, preset
from canlib.model.seq2seq import Seq2Seq

INITS = ("normal_", "uniform_", "kaiming_uniform_", "xavier_uniform_", "zeros_", "ones_", "constant_")


@contextmanager
def no_initialisation() -> Iterator[None]:
    """``torch.nn.init``'s fills as no-ops: a model built inside gets its shapes in memory the OS has not handed out
    yet (nothing is written to it), which counts its parameters in a fraction of a second. (PyTorch's ``meta``
    device would too, but its first use imports the compiler stack: seconds.)"""
    real = {name: getattr(torch.nn.init, name) for name in INITS}
    for name in INITS:
        setattr(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor)
    try:
        yield
    finally:
        for name, function in real.items():
            setattr(torch.nn.init, name, function)


def parameter_count(cfg) -> int:
    """The parameters of a model of ``cfg``, built without initialisation (:func:`no_initialisation`)."""
    with no_initialisation():
        return Seq2Seq(cfg).num_parameters()


def preset_table(vocab_size: int | None = None) -> list[dict]:
    """One row per preset: name, scale, vocabulary, decoder kind, depths, width, parameter count.
    ``vocab_size=None``: each preset at its scale's vocabulary."""
    rows = []
    for name in PRESETS:
        scale = preset_scale(name)
        cfg = preset(name, vocab_size=vocab_size or scale_spec(scale).vocab_size)
        rows.append(
            {
                "preset": name,
                "scale": scale,
                "vocab_size": cfg.vocab_size,
                "kind": cfg.decoder_kind,
                **{k: getattr(cfg, k) for k in ("enc_layers", "dec_layers", "d_model", "heads", "ffn_dim")},
                "params": parameter_count(cfg),
            }
        )
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--vocab-size",
        type=int,
        help="joint vocabulary size for every preset (default: each "
        "scale's own, " + ", ".join(f"{s} {scale_spec(s).vocab_size:,}" for s in SCALES) + ")",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    if args.vocab_size is not None and args.vocab_size <= 0:
        raise ValueError(f"--vocab-size={args.vocab_size}: must be positive")
    rows = preset_table(args.vocab_size)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'preset':<20}{'kind':<10}{'enc/dec':>8}{'d':>6}{'heads':>6}{'ffn':>6}{'vocab':>8}{'params':>14}")
    for r in rows:
        depth = f"{r['enc_layers']}/{r['dec_layers']}"
        print(
            f"{r['preset']:<20}{r['kind']:<10}{depth:>8}{r['d_model']:>6}{r['heads']:>6}{r['ffn_dim']:>6}"
            f"{r['vocab_size']:>8,}{r['params']:>14,}"
        )
    print("(vocab: the joint vocabulary, shared source/target/output embedding)")
    return 0
