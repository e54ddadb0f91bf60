"""The GPU page's numbers: how long the stored runs of the `small` plan took to train, per device call that trained
them (each run's ``wall_s``), how many runs the plan holds, and what one run would take on the 2-core CPU whose
training rate is stored (``book/results/cpu/train_small.json``); and its table of the trainer's throughput options."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from _code.gpu_results import gpu_label
from _code.speed import latest_run
from canlib.catalogue import ALL_SYSTEMS
from canlib.training.cli import flag
from canlib.training.config import TrainConfig
from repro.results.files import load_result
from repro.results.plan import rows
from repro.studies.store import Store

# The trainer's throughput options, off by default: a TrainConfig field, the value a GPU run gives it (None: a
# switch) and what it changes; cells are HTML (code in <code>)
THROUGHPUT_OPTIONS = (
    (
        "pad_multiple",
        8,
        "shape buckets: padded lengths rounded up to a multiple of 8, so an epoch has a handful of batch shapes "
        "instead of one per batch, and kernels that prepare a plan per shape (cuDNN's attention, "
        "<code>torch.compile</code>) prepare a few",
    ),
    (
        "sdpa_backend",
        "efficient",
        "the attention kernels: PyTorch's memory-efficient kernels build no plan per shape",
    ),
    (
        "deterministic",
        None,
        "deterministic kernels only (PyTorch then never picks cuDNN's attention), so that a resumed GPU run equals "
        "an uninterrupted one bit for bit",
    ),
    (
        "loss_vocab_block",
        2048,
        "the label-smoothed loss over tiles of the vocabulary with a running log-sum-exp: no (tokens x vocabulary) "
        "tensor",
    ),
    (
        "compile",
        None,
        "<code>torch.compile</code> of the model (and of the tiled loss's arithmetic): fewer, fused kernels",
    ),
)


def options_frame():
    """The page's table of the throughput options: each TrainConfig field, its ``canlib train`` flag as one token
    (``--pad-multiple=8``, which never breaks across lines) and what it changes. A name TrainConfig lacks is an
    error, not a row that names an option the trainer does not have."""
    import pandas as pd

    known = {f.name for f in fields(TrainConfig)}
    rows = []
    for name, value, changes in THROUGHPUT_OPTIONS:
        if name not in known:
            raise ValueError(f"throughput option {name!r}: TrainConfig has no such field")
        given = flag(name) if value is None else f"{flag(name)}={value}"
        rows.append(
            {"TrainConfig field": f"<code>{name}</code>", "flag": f"<code>{given}</code>", "what it changes": changes}
        )
    return pd.DataFrame(rows)


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
    cpu, prov = load_result(store.measurements / "cpu" / "train_small.json")
    per_update = cpu["runs"]["small-can"]["seconds_per_update"]
    return update_profile(store) | {
        "plan_runs": sum(len(r.seeds) for r in rows(store.scale)),
        "cpu_hours": per_update * spec.train["max_steps"] / 3600,
        "cpu_device": prov["device"],
    }


def update_profile(store: Store) -> dict[str, Any]:
    """One profiled training update of the `small` CAN (``scripts/gpu_profile.sh``, the last stored run that has one):
    its tokens, GPU kernel time, launches and wall time, and the run's GPU and commit."""
    try:
        cases, prov = store.gpu_profile(latest_run(store, "profile", need="train_small-can"))
    except FileNotFoundError:
        return {}
    case = cases["train_small-can"]
    return {
        "update_tokens": case["tokens"],
        "update_kernel_ms": case["gpu_kernel_ms"],
        "update_launches": case["kernel_launches"],
        "update_wall_ms": case["wall_ms"],
        "update_gpu": gpu_label(prov),
        "update_commit": str(prov["commit"])[:7],
    }
