"""The paper's analyses of trained models as the chapters read them, each one stored result, and what the chapters
print under them.

The engine computes each from the seed-1 runs of a scale's main corpus and stores it (``python -m repro experiment
--studies similarity,errors,attention,conversion``; at tiny, a chapter's explicit ``train_missing`` call); here they are
only loaded, through a :class:`~repro.studies.store.Store`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from canlib.catalogue import LABELS, scale_spec
from canlib.data.corpora import get_corpus
from canlib.model.config import preset
from repro.studies.paper import paper_numbers
from repro.studies.store import Store, describe_provenances


def similarity(store: Store, system: str = "baseline") -> tuple[dict[str, Any], dict[str, Any]]:
    """Figure 2: cosine similarity of sub-layer inputs in the trained 6/6 Baseline (raw and LayerNorm'd), over
    the validation split: {"residual": {...}, "normalized": {...}}; ``system="balanced"``: the same for Balanced's
    two decoder layers (the study ``similarity-balanced``)."""
    return store.analysis(similarity_study(system))


def similarity_study(system: str) -> str:
    """The stored name of a system's similarity study: ``similarity`` for the Baseline (the paper's model)."""
    return "similarity" if system == "baseline" else f"similarity-{system}"


def error_buckets(store: Store) -> tuple[dict[str, Any], dict[str, Any]]:
    """Figure 6 for the seed-1 Balanced and CAN on the test split: {system: {"frequency": ..., "length": ...}}."""
    return store.analysis("errors")


def attention_study(store: Store) -> tuple[dict[str, Any], dict[str, Any]]:
    """The maps of one test pair in the seed-1 Balanced and CAN (per layer, mean over heads) and CAN's alpha over
    the test split (summary, histogram, mean per target position)."""
    return store.analysis("attention")


def conversion_study(store: Store) -> tuple[dict[str, Any], dict[str, Any]]:
    """Balanced converted to CAN, before and after a short fine-tune, against the rows a fair comparison needs:
    {"rows": [{system, updates, valid loss, test BLEU, test tok-BLEU}], "finetune": budget}."""
    return store.analysis("conversion")


def approximations_study(store: Store) -> tuple[dict[str, Any], dict[str, Any]]:
    """The compression chapter's trained-model measurements on the seed-1 Balanced: {"model", "sentences",
    "valid_nll", "uniform_nll", "layers": [per decoder layer: stage errors, Eq. 6 gaps, entropy, alpha],
    "conversion": {variant: validation NLL}} (stored by the engine's ``approximations`` analysis)."""
    return store.analysis("approximations")


def final_losses(log: list[dict[str, Any]]) -> tuple[float, float]:
    """(train loss, valid loss) at the last validation of a training log."""
    rows = [r for r in log if r.get("valid_loss") is not None]
    if not rows:
        raise ValueError("the training log holds no validation record")
    train_rows = [r["train_loss"] for r in log if r.get("train_loss") is not None]
    return float(train_rows[-1]) if train_rows else float("nan"), float(rows[-1]["valid_loss"])


# -- what the chapters print under a study, and the parts of a study they may show -----------------

# where the full recipe's label smoothing comes from, and how canlib's loss differs from fairseq's today
SMOOTHING = (
    "fairseq's WMT14 Transformer recipe sets it, its criterion's default is 0; not stated in the paper. canlib "
    "spreads it over all V words, as fairseq's earlier criterion did; its current one spreads it over the V\u22121 "
    "words other than the target"
)
MIN_BUCKET_SENTENCES = 30  # an error bucket with fewer test sentences is too small for its BLEU to mean anything


def models_provenance(store: Store, systems: tuple[str, ...], study_prov: dict[str, Any]) -> str:
    """Two lines for under a study: the device, commit and budget that trained the seed-1 models it read (a study
    stored at another commit than the run read weights trained again for it: that training is named, the run
    beside it), then where the study itself ran (a study of GPU-trained models may run on a CPU: both are said)."""
    lines = []
    study = str(study_prov["commit"])[:7]
    for system in systems:
        prov = store.run(system, 1)[1]
        steps = (prov.get("budget") or {}).get("max_steps")
        trained = f"trained on {prov['device']} at commit {str(prov['commit'])[:7]}, {str(prov['date'])[:10]}"
        if study != str(prov["commit"])[:7]:  # stored at another commit: the configuration trained again for it
            trained = (
                f"trained again at commit {study} for this study, {str(study_prov['date'])[:10]} (the stored run of "
                f"that seed, another training of the same configuration: {trained})"
            )
        lines.append(f"{LABELS[system]} (seed 1{f', {steps:,} updates' if steps else ''}): {trained}")
    return (
        "models: " + "; ".join(lines) + f"\nstudy: computed on {study_prov['device']} at commit "
        f"{str(study_prov['commit'])[:7]}, {study_prov['date']} (scale={study_prov['scale']})"
    )


def bucket_rows(buckets: dict[str, Any], key: str, min_sentences: int = MIN_BUCKET_SENTENCES) -> list[dict[str, Any]]:
    """One row per bucket of the error study (``key``: "frequency" or "length"): its label, sentences, Balanced's
    and CAN's BLEU, CAN minus Balanced, and ``shown``: False for a bucket under ``min_sentences`` sentences, whose
    BLEU (NaN when empty) a chapter must not present as a result."""
    a, b = buckets["balanced"][key], buckets["can"][key]
    if a["labels"] != b["labels"] or a["sentences"] != b["sentences"]:
        raise ValueError(f"error buckets by {key}: balanced and can were bucketed differently")
    rows = []
    for label, n, x, y in zip(a["labels"], a["sentences"], a["bleu"], b["bleu"]):
        shown = n >= min_sentences and np.isfinite(x) and np.isfinite(y)
        rows.append(
            {
                "bucket": label,
                "sentences": int(n),
                "balanced": float(x),
                "can": float(y),
                "delta": float(y - x) if shown else float("nan"),
                "shown": bool(shown),
            }
        )
    return rows


def seed_curves(logs: list[list[dict[str, Any]]], column: str, every: int | None = None) -> dict[str, np.ndarray]:
    """Mean, sample sd (0 for one seed), min and max over seeds of ``column`` ("train_loss" or "valid_loss") at
    the updates every log recorded it. ``every`` (the run's ``log_every``) keeps only updates that are its
    multiples: the trainer also logs the few updates that end an epoch, whose short window would draw a zigzag."""
    if not logs:
        raise ValueError("seed_curves: no logs")
    series = [
        {r["step"]: r[column] for r in log if r.get(column) is not None and (not every or r["step"] % every == 0)}
        for log in logs
    ]
    steps = sorted(set.intersection(*(set(s) for s in series)))
    if not steps:
        raise ValueError(f"seed_curves: the logs share no update with a {column} record")
    values = np.array([[s[step] for step in steps] for s in series], dtype=float)  # (seeds, steps)
    sd = values.std(axis=0, ddof=1) if len(logs) > 1 else np.zeros(len(steps))
    return {
        "step": np.array(steps),
        "mean": values.mean(axis=0),
        "sd": sd,
        "min": values.min(axis=0),
        "max": values.max(axis=0),
        "seeds": len(logs),
    }


def training_recipes(scales: tuple[str, ...] = ("tiny", "small", "full")) -> list[dict[str, Any]]:
    """What each scale trains, one row per scale, from the code that trains it (``full`` is the paper's recipe):
    width and heads, corpus, its vocabulary and length filter, peak learning rate, warm-up, tokens per update,
    precision, when training stops, what is averaged."""
    setup = paper_numbers()["setup"]
    rows = []
    for scale in scales:
        spec = scale_spec(scale)
        t = spec.train
        model = preset(spec.preset("can"))
        corpus = get_corpus(spec.corpus).scales[spec.corpus_scale]
        tokens = t["max_tokens"] * t.get("update_freq", 1)
        stop = (
            f"{t['max_steps']:,} updates"
            if t.get("max_steps")
            else f"up to {t['max_epochs']} epochs (patience {t.get('patience')})"
        )
        if t.get("average_last") and t.get("valid_every"):
            averaged = f"last {t['average_last']} checkpoints, {t['valid_every']:,} updates apart"
        else:
            averaged = "last 5 epochs' checkpoints (the paper)"
        vocabulary = f"{corpus.vocab_size:,} joint SentencePiece BPE"
        if scale == "full":
            vocabulary += f" (the paper: {setup['bpe_merges']:,} BPE merges)"
        rows.append(
            {
                "scale": scale,
                "d": model.d_model,
                "heads": str(model.heads) + (f" (the paper: {setup['heads']})" if scale == "full" else ""),
                "corpus": f"{spec.corpus} ({spec.corpus_scale})",
                "vocabulary": vocabulary,
                "length filter": f"1-{corpus.max_len} subwords a side, the longer at most {corpus.max_ratio:g} x the "
                "shorter"
                + (
                    f" (the paper: at most {setup['max_subwords']} subwords; the ratio is fairseq's WMT14 recipe)"
                    if scale == "full"
                    else ""
                ),
                "peak lr": f"{t['lr']:g}",
                "warm-up updates": f"{t['warmup']:,}",
                "tokens per update": f"{tokens:,}"
                + (f" ({t['max_tokens']:,} x {t['update_freq']})" if t.get("update_freq") else ""),
                "precision": training_precision(scale),
                "stops after": stop,
                "weights averaged": averaged,
                "label smoothing": f"{t.get('label_smoothing', 0.1):g}"
                + (f" ({SMOOTHING})" if scale == "full" else ""),
            }
        )
    return rows


def training_precision(scale: str) -> str:
    """How a scale trains, in words: at tiny fp32 on a CPU (its definition); at small what its stored runs record; at
    full the paper's mixed precision (canlib would train it in bf16 on CUDA)."""
    if scale == "tiny":
        return "fp32 (CPU)"
    if scale == "full":
        return "mixed precision, fp16 (the paper); canlib: bf16 on CUDA"
    store = Store(scale)
    seeds = store.stored_seeds("can")
    recorded = store.run("can", seeds[0])[1].get("precision") if seeds else None
    return f"{recorded} (the stored runs)" if recorded else "bf16 on CUDA, fp32 on a CPU"


def runs_line(store: Store, systems: tuple[str, ...]) -> str:
    """One line per system for under a figure of several seeds: its seeds, and the devices, commits and dates that
    trained them (at tiny: the seed-1 run trained on this machine)."""
    lines = []
    for system in systems:
        seeds = store.seeds(system)
        d = describe_provenances([store.run(system, seed)[1] for seed in seeds])
        lines.append(
            f"{LABELS[system]}: seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}, "
            f"trained on {d['device']} at commit {d['commit']}, {d['date']} (scale={store.scale})"
        )
    return "\n".join(lines)


def gate_shares(
    study: dict[str, Any], near: float = 0.1, middle: tuple[float, float] = (0.4, 0.6)
) -> list[dict[str, Any]]:
    """Per CAN layer of the stored attention study: the share of its gate values (alpha over every target position
    and head of the test split) within ``near`` of 0 or 1, and in the ``middle`` band, read from the stored
    histogram."""
    edges = np.array(study["alpha_histogram"]["edges"])
    near_ends = (edges[1:] <= near + 1e-12) | (edges[:-1] >= 1 - near - 1e-12)
    band = (edges[:-1] >= middle[0] - 1e-12) & (edges[1:] <= middle[1] + 1e-12)
    out = []
    for row, counts in zip(study["alpha_summary"], study["alpha_histogram"]["counts"]):
        counts = np.array(counts, dtype=float)
        out.append(
            {
                "layer": row["layer"],
                "near_ends": float(counts[near_ends].sum() / counts.sum()),
                "middle": float(counts[band].sum() / counts.sum()),
            }
        )
    return out
