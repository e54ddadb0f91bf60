"""How each kind of evidence is judged: one judge per kind of evidence of the claims registry
(:mod:`canlib.studies.claims`; the types in :mod:`canlib.studies.evidence`), each reading a
:class:`~canlib.studies.store.Store` and applying the one rule of :mod:`canlib.studies.verdict`.

* :class:`Contrast` (BLEU): the four evaluation sets, the seed interval and the pooled bootstrap; at every stored
  budget where the terms are the budget study's systems (the largest budget with at least two seeds leads); with
  ``one_seed``, the seed-1 pair's test-set interval alone where a system has a single seed.
* :class:`SpeedRatio`: the per-repeat ratios of the GPU run :func:`speed_run` picks (the most timed tokens per system,
  the latest among equals), every other stored run's verdict beside it; a run with the opposite verdict makes the
  claim mixed across runs.
* :class:`BatchCurve`: the ratio at the first batch size minus at the last, over the repeats of a stored sweep (a
  sweep that keeps medians only cannot be judged).
* :class:`Similarity`, :class:`GateShare`: a stored analysis of one trained model, the criterion read over its layers.
* :class:`LossGap`, :class:`LossFalling`: the training logs, over seeds or over runs.
* :class:`CrossTask`: the CAN - Balanced contrast on every stored Multi30k direction.

Only this module and :mod:`canlib.studies.claims` call the verdict functions.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from canlib.model.config import LABELS
from canlib.results.layout import experiment_command
from canlib.results.scales import DIRECTION_SYSTEMS, planned_seeds
from canlib.results.studies import BUDGET_SYSTEMS
from canlib.studies.analyses import gate_shares
from canlib.studies.evidence import (  # the types the judges fill
    METRIC,
    BatchCurve,
    Claim,
    Contrast,
    CrossTask,
    GateShare,
    Judged,
    LossFalling,
    LossGap,
    Similarity,
    SpeedRatio,
    Term,
)
from canlib.studies.store import Store
from canlib.studies.verdict import (
    FAILED,
    HELD,
    K_SPREAD,
    MIN_SEEDS,
    MIXED,
    NOISE,
    NOT_RUN,
    NOT_TESTED,
    Judgement,
    Runs,
    describe,
    interval_verdict,
    judge,
    outcome,
    ratio_verdict,
    repeat_ratios,
    seed_contrast,
    split_name,
)


def _untested(claim: Claim, why: str, state: str = NOT_TESTED, command: str = "", **data: Any) -> Judged:
    return Judged(
        claim, state, data.pop("ours", "—"), why + (f": `{command}`" if command else ""), command=command, **data
    )


# BLEU contrasts -------------------------------------------------------------------------------------------------


def _terms_runs(store: Store, contrast: Contrast, factor: int) -> list[tuple[Term, Runs | None]]:
    out = []
    for t in contrast.terms:
        f = t.factor if t.factor is not None else factor
        if t.study:
            runs = store.study_runs(t.study, t.system, t.tag, label=t.label or None)
        elif f != 1:
            runs = store.budget_runs(t.system, f)
        else:
            runs = store.runs(t.system, label=t.label or None)
        out.append((t, runs))
    return out


def _label(t: Term, factor: int) -> str:
    base = t.label or LABELS.get(t.system, t.system)
    return base + (f" {factor}x" if factor != 1 and t.factor is None and not t.label else "")


def _store_command(store: Store, missing: Sequence[Term], factor: int) -> str:
    studies = sorted(
        {t.study for t in missing if t.study}
        | ({"budget"} if factor != 1 or any(t.factor not in (None, 1) for t in missing) else set())
    )
    if studies:
        return experiment_command(store.scale, corpora=[store.corpus], studies=studies)
    systems = sorted({t.system for t in missing}, key=[t.system for t in missing].index)
    planned = max(len(planned_seeds(store.scale, s)) for s in systems)
    return experiment_command(
        store.scale, systems=systems, seeds=range(1, max(MIN_SEEDS, planned) + 1), corpora=[store.corpus]
    )


def _set_rows(j: Judgement) -> tuple[dict[str, Any], ...]:
    return tuple(
        {
            "set": split_name(s.split),
            "split": s.split,
            "value": s.value,
            "seed_interval": [s.seeds.low, s.seeds.high] if s.seeds else None,
            "test_set_interval": [s.test_set.low, s.test_set.high] if s.test_set else None,
            "verdict": s.verdict,
        }
        for s in j.sets
    )


def _contrast_at(store: Store, claim: Claim, c: Contrast, factor: int) -> Judged:
    terms = _terms_runs(store, c, factor)
    seeds = {_label(t, factor): len(r.seeds) if r else 0 for t, r in terms}
    files = tuple(f for _, r in terms if r for f in r.files)
    budget = factor if c.budgets else None
    short = [t for t, r in terms if r is None or len(r.seeds) < MIN_SEEDS]
    pair = c.one_seed and short and all(r is not None for _, r in terms)
    if short and not pair:
        ours = "—"
        if all(r is not None for _, r in terms):
            value = sum(t.weight * r.mean() for t, r in terms)
            ours = f"{value:+.2f} ({min(seeds.values())} seed{'s' if min(seeds.values()) > 1 else ''}, no spread)"
        why = (
            f"scale {store.scale}: "
            + ", ".join(f"{k} has {n} full-budget seed(s)" for k, n in seeds.items() if n < MIN_SEEDS)
            + f"; needs at least {MIN_SEEDS}"
        )
        return _untested(
            claim,
            why,
            NOT_RUN,
            _store_command(store, short, factor),
            ours=ours,
            budget=budget,
            seeds=seeds,
            files=files,
        )
    if pair:  # one seed of a system: the seed-1 pair's test-set interval alone, said so
        shared = sorted(set.intersection(*(set(r.seeds) for _, r in terms)))
        if not shared:
            return _untested(claim, "no seed is stored for every system", NOT_RUN, _store_command(store, short, factor))
        terms = [(t, _only(r, shared[0])) for t, r in terms]
        j = judge([(t.weight, r) for t, r in terms], c.ok, store.references(), seed_interval=False)
        how = (
            f"one seed of {', '.join(_label(t, factor) for t in short)}: the seed-{shared[0]} pair's test-set "
            "interval alone (sacreBLEU's paired bootstrap: the sampling noise of the sentences; the training noise "
            "is not measured)"
        )
        files = tuple(f for _, r in terms for f in r.files)
    else:
        with_hyps = all(r.hyps for _, r in terms)
        j = judge([(t.weight, r) for t, r in terms], c.ok, store.references() if with_hyps else None)
        how = (
            "seed interval ± 2 s.e. and sacreBLEU's paired bootstrap pooled over seeds (95 %)"
            if with_hyps
            else "seed interval ± 2 s.e. (no stored hypotheses: no test-set interval)"
        )
    head = j.on("test") if any(s.split == "test" for s in j.sets) else j.sets[0]
    ours = f"{_number(head)} ({METRIC} {split_name(head.split)})"
    counts = ", ".join(f"{k} {n}" for k, n in seeds.items())
    tally = f"{j.count(HELD)} held, {j.count(FAILED)} did not hold, {j.count(NOISE)} within noise of {len(j.sets)} sets"
    evidence = (
        f"{METRIC}, scale {store.scale}{f', {factor}x budget' if c.budgets else ''}, seeds: {counts}; {how}; "
        f"{tally}: {describe(j)}"
    )
    interval = (head.seeds.low, head.seeds.high) if head.seeds else (head.test_set.low, head.test_set.high)
    return Judged(
        claim,
        j.verdict,
        ours,
        evidence,
        head.value,
        interval,
        budget,
        _set_rows(j),
        seeds=seeds,
        files=files,
        judgement=j,
    )


def _number(on: Any) -> str:
    """A contrast on one set with its spread: ``-1.58 ± 0.81`` (seed interval), ``-0.88 [-1.69, -0.04]`` (test-set
    interval alone)."""
    spread = f" ± {on.half_width:.2f}" if on.seeds else f" [{on.test_set.low:+.2f}, {on.test_set.high:+.2f}]"
    return f"{on.value:+.2f}{spread}"


def _only(runs: Runs, seed: int) -> Runs:
    k = runs.seeds.index(seed)
    return Runs(
        runs.label,
        (seed,),
        {s: (v[k],) for s, v in runs.scores.items()},
        {s: (h[k],) for s, h in runs.hyps.items()},
        (runs.files[k],),
    )


def _judge_contrast(store: Store, claim: Claim, c: Contrast) -> Judged:
    if not store.judged:
        return _untested(claim, f"scale {store.scale}: its models do not translate well enough to judge BLEU")
    main_pair = all(t.factor is None and not t.study and t.system in BUDGET_SYSTEMS for t in c.terms)
    factors = store.budget_factors() if c.budgets and main_pair else [1]
    at = {f: _contrast_at(store, claim, c, f) for f in factors}
    judged_factors = [f for f, j in at.items() if j.judgement is not None]
    lead = max(judged_factors) if judged_factors else 1
    beside = tuple(at[f] for f in sorted(at, reverse=True) if f != lead)
    if beside:
        head = at[lead].judgement.on("test")
        others = "; ".join(
            f"{b.budget}x: {_number(b.judgement.on('test'))} ({b.word})" if b.judgement else f"{b.budget}x: {b.word}"
            for b in beside
        )
        ours = f"{lead}x: {_number(head)}; {others} ({METRIC} {split_name(head.split)})"
        return replace(
            at[lead],
            ours=ours,
            beside=beside,
            evidence=f"{at[lead].evidence} | beside it: {'; '.join(b.evidence for b in beside)}",
        )
    return at[lead]


# speed -----------------------------------------------------------------------------------------------------------


def timed_tokens(settings: dict[str, Any]) -> int:
    """Tokens a GPU run timed per system: sentences x repeats x forced length."""
    return int(settings.get("sentences", 0)) * int(settings.get("repeats", 0)) * int(settings.get("forced_length", 0))


def speed_run(store: Store, systems: Sequence[str] = ("baseline", "balanced", "can")) -> str | None:
    """The stored GPU run a speed claim reads: of those that timed ``systems`` in eager mode with per-repeat
    tokens/s, the one that timed the most tokens per system (sentences x repeats x forced length), the latest
    measured among equals. The same run gives Table 2's speed column."""
    best = None
    for run in store.gpu_runs_with("speed"):
        rows, prov = store.gpu_speed("eager", run)
        if not all(s in rows and rows[s].get("tok_per_s_repeats") for s in systems):
            continue
        rank = (timed_tokens(prov["settings"]), str(prov.get("measured_at") or prov["date"]))
        if best is None or rank > best[0]:
            best = (rank, run)
    return best[1] if best else None


def run_name(prov: dict[str, Any]) -> str:
    """A GPU run in a few words: ``NVIDIA H200, commit df024e7``."""
    return f"{prov['device']}, commit {str(prov['commit'])[:7]}"


def _judge_speed(store: Store, claim: Claim, s: SpeedRatio) -> Judged:
    rows = []
    for run in store.gpu_runs_with("speed"):
        eager, prov = store.gpu_speed("eager", run)
        if not all(x in eager and eager[x].get("tok_per_s_repeats") for x in (s.system, s.against)):
            continue
        ratios = repeat_ratios(eager[s.system]["tok_per_s_repeats"], eager[s.against]["tok_per_s_repeats"])
        rows.append(
            {
                "set": run_name(prov),
                "run": run,
                "value": statistics.median(ratios),
                "interval": [min(ratios), max(ratios)],
                "ratios": ratios,
                "verdict": ratio_verdict(ratios, s.ok),
                "timed_tokens": timed_tokens(prov["settings"]),
            }
        )
    chosen = speed_run(store, (s.system, s.against))
    if chosen is None:
        return _untested(
            claim,
            f"no stored GPU run timed {LABELS[s.system]} and {LABELS[s.against]} (eager fp16, per-repeat tokens/s)",
        )
    head = next(r for r in rows if r["run"] == chosen)
    for r in rows:
        r["chosen"] = r["run"] == chosen
    opposite = {HELD: FAILED, FAILED: HELD}.get(head["verdict"])
    disagree = [r for r in rows if r["verdict"] == opposite]
    state = MIXED if disagree else head["verdict"]
    others = "; ".join(
        f"{r['set']}: {r['value']:.2f}x ({r['interval'][0]:.2f}-{r['interval'][1]:.2f}x), {r['verdict']}"
        for r in rows
        if not r["chosen"]
    )
    evidence = (
        f"GPU eager fp16, batch 1, beam 4, d=512 random weights; the run {head['set']} ({chosen}), chosen as "
        f"the one that timed the most tokens per system ({head['timed_tokens']}); the criterion read over "
        f"its {len(head['ratios'])} interleaved repeats' ratios"
        + (f"; the other runs: {others}" if others else "")
        + (f"; {len(disagree)} other run(s) reach the opposite verdict" if disagree else "")
    )
    ours = f"{head['value']:.2f}x (repeats {head['interval'][0]:.2f}-{head['interval'][1]:.2f}x; {head['set']})"
    return Judged(
        claim, state, ours, evidence, head["value"], tuple(head["interval"]), None, tuple(rows), files=(chosen,)
    )


def _judge_batch(store: Store, claim: Claim, b: BatchCurve) -> Judged:
    for run in store.gpu_runs_with("batch"):
        result, prov = store.gpu("batch", run)
        systems = result["systems"]
        if not all(x in systems for x in (b.system, b.against)):
            continue
        repeats = {
            x: {int(k): v for k, v in systems[x].get("by_batch_repeats", {}).items()} for x in (b.system, b.against)
        }
        if not all(n in repeats[x] for x in repeats for n in (b.first, b.last)):
            medians = {x: {int(k): v for k, v in systems[x]["by_batch"].items()} for x in (b.system, b.against)}
            at = {n: medians[b.system][n] / medians[b.against][n] for n in (b.first, b.last) if n in medians[b.system]}
            shown = ", ".join(f"{v:.2f}x at {n}" for n, v in at.items())
            return _untested(
                claim,
                f"the stored batch sweep ({run_name(prov)}, {run}) keeps one median per batch size "
                "and no per-repeat times, so no interval can be read from it",
                ours=f"{shown} (medians)",
                files=(run,),
            )
        r1 = repeat_ratios(repeats[b.system][b.first], repeats[b.against][b.first])
        r2 = repeat_ratios(repeats[b.system][b.last], repeats[b.against][b.last])
        low, high = min(r1) - max(r2), max(r1) - min(r2)
        state = interval_verdict(low, high, lambda d: d > 0)
        ours = (
            f"{statistics.median(r1):.2f}x at {b.first}, {statistics.median(r2):.2f}x at {b.last} "
            f"(difference {low:+.2f} to {high:+.2f} over the repeats)"
        )
        rows = (
            {"set": f"batch {b.first}", "value": statistics.median(r1), "interval": [min(r1), max(r1)]},
            {"set": f"batch {b.last}", "value": statistics.median(r2), "interval": [min(r2), max(r2)]},
        )
        return Judged(
            claim,
            state,
            ours,
            f"GPU eager fp16 batch sweep, {run_name(prov)} ({run}); the difference of the "
            "ratios read from the lowest to the highest the repeats allow",
            statistics.median(r1) - statistics.median(r2),
            (low, high),
            None,
            rows,
            files=(run,),
        )
    return _untested(claim, "no stored GPU batch sweep of CAN and Balanced")


# trained-model analyses -------------------------------------------------------------------------------------------


def _analysis(
    store: Store, claim: Claim, name: str
) -> tuple[tuple[dict[str, Any], dict[str, Any]] | None, Judged | None]:
    """The stored analysis a claim about one trained model reads, or the Judged that says why it is not judged."""
    if not store.judged:
        return None, _untested(
            claim, f"scale {store.scale}: its models show the mechanics only, not what training learns"
        )
    if not store.has(name):
        return None, _untested(
            claim, f"the {name} study is not stored", NOT_RUN, experiment_command(store.scale, studies=[name])
        )
    return store.analysis(name), None


def _judge_similarity(store: Store, claim: Claim, s: Similarity) -> Judged:
    stored, why = _analysis(store, claim, "similarity")
    if why:
        return why
    result, prov = stored
    diag = [row[i] for i, row in enumerate(result["residual"]["self_vs_cross"])]
    rows = tuple(
        {"set": f"layer {i + 1}", "value": v, "verdict": HELD if s.ok(v) else FAILED} for i, v in enumerate(diag)
    )
    state = interval_verdict(min(diag), max(diag), s.ok)
    ours = f"{min(diag):.2f}-{max(diag):.2f} over the {len(diag)} layers"
    evidence = (
        f"the seed-1 Baseline 6/6 at {store.scale}, cosine similarity of each decoder layer's self- and "
        f"cross-attention inputs over the validation split (similarity.json, {prov['device']}); one model, so "
        "no seed spread: the criterion is read over the layers, lowest to highest"
    )
    return Judged(
        claim,
        state,
        ours,
        evidence,
        statistics.fmean(diag),
        (min(diag), max(diag)),
        None,
        rows,
        files=("similarity.json",),
    )


def _judge_gate(store: Store, claim: Claim, g: GateShare) -> Judged:
    stored, why = _analysis(store, claim, "attention")
    if why:
        return why
    study, _ = stored
    shares = gate_shares(study, g.near)
    values = [x["near_ends"] for x in shares]
    rows = tuple({"set": f"layer {x['layer']}", "value": x["near_ends"]} for x in shares)
    ours = f"{min(values):.0%}-{max(values):.0%} of the values within {g.near} of 0 or 1"
    return Judged(
        claim,
        interval_verdict(min(values), max(values), g.ok),
        ours,
        f"the seed-1 CAN at {store.scale}, its gate over every (target position, head) of the test split "
        "(attention.json); one model: the criterion is read over the layers",
        statistics.fmean(values),
        (min(values), max(values)),
        None,
        rows,
        files=("attention.json",),
    )


def _final_losses(store: Store, system: str) -> list[float]:
    return [[r for r in log if r.get("valid_loss") is not None][-1]["valid_loss"] for log in store.logs(system)]


def _judge_loss_gap(store: Store, claim: Claim, g: LossGap) -> Judged:
    a, b = _final_losses(store, g.system), _final_losses(store, g.against)
    if min(len(a), len(b)) < MIN_SEEDS:
        return _untested(
            claim,
            f"scale {store.scale}: {min(len(a), len(b))} seed(s) read; the seed interval needs {MIN_SEEDS}",
            ours=f"{statistics.fmean(a) - statistics.fmean(b):+.3f} (no spread)" if a and b else "—",
        )
    value, se = seed_contrast([(1.0, a), (-1.0, b)])
    low, high = value - K_SPREAD * se, value + K_SPREAD * se
    return Judged(
        claim,
        interval_verdict(low, high, lambda d: d > 0),
        f"{value:+.3f} ± {K_SPREAD * se:.3f}",
        f"final label-smoothed validation loss at {store.scale}, {len(a)} and {len(b)} seeds, ± 2 s.e.",
        value,
        (low, high),
        seeds={g.system: len(a), g.against: len(b)},
    )


def _judge_falling(store: Store, claim: Claim, f: LossFalling) -> Judged:
    rows = []
    for system in f.systems:
        for seed, log in zip(store.seeds(system), store.logs(system)):
            valid = [r for r in log if r.get("valid_loss") is not None]
            if len(valid) < 2:
                continue
            rows.append(
                {
                    "set": f"{LABELS[system]} seed {seed}",
                    "value": valid[-2]["valid_loss"] - valid[-1]["valid_loss"],
                    "steps": [valid[-2]["step"], valid[-1]["step"]],
                }
            )
    if not rows:
        return _untested(claim, f"scale {store.scale}: no stored run with two validations")
    drops = [r["value"] for r in rows]
    return Judged(
        claim,
        interval_verdict(min(drops), max(drops), lambda d: d > 0),
        f"{min(drops):+.3f} to {max(drops):+.3f} over the last {rows[0]['steps'][1] - rows[0]['steps'][0]:,} updates",
        f"the drop of the validation loss between the last two validations of {len(rows)} runs at "
        f"{store.scale}, read from the smallest to the largest",
        statistics.fmean(drops),
        (min(drops), max(drops)),
        None,
        tuple(rows),
    )


def _judge_tasks(store: Store, claim: Claim, t: CrossTask) -> Judged:
    if not store.judged:
        return _untested(claim, f"scale {store.scale}: its models do not translate well enough to judge BLEU")
    rows, missing = [], []
    for corpus in (store.corpus, *store.spec.directions):
        runs = {s: store.runs(s, corpus) for s in ("can", "balanced")}
        if not all(r is not None and len(r.seeds) >= MIN_SEEDS for r in runs.values()):
            missing.append(corpus)
            continue
        hyps = all(r.hyps for r in runs.values())
        j = judge([(1.0, runs["can"]), (-1.0, runs["balanced"])], t.ok, store.references(corpus) if hyps else None)
        head = j.on("test")
        rows.append(
            {
                "set": corpus.removeprefix("multi30k-"),
                "value": head.value,
                "seed_interval": [head.seeds.low, head.seeds.high],
                "verdict": j.verdict,
                "sets": _set_rows(j),
            }
        )
    if len(rows) < 2:
        command = experiment_command(
            store.scale,
            systems=DIRECTION_SYSTEMS,
            seeds=range(1, max(MIN_SEEDS, store.spec.direction_seeds) + 1),
            corpora=missing,
        )
        return _untested(
            claim,
            f"{len(rows)} direction(s) with at least {MIN_SEEDS} seeds of CAN and Balanced; needs 2 or more",
            NOT_RUN if missing else NOT_TESTED,
            command if missing else "",
            sets=tuple(rows),
        )
    state = outcome([r["verdict"] if r["verdict"] in (HELD, FAILED) else NOISE for r in rows])
    ours = "; ".join(f"{r['set']} {r['value']:+.2f}" for r in rows)
    return Judged(
        claim,
        state,
        ours,
        f"{METRIC}, scale {store.scale}, {len(rows)} directions, each by the verdict rule",
        None,
        None,
        None,
        tuple(rows),
    )


JUDGES: dict[type, Callable[[Store, Claim, Any], Judged]] = {
    Contrast: _judge_contrast,
    SpeedRatio: _judge_speed,
    BatchCurve: _judge_batch,
    Similarity: _judge_similarity,
    GateShare: _judge_gate,
    LossGap: _judge_loss_gap,
    LossFalling: _judge_falling,
    CrossTask: _judge_tasks,
}
