"""Results at a glance: the paper's Tables 2, 4 and 5 and its speed ratios beside ours, and one verdict per claim,
all from the stored results. The book's first page glues these tables; README.md's "Results at a glance" section
is generated from the same code (``python -m canlib.studies.chapters.glance --readme``) and a test compares the
two, so README never holds a number the stored results do not give.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from canlib.io import CHECKOUT_DIR
from canlib.model.config import ALL_SYSTEMS, LABELS
from canlib.studies import beyond, evidence as ev, gpu_results
from canlib.studies.paper import paper_numbers
from canlib.studies.quality import format_budget
from canlib.studies.scorecard import OUTCOMES, headline, ratio_range, scorecard
from canlib.studies.speed import stored_ops

T2 = ("baseline", "balanced", "san", "aan", "can")
T5 = {"balanced": "Balanced", "can_attn": "Compress Attention", "can_ffn": "Compress FFN", "can": "Compress All"}
README_HEADING = "## Results at a glance"


def _cell(runs: Any, split: str = "test") -> str:
    if runs is None:
        return "not run"
    return f"{runs.mean(split):.2f} ± {runs.sd(split):.2f} ({len(runs.seeds)})"


def speed_run() -> tuple[str, dict[str, Any]] | None:
    """(run folder, provenance) of the stored GPU run that judges "CAN decodes faster than Balanced": the one
    whose timed repeats give the narrowest CAN/Balanced interval (the scorecard's one-verdict rule)."""
    best = None
    for run in gpu_results.speed_runs():
        rows, prov = gpu_results.gpu_speed("eager", run)
        _, low, high = ratio_range(rows, "can", "balanced")
        if best is None or high / low < best[0]:
            best = (high / low, run, prov)
    return (best[1], best[2]) if best else None


def tables(scale: str, root: Path | None = None) -> dict[str, Any]:
    """The three tables (DataFrames) and their provenance: ``table2``, ``table4``, ``table5``, ``provenance``."""
    import pandas as pd

    p = paper_numbers()
    t2, t4, t5 = p["table2_wmt14"]["en-de"], p["table4_kd_en-de"], p["table5_ablation_en-de"]
    main = {s: ev.main_runs(scale, s, root=root) for s in (*T2, "can_attn", "can_ffn")}
    kd = beyond.stored(scale, root).kd
    picked = speed_run()
    gpu = gpu_results.gpu_speed("eager", picked[0])[0] if picked else {}
    rows = []
    for s in T2:
        row = {"system": LABELS[s], "paper BLEU": f"{t2[LABELS[s]][0]:.2f}", "ours tok-BLEU (seeds)": _cell(main[s]),
               "paper speed / Balanced": f"{t2[LABELS[s]][2] / t2['Balanced'][2]:.2f}x"}
        if s == "balanced":
            row["ours speed / Balanced (repeats)"] = "1.00x (reference)"
        elif s in gpu:
            med, low, high = ratio_range(gpu, s, "balanced")
            row["ours speed / Balanced (repeats)"] = f"{med:.2f}x ({low:.2f}-{high:.2f}x)"
        else:
            row["ours speed / Balanced (repeats)"] = "not measured"
        rows.append(row)
    table2 = pd.DataFrame(rows).set_index("system")
    table4 = pd.DataFrame([{"system": LABELS[s], "paper before KD": f"{t4[LABELS[s]][0]:.2f}",
                            "paper after KD": f"{t4[LABELS[s]][1]:.2f}", "ours real targets": _cell(main[s]),
                            "ours distilled": _cell(kd.get(s))} for s in beyond.STUDENTS]).set_index("system")
    kernels = _kernels(root)
    table5 = pd.DataFrame([{"system": name, "paper BLEU": f"{t5[name][0]:.2f}",
                            "paper speed": f"{100 * (t5[name][1] / t5['Balanced'][1] - 1):+.1f} %",
                            "ours tok-BLEU (seeds)": _cell(main[s]),
                            "ours kernels per layer": str(kernels[s])} for s, name in T5.items()]).set_index("system")
    plan = [ev.main_runs(scale, s, root=root) for s in ALL_SYSTEMS]
    provs = [ev.stored_result(scale, f, root)[1] for r in plan if r for f in r.files]
    kd_provs = [ev.stored_result(scale, f, root)[1] for r in kd.values() if r for f in r.files]
    return {"table2": table2, "table4": table4, "table5": table5,
            "provenance": {"runs": len(provs), "device": _join(p_["device"] for p_ in provs),
                           "commit": _join(str(p_["commit"])[:7] for p_ in provs), "budget": _budget(provs),
                           "kd_device": _join(p_["device"] for p_ in kd_provs),
                           "kd_commit": _join(str(p_["commit"])[:7] for p_ in kd_provs),
                           "speed_device": picked[1]["device"] if picked else "none",
                           "speed_commit": str(picked[1]["commit"])[:7] if picked else "none"}}


def _join(values: Any) -> str:
    return ", ".join(sorted(set(values)))


def _budget(provs: list[dict[str, Any]]) -> str:
    return format_budget(provs[0].get("budget")) if provs else "none"


def _kernels(root: Path | None) -> dict[str, int]:
    ops, _ = stored_ops(root=root)
    return {s: int(ops["systems"][s]["cuda"]["per_layer"]["kernel_operators"]) for s in T5}


def verdicts(scale: str, root: Path | None = None, refs: dict[str, list[str]] | None = None):
    """One verdict per claim (the scorecard's :func:`~canlib.studies.scorecard.headline` rule) for every claim the
    scorecard judges, the beyond chapter's two included: claim, the paper's figure, ours, the verdict, the chapter."""
    import pandas as pd

    rows = headline(scorecard(scale, cpu=False, refs=refs) + beyond.claims(scale, root, refs))
    return pd.DataFrame([{"claim": r.name, "paper": r.paper, "ours": r.ours, "verdict": OUTCOMES[r.verdict],
                          "chapter": r.chapter} for r in rows])


def values(scale: str, root: Path | None = None, refs: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The glance page's tables (as DataFrames) and its provenance words."""
    out = tables(scale, root)
    prov = out.pop("provenance")
    found = verdicts(scale, root, refs)
    counts = found["verdict"].value_counts()
    return out | {"verdicts": found, "claims": len(found), **{f"prov_{k}": v for k, v in prov.items()},
                  **{f"count_{k.split(' (')[0].replace(' ', '_')}": int(counts.get(k, 0))
                     for k in ("reproduced", "not reproduced", "not settled (within noise)", "not run yet", "not tested here")}}


def linked(frame, prefix: str = "") -> str:
    """The verdict table as HTML for the book: one header row, each chapter a link to its page."""
    out = frame.copy()
    out["chapter"] = [f'<a href="{prefix}{c}.html">{c}</a>' for c in out["chapter"]]
    return out.to_html(index=False, escape=False)


def readme_section(scale: str = "small", root: Path | None = None, refs: dict[str, list[str]] | None = None) -> str:
    """README's "Results at a glance" section, from the stored results (Markdown, ends with a blank line)."""
    v = values(scale, root, refs)
    found = v["verdicts"].copy()
    found["chapter"] = [f"[{c}](book/{c}.md)" for c in found["chapter"]]
    return "\n".join([
        README_HEADING, "",
        "Generated from the stored results by `python -m canlib.studies.chapters.glance --readme` (a test fails when "
        "this section differs from what the code computes now); the book's first page shows the same tables.",
        f"Ours: Multi30k En-De at `{scale}` (d=256), {v['prov_runs']} runs on {v['prov_device']} at commit "
        f"{v['prov_commit']} ({v['prov_budget']}); tokenized BLEU on test2016, mean ± sd (seeds). The paper: "
        "WMT14 En-De, tokenized BLEU, the average of 3 runs. Speed: tokens/s relative to Balanced at batch 1, beam 4, "
        f"GPU eager fp16 with random d=512 weights ({v['prov_speed_device']}, commit {v['prov_speed_commit']}).", "",
        "**Table 2**", "", v["table2"].to_markdown(), "",
        f"**Table 4** (distilled students: {v['prov_kd_device']}, commit {v['prov_kd_commit']})", "",
        v["table4"].to_markdown(), "",
        "**Table 5** (kernels per decoder layer and step, counted on the GPU's code path)", "",
        v["table5"].to_markdown(), "",
        "**One verdict per claim** (the rule: [the scorecard](book/scorecard.md))", "",
        found.set_index("claim").to_markdown(), ""])


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
