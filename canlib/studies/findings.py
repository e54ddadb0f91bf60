"""What the stored results show, as sentences whose numbers are computed from them, never typed.

A chapter's prose may not type a result (``tests/test_book_text.py`` refuses an unlabelled decimal), so
every sentence that quotes one of our numbers is a :class:`Finding` built here from the stored results
and rendered by a chapter cell with :func:`markdown`. Each finding keeps the numbers it quotes and the
stored files they come from, so a test can recompute them independently from those files.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Finding:
    """One sentence of a chapter: ``text`` (Markdown, numbers formatted in), the numbers it quotes by
    name, and the stored results they come from (paths relative to the results folder)."""

    text: str
    values: dict[str, float] = field(default_factory=dict)
    sources: tuple[str, ...] = ()


def markdown(findings: Iterable[Finding]):
    """The findings as a Markdown bullet list, for a chapter cell (tagged ``remove-input``)."""
    from IPython.display import Markdown

    return Markdown("\n".join(f"* {f.text}" for f in findings))


# -- shared by the findings below ------------------------------------------------------------------------

def _setup(scale: str) -> str:
    """What a scale trains, in words, from the code that trains it (for 'what could explain the difference')."""
    from canlib.model.config import preset
    from canlib.studies.scales import scale_spec

    spec = scale_spec(scale)
    t = spec.train
    d = preset(spec.preset("can")).d_model
    steps = f"{t['max_steps']:,} updates" if t.get("max_steps") else f"up to {t.get('max_epochs')} epochs"
    batch = f"{t['max_tokens'] * t.get('update_freq', 1):,} tokens"
    averaged = (f"the last {t['average_last']} step checkpoints ({t['valid_every']:,} updates apart) averaged"
                if t.get("average_last") else "the last checkpoints averaged")
    return f"{spec.corpus} ({spec.corpus_scale}), d={d}, {steps} of {batch} at lr {t['lr']:g}, {averaged}"


def _tiny_note(scale: str, what: str) -> list[Finding]:
    if scale != "tiny":
        return []
    return [Finding(f"This page was built at `tiny` (d=64 models trained for a few minutes on a CPU, which do not "
                    f"translate): {what} demonstrate the method, not the paper's claim. The `small` study, trained "
                    "on a GPU, is what the text below is written for once it is stored.")]


# -- the results, ablation, depths and tasks chapters, and the introduction's table --------------------

SPLIT_NAMES = {"valid": "valid (val2016)", "test": "test2016", "test2017_flickr": "test2017 Flickr",
               "test2017_mscoco": "test2017 MSCOCO"}


def split_name(split: str) -> str:
    """A Multi30k split by the name the reader knows ("test" is test2016)."""
    return SPLIT_NAMES.get(split, split)


def seed_bleu(scale: str, systems, split: str = "test", corpus: str | None = None,
              root: Path | None = None) -> dict[str, list[float]]:
    """Tokenized BLEU (the paper's metric) per stored full-budget seed, as the verdicts read it."""
    from canlib.studies.quality import bleu_by_seed

    return bleu_by_seed(scale, list(systems), corpus, split, "tok_bleu", root, full_budget=True)


def _gap(scores: dict[str, list[float]], system: str, against: str) -> tuple[float, float | None]:
    """(mean difference, two standard errors from the seed spreads, None with fewer than 2 seeds)."""
    import math
    import statistics

    a, b = scores[system], scores[against]
    diff = statistics.fmean(a) - statistics.fmean(b)
    if len(a) < 2 or len(b) < 2:
        return diff, None
    return diff, 2 * math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))


def _sources(scale: str, scores: dict[str, list[float]], corpus: str = "multi30k-en-de") -> tuple[str, ...]:
    return tuple(f"{scale}/runs/{corpus}/{s}-seed*.json" for s in scores)


def results_findings(scale: str, root: Path | None = None) -> list[Finding]:
    """Table 2 at ``scale``: CAN against Balanced on test2016 and on every test set, Balanced against
    Baseline, each against the seed spread and the paper's difference, and the paired bootstrap."""
    from canlib.model.config import LABELS, PAPER_SYSTEMS
    from canlib.studies.paper import paper_numbers
    from canlib.model.config import ALL_SYSTEMS
    from canlib.studies.scorecard import describe_paired, gap_verdict, paired_bootstrap

    if scale == "tiny":
        return _tiny_note(scale, "these BLEU scores and their differences")
    t2 = paper_numbers()["table2_wmt14"]["en-de"]
    test = seed_bleu(scale, PAPER_SYSTEMS, "test", root=root)
    out = []
    if all(s in test for s in ("can", "balanced")):
        gap, se2 = _gap(test, "can", "balanced")
        paired = paired_bootstrap(scale, "can", "balanced", root=root)
        v = {"mean/test/can": statistics_mean(test["can"]), "mean/test/balanced": statistics_mean(test["balanced"]),
             "gap/test/can/balanced": gap, "paper/t2/can-balanced": t2["CAN"][0] - t2["Balanced"][0]}
        spread = ""
        if se2 is not None:
            v["se2/test/can/balanced"] = se2
            spread = (f" With {len(test['can'])} seeds each, the gap's interval of two standard errors is "
                      f"{gap - se2:+.2f} to {gap + se2:+.2f}: "
                      + ("it lies wholly below -0.5, so CAN does **not** stay within half a point of Balanced here"
                         if gap + se2 < -0.5 else "it is not clear of the -0.5 criterion") + ".")
        out.append(Finding(
            f"**CAN loses about {abs(gap):.1f} BLEU to Balanced here.** On test2016 CAN scores {v['mean/test/can']:.2f} "
            f"tokenized BLEU and Balanced {v['mean/test/balanced']:.2f} (means over seeds): CAN minus Balanced is "
            f"{gap:+.2f}, where the paper has {v['paper/t2/can-balanced']:+.2f} (Table 2, WMT14 En-De).{spread} "
            f"{describe_paired(paired)}" + (": in every seed pair the gap is larger than the test set's sampling noise."
                                            if gap_verdict(paired) == "real" else "."),
            v, _sources(scale, {s: test[s] for s in ("can", "balanced")})))
    tests = ("test", "test2017_flickr", "test2017_mscoco")
    per = {split: seed_bleu(scale, ALL_SYSTEMS, split, root=root) for split in tests}
    if all(all(s in per[sp] for s in ("can", "balanced")) for sp in tests):
        v = {f"gap/{sp}/can/balanced": _gap(per[sp], "can", "balanced")[0] for sp in tests}
        last = [sp for sp in tests if min(per[sp], key=lambda s: statistics_mean(per[sp][s])) == "can"]
        v["last_count"] = len(last)
        gaps = ", ".join(f"{v[f'gap/{sp}/can/balanced']:+.2f} on {split_name(sp)}" for sp in tests)
        where = ("on every test set" if len(last) == len(tests) else f"on {len(last)} of the {len(tests)} test sets")
        out.append(Finding(
            f"**CAN is last of the {len(per['test'])} trained systems {where}**, and its gap to Balanced grows on "
            f"the harder, out-of-domain sets: {gaps} (tokenized BLEU, means over seeds). The paper reports only "
            "its WMT14 and WMT17 test sets.", v, _sources(scale, per["test"])))
    if all(s in test for s in ("balanced", "baseline")):
        gap, se2 = _gap(test, "balanced", "baseline")
        paired = paired_bootstrap(scale, "balanced", "baseline", root=root)
        v = {"gap/test/balanced/baseline": gap, "paper/t2/balanced-baseline": t2["Balanced"][0] - t2["Baseline"][0]}
        noise = ""
        if se2 is not None:
            v["se2/test/balanced/baseline"] = se2
            noise = (f"; against the seed spread (two standard errors {se2:.2f}) that loss is "
                     + ("real" if gap + se2 < 0 else "within noise, so whether 12/2 keeps 6/6's BLEU at this scale "
                        "is not settled"))
        out.append(Finding(
            f"**Balanced (12/2) does not keep the Baseline's (6/6) BLEU here:** Balanced minus Baseline is {gap:+.2f} "
            f"on test2016 where the paper has {v['paper/t2/balanced-baseline']:+.2f}{noise}. "
            f"{describe_paired(paired)}.",
            v, _sources(scale, {s: test[s] for s in ("balanced", "baseline")})))
    others = [s for s in ("san", "aan") if s in test and "balanced" in test]
    if others:
        v = {f"gap/test/{s}/balanced": _gap(test, s, "balanced")[0] for s in others}
        v.update({f"paper/t2/{s}-balanced": t2[LABELS[s]][0] - t2["Balanced"][0] for s in others})
        out.append(Finding(
            "SAN and AAN against Balanced: " + "; ".join(
                f"{LABELS[s]} {v[f'gap/test/{s}/balanced']:+.2f} (paper {v[f'paper/t2/{s}-balanced']:+.2f})" for s in others)
            + " tokenized BLEU on test2016.", v, _sources(scale, {s: test[s] for s in others})))
    return out


def statistics_mean(values) -> float:
    import statistics

    return statistics.fmean(values)


def ablation_findings(scale: str, root: Path | None = None) -> list[Finding]:
    """Table 5 at ``scale``: which compression costs the BLEU, against the seed spread and the paper's
    (averaged over 3 runs) differences."""
    from canlib.model.config import ABLATION_SYSTEMS
    from canlib.studies.paper import paper_numbers

    if scale == "tiny":
        return _tiny_note(scale, "these BLEU scores")
    t5 = paper_numbers()["table5_ablation_en-de"]
    label = {"can_attn": "Compress Attention", "can_ffn": "Compress FFN", "can": "Compress All"}
    test = seed_bleu(scale, ABLATION_SYSTEMS, "test", root=root)
    if not all(s in test for s in ABLATION_SYSTEMS):
        return []
    v = {}
    for s in label:
        v[f"gap/test/{s}/balanced"], se2 = _gap(test, s, "balanced")
        if se2 is not None:
            v[f"se2/test/{s}/balanced"] = se2
        v[f"paper/t5/{s}-balanced"] = t5[label[s]][0] - t5["Balanced"][0]
    attn, ffn = v["gap/test/can_attn/balanced"], v["gap/test/can_ffn/balanced"]
    order = "keeps the paper's order" if attn < ffn else "does not keep the paper's order"

    def gap_text(s: str) -> str:
        se = f" ± {v[f'se2/test/{s}/balanced']:.2f}" if f"se2/test/{s}/balanced" in v else ""
        return f"{label[s]} {v[f'gap/test/{s}/balanced']:+.2f}{se} (paper {v[f'paper/t5/{s}-balanced']:+.2f})"

    return [Finding(
        f"**The loss comes from compressing attention.** Against Balanced on test2016 (tokenized BLEU, mean over "
        f"seeds ± two standard errors; the paper's numbers are the average of 3 runs): {gap_text('can_attn')}, "
        f"{gap_text('can_ffn')}, {gap_text('can')}. The ablation {order}: compressing attention costs more than "
        "compressing the FFN. Compress FFN is within the seed noise of Balanced; Compress Attention is not, and CAN, "
        "which does both, loses the most.", v, _sources(scale, test))]


def depths_findings(scale: str, root: Path | None = None) -> list[Finding]:
    """Figure 4 at ``scale``: BLEU over the four depths (the two middle depths with one seed)."""
    from canlib.model.config import DEPTH_SYSTEMS
    from canlib.studies.paper import paper_numbers

    if scale == "tiny":
        return _tiny_note(scale, "these BLEU scores")
    f4 = paper_numbers()["fig4_balance_en-de"]
    test = seed_bleu(scale, DEPTH_SYSTEMS, "test", root=root)
    if not all(s in test for s in DEPTH_SYSTEMS):
        return []
    seeds = {s: len(test[s]) for s in DEPTH_SYSTEMS}
    one = [s for s in DEPTH_SYSTEMS if seeds[s] == 1]
    v = {"gap/test/depth-14-1/balanced": _gap(test, "depth-14-1", "balanced")[0],
         "paper/f4/14-1_minus_12-2": f4["bleu"][3] - f4["bleu"][2],
         "gap/test/depth-9-4/baseline": _gap(test, "depth-9-4", "baseline")[0],
         "paper/f4/9-4_minus_6-6": f4["bleu"][1] - f4["bleu"][0],
         "sd/test/balanced": statistics_sd(test["balanced"])}
    names = {"depth-9-4": "9/4", "depth-14-1": "14/1"}
    from canlib.studies.scorecard import describe_paired, paired_bootstrap

    gaps = paired_bootstrap(scale, "depth-14-1", "balanced", root=root)
    paired = describe_paired(gaps)
    real = ("the drop is larger than the test set's sampling noise for that one seed pair"
            if all(g.real for g in gaps) else "the drop is not clear of the test set's sampling noise")
    return [Finding(
        f"**One seed** of {' and '.join(names.get(s, s) for s in one)} is stored (the plan trains one; 6/6 and 12/2 have "
        f"{seeds['baseline']} and {seeds['balanced']}), so their points have no error bar and no verdict: a single "
        f"seed of Balanced varies by {v['sd/test/balanced']:.2f} BLEU (sd over its seeds), about the size of the "
        "smaller differences below.", {"sd/test/balanced": v["sd/test/balanced"]}, _sources(scale, test)),
        Finding(
        f"**The 14/1 drop reproduces:** 14/1 minus 12/2 is {v['gap/test/depth-14-1/balanced']:+.2f} tokenized BLEU on "
        f"test2016, the paper's Figure 4 has {v['paper/f4/14-1_minus_12-2']:+.2f}. 9/4 minus 6/6 is "
        f"{v['gap/test/depth-9-4/baseline']:+.2f} (paper {v['paper/f4/9-4_minus_6-6']:+.2f}). For 14/1 against 12/2, "
        f"{paired}: {real}, which is not a verdict over seeds.",
        {k: v[k] for k in ("gap/test/depth-14-1/balanced", "paper/f4/14-1_minus_12-2", "gap/test/depth-9-4/baseline",
                           "paper/f4/9-4_minus_6-6")}, _sources(scale, test))]


def statistics_sd(values) -> float:
    import statistics

    return statistics.stdev(values) if len(values) > 1 else float("nan")


def tasks_findings(stored: list[str], missing: list[str]) -> list[Finding]:
    """Which Multi30k directions are stored at small, and which are not run yet."""
    names = ", ".join(c.removeprefix("multi30k-") for c in missing)
    shown = ", ".join(c.removeprefix("multi30k-") for c in stored) or "none"
    text = f"Stored at `small`: {shown}."
    if missing:
        text += f" **Not run yet:** {names} ({len(missing)} of {len(stored) + len(missing)} directions)."
    return [Finding(text, {"stored": len(stored), "missing": len(missing)})]


# -- the beyond chapter (budget, distillation, CAN on 6/6) ---------------------------------------------------

def beyond_findings(scale: str, root: Path | None = None) -> list[Finding]:
    """The question (CAN - Balanced in the stored small runs against the paper's Table 2) and, at small/full,
    what each of the three studies of :mod:`canlib.studies.beyond` says about it; at tiny, that its models cannot
    answer it and which command would."""
    from canlib.studies import beyond
    from canlib.studies.paper import paper_numbers
    from canlib.studies.quality import default_scale

    paper = paper_numbers()
    t2, t4 = paper["table2_wmt14"]["en-de"], paper["table4_kd_en-de"]
    paper_gap = t2["CAN"][0] - t2["Balanced"][0]
    out: list[Finding] = []
    if default_scale(["balanced", "can"], root=root) == "small":
        refs = beyond.references("small", root)
        main = beyond.gap(refs["can"], refs["balanced"])
        v = {"can_mean": statistics_mean(refs["can"]), "balanced_mean": statistics_mean(refs["balanced"]),
             "gap": main.diff, "gap_2se": 2 * main.se, "paper_gap": paper_gap}
        out.append(Finding(
            f"**The question.** In the stored `small` runs (Multi30k En-De, d=256; {len(refs['can'])} and "
            f"{len(refs['balanced'])} seeds) CAN scores {v['can_mean']:.2f} test tokenized BLEU and Balanced "
            f"{v['balanced_mean']:.2f}: CAN − Balanced = {main.diff:+.2f} ± {v['gap_2se']:.2f} (2 standard errors), "
            f"where the paper's Table 2 has {paper_gap:+.2f} on WMT14 En-De.", v,
            tuple(f"small/runs/multi30k-en-de/{s}-seed{k}.json" for s in ("can", "balanced")
                  for k in range(1, len(refs[s]) + 1))))
    else:
        out.append(Finding("**The question** needs the stored `small` runs of Balanced and CAN (every seed), which this "
                           "results folder does not hold yet."))
    sums = beyond.summaries(scale, root)
    if scale == "tiny":
        best = max(r["scores"]["test"]["tok_bleu"] for s, _ in sums.values() for r in s["runs"])
        models = sum(len(beyond.study_runs(n)) for n in beyond.STUDIES)
        out.append(Finding(
            f"**This page was built at `tiny`** (d=64 models trained on a CPU while the book builds, one seed, "
            f"{beyond.TINY_STEPS} updates for a 1x run and {beyond.REDUCED_PAIRS} distilled pairs): its best "
            f"model scores {best:.2f} test BLEU, so its models cannot answer the question; the tables below only show that "
            f"the three studies run end to end. `{beyond.GPU_COMMAND}` on one H100/H200 trains the {models} models at "
            "`small` and stores them under `book/results/small/beyond/`; this page then shows them with no code change.",
            {"best_tiny_bleu": best, "models": models, "tiny_steps": beyond.TINY_STEPS}))
        return out + [Finding("**The answer** is not given at `tiny`: which explanation holds is a question about models "
                              "that translate, read against their seed spread.")]
    refs = beyond.references(scale, root)
    a = beyond.answer(scale, sums, refs)
    provs = [p for _, p in sums.values()]
    models = {n: len(s["runs"]) for n, (s, _) in sums.items()}
    out.append(Finding(
        f"**At `{scale}`** the three studies hold {sum(models.values())} models ("
        + ", ".join(f"{n}: {k}" for n, k in models.items()) + f"), stored on {', '.join(sorted({p['device'] for p in provs}))} "
        f"at commit {', '.join(sorted({str(p['commit'])[:12] for p in provs}))}; every number below is tokenized BLEU on "
        "test2016, the paper's metric, with ± 2 standard errors over seeds.", {"models": sum(models.values())}))

    def pm(g) -> str:
        return f"{g.diff:+.2f} ± {2 * g.se:.2f}"

    src = tuple(f"{scale}/beyond/{n}.json" for n in beyond.STUDIES)
    base = sums["budget"][0]["base_steps"]
    if a["main"] is None:
        return out + [Finding(f"Fewer than two seeds of Balanced or CAN are stored at `{scale}`: no gap to explain yet.")]
    parts = [f"{f}x ({base * f:,} updates): {pm(g)}" if g else f"{f}x: fewer than two seeds stored"
             for f, g in a["budget"].items()]
    longest = a["budget"][max(a["budget"])]
    out.append(Finding(
        f"**Training budget.** CAN − Balanced (test tokenized BLEU, ± 2 s.e.) at 1x ({base:,} updates): {pm(a['main'])}; "
        + "; ".join(parts) + ". "
        + (f"Against 1x, the longest budget moves the gap by {longest.change:+.2f} ± {2 * longest.change_se:.2f}: "
           f"a longer budget **{longest.verdict()}**." if longest else "No verdict yet."),
        {**{f"gap_x{f}": g.diff for f, g in a["budget"].items() if g}, "gap_x1": a["main"].diff}, src))
    g = a["distill"]
    teacher = sums["distill"][0]["teacher"]
    out.append(Finding(
        f"**Distillation** (teacher: Balanced, seed {teacher['teacher_seed']}, test tokenized BLEU "
        f"{teacher['teacher_bleu']['test']['tok_bleu']:.2f}; {teacher['pairs']:,} training pairs translated with beam "
        f"{teacher['beam']}): CAN − Balanced, both trained on the teacher's translations, is "
        + (f"{pm(g)}, against {a['main'].diff:+.2f} on the real targets (a change of {g.change:+.2f} ± "
           f"{2 * g.change_se:.2f}); the paper's Table 4 has {t4['CAN'][1] - t4['Balanced'][1]:+.2f} after distillation "
           f"and {t4['CAN'][0] - t4['Balanced'][0]:+.2f} before. Distillation **{g.verdict()}**."
           if g else "not measured yet (fewer than two seeds stored)."),
        {"teacher_test_bleu": teacher["teacher_bleu"]["test"]["tok_bleu"], **({"gap_kd": g.diff} if g else {})}, src))
    g = a["can-6-6"]
    if g:
        k = 2 * g.change_se
        less = ("hurts less on 6/6" if g.change - k > 0 else "hurts more on 6/6" if g.change + k < 0
                else "hurts 6/6 and 12/2 alike within noise")
        out.append(Finding(
            f"**CAN on 6/6:** CAN 6/6 − Baseline is {pm(g)}, CAN − Balanced {a['main'].diff:+.2f}: compressing the "
            f"decoder {less} (difference {g.change:+.2f} ± {k:.2f}); the paper reports {beyond.PAPER_CAN_ON['6/6']:+.2f} "
            f"and {beyond.PAPER_CAN_ON['12/2']:+.2f} on average (its Results section).",
            {"gap_66": g.diff, "change_66": g.change}, src))
    else:
        out.append(Finding("**CAN on 6/6:** not measured yet (fewer than two seeds stored)."))
    explained = [name for name, g in (("the training budget", longest), ("distillation", a["distill"]))
                 if g and g.verdict() in ("closes the gap", "narrows the gap")]
    if not explained:
        verdict = ("**The answer:** neither more updates nor distillation changes the gap beyond its seed spread at "
                   f"`{scale}`, so neither explains it here; the gap stands as a finding of this scale.")
    else:
        verdict = (f"**The answer:** {' and '.join(explained)} {'explains' if len(explained) == 1 else 'explain'} the gap "
                   "(at least partly): read each row's interval above for how much.")
    if g and g.change - 2 * g.change_se > 0:
        verdict += (" Which model is compressed matters too: at this scale CAN costs less on 6/6 than on 12/2, as the "
                    "paper reports.")
    out.append(Finding(verdict))
    return out


def statistics_mean(values) -> float:
    import statistics

    return statistics.fmean(values)
