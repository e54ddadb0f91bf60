"""Results at a glance: what the reproduction found, in a few plain sentences generated from the claims registry,
then the paper's Tables 2, 4 and 5 beside ours and one verdict per claim of the paper, all from the stored results.
The book's first page glues these; README.md's "Results at a glance" section is generated from the same code
(``python -m canlib.repro.studies.chapters.glance --readme``) and a test compares the two, so README never holds a
number or a verdict the stored results do not give.
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path
from typing import Any

from canlib.catalogue import ALL_SYSTEMS, LABELS
from canlib.io import CHECKOUT_DIR
from canlib.repro.results.studies import STUDENTS
from canlib.repro.studies import paper
from canlib.repro.studies.chapters.ablation import PAPER_ROWS  # Table 5's names of the ablation systems
from canlib.repro.studies.chapters.speed import speed_table
from canlib.repro.studies.claims import judged, mark, table
from canlib.repro.studies.evidence import BLEU, MEANINGS, SPEED, Contrast
from canlib.repro.studies.gpu_results import kernels
from canlib.repro.studies.judges import speed_runs
from canlib.repro.studies.store import Store, describe_provenances
from canlib.repro.studies.tables import reading_table
from canlib.repro.studies.verdict import (
    BOOTSTRAP_SAMPLES,
    CONFIDENCE,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    MIXED,
    NOT_RUN,
    ON_PAR,
)

T2 = ("baseline", "balanced", "san", "aan", "can")
WORDS = (HOLDS, FAILS, MIXED, INCONCLUSIVE, NOT_RUN)
TIMES = {1: "", 2: "twice", 4: "four times"}  # a budget factor in words
LEVELS = (
    "BLEU levels do not compare across the two setups (Multi30k's short image captions at d=256 against "
    "WMT14 news at d=512): only differences between systems of one setup are claims, and even those move with "
    "the budget and the test set, so each difference is also given relative to Balanced's BLEU."
)


def _cell(runs: Any, split: str = "test") -> str:
    if runs is None:
        return "not run"
    return f"{runs.mean(split):.2f} ± {runs.sd(split):.2f} ({len(runs.seeds)})"


def _delta(value: float, level: float) -> str:
    """A difference to Balanced with its size relative to Balanced's BLEU: ``-1.58 (-4.6 %)``."""
    return f"{value:+.2f} ({100 * value / level:+.1f} %)"


def tables(store: Store) -> dict[str, Any]:
    """The three tables (DataFrames) and their provenance: ``table2``, ``table4``, ``table5``, ``provenance``."""
    import pandas as pd

    t2, t4, t5 = paper.table2("en-de"), paper.table4(), paper.table5()
    main = {s: store.runs(s) for s in (*T2, "can_attn", "can_ffn")}
    kd = {s: store.study_runs("distill", s, "kd") for s in STUDENTS}
    balanced = main["balanced"]
    rows = [
        {
            "system": LABELS[s],
            "paper BLEU": f"{t2[LABELS[s]].test_bleu:.2f}",
            "paper Δ": _delta(t2[LABELS[s]].test_bleu - t2["Balanced"].test_bleu, t2["Balanced"].test_bleu),
            "ours tok-BLEU (seeds)": _cell(main[s]),
            "ours Δ": _delta(main[s].mean() - balanced.mean(), balanced.mean())
            if main[s] is not None and balanced is not None
            else "not run",
        }
        for s in T2
    ]
    speed = speed_table(store, T2, {s: t2[LABELS[s]].speed for s in T2}, cpu=False)
    table4 = pd.DataFrame(
        [
            {
                "system": LABELS[s],
                "paper before KD": f"{t4[LABELS[s]].before_kd:.2f}",
                "paper after KD": f"{t4[LABELS[s]].after_kd:.2f}",
                "ours real targets": _cell(main[s]),
                "ours distilled": _cell(kd.get(s)),
            }
            for s in STUDENTS
        ]
    ).set_index("system")
    ops, _ = store.ops()
    table5 = pd.DataFrame(
        [
            {
                "system": name,
                "paper BLEU": f"{t5[name].test_bleu:.2f}",
                "paper speed": f"{100 * (t5[name].speed / t5['Balanced'].speed - 1):+.1f} %",
                "ours tok-BLEU (seeds)": _cell(main[s]),
                "ours kernels per layer": str(int(kernels(ops, s, "per_layer"))),
            }
            for s, name in PAPER_ROWS.items()
        ]
    ).set_index("system")
    plan = describe_provenances(store.provenances(store.runs(s) for s in ALL_SYSTEMS))
    run = (speed_runs(store) or [None])[0]
    none = {"device": "none", "commit": "none", "settings": {"repeats": 0}}
    speed_prov = store.gpu_speed("eager", run)[1] if run else none
    return {
        "table2": pd.DataFrame(rows).set_index("system"),
        "speed": speed.rename_axis("system"),
        "table4": table4,
        "table5": table5,
        "provenance": {
            "runs": plan["count"],
            "device": plan["device"],
            "commit": plan["commit"],
            "budget": plan["budget"],
            "speed_run": run or "none",
            "speed_device": speed_prov["device"],
            "speed_commit": str(speed_prov["commit"])[:7],
            "speed_repeats": int(speed_prov["settings"]["repeats"]),
        },
    }


# -- the finding, in plain sentences ------------------------------------------------------------------------------


def findings(store: Store, html: bool = False) -> list[str]:
    """What this reproduction found, in five plain sentences of at most five numbers each: what holds, what does
    not, how sure, how the paper's claims fare, and what would settle the rest. Every verdict is the registry's word:
    marked HTML with ``html`` (the first page), else the word with the claim's id in backticks (README)."""
    j = judged(store)
    paper_claims = j.all("paper")

    def said(claim_id: str, what: str) -> str:
        word = mark(j[claim_id]) if html else f"{j[claim_id].word} (`{claim_id}`)"
        return f"\u201c{what}\u201d: {word}"

    out = []
    double, faster, size = j["balanced-speed-1.90x"], j["can-faster"], j["can-speed-1.28x"]
    if faster.value is not None and double.value is not None:
        s = faster.strength
        runs = "one GPU run" if len(s["runs"]) == 1 else f"{len(s['runs'])} GPU runs"
        out.append(
            f"What holds is the speed: with every kernel launched, Balanced decodes {double.value:.2f}x as fast as the "
            f"Baseline and CAN {faster.value:.2f}x as fast as Balanced ({runs} of the decoder as it is now, "
            f"{s['repeats']} interleaved repeats); "
            f"{said(double.claim.id, 'Balanced about twice as fast as the Baseline')}; "
            f"{said(faster.claim.id, 'CAN faster than Balanced')}; the paper's size of that gain, "
            f"{said(size.claim.id, f'at least {size.claim.evidence.ok.bound:.2f}x')}."
        )
    keeps = j["can-within-0.5"]
    if keeps.judgement is not None:
        gaps = [row["value"] for row in keeps.sets]
        gap = (
            f"scores {-max(gaps):.2f} to {-min(gaps):.2f} BLEU below Balanced on every evaluation set"
            if max(gaps) < 0
            else f"scores {min(gaps):+.2f} to {max(gaps):+.2f} BLEU against Balanced over the evaluation sets"
        )
        budget = TIMES.get(keeps.budget, f"{keeps.budget}x")
        out.append(
            f"What does not is CAN's BLEU: it {gap} with {budget} the plan's updates, where the paper has "
            f"{keeps.claim.paper.split(' (')[0]}; {said(keeps.claim.id, 'CAN within half a point of Balanced')}."
        )
    halves = [
        (row["interval"][1] - row["interval"][0]) / 2
        for c in paper_claims
        if isinstance(c.claim.evidence, Contrast) and c.meets
        for row in c.sets
        if row["split"] == "test"
    ]
    if halves:
        out.append(
            f"How sure: a BLEU verdict reads {BLEU.seeds} seeds a system and one {CONFIDENCE:.0%} interval per "
            f"test set over the seeds and the test sentences together, about ±{statistics.median(halves):.1f} BLEU "
            f"here, so smaller differences stay inconclusive; a speed verdict reads the {CONFIDENCE:.0%} interval "
            f"of the median ratio over at least {SPEED.repeats} repeats."
        )
    states = [c.word for c in paper_claims]
    out.append("The paper's claims: " + ", ".join(f"{w} {states.count(w)}" for w in WORDS) + ".")
    below = [c for c in paper_claims if c.cost and not c.meets]  # what more seeds would cost is the scorecard's
    wide = [c for c in paper_claims if c.word == INCONCLUSIVE and c.meets]
    if wide or below:
        parts = (
            [f"{len(wide)} inconclusive claims meet their standard, and only more seeds would narrow them"]
            if wide
            else []
        )
        if below:
            minutes = sum(c.minutes or 0 for c in below)
            parts.append(f"the {len(below)} others need about {minutes:.0f} GPU-minutes of runs in all")
        out.append("What would settle the rest: " + "; ".join(parts) + " (the scorecard gives each command).")
    return out


def vocabulary() -> str:
    """The five verdict words and what each means, as an HTML list."""
    return '<ul class="verdict-words">' + "".join(f"<li><b>{w}</b>: {MEANINGS[w]}</li>" for w in WORDS) + "</ul>"


def values(store: Store) -> dict[str, Any]:
    """What the glance page glues: the findings, the vocabulary, the tables, their provenance and the verdict table."""
    import pandas as pd

    out = tables(store)
    prov = out.pop("provenance")
    captions = {
        "table2": "Table 2, BLEU: tokenized BLEU on test2016 (ours: Multi30k En-De at d=256; the paper: WMT14 En-De)",
        "speed": "Table 2, speed: tokens per second relative to Balanced (the median ratio [its 95 % interval])",
        "table4": "Table 4: BLEU of students trained on a Balanced teacher's translations",
        "table5": "Table 5: the ablation, BLEU and kernels per decoder layer and step",
    }
    out = {k: reading_table(v, captions[k]).to_html() for k, v in out.items()}
    where = pd.DataFrame(
        {
            "what": ["the plan's runs", "their recipe", "the speed run"],
            "where it comes from": [
                f"{prov['runs']} runs on {prov['device']}, commit {prov['commit']}",
                prov["budget"],
                f"book/results/gpu/{prov['speed_run']} ({prov['speed_device']}, commit {prov['speed_commit']})",
            ],
        }
    )
    out["provenance"] = reading_table(where).to_html()
    # each verdict marked with its claim id, each chapter a link
    verdicts = table(judged(store).all("paper"), marked=True, link=lambda c: f'<a href="{c}.html">{c}</a>')
    return out | {
        "findings": '<ol class="findings">' + "".join(f"<li>{s}</li>" for s in findings(store, html=True)) + "</ol>",
        "vocabulary": vocabulary(),
        "verdicts": reading_table(verdicts.drop(columns="id"), escape=False).to_html(),
        "margin": ON_PAR,
        "samples": BOOTSTRAP_SAMPLES,
    }


HTML_KEYS = ("findings", "vocabulary", "verdicts", "table2", "speed", "table4", "table5", "provenance")  # glued as HTML


# -- README --------------------------------------------------------------------------------------------------------

FOUND, DETAIL = "## What this reproduction found", "## Results in detail"  # README's two generated sections


def readme_sections(scale: str = "small", root: Path | None = None) -> dict[str, str]:
    """README's two generated sections, by heading, from the stored results (Markdown, each ending with a blank
    line): the finding at the top, the tables and the verdict of every paper claim further down."""
    store = Store(scale, root)
    t = tables(store)
    prov = t["provenance"]
    found = table(judged(store).all("paper"))
    found["chapter"] = [f"[{c}](book/{c}.md)" for c in found["chapter"]]
    generated = (
        "Generated from the stored results by `python -m canlib.repro.studies.chapters.glance --readme` (a test fails "
        "when it differs from what the code computes now or from `python -m canlib claims`)."
    )
    finding = [
        FOUND,
        "",
        *(f"{i}. {s}" for i, s in enumerate(findings(store), 1)),
        "",
        "The five verdict words: " + "; ".join(f"**{w}**: {MEANINGS[w]}" for w in WORDS) + ". " + generated,
        "",
    ]
    detail = [
        DETAIL,
        "",
        f"Ours: Multi30k En-De at `{scale}` (d=256), {prov['runs']} runs on {prov['device']} at commit "
        f"{prov['commit']} ({prov['budget']}); tokenized BLEU on test2016, mean ± sd (seeds). The paper: WMT14 "
        f"En-De, tokenized BLEU, the average of 3 runs. {LEVELS} Speed: tokens/s relative to Balanced at batch 1, "
        "beam 4, fp16 with random d=512 weights and a forced output of 30 tokens, the median of the per-repeat "
        f"ratios [its 95 % interval] over {prov['speed_device']} run `book/results/gpu/{prov['speed_run']}` "
        f"(commit {prov['speed_commit']}, {prov['speed_repeats']} interleaved repeats). {generated}",
        "",
        "**Table 2**",
        "",
        t["table2"].to_markdown(),
        "",
        "**Table 4** (distilled students; their provenance: [the beyond chapter](book/beyond.md))",
        "",
        t["table4"].to_markdown(),
        "",
        "**Table 5** (kernels per decoder layer and step, counted on the GPU's code path)",
        "",
        t["table5"].to_markdown(),
        "",
        "**One verdict per claim of the paper** (`python -m canlib claims` lists these and the book's own; each "
        "claim's standard, evidence and what would settle it: [the scorecard](book/scorecard.md)).",
        "",
        found.set_index("id").to_markdown(),
        "",
    ]
    return {FOUND: "\n".join(finding), DETAIL: "\n".join(detail)}


def write_readme(path: Path, sections: dict[str, str]) -> bool:
    """Replace each of README's generated sections (from its heading to the next ``## `` heading); True if any
    changed."""
    text = path.read_text(encoding="utf-8")
    new = text
    for heading, section in sections.items():
        pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## )", re.S | re.M)
        new, found = pattern.subn(lambda _: section + "\n", new, count=1)
        if not found:
            raise ValueError(f"{path}: no '{heading}' section followed by another '## ' heading")
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readme", action="store_true", help="rewrite README.md's section in place (else print it)")
    parser.add_argument("--scale", default="small")
    args = parser.parse_args(argv)
    sections = readme_sections(args.scale)
    if args.readme:
        changed = write_readme(CHECKOUT_DIR / "README.md", sections)
        print("README.md: sections rewritten" if changed else "README.md: sections already current")
    else:
        print("\n".join(sections.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
