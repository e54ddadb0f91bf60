"""Sequence-level knowledge distillation (the paper's Table 4): a teacher run's beam-4 translations of the
training set become a student's targets.

The distilled targets are cached per teacher (they are not stored in the repository); what is stored, in each
student's result, is their provenance: the teacher, its BLEU on valid and test measured on the model that
translated, the pairs, the targets' lengths and a hash of them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import torch

from canlib.bleu import corpus_scores
from canlib.catalogue import scale_spec
from canlib.data.batching import PairList
from canlib.decoding.search import SearchSettings
from canlib.decoding.translate import evaluation_batch_size, searched_batches
from canlib.io import atomic_write_bytes, cache_dir
from repro.experiments.corpus import corpus_of, score_splits
from repro.experiments.run import Run, trained
from repro.results.layout import code_version, key
from repro.results.studies import DISTILL_BEAM, REDUCED_PAIRS


def distill_targets(model: Any, sources: list[list[int]], beam: int = DISTILL_BEAM) -> list[list[int]]:
    """The model's beam-search translation (subword ids, no BOS/EOS) of each source, in order; sentences are
    batched longest first so that padding stays small, in :func:`evaluation_batch_size` batches."""
    out: list[list[int]] = [[] for _ in sources]
    batch_size = evaluation_batch_size(model.embed.weight.device)
    with torch.inference_mode():
        for chunk, result in searched_batches(model, sources, SearchSettings(beam=beam), batch_size, progress=False):
            for i, tokens in zip(chunk, result.tokens):
                out[i] = [int(t) for t in tokens]
    return out


def distilled_corpus(student: Run) -> tuple[PairList, dict[str, Any]]:
    """The training split a student with distilled targets reads (pairs whose translation is empty are dropped)
    and the provenance of those targets. Its teacher (``student.variant.parent``) must be trained; the targets
    are computed once per teacher and cached. A reduced budget (an end-to-end test) distils only the first
    ``REDUCED_PAIRS`` pairs."""
    teacher = student.variant.parent
    data = corpus_of(student)
    train = data.split("train")
    pairs = min(len(train), REDUCED_PAIRS) if student.reduced is not None else len(train)
    sources = [train[i][0].tolist() for i in range(pairs)]
    identity = key(code_version() if student.scale == "tiny" else None, pairs)  # as a run folder's, at tiny
    path = cache_dir() / "distill" / student.scale / f"{teacher.folder.name}-{identity}.json"
    if not path.exists():
        model = trained(teacher).model().to(teacher.device)
        targets = distill_targets(model, sources, DISTILL_BEAM)
        scored = score_splits(model, data, ("valid", "test"), scale_spec(student.scale).beam)
        teacher_bleu = {split: {k: scores[k] for k in ("bleu", "tok_bleu")} for split, (_, scores) in scored.items()}
        refs = [data.vocab.decode(train[i][1].tolist()) for i in range(pairs)]
        hyps = [data.vocab.decode(t) for t in targets]
        record = {
            "targets": targets,
            "provenance": {
                "teacher": teacher.system,
                "teacher_seed": teacher.seed,
                "teacher_preset": teacher.preset,
                "teacher_train": teacher.budget,
                "teacher_bleu": teacher_bleu,
                "beam": DISTILL_BEAM,
                "pairs": pairs,
                "empty": sum(1 for t in targets if not t),
                "train_bleu_vs_real_targets": corpus_scores(hyps, refs, lang=data.tgt_lang)["bleu"],
                "mean_subwords": {
                    "distilled": float(np.mean([len(t) for t in targets])),
                    "real": float(np.mean([len(train[i][1]) for i in range(pairs)])),
                },
                "sha256": hashlib.sha256(json.dumps(targets).encode()).hexdigest(),
            },
        }
        if teacher.variant.study:
            record["provenance"]["teacher_run"] = teacher.name
        atomic_write_bytes(json.dumps(record).encode(), path)
    record = json.loads(path.read_text(encoding="utf-8"))
    keep = [i for i, t in enumerate(record["targets"]) if t]
    return PairList([sources[i] for i in keep], [record["targets"][i] for i in keep]), record["provenance"]
