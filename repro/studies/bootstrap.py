"""The test sentences' noise of a BLEU contrast: sacreBLEU's paired bootstrap, pooled over each system's seeds and
scored on the metric the verdicts read (:mod:`repro.studies.verdict` joins it with the seeds' noise)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from canlib.bleu import bleu_of_statistics, sentence_statistics
from canlib.io import atomic_write_bytes, cache_dir

BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's default number of paired-bootstrap resamples
BOOTSTRAP_SEED = 12345  # sacreBLEU's default seed (its SACREBLEU_SEED)


def bootstrap_contrast(
    terms: Sequence[tuple[float, Sequence[Sequence[str]]]],
    refs: Sequence[str],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
    lang: str | None = None,
) -> np.ndarray:
    """The contrast of the seeds' mean BLEU on each of ``samples`` resamples of the sentences, the same resampled
    sentences for every run of every term (sacreBLEU's paired bootstrap, pooled over seeds). ``lang``: score the
    paper's tokenized BLEU (Moses for that language), the metric the verdicts read; None: sacreBLEU's 13a."""
    refs = tuple(refs)
    out = np.zeros(samples)
    for weight, runs in terms:
        out += weight * np.mean([_resampled(tuple(hyps), refs, samples, seed, lang) for hyps in runs], axis=0)
    return out


@lru_cache(maxsize=16)
def _counts(n: int, samples: int, seed: int) -> np.ndarray:
    """How often each of ``n`` sentences is drawn in each resample, drawn as sacreBLEU draws its indices."""
    idx = np.random.default_rng(seed).choice(n, size=(samples, n), replace=True)
    counts = np.zeros((samples, n))
    np.add.at(counts, (np.arange(samples)[:, None], idx), 1.0)
    return counts


@lru_cache(maxsize=1024)
def _resampled(
    hyps: tuple[str, ...], refs: tuple[str, ...], samples: int, seed: int, lang: str | None = None
) -> np.ndarray:
    """One run's BLEU on each resample (tokenized BLEU with ``lang``, else sacreBLEU's 13a). A run appears in many
    contrasts and chapters, so its scores are kept per process and on disk (``cache_dir()/bootstrap``, keyed by the
    sentences, the draw, the metric and sacreBLEU's version)."""
    import sacrebleu

    key = [hyps, refs, samples, seed, sacrebleu.__version__] + ([lang] if lang else [])
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:20]
    path = cache_dir() / "bootstrap" / f"{digest}.json"
    if path.is_file():
        return np.array(json.loads(path.read_text(encoding="utf-8")))
    stats = np.asarray(sentence_statistics(list(hyps), list(refs), lang), dtype=np.float64)
    sums = (_counts(len(refs), samples, seed) @ stats).round().astype(np.int64)
    scores = [bleu_of_statistics(row) for row in sums.tolist()]
    atomic_write_bytes(json.dumps(scores).encode(), path)
    return np.array(scores)
