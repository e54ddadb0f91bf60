"""The paper's claims as data, each judged only by evidence that can test it.

* A **quality** claim (BLEU) is judged only at ``small``/``full`` with at least two seeds of every
  compared system, against the seed spread: the mean difference with an interval of
  ``k`` standard errors (``k=2``) either side. The claim holds when the whole interval satisfies the
  criterion, fails when none of it does, and is ``within noise`` otherwise.
* A **speed** claim is judged from GPU measurements in half precision (the paper's regime: batch 1,
  PyTorch launching every kernel, i.e. our "eager" rows) by the same rule over the spread of the
  timed repeats (min..max). CPU rows are shown, labelled, with no verdict: a CPU at batch 1 is
  bound by memory bandwidth, which is not what the paper measured.
* Anything else is ``not tested here``.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from canlib.model.config import LABELS
from canlib.studies.speed import CPU_LABEL

HELD, FAILED, NOISE, NOT_TESTED, NO_VERDICT_CPU = "held", "did not hold", "within noise", "not tested here", "no verdict (CPU)"
QUALITY_SCALES = ("small", "full")
MIN_SEEDS = 2
K_SPREAD = 2.0


@dataclass(frozen=True)
class Claim:
    """One row of the scorecard: a claim, the paper's figure, ours, the criterion, the evidence, the verdict."""

    name: str
    kind: str  # the evidence it needs: "quality" (BLEU over seeds), "speed" (GPU, fp16) or "other"
    paper: str
    ours: str
    criterion: str
    evidence: str
    verdict: str

    def as_row(self) -> dict[str, str]:
        return asdict(self)


def interval_verdict(low: float, high: float, ok: Callable[[float], bool]) -> str:
    """held if the criterion holds over the whole interval, did not hold if nowhere, else within noise.
    ``ok`` must be monotone in its argument (a threshold), so checking the ends suffices."""
    lo_ok, hi_ok = ok(low), ok(high)
    return HELD if lo_ok and hi_ok else FAILED if not lo_ok and not hi_ok else NOISE


def seed_difference(a: list[float], b: list[float]) -> tuple[float, float]:
    """(mean(a) - mean(b), its standard error from the two seed spreads)."""
    if len(a) < MIN_SEEDS or len(b) < MIN_SEEDS:
        raise ValueError(f"seed_difference needs at least {MIN_SEEDS} seeds per system (got {len(a)} and {len(b)})")
    se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    return statistics.fmean(a) - statistics.fmean(b), se


def quality_claim(name: str, paper: str, criterion: str, ok: Callable[[float], bool], system: str, against: str,
                  scale: str, bleu: dict[str, list[float]] | None, metric: str = "tok-BLEU") -> Claim:
    """A BLEU-difference claim (``system`` minus ``against``) judged against the seed spread; ``bleu`` holds
    full-budget runs only (``bleu_by_seed(..., full_budget=True)``)."""
    def untested(why: str) -> Claim:
        return Claim(name, "quality", paper, "—", criterion, why, NOT_TESTED)

    if scale not in QUALITY_SCALES:
        return untested(f"scale {scale}: its models do not translate well enough to judge BLEU")
    seeds = {s: (bleu or {}).get(s) or [] for s in (system, against)}
    short = [f"{LABELS.get(s, s)} has {len(v)} full-budget seed(s)" for s, v in seeds.items() if len(v) < MIN_SEEDS]
    if short:
        return untested(f"scale {scale}: " + ", ".join(short) + f"; needs at least {MIN_SEEDS}")
    diff, se = seed_difference(seeds[system], seeds[against])
    low, high = diff - K_SPREAD * se, diff + K_SPREAD * se
    ours = f"{diff:+.2f} ± {K_SPREAD * se:.2f} ({K_SPREAD:g} s.e.)"
    evidence = (f"{metric}, scale {scale}, {len(seeds[system])} vs {len(seeds[against])} seeds "
                f"({LABELS.get(system, system)} - {LABELS.get(against, against)})")
    return Claim(name, "quality", paper, ours, criterion, evidence, interval_verdict(low, high, ok))


def cross_task_claim(scale: str, by_direction: dict[str, dict[str, list[float]]], paper_range: str,
                     margin: float = 0.5, metric: str = "tok-BLEU") -> Claim:
    """"CAN is on par with Balanced across tasks": CAN at most ``margin`` below Balanced on every
    direction, each judged against its seed spread; held when every direction holds, did not hold when
    any fails, within noise otherwise. ``by_direction``: {corpus: {system: [BLEU per seed]}}."""
    name = f"CAN stays within {margin} BLEU of Balanced across tasks (Tables 2-3)"
    criterion = f"ΔBLEU >= -{margin} on every direction"
    per = {c: quality_claim(name, paper_range, criterion, lambda d: d >= -margin, "can", "balanced", scale, scores, metric)
           for c, scores in by_direction.items()}
    judged = {c: claim for c, claim in per.items() if claim.verdict != NOT_TESTED}
    if scale not in QUALITY_SCALES or len(judged) < 2:
        why = (f"scale {scale}: its models do not translate well enough to judge BLEU" if scale not in QUALITY_SCALES
               else f"{len(judged)} direction(s) with at least {MIN_SEEDS} seeds of CAN and Balanced; needs 2 or more")
        return Claim(name, "quality", paper_range, "—", criterion, why, NOT_TESTED)
    verdicts = [claim.verdict for claim in judged.values()]
    verdict = HELD if all(v == HELD for v in verdicts) else FAILED if FAILED in verdicts else NOISE
    ours = "; ".join(f"{c.removeprefix('multi30k-')} {claim.ours.split(' (')[0]}" for c, claim in judged.items())
    return Claim(name, "quality", paper_range, ours, criterion, f"{metric}, scale {scale}, {len(judged)} directions", verdict)


def ratio_range(rows: dict[str, dict[str, float]], system: str, against: str) -> tuple[float, float, float]:
    """(median ratio, lowest, highest) of system/against over the timed repeats' min..max."""
    a, b = rows[system], rows[against]
    return a["tok_per_s"] / b["tok_per_s"], a.get("min", a["tok_per_s"]) / b.get("max", b["tok_per_s"]), \
        a.get("max", a["tok_per_s"]) / b.get("min", b["tok_per_s"])


def speed_claims(name: str, kind_paper: str, criterion: str, ok: Callable[[float], bool], system: str, against: str,
                 gpu: dict[str, dict[str, float]] | None, gpu_evidence: str,
                 cpu: dict[str, dict[str, float]] | None, cpu_evidence: str) -> list[Claim]:
    """A speed-ratio claim: one judged GPU row (when measured) and one CPU row without a verdict."""
    out = []
    if gpu and system in gpu and against in gpu:
        med, low, high = ratio_range(gpu, system, against)
        out.append(Claim(name, "speed", kind_paper, f"{med:.2f}x (repeats {low:.2f}-{high:.2f}x)", criterion,
                         gpu_evidence, interval_verdict(low, high, ok)))
    else:
        out.append(Claim(name, "speed", kind_paper, "—", criterion, "no GPU measurement of these systems", NOT_TESTED))
    if cpu and system in cpu and against in cpu:
        med, low, high = ratio_range(cpu, system, against)
        out.append(Claim(name, "speed", kind_paper, f"{med:.2f}x (repeats {low:.2f}-{high:.2f}x)", criterion,
                         f"{CPU_LABEL}; {cpu_evidence}", NO_VERDICT_CPU))
    return out


def paper_ratio(table: dict[str, list[float]], system: str, against: str, column: int) -> float:
    return table[system][column] / table[against][column]


def claims(scale: str, *, bleu: dict[str, list[float]] | None, gpu: dict[str, dict[str, float]] | None,
           gpu_evidence: str, cpu: dict[str, dict[str, float]] | None, cpu_evidence: str,
           gpu_batch: dict[str, dict[int, float]] | None = None, batch_evidence: str = "",
           paper: dict[str, Any] | None = None, metric: str = "tok-BLEU") -> list[Claim]:
    """Every claim this book tests, judged from the evidence passed in (no measuring here).

    ``bleu``: {system: [BLEU per seed]}; ``gpu``/``cpu``: {system: {tok_per_s, min, max}};
    ``gpu_batch``: {system: {batch: tok/s}}; ``paper``: :func:`canlib.studies.paper.paper_numbers`.
    """
    from canlib.studies.paper import paper_numbers

    paper = paper or paper_numbers()
    t2 = paper["table2_wmt14"]["en-de"]
    t5 = paper["table5_ablation_en-de"]
    f4 = paper["fig4_balance_en-de"]
    f7 = paper["fig7_parallel_en-de"]
    # CAN over Balanced on every task of Tables 2 and 3 (the paper's 14 tasks)
    can_gains = [v["CAN"][2] / v["Balanced"][2] for table in ("table2_wmt14", "table3_wmt17")
                 for k, v in paper[table].items() if not k.startswith("_")]
    rows: list[Claim] = []
    rows += speed_claims("Balanced 12/2 decodes about 2x faster than Baseline 6/6",
                         f"{paper_ratio(t2, 'Balanced', 'Baseline', 2):.2f}x (Table 2, En-De)", "ratio >= 1.8x",
                         lambda r: r >= 1.8, "balanced", "baseline", gpu, gpu_evidence, cpu, cpu_evidence)
    rows.append(quality_claim("Balanced keeps Baseline's BLEU", f"{t2['Balanced'][0] - t2['Baseline'][0]:+.2f} (Table 2, En-De)",
                              "ΔBLEU >= -0.5", lambda d: d >= -0.5, "balanced", "baseline", scale, bleu, metric))
    rows += speed_claims("CAN decodes faster than Balanced",
                         f"{paper_ratio(t2, 'CAN', 'Balanced', 2):.2f}x En-De; {min(can_gains):.2f}-{max(can_gains):.2f}x over Tables 2-3",
                         f"ratio >= {min(can_gains):.2f}x (the paper's smallest)", lambda r: r >= round(min(can_gains), 2),
                         "can", "balanced", gpu, gpu_evidence, cpu, cpu_evidence)
    rows.append(quality_claim("CAN is within 0.5 BLEU of Balanced", f"{t2['CAN'][0] - t2['Balanced'][0]:+.2f} (Table 2, En-De)",
                              "ΔBLEU >= -0.5", lambda d: d >= -0.5, "can", "balanced", scale, bleu, metric))
    for other in ("san", "aan"):
        label = LABELS[other]
        rows += speed_claims(f"{label} gains less speed than CAN",
                             f"{label} {paper_ratio(t2, label, 'Balanced', 2):.2f}x vs CAN {paper_ratio(t2, 'CAN', 'Balanced', 2):.2f}x",
                             f"CAN / {label} > 1", lambda r: r > 1, "can", other, gpu, gpu_evidence, cpu, cpu_evidence)
    rows += speed_claims("Compressing attention gains more speed than compressing the FFN (Table 5)",
                         f"{t5['Compress Attention'][1] / t5['Compress FFN'][1]:.2f}x",
                         "Compress Attention / Compress FFN > 1", lambda r: r > 1, "can_attn", "can_ffn",
                         gpu, gpu_evidence, cpu, cpu_evidence)
    rows.append(quality_claim("Compress FFN loses no BLEU against Balanced (Table 5)",
                              f"{t5['Compress FFN'][0] - t5['Balanced'][0]:+.2f}", "ΔBLEU >= -0.5",
                              lambda d: d >= -0.5, "can_ffn", "balanced", scale, bleu, metric))
    rows.append(quality_claim("A 14/1 model loses BLEU against 12/2 (Figure 4)", f"{f4['bleu'][3] - f4['bleu'][2]:+.2f}",
                              "ΔBLEU < 0", lambda d: d < 0, "depth-14-1", "balanced", scale, bleu, metric))
    first, last = f7["batch"][0], f7["batch"][-1]
    if gpu_batch and all(first in gpu_batch.get(s, {}) and last in gpu_batch.get(s, {}) for s in ("can", "balanced")):
        at = {b: gpu_batch["can"][b] / gpu_batch["balanced"][b] for b in (first, last)}
        rows.append(Claim("CAN's gain over Balanced shrinks at large batch (Figure 7)", "speed",
                          f"{1 + f7['delta_speed_pct'][0] / 100:.2f}x at {first}, {1 + f7['delta_speed_pct'][-1] / 100:.2f}x at {last}",
                          f"{at[first]:.2f}x at {first}, {at[last]:.2f}x at {last} (medians)",
                          f"smaller at batch {last} than at {first}", batch_evidence,
                          HELD if at[last] < at[first] else FAILED))
    else:
        rows.append(Claim("CAN's gain over Balanced shrinks at large batch (Figure 7)", "speed", f"+{f7['delta_speed_pct'][0]:.1f}% at {first}",
                          "—", f"smaller at batch {last} than at {first}", "no GPU batch sweep", NOT_TESTED))
    diag = [paper["fig2_similarity"]["self_vs_cross"][i][i] for i in range(len(paper["fig2_similarity"]["self_vs_cross"]))]
    rows.append(Claim("Self- and cross-attention inputs are alike (Figure 2)", "other", f"diagonal {min(diag):.2f}-{max(diag):.2f}", "see the similarity chapter",
                      "—", "an analysis of trained models, not a judged claim here", NOT_TESTED))
    return rows


def seed_scores(scale: str, systems: tuple[str, ...] | list[str], metric: str = "tok_bleu") -> dict[str, list[float]] | None:
    """Test BLEU per seed of ``systems`` from the stored runs (the paper's tokenized BLEU, the metric
    every chapter judges); None at a scale whose models are not judged."""
    if scale not in QUALITY_SCALES:
        return None
    from canlib.studies.quality import bleu_by_seed

    return bleu_by_seed(scale, list(systems), split="test", metric=metric, full_budget=True)


def scorecard(scale: str, *, gpu_run: str | None = None, cpu: bool = True) -> list[Claim]:
    """The scorecard at ``scale``: BLEU by seed (quality), the stored GPU run (speed, eager fp16), and
    the shared CPU speed run (shown, not judged; ``cpu=False`` skips measuring it)."""
    from canlib.studies import gpu_results
    from canlib.studies import speed as sp

    run = gpu_run or gpu_results.DEFAULT_RUN
    try:
        gpu, gprov = gpu_results.gpu_speed("eager", run)
        gpu_evidence = f"GPU eager fp16: {gprov['device']}, commit {gprov['commit']}, {gprov['date']} (stored result)"
        batch, bprov = gpu_results.gpu_batch(run)
        batch_evidence = f"GPU eager fp16: {bprov['device']}, commit {bprov['commit']}, {bprov['date']} (stored result)"
    except FileNotFoundError:
        gpu, gpu_evidence, batch, batch_evidence = None, "", None, ""
    cpu_rows, cpu_evidence = None, ""
    if cpu:
        try:
            cpu_rows, cprov = sp.speed_table("tiny", device="cpu")  # the CPU run every chapter shares
            cpu_evidence = f"{cprov['device']}, commit {str(cprov['commit'])[:12]}"
        except FileNotFoundError:  # small/full without a stored CPU run: the CPU rows are context, not evidence
            cpu_rows = None
    systems = ("baseline", "balanced", "can", "can_ffn", "depth-14-1")
    rows = claims(scale, bleu=seed_scores(scale, systems), gpu=gpu, gpu_evidence=gpu_evidence, cpu=cpu_rows,
                  cpu_evidence=cpu_evidence, gpu_batch=batch, batch_evidence=batch_evidence)
    return rows + [cross_task_claim(scale, bleu_by_direction(scale), paper_can_gap())]


def paper_can_gap() -> str:
    """The paper's CAN - Balanced BLEU over its 14 tasks (Tables 2 and 3), as a range."""
    from canlib.studies.paper import paper_numbers

    paper = paper_numbers()
    gaps = [v["CAN"][0] - v["Balanced"][0] for table in ("table2_wmt14", "table3_wmt17")
            for k, v in paper[table].items() if not k.startswith("_")]
    return f"{min(gaps):+.2f} to {max(gaps):+.2f} over {len(gaps)} tasks"


def bleu_by_direction(scale: str, metric: str = "tok_bleu") -> dict[str, dict[str, list[float]]]:
    """{corpus: {system: [BLEU per seed]}} of the direction systems on every corpus of the scale;
    empty where the scale has no stored runs (tiny: none are judged)."""
    if scale not in QUALITY_SCALES:
        return {}
    from canlib.studies.quality import bleu_by_seed
    from canlib.studies.scales import DIRECTION_SYSTEMS, scale_spec

    spec = scale_spec(scale)
    return {c: bleu_by_seed(scale, DIRECTION_SYSTEMS, corpus=c, metric=metric, full_budget=True)
            for c in (spec.corpus, *spec.directions)}


def frame(rows: list[Claim]):
    """The scorecard as a table, one row per claim and evidence."""
    import pandas as pd

    return pd.DataFrame([r.as_row() for r in rows]).set_index("name")
