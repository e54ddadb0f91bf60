"""The speed chapter's appendix: the stored GPU runs side by side, each with the code it timed (its commit, and the
kernel count of that code where a stored count covers it: :func:`canlib.repro.studies.gpu_results.timed_ops`), how far
the
runs of one GPU model lie apart eagerly and from CUDA graphs, whether captured decoding returned the eager tokens, and
the one comparison of two commits made on one warm GPU. Every ratio is the median of the per-repeat ratios; every
number is read from the stored measurements, which carry their own commits and devices."""

from __future__ import annotations

import statistics
from typing import Any

from canlib.catalogue import LABELS
from canlib.repro.studies import gpu_results as gpu
from canlib.repro.studies.gpu_results import ratio_stat, stored_ops, timed_ops


def values() -> dict[str, Any]:
    """The numbers the appendix's prose quotes."""
    return {**instability_values(), **ab_values(), **capture_values()}


def timed_code_frame():
    """One row per stored GPU speed run: its commit, and the kernels per beam-search step (Balanced / CAN) of the
    code it timed where a stored count covers that code (:func:`timed_ops`), beside the count of today's code."""
    import pandas as pd

    _, today_prov = stored_ops()
    rows = []
    for run in gpu.speed_runs():
        prov = gpu.gpu_speed("eager", run)[1]
        name = timed_ops(run)
        counted = "not counted"
        if name:
            ops, ops_prov = stored_ops(name)
            k = [ops["systems"][s]["cuda"]["step"]["kernel_operators"] for s in ("balanced", "can")]
            counted = f"{k[0]} / {k[1]} ({name})"
        rows.append(
            {
                "stored run": gpu.run_label(prov),
                "commit timed": gpu.commit_label(prov),
                "kernels per step, Balanced / CAN": counted,
                "today's code": "yes" if name == "ops.json" else "no",
            }
        )
    frame = pd.DataFrame(rows)
    frame.attrs["today"] = str(today_prov["commit"])[:7]
    return frame.style.hide(axis="index")


def _by_device() -> dict[str, list[str]]:
    by_device: dict[str, list[str]] = {}
    for run in gpu.speed_runs():
        by_device.setdefault(gpu.gpu_speed("eager", run)[1]["device"].removeprefix("NVIDIA "), []).append(run)
    return by_device


def spread_frame():
    """Per GPU model, over its stored runs: the range of the run medians of CAN/Balanced and Balanced/Baseline (the
    median of each run's per-repeat ratios), eagerly and from CUDA graphs, and how far apart Balanced's own tokens per
    second lie (the fastest run's over the slowest's)."""
    import pandas as pd

    rows = {}
    for device, runs in _by_device().items():
        row: dict[str, Any] = {"runs": len(runs)}
        for mode, label in (("eager", "eager"), ("captured", "graphs")):
            speeds = [gpu.gpu_speed(mode, run)[0] for run in runs]
            for a, b in (("can", "balanced"), ("balanced", "baseline")):
                medians = [ratio_stat(rows_, a, b)["median"] for rows_ in speeds]
                row[f"{LABELS[a]} / {LABELS[b]}, {label}"] = f"{min(medians):.2f}-{max(medians):.2f}"
            bal = [rows_["balanced"]["tok_per_s"] for rows_ in speeds]
            row[f"Balanced tok/s fastest / slowest, {label}"] = f"{max(bal) / min(bal):.2f}"
        rows[device] = row
    frame = pd.DataFrame(rows).T
    frame.index.name = "GPU"
    return frame


def capture_values() -> dict[str, Any]:
    """Which systems' captured decoding returned the eager tokens in each run."""
    mismatched = {}
    for run in gpu.speed_runs():
        prov = gpu.gpu_speed("eager", run)[1]
        wrong = [LABELS.get(s, s) for s, same in prov["captured_matches_eager"].items() if not same]
        if wrong:
            mismatched[gpu.run_label(prov)] = wrong
    return {
        "capture_mismatch_runs": "; ".join(f"{run}: {', '.join(w)}" for run, w in mismatched.items()) or "none",
        "capture_clean_runs": len(gpu.speed_runs()) - len(mismatched),
    }


def instability_values() -> dict[str, Any]:
    """Over the stored runs of the GPU model with the most runs: how many, and how much further apart Balanced's eager
    tokens per second lie than its graph tokens per second."""
    device, runs = max(_by_device().items(), key=lambda item: len(item[1]))
    spreads = {}
    for mode in ("eager", "captured"):
        bal = [gpu.gpu_speed(mode, run)[0]["balanced"]["tok_per_s"] for run in runs]
        spreads[mode] = max(bal) / min(bal)
    return {
        "same_gpu": device,
        "same_gpu_runs": len(runs),
        "eager_spread": spreads["eager"],
        "graphs_spread": spreads["captured"],
        "spread_word": "further" if spreads["eager"] > spreads["captured"] else "no further",
    }


def ab_values() -> dict[str, Any]:
    """The stored A/B (``scripts/gpu_bench.py`` alternately at two commits in one device call): its device, commits,
    runs a side, whether captured decoding returned the eager tokens, and how far eager tok/s moved within a side."""
    run = gpu.ab_runs()[-1]
    ab, prov = gpu.gpu_ab(run)
    out: dict[str, Any] = {
        "ab_device": prov["device"].removeprefix("NVIDIA "),
        "ab_before": ab["before"]["commit"][:7],
        "ab_after": ab["after"]["commit"][:7],
        "ab_runs": len(ab["before"]["runs"]),
        "ab_same_tokens": "yes, for every system in every run"
        if all(all(r["captured_matches_eager"].values()) for side in ab.values() for r in side["runs"])
        else "no, not in every run",
    }
    for label in ("before", "after"):
        eager = [r["tok_per_s"]["balanced"]["eager"] for r in ab[label]["runs"]]
        out[f"ab_{label}_eager_spread"] = max(eager) / min(eager)
    return out


def ab_frame():
    """The stored A/B as a table: per system, the graph tokens per second before and after (the median over each
    side's runs) and the gain, and CAN/Balanced from graphs run by run."""
    import pandas as pd

    ab, _ = gpu.gpu_ab(gpu.ab_runs()[-1])
    rows = {}
    for system in ("baseline", "balanced", "can"):
        before, after = (
            statistics.median(r["tok_per_s"][system]["captured"] for r in ab[k]["runs"]) for k in ("before", "after")
        )
        rows[LABELS[system]] = {
            "before, graphs tok/s": before,
            "after, graphs tok/s": after,
            "after / before": after / before,
        }
    frame = pd.DataFrame(rows).T
    for label in ("before", "after"):
        ratios = [r["tok_per_s"]["can"]["captured"] / r["tok_per_s"]["balanced"]["captured"] for r in ab[label]["runs"]]
        frame.attrs[label] = ratios
    frame.index.name = "graphs"
    return frame.round(2)


def ab_ratio_frame():
    """CAN/Balanced from CUDA graphs in each run of the A/B, before and after (one run's tokens per second each: an
    A/B run kept no per-repeat times)."""
    import pandas as pd

    ab, _ = gpu.gpu_ab(gpu.ab_runs()[-1])
    rows = {}
    for label in ("before", "after"):
        for k, r in enumerate(ab[label]["runs"], 1):
            rows[f"{label} ({ab[label]['commit'][:7]}), run {k}"] = {
                "CAN / Balanced, graphs": r["tok_per_s"]["can"]["captured"] / r["tok_per_s"]["balanced"]["captured"],
                "Balanced eager tok/s": r["tok_per_s"]["balanced"]["eager"],
            }
    return pd.DataFrame(rows).T.round(3)


def runs_frame():
    """Every stored GPU run's Table 2 speeds: one row per (run, system), eager and graph tok/s (median, min, max)."""
    import pandas as pd

    rows = []
    for run in gpu.speed_runs():
        for mode in ("eager", "captured"):
            speeds, prov = gpu.gpu_speed(mode, run)
            for system, r in speeds.items():
                rows.append(
                    {
                        "run": gpu.run_label(prov),
                        "system": LABELS.get(system, system),
                        "mode": "graphs" if mode == "captured" else mode,
                        "median": r["tok_per_s"],
                        "min": r["min"],
                        "max": r["max"],
                    }
                )
    frame = pd.DataFrame(rows).pivot_table(index=["run", "system"], columns="mode", values=["min", "median", "max"])
    frame = frame.swaplevel(axis=1)
    return frame[[(mode, stat) for mode in ("eager", "graphs") for stat in ("min", "median", "max")]]
