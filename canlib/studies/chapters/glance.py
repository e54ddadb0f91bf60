"""Results at a glance: the paper's Tables 2, 4 and 5 and its speed ratios beside ours, and the claims registry's
verdict of each of the paper's claims, all from the stored results. The book's first page glues these tables;
README.md's "Results at a glance" section is generated from the same code
(``python -m canlib.studies.chapters.glance --readme``) and a test compares the two, so README never holds a number
the stored results do not give.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from canlib.io import CHECKOUT_DIR
from canlib.model.config import ALL_SYSTEMS, LABELS
from canlib.results.studies import STUDENTS
from canlib.studies import paper
from canlib.studies.claims import VOCABULARY, judged, mark, run_name, speed_run, table
from canlib.studies.gpu_results import ratio_range
from canlib.studies.store import Store, describe_provenances
from canlib.studies.verdict import (
    BOOTSTRAP_SAMPLES,
    FAILED,
    HELD,
    K_SPREAD,
    MIXED,
    NOISE,
    NOT_RUN,
    NOT_TESTED,
    ON_PAR,
    PARTLY_FAILED,
    PARTLY_HELD,
)

T2 = ("baseline", "balanced", "san", "aan", "can")
T5 = {"balanced": "Balanced", "can_attn": "Compress Attention", "can_ffn": "Compress FFN", "can": "Compress All"}
README_HEADING = "## Results at a glance"


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
    run = speed_run(store)
    gpu = store.gpu_speed("eager", run)[0] if run else {}
    rows = []
    balanced = main["balanced"]
    for s in T2:
        label = LABELS[s]
        row = {
            "system": label,
            "paper BLEU": f"{t2[label].test_bleu:.2f}",
            "paper Δ to Balanced": _delta(t2[label].test_bleu - t2["Balanced"].test_bleu, t2["Balanced"].test_bleu),
            "ours tok-BLEU (seeds)": _cell(main[s]),
            "ours Δ to Balanced": _delta(main[s].mean() - balanced.mean(), balanced.mean())
            if main[s] is not None and balanced is not None
            else "not run",
            "paper speed / Balanced": f"{t2[label].speed / t2['Balanced'].speed:.2f}x",
        }
        if s == "balanced":
            row["ours speed / Balanced (repeats)"] = "1.00x (reference)"
        elif s in gpu:
            med, low, high = ratio_range(gpu, s, "balanced")
            row["ours speed / Balanced (repeats)"] = f"{med:.2f}x ({low:.2f}-{high:.2f}x)"
        else:
            row["ours speed / Balanced (repeats)"] = "not measured"
        rows.append(row)
    table2 = pd.DataFrame(rows).set_index("system")
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
    kernels = _kernels(store)
    table5 = pd.DataFrame(
        [
            {
                "system": name,
                "paper BLEU": f"{t5[name].test_bleu:.2f}",
                "paper speed": f"{100 * (t5[name].speed / t5['Balanced'].speed - 1):+.1f} %",
                "ours tok-BLEU (seeds)": _cell(main[s]),
                "ours kernels per layer": str(kernels[s]),
            }
            for s, name in T5.items()
        ]
    ).set_index("system")
    plan = describe_provenances(store.provenances(store.runs(s) for s in ALL_SYSTEMS))
    students = describe_provenances(store.provenances(kd.values()))
    speed_prov = store.gpu_speed("eager", run)[1] if run else None
    return {
        "table2": table2,
        "table4": table4,
        "table5": table5,
        "provenance": {
            "runs": plan["count"],
            "device": plan["device"],
            "commit": plan["commit"],
            "budget": plan["budget"],
            "kd_device": students["device"],
            "kd_commit": students["commit"],
            "speed_run": run or "none",
            "speed_device": speed_prov["device"] if speed_prov else "none",
            "speed_commit": str(speed_prov["commit"])[:7] if speed_prov else "none",
            "speed_repeats": int(speed_prov["settings"]["repeats"]) if speed_prov else 0,
            "speed_sentences": int(speed_prov["settings"]["sentences"]) if speed_prov else 0,
        },
    }


def _kernels(store: Store) -> dict[str, int]:
    ops, _ = store.ops()
    return {s: int(ops["systems"][s]["cuda"]["per_layer"]["kernel_operators"]) for s in T5}


def verdicts(store: Store):
    """One row per claim of the paper (the registry's judgement): id, claim, the paper's figure, ours, the verdict,
    the chapter."""
    return table(judged(store).all("paper"))


def budget_values(store: Store) -> dict[str, Any]:
    """What twice the updates changes, in numbers for one sentence: each system's test2016 gain and the verdicts of
    "CAN stays within 0.5 BLEU of Balanced" at both budgets."""
    j = judged(store)
    can = j["can-within-0.5"]
    at1, at2 = can.at(1), can.at(2)
    if at2 is None or at2.judgement is None:
        return {"budget_shown": False}
    gains = {s: j[f"budget-adds-{s}"] for s in ("balanced", "can")}
    return {
        "budget_shown": True,
        "gain_balanced": gains["balanced"].value,
        "gain_can": gains["can"].value,
        "gap_1x": at1.value,
        "gap_2x": at2.value,
        "verdict_1x": at1.word,
        "verdict_2x": at2.word,
        "gain_balanced_word": gains["balanced"].word,
        "gain_can_word": gains["can"].word,
        "mark_1x": mark(can, 1),
        "mark_2x": mark(can, 2),
        "mark_gain_balanced": mark(gains["balanced"]),
        "mark_gain_can": mark(gains["can"]),
    }


def values(store: Store) -> dict[str, Any]:
    """The glance page's tables (as DataFrames), its provenance words, the verdict counts and the budget sentence."""
    out = tables(store)
    prov = out.pop("provenance")
    found = verdicts(store)
    words = [j.state for j in judged(store).all("paper")]
    counts = {
        f"count_{k}": sum(w == state for w in words)
        for state, k in (
            ("held", "reproduced"),
            ("did not hold", "not_reproduced"),
            ("within noise", "within_noise"),
            ("not run yet", "not_run_yet"),
            ("not tested here", "not_tested_here"),
        )
    }
    counts["count_partly"] = len(words) - sum(counts.values())
    budget = {f"budget_{k}" if not k.startswith("budget") else k: v for k, v in budget_values(store).items()}
    return out | {
        "verdicts": found,
        "claims": len(found),
        "margin": ON_PAR,
        **{f"prov_{k}": v for k, v in prov.items()},
        **counts,
        **budget,
        "findings": findings(store),
        "verdict_words": verdict_words(),
        "k_spread": K_SPREAD,
        "samples": BOOTSTRAP_SAMPLES,
        "levels": LEVELS,
    }


HTML_KEYS = ("findings", "verdict_words")  # the values the page shows as HTML (besides its tables and marks)


def findings(store: Store, marked: bool = True) -> str:
    """What this reproduction found, in three sentences (speed, BLEU, why), each verdict the registry's (marked HTML
    with ``marked``, else its plain word) and each number read from its judgement."""
    j = judged(store)

    def word(claim_id: str, budget: int | None = None) -> str:
        shown = j[claim_id] if budget is None else j[claim_id].at(budget)
        return (mark(j[claim_id], budget) if marked else shown.word) if shown is not None else "not judged"

    def named(claim_id: str, budget: int | None = None) -> str:
        return f"\u201c{j[claim_id].claim.name}\u201d: {word(claim_id, budget)}"

    faster, double = j["can-faster"], j["balanced-speed-1.8x"]
    speed = f"{named('balanced-speed-1.8x')}; {named('can-faster')}"
    if faster.value is not None and double.value is not None:
        speed = (
            f"On the GPU run the speed verdicts read, Balanced decodes {double.value:.2f}x as fast as the Baseline "
            f"and CAN {faster.value:.2f}x as fast as Balanced: " + speed
        )
    keeps = j["can-within-0.5"]
    at1, at2 = keeps.at(1), keeps.at(2)
    bleu = named("can-within-0.5")
    if at1 is not None and at1.value is not None:
        both = (
            f"{at1.value:+.2f} tokenized BLEU at the plan's budget and {at2.value:+.2f} with twice the updates"
            if at2 is not None and at2.value is not None
            else f"{at1.value:+.2f} tokenized BLEU"
        )
        bleu = f"In BLEU, CAN − Balanced on test2016 is {both} (the paper: {keeps.claim.paper.split(' (')[0]}); " + bleu
    why = "The explanations the book tests: " + "; ".join(
        named(c) for c in ("budget-narrows-gap", "kd-narrows-gap", "can-6-6-hurts-less")
    )
    speed, bleu, why = (x[0].upper() + x[1:] + "." for x in (speed, bleu, why))
    return " ".join((speed, bleu, why))


# what each state of the registry means, in a reader's words (the words themselves are VOCABULARY's)
MEANINGS = {
    HELD: "the criterion is met on every evaluation set (every timed run, layer) by both intervals",
    FAILED: "both intervals miss the criterion on every set",
    MIXED: "met on some sets and missed on others",
    PARTLY_HELD: "met on some sets, within noise on the rest",
    PARTLY_FAILED: "missed on some sets, within noise on the rest",
    NOISE: "an interval straddles the criterion on every set: the data cannot tell",
    NOT_RUN: "the claim can be tested here, but its runs are not stored yet",
    NOT_TESTED: "no stored evidence of this book can test it",
}


def verdict_words() -> str:
    """The registry's verdict words (the paper's claims / the book's own) and what each means, as an HTML list."""
    items = []
    for state, meaning in MEANINGS.items():
        paper_word, book_word = (VOCABULARY[src][state].format(over="sets") for src in ("paper", "book"))
        shown = f"<b>{paper_word}</b>" + (f" / <b>{book_word}</b>" if book_word != paper_word else "")
        items.append(f"<li>{shown}: {meaning}</li>")
    return '<ul class="verdict-words">' + "".join(items) + "</ul>"


def linked(store: Store, prefix: str = "") -> str:
    """The verdict table as HTML for the book: one header row, each verdict marked with its claim id, each chapter
    a link to its page."""
    out = table(judged(store).all("paper"), marked=True, link=lambda c: f'<a href="{prefix}{c}.html">{c}</a>')
    return out.drop(columns="id").to_html(index=False, escape=False)


def budget_sentence(v: dict[str, Any]) -> str:
    """The 1x models are undertrained, and what twice the updates changes, in one sentence (plain words)."""
    if not v.get("budget_shown"):
        return (
            "The 1x budget is short of convergence; the budget study that trains Balanced and CAN for twice the "
            "updates is not stored yet."
        )
    same = v["budget_gain_balanced_word"] == v["budget_gain_can_word"]
    words = (
        f"{v['budget_gain_balanced_word']} for both"
        if same
        else f"{v['budget_gain_balanced_word']} for Balanced, {v['budget_gain_can_word']} for CAN"
    )
    return (
        f"The 1x models are undertrained: twice the updates adds {v['budget_gain_balanced']:+.2f} tokenized BLEU "
        f'to Balanced and {v["budget_gain_can"]:+.2f} to CAN on test2016 ("twice the updates adds BLEU": '
        f"{words}), and CAN − Balanced moves from "
        f'{v["budget_gap_1x"]:+.2f} to {v["budget_gap_2x"]:+.2f}, so "CAN stays within 0.5 BLEU of Balanced" '
        f"is {v['budget_verdict_2x']} at 2x ({v['budget_verdict_1x']} at 1x); the other systems were not trained "
        "longer."
    )


LEVELS = (
    "BLEU levels do not compare across the two setups (Multi30k's short image captions at d=256 against "
    "WMT14 news at d=512): only differences between systems of one setup are claims, and even those move with "
    "the budget and the test set, so each difference is also given relative to Balanced's BLEU."
)


def readme_section(scale: str = "small", root: Path | None = None) -> str:
    """README's "Results at a glance" section, from the stored results (Markdown, ends with a blank line)."""
    store = Store(scale, root)
    v = values(store)
    found = v["verdicts"].copy()
    found["chapter"] = [f"[{c}](book/{c}.md)" for c in found["chapter"]]
    run = speed_run(store)
    if run:  # the speed run is named once, above the tables, not in every speed row
        name = run_name(store.gpu_speed("eager", run)[1])
        found["ours"] = [o.replace(f"; {name})", ")") for o in found["ours"]]
    return "\n".join(
        [
            README_HEADING,
            "",
            "Generated from the stored results by `python -m canlib.studies.chapters.glance --readme` (a test "
            "fails when this section differs from what the code computes now, and when its verdicts differ from "
            "`python -m canlib claims --json`); the book's first page shows the same tables. "
            + findings(store, marked=False),
            "",
            f"Ours: Multi30k En-De at `{scale}` (d=256), {v['prov_runs']} runs on {v['prov_device']} at commit "
            f"{v['prov_commit']} ({v['prov_budget']}); tokenized BLEU on test2016, mean ± sd (seeds). The paper: "
            f"WMT14 En-De, tokenized BLEU, the average of 3 runs. {LEVELS} Speed: tokens/s relative to Balanced at "
            "batch 1, beam 4, GPU eager fp16 with random d=512 weights and a forced output length of 30 tokens per "
            "sentence, the median and range of the per-repeat ratios of one named run, the one every speed verdict "
            f"reads ({v['prov_speed_device']}, commit {v['prov_speed_commit']}, "
            f"`book/results/gpu/{v['prov_speed_run']}`: {v['prov_speed_sentences']} sentences x "
            f"{v['prov_speed_repeats']} interleaved repeats).",
            "",
            "**Table 2**",
            "",
            v["table2"].to_markdown(),
            "",
            "**Table 4** (distilled students; their provenance: [the beyond chapter](book/beyond.md))",
            "",
            v["table4"].to_markdown(),
            "",
            "**Table 5** (kernels per decoder layer and step, counted on the GPU's code path)",
            "",
            v["table5"].to_markdown(),
            "",
            "**One verdict per claim of the paper** (`python -m canlib claims` lists these and the book's own; "
            "the rule and the evidence of each: [the scorecard](book/scorecard.md)). " + budget_sentence(v),
            "",
            found.set_index("id").to_markdown(),
            "",
        ]
    )


def write_readme(path: Path, section: str) -> bool:
    """Replace README's section (from its heading to the next ``## `` heading) by ``section``; True if it changed."""
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(rf"^{re.escape(README_HEADING)}\n.*?(?=^## )", re.S | re.M)
    if not pattern.search(text):
        raise ValueError(f"{path}: no '{README_HEADING}' section followed by another '## ' heading")
    new = pattern.sub(lambda _: section + "\n", text, count=1)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def readme_text(path: Path) -> str:
    """README's current "Results at a glance" section (what :func:`readme_section` must reproduce)."""
    text = path.read_text(encoding="utf-8")
    match = re.search(rf"^{re.escape(README_HEADING)}\n.*?(?=^## )", text, re.S | re.M)
    if not match:
        raise ValueError(f"{path}: no '{README_HEADING}' section followed by another '## ' heading")
    return match.group(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readme", action="store_true", help="rewrite README.md's section in place (else print it)")
    parser.add_argument("--scale", default="small")
    args = parser.parse_args(argv)
    section = readme_section(args.scale)
    if args.readme:
        changed = write_readme(CHECKOUT_DIR / "README.md", section)
        print("README.md: section rewritten" if changed else "README.md: section already current")
    else:
        print(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
