"""What the stored results show, as sentences whose numbers are computed from them, never typed.

A chapter's prose may not type a result (``tests/test_book_text.py`` refuses an unlabelled decimal), so
every sentence that quotes one of our numbers is a :class:`Finding` built here from the stored results
and rendered by a chapter cell with :func:`markdown`. Each finding keeps the numbers it quotes and the
stored files they come from, so a test can recompute them independently from those files.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from canlib.studies.verdict import split_name  # noqa: F401 (shared: the names of the Multi30k splits)


@dataclass(frozen=True)
class Finding:
    """One sentence of a chapter: ``text`` (Markdown, numbers formatted in), the numbers it quotes by
    name, and the stored results they come from (paths relative to the results folder)."""

    text: str
    values: dict[str, float] = field(default_factory=dict)
    sources: tuple[str, ...] = ()


def markdown(findings: Iterable[Finding]):
    """The findings as a Markdown bullet list, for a chapter cell (tagged ``remove-input``)."""
    from IPython.display import Markdown

    return Markdown("\n".join(f"* {f.text}" for f in findings))


# -- the similarity, attention, errors and training chapters -------------------------------------------

def _setup(scale: str) -> str:
    """What a scale trains, in words, from the code that trains it (for 'what could explain the difference')."""
    from canlib.model.config import preset
    from canlib.studies.scales import scale_spec

    spec = scale_spec(scale)
    t = spec.train
    d = preset(spec.preset("can")).d_model
    steps = f"{t['max_steps']:,} updates" if t.get("max_steps") else f"up to {t.get('max_epochs')} epochs"
    batch = f"{t['max_tokens'] * t.get('update_freq', 1):,} tokens"
    averaged = (f"the last {t['average_last']} step checkpoints ({t['valid_every']:,} updates apart) averaged"
                if t.get("average_last") else "the last checkpoints averaged")
    return f"{spec.corpus} ({spec.corpus_scale}), d={d}, {steps} of {batch} at lr {t['lr']:g}, {averaged}"


def _tiny_note(scale: str, what: str) -> list[Finding]:
    if scale != "tiny":
        return []
    return [Finding(f"This page was built at `tiny` (d=64 models trained for a few minutes on a CPU, which do not "
                    f"translate): {what} demonstrate the method, not the paper's claim. The `small` study, trained "
                    "on a GPU, is what the text below is written for once it is stored.")]


def similarity_findings(scale: str, root: Path | None = None) -> list[Finding]:
    """Figure 2 on our trained 6/6 model against the paper's: the diagonals, and the gap between the two
    matrices that the paper's argument rests on (self/cross inputs closer than cross/FFN inputs)."""
    import numpy as np

    from canlib.studies.analyses import similarity
    from canlib.studies.paper import paper_numbers

    measured, _ = similarity(scale, root=root)
    paper = paper_numbers()["fig2_similarity"]
    src = (f"{scale}/similarity.json", "canlib/resources/paper_numbers.json")
    diag = {(who, key): np.diag(np.array(m[key])) for who, m in (("ours", measured["residual"]), ("paper", paper))
            for key in ("self_vs_cross", "cross_vs_ffn")}
    normed = {key: np.diag(np.array(measured["normalized"][key])) for key in ("self_vs_cross", "cross_vs_ffn")}
    layers = len(diag["ours", "self_vs_cross"])
    ours, theirs = diag["ours", "self_vs_cross"], diag["paper", "self_vs_cross"]
    diff = {who: diag[who, "self_vs_cross"] - diag[who, "cross_vs_ffn"] for who in ("ours", "paper")}
    gap = {who: float(diff[who].mean()) for who in diff}
    left_higher = {who: int((diff[who] > 0).sum()) for who in diff}
    norm_gap = float((normed["self_vs_cross"] - normed["cross_vs_ffn"]).mean())
    higher = int((ours > theirs).sum())
    v = {"ours_diag_min": float(ours.min()), "ours_diag_max": float(ours.max()), "ours_diag_mean": float(ours.mean()),
         "paper_diag_min": float(theirs.min()), "paper_diag_max": float(theirs.max()),
         "paper_diag_mean": float(theirs.mean()), "layers_ours_higher": higher,
         "paper_gap": gap["paper"], "ours_gap": gap["ours"], "normalized_gap": norm_gap,
         "paper_left_higher": left_higher["paper"], "ours_left_higher": left_higher["ours"],
         "paper_layer1_left": float(diag["paper", "self_vs_cross"][0]),
         "paper_layer1_right": float(diag["paper", "cross_vs_ffn"][0]),
         "ours_diff_min": float(diff["ours"].min()), "ours_diff_max": float(diff["ours"].max())}
    where = "at every layer" if higher == layers else f"at {higher} of {layers} layers"
    out = _tiny_note(scale, "these matrices")
    out.append(Finding(
        f"**Self-attention vs cross-attention inputs** (left): our diagonal runs from {v['ours_diag_min']:.3f} to "
        f"{v['ours_diag_max']:.3f} (mean {v['ours_diag_mean']:.3f}), the paper's from {v['paper_diag_min']:.3f} to "
        f"{v['paper_diag_max']:.3f} (mean {v['paper_diag_mean']:.3f}); ours is {'higher' if higher else 'not higher'} "
        f"{where}, so on this measure $X' \\approx X$ holds here "
        + ("at least as well as in the paper." if higher == layers else
           "about as well as in the paper on average." if v["ours_diag_mean"] >= v["paper_diag_mean"] else
           "less well than in the paper."), {k: v[k] for k in ("ours_diag_min", "ours_diag_max", "ours_diag_mean", "paper_diag_min",
                                                 "paper_diag_max", "paper_diag_mean", "layers_ours_higher")}, src))
    seen = ("is not seen here" if gap["ours"] <= 0 else "is weaker here" if gap["ours"] < gap["paper"] / 2
            else "is seen here too")
    out.append(Finding(
        f"**The premise of the figure {seen}.** The paper parallelises self- and cross-attention but merges "
        "cross-attention and FFN by linearity instead, because the right matrix's diagonal is lower: on average its "
        f"diagonals differ by {gap['paper']:+.3f} (left minus right), the left being higher at {left_higher['paper']} "
        f"of {layers} layers (not at layer 1: {v['paper_layer1_left']:.2f} against {v['paper_layer1_right']:.2f}). "
        f"Ours differ by {gap['ours']:+.3f} (left higher at {left_higher['ours']} of {layers} layers; per layer from "
        f"{v['ours_diff_min']:+.3f} to {v['ours_diff_max']:+.3f}): in this model the inputs of cross-attention and "
        f"FFN are {'as alike as' if abs(gap['ours']) < 0.01 else 'more alike than' if gap['ours'] < 0 else 'less alike than'} "
        "those of self- and cross-attention. With the LayerNorm'd inputs the sub-layers "
        f"actually read, the gap is {norm_gap:+.3f}.",
        {k: v[k] for k in ("paper_gap", "ours_gap", "normalized_gap", "paper_left_higher", "ours_left_higher",
                           "paper_layer1_left", "paper_layer1_right", "ours_diff_min", "ours_diff_max")}, src))
    out.append(Finding(
        "One model (seed 1) was measured, so these numbers have no seed spread; the per-layer range above is the only "
        f"measure of their variation. What could explain the difference: our model ({_setup(scale)}) sees short "
        "image captions and far fewer updates than a WMT14 system; the paper measures \"on WMT14 En-De translation "
        "task\" and does not say which model (depth, training) its figure comes from."))
    return out


def attention_findings(scale: str, root: Path | None = None, threshold: float = 0.1,
                       min_positions: int = 30) -> list[Finding]:
    """CAN's gate alpha (the prefix's share of the single softmax): how decisive it is and how it compares with
    what uniform attention would give."""
    import numpy as np

    from canlib.studies.analyses import attention_study

    study, _ = attention_study(scale, root=root)
    src = (f"{scale}/attention.json",)
    hist = study["alpha_histogram"]
    edges = np.array(hist["edges"])
    low, high = edges[1:] <= threshold + 1e-12, edges[:-1] >= 1 - threshold - 1e-12
    out = _tiny_note(scale, "these maps")
    parts, values = [], {}
    for row, counts in zip(study["alpha_summary"], hist["counts"]):
        counts = np.array(counts, dtype=float)
        i = row["layer"]
        share = float((counts[low].sum() + counts[high].sum()) / counts.sum())
        middle = float(counts[(edges[:-1] >= 0.4 - 1e-12) & (edges[1:] <= 0.6 + 1e-12)].sum() / counts.sum())
        values.update({f"layer{i}_extreme_share": share, f"layer{i}_middle_share": middle, f"layer{i}_p10": row["p10"],
                       f"layer{i}_p90": row["p90"], f"layer{i}_mean": row["mean"], f"layer{i}_median": row["median"]})
        parts.append(f"layer {i}: {share:.0%}, against {middle:.0%} between 0.4 and 0.6 (p10 {row['p10']:.2g}, median "
                     f"{row['median']:.2f}, p90 {row['p90']:.3g}, mean {row['mean']:.2f})")
    extreme = min(values[f"layer{r['layer']}_extreme_share"] for r in study["alpha_summary"])
    out.append(Finding(
        f"**CAN's gate is {'bimodal' if extreme > 0.5 else 'not decisive'}.** The share of (target position, head) "
        f"values of $\\alpha$ below {threshold:g} or above {1 - threshold:g}: " + "; ".join(parts) + ". "
        + ("For most queries each head reads almost only the prefix or almost only the source, not a mix of the "
           "two. " if extreme > 0.5 else "")
        + "The means are near 1/2, the conversion's assumption, but few single values of $\\alpha$ are.",
        values, src))
    pos = study["alpha_by_position"]
    count = np.array(pos["count"])
    keep = count >= min_positions
    uniform = np.array(pos["uniform"])
    above = [int((np.array(a)[keep] > uniform[keep]).sum()) for a in pos["alpha"]]
    first = [float(a[0]) for a in pos["alpha"]]
    pv = {"positions": int(keep.sum()), "uniform_first": float(uniform[0]),
          **{f"layer{i + 1}_above_uniform": above[i] for i in range(len(above))},
          **{f"layer{i + 1}_first": first[i] for i in range(len(first))}}
    out.append(Finding(
        f"**Learned, not imposed by the lengths.** At target position 1, where the prefix holds only `<s>`, uniform "
        f"attention would give $\\alpha$ = {uniform[0]:.3f}; the layers give "
        + ", ".join(f"{f:.3f}" for f in first)
        + f". Over the {int(keep.sum())} positions with at least {min_positions} test sentences, the mean $\\alpha$ "
        "is above uniform attention's at " + " and ".join(f"{a}" for a in above)
        + " positions (layers in order): the trained gate gives the prefix more weight than its length alone would.",
        pv, src))
    out.append(Finding(
        f"These are the maps of one CAN model (seed 1) on the {study['test_sentences']:,} test sentences, so they "
        "have no seed spread. The paper does not report $\\alpha$: it argues that one softmax \"resembles\" the "
        "two it replaces. Here one softmax acts as a switch between target and source context per query and head, "
        "something a standard layer, which always adds one unit of each, cannot do."))
    return out


def errors_findings(scale: str, root: Path | None = None, min_sentences: int | None = None) -> list[Finding]:
    """Figure 6: CAN minus Balanced per bucket (only buckets with enough sentences), beside the paper's, and
    against the whole test set's gap and its seed spread."""
    import statistics

    from canlib.studies.analyses import MIN_BUCKET_SENTENCES, bucket_rows, error_buckets
    from canlib.studies.paper import paper_numbers
    from canlib.studies.quality import bleu_by_seed

    min_sentences = MIN_BUCKET_SENTENCES if min_sentences is None else min_sentences
    buckets, _ = error_buckets(scale, root=root)
    paper = paper_numbers()["fig6_error_en-de"]
    src = (f"{scale}/errors.json",)
    rows = {key: bucket_rows(buckets, key, min_sentences=min_sentences) for key in ("frequency", "length")}
    shown = {key: [r for r in rs if r["shown"]] for key, rs in rows.items()}
    hidden = [f"{key} {r['bucket']} ({r['sentences']} sentences)" for key, rs in rows.items() for r in rs if not r["shown"]]
    deltas = [r["delta"] for rs in shown.values() for r in rs]
    losses = sum(d < 0 for d in deltas)
    v = {f"{key} {r['bucket']}": r["delta"] for key, rs in shown.items() for r in rs}
    out = _tiny_note(scale, "these buckets")
    listing = "; ".join(f"by {key}: " + ", ".join(f"{r['bucket']} {r['delta']:+.2f}" for r in rs) for key, rs in shown.items())
    out.append(Finding(
        f"**CAN is below Balanced in {'every' if losses == len(deltas) else f'{losses} of {len(deltas)}'} bucket"
        f"{'' if losses == len(deltas) else 's'} with at least {min_sentences} sentences** (tokenized BLEU, "
        f"CAN − Balanced) {listing}."
        + (f" Not shown, too small to score: {', '.join(hidden)}." if hidden else ""), v, src))
    pv = {}
    for key, series in (("frequency", paper["word_freq_x1e5"]), ("length", paper["length"])):
        for x, b, c in zip(series["x"], series["Balanced"], series["CAN"]):
            pv[f"paper {key} {x}"] = c - b
    worst = {key: min(rs, key=lambda r: r["delta"])["bucket"] for key, rs in shown.items() if rs}
    ahead = sum(d > 0 for d in deltas)
    freq = shown["frequency"]
    paper_like = ahead > 0 and bool(freq) and worst.get("frequency") == freq[-1]["bucket"]
    paper_text = "; ".join(
        f"by {key}: " + ", ".join(f"{x} {pv[f'paper {key} {x}']:+.2f}" for x in series["x"])
        for key, series in (("frequency", paper["word_freq_x1e5"]), ("length", paper["length"])))
    out.append(Finding(
        f"The paper's differences ({paper_text}) change sign: CAN is ahead in one bucket of each, and the paper "
        "reads its figure as CAN doing well on low-frequency sentences and being \"quite good at translating long "
        f"sentences\", its largest loss on the most frequent words. Ours: CAN is ahead in {ahead} bucket"
        f"{'' if ahead == 1 else 's'}, and its largest loss by frequency is in the bucket {worst.get('frequency')} "
        f"(the most frequent is {freq[-1]['bucket'] if freq else 'not shown'}) and by length in {worst.get('length')}: "
        + ("the paper's pattern, in part." if paper_like else "not the paper's pattern."),
        pv, ("canlib/resources/paper_numbers.json",)))
    tok = bleu_by_seed(scale, ["balanced", "can"], metric="tok_bleu", root=root)
    gaps = [c - b for b, c in zip(tok["balanced"], tok["can"])]
    seed1 = gaps[0]
    sv = {"seed1_gap": seed1, "mean_gap": statistics.mean(gaps), "seeds": len(gaps),
          "bucket_gap_min": min(deltas), "bucket_gap_max": max(deltas)}
    if len(gaps) > 1:
        sv.update(sd_balanced=statistics.stdev(tok["balanced"]), sd_can=statistics.stdev(tok["can"]),
                  seed_gap_min=min(gaps), seed_gap_max=max(gaps))
        spread_text = (f"over {len(gaps)} seeds the whole-set gap runs from {sv['seed_gap_min']:+.2f} to "
                       f"{sv['seed_gap_max']:+.2f} (mean {sv['mean_gap']:+.2f}; seed sds {sv['sd_balanced']:.2f} for "
                       f"Balanced, {sv['sd_can']:.2f} for CAN)")
    else:
        spread_text = "only one seed is stored, so the seed spread is unknown"
    out.append(Finding(
        f"These buckets come from the seed-1 runs, which differ by {seed1:+.2f} tokenized BLEU on the whole test set; "
        f"{spread_text}. The bucket gaps run from {sv['bucket_gap_min']:+.2f} to {sv['bucket_gap_max']:+.2f}: what "
        "one seed per bucket establishes is the sign, not a bucket-to-bucket pattern, which would need the buckets "
        "of every seed or a paired bootstrap within each bucket.",
        sv, tuple(f"{scale}/runs/multi30k-en-de/{s}-seed*.json" for s in ("balanced", "can"))))
    lengths = buckets["balanced"]["length"]["sentences"]
    long_text = (f"{sum(lengths[2:])} of its {sum(lengths)} test sentences have more than "
                 f"{buckets['balanced']['length']['labels'][1].split('-')[-1]} source words")
    out.append(Finding(
        "Why ours can differ: the paper buckets by translation length and by average word frequency in units of "
        "$10^5$ over 4.5M pairs and averages sentence BLEU; we bucket by source length and by quantiles of source "
        f"subword frequency and score corpus BLEU. Our corpus ({_setup(scale)}) is image captions: only "
        f"{long_text}, so the length axis barely reaches the paper's middle buckets.",
        {"long_sentences": sum(lengths[2:]), "test_sentences": sum(lengths)}, (f"{scale}/errors.json",)))
    return out


def training_findings(scale: str, systems: tuple[str, ...] = ("baseline", "balanced", "can"),
                      root: Path | None = None) -> list[Finding]:
    """Figure 8 at a scale: final validation losses over seeds, their order and gaps against the paper's, and
    whether the loss was still falling when training stopped."""
    import statistics

    from canlib.model.config import LABELS
    from canlib.studies.paper import paper_numbers
    from canlib.studies.quality import run_result, stored_seeds

    paper = paper_numbers()["fig8_curves_en-de"]
    finals, drops, lrs, sources = {}, [], [], []
    for system in systems:
        seeds = [1] if scale == "tiny" and root is None else stored_seeds(system, scale, root=root)
        finals[system] = []
        for seed in seeds:
            result, _ = run_result(system, scale, seed, root=root)
            valid = [r for r in result["log"] if r.get("valid_loss") is not None]
            finals[system].append(valid[-1]["valid_loss"])
            if len(valid) > 1:
                drops.append((valid[-2]["step"], valid[-1]["step"], valid[-2]["valid_loss"] - valid[-1]["valid_loss"]))
            lrs.append([r["lr"] for r in result["log"] if r.get("lr") is not None][-1])
            sources.append(f"{scale}/runs/{result['corpus']}/{system}-seed{seed}.json")
    mean = {s: statistics.mean(x) for s, x in finals.items()}
    n = {s: len(x) for s, x in finals.items()}
    sd = {s: statistics.stdev(x) if len(x) > 1 else float("nan") for s, x in finals.items()}
    labels = [LABELS[s] for s in systems]
    order = sorted(systems, key=mean.get)
    same_order = order == list(systems)
    separated = all(max(finals[a]) < min(finals[b]) for a, b in zip(systems, systems[1:]))
    v = {f"{s}_mean": mean[s] for s in systems} | {f"{s}_sd": sd[s] for s in systems if n[s] > 1}
    each = ", ".join(f"{LABELS[s]} {mean[s]:.3f}" + (f" ± {sd[s]:.3f}" if n[s] > 1 else " (1 seed)") for s in systems)
    seeds_text = f"{min(n.values())} seeds each" if min(n.values()) > 1 else "one seed each, so no spread"
    out = _tiny_note(scale, "these curves")
    out.append(Finding(
        f"**Validation loss at the end of training** (mean ± sd, {seeds_text}): {each}. "
        + (f"This is the paper's order ({' < '.join(labels)}, Fig. 8)" if same_order
           else f"The paper's order is {' < '.join(labels)}; ours is {' < '.join(LABELS[s] for s in order)}")
        + (", and the seeds' ranges do not overlap." if separated and min(n.values()) > 1 else "."),
        v, tuple(sources)))
    last = {label: paper["valid"][label][-1] for label in labels}
    gv = {}
    parts = []
    for a, b in zip(systems, systems[1:]):
        ours_gap, paper_gap = mean[b] - mean[a], last[LABELS[b]] - last[LABELS[a]]
        gv |= {f"{b}-{a}": ours_gap, f"paper {b}-{a}": paper_gap,
               f"{b}-{a} relative": ours_gap / mean[b], f"paper {b}-{a} relative": paper_gap / last[LABELS[b]]}
        parts.append(f"{LABELS[b]} − {LABELS[a]}: ours {ours_gap:.3f} ({ours_gap / mean[b]:.1%} of {LABELS[b]}'s loss), "
                     f"the paper's last epoch {paper_gap:.3f} ({paper_gap / last[LABELS[b]]:.1%})")
    out.append(Finding(
        "The gaps: " + "; ".join(parts) + ". A gap as a share of the loss does not depend on the log base, which "
        "the paper does not state; it still depends on the label-smoothing floor and the vocabulary, so the "
        "shares are a rough comparison, the levels none.", gv, tuple(sources)))
    if drops:
        lo, hi = min(d[2] for d in drops), max(d[2] for d in drops)
        start, stop = drops[0][0], drops[0][1]
        dv = {"drop_min": lo, "drop_max": hi, "last_lr": lrs[-1], "runs": len(drops)}
        out.append(Finding(
            f"**Still falling.** Between the last two validations (updates {start:,} and {stop:,}) the validation loss "
            + (f"of every one of the {len(drops)} runs fell, by {lo:.3f} to {hi:.3f}" if lo > 0
               else f"changed by {-hi:+.3f} to {-lo:+.3f} over the {len(drops)} runs")
            + f", and the learning rate was still {lrs[-1]:.2g} (inverse square root, no decay to zero). The paper's "
            f"curves run for {len(paper['epochs'])} epochs and flatten; ours stop while learning, so longer training "
            "could move the levels and the gaps.", dv, tuple(sources)))
    return out


def h200_run_findings(root: Path | None = None) -> list[Finding]:
    """The single small-can trained on an H200 before the small plan ran, beside the H100 CAN runs of that plan."""
    import statistics

    from canlib.studies.gpu_results import gpu_translation
    from canlib.studies.quality import run_result, stored_seeds

    run, prov = gpu_translation()
    seeds = stored_seeds("can", "small", root=root)
    if not seeds:
        return [Finding(f"One `small-can` run on {prov['device']} (commit {prov['commit']}): test2016 sacreBLEU "
                        f"{run['scores']['bleu']:.1f}; no `small` CAN runs of the plan are stored yet to compare it with.",
                        {"h200_bleu": run["scores"]["bleu"]}, ("gpu/h200-2026-11-26/translation_small.json",))]
    results = [run_result("can", "small", s, root=root) for s in seeds]
    bleu = [r["scores"]["test"]["bleu"] for r, _ in results]
    first = dict(zip(seeds, results))[seeds[0]][0]
    h100_dev = results[0][1]["device"]
    h100_commit = str(results[0][1]["commit"])[:7]
    v = {"h200_bleu": run["scores"]["bleu"], "h200_valid_loss": run["valid_loss"], "h100_mean": statistics.mean(bleu),
         "h100_min": min(bleu), "h100_max": max(bleu), "h100_seed1_valid_loss": first["training"]["last_valid"]["valid_loss"],
         "h100_seed1_bleu": first["scores"]["test"]["bleu"]}
    if len(bleu) > 1:
        v["h100_sd"] = statistics.stdev(bleu)
    spread = f" ± {v['h100_sd']:.2f} (sd)" if "h100_sd" in v else ""
    return [Finding(
        f"This run (one seed, {prov['device']}, commit {prov['commit']}, `canlib train` then `canlib translate`) scores "
        f"test2016 sacreBLEU {v['h200_bleu']:.2f}. The {len(bleu)} CAN runs of the `small` plan ({h100_dev}, commit "
        f"{h100_commit}, `canlib experiment`, same budget) score {v['h100_mean']:.2f}{spread}, from {v['h100_min']:.2f} "
        f"to {v['h100_max']:.2f}; the seed-1 run among them reached a validation loss of "
        f"{v['h100_seed1_valid_loss']:.4f} against this run's {v['h200_valid_loss']:.4f}, yet scores "
        f"{v['h100_seed1_bleu']:.2f}. Another device, commit and decoding path: one run cannot say which made the "
        "difference. It stays here as the first model of this code that translated; the comparisons of the book "
        "use the plan's runs.",
        v, ("gpu/h200-2026-11-26/translation_small.json", "small/runs/multi30k-en-de/can-seed*.json"))]


# -- the training chapter: what `full` costs (issue 22) -----------------------------------------------------

def full_cost(gpus: int = 8, epochs: int | None = None) -> dict:
    """The arithmetic behind :func:`full_cost_findings`: target tokens per WMT14 epoch (a lower bound), the
    epochs, and for each stored d=512 training measurement the hours on ``gpus`` such GPUs.

    Tokens per epoch: the paper's Table 1 gives 4.5M pairs and 220M words; 220M / 4.5M is about 49 words a
    pair, so the count covers both sides, and the target (German) side is taken as half of it. Each target
    sentence adds an EOS. Pieces of the 32k BPE are at least words, so this is a lower bound (the corpus is
    not in this repository, so its pieces per word are not measured). Epochs: the paper's Figure 8 trains
    21 (``epochs`` overrides). Throughput: each stored d=512 training rate (``training_32k``, ``training_4k``) of
    one GPU times ``gpus`` (perfect scaling)."""
    from canlib.studies import gpu_results
    from canlib.studies.paper import paper_numbers

    paper = paper_numbers()
    pairs, words = paper["table1_data"]["wmt14_en-de"][:2]
    tokens = words / 2 + pairs
    epochs = epochs or max(paper["fig8_curves_en-de"]["epochs"])
    rows = []
    for kind in ("training_32k", "training_4k"):
        for run in gpu_results.available_runs():
            if not (gpu_results.gpu_dir(run) / f"{kind}.json").exists():
                continue
            runs, prov = gpu_results.gpu_training(kind, run)
            for system, r in runs.items():
                rate = r["target_tokens_per_sec"]
                rows.append({"kind": kind, "batch": prov["max_tokens"], "run": run, "device": prov["device"],
                             "commit": str(prov["commit"])[:7], "system": system, "tok_s": rate,
                             "hours": tokens * epochs / (gpus * rate) / 3600})
    return {"pairs": pairs, "words": words, "tokens_per_epoch": tokens, "epochs": epochs, "gpus": gpus, "rows": rows}


def full_cost_findings(gpus: int = 8) -> list[Finding]:
    """How long the paper's WMT14 recipe would train on ``gpus`` GPUs of each measured kind, arithmetic shown."""
    from canlib.model.config import LABELS
    from canlib.studies.scales import scale_spec

    c = full_cost(gpus)
    if not c["rows"]:
        return [Finding("No d=512 training throughput at 32,768 tokens is stored in `book/results/gpu/`: run "
                        "`bash scripts/gpu_check.sh` on a GPU to cost the `full` recipe.")]
    cap = scale_spec("full").train["max_epochs"]
    src = ("canlib/resources/paper_numbers.json",)
    out = [Finding(
        f"**Tokens per epoch (a lower bound):** the paper's Table 1 gives WMT14 En-De {c['pairs'] / 1e6:.1f}M pairs and "
        f"{c['words'] / 1e6:.0f}M words (both sides); half of them on the target side plus one EOS per sentence: "
        f"{c['words'] / 1e6:.0f}M / 2 + {c['pairs'] / 1e6:.1f}M = {c['tokens_per_epoch'] / 1e6:.1f}M target tokens. The "
        "32k BPE splits some words into pieces, so the real count is higher by its pieces per word (not measured "
        "here: the corpus is not in this repository).",
        {"tokens_per_epoch": c["tokens_per_epoch"]}, src[:1]),
        Finding(
        f"**Epochs:** {c['epochs']}, the length of the paper's Figure 8 curves (the paper trains until the validation "
        f"loss stops improving); our `full` settings allow up to {cap} with patience 5, which would multiply the "
        f"times below by up to {cap / c['epochs']:.1f}.", {"epochs": c["epochs"]}, src[:1])]
    for r in c["rows"]:
        paper_batch = " (the paper's per-GPU batch)" if r["batch"] == 4096 else ""
        out.append(Finding(
            f"**{LABELS.get(r['system'], r['system'])} on {gpus} x {r['device']}** (one GPU measured {r['tok_s']:,.0f} target "
            f"tokens/s at {r['batch']:,} tokens per update{paper_batch}, bf16, commit {r['commit']}): "
            f"{c['tokens_per_epoch'] / 1e6:.1f}M x {c['epochs']} / ({gpus} x {r['tok_s']:,.0f}/s) = {r['hours']:.2f} h.",
            {f"{r['run']}_{r['kind']}_{r['system']}_hours": r["hours"]}, (f"gpu/{r['run']}/{r['kind']}.json",)))
    out.append(Finding(
        "Each time is optimistic in three ways: pieces are more than words, 8 GPUs are assumed to scale perfectly "
        "(no gradient all-reduce), and a rate measured at 32,768 tokens per GPU is higher than the rate at the "
        "paper's 4,096 (where both are stored, compare the rows). Add evaluation (beam search over the validation "
        "set per epoch) on top."))
    return out


# -- the speed chapter ------------------------------------------------------------------------------------

def speed_findings(root: Path | None = None) -> list[Finding]:
    """Operator counts (CPU, ``canlib bench ops``) against the stored GPU eager times: what the counts predict
    for CAN's layers and for the whole step, what each GPU measured, and the search bookkeeping per system."""
    from canlib.studies import gpu_results as gpu
    from canlib.studies.paper import paper_numbers
    from canlib.studies.speed import stored_ops

    (ops, prov), (before, _) = stored_ops(root=root), stored_ops("ops_before.json", root=root)
    cuda = {s: r["cuda"] for s, r in ops["systems"].items()}
    old = {s: r["cuda"] for s, r in before["systems"].items()}
    src = ("cpu/ops.json", "cpu/ops_before.json")
    k = lambda counts, s, part: counts[s][part]["kernel_operators"]  # noqa: E731
    v = {"std_layer": k(cuda, "balanced", "per_layer"), "can_layer": k(cuda, "can", "per_layer"),
         "can_layer_before": k(old, "can", "per_layer"),
         "std_ops": cuda["balanced"]["per_layer"]["operators"], "can_ops": cuda["can"]["per_layer"]["operators"],
         "cpu_std_layer": ops["systems"]["balanced"]["cpu"]["per_layer"]["kernel_operators"],
         "cpu_can_layer": ops["systems"]["can"]["cpu"]["per_layer"]["kernel_operators"],
         "syncs": max(c["step"]["host_syncs"] for c in cuda.values()), "systems": len(cuda)}
    v["ratio"] = v["can_layer"] / v["std_layer"]
    v["ratio_before"] = v["can_layer_before"] / v["std_layer"]
    out = [Finding(
        f"**Counted, not timed** (`canlib bench ops`, {prov['device']}, commit {prov['commit'][:7]}): on the "
        f"GPU's code path (float16, counted on PyTorch's meta device) a standard decoder layer launches "
        f"{v['std_layer']:.0f} kernels per step and a CAN layer {v['can_layer']:.0f} ({v['ratio']:.2f} of it; "
        f"{v['can_layer_before']:.0f}, or {v['ratio_before']:.2f}, before CAN's step scaled its queries once for both "
        f"score blocks); counting every dispatched operator, views included, {v['std_ops']:.0f} against "
        f"{v['can_ops']:.0f}. A step of any of the {v['systems']} systems reads "
        f"{'no value' if v['syncs'] == 0 else 'values'} back to the host ({v['syncs']} host syncs). The CPU's own path differs: its few-row products add a copy per "
        f"matrix, which a standard layer has three times as many of, so counted there the layers launch "
        f"{v['cpu_std_layer']:.0f} and {v['cpu_can_layer']:.0f}, a gap the GPU does not have.", v, src)]
    parts, parts_prov = gpu.gpu_breakdown("h200-2026-11-26")
    h100, h100_prov = gpu.gpu_breakdown("h100-2026-11-26")
    step_bal, step_can = k(old, "balanced", "step"), k(old, "can", "step")
    g = {"h200_layers": parts["balanced"]["layers_ms"] / parts["can"]["layers_ms"],
         "h100_layers": h100["balanced"]["layers_ms"] / h100["can"]["layers_ms"],
         "count_layers": k(old, "balanced", "per_layer") / k(old, "can", "per_layer"),
         "count_step": step_bal / step_can, "step_bal": step_bal, "step_can": step_can,
         "h100_reps": h100_prov["settings"].get("repeats", float("nan"))}
    for run in ("h100-2026-11-26", "h200-2026-11-26"):
        eager, _ = gpu.gpu_speed("eager", run)
        g[f"{run[:4]}_eager"] = eager["can"]["tok_per_s"] / eager["balanced"]["tok_per_s"]
    g["paper"] = paper_numbers()["table2_wmt14"]["en-de"]["CAN"][2] / paper_numbers()["table2_wmt14"]["en-de"]["Balanced"][2]
    out.append(Finding(
        "**Why CAN's layers did not look faster on the H100.** At the code the GPUs ran, the counts make CAN's "
        f"layers {g['count_layers']:.2f}x cheaper in kernels; the H200's eager breakdown measured its layers "
        f"{g['h200_layers']:.2f}x faster than Balanced's, the H100's {g['h100_layers']:.2f}x. The H100 breakdown timed "
        "the eager path with no warm-up pass of its own, right after the graph captures, from a median of "
        f"{g['h100_reps']} repeats; its own "
        f"end-to-end eager run puts CAN ahead ({g['h100_eager']:.3f}x). Nothing in CAN's step differs on CUDA (no host "
        "sync, no mask or index built per step, no dtype cast of its own): the measurement, not the layer, is "
        "the suspect, and `scripts/gpu_check.sh` now warms the breakdown up, times it over more repeats and checks "
        "that its parts add up to the same search run untimed.", g, src + (
            "gpu/h100-2026-11-26/breakdown.json", "gpu/h200-2026-11-26/breakdown.json")))
    out.append(Finding(
        f"**What the counts allow end to end.** A whole step (decoder, output projection, search) launched "
        f"{g['step_bal']} kernels for Balanced and {g['step_can']} for CAN at that code: if every launch cost the same, "
        f"CAN could be at most {g['count_step']:.2f}x faster. The GPUs measured {g['h100_eager']:.3f}x (H100) and "
        f"{g['h200_eager']:.3f}x (H200) eagerly, the paper {g['paper']:.2f}x. The paper attributes its gain to "
        "computing the sub-layers in parallel, not to kernel launches; our counts say that in the launch-bound "
        "regime the same layers cannot give the paper's ratio while the rest of the step stays as it is.",
        g, src + ("gpu/h100-2026-11-26/speed.json", "gpu/h200-2026-11-26/speed.json")))
    s = {f"{x}_search_ms": parts[x]["search_ms"] for x in ("baseline", "balanced", "can")}
    s |= {f"{x}_search_kernels": k(cuda, x, "search") for x in ("baseline", "balanced", "can")}
    out.append(Finding(
        "**The search bookkeeping is not the same for every system.** It reorders every layer's cache after each "
        f"step, two kernels per cache buffer on top of its own: {s['baseline_search_kernels']}, "
        f"{s['balanced_search_kernels']} and {s['can_search_kernels']} kernels per step for Baseline, Balanced and "
        "CAN (six, two and two decoder layers; CAN's buffers are 2.5 times wider). The H200 breakdown gives "
        f"{s['baseline_search_ms']:.1f}, {s['balanced_search_ms']:.1f} and {s['can_search_ms']:.1f} ms per sentence.",
        s, src + ("gpu/h200-2026-11-26/breakdown.json",)))
    batch, batch_prov = gpu.gpu_batch()
    fig7 = paper_numbers()["fig7_parallel_en-de"]
    b = {f"ours_{n}": 100 * (batch["can"][n] / batch["balanced"][n] - 1) for n in sorted(batch["can"])}
    b |= {f"paper_{n}": d for n, d in zip(fig7["batch"], fig7["delta_speed_pct"]) if n in batch["can"]}
    ns = sorted(batch["can"])
    out.append(Finding(
        f"**The batch sweep** ({batch_prov['device']}, eager, commit {batch_prov['commit']}): CAN's speed-up over "
        "Balanced is " + ", ".join(f"{b[f'ours_{n}']:+.1f} %" for n in ns) + " at batch "
        + ", ".join(str(n) for n in ns) + "; the paper's Fig. 7 gives " + ", ".join(f"{b[f'paper_{n}']:+.1f} %" for n in ns)
        + ". The paper's explanation: a larger batch is itself a source of parallelism, and CAN \"reaches the "
        "highest parallelism (a nearly 100% GPU utility) in a smaller batch\" than Balanced, so its advantage "
        "shrinks as the batch grows. One run with two repeats per point, so the differences between batch sizes carry no spread.",
        b, ("gpu/h200-2026-11-26/batch.json", "canlib/resources/paper_numbers.json")))
    return out


# -- the speed chapter: the decode step under the profiler, and the eager ratio across runs -----------------

def decode_profile_findings(root: Path | None = None) -> list[Finding]:
    """What ``scripts/gpu_profile.sh``'s decoding cases show (one beam-search step of Balanced and CAN, eager,
    beam 4, batch 1, fp16, d=512): how much of a step the GPU is busy, and the Balanced/CAN ratios of host CPU
    time, counted kernel operators, profiled launches, wall and kernel time; then how far the eager CAN/Balanced
    speed ratio of ``scripts/gpu_bench.py`` moved between stored runs on the same GPU model. ``root``: the
    results folder of the counted operators (``cpu/ops.json``)."""
    from canlib.studies import gpu_results as gpu
    from canlib.studies.scorecard import ratio_range
    from canlib.studies.speed import stored_ops

    ops, ops_prov = stored_ops(root=root)
    counted = {s: ops["systems"][s]["cuda"]["step"]["kernel_operators"] for s in ("balanced", "can")}
    names = {"cpu": "host CPU time", "counted": "counted kernel operators", "launches": "profiled launches",
            "wall": "wall time", "kernel": "GPU kernel time"}
    out = []
    for run in gpu.profile_runs():
        cases, prov = gpu.gpu_profile(run)
        if not {"decode_balanced", "decode_can"} <= set(cases):
            continue
        bal, can = cases["decode_balanced"], cases["decode_can"]
        v = {f"{run}_{key}_{s}": row[key] for s, row in (("balanced", bal), ("can", can))
             for key in ("wall_ms", "cpu_ms", "gpu_kernel_ms", "gpu_busy_share", "kernel_launches")}
        r = {"cpu": bal["cpu_ms"] / can["cpu_ms"], "counted": counted["balanced"] / counted["can"],
             "launches": bal["kernel_launches"] / can["kernel_launches"], "wall": bal["wall_ms"] / can["wall_ms"],
             "kernel": bal["gpu_kernel_ms"] / can["gpu_kernel_ms"]}
        v |= {f"{run}_ratio_{k}": x for k, x in r.items()}
        busiest = max(bal["gpu_busy_share"], can["gpu_busy_share"])
        bound = ("host-bound: the GPU waits for the host most of each step" if busiest < 0.5 else
                 "not host-bound by this measure: the GPU is busy for most of each step")
        smallest = min(r, key=r.get)
        out.append(Finding(
            f"**One eager decoding step on the {gpu.run_label(prov)} run is {bound}** (`{prov['config']['command']}`, "
            f"beam 4, batch 1, fp16, d=512, per step over {bal['per']} forced steps). The GPU ran kernels for "
            f"{bal['gpu_kernel_ms']:.3f} ms of Balanced's {bal['wall_ms']:.2f} ms and {can['gpu_kernel_ms']:.3f} ms of "
            f"CAN's {can['wall_ms']:.2f} ms: busy {100 * bal['gpu_busy_share']:.0f} % and {100 * can['gpu_busy_share']:.0f} % "
            f"of the step. Balanced over CAN, per step: host CPU time {r['cpu']:.2f}x ({bal['cpu_ms']:.2f} against "
            f"{can['cpu_ms']:.2f} ms under the profiler), kernel operators {r['counted']:.2f}x as counted at commit "
            f"{ops_prov['commit'][:7]} ({counted['balanced']} against {counted['can']}), kernel launches "
            f"{r['launches']:.2f}x as profiled ({bal['kernel_launches']:.1f} against {can['kernel_launches']:.1f}), "
            f"wall time {r['wall']:.2f}x, GPU kernel time {r['kernel']:.2f}x. The host's time falls "
            f"{'more' if r['cpu'] > r['counted'] else 'less'} than the kernel count, so the count alone does not "
            f"predict it; the smallest of these ratios is the {names[smallest]}.",
            v, (f"gpu/{run}/profile.json", "cpu/ops.json")))
    by_device: dict[str, list[tuple[str, dict]]] = {}
    for run in gpu.speed_runs():
        eager, prov = gpu.gpu_speed("eager", run)
        by_device.setdefault(prov["device"], []).append((run, prov))
    for device, runs in by_device.items():
        if len(runs) < 2:
            continue
        w, parts = {}, []
        for run, prov in runs:
            eager, _ = gpu.gpu_speed("eager", run)
            graphs, _ = gpu.gpu_speed("captured", run)
            med, low, high = ratio_range(eager, "can", "balanced")
            w |= {f"{run}_eager": med, f"{run}_eager_low": low, f"{run}_eager_high": high,
                  f"{run}_balanced_eager": eager["balanced"]["tok_per_s"],
                  f"{run}_balanced_graphs": graphs["balanced"]["tok_per_s"]}
            parts.append((run, prov))
        bal_e = [w[f"{run}_balanced_eager"] for run, _ in parts]
        bal_g = [w[f"{run}_balanced_graphs"] for run, _ in parts]
        w["eager_spread"] = max(bal_e) / min(bal_e)
        w["graphs_spread"] = max(bal_g) / min(bal_g)
        listed = "; ".join(f"{w[f'{run}_eager']:.3f}x at commit {gpu.commit_label(prov)} (its repeats "
                           f"{w[f'{run}_eager_low']:.2f}-{w[f'{run}_eager_high']:.2f}x)" for run, prov in parts)
        session = [(run, gpu.gpu_profile(run)[0]) for run, _ in parts if run in gpu.profile_runs()]
        same = "".join(
            f" In the session at commit {gpu.commit_label(gpu.gpu_profile(run)[1])}, the profile timed one step alone at "
            f"{c['decode_balanced']['wall_ms'] / c['decode_can']['wall_ms']:.2f}x, against the bench's "
            f"{w[f'{run}_eager']:.3f}x for whole sentences, "
            f"{'more' if w[f'{run}_eager'] > counted['balanced'] / counted['can'] else 'less'} than the "
            f"{counted['balanced'] / counted['can']:.2f}x that the counted kernels would allow if each cost the same."
            for run, c in session if {"decode_balanced", "decode_can"} <= set(c))
        out.append(Finding(
            f"**The eager CAN/Balanced ratio is not stable across runs on one GPU model** ({device}, "
            f"`scripts/gpu_bench.py`, medians of the timed repeats): {listed}. Balanced decoded "
            + " and ".join(f"{x:,.0f}" for x in bal_e) + " tok/s eagerly, "
            f"{w['eager_spread']:.2f}x apart, but " + " and ".join(f"{x:,.0f}" for x in bal_g)
            + f" from CUDA graphs, {w['graphs_spread']:.2f}x apart: graphs replay a step without the host dispatching "
            "its kernels, so the eager difference points to the host side (another machine behind the same GPU model, "
            "or its load), as far as these runs can say. They also differ in commit (the model code changed between them), and one session "
            "each cannot separate the two causes: an eager ratio measured once on one machine does not pin the "
            f"systems' ratio to the second decimal.{same}",
            w, tuple(f"gpu/{run}/speed.json" for run, _ in parts)))
    return out


def speed_ab_findings() -> list[Finding]:
    """What each stored A/B (``gpu/<run>/ab.json``: ``scripts/gpu_bench.py`` alternately at two commits in one
    device call) shows: CUDA-graph tok/s before and after per system (median over that side's runs), the
    CAN/Balanced ratio of every run, and how far eager tok/s moved between runs of the same commit."""
    import statistics

    from canlib.studies import gpu_results as gpu

    out = []
    for run in gpu.ab_runs():
        ab, prov = gpu.gpu_ab(run)
        before, after = ab["before"], ab["after"]
        v: dict[str, float] = {}

        def median(side: dict, system: str, mode: str) -> float:
            return statistics.median(r["tok_per_s"][system][mode] for r in side["runs"])

        for label, side in (("before", before), ("after", after)):
            for system in ("baseline", "balanced", "can"):
                v[f"{label}_{system}_graphs"] = median(side, system, "captured")
            for i, r in enumerate(side["runs"], 1):
                v[f"{label}_{i}_can_over_balanced"] = r["tok_per_s"]["can"]["captured"] / r["tok_per_s"]["balanced"]["captured"]
            eager = [r["tok_per_s"]["balanced"]["eager"] for r in side["runs"]]
            v[f"{label}_balanced_eager_spread"] = max(eager) / min(eager)
        gains = {s: v[f"after_{s}_graphs"] / v[f"before_{s}_graphs"] for s in ("baseline", "balanced", "can")}
        v |= {f"gain_{s}": g for s, g in gains.items()}
        same = all(all(r["captured_matches_eager"].values()) for side in (before, after) for r in side["runs"])
        ratios = {label: ", ".join(f"{v[f'{label}_{i}_can_over_balanced']:.3f}" for i in range(1, len(side["runs"]) + 1))
                  for label, side in (("before", before), ("after", after))}
        out.append(Finding(
            f"**Same GPU, same call: the search and cache changes of commit {after['commit'][:7]} against "
            f"{before['commit'][:7]}** ({prov['device']}, `{prov['config']['command'].split(' --json')[0]}` run "
            f"{len(before['runs'])} times at each commit, alternating). Whole-step CUDA graphs, median tok/s: "
            f"Balanced {v['before_balanced_graphs']:,.0f} -> {v['after_balanced_graphs']:,.0f} ({gains['balanced']:.2f}x), "
            f"CAN {v['before_can_graphs']:,.0f} -> {v['after_can_graphs']:,.0f} ({gains['can']:.2f}x), Baseline "
            f"{v['before_baseline_graphs']:,.0f} -> {v['after_baseline_graphs']:,.0f} ({gains['baseline']:.2f}x). "
            f"CAN/Balanced from graphs, run by run: {ratios['before']} before, {ratios['after']} after (the paper: "
            f"1.32, in eager fp16). Captured decoding returned the eager tokens in every run: {same}. Eager tok/s is "
            f"no yardstick here: Balanced's moved {v['before_balanced_eager_spread']:.2f}x and "
            f"{v['after_balanced_eager_spread']:.2f}x between two runs of the same commit.",
            v, (f"gpu/{run}/ab.json",)))
    return out
