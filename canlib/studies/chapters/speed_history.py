"""The speed chapter's appendix: how each stored GPU run was measured and what changed between them (the eager
ratio across runs of one GPU model, an eager breakdown that misled, the A/B of the search and cache changes)."""

from __future__ import annotations

import statistics
from typing import Any

from canlib.model.config import LABELS
from canlib.studies import gpu_results as gpu
from canlib.studies.gpu_results import ratio_range, stored_ops

FIRST_H100, H200 = "h100-2026-11-26", "h200-2026-11-26"  # the two runs whose eager breakdowns disagreed
# the operator counts (book/results/cpu/) of the code each stored GPU run timed, where one was counted: the run's
# commit and the counted commit hold the same canlib/model and canlib/decoding (tests/test_speed_history.py checks
# it with git); the other runs timed code that no stored count covers
TIMED_CODE = {"h100-2026-11-26": "ops_before.json", "h100-2026-11-26-2edd3fd": "ops_c9736eb.json"}


def values() -> dict[str, Any]:
    """The numbers the appendix's prose quotes."""
    return {**instability_values(), **episode_values(), **ab_values(), **capture_values()}


def timed_code_frame():
    """One row per stored GPU speed run: its commit, and the kernels per beam-search step (Balanced / CAN) of the
    code it timed where a stored count covers that code (:data:`TIMED_CODE`), beside today's count."""
    import pandas as pd

    today, today_prov = stored_ops()
    rows = []
    for run in gpu.speed_runs():
        prov = gpu.gpu_speed("eager", run)[1]
        counted = "not counted"
        if run in TIMED_CODE:
            ops, ops_prov = stored_ops(TIMED_CODE[run])
            k = [ops["systems"][s]["cuda"]["step"]["kernel_operators"] for s in ("balanced", "can")]
            counted = f"{k[0]} / {k[1]} (counted at {str(ops_prov['commit'])[:7]})"
        rows.append(
            {
                "stored run": gpu.run_label(prov),
                "commit timed": gpu.commit_label(prov),
                "kernels per step, Balanced / CAN": counted,
            }
        )
    k = [today["systems"][s]["cuda"]["step"]["kernel_operators"] for s in ("balanced", "can")]
    rows.append(
        {
            "stored run": "(none: not timed on a GPU yet)",
            "commit timed": str(today_prov["commit"])[:7],
            "kernels per step, Balanced / CAN": f"{k[0]} / {k[1]} (this repository's code)",
        }
    )
    return pd.DataFrame(rows).style.hide(axis="index")


def capture_values() -> dict[str, Any]:
    """Which systems' captured decoding returned the eager tokens in each run (the H200's AAN did not), and
    Balanced / Baseline eagerly and from CUDA graphs over the runs of the GPU model with the most runs."""
    out: dict[str, Any] = {}
    mismatched = {}
    for run in gpu.speed_runs():
        prov = gpu.gpu_speed("eager", run)[1]
        wrong = [LABELS.get(s, s) for s, same in prov["captured_matches_eager"].items() if not same]
        if wrong:
            mismatched[gpu.run_label(prov)] = wrong
    out["capture_mismatch_runs"] = "; ".join(f"{run}: {', '.join(w)}" for run, w in mismatched.items()) or "none"
    out["capture_clean_runs"] = len(gpu.speed_runs()) - len(mismatched)
    by_device: dict[str, list[str]] = {}
    for run in gpu.speed_runs():
        by_device.setdefault(gpu.gpu_speed("eager", run)[1]["device"], []).append(run)
    runs = max(by_device.values(), key=len)
    ratios = {mode: [] for mode in ("eager", "captured")}
    for run in runs:
        for mode in ratios:
            rows = gpu.gpu_speed(mode, run)[0]
            ratios[mode].append(rows["balanced"]["tok_per_s"] / rows["baseline"]["tok_per_s"])
    out |= {
        "baseline_eager_min": min(ratios["eager"]),
        "baseline_eager_max": max(ratios["eager"]),
        "baseline_graphs_min": min(ratios["captured"]),
        "baseline_graphs_max": max(ratios["captured"]),
    }
    return out


def instability_values() -> dict[str, Any]:
    """The eager CAN/Balanced ratio and Balanced's eager and graph tok/s over the stored runs of the GPU model with
    the most runs: how far eager tok/s moved between runs against how far graph tok/s did."""
    by_device: dict[str, list[str]] = {}
    for run in gpu.speed_runs():
        by_device.setdefault(gpu.gpu_speed("eager", run)[1]["device"], []).append(run)
    device, runs = max(by_device.items(), key=lambda item: len(item[1]))
    eager = [gpu.gpu_speed("eager", run)[0] for run in runs]
    graphs = [gpu.gpu_speed("captured", run)[0] for run in runs]
    ratios = [ratio_range(rows, "can", "balanced") for rows in eager]
    bal_e = [rows["balanced"]["tok_per_s"] for rows in eager]
    bal_g = [rows["balanced"]["tok_per_s"] for rows in graphs]
    return {
        "same_gpu": device.removeprefix("NVIDIA "),
        "same_gpu_runs": len(runs),
        "same_gpu_ratio_min": min(r[0] for r in ratios),
        "same_gpu_ratio_max": max(r[0] for r in ratios),
        "same_gpu_repeats_min": min(r[1] for r in ratios),
        "same_gpu_repeats_max": max(r[2] for r in ratios),
        "eager_spread": max(bal_e) / min(bal_e),
        "graphs_spread": max(bal_g) / min(bal_g),
        "balanced_eager_min": min(bal_e),
        "balanced_eager_max": max(bal_e),
        "balanced_graphs_min": min(bal_g),
        "balanced_graphs_max": max(bal_g),
    }


def episode_values() -> dict[str, Any]:
    """The first H100 run's eager breakdown against the H200's: CAN's layers measured no faster on the H100, though
    the kernel counts of the code both ran (``cpu/ops_before.json``) make them cheaper."""
    before, before_prov = stored_ops("ops_before.json")
    k = {s: before["systems"][s]["cuda"] for s in ("balanced", "can")}
    h200, _ = gpu.gpu_breakdown(H200)
    h100, h100_prov = gpu.gpu_breakdown(FIRST_H100)
    out = {
        "before_commit": str(before_prov["commit"])[:7],
        "count_layers": k["balanced"]["per_layer"]["kernel_operators"] / k["can"]["per_layer"]["kernel_operators"],
        "count_step": k["balanced"]["step"]["kernel_operators"] / k["can"]["step"]["kernel_operators"],
        "before_step_balanced": k["balanced"]["step"]["kernel_operators"],
        "before_step_can": k["can"]["step"]["kernel_operators"],
        "h200_layers": h200["balanced"]["layers_ms"] / h200["can"]["layers_ms"],
        "h100_layers": h100["balanced"]["layers_ms"] / h100["can"]["layers_ms"],
        "h100_repeats": h100_prov["settings"]["repeats"],
        "h100_commit": str(h100_prov["commit"])[:7],
    }
    for key, run in (("h100", FIRST_H100), ("h200", H200)):
        eager, _ = gpu.gpu_speed("eager", run)
        out[f"{key}_eager"] = eager["can"]["tok_per_s"] / eager["balanced"]["tok_per_s"]
    return out


def ab_values() -> dict[str, Any]:
    """The stored A/B (``scripts/gpu_bench.py`` alternately at two commits in one device call): CUDA-graph tok/s
    before and after (medians over each side's runs), the gains, and how far eager tok/s moved within one side."""
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
        runs = ab[label]["runs"]
        for system in ("baseline", "balanced", "can"):
            out[f"ab_{label}_{system}"] = statistics.median(r["tok_per_s"][system]["captured"] for r in runs)
        ratios = [r["tok_per_s"]["can"]["captured"] / r["tok_per_s"]["balanced"]["captured"] for r in runs]
        eager = [r["tok_per_s"]["balanced"]["eager"] for r in runs]
        out |= {
            f"ab_{label}_ratio_min": min(ratios),
            f"ab_{label}_ratio_max": max(ratios),
            f"ab_{label}_eager_spread": max(eager) / min(eager),
        }
    for system in ("baseline", "balanced", "can"):
        out[f"ab_gain_{system}"] = out[f"ab_after_{system}"] / out[f"ab_before_{system}"]
    return out


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
