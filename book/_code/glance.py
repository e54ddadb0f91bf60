"""Results at a glance: what the reproduction found, in a few plain sentences generated from the claims registry,
then the paper's Tables 2, 4 and 5 beside ours and one verdict per claim of the paper, all from the stored results.
The book's first page glues these; README.md's two result sections (the findings and the tables, which link the
scorecard for every claim's verdict) are generated from the same code (``python -m _code.glance --readme`` in
``book/``) and a test compares the two, so README never holds a number or a verdict the stored results do not give.
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path
from typing import Any

from _code.ablation import PAPER_ROWS  # Table 5's names of the ablation systems
from _code.beyond import teacher_record
from _code.gpu_results import kernels
from _code.marks import mark, table
from _code.prose import names
from _code.readers import describe_provenances, speed_runs
from _code.speed import speed_table
from _code.tables import reading_table
from canlib.catalogue import ALL_SYSTEMS, LABELS, scale_spec
from canlib.io import CHECKOUT_DIR
from canlib.model.config import preset
from repro.results.studies import STUDENTS
from repro.studies import paper
from repro.studies.claims import judged
from repro.studies.evidence import BLEU, MEANINGS, SPEED, Judged
from repro.studies.judges import Contrast
from repro.studies.store import Store
from repro.studies.verdict import (
    BOOTSTRAP_SAMPLES,
    CONFIDENCE,
    EVAL_SPLITS,
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
    teacher = "no stored teacher"
    if any(kd.values()):
        record = teacher_record(store)  # our students learn from one model, the paper's from its own converged one
        teacher = (
            f"one Balanced model (seed {record['teacher_seed']}, {record['teacher_train']['max_steps']:,} updates, "
            f"{record['teacher_bleu']['test']['tok_bleu']:.2f} tok-BLEU on test2016)"
        )
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
            "teacher": teacher,
        },
    }


# -- the finding, in plain sentences ------------------------------------------------------------------------------


def _setup(store: Store, budget: int, recipe: str = "") -> str:
    """Our BLEU setup against the paper's, in words: corpus, width and updates (a budget, or a recipe's)."""
    full = scale_spec("full")
    corpus = store.spec.corpus.replace("multi30k", "Multi30k").split("-", 1)
    pair = "-".join(p.capitalize() for p in corpus[1].split("-"))
    plan = int(store.spec.train["max_steps"])
    if recipe:
        updates = f"the {recipe} recipe's {int(store.spec.recipe(recipe)['max_steps']):,} updates"
    elif budget == 1:
        updates = f"the plan's {plan:,} updates"
    else:
        updates = f"{TIMES.get(budget, f'{budget}x')} the plan's {plan:,} updates"
    return (
        f"{corpus[0]} {pair} at d={preset(store.spec.preset('can')).d_model} with {updates}, against the paper's "
        f"{full.corpus.split('-')[0].upper()} models trained to convergence at d={paper.paper_numbers()['setup']['d']}"
    )


def deciding(j: Judged) -> str:
    """Which readings decide a verdict, in words: those that give its word, and what the others do."""
    by: dict[str, list[str]] = {}
    for row in j.sets:
        if "verdict" in row and row.get("decides", True):  # a validation set is shown, never judged
            by.setdefault(row["verdict"], []).append("the validation set" if row["set"] == "valid" else row["set"])
    if not by:
        return ""
    if j.word == MIXED:
        return f"it holds on {names(by.get(HOLDS, []))} and fails on {names(by.get(FAILS, []))}"
    if j.word not in (HOLDS, FAILS) or j.word not in by:
        return "no reading decides it"
    others = [s for w, sets in by.items() if w != j.word for s in sets]
    undecided = by.get(INCONCLUSIVE, [])
    rest = (
        f"; {names(undecided)} {'leaves' if len(undecided) == 1 else 'leave'} it undecided"
        if undecided and len(undecided) == len(others)
        else f"; {names(others)} {'does' if len(others) == 1 else 'do'} not agree"
        if others
        else ""
    )
    return f"decided by {names(by[j.word])}{rest}"


class _Words:
    """How a finding names a claim's verdict and a piece of code, in HTML for the page or Markdown for README."""

    def __init__(self, j: Any, html: bool) -> None:
        self.j, self.html = j, html

    def said(self, claim_id: str, what: str) -> str:
        word = mark(self.j[claim_id]) if self.html else f"{self.j[claim_id].word} (`{claim_id}`)"
        return f"\u201c{what}\u201d: {word}"

    def code(self, name: str) -> str:
        return f"<code>{name}</code>" if self.html else f"`{name}`"


def _speed_finding(store: Store, w: _Words) -> list[str]:
    """The speed: its setup, the reading that decides, the two ratios and how many runs stand behind them."""
    double, faster, size = w.j["balanced-speed-1.90x"], w.j["can-faster"], w.j["can-speed-1.28x"]
    if faster.value is None or double.value is None:
        return []
    s = faster.strength
    provs = [store.gpu_speed(s["mode"], run)[1] for run in s["runs"]]
    settings = provs[0]["settings"]
    runs = "one GPU run" if len(s["runs"]) == 1 else f"{len(s['runs'])} GPU runs"
    return [
        f"The speed, timed on {names(sorted({p['device'] for p in provs}))} at batch {settings['batch']} and "
        f"beam {settings['beam']} in half precision, with random weights of the paper's width "
        f"(d={paper.paper_numbers()['setup']['d']}) where the paper decodes its trained models: "
        f"the {s['mode']} reading of {runs} of the decoder as it is now ({s['repeats']} interleaved repeats) "
        "decides.",
        f"Balanced decodes {double.value:.2f}x as fast as the Baseline and CAN {faster.value:.2f}x as fast as "
        f"Balanced; {w.said(double.claim.id, 'Balanced about twice as fast as the Baseline')}; "
        f"{w.said(faster.claim.id, 'CAN faster than Balanced')}; the paper's size of that gain, "
        f"{w.said(size.claim.id, f'at least {size.claim.evidence.ok.bound:.2f}x')}.",
        (
            "These rest on one run's repeats: more GPU runs would say how much a run moves."
            if len(s["runs"]) == 1
            else "More GPU runs would narrow the spread from run to run."
        ),
    ]


def _bleu_finding(store: Store, w: _Words) -> list[str]:
    """CAN's BLEU against Balanced in its setup, the reading that decides, and canlib's reading of Eq. 13."""
    keeps = w.j["can-within-0.5"]
    if keeps.judgement is None:
        return []
    gaps = [row["value"] for row in keeps.sets]
    gap = (
        f"it scores {-max(gaps):.2f} to {-min(gaps):.2f} BLEU below Balanced on every evaluation set"
        if max(gaps) < 0
        else f"it scores {min(gaps):+.2f} to {max(gaps):+.2f} BLEU against Balanced over the evaluation sets"
    )
    controls = [s for s in ("can_residual", "can_nosplit") if store.runs(s) is not None]
    decided = deciding(keeps)
    below = w.j.get("can-below-balanced")
    return [
        f"CAN's BLEU, on {_setup(store, keeps.budget or 1, keeps.recipe)}: {gap}"
        + (f"; {w.said(below.claim.id, 'CAN scores below Balanced')}." if below is not None else "."),
        f"The paper has {keeps.claim.paper.split(' (')[0]}; "
        f"{w.said(keeps.claim.id, 'CAN within half a point of Balanced')}" + (f", {decided}." if decided else "."),
        "Part of that gap may come from canlib's reading of the paper's Eq. 13 rather than from CAN: the "
        "residual it adds, the split of the 4d values over heads, the FFN reading a normalised sum and "
        "pre-norm are its choices, and "
        + (
            f"the controls that would measure them ({w.code('can_residual')}, {w.code('can_nosplit')}: CAN "
            "without the head split) are not trained yet; trained at a converged recipe, they would say how much."
            if not controls
            else f"the stored controls ({names([w.code(c) for c in controls])}) are read in the beyond chapter."
        ),
    ]


def _balanced_finding(store: Store, w: _Words) -> list[str]:
    """Balanced, the paper's strong baseline, against the Baseline on every evaluation set."""
    base, bal = store.runs("baseline"), store.runs("balanced")
    if base is None or bal is None:
        return []
    splits = [s for s in EVAL_SPLITS if s in base.scores and s in bal.scores]
    diffs = [bal.mean(s) - base.mean(s) for s in splits]
    count = {2: "both", 3: "all three", 4: "all four"}.get(len(splits), f"all {len(splits)}")
    where = (
        f"it scores {-max(diffs):.2f} to {-min(diffs):.2f} BLEU below the Baseline on {count} evaluation sets"
        if max(diffs) < 0
        else f"it scores {min(diffs):+.2f} to {max(diffs):+.2f} BLEU against the Baseline over the evaluation sets"
    )
    paper_gap = w.j["balanced-keeps-bleu"].claim.paper.split(" (")[0]
    plan = int(store.spec.train["max_steps"])
    return [
        f"Balanced, the paper's strong baseline, at d={preset(store.spec.preset('can')).d_model} and "
        f"the plan's {plan:,} updates: {where}, where the paper has {paper_gap}; "
        + w.said("balanced-keeps-bleu", "Balanced keeps the Baseline's BLEU")
        + ".",
        "More seeds would narrow its intervals; whether Balanced trails the Baseline in converged models "
        "too, only a converged recipe would say.",
    ]


def _sure_finding(paper_claims: list[Judged]) -> list[str]:
    """How wide a verdict's interval is here, and what a speed verdict reads."""
    halves = [
        (row["interval"][1] - row["interval"][0]) / 2
        for c in paper_claims
        if isinstance(c.claim.evidence, Contrast) and c.meets
        for row in c.sets
        if row["split"] == "test"
    ]
    if not halves:
        return []
    return [
        f"How sure: a BLEU verdict reads {BLEU.seeds} seeds a system and one {CONFIDENCE:.0%} interval per "
        f"test set over the seeds and the test sentences together, about ±{statistics.median(halves):.1f} "
        "BLEU here, so smaller differences stay inconclusive.",
        f"A speed verdict reads the {CONFIDENCE:.0%} interval of the median ratio over at least "
        f"{SPEED.repeats} repeats of each of at least {SPEED.runs} GPU runs, beside the runs' spread.",
    ]


def _counted(n: int, kind: str) -> str:
    """ "the speed claim that meets its standard", "the 12 BLEU claims that meet their standard"."""
    return f"the {kind} claim that meets its standard" if n == 1 else f"the {n} {kind} claims that meet their standard"


def _settle_finding(store: Store, paper_claims: list[Judged]) -> list[str]:
    """What would settle the open claims: seeds, a converged recipe, GPU runs, each kind its own remedy."""
    plan = int(store.spec.train["max_steps"])
    below = [c for c in paper_claims if c.cost and not c.meets]  # what more seeds would cost is the scorecard's
    wide = [c for c in paper_claims if c.word == INCONCLUSIVE and c.meets]
    kinds = {k: [c for c in wide if c.standard.kind == k] for k in ("bleu", "speed")}
    rest = [c for c in wide if c.standard.kind not in kinds]
    budgets = " or ".join(f"{plan * f:,}" for f in store.budget_factors())
    settle = []
    if kinds["bleu"]:
        settle.append(
            f"for {_counted(len(kinds['bleu']), 'inconclusive BLEU')}, more seeds would narrow the intervals, and only "
            f"a converged recipe would say whether the differences outlast models stopped at {budgets} updates."
        )
    if kinds["speed"]:
        one = all(len(c.strength.get("runs", [])) == 1 for c in kinds["speed"])
        settle.append(
            f"for {_counted(len(kinds['speed']), 'inconclusive speed')}, "
            + (
                "one GPU run's repeats stand for the verdict: more runs would show how far a run moves."
                if one
                else "more GPU runs would narrow the spread from run to run."
            )
        )
    if rest:
        settle.append(f"for {_counted(len(rest), 'other inconclusive')}, more trained models would narrow them.")
    if below:
        # one command's runs settle every claim that names it (the speed runs settle every speed claim)
        minutes = sum({(c.command or c.claim.id, c.cost): c.minutes or 0 for c in below}.values())
        settle.append(
            (
                "the claim below its standard needs"
                if len(below) == 1
                else f"the {len(below)} claims below their standard need"
            )
            + f" about {minutes:.0f} GPU-minutes of runs in all (the scorecard gives each command)."
        )
    return ["What would settle the rest: " + settle[0], *(s[0].upper() + s[1:] for s in settle[1:])] if settle else []


def _findings(store: Store, html: bool) -> list[list[str]]:
    """The findings, each a list of sentences of at most five numbers (the book's rule for a paragraph)."""
    j = judged(store)
    paper_claims = j.all("paper")
    w = _Words(j, html)
    states = [c.word for c in paper_claims]
    out = [
        _speed_finding(store, w),
        _bleu_finding(store, w),
        _balanced_finding(store, w),
        _sure_finding(paper_claims),
        ["The paper's claims: " + ", ".join(f"{x} {states.count(x)}" for x in WORDS) + "."],
        _settle_finding(store, paper_claims),
    ]
    return [f for f in out if f]


def findings(store: Store, html: bool = False) -> list[str]:
    """What this reproduction found, in plain sentences of at most five numbers each, each finding in its setup:
    the speed, CAN's BLEU and its open causes, Balanced against the Baseline, how sure, how the paper's claims fare,
    and what would settle the rest. Every verdict is the registry's word: marked HTML with ``html`` (the first page,
    one paragraph a sentence), else the word with the claim's id in backticks (README)."""
    found = _findings(store, html)
    return ["".join(f"<p>{s}</p>" for s in f) if html else " ".join(f) for f in found]


def vocabulary() -> str:
    """The five verdict words and what each means, as an HTML list."""
    return '<ul class="verdict-words">' + "".join(f"<li><b>{w}</b>: {MEANINGS[w]}</li>" for w in WORDS) + "</ul>"


def where_from(store: Store):
    """Where the glance tables' numbers come from (the appendix shows it): the plan's runs, their recipe, the speed
    run, as a two-column table."""
    import pandas as pd

    prov = tables(store)["provenance"]
    return pd.DataFrame(
        {
            "what": ["the plan's runs", "their recipe", "the speed run"],
            "where it comes from": [
                f"{prov['runs']} runs on {prov['device']}, commit {prov['commit']}",
                prov["budget"],
                f"book/results/gpu/{prov['speed_run']} ({prov['speed_device']}, commit {prov['speed_commit']})",
            ],
        }
    )


def values(store: Store) -> dict[str, Any]:
    """What the glance page glues: the findings, the vocabulary, the tables and the verdict table."""
    out = tables(store)
    prov = out.pop("provenance")
    captions = {
        "table2": "Table 2, BLEU: tokenized BLEU on test2016 (ours: Multi30k En-De at d=256; the paper: WMT14 En-De)",
        "speed": "Table 2, speed: tokens per second relative to Balanced (the median ratio [its 95 % interval])",
        "table4": f"Table 4: BLEU of students trained on a Balanced teacher's translations (ours learn from "
        f"{prov['teacher']}; the paper's from its WMT14 Balanced)",
        "table5": "Table 5: the ablation, BLEU and kernels per decoder layer and step",
    }
    out = {k: reading_table(v, captions[k]).to_html() for k, v in out.items()}
    # each verdict marked with its claim id, each chapter a link
    verdicts = table(judged(store).all("paper"), marked=True, link=lambda c: f'<a href="{c}.html">{c}</a>')
    return out | {
        "findings": '<ol class="findings">' + "".join(f"<li>{s}</li>" for s in findings(store, html=True)) + "</ol>",
        "vocabulary": vocabulary(),
        "verdicts": reading_table(verdicts.drop(columns="id"), escape=False).to_html(),
        "margin": ON_PAR,
        "samples": BOOTSTRAP_SAMPLES,
    }


HTML_KEYS = ("findings", "vocabulary", "verdicts", "table2", "speed", "table4", "table5")  # glued as HTML


# -- README --------------------------------------------------------------------------------------------------------

FOUND, DETAIL = "## What this reproduction found", "## Results in detail"  # README's two generated sections


def readme_sections(scale: str = "small", root: Path | None = None) -> dict[str, str]:
    """README's two generated sections, by heading, from the stored results (Markdown, each ending with a blank
    line): the finding at the top, the tables further down. Every claim's verdict is the scorecard's to show, with
    its evidence beside it; README links it."""
    store = Store(scale, root)
    t = tables(store)
    prov = t["provenance"]
    paper_claims = judged(store).all("paper")
    scorecard = (
        f"All {len(paper_claims)} claims of the paper, each with its verdict, the evidence it reads and what would "
        "settle it: [the scorecard](book/scorecard.md) (`python -m repro claims` prints them, and the book's own)."
    )
    generated = (
        "Generated from the stored results by `python -m _code.glance --readme` in `book/` (a test fails "
        "when it differs from what the code computes now or from `python -m repro claims`)."
    )
    finding = [
        FOUND,
        "",
        *(f"{i}. {s}" for i, s in enumerate(findings(store), 1)),
        "",
        "The five verdict words: " + "; ".join(f"**{w}**: {MEANINGS[w]}" for w in WORDS) + ". " + generated,
        "",
        scorecard,
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
        f"**Table 4** (distilled students: ours learn from {prov['teacher']}, the paper's from its WMT14 Balanced; "
        "their provenance: [the beyond chapter](book/beyond.md))",
        "",
        t["table4"].to_markdown(),
        "",
        "**Table 5** (kernels per decoder layer and step, counted on the GPU's code path)",
        "",
        t["table5"].to_markdown(),
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
