"""The paper's claims as data, each judged only by evidence that can test it.

* A **quality** claim (BLEU) is judged only at ``small``/``full`` with at least two seeds of every compared
  system, by the verdict rule of :mod:`canlib.studies.verdict`: on each of the four evaluation sets a seed
  interval (tokenized BLEU, ± 2 standard errors) and a test-set interval (sacreBLEU's paired bootstrap pooled
  over seeds); held where both meet the criterion on every set, did not hold where both miss it on every set,
  within noise otherwise. It is judged as soon as its own systems' seeds are stored (not only once the whole
  plan is); until then it is ``not run yet`` and names the command that trains the missing runs.
* A **speed** claim is judged from GPU measurements in half precision (the paper's regime: batch 1,
  PyTorch launching every kernel, i.e. our "eager" rows) by the same interval rule over the spread of the
  timed repeats (min..max), one row per stored GPU run (device and commit in its evidence). CPU rows are
  shown, labelled, with no verdict: a CPU at batch 1 is bound by memory bandwidth, which is not what the
  paper measured.
* Anything else is ``not tested here``.

One verdict per claim (:func:`headline`): a quality claim has one row (its pooled seeds); a speed claim with
several GPU runs takes the verdict of its best-powered run, the one whose repeats give the narrowest ratio
interval, unless another run reaches the opposite verdict, and then it is not settled.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from canlib.model.config import LABELS
from canlib.studies import gpu_results, speed as sp
from canlib.studies.evidence import main_runs, references
from canlib.studies.paper import paper_numbers
from canlib.studies.scales import DIRECTION_SYSTEMS, scale_spec
from canlib.studies.speed import CPU_LABEL
from canlib.studies.store import stored_path
from canlib.studies.verdict import (FAILED, HELD, K_SPREAD, MIN_SEEDS, NOISE, NOT_RUN, ON_PAR, QUALITY_SCALES, Runs, combine,  # noqa: F401
                                    describe, interval_verdict, judge, seed_difference, split_name)

NOT_TESTED, NO_VERDICT_CPU = "not tested here", "no verdict (CPU)"
METRIC = "tok-BLEU"  # the seed intervals' metric: the paper's tokenized BLEU


@dataclass(frozen=True)
class Claim:
    """One row of the scorecard: a claim, the paper's figure, ours, the criterion, the evidence, the verdict;
    ``interval``: the (low, high) the verdict was read from on its headline measurement, where there is one."""

    name: str
    kind: str  # the evidence it needs: "quality" (BLEU over seeds), "speed" (GPU, fp16) or "other"
    paper: str
    ours: str
    criterion: str
    evidence: str
    verdict: str
    interval: tuple[float, float] | None = field(default=None, compare=False)
    chapter: str = field(default="", compare=False)  # the chapter (file stem) that shows the evidence

    def as_row(self) -> dict[str, str]:
        row = asdict(self)
        row.pop("interval")
        row.pop("chapter")
        return row


Term = tuple[float, str, "Runs | None"]  # (weight, system label, its stored runs)


def experiment_command(scale: str, systems: Sequence[str], corpora: Sequence[str] = ()) -> str:
    """The command that trains (every planned seed, at least two) and stores ``systems``' runs at ``scale``
    (on ``corpora``, else the main corpus); runs already stored are skipped, so it only adds what is missing."""
    spec = scale_spec(scale)
    planned = spec.direction_seeds if corpora else max(spec.depth_seeds if s.startswith("depth-") else spec.seeds
                                                       for s in systems)
    seeds = ",".join(str(k) for k in range(1, max(MIN_SEEDS, planned) + 1))
    where = f" --corpora {','.join(corpora)}" if corpora else ""
    return f"python -m canlib experiment --scale {scale} --systems {','.join(systems)} --seeds {seeds}{where} --studies runs"


def quality_claim(name: str, paper: str, criterion: str, ok: Callable[[float], bool], scale: str,
                  terms: Sequence[Term], refs: dict[str, list[str]] | None = None, *,
                  command: str | None = None) -> Claim:
    """A BLEU claim on the contrast sum(weight x system) judged by :func:`canlib.studies.verdict.judge` (the
    four evaluation sets, seed and test-set intervals; ``refs``: each set's references, without which only
    the seed interval is read). With ``command``, a claim whose seeds are not all stored is ``not run yet``
    and names the command that stores them."""
    def untested(why: str) -> Claim:
        return Claim(name, "quality", paper, "—", criterion, why, NOT_TESTED)

    if scale not in QUALITY_SCALES:
        return untested(f"scale {scale}: its models do not translate well enough to judge BLEU")
    seeds = {label: len(r.seeds) if r else 0 for _, label, r in terms}
    short = [f"{label} has {n} full-budget seed(s)" for label, n in seeds.items() if n < MIN_SEEDS]
    if short:
        why = f"scale {scale}: " + ", ".join(short) + f"; needs at least {MIN_SEEDS}"
        if command is None:
            return untested(why)
        ours = "—"
        if all(seeds.values()):
            value = sum(w * r.mean() for w, _, r in terms)
            n = min(seeds.values())
            ours = f"{value:+.2f} ({n} seed{'s' if n > 1 else ''}, no spread)"
        return Claim(name, "quality", paper, ours, criterion, f"{why}: `{command}`", NOT_RUN)
    j = judge([(w, r) for w, _, r in terms], ok, refs)
    head = j.on("test") if any(s.split == "test" for s in j.sets) else j.sets[0]
    ours = f"{head.value:+.2f} ± {head.half_width:.2f} ({METRIC} {split_name(head.split)}, {K_SPREAD:g} s.e.)"
    counts = ", ".join(f"{label} {n}" for label, n in seeds.items())
    sets = f"{j.count(HELD)} held, {j.count(FAILED)} did not hold, {j.count(NOISE)} within noise of {len(j.sets)} sets"
    boot = ("seed interval ± 2 s.e. and sacreBLEU's paired bootstrap pooled over seeds (95 %)"
            if head.test_set else "seed interval ± 2 s.e. (no hypotheses: no test-set interval)")
    evidence = f"{METRIC}, scale {scale}, seeds: {counts}; {boot}; {sets}: {describe(j)}"
    return Claim(name, "quality", paper, ours, criterion, evidence, j.verdict, (head.seeds.low, head.seeds.high))


def pair(system: str, against: str, runs: dict[str, Runs | None]) -> list[Term]:
    """The terms of "system minus against"."""
    return [(1.0, LABELS.get(system, system), runs.get(system)), (-1.0, LABELS.get(against, against), runs.get(against))]


def cross_task_claim(scale: str, by_direction: dict[str, dict[str, Runs | None]], paper_range: str,
                     margin: float = ON_PAR, refs: dict[str, dict[str, list[str]]] | None = None) -> Claim:
    """"CAN is on par with Balanced across tasks": CAN at most ``margin`` below Balanced on every direction,
    each judged by the verdict rule; held when every direction holds, did not hold when every one fails,
    within noise otherwise. ``by_direction``: {corpus: {system: Runs}}; ``refs``: {corpus: references}."""
    name = f"CAN stays within {margin} BLEU of Balanced across tasks (Tables 2-3)"
    criterion = f"ΔBLEU >= -{margin} on every direction"
    if scale not in QUALITY_SCALES:
        return Claim(name, "quality", paper_range, "—", criterion,
                     f"scale {scale}: its models do not translate well enough to judge BLEU", NOT_TESTED, chapter="tasks")
    per = {c: quality_claim(name, paper_range, criterion, lambda d: d >= -margin, scale, pair("can", "balanced", runs),
                            (refs or {}).get(c)) for c, runs in by_direction.items()}
    judged = {c: claim for c, claim in per.items() if claim.verdict != NOT_TESTED}
    if len(judged) < 2:
        why = f"{len(judged)} direction(s) with at least {MIN_SEEDS} seeds of CAN and Balanced; needs 2 or more"
        missing = [c for c in by_direction if c not in judged]
        if not missing:
            return Claim(name, "quality", paper_range, "—", criterion, why, NOT_TESTED, chapter="tasks")
        return Claim(name, "quality", paper_range, "—", criterion,
                     f"{why}: `{experiment_command(scale, DIRECTION_SYSTEMS, missing)}`", NOT_RUN, chapter="tasks")
    ours = "; ".join(f"{c.removeprefix('multi30k-')} {claim.ours.split(' (')[0]}" for c, claim in judged.items())
    return Claim(name, "quality", paper_range, ours, criterion, f"{METRIC}, scale {scale}, {len(judged)} directions",
                 combine([claim.verdict for claim in judged.values()]), chapter="tasks")


def ratio_range(rows: dict[str, dict[str, float]], system: str, against: str) -> tuple[float, float, float]:
    """(median ratio, lowest, highest) of system/against over the timed repeats' min..max."""
    a, b = rows[system], rows[against]
    return a["tok_per_s"] / b["tok_per_s"], a.get("min", a["tok_per_s"]) / b.get("max", b["tok_per_s"]), \
        a.get("max", a["tok_per_s"]) / b.get("min", b["tok_per_s"])


def speed_claims(name: str, kind_paper: str, criterion: str, ok: Callable[[float], bool], system: str, against: str,
                 gpus: Sequence[tuple[dict[str, dict[str, float]] | None, str]],
                 cpu: dict[str, dict[str, float]] | None, cpu_evidence: str) -> list[Claim]:
    """A speed-ratio claim: one judged row per GPU measurement of both systems (``gpus``: (rows, evidence)),
    else one ``not tested here`` row, and one CPU row without a verdict."""
    out = []
    for rows, evidence in gpus:
        if rows and system in rows and against in rows:
            med, low, high = ratio_range(rows, system, against)
            out.append(Claim(name, "speed", kind_paper, f"{med:.2f}x (repeats {low:.2f}-{high:.2f}x)", criterion,
                             evidence, interval_verdict(low, high, ok), (low, high)))
    if not out:
        out.append(Claim(name, "speed", kind_paper, "—", criterion, "no GPU measurement of these systems", NOT_TESTED))
    if cpu and system in cpu and against in cpu:
        med, low, high = ratio_range(cpu, system, against)
        out.append(Claim(name, "speed", kind_paper, f"{med:.2f}x (repeats {low:.2f}-{high:.2f}x)", criterion,
                         f"{CPU_LABEL}; {cpu_evidence}", NO_VERDICT_CPU))
    return out


def paper_ratio(table: dict[str, list[float]], system: str, against: str, column: int) -> float:
    return table[system][column] / table[against][column]


def claims(scale: str, *, runs: dict[str, Runs | None] | None, gpus: Sequence[tuple[dict[str, dict[str, float]] | None, str]] = (),
           cpu: dict[str, dict[str, float]] | None = None, cpu_evidence: str = "",
           gpu_batch: dict[str, dict[int, float]] | None = None, batch_evidence: str = "",
           paper: dict[str, Any] | None = None, refs: dict[str, list[str]] | None = None,
           commands: bool = False) -> list[Claim]:
    """Every claim this book tests, judged from the evidence passed in (no measuring here).

    ``runs``: {system: its stored Runs}; ``gpus``: every GPU run as ({system: {tok_per_s, min, max}}, evidence),
    each judged in its own row; ``cpu``: the same for the CPU (shown, not judged); ``gpu_batch``:
    {system: {batch: tok/s}}; ``paper``: :func:`canlib.studies.paper.paper_numbers`; ``refs``: each evaluation
    set's references (the test-set intervals); ``commands``: a quality claim whose seeds are missing is
    ``not run yet`` with its command.
    """
    paper = paper or paper_numbers()
    runs = runs or {}
    t2 = paper["table2_wmt14"]["en-de"]
    t5 = paper["table5_ablation_en-de"]
    f4 = paper["fig4_balance_en-de"]
    f7 = paper["fig7_parallel_en-de"]
    # CAN over Balanced on every task of Tables 2 and 3 (the paper's 14 tasks)
    can_gains = [v["CAN"][2] / v["Balanced"][2] for table in ("table2_wmt14", "table3_wmt17")
                 for k, v in paper[table].items() if not k.startswith("_")]

    def quality(name: str, paper_text: str, criterion: str, ok: Callable[[float], bool], system: str,
                against: str) -> Claim:
        missing = [s for s in (system, against) if not runs.get(s) or len(runs[s].seeds) < MIN_SEEDS]
        command = experiment_command(scale, missing) if commands and missing and scale in QUALITY_SCALES else None
        return quality_claim(name, paper_text, criterion, ok, scale, pair(system, against, runs), refs, command=command)

    rows: list[Claim] = []
    rows += speed_claims("Balanced 12/2 decodes about 2x faster than Baseline 6/6",
                         f"{paper_ratio(t2, 'Balanced', 'Baseline', 2):.2f}x (Table 2, En-De)", "ratio >= 1.8x",
                         lambda r: r >= 1.8, "balanced", "baseline", gpus, cpu, cpu_evidence)
    rows.append(quality("Balanced keeps Baseline's BLEU", f"{t2['Balanced'][0] - t2['Baseline'][0]:+.2f} (Table 2, En-De)",
                        f"ΔBLEU >= -{ON_PAR}", lambda d: d >= -ON_PAR, "balanced", "baseline"))
    rows += speed_claims("CAN decodes faster than Balanced",
                         f"{paper_ratio(t2, 'CAN', 'Balanced', 2):.2f}x En-De; {min(can_gains):.2f}-{max(can_gains):.2f}x over Tables 2-3",
                         f"ratio >= {min(can_gains):.2f}x (the paper's smallest)", lambda r: r >= round(min(can_gains), 2),
                         "can", "balanced", gpus, cpu, cpu_evidence)
    rows.append(quality(f"CAN is within {ON_PAR} BLEU of Balanced", f"{t2['CAN'][0] - t2['Balanced'][0]:+.2f} (Table 2, En-De)",
                        f"ΔBLEU >= -{ON_PAR}", lambda d: d >= -ON_PAR, "can", "balanced"))
    for other in ("san", "aan"):
        label = LABELS[other]
        rows += speed_claims(f"{label} gains less speed than CAN",
                             f"{label} {paper_ratio(t2, label, 'Balanced', 2):.2f}x vs CAN {paper_ratio(t2, 'CAN', 'Balanced', 2):.2f}x",
                             f"CAN / {label} > 1", lambda r: r > 1, "can", other, gpus, cpu, cpu_evidence)
    rows += speed_claims("Compressing attention gains more speed than compressing the FFN (Table 5)",
                         f"{t5['Compress Attention'][1] / t5['Compress FFN'][1]:.2f}x",
                         "Compress Attention / Compress FFN > 1", lambda r: r > 1, "can_attn", "can_ffn",
                         gpus, cpu, cpu_evidence)
    rows.append(quality("Compress FFN loses no BLEU against Balanced (Table 5)",
                        f"{t5['Compress FFN'][0] - t5['Balanced'][0]:+.2f}", f"ΔBLEU >= -{ON_PAR}",
                        lambda d: d >= -ON_PAR, "can_ffn", "balanced"))
    rows.append(quality("A 14/1 model loses BLEU against 12/2 (Figure 4)", f"{f4['bleu'][3] - f4['bleu'][2]:+.2f}",
                        "ΔBLEU < 0", lambda d: d < 0, "depth-14-1", "balanced"))
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
    return [replace(r, chapter=_chapter(r)) for r in rows]


def _chapter(claim: Claim) -> str:
    """The chapter that shows a claim's evidence."""
    if claim.kind == "speed":
        return "speed"
    if claim.kind == "other":
        return "similarity"
    return "ablation" if "Table 5" in claim.name else "depths" if "Figure 4" in claim.name else "results"


SYSTEMS = ("baseline", "balanced", "can", "can_ffn", "depth-14-1")  # the systems the quality claims compare


def stored_runs(scale: str, systems: Sequence[str] = SYSTEMS, corpus: str | None = None,
                root: Path | None = None) -> dict[str, Runs | None]:
    """{system: its stored full-budget runs} at a scale whose models are judged; empty at tiny."""
    if scale not in QUALITY_SCALES:
        return {}
    return {s: main_runs(scale, s, corpus, root) for s in systems}


def gpu_evidence(prov: dict[str, Any]) -> str:
    """The evidence line of a stored GPU measurement: regime, device, commit, date."""
    return f"GPU eager fp16: {prov['device']}, commit {str(prov['commit'])[:7]}, {prov['date']} (stored result)"


def stored_scale(root: Path | None = None) -> str:
    """The scale the scorecard judges: ``small`` once any run is stored under ``<results>/small/runs``
    (each claim is then judged as soon as its own seeds are in, and says ``not run yet`` otherwise),
    else ``tiny``, where no quality claim is judged."""
    return "small" if any(stored_path("runs/x", "small", root).parent.glob("*/*.json")) else "tiny"


def scorecard(scale: str, *, gpu_run: str | None = None, cpu: bool = True, test_sets: bool = True,
              refs: dict[str, list[str]] | None = None) -> list[Claim]:
    """The scorecard at ``scale``: quality from the stored runs (with the test-set intervals unless
    ``test_sets=False``; ``refs``: each evaluation set's references, read when not given), every stored GPU run
    (speed, eager fp16; only ``gpu_run`` when given), and the shared CPU speed run (shown, not judged;
    ``cpu=False`` skips measuring it)."""
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
    judged = scale in QUALITY_SCALES
    if refs is None and judged and test_sets:
        refs = references(scale)
    refs = refs if test_sets else None
    rows = claims(scale, runs=stored_runs(scale), gpus=gpus, cpu=cpu_rows, cpu_evidence=cpu_evidence, gpu_batch=batch,
                  batch_evidence=batch_ev, refs=refs, commands=judged)
    return rows + [cross_task_claim(scale, runs_by_direction(scale), paper_can_gap())]


def paper_can_gap() -> str:
    """The paper's CAN - Balanced BLEU over its 14 tasks (Tables 2 and 3), as a range."""
    paper = paper_numbers()
    gaps = [v["CAN"][0] - v["Balanced"][0] for table in ("table2_wmt14", "table3_wmt17")
            for k, v in paper[table].items() if not k.startswith("_")]
    return f"{min(gaps):+.2f} to {max(gaps):+.2f} over {len(gaps)} tasks"


def runs_by_direction(scale: str, root: Path | None = None) -> dict[str, dict[str, Runs | None]]:
    """{corpus: {system: Runs}} of CAN and Balanced on every direction of the scale; empty at tiny."""
    if scale not in QUALITY_SCALES:
        return {}

    spec = scale_spec(scale)
    return {c: stored_runs(scale, ("balanced", "can"), c, root) for c in (spec.corpus, *spec.directions)}


# -- one verdict per claim ----------------------------------------------------------------------------

OUTCOMES = {HELD: "reproduced", FAILED: "not reproduced", NOISE: "not settled (within noise)",
            NOT_RUN: "not run yet", NOT_TESTED: "not tested here"}


def _width(claim: Claim) -> float:
    """How wide a judged row's interval is (high/low for a ratio, high - low for a difference)."""
    if claim.interval is None:
        return math.inf
    low, high = claim.interval
    return high / low if claim.kind == "speed" and low > 0 else high - low


def headline(rows: Sequence[Claim]) -> list[Claim]:
    """One row per claim, in the scorecard's order: the claim's only judged row, or, where several GPU runs
    judge it, the best-powered one (the narrowest interval), not settled if another run reaches the
    opposite verdict; its evidence says which run and how many. CPU rows never decide."""
    order: list[str] = []
    by_name: dict[str, list[Claim]] = {}
    for r in rows:
        if r.verdict == NO_VERDICT_CPU:
            continue
        if r.name not in by_name:
            order.append(r.name)
        by_name.setdefault(r.name, []).append(r)
    out = []
    for name in order:
        group = by_name[name]
        best = min(group, key=_width)
        if len(group) == 1:
            out.append(best)
            continue
        opposite = {HELD: FAILED, FAILED: HELD}.get(best.verdict)
        disagree = [r for r in group if r.verdict == opposite]
        verdict = NOISE if disagree else best.verdict
        why = (f"best-powered of {len(group)} GPU runs (narrowest repeat interval): {best.evidence}"
               + (f"; {len(disagree)} other run(s) reach the opposite verdict" if disagree else ""))
        out.append(Claim(name, best.kind, best.paper, best.ours, best.criterion, why, verdict, best.interval, best.chapter))
    return out


def frame(rows: Sequence[Claim]):
    """The scorecard as a table, one row per claim and evidence (nothing cut: long cells wrap)."""
    import pandas as pd

    return pd.DataFrame([r.as_row() for r in rows]).set_index("name")
