"""``evaluate(run)``: a trained run's beam-search translations of valid and every test split, scored with BLEU,
stored as its result with provenance and its hypotheses beside it.

The result (scores per split, lengths, parameter count, the training log and budget) is what the chapters read
(through the book's store, from the files alone); the hypotheses are plain text, one line per source sentence, so
``python -m repro rescore`` recomputes every stored sacreBLEU from them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from canlib.catalogue import scale_spec
from canlib.io import atomic_write_bytes
from repro.experiments.corpus import corpus_of, score_splits
from repro.experiments.distill import distilled_corpus
from repro.experiments.run import Run, load, trained
from repro.results.files import load_result, provenance, save_result
from repro.results.layout import SCORE_KEYS, code_version, hyp_file


def check_stored_budget(run: Run) -> None:
    """A stored result of ``run`` made with another training budget is an error, never silently reused."""
    path = run.result_path
    if not path.is_file():
        return
    stored = load_result(path)[1]["config"].get("train")
    if stored != run.budget:
        diff = {
            k: (stored.get(k), run.budget.get(k))
            for k in sorted(set(stored) | set(run.budget))
            if stored.get(k) != run.budget.get(k)
        }
        raise ValueError(
            f"{path}: stored with another training budget (field: (stored, asked)) {diff}; "
            "give another --out or delete the stored run"
        )


def evaluate(run: Run) -> tuple[dict[str, Any], dict[str, Any]]:
    """Score the trained ``run`` (:func:`repro.experiments.run.trained`; this never trains) on valid and every
    test split with the scale's beam, write the hypotheses beside its result file, and store the result with
    its provenance where the run says (:attr:`~repro.experiments.run.Run.result_path`): a student of
    distilled targets also records where they came from. A result stored already is returned as it is, once its
    budget is checked."""
    check_stored_budget(run)
    path = run.result_path
    if path.is_file():
        return load(run)
    finished = trained(run)
    data = corpus_of(run)
    beam = scale_spec(run.scale).beam
    model = finished.model().to(run.device)
    out: dict[str, Any] = {
        "system": run.system,
        "seed": run.seed,
        "corpus": run.corpus,
        "src_lang": data.meta.get("src_lang"),
        "tgt_lang": data.tgt_lang,
        "beam": beam,
        "test_splits": list(data.test_splits),
        "params": model.num_parameters(),
        "scores": {},
        "lengths": {},
        "hyp_files": {},
        "training": {k: finished.result.get(k) for k in ("stop_reason", "step", "epoch", "wall_s", "last_valid")},
        "log": finished.log(),
    }
    for split, (hyps, scores) in score_splits(model, data, ("valid", *data.test_splits), beam).items():
        refs = list(data.split(split).tgt_text)
        out["scores"][split] = {k: scores[k] for k in SCORE_KEYS}
        out["lengths"][split] = {
            "hyp_words_mean": float(np.mean([len(h.split()) for h in hyps])),
            "ref_words_mean": float(np.mean([len(r.split()) for r in refs])),
            "sentences": len(refs),
        }
        hyp = hyp_file(path, split)
        if any("\n" in h for h in hyps):  # the file holds one hypothesis a line
            raise ValueError(f"{hyp}: a hypothesis holds a line break")
        atomic_write_bytes("".join(h + "\n" for h in hyps).encode("utf-8"), hyp)
        out["hyp_files"][split] = hyp.name
    v = run.variant
    if v.study:
        out.update(study=v.study, tag=v.tag, factor=v.budget_factor)
    if v.decoder:
        out["decoder_layers"] = list(v.decoder)
    if v.targets == "distilled":
        out["distilled"] = distilled_corpus(run)[1]
    save_result(
        path, out, provenance(run.scale, {**run.config, "code_version": code_version()}, run.device, **run.provenance)
    )
    return load_result(path)
