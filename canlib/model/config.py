"""Architecture configuration and the named presets of the paper's systems.

One frozen dataclass describes a whole model; presets build it by name so that
checkpoints, the CLI, the trainer and the benchmarks all agree on what
"balanced" or "can" means.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from canlib.catalogue import SCALES, SYSTEMS, scale_spec, scaled_preset
from canlib.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID  # the special token ids the vocabulary and the model share

# "can_residual": CAN keeping the attention's own residual S + C (a control on this library's reading of
# the paper, which drops it); "can_nosplit": CAN with one head, its 4d-wide values not split over heads (the
# paper's equations as written, a control on the head split)
DECODER_KINDS = ("standard", "aan", "san", "can", "can_attn", "can_ffn", "can_residual", "can_nosplit")
MIXED = "mixed"  # decoder_kind of a stack with one kind per layer (``ModelConfig.decoder_layer_kinds``)
MIXABLE_KINDS = tuple(k for k in DECODER_KINDS if k != "san")  # SAN's groups share maps across layers
_PAPER, _BASELINE = scale_spec("full"), SYSTEMS["baseline"]  # the defaults: the paper's Baseline at its width


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild a model's architecture (not its weights); the defaults are the paper's
    Baseline at the paper's width and joint vocabulary (the ``full`` scale of :mod:`canlib.catalogue`)."""

    vocab_size: int = _PAPER.vocab_size
    d_model: int = _PAPER.d_model
    heads: int = _PAPER.heads
    ffn_dim: int = _PAPER.ffn_dim
    enc_layers: int = _BASELINE.enc_layers
    dec_layers: int = _BASELINE.dec_layers
    decoder_kind: str = _BASELINE.decoder_kind
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
        return cls(**data)  # JSON's lists become tuples in __post_init__

    def replace(self, **changes: Any) -> ModelConfig:
        return ModelConfig.from_dict({**self.to_dict(), **changes})


# ---------------------------------------------------------------------------
# Presets: every system of the catalogue at every scale's width: the paper's systems at the paper's width ("can"),
# and narrower copies with the same depths and decoder kinds ("small-can", "tiny-can").

PRESETS: dict[str, dict[str, Any]] = {
    scaled_preset(name, scale): {**scale_spec(scale).width(), **system.shape()}
    for scale in SCALES
    for name, system in SYSTEMS.items()
}


def preset(name: str, vocab_size: int = _PAPER.vocab_size, **overrides: Any) -> ModelConfig:
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
    "PAD_ID",
    "UNK_ID",
    "BOS_ID",
    "EOS_ID",
]
