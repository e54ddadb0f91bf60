"""Saving and loading models safely.

A checkpoint is a plain dict of tensors and primitives, so it loads with
``torch.load(weights_only=True)`` (no pickle code runs). Writes go to a temporary
file in the same folder and are renamed into place, so a crash never leaves a
half-written file under the final name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from canlib.io import atomic_write
from canlib.model.config import ModelConfig
from canlib.model.seq2seq import Seq2Seq

FORMAT_VERSION = 1


class CheckpointError(RuntimeError):
    """A checkpoint that is unreadable, corrupted or does not match what the caller expects."""


def atomic_save(obj: Any, path: str | os.PathLike) -> None:
    """torch.save to ``path`` atomically."""
    atomic_write(path, lambda f: torch.save(obj, f))


def safe_load(path: str | os.PathLike) -> dict[str, Any]:
    """``torch.load(weights_only=True)`` with errors that name the file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupted zip, truncated file, disallowed pickle global...
        raise CheckpointError(f"{path}: not a readable canlib checkpoint ({type(exc).__name__}: {exc})") from exc
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: expected a dict checkpoint, found {type(obj).__name__}")
    return obj


def model_payload(model: Seq2Seq, vocab_id: str | None = None) -> dict[str, Any]:
    """What a model checkpoint holds: format version, config, weights, vocabulary id."""
    return {
        "format_version": FORMAT_VERSION,
        "config": model.cfg.to_dict(),
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "vocab_id": vocab_id,
    }


def save_model(model: Seq2Seq, path: str | os.PathLike, vocab_id: str | None = None, **extra: Any) -> None:
    """Save config + weights (+ the id of the vocabulary they were trained with)."""
    atomic_save({**model_payload(model, vocab_id), **extra}, path)


def load_model(
    path: str | os.PathLike,
    expected_config: ModelConfig | None = None,
    expected_vocab_id: str | None = None,
    map_location: str | torch.device = "cpu",
    ckpt: dict[str, Any] | None = None,
) -> Seq2Seq:
    """Rebuild a model from a checkpoint, refusing a config or vocabulary that does not match; ``ckpt``: its
    contents when already read with :func:`safe_load` (``path`` then names it in errors)."""
    ckpt = safe_load(path) if ckpt is None else ckpt
    missing = [k for k in ("format_version", "config", "model") if k not in ckpt]
    if missing:
        raise CheckpointError(f"{path}: missing key(s) {', '.join(missing)}; not a canlib model checkpoint")
    if ckpt["format_version"] != FORMAT_VERSION:
        raise CheckpointError(f"{path}: format_version={ckpt['format_version']!r}, this canlib reads {FORMAT_VERSION}")
    try:
        cfg = ModelConfig.from_dict(ckpt["config"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: invalid config ({exc})") from exc
    if expected_config is not None and cfg != expected_config:
        diff = {
            k: (v, expected_config.to_dict()[k]) for k, v in cfg.to_dict().items() if expected_config.to_dict()[k] != v
        }
        raise CheckpointError(f"{path}: config does not match the expected one (field: (found, expected)) {diff}")
    if expected_vocab_id is not None and ckpt.get("vocab_id") != expected_vocab_id:
        raise CheckpointError(
            f"{path}: trained with vocabulary {ckpt.get('vocab_id')!r}, but the vocabulary given is "
            f"{expected_vocab_id!r}"
        )
    model = Seq2Seq(cfg)
    try:
        model.load_state_dict(ckpt["model"], strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{path}: weights do not fit the stored config ({exc})") from exc
    return model.to(map_location)
