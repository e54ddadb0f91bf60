"""What a run reads: its prepared corpus (prepared on first use, offline from ``CANLIB_DATA_DIR``), batches of a
whole split in a fixed order for the analyses, and splits translated and scored (:func:`score_splits`, the one
place a model's translations are scored: evaluation, a teacher's BLEU, greedy validation BLEU, the analyses)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from canlib.bleu import corpus_scores
from canlib.catalogue import scale_spec
from canlib.data.batching import collate, sorted_batches
from canlib.data.binarized import PreparedCorpus
from canlib.data.preparation import prepared
from canlib.decoding.translate import evaluation_batch_size, translate_lines, translate_sets
from canlib.model.config import ModelConfig
from canlib.model.seq2seq import Seq2Seq
from repro.experiments.run import Run


def corpus_of(run: Run) -> PreparedCorpus:
    """The prepared corpus ``run`` trains and is scored on (progress bars in a terminal, none in a chapter)."""
    return prepared(run.corpus, scale_spec(run.scale).corpus_scale, progress=sys.stderr.isatty())


def batches(split: Any, cfg: ModelConfig, max_tokens: int = 4096) -> Iterator[dict[str, Any]]:
    """Length-sorted batches of a whole split, in a fixed order."""
    for indices in sorted_batches(split, max_tokens):
        yield collate(split, indices.tolist(), cfg.pad_id, cfg.bos_id, cfg.eos_id)


def teacher_forced_batches(
    data: PreparedCorpus, split: str, cfg: ModelConfig
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(src, tgt_in) batches of a split, of at most 4,096 tokens."""
    for batch in batches(data.split(split), cfg):
        yield batch["src"], batch["tgt_in"]


Scored = tuple[list[str], dict[str, Any]]  # a split's hypotheses and their scores (canlib.bleu.corpus_scores)


def score_splits(model: Seq2Seq, data: Any, splits: Sequence[str], beam: int) -> dict[str, Scored]:
    """Beam-search translations of each of ``splits`` of a prepared corpus and their BLEU scores.

    On a GPU every split goes through one length-sorted pass of large batches (:func:`translate_sets`; the search
    gives a sentence the same tokens in any batch, and fewer, fuller batches keep the GPU busy); on a CPU each split
    is translated on its own in :func:`evaluation_batch_size` batches, as the stored tiny results were made."""
    device = next(model.parameters()).device
    sources = {split: list(data.split(split).src_text) for split in splits}
    if device.type == "cuda":
        translated = translate_sets(model, data.vocab, sources, beam)
    else:
        translated = {
            split: translate_lines(model, data.vocab, lines, beam=beam, batch_size=evaluation_batch_size(device))
            for split, lines in sources.items()
        }
    return {  # BLEU's Moses tokenization follows the target language
        split: (hyps, corpus_scores(hyps, list(data.split(split).tgt_text), lang=data.tgt_lang))
        for split, hyps in translated.items()
    }


def score_split(model: Seq2Seq, data: Any, split: str, beam: int) -> Scored:
    """:func:`score_splits` of one split."""
    return score_splits(model, data, (split,), beam)[split]
