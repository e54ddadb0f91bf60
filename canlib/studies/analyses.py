"""The paper's analyses on trained models (seed 1 of the scale's main corpus), each one study
(:func:`canlib.studies.store.study`): computed at tiny or by ``canlib experiment``, loaded elsewhere.

* :func:`similarity`: Figure 2, cosine similarity of the decoder sub-layer inputs of the 6/6 Baseline.
* :func:`error_buckets`: Figure 6, BLEU by source-word frequency and by sentence length.
* :func:`attention_study`: the attention chapter, one test pair's maps in Balanced and CAN and CAN's target
  share alpha across the test split (stored, so the chapter needs no weights).
* :func:`conversion_study`: beyond the paper, Balanced converted to CAN (canlib.model.compress) before and
  after a short fine-tune, against CAN trained from scratch.
* :func:`final_losses`, :func:`valid_loss`: Figure 8's end points and the loss of any model.
* :func:`models_provenance`, :func:`runs_line`, :func:`bucket_rows`, :func:`seed_curves`, :func:`training_recipes`:
  what the chapters print under a study (the GPU that trained its models as well as the CPU it ran on), the error
  buckets they may score (``MIN_BUCKET_SENTENCES``), the seed spread of a loss curve, and each scale's recipe.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from canlib.model.seq2seq import Seq2Seq
from canlib.studies.quality import hypotheses, run_config, translate_split
from canlib.studies.runs import Run, batches, budget, prepared, run_dir, teacher_forced_batches, train, trained, training_device
from canlib.studies.scales import scale_spec
from canlib.studies.store import study


def _config(system: str, scale: str, max_steps: int | None) -> dict[str, Any]:
    spec = scale_spec(scale)
    return run_config(system, scale, 1, spec.corpus, max_steps)


def similarity(scale: str, *, store: bool = False, root: Path | None = None,
               max_steps: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Figure 2: cosine similarity of sub-layer inputs in the trained 6/6 Baseline (raw and LayerNorm'd),
    over the validation split."""
    from canlib.studies.probes import sublayer_similarity

    def compute() -> dict[str, Any]:
        run = trained("baseline", scale, train_now=True, max_steps=max_steps)
        model = run.model()
        out = {}
        for normalized in (False, True):
            sims = sublayer_similarity(model, teacher_forced_batches(run, "valid"), model.cfg.pad_id, normalized=normalized)
            out["normalized" if normalized else "residual"] = {k: v.tolist() for k, v in sims.items()}
        return out

    return study("similarity", scale, _config("baseline", scale, max_steps), compute, store=store, root=root)


def quantile_buckets(values: np.ndarray, n: int) -> tuple[np.ndarray, list[str]]:
    """Bucket ids of ``values`` in ``n`` quantile buckets, and each bucket's range as a label."""
    edges = np.quantile(values, np.linspace(0, 1, n + 1))
    ids = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, n - 1)
    return ids, [f"{edges[i]:.0f}-{edges[i + 1]:.0f}" for i in range(n)]


def buckets_of(hyps: list[str], srcs: list[str], refs: list[str], data: Any, lang: str,
               n_freq: int = 5) -> dict[str, dict[str, list]]:
    """Tokenized corpus BLEU per bucket of average source-subword training frequency (quantile
    buckets) and of source length in words (1-10, 11-20, 21-30, 31-40, 41+)."""
    from canlib.bleu import corpus_scores

    train_split = data.split("train")
    counts = np.bincount(np.concatenate([train_split[i][0] for i in range(len(train_split))]), minlength=data.vocab.size)
    freq = np.array([counts[data.vocab.encode(s)].mean() if s.strip() else 0.0 for s in srcs])
    freq_ids, freq_labels = quantile_buckets(freq, n_freq)
    lengths = np.array([len(s.split()) for s in srcs])
    len_ids = np.minimum((np.maximum(lengths, 1) - 1) // 10, 4)
    len_labels = ["1-10", "11-20", "21-30", "31-40", "41+"]
    out = {}
    for name, ids, labels in (("frequency", freq_ids, freq_labels), ("length", len_ids, len_labels)):
        bleu, sizes = [], []
        for b in range(len(labels)):
            members = np.flatnonzero(ids == b)
            sizes.append(int(members.size))
            sub_h, sub_r = [hyps[i] for i in members], [refs[i] for i in members]
            bleu.append(corpus_scores(sub_h, sub_r, lang=lang)["tok_bleu"] if members.size else float("nan"))
        out[name] = {"labels": labels, "bleu": bleu, "sentences": sizes}
    return out


def error_buckets(scale: str, systems: tuple[str, ...] = ("balanced", "can"), *, store: bool = False,
                  root: Path | None = None, max_steps: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Figure 6 for each of ``systems`` (seed 1, the test split): {system: {"frequency": ..., "length": ...}}."""
    from canlib.studies.runs import target_lang

    def compute() -> dict[str, Any]:
        data = prepared(scale)
        test = data.split("test")
        out = {}
        for system in systems:
            hyps = hypotheses(system, scale, "test", store=store, root=root, max_steps=max_steps)
            out[system] = buckets_of(hyps, list(test.src_text), list(test.tgt_text), data, target_lang(data))
        return out

    config = {"systems": list(systems), **{s: _config(s, scale, max_steps) for s in systems}}
    return study("errors", scale, config, compute, store=store, root=root)


def attention_study(scale: str, systems: tuple[str, str] = ("balanced", "can"), *, store: bool = False,
                    root: Path | None = None, max_steps: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The seed-1 runs of a standard-decoder system and a joint-attention one (default Balanced and CAN):
    the maps of one test pair (per layer, mean over heads), and the joint system's alpha over the test
    split (summary, histogram, mean per target position against uniform attention's i/(i+s))."""
    from canlib.model.config import BOS_ID, EOS_ID
    from canlib.studies import attention_maps as am

    standard, joint = systems

    def compute() -> dict[str, Any]:
        runs = {s: trained(s, scale, train_now=True, max_steps=max_steps) for s in systems}
        models = {s: r.model() for s, r in runs.items()}
        data = prepared(scale)
        test = data.split("test")
        index = am.pick_pair(test)
        src, tgt = (list(map(int, part)) for part in test[index])
        src_in, tgt_in = src + [EOS_ID], [BOS_ID] + tgt
        maps = {s: [{k: v.tolist() for k, v in layer.items() if k != "heads"} for layer in am.attention_maps(m, src_in, tgt_in)]
                for s, m in models.items()}
        alphas, by_position = am.alpha_statistics(models[joint], teacher_forced_batches(runs[joint], "test"), max_position=30)
        return {
            "systems": {"standard": standard, "joint": joint},
            "pair": {"index": index, "source": data.vocab.decode(test[index][0]), "target": data.vocab.decode(test[index][1]),
                     "src_tokens": [data.vocab.sp.IdToPiece(i) for i in src_in],
                     "tgt_tokens": [data.vocab.sp.IdToPiece(i) for i in tgt_in]},
            "maps": maps,
            "test_sentences": len(test),
            "alpha_summary": am.alpha_summary(alphas),
            "alpha_histogram": am.alpha_histogram(alphas),
            "alpha_by_position": {k: v.tolist() for k, v in by_position.items()},
            "models": {s: {"enc_layers": m.cfg.enc_layers, "dec_layers": m.cfg.dec_layers, "decoder_kind": m.cfg.decoder_kind,
                           "d_model": m.cfg.d_model, "heads": m.cfg.heads, "trained_s": runs[s].result.get("wall_s"),
                           "trained_on": runs[s].result.get("provenance", {}).get("device")}
                       for s, m in models.items()},
        }

    config = {"systems": list(systems), **{s: _config(s, scale, max_steps) for s in systems}}
    return study("attention", scale, config, compute, store=store, root=root)


@torch.no_grad()
def valid_loss(model: Seq2Seq, data: Any, label_smoothing: float = 0.1) -> float:
    """Label-smoothed cross entropy per target token on the validation split (as the trainer logs it)."""
    from canlib.training.trainer import label_smoothed_nll_loss

    split = data.split("valid")
    cfg = model.cfg
    device = next(model.parameters()).device
    model.eval()
    total, tokens = 0.0, 0
    for batch in batches(split, cfg):
        src, tgt_in, tgt_out = (batch[k].to(device) for k in ("src", "tgt_in", "tgt_out"))
        loss, _ = label_smoothed_nll_loss(model(src, tgt_in), tgt_out, label_smoothing, cfg.pad_id)
        total += float(loss)
        tokens += int(tgt_out.ne(cfg.pad_id).sum())
    return total / tokens


def final_losses(log: list[dict[str, Any]]) -> tuple[float, float]:
    """(train loss, valid loss) at the last validation of a training log."""
    rows = [r for r in log if r.get("valid_loss") is not None]
    if not rows:
        raise ValueError("the training log holds no validation record")
    train_rows = [r["train_loss"] for r in log if r.get("train_loss") is not None]
    return float(train_rows[-1]) if train_rows else float("nan"), float(rows[-1]["valid_loss"])


def conversion_study(scale: str, *, store: bool = False, root: Path | None = None,
                     max_steps: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Balanced converted to CAN by canlib.model.compress, before and after a short fine-tune of n updates
    (``ScaleSpec.finetune_steps``, or ``max_steps`` when reduced), against the rows a fair comparison
    needs: CAN with Balanced's trained encoder and a random decoder fine-tuned for the same n updates
    (conversion against random initialisation at an equal budget), and CAN from scratch for the
    scale's budget and for that budget plus n (equal total updates). Each row states its updates."""
    from canlib.model.compress import standard_to_can

    spec = scale_spec(scale)
    steps = max_steps if max_steps is not None else spec.finetune_steps
    finetune = {**budget(scale, 1), "max_epochs": 0, "patience": 0, "max_steps": steps, "warmup": max(1, steps // 10)}
    if finetune.get("valid_every"):
        finetune["valid_every"] = min(finetune["valid_every"], steps)
    base_steps = budget(scale, 1, max_steps).get("max_steps") or None  # None: the scale trains by epochs

    def finetuned(init: str, weights: dict[str, torch.Tensor]) -> Seq2Seq:
        folder = run_dir("can", scale, spec.corpus, finetune, init=init)
        if not (folder / "result.json").exists():
            train("can", scale, spec.corpus, folder, finetune, init_weights=weights)
        return Run("can", scale, 1, spec.corpus, folder, {}).model()

    def compute() -> dict[str, Any]:
        device = training_device(scale)
        data = prepared(scale)
        balanced = trained("balanced", scale, train_now=True, max_steps=max_steps).model()
        converted = standard_to_can(balanced)
        torch.manual_seed(1)  # the random decoder of the equal-budget row
        random_decoder = Seq2Seq(converted.cfg).state_dict()
        random_decoder.update({k: v for k, v in balanced.state_dict().items() if k.startswith(("embed.", "encoder_"))})
        b = f"{base_steps}" if base_steps else "B"
        models = [("Balanced (trained)", f"{b}", balanced),
                  ("converted, no training", f"{b} + 0", converted),
                  ("converted + fine-tune", f"{b} + {steps}", finetuned("converted", converted.state_dict())),
                  ("Balanced encoder, random CAN decoder + fine-tune", f"{b} (encoder) + {steps}",
                   finetuned("random-decoder", random_decoder)),
                  ("CAN from scratch", f"{b}", trained("can", scale, train_now=True, max_steps=max_steps).model())]
        if base_steps:
            models.append((f"CAN from scratch, {base_steps + steps} updates", f"{base_steps + steps}",
                           trained("can", scale, train_now=True, max_steps=base_steps + steps).model()))
        rows = []
        for name, updates, model in models:
            model = model.to(device).eval()
            _, scores = translate_split(model, data, "test", spec.beam)
            rows.append({"system": name, "updates": updates, "valid loss": valid_loss(model, data),
                         "test BLEU": scores["bleu"], "test tok-BLEU": scores["tok_bleu"]})
        return {"rows": rows, "finetune": finetune}

    config = {**_config("can", scale, max_steps), "finetune": finetune}
    return study("conversion", scale, config, compute, training_device(scale), store=store, root=root)


# -- what the chapters print under a study, and the parts of a study they may show -----------------

MIN_BUCKET_SENTENCES = 30  # an error bucket with fewer test sentences is too small for its BLEU to mean anything


def models_provenance(scale: str, systems: tuple[str, ...], study_prov: dict[str, Any], *,
                      root: Path | None = None) -> str:
    """Two lines for under a study: the device, commit and budget that trained the seed-1 models it read, then
    where the study itself ran (a study of GPU-trained models may run on a CPU: both are said)."""
    from canlib.model.config import LABELS
    from canlib.studies.quality import run_result

    lines = []
    for system in systems:
        if scale == "tiny" and root is None:
            prov = trained(system, scale).result["provenance"]
        else:
            prov = run_result(system, scale, 1, root=root)[1]
        steps = (prov.get("budget") or prov.get("config", {}).get("train") or {}).get("max_steps")
        lines.append(f"{LABELS[system]} (seed 1{f', {steps:,} updates' if steps else ''}): trained on {prov['device']} "
                     f"at commit {str(prov['commit'])[:7]}, {str(prov['date'])[:10]}")
    return ("models: " + "; ".join(lines) + f"\nstudy: computed on {study_prov['device']} at commit "
            f"{str(study_prov['commit'])[:7]}, {study_prov['date']} (scale={study_prov['scale']})")


def bucket_rows(buckets: dict[str, Any], key: str, systems: tuple[str, str] = ("balanced", "can"),
                min_sentences: int = MIN_BUCKET_SENTENCES) -> list[dict[str, Any]]:
    """One row per bucket of the error study (``key``: "frequency" or "length"): its label, sentences, each
    system's BLEU, the second minus the first, and ``shown``: False for a bucket under ``min_sentences``
    sentences, whose BLEU (NaN when empty) a chapter must not present as a result."""
    first, second = systems
    a, b = buckets[first][key], buckets[second][key]
    if a["labels"] != b["labels"] or a["sentences"] != b["sentences"]:
        raise ValueError(f"error buckets by {key}: {first} and {second} were bucketed differently")
    rows = []
    for label, n, x, y in zip(a["labels"], a["sentences"], a["bleu"], b["bleu"]):
        shown = n >= min_sentences and np.isfinite(x) and np.isfinite(y)
        rows.append({"bucket": label, "sentences": int(n), first: float(x), second: float(y),
                     "delta": float(y - x) if shown else float("nan"), "shown": bool(shown)})
    return rows


def seed_curves(logs: list[list[dict[str, Any]]], column: str, every: int | None = None) -> dict[str, np.ndarray]:
    """Mean, sample sd (0 for one seed), min and max over seeds of ``column`` ("train_loss" or "valid_loss") at
    the updates every log recorded it. ``every`` (the run's ``log_every``) keeps only updates that are its
    multiples: the trainer also logs the few updates that end an epoch, whose short window would draw a zigzag."""
    if not logs:
        raise ValueError("seed_curves: no logs")
    series = [{r["step"]: r[column] for r in log if r.get(column) is not None and (not every or r["step"] % every == 0)}
              for log in logs]
    steps = sorted(set.intersection(*(set(s) for s in series)))
    if not steps:
        raise ValueError(f"seed_curves: the logs share no update with a {column} record")
    values = np.array([[s[step] for step in steps] for s in series], dtype=float)  # (seeds, steps)
    sd = values.std(axis=0, ddof=1) if len(logs) > 1 else np.zeros(len(steps))
    return {"step": np.array(steps), "mean": values.mean(axis=0), "sd": sd,
            "min": values.min(axis=0), "max": values.max(axis=0), "seeds": len(logs)}


def training_recipes(scales: tuple[str, ...] = ("tiny", "small", "full")) -> list[dict[str, Any]]:
    """What each scale trains, one row per scale, from the code that trains it (``full`` is the paper's recipe):
    width, corpus, peak learning rate, warm-up, tokens per update, when training stops, what is averaged."""
    from canlib.model.config import preset

    rows = []
    for scale in scales:
        spec = scale_spec(scale)
        t = spec.train
        tokens = t["max_tokens"] * t.get("update_freq", 1)
        stop = f"{t['max_steps']:,} updates" if t.get("max_steps") else f"up to {t['max_epochs']} epochs (patience {t.get('patience')})"
        if t.get("average_last") and t.get("valid_every"):
            averaged = f"last {t['average_last']} checkpoints, {t['valid_every']:,} updates apart"
        else:
            averaged = "last 5 epochs' checkpoints (the paper)"
        rows.append({"scale": scale, "d": preset(spec.preset("can")).d_model, "corpus": f"{spec.corpus} ({spec.corpus_scale})",
                     "peak lr": f"{t['lr']:g}", "warm-up updates": f"{t['warmup']:,}",
                     "tokens per update": f"{tokens:,}" + (f" ({t['max_tokens']:,} x {t['update_freq']})" if t.get("update_freq") else ""),
                     "stops after": stop, "weights averaged": averaged,
                     "label smoothing": t.get("label_smoothing", 0.1)})
    return rows


def runs_line(scale: str, systems: tuple[str, ...], *, root: Path | None = None) -> str:
    """One line per system for under a figure of several seeds: its seeds, and the devices, commits and dates that
    trained them (at tiny: the seed-1 run trained on this machine)."""
    from canlib.model.config import LABELS
    from canlib.studies.quality import run_result, stored_seeds

    lines = []
    for system in systems:
        seeds = [1] if scale == "tiny" and root is None else stored_seeds(system, scale, root=root)
        provs = [run_result(system, scale, seed, root=root)[1] for seed in seeds]
        devices = ", ".join(sorted({p["device"] for p in provs}))
        commits = ", ".join(sorted({str(p["commit"])[:7] for p in provs}))
        dates = ", ".join(sorted({str(p["date"])[:10] for p in provs}))
        lines.append(f"{LABELS[system]}: seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}, "
                     f"trained on {devices} at commit {commits}, {dates} (scale={scale})")
    return "\n".join(lines)
