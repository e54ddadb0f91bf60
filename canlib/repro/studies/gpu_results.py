"""GPU speed and training-throughput measurements, and one GPU-trained ``small-can``'s test translation,
as the chapters and the scorecard read them.

The paper's speed claims are GPU claims (fp16, batch 1, beam 4). No chapter can measure them on the
CPU that builds the book, so the figures come from a GPU run of this project's own scripts, stored
under ``book/results/gpu/<run>/`` with the commit, date, device and the exact command that produced
them. ``canlib ingest`` (:mod:`canlib.repro.ingest`) derives those files from the raw files the scripts wrote (the
figures are computed, never
typed) and keeps a device call's raw files in ``measurements/<run>/``; the loaders below only read what it stored,
each from a results folder ``root`` (default ``book/results``; :class:`canlib.repro.studies.store.Store` passes its
own).
The operator counts of one decoding step (``canlib bench ops``, counted on a CPU) lie beside them in ``cpu/``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from canlib.catalogue import LABELS
from canlib.io import results_dir
from canlib.repro.results.files import load_result
from canlib.repro.results.layout import GPU_FILES, INGEST_COMMAND, OPS_COMMAND
from canlib.repro.studies.verdict import ratio_reading, repeat_ratios

FILES = GPU_FILES  # raw file -> stored kind (canlib ingest converts each)
PARTS = ("encode", "layers", "output", "search")


def gpu_dir(run: str, root: Path | None = None) -> Path:
    """Where the stored results of one GPU run live (``root``: a results folder, default ``book/results``)."""
    return Path(root or results_dir()) / "gpu" / run


# -- loaders --------------------------------------------------------------------------------------


def available_runs(root: Path | None = None) -> list[str]:
    """The stored GPU runs, newest folder name last."""
    folder = Path(root or results_dir()) / "gpu"
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def speed_runs(root: Path | None = None) -> list[str]:
    """The stored GPU runs that hold a speed measurement (``speed.json``), in folder-name order."""
    return [run for run in available_runs(root) if (gpu_dir(run, root) / "speed.json").exists()]


def profile_runs(root: Path | None = None) -> list[str]:
    """The stored GPU runs that hold a ``scripts/gpu_profile.sh`` profile (``profile.json``), in folder-name order."""
    return [run for run in available_runs(root) if (gpu_dir(run, root) / "profile.json").exists()]


def stored_ops(name: str = "ops.json", root: Path | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result, provenance) of a stored operator-count study (``cpu/<name>``): ``result["systems"][system][path]``."""
    path = Path(root or results_dir()) / "cpu" / name
    if not path.exists():
        raise FileNotFoundError(f"{path}: no stored operator counts; run `{OPS_COMMAND}`")
    return load_result(path)


def ops_files(root: Path | None = None) -> list[str]:
    """The stored operator counts (``cpu/ops*.json``), by name."""
    folder = Path(root or results_dir()) / "cpu"
    return sorted(p.name for p in folder.glob("ops*.json")) if folder.is_dir() else []


def counted_code(prov: dict[str, Any]) -> list[str]:
    """The commits whose decoding code an operator count counts: the commit it was counted at and those its
    provenance names as holding the same ``canlib/model`` and ``canlib/decoding`` (``same_code_as``, checked with git
    by the tests)."""
    return [str(prov["commit"]).removesuffix("+dirty"), *prov.get("same_code_as", [])]


def timed_ops(run: str, root: Path | None = None) -> str | None:
    """The stored operator count (``cpu/<name>``) of the code the GPU run ``run`` timed, None where none covers it:
    the count whose :func:`counted_code` holds the run's commit."""
    commit = str(load("speed", run, root)[1]["commit"]).removesuffix("+dirty")
    for name in ops_files(root):
        if commit in counted_code(stored_ops(name, root)[1]):
            return name
    return None


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


def speed_summary(run: str, root: Path | None = None) -> dict[str, Any]:
    """One GPU run's Table 2 speed in a row: device, the commit it timed, date, its repeats, and the ratios by the
    one statistic every page uses (:func:`ratio_text`: the median of the per-repeat ratios with its 95 % interval,
    or its range where the repeats are too few for one), and how many systems' captured decoding returned the
    eager tokens."""
    eager, prov = gpu_speed("eager", run, root)
    graphs, _ = gpu_speed("captured", run, root)
    same = prov["captured_matches_eager"]

    def ratio(rows: dict[str, dict[str, Any]], a: str, b: str) -> str:
        return ratio_text(ratio_stat(rows, a, b)) if a in rows and b in rows else "not timed"

    return {
        "run": run,
        "device": prov["device"],
        "commit": commit_label(prov),
        "date": prov["date"],
        "repeats": int(prov["settings"]["repeats"]),
        "Balanced / Baseline eager": ratio(eager, "balanced", "baseline"),
        "CAN / Balanced eager": ratio(eager, "can", "balanced"),
        "CAN / Balanced graphs": ratio(graphs, "can", "balanced"),
        "captured == eager": f"{sum(map(bool, same.values()))} of {len(same)} systems",
    }


def repeat_speeds(row: dict[str, Any]) -> list[float]:
    """Tokens per second of each timed repeat of one system's row (stored per repeat, or tokens over each repeat's
    seconds)."""
    if row.get("tok_per_s_repeats"):
        return list(row["tok_per_s_repeats"])
    if row.get("seconds") and row.get("tokens"):
        return [row["tokens"] / s for s in row["seconds"]]
    raise ValueError(f"a speed row without per-repeat times ({', '.join(sorted(row))})")


def ratio_stat(rows: dict[str, dict[str, Any]], system: str, against: str) -> dict[str, Any]:
    """``system``/``against`` over the interleaved repeats of one run: the median of the per-repeat ratios, its
    order-statistic 95 % interval (None with fewer than 6 repeats), its range and the number of repeats
    (:func:`canlib.repro.studies.judges.ratio_reading`, the statistic of the speed claims)."""
    return ratio_reading(repeat_ratios(repeat_speeds(rows[system]), repeat_speeds(rows[against])))


def ratio_text(stat: dict[str, Any]) -> str:
    """A ratio as every table shows it: ``1.47x [1.01, 1.52]`` (the median and its 95 % interval) or, with too few
    repeats for an interval, ``1.21x (1.09-1.39, 3 repeats: no interval)``."""
    if stat["interval"]:
        return f"{stat['median']:.2f}x [{stat['interval'][0]:.2f}, {stat['interval'][1]:.2f}]"
    low, high = stat["range"]
    return f"{stat['median']:.2f}x ({low:.2f}-{high:.2f}, {stat['n']} repeats: no interval)"


def ratio_cell(stat: dict[str, Any]) -> str:
    """A ratio in a table cell whose caption explains the brackets: ``1.47 [1.01, 1.52]`` (the median and its 95 %
    interval) or ``1.21 (1.09-1.39)`` (the median and the range of too few repeats for an interval)."""
    if stat["interval"]:
        return f"{stat['median']:.2f} [{stat['interval'][0]:.2f}, {stat['interval'][1]:.2f}]"
    return f"{stat['median']:.2f} ({stat['range'][0]:.2f}-{stat['range'][1]:.2f})"


def load(kind: str, run: str, root: Path | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result, provenance) of one stored file of a GPU run (``speed``, ``breakdown``, ``batch``,
    ``training_4k``...)."""
    if kind not in (*FILES.values(), "profile"):
        raise ValueError(f"kind={kind!r}: choose one of {', '.join(FILES.values())}, profile")
    path = gpu_dir(run, root) / f"{kind}.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no stored GPU result; convert a measurement folder with `{INGEST_COMMAND}`")
    return load_result(path)


def gpu_speed(mode: str, run: str, root: Path | None = None) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Tokens/s of the Table 2 systems on the GPU: {system: {tok_per_s, min, median, max, ratio_to_balanced}}.

    ``mode`` is ``"eager"`` (PyTorch launching every kernel, the paper's regime) or ``"captured"``
    (decoder steps replayed from CUDA graphs).
    """
    if mode not in ("eager", "captured"):
        raise ValueError(f"mode={mode!r}: choose 'eager' or 'captured'")
    result, prov = load("speed", run, root)
    rows = {s: dict(r[mode]) for s, r in result["systems"].items() if mode in r}
    if "balanced" in rows:
        for row in rows.values():
            row["ratio_to_balanced"] = row["tok_per_s"] / rows["balanced"]["tok_per_s"]
    return rows, {
        **prov,
        "mode": mode,
        "dtype": result["dtype"],
        "settings": result["settings"],
        "captured_matches_eager": result["captured_matches_eager"],
    }


def gpu_breakdown(run: str, root: Path | None = None) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Eager per-sentence milliseconds and shares of encoder, decoder layers, output projection and search."""
    result, prov = load("breakdown", run, root)
    return {s: r["breakdown"] for s, r in result["systems"].items() if "breakdown" in r}, {
        **prov,
        "dtype": result["dtype"],
        "settings": result["settings"],
    }


def gpu_batch(run: str, root: Path | None = None) -> tuple[dict[str, dict[int, float]], dict[str, Any]]:
    """Eager tokens/s per batch size (the median of the timed repeats): {system: {batch: tok/s}}."""
    result, prov = load("batch", run, root)
    out = {s: {int(b): v for b, v in r["by_batch"].items()} for s, r in result["systems"].items()}
    return out, {**prov, "dtype": result["dtype"], "settings": result["settings"]}


def gpu_training(kind: str, run: str, root: Path | None = None) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Training throughput (bf16, synthetic or real tokens): {system: {target_tokens_per_sec, mfu, ...}}."""
    if not kind.startswith("training"):
        raise ValueError(f"kind={kind!r}: a training file (training_4k, training_32k, training_small)")
    result, prov = load(kind, run, root)
    return result["runs"], {**prov, **{k: v for k, v in result.items() if k != "runs"}}


def gpu_profile(run: str, root: Path | None = None) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The cases ``scripts/gpu_profile.sh`` profiled in a run: {case: {wall_ms, cpu_ms, gpu_kernel_ms,
    gpu_busy_share, kernel_launches, host_syncs, ...}}, per decoding step (``decode_*``) or per update
    (``train_*``); the provenance also carries the cases that failed (``errors``)."""
    result, prov = load("profile", run, root)
    return result["cases"], {**prov, "errors": result["errors"]}


PROFILE_COLUMNS = {
    "wall_ms": "wall ms / step",
    "cpu_ms": "host CPU ms / step",
    "gpu_kernel_ms": "GPU kernel ms / step",
    "gpu_busy_share": "GPU busy share",
    "kernel_launches": "kernel launches / step",
    "host_syncs": "host syncs / step",
}


def profile_frame(ops: dict[str, Any] | None = None, runs: list[str] | None = None):
    """One row per (profiled run, system) for the decoding cases (beam 4, batch 1, fp16, d=512): wall, host
    CPU and GPU kernel milliseconds per step, the GPU's busy share of the wall time, kernel launches and host
    syncs per step; with ``ops`` (:func:`stored_ops`), the kernel operators a step
    dispatches as counted on the CPU, beside the launches the profiler saw."""
    import pandas as pd

    rows = []
    for run in runs if runs is not None else profile_runs():
        cases, prov = gpu_profile(run)
        for case, row in cases.items():
            if not case.startswith("decode_"):
                continue
            system = row.get("preset", case.removeprefix("decode_"))
            out = {"run": run_label(prov), "system": LABELS.get(system, system)}
            out |= {label: row[key] for key, label in PROFILE_COLUMNS.items()}
            if ops and system in ops["systems"]:
                out["kernel operators / step (counted)"] = ops["systems"][system]["cuda"]["step"]["kernel_operators"]
            rows.append(out)
    return pd.DataFrame(rows).set_index(["run", "system"])


def gpu_translation(run: str | None = None, root: Path | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A small-can trained on the GPU with ``canlib train``: scores recomputed from its hypotheses, examples."""
    if run is None:  # the newest run that translated with a trained small model
        held = [r for r in available_runs(root) if (gpu_dir(r, root) / "translation_small.json").exists()]
        if not held:
            raise FileNotFoundError(
                f"no stored GPU run holds translation_small.json; store one with `{INGEST_COMMAND}`"
            )
        run = held[-1]
    path = gpu_dir(run, root) / "translation_small.json"
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no stored GPU translation; convert a measurement folder with `{INGEST_COMMAND}`"
        )
    return load_result(path)


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
