"""The reproduction studies, at three scales, as functions the book chapters call.

A *scale* fixes the corpus, the model size and the training budget:

* ``tiny``: CPU minutes, what CI runs. ``tiny-*`` presets (d=64) on a few thousand real
  WMT14 En-De pairs. Chapters train what they need themselves; finished runs are cached in
  ``$CANLIB_CACHE_DIR/runs`` under a key of the code and the configuration, so a second
  execution of the book (nbval, then the HTML build) reuses them.
* ``small``: CPU hours or GPU minutes. ``small-*`` presets (d=256) on the ~37.6k real
  news-domain pairs of the ``small`` WMT14 recipe.
* ``full``: the paper's setup (d=512 presets, full WMT14 En-De, 4096 tokens x 8).

At ``small`` and ``full`` the chapters never train: they load what
``python -m canlib experiment --scale S`` stored under ``book/results/S/`` together with
its provenance (commit, date, device, config), and say so under every number.
Speed is measured at the paper's d=512 shapes at every scale (it depends on shapes,
not on what the weights learned).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from canlib.data.batching import collate, sorted_batches
from canlib.model.checkpoint import load_model
from canlib.model.config import ABLATION_SYSTEMS, DEPTH_SYSTEMS, PAPER_SYSTEMS, preset
from canlib.model.seq2seq import Seq2Seq
from canlib.io import cache_dir, results_dir
from canlib.studies.scales import SCALES, scale_spec
from canlib.studies.store import code_version, key as _key, study
from canlib.studies.results import describe

LABELS = {
    "baseline": "Baseline", "balanced": "Balanced", "san": "SAN", "aan": "AAN", "can": "CAN",
    "can_attn": "Compress Attention", "can_ffn": "Compress FFN", "depth-9-4": "9/4", "depth-14-1": "14/1",
}
ALL_SYSTEMS = tuple(dict.fromkeys(PAPER_SYSTEMS + DEPTH_SYSTEMS + ABLATION_SYSTEMS))
__all__ = ["LABELS", "ALL_SYSTEMS", "describe", "scale_spec", "trained", "translation", "speed"]


def cache_root() -> Path:
    return cache_dir()


@lru_cache(maxsize=None)
def corpus(scale: str):
    """The prepared corpus of a scale (prepared on first use; offline from CANLIB_DATA_DIR)."""
    from canlib.data import load_prepared, prepare

    spec = scale_spec(scale)
    # progress bars in a terminal (`canlib experiment`), none in a chapter's output
    return load_prepared(prepare(spec.corpus, spec.corpus_scale, progress=sys.stderr.isatty()))


# -- training ---------------------------------------------------------------------------------

@dataclass
class Run:
    """A finished training run of one system at one scale."""

    system: str
    scale: str
    run_dir: Path
    provenance: dict[str, Any]

    def model(self) -> Seq2Seq:
        """The averaged model (the paper averages the last checkpoints), in eval mode."""
        return load_model(self.run_dir / "average.pt").eval()

    def log(self) -> list[dict[str, Any]]:
        with open(self.run_dir / "log.jsonl", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]


def model_config(system: str, scale: str):
    spec = scale_spec(scale)
    return preset(spec.preset_prefix + system, vocab_size=corpus(scale).vocab.size)


def _run_dir(system: str, scale: str, train_cfg: dict[str, Any], init: str | None = None) -> Path:
    """Where a run lives. Tiny runs are keyed by the code too (they are cheap to redo); small and
    full runs are not, so an interrupted `canlib experiment` resumes them after a code change."""
    code = code_version() if scale == "tiny" else None
    key = _key(code, model_config(system, scale).to_dict(), train_cfg, corpus(scale).meta, init)
    return cache_root() / "runs" / scale / f"{system}{'-' + init if init else ''}-{key}"


def _train(system: str, scale: str, run_dir: Path, train_cfg: dict[str, Any], init_weights: dict | None = None) -> None:
    from canlib.training.trainer import TrainConfig, Trainer

    data = corpus(scale)
    cfg = TrainConfig(**{**train_cfg, "device": _training_device(scale)})
    resume = (run_dir / "checkpoints").exists()
    trainer = Trainer(
        model_config(system, scale), cfg, data.split("train"), data.split("valid"), run_dir,
        vocab=data.vocab, data_path=str(data.path), resume=resume, init_weights=init_weights,
    )
    trainer.fit()


def trained(system: str, scale: str) -> Run:
    """The finished training run of ``system`` at ``scale`` (trained now if this process may)."""
    spec = scale_spec(scale)
    run_dir = _run_dir(system, scale, spec.train)
    if not (run_dir / "result.json").exists():
        if scale != "tiny" and scale not in _COMPUTING:
            raise FileNotFoundError(
                f"{run_dir}: no finished {scale} run of {system} on this machine; "
                f"train it with `python -m canlib experiment --scale {scale} --systems {system}`"
            )
        _train(system, scale, run_dir, spec.train)
    with open(run_dir / "result.json", encoding="utf-8") as f:
        return Run(system, scale, run_dir, json.load(f)["provenance"])


def _batches(split, cfg, max_tokens: int = 4096) -> Iterator[dict[str, Any]]:
    """Length-sorted batches of a whole split, in a fixed order."""
    for indices in sorted_batches(split, max_tokens):
        yield collate(split, indices.tolist(), cfg.pad_id, cfg.bos_id, cfg.eos_id)


def teacher_forced_batches(run: Run, split: str, max_tokens: int = 4096) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(src, tgt_in) batches of a split of the run's corpus."""
    cfg = model_config(run.system, run.scale)
    for batch in _batches(corpus(run.scale).split(split), cfg, max_tokens):
        yield batch["src"], batch["tgt_in"]


# -- studies: computed (tiny, or by `canlib experiment`) or loaded with their provenance ----------

_COMPUTING: set[str] = set()  # scales whose studies this process computes and stores in book/results


def _study(name: str, scale: str, config: dict[str, Any], compute, device: str = "cpu") -> tuple[Any, dict[str, Any]]:
    return study(name, scale, config, compute, device, store=scale in _COMPUTING)


def _training_device(scale: str) -> str:
    return "cuda" if scale != "tiny" and torch.cuda.is_available() else "cpu"


def _study_config(system: str, scale: str) -> dict[str, Any]:
    spec = scale_spec(scale)
    return {"system": system, "preset": spec.preset_prefix + system, "corpus": f"{spec.corpus}/{spec.corpus_scale}",
            "train": spec.train, "beam": spec.beam}


def _translate_split(model: Seq2Seq, scale: str, split: str) -> tuple[list[str], dict[str, Any]]:
    """Beam-search translations of a split at the scale's beam, and their BLEU scores
    (tokenized as the paper, and sacreBLEU)."""
    from canlib.bleu import corpus_scores
    from canlib.decoding.translate import translate_lines

    data = corpus(scale)
    part = data.split(split)
    hyps = translate_lines(model, data.vocab, list(part.src_text), beam=scale_spec(scale).beam)
    return hyps, corpus_scores(hyps, list(part.tgt_text), lang="de")


def _evaluate(run: Run) -> dict[str, Any]:
    """Translate valid and test with beam search; BLEU as the paper (tokenized) and sacreBLEU."""
    model = run.model().to(_training_device(run.scale))
    out: dict[str, Any] = {"system": run.system, "run_dir": str(run.run_dir), "beam": scale_spec(run.scale).beam}
    for split in ("valid", "test"):
        hyps, scores = _translate_split(model, run.scale, split)
        out[split] = {k: scores[k] for k in ("bleu", "tok_bleu", "signature")}
        if split == "test":
            part = corpus(run.scale).split(split)
            out.update(hyps=hyps, srcs=list(part.src_text), refs=list(part.tgt_text))
    out["hyp_words_mean"] = float(np.mean([len(h.split()) for h in out["hyps"]]))
    out["ref_words_mean"] = float(np.mean([len(r.split()) for r in out["refs"]]))
    out["params"] = model.num_parameters()
    out["log"] = run.log()
    return out


def translation(system: str, scale: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result, provenance): valid/test BLEU, the test translations, lengths and the training log."""
    return _study(f"translation-{system}", scale, _study_config(system, scale),
                  lambda: _evaluate(trained(system, scale)), _training_device(scale))


def training_log(system: str, scale: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    result, prov = translation(system, scale)
    return result["log"], prov


def final_losses(log: list[dict[str, Any]]) -> tuple[float, float]:
    """(train loss, valid loss) at the last validation of a training log."""
    rows = [r for r in log if r.get("valid_loss") is not None]
    if not rows:
        raise ValueError("the training log holds no validation record")
    train = [r["train_loss"] for r in log if r.get("train_loss") is not None]
    return float(train[-1]) if train else float("nan"), float(rows[-1]["valid_loss"])


# -- analyses on trained models -----------------------------------------------------------------------

def similarity(scale: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Figure 2: cosine similarity of sub-layer inputs in the trained 6/6 Baseline (raw and LayerNorm'd)."""
    from canlib.studies.analysis import sublayer_similarity

    def compute() -> dict[str, Any]:
        run = trained("baseline", scale)
        model = run.model()
        out = {}
        for normalized in (False, True):
            sims = sublayer_similarity(model, teacher_forced_batches(run, "valid"), model.cfg.pad_id, normalized=normalized)
            out["normalized" if normalized else "residual"] = {k: v.tolist() for k, v in sims.items()}
        return out

    return _study("similarity", scale, _study_config("baseline", scale), compute)


def _quantile_buckets(values: np.ndarray, n: int) -> tuple[np.ndarray, list[str]]:
    edges = np.quantile(values, np.linspace(0, 1, n + 1))
    ids = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, n - 1)
    return ids, [f"{edges[i]:.0f}-{edges[i + 1]:.0f}" for i in range(n)]


def error_buckets(system: str, scale: str, n_freq: int = 5) -> dict[str, dict[str, list]]:
    """Figure 6: tokenized corpus BLEU per bucket of average source-subword training frequency
    (quantile buckets) and of source length in words (1-10, 11-20, 21-30, 31-40, 41+)."""
    from canlib.bleu import corpus_scores

    res, _ = translation(system, scale)
    data = corpus(scale)
    train = data.split("train")
    counts = np.bincount(np.concatenate([train[i][0] for i in range(len(train))]), minlength=data.vocab.size)
    freq = np.array([counts[data.vocab.encode(s)].mean() if s.strip() else 0.0 for s in res["srcs"]])
    freq_ids, freq_labels = _quantile_buckets(freq, n_freq)
    lengths = np.array([len(s.split()) for s in res["srcs"]])
    len_ids = np.minimum((np.maximum(lengths, 1) - 1) // 10, 4)
    len_labels = ["1-10", "11-20", "21-30", "31-40", "41+"]
    out = {}
    for key, ids, labels in (("frequency", freq_ids, freq_labels), ("length", len_ids, len_labels)):
        bleu, sizes = [], []
        for b in range(len(labels)):
            members = np.flatnonzero(ids == b)
            sizes.append(int(members.size))
            hyps = [res["hyps"][i] for i in members]
            refs = [res["refs"][i] for i in members]
            bleu.append(corpus_scores(hyps, refs, lang="de")["tok_bleu"] if members.size else float("nan"))
        out[key] = {"labels": labels, "bleu": bleu, "sentences": sizes}
    return out


@torch.no_grad()
def valid_loss(model: Seq2Seq, scale: str, label_smoothing: float = 0.1) -> float:
    """Label-smoothed cross entropy per target token on the validation split (as the trainer logs it)."""
    from canlib.training.trainer import label_smoothed_nll_loss

    data = corpus(scale).split("valid")
    cfg = model.cfg
    model.eval()
    total, tokens = 0.0, 0
    for batch in _batches(data, cfg):
        loss, _ = label_smoothed_nll_loss(model(batch["src"], batch["tgt_in"]), batch["tgt_out"], label_smoothing, cfg.pad_id)
        total += float(loss)
        tokens += int(batch["tgt_out"].ne(cfg.pad_id).sum())
    return total / tokens


def conversion_study(scale: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Beyond the paper: Balanced converted to CAN by canlib.model.compress, before and after a short
    fine-tune, against CAN trained from scratch."""
    from canlib.model.compress import standard_to_can

    spec = scale_spec(scale)
    finetune = {**spec.train, "max_epochs": 0, "max_steps": spec.finetune_steps, "warmup": max(1, spec.finetune_steps // 10)}

    def compute() -> dict[str, Any]:
        balanced = trained("balanced", scale).model()
        converted = standard_to_can(balanced)
        run_dir = _run_dir("can", scale, finetune, init="converted")
        if not (run_dir / "result.json").exists():
            _train("can", scale, run_dir, finetune, init_weights=converted.state_dict())
        tuned = Run("can", scale, run_dir, {}).model()
        scratch = trained("can", scale).model()
        rows = []
        for name, model in [("Balanced (trained)", balanced), ("converted, no training", converted),
                            ("converted + fine-tune", tuned), ("CAN from scratch", scratch)]:
            rows.append({"system": name, "valid loss": valid_loss(model, scale), "test tok-BLEU": _translate_split(model.eval(), scale, "test")[1]["tok_bleu"]})
        return {"rows": rows, "finetune": finetune}

    return _study("conversion", scale, {**_study_config("can", scale), "finetune": finetune}, compute, _training_device(scale))


# -- the scorecard ------------------------------------------------------------------------------------

BLEU_SCALES = ("small", "full")  # a tiny model barely translates: BLEU claims are not tested there


def _verdict(ok: bool | None, testable: bool) -> str:
    if not testable or ok is None:
        return "not tested at this scale"
    return "held" if ok else "did not hold"


def scorecard(scale: str) -> list[dict[str, Any]]:
    """Every tested claim: the paper's figure, ours, where ours came from, the criterion, the verdict."""
    from canlib.studies.paper import paper_numbers

    paper = paper_numbers()
    t2 = paper["table2_wmt14"]["en-de"]
    t5 = paper["table5_ablation_en-de"]
    f4 = paper["fig4_balance_en-de"]
    f7 = paper["fig7_parallel_en-de"]
    speed_t2, sp_prov = speed(list(PAPER_SYSTEMS), scale)
    speed_ab, ab_prov = speed(list(ABLATION_SYSTEMS), scale)
    by_batch, batch_prov = speed_sweep("batch", scale_spec(scale).batch_sweep, scale)
    sims, sim_prov = similarity(scale)
    bleu_ok = scale in BLEU_SCALES
    bleu = {s: translation(s, scale) for s in PAPER_SYSTEMS + ("depth-14-1",)}
    tb = {s: r[0]["test"]["tok_bleu"] for s, r in bleu.items()}
    pct = lambda a, b: 100 * (a / b - 1)  # noqa: E731
    diag = lambda m: float(np.mean(np.diag(np.asarray(m))))  # noqa: E731
    rows = [
        ("Balanced 12/2 decodes ~2x faster than Baseline 6/6", f"{t2['Balanced'][2] / t2['Baseline'][2]:.2f}x",
         f"{speed_t2['balanced'] / speed_t2['baseline']:.2f}x", "ours >= 1.8x",
         speed_t2["balanced"] / speed_t2["baseline"] >= 1.8, True, sp_prov),
        ("Balanced keeps Baseline's BLEU", f"{t2['Balanced'][0] - t2['Baseline'][0]:+.2f}",
         f"{tb['balanced'] - tb['baseline']:+.2f}", "ΔBLEU >= -0.5", tb["balanced"] - tb["baseline"] >= -0.5, bleu_ok, bleu["balanced"][1]),
        ("CAN is 27-42% faster than Balanced (En-De: +32%)", f"{pct(t2['CAN'][2], t2['Balanced'][2]):+.1f}%",
         f"{pct(speed_t2['can'], speed_t2['balanced']):+.1f}%", "ours >= +27%",
         pct(speed_t2["can"], speed_t2["balanced"]) >= 27, True, sp_prov),
        ("CAN costs only 0.1-0.5 BLEU against Balanced", f"{t2['CAN'][0] - t2['Balanced'][0]:+.2f}",
         f"{tb['can'] - tb['balanced']:+.2f}", "ΔBLEU >= -0.5", tb["can"] - tb["balanced"] >= -0.5, bleu_ok, bleu["can"][1]),
        ("SAN and AAN speed up less than CAN", f"SAN {pct(t2['SAN'][2], t2['Balanced'][2]):+.1f}%, AAN {pct(t2['AAN'][2], t2['Balanced'][2]):+.1f}%",
         f"SAN {pct(speed_t2['san'], speed_t2['balanced']):+.1f}%, AAN {pct(speed_t2['aan'], speed_t2['balanced']):+.1f}%, CAN {pct(speed_t2['can'], speed_t2['balanced']):+.1f}%",
         "both below CAN", max(speed_t2["san"], speed_t2["aan"]) < speed_t2["can"], True, sp_prov),
        ("Self- and cross-attention inputs are alike (Fig. 2 diagonal)", f"{diag(paper['fig2_similarity']['self_vs_cross']):.3f}",
         f"{diag(sims['residual']['self_vs_cross']):.3f}", "mean diagonal >= 0.9",
         diag(sims["residual"]["self_vs_cross"]) >= 0.9, True, sim_prov),
        ("Cross-attention and FFN inputs are less alike than self/cross", f"{diag(paper['fig2_similarity']['cross_vs_ffn']):.3f}",
         f"{diag(sims['residual']['cross_vs_ffn']):.3f}", "below the self/cross diagonal",
         diag(sims["residual"]["cross_vs_ffn"]) < diag(sims["residual"]["self_vs_cross"]), True, sim_prov),
        ("Compressing attention gives more speed than compressing the FFN (Table 5)",
         f"{pct(t5['Compress Attention'][1], t5['Balanced'][1]):+.1f}% vs {pct(t5['Compress FFN'][1], t5['Balanced'][1]):+.1f}%",
         f"{pct(speed_ab['can_attn'], speed_ab['balanced']):+.1f}% vs {pct(speed_ab['can_ffn'], speed_ab['balanced']):+.1f}%",
         "attention's gain > FFN's", speed_ab["can_attn"] > speed_ab["can_ffn"], True, ab_prov),
        ("CAN's speed-up shrinks with the batch size (Fig. 7)", f"{f7['delta_speed_pct'][0]:+.1f}% at 1, {f7['delta_speed_pct'][-1]:+.1f}% at 64",
         f"{pct(by_batch['can'][0], by_batch['balanced'][0]):+.1f}% at {scale_spec(scale).batch_sweep[0]}, "
         f"{pct(by_batch['can'][-1], by_batch['balanced'][-1]):+.1f}% at {scale_spec(scale).batch_sweep[-1]}",
         "smaller at the largest batch", pct(by_batch["can"][-1], by_batch["balanced"][-1]) < pct(by_batch["can"][0], by_batch["balanced"][0]),
         True, batch_prov),
        ("A 14/1 model loses BLEU against 12/2 (Fig. 4)", f"{f4['bleu'][3] - f4['bleu'][2]:+.2f}",
         f"{tb['depth-14-1'] - tb['balanced']:+.2f}", "ΔBLEU < 0", tb["depth-14-1"] < tb["balanced"], bleu_ok, bleu["depth-14-1"][1]),
    ]
    return [
        {"claim": claim, "paper": p, "ours": o, "criterion": crit, "verdict": _verdict(ok, testable),
         "scale": prov["scale"], "device": prov["device"], "commit": str(prov["commit"])[:12]}
        for claim, p, o, crit, ok, testable, prov in rows
    ]


# -- speed ----------------------------------------------------------------------------------------------

def _bench(study: str, systems: list[str], scale: str, extra: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``python -m canlib bench <study>`` in-process at the paper's d=512 shapes, random weights."""
    import tempfile

    from canlib.cli import main

    spec = scale_spec(scale)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    args = ["bench", study, "--systems", ",".join(systems), "--preset-size", "full", "--beam", str(spec.beam),
            "--forced-length", str(spec.forced_length), "--sentences", str(spec.speed_sentences),
            "--repeats", str(spec.speed_repeats), *extra]
    config = {"command": "python -m canlib " + " ".join(args)}

    def compute() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "bench.json"
            if main([*args, "--device", device, "--no-progress", "--json", str(out)]) != 0:
                raise RuntimeError(f"{config['command']} failed")
            return json.loads(out.read_text())

    return _study(f"speed-{study}-{_key(args)}", scale, config, compute, device)


def _bench_prov(raw: dict[str, Any], prov: dict[str, Any]) -> dict[str, Any]:
    return {**prov, "settings": raw.get("_settings"), "dtype": raw.get("_dtype")}


def speed(systems: list[str], scale: str, batch: int = 1) -> tuple[dict[str, float], dict[str, Any]]:
    """Median target tokens/s of each system (beam of the scale, batch 1), timed in one interleaved run."""
    raw, prov = _bench("speed", systems, scale, ["--batch", str(batch)])
    return {s: raw[s]["tok_per_s"] for s in systems}, _bench_prov(raw, prov)


REFERENCE_SYSTEMS = ("baseline", "ct2:baseline", "balanced", "ct2:balanced")


def reference_speed(scale: str) -> tuple[dict[str, float], dict[str, Any]] | None:
    """canlib and CTranslate2 (the reference engine, in its own process) on the same weights, timed in
    one interleaved run; None where CTranslate2 is not installed."""
    from canlib.decoding.ctranslate import ctranslate2_installed

    if not ctranslate2_installed():
        return None
    return speed(list(REFERENCE_SYSTEMS), scale)


def speed_sweep(kind: str, values: tuple[int, ...] | list[int], scale: str, systems: tuple[str, ...] = ("balanced", "can")):
    """tokens/s of each system for each beam size (``kind="beam"``), forced output length
    (``"length"``) or batch size (``"batch"``): ({system: [tok/s per value]}, provenance)."""
    values = [int(v) for v in values]
    joined = ",".join(map(str, values))
    study, flag, key = {"beam": ("beam", "--beams", "by_beam"), "length": ("beam", "--lengths", "by_length"),
                        "batch": ("batch", "--batches", "by_batch")}[kind]
    extra = [flag, joined]
    if study == "beam":  # the beam study sweeps both; pin the other sweep to one cheap value
        extra += ["--lengths", joined] if kind == "length" else ["--lengths", str(scale_spec(scale).forced_length)]
        if kind == "length":
            extra += ["--beams", str(scale_spec(scale).beam)]
    raw, prov = _bench(study, list(systems), scale, extra)
    return {s: [raw[s][key][str(v)] for v in values] for s in systems}, _bench_prov(raw, prov)


def step_breakdown(systems: list[str], scale: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per-component milliseconds per sentence (encoder, decoder layers, output + softmax, search)."""
    raw, prov = _bench("breakdown", systems, scale, [])
    return {s: raw[s]["breakdown"] for s in systems}, _bench_prov(raw, prov)


def breakdown_table(breakdown: dict[str, Any]):
    import pandas as pd

    rows = {}
    for system, parts in breakdown.items():
        rows[LABELS.get(system, system)] = {k.removesuffix("_ms") + " (ms)": v for k, v in parts.items() if k.endswith("_ms")}
        rows[LABELS.get(system, system)].update({k.removesuffix("_share") + " share": v for k, v in parts.items() if k.endswith("_share")})
    return pd.DataFrame(rows).T.round(3)


def speed_setting(prov: dict[str, Any]) -> str:
    """How a speed was measured, in words."""
    s = prov.get("settings") or {}
    return (f"beam {s.get('beam')}, batch {s.get('batch')}, forced length {s.get('forced_length')}, "
            f"{s.get('sentences')} sentences x {s.get('repeats')} repeats (median), {prov.get('dtype')} d=512 presets, random weights")


# -- the command that computes and stores everything for a scale ----------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", choices=SCALES, required=True, help="tiny (CPU minutes), small, full (the paper)")
    parser.add_argument("--systems", default=",".join(ALL_SYSTEMS), help="systems to train and evaluate")
    parser.add_argument("--studies", default="translation,similarity,speed,conversion",
                        help="comma-separated: translation, similarity, speed, conversion")


def run(args: argparse.Namespace) -> int:
    """Train (resumably), evaluate and store every study of a scale under book/results/<scale>/."""
    scale = args.scale
    spec = scale_spec(scale)
    systems = [s for s in args.systems.split(",") if s]
    unknown = sorted(set(systems) - set(ALL_SYSTEMS))
    if unknown:
        raise ValueError(f"--systems: unknown system(s) {', '.join(unknown)}; choose from {', '.join(ALL_SYSTEMS)}")
    studies = set(args.studies.split(","))
    _COMPUTING.add(scale)
    if "translation" in studies:
        for system in systems:
            result, _ = translation(system, scale)
            print(f"{system:<11} test tok-BLEU {result['test']['tok_bleu']:6.2f}  sacreBLEU {result['test']['bleu']:6.2f}  "
                  f"valid tok-BLEU {result['valid']['tok_bleu']:6.2f}")
    if "similarity" in studies:
        similarity(scale)
    if "speed" in studies:
        for group in (PAPER_SYSTEMS, DEPTH_SYSTEMS, ABLATION_SYSTEMS):
            tok_s, _ = speed(list(group), scale)
            print("  ".join(f"{s} {v:.1f} tok/s" for s, v in tok_s.items()))
        reference = reference_speed(scale)
        print("  ".join(f"{s} {v:.1f} tok/s" for s, v in reference[0].items()) if reference
              else "ctranslate2 is not installed: no reference-engine speed")
        speed_sweep("beam", spec.beam_sweep, scale)
        speed_sweep("length", spec.length_sweep, scale)
        speed_sweep("batch", spec.batch_sweep, scale)
        step_breakdown(["balanced", "can"], scale)
    if "conversion" in studies:
        conversion_study(scale)
    print(f"stored in {results_dir() / scale}")
    return 0
