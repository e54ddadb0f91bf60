"""The speed chapter as a lesson: what bounds one decoding step at batch 1 on a GPU (the weights it must read
against the kernels it launches one after another), where a step's time goes (the stored profile and CUDA-graph
breakdown) and what the run the speed verdicts read shows, read by the statistic every speed claim uses: the median
of the per-repeat ratios with its order-statistic 95 % interval. :func:`speed_table` is the one speed table of the
results, depths, ablation and glance pages.

Every number comes from a stored file, read by code; the constants that are not measured here are the GPUs' memory
bandwidths, from NVIDIA's data sheets. Every verdict is the claims registry's (:mod:`repro.studies.claims`),
and every sentence about the runs is generated from their numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from _code import gpu_results as gpu
from _code.cpu_speed import cpu_table, noisy_sentence
from _code.decoding import step_mb
from _code.marks import marks
from _code.prose import NUMBER_WORDS, by_verdict, names
from _code.readers import speed_runs
from _code.speed_frames import H100_BANDWIDTH
from canlib.catalogue import LABELS, PAPER_SYSTEMS
from repro.studies import paper
from repro.studies.claims import BY_ID, judged
from repro.studies.evidence import SPEED, Judged
from repro.studies.store import Store
from repro.studies.verdict import INCONCLUSIVE

# bytes/s of each GPU's memory (NVIDIA's data sheets: the H100 SXM5 80GB's HBM3, the H200's HBM3e): inputs
BANDWIDTH = {"H100": H100_BANDWIDTH, "H200": 4.8e12}
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
    """The newest stored GPU run the speed verdicts read (:func:`_code.readers.speed_runs`)."""
    runs = speed_runs(store)
    if not runs:
        raise FileNotFoundError("no stored GPU run timed Balanced and CAN")
    return runs[0]


def latest_run(store: Store, kind: str, need: str | None = None) -> str:
    """The stored GPU run measured last that holds ``kind`` (``speed``, ``breakdown``, ``profile``), and whose result
    holds ``need`` (a key of a system's row, or a profiled case) when given."""

    def has(run: str) -> bool:
        result = store.gpu(kind, run)[0]
        rows = (result, result.get("cases", {}), *result.get("systems", {}).values())
        return need is None or any(need in row for row in rows)

    def measured(run: str) -> str:
        prov = store.gpu(kind, run)[1]
        return str(prov.get("measured_at") or prov["date"])

    runs = [run for run in store.gpu_runs_with(kind) if has(run)]
    if not runs:
        raise FileNotFoundError(f"no stored GPU run holds {kind}.json" + (f" with {need}" if need else ""))
    return max(runs, key=measured)


def values(store: Store) -> dict[str, Any]:
    """The numbers the chapter's prose quotes; see the module docstring."""
    t2 = paper.table2("en-de")
    run = read_run(store)
    ops, ops_prov = store.ops()
    eager, prov = store.gpu_speed("eager", run)
    graphs, _ = store.gpu_speed("captured", run)
    device = gpu.gpu_label(prov)
    bandwidth = BANDWIDTH[device]
    counted = store.timed_ops(run) == "ops.json"
    out: dict[str, Any] = {
        "paper_balanced": t2["Balanced"].speed,
        "paper_can": t2["CAN"].speed,
        "paper_can_ratio": t2["CAN"].speed / t2["Balanced"].speed,
        "read_device": device,
        "read_commit": gpu.commit_label(prov),
        "bandwidth_tbs": bandwidth / 1e12,
        "ops_commit": str(ops_prov["commit"])[:7],
        "counted_word": "counts the code it timed" if counted else "counts other code than it timed",
        "balanced_bar": BY_ID["balanced-speed-1.90x"].evidence.ok.bound,
        "can_bar": BY_ID["can-speed-1.28x"].evidence.ok.bound,
        "search_kernels": SEARCH_KERNELS,
        "graphs_balanced": graphs["balanced"]["tok_per_s"],
    }
    for system in ("balanced", "can", "san"):
        for part in ("step", "decoder", "per_layer", "search"):
            out[f"{system}_kernels_{part}"] = gpu.kernels(ops, system, part)
    for system in ("balanced", "can"):
        mb = step_mb(system)
        out |= {f"{system}_weights_mb": mb, f"{system}_floor_us": mb * 1e12 / bandwidth}
        out[f"eager_step_us_{system}"] = 1e6 / eager[system]["tok_per_s"]
        out[f"graph_step_us_{system}"] = 1e6 / graphs[system]["tok_per_s"]
        out[f"graph_{system}_over_floor"] = out[f"graph_step_us_{system}"] / out[f"{system}_floor_us"]
        # exercise 3: the search's bookkeeping cut to SEARCH_KERNELS kernels
        out[f"search5_{system}"] = out[f"{system}_kernels_step"] - out[f"{system}_kernels_search"] + SEARCH_KERNELS
    out["search5_ceiling"] = out["search5_balanced"] / out["search5_can"]
    out["kernel_ratio_step"] = out["balanced_kernels_step"] / out["can_kernels_step"]
    out["common_kernels"] = out["balanced_kernels_step"] - out["balanced_kernels_decoder"]
    out["eager_ratio"] = gpu.ratio_stat(eager, "can", "balanced")["median"]
    out["eager_vs_ceiling"] = _against(out["eager_ratio"], out["kernel_ratio_step"])
    out |= _profile_values(store) | _graph_values(store, graphs) | _verdict_values(store) | marks(store, CLAIMS)
    out |= timings(store) | spread_values(store)
    j = judged(store)
    out["takeaway_sentence"] = takeaway(
        j["can-speed-1.28x"], j["can-speed-1.28x-graphs"], out["paper_can_ratio"], out["read_runs_words"], device
    )
    return out | {"cpu_sentence": bytes_sentence(store, PAPER_SYSTEMS)}


def takeaway(eager: Judged, graphs: Judged, paper_ratio: float, runs: str, device: str) -> str:
    """The chapter's one sentence: CAN's speed over Balanced in the runs the verdicts read, eagerly and from CUDA
    graphs, against the paper's, and what the two verdict words say of the paper's smallest gain."""
    bar = eager.claim.evidence.ok.bound

    def reached(word: str) -> str:
        return by_verdict(
            word, "is reached", "is missed", "is not yet shown to be reached", "is reached in some runs only"
        )

    said = (
        f"{reached(eager.word)} either way"
        if eager.word == graphs.word
        else f"{reached(eager.word)} eagerly and {reached(graphs.word)} with graphs"
    )
    return (
        f"In {runs} on an {device}, CAN decodes {eager.value:.2f} times as fast as Balanced with every kernel launched "
        f"and {graphs.value:.2f} times with CUDA graphs, against the paper's {paper_ratio:.2f}; the paper's smallest "
        f"gain, {bar:.2f}x, {said}."
    )


def _against(measured: float, ceiling: float, tolerance: float = 0.02) -> str:
    """``measured`` against what equal-cost kernels allow, in words (within ``tolerance`` of it: "at")."""
    if abs(measured / ceiling - 1) <= tolerance:
        return "at"
    return "below" if measured < ceiling else "above"


def _profile_values(store: Store) -> dict[str, Any]:
    """One eager step under ``torch.profiler`` in the last profiled run: wall, host and kernel time, busy share."""
    cases, prov = store.gpu_profile(latest_run(store, "profile"))
    out: dict[str, Any] = {"profile_device": prov["device"]}
    for system in ("balanced", "can"):
        case = cases[f"decode_{system}"]
        out |= {
            f"profile_{system}_wall_us": 1000 * case["wall_ms"],
            f"profile_{system}_cpu_us": 1000 * case["cpu_ms"],
            f"profile_{system}_busy": case["gpu_busy_share"],
            f"profile_{system}_launches": case["kernel_launches"],
            f"profile_{system}_us_per_launch": 1000 * case["cpu_ms"] / case["kernel_launches"],
        }
    for name, what in (("cpu", "cpu_us"), ("wall", "wall_us"), ("launch", "launches")):
        out[f"profile_{name}_ratio"] = out[f"profile_balanced_{what}"] / out[f"profile_can_{what}"]
    return out


def _graph_values(store: Store, graphs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A step replayed from CUDA graphs in the last run that broke it down: microseconds per generated token of each
    part (the breakdown is per sentence of ``forced_length`` tokens), the part common to both systems, the
    CAN/Balanced ratio that the common part leaves at most, and that ceiling against the speed run's ``graphs``."""
    run = latest_run(store, "breakdown", need="breakdown_graphs")
    result, prov = store.gpu("breakdown", run)
    ops, _ = store.ops()
    per = result["settings"]["forced_length"]
    out: dict[str, Any] = {"breakdown_run": gpu.run_label(prov)}
    for system in ("balanced", "can"):
        parts = result["systems"][system]["breakdown_graphs"]
        for part in PARTS:
            out[f"graph_{system}_{part}_us"] = 1000 * parts[f"{part}_ms"] / per
        out[f"graph_{system}_layer_kernel_us"] = out[f"graph_{system}_layers_us"] / gpu.kernels(ops, system, "decoder")
    common = sum(out[f"graph_balanced_{part}_us"] for part in ("encode", "output", "search"))
    out["graph_layer_ratio"] = out["graph_balanced_layers_us"] / out["graph_can_layers_us"]
    out["graph_ceiling"] = (common + out["graph_balanced_layers_us"]) / (common + out["graph_can_layers_us"])
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


def _verdict_values(store: Store) -> dict[str, Any]:
    """What the runs the verdicts read say beside the verdicts: how many they are, how many of their repeats put SAN
    ahead of CAN, and why the gain of at least the paper's smallest stays undecided where it does."""
    j = judged(store)
    read = len(speed_runs(store))
    san = [x for row in j["can-faster-than-san"].sets for x in row["ratios"]]
    out: dict[str, Any] = {"read_runs_words": f"{NUMBER_WORDS.get(read, read)} run{'s' if read > 1 else ''}"}
    out["runs_standard"] = SPEED.runs
    out["runs_sentence"] = (
        f"The speed standard asks for {NUMBER_WORDS.get(SPEED.runs, SPEED.runs)} runs of the same decoder code and "
        f"the verdicts read {out['read_runs_words']}: every speed verdict is inconclusive until "
        f"{NUMBER_WORDS.get(SPEED.runs - read, SPEED.runs - read)} more run{'s' if SPEED.runs - read > 1 else ''} "
        "of this code are stored, however narrow its repeats' interval."
        if read < SPEED.runs
        else f"The verdicts read {out['read_runs_words']} of one decoder code, the standard's {SPEED.runs} or more."
    )
    out |= {"san_ahead_repeats": sum(x < 1 for x in san), "san_repeats": len(san)}
    out["baselines_timed_sentence"] = _baselines_timed(store, j)
    bar = BY_ID["can-speed-1.28x"].evidence.ok.bound
    eager, graphs = j["can-speed-1.28x"], j["can-speed-1.28x-graphs"]
    repeats = [x for r in eager.sets for x in r["ratios"]]
    out["bar_sentence"] = (
        f"Why the gain of at least {bar:.2f}x stays undecided eagerly: {sum(x < bar for x in repeats)} of the "
        f"{len(repeats)} repeats put CAN below it, so the interval of the median reaches under the bound though the "
        "median lies above it."
        if eager.word == INCONCLUSIVE and eager.meets and eager.value and eager.value >= bar
        else ""
    )
    if graphs.word == INCONCLUSIVE and not graphs.meets:
        shortest = graphs.strength.get("shortest_repeat_s", float("nan"))
        out["bar_sentence"] += (
            f" With CUDA graphs the repeats lasted {shortest:.2f} s at the shortest, under the standard's "
            f"{graphs.standard.seconds:g} s: that body of evidence is below its standard."
        )
    out["bar_sentence"] = out["bar_sentence"].strip()
    return out


def _baselines_timed(store: Store, j: Any) -> str:
    """Whether the run the SAN and AAN verdicts read timed today's SAN and AAN steps: a run is credited with the
    operator count of the code it timed (:meth:`Store.timed_ops`), today's count is ``ops.json``."""
    run = next((row["run"] for row in j["can-faster-than-san"].sets if "run" in row), None)
    counted = store.timed_ops(run) if run else None
    if counted in (None, "ops.json"):
        return ""
    then, now = store.ops(counted)[0], store.ops()[0]
    steps = {s: (gpu.kernels(then, s, "step"), gpu.kernels(now, s, "step")) for s in ("san", "aan")}
    return (
        f"That run timed SAN's and AAN's steps before they were written with Balanced's care (`{counted}`): "
        f"{steps['san'][0]:.0f} and {steps['aan'][0]:.0f} kernels a step then, {steps['san'][1]:.0f} and "
        f"{steps['aan'][1]:.0f} today. The verdicts on them wait for a GPU run of today's code."
    )


def _per_system(v: dict[str, Any], columns: Mapping[str, str], axis: str):
    """Balanced and CAN as rows, each column ``label`` the value ``v[key.format(s)]`` of system ``s``."""
    import pandas as pd

    rows = {LABELS[s]: {label: v[key.format(s)] for label, key in columns.items()} for s in ("balanced", "can")}
    return pd.DataFrame(rows).T.rename_axis(axis).round(1)


def breakdown_values(store: Store) -> dict[str, Any]:
    """The numbers of a step replayed from CUDA graphs and broken into parts (:func:`_graph_values`), against the
    graph timings of the run the verdicts read."""
    return _graph_values(store, store.gpu_speed("captured", read_run(store))[0])


def breakdown_frame(store: Store):
    """Microseconds per generated token of each part of a step replayed from CUDA graphs (the last run that broke it
    down), Balanced and CAN, with the part both pay."""
    v = _graph_values(store, store.gpu_speed("captured", read_run(store))[0])
    names = ("encoder (share per token)", "decoder layers", "output projection", "search")
    columns = {name: f"graph_{{}}_{part}_us" for name, part in zip(names, PARTS)}
    columns["per layer kernel"] = "graph_{}_layer_kernel_us"
    return _per_system(v, columns, f"µs per token, graphs ({v['breakdown_run']})")


def step_frame(store: Store):
    """One decoding step of Balanced and of CAN in the run the verdicts read: its time eagerly and from CUDA graphs
    (per generated token, the median repeat), the memory floor (the fp16 weights over the GPU's bandwidth) and how
    many times the floor each is."""
    columns = {
        "weights read (MB)": "{}_weights_mb",
        "memory floor (µs)": "{}_floor_us",
        "eager step (µs)": "eager_step_us_{}",
        "graph step (µs)": "graph_step_us_{}",
        "graph step / floor": "graph_{}_over_floor",
    }
    return _per_system(values(store), columns, "one step")


# -- the speed table of every page: the paper's, the GPU's, the CPU's and the bytes' prediction ---------------------


def predicted(systems: Sequence[str], against: str = "balanced") -> dict[str, float]:
    """Each system's speed over ``against``'s if a step took the time to read its fp32 weights (bandwidth-bound)."""
    return {s: step_mb(against, 4) / step_mb(s, 4) for s in systems}


def ratio_cell(median: float, interval: Sequence[float] | None = None, span: Sequence[float] | None = None) -> str:
    """A speed ratio in a table cell: ``1.47x [1.01, 1.52]`` (the median of the per-repeat ratios and its 95 %
    interval), ``1.21x (1.09-1.39)`` (the range of too few repeats for an interval) or ``1.28x`` (no spread)."""
    if interval:
        return f"{median:.2f}x [{interval[0]:.2f}, {interval[1]:.2f}]"
    return f"{median:.2f}x" + (f" ({span[0]:.2f}-{span[1]:.2f})" if span else "")


def _cpu_cell(row: Mapping[str, Any]) -> str:
    """A ratio of a row of :func:`~_code.cpu_speed.cpu_table` in a table cell."""
    return ratio_cell(row["ratio"], row["interval"], (row["low"], row["high"]))


def speed_table(
    store: Store,
    systems: Sequence[str],
    paper_speeds: Mapping[str, float],
    against: str = "balanced",
    labels: Mapping[str, str] = LABELS,
    cpu: bool = True,
):
    """One row per system, its tokens per second over ``against``'s: the paper's (its GPU), ours on a GPU with every
    kernel launched and from CUDA graphs (the runs the speed verdicts read, pooled:
    :func:`_code.gpu_results.speed_reading`), and with ``cpu`` the stored CPU run's (fp32, bandwidth-bound; "noisy
    run" where it is) and what reading each step's fp32 weights predicts for it."""
    import pandas as pd

    def gpu_cell(system: str, mode: str) -> str:
        if system == against:
            return "1.00x"
        r = gpu.speed_reading(store, system, against, mode)
        return "not timed" if r is None else ratio_cell(r["median"], r["interval"])

    if cpu:
        timed, prov = cpu_table(systems, against=against, root=store.measurements)
        guess = predicted(systems, against)
    rows = {}
    for s in systems:
        row = {
            "paper": ratio_cell(paper_speeds[s] / paper_speeds[against]),
            "ours, every kernel launched": gpu_cell(s, "eager"),
            "ours, CUDA graphs": gpu_cell(s, "captured"),
        }
        if cpu:
            row["ours, CPU fp32"] = "noisy run" if prov["noisy"] else "1.00x" if s == against else _cpu_cell(timed[s])
            row["bytes predict (CPU)"] = ratio_cell(guess[s])
        rows[labels[s]] = row
    return pd.DataFrame(rows).T.rename_axis(f"tokens/s x {labels[against]}")


def bytes_split(
    store: Store, systems: Sequence[str], against: str = "balanced", labels=LABELS
) -> tuple[list[str], list[str]] | None:
    """The systems (by label) whose bytes' prediction lies inside the stored CPU run's measured interval of the
    ratio to ``against``, and those whose prediction lies outside it; None for a noisy run, which reads nothing."""
    rows, prov = cpu_table(systems, against=against, root=store.measurements)
    if prov["noisy"]:
        return None
    guess = predicted(systems, against)
    inside, outside = [], []
    for s in systems:
        if s != against:
            low, high = rows[s]["interval"] or (rows[s]["low"], rows[s]["high"])
            (inside if low <= guess[s] <= high else outside).append(labels[s])
    return inside, outside


def bytes_sentence(store: Store, systems: Sequence[str]) -> str:
    """The speed chapter's sentence of :func:`bytes_split` for ``systems`` against Balanced."""
    split = bytes_split(store, systems)
    if split is None:
        return noisy_sentence(cpu_table(systems, root=store.measurements)[1], "The bytes' predictions stand alone.")
    inside, outside = split
    parts = [f"the bytes' prediction lies inside the measured interval for {names(inside)}"] if inside else []
    if outside:
        head = "outside it" if inside else "the bytes' prediction lies outside the measured interval"
        parts.append(f"{head} for {names(outside)}: there the bytes alone do not explain the measured ratio")
    return "In the stored CPU run " + ", and ".join(parts) + "."


def reference_frame(store: Store):
    """canlib against CTranslate2 on the same weights (the stored reference run): tokens per second of each engine
    (the median repeat) and canlib's over CTranslate2's (the median of the per-repeat ratios [interval])."""
    import pandas as pd

    out = {}
    for s in ("baseline", "balanced"):
        try:
            rows, prov = cpu_table((s, f"ct2:{s}"), kind="reference", against=f"ct2:{s}", root=store.measurements)
        except FileNotFoundError:
            note = "no stored CTranslate2 run (CTranslate2 was not installed where the CPU tables were stored)"
            return pd.DataFrame({"note": [note]})
        out[LABELS[s]] = {
            "canlib tok/s": f"{rows[s]['tok_per_s']:.1f}",
            "CTranslate2 tok/s": f"{rows[f'ct2:{s}']['tok_per_s']:.1f}",
            "canlib / CTranslate2": "noisy run" if prov["noisy"] else _cpu_cell(rows[s]),
        }
    return pd.DataFrame(out).T.rename_axis("CPU, fp32")


# -- one account of a step's time: the bench, the profiler and the picture of a step -------------------------------


def timed_and_profiled(store: Store) -> str:
    """The GPU run measured last that holds both a speed run and a profile of Balanced's and CAN's decoding step,
    so that every timing of one step this chapter compares comes from one machine and one code."""
    profiled = [r for r in store.gpu_runs_with("profile") if r in store.gpu_runs_with("speed")]
    if not profiled:
        raise FileNotFoundError("no stored GPU run holds both speed.json and profile.json")
    return max(profiled, key=lambda r: str(store.gpu("profile", r)[1].get("measured_at") or r))


def timings(store: Store) -> dict[str, Any]:
    """The timings of one eager decoding step of Balanced and CAN that one GPU run stored, per generated token:
    the bench's (``bench_*``: the median repeat, the fastest and slowest of its interleaved repeats, and its CUDA-graph
    median ``graph_*``), the profiler's wall time (``profile_*``), the GPU's kernel time and launches under the
    profiler (``busy_*``, ``launches_*``), the gap each launch leaves on the bench's step (``gap_*``: step minus
    kernel time, over launches; ``graph_gap_*`` from graphs), and the ratios each gives. Where the profiler's wall
    time lies against the bench's repeats is said in ``profile_sentence``, a paragraph a system."""
    run = timed_and_profiled(store)
    cases, pprov = store.gpu_profile(run)
    eager, prov = store.gpu_speed("eager", run)
    graphs, _ = store.gpu_speed("captured", run)
    out: dict[str, Any] = {"timing_run": gpu.run_label(prov), "timing_repeats": int(prov["settings"]["repeats"])}
    out["timing_sentences"] = int(prov["settings"]["sentences"])
    for s in ("balanced", "can"):
        steps = [1e6 / x for x in eager[s]["tok_per_s_repeats"]]
        case = cases[f"decode_{s}"]
        busy, launches = 1000 * case["gpu_kernel_ms"], case["kernel_launches"]
        out |= {
            f"bench_{s}_us": 1e6 / eager[s]["tok_per_s"],
            f"bench_{s}_low_us": min(steps),
            f"bench_{s}_high_us": max(steps),
            f"graph_{s}_us": 1e6 / graphs[s]["tok_per_s"],
            f"profile_{s}_us": 1000 * case["wall_ms"],
            f"busy_{s}_us": busy,
            f"launches_{s}": launches,
            f"profile_steps_{s}": case["per"],
        }
        out[f"gap_{s}_us"] = (out[f"bench_{s}_us"] - busy) / launches
        out[f"graph_gap_{s}_us"] = (out[f"graph_{s}_us"] - busy) / launches
    out["bench_ratio_of_medians"] = out["bench_balanced_us"] / out["bench_can_us"]
    out["bench_ratio"] = gpu.ratio_stat(eager, "can", "balanced")["median"]
    out["graph_ratio"] = gpu.ratio_stat(graphs, "can", "balanced")["median"]
    out["profile_ratio"] = out["profile_balanced_us"] / out["profile_can_us"]
    out["launch_ratio"] = out["launches_balanced"] / out["launches_can"]
    ratios = gpu.ratio_stat(eager, "can", "balanced")
    out["bench_ratio_low"], out["bench_ratio_high"] = ratios["range"]

    def where(s: str) -> str:
        at, low, high = out[f"profile_{s}_us"], out[f"bench_{s}_low_us"], out[f"bench_{s}_high_us"]
        side = "below every one" if at < low else "above every one" if at > high else "inside the range"
        bench = f"{out['timing_repeats']} bench repeats ({low:,.0f}-{high:,.0f} µs)"
        return f"{LABELS[s]}'s {at:,.0f} µs lies {side} of its {bench}"

    out["profile_sentence"] = f"{where('balanced')}.\n\n{where('can')}."  # a paragraph each
    out["busy_ratio"] = out["busy_balanced_us"] / out["busy_can_us"]
    share = {m: [out[f"busy_{s}_us"] / out[f"{m}_{s}_us"] for s in ("balanced", "can")] for m in ("bench", "graph")}
    near = {"the launches": out["launch_ratio"], "the kernel time": out["busy_ratio"]}
    (a, x), (b, y) = sorted(near.items(), key=lambda kv: abs(out["bench_ratio"] - kv[1]))
    bound = ": the launches set its length" if max(share["bench"]) < 0.5 else ""
    out["timeline_sentence"] = (
        f"Eagerly, each launch leaves a gap of {out['gap_balanced_us']:.1f} µs on Balanced's step and "
        f"{out['gap_can_us']:.1f} µs on CAN's, and the kernels fill {share['bench'][0]:.0%} and "
        f"{share['bench'][1]:.0%} of the step{bound}.\n\nThe eager ratio, {out['bench_ratio']:.2f}, lies closer to the "
        f"ratio of {a}, {x:.2f}, than to that of {b}, {y:.2f}.\n\nFrom graphs the gap shrinks to "
        f"{out['graph_gap_balanced_us']:.1f} and {out['graph_gap_can_us']:.1f} µs, the kernels fill "
        f"{share['graph'][0]:.0%} and {share['graph'][1]:.0%} of the step, and the ratio is {out['graph_ratio']:.2f}."
    )
    return out


def timings_frame(store: Store):
    """The three timings of one eager step side by side, per generated token (µs), with the CAN/Balanced ratio each
    gives and what each counts."""
    import pandas as pd

    t = timings(store)
    rows = {
        "bench, median repeat": ("bench_{}_us", t["bench_ratio_of_medians"], "ratio of the two medians"),
        "bench, per-repeat ratios": (None, t["bench_ratio"], "median of the per-repeat ratios (the verdicts')"),
        "profiler, wall time": ("profile_{}_us", t["profile_ratio"], "ratio of the two medians"),
        "profiler, GPU kernel time": ("busy_{}_us", t["busy_balanced_us"] / t["busy_can_us"], "kernel time only"),
    }
    frame = {}
    for name, (key, ratio, how) in rows.items():
        frame[name] = {
            "Balanced (µs)": f"{t[key.format('balanced')]:,.0f}" if key else "",
            "CAN (µs)": f"{t[key.format('can')]:,.0f}" if key else "",
            "Balanced / CAN": f"{ratio:.2f}x",
            "read as": how,
        }
    return pd.DataFrame(frame).T.rename_axis(f"one eager step ({t['timing_run']})")


def run_spread_frame(store: Store, mode: str = "eager"):
    """Every stored GPU run that timed CAN and Balanced in ``mode``: its code, repeats, the median of its per-repeat
    ratios [its interval] and the range of its repeats: the run-to-run spread beside each run's own interval."""
    import pandas as pd

    rows = []
    groups = gpu.speed_groups(store, "can", "balanced", mode)
    for k, group in enumerate(groups):
        for r in group:
            own = gpu.ratio_stat(store.gpu_speed(mode, r["run"])[0], "can", "balanced")
            rows.append(
                {
                    "GPU run": r["set"],
                    "measured": r["date"][:10],
                    "repeats": r["repeats"],
                    "CAN / Balanced": ratio_cell(own["median"], own["interval"], own["range"]),
                    "repeats' range": f"{own['range'][0]:.2f}-{own['range'][1]:.2f}",
                    "read": "decides" if k == 0 else "beside",
                }
            )
    return pd.DataFrame(rows).set_index("GPU run")


def spread_values(store: Store) -> dict[str, Any]:
    """The run-to-run spread of CAN/Balanced over every stored GPU run, eager and from graphs: the runs' medians'
    range and how many runs and code versions they are."""
    out: dict[str, Any] = {}
    for mode, name in (("eager", "eager"), ("captured", "graphs")):
        groups = gpu.speed_groups(store, "can", "balanced", mode)
        rows = [r for g in groups for r in g]
        medians = [gpu.ratio_stat(store.gpu_speed(mode, r["run"])[0], "can", "balanced")["median"] for r in rows]
        out |= {
            f"spread_{name}_runs": len(rows),
            f"spread_{name}_codes": len(groups),
            f"spread_{name}_low": min(medians),
            f"spread_{name}_high": max(medians),
        }
    runs, codes = out["spread_eager_runs"], out["spread_eager_codes"]
    why = "(a stored operator count names the commits whose decoder code it counts, and a test checks them with git)"
    out["pooling_sentence"] = (
        f"No two of them are credited with the same decoder code {why}, so none is pooled with another."
        if runs == codes
        else f"They timed {codes} versions of the decoder code {why}; the runs of one version are pooled."
    )
    return out


def step_kernels(case: dict[str, Any]) -> list[tuple[str, float]]:
    """One step's kernels as (name, µs) from a stored profile case: each of its ``top_kernels`` as many times as it
    ran per step (rounded), at its mean duration, then the other launches of the step at the mean duration of the
    rest of the kernel time. The order within a step is not stored; this keeps the profile's (longest total first)."""
    top = [(k["name"], round(k["calls"]), 1000 * k["gpu_ms"] / k["calls"]) for k in case["top_kernels"] if k["calls"]]
    launches = round(case["kernel_launches"])
    named = sum(n for _, n, _ in top)
    rest_us = 1000 * case["gpu_kernel_ms"] - sum(n * us for _, n, us in top)
    out = [(name, us) for name, n, us in top for _ in range(n)]
    if launches > named:
        out += [("other kernels", max(rest_us, 0.0) / (launches - named))] * (launches - named)
    return out


def plot_step_timeline(store: Store):
    """A decoding step of Balanced and of CAN as a GPU timeline (one row per system, one bar per kernel, µs on the
    x axis), eager above and replayed from CUDA graphs below: each kernel at its mean duration under the profiler
    (:func:`step_kernels`), each followed by the same gap, so that the step lasts the bench's median step
    (:func:`timings`)."""
    import matplotlib.pyplot as plt

    t = timings(store)
    cases, _ = store.gpu_profile(timed_and_profiled(store))
    colours = {"balanced": "C0", "can": "C1"}
    fig, axes = plt.subplots(2, 1, figsize=(7.5, 4.2), constrained_layout=True)
    for ax, (step_key, title) in zip(
        axes,
        (
            ("bench_{}_us", "eager: the host launches every kernel"),
            ("graph_{}_us", "CUDA graphs: the step replayed with one call"),
        ),
    ):
        for row, s in enumerate(("balanced", "can")):
            kernels = step_kernels(cases[f"decode_{s}"])
            gap = (t[step_key.format(s)] - sum(us for _, us in kernels)) / len(kernels)  # the drawn launches
            x, bars = 0.0, []
            for _, us in kernels:
                bars.append((x, us))
                x += us + gap
            ax.broken_barh(bars, (row - 0.35, 0.7), facecolors=colours[s], edgecolor="black", linewidth=0.2)
            step = t[step_key.format(s)]
            ax.text(step, row, f"  {step:,.0f} µs, {len(kernels)} kernels", va="center", fontsize=8)
        ax.set_yticks([0, 1], [LABELS["balanced"], LABELS["can"]])
        ax.set_ylim(1.6, -0.6)
        ax.set_xlim(0, 1.3 * max(t[step_key.format(s)] for s in ("balanced", "can")))
        ax.set_title(title, fontsize=9, loc="left")
    axes[-1].set_xlabel("µs into one decoding step (one generated token)")
    return fig
