"""canlib: the Compressed Attention Network (Li et al., AAAI 2021) and its baselines.

The public API below is loaded on first use (PEP 562), so ``import canlib.data`` or ``canlib.io``
does not pull in the models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    name: "canlib.model"
    for name in (
        "ModelConfig",
        "PRESETS",
        "DECODER_KINDS",
        "preset",
        "Seq2Seq",
        "DecoderCache",
        "save_model",
        "load_model",
        "CheckpointError",
    )
}
__all__ = [*_EXPORTS, "build_model", "__version__"]

if TYPE_CHECKING:
    from canlib.model import (
        DECODER_KINDS,
        PRESETS,
        CheckpointError,
        DecoderCache,
        ModelConfig,
        Seq2Seq,
        load_model,
        preset,
        save_model,
    )


def build_model(cfg: ModelConfig | str, vocab_size: int | None = None, **overrides: Any) -> Seq2Seq:
    """A freshly initialised model from a config or a preset name (at ``vocab_size``; default: the paper's)."""
    from canlib.model import Seq2Seq, preset

    if isinstance(cfg, str):
        cfg = preset(cfg, **({"vocab_size": vocab_size} if vocab_size is not None else {}), **overrides)
    return Seq2Seq(cfg)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'canlib' has no attribute {name!r}")
