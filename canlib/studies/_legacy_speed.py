"""LEFTOVER, to be removed at merge: the speed studies and the scorecard as they were in
``canlib/studies/experiments.py``. Engineer "speed" rewrites them in ``canlib/studies/speed.py`` and
``canlib/studies/scorecard.py``. Changed here only so they run without the old module: ``store=``
is passed explicitly (was the module flag ``_COMPUTING``) and quality numbers come from
:mod:`canlib.studies.quality` and :mod:`canlib.studies.analyses`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from canlib.model.config import ABLATION_SYSTEMS, PAPER_SYSTEMS
from canlib.studies.runs import LABELS
from canlib.studies.scales import scale_spec
from canlib.studies.store import key as _key, study


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
    from canlib.studies.analyses import similarity
    from canlib.studies.quality import run_result

    sims, sim_prov = similarity(scale)
    bleu_ok = scale in BLEU_SCALES
    bleu = {s: run_result(s, scale) for s in PAPER_SYSTEMS + ("depth-14-1",)}
    tb = {s: r[0]["scores"]["test"]["tok_bleu"] for s, r in bleu.items()}
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

def _bench(study_name: str, systems: list[str], scale: str, extra: list[str], store: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``python -m canlib bench <study>`` in-process at the paper's d=512 shapes, random weights."""
    import tempfile

    from canlib.cli import main

    spec = scale_spec(scale)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    args = ["bench", study_name, "--systems", ",".join(systems), "--preset-size", "full", "--beam", str(spec.beam),
            "--forced-length", str(spec.forced_length), "--sentences", str(spec.speed_sentences),
            "--repeats", str(spec.speed_repeats), *extra]
    config = {"command": "python -m canlib " + " ".join(args)}

    def compute() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "bench.json"
            if main([*args, "--device", device, "--no-progress", "--json", str(out)]) != 0:
                raise RuntimeError(f"{config['command']} failed")
            return json.loads(out.read_text())

    return study(f"speed-{study_name}-{_key(args)}", scale, config, compute, device, store=store)


def _bench_prov(raw: dict[str, Any], prov: dict[str, Any]) -> dict[str, Any]:
    return {**prov, "settings": raw.get("_settings"), "dtype": raw.get("_dtype")}


def speed(systems: list[str], scale: str, batch: int = 1, store: bool = False) -> tuple[dict[str, float], dict[str, Any]]:
    """Median target tokens/s of each system (beam of the scale, batch 1), timed in one interleaved run."""
    raw, prov = _bench("speed", systems, scale, ["--batch", str(batch)], store)
    return {s: raw[s]["tok_per_s"] for s in systems}, _bench_prov(raw, prov)


REFERENCE_SYSTEMS = ("baseline", "ct2:baseline", "balanced", "ct2:balanced")


def reference_speed(scale: str, store: bool = False) -> tuple[dict[str, float], dict[str, Any]] | None:
    """canlib and CTranslate2 (the reference engine, in its own process) on the same weights, timed in
    one interleaved run; None where CTranslate2 is not installed."""
    from canlib.decoding.ctranslate import ctranslate2_installed

    if not ctranslate2_installed():
        return None
    return speed(list(REFERENCE_SYSTEMS), scale, store=store)


def speed_sweep(kind: str, values: tuple[int, ...] | list[int], scale: str, systems: tuple[str, ...] = ("balanced", "can"),
                store: bool = False):
    """tokens/s of each system for each beam size (``kind="beam"``), forced output length
    (``"length"``) or batch size (``"batch"``): ({system: [tok/s per value]}, provenance)."""
    values = [int(v) for v in values]
    joined = ",".join(map(str, values))
    bench_study, flag, key = {"beam": ("beam", "--beams", "by_beam"), "length": ("beam", "--lengths", "by_length"),
                        "batch": ("batch", "--batches", "by_batch")}[kind]
    extra = [flag, joined]
    if bench_study == "beam":  # the beam study sweeps both; pin the other sweep to one cheap value
        extra += ["--lengths", joined] if kind == "length" else ["--lengths", str(scale_spec(scale).forced_length)]
        if kind == "length":
            extra += ["--beams", str(scale_spec(scale).beam)]
    raw, prov = _bench(bench_study, list(systems), scale, extra, store)
    return {s: [raw[s][key][str(v)] for v in values] for s in systems}, _bench_prov(raw, prov)


def step_breakdown(systems: list[str], scale: str, store: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per-component milliseconds per sentence (encoder, decoder layers, output + softmax, search)."""
    raw, prov = _bench("breakdown", systems, scale, [], store)
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


def store_speed_studies(scale: str) -> None:
    """What ``canlib experiment --studies speed`` computes and stores (as the old command did)."""
    from canlib.model.config import DEPTH_SYSTEMS

    spec = scale_spec(scale)
    for group in (PAPER_SYSTEMS, DEPTH_SYSTEMS, ABLATION_SYSTEMS):
        tok_s, _ = speed(list(group), scale, store=True)
        print("  ".join(f"{s} {v:.1f} tok/s" for s, v in tok_s.items()))
    reference = reference_speed(scale, store=True)
    print("  ".join(f"{s} {v:.1f} tok/s" for s, v in reference[0].items()) if reference
          else "ctranslate2 is not installed: no reference-engine speed")
    speed_sweep("beam", spec.beam_sweep, scale, store=True)
    speed_sweep("length", spec.length_sweep, scale, store=True)
    speed_sweep("batch", spec.batch_sweep, scale, store=True)
    step_breakdown(["balanced", "can"], scale, store=True)
