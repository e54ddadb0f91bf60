"""The values the ablation chapter (Table 5) glues into its prose: each compression against Balanced, the
order of the three against the paper's, judged by the verdict rule on the four evaluation sets, and the kernels
each decoder layer launches per step (``book/results/cpu/ops.json``), the count that explains the speed order.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from canlib.bench.ops import NO_KERNEL  # the operators the counts treat as launching no kernel
from canlib.studies import evidence as ev
from canlib.studies.paper import paper_numbers
from canlib.studies.speed import stored_ops
from canlib.studies.verdict import FAILED, HELD, NOISE, PARTLY_FAILED, PARTLY_HELD, judge, word

SYSTEMS = {"can_attn": "attn", "can_ffn": "ffn", "can": "all"}  # system -> key prefix
PAPER_ROWS = {"balanced": "Balanced", "can_attn": "Compress Attention", "can_ffn": "Compress FFN", "can": "Compress All"}
LOSES = {HELD: "loses BLEU against Balanced", FAILED: "gains BLEU against Balanced", NOISE: "is within noise of Balanced",
         PARTLY_HELD: "loses BLEU on some sets and is within noise of Balanced on the others",
         PARTLY_FAILED: "gains BLEU on some sets and is within noise of Balanced on the others"}
ORDER = {HELD: "keeps the paper's order", FAILED: "reverses the paper's order", NOISE: "is within noise of either order",
         PARTLY_HELD: "keeps the paper's order on some sets and is within noise on the others",
         PARTLY_FAILED: "reverses the paper's order on some sets and is within noise on the others"}


def kernel_values(root: Path | None = None) -> dict[str, Any]:
    """Kernels one decoder layer launches per step on the GPU's code path (counted, not timed) for each system."""
    ops, prov = stored_ops(root=root)
    per_layer = {s: ops["systems"][s]["cuda"]["per_layer"]["kernel_operators"] for s in PAPER_ROWS}
    v = {f"kernels_{SYSTEMS.get(s, s)}": int(k) for s, k in per_layer.items()}
    for s, key in SYSTEMS.items():
        v[f"kernels_saved_{key}"] = int(per_layer["balanced"] - per_layer[s])
    v["ops_commit"] = str(prov["commit"])[:7]
    return v


# what each kernel-launching PyTorch operator of a decoder layer does, in a reader's words
OPERATOR_WORDS = {
    "addmm": "matrix product plus bias (a linear map)",
    "_addmm_activation": "matrix product plus bias with the ReLU fused in (the FFN's first map)",
    "relu": "ReLU on its own",
    "native_layer_norm": "LayerNorm",
    "_scaled_dot_product_efficient_attention": "attention: scores, softmax and mixing in one kernel",
    "add": "element-wise add (a residual, or adding two products)",
    "mul": "element-wise multiply",
    "bmm": "batched matrix product",
    "mm": "matrix product",
    "_softmax": "softmax",
    "copy_": "copy",
}


def kernels_removed(root: Path | None = None):
    """Per decoder layer, how many kernels of each operator each compression removes from a standard layer
    (negative: adds), on the GPU's code path; operators that launch no kernel (views) left out."""
    import pandas as pd

    ops, _ = stored_ops(root=root)
    systems = ops["systems"]
    layers = {s: systems[s]["cuda"]["decoder_layers"] for s in PAPER_ROWS}
    base = systems["balanced"]["cuda"]["by_name"]
    rows = {}
    for s in SYSTEMS:
        counts = systems[s]["cuda"]["by_name"]
        for name in sorted(set(base) | set(counts)):
            if name in NO_KERNEL:
                continue
            diff = base.get(name, 0) / layers["balanced"] - counts.get(name, 0) / layers[s]
            if diff:
                rows.setdefault(name.removeprefix("aten."), {})[PAPER_ROWS[s]] = diff
    frame = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=[PAPER_ROWS[s] for s in SYSTEMS])
    frame = frame.fillna(0).astype(int)
    frame.index.name = "operator (removed per layer)"
    return frame.sort_values(list(frame.columns), ascending=False)


def kernels_removed_table(root: Path | None = None):
    """:func:`kernels_removed` as the chapter shows it: each operator described in words beside PyTorch's name
    for it, a negative count read as a kernel added, and a last row with the net count per layer."""
    import pandas as pd

    removed = kernels_removed(root)
    frame = removed.reset_index(names="PyTorch operator")
    frame.insert(0, "kernel", [OPERATOR_WORDS.get(op, op) for op in frame["PyTorch operator"]])
    net = {"kernel": "net: kernels removed per layer", "PyTorch operator": "", **removed.sum().to_dict()}
    frame = pd.concat([frame, pd.DataFrame([net])], ignore_index=True)
    return frame.style.hide(axis="index")


def values(scale: str, root: Path | None = None, refs: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Everything the ablation chapter's prose quotes at ``scale`` (a judged scale: the chapter presents stored
    runs; ``refs``: each evaluation set's references, read from the corpus when not given)."""
    ev.require_judged(scale, "the ablation chapter")
    t5 = paper_numbers()["table5_ablation_en-de"]
    refs = ev.references(scale) if refs is None else refs
    runs = {s: ev.main_runs(scale, s, root=root) for s in PAPER_ROWS}
    v: dict[str, Any] = {"scale": scale, "seeds": min(len(r.seeds) for r in runs.values())}
    for s, key in SYSTEMS.items():
        v[f"paper_{key}"] = t5[PAPER_ROWS[s]][0] - t5["Balanced"][0]
        v[f"paper_speed_{key}"] = 100 * (t5[PAPER_ROWS[s]][1] / t5["Balanced"][1] - 1)
        j = judge([(1.0, runs[s]), (-1.0, runs["balanced"])], lambda d: d < 0, refs)
        v |= j.values(key)
        v[f"{key}_word"] = word(j, LOSES)
    order = judge([(1.0, runs["can"]), (-1.0, runs["can_attn"])], lambda d: d > 0, refs)  # the paper: All loses less
    v |= order.values("all_minus_attn")
    v["paper_all_minus_attn"] = t5["Compress All"][0] - t5["Compress Attention"][0]
    v["order_word"] = word(order, ORDER)
    costlier = judge([(1.0, runs["can_attn"]), (-1.0, runs["can_ffn"])], lambda d: d < 0, refs)  # the paper: attention costs more
    v |= costlier.values("attn_minus_ffn")
    v["paper_attn_minus_ffn"] = t5["Compress Attention"][0] - t5["Compress FFN"][0]
    v["attn_order_word"] = word(costlier, ORDER)
    v |= kernel_values(root)
    same = (v["kernels_saved_attn"] > v["kernels_saved_ffn"]) == (v["paper_speed_attn"] > v["paper_speed_ffn"])
    v["kernel_order_word"] = "the way the paper measured them" if same else "otherwise than the paper measured them"
    return v
