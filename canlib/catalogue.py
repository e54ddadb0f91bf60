"""The catalogue: the paper's systems and the book's three scales, each fact in one place.

It stands at the bottom of canlib and imports nothing of it, so every part reads it: :mod:`canlib.model.config`
builds its presets from the systems' depths and the scales' widths, :mod:`canlib.data.corpora` gives every corpus
its scale's joint vocabulary, and the reproduction (:mod:`repro`) reads each scale's corpus and budget, and the
systems' names and labels, from here. Which systems the reproduction trains with how many seeds, and on which
further corpora, is its own plan (``repro.results.plan``): a user of canlib trains any system with any seed.

The three scales:

* ``tiny``: CPU minutes, what CI runs: ``tiny-*`` presets (d=64) on 3,000 Multi30k En-De pairs. The models exercise
  every code path; they do not translate well, so no quality claim is judged here.
* ``small``: GPU minutes: ``small-*`` presets (d=256) on all of Multi30k En-De (29k pairs). The paper trains on
  WMT14 En-De; Multi30k is what trains to real translations in GPU-minutes. Its budget is the recipe measured on one
  H200 (``../shared/measurements/h200-2026-11-26``), in bf16 on CUDA and fp32 on a CPU (a run's time on a CPU:
  ``book/results/cpu/train_small.json``).
* ``full``: the paper's recipe (d=512 presets, WMT14 En-De, 4096 tokens x 8 GPUs); its width and vocabulary are
  also :class:`canlib.model.config.ModelConfig`'s defaults.

Speed is measured at the paper's d=512 shapes at every scale (it depends on shapes, not on weights).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# -- the systems -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class System:
    """One system: its encoder and decoder depths, its decoder layers' kind and the name the paper's tables use."""

    enc_layers: int
    dec_layers: int
    decoder_kind: str
    label: str

    def shape(self) -> dict[str, Any]:
        """The :class:`~canlib.model.config.ModelConfig` fields this system sets (its depths and decoder kind)."""
        return {"enc_layers": self.enc_layers, "dec_layers": self.dec_layers, "decoder_kind": self.decoder_kind}


SYSTEMS: dict[str, System] = {
    "baseline": System(6, 6, "standard", "Baseline"),
    "balanced": System(12, 2, "standard", "Balanced"),
    "depth-9-4": System(9, 4, "standard", "9/4"),
    "depth-14-1": System(14, 1, "standard", "14/1"),
    "san": System(12, 2, "san", "SAN"),
    "aan": System(12, 2, "aan", "AAN"),
    "can": System(12, 2, "can", "CAN"),
    "can_attn": System(12, 2, "can_attn", "Compress Attention"),
    "can_ffn": System(12, 2, "can_ffn", "Compress FFN"),
    # not a system of the paper's tables: its Results section reports CAN applied to the 6/6 Baseline
    # (-0.09 BLEU on average against -0.25 on the 12/2 one); the "beyond" chapter trains it
    "can-6-6": System(6, 6, "can", "CAN 6/6"),
    # a control on canlib's reading of Eq. 13, not a system of the paper: CAN with one head over its 4d-wide values
    "can_nosplit": System(12, 2, "can_nosplit", "CAN, values unsplit"),
}
LABELS = {name: system.label for name, system in SYSTEMS.items()}  # the names the paper's tables use

PAPER_SYSTEMS = ("baseline", "balanced", "san", "aan", "can")  # Table 2, in the paper's order
ABLATION_SYSTEMS = ("balanced", "can_attn", "can_ffn", "can")  # Table 5
DEPTH_SYSTEMS = ("baseline", "depth-9-4", "balanced", "depth-14-1")  # Figure 4, deepest decoder first
ALL_SYSTEMS = tuple(dict.fromkeys(PAPER_SYSTEMS + DEPTH_SYSTEMS + ABLATION_SYSTEMS))  # the nine


# -- the scales --------------------------------------------------------------------------------------------------


RECIPES = ("", "converged")  # the recipes of a scale (Scale.recipe)


@dataclass(frozen=True)
class Scale:
    """One scale: the width of its presets, the joint vocabulary of its prepared corpora, the corpus it trains on
    (and the scale that corpus is prepared at) and its training budget (:class:`~canlib.training.TrainConfig`
    fields); the seeds and further directions the reproduction trains are its plan's (``repro.results.plan``), the
    speed studies' settings its ``repro.bench.settings``."""

    name: str
    d_model: int
    heads: int
    ffn_dim: int
    vocab_size: int
    corpus: str
    corpus_scale: str
    train: dict[str, Any]
    beam: int = 4  # the paper's beam for BLEU and speed
    finetune_steps: int = 0
    # the converged recipe: what replaces ``train``'s fields for a model trained to the optimum of its validation
    # curve (``recipe("converged")``); ``train`` stays the budget the stored 1x runs were trained with
    converged: dict[str, Any] | None = None

    def recipe(self, name: str = "") -> dict[str, Any]:
        """The TrainConfig fields of recipe ``name``: "" the scale's budget (``train``), "converged" the budget at
        the optimum of the validation curve, with counter-hashed dropout (seeds stack) and attention kernels that
        plan nothing per batch shape."""
        if name not in RECIPES:
            raise ValueError(f"recipe={name!r}: choose one of {', '.join(repr(r) for r in RECIPES)}")
        if not name:
            return dict(self.train)
        return {**self.train, "dropout_rng": "counter-hash", "sdpa_backend": "planless", **(self.converged or {})}

    def width(self) -> dict[str, int]:
        """The :class:`~canlib.model.config.ModelConfig` fields this scale sets (the width of its presets)."""
        return {"d_model": self.d_model, "heads": self.heads, "ffn_dim": self.ffn_dim}

    def preset(self, system: str) -> str:
        """The preset name of ``system`` at this scale ("can" -> "small-can")."""
        return scaled_preset(system, self.name)


_SCALES: dict[str, Scale] = {
    "tiny": Scale(
        "tiny",
        d_model=64,
        heads=4,
        ffn_dim=256,
        vocab_size=2000,
        corpus="multi30k-en-de",
        corpus_scale="tiny",
        train=dict(
            lr=3e-3,
            warmup=30,
            max_tokens=1024,
            max_steps=120,
            valid_every=30,
            log_every=10,
            keep_last=3,
            average_last=3,
            progress=False,
        ),
        finetune_steps=60,
    ),
    "small": Scale(
        "small",
        d_model=256,
        heads=4,
        ffn_dim=1024,
        vocab_size=8000,
        corpus="multi30k-en-de",
        corpus_scale="small",
        train=dict(
            lr=1e-3,
            warmup=500,
            max_tokens=8192,
            max_steps=1200,
            valid_every=400,
            keep_last=2,
            average_last=2,
            label_smoothing=0.1,
            log_every=50,
            progress=False,
        ),
        finetune_steps=400,
        # the budget at the optimum of the 2x runs' validation loss (book/training.md, "A converged recipe"): 2,000
        # updates, the checkpoints of 1,600 and 2,000 averaged
        converged=dict(max_steps=2000, valid_every=400, keep_last=2, average_last=2),
    ),
    "full": Scale(
        "full",
        d_model=512,
        heads=8,
        ffn_dim=2048,
        vocab_size=32000,
        corpus="wmt14-en-de",
        corpus_scale="full",
        train=dict(
            lr=7e-4, warmup=8000, max_tokens=4096, update_freq=8, max_epochs=50, patience=5, label_smoothing=0.1
        ),
        finetune_steps=8000,
    ),
}
SCALES = tuple(_SCALES)  # smallest first
UNPREFIXED = "full"  # the scale whose presets carry the bare system name ("can"); the others say theirs ("tiny-can")


def scale_spec(scale: str) -> Scale:
    """The widths, vocabulary, corpus and budget of ``scale``."""
    if scale not in _SCALES:
        raise ValueError(f"SCALE={scale!r}: choose one of {', '.join(SCALES)}")
    return _SCALES[scale]


def scaled_preset(system: str, scale: str) -> str:
    """The preset name of ``system`` at ``scale`` ("can", "tiny" -> "tiny-can"); a name that
    already carries a scale prefix is kept as it is."""
    if scale not in _SCALES:
        raise ValueError(f"scale={scale!r}: choose one of {', '.join(SCALES)}")
    if system.startswith(tuple(f"{s}-" for s in SCALES if s != UNPREFIXED)) or scale == UNPREFIXED:
        return system
    return f"{scale}-{system}"


def preset_scale(name: str) -> str:
    """The scale a preset belongs to, from its name ("tiny-can" -> "tiny", "can" -> "full")."""
    return next((scale for scale in SCALES if scale != UNPREFIXED and name.startswith(scale + "-")), UNPREFIXED)


__all__ = [
    "System",
    "SYSTEMS",
    "LABELS",
    "PAPER_SYSTEMS",
    "ABLATION_SYSTEMS",
    "DEPTH_SYSTEMS",
    "ALL_SYSTEMS",
    "Scale",
    "SCALES",
    "scale_spec",
    "scaled_preset",
    "preset_scale",
]
