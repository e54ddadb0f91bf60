"""The GPU page's numbers: how long the stored runs of the `small` plan took to train, per device call that trained
them (each run's ``wall_s``), how many runs the plan holds, and what one run would take on the 2-core CPU whose
training rate is stored (``book/results/cpu/train_small.json``)."""

from __future__ import annotations

from typing import Any

from canlib.catalogue import ALL_SYSTEMS, DIRECTION_SYSTEMS, planned_seeds
from canlib.repro.results.files import load_result
from canlib.repro.studies.store import Store


def run_times(store: Store) -> list[dict[str, Any]]:
    """One row per (device, commit) that trained stored runs of the main corpus: how many runs, their updates and the
    shortest and longest training time of a run."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for system in ALL_SYSTEMS:
        for seed in store.stored_seeds(system):
            result, prov = store.run(system, seed)
            groups.setdefault((prov["device"], str(prov["commit"])[:7]), []).append(result["training"])
    return [
        {
            "device": device,
            "commit": commit,
            "runs": len(rows),
            "updates": rows[0]["step"],
            "shortest run (s)": round(min(r["wall_s"] for r in rows)),
            "longest run (s)": round(max(r["wall_s"] for r in rows)),
        }
        for (device, commit), rows in sorted(groups.items(), key=lambda item: -len(item[1]))
    ]


def values(store: Store) -> dict[str, Any]:
    """The runs the `small` plan holds, and the hours one CAN run would take on the stored 2-core CPU rate."""
    spec = store.spec
    main = sum(len(planned_seeds(store.scale, s)) for s in ALL_SYSTEMS)
    directions = sum(len(planned_seeds(store.scale, s, c)) for c in spec.directions for s in DIRECTION_SYSTEMS)
    cpu, prov = load_result(store.measurements / "cpu" / "train_small.json")
    per_update = cpu["runs"]["small-can"]["seconds_per_update"]
    return update_profile(store) | {
        "plan_runs": main + directions,
        "cpu_hours": per_update * spec.train["max_steps"] / 3600,
        "cpu_device": prov["device"],
    }


def update_profile(store: Store) -> dict[str, Any]:
    """One profiled training update of the `small` CAN (``scripts/gpu_profile.sh``, the last stored run that has one):
    its tokens, GPU kernel time, launches and wall time, and the run's GPU and commit."""
    runs = [r for r in store.gpu_runs_with("profile") if "train_small-can" in store.gpu_profile(r)[0]]
    if not runs:
        return {}
    newest = max(runs, key=lambda r: str(store.gpu_profile(r)[1].get("measured_at") or store.gpu_profile(r)[1]["date"]))
    cases, prov = store.gpu_profile(newest)
    case = cases["train_small-can"]
    return {
        "update_tokens": case["tokens"],
        "update_kernel_ms": case["gpu_kernel_ms"],
        "update_launches": case["kernel_launches"],
        "update_wall_ms": case["wall_ms"],
        "update_gpu": prov["device"].removeprefix("NVIDIA ").split()[0],
        "update_commit": str(prov["commit"])[:7],
    }
