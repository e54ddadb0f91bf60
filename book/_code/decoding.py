"""The decoding chapter's pictures, toy example and numbers: the decoder cache as the models allocate it,
one beam-search step small enough to print, and the kernels a step launches (``book/results/cpu/ops.json``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from _code.speed_frames import H100_BANDWIDTH, bytes_per_decode_step, decoding_costs
from canlib.catalogue import ALL_SYSTEMS, LABELS
from canlib.decoding.search import ForcedLengthSearch, SearchSettings, make_batch, new_search
from canlib.io import results_dir
from canlib.model.config import ModelConfig, preset
from canlib.model.seq2seq import DecoderCache, Seq2Seq
from repro.results.files import load_result

TOY_WORDS = ["<pad>", "<unk>", "<s>", "</s>", "a", "dog", "runs", "."]  # ids 0-3 are canlib's special tokens


def model_cache(system: str, source_length: int = 5, beam: int = 2, steps: int = 6) -> tuple[Seq2Seq, DecoderCache]:
    """A tiny random ``system`` (d=64) and the cache it allocates for one sentence of ``source_length`` tokens."""
    torch.manual_seed(0)
    model = Seq2Seq(preset(f"tiny-{system}", vocab_size=50)).eval()
    src = make_batch([[4 + i for i in range(source_length - 1)]], model.cfg.pad_id, model.cfg.eos_id)
    with torch.no_grad():
        cache = model.init_cache(model.encode(src, beam=beam), max_len=steps)
    return model, cache


def cache_layout(system: str) -> dict[str, Any]:
    """What one decoder row keeps per step, read from the cache the model allocates: the buffer's and the first
    layer's width per position (in units of d), the source positions in front of every row, and the source's
    keys|values per position."""
    model, cache = model_cache(system)
    d = model.cfg.d_model
    source = sum(t.numel() for s in cache.sources for k, t in s.items() if k != "kv") / (
        cache.memory.sentences * cache.memory.states.size(1) * d
    )
    return {
        "width_d": cache.buffer.size(-1) / d,
        "layer_width_d": sum(view.size(-1) for view in cache.rows[0].values()) / d,
        "lead": cache.lead,
        "source_per_position_d": source,
    }


def draw_caches(systems: tuple[str, ...] = ("balanced", "can")) -> Figure:
    """One panel per system: its decoder cache buffer (positions x width) as allocated, one block per layer
    and key/value part; a joint layer's rows start with the source's keys|values (hatched)."""
    fig, axes = plt.subplots(1, len(systems), figsize=(7.5, 4.4), sharey=True)
    colours = {"k": "#4c72b0", "v": "#dd8452"}
    for ax, system in zip(axes, systems):
        model, cache = model_cache(system)
        d = model.cfg.d_model
        lead, positions = cache.lead, cache.buffer.size(0)
        x = 0
        for i, (layer, rows) in enumerate(zip(model.decoder_layers, cache.rows)):
            for name, view in rows.items():
                key = d if name == "kv" else 0
                for part, start, w in (("k", x, key), ("v", x + key, view.size(-1) - key)):
                    if w and layer.joint and lead:  # the source's keys|values, copied in front of every row
                        hatched = dict(alpha=0.35, hatch="//")
                        ax.add_patch(Rectangle((start / d, 0), w / d, lead, fc=colours[part], ec="white", **hatched))
                    if w:
                        ax.add_patch(
                            Rectangle((start / d, lead), w / d, positions - lead, fc=colours[part], ec="white")
                        )
                ax.text((x + view.size(-1) / 2) / d, -0.3, f"layer {i + 1}", ha="center", va="bottom", fontsize=9)
                x += view.size(-1)
        notes = [(lead + (positions - lead) / 2, "prefix\n(one\nposition\nper step)")]
        if lead:
            ax.axhline(lead, color="black", lw=1)
            notes.append((lead / 2, "source\n(copied\nper row)"))
        else:
            kept = "source keys|values:\nkept once per sentence,\nread by the\ncross-attention"
            ax.text(0.1, positions + 1.5, kept, va="top", fontsize=9)
        for y, text in notes:
            ax.text(x / d + 0.1, y, text, va="center", fontsize=9)
        ax.set_xlim(0, x / d + 3.2)
        ax.set_ylim(max(positions, 9) + 3.5, -1.5)
        ax.set_xlabel("width per position (units of d)", fontsize=10)
        source = f",\n{lead} source positions" if lead else ""
        ax.set_title(f"{LABELS[system]}: {x // d}d per position{source}", fontsize=10)
    axes[0].set_ylabel("position in the buffer", fontsize=10)
    handles = [Rectangle((0, 0), 1, 1, facecolor=c) for c in colours.values()]
    fig.legend(handles, ["keys", "values"], loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def toy_model(seed: int = 3) -> Seq2Seq:
    """A random one-layer Balanced-like model over the eight words of :data:`TOY_WORDS`."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=len(TOY_WORDS),
        d_model=16,
        heads=2,
        ffn_dim=32,
        enc_layers=1,
        dec_layers=1,
        dropout=0.0,
        attn_dropout=0.0,
        relu_dropout=0.0,
        max_len=16,
    )
    return Seq2Seq(cfg).eval()


def toy_search(steps: int = 3, beam: int = 2) -> ForcedLengthSearch:
    """A forced-length beam search of the toy model over one five-token source, before its first step (keeping
    every final beam as a hypothesis: the chapter's first exercise reads them)."""
    model = toy_model()
    src = make_batch([[4, 5, 6, 7]], model.cfg.pad_id, model.cfg.eos_id)
    with torch.no_grad():
        return new_search(model, src, SearchSettings(beam=beam, forced_length=steps, return_all=True))


def step_table(search: ForcedLengthSearch, t: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run step t of ``search`` and show it: every candidate (beam, word, log p, running score) before the
    select step, and the beams it keeps (which beam each continues, the word, the new score)."""
    with torch.no_grad():
        logp = search.log_probs(search.hidden(t))
        cum = search.cum.clone()
        words = search.inputs(t).tolist()
        rows = []
        for b in range(search.k):
            for w in [1] + list(range(4, len(TOY_WORDS))):  # never PAD, BOS or EOS (a forced length)
                rows.append(
                    {
                        "beam": b,
                        "last word": TOY_WORDS[words[b]],
                        "next word": TOY_WORDS[w],
                        "log p": logp[b, w].item(),
                        "score": (cum[0, b] + logp[b, w]).item(),
                    }
                )
        search.select(t, logp.clone())
    kept = search.history[t + 1]
    chosen = pd.DataFrame(
        {
            "continues beam": kept[0].tolist(),
            "word": [TOY_WORDS[w] for w in kept[1].tolist()],
            "score": search.cum[0].tolist(),
        }
    )
    candidates = pd.DataFrame(rows).sort_values("score", ascending=False, kind="stable").reset_index(drop=True)
    return candidates.round(3), chosen.round(3)


def ops_frame(ops: dict[str, Any], systems: Sequence[str] = ALL_SYSTEMS) -> pd.DataFrame:
    """Kernels one beam-search step launches on the GPU's code path, per system and part, from a stored operator
    count (``book/results/cpu/ops.json``): whole step, with the select step fused, per decoder layer, embedding,
    output and search."""
    rows = {}
    for system in systems:
        c, fused = ops["systems"][system]["cuda"], ops["systems"][system].get("cuda-fused")
        rows[LABELS[system]] = {
            "decoder layers": c["decoder_layers"],
            "kernels per step": c["step"]["kernel_operators"],
            "with the fused select": fused["step"]["kernel_operators"] if fused else None,
            "per decoder layer": c["per_layer"]["kernel_operators"],
            **{part: c[part]["kernel_operators"] for part in ("embedding", "output", "search")},
        }
    frame = pd.DataFrame(rows).T.dropna(axis=1, how="all")
    counts = {c: "Int64" for c in frame.columns if c != "per decoder layer"}  # whole kernels; a layer's may be half
    return frame.astype(counts).rename_axis("system")


@functools.cache
def step_mb(system: str, bytes_per_weight: int = 2) -> float:
    """Megabytes of weights one decoding step of ``system`` reads at the paper's d=512 (the decoder layers without
    the source-side projections, and the tied output embedding; fp16 by default): shapes only, on the meta device."""
    with torch.device("meta"):
        model = Seq2Seq(preset(system))
    return bytes_per_decode_step(model, bytes_per_weight)["total"] / 1e6


def stored_ops() -> tuple[dict[str, Any], dict[str, Any]]:
    """(result, provenance) of the stored kernel counts of today's code (``book/results/cpu/ops.json``)."""
    return load_result(results_dir() / "cpu" / "ops.json")


# the glued count (``<system>_<name>``) of each whole-kernel column of :func:`ops_frame`
KERNEL_COLUMNS = {"kernels": "kernels per step", "search_kernels": "search", "fused_kernels": "with the fused select"}


def values() -> dict[str, Any]:
    """The numbers the chapter's prose quotes."""
    ops, _ = stored_ops()
    table = ops_frame(ops, ("balanced", "can", "baseline", "san", "aan"))
    balanced, can = cache_layout("balanced"), cache_layout("can")
    out = {
        "balanced_width_d": balanced["width_d"],
        "can_width_d": can["width_d"],
        "balanced_layer_width_d": balanced["layer_width_d"],
        "can_layer_width_d": can["layer_width_d"],
        "can_lead": can["lead"],
        "balanced_source_d": balanced["source_per_position_d"],
    }
    for key in ("balanced", "can", "baseline", "san", "aan"):
        row = table.loc[LABELS[key]]
        out |= {f"{key}_{name}": int(row[column]) for name, column in KERNEL_COLUMNS.items()}
        out[f"{key}_layer_kernels"] = float(row["per decoder layer"])  # a layer's count may be a half
    out["can_over_balanced_kernels"] = out["can_kernels"] / out["balanced_kernels"]
    for key in ("balanced", "aan"):  # the matrix weights one decoder layer's step reads, in d^2
        out[f"{key}_layer_weights_d2"] = decoding_costs(key)["weights_per_step_d2"]
    out["balanced_step_mb"] = step_mb("balanced")
    out["balanced_floor_us"] = out["balanced_step_mb"] * 1e12 / H100_BANDWIDTH
    out["bandwidth_tbs"] = H100_BANDWIDTH / 1e12
    return out
