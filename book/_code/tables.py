"""The tables and the figure of the results, ablation and depths chapters, built from the stored runs of a
:class:`~repro.studies.store.Store`, and :func:`reading_table`, the form every chapter's table takes on the page.

Each table keeps to the columns one claim needs (a system's seeds, its BLEU with the seed spread, its
difference to Balanced, the paper's); the tests compare each table with the raw files.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from canlib.catalogue import LABELS
from repro.studies.store import Store
from repro.studies.verdict import difference_interval, split_name

# a cell that reads as a number: digits with signs, decimals, thousands, percent, ranges, ratios and spreads
NUMBER_CELL = re.compile(r"^[\s+\-−–±]*\d[\d\s.,:;+\-−–±%()\[\]x×/e]*$")
NUMBER_STYLE = "white-space: nowrap; text-align: right; font-variant-numeric: tabular-nums;"
WORD_STYLE = "white-space: nowrap; text-align: left;"  # one token (a task, a code name): never cut at its hyphen
TEXT_STYLE = "text-align: left;"
CAPTION_STYLE = "caption-side: top; text-align: left; color: inherit; font-size: 1em; padding: 0 0 0.3em 0;"


def reads_as_number(text: str) -> bool:
    """Whether a cell's text is a number a reader reads as one: "+0.54 (+1.5%)", "28.40 ± 0.31", "12/2", "1,200"."""
    return bool(NUMBER_CELL.match(text.strip()))


def reading_table(
    frame: Any,
    caption: str | None = None,
    formats: Mapping[str, str | Callable[[Any], str]] | str | Callable[[Any], str] | None = None,
    precision: int = 2,
    escape: bool = True,
):
    """A chapter's table as the page shows it (a pandas Styler): one header row (a meaningful index becomes the first
    column, a default one is dropped), numbers right-aligned in even-width figures under right-aligned headers and
    never broken across lines, one-word cells (a task like "en-de") never broken at a hyphen, text left-aligned, and
    a caption above. ``formats`` is what ``Styler.format`` takes; other floats get ``precision`` decimals;
    ``escape=False`` keeps cells that are HTML already (links, marked verdicts)."""
    import pandas as pd

    default = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    frame = frame.reset_index(drop=default)
    esc = "html" if escape else None
    styler = frame.style.hide(axis="index").format(precision=precision, thousands=",", escape=esc)
    styler = styler.format_index(escape="html", axis=1)
    if formats is not None:
        styler = styler.format(formats, precision=precision, thousands=",", escape=esc)
    rules = []
    for i, column in enumerate(frame.columns):  # the cells keep their lines; a header may wrap between its words
        values = frame[column].dropna()
        cells = [str(v) for v in values if str(v).strip()]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            style = NUMBER_STYLE
        elif any(reads_as_number(v) for v in cells) and all(reads_as_number(v) or len(v.split()) <= 2 for v in cells):
            style = NUMBER_STYLE  # numbers, with a word or two where a number is missing ("too few")
        elif cells and all(len(v.split()) == 1 for v in cells):
            style = WORD_STYLE
        else:
            style = TEXT_STYLE
        align = "right" if style == NUMBER_STYLE else "left"
        rules += [
            {"selector": f"td.col{i}", "props": style},
            {"selector": f"th.col{i}", "props": f"text-align: {align}; vertical-align: bottom;"},
        ]
    styler = styler.set_table_styles(rules, overwrite=False)
    if caption:
        styler = styler.set_caption(caption).set_table_styles(
            [{"selector": "caption", "props": CAPTION_STYLE}], overwrite=False
        )
    return styler


def seed_cell(values: Sequence[float]) -> str:
    """ "mean ± sd" over seeds; "mean (1 seed)" where a spread does not exist."""
    if len(values) == 1:
        return f"{values[0]:.2f} (1 seed)"
    return f"{statistics.fmean(values):.2f} ± {statistics.stdev(values):.2f}"


def bleu_table(
    store: Store,
    systems: Sequence[str],
    paper: dict[str, float] | None = None,
    *,
    against: str = "balanced",
    split: str = "test",
    labels: dict[str, str] | None = None,
):
    """One row per system: seeds, tokenized BLEU (mean ± sd), sacreBLEU (mean), the difference to
    ``against``, and the paper's BLEU and difference (``paper``: {system: BLEU}) when given."""
    import pandas as pd

    labels = labels or LABELS
    tok = store.scores(systems, split, "tok_bleu")
    sacre = store.scores(systems, split, "bleu")
    name = split_name(split)
    rows = []
    for s in tok:  # the systems with stored runs, in the order asked
        row = {
            "system": labels.get(s, s),
            "seeds": len(tok[s]),
            f"{name} tok-BLEU": seed_cell(tok[s]),
            "sacreBLEU": statistics.fmean(sacre[s]),
            f"Δ to {labels.get(against, against)}": statistics.fmean(tok[s]) - statistics.fmean(tok[against])
            if against in tok
            else math.nan,
        }
        if paper is not None:
            row["paper BLEU"] = paper[s]
            row["paper Δ"] = paper[s] - paper[against]
        rows.append(row)
    return pd.DataFrame(rows).set_index("system").round(2)


def test_splits(store: Store, system: str = "balanced") -> list[str]:
    """The test splits the runs were scored on ("test" is test2016; small adds the two test2017 sets)."""
    seeds = store.seeds(system)
    return list(store.run(system, seeds[0])[0]["test_splits"]) if seeds else []


def splits_table(store: Store, systems: Sequence[str], splits: Sequence[str]):
    """Tokenized BLEU (mean ± sd over seeds) of each system on each of ``splits``."""
    import pandas as pd

    columns = {}
    for split in splits:
        tok = store.scores(systems, split, "tok_bleu")
        columns[split_name(split)] = {LABELS.get(s, s): seed_cell(v) for s, v in tok.items()}
    frame = pd.DataFrame(columns)
    frame.index.name = "system"
    return frame


def bleu_figure(
    store: Store, systems: Sequence[str], paper: dict[str, float], *, against: str = "balanced", split: str = "test"
):
    """Top: tokenized BLEU per system, every seed as a dot and the mean with its sd as an error bar.
    Bottom: each system's difference to ``against``, ours (with its 95 % seed interval, Student's t as every BLEU claim
    reads it) beside the paper's."""
    import matplotlib.pyplot as plt
    import numpy as np

    tok = store.scores(systems, split, "tok_bleu")
    shown = [s for s in systems if s in tok]
    names = [LABELS.get(s, s) for s in shown]
    x = np.arange(len(shown))
    # stacked, at the text column's width: two panels side by side shrink their labels below a legible size
    fig, (left, right) = plt.subplots(2, 1, figsize=(7.5, 7.0), constrained_layout=True)
    for i, s in enumerate(shown):
        left.scatter([i] * len(tok[s]), tok[s], color="tab:gray", s=12, zorder=2)
    means = [statistics.fmean(tok[s]) for s in shown]
    sds = [statistics.stdev(tok[s]) if len(tok[s]) > 1 else 0.0 for s in shown]
    left.errorbar(x, means, yerr=sds, fmt="o", color="tab:blue", capsize=4, zorder=3, label="mean ± sd over seeds")
    left.set_xticks(x, names)
    left.set_ylabel(f"{split_name(split)} tokenized BLEU")
    left.set_title(f"ours ({store.scale}, Multi30k En-De)")
    left.legend(fontsize=8)
    others = [s for s in shown if s != against]
    xo = np.arange(len(others))
    ours = [statistics.fmean(tok[s]) - statistics.fmean(tok[against]) for s in others]
    cis = [difference_interval(tok[s], tok[against]) or (d, d) for s, d in zip(others, ours)]
    err = [[d - low for d, (low, _) in zip(ours, cis)], [high - d for d, (_, high) in zip(ours, cis)]]
    right.bar(xo - 0.2, ours, 0.4, yerr=err, capsize=4, color="tab:blue", label="ours (95 % seed interval)")
    right.bar(
        xo + 0.2,
        [paper[s] - paper[against] for s in others],
        0.4,
        color="tab:gray",
        label="paper (Table 2, WMT14 En-De, average of 3 runs)",
    )
    right.axhline(0, color="black", linewidth=0.8)
    right.set_xticks(xo, [LABELS.get(s, s) for s in others])
    right.set_ylabel(f"BLEU minus {LABELS.get(against, against)}")
    right.set_title(f"difference to {LABELS.get(against, against)}")
    right.legend(fontsize=8)
    return fig
