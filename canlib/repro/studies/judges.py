"""How each kind of evidence is judged: one judge per kind of evidence of the claims registry
(:mod:`canlib.repro.studies.claims`; the types and standards in :mod:`canlib.repro.studies.evidence`), each reading a
:class:`~canlib.repro.studies.store.Store` and applying the one rule of :mod:`canlib.repro.studies.verdict`.

Every judge finds the **bodies of evidence** a claim has (a BLEU contrast: one per stored budget; a speed ratio: one
per timed code version), holds each to its standard, and lets the strongest lead: a body that meets the standard
before one that does not, then the most seeds (BLEU) or the newest code (speed), then the longest budget. The
weaker bodies stand beside the verdict and never change it. Evidence below the standard is **inconclusive**, with
what would settle it; evidence not stored at all is **not run**, with its command.

Only this module calls the verdict functions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from canlib.catalogue import DIRECTION_SYSTEMS, LABELS
from canlib.repro.results.layout import experiment_command
from canlib.repro.results.studies import BUDGET_SYSTEMS
from canlib.repro.studies.analyses import gate_shares
from canlib.repro.studies.evidence import (
    METRIC,
    SPEED,
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
    Standard,
    Term,
)
from canlib.repro.studies.store import Store
from canlib.repro.studies.verdict import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    MIXED,
    NOT_RUN,
    Judgement,
    Runs,
    describe,
    interval_verdict,
    judge,
    median_interval,
    outcome,
    repeat_ratios,
    seed_interval,
    split_name,
)

SIDE_BY_SIDE = 4  # small runs a GPU trains at once in one `canlib experiment` call, each taking about a run's time
GPU_CHECK = "bash scripts/gpu_check.sh --steps=bench,profile"  # the decoding-speed run (measurements/README.md)
GPU_CHECK_MINUTES = 5  # its steps' timeouts, with the machine's start


def _missing(claim: Claim, why: str, command: str, **data: Any) -> Judged:
    """Not run: the evidence is not stored; ``command`` stores it."""
    settle = f"{why}: `{command}`" if command else why
    return Judged(claim, NOT_RUN, data.pop("ours", "—"), why, command=command, settle=settle, **data)


def _below(claim: Claim, why: str, settle: str, command: str = "", **data: Any) -> Judged:
    """Inconclusive: the evidence is below its standard."""
    return Judged(claim, INCONCLUSIVE, data.pop("ours", "—"), why, command=command, settle=settle, **data)


def _minutes(store: Store, runs: Sequence[tuple[str, int]]) -> tuple[str, float | None]:
    """What training ``runs`` ((system, budget factor) each) costs, in words and in GPU-minutes: the runs and about
    how many GPU-minutes, from the wall time of the stored runs of the same budget (they train :data:`SIDE_BY_SIDE`
    at once)."""
    walls = [store.train_seconds(s, f) for s, f in runs]
    known = [w for w in walls if w]
    count = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    if not known:
        return count, None
    minutes = max(known) * math.ceil(len(runs) / SIDE_BY_SIDE) / 60
    return f"{count}, about {minutes:.0f} GPU-minutes" + (" side by side" if len(runs) > 1 else ""), minutes


GPU_RUN = (f"one GPU run, about {GPU_CHECK_MINUTES} GPU-minutes", float(GPU_CHECK_MINUTES))


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


def _store_command(store: Store, terms: Sequence[Term], factor: int, seeds: int) -> str:
    studies = sorted(
        {t.study for t in terms if t.study}
        | ({"budget"} if factor != 1 or any(t.factor not in (None, 1) for t in terms) else set())
    )
    if studies:
        return experiment_command(store.scale, corpora=[store.corpus], studies=studies)
    systems = list(dict.fromkeys(t.system for t in terms))
    return experiment_command(store.scale, systems=systems, seeds=range(1, seeds + 1), corpora=[store.corpus])


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


def _number(on: Any) -> str:
    """A contrast on one set with its seed interval: ``-1.37 [-3.09, +0.35]``."""
    return f"{on.value:+.2f} [{on.seeds.low:+.2f}, {on.seeds.high:+.2f}]"


def _contrast_at(store: Store, claim: Claim, c: Contrast, factor: int) -> Judged:
    """One body of BLEU evidence: the contrast at one budget."""
    std: Standard = c.standard
    terms = _terms_runs(store, c, factor)
    seeds = {_label(t, factor): len(r.seeds) if r else 0 for t, r in terms}
    files = tuple(f for _, r in terms if r for f in r.files)
    budget = factor if c.budgets else None
    strength = {"seeds": seeds, "budget": factor, "scale": store.scale}
    short = [(t, r) for t, r in terms if r is None or len(r.seeds) < std.seeds]
    todo = [(t.system, t.factor or factor) for t, r in short for _ in range(std.seeds - (len(r.seeds) if r else 0))]
    command = _store_command(store, [t for t, _ in short] or [t for t, _ in terms], factor, std.seeds)
    cost, minutes = _minutes(store, todo) if short else ("", None)
    settle = f"{std.seeds} seeds of every system: {cost}: `{command}`" if short else ""
    common = dict(budget=budget, seeds=seeds, files=files, strength=strength, cost=cost, minutes=minutes)
    if any(r is None for _, r in terms):
        absent = ", ".join(_label(t, factor) for t, r in terms if r is None)
        return _missing(claim, f"no stored run of {absent} at scale {store.scale}", command, **common)
    if any(len(r.seeds) < 2 for _, r in terms):
        value = sum(t.weight * r.mean() for t, r in terms)
        return _below(
            claim,
            f"{METRIC} at scale {store.scale}, {factor}x budget; {', '.join(f'{k} {n}' for k, n in seeds.items())} "
            "seed(s): no seed interval",
            settle,
            command,
            ours=f"{value:+.2f} (no interval)",
            value=value,
            **common,
        )
    with_hyps = all(r.hyps for _, r in terms)
    j = judge([(t.weight, r) for t, r in terms], c.ok, store.references() if with_hyps else None)
    head = j.on("test") if any(s.split == "test" for s in j.sets) else j.sets[0]
    meets = store.judged and not short
    if not store.judged:
        settle = f"models that translate: `{experiment_command('small', systems=[t.system for t in c.terms])}`"
    counts = ", ".join(f"{k} {n}" for k, n in seeds.items())
    evidence = (
        f"{METRIC}, scale {store.scale}, {factor}x budget, seeds: {counts}; "
        + ("" if meets else f"below the standard ({std.least}); ")
        + describe(j)
    )
    return Judged(
        claim,
        j.verdict if meets else INCONCLUSIVE,
        f"{_number(head)} ({METRIC} {split_name(head.split)})",
        evidence,
        head.value,
        (head.seeds.low, head.seeds.high),
        budget,
        _set_rows(j),
        seeds=seeds,
        files=files,
        strength=strength,
        meets=meets,
        settle="" if meets else settle,
        cost="" if meets else cost,
        minutes=None if meets else minutes,
        command="" if meets else command,
        judgement=j,
    )


def strongest(bodies: Sequence[Judged]) -> Judged:
    """The body of BLEU evidence that leads: one that meets the standard, then the most seeds of its weakest
    system, then the longest budget. A 2-seed body never leads a 3-seed one."""
    return max(bodies, key=lambda j: (j.meets, min(j.seeds.values(), default=0), j.budget or 1))


def _judge_contrast(store: Store, claim: Claim, c: Contrast) -> Judged:
    main_pair = all(t.factor is None and not t.study and t.system in BUDGET_SYSTEMS for t in c.terms)
    factors = store.budget_factors() if c.budgets and main_pair else [1]
    bodies = [_contrast_at(store, claim, c, f) for f in factors]
    lead = strongest(bodies)
    beside = tuple(b for b in bodies if b is not lead)
    if not beside:
        return lead
    others = "; ".join(f"{b.budget}x: {b.ours.split(' (')[0]} ({b.word})" for b in beside)
    return replace(
        lead,
        ours=f"{lead.budget}x: {lead.ours.split(' (')[0]}; {others} ({METRIC} test2016)",
        beside=beside,
        evidence=f"{lead.evidence} | beside it: {' | '.join(b.evidence for b in beside)}",
    )


# speed -----------------------------------------------------------------------------------------------------------


def run_name(prov: dict[str, Any]) -> str:
    """A GPU run in a few words: ``NVIDIA H200, commit df024e7``."""
    return f"{prov['device']}, commit {str(prov['commit'])[:7]}"


def _timed_runs(store: Store, system: str, against: str, mode: str, std: Standard) -> list[dict[str, Any]]:
    """Every stored GPU run that timed both systems in ``mode`` with per-repeat figures, as readings."""
    rows = []
    for run in store.gpu_runs_with("speed"):
        timed, prov = store.gpu_speed(mode, run)
        a, b = timed.get(system, {}), timed.get(against, {})
        if not (a.get("tok_per_s_repeats") and b.get("tok_per_s_repeats")):
            continue
        ratios = repeat_ratios(a["tok_per_s_repeats"], b["tok_per_s_repeats"])
        shortest = min(min(a.get("seconds", [0.0])), min(b.get("seconds", [0.0])))
        rows.append(
            {
                "set": run_name(prov),
                "run": run,
                "code": str(prov["commit"])[:7],
                "date": str(prov.get("measured_at") or prov["date"]),
                "ratios": ratios,
                "repeats": len(ratios),
                "shortest_repeat_s": shortest,
                "meets": len(ratios) >= std.repeats and shortest >= std.seconds,
                "mode": mode,
            }
        )
    return rows


def _pooled(claim: Claim, rows: Sequence[dict[str, Any]], ok: Callable[[float], bool]) -> dict[str, Any]:
    """The readings of one code version pooled: the median ratio, its interval, the state over the runs."""
    ratios = [r for row in rows for r in row["ratios"]]
    ci = median_interval(ratios)
    for row in rows:
        own = median_interval(row["ratios"])
        row["value"] = statistics.median(row["ratios"])
        row["interval"] = [own[0], own[1]] if own else None  # too few repeats for one
        row["range"] = [min(row["ratios"]), max(row["ratios"])]
        row["verdict"] = interval_verdict(*own[:2], ok) if own else INCONCLUSIVE
    pooled = interval_verdict(ci[0], ci[1], ok) if ci else INCONCLUSIVE
    verdicts = {row["verdict"] for row in rows}
    state = MIXED if {HOLDS, FAILS} <= verdicts else pooled
    return {"value": statistics.median(ratios), "ci": ci, "state": state, "n": len(ratios)}


def _speed_body(store: Store, claim: Claim, s: Any, rows: list[dict[str, Any]], ok: Callable[[float], bool]) -> Judged:
    std: Standard = s.standard
    meeting = [r for r in rows if r["meets"]]
    used = meeting or rows
    p = _pooled(claim, used, ok)
    code = used[0]["code"]
    runs = ", ".join(f"{r['set']} ({r['repeats']} repeats, shortest {r['shortest_repeat_s']:.2f} s)" for r in used)
    interval = (p["ci"][0], p["ci"][1]) if p["ci"] else None
    shown = f"[{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "(too few repeats for an interval)"
    mode = "with CUDA graphs" if getattr(s, "mode", "eager") == "captured" else "eager"
    strength = {
        "runs": [r["run"] for r in used],
        "code": code,
        "repeats": p["n"],
        "shortest_repeat_s": min(r["shortest_repeat_s"] for r in used),
        "mode": getattr(s, "mode", "eager"),
    }
    evidence = (
        f"GPU fp16, batch 1, beam 4, d=512 random weights, {mode}; code of commit {code}; {runs}; the median of "
        f"{p['n']} per-repeat ratios and its order-statistic interval"
        + ("" if meeting else f"; below the standard ({std.least})")
    )
    cost, minutes = ("", None) if meeting else GPU_RUN
    settle = "" if meeting else f"a run that meets the standard ({cost}): `{GPU_CHECK}`"
    return Judged(
        claim,
        p["state"] if meeting else INCONCLUSIVE,
        f"{p['value']:.2f}x {shown} ({mode}, commit {code})",
        evidence,
        p["value"],
        interval,
        None,
        tuple(used),
        files=tuple(r["run"] for r in used),
        strength=strength,
        meets=bool(meeting),
        settle=settle,
        cost=cost,
        minutes=minutes,
        command="" if meeting else GPU_CHECK,
    )


def _judge_speed(store: Store, claim: Claim, s: SpeedRatio) -> Judged:
    rows = _timed_runs(store, s.system, s.against, s.mode, s.standard)
    if not rows:
        return _missing(
            claim,
            f"no stored GPU run timed {LABELS[s.system]} and {LABELS[s.against]} ({s.mode}, per-repeat tokens/s)",
            f"{GPU_CHECK} (with --systems {s.system},{s.against} in scripts/gpu_bench.py)",
            cost=GPU_RUN[0],
            minutes=GPU_RUN[1],
        )
    codes: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["date"], reverse=True):
        codes.setdefault(row["code"], []).append(row)
    bodies = [_speed_body(store, claim, s, group, s.ok) for group in codes.values()]  # newest code first
    lead = next((b for b in bodies if b.meets), bodies[0])
    return replace(lead, beside=tuple(b for b in bodies if b is not lead))


def _judge_batch(store: Store, claim: Claim, b: BatchCurve) -> Judged:
    for run in store.gpu_runs_with("batch"):
        result, prov = store.gpu("batch", run)
        systems = result["systems"]
        if not all(x in systems for x in (b.system, b.against)):
            continue
        repeats = {x: {int(k): v for k, v in systems[x].get("by_batch_repeats", {}).items()} for x in systems}
        if all(n in repeats.get(x, {}) for x in (b.system, b.against) for n in (b.first, b.last)):
            r1 = repeat_ratios(repeats[b.system][b.first], repeats[b.against][b.first])
            r2 = repeat_ratios(repeats[b.system][b.last], repeats[b.against][b.last])
            row = {"set": run_name(prov), "run": run, "code": str(prov["commit"])[:7], "date": prov["date"]}
            row |= {"ratios": [x - y for x, y in zip(r1, r2)], "repeats": len(r1), "shortest_repeat_s": 0.0}
            row["meets"] = len(r1) >= b.standard.repeats
            return _speed_body(store, claim, b, [row], lambda d: d > 0)
        medians = {x: {int(k): v for k, v in systems[x]["by_batch"].items()} for x in (b.system, b.against)}
        at = {n: medians[b.system][n] / medians[b.against][n] for n in (b.first, b.last) if n in medians[b.system]}
        return _below(
            claim,
            f"the stored batch sweep ({run_name(prov)}, {run}) keeps one median per batch size and no per-repeat "
            "times: no interval can be read from it",
            f"a batch sweep with per-repeat times on a GPU (~{GPU_CHECK_MINUTES} GPU-minutes): "
            "`python -m canlib bench batch --device cuda`",
            ours=", ".join(f"{v:.2f}x at {n}" for n, v in at.items()) + " (medians)",
            files=(run,),
            cost=GPU_RUN[0],
            minutes=GPU_RUN[1],
        )
    return _missing(
        claim, "no stored GPU batch sweep of CAN and Balanced", "python -m canlib bench batch --device cuda"
    )


# trained-model analyses -------------------------------------------------------------------------------------------


def _analysis_missing(store: Store, claim: Claim, names: Sequence[str]) -> Judged | None:
    if not store.judged:
        return _below(
            claim,
            f"scale {store.scale}: its models show the mechanics only, not what training learns",
            f"the analysis of a trained small model: `{experiment_command('small', studies=list(names))}`",
        )
    absent = [n for n in names if not store.has(n)]
    if absent:
        return _missing(
            claim, f"the {', '.join(absent)} analysis is not stored", experiment_command(store.scale, studies=absent)
        )
    return None


def _layers(claim: Claim, rows: list[dict[str, Any]], evidence: str, files: tuple[str, ...], fmt: str) -> Judged:
    values = [r["value"] for r in rows]
    ours = f"{min(values):{fmt}} to {max(values):{fmt}} over {len(rows)} layers"
    return Judged(
        claim,
        outcome([r["verdict"] for r in rows]),
        ours,
        evidence,
        statistics.fmean(values),
        (min(values), max(values)),
        None,
        tuple(rows),
        files=files,
        strength={"models": sorted({r["model"] for r in rows}), "layers": len(rows)},
        meets=True,
    )


MODELS = {"similarity": "Baseline 6/6", "similarity-balanced": "Balanced 12/2"}


def _judge_similarity(store: Store, claim: Claim, s: Similarity) -> Judged:
    why = _analysis_missing(store, claim, s.studies)
    if why:
        return why
    rows = []
    for name in s.studies:
        result, _ = store.analysis(name)
        matrix = result["residual"]
        for i, row in enumerate(matrix[s.pair]):
            value = row[i] - (matrix[s.than][i][i] if s.than else 0.0)
            rows.append(
                {"set": f"{MODELS[name]} layer {i + 1}", "model": MODELS[name], "layer": i + 1, "value": value}
                | {"verdict": HOLDS if s.ok(value) else FAILS}
            )
    what = f"{s.pair} minus {s.than}" if s.than else s.pair
    evidence = (
        f"the seed-1 {' and '.join(MODELS[n] for n in s.studies)} at {store.scale}: the cosine similarity ({what}) "
        "of each decoder layer over the validation split; one model each, so no seed spread: a measurement, read "
        "layer by layer"
    )
    return _layers(claim, rows, evidence, tuple(f"{n}.json" for n in s.studies), "+.2f" if s.than else ".2f")


def _judge_gate(store: Store, claim: Claim, g: GateShare) -> Judged:
    why = _analysis_missing(store, claim, ("attention",))
    if why:
        return why
    study, _ = store.analysis("attention")
    rows = [
        {"set": f"layer {x['layer']}", "model": "CAN", "layer": x["layer"], "value": x["near_ends"]}
        | {"verdict": HOLDS if g.ok(x["near_ends"]) else FAILS}
        for x in gate_shares(study, g.near)
    ]
    evidence = (
        f"the seed-1 CAN at {store.scale}, its gate over every (target position, head) of the test split "
        "(attention.json); one model: a measurement, read layer by layer"
    )
    return _layers(claim, rows, evidence, ("attention.json",), ".0%")


def _final_losses(store: Store, system: str) -> list[float]:
    return [[r for r in log if r.get("valid_loss") is not None][-1]["valid_loss"] for log in store.logs(system)]


def _judge_loss_gap(store: Store, claim: Claim, g: LossGap) -> Judged:
    a, b = _final_losses(store, g.system), _final_losses(store, g.against)
    seeds = {g.system: len(a), g.against: len(b)}
    need = g.standard.seeds
    if min(len(a), len(b)) < 2:
        return _missing(claim, f"scale {store.scale}: fewer than 2 seeds stored", experiment_command(store.scale))
    ci = seed_interval([(1.0, a), (-1.0, b)])
    value = statistics.fmean(a) - statistics.fmean(b)
    meets = store.judged and min(len(a), len(b)) >= need
    state = interval_verdict(ci.low, ci.high, lambda d: d > 0)
    return Judged(
        claim,
        state if meets else INCONCLUSIVE,
        f"{value:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]",
        f"final label-smoothed validation loss at {store.scale}, {len(a)} and {len(b)} seeds, the seed interval",
        value,
        (ci.low, ci.high),
        seeds=seeds,
        strength={"seeds": seeds, "scale": store.scale},
        meets=meets,
        settle="" if meets else f"{need} seeds of each at small: `{experiment_command('small')}`",
    )


def _judge_falling(store: Store, claim: Claim, f: LossFalling) -> Judged:
    rows = []
    for system in f.systems:
        for seed, log in zip(store.seeds(system), store.logs(system)):
            valid = [r for r in log if r.get("valid_loss") is not None]
            if len(valid) >= 2:
                drop = valid[-2]["valid_loss"] - valid[-1]["valid_loss"]
                steps = [valid[-2]["step"], valid[-1]["step"]]
                rows.append({"set": f"{LABELS[system]} seed {seed}", "value": drop, "steps": steps})
                rows[-1]["verdict"] = HOLDS if drop > 0 else FAILS
    if not rows:
        return _missing(claim, f"scale {store.scale}: no stored run with two validations", experiment_command("small"))
    drops = [r["value"] for r in rows]
    seeds = {s: len(store.seeds(s)) for s in f.systems}
    meets = store.judged and min(seeds.values()) >= f.standard.seeds
    return Judged(
        claim,
        outcome([r["verdict"] for r in rows]) if meets else INCONCLUSIVE,
        f"{min(drops):+.3f} to {max(drops):+.3f} over the last {rows[0]['steps'][1] - rows[0]['steps'][0]:,} updates",
        f"the drop of the validation loss between the last two validations of {len(rows)} runs at {store.scale}",
        statistics.fmean(drops),
        (min(drops), max(drops)),
        None,
        tuple(rows),
        seeds=seeds,
        strength={"seeds": seeds, "scale": store.scale},
        meets=meets,
        settle="" if meets else f"3 seeds of each at small: `{experiment_command('small')}`",
    )


def _judge_tasks(store: Store, claim: Claim, t: CrossTask) -> Judged:
    rows, missing = [], []
    need = t.standard.seeds
    for corpus in (store.corpus, *store.spec.directions):
        runs = {s: store.runs(s, corpus) for s in ("can", "balanced")}
        if not store.judged or not all(r is not None and len(r.seeds) >= need for r in runs.values()):
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
                "verdict": j.verdict if j.verdict in (HOLDS, FAILS) else INCONCLUSIVE,
                "sets": _set_rows(j),
            }
        )
    command = experiment_command(
        "small" if not store.judged else store.scale,
        systems=DIRECTION_SYSTEMS,
        seeds=range(1, need + 1),
        corpora=missing or [store.corpus],
    )
    if len(rows) < 2:
        todo = [(s, 1) for _ in missing for s in DIRECTION_SYSTEMS for _ in range(need)]
        why = f"{len(rows)} direction(s) with {need} seeds of CAN and Balanced; the claim needs 2 or more"
        cost, minutes = _minutes(store, todo)
        settle = f"{why}: {cost}: `{command}`"
        return replace(_missing(claim, why, command, sets=tuple(rows)), settle=settle, cost=cost, minutes=minutes)
    ours = "; ".join(f"{r['set']} {r['value']:+.2f}" for r in rows)
    return Judged(
        claim,
        outcome([r["verdict"] for r in rows]),
        ours,
        f"{METRIC}, scale {store.scale}, {len(rows)} directions, each by the verdict rule",
        sets=tuple(rows),
        strength={"directions": len(rows), "seeds": need},
        meets=True,
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


def speed_runs(store: Store, mode: str = "eager") -> list[str]:
    """The GPU runs the speed verdicts read in ``mode``: the runs of the newest code that meet the speed standard
    for every Table 2 system (else the newest code's runs). Table 2's speed column reads the same."""
    rows = _timed_runs(store, "can", "balanced", mode, SPEED)
    if not rows:
        return []
    rows.sort(key=lambda r: r["date"], reverse=True)
    meeting = [r for r in rows if r["meets"]]
    code = (meeting or rows)[0]["code"]
    return [r["run"] for r in (meeting or rows) if r["code"] == code]


def speed_run(store: Store, mode: str = "eager") -> str | None:
    """The newest of :func:`speed_runs` (None where no run timed Balanced and CAN)."""
    runs = speed_runs(store, mode)
    return runs[0] if runs else None


def speed_reading(store: Store, system: str, against: str, mode: str = "eager") -> dict[str, Any] | None:
    """``system``/``against`` over the runs the speed verdicts read (:func:`speed_runs`): the median of the pooled
    per-repeat ratios, its order-statistic interval (None with too few repeats) and the runs. What Table 2's speed
    column shows, by the statistic the speed claims use."""
    runs = set(speed_runs(store, mode))
    rows = [r for r in _timed_runs(store, system, against, mode, SPEED) if r["run"] in runs]
    if not rows:
        return None
    ratios = [x for r in rows for x in r["ratios"]]
    ci = median_interval(ratios)
    return {"median": statistics.median(ratios), "interval": ci[:2] if ci else None, "runs": [r["run"] for r in rows]}
