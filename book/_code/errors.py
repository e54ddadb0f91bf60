"""The errors chapter (Figure 6): CAN minus Balanced per bucket, the paper's differences, and the whole test set's
gap over seeds (the claims registry's "CAN scores below Balanced"), against which one seed's buckets must be read."""

from __future__ import annotations

from typing import Any

import numpy as np

from _code.marks import marks
from _code.prose import by_verdict, lead_sentence, sets_sentence
from _code.readers import error_buckets
from _code.tables import reading_table
from repro.studies import paper
from repro.studies.claims import judged
from repro.studies.store import Store

BUCKETINGS = ("frequency", "length")
CLAIM = "can-below-balanced"
MIN_BUCKET_SENTENCES = 30  # an error bucket with fewer test sentences is too small for its BLEU to mean anything


def values(store: Store) -> dict[str, Any]:
    """Bucket counts and differences (tokenized BLEU, CAN - Balanced, seed 1, buckets of at least
    ``MIN_BUCKET_SENTENCES`` sentences), the largest losses, the paper's differences, and the registry's verdict of
    "CAN scores below Balanced" on the whole sets."""
    buckets, _ = error_buckets(store)
    rows = {key: bucket_rows(buckets, key) for key in BUCKETINGS}
    shown = {key: [r for r in rs if r["shown"]] for key, rs in rows.items()}
    deltas = [r["delta"] for rs in shown.values() for r in rs]
    lengths = buckets["balanced"]["length"]
    out: dict[str, Any] = {
        "scale": store.scale,
        "min_sentences": MIN_BUCKET_SENTENCES,
        "test_sentences": int(sum(lengths["sentences"])),
        "buckets_shown": len(deltas),
        "buckets_hidden": sum(not r["shown"] for rs in rows.values() for r in rs),
        "buckets_behind": sum(d < 0 for d in deltas),
        "bucket_gap_min": min(deltas),
        "bucket_gap_max": max(deltas),
        # source sentences longer than the second length bucket (buckets of 10 words: more than 20 words)
        "long_sentences": int(sum(lengths["sentences"][2:])),
        "long_words": int(lengths["labels"][1].split("-")[-1]),
    }
    for key, rs in shown.items():
        worst = min(rs, key=lambda r: r["delta"])
        out |= {f"worst_{key}": worst["bucket"], f"worst_{key}_gap": worst["delta"]}
        last = "most frequent" if key == "frequency" else "longest"
        out[f"worst_{key}_where"] = f"{'in' if worst is rs[-1] else 'not in'} the {last} bucket scored"
    behind, ahead = out["buckets_behind"], sum(d > 0 for d in deltas)
    out["behind_words"] = "in every one" if behind == len(deltas) else f"in {behind}, and ahead in {ahead},"
    figure = paper.paper_numbers()["fig6_error_en-de"]
    for key, series in (("frequency", figure["word_freq_x1e5"]), ("length", figure["length"])):
        gaps = [c - b for b, c in zip(series["Balanced"], series["CAN"])]
        out |= {f"paper_{key}_ahead": sum(g > 0 for g in gaps), f"paper_{key}_buckets": len(gaps)}
    tok = store.scores(["balanced", "can"])
    out["seed1_gap"] = tok["can"][0] - tok["balanced"][0]
    out["takeaway_sentence"] = by_verdict(
        judged(store)[CLAIM].word,
        "CAN scores below Balanced, and the buckets below show where its lost BLEU lies.",
        "CAN does not score below Balanced here, so the buckets below look for a loss the totals do not show.",
        "Whether CAN scores below Balanced at all is not settled by these runs; the buckets below show where the "
        "two differ most.",
    )
    below = judged(store)[CLAIM]
    out["below_lead"] = lead_sentence(
        below, "The word comes from the {budget} runs, with {seeds} seeds of each system, over the {others}: {rule}."
    )
    out["below_sets"] = sets_sentence(
        below,
        (
            "Set by set, CAN's loss is beyond doubt on {met} of the {total} test sets",
            "absent on {missed}",
            "unclear on {open}",
        ),
        "No test set of the {total} shows CAN's loss beyond the seeds' spread.",
    )
    return out | marks(store, [CLAIM])


def paper_table():
    """The paper's Figure 6 as numbers (read off its figure, ``paper_numbers.json``): per bucket of each axis,
    Balanced's and CAN's BLEU and CAN - Balanced."""
    import pandas as pd

    figure = paper.paper_numbers()["fig6_error_en-de"]
    rows = []
    for axis, key, unit in (("word frequency", "word_freq_x1e5", " (x 1e5)"), ("translation length", "length", "")):
        series = figure[key]
        for x, b, c in zip(series["x"], series["Balanced"], series["CAN"]):
            rows.append({"axis": axis, "bucket up to": f"{x}{unit}", "Balanced": b, "CAN": c, "CAN − Balanced": c - b})
    frame = pd.DataFrame(rows)
    caption = "The paper's Figure 6 (WMT14 En-De, BLEU per bucket, the paper's numbers)"
    return reading_table(frame, caption, formats={"CAN − Balanced": "{:+.2f}"})


def bucket_table(rows: list[dict[str, Any]], caption: str):
    """Our buckets of one axis: sentences, each system's tokenized BLEU and CAN - Balanced; a bucket under
    ``MIN_BUCKET_SENTENCES`` sentences shows its size and no score."""
    import pandas as pd

    frame = pd.DataFrame(
        [
            {
                "bucket": r["bucket"],
                "sentences": r["sentences"],
                "Balanced": f"{r['balanced']:.2f}" if r["shown"] else "too few",
                "CAN": f"{r['can']:.2f}" if r["shown"] else "too few",
                "CAN − Balanced": f"{r['delta']:+.2f}" if r["shown"] else "",
            }
            for r in rows
        ]
    )
    return reading_table(frame, caption)


def whole_set_gap(store: Store) -> dict[str, Any]:
    """CAN - Balanced on the whole test set over every stored seed (tokenized BLEU, the main plan's budget): the
    mean, half its 95 % seed interval (the registry's of "CAN scores below Balanced" at 1x) and the seeds'
    range; the verdict itself is glued from :func:`values`."""
    tok = store.scores(["balanced", "can"])
    gaps = [c - b for b, c in zip(tok["balanced"], tok["can"])]
    j = judged(store)[CLAIM]
    one = j.at(1) or j
    row: dict[str, Any] = {"seeds": len(gaps), "CAN − Balanced": sum(gaps) / len(gaps)}
    test = next((s for s in one.sets if s["split"] == "test"), None)
    if test and test["seed_interval"]:
        row["± seed interval (95 %)"] = (test["seed_interval"][1] - test["seed_interval"][0]) / 2
    if len(gaps) > 1:
        row |= {"seed pairs from": min(gaps), "seed pairs to": max(gaps)}
    return row


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
