"""The CPU speed tables the results, speed, depths and ablation chapters show, read from the stored CPU run
(:func:`cpu_measurement`: ``book/results/cpu/``, or a live run on request) by the statistic
every speed number of the book uses (:func:`repro.studies.verdict.ratio_reading`). A run is judged first: a
noisy one (:func:`noise`) shows no ratio and says why. Reading never times anything.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

from _code.gpu_results import ratio_stat
from canlib.catalogue import LABELS
from canlib.io import cache_dir, results_dir
from repro.bench.cpu import CPU_FILES, SPEED_SYSTEMS, STORE_COMMAND, cpu_settings, measure_cpu
from repro.results.files import load_result, save_result
from repro.results.layout import code_version, key

LIVE_ENV = "CANLIB_LIVE_CPU_SPEED"  # 1: the chapters time this machine's CPU instead of reading the stored tables

# a run is noisy where a system's ratio to the reference system has a 95 % interval wider than this share of its
# median, or where other processes took more than OTHER_BOUND cores on average while it ran
SPREAD_BOUND = 0.10
OTHER_BOUND = 0.5


def spread(row: dict[str, Any]) -> dict[str, float]:
    """min / median / max tokens/s over the timed repeats of one system's row."""
    repeats = row.get("tok_per_s_repeats") or row.get("repeats")
    if not (isinstance(repeats, list) and repeats):
        repeats = [row["tokens"] / s for s in row["seconds"]]
    return {"min": min(repeats), "median": statistics.median(repeats), "max": max(repeats)}


def cpu_measurement(
    kind: str = "speed", *, live: bool | None = None, root: Path | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """({"systems", "meta"}, provenance) of the CPU run ``kind``: the stored one (``<root>/cpu/``), or with ``live``
    (default: the ``CANLIB_LIVE_CPU_SPEED`` environment variable) one timed on this machine once per code version and
    cached. Loading never times anything."""
    if live is None:
        live = os.environ.get(LIVE_ENV, "") not in ("", "0")
    if live:
        path = cache_dir() / "studies" / "cpu" / f"{kind}-{key(code_version(), cpu_settings(kind))}.json"
        if not path.is_file():
            save_result(path, *measure_cpu(kind))
        return load_result(path)
    path = Path(root or results_dir()) / "cpu" / CPU_FILES[kind]
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no stored CPU speed measurement; store it with `{STORE_COMMAND}`")
    return load_result(path)


def noise(result: dict[str, Any], prov: dict[str, Any]) -> str | None:
    """Why a CPU run's ratios should not be read (None: they can be): a system whose ratio to Balanced has a 95 %
    interval (:func:`spreads`) wider than :data:`SPREAD_BOUND` of its median, or other processes taking more
    than :data:`OTHER_BOUND` cores on average while it ran (measured from the kernel's counters, not guessed from the
    load average before the run, which the provenance keeps beside it)."""
    reasons = []
    timed = result["systems"]
    against = "balanced" if "balanced" in timed else next(iter(timed))
    widths = spreads(timed, against)
    worst = max(widths, key=widths.get) if widths else None
    if worst is not None and widths[worst] > SPREAD_BOUND:
        reasons.append(
            f"the 95 % interval of {LABELS.get(worst, worst)}'s ratio to {LABELS.get(against, against)} spans "
            f"{widths[worst]:.0%} of its median (bound: {SPREAD_BOUND:.0%})"
        )
    other = prov.get("other_cores")
    if other is not None and other > OTHER_BOUND:
        reasons.append(f"other processes took {other:.2f} cores on average while it ran (bound: {OTHER_BOUND:g})")
    return "; ".join(reasons) or None


def spreads(timed: dict[str, dict[str, Any]], against: str) -> dict[str, float]:
    """The width of the 95 % interval of each system's ratio to ``against`` over the repeats (its range where the
    repeats are too few for one), as a share of the median ratio."""
    out = {}
    for s in timed:
        if s != against:
            stat = ratio_stat(timed, s, against)
            low, high = stat["interval"] or stat["range"]
            out[s] = (high - low) / stat["median"]
    return out


def cpu_table(
    systems: tuple[str, ...] | list[str] = SPEED_SYSTEMS,
    *,
    kind: str = "speed",
    against: str = "balanced",
    live: bool | None = None,
    root: Path | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The CPU run's rows: {system: {tok_per_s (the median repeat), min, median, max, ratio (the median of the
    per-repeat ratios to ``against``), interval (its order-statistic 95 % interval), low, high (the lowest and
    highest per-repeat ratio)}} and the provenance with ``noisy`` (:func:`noise`: None, or why not to read it),
    ``repeats``, ``spread`` (the widest system's) and ``file``."""
    result, prov = cpu_measurement(kind, live=live, root=root)
    timed = result["systems"]
    rows = {}
    for s in systems:
        if s not in timed:
            raise KeyError(f"cpu_table: {s!r} is not one of the timed systems {', '.join(timed)}")
        stat = ratio_stat(timed, s, against)
        rows[s] = {"tok_per_s": timed[s]["tok_per_s"], **spread(timed[s]), "ratio": stat["median"]}
        rows[s] |= {"interval": stat["interval"], "low": stat["range"][0], "high": stat["range"][1]}
    info = {
        "noisy": noise(result, prov),
        "repeats": len(timed[against]["seconds"]),
        "spread": max(spreads(timed, against).values(), default=0.0),
        "file": f"book/results/cpu/{CPU_FILES[kind]}",
        "meta": result["meta"],
    }
    return rows, {**prov, **info}


def noisy_sentence(prov: dict[str, Any], instead: str) -> str:
    """What a page says in place of a noisy CPU run's ratios: why it is noisy, then ``instead``, the page's own
    sentence of what it does without them."""
    return f"The stored CPU run is noisy: {prov['noisy']}. {instead}"


def cpu_provenance(prov: dict[str, Any]):
    """Where a CPU table comes from, as a two-column table for its provenance drop-down: the file and the command that
    stored it, the machine, the commit, the settings, the repeats, the spread and the load."""
    import pandas as pd

    s = prov["config"]["settings"]
    load = prov.get("load_average_before")
    other = prov.get("other_cores")
    rows = {
        "file": prov["file"],
        "stored by": STORE_COMMAND,
        "machine": prov["machine"],
        "commit": str(prov["commit"])[:7],
        "date": str(prov["date"])[:10],
        "settings": f"beam {s['beam']}, batch {s['batch']}, forced length {s['forced_length']}, fp32, random d=512 "
        f"weights, {s['sentences']} sentences a repeat",
        "interleaved repeats": str(prov["repeats"]),
        "widest 95 % interval of a ratio": f"{prov['spread']:.1%} of its median (noisy above {SPREAD_BOUND:.0%})",
        "load average before the run": f"{load[0]:.2f}" if load else "not recorded",
        "other processes while it ran": f"{other:.2f} cores (noisy above {OTHER_BOUND:g})"
        if other is not None
        else "not measured here",
        "verdict on the run": f"noisy: {prov['noisy']}" if prov["noisy"] else "quiet: its ratios are shown",
    }
    return pd.DataFrame({"": rows}).rename_axis("CPU run")
