"""The speed chapter as a lesson: what bounds one decoding step at batch 1 on a GPU (the weights it must read
against the kernels it launches one after another), the kernels each system launches per step (counted on the
CPU, ``book/results/cpu/ops.json``), where a step's time goes (the stored ``scripts/gpu_profile.sh`` profile and
the CUDA-graph breakdown) and what the stored GPU runs show, beside the paper's Table 2.

Every number comes from a stored file, read by code; the one constant that is not measured here is the H100's
memory bandwidth, from NVIDIA's data sheet. Every verdict is the claims registry's (:mod:`canlib.studies.claims`).
"""

from __future__ import annotations

from typing import Any

from canlib.analysis.probes import H100_BANDWIDTH, bytes_per_decode_step
from canlib.model.config import LABELS, preset
from canlib.model.seq2seq import Seq2Seq
from canlib.studies import gpu_results as gpu
from canlib.studies import paper
from canlib.studies.claims import BY_ID, judged, marks
from canlib.studies.gpu_results import ratio_range
from canlib.studies.store import Store

FP16 = 2  # bytes per weight in half precision, the paper's regime
PARTS = ("encode", "layers", "output", "search")
# the operator counts of the code the stored GPU runs measured (the last run that profiled, broke down and benched);
# book/results/cpu/ops.json counts today's code
MEASURED_OPS = "ops_c9736eb.json"
EARLIER_OPS = "ops_before.json"  # the counts of the code the first stored H100 run timed, before the later cuts
CLAIMS = (
    "can-faster",
    "can-speed-1.28x",
    "balanced-speed-1.90x",
    "can-faster-than-san",
    "can-faster-than-aan",
    "batch-gain-shrinks",
)
SEARCH_KERNELS = 5  # exercise 3: the search's bookkeeping fused into this many kernels


def latest_run(store: Store, kind: str, need: str | None = None) -> str:
    """The stored GPU run measured last (by its file's ``measured_at``, else its date) that holds ``kind``
    (``speed``, ``breakdown``, ``profile``), and whose result holds the key ``need`` for some system when given."""

    def has(run: str) -> bool:
        if need is None:
            return True
        result, _ = store.gpu(kind, run)
        return any(need in row for row in result["systems"].values())

    runs = [run for run in store.gpu_runs_with(kind) if has(run)]
    if not runs:
        raise FileNotFoundError(f"no stored GPU run holds {kind}.json" + (f" with {need}" if need else ""))

    def measured(run: str) -> str:
        prov = store.gpu(kind, run)[1]
        return str(prov.get("measured_at") or prov["date"])

    return max(runs, key=measured)


def weights_mb(system: str) -> float:
    """Megabytes of fp16 weights one decoding step of ``system`` reads (decoder layers without the source-side
    projections, and the tied output embedding), counted from the model at the paper's d=512, V=32k."""
    return bytes_per_decode_step(Seq2Seq(preset(system)), bytes_per_weight=FP16)["total"] / 1e6


def kernels(ops: dict[str, Any], system: str, part: str) -> int | float:
    """Kernel-launching operators of one part (``step``, ``decoder``, ``per_layer``, ``search``, ``output``,
    ``embedding``) of one beam-search step on the GPU's code path."""
    return ops["systems"][system]["cuda"][part]["kernel_operators"]


def values(store: Store) -> dict[str, Any]:
    """The numbers the chapter's prose quotes; see the module docstring."""
    t2 = paper.table2("en-de")
    ops, ops_prov = store.ops()
    measured, measured_prov = store.ops(MEASURED_OPS)
    out: dict[str, Any] = {
        "paper_balanced": t2["Balanced"].speed,
        "paper_can": t2["CAN"].speed,
        "paper_can_ratio": t2["CAN"].speed / t2["Balanced"].speed,
        "paper_san_pct": 100 * (t2["SAN"].speed / t2["Balanced"].speed - 1),
        "bandwidth_tbs": H100_BANDWIDTH / 1e12,
        "ops_commit": str(ops_prov["commit"])[:7],
        "measured_ops_commit": str(measured_prov["commit"])[:7],
        "balanced_bar": BY_ID["balanced-speed-1.90x"].evidence.ok.bound,
    }
    for system in ("balanced", "can"):
        out[f"measured_{system}_kernels_step"] = kernels(measured, system, "step")
    for system in ("balanced", "can"):
        mb = weights_mb(system)
        out |= {f"{system}_weights_mb": mb, f"{system}_floor_us": mb * 1e12 / H100_BANDWIDTH}
        for part in ("step", "decoder", "per_layer", "search", "output", "embedding"):
            out[f"{system}_kernels_{part}"] = kernels(ops, system, part)
    out["kernel_ratio_layer"] = out["can_kernels_per_layer"] / out["balanced_kernels_per_layer"]
    out["kernel_ratio_step"] = out["balanced_kernels_step"] / out["can_kernels_step"]
    out["common_kernels"] = out["balanced_kernels_step"] - out["balanced_kernels_decoder"]
    for system in ("balanced", "can"):  # exercise 3: the search's bookkeeping cut to SEARCH_KERNELS kernels
        out[f"search5_{system}"] = out[f"{system}_kernels_step"] - out[f"{system}_kernels_search"] + SEARCH_KERNELS
    out["search5_ceiling"] = out["search5_balanced"] / out["search5_can"]
    out["san_kernels_per_layer"] = kernels(ops, "san", "per_layer")
    out["san_kernels_step"] = kernels(ops, "san", "step")
    for system in ("san", "can"):  # the code the stored runs timed, which the SAN paragraph sets beside them
        out[f"measured_{system}_kernels_per_layer"] = kernels(measured, system, "per_layer")
    out["measured_san_kernels_step"] = kernels(measured, "san", "step")
    out["measured_ceiling"] = out["measured_balanced_kernels_step"] / out["measured_can_kernels_step"]
    earlier, _ = store.ops(EARLIER_OPS)
    out["earlier_ceiling"] = kernels(earlier, "balanced", "step") / kernels(earlier, "can", "step")
    out |= _profile_values(store) | _graph_values(store, measured) | _runs_values(store) | marks(store, CLAIMS)
    for system in ("balanced", "can"):  # per kernel of the code the runs measured, not of today's
        out[f"graph_{system}_us_per_kernel"] = out[f"graph_step_us_{system}"] / out[f"measured_{system}_kernels_step"]
        out[f"graph_{system}_over_floor"] = out[f"graph_step_us_{system}"] / out[f"{system}_floor_us"]
        out[f"eager_{system}_over_floor"] = out[f"eager_step_us_{system}"] / out[f"{system}_floor_us"]
    return out


def _profile_values(store: Store) -> dict[str, Any]:
    """One eager step under ``torch.profiler`` in the last profiled run: wall, host and kernel time, busy share."""
    run = latest_run(store, "profile")
    cases, prov = store.gpu_profile(run)
    out: dict[str, Any] = {"profile_run": gpu.run_label(prov), "profile_device": prov["device"]}
    for system in ("balanced", "can"):
        case = cases[f"decode_{system}"]
        out |= {
            f"profile_{system}_wall_us": 1000 * case["wall_ms"],
            f"profile_{system}_cpu_us": 1000 * case["cpu_ms"],
            f"profile_{system}_kernel_us": 1000 * case["gpu_kernel_ms"],
            f"profile_{system}_busy": case["gpu_busy_share"],
            f"profile_{system}_launches": case["kernel_launches"],
            f"profile_{system}_us_per_launch": 1000 * case["cpu_ms"] / case["kernel_launches"],
        }
    out["profile_cpu_ratio"] = out["profile_balanced_cpu_us"] / out["profile_can_cpu_us"]
    out["profile_wall_ratio"] = out["profile_balanced_wall_us"] / out["profile_can_wall_us"]
    out["profile_launch_ratio"] = out["profile_balanced_launches"] / out["profile_can_launches"]
    return out


def _graph_values(store: Store, ops: dict[str, Any]) -> dict[str, Any]:
    """A step replayed from CUDA graphs in the last run that broke it down: microseconds per generated token of
    each part (the breakdown is per sentence of ``forced_length`` tokens), the part common to both systems, and
    the CAN/Balanced ratio that the common part leaves at most; ``ops`` counts the code that run measured."""
    run = latest_run(store, "breakdown", need="breakdown_graphs")
    result, prov = store.gpu("breakdown", run)
    per = result["settings"]["forced_length"]
    out: dict[str, Any] = {"breakdown_run": gpu.run_label(prov)}
    for system in ("balanced", "can"):
        parts = result["systems"][system]["breakdown_graphs"]
        for part in PARTS:
            out[f"graph_{system}_{part}_us"] = 1000 * parts[f"{part}_ms"] / per
        out[f"graph_{system}_layer_kernel_us"] = out[f"graph_{system}_layers_us"] / kernels(ops, system, "decoder")
    common = sum(out[f"graph_balanced_{part}_us"] for part in ("encode", "output", "search"))
    out["graph_common_us"] = common
    out["graph_layer_ratio"] = out["graph_balanced_layers_us"] / out["graph_can_layers_us"]
    out["graph_ceiling"] = (common + out["graph_balanced_layers_us"]) / (common + out["graph_can_layers_us"])
    return out


def run_rows(store: Store) -> list[dict[str, Any]]:
    """One row per stored GPU speed run (its folder and its label: GPU, commit, date): eager CAN/Balanced (median and
    the interleaved repeats' range) with that run's verdict of "CAN decodes faster than Balanced" as the claims
    registry reads it (:attr:`canlib.studies.claims.Judged.sets`), SAN/Balanced and CAN/Balanced from CUDA graphs
    (medians of the per-repeat ratios); ``chosen``: the run the registry's speed verdicts read."""
    faster = judged(store)["can-faster"]
    by_run = {row["run"]: row for body in (faster, *faster.beside) for row in body.sets}
    read = set(faster.files)
    rows = []
    for run in store.gpu_runs_with("speed"):
        eager, prov = store.gpu_speed("eager", run)
        graphs, _ = store.gpu_speed("captured", run)
        claim = by_run.get(run, {})
        rows.append(
            {
                "run": run,
                "stored run": gpu.run_label(prov),
                "GPU": prov["device"].removeprefix("NVIDIA "),
                "CAN / Balanced eager": ratio_range(eager, "can", "balanced")[0],
                "repeats from": ratio_range(eager, "can", "balanced")[1],
                "repeats to": ratio_range(eager, "can", "balanced")[2],
                "this run: CAN faster (> 1x)?": claim.get("verdict", "not timed"),
                "SAN / Balanced eager": ratio_range(eager, "san", "balanced")[0],
                "CAN / Balanced graphs": ratio_range(graphs, "can", "balanced")[0],
                "chosen": run in read,
            }
        )
    return rows


def _runs_values(store: Store) -> dict[str, Any]:
    rows = run_rows(store)
    eager = [r["CAN / Balanced eager"] for r in rows]
    graphs = [r["CAN / Balanced graphs"] for r in rows]
    san = [r["SAN / Balanced eager"] for r in rows]
    devices = [r["GPU"] for r in rows]
    latest = latest_run(store, "speed")
    graph_rows, prov = store.gpu_speed("captured", latest)
    eager_rows, _ = store.gpu_speed("eager", latest)
    settings = [store.gpu_speed("eager", run)[1]["settings"] for run in store.gpu_runs_with("speed")]
    chosen = next(r for r in rows if r["chosen"])
    return {
        "sentences_min": min(x["sentences"] for x in settings),
        "sentences_max": max(x["sentences"] for x in settings),
        "repeats_max": max(x["repeats"] for x in settings),
        **{f"graph_step_us_{s}": 1e6 / graph_rows[s]["tok_per_s"] for s in ("balanced", "can")},
        **{f"eager_step_us_{s}": 1e6 / eager_rows[s]["tok_per_s"] for s in ("balanced", "can")},
        "latest_eager_ratio": eager_rows["can"]["tok_per_s"] / eager_rows["balanced"]["tok_per_s"],
        "latest_graphs_ratio": graph_rows["can"]["tok_per_s"] / graph_rows["balanced"]["tok_per_s"],
        "runs": len(rows),
        "runs_h100": sum("H100" in d for d in devices),
        "runs_h200": sum("H200" in d for d in devices),
        "eager_min": min(eager),
        "eager_max": max(eager),
        "graphs_min": min(graphs),
        "graphs_max": max(graphs),
        "eager_max_run": max(rows, key=lambda r: r["CAN / Balanced eager"])["stored run"],
        "san_min": min(san),
        "san_max": max(san),
        "san_beats_can": sum(r["SAN / Balanced eager"] > r["CAN / Balanced eager"] for r in rows),
        "can_faster_runs_held": sum(r["this run: CAN faster (> 1x)?"] == "holds" for r in rows),
        "chosen_run": chosen["stored run"],
        "chosen_ratio": chosen["CAN / Balanced eager"],
        "chosen_low": chosen["repeats from"],
        "chosen_high": chosen["repeats to"],
        "latest_speed_run": gpu.run_label(prov),
        "latest_graphs_balanced": graph_rows["balanced"]["tok_per_s"],
        "latest_graphs_can": graph_rows["can"]["tok_per_s"],
    }


def ops_frame(store: Store, systems: tuple[str, ...] | list[str]):
    """One row per system: decoder layers and kernel-launching operators per step, per decoder layer, in the search
    and host syncs, on the GPU's code path (``book/results/cpu/ops.json``)."""
    import pandas as pd

    ops, _ = store.ops()
    rows = {}
    for s in systems:
        c = ops["systems"][s]["cuda"]
        rows[LABELS.get(s, s)] = {
            "decoder layers": c["decoder_layers"],
            "kernels / step": c["step"]["kernel_operators"],
            "kernels in the decoder layers": c["decoder"]["kernel_operators"],
            "kernels / layer": c["per_layer"]["kernel_operators"],
            "search kernels / step": c["search"]["kernel_operators"],
            "host syncs / step": c["step"]["host_syncs"],
        }
    frame = pd.DataFrame(rows).T
    frame.index.name = "system"
    whole = [
        "decoder layers",
        "kernels / step",
        "kernels in the decoder layers",
        "search kernels / step",
        "host syncs / step",
    ]
    return frame.astype({c: int for c in whole})


def bytes_frame(systems: tuple[str, ...] | list[str]):
    """The fp16 weights a step reads per system (MB) and the time they take at the H100's bandwidth (microseconds)."""
    import pandas as pd

    rows = {}
    for s in systems:
        b = bytes_per_decode_step(Seq2Seq(preset(s)), bytes_per_weight=FP16)
        rows[LABELS.get(s, s)] = {
            "decoder layers MB": b["layers"] / 1e6,
            "output embedding MB": b["output"] / 1e6,
            "total MB": b["total"] / 1e6,
            "floor at the H100's bandwidth (us)": b["total"] / H100_BANDWIDTH * 1e6,
        }
    return pd.DataFrame(rows).T
