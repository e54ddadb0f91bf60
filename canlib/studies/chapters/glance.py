"""Results at a glance: what the reproduction found, in a few plain sentences generated from the claims registry,
then the paper's Tables 2, 4 and 5 beside ours and one verdict per claim of the paper, all from the stored results.
The book's first page glues these; README.md's "Results at a glance" section is generated from the same code
(``python -m canlib.studies.chapters.glance --readme``) and a test compares the two, so README never holds a number
or a verdict the stored results do not give.
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path
from typing import Any

from canlib.io import CHECKOUT_DIR
from canlib.model.config import ALL_SYSTEMS, LABELS
from canlib.results.studies import STUDENTS
from canlib.studies import paper
from canlib.studies.claims import Judged, judged, mark, table
from canlib.studies.evidence import BLEU, MEANINGS, SPEED, Contrast
from canlib.studies.judges import speed_reading, speed_runs
from canlib.studies.store import Store, describe_provenances
from canlib.studies.verdict import BOOTSTRAP_SAMPLES, CONFIDENCE, FAILS, HOLDS, INCONCLUSIVE, MIXED, NOT_RUN, ON_PAR

T2 = ("baseline", "balanced", "san", "aan", "can")
T5 = {"balanced": "Balanced", "can_attn": "Compress Attention", "can_ffn": "Compress FFN", "can": "Compress All"}
README_HEADING = "## Results at a glance"
WORDS = (HOLDS, FAILS, MIXED, INCONCLUSIVE, NOT_RUN)
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


def _ratio(store: Store, system: str, mode: str) -> str:
    """``system``/Balanced by the speed claims' statistic: the median ratio [its 95 % interval]."""
    if system == "balanced":
        return "1.00x"
    r = speed_reading(store, system, "balanced", mode)
    if r is None:
        return "not measured"
    shown = f" [{r['interval'][0]:.2f}, {r['interval'][1]:.2f}]" if r["interval"] else ""
    return f"{r['median']:.2f}x{shown}"


def tables(store: Store) -> dict[str, Any]:
    """The three tables (DataFrames) and their provenance: ``table2``, ``table4``, ``table5``, ``provenance``."""
    import pandas as pd

    t2, t4, t5 = paper.table2("en-de"), paper.table4(), paper.table5()
    main = {s: store.runs(s) for s in (*T2, "can_attn", "can_ffn")}
    kd = {s: store.study_runs("distill", s, "kd") for s in STUDENTS}
    balanced = main["balanced"]
    rows = []
    for s in T2:
        label = LABELS[s]
        rows.append(
            {
                "system": label,
                "paper BLEU": f"{t2[label].test_bleu:.2f}",
                "paper Δ": _delta(t2[label].test_bleu - t2["Balanced"].test_bleu, t2["Balanced"].test_bleu),
                "ours tok-BLEU (seeds)": _cell(main[s]),
                "ours Δ": _delta(main[s].mean() - balanced.mean(), balanced.mean())
                if main[s] is not None and balanced is not None
                else "not run",
                "paper speed": f"{t2[label].speed / t2['Balanced'].speed:.2f}x",
                "ours speed, eager": _ratio(store, s, "eager"),
                "ours speed, graphs": _ratio(store, s, "captured"),
            }
        )
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
                "ours kernels per layer": str(int(ops["systems"][s]["cuda"]["per_layer"]["kernel_operators"])),
            }
            for s, name in T5.items()
        ]
    ).set_index("system")
    plan = describe_provenances(store.provenances(store.runs(s) for s in ALL_SYSTEMS))
    run = (speed_runs(store) or [None])[0]
    speed_prov = store.gpu_speed("eager", run)[1] if run else None
    return {
        "table2": pd.DataFrame(rows).set_index("system"),
        "table4": table4,
        "table5": table5,
        "provenance": {
            "runs": plan["count"],
            "device": plan["device"],
            "commit": plan["commit"],
            "budget": plan["budget"],
            "speed_run": run or "none",
            "speed_device": speed_prov["device"] if speed_prov else "none",
            "speed_commit": str(speed_prov["commit"])[:7] if speed_prov else "none",
            "speed_repeats": int(speed_prov["settings"]["repeats"]) if speed_prov else 0,
        },
    }


# -- the finding, in plain sentences ------------------------------------------------------------------------------


def tally(store: Store, source: str = "paper") -> dict[str, int]:
    """How many of the claims of ``source`` read each word."""
    states = [j.word for j in judged(store).all(source)]
    return {w: states.count(w) for w in WORDS}


def _named(j: Judged, marked: bool) -> str:
    return f"\u201c{j.claim.name}\u201d: {mark(j) if marked else j.word}"


def _span(values: list[float]) -> str:
    return f"{min(values):+.2f} to {max(values):+.2f}"


def findings(store: Store, marked: bool = True) -> list[str]:
    """What this reproduction found, in four sentences: what holds (speed), what does not (BLEU), how sure, and what
    would settle the rest. Every word is the registry's (marked HTML with ``marked``), every number its judgement's."""
    j = judged(store)
    out = []
    double, faster, gain, graphs = (
        j[c] for c in ("balanced-speed-1.90x", "can-faster", "can-speed-1.28x", "can-speed-1.28x-graphs")
    )
    if faster.value is not None and double.value is not None:
        s = faster.strength
        out.append(
            f"Speed: on {len(s['runs'])} GPU run(s) of the decoder at commit {s['code']} ({s['repeats']} interleaved "
            f"repeats per ratio), Balanced decodes {double.value:.2f}x as fast as the Baseline and CAN "
            f"{faster.value:.2f}x as fast as Balanced with every kernel launched"
            + (f" ({graphs.value:.2f}x with CUDA graphs)" if graphs.value is not None else "")
            + f": {_named(double, marked)}; {_named(faster, marked)}; {_named(gain, marked)}."
        )
    keeps = j["can-within-0.5"]
    if keeps.judgement is not None:
        values = [row["value"] for row in keeps.sets]
        beside = [b for b in keeps.beside if b.judgement is not None]
        then = "".join(f"; {_span([r['value'] for r in b.sets])} at {b.budget}x" for b in beside)
        out.append(
            f"BLEU: CAN − Balanced is {_span(values)} over the four evaluation sets at {keeps.budget}x the plan's "
            f"updates ({min(keeps.seeds.values())} seeds a system{then}), where the paper has "
            f"{keeps.claim.paper.split(' (')[0]}: {_named(keeps, marked)}."
        )
    halves = [
        (row["seed_interval"][1] - row["seed_interval"][0]) / 2
        for c in judged(store).all("paper")
        if isinstance(c.claim.evidence, Contrast) and c.meets
        for row in c.sets
        if row["split"] == "test"
    ]
    if halves:
        out.append(
            f"How sure: a BLEU verdict needs {BLEU.seeds} seeds a system and reads {CONFIDENCE:.0%} intervals over "
            f"the seeds (Student's t) and over the test sentences (paired bootstrap), about "
            f"±{statistics.median(halves):.1f} BLEU on test2016 here, so smaller differences stay inconclusive; a "
            f"speed verdict reads the "
            f"{CONFIDENCE:.0%} interval of the median ratio over at least {SPEED.repeats} repeats of at least "
            f"{SPEED.seconds:g} s."
        )
    counts = tally(store)
    below = [c for c in j.all("paper") if c.cost]
    settle = "; ".join(f"{c.claim.id} ({c.cost})" for c in below)
    out.append(
        f"The paper's {sum(counts.values())} claims: "
        + ", ".join(f"{w} {n}" for w, n in counts.items())
        + (f"; below their standard or not run, with what settles each: {settle}." if below else ".")
    )
    return out


def vocabulary() -> str:
    """The five verdict words and what each means, as an HTML list."""
    return '<ul class="verdict-words">' + "".join(f"<li><b>{w}</b>: {MEANINGS[w]}</li>" for w in WORDS) + "</ul>"


def linked(store: Store, prefix: str = "") -> str:
    """The verdict table of the paper's claims as HTML: each verdict marked with its claim id, each chapter a link."""
    out = table(judged(store).all("paper"), marked=True, link=lambda c: f'<a href="{prefix}{c}.html">{c}</a>')
    return out.drop(columns="id").to_html(index=False, escape=False)


def values(store: Store) -> dict[str, Any]:
    """What the glance page glues: the findings, the vocabulary, the tables, their provenance and the verdict table."""
    out = tables(store)
    prov = out.pop("provenance")
    return out | {
        "findings": '<ol class="findings">' + "".join(f"<li>{s}</li>" for s in findings(store)) + "</ol>",
        "vocabulary": vocabulary(),
        "verdicts": linked(store),
        "margin": ON_PAR,
        "samples": BOOTSTRAP_SAMPLES,
        "levels": LEVELS,
        **{f"prov_{k}": v for k, v in prov.items()},
    }


HTML_KEYS = ("findings", "vocabulary", "verdicts")  # glued as HTML; the tables as tables


# -- README --------------------------------------------------------------------------------------------------------


def readme_section(scale: str = "small", root: Path | None = None) -> str:
    """README's "Results at a glance" section, from the stored results (Markdown, ends with a blank line)."""
    store = Store(scale, root)
    t = tables(store)
    prov = t["provenance"]
    found = table(judged(store).all("paper"))
    found["chapter"] = [f"[{c}](book/{c}.md)" for c in found["chapter"]]
    return "\n".join(
        [
            README_HEADING,
            "",
            "Generated from the stored results by `python -m canlib.studies.chapters.glance --readme` (a test fails "
            "when it differs from what the code computes now or from `python -m canlib claims`). What this "
            "reproduction found:",
            "",
            *(f"{i}. {s}" for i, s in enumerate(findings(store, marked=False), 1)),
            "",
            "The five words: " + "; ".join(f"**{w}**: {MEANINGS[w]}" for w in WORDS) + ".",
            "",
            f"Ours: Multi30k En-De at `{scale}` (d=256), {prov['runs']} runs on {prov['device']} at commit "
            f"{prov['commit']} ({prov['budget']}); tokenized BLEU on test2016, mean ± sd (seeds). The paper: WMT14 "
            f"En-De, tokenized BLEU, the average of 3 runs. {LEVELS} Speed: tokens/s relative to Balanced at batch 1, "
            "beam 4, fp16 with random d=512 weights and a forced output of 30 tokens, the median of the per-repeat "
            f"ratios [its 95 % interval] over {prov['speed_device']} run `book/results/gpu/{prov['speed_run']}` "
            f"(commit {prov['speed_commit']}, {prov['speed_repeats']} interleaved repeats).",
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
