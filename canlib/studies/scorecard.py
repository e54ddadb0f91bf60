"""The paper's claims as data, each judged only by evidence that can test it.

* A **quality** claim (BLEU) is judged only at ``small``/``full`` with at least two seeds of every
  compared system, against the seed spread: the mean difference with an interval of
  ``k`` standard errors (``k=2``) either side. The claim holds when the whole interval satisfies the
  criterion, fails when none of it does, and is ``within noise`` otherwise. It is judged as soon as its
  own systems' seeds are stored (not only once the whole plan is); until then it is ``not run yet`` and
  names the command that trains the missing runs. Beside the seed rule, sacreBLEU's paired bootstrap on
  the stored test2016 hypotheses (:func:`paired_bootstrap`) says, seed pair by seed pair, whether the
  gap between two trained models is larger than the test set's sampling noise.
* A **speed** claim is judged from GPU measurements in half precision (the paper's regime: batch 1,
  PyTorch launching every kernel, i.e. our "eager" rows) by the same rule over the spread of the
  timed repeats (min..max), one row per stored GPU run (device and commit in its evidence). CPU rows are shown, labelled, with no verdict: a CPU at batch 1 is
  bound by memory bandwidth, which is not what the paper measured.
* Anything else is ``not tested here``.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from canlib.model.config import LABELS
from canlib.studies.speed import CPU_LABEL

HELD, FAILED, NOISE, NOT_TESTED, NO_VERDICT_CPU = "held", "did not hold", "within noise", "not tested here", "no verdict (CPU)"
NOT_RUN = "not run yet"  # a claim the scale can test whose runs are not stored yet
ALPHA = 0.05  # a paired-bootstrap gap is "real" at p < ALPHA
BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's default number of resamples
QUALITY_SCALES = ("small", "full")
# the BLEU differences the quality claims judge: (system, against)
QUALITY_PAIRS = (("balanced", "baseline"), ("can", "balanced"), ("can_ffn", "balanced"), ("depth-14-1", "balanced"))
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


def experiment_command(scale: str, systems: list[str] | tuple[str, ...], corpora: list[str] | tuple[str, ...] = ()) -> str:
    """The command that trains (every planned seed, at least two) and stores ``systems``' runs at ``scale``
    (on ``corpora``, else the main corpus); runs already stored are skipped, so it only adds what is missing."""
    from canlib.studies.scales import scale_spec

    spec = scale_spec(scale)
    planned = spec.direction_seeds if corpora else max(spec.depth_seeds if s.startswith("depth-") else spec.seeds
                                                       for s in systems)
    seeds = ",".join(str(k) for k in range(1, max(MIN_SEEDS, planned) + 1))
    where = f" --corpora {','.join(corpora)}" if corpora else ""
    return f"python -m canlib experiment --scale {scale} --systems {','.join(systems)} --seeds {seeds}{where} --studies runs"


def quality_claim(name: str, paper: str, criterion: str, ok: Callable[[float], bool], system: str, against: str,
                  scale: str, bleu: dict[str, list[float]] | None, metric: str = "tok-BLEU", *,
                  command: bool = False, paired: list[PairedGap] | None = None) -> Claim:
    """A BLEU-difference claim (``system`` minus ``against``) judged against the seed spread; ``bleu`` holds
    full-budget runs only (``bleu_by_seed(..., full_budget=True)``). With ``command``, a claim whose seeds
    are not all stored is ``not run yet`` and names the command that stores them; ``paired`` (from
    :func:`paired_bootstrap`) adds whether each seed pair's gap is real to the evidence."""
    def untested(why: str) -> Claim:
        return Claim(name, "quality", paper, "—", criterion, why, NOT_TESTED)

    if scale not in QUALITY_SCALES:
        return untested(f"scale {scale}: its models do not translate well enough to judge BLEU")
    if bleu is None:
        return untested(f"scale {scale}: no stored BLEU was read")
    seeds = {s: bleu.get(s) or [] for s in (system, against)}
    bootstrap = f"; {describe_paired(paired)}" if paired else ""
    short = [f"{LABELS.get(s, s)} has {len(v)} full-budget seed(s)" for s, v in seeds.items() if len(v) < MIN_SEEDS]
    if short:
        why = f"scale {scale}: " + ", ".join(short) + f"; needs at least {MIN_SEEDS}"
        if not command:
            return untested(why)
        ours = "—"
        if all(seeds.values()):
            gap = statistics.fmean(seeds[system]) - statistics.fmean(seeds[against])
            n = min(len(v) for v in seeds.values())
            ours = f"{gap:+.2f} ({n} seed{'s' if n > 1 else ''}, no spread)"
        missing = [s for s, v in seeds.items() if len(v) < MIN_SEEDS]
        return Claim(name, "quality", paper, ours, criterion,
                     f"{why}: `{experiment_command(scale, missing)}`{bootstrap}", NOT_RUN)
    diff, se = seed_difference(seeds[system], seeds[against])
    low, high = diff - K_SPREAD * se, diff + K_SPREAD * se
    ours = f"{diff:+.2f} ± {K_SPREAD * se:.2f} ({K_SPREAD:g} s.e.)"
    evidence = (f"{metric}, scale {scale}, {len(seeds[system])} vs {len(seeds[against])} seeds "
                f"({LABELS.get(system, system)} - {LABELS.get(against, against)}){bootstrap}")
    return Claim(name, "quality", paper, ours, criterion, evidence, interval_verdict(low, high, ok))


# -- paired bootstrap on the stored test translations -----------------------------------------------

@dataclass(frozen=True)
class PairedGap:
    """sacreBLEU's paired bootstrap of one seed pair: ``system`` minus ``against`` on the same sentences."""

    seed: int
    delta: float  # sacreBLEU (13a) difference on the whole split
    p_value: float  # two-sided: how often a resample's gap is at least this far from the resamples' mean gap
    samples: int = BOOTSTRAP_SAMPLES

    @property
    def real(self) -> bool:
        """p < ALPHA for a gap that exists: sacreBLEU gives p = 1/(samples+1) to identical scores (it
        counts only resampled gaps strictly beyond the observed one), and a zero gap is never real."""
        return self.p_value < ALPHA and self.delta != 0


def paired_bootstrap(scale: str, system: str, against: str, split: str = "test", corpus: str | None = None,
                     root: Path | None = None, samples: int = BOOTSTRAP_SAMPLES) -> list[PairedGap]:
    """sacreBLEU's paired bootstrap test (``sacrebleu.significance.PairedTest``, ``bs``, its fixed seed) of
    ``system`` against ``against`` on the stored hypotheses of ``split``, one test per seed both have: a
    gap between two trained models is "real" when the resampled test sets rarely reverse it. Seeds are
    paired by number (seed k of one system with seed k of the other); an empty list if none is shared."""
    return list(_paired(scale, system, against, split, corpus, str(root) if root is not None else None, samples,
                        _results_key(scale, root)))


def _results_key(scale: str, root: Path | None) -> str:
    from canlib.studies.store import stored_path

    return str(stored_path("x", scale, root).parent)  # a test that points the results elsewhere gets its own cache


@lru_cache(maxsize=None)
def _paired(scale: str, system: str, against: str, split: str, corpus: str | None, root: str | None, samples: int,
            _where: str) -> tuple[PairedGap, ...]:
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    from canlib.data.preparation import prepared
    from canlib.studies.quality import hypotheses, stored_seeds
    from canlib.studies.scales import scale_spec

    folder = Path(root) if root is not None else None
    common = sorted(set(stored_seeds(system, scale, corpus, folder)) & set(stored_seeds(against, scale, corpus, folder)))
    if not common:
        return ()
    refs = list(prepared(corpus or scale_spec(scale).corpus, scale_spec(scale).corpus_scale).split(split).tgt_text)
    gaps = []
    for seed in common:
        named = [(against, hypotheses(against, scale, split, seed, corpus, root=folder)),
                 (system, hypotheses(system, scale, split, seed, corpus, root=folder))]
        _, scores = PairedTest(named, {"BLEU": BLEU()}, [refs], test_type="bs", n_samples=samples)()
        base, other = scores["BLEU"]
        gaps.append(PairedGap(seed, other.score - base.score, float(other.p_value), samples))
    return tuple(gaps)


def describe_paired(gaps: list[PairedGap]) -> str:
    """One phrase: in how many seed pairs the gap is real (p < 0.05) and the largest p."""
    if not gaps:
        return "no shared seed for a paired bootstrap"
    real = sum(g.real for g in gaps)
    return (f"sacreBLEU's paired bootstrap ({gaps[0].samples} resamples): p < {ALPHA:g} in {real} of {len(gaps)} "
            f"seed pair{'s' if len(gaps) > 1 else ''} (largest p {max(g.p_value for g in gaps):.3f})")


def gap_verdict(gaps: list[PairedGap]) -> str:
    """"real" when every seed pair's gap is significant, "not significant" when none is, else "mixed"."""
    if not gaps:
        return "no paired test"
    real = sum(g.real for g in gaps)
    return "real" if real == len(gaps) else "not significant" if real == 0 else f"mixed ({real} of {len(gaps)})"


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
        if scale not in QUALITY_SCALES:
            return Claim(name, "quality", paper_range, "—", criterion,
                         f"scale {scale}: its models do not translate well enough to judge BLEU", NOT_TESTED)
        from canlib.studies.scales import DIRECTION_SYSTEMS

        why = f"{len(judged)} direction(s) with at least {MIN_SEEDS} seeds of CAN and Balanced; needs 2 or more"
        missing = [c for c in by_direction if c not in judged]
        if not missing:
            return Claim(name, "quality", paper_range, "—", criterion, why, NOT_TESTED)
        return Claim(name, "quality", paper_range, "—", criterion,
                     f"{why}: `{experiment_command(scale, DIRECTION_SYSTEMS, missing)}`", NOT_RUN)
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
                 cpu: dict[str, dict[str, float]] | None, cpu_evidence: str,
                 more_gpus: list[tuple[dict[str, dict[str, float]], str]] = ()) -> list[Claim]:
    """A speed-ratio claim: one judged row per GPU measurement of both systems (``gpu`` first, then
    ``more_gpus``, each with its evidence), else one ``not tested here`` row, and one CPU row without a verdict."""
    out = []
    for rows, evidence in [(gpu, gpu_evidence), *more_gpus]:
        if rows and system in rows and against in rows:
            med, low, high = ratio_range(rows, system, against)
            out.append(Claim(name, "speed", kind_paper, f"{med:.2f}x (repeats {low:.2f}-{high:.2f}x)", criterion,
                             evidence, interval_verdict(low, high, ok)))
    if not out:
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
           paper: dict[str, Any] | None = None, metric: str = "tok-BLEU",
           more_gpus: list[tuple[dict[str, dict[str, float]], str]] = (),
           paired: dict[tuple[str, str], list[PairedGap]] | None = None, commands: bool = False) -> list[Claim]:
    """Every claim this book tests, judged from the evidence passed in (no measuring here).

    ``bleu``: {system: [BLEU per seed]}; ``gpu``/``cpu``: {system: {tok_per_s, min, max}}; ``more_gpus``:
    further GPU runs as (rows, evidence), each judged in its own row; ``gpu_batch``: {system: {batch: tok/s}};
    ``paper``: :func:`canlib.studies.paper.paper_numbers`; ``paired``: {(system, against): paired-bootstrap
    gaps}; ``commands``: a quality claim whose seeds are missing is ``not run yet`` with its command.
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
                         lambda r: r >= 1.8, "balanced", "baseline", gpu, gpu_evidence, cpu, cpu_evidence, more_gpus)
    rows.append(quality_claim("Balanced keeps Baseline's BLEU", f"{t2['Balanced'][0] - t2['Baseline'][0]:+.2f} (Table 2, En-De)",
                              "ΔBLEU >= -0.5", lambda d: d >= -0.5, "balanced", "baseline", scale, bleu, metric,
                              command=commands, paired=(paired or {}).get(("balanced", "baseline"))))
    rows += speed_claims("CAN decodes faster than Balanced",
                         f"{paper_ratio(t2, 'CAN', 'Balanced', 2):.2f}x En-De; {min(can_gains):.2f}-{max(can_gains):.2f}x over Tables 2-3",
                         f"ratio >= {min(can_gains):.2f}x (the paper's smallest)", lambda r: r >= round(min(can_gains), 2),
                         "can", "balanced", gpu, gpu_evidence, cpu, cpu_evidence, more_gpus)
    rows.append(quality_claim("CAN is within 0.5 BLEU of Balanced", f"{t2['CAN'][0] - t2['Balanced'][0]:+.2f} (Table 2, En-De)",
                              "ΔBLEU >= -0.5", lambda d: d >= -0.5, "can", "balanced", scale, bleu, metric,
                              command=commands, paired=(paired or {}).get(("can", "balanced"))))
    for other in ("san", "aan"):
        label = LABELS[other]
        rows += speed_claims(f"{label} gains less speed than CAN",
                             f"{label} {paper_ratio(t2, label, 'Balanced', 2):.2f}x vs CAN {paper_ratio(t2, 'CAN', 'Balanced', 2):.2f}x",
                             f"CAN / {label} > 1", lambda r: r > 1, "can", other, gpu, gpu_evidence, cpu, cpu_evidence, more_gpus)
    rows += speed_claims("Compressing attention gains more speed than compressing the FFN (Table 5)",
                         f"{t5['Compress Attention'][1] / t5['Compress FFN'][1]:.2f}x",
                         "Compress Attention / Compress FFN > 1", lambda r: r > 1, "can_attn", "can_ffn",
                         gpu, gpu_evidence, cpu, cpu_evidence, more_gpus)
    rows.append(quality_claim("Compress FFN loses no BLEU against Balanced (Table 5)",
                              f"{t5['Compress FFN'][0] - t5['Balanced'][0]:+.2f}", "ΔBLEU >= -0.5",
                              lambda d: d >= -0.5, "can_ffn", "balanced", scale, bleu, metric,
                              command=commands, paired=(paired or {}).get(("can_ffn", "balanced"))))
    rows.append(quality_claim("A 14/1 model loses BLEU against 12/2 (Figure 4)", f"{f4['bleu'][3] - f4['bleu'][2]:+.2f}",
                              "ΔBLEU < 0", lambda d: d < 0, "depth-14-1", "balanced", scale, bleu, metric,
                              command=commands, paired=(paired or {}).get(("depth-14-1", "balanced"))))
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


def gpu_evidence(prov: dict[str, Any]) -> str:
    """The evidence line of a stored GPU measurement: regime, device, commit, date."""
    return f"GPU eager fp16: {prov['device']}, commit {str(prov['commit'])[:7]}, {prov['date']} (stored result)"


def stored_scale(root: Path | None = None) -> str:
    """The scale the scorecard judges: ``small`` once any run is stored under ``<results>/small/runs``
    (each claim is then judged as soon as its own seeds are in, and says ``not run yet`` otherwise),
    else ``tiny``, where no quality claim is judged."""
    from canlib.studies.store import stored_path

    return "small" if any(stored_path("runs/x", "small", root).parent.glob("*/*.json")) else "tiny"


def scorecard(scale: str, *, gpu_run: str | None = None, cpu: bool = True, bootstrap: bool = True) -> list[Claim]:
    """The scorecard at ``scale``: BLEU by seed (quality, with the paired bootstrap of the stored test
    translations unless ``bootstrap=False``), every stored GPU run (speed, eager fp16; only ``gpu_run``
    when given), and the shared CPU speed run (shown, not judged; ``cpu=False`` skips measuring it)."""
    from canlib.studies import gpu_results
    from canlib.studies import speed as sp

    gpus = []
    for run in ([gpu_run] if gpu_run else gpu_results.speed_runs()):
        rows, prov = gpu_results.gpu_speed("eager", run)
        gpus.append((rows, gpu_evidence(prov)))
    batch, batch_ev = None, ""
    for run in ([gpu_run] if gpu_run else gpu_results.available_runs()):
        try:
            batch, bprov = gpu_results.gpu_batch(run)
            batch_ev = gpu_evidence(bprov)
            break
        except FileNotFoundError:
            continue
    cpu_rows, cpu_evidence = None, ""
    if cpu:
        try:
            cpu_rows, cprov = sp.speed_table("tiny", device="cpu")  # the CPU run every chapter shares
            cpu_evidence = f"{cprov['device']}, commit {str(cprov['commit'])[:12]}"
        except FileNotFoundError:  # small/full without a stored CPU run: the CPU rows are context, not evidence
            cpu_rows = None
    systems = ("baseline", "balanced", "can", "can_ffn", "depth-14-1")
    paired = ({pair: paired_bootstrap(scale, *pair) for pair in QUALITY_PAIRS}
              if bootstrap and scale in QUALITY_SCALES else None)
    first, *more = gpus or [(None, "")]
    rows = claims(scale, bleu=seed_scores(scale, systems), gpu=first[0], gpu_evidence=first[1], cpu=cpu_rows,
                  cpu_evidence=cpu_evidence, gpu_batch=batch, batch_evidence=batch_ev, more_gpus=more,
                  paired=paired, commands=scale in QUALITY_SCALES)
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


OUTCOMES = {HELD: "reproduced", FAILED: "not reproduced", NOISE: "not settled (within noise)",
            NOT_RUN: "not run yet", NOT_TESTED: "not tested here"}


def findings_table(rows: list[Claim]):
    """The scorecard as the introduction opens with it: one row per judged claim and device (CPU rows, which
    carry no verdict, left out), grouped as reproduced, not reproduced, not settled, not run yet, not tested."""
    import pandas as pd

    out = []
    for r in rows:
        if r.verdict not in OUTCOMES:
            continue
        ours = r.ours
        if r.kind == "speed" and r.evidence.startswith("GPU"):
            device = r.evidence.split(": ", 1)[1].split(",")[0].removeprefix("NVIDIA ")
            ours = f"{ours.split(' (')[0]} on {device}"
        elif r.kind == "quality" and r.verdict != NOT_TESTED:
            ours = f"{ours} (small)" if ours != "—" else ours
        out.append({"outcome": OUTCOMES[r.verdict], "claim": r.name, "paper": r.paper, "ours": ours})
    order = list(OUTCOMES.values())
    frame = pd.DataFrame(out)
    frame["_order"] = frame["outcome"].map(order.index)
    return frame.sort_values("_order", kind="stable").drop(columns="_order").set_index(["outcome", "claim"])


def frame(rows: list[Claim]):
    """The scorecard as a table, one row per claim and evidence."""
    import pandas as pd

    return pd.DataFrame([r.as_row() for r in rows]).set_index("name")
