"""The speed chapter as a lesson: what bounds one decoding step at batch 1 on a GPU (the weights it must read
against the kernels it launches one after another), the kernels each system launches per step (counted on the
CPU, ``book/results/cpu/ops*.json``), where a step's time goes (the stored profile and CUDA-graph breakdown) and what
the stored GPU runs show, read by the statistic every speed claim uses: the median of the per-repeat ratios with its
order-statistic 95 % interval.

Every number comes from a stored file, read by code; the constants that are not measured here are the GPUs' memory
bandwidths, from NVIDIA's data sheets. Which code a GPU run timed is read from the run (its commit) and from the
operator counts (the commits each count covers, :meth:`canlib.repro.studies.store.Store.timed_ops`). Every verdict is
the
claims registry's (:mod:`canlib.repro.studies.claims`), and every sentence that compares runs is generated from their
numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from canlib.analysis.probes import bytes_per_decode_step
from canlib.catalogue import LABELS, PAPER_SYSTEMS
from canlib.model.config import preset
from canlib.model.seq2seq import Seq2Seq
from canlib.repro.studies import gpu_results as gpu
from canlib.repro.studies import paper
from canlib.repro.studies.claims import BY_ID, judged, marks
from canlib.repro.studies.cpu_speed import cpu_cell, cpu_provenance, cpu_reference, cpu_table, noisy_sentence
from canlib.repro.studies.judges import speed_runs
from canlib.repro.studies.store import Store
from canlib.repro.studies.verdict import INCONCLUSIVE

FP16 = 2  # bytes per weight in half precision, the paper's regime
# bytes/s of each GPU's memory (NVIDIA's data sheets: the H100 SXM5 80GB's HBM3, the H200's HBM3e): inputs, not
# measurements
BANDWIDTH = {"H100": 3.35e12, "H200": 4.8e12}
PARTS = ("encode", "layers", "output", "search")
CLAIMS = (
    "can-faster",
    "can-speed-1.28x",
    "can-speed-1.28x-graphs",
    "balanced-speed-1.90x",
    "can-faster-than-san",
    "can-faster-than-aan",
    "batch-gain-shrinks",
)
SEARCH_KERNELS = 5  # exercise 3: the search's bookkeeping fused into this many kernels


def read_run(store: Store) -> str:
    """The newest stored GPU run the speed verdicts read (:func:`canlib.repro.studies.judges.speed_runs`)."""
    runs = speed_runs(store)
    if not runs:
        raise FileNotFoundError("no stored GPU run timed Balanced and CAN")
    return runs[0]


def _measured(store: Store, kind: str, run: str) -> str:
    prov = store.gpu(kind, run)[1]
    return str(prov.get("measured_at") or prov["date"])


def latest_run(store: Store, kind: str, need: str | None = None) -> str:
    """The stored GPU run measured last that holds ``kind`` (``speed``, ``breakdown``, ``profile``), and whose result
    holds the key ``need`` for some system when given."""

    def has(run: str) -> bool:
        if need is None:
            return True
        result, _ = store.gpu(kind, run)
        return any(need in row for row in result["systems"].values())

    runs = [run for run in store.gpu_runs_with(kind) if has(run)]
    if not runs:
        raise FileNotFoundError(f"no stored GPU run holds {kind}.json" + (f" with {need}" if need else ""))
    return max(runs, key=lambda run: _measured(store, kind, run))


def gpu_name(device: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``H100``."""
    return next((name for name in BANDWIDTH if name in device), device.removeprefix("NVIDIA "))


def weights_mb(system: str) -> float:
    """Megabytes of fp16 weights one decoding step of ``system`` reads (decoder layers without the source-side
    projections, and the tied output embedding), counted from the model at the paper's d=512, V=32k."""
    return bytes_per_decode_step(Seq2Seq(preset(system)), bytes_per_weight=FP16)["total"] / 1e6


def kernels(ops: dict[str, Any], system: str, part: str) -> int | float:
    """Kernel-launching operators of one part (``step``, ``decoder``, ``per_layer``, ``search``, ``output``,
    ``embedding``) of one beam-search step on the GPU's code path."""
    return ops["systems"][system]["cuda"][part]["kernel_operators"]


def timed_counts(store: Store, run: str) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """(counts, their provenance, whether they count the code ``run`` timed): the stored count of that code where
    one covers it, else today's (``ops.json``)."""
    name = store.timed_ops(run)
    ops, prov = store.ops(name or "ops.json")
    return ops, prov, name is not None


def values(store: Store) -> dict[str, Any]:
    """The numbers the chapter's prose quotes; see the module docstring."""
    t2 = paper.table2("en-de")
    run = read_run(store)
    ops, ops_prov, counted = timed_counts(store, run)
    today, today_prov = store.ops()
    eager, prov = store.gpu_speed("eager", run)
    graphs, _ = store.gpu_speed("captured", run)
    device = gpu_name(prov["device"])
    out: dict[str, Any] = {
        "paper_balanced": t2["Balanced"].speed,
        "paper_can": t2["CAN"].speed,
        "paper_can_ratio": t2["CAN"].speed / t2["Balanced"].speed,
        "paper_san_pct": 100 * (t2["SAN"].speed / t2["Balanced"].speed - 1),
        "read_run": gpu.run_label(prov),
        "read_device": device,
        "read_commit": gpu.commit_label(prov),
        "bandwidth_tbs": BANDWIDTH.get(device, float("nan")) / 1e12,
        "ops_commit": str(ops_prov["commit"])[:7],
        "today_commit": str(today_prov["commit"])[:7],
        "counted_word": "counts the code it timed" if counted else "counts other code than it timed",
        "balanced_bar": BY_ID["balanced-speed-1.90x"].evidence.ok.bound,
        "can_bar": BY_ID["can-speed-1.28x"].evidence.ok.bound,
    }
    for system in ("balanced", "can"):
        mb = weights_mb(system)
        out |= {f"{system}_weights_mb": mb, f"{system}_floor_us": mb * 1e12 / BANDWIDTH.get(device, float("nan"))}
        for part in ("step", "decoder", "per_layer", "search", "output", "embedding"):
            out[f"{system}_kernels_{part}"] = kernels(ops, system, part)
        out[f"eager_step_us_{system}"] = 1e6 / eager[system]["tok_per_s"]
        out[f"graph_step_us_{system}"] = 1e6 / graphs[system]["tok_per_s"]
        out[f"graph_{system}_us_per_kernel"] = out[f"graph_step_us_{system}"] / out[f"{system}_kernels_step"]
        out[f"graph_{system}_over_floor"] = out[f"graph_step_us_{system}"] / out[f"{system}_floor_us"]
        out[f"eager_{system}_over_floor"] = out[f"eager_step_us_{system}"] / out[f"{system}_floor_us"]
    out["graphs_balanced"] = graphs["balanced"]["tok_per_s"]
    out["kernel_ratio_layer"] = out["can_kernels_per_layer"] / out["balanced_kernels_per_layer"]
    out["kernel_ratio_step"] = out["balanced_kernels_step"] / out["can_kernels_step"]
    out["common_kernels"] = out["balanced_kernels_step"] - out["balanced_kernels_decoder"]
    for system in ("balanced", "can"):  # exercise 3: the search's bookkeeping cut to SEARCH_KERNELS kernels
        out[f"search5_{system}"] = out[f"{system}_kernels_step"] - out[f"{system}_kernels_search"] + SEARCH_KERNELS
    out["search5_ceiling"] = out["search5_balanced"] / out["search5_can"]
    for system in ("san", "can"):
        out[f"{system}_kernels_per_layer"] = kernels(ops, system, "per_layer")
        out[f"{system}_kernels_step"] = kernels(ops, system, "step")
    stat = gpu.ratio_stat(eager, "can", "balanced")
    out |= {"eager_ratio": stat["median"], "eager_vs_ceiling": _against(stat["median"], out["kernel_ratio_step"])}
    out |= _profile_values(store) | _graph_values(store) | _runs_values(store) | marks(store, CLAIMS)
    return out


def _against(measured: float, ceiling: float, tolerance: float = 0.02) -> str:
    """``measured`` against what equal-cost kernels allow, in words (within ``tolerance`` of it: "at")."""
    if abs(measured / ceiling - 1) <= tolerance:
        return "at"
    return "below" if measured < ceiling else "above"


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
            f"profile_{system}_busy": case["gpu_busy_share"],
            f"profile_{system}_launches": case["kernel_launches"],
            f"profile_{system}_us_per_launch": 1000 * case["cpu_ms"] / case["kernel_launches"],
        }
    for what in ("cpu", "wall"):
        out[f"profile_{what}_ratio"] = out[f"profile_balanced_{what}_us"] / out[f"profile_can_{what}_us"]
    out["profile_launch_ratio"] = out["profile_balanced_launches"] / out["profile_can_launches"]
    return out


def _graph_values(store: Store) -> dict[str, Any]:
    """A step replayed from CUDA graphs in the last run that broke it down: microseconds per generated token of each
    part (the breakdown is per sentence of ``forced_length`` tokens), the part common to both systems, and the
    CAN/Balanced ratio that the common part leaves at most."""
    run = latest_run(store, "breakdown", need="breakdown_graphs")
    result, prov = store.gpu("breakdown", run)
    ops, _, _ = timed_counts(store, run)
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
    graphs, _ = store.gpu_speed("captured", read_run(store))
    measured = gpu.ratio_stat(graphs, "can", "balanced")["median"]
    step = 1e6 / graphs["balanced"]["tok_per_s"]
    if _against(measured, out["graph_ceiling"]) == "above":
        out["graph_agreement"] = (
            f"The speed run measured {measured:.2f} from graphs, above that ceiling: the two measurements disagree. "
            f"The breakdown times each part apart, and its common part alone, {common:.0f} µs a token, is "
            f"{common / step:.2f} times the whole replayed step of Balanced in the speed run: it overstates what both "
            "systems pay, and its ceiling is no bound on the speed run."
        )
    else:
        out["graph_agreement"] = (
            f"The speed run measured {measured:.2f} from graphs, {_against(measured, out['graph_ceiling'])} that "
            "ceiling. To reach the paper's ratio the common part has to shrink, and CAN's layers more than Balanced's."
        )
    return out


def breakdown_frame(store: Store):
    """Microseconds per generated token of each part of a step replayed from CUDA graphs (the last run that broke it
    down), Balanced and CAN, with the part both pay."""
    import pandas as pd

    v = _graph_values(store)
    rows = {
        LABELS[s]: {part: v[f"graph_{s}_{part}_us"] for part in PARTS}
        | {"per layer kernel": v[f"graph_{s}_layer_kernel_us"]}
        for s in ("balanced", "can")
    }
    frame = pd.DataFrame(rows).T
    frame.columns = ["encoder (share per token)", "decoder layers", "output projection", "search", "per layer kernel"]
    frame.index.name = f"µs per token, graphs ({v['breakdown_run']})"
    return frame.round(1)


def step_frame(store: Store):
    """One decoding step of Balanced and of CAN in the run the verdicts read: its time eagerly and from CUDA graphs,
    the memory floor (the fp16 weights over the GPU's bandwidth), how many times the floor each is, and the host's
    CPU time per kernel launch under the profiler."""
    import pandas as pd

    v = values(store)
    rows = {
        LABELS[s]: {
            "weights read (MB)": v[f"{s}_weights_mb"],
            "memory floor (µs)": v[f"{s}_floor_us"],
            "eager step (µs)": v[f"eager_step_us_{s}"],
            "graph step (µs)": v[f"graph_step_us_{s}"],
            "graph step / floor": v[f"graph_{s}_over_floor"],
            "host µs per launch (eager)": v[f"profile_{s}_us_per_launch"],
        }
        for s in ("balanced", "can")
    }
    frame = pd.DataFrame(rows).T
    frame.index.name = "one step"
    return frame.round(1)


def kernel_parts_frame(store: Store):
    """Kernels per beam-search step by part, Balanced and CAN, in the code the run the verdicts read timed."""
    import pandas as pd

    ops, _, _ = timed_counts(store, read_run(store))
    names = {"embedding": "embedding", "decoder": "decoder layers", "output": "output + softmax", "search": "search"}
    rows = {LABELS[s]: {label: kernels(ops, s, part) for part, label in names.items()} for s in ("balanced", "can")}
    frame = pd.DataFrame(rows).T
    frame["whole step"] = [kernels(ops, s, "step") for s in ("balanced", "can")]
    frame.index.name = "kernels per step"
    return frame.astype(int)


# -- the stored runs ----------------------------------------------------------------------------------------------


def _readings(store: Store, claim: str) -> dict[str, dict[str, Any]]:
    """The registry's readings of a speed claim, per GPU run (the body it leads with and those beside it)."""
    j = judged(store)[claim]
    return {row["run"]: row for body in (j, *j.beside) for row in body.sets}


def ratio_cell(row: dict[str, Any] | None) -> str:
    """A reading in a table cell: ``1.47 [1.01, 1.52]`` (the median and its 95 % interval) or ``1.21 (1.09-1.39)``
    (the range of too few repeats for an interval)."""
    if row is None:
        return "not timed"
    if row.get("interval"):
        return f"{row['value']:.2f} [{row['interval'][0]:.2f}, {row['interval'][1]:.2f}]"
    return f"{row['value']:.2f} ({row['range'][0]:.2f}-{row['range'][1]:.2f})"


def run_rows(store: Store) -> list[dict[str, Any]]:
    """One row per stored GPU speed run, oldest first: its GPU, the commit it timed, its repeats and their shortest,
    whether it meets the speed standard, the kernels per step of the code it timed (where a count covers it), and
    whether the verdicts read it."""
    faster = _readings(store, "can-faster")
    read = set(speed_runs(store))
    rows = []
    for run in sorted(faster, key=lambda r: faster[r]["date"]):
        r = faster[run]
        name = store.timed_ops(run)
        if name:
            ops, _ = store.ops(name)
            counted = f"{kernels(ops, 'balanced', 'step')} / {kernels(ops, 'can', 'step')}"
        else:
            counted = "not counted"
        prov = store.gpu_speed("eager", run)[1]
        rows.append(
            {
                "run": run,
                "short": f"{gpu.gpu_label(prov)} {gpu.commit_label(prov)}",
                "GPU run": gpu.run_label(prov),
                "commit timed": gpu.commit_label(prov),
                "repeats": r["repeats"],
                "shortest repeat (s)": round(r["shortest_repeat_s"], 2),
                "meets the standard": "yes" if r["meets"] else "no",
                "kernels / step, Balanced / CAN": counted,
                "the verdicts read it": "yes" if run in read else "",
            }
        )
    return rows


RATIOS = {
    "can-faster": "CAN / Balanced eager",
    "can-speed-1.28x-graphs": "CAN / Balanced graphs",
    "balanced-speed-1.90x": "Balanced / Baseline eager",
    "can-faster-than-san": "CAN / SAN eager",
    "can-faster-than-aan": "CAN / AAN eager",
}
OWN_RATIOS = ("can-faster", "can-speed-1.28x-graphs", "balanced-speed-1.90x")  # the paper's own systems
OTHER_RATIOS = ("can-faster-than-san", "can-faster-than-aan")  # against the other fast decoders


def ratio_rows(store: Store, claims: Sequence[str] = tuple(RATIOS)) -> list[dict[str, Any]]:
    """One row per stored GPU speed run: each ratio the speed claims ``claims`` read, by the claims' statistic
    (:func:`ratio_cell`), from the registry's readings."""
    readings = {claim: _readings(store, claim) for claim in claims}
    return [
        {"GPU run": r["short"], **{RATIOS[c]: ratio_cell(readings[c].get(r["run"])) for c in claims}}
        for r in run_rows(store)
    ]


def _runs_words(n: int) -> str:
    return {1: "one run", 2: "two runs", 3: "three runs"}.get(n, f"{n} runs")


def _runs_values(store: Store) -> dict[str, Any]:
    """What the runs say together, for the sentences that compare them: which runs the verdicts read, how many older
    runs put each ratio outside the read interval, how often SAN came out ahead of CAN, and how many of the read
    run's repeats lie below the paper's smallest gain."""
    read = speed_runs(store)
    out: dict[str, Any] = {"runs": len(store.gpu_runs_with("speed")), "read_runs": len(read)}
    for claim, key in (("can-faster", "eager"), ("can-speed-1.28x-graphs", "graphs")):
        rows = _readings(store, claim)
        lead = judged(store)[claim]
        low, high = lead.interval if lead.interval else (float("nan"), float("nan"))
        older = [r for run, r in rows.items() if run not in read]
        out[f"older_{key}"] = len(older)
        out[f"older_{key}_outside"] = sum(not low <= r["value"] <= high for r in older)
        out[f"older_{key}_min"] = min((r["value"] for r in older), default=float("nan"))
        out[f"older_{key}_max"] = max((r["value"] for r in older), default=float("nan"))
        out[f"read_{key}_low"], out[f"read_{key}_high"], out[f"read_{key}"] = low, high, lead.value
    san = _readings(store, "can-faster-than-san")
    ratios = [x for r in san.values() for x in r["ratios"]]
    out |= {
        "san_runs": len(san),
        "san_ahead_runs": sum(r["value"] < 1 for r in san.values()),
        "san_ahead_repeats": sum(x < 1 for x in ratios),
        "san_repeats": len(ratios),
        "san_closest": min(r["value"] for r in san.values()),
    }
    bar = BY_ID["can-speed-1.28x"].evidence.ok.bound
    eager, graphs = judged(store)["can-speed-1.28x"], judged(store)["can-speed-1.28x-graphs"]
    repeats = [x for r in eager.sets for x in r["ratios"]]
    below = sum(x < bar for x in repeats)
    out |= {"below_bar": below, "bar_repeats": len(repeats), "read_runs_words": _runs_words(len(read))}
    out["bar_sentence"] = (
        f"Why the gain of at least {bar:.2f}x stays undecided eagerly: {below} of the {len(repeats)} repeats put CAN "
        "below it, so the interval of the median reaches under the bound though the median lies above it."
        if eager.word == INCONCLUSIVE and eager.meets and eager.value and eager.value >= bar
        else ""
    )
    if graphs.word == INCONCLUSIVE and not graphs.meets:
        shortest = graphs.strength.get("shortest_repeat_s", float("nan"))
        out["bar_sentence"] += (
            f" With CUDA graphs the repeats lasted {shortest:.2f} s at the shortest, under the standard's "
            f"{graphs.standard.seconds:g} s: that body of evidence is below its standard."
        )
    settings = [store.gpu_speed("eager", run)[1]["settings"] for run in store.gpu_runs_with("speed")]
    out |= {"repeats_min": min(s["repeats"] for s in settings), "repeats_max": max(s["repeats"] for s in settings)}
    return out


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


def bytes_frame(systems: tuple[str, ...] | list[str], device: str = "H200"):
    """The fp16 weights a step reads per system (MB) and the time they take at ``device``'s bandwidth (µs)."""
    import pandas as pd

    rows = {}
    for s in systems:
        b = bytes_per_decode_step(Seq2Seq(preset(s)), bytes_per_weight=FP16)
        rows[LABELS.get(s, s)] = {
            "decoder layers MB": b["layers"] / 1e6,
            "output embedding MB": b["output"] / 1e6,
            "total MB": b["total"] / 1e6,
            f"floor at the {device}'s bandwidth (µs)": b["total"] / BANDWIDTH[device] * 1e6,
        }
    return pd.DataFrame(rows).T


# -- the CPU: bandwidth-bound -----------------------------------------------------------------------------------


def cpu_values(store: Store) -> dict[str, Any]:
    """The stored CPU run against the byte model: for how many systems the prediction lies inside the measured
    interval of the median ratio to Balanced (a generated sentence), and where the run comes from; a noisy run says
    so and gives no ratio."""
    rows, prov = cpu_table(PAPER_SYSTEMS, root=store.measurements)
    out: dict[str, Any] = {"cpu_provenance": cpu_provenance(prov), "search_kernels": SEARCH_KERNELS}
    if prov["noisy"]:
        out["cpu_sentence"] = noisy_sentence(prov)
        return out
    predicted = _predicted(PAPER_SYSTEMS)
    others = [s for s in PAPER_SYSTEMS if s != "balanced"]
    inside = [LABELS[s] for s in others if _inside(rows[s], predicted[s])]
    outside = [LABELS[s] for s in others if not _inside(rows[s], predicted[s])]
    parts = []
    if inside:
        parts.append(f"the bytes' prediction lies inside the measured interval for {_names(inside)}")
    if outside:
        parts.append(f"outside it for {_names(outside)}: there bytes alone do not explain the CPU's ratio")
    out["cpu_sentence"] = "In this run " + ", and ".join(parts) + "."
    return out


def _names(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _inside(row: dict[str, Any], value: float) -> bool:
    low, high = row["interval"] if row["interval"] else (row["low"], row["high"])
    return low <= value <= high


def _predicted(systems: Sequence[str]) -> dict[str, float]:
    """Each system's speed over Balanced's if a step took the time to read its fp32 weights."""
    step = {s: bytes_per_decode_step(Seq2Seq(preset(s)))["total"] for s in {*systems, "balanced"}}
    return {s: step["balanced"] / step[s] for s in systems}


def cpu_frame(store: Store):
    """One row per Table 2 system: fp32 MB read per step, the byte model's ratio to Balanced, the stored CPU run's
    (the median of its per-repeat ratios [95 % interval]; "noisy run" where the run is), the run the verdicts read
    (GPU, eager) and the paper's."""
    import pandas as pd

    rows, prov = cpu_table(PAPER_SYSTEMS, root=store.measurements)
    predicted = _predicted(PAPER_SYSTEMS)
    eager, eager_prov = store.gpu_speed("eager", read_run(store))
    t2 = paper.table2("en-de")
    frame = pd.DataFrame(
        {
            LABELS[s]: {
                "fp32 MB / step": f"{bytes_per_decode_step(Seq2Seq(preset(s)))['total'] / 1e6:.1f}",
                "bytes predict": f"{predicted[s]:.2f}",
                "CPU measured": "noisy run" if prov["noisy"] else cpu_cell(rows[s]),
                f"GPU eager ({gpu_name(eager_prov['device'])})": gpu.ratio_cell(gpu.ratio_stat(eager, s, "balanced")),
                "paper (GPU)": f"{t2[LABELS[s]].speed / t2['Balanced'].speed:.2f}",
            }
            for s in PAPER_SYSTEMS
        }
    ).T
    frame.index.name = "speed x Balanced"
    return frame.round(1)


def reference_frame(store: Store):
    """canlib against CTranslate2 on the same weights (the stored reference run): tokens per second of each engine
    (the median repeat) and canlib's over CTranslate2's (the median of the per-repeat ratios [interval])."""
    import pandas as pd

    found = cpu_reference(root=store.measurements)
    if found is None:
        return pd.DataFrame(
            {"note": ["no stored CTranslate2 run (CTranslate2 was not installed where the CPU tables were stored)"]}
        )
    rows, prov = found
    out = {}
    for s in ("baseline", "balanced"):
        mine = cpu_table((s,), kind="reference", against=f"ct2:{s}", root=store.measurements)[0][s]
        out[LABELS[s]] = {
            "canlib tok/s": f"{rows[s]['tok_per_s']:.1f}",
            "CTranslate2 tok/s": f"{rows[f'ct2:{s}']['tok_per_s']:.1f}",
            "canlib / CTranslate2": "noisy run" if prov["noisy"] else cpu_cell(mine),
        }
    frame = pd.DataFrame(out).T
    frame.index.name = "CPU, fp32"
    return frame.round(1)
