"""``trainer(run)``: the Trainer that trains a run, the one place a run's training is set up.

A run trains (or resumes, from the checkpoints of an interrupted call) in its own folder
(:attr:`repro.experiments.run.Run.folder`) with :class:`canlib.training.trainer.Trainer` on its prepared corpus,
at its budget, device and precision; the pool's task (:func:`repro.experiments.pool.train_and_store`) calls its
``fit``. Its variant decides the rest: distilled targets from its parent
(:mod:`repro.experiments.distill`), weights to start from (its parent converted to CAN, or its parent's encoder
with a fresh CAN decoder), greedy validation BLEU at every validation. A parent must be trained first; the
process pool of :mod:`repro.experiments.pool` orders that.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import torch

from canlib.model.conversion import standard_to_can
from canlib.model.seq2seq import Seq2Seq
from canlib.training.config import TrainConfig
from canlib.training.stacked import StackedTrainer
from canlib.training.trainer import Trainer
from repro.experiments.corpus import corpus_of, score_split
from repro.experiments.distill import distilled_corpus
from repro.experiments.run import Run, trained


def greedy_valid_bleu(data: Any, model: Any) -> float:
    """The trainer's validation hook of the budget study (bound to the run's corpus): greedy sacreBLEU of the
    validation split."""
    return score_split(model, data, "valid", beam=1)[1]["bleu"]


def init_weights(run: Run) -> dict[str, torch.Tensor] | None:
    """The weights ``run`` starts from: none (a fresh init), or from its parent (see the module docstring)."""
    how = run.variant.init
    if not how:
        return None
    parent = trained(run.variant.parent).model()
    converted = standard_to_can(parent)
    if how == "converted":
        return converted.state_dict()
    torch.manual_seed(1)  # the random decoder of the equal-budget row
    weights = Seq2Seq(converted.cfg).state_dict()
    weights.update({k: v for k, v in parent.state_dict().items() if k.startswith(("embed.", "encoder_"))})
    return weights


def trainer(run: Run) -> Trainer:
    """The Trainer of ``run`` in its folder, resuming its checkpoints where an interrupted call left some; its
    ``fit()`` trains the run and writes ``result.json`` there."""
    data = corpus_of(run)
    split = distilled_corpus(run)[0] if run.variant.targets == "distilled" else data.split("train")
    cfg = TrainConfig(**{"precision": run.precision, **run.budget, "device": run.device})
    return Trainer(
        run.model_config(data.vocab.size),
        cfg,
        split,
        data.split("valid"),
        run.folder,
        vocab=data.vocab,
        valid_bleu=partial(greedy_valid_bleu, data) if run.variant.valid_bleu else None,
        data_path=str(data.path),
        resume=(run.folder / "checkpoints").exists(),
        init_weights=init_weights(run),
    )


def stacked_trainer(runs: Sequence[Run]) -> StackedTrainer:
    """The seeds ``runs`` of one system (:func:`repro.experiments.pool.stack_groups`) as one stacked model,
    each in its own folder, resuming where an interrupted call left checkpoints."""
    first = runs[0]
    data = corpus_of(first)
    cfgs = [TrainConfig(**{"precision": r.precision, **r.budget, "device": r.device}) for r in runs]
    return StackedTrainer(
        first.model_config(data.vocab.size),
        cfgs,
        data.split("train"),
        data.split("valid"),
        [r.folder for r in runs],
        vocab=data.vocab,
        data_path=str(data.path),
        resume=any((r.folder / "checkpoints").exists() for r in runs),
    )
