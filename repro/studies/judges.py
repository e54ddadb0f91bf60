"""The kinds of evidence a claim of the registry (:mod:`repro.studies.claims`) reads, each judging itself: its
``judge`` method reads a :class:`~repro.studies.store.Store`, holds what it finds to the kind's standard and applies
the one rule of :mod:`repro.studies.verdict`: the one module where a claim's word is decided (the standards, the
words and what a judgement holds are in :mod:`repro.studies.evidence`).

Every judge finds the **bodies of evidence** a claim has (a BLEU contrast: one per stored budget; a speed ratio: one
per timed code version), holds each to its standard, and lets the strongest lead: a body that meets the standard
before one that does not, then the most seeds (BLEU) or the newest code (speed), then the longest budget. The
weaker bodies stand beside the verdict and never change it. Evidence below the standard is **inconclusive**, with
what would settle it; evidence not stored at all is **not run**, with its command.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from canlib.catalogue import LABELS
from repro.results.layout import experiment_command
from repro.results.plan import DIRECTION_SYSTEMS, corpora
from repro.results.studies import BUDGET_SYSTEMS
from repro.studies.analyses import final_losses, gate_shares
from repro.studies.evidence import (
    ANALYSIS,
    BLEU,
    LOSS,
    METRIC,
    SIDE_BY_SIDE,
    SPEED,
    Claim,
    Judged,
    Standard,
    Threshold,
    runs_minutes,
    train_walls,
)
from repro.studies.gpu_runs import by_code, run_name, run_reading, timed_runs
from repro.studies.store import Store
from repro.studies.verdict import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_RUN,
    Runs,
    Within,
    describe,
    difference_interval,
    interval_verdict,
    judge,
    outcome,
    repeat_ratios,
    runs_word,
    seed_reading,
    settle_sets,
    speed_word,
    split_name,
)

GPU_CHECK = "bash scripts/gpu_check.sh --steps=bench,profile"  # the decoding-speed run (measurements/README.md)
GPU_CHECK_MINUTES = 5  # its steps' timeouts, with the machine's start
GPU_RUN = {"cost": f"one GPU run, about {GPU_CHECK_MINUTES} GPU-minutes", "minutes": float(GPU_CHECK_MINUTES)}
BATCH_SWEEP = "python -m repro bench batch --device cuda"
HOW = {"eager": "eager", "captured": "with CUDA graphs"}  # a speed reading's mode, in words

SETTLE = "bash scripts/gpu_settle.sh"  # the one GPU call that stores the runs settling the most claims
CONVERGED = "converged"  # the study of the Table 2 and 5 systems at the converged recipe (repro.results.studies)


# -- a judgement, held to its standard ---------------------------------------------------------------------------


def judged_as(claim: Claim, word: str, ours: str, evidence: str, *, meets: bool, **data: Any) -> Judged:
    """A claim judged on evidence that meets its standard or not (``data``: the other fields of :class:`Judged`).
    Below the standard the word is inconclusive (not run stays not run) and ``settle``, ``cost`` (in words),
    ``minutes`` and ``command`` say what would settle it; at the standard nothing is left to settle."""
    if meets:
        unsettled = {k: v for k, v in data.items() if k not in ("settle", "cost", "minutes", "command")}
        return Judged(claim, word, ours, evidence, meets=True, **unsettled)
    return Judged(claim, NOT_RUN if word == NOT_RUN else INCONCLUSIVE, ours, evidence, **data)


def not_run(claim: Claim, why: str, command: str, settle: str = "", **data: Any) -> Judged:
    """Not run: the evidence is not stored; ``command`` stores it (``settle``: default the why and the command)."""
    settle = settle or f"{why}: `{command}`"
    return judged_as(claim, NOT_RUN, "—", why, meets=False, settle=settle, command=command, **data)


# -- readings without an interval (a trained model's layers, one seed) --------------------------------------------


def analysis_missing(store: Store, claim: Claim, names: Sequence[str]) -> Judged | None:
    if not store.judged:
        why = f"scale {store.scale}: its models show the mechanics only, not what training learns"
        settle = f"the analysis of a trained small model: `{experiment_command('small', studies=list(names))}`"
        return judged_as(claim, INCONCLUSIVE, "—", why, meets=False, settle=settle)
    if absent := [n for n in names if not store.has(n)]:
        return not_run(
            claim, f"the {', '.join(absent)} analysis is not stored", experiment_command(store.scale, studies=absent)
        )
    return None


def reading_row(name: str, ok: Callable[[float], bool], **reading: Any) -> dict[str, Any]:
    """One reading without an interval (a decoder layer of one model): undecided, the criterion read on its
    ``value`` shown beside (``by_value``): one model has no spread over seeds to judge it by."""
    return {"set": name, **reading, "by_value": HOLDS if ok(reading["value"]) else FAILS, "verdict": INCONCLUSIVE}


def readings_judged(
    claim: Claim, rows: list[dict[str, Any]], fmt: str, over: str, evidence: str, **data: Any
) -> Judged:
    """A claim read on readings without intervals (layers, runs): their outcome, their mean and their range."""
    values = [r["value"] for r in rows]
    low, high = min(values), max(values)
    word = outcome([r["verdict"] for r in rows])
    ours = f"{low:{fmt}} to {high:{fmt}} over {over}"
    return judged_as(
        claim, word, ours, evidence, value=statistics.fmean(values), interval=(low, high), sets=tuple(rows), **data
    )


def layer_readings(claim: Claim, rows: list[dict[str, Any]], evidence: str, names: Sequence[str], fmt: str) -> Judged:
    """An analysis read layer by layer on one model of each architecture: no interval over seeds, so below its
    standard and inconclusive, each layer's value and the criterion read on it shown; ``names``: the analyses read."""
    held, n = sum(r["by_value"] == HOLDS for r in rows), claim.evidence.standard.seeds
    why = f"{evidence}; the criterion met by the value in {held} of {len(rows)} layers, with no interval to judge it"
    settle = f"the analysis repeated on {n} seeds of each model (an interval over seeds per layer); one model each now"
    strength = {"models": sorted({r["model"] for r in rows}), "layers": len(rows)}
    files = tuple(f"{n}.json" for n in names)
    return readings_judged(
        claim, rows, fmt, f"{len(rows)} layers", why, meets=False, settle=settle, files=files, strength=strength
    )


# -- BLEU contrasts -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    """One system in a BLEU contrast: its weight, its label, and where its runs are stored (the main plan, or a
    beyond study's models with ``study``/``tag``; ``factor``: a fixed budget, else the claim's)."""

    weight: float
    system: str
    label: str = ""
    study: str = ""
    tag: str = ""
    factor: int | None = None


def _runs(store: Store, t: Term, factor: int, recipe: str = "") -> Runs | None:
    """The stored runs of one term: a beyond study's models, the converged models (``recipe``), else the main
    plan's at its budget."""
    if t.study:
        return store.study_runs(t.study, t.system, t.tag)
    if recipe:
        return store.study_runs(recipe, t.system)
    return store.budget_runs(t.system, factor if t.factor is None else t.factor)


def _label(t: Term, factor: int, recipe: str = "") -> str:
    base = t.label or LABELS.get(t.system, t.system)
    if recipe:
        return f"{base} {recipe}"
    return base + (f" {factor}x" if factor != 1 and t.factor is None and not t.label else "")


def _store_command(store: Store, terms: Sequence[Term], factor: int, seeds: int) -> str:
    studies = {t.study for t in terms if t.study}
    if factor != 1 or any(t.factor not in (None, 1) for t in terms):
        studies.add("budget")
    if studies:
        return experiment_command(store.scale, corpora=[store.corpus], studies=sorted(studies))
    systems = list(dict.fromkeys(t.system for t in terms))
    return experiment_command(store.scale, systems=systems, seeds=range(1, seeds + 1), corpora=[store.corpus])


def _contrast_at(store: Store, claim: Claim, c: Contrast, factor: int, recipe: str = "") -> Judged:
    """One body of BLEU evidence: the contrast at one budget, or on the models of one recipe (``recipe``)."""
    need = c.standard.seeds
    terms = [(t, _runs(store, t, factor, recipe)) for t in c.terms]
    seeds = {_label(t, factor, recipe): len(r.seeds) if r else 0 for t, r in terms}
    counts = ", ".join(f"{k} {n}" for k, n in seeds.items())
    setting = f"{recipe} recipe" if recipe else f"{factor}x budget"
    short = [(t, r) for t, r in terms if r is None or len(r.seeds) < need]
    todo = [(t.system, t.factor or factor) for t, r in short for _ in range(need - (len(r.seeds) if r else 0))]
    command = SETTLE if recipe else c.command or _store_command(store, [t for t, _ in short or terms], factor, need)
    cost, minutes = runs_minutes(store, todo) if short and not recipe else ("", None)
    settle = f"{need} seeds of every system: {cost}: `{command}`" if cost else f"{need} seeds: `{command}`"
    data = dict(
        budget=None if recipe or not c.budgets else factor,
        recipe=recipe,
        seeds=seeds,
        files=tuple(f for _, r in terms if r for f in r.files),
        strength={"seeds": seeds, "budget": factor, "scale": store.scale} | ({"recipe": recipe} if recipe else {}),
        cost=cost,
        minutes=minutes,
    )
    if any(r is None for _, r in terms):
        absent = ", ".join(_label(t, factor) for t, r in terms if r is None)
        return not_run(claim, f"no stored run of {absent} at scale {store.scale}", command, **data)
    if any(len(r.seeds) < 2 for _, r in terms):
        value = sum(t.weight * r.mean() for t, r in terms)
        why = f"{METRIC} at scale {store.scale}, {setting}; {counts} seed(s): no seed interval"
        ours = f"{value:+.2f} (no interval)"
        return judged_as(
            claim, INCONCLUSIVE, ours, why, meets=False, settle=settle, command=command, value=value, **data
        )
    pairs = c.seed_pairs([r.seeds for _, r in terms], factor)
    refs = store.references() if all(r.hyps for _, r in terms) else None
    j = judge([(t.weight, r) for t, r in terms], c.ok, refs, pairs=pairs)
    head = j.deciding
    meets = store.judged and not short
    if not store.judged:
        settle = f"models that translate: `{experiment_command('small', systems=[t.system for t in c.terms])}`"
    below = "" if meets else f"below the standard ({c.standard.least}); "
    low, high = head.interval.low, head.interval.high
    decided = judged_as(
        claim,
        j.verdict,
        f"{head.value:+.2f} [{low:+.2f}, {high:+.2f}] ({METRIC} {split_name(head.split)})",
        f"{METRIC}, scale {store.scale}, {setting}, seeds: {counts}; {below}{describe(j)}",
        meets=meets,
        settle=settle,
        command=command,
        value=head.value,
        interval=(low, high),
        sets=tuple(s.row() for s in j.sets),
        judgement=j,
        deciding=head.row(),
        pairing=j.pairing,
        **data,
    )
    if not meets or decided.word != INCONCLUSIVE:
        return decided
    # what would settle it if the observed differences are the true ones: the seeds per system
    # (repro.studies.verdict.seeds_to_settle on every test set, the most of them), the runs that adds, their
    # GPU-minutes at the stored runs' rate, and the verdict it would reach; "no number of seeds at this scale" where a
    # set's difference sits on the bound
    n, would, why = settle_sets(j.sets, c.ok)
    if n is None:
        return replace(decided, seeds_to_settle=None, settle=f"no number of seeds at this scale: {why}")
    systems = {(t.system, t.study, t.tag, t.factor or factor): len(r.seeds) for t, r in terms}
    extra = sum(max(0, n - have) for have in systems.values())
    walls = train_walls(store, [r for _, r in terms])
    runs, minutes = f"{extra} more run{'s' if extra != 1 else ''}", max(walls) * math.ceil(extra / SIDE_BY_SIDE) / 60
    rate = f", about {minutes:.0f} GPU-minutes at the stored runs' rate ({max(walls):.0f} s of training a run, the "
    rate += f"longest of the claim's {len(walls)} runs, {SIDE_BY_SIDE} trained side by side)"
    command = c.command or _store_command(store, [t for t, _ in terms], factor, n)
    settle = f"{n} seeds of every system would settle it ({would}) if the observed differences are the true ones: "
    settle += f"{runs}{rate}: `{command}`"
    return replace(decided, seeds_to_settle=n, settle=settle, cost=f"{runs}{rate}", minutes=minutes, command=command)


@dataclass(frozen=True)
class Contrast:
    """sum(weight x system) on the four evaluation sets, against ``ok``. ``budgets``: judged at every stored budget
    (only where every term is a main-plan system of the budget study), the strongest body of evidence leading."""

    terms: tuple[Term, ...]
    ok: Threshold | Within
    budgets: bool = False
    standard: Standard = BLEU
    command: str = ""  # what stores the runs, where it is not the plan's `python -m repro experiment`

    def seed_pairs(self, seeds: list[tuple[int, ...]], factor: int) -> tuple[tuple[int, int], ...]:
        """The terms paired on the seed (``seeds``: each term's stored seeds): the same main-plan system at two
        budgets with the same seeds, the longer run continuing the shorter one's updates exactly."""
        pairs: list[tuple[int, int]] = []
        for i, a in enumerate(self.terms):
            for j, b in enumerate(self.terms[i + 1 :], i + 1):
                free = not {i, j} & {k for p in pairs for k in p} and not (a.study or b.study)
                other = (a.factor or factor) != (b.factor or factor) and a.weight * b.weight < 0
                if free and other and a.system == b.system and seeds[i] == seeds[j]:
                    pairs.append((i, j))
        return tuple(pairs)

    def judge(self, store: Store, claim: Claim) -> Judged:
        plain = all(t.factor is None and not t.study for t in self.terms)
        main_pair = plain and all(t.system in BUDGET_SYSTEMS for t in self.terms)
        factors = store.budget_factors() if self.budgets and main_pair else [1]
        bodies = [_contrast_at(store, claim, self, f) for f in factors]
        if plain and all(store.study_runs(CONVERGED, t.system) for t in self.terms):  # read once they are stored
            bodies.append(_contrast_at(store, claim, self, 1, recipe=CONVERGED))
        # the body that leads: one that meets the standard, then the most seeds of its weakest system, then the
        # converged models (trained to the optimum of the validation curve, where a budget stops short of it or past
        # it), then the longest budget; a 2-seed body never leads a 3-seed one
        lead = max(bodies, key=lambda j: (j.meets, min(j.seeds.values(), default=0), bool(j.recipe), j.budget or 1))
        beside = tuple(b for b in bodies if b is not lead)
        if not beside:
            return lead

        def named(b: Judged) -> str:  # a body by its recipe or budget ("2x"), its number and deciding set
            return f"{b.recipe or f'{b.budget}x'}: {b.ours.split(' (')[0]} ({b.deciding['set'] if b.deciding else ''}"

        others = "; ".join(f"{named(b)}, {b.word})" for b in beside)
        ours = f"{named(lead)}); {others} ({METRIC})"
        evidence = f"{lead.evidence} | beside it: {' | '.join(b.evidence for b in beside)}"
        return replace(lead, ours=ours, beside=beside, evidence=evidence)


@dataclass(frozen=True)
class CrossTask:
    """CAN - Balanced on every Multi30k direction of the scale, each judged by the verdict rule."""

    ok: Threshold | Within
    standard: Standard = BLEU

    def judge(self, store: Store, claim: Claim) -> Judged:
        rows, missing = [], []
        need = self.standard.seeds
        for corpus in corpora(store.scale):
            runs = {s: store.runs(s, corpus) for s in ("can", "balanced")}
            if not store.judged or not all(r is not None and len(r.seeds) >= need for r in runs.values()):
                missing.append(corpus)
                continue
            refs = store.references(corpus) if all(r.hyps for r in runs.values()) else None
            j = judge([(1.0, runs["can"]), (-1.0, runs["balanced"])], self.ok, refs)
            # the deciding set's reading, under the direction's name
            head = {k: v for k, v in j.deciding.row().items() if k in ("split", "value", "interval", "seed_interval")}
            verdict = j.verdict if j.verdict in (HOLDS, FAILS) else INCONCLUSIVE
            sets = tuple(s.row() for s in j.sets)
            rows.append({"set": corpus.removeprefix("multi30k-"), **head, "verdict": verdict, "sets": sets})
        # a claim on every direction fails on the first direction that misses it: that one decides it alone
        if len(rows) < 2 and not any(r["verdict"] == FAILS for r in rows):
            scale = store.scale if store.judged else "small"
            command = experiment_command(
                scale, systems=DIRECTION_SYSTEMS, seeds=range(1, need + 1), corpora=missing or [store.corpus]
            )
            why = f"{len(rows)} direction(s) with {need} seeds of CAN and Balanced; the claim needs 2 or more"
            cost, minutes = runs_minutes(store, [(s, 1) for s in DIRECTION_SYSTEMS] * need * len(missing))
            settle = f"{why}: {cost}: `{command}`"
            return not_run(claim, why, command, settle, cost=cost, minutes=minutes, sets=tuple(rows))
        return judged_as(
            claim,
            outcome([r["verdict"] for r in rows]),
            "; ".join(f"{r['set']} {r['value']:+.2f}" for r in rows),
            f"{METRIC}, scale {store.scale}, {len(rows)} direction(s), each by the verdict rule"
            + (f"; {len(missing)} not trained yet" if missing else ""),
            meets=True,
            sets=tuple(rows),
            strength={"directions": len(rows), "seeds": need},
        )


# -- speed --------------------------------------------------------------------------------------------------------


def _speed_body(claim: Claim, mode: str, rows: list[dict[str, Any]], beside: str = "") -> Judged:
    """One body of speed evidence, the GPU runs of one decoder code pooled and judged by :func:`speed_word` on the
    claim's criterion (a batch curve's readings are differences, averaged over runs as they are, not in logs);
    ``beside``: the other reading (eager or graphs) in words, shown, never deciding."""
    word, read = speed_word(rows, claim.evidence.ok, SPEED.runs, log=isinstance(claim.evidence, SpeedRatio))
    pooled, medians, across = read["pooled"], read["medians"], read["across"]
    code, n = rows[0]["code"], len(rows)
    runs = ", ".join(f"{r['set']} ({r['repeats']} repeats, shortest {r['shortest_repeat_s']:.2f} s)" for r in rows)
    interval = pooled["interval"]
    shown = f"[{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "(too few repeats for an interval)"
    reading = "CUDA-graph" if mode == "captured" else "eager"
    spread = (
        f"the run-to-run spread is not measured (the standard asks for {SPEED.runs} runs)"
        if n == 1
        else f"run medians {', '.join(f'{m:.2f}' for m in medians)} (range {min(medians):.2f}-{max(medians):.2f})"
        + (f", over runs [{across[0]:.2f}, {across[1]:.2f}]" if across else f"; the standard asks for {SPEED.runs}")
    )
    below = f"; a run below the per-run standard ({SPEED.repeats} repeats of at least {SPEED.seconds:g} s)"
    evidence = (
        f"decided by the {reading} reading; {runs_word(n)}: GPU fp16, batch 1, beam 4, d=512 random weights, "
        f"{HOW[mode]}; code of commit {code}; {runs}; the median of {pooled['n']} per-repeat ratios and its "
        f"order-statistic interval {shown} ({read['within']} within runs); {spread}"
        + ("" if all(r["meets"] for r in rows) else below)
        + (f" | beside it, not deciding: {beside}" if beside else "")
    )
    more = max(SPEED.runs - n, 1)
    return judged_as(
        claim,
        word,
        f"{pooled['median']:.2f}x {shown} ({HOW[mode]}, commit {code}, {runs_word(n)})",
        evidence,
        meets=read["meets"],
        settle=f"{runs_word(more).replace('GPU run', 'more GPU run')} of this code meeting the standard "
        f"(about {GPU_CHECK_MINUTES} GPU-minutes each): `{GPU_CHECK}`",
        cost=f"{runs_word(more)}, about {more * GPU_CHECK_MINUTES} GPU-minutes",
        minutes=float(more * GPU_CHECK_MINUTES),
        command=GPU_CHECK,
        value=pooled["median"],
        interval=interval,
        sets=tuple(rows),
        files=tuple(r["run"] for r in rows),
        strength={
            "runs": [r["run"] for r in rows],
            "code": code,
            "repeats": pooled["n"],
            "shortest_repeat_s": min(r["shortest_repeat_s"] for r in rows),
            "mode": mode,
            "run_medians": medians,
            "over_runs": across,
        },
    )


@dataclass(frozen=True)
class SpeedRatio:
    """tokens/s of ``system`` over ``against`` (GPU fp16, batch 1), per interleaved repeat, in ``mode``: "eager" or
    "captured" (whole decoding steps replayed from CUDA graphs)."""

    system: str
    against: str
    ok: Threshold
    mode: str = "eager"
    standard: Standard = SPEED

    def judge(self, store: Store, claim: Claim) -> Judged:
        rows = timed_runs(store, self.system, self.against, self.mode)
        if not rows:
            why = f"no stored GPU run timed {LABELS[self.system]} and {LABELS[self.against]} ({self.mode}, per-repeat "
            why += "tokens/s)"
            command = f"{GPU_CHECK} (with --systems {self.system},{self.against} in scripts/gpu_bench.py)"
            return not_run(claim, why, command, **GPU_RUN)
        other = "eager" if self.mode == "captured" else "captured"
        beside = ""
        if other_rows := timed_runs(store, self.system, self.against, other):
            o = _speed_body(claim, other, by_code(other_rows)[0])  # the other reading, judged the same way
            shown = f" [{o.interval[0]:.2f}, {o.interval[1]:.2f}]" if o.interval else ""
            beside = f"{HOW[other]} {o.value:.2f}x{shown} ({runs_word(len(o.sets))}): {o.word}"
        lead, *older = (_speed_body(claim, self.mode, group, beside) for group in by_code(rows))
        return replace(lead, beside=tuple(older))


@dataclass(frozen=True)
class BatchCurve:
    """``system``/``against`` at batch ``first`` minus at batch ``last`` (> 0: the gain shrinks), per repeat."""

    system: str
    against: str
    first: int
    last: int
    ok: Threshold = Threshold(">", 0.0)
    standard: Standard = SPEED

    def judge(self, store: Store, claim: Claim) -> Judged:
        """The gain at batch ``first`` minus at ``last``, per repeat, over every stored sweep with per-repeat times: the
        sweeps of one code pooled as the speed rule pools runs; a sweep with medians only is read, never judged."""
        pair, ends, rows, medians_only = (self.system, self.against), (self.first, self.last), [], None
        for run in store.gpu_runs_with("batch"):
            systems, prov = store.gpu("batch", run, "systems")
            if not all(x in systems for x in pair):
                continue
            repeats = {x: {int(k): v for k, v in systems[x].get("by_batch_repeats", {}).items()} for x in pair}
            if all(n in repeats[x] for x in pair for n in ends):
                first, last = (repeat_ratios(repeats[self.system][n], repeats[self.against][n]) for n in ends)
                diffs = [x - y for x, y in zip(first, last)]  # a sweep times no repeat's length: its repeats decide
                rows.append(run_reading(run, prov, diffs, 0.0) | {"meets": len(first) >= self.standard.repeats})
            else:
                medians_only = medians_only or run
        if rows:
            lead, *older = (_speed_body(claim, "eager", group) for group in by_code(rows))
            return replace(lead, beside=tuple(older))
        if run := medians_only:
            medians, prov = store.gpu_batch(run)
            at = {n: medians[self.system][n] / medians[self.against][n] for n in ends if n in medians[self.system]}
            ours = ", ".join(f"{v:.2f}x at {n}" for n, v in at.items()) + " (medians)"
            why = f"the stored batch sweep ({run_name(prov)}, {run}) keeps one median per batch size and no per-repeat "
            why += "times: no interval can be read from it"
            settle = f"a batch sweep with per-repeat times on a GPU (~{GPU_CHECK_MINUTES} GPU-minutes): `{BATCH_SWEEP}`"
            return judged_as(claim, INCONCLUSIVE, ours, why, meets=False, settle=settle, **GPU_RUN, files=(run,))
        return not_run(claim, "no stored GPU batch sweep of CAN and Balanced", BATCH_SWEEP)


# -- trained-model analyses ---------------------------------------------------------------------------------------


MODELS = {"similarity": "Baseline 6/6", "similarity-balanced": "Balanced 12/2"}


@dataclass(frozen=True)
class Similarity:
    """The cosine similarity of two sub-layers' inputs in each decoder layer of the stored analyses ``studies``
    (``similarity``: the 6/6 Baseline; ``similarity-balanced``: Balanced), against ``ok``; with ``than``, the
    criterion is read on ``pair`` minus ``than`` (one matrix's diagonal against another's)."""

    ok: Threshold
    studies: tuple[str, ...] = ("similarity", "similarity-balanced")
    pair: str = "self_vs_cross"
    than: str = ""
    standard: Standard = ANALYSIS

    def judge(self, store: Store, claim: Claim) -> Judged:
        if missing := analysis_missing(store, claim, self.studies):
            return missing
        rows = []
        for name in self.studies:
            model, matrix = MODELS[name], store.analysis(name)[0]["residual"]
            for i, row in enumerate(matrix[self.pair]):
                value = row[i] - (matrix[self.than][i][i] if self.than else 0.0)
                rows.append(reading_row(f"{model} layer {i + 1}", self.ok, model=model, layer=i + 1, value=value))
        what = f"{self.pair} minus {self.than}" if self.than else self.pair
        evidence = (
            f"the seed-1 {' and '.join(MODELS[n] for n in self.studies)} at {store.scale}: the cosine similarity "
            f"({what}) of each decoder layer over the validation split; one model each, so no seed spread: a "
            "measurement, read layer by layer"
        )
        return layer_readings(claim, rows, evidence, self.studies, "+.2f" if self.than else ".2f")


@dataclass(frozen=True)
class GateShare:
    """The share of CAN's gate values within ``near`` of 0 or 1, per decoder layer (the stored ``attention`` study)."""

    ok: Threshold
    near: float
    standard: Standard = ANALYSIS

    def judge(self, store: Store, claim: Claim) -> Judged:
        if missing := analysis_missing(store, claim, ("attention",)):
            return missing
        rows = [
            reading_row(f"layer {x['layer']}", self.ok, model="CAN", layer=x["layer"], value=x["near_ends"])
            for x in gate_shares(store.analysis("attention")[0], self.near)
        ]
        evidence = (
            f"the seed-1 CAN at {store.scale}, its gate over every (target position, head) of the test split "
            "(attention.json); one model: a measurement, read layer by layer"
        )
        return layer_readings(claim, rows, evidence, ("attention",), ".0%")


# -- validation losses --------------------------------------------------------------------------------------------


def _seeds_held(store: Store, standard: Standard, seeds: dict[str, int]) -> dict[str, Any]:
    """A loss claim's seeds per system held to its standard, and what would settle it."""
    return {
        "meets": store.judged and min(seeds.values()) >= standard.seeds,
        "settle": f"{standard.seeds} seeds of each at small: `{experiment_command('small')}`",
        "seeds": seeds,
        "strength": {"seeds": seeds, "scale": store.scale},
    }


@dataclass(frozen=True)
class LossGap:
    """Final validation loss of ``system`` minus ``against`` over seeds (seed interval), > 0."""

    system: str
    against: str
    standard: Standard = LOSS

    def judge(self, store: Store, claim: Claim) -> Judged:
        a, b = ([final_losses(log)[1] for log in store.logs(s)] for s in (self.system, self.against))
        if min(len(a), len(b)) < 2:
            return not_run(claim, f"scale {store.scale}: fewer than 2 seeds stored", experiment_command(store.scale))
        low, high = difference_interval(a, b)
        value = statistics.fmean(a) - statistics.fmean(b)
        word = interval_verdict(low, high, lambda d: d > 0)
        ours = f"{value:+.3f} [{low:+.3f}, {high:+.3f}]"
        why = f"final label-smoothed validation loss at {store.scale}, {len(a)} and {len(b)} seeds, the seed interval"
        held = _seeds_held(store, self.standard, {self.system: len(a), self.against: len(b)})
        return judged_as(claim, word, ours, why, value=value, interval=(low, high), **held)


@dataclass(frozen=True)
class LossFalling:
    """The validation loss falls between the last two validations of every run of ``systems``."""

    systems: tuple[str, ...]
    standard: Standard = LOSS

    def judge(self, store: Store, claim: Claim) -> Judged:
        rows = []
        for system in self.systems:
            drops, steps = [], []
            for log in store.logs(system):
                valid = [r for r in log if r.get("valid_loss") is not None]
                if len(valid) >= 2:
                    drops.append(valid[-2]["valid_loss"] - valid[-1]["valid_loss"])
                    steps = [valid[-2]["step"], valid[-1]["step"]]
            if len(drops) >= 2:
                rows.append(seed_reading(LABELS[system], drops, lambda d: d > 0) | {"steps": steps, "drops": drops})
            elif drops:
                rows.append(reading_row(f"{LABELS[system]} (one seed)", lambda d: d > 0, value=drops[0], steps=steps))
        if not rows:
            return not_run(
                claim, f"scale {store.scale}: no stored run with two validations", experiment_command("small")
            )
        over = f"the last {rows[0]['steps'][1] - rows[0]['steps'][0]:,} updates (each system's mean over its seeds)"
        why = f"the drop of the validation loss between the last two validations at {store.scale}, per system its "
        why += "mean over seeds with the seeds' interval (Student's t, n - 1 degrees of freedom): " + "; ".join(
            f"{r['set']} {r['value']:+.3f}"
            + (f" [{r['interval'][0]:+.3f}, {r['interval'][1]:+.3f}]" if r.get("interval") else "")
            + f": {r['verdict']}"
            for r in rows
        )
        held = _seeds_held(store, self.standard, {s: len(store.seeds(s)) for s in self.systems})
        return readings_judged(claim, rows, "+.3f", over, why, **held)
