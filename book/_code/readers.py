"""What several pages read from the stored results beside their own glue: which scale a chapter shows, where runs
come from in words, the stored analyses a page quotes, and the GPU runs the speed columns read.

Every value comes through one :class:`~repro.studies.store.Store`; nothing here trains or computes a study.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from canlib.catalogue import LABELS
from repro.results.layout import COMPLETE, experiment_command, run_name
from repro.results.plan import planned_seeds
from repro.results.studies import ANALYSES
from repro.studies.gpu_runs import by_code, timed_runs
from repro.studies.store import Store
from repro.studies.verdict import QUALITY_SCALES

# -- which scale a chapter shows ---------------------------------------------------------------------------


def default_scale(
    systems: Sequence[str] | None = None,
    analyses: Sequence[str] = (),
    *,
    seeds: Sequence[int] | None = None,
    corpora: Sequence[str] | None = None,
    root: Path | None = None,
) -> str:
    """ "small" where what a chapter shows is stored at small, else "tiny" (what CI trains); it only looks.

    With no arguments: once ``python -m repro experiment --scale small`` has stored the whole plan (it then writes
    ``<results>/small/complete.json``). With ``systems`` and/or ``analyses``: once every planned small run
    of those systems (on the main corpus, or on ``corpora``; all their seeds, or ``seeds``) and those stored
    analyses exist, so a chapter shows real models as soon as its own runs are in, and never a half-finished
    set of them."""
    small = Store("small", root)
    if small.has(COMPLETE):
        return "small"
    if systems is None and not analyses:
        return "tiny"
    unknown = sorted(set(analyses) - set(ANALYSES))
    if unknown:
        raise ValueError(f"default_scale: unknown analyses {unknown}; choose from {', '.join(ANALYSES)}")
    names = []
    for corpus in corpora or [small.corpus]:
        for system in systems or ():
            names += [
                run_name(system, k, corpus)
                for k in planned_seeds("small", system, corpus)
                if seeds is None or k in seeds
            ]
    if systems and not names:
        raise ValueError(f"default_scale: the small plan has no run of {list(systems)} with seeds {seeds} on {corpora}")
    return "small" if all(small.has(name) for name in [*names, *analyses]) else "tiny"


def requires_judged(store: Store, what: str) -> None:
    """Chapters of stored results quote a judged scale only: tiny models do not translate, so asking for them is an
    error that names the command which stores the runs."""
    if not store.judged:
        raise ValueError(
            f"scale {store.scale!r}: {what} quotes stored runs of a judged scale "
            f"({', '.join(QUALITY_SCALES)}); store them with `{experiment_command('small')}`"
        )


# -- where runs come from, in words ------------------------------------------------------------------


def describe_provenances(provs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Where runs come from, for a chapter's provenance line: how many, devices, commits, dates, budget."""
    return {
        "count": len(provs),
        "device": ", ".join(sorted({p["device"] for p in provs})),
        "commit": ", ".join(sorted({str(p["commit"])[:7] for p in provs})),
        "date": ", ".join(sorted({str(p["date"])[:10] for p in provs})),
        "budget": format_budget(provs[0].get("budget")) if provs else "none",
    }


def format_budget(budget: dict[str, Any] | None) -> str:
    """A training budget in words ("1,200 updates x 8,192 tokens, lr 0.001, ...") instead of a raw dict."""
    if not budget:
        return "budget not recorded"
    b = budget
    steps = f"{b['max_steps']:,} updates" if b.get("max_steps") else f"up to {b.get('max_epochs')} epochs"
    parts = [
        f"{steps} x {b.get('max_tokens', 0) * b.get('update_freq', 1):,} tokens",
        f"lr {b.get('lr'):g}",
        f"warm-up {b.get('warmup', 0):,}",
    ]
    if b.get("label_smoothing"):
        parts.append(f"label smoothing {b['label_smoothing']:g}")
    if b.get("average_last"):
        parts.append(f"last {b['average_last']} checkpoints averaged")
    return ", ".join(parts)


def devices_in_words(provs: Sequence[dict[str, Any]]) -> str:
    """The devices that trained ``provs``, the most used first, each with its number of runs ("23 runs on NVIDIA
    H100 80GB HBM3 and 2 on NVIDIA H200"): a page that names one device would hide the runs of another."""
    counts = Counter(str(p["device"]) for p in provs).most_common()
    parts = [
        f"{n} {'run' if n == 1 else 'runs'} on {d}" if i == 0 else f"{n} on {d}" for i, (d, n) in enumerate(counts)
    ]
    return " and ".join(parts) if len(parts) < 3 else ", ".join(parts[:-1]) + " and " + parts[-1]


def models_provenance(store: Store, systems: tuple[str, ...], study_prov: dict[str, Any]) -> str:
    """Two lines for under a study: the device, commit and budget that trained the seed-1 models it read (a study
    stored at another commit than the run read weights trained again for it: that training is named, the run
    beside it), then where the study itself ran (a study of GPU-trained models may run on a CPU: both are said)."""
    lines = []
    study = str(study_prov["commit"])[:7]
    for system in systems:
        prov = store.run(system, 1)[1]
        steps = (prov.get("budget") or {}).get("max_steps")
        trained = f"trained on {prov['device']} at commit {str(prov['commit'])[:7]}, {str(prov['date'])[:10]}"
        if study != str(prov["commit"])[:7]:  # stored at another commit: the configuration trained again for it
            trained = (
                f"trained again at commit {study} for this study, {str(study_prov['date'])[:10]} (the stored run of "
                f"that seed, another training of the same configuration: {trained})"
            )
        lines.append(f"{LABELS[system]} (seed 1{f', {steps:,} updates' if steps else ''}): {trained}")
    return (
        "models: " + "; ".join(lines) + f"\nstudy: computed on {study_prov['device']} at commit "
        f"{str(study_prov['commit'])[:7]}, {study_prov['date']} (scale={study_prov['scale']})"
    )


# -- the stored analyses a page quotes and the GPU runs its speed column reads ----------------------------


def similarity(store: Store, system: str = "baseline") -> tuple[dict[str, Any], dict[str, Any]]:
    """Figure 2: cosine similarity of sub-layer inputs in the trained 6/6 Baseline (raw and LayerNorm'd), over
    the validation split: {"residual": {...}, "normalized": {...}}; ``system="balanced"``: the same for Balanced's
    two decoder layers (the study ``similarity-balanced``)."""
    return store.analysis(similarity_study(system))


def similarity_study(system: str) -> str:
    """The stored name of a system's similarity study: ``similarity`` for the Baseline (the paper's model)."""
    return "similarity" if system == "baseline" else f"similarity-{system}"


def error_buckets(store: Store) -> tuple[dict[str, Any], dict[str, Any]]:
    """Figure 6 for the seed-1 Balanced and CAN on the test split: {system: {"frequency": ..., "length": ...}}."""
    return store.analysis("errors")


def attention_study(store: Store) -> tuple[dict[str, Any], dict[str, Any]]:
    """The maps of one test pair in the seed-1 Balanced and CAN (per layer, mean over heads) and CAN's alpha over
    the test split (summary, histogram, mean per target position)."""
    return store.analysis("attention")


def conversion_study(store: Store) -> tuple[dict[str, Any], dict[str, Any]]:
    """Balanced converted to CAN, before and after a short fine-tune, against the rows a fair comparison needs:
    {"rows": [{system, updates, valid loss, test BLEU, test tok-BLEU}], "finetune": budget}."""
    return store.analysis("conversion")


def approximations_study(store: Store) -> tuple[dict[str, Any], dict[str, Any]]:
    """The compression chapter's trained-model measurements on the seed-1 Balanced: {"model", "sentences",
    "valid_nll", "uniform_nll", "layers": [per decoder layer: stage errors, Eq. 6 gaps, entropy, alpha],
    "conversion": {variant: validation NLL}} (stored by the engine's ``approximations`` analysis)."""
    return store.analysis("approximations")


def speed_runs(store: Store, mode: str = "eager") -> list[str]:
    """The GPU runs the speed verdicts read in ``mode``: the runs of the newest code that meet the speed standard
    for CAN and Balanced (else the newest code's runs). Table 2's speed column reads the same."""
    rows = timed_runs(store, "can", "balanced", mode)
    return [r["run"] for r in by_code(rows)[0]] if rows else []
