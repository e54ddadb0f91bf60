"""The models: configuration and presets, attention, one class per decoder-layer kind, the
encoder-decoder with its incremental decoding API, checkpoints, and the compression derivation."""

from canlib.model.checkpoint import CheckpointError, load_model, save_model
from canlib.model.config import DECODER_KINDS, PRESETS, ModelConfig, preset
from canlib.model.seq2seq import DecoderCache, Seq2Seq

__all__ = [
    "DECODER_KINDS",
    "PRESETS",
    "ModelConfig",
    "preset",
    "DecoderCache",
    "Seq2Seq",
    "CheckpointError",
    "load_model",
    "save_model",
]
