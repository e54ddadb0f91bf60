"""The training chapter (Figure 8): final validation losses over seeds against the paper's, whether training had
stopped learning, what twice the updates do to the `small` models (the stored 2x runs), what checkpoint averaging
averages, and what the paper's `full` recipe would cost on the stored GPUs.

BLEU here is tokenized BLEU (``scores.<split>.tok_bleu``), the paper's metric and the one the results chapter
judges; every stored run also records sacreBLEU (``scores.<split>.bleu``). Every verdict is the claims registry's
(:mod:`repro.studies.claims`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

import numpy as np

from _code import gpu_results as gpu
from _code.marks import marks
from _code.prose import by_verdict, lead_sentence, names
from _code.readers import describe_provenances
from canlib.catalogue import LABELS, scale_spec
from canlib.data.corpora import get_corpus
from canlib.model.config import preset
from repro.studies import paper
from repro.studies.claims import judged
from repro.studies.store import Store
from repro.studies.verdict import HOLDS, ON_PAR

SYSTEMS = ("baseline", "balanced", "can")
BUDGET_SYSTEMS = ("balanced", "can")  # the systems the stored 2x runs cover
GPUS = 8  # the paper trains on 8 GPUs
LOSS_CLAIMS = ("loss-balanced-above-baseline", "loss-can-above-balanced", "loss-still-falling")
BUDGET_CLAIMS = ("budget-adds-balanced", "budget-adds-can", "can-within-0.5")


def _valid_rows(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in log if r.get("valid_loss") is not None]


def logs(store: Store) -> dict[str, list[list[dict[str, Any]]]]:
    """The training log of every read seed of the three systems (at tiny: seed 1, trained now)."""
    return {system: store.logs(system) for system in SYSTEMS}


def values(store: Store) -> dict[str, Any]:
    """Figure 8 at the store's scale (validation loss at the last validation, its order and gaps against the paper's
    last epoch, whether it was still falling) and, from the stored `small` runs whatever the scale is, the 2x budget,
    checkpoint averaging and the cost of ``full``."""
    small = Store("small", store.root if store.explicit else None)
    beam = store.result(store.runs("can").files[0])[0]["beam"]  # the beam of the translations the page shows
    return {
        **loss_values(store),
        **undertraining_values(small),
        **cost_values(store=small),
        **converged_values(small),
        "beam_shown": beam,
    }


def converged_curves(small: Store) -> dict[str, dict[int, tuple[float, float | None]]]:
    """The validation curves of the stored 2x runs (Balanced and CAN, every seed), the evidence the converged
    recipe is read from: run label -> {update: (validation loss, greedy validation BLEU)}."""
    curves = {}
    for s in BUDGET_SYSTEMS:
        for seed, f in enumerate(small.budget_runs(s, 2).files, 1):
            rows = _valid_rows(small.log(f))
            curves[f"{LABELS[s]} seed {seed}"] = {r["step"]: (r["valid_loss"], r.get("valid_bleu")) for r in rows}
    return curves


def converged_values(small: Store) -> dict[str, Any]:
    """Where the mean validation loss of the 2x runs bottoms out, and the converged recipe that stops there (the
    catalogue's ``Scale.recipe("converged")``, which a test holds to this optimum)."""
    curves = converged_curves(small)
    steps = sorted(set.intersection(*(set(c) for c in curves.values())))
    mean = [statistics.fmean(c[s][0] for c in curves.values()) for s in steps]
    at = mean.index(min(mean))
    lowest = Counter(min(steps, key=lambda s: c[s][0]) for c in curves.values())
    recipe = scale_spec("small").recipe("converged")
    return {
        "conv_runs": len(curves),
        "conv_best": steps[at],
        "conv_min": mean[at],
        "conv_every": recipe["valid_every"],
        "conv_after": mean[at + 1] - mean[at] if at + 1 < len(steps) else float("nan"),
        "conv_minima": " and ".join(f"{s:,} ({n} runs)" for s, n in sorted(lowest.items())),
        "conv_steps": recipe["max_steps"],
        "conv_average": recipe["average_last"],
        "conv_from": recipe["max_steps"] - recipe["valid_every"] * (recipe["average_last"] - 1),
    }


def loss_values(store: Store) -> dict[str, Any]:
    fig8 = paper.paper_numbers()["fig8_curves_en-de"]
    read = logs(store)
    finals = {s: [_valid_rows(log)[-1]["valid_loss"] for log in runs] for s, runs in read.items()}
    mean = {s: statistics.fmean(v) for s, v in finals.items()}
    last = {s: fig8["valid"][LABELS[s]][-1] for s in SYSTEMS}
    out: dict[str, Any] = {
        "loss_seeds": min(len(v) for v in finals.values()),
        "order_ours": " < ".join(LABELS[s] for s in sorted(SYSTEMS, key=mean.get)),
        "order_paper": " < ".join(LABELS[s] for s in sorted(SYSTEMS, key=last.get)),
        **{f"valid_{s}": mean[s] for s in SYSTEMS},
    }
    for a, b in (("balanced", "baseline"), ("can", "balanced")):
        diff = mean[a] - mean[b]
        out |= {
            f"loss_gap_{a}_{b}": diff,
            f"loss_gap_{a}_{b}_relative": diff / mean[a],
            f"paper_loss_gap_{a}_{b}": last[a] - last[b],
            f"paper_loss_gap_{a}_{b}_relative": (last[a] - last[b]) / last[a],
        }
    falling = judged(store)["loss-still-falling"]
    steps = falling.sets[0]["steps"] if falling.sets else [0, 0]
    drops = [d for r in falling.sets for d in r.get("drops", [r["value"]])]  # every run's, not the systems' means
    out |= {
        "drop_from": steps[0],
        "drop_to": steps[1],
        "drop_min": min(drops, default=float("nan")),
        "drop_max": max(drops, default=float("nan")),
        "last_lr": [r["lr"] for r in read[SYSTEMS[-1]][-1] if r.get("lr") is not None][-1],  # one schedule for all
    }
    found = judged(store)
    out["takeaway_sentence"] = takeaway(*(found[c].word for c in LOSS_CLAIMS))
    return out | marks(store, LOSS_CLAIMS)


def takeaway(balanced: str, can: str, falling: str) -> str:
    """The chapter's one sentence, from the verdicts of its three loss claims."""
    if balanced == can == HOLDS:
        order = "As in the paper's Figure 8, each compression ends as a weaker language model: Balanced's validation "
        order += "loss ends above the Baseline's and CAN's above Balanced's"
    else:
        balanced_says = by_verdict(
            balanced,
            "Balanced's validation loss ends above the Baseline's",
            "Balanced's validation loss does not end above the Baseline's",
            "whether Balanced's validation loss ends above the Baseline's is open",
        )
        can_says = by_verdict(
            can,
            "CAN's ends above Balanced's",
            "CAN's does not end above Balanced's",
            "whether CAN's ends above Balanced's is open",
        )
        order = f"{balanced_says[0].upper()}{balanced_says[1:]}, and {can_says}"
    still = by_verdict(
        falling,
        "; the losses were still falling when training stopped",
        "; the losses had stopped falling when training stopped",
        "",
    )
    return f"{order}{still}."


# -- twice the budget: the stored 2x runs of the beyond chapter's budget study ----------------------


def _curve(store: Store, files: tuple[str, ...], step: int, key: str) -> float:
    """The mean over seeds of ``key`` at the validation of update ``step``."""
    return statistics.fmean(next(r[key] for r in _valid_rows(store.log(f)) if r["step"] == step) for f in files)


LOSS_KEYS = ("step", "train_loss", "train_nll", "lr", "valid_loss", "valid_nll")


def _losses(log: list[dict[str, Any]], last: int) -> list[tuple]:
    """The losses and learning rates a log recorded up to update ``last`` (not its timings or BLEU)."""
    return [tuple(row.get(k) for k in LOSS_KEYS) for row in log if row["step"] <= last]


def undertraining_values(store: Store) -> dict[str, Any]:
    """What 2x does to each system (the registry's "twice the updates adds BLEU", its test2016 numbers), the 2x
    learning curves at the updates where a 1x run's averaged checkpoints lie and at their end, where the validation
    loss is lowest and where greedy validation BLEU is highest, in how many 2x runs the validation loss turns up at
    the last validation, and whether each 2x run is its 1x run continued (same log up to the 1x budget)."""
    runs = {(s, f): store.budget_runs(s, f) for s in BUDGET_SYSTEMS for f in (1, 2)}
    one = store.result(runs["balanced", 1].files[0])[1]["budget"]
    steps_1x = int(one["max_steps"])
    averaged = [steps_1x - k * int(one["valid_every"]) for k in reversed(range(int(one["average_last"])))]
    two = store.result(runs["balanced", 2].files[0])[1]
    out: dict[str, Any] = {
        "updates_1x": steps_1x,
        "updates_2x": int(two["budget"]["max_steps"]),
        "averaged_first": averaged[0],
        "averaged_last": averaged[-1],
        "averaged_count": len(averaged),
        "valid_every": int(one["valid_every"]),
        "budget_commit": str(two["commit"])[:7],
        "budget_device": two["device"],
    }
    continued, loss_up, differ = [], 0, []
    for system in BUDGET_SYSTEMS:
        x1, x2 = runs[system, 1], runs[system, 2]
        out |= {f"{system}_x1": x1.mean("test"), f"{system}_x2": x2.mean("test"), f"{system}_seeds_x2": len(x2.seeds)}
        out |= judged(store)[f"budget-adds-{system}"].values(f"{system}_gain")
        steps = [r["step"] for r in _valid_rows(store.log(x2.files[0]))]
        losses = {step: _curve(store, x2.files, step, "valid_loss") for step in steps}
        bleus = {step: _curve(store, x2.files, step, "valid_bleu") for step in steps}
        for name, step in (("averaged_first", averaged[0]), ("averaged_last", averaged[-1]), ("last", steps[-1])):
            out[f"{system}_bleu_{name}"] = bleus[step]
        lowest = min(losses, key=losses.get)
        out |= {
            f"{system}_bleu_rise": bleus[averaged[-1]] - bleus[averaged[0]],
            f"{system}_loss_lowest_at": lowest,
            f"{system}_loss_rise_after": losses[steps[-1]] - losses[lowest],
            f"{system}_bleu_highest_at": max(bleus, key=bleus.get),
        }
        for file, seed in zip(x2.files, x2.seeds):
            log = _valid_rows(store.log(file))
            loss_up += log[-1]["valid_loss"] > log[-2]["valid_loss"]
            first = x1.files[x1.seeds.index(seed)]
            continued.append(_losses(store.log(file), steps_1x) == _losses(store.log(first), steps_1x))
            if not continued[-1]:
                at = [
                    next(r["valid_loss"] for r in _valid_rows(store.log(f)) if r["step"] == steps_1x)
                    for f in (file, first)
                ]
                devices = [store.result(f)[1]["device"] for f in (file, first)]
                differ.append((f"{LABELS[system]} seed {seed}", abs(at[0] - at[1]), *devices))
    out |= {
        "continued_runs": sum(continued),
        "budget_runs": len(continued),
        "loss_up": loss_up,
        "margin": ON_PAR,
        "averaging_status": averaging_status(store),
        "can_lead": lead_sentence(
            judged(store)["can-within-0.5"],
            "Where both exist, the {budget} runs decide ({seeds} seeds of every system) and the {others} runs are "
            "shown beside them: {rule}.",
        ),
        "continued_sentence": continued_sentence(sum(continued), differ, steps_1x),
    }
    return out | marks(store, BUDGET_CLAIMS)


def continued_sentence(same: int, differ: list[tuple[str, float, str, str]], updates: int) -> str:
    """Which longer runs log their plan run's losses up to the plan's budget, and by how much the others' validation
    loss at that update differs (``differ``: run, difference, its device, its plan run's device), as Markdown."""
    if not differ:
        return f"The stored logs agree: each longer run's validation loss at update {updates:,} is its plan run's."
    runs = names([d[0] for d in differ])
    where = (
        f", each trained on {names(sorted({d[2] for d in differ}))} where its plan run was trained on "
        f"{names(sorted({d[3] for d in differ}))} (the same seed and schedule on another GPU)"
        if all(d[2] != d[3] for d in differ)
        else ""
    )
    return (  # two paragraphs, each with few enough numbers to read as a sentence
        f"The stored logs agree for {same} of the {same + len(differ)} longer runs: their losses up to update "
        f"{updates:,} are their plan runs' to the last digit.\n\nAt that update, the validation loss of {runs} "
        f"differs from its plan run's by up to {max(d[1] for d in differ):.3f}{where}."
    )


def averaging_status(store: Store) -> str:
    """Whether the ``averaging`` study (each 1x run's last checkpoint scored alone) is stored for Balanced and CAN:
    no stored run keeps its checkpoints, so last-against-average needs that GPU run."""
    stored = [store.study_runs("averaging", s, "last") for s in ("balanced", "can")]
    return "stored" if all(r is not None and len(r.seeds) >= 2 for r in stored) else "not stored yet"


# -- what `full` costs ---------------------------------------------------------------------------------


def full_cost(gpus: int = GPUS, epochs: int | None = None, store: Store | None = None) -> dict[str, Any]:
    """Target tokens per WMT14 epoch (a lower bound), the epochs, and for each stored d=512 training rate the
    hours on ``gpus`` such GPUs.

    Tokens per epoch: the paper's Table 1 gives 4.5M pairs and 220M words; 220M / 4.5M is about 49 words a pair,
    so the count covers both sides, and the target (German) side is taken as half of it. Each target sentence adds
    an EOS. Pieces of the 32k BPE are at least words, so this is a lower bound (the corpus is not in this
    repository, so its pieces per word are not measured). Epochs: the paper's Figure 8 trains 21 (``epochs``
    overrides). Throughput: each stored d=512 training rate (``training_32k``, ``training_4k``) of one GPU times
    ``gpus`` (perfect scaling)."""
    store = store or Store("small")
    table1 = paper.paper_numbers()["table1_data"]
    wmt = dict(zip(table1["_columns"], table1["wmt14_en-de"]))  # Table 1's row, read by column name
    pairs, words = wmt["train_sentences"], wmt["train_words"]
    tokens = words / 2 + pairs
    epochs = epochs or max(paper.paper_numbers()["fig8_curves_en-de"]["epochs"])
    rows = []
    for kind in ("training_32k", "training_4k"):
        for run in store.gpu_runs_with(kind):
            rates, prov = store.gpu(kind, run, "runs")  # training throughput per system
            for system, r in rates.items():
                rate = r["target_tokens_per_sec"]
                rows.append(
                    {
                        "kind": kind,
                        "batch": prov["max_tokens"],
                        "run": run,
                        "label": f"{gpu.gpu_label(prov)} {str(prov['commit'])[:7]}",
                        "system": system,
                        "tok_s": rate,
                        "peak_memory_gib": r.get("peak_memory_gib"),
                        "hours": tokens * epochs / (gpus * rate) / 3600,
                    }
                )
    return {"pairs": pairs, "words": words, "tokens_per_epoch": tokens, "epochs": epochs, "gpus": gpus, "rows": rows}


def cost_values(gpus: int = GPUS, store: Store | None = None) -> dict[str, Any]:
    c = full_cost(gpus, store=store)
    full = scale_spec("full").train
    cap = full["max_epochs"]
    return {
        "wmt_pairs_m": c["pairs"] / 1e6,
        "wmt_words_m": c["words"] / 1e6,
        "tokens_per_epoch_m": c["tokens_per_epoch"] / 1e6,
        "cost_epochs": c["epochs"],
        "cost_gpus": gpus,
        "full_max_epochs": cap,
        "full_patience": full["patience"],
        "epochs_factor": cap / c["epochs"],
        "cost_rows": len(c["rows"]),
        **_rate_spread(c["rows"]),
    }


def _rate_spread(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How far the stored 32,768-token Baseline rates lie apart, and what differed between the runs that measured
    them (device, commit, peak memory, the CAN/Baseline ratio): the cost table's rates are not one quantity measured
    twice."""
    base = {r["run"]: r for r in rows if r["kind"] == "training_32k" and r["system"] == "baseline"}
    can = {r["run"]: r for r in rows if r["kind"] == "training_32k" and r["system"] == "can"}
    if len(base) < 2:
        return {}
    fast, slow = max(base.values(), key=lambda r: r["tok_s"]), min(base.values(), key=lambda r: r["tok_s"])
    ratio = {run: can[run]["tok_s"] / r["tok_s"] for run, r in base.items() if run in can}
    return {
        "rate_spread": fast["tok_s"] / slow["tok_s"],
        "rate_fast_memory": fast["peak_memory_gib"],
        "rate_slow_memory": slow["peak_memory_gib"],
        "rate_fast_can_ratio": ratio.get(fast["run"], float("nan")),
        "rate_slow_can_ratio": ratio.get(slow["run"], float("nan")),
    }


def cost_frame(gpus: int = GPUS, store: Store | None = None):
    """The hours of the paper's recipe on ``gpus`` GPUs of each stored training rate, one row per rate."""
    import pandas as pd

    c = full_cost(gpus, store=store)
    rows = [
        {
            "run": r["label"],
            "tokens per update": r["batch"],
            "system": LABELS.get(r["system"], r["system"]),
            "target tok/s (one GPU)": round(r["tok_s"]),
            f"hours on {gpus} GPUs": r["hours"],
        }
        for r in c["rows"]
    ]
    return pd.DataFrame(rows).set_index(["run", "tokens per update", "system"])


# -- the recipes the chapter's table shows and the curves of its figure -------------------------------------

# where the full recipe's label smoothing comes from, and how canlib's loss differs from fairseq's today
SMOOTHING = (
    "fairseq's WMT14 Transformer recipe sets it, its criterion's default is 0; not stated in the paper. canlib "
    "spreads it over all V words, as fairseq's earlier criterion did; its current one spreads it over the V\u22121 "
    "words other than the target"
)


def training_recipes(scales: tuple[str, ...] = ("tiny", "small", "full")) -> list[dict[str, Any]]:
    """What each scale trains, one row per scale, from the code that trains it (``full`` is the paper's recipe):
    width and heads, corpus, its vocabulary and length filter, peak learning rate, warm-up, tokens per update,
    precision, when training stops, what is averaged."""
    setup = paper.paper_numbers()["setup"]
    rows = []
    for scale in scales:
        spec = scale_spec(scale)
        t = spec.train
        model = preset(spec.preset("can"))
        corpus = get_corpus(spec.corpus).scales[spec.corpus_scale]
        tokens = t["max_tokens"] * t.get("update_freq", 1)
        stop = (
            f"{t['max_steps']:,} updates"
            if t.get("max_steps")
            else f"up to {t['max_epochs']} epochs (patience {t.get('patience')})"
        )
        if t.get("average_last") and t.get("valid_every"):
            averaged = f"last {t['average_last']} checkpoints, {t['valid_every']:,} updates apart"
        else:
            averaged = "last 5 epochs' checkpoints (the paper)"
        vocabulary = f"{corpus.vocab_size:,} joint SentencePiece BPE"
        if scale == "full":
            vocabulary += f" (the paper: {setup['bpe_merges']:,} BPE merges)"
        rows.append(
            {
                "scale": scale,
                "d": model.d_model,
                "heads": str(model.heads) + (f" (the paper: {setup['heads']})" if scale == "full" else ""),
                "corpus": f"{spec.corpus} ({spec.corpus_scale})",
                "vocabulary": vocabulary,
                "length filter": f"1-{corpus.max_len} subwords a side, the longer at most {corpus.max_ratio:g} x the "
                "shorter"
                + (
                    f" (the paper: at most {setup['max_subwords']} subwords; the ratio is fairseq's WMT14 recipe)"
                    if scale == "full"
                    else ""
                ),
                "peak lr": f"{t['lr']:g}",
                "warm-up updates": f"{t['warmup']:,}",
                "tokens per update": f"{tokens:,}"
                + (f" ({t['max_tokens']:,} x {t['update_freq']})" if t.get("update_freq") else ""),
                "precision": training_precision(scale),
                "stops after": stop,
                "weights averaged": averaged,
                "label smoothing": f"{t.get('label_smoothing', 0.1):g}"
                + (f" ({SMOOTHING})" if scale == "full" else ""),
            }
        )
    return rows


def training_precision(scale: str) -> str:
    """How a scale trains, in words: at tiny fp32 on a CPU (its definition); at small what its stored runs record; at
    full the paper's mixed precision (canlib would train it in bf16 on CUDA)."""
    if scale == "tiny":
        return "fp32 (CPU)"
    if scale == "full":
        return "mixed precision, fp16 (the paper); canlib: bf16 on CUDA"
    store = Store(scale)
    seeds = store.stored_seeds("can")
    recorded = store.run("can", seeds[0])[1].get("precision") if seeds else None
    return f"{recorded} (the stored runs)" if recorded else "bf16 on CUDA, fp32 on a CPU"


def seed_curves(logs: list[list[dict[str, Any]]], column: str, every: int | None = None) -> dict[str, np.ndarray]:
    """Mean, sample sd (0 for one seed), min and max over seeds of ``column`` ("train_loss" or "valid_loss") at
    the updates every log recorded it. ``every`` (the run's ``log_every``) keeps only updates that are its
    multiples: the trainer also logs the few updates that end an epoch, whose short window would draw a zigzag."""
    if not logs:
        raise ValueError("seed_curves: no logs")
    series = [
        {r["step"]: r[column] for r in log if r.get(column) is not None and (not every or r["step"] % every == 0)}
        for log in logs
    ]
    steps = sorted(set.intersection(*(set(s) for s in series)))
    if not steps:
        raise ValueError(f"seed_curves: the logs share no update with a {column} record")
    values = np.array([[s[step] for step in steps] for s in series], dtype=float)  # (seeds, steps)
    sd = values.std(axis=0, ddof=1) if len(logs) > 1 else np.zeros(len(steps))
    return {
        "step": np.array(steps),
        "mean": values.mean(axis=0),
        "sd": sd,
        "min": values.min(axis=0),
        "max": values.max(axis=0),
        "seeds": len(logs),
    }


def runs_line(store: Store, systems: tuple[str, ...]) -> str:
    """One line per system for under a figure of several seeds: its seeds, and the devices, commits and dates that
    trained them (at tiny: the seed-1 run trained on this machine)."""
    lines = []
    for system in systems:
        seeds = store.seeds(system)
        d = describe_provenances([store.run(system, seed)[1] for seed in seeds])
        lines.append(
            f"{LABELS[system]}: seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}, "
            f"trained on {d['device']} at commit {d['commit']}, {d['date']} (scale={store.scale})"
        )
    return "\n".join(lines)
