"""The errors chapter (Figure 6): CAN minus Balanced per bucket, the paper's differences, and the whole test set's
gap with its seed spread, against which one seed's buckets must be read."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from canlib.studies.analyses import MIN_BUCKET_SENTENCES, bucket_rows, error_buckets
from canlib.studies.paper import paper_numbers
from canlib.studies.quality import bleu_by_seed
from canlib.studies.scorecard import K_SPREAD, MIN_SEEDS, NOT_TESTED, interval_verdict, seed_difference

BUCKETINGS = ("frequency", "length")


def values(scale: str, root: Path | None = None) -> dict[str, Any]:
    """Bucket counts and differences (tokenized BLEU, CAN - Balanced, seed 1, buckets of at least
    ``MIN_BUCKET_SENTENCES`` sentences), the largest losses, the paper's differences, and the whole test set's
    gap over seeds with its interval and verdict ("CAN below Balanced", the book's one rule)."""
    buckets, _ = error_buckets(scale, root=root)
    rows = {key: bucket_rows(buckets, key) for key in BUCKETINGS}
    shown = {key: [r for r in rs if r["shown"]] for key, rs in rows.items()}
    deltas = [r["delta"] for rs in shown.values() for r in rs]
    lengths = buckets["balanced"]["length"]
    out: dict[str, Any] = {
        "scale": scale, "min_sentences": MIN_BUCKET_SENTENCES, "test_sentences": int(sum(lengths["sentences"])),
        "buckets_shown": len(deltas), "buckets_hidden": sum(not r["shown"] for rs in rows.values() for r in rs),
        "buckets_behind": sum(d < 0 for d in deltas), "buckets_ahead": sum(d > 0 for d in deltas),
        "bucket_gap_min": min(deltas), "bucket_gap_max": max(deltas),
        # source sentences longer than the second length bucket (buckets of 10 words: more than 20 words)
        "long_sentences": int(sum(lengths["sentences"][2:])), "long_words": int(lengths["labels"][1].split("-")[-1]),
    }
    for key, rs in shown.items():
        worst = min(rs, key=lambda r: r["delta"])
        out |= {f"worst_{key}": worst["bucket"], f"worst_{key}_gap": worst["delta"], f"last_{key}": rs[-1]["bucket"]}
    paper = paper_numbers()["fig6_error_en-de"]
    for key, series in (("frequency", paper["word_freq_x1e5"]), ("length", paper["length"])):
        gaps = [c - b for b, c in zip(series["Balanced"], series["CAN"])]
        out |= {f"paper_{key}_ahead": sum(g > 0 for g in gaps), f"paper_{key}_buckets": len(gaps)}
    tok = bleu_by_seed(scale, ["balanced", "can"], metric="tok_bleu", root=root)
    gaps = [c - b for b, c in zip(tok["balanced"], tok["can"])]
    out |= {"seed1_gap": gaps[0], "seeds": len(gaps)}
    return out


def whole_set_gap(scale: str, root: Path | None = None) -> dict[str, Any]:
    """CAN - Balanced on the whole test set over every stored seed (tokenized BLEU): the mean, K_SPREAD standard
    errors, the seeds' range and the verdict of "CAN is below Balanced" by the book's one rule; with fewer than
    ``MIN_SEEDS`` seeds (tiny), the seed-1 gap and ``not tested here``."""
    tok = bleu_by_seed(scale, ["balanced", "can"], metric="tok_bleu", root=root)
    gaps = [c - b for b, c in zip(tok["balanced"], tok["can"])]
    if min(len(v) for v in tok.values()) < MIN_SEEDS:
        return {"seeds": len(gaps), "CAN − Balanced": gaps[0], "CAN below Balanced?": NOT_TESTED}
    diff, se = seed_difference(tok["can"], tok["balanced"])
    return {"seeds": len(gaps), "CAN − Balanced": diff, f"± {K_SPREAD:g} s.e.": K_SPREAD * se,
            "seed pairs from": min(gaps), "seed pairs to": max(gaps),
            "CAN below Balanced?": interval_verdict(diff - K_SPREAD * se, diff + K_SPREAD * se, lambda d: d < 0)}
