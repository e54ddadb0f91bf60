"""The three scales of the book's studies: which corpus, which model size, which training budget.

* ``tiny``: CPU minutes, what CI runs: ``tiny-*`` presets (d=64) on 3,000 Multi30k En-De pairs. The
  models exercise every code path; they do not translate well, so no quality claim is judged here.
* ``small``: GPU minutes: ``small-*`` presets (d=256) on all of Multi30k En-De (29k pairs), and Baseline,
  Balanced and CAN on the five other Multi30k directions. The paper trains on WMT14 En-De; Multi30k is
  what trains to real translations in GPU-minutes. The budget is the recipe measured on one H200
  (``../shared/measurements/h200-2026-11-26``: small-can, 57 s, sacreBLEU 31.9 on test2016):
  1200 updates x 8192 tokens, lr 1e-3, 500 warm-up updates, label smoothing 0.1, validation every
  400 updates, the last 2 checkpoints averaged; bf16 on CUDA, fp32 on a CPU (about 2 hours a run on 2 cores:
  ``book/results/cpu/train_small.json``).
* ``full``: the paper's recipe (d=512 presets, WMT14 En-De, 4096 tokens x 8 GPUs).

Speed is measured at the paper's d=512 shapes at every scale (it depends on shapes, not on weights).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from canlib.model.config import ABLATION_SYSTEMS, PAPER_SYSTEMS, SCALES, scaled_preset


@dataclass(frozen=True)
class ScaleSpec:
    name: str
    corpus: str
    corpus_scale: str
    train: dict[str, Any]
    beam: int = 4  # the paper's beam for BLEU and speed
    speed_sentences: int = 8  # source sentences per timed repeat
    speed_repeats: int = 5  # medians are taken over these
    forced_length: int = 30  # generated tokens per sentence when timing random-weight models
    beam_sweep: tuple[int, ...] = (1, 4, 16, 64, 256)
    length_sweep: tuple[int, ...] = (10, 20, 30, 40, 50)
    batch_sweep: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    finetune_steps: int = 0
    seeds: int = 1  # seeds of the Table 2 systems and the two ablations
    depth_seeds: int = 1  # seeds of the depth systems (9/4, 14/1)
    directions: tuple[str, ...] = ()  # further corpora on which the direction systems are trained
    direction_seeds: int = 1

    def preset(self, system: str) -> str:
        """The preset name of ``system`` at this scale ("can" -> "small-can")."""
        return scaled_preset(system, self.name)


_SPECS = {
    "tiny": ScaleSpec(
        "tiny",
        "multi30k-en-de",
        "tiny",
        dict(
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
        speed_sentences=4,
        speed_repeats=3,
        beam_sweep=(1, 4, 16),
        length_sweep=(10, 30, 50),
        batch_sweep=(1, 4, 16, 64),
        finetune_steps=60,
    ),
    "small": ScaleSpec(
        "small",
        "multi30k-en-de",
        "small",
        dict(
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
        seeds=3,
        depth_seeds=2,
        direction_seeds=2,
        directions=("multi30k-de-en", "multi30k-en-fr", "multi30k-fr-en", "multi30k-en-cs", "multi30k-cs-en"),
    ),
    "full": ScaleSpec(
        "full",
        "wmt14-en-de",
        "full",
        dict(lr=7e-4, warmup=8000, max_tokens=4096, update_freq=8, max_epochs=50, patience=5, label_smoothing=0.1),
        finetune_steps=8000,
    ),
}


DIRECTION_SYSTEMS = ("baseline", "balanced", "can")  # trained on every direction (paper Tables 2 and 3)
SEEDED_SYSTEMS = tuple(dict.fromkeys(PAPER_SYSTEMS + ABLATION_SYSTEMS))  # trained with ScaleSpec.seeds seeds


def scale_spec(scale: str) -> ScaleSpec:
    """The corpus, presets, budget and seeds of ``scale``."""
    if scale not in _SPECS:
        raise ValueError(f"SCALE={scale!r}: choose one of {', '.join(SCALES)}")
    return _SPECS[scale]


def planned_seeds(scale: str, system: str, corpus: str | None = None) -> tuple[int, ...]:
    """The seeds of ``system`` on ``corpus`` (default: the scale's own) in the plan of ``scale``
    (``canlib.repro.experiments.run.plan`` trains them): ``seeds`` for the Table 2 systems and ablations and
    ``depth_seeds`` for the depth systems on the main corpus, ``direction_seeds`` for Baseline, Balanced and
    CAN on the further directions; () for anything else."""
    spec = scale_spec(scale)
    if corpus in (None, spec.corpus):
        count = spec.seeds if system in SEEDED_SYSTEMS else spec.depth_seeds if system.startswith("depth-") else 0
    else:
        count = spec.direction_seeds if corpus in spec.directions and system in DIRECTION_SYSTEMS else 0
    return tuple(range(1, count + 1))
