"""The speed studies the chapters share: each setting measured once per book build, with its spread.

Speed depends on shapes, not on what the weights learned, so every study times the paper's d=512
presets with random weights and a forced output length. One measurement per setting: the results,
depths, ablation, speed and scorecard chapters all read the same interleaved run of all nine systems
(:func:`speed_table`), so a system's speed is the same number in every chapter. Each run is cached (tiny)
or stored (``store=True``) by :func:`canlib.results.layout.study` under a key of its settings.

CPU rows are labelled as such: on a CPU at batch 1 decoding is bound by memory bandwidth, not the
paper's regime (fp16 on a GPU, bound by kernel launches); the stored GPU measurements are read by
:class:`canlib.studies.store.Store`.
"""

from __future__ import annotations

import statistics
import warnings
from typing import Any

from canlib.analysis.probes import decoding_costs
from canlib.model.config import ABLATION_SYSTEMS, ALL_SYSTEMS, LABELS
from canlib.results.layout import key, study
from canlib.results.scales import scale_spec

SPEED_SYSTEMS = ALL_SYSTEMS  # one interleaved run times all nine
SWEEPS = {
    "beam": ("beam", "beams", "by_beam"),
    "length": ("beam", "lengths", "by_length"),
    "batch": ("batch", "batches", "by_batch"),
}
REFERENCE_SYSTEMS = ("baseline", "ct2:baseline", "balanced", "ct2:balanced")
CPU_LABEL = "CPU (bandwidth-bound, not the paper's regime)"


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def settings_for(
    study_name: str, book_scale: str, systems: tuple[str, ...] | list[str], device: str | None = None, **overrides: Any
) -> dict[str, Any]:
    """The bench settings of a study at a book scale: it fixes beam, forced length, sentences, repeats
    and the sweeps; shapes are always the paper's (bench ``scale="full"``: d=512 presets, V=32k)."""
    spec = scale_spec(book_scale)
    settings = {
        "systems": list(systems),
        "scale": "full",
        "vocab_size": 32000,
        "beam": spec.beam,
        "batch": 1,
        "forced_length": spec.forced_length,
        "sentences": spec.speed_sentences,
        "repeats": spec.speed_repeats,
        "warmup": 1,
        "len_penalty": 1.0,
        "device": device or default_device(),
        "fp32": False,
        "graphs": False,
        "breakdown": study_name == "breakdown",
        "seed": 0,
    }
    if study_name == "beam":
        settings.update(beams=list(spec.beam_sweep), lengths=[spec.forced_length])
    elif study_name == "length":
        settings.update(beams=[spec.beam], lengths=list(spec.length_sweep))
    elif study_name == "batch":
        settings.update(batches=list(spec.batch_sweep))
    unknown = set(overrides) - set(settings) - {"beams", "lengths", "batches", "threads"}
    if unknown:
        raise ValueError(f"settings_for({study_name!r}): unknown setting(s) {', '.join(sorted(unknown))}")
    return {**settings, **overrides}


def run_bench(study_name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """``canlib.bench.run_study`` as {"systems", "meta"}. Its busy-machine warning is kept in
    ``meta["busy_warning"]`` and not raised as a warning, which a chapter would show as stray output."""
    from canlib.bench import BenchSettings, run_study

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = run_study(study_name, BenchSettings(**{**settings, "progress": False}))
    return {"systems": dict(result.systems), "meta": dict(result.meta)}


def busy_warning(meta: dict[str, Any]) -> str | None:
    """The bench's warning that other work loaded the machine while it timed (figures then run slow)."""
    return meta.get("busy_warning")


def measure(
    study_name: str,
    scale: str,
    systems: tuple[str, ...] | list[str],
    *,
    store: bool = False,
    device: str | None = None,
    **overrides: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """({"systems": ..., "meta": ...}, provenance) of one bench study, measured once per setting:
    cached (tiny) or stored (``store=True``) under a key of its settings."""
    bench_study = SWEEPS[study_name][0] if study_name in SWEEPS else study_name
    settings = settings_for(study_name, scale, systems, device, **overrides)

    def compute() -> dict[str, Any]:
        return run_bench(bench_study, settings)

    # the file name leaves the device out, so a result stored on a GPU machine is found from any machine
    name = f"bench-{study_name}-{key(bench_study, {k: v for k, v in settings.items() if k != 'device'})}"
    return study(name, scale, {"study": bench_study, "settings": settings}, compute, settings["device"], store=store)


def spread(row: dict[str, Any]) -> dict[str, float]:
    """min / median / max tokens/s over the timed repeats of one system's row."""
    repeats = row.get("tok_per_s_repeats") or row.get("repeats")
    if not (isinstance(repeats, list) and repeats):
        repeats = [row["tokens"] / s for s in row["seconds"]]
    return {"min": min(repeats), "median": statistics.median(repeats), "max": max(repeats)}


def speed_table(
    scale: str, systems: tuple[str, ...] | list[str] = SPEED_SYSTEMS, *, store: bool = False, device: str | None = None
) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Tokens/s of each system from ONE interleaved run of all nine systems (beam of the scale,
    batch 1): {system: {tok_per_s, min, median, max, ratio_to_balanced}} and the provenance."""
    result, prov = measure("speed", scale, SPEED_SYSTEMS, store=store, device=device)
    rows = {}
    for s in systems:
        if s not in result["systems"]:
            raise KeyError(f"speed_table: {s!r} is not one of the timed systems {', '.join(result['systems'])}")
        row = result["systems"][s]
        rows[s] = {"tok_per_s": row["tok_per_s"], **spread(row)}
    base = result["systems"]["balanced"]["tok_per_s"]
    for row in rows.values():
        row["ratio_to_balanced"] = row["tok_per_s"] / base
    return rows, {**prov, "meta": result["meta"]}


def sweep(
    kind: str,
    scale: str,
    systems: tuple[str, ...] = ("balanced", "can"),
    *,
    store: bool = False,
    device: str | None = None,
) -> tuple[dict[str, dict[int, float]], dict[str, Any]]:
    """Median tokens/s per beam size (``kind="beam"``), forced length (``"length"``) or batch (``"batch"``)."""
    if kind not in SWEEPS:
        raise ValueError(f"kind={kind!r}: choose one of {', '.join(SWEEPS)}")
    result, prov = measure(kind, scale, systems, store=store, device=device)
    field = SWEEPS[kind][2]
    return (
        {s: {int(x): v for x, v in result["systems"][s][field].items()} for s in systems},
        {**prov, "meta": result["meta"]},
    )


def breakdown(
    scale: str,
    systems: tuple[str, ...] = ("baseline", "balanced", "can"),
    *,
    store: bool = False,
    device: str | None = None,
) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Per-sentence milliseconds and shares of encoder, decoder layers, output projection and search."""
    result, prov = measure("breakdown", scale, systems, store=store, device=device)
    return {s: result["systems"][s]["breakdown"] for s in systems}, {**prov, "meta": result["meta"]}


def reference(scale: str, *, store: bool = False, device: str | None = None):
    """canlib against CTranslate2 on the same weights, one interleaved run; None without ctranslate2."""
    from canlib.decoding.ctranslate import ctranslate2_installed

    if not ctranslate2_installed():
        return None
    result, prov = measure("speed", scale, REFERENCE_SYSTEMS, store=store, device=device)
    return {s: {"tok_per_s": r["tok_per_s"], **spread(r)} for s, r in result["systems"].items()}, {
        **prov,
        "meta": result["meta"],
    }


def store_all(scale: str, device: str | None = None) -> None:
    """Measure and store every speed study a chapter reads at ``scale`` (for ``canlib experiment``)."""
    speed_table(scale, store=True, device=device)
    for kind in SWEEPS:
        sweep(kind, scale, store=True, device=device)
    breakdown(scale, store=True, device=device)
    reference(scale, store=True, device=device)


def setting(prov: dict[str, Any]) -> str:
    """How a speed was measured, in words, for the line under a table."""
    s = prov["config"]["settings"]
    meta = prov.get("meta", {})
    return (
        f"{prov['device']} ({meta.get('dtype', 'float32')}), beam {s['beam']}, batch {s['batch']}, forced length "
        f"{s['forced_length']}, {s['sentences']} sentences x {s['repeats']} repeats, d=512 presets, random weights, "
        f"commit {str(prov['commit'])[:12]}, {str(prov['date'])[:10]}"
    )


# -- tables the chapters show ---------------------------------------------------------------------------


def comparison_frame(
    systems: tuple[str, ...] | list[str],
    cpu: dict[str, dict[str, float]] | None,
    gpu_eager: dict[str, dict[str, float]] | None,
    gpu_graphs: dict[str, dict[str, float]] | None,
    paper: dict[str, float] | None,
    reference_system: str = "balanced",
):
    """One row per system: CPU min/median/max, GPU eager and graphs (median, min-max), the paper's, each
    with its ratio to ``reference_system``; a column is left out when its source is missing."""
    import pandas as pd

    frame = pd.DataFrame(index=[LABELS.get(s, s) for s in systems])
    frame.index.name = "system"

    def add(prefix: str, rows: dict[str, dict[str, float]] | None, with_spread: bool) -> None:
        if not rows:
            return
        have = [s for s in systems if s in rows]
        labels = [LABELS.get(s, s) for s in have]
        if with_spread:
            frame.loc[labels, f"{prefix} min"] = [rows[s]["min"] for s in have]
        frame.loc[labels, f"{prefix} median" if with_spread else prefix] = [rows[s]["tok_per_s"] for s in have]
        if with_spread:
            frame.loc[labels, f"{prefix} max"] = [rows[s]["max"] for s in have]
        if reference_system in rows:
            frame.loc[labels, f"{prefix} x {LABELS[reference_system]}"] = [
                rows[s]["tok_per_s"] / rows[reference_system]["tok_per_s"] for s in have
            ]

    add("CPU tok/s", cpu, True)
    add("GPU eager tok/s", gpu_eager, True)
    add("GPU graphs tok/s", gpu_graphs, True)
    if paper:
        add("paper tok/s", {s: {"tok_per_s": v} for s, v in paper.items()}, False)
    return frame


def breakdown_frame(parts: dict[str, dict[str, float]]):
    """Milliseconds per sentence and share of each part (encoder, decoder layers, output, search)."""
    import pandas as pd

    rows = {}
    for system, p in parts.items():
        row = {f"{k} (ms)": p[f"{k}_ms"] for k in ("encode", "layers", "output", "search", "total")}
        row.update({f"{k} share": p[f"{k}_share"] for k in ("encode", "layers", "output", "search")})
        rows[LABELS.get(system, system)] = row
    return pd.DataFrame(rows).T


def weights_per_token() -> dict[str, float]:
    """Decoder-layer matrix weights read per generated token, in units of d² (source-side projections,
    computed once per sentence, left out), counted from the layer classes at the paper's d=512."""
    return {system: decoding_costs(system)["weights_per_step_d2"] for system in ABLATION_SYSTEMS}
