"""Architecture configuration and the named presets of the paper's systems.

One frozen dataclass describes a whole model; presets build it by name so that
checkpoints, the CLI, the trainer and the benchmarks all agree on what
"balanced" or "can" means.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from canlib.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID  # the special token ids the vocabulary and the model share

# "can_residual": CAN keeping the attention's own residual S + C (a control on this library's reading of
# the paper, which drops it)
DECODER_KINDS = ("standard", "aan", "san", "can", "can_attn", "can_ffn", "can_residual")
MIXED = "mixed"  # decoder_kind of a stack with one kind per layer (``ModelConfig.decoder_layer_kinds``)
MIXABLE_KINDS = tuple(k for k in DECODER_KINDS if k != "san")  # SAN's groups share maps across layers


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild a model's architecture (not its weights)."""

    vocab_size: int = 32000
    d_model: int = 512
    heads: int = 8
    ffn_dim: int = 2048
    enc_layers: int = 6
    dec_layers: int = 6
    decoder_kind: str = "standard"
    dropout: float = 0.1  # residual and embedding dropout
    attn_dropout: float = 0.1  # on attention probabilities
    relu_dropout: float = 0.1  # on the FFN hidden layer (and CAN's 4d hidden)
    max_len: int = 1024  # length of the sinusoidal position table
    san_groups: tuple[int, ...] = ()  # SAN sharing groups (sizes); () = one group of all layers
    decoder_layer_kinds: tuple[str, ...] = ()  # with decoder_kind="mixed": each decoder layer's kind, bottom first
    pad_id: int = PAD_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID

    def __post_init__(self) -> None:
        def bad(name: str, value: Any, why: str) -> ValueError:
            return ValueError(f"ModelConfig.{name}={value!r}: {why}")

        for name in ("vocab_size", "d_model", "heads", "ffn_dim", "enc_layers", "dec_layers", "max_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise bad(name, value, "must be a positive integer")
        if self.decoder_kind not in (*DECODER_KINDS, MIXED):
            raise bad(
                "decoder_kind",
                self.decoder_kind,
                f"unknown decoder kind; choose one of {', '.join(DECODER_KINDS)} "
                f"(or {MIXED!r} with decoder_layer_kinds)",
            )
        if self.d_model % self.heads:
            raise bad("d_model", self.d_model, f"must be divisible by heads={self.heads}")
        for name in ("dropout", "attn_dropout", "relu_dropout"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise bad(name, value, "must be in [0, 1)")
        for name in ("pad_id", "bos_id", "eos_id"):
            value = getattr(self, name)
            if not 0 <= value < self.vocab_size:
                raise bad(name, value, f"must be a token id below vocab_size={self.vocab_size}")
        object.__setattr__(self, "san_groups", tuple(self.san_groups))
        if self.san_groups:
            if any((not isinstance(g, int)) or g <= 0 for g in self.san_groups):
                raise bad("san_groups", self.san_groups, "group sizes must be positive integers")
            if sum(self.san_groups) != self.dec_layers:
                raise bad("san_groups", self.san_groups, f"group sizes must add up to dec_layers={self.dec_layers}")
        object.__setattr__(self, "decoder_layer_kinds", tuple(self.decoder_layer_kinds))
        kinds = self.decoder_layer_kinds
        if (self.decoder_kind == MIXED) != bool(kinds):
            raise bad(
                "decoder_layer_kinds", kinds, f"give one kind per decoder layer exactly when decoder_kind={MIXED!r}"
            )
        if kinds and (len(kinds) != self.dec_layers or not set(kinds) <= set(MIXABLE_KINDS)):
            raise bad(
                "decoder_layer_kinds", kinds, f"give dec_layers={self.dec_layers} kinds from {', '.join(MIXABLE_KINDS)}"
            )
        wide = [k for k in dict.fromkeys(self.layer_kinds()) if k in ("can", "can_ffn", "can_residual")]
        if wide and self.ffn_dim % self.heads:
            raise bad(
                "ffn_dim",
                self.ffn_dim,
                f"the {', '.join(wide)} values are ffn_dim wide and must split across heads={self.heads}",
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    def sharing_groups(self) -> tuple[int, ...]:
        """SAN sharing groups; the default is one group holding every decoder layer."""
        return self.san_groups or (self.dec_layers,)

    def layer_kinds(self) -> tuple[str, ...]:
        """The kind of each decoder layer, bottom first."""
        return self.decoder_layer_kinds or (self.decoder_kind,) * self.dec_layers

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["san_groups"] = list(self.san_groups)
        out["decoder_layer_kinds"] = list(self.decoder_layer_kinds)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"ModelConfig: unknown field(s) {', '.join(unknown)}")
        data = dict(data)
        for name in ("san_groups", "decoder_layer_kinds"):
            if name in data:
                data[name] = tuple(data[name])
        return cls(**data)

    def replace(self, **changes: Any) -> ModelConfig:
        return ModelConfig.from_dict({**self.to_dict(), **changes})


# ---------------------------------------------------------------------------
# Presets. The paper's systems at d=512/h=8/ffn=2048, plus CPU-sized copies
# with the same depths and decoder kinds: "small-*" (d=256) and "tiny-*" (d=64).

_SYSTEMS: dict[str, dict[str, Any]] = {
    "baseline": dict(enc_layers=6, dec_layers=6, decoder_kind="standard"),
    "balanced": dict(enc_layers=12, dec_layers=2, decoder_kind="standard"),
    "depth-9-4": dict(enc_layers=9, dec_layers=4, decoder_kind="standard"),
    "depth-14-1": dict(enc_layers=14, dec_layers=1, decoder_kind="standard"),
    "san": dict(enc_layers=12, dec_layers=2, decoder_kind="san"),
    "aan": dict(enc_layers=12, dec_layers=2, decoder_kind="aan"),
    "can": dict(enc_layers=12, dec_layers=2, decoder_kind="can"),
    "can_attn": dict(enc_layers=12, dec_layers=2, decoder_kind="can_attn"),
    "can_ffn": dict(enc_layers=12, dec_layers=2, decoder_kind="can_ffn"),
    # not a system of the paper's tables: its Results section reports CAN applied to the 6/6 Baseline
    # (-0.09 BLEU on average against -0.25 on the 12/2 one); the "beyond" chapter trains it
    "can-6-6": dict(enc_layers=6, dec_layers=6, decoder_kind="can"),
}

# scale -> the width of its presets; one name per idea: the scale "tiny" names the presets "tiny-*"
_SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(d_model=64, heads=4, ffn_dim=256),
    "small": dict(d_model=256, heads=4, ffn_dim=1024),
    "full": dict(d_model=512, heads=8, ffn_dim=2048),
}
SCALES = tuple(_SIZES)  # smallest first; canlib.repro.results.scales gives each its corpus and budget
# the joint vocabulary each scale's prepared corpora use (canlib.data.corpora's Scale.vocab_size)
SCALE_VOCAB: dict[str, int] = {"full": 32000, "small": 8000, "tiny": 2000}


def scaled_preset(system: str, scale: str) -> str:
    """The preset name of ``system`` at ``scale`` ("can", "tiny" -> "tiny-can"); a name that
    already carries a scale prefix is kept as it is."""
    if scale not in _SIZES:
        raise ValueError(f"scale={scale!r}: choose one of {', '.join(SCALES)}")
    if system.startswith(tuple(f"{s}-" for s in SCALES if s != "full")) or scale == "full":
        return system
    return f"{scale}-{system}"


PRESETS: dict[str, dict[str, Any]] = {
    scaled_preset(name, scale): {**size, **system}
    for scale, size in _SIZES.items()
    for name, system in _SYSTEMS.items()
}

# The paper's Table 2 systems, in the paper's order (used by benchmarks and chapters).
PAPER_SYSTEMS = ("baseline", "balanced", "san", "aan", "can")
ABLATION_SYSTEMS = ("balanced", "can_attn", "can_ffn", "can")
DEPTH_SYSTEMS = ("baseline", "depth-9-4", "balanced", "depth-14-1")
ALL_SYSTEMS = tuple(dict.fromkeys(PAPER_SYSTEMS + DEPTH_SYSTEMS + ABLATION_SYSTEMS))  # the nine systems
LABELS = {  # the names the paper's tables use
    "baseline": "Baseline",
    "balanced": "Balanced",
    "san": "SAN",
    "aan": "AAN",
    "can": "CAN",
    "can_attn": "Compress Attention",
    "can_ffn": "Compress FFN",
    "depth-9-4": "9/4",
    "depth-14-1": "14/1",
    "can-6-6": "CAN 6/6",
}


def preset(name: str, vocab_size: int = 32000, **overrides: Any) -> ModelConfig:
    """The ModelConfig of a named preset, with optional field overrides (e.g. dropout=0)."""
    if name not in PRESETS:
        raise ValueError(f"preset={name!r}: unknown preset; choose one of {', '.join(PRESETS)}")
    return ModelConfig(vocab_size=vocab_size, **{**PRESETS[name], **overrides})


__all__ = [
    "ModelConfig",
    "PRESETS",
    "preset",
    "DECODER_KINDS",
    "MIXED",
    "MIXABLE_KINDS",
    "PAPER_SYSTEMS",
    "ABLATION_SYSTEMS",
    "DEPTH_SYSTEMS",
    "SCALES",
    "SCALE_VOCAB",
    "scaled_preset",
    "PAD_ID",
    "UNK_ID",
    "BOS_ID",
    "EOS_ID",
]
