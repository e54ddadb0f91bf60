"""What a run reads: its prepared corpus (prepared on first use, offline from ``CANLIB_DATA_DIR``), batches of a
whole split in a fixed order for the analyses, and a split translated and scored."""
from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import torch

from canlib.bleu import corpus_scores
from canlib.data.batching import collate, sorted_batches
from canlib.data.binarized import PreparedCorpus
from canlib.data.preparation import prepared
from canlib.decoding.translate import translate_lines
from canlib.experiments.run import Run
from canlib.model.config import ModelConfig
from canlib.model.seq2seq import Seq2Seq
from canlib.results.scales import scale_spec


def corpus_of(run: Run) -> PreparedCorpus:
    """The prepared corpus ``run`` trains and is scored on (progress bars in a terminal, none in a chapter)."""
    return prepared(run.corpus, scale_spec(run.scale).corpus_scale, progress=sys.stderr.isatty())


def target_lang(data: Any) -> str:
    """The target language of a prepared corpus (Moses tokenization for BLEU follows it)."""
    lang = getattr(data, "tgt_lang", None) or data.meta.get("tgt_lang")
    if not lang:
        raise ValueError(f"{data.path}/meta.json: no tgt_lang")
    return lang


def test_splits(data: Any) -> tuple[str, ...]:
    """The test splits of a prepared corpus, "test" first (older prepared folders have only "test")."""
    return tuple(getattr(data, "test_splits", None) or ("test",))


def batches(split: Any, cfg: ModelConfig, max_tokens: int = 4096) -> Iterator[dict[str, Any]]:
    """Length-sorted batches of a whole split, in a fixed order."""
    for indices in sorted_batches(split, max_tokens):
        yield collate(split, indices.tolist(), cfg.pad_id, cfg.bos_id, cfg.eos_id)


def teacher_forced_batches(data: PreparedCorpus, split: str, cfg: ModelConfig,
                           max_tokens: int = 4096) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(src, tgt_in) batches of a split."""
    for batch in batches(data.split(split), cfg, max_tokens):
        yield batch["src"], batch["tgt_in"]


def translate_split(model: Seq2Seq, data: Any, split: str, beam: int) -> tuple[list[str], dict[str, Any]]:
    """Beam-search translations of a split of a prepared corpus, and their BLEU scores (sentences are
    batched, 128 at a time on a GPU, where one sentence at a time would leave it idle)."""
    part = data.split(split)
    batch_size = 128 if next(model.parameters()).device.type == "cuda" else 32
    hyps = translate_lines(model, data.vocab, list(part.src_text), beam=beam, batch_size=batch_size)
    return hyps, corpus_scores(hyps, list(part.tgt_text), lang=target_lang(data))
