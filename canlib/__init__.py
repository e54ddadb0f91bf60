"""canlib: the Compressed Attention Network (Li et al., AAAI 2021) and its baselines."""
from .config import DECODER_KINDS, PRESETS, ModelConfig, preset
from .model import DecoderCache, Seq2Seq
from .checkpoint import CheckpointError, load_model, save_model

__version__ = "0.1.0"


def build_model(cfg: ModelConfig | str, vocab_size: int = 32000, **overrides) -> Seq2Seq:
    """A freshly initialised model from a config or a preset name."""
    if isinstance(cfg, str):
        cfg = preset(cfg, vocab_size=vocab_size, **overrides)
    return Seq2Seq(cfg)


__all__ = [
    "ModelConfig", "PRESETS", "DECODER_KINDS", "preset", "Seq2Seq", "DecoderCache", "build_model",
    "save_model", "load_model", "CheckpointError", "__version__",
]
