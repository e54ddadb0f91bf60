"""What the GPU scripts measure, written where it is measured in the one format the registry and the book read:
``{"result": ..., "provenance": ...}`` (:func:`repro.results.files.save_result`), every figure computed from the
timed repeats on the device. ``python -m repro ingest --from-device`` then only checks and copies the files.

The stored kinds (``book/results/gpu/<run>/<kind>.json``): ``speed`` (``scripts/gpu_bench.py``), ``breakdown`` and
``batch`` (``python -m repro bench breakdown|batch --store``), ``profile`` (``scripts/gpu_profile.py``) and
``training_*`` (``scripts/gpu_smoke_train.py --result``). Torch, NumPy and the standard library only: the GPU machine
runs this.
"""

from __future__ import annotations

import statistics
import subprocess
from pathlib import Path
from typing import Any

from canlib.io import CHECKOUT_DIR
from repro.results.files import save_result

# the figures of a profiled case that are stored (its raw case file keeps everything else)
PROFILE_FIGURES = (
    "per",
    "wall_ms",
    "cpu_ms",
    "gpu_kernel_ms",
    "gpu_busy_share",
    "kernel_launches",
    "host_syncs",
    "local_scalar_dense",
    "preset",
    "beam",
    "batch",
    "forced_length",
    "dtype",
    "tokens",
    "target_tokens",
    "precision",
    "target_tokens_per_sec",
)


def repeat_figures(seconds: list[float], tokens: int) -> dict[str, Any]:
    """Tokens/s of each timed repeat and their min / median / max; ``tok_per_s`` is tokens over the median seconds."""
    per_repeat = [tokens / s for s in seconds]
    return {
        "tok_per_s": tokens / statistics.median(seconds),
        "tok_per_s_repeats": per_repeat,
        "min": min(per_repeat),
        "median": statistics.median(per_repeat),
        "max": max(per_repeat),
        "seconds": list(seconds),
        "tokens": tokens,
    }


def work_tree(repo: Path = CHECKOUT_DIR) -> dict[str, str]:
    """The measured checkout's commit (its hash alone) and ``dirty``: ``N changed files`` (``git status``)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
        status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "dirty": "unknown"}
    changed = sum(1 for line in status.stdout.splitlines() if line.strip())
    return {"commit": head.stdout.strip(), "dirty": f"{changed} changed files"}


def gpu_provenance(
    where: dict[str, Any], *, scale: str, command: str, settings: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """A GPU result's provenance: ``where`` is :func:`canlib.io.origin`'s record (date, device, torch, python); the
    commit is the checkout's hash, its changed files under ``environment`` (what names a run ``-dirty``)."""
    tree = work_tree()
    config = {"command": command, **({"settings": settings} if settings is not None else {})}
    return {
        "commit": tree["commit"],
        "date": where["date"][:10],
        "device": where["device"],
        "scale": scale,
        "config": config,
        "torch": where.get("torch"),
        "python": where.get("python"),
        "measured_at": where["date"],
        "environment": {"dirty": tree["dirty"]},
        "source": "measured on the device by the command in config",
        **extra,
    }


def speed_result(systems: dict[str, dict], meta: dict[str, Any]) -> dict[str, Any]:
    """``scripts/gpu_bench.py``'s timings as stored: per system and mode (``eager``, ``captured``, and their
    ``_fused``/``_compiled`` variants), the repeats' tokens/s and spread; a repeat translates the sources
    ``settings["passes"][mode]`` times over, every sentence forced to the same length."""
    settings = meta["settings"]
    per_pass = settings["sentences"] * settings["forced_length"]
    stored: dict[str, dict] = {}
    for name, row in systems.items():
        stored[name] = {}
        for key, seconds in row.items():
            if key.endswith("_seconds"):
                mode = key.removesuffix("_seconds")
                stored[name][mode] = repeat_figures(seconds, per_pass * settings.get("passes", {}).get(mode, 1))
    checks = ("captured_matches_eager", "fused_matches_eager", "compiled_matches_eager", "goals", "ratios", "sources")
    return {
        "systems": stored,
        "dtype": meta["dtype"],
        "settings": settings,
        "errors": meta.get("errors", {}),
        **{k: meta[k] for k in checks if k in meta},
    }


def save_bench(path: str | Path, systems: dict[str, dict], meta: dict[str, Any]) -> Path:
    """Store a ``python -m repro bench`` study run on this machine at ``path`` (``--store``): its rows with the
    spread of their timed repeats, its provenance from its ``meta`` (date, device, torch, command, settings)."""
    rows = {}
    for name, row in systems.items():
        rows[name] = dict(row)
        if "seconds" in row:
            figures = repeat_figures(row["seconds"], row["tokens"])
            rows[name].update({k: v for k, v in figures.items() if k != "tok_per_s"})
    result = {
        "systems": rows,
        "dtype": meta.get("dtype"),
        "settings": meta["settings"],
        "load_average": meta.get("load_average"),
    }
    scale = meta["settings"].get("scale", "full")
    prov = gpu_provenance(meta, scale=scale, command=meta.get("command", ""), settings=meta["settings"])
    return save_result(path, result, prov)


def profile_result(summary: dict[str, Any]) -> dict[str, Any]:
    """``scripts/gpu_profile.py``'s cases as stored: each case's figures and five top kernels, the failed cases'
    errors apart."""
    cases, errors = {}, {}
    for case, row in summary["cases"].items():
        if "error" in row:
            errors[case] = row["error"]
            continue
        cases[case] = {k: row[k] for k in PROFILE_FIGURES if k in row}
        cases[case]["top_kernels"] = row.get("top_kernels", [])[:5]
    sdpa = summary.get("sdpa_backends")
    if isinstance(sdpa, dict) and "error" in sdpa:
        errors["sdpa_backends"] = sdpa["error"]
    return {"cases": cases, "errors": errors, "sdpa_backends": sdpa, "seconds": summary.get("seconds")}
