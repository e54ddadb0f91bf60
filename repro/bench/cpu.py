"""The CPU speed tables the chapters show: timed and stored by :data:`STORE_COMMAND`, read from that stored
measurement, never timed while the book builds.

Speed depends on shapes, not on what the weights learned, so every study times the paper's d=512 presets with random
weights and a forced output length.

**The CPU tables.** The results, depths, ablation and speed chapters show one CPU measurement: all nine systems timed
in one interleaved run, and canlib against CTranslate2 on the same weights (both read by
:mod:`_code.cpu_speed`). Both are stored in ``book/results/cpu/`` by :data:`STORE_COMMAND` with their
provenance: the machine, the commit, the settings, the repeats, the spread of the repeats, the machine's load average
before the run and the CPU time other processes took while it ran. A book built on a busy laptop shows the same tables
as one built on an idle machine. ``CANLIB_LIVE_CPU_SPEED=1`` (:func:`_code.cpu_speed.cpu_measurement`) measures on
this machine instead, once per code version (cached); every table, stored or live, is judged by its noise first, and
a noisy run is shown as noisy, without ratios.

CPU rows are labelled as such: on a CPU at batch 1 decoding is bound by memory bandwidth, not the paper's regime
(fp16 on a GPU, bound by kernel launches); the stored GPU measurements are read by
:class:`repro.studies.store.Store`.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from canlib.catalogue import ALL_SYSTEMS
from canlib.io import results_dir
from repro.bench.settings import BenchSettings
from repro.results.files import provenance, save_result

SPEED_SYSTEMS = ALL_SYSTEMS  # one interleaved run times all nine
STORE_COMMAND = "python -m repro experiment --scale small --studies speed"  # the CPU tables, book/results/cpu/
CPU_FILES = {"speed": "speed.json", "reference": "reference.json"}  # under <results>/cpu/
# reference: canlib and CTranslate2 on the same weights
CPU_SYSTEMS = {"speed": SPEED_SYSTEMS, "reference": ("baseline", "ct2:baseline", "balanced", "ct2:balanced")}
# the stored CPU run: the bench's defaults (beam 4, batch 1, d=512, V=32k, fp32 on the CPU) on one thread, every
# repeat timing every system once, in turn, 20 repeats; the other studies' sweeps and checkpoints left out
CPU_SETTINGS = {
    k: v
    for k, v in asdict(BenchSettings(repeats=20, threads=1)).items()
    if k not in ("systems", "beams", "lengths", "batches", "checkpoints", "progress")
}


def run_bench(study_name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """``repro.bench.run_study`` as {"systems", "meta"}. Its busy-machine warning is kept in
    ``meta["busy_warning"]`` and not raised as a warning, which a chapter would show as stray output."""
    from repro.bench.speed import run_study

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = run_study(study_name, BenchSettings(**{**settings, "progress": False}))
    return {"systems": dict(result.systems), "meta": dict(result.meta)}


def cpu_settings(kind: str) -> dict[str, Any]:
    """The bench settings of the stored CPU run ``kind`` (``speed``: the nine systems; ``reference``: canlib and
    CTranslate2 on Baseline's and Balanced's weights), at the paper's shapes (d=512 presets, V=32k)."""
    if kind not in CPU_FILES:
        raise ValueError(f"kind={kind!r}: choose one of {', '.join(CPU_FILES)}")
    return {"systems": list(CPU_SYSTEMS[kind]), **CPU_SETTINGS}


def _own_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of its children that ended (the bench joins its
    CTranslate2 worker processes before it returns)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _busy_cpu_seconds() -> float | None:
    """CPU seconds every core of the machine has spent busy since boot (/proc/stat; None elsewhere)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and waiting for I/O
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def measure_cpu(kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Time the CPU run ``kind`` on this machine now: ({"systems", "meta"}, its provenance). The provenance holds the
    settings, the load average before and after, and ``other_cores``: the CPU time the rest of the machine took
    while the run timed, in cores (its busy time less this process's and its children's, over the wall time)."""
    import torch

    settings, threads = cpu_settings(kind), torch.get_num_threads()
    busy0, own0, wall0 = _busy_cpu_seconds(), _own_cpu_seconds(), time.perf_counter()
    try:
        result = run_bench("speed", settings)
        busy1, own1, wall = _busy_cpu_seconds(), _own_cpu_seconds(), time.perf_counter() - wall0
        other = max(0.0, ((busy1 - busy0) - (own1 - own0)) / wall) if None not in (busy0, busy1) else None
        prov = provenance(
            "full",
            {"study": "speed", "kind": kind, "settings": settings, "command": STORE_COMMAND},
            "cpu",  # named while the bench's threads are set: the device string counts them
            machine=f"{result['meta'].get('device', 'CPU')}, on a machine of {os.cpu_count()} cores",
            load_average_before=result["meta"].get("load_average"),
            load_average_after=list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            other_cores=other,
            wall_s=wall,
        )
    finally:
        torch.set_num_threads(threads)  # the bench sets its own; a notebook that asked for a live run keeps its own
    return result, prov


def store_all(root: Path | None = None) -> list[Path]:
    """Measure the CPU runs on this machine and store them in ``<root>/cpu/`` (default ``book/results``): what
    :data:`STORE_COMMAND` runs, each line of its report saying what the machine did beside the run. Run it on a
    machine with nothing else running; the stored provenance says whether it was."""
    from canlib.decoding.ctranslate import ctranslate2_installed

    paths = []
    for kind in CPU_FILES:
        if kind == "reference" and not ctranslate2_installed():
            continue
        result, prov = measure_cpu(kind)
        paths.append(save_result(Path(root or results_dir()) / "cpu" / CPU_FILES[kind], result, prov))
        other = prov.get("other_cores")
        load = (prov.get("load_average_before") or [float("nan")])[0]
        print(
            f"{paths[-1]}: stored ({prov['config']['settings']['repeats']} interleaved repeats; load average before "
            f"{load:.2f}; other processes took "
            + (f"{other:.2f} cores while it ran)" if other is not None else "an unknown share of the CPU)")
        )
    return paths
