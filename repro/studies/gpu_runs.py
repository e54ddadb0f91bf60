"""The stored GPU speed runs a speed verdict reads: each run's per-repeat ratios of two systems as a reading, grouped
by the decoder code it timed (runs of one code are pooled, :mod:`repro.studies.verdict` judges them)."""

from __future__ import annotations

from typing import Any

from repro.studies.evidence import SPEED
from repro.studies.store import Store
from repro.studies.verdict import repeat_ratios


def run_name(prov: dict[str, Any]) -> str:
    """A GPU run in a few words: ``NVIDIA H200, commit df024e7``."""
    return f"{prov['device']}, commit {str(prov['commit'])[:7]}"


def run_reading(run: str, prov: dict[str, Any], ratios: list[float], shortest: float, code: str = "") -> dict[str, Any]:
    """One GPU run's per-repeat ratios as a reading, held to the speed standard's per-run part (repeats and their
    length); ``code``: the decoder code it timed (:func:`timed_runs`), default its commit."""
    return {
        "set": run_name(prov),
        "run": run,
        "code": str(prov["commit"])[:7],
        "version": code or str(prov["commit"]).removesuffix("+dirty"),
        "date": str(prov.get("measured_at") or prov["date"]),
        "ratios": ratios,
        "repeats": len(ratios),
        "shortest_repeat_s": shortest,
        "meets": len(ratios) >= SPEED.repeats and shortest >= SPEED.seconds,
    }


def timed_runs(store: Store, system: str, against: str, mode: str) -> list[dict[str, Any]]:
    """Every stored GPU run that timed both systems in ``mode`` with per-repeat figures, as readings."""
    rows = []
    for run in store.gpu_runs_with("speed"):
        timed, prov = store.gpu_speed(mode, run)
        a, b = timed.get(system, {}), timed.get(against, {})
        if a.get("tok_per_s_repeats") and b.get("tok_per_s_repeats"):
            ratios = repeat_ratios(a["tok_per_s_repeats"], b["tok_per_s_repeats"])
            shortest = min(min(a.get("seconds", [0.0])), min(b.get("seconds", [0.0])))
            # the decoder code it timed, as a key: the stored operator count credited with its commit (a count names
            # every commit whose canlib/model and canlib/decoding it counts, checked with git by the tests), else the
            # commit itself; runs with the same key timed the same decoder code and are pooled
            count = store.timed_ops(run)
            code = f"code counted in {count}" if count else str(prov["commit"]).removesuffix("+dirty")
            rows.append(run_reading(run, prov, ratios, shortest, code) | {"mode": mode})
    return rows


def by_code(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The readings of each timed decoder code (``version``), the one that leads first: the newest code with runs
    that meet the per-run standard (those runs only), else the newest code; then the older code, newest first."""
    codes: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["date"], reverse=True):
        codes.setdefault(row["version"], []).append(row)
    groups = [[r for r in group if r["meets"]] or group for group in codes.values()]
    lead = next((g for g in groups if g[0]["meets"]), groups[0])
    return [lead, *(g for g in groups if g is not lead)]
