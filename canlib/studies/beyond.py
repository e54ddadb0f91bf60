"""Beyond the paper: why does CAN lose more BLEU to Balanced here than in the paper? The studies, as read.

The paper itself points at three things that could explain a larger gap (the "beyond" chapter states the question):

* ``budget``: Balanced and CAN trained 2x longer than the scale's budget (2,400 updates at small), the
  learning-rate schedule **not** rescaled: the same peak lr and warm-up, the inverse-square-root decay simply
  continued, so a longer run passes through the 1x run's schedule and the only change is "more updates". Every
  ``valid_every`` updates (400 at small) the trainer logs the validation loss and greedy (beam 1) validation
  sacreBLEU, so the chapter draws the gap against updates beside the paper's Fig. 8. The design is settled at
  **1x and 2x**: the 4x models were never trained, and they would add nothing a reader can use, since in all
  four stored 2x runs (H100, commit 26a17f1) the validation loss is lowest at 1,600 or 2,000 updates and higher
  at 2,400 than at 2,000 (``log`` in each stored JSON; ``tests/test_engine.py`` checks it): a 4x run trains on
  past that turn. Validating more often (every 100 updates) would place the turn more precisely, but the trainer
  checkpoints at every validation and averages the last two checkpoints, so it would also change which weights
  a run averages (2,300 and 2,400 instead of 2,000 and 2,400) and the next experiments could no longer be read
  against the stored 2x runs; they keep the 2x recipe as stored (validation every 400 updates). So ``beyond/budget.json`` is
  summarised from the stored 2x runs (``canlib experiment --scale small --studies budget --summarise``,
  no training) and the study is shown on its own. Seed 3 of the 2x runs is queued (the 2x references of the
  next experiments below want three seeds).
* ``distill``: sequence-level knowledge distillation as in the paper's Table 4. The teacher is Balanced,
  the paper's choice ("The balanced baseline is used to generate the pseudo data for KD"), trained here with
  the scale's recipe (seed 1, the main plan's own run); it translates the training set with beam 4, and
  Balanced, SAN, AAN and CAN (3 seeds each) train on those targets and are scored against the real references.
  The distilled corpus itself is not stored; its provenance is (teacher, its BLEU, pairs, a hash of the targets).
* ``can-6-6``: CAN's decoder layers on the 6/6 Baseline (preset ``can-6-6``), 3 seeds, read beside the
  Baseline runs of the main plan: the paper reports -0.09 BLEU on average there against -0.25 on 12/2.

And the next experiments that would sharpen the answer, all at the 2x budget the budget study settles on
(every 1x model is undertrained), 3 seeds each, read against the 2x Balanced and CAN of ``budget``:

* ``distill-x2``: distillation from a stronger teacher, the 2x Balanced (seed 1 of ``budget``); Balanced and
  CAN students at 2x.
* ``hybrid``: 12/2 with one standard and one CAN decoder layer, both orders (``std-can``: standard below),
  testing the paper's reading that the low layers matter.
* ``can-residual``: CAN keeping the attention's own residual S + C (``canlib.model.layers.CANResidualDecoderLayer``),
  a control on this library's interpretation, which drops it.

Every model is a run result like the main plan's, stored as ``beyond/runs/<corpus>/<study>-<system>[-<tag>]-seed<k>``
with its hypotheses beside it, so ``canlib experiment --rescore`` recomputes its sacreBLEU; each study's summary
(``beyond/<study>``) copies the scores a chapter shows, and the rescore rechecks those copies. The engine
(:mod:`canlib.experiments.beyond`) trains and stores them; this module defines the studies as data and reads them.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from canlib.model.config import LABELS
from canlib.studies.paper import paper_numbers
from canlib.studies.quality import bleu_by_seed, missing_results, planned_seeds
from canlib.studies.results import load_result
from canlib.studies.scales import scale_spec
from canlib.studies.scorecard import (K_SPREAD, MIN_SEEDS, NOT_RUN, NOT_TESTED, QUALITY_SCALES, Claim, interval_verdict,
                                      quality_claim, seed_difference)
from canlib.studies.store import default_root, stored_path

ORIGINAL = ("budget", "distill", "can-6-6")  # the three explanations the chapter weighs
NEXT = ("distill-x2", "hybrid", "can-residual")  # the next experiments (issue 34 item 5), queued in gpu_small.sh
STUDIES = ORIGINAL + NEXT
BUDGET_SYSTEMS = ("balanced", "can")
BUDGET_FACTORS = (2,)  # 1x is the main plan; 4x is not part of the design (see the module docstring)
NEXT_FACTOR = 2  # the budget of the next experiments
STUDENTS = ("balanced", "san", "aan", "can")
X2_STUDENTS = ("balanced", "can")
TEACHER = "balanced"  # the paper's teacher for Table 4
TEACHER_SEED = 1
DISTILL_BEAM = 4
REDUCED_PAIRS = 64  # an end-to-end test (a reduced budget) distils only the first pairs of the training set
HYBRIDS = {"std-can": ("standard", "can"), "can-std": ("can", "standard")}  # decoder layer kinds, bottom first
RESIDUAL_LAYERS = ("can_residual", "can_residual")
SEEDS = {"budget": (1, 2, 3), "distill": (1, 2, 3), "can-6-6": (1, 2, 3), "distill-x2": (1, 2, 3), "hybrid": (1, 2, 3),
         "can-residual": (1, 2, 3)}
REFERENCE_SYSTEMS = ("baseline", "balanced", "can")  # main-plan runs the chapter reads beside the studies
# quoted from the paper's Results section (not in a table): "applying CAN on the standard baseline hurt the
# performance less (-0.09 BLEU points on average) than on the balanced baseline (-0.25 BLEU points on average)"
PAPER_CAN_ON = {"6/6": -0.09, "12/2": -0.25}
GPU_COMMAND = "bash scripts/gpu_small.sh"


def study_models(name: str, seeds: Sequence[int] | None = None) -> list[tuple[str, str, int]]:
    """(system, tag, seed) of each model of study ``name``, in training order (a teacher before its students)."""
    if name not in STUDIES:
        raise ValueError(f"study {name!r}: choose from {', '.join(STUDIES)}")
    seeds = list(seeds) if seeds is not None else list(SEEDS[name])
    if not seeds or any(int(k) < 1 for k in seeds):
        raise ValueError(f"seeds {seeds}: give at least one seed, every seed >= 1")
    if name == "budget":
        return [(s, f"x{f}", k) for f in BUDGET_FACTORS for k in seeds for s in BUDGET_SYSTEMS]
    if name == "distill":
        return [(TEACHER, "teacher", TEACHER_SEED)] + [(s, "kd", k) for k in seeds for s in STUDENTS]
    if name == "distill-x2":
        return [(s, "kd", k) for k in seeds for s in X2_STUDENTS]
    if name == "hybrid":
        return [("balanced", tag, k) for k in seeds for tag in HYBRIDS]
    return [("can" if name == "can-residual" else "can-6-6", "", k) for k in seeds]


def model_name(name: str, system: str, tag: str, seed: int) -> str:
    """A study model's stored name without its folder: ``budget-can-x2-seed1``."""
    return f"{name}-{system}{'-' + tag if tag else ''}-seed{seed}"


def study_runs(name: str, seeds: Sequence[int] | None = None) -> list[str]:
    """The stored names of the models of study ``name`` (see :func:`study_models`)."""
    return [model_name(name, *m) for m in study_models(name, seeds)]


# -- what the chapter reads ------------------------------------------------------------------------

# At tiny the chapter's explicit call trains every model of its studies on a CPU while the book builds: one seed,
# and a quarter of the tiny budget (30 updates for a 1x run; the distilled corpus is the first REDUCED_PAIRS
# pairs), for the main runs it compares with too. Such models only show that the studies run end to end.
TINY_SEEDS = (1,)
TINY_STEPS = 30


CHAPTER_SYSTEMS = tuple(dict.fromkeys(REFERENCE_SYSTEMS + STUDENTS))  # the main-plan runs the chapter reads


def chapter_budget(scale: str) -> dict[str, Any]:
    """The seeds and reduced budget of the chapter's models at ``scale`` (keyword arguments of the chapter's
    explicit ``train_missing`` call): at tiny ``TINY_SEEDS`` and ``TINY_STEPS``, elsewhere the studies' own."""
    return {"seeds": TINY_SEEDS, "reduced": TINY_STEPS} if scale == "tiny" else {}


def results_root(scale: str, root: Path | None = None) -> Path | None:
    """The results folder the chapter reads: ``root``, else at tiny the folder of its reduced budget."""
    return default_root("tiny", TINY_STEPS) if root is None and scale == "tiny" else root


def default_scale(root: Path | None = None, studies: Sequence[str] = ORIGINAL) -> str:
    """"small" once the summaries of ``studies`` and every seed of Baseline, Balanced and CAN are stored at small,
    else "tiny"."""
    corpus = scale_spec("small").corpus
    runs = [f"runs/{corpus}/{s}-seed{k}" for s in REFERENCE_SYSTEMS for k in planned_seeds("small", s)]
    return "tiny" if missing_results("small", runs + [f"beyond/{n}" for n in studies], root) else "small"


def summaries(scale: str, root: Path | None = None, studies: Sequence[str] = ORIGINAL
              ) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """{study: (summary, provenance)} of ``studies`` as stored (at tiny: by the chapter's explicit call, with
    ``TINY_SEEDS`` and ``TINY_STEPS``); a missing one is an error naming the command that stores it."""
    out = {}
    for name in studies:
        path = stored_path(f"beyond/{name}", scale, results_root(scale, root))
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the {name} study is not stored at {scale}; `python -m canlib experiment "
                                    f"--scale {scale} --studies {name}` trains and stores it (or `{GPU_COMMAND}`)")
        out[name] = load_result(path)
    return out


def _full(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if not r["reduced_budget"]]


def references(scale: str, root: Path | None = None, metric: str = "tok_bleu",
               systems: Sequence[str] = REFERENCE_SYSTEMS) -> dict[str, list[float]]:
    """Test BLEU per seed of the main plan's runs of ``systems`` (at tiny: seed 1 with ``TINY_STEPS`` updates, the
    budget of this chapter's tiny studies)."""
    return bleu_by_seed(scale, list(systems), split="test", metric=metric, root=results_root(scale, root),
                        full_budget=scale != "tiny")


def scores_by(rows: list[dict[str, Any]], group: Callable[[dict[str, Any]], Any], metric: str = "tok_bleu",
              split: str = "test") -> dict[Any, list[float]]:
    """{group(row): [score per seed]} over the rows of a summary."""
    out: dict[Any, list[float]] = {}
    for row in rows:
        out.setdefault(group(row), []).append(float(row["scores"][split][metric]))
    return out


def _stats(values: list[float] | None) -> tuple[float, float, int]:
    if not values:
        return math.nan, math.nan, 0
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else math.nan, len(values)


def _cell(values: list[float] | None) -> str:
    mean, std, n = _stats(values)
    if not n:
        return "—"
    return f"{mean:.2f} ± {std:.2f} (n={n})" if n > 1 else f"{mean:.2f} (n=1)"


def _gap(a: list[float] | None, b: list[float] | None) -> str:
    if not a or not b:
        return "—"
    diff = statistics.fmean(a) - statistics.fmean(b)
    if len(a) > 1 and len(b) > 1:
        se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
        return f"{diff:+.2f} ± {2 * se:.2f}"
    return f"{diff:+.2f}"


def budget_table(scale: str, summary: dict[str, Any], refs: dict[str, list[float]], metric: str = "tok_bleu"):
    """One row per budget (1x: the main plan's runs): Balanced and CAN test BLEU (mean ± std over seeds) and
    CAN - Balanced (± 2 standard errors)."""
    import pandas as pd

    base = summary["base_steps"]
    by = scores_by(summary["runs"], lambda r: (r["system"], r["factor"]), metric)
    rows = [{"updates": base, "budget": "1x (main plan)", "Balanced": _cell(refs.get("balanced")),
             "CAN": _cell(refs.get("can")), "CAN − Balanced": _gap(refs.get("can"), refs.get("balanced"))}]
    for f in summary["factors"]:
        rows.append({"updates": base * f, "budget": f"{f}x", "Balanced": _cell(by.get(("balanced", f))),
                     "CAN": _cell(by.get(("can", f))), "CAN − Balanced": _gap(by.get(("can", f)), by.get(("balanced", f)))})
    return pd.DataFrame(rows).set_index("updates")


def distill_table(summary: dict[str, Any], real: dict[str, list[float]], metric: str = "tok_bleu"):
    """One row per student: test BLEU trained on real targets (main plan) and on distilled ones, beside the
    paper's Table 4 (before and after KD)."""
    import pandas as pd

    t4 = paper_numbers()["table4_kd_en-de"]
    kd = scores_by(summary["runs"], lambda r: r["system"] if r["tag"] == "kd" else None, metric)
    rows = []
    for s in summary["students"]:
        label = LABELS[s]
        rows.append({"system": label, "ours: real targets": _cell(real.get(s)), "ours: distilled": _cell(kd.get(s)),
                     "ours: distilled − real": _gap(kd.get(s), real.get(s)),
                     "paper: before KD": t4[label][0], "paper: after KD": t4[label][1]})
    return pd.DataFrame(rows).set_index("system")


def can66_table(summary: dict[str, Any], refs: dict[str, list[float]], metric: str = "tok_bleu"):
    """CAN against the model it compresses, on 6/6 and on 12/2: our test BLEU over seeds and the paper's average
    differences."""
    import pandas as pd

    can66 = scores_by(summary["runs"], lambda r: r["system"], metric).get("can-6-6")
    rows = [{"depth": "6/6", "standard decoder": _cell(refs.get("baseline")), "CAN decoder": _cell(can66),
             "CAN − standard": _gap(can66, refs.get("baseline")), "paper (average)": PAPER_CAN_ON["6/6"]},
            {"depth": "12/2", "standard decoder": _cell(refs.get("balanced")), "CAN decoder": _cell(refs.get("can")),
             "CAN − standard": _gap(refs.get("can"), refs.get("balanced")), "paper (average)": PAPER_CAN_ON["12/2"]}]
    return pd.DataFrame(rows).set_index("depth")


def curves(summary: dict[str, Any]) -> dict[tuple[str, int], dict[str, list[float]]]:
    """{(system, factor): {"step", "valid_loss", "valid_bleu"}}: each validation point averaged over seeds."""
    grouped: dict[tuple[str, int], dict[int, list[dict[str, Any]]]] = {}
    for row in summary["runs"]:
        for point in row["curve"]:
            grouped.setdefault((row["system"], row["factor"]), {}).setdefault(point["step"], []).append(point)
    out = {}
    for k, by_step in grouped.items():
        steps = sorted(by_step)
        out[k] = {"step": steps, **{m: [statistics.fmean(p[m] for p in by_step[s]) for s in steps]
                                     for m in ("valid_loss", "valid_bleu")}}
    return out


def budget_figure(summary: dict[str, Any], scale: str):
    """Left: greedy validation BLEU of Balanced and CAN against updates (the longest runs, mean over seeds);
    middle: CAN - Balanced validation loss against updates; right: the same gap in the paper's Fig. 8."""
    import matplotlib.pyplot as plt

    c = curves(summary)
    longest = max(summary["factors"])
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for system, colour in (("balanced", "tab:red"), ("can", "tab:blue")):
        if (system, longest) in c:
            axes[0].plot(c[system, longest]["step"], c[system, longest]["valid_bleu"], "o-", color=colour,
                         label=f"{'Balanced' if system == 'balanced' else 'CAN'} ({longest}x)")
    axes[0].set(xlabel="updates", ylabel="valid sacreBLEU (greedy)", title=f"ours ({scale})")
    axes[0].legend(fontsize=8)
    for f in summary["factors"]:
        if ("can", f) in c and ("balanced", f) in c:
            gap = [a - b for a, b in zip(c["can", f]["valid_loss"], c["balanced", f]["valid_loss"])]
            axes[1].plot(c["can", f]["step"], gap, "o-", label=f"{f}x budget")
    axes[1].axhline(0, color="grey", lw=0.8)
    axes[1].set(xlabel="updates", ylabel="valid loss: CAN − Balanced", title=f"ours ({scale})")
    axes[1].legend(fontsize=8)
    f8 = paper_numbers()["fig8_curves_en-de"]
    axes[2].plot(f8["epochs"], [a - b for a, b in zip(f8["valid"]["CAN"], f8["valid"]["Balanced"])], "s-", color="black")
    axes[2].axhline(0, color="grey", lw=0.8)
    axes[2].set(xlabel="epoch", ylabel="valid loss: CAN − Balanced", title="paper, Fig. 8 (WMT14 En-De)")
    fig.tight_layout()
    return fig


# -- the scorecard's rows --------------------------------------------------------------------------

def study_scores(scale: str, root: Path | None = None, metric: str = "tok_bleu") -> dict[str, list[float]]:
    """Full-budget test BLEU per seed: "kd:<system>" for the distilled students, "can-6-6", and the main plan's
    Baseline, Balanced and CAN; empty at a scale whose models are not judged, or where nothing is stored."""
    if scale not in QUALITY_SCALES:
        return {}
    out: dict[str, list[float]] = {}
    for name, prefix in (("distill", "kd:"), ("can-6-6", "")):
        path = stored_path(f"beyond/{name}", scale, root)
        if path.is_file():
            summary, _ = load_result(path)
            for system, values in scores_by([r for r in _full(summary["runs"]) if r["tag"] != "teacher"],
                                            lambda r: r["system"], metric).items():
                out[prefix + system] = values
    out.update(references(scale, root, metric))
    return out


def claims(scale: str, root: Path | None = None, scores: dict[str, list[float]] | None = None) -> list:
    """The scorecard rows of these studies: Table 4 (with distillation CAN is on par with Balanced) and "CAN on
    6/6 hurts less than on 12/2", judged by the scorecard's rules (two seeds or more, 2 standard errors)."""
    def not_run(claim: Claim, study_name: str) -> Claim:
        return replace(claim, verdict=NOT_RUN, evidence=f"scale {scale}: the {study_name} study is not stored: "
                       f"`python -m canlib experiment --scale {scale} --studies {study_name}` (or `{GPU_COMMAND}`)")


    scores = study_scores(scale, root) if scores is None else scores
    t4 = paper_numbers()["table4_kd_en-de"]
    kd = {"can": scores.get("kd:can", []), "balanced": scores.get("kd:balanced", [])}
    table4 = quality_claim("With distillation CAN is on par with Balanced (Table 4)",
                           f"{t4['CAN'][1] - t4['Balanced'][1]:+.2f} (Table 4, both distilled)", "ΔBLEU >= -0.5",
                           lambda d: d >= -0.5, "can", "balanced", scale, kd)
    if table4.verdict != NOT_TESTED:
        table4 = replace(table4, evidence=table4.evidence.replace("(CAN - Balanced)", "(CAN - Balanced, both distilled)"))
    elif scale in QUALITY_SCALES and not (kd["can"] or kd["balanced"]):
        table4 = not_run(table4, "distill")
    name = "CAN on 6/6 hurts less than on 12/2 (Results)"
    paper = f"{PAPER_CAN_ON['6/6']:+.2f} vs {PAPER_CAN_ON['12/2']:+.2f} on average (Results)"
    criterion = "(CAN 6/6 − Baseline) − (CAN − Balanced) > 0"
    gate = [quality_claim(name, paper, criterion, lambda d: True, a, b, scale, scores)
            for a, b in (("can-6-6", "baseline"), ("can", "balanced"))]
    untested = next((g for g in gate if g.verdict == NOT_TESTED), None)
    if untested is not None:
        return [table4, not_run(untested, "can-6-6") if scale in QUALITY_SCALES and not scores.get("can-6-6") else untested]
    d66, se66 = seed_difference(scores["can-6-6"], scores["baseline"])
    d122, se122 = seed_difference(scores["can"], scores["balanced"])
    diff, se = d66 - d122, math.hypot(se66, se122)
    verdict = interval_verdict(diff - K_SPREAD * se, diff + K_SPREAD * se, lambda x: x > 0)
    evidence = (f"tok-BLEU, scale {scale}: CAN 6/6 − Baseline {d66:+.2f}, CAN − Balanced {d122:+.2f} "
                f"({len(scores['can-6-6'])}, {len(scores['baseline'])}, {len(scores['can'])}, {len(scores['balanced'])} seeds)")
    return [table4, Claim(name, "quality", paper, f"{diff:+.2f} ± {K_SPREAD * se:.2f} ({K_SPREAD:g} s.e.)", criterion,
                          evidence, verdict)]


# -- the answer ------------------------------------------------------------------------------------

CLOSE_MARGIN = 0.5  # "on par": the scorecard's criterion for CAN against Balanced (ΔBLEU >= -0.5)


@dataclass(frozen=True)
class Gap:
    """CAN minus its reference over seeds (``diff`` ± ``se``), and its change against the gap it is compared
    with (``change`` ± ``change_se``; NaN where there is none)."""

    diff: float
    se: float
    change: float = math.nan
    change_se: float = math.nan

    def verdict(self) -> str:
        """What this gap says about the explanation, by the scorecard's rule (2 standard errors)."""
        k = 2.0
        if self.diff - k * self.se >= -CLOSE_MARGIN:
            return "closes the gap"
        if math.isnan(self.change):
            return "leaves the gap open"
        if self.change - k * self.change_se > 0:
            return "narrows the gap"
        if self.change + k * self.change_se < 0:
            return "widens the gap"
        return "leaves the gap unchanged within noise"


def gap(a: list[float], b: list[float], a0: list[float] | None = None, b0: list[float] | None = None) -> Gap | None:
    """mean(a) - mean(b) with its standard error, and its change against mean(a0) - mean(b0); None with fewer
    than two seeds of any of them (no spread, no verdict)."""
    if any(v is not None and len(v) < MIN_SEEDS for v in (a, b, a0, b0)) or not a or not b:
        return None
    diff, se = seed_difference(a, b)
    if a0 is None or b0 is None:
        return Gap(diff, se)
    diff0, se0 = seed_difference(a0, b0)
    return Gap(diff, se, diff - diff0, math.hypot(se, se0))


def answer(scale: str, sums: dict[str, tuple[dict[str, Any], dict[str, Any]]], refs: dict[str, list[float]],
           metric: str = "tok_bleu") -> dict[str, Any]:
    """The gaps each study measures (full-budget runs only), each against the main plan's CAN - Balanced:
    {"main": Gap, "budget": {factor: Gap}, "distill": Gap, "can-6-6": Gap (CAN 6/6 - Baseline, its change
    against CAN - Balanced)}; a Gap is None where fewer than two seeds are stored."""
    can, bal = refs.get("can"), refs.get("balanced")
    out: dict[str, Any] = {"main": gap(can, bal)}
    budget_rows = scores_by(_full(sums["budget"][0]["runs"]), lambda r: (r["system"], r["factor"]), metric)
    out["budget"] = {f: gap(budget_rows.get(("can", f), []), budget_rows.get(("balanced", f), []), can, bal)
                     for f in sums["budget"][0]["factors"]}
    kd = scores_by(_full([r for r in sums["distill"][0]["runs"] if r["tag"] == "kd"]), lambda r: r["system"], metric)
    out["distill"] = gap(kd.get("can", []), kd.get("balanced", []), can, bal)
    c66 = scores_by(_full(sums["can-6-6"][0]["runs"]), lambda r: r["system"], metric).get("can-6-6", [])
    out["can-6-6"] = gap(c66, refs.get("baseline", []), can, bal)
    return out
