"""GPU measurements as the chapters show them: a run's labels, a speed ratio by the one statistic of the book, and
the profiled decoding steps.

The paper's speed claims are GPU claims (fp16, batch 1, beam 4). No chapter can measure them on the CPU that builds
the book, so the figures come from a GPU run of this project's own scripts, which
:class:`~repro.studies.store.Store` reads (``gpu/<run>/<kind>.json``); here they are labelled and formatted.
"""

from __future__ import annotations

import re
from typing import Any

from canlib.catalogue import LABELS
from repro.studies.gpu_runs import by_code, timed_runs
from repro.studies.store import Store
from repro.studies.verdict import ratio_reading, repeat_ratios


def commit_label(prov: dict[str, Any]) -> str:
    """The short commit of a stored GPU result, with ``+dirty`` when its environment recorded changed files."""
    dirty = str((prov.get("environment") or {}).get("dirty", "0")).split()[0]
    return str(prov["commit"])[:7] + ("" if dirty in ("0", "") else "+dirty")


def gpu_label(prov: dict[str, Any]) -> str:
    """The GPU of a stored run in one word: ``H100``."""
    match = re.search(r"\b([A-Z]+\d{2,4}[A-Za-z]*)\b", prov["device"].removeprefix("NVIDIA "))
    return match.group(1) if match else prov["device"]


def run_label(prov: dict[str, Any]) -> str:
    """A stored GPU run in a few words for a column or row label: ``H100 e19dd56 2026-11-26``."""
    return f"{gpu_label(prov)} {commit_label(prov)} {prov['date']}"


def repeat_speeds(row: dict[str, Any]) -> list[float]:
    """Tokens per second of each timed repeat of one system's row (stored per repeat, or tokens over each repeat's
    seconds, as the CPU runs store them)."""
    if row.get("tok_per_s_repeats"):
        return list(row["tok_per_s_repeats"])
    if row.get("seconds") and row.get("tokens"):
        return [row["tokens"] / s for s in row["seconds"]]
    raise ValueError(f"a speed row without per-repeat times ({', '.join(sorted(row))})")


def ratio_stat(rows: dict[str, dict[str, Any]], system: str, against: str) -> dict[str, Any]:
    """``system``/``against`` over the interleaved repeats of one run, by the statistic of the speed claims
    (:func:`repro.studies.verdict.ratio_reading`)."""
    return ratio_reading(repeat_ratios(repeat_speeds(rows[system]), repeat_speeds(rows[against])))


def kernels(ops: dict[str, Any], system: str, part: str) -> int | float:
    """Kernel-launching operators of one part (``step``, ``decoder``, ``per_layer``, ``search``, ``output``,
    ``embedding``) of one beam-search step on the GPU's code path, in a stored count (:meth:`Store.ops`)."""
    return ops["systems"][system]["cuda"][part]["kernel_operators"]


PROFILE_COLUMNS = {
    "wall_ms": "wall ms / step",
    "cpu_ms": "host CPU ms / step",
    "gpu_kernel_ms": "GPU kernel ms / step",
    "gpu_busy_share": "GPU busy share",
    "kernel_launches": "kernel launches / step",
    "host_syncs": "host syncs / step",
}


def profile_frame(store: Store, ops: dict[str, Any] | None, runs: list[str]):
    """One row per (profiled run, system) for the decoding cases (beam 4, batch 1, fp16, d=512): the columns of
    :data:`PROFILE_COLUMNS`; with ``ops`` (:meth:`Store.ops`), the kernel operators a step dispatches as counted on
    the CPU, beside the launches the profiler saw."""
    import pandas as pd

    rows = []
    for run in runs:
        cases, prov = store.gpu_profile(run)
        for case, row in cases.items():
            if not case.startswith("decode_"):
                continue
            system = row.get("preset", case.removeprefix("decode_"))
            out = {"run": run_label(prov), "system": LABELS.get(system, system)}
            out |= {label: row[key] for key, label in PROFILE_COLUMNS.items()}
            if ops and system in ops["systems"]:
                out["kernel operators / step (counted)"] = kernels(ops, system, "step")
            rows.append(out)
    return pd.DataFrame(rows).set_index(["run", "system"])


def gpu_setting(prov: dict[str, Any]) -> str:
    """How a GPU figure was measured, in words, for the line under a table."""
    s = prov.get("settings") or {}
    batch = (
        f"batch sizes {', '.join(map(str, s['batches']))}"
        if s.get("study") == "batch" and s.get("batches")
        else f"batch {s.get('batch', 1)}"
    )
    return (
        f"{prov['device']}, {prov.get('dtype') or 'dtype not recorded'}, beam {s.get('beam')}, {batch}, "
        f"forced length {s.get('forced_length')}, {s.get('sentences')} sentences x {s.get('repeats')} repeats, "
        f"d=512 presets with random weights, commit {prov['commit']}, {prov['date']}"
    )


def speed_groups(store: Store, system: str, against: str, mode: str = "eager") -> list[list[dict[str, Any]]]:
    """The stored GPU runs that timed ``system`` and ``against`` in ``mode``, one list per decoder code, the code
    whose runs the verdict reads first (each run's reading: ``set``, ``run``, ``code``, ``date``, ``repeats``...)."""
    rows = timed_runs(store, system, against, mode)
    return by_code(rows) if rows else []


def speed_reading(store: Store, system: str, against: str, mode: str = "eager") -> dict[str, Any] | None:
    """``system``/``against`` over the GPU runs a verdict on that pair reads (the leading decoder code's runs,
    :func:`by_code`), pooled by the statistic the speed claims use
    (:func:`repro.studies.verdict.ratio_reading`), with ``runs``, the runs read; None where none timed both."""
    rows = timed_runs(store, system, against, mode)
    if not rows:
        return None
    lead = by_code(rows)[0]
    return ratio_reading([x for r in lead for x in r["ratios"]]) | {"runs": [r["run"] for r in lead]}
