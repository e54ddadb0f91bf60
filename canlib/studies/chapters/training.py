"""The training chapter (Figure 8): final validation losses over seeds against the paper's, whether training had
stopped learning, what twice the updates do to the `small` models (the stored 2x runs), what checkpoint averaging
averages, the H200 run beside the plan's, and what the paper's `full` recipe would cost on the stored GPUs.

BLEU here is tokenized BLEU on test2016 (``scores.test.tok_bleu``), the paper's metric and the one the results
chapter judges; every stored run also records sacreBLEU (``scores.test.bleu``), which differs in the second decimal.
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from canlib.io import results_dir
from canlib.model.config import LABELS
from canlib.studies import evidence as ev
from canlib.studies.gpu_results import available_runs, gpu_dir, gpu_training, gpu_translation
from canlib.studies.paper import paper_numbers
from canlib.studies.quality import run_result, stored_seeds
from canlib.studies.results import load_result
from canlib.studies.scales import scale_spec
from canlib.studies.scorecard import K_SPREAD, MIN_SEEDS, NOT_RUN, NOT_TESTED, interval_verdict, seed_difference
from canlib.studies.verdict import ON_PAR

SYSTEMS = ("baseline", "balanced", "can")
METRIC = "tok_bleu"  # tokenized BLEU, the paper's metric
SPLITS = ("valid", "test", "test2017_flickr", "test2017_mscoco")
SPLIT_NAMES = {"valid": "valid (val2016)", "test": "test2016", "test2017_flickr": "test2017 Flickr",
               "test2017_mscoco": "test2017 MSCOCO"}
BUDGET_SYSTEMS = ("balanced", "can")  # the systems the stored 2x runs cover
GPUS = 8  # the paper trains on 8 GPUs


def _verdict(a: list[float], b: list[float], ok) -> tuple[float, float | None, str]:
    """(mean(a) - mean(b), K_SPREAD standard errors, the book's verdict), or no spread and ``not tested here``
    with fewer than MIN_SEEDS seeds."""
    if min(len(a), len(b)) < MIN_SEEDS:
        return statistics.fmean(a) - statistics.fmean(b), None, NOT_TESTED
    diff, se = seed_difference(a, b)
    return diff, K_SPREAD * se, interval_verdict(diff - K_SPREAD * se, diff + K_SPREAD * se, ok)


def _valid_rows(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in log if r.get("valid_loss") is not None]


def logs(scale: str, root: Path | None = None) -> dict[str, list[list[dict[str, Any]]]]:
    """The training log of every seed of the three systems (at tiny: seed 1, trained now)."""
    out = {}
    for system in SYSTEMS:
        seeds = [1] if scale == "tiny" and root is None else stored_seeds(system, scale, root=root)
        out[system] = [run_result(system, scale, seed, root=root)[0]["log"] for seed in seeds]
    return out


def values(scale: str, root: Path | None = None) -> dict[str, Any]:
    """Figure 8 at ``scale`` (validation loss at the last validation, its order and gaps against the paper's last
    epoch, whether it was still falling) and, from the stored `small` runs whatever ``scale`` is, the 2x budget,
    checkpoint averaging, the H200 run and the cost of ``full``."""
    return {**loss_values(scale, root), **undertraining_values(root), **h200_values(root), **cost_values()}


def loss_values(scale: str, root: Path | None = None) -> dict[str, Any]:
    paper = paper_numbers()["fig8_curves_en-de"]
    finals = {s: [_valid_rows(log)[-1]["valid_loss"] for log in runs] for s, runs in logs(scale, root).items()}
    mean = {s: statistics.fmean(v) for s, v in finals.items()}
    last = {s: paper["valid"][LABELS[s]][-1] for s in SYSTEMS}
    out: dict[str, Any] = {"loss_scale": scale, "loss_seeds": min(len(v) for v in finals.values()),
                           "paper_epochs": len(paper["epochs"]),
                           "order_ours": " < ".join(LABELS[s] for s in sorted(SYSTEMS, key=mean.get)),
                           "order_paper": " < ".join(LABELS[s] for s in sorted(SYSTEMS, key=last.get))}
    for s in SYSTEMS:
        out[f"valid_{s}"] = mean[s]
    for a, b in (("balanced", "baseline"), ("can", "balanced")):
        diff, spread, verdict = _verdict(finals[a], finals[b], lambda d: d > 0)
        out |= {f"loss_gap_{a}_{b}": diff, f"loss_gap_{a}_{b}_relative": diff / mean[a],
                f"paper_loss_gap_{a}_{b}": last[a] - last[b],
                f"paper_loss_gap_{a}_{b}_relative": (last[a] - last[b]) / last[a], f"loss_above_{a}_{b}": verdict}
    drops, lrs = [], []
    for runs in logs(scale, root).values():
        for log in runs:
            valid = _valid_rows(log)
            drops.append((valid[-2]["step"], valid[-1]["step"], valid[-2]["valid_loss"] - valid[-1]["valid_loss"]))
            lrs.append([r["lr"] for r in log if r.get("lr") is not None][-1])
    lows, highs = min(d[2] for d in drops), max(d[2] for d in drops)
    out |= {"drop_from": drops[0][0], "drop_to": drops[0][1], "drop_min": lows, "drop_max": highs, "drop_runs": len(drops),
            "last_lr": lrs[-1], "still_falling": interval_verdict(lows, highs, lambda d: d > 0)}
    return out


# -- twice the budget: the stored 2x runs of the beyond chapter's budget study ----------------------

def _folder(root: Path | None, *parts: str) -> Path:
    return Path(root or results_dir()).joinpath("small", *parts, "multi30k-en-de")


def budget_runs(root: Path | None = None) -> dict[tuple[str, int], list[tuple[dict[str, Any], dict[str, Any]]]]:
    """{(system, factor): [(result, provenance) per seed]}: the main plan's 1x runs and the budget study's 2x runs
    of Balanced and CAN (``small/beyond/runs/.../budget-<system>-x2-seed<k>.json``)."""
    out = {}
    for system in BUDGET_SYSTEMS:
        out[system, 1] = [load_result(p) for p in sorted(_folder(root, "runs").glob(f"{system}-seed*.json"))]
        out[system, 2] = [load_result(p) for p in sorted(_folder(root, "beyond", "runs").glob(f"budget-{system}-x2-seed*.json"))]
    return out


def _bleu(runs, split: str = "test") -> list[float]:
    return [float(r["scores"][split][METRIC]) for r, _ in runs]


def _curve(runs, step: int, key: str) -> float:
    """The mean over seeds of ``key`` at the validation of update ``step``."""
    return statistics.fmean(next(r[key] for r in _valid_rows(result["log"]) if r["step"] == step) for result, _ in runs)


LOSS_KEYS = ("step", "train_loss", "train_nll", "lr", "valid_loss", "valid_nll")


def _losses(log: list[dict[str, Any]], last: int) -> list[tuple]:
    """The losses and learning rates a log recorded up to update ``last`` (not its timings or BLEU)."""
    return [tuple(row.get(k) for k in LOSS_KEYS) for row in log if row["step"] <= last]


def undertraining_values(root: Path | None = None) -> dict[str, Any]:
    """What 2x does to each system (test2016 gain, interval, verdict of "2x adds BLEU"), the 2x learning curves
    at the updates where a 1x run's averaged checkpoints lie and at their end, where the validation loss is
    lowest, and whether each 2x run is its 1x run continued (same log up to the 1x budget)."""
    runs = budget_runs(root)
    one = runs["balanced", 1][0][1]["budget"]
    steps_1x = int(one["max_steps"])
    averaged = [steps_1x - k * int(one["valid_every"]) for k in reversed(range(int(one["average_last"])))]
    two = runs["balanced", 2][0][1]["budget"]
    out: dict[str, Any] = {"updates_1x": steps_1x, "updates_2x": int(two["max_steps"]),
                           "averaged_first": averaged[0], "averaged_last": averaged[-1], "averaged_count": len(averaged),
                           "valid_every": int(one["valid_every"]),
                           "budget_commit": str(runs["balanced", 2][0][1]["commit"])[:7],
                           "budget_device": runs["balanced", 2][0][1]["device"]}
    continued = []
    for system in BUDGET_SYSTEMS:
        x1, x2 = _bleu(runs[system, 1]), _bleu(runs[system, 2])
        gain, spread, verdict = _verdict(x2, x1, lambda d: d > 0)
        out |= {f"{system}_x1": statistics.fmean(x1), f"{system}_x2": statistics.fmean(x2), f"{system}_seeds_x1": len(x1),
                f"{system}_seeds_x2": len(x2), f"{system}_gain": gain, f"{system}_gain_2se": spread,
                f"{system}_gain_verdict": verdict}
        x2_runs = runs[system, 2]
        valid_steps = [r["step"] for r in _valid_rows(x2_runs[0][0]["log"])]
        for name, step in (("averaged_first", averaged[0]), ("averaged_last", averaged[-1]),
                           ("before_last", valid_steps[-2]), ("last", valid_steps[-1])):
            out[f"{system}_bleu_{name}"] = _curve(x2_runs, step, "valid_bleu")
        out[f"{system}_bleu_rise"] = out[f"{system}_bleu_averaged_last"] - out[f"{system}_bleu_averaged_first"]
        losses = {step: _curve(x2_runs, step, "valid_loss") for step in valid_steps}
        lowest = min(losses, key=losses.get)
        out |= {f"{system}_loss_lowest_at": lowest, f"{system}_loss_rise_after": losses[valid_steps[-1]] - losses[lowest]}
        for result, _ in x2_runs:
            first = next(r for r, _ in runs[system, 1] if r["seed"] == result["seed"])
            continued.append(_losses(result["log"], steps_1x) == _losses(first["log"], steps_1x))
    out |= {"x2_last_step": valid_steps[-1], "x2_before_last_step": valid_steps[-2],
            "continued_runs": sum(continued), "budget_runs": len(continued), "margin": ON_PAR,
            "averaging_status": averaging_status(root)}
    return out


def averaging_status(root: Path | None = None) -> str:
    """Whether the ``averaging`` study (each 1x run's last checkpoint scored alone) is stored for Balanced and CAN:
    no stored run keeps its checkpoints, so last-against-average needs that GPU run."""
    stored = [ev.study_runs("small", "averaging", s, "last", root) for s in ("balanced", "can")]
    return "stored" if all(r is not None and len(r.seeds) >= MIN_SEEDS for r in stored) else NOT_RUN


def budget_gaps(root: Path | None = None) -> list[dict[str, Any]]:
    """One row per evaluation set: CAN - Balanced at 1x and at 2x (mean, K_SPREAD standard errors) and the verdict
    of the scorecard's claim "CAN is within 0.5 BLEU of Balanced" at each budget (the book's one rule)."""
    runs = budget_runs(root)
    rows = []
    for split in SPLITS:
        row: dict[str, Any] = {"set": SPLIT_NAMES[split]}
        for factor in (1, 2):
            diff, spread, verdict = _verdict(_bleu(runs["can", factor], split), _bleu(runs["balanced", factor], split),
                                             lambda d: d >= -ON_PAR)
            row |= {f"{factor}x CAN − Balanced": diff, f"{factor}x ± {K_SPREAD:g} s.e.": spread,
                    f"{factor}x: within {ON_PAR} BLEU?": verdict}
        rows.append(row)
    return rows


# -- the single H200 run -----------------------------------------------------------------------------

def h200_values(root: Path | None = None) -> dict[str, Any]:
    """The one `small-can` trained on an H200 before the plan ran, beside the plan's CAN runs (tokenized BLEU)."""
    run, prov = gpu_translation()
    plan = [load_result(p) for p in sorted(_folder(root, "runs").glob("can-seed*.json"))]
    bleu = _bleu(plan)
    seed1 = next((r, p) for r, p in plan if r["seed"] == 1)
    return {"h200_bleu": float(run["scores"][METRIC]), "h200_valid_loss": float(run["valid_loss"]),
            "h200_commit": str(prov["commit"])[:7], "h200_device": prov["device"],
            "plan_can_mean": statistics.fmean(bleu), "plan_can_sd": statistics.stdev(bleu), "plan_can_seeds": len(bleu),
            "plan_can_min": min(bleu), "plan_can_max": max(bleu), "plan_device": seed1[1]["device"],
            "plan_commit": str(seed1[1]["commit"])[:7],
            "plan_seed1_valid_loss": float(seed1[0]["training"]["last_valid"]["valid_loss"]),
            "plan_seed1_bleu": float(seed1[0]["scores"]["test"][METRIC])}


# -- what `full` costs ---------------------------------------------------------------------------------

def full_cost(gpus: int = GPUS, epochs: int | None = None) -> dict[str, Any]:
    """Target tokens per WMT14 epoch (a lower bound), the epochs, and for each stored d=512 training rate the
    hours on ``gpus`` such GPUs.

    Tokens per epoch: the paper's Table 1 gives 4.5M pairs and 220M words; 220M / 4.5M is about 49 words a pair,
    so the count covers both sides, and the target (German) side is taken as half of it. Each target sentence adds
    an EOS. Pieces of the 32k BPE are at least words, so this is a lower bound (the corpus is not in this
    repository, so its pieces per word are not measured). Epochs: the paper's Figure 8 trains 21 (``epochs``
    overrides). Throughput: each stored d=512 training rate (``training_32k``, ``training_4k``) of one GPU times
    ``gpus`` (perfect scaling)."""
    paper = paper_numbers()
    pairs, words = paper["table1_data"]["wmt14_en-de"][:2]
    tokens = words / 2 + pairs
    epochs = epochs or max(paper["fig8_curves_en-de"]["epochs"])
    rows = []
    for kind in ("training_32k", "training_4k"):
        for run in available_runs():
            if not (gpu_dir(run) / f"{kind}.json").exists():
                continue
            rates, prov = gpu_training(kind, run)
            for system, r in rates.items():
                rate = r["target_tokens_per_sec"]
                rows.append({"kind": kind, "batch": prov["max_tokens"], "run": run, "device": prov["device"],
                             "commit": str(prov["commit"])[:7], "system": system, "tok_s": rate,
                             "hours": tokens * epochs / (gpus * rate) / 3600})
    return {"pairs": pairs, "words": words, "tokens_per_epoch": tokens, "epochs": epochs, "gpus": gpus, "rows": rows}


def cost_values(gpus: int = GPUS) -> dict[str, Any]:
    c = full_cost(gpus)
    cap = scale_spec("full").train["max_epochs"]
    return {"wmt_pairs_m": c["pairs"] / 1e6, "wmt_words_m": c["words"] / 1e6, "tokens_per_epoch_m": c["tokens_per_epoch"] / 1e6,
            "cost_epochs": c["epochs"], "cost_gpus": gpus, "full_max_epochs": cap,
            "full_patience": scale_spec("full").train["patience"], "epochs_factor": cap / c["epochs"],
            "cost_rows": len(c["rows"])}


def cost_frame(gpus: int = GPUS):
    """The hours of the paper's recipe on ``gpus`` GPUs of each stored training rate, one row per rate."""
    import pandas as pd

    c = full_cost(gpus)
    rows = [{"run": f"{device_name(r['device'])} {r['commit']}", "tokens per update": r["batch"],
             "system": LABELS.get(r["system"], r["system"]), "target tok/s (one GPU)": round(r["tok_s"]),
             f"hours on {gpus} GPUs": r["hours"]} for r in c["rows"]]
    return pd.DataFrame(rows).set_index(["run", "tokens per update", "system"])


def device_name(device: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``H100``."""
    match = re.search(r"\b([A-Z]+\d{2,4}[A-Za-z]*)\b", device.removeprefix("NVIDIA "))
    return match.group(1) if match else device
