"""The decoding chapter's pictures, toy example and numbers: the decoder cache as the models allocate it,
one beam-search step small enough to print, and the kernels a step launches (``book/results/cpu/ops.json``)."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from canlib.analysis.probes import H100_BANDWIDTH, bytes_per_decode_step
from canlib.catalogue import ALL_SYSTEMS, LABELS
from canlib.decoding.search import ForcedLengthSearch, SearchSettings, make_batch, new_search
from canlib.io import results_dir
from canlib.model.config import ModelConfig, preset
from canlib.model.seq2seq import DecoderCache, Seq2Seq
from canlib.repro.results.files import load_result

OPS = "cpu/ops.json"
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
    """What one decoder row keeps per step, read from the cache the model allocates: per layer and name,
    its width per position (in units of d) and whether it also holds the source in front."""
    model, cache = model_cache(system)
    d = model.cfg.d_model
    parts = []
    for i, (layer, rows) in enumerate(zip(model.decoder_layers, cache.rows)):
        for name, view in rows.items():
            parts.append({"layer": i + 1, "name": name, "width_d": view.size(-1) / d, "joint": layer.joint})
    source = sum(t.numel() for s in cache.sources for k, t in s.items() if k != "kv") / (
        cache.memory.sentences * cache.memory.states.size(1) * d
    )
    return {
        "parts": parts,
        "width_d": cache.buffer.size(-1) / d,
        "lead": cache.lead,
        "buffer_shape": tuple(cache.buffer.shape),
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
                width = view.size(-1)
                key = d if name == "kv" else 0
                for part, start, w in (("k", x, key), ("v", x + key, width - key)):
                    if w == 0:
                        continue
                    first = lead
                    if layer.joint and lead:
                        ax.add_patch(
                            Rectangle(
                                (start / d, 0),
                                w / d,
                                lead,
                                facecolor=colours[part],
                                alpha=0.35,
                                hatch="//",
                                edgecolor="white",
                            )
                        )
                    ax.add_patch(
                        Rectangle(
                            (start / d, first), w / d, positions - first, facecolor=colours[part], edgecolor="white"
                        )
                    )
                ax.text((x + width / 2) / d, -0.3, f"layer {i + 1}", ha="center", va="bottom", fontsize=9)
                x += width
        if lead:
            ax.axhline(lead, color="black", lw=1)
            ax.text(x / d + 0.1, lead / 2, "source\n(copied\nper row)", va="center", fontsize=9)
        ax.text(
            x / d + 0.1, lead + (positions - lead) / 2, "prefix\n(one\nposition\nper step)", va="center", fontsize=9
        )
        if not lead:
            ax.text(
                0.1,
                positions + 1.5,
                "source keys|values:\nkept once per sentence,\nread by the\ncross-attention",
                va="top",
                fontsize=9,
            )
        ax.set_xlim(0, x / d + 3.2)
        ax.set_ylim(max(positions, 9) + 3.5, -1.5)
        ax.set_xlabel("width per position (units of d)", fontsize=10)
        ax.set_title(
            f"{LABELS[system]}: {x // d}d per position" + (f",\n{lead} source positions" if lead else ""), fontsize=10
        )
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


def ops_table() -> tuple[pd.DataFrame, dict[str, Any]]:
    """Kernels per beam-search step on the GPU's code path, per system (``book/results/cpu/ops.json``)."""
    result, prov = load_result(results_dir() / OPS)
    rows = []
    for system in ALL_SYSTEMS:
        paths = result["systems"][system]
        c = paths["cuda"]
        row = {
            "system": LABELS[system],
            "decoder layers": c["decoder_layers"],
            "kernels per step": c["step"]["kernel_operators"],
        }
        if "cuda-fused" in paths:
            row["with the fused select"] = paths["cuda-fused"]["step"]["kernel_operators"]
        row.update(
            {
                "per decoder layer": c["per_layer"]["kernel_operators"],
                "embedding": c["embedding"]["kernel_operators"],
                "output": c["output"]["kernel_operators"],
                "search": c["search"]["kernel_operators"],
            }
        )
        rows.append(row)
    table = pd.DataFrame(rows).set_index("system")
    table.index.name = None
    return table, prov


def values() -> dict[str, Any]:
    """The numbers the chapter's prose quotes."""
    table, prov = ops_table()
    balanced, can = cache_layout("balanced"), cache_layout("can")
    out = {
        "balanced_width_d": balanced["width_d"],
        "can_width_d": can["width_d"],
        "balanced_layer_width_d": balanced["parts"][0]["width_d"],
        "can_layer_width_d": can["parts"][0]["width_d"],
        "can_lead": can["lead"],
        "balanced_source_d": balanced["source_per_position_d"],
        "ops_commit": prov["commit"][:7],
        "ops_date": prov["date"][:10],
    }
    for system, key in (("Balanced", "balanced"), ("CAN", "can"), ("Baseline", "baseline")):
        row = table.loc[system]
        out[f"{key}_kernels"] = int(row["kernels per step"])
        if "with the fused select" in row:
            out[f"{key}_fused_kernels"] = int(row["with the fused select"])
        out[f"{key}_layer_kernels"] = float(row["per decoder layer"])
        out[f"{key}_search_kernels"] = int(row["search"])
    out["can_over_balanced_kernels"] = out["can_kernels"] / out["balanced_kernels"]
    with torch.device("meta"):  # shapes only: the d=512 model's weights are never allocated
        weights = bytes_per_decode_step(Seq2Seq(preset("balanced")), bytes_per_weight=2)["total"]
    out["balanced_step_mb"] = weights / 1e6
    out["balanced_floor_us"] = 1e6 * weights / H100_BANDWIDTH
    out["bandwidth_tbs"] = H100_BANDWIDTH / 1e12
    return out
