"""The values the ablation chapter (Table 5) glues into its prose: each compression against Balanced and the
order of the three against the paper's (the claims registry's verdicts on the four evaluation sets), and the
kernels each decoder layer launches per step (``book/results/cpu/ops.json``), the count that explains the speed
order.
"""

from __future__ import annotations

from typing import Any

from _code.cpu_speed import cpu_table, noisy_sentence
from _code.marks import marks
from _code.prose import by_verdict, lead_sentence, names, sets_sentence
from _code.readers import requires_judged
from _code.speed import bytes_split, predicted
from canlib.catalogue import ABLATION_SYSTEMS
from canlib.decoding.ops import NO_KERNEL  # the operators the counts treat as launching no kernel
from repro.studies import paper
from repro.studies.claims import judged
from repro.studies.store import Store

SYSTEMS = {"can_attn": "attn", "can_ffn": "ffn", "can": "all"}  # system -> key prefix
PAPER_ROWS = {
    "balanced": "Balanced",
    "can_attn": "Compress Attention",
    "can_ffn": "Compress FFN",
    "can": "Compress All",
}
BELOW = {
    "can_attn": "can-attn-below-balanced",
    "can_ffn": "can-ffn-keeps-bleu",
    "can": "can-below-balanced",
}  # each vs Balanced
SETS = {  # each claim's sentence of where its intervals decide (prose.sets_sentence): decided, and none decided
    "can_attn": (
        (
            "Compress Attention is surely below Balanced on {met} of the {total} test sets",
            "surely level or above on {missed}",
            "unresolved by the seeds on {open}",
        ),
        "The seeds' spread hides any loss of Compress Attention on all {total} test sets.",
    ),
    "can_ffn": (
        (
            "Compress FFN stays inside half a point of Balanced on {met} of its {total} test sets",
            "strays outside on {missed}",
            "straddles the line on {open}",
        ),
        "No test set of the {total} pins Compress FFN inside or outside half a point of Balanced.",
    ),
    "can": (
        (
            "With both compressions the loss is clear on {met} of the {total} test sets",
            "absent on {missed}",
            "uncertain on {open}",
        ),
        "The seeds' spread covers Compress All's difference on all {total} test sets.",
    ),
}
CLAIMS = (*BELOW.values(), "can-above-can-attn", "can-attn-below-can-ffn", "attn-faster-than-ffn")


def kernel_values(store: Store) -> dict[str, Any]:
    """Kernels one decoder layer launches per step on the GPU's code path (counted, not timed) for each system."""
    ops, prov = store.ops()
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


def kernels_removed(store: Store):
    """Per decoder layer, how many kernels of each operator each compression removes from a standard layer
    (negative: adds), on the GPU's code path; operators that launch no kernel (views) left out."""
    import pandas as pd

    ops, _ = store.ops()
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


def kernels_removed_table(store: Store):
    """:func:`kernels_removed` as the chapter shows it: each operator described in words beside PyTorch's name
    for it, a negative count read as a kernel added, and a last row with the net count per layer."""
    import pandas as pd

    removed = kernels_removed(store)
    frame = removed.reset_index(names="PyTorch operator")
    frame.insert(0, "kernel", [OPERATOR_WORDS.get(op, op) for op in frame["PyTorch operator"]])
    net = {"kernel": "net: kernels removed per layer", "PyTorch operator": "", **removed.sum().to_dict()}
    frame = pd.concat([frame, pd.DataFrame([net])], ignore_index=True)
    return frame.style.hide(axis="index")


def values(store: Store) -> dict[str, Any]:
    """Everything the ablation chapter's prose quotes (a judged scale: the chapter presents stored runs)."""
    requires_judged(store, "the ablation chapter")
    t5 = paper.table5()
    runs = {s: store.runs(s) for s in PAPER_ROWS}
    v: dict[str, Any] = {"scale": store.scale, "seeds": min(len(r.seeds) for r in runs.values())}
    j = judged(store)
    for s, key in SYSTEMS.items():
        v[f"paper_{key}"] = t5[PAPER_ROWS[s]].test_bleu - t5["Balanced"].test_bleu
        v[f"paper_speed_{key}"] = 100 * (t5[PAPER_ROWS[s]].speed / t5["Balanced"].speed - 1)
        v |= (j[BELOW[s]].at(1) or j[BELOW[s]]).values(key)  # Table 5 is read at the main plan's budget
        v[f"{key}_sets"] = sets_sentence(j[BELOW[s]], *SETS[s])
    v |= j["can-above-can-attn"].values("all_minus_attn") | j["can-attn-below-can-ffn"].values("attn_minus_ffn")
    v["paper_all_minus_attn"] = t5["Compress All"].test_bleu - t5["Compress Attention"].test_bleu
    v["paper_attn_minus_ffn"] = t5["Compress Attention"].test_bleu - t5["Compress FFN"].test_bleu
    v |= marks(store, CLAIMS) | kernel_values(store) | cpu_values(store)
    v["all_lead"] = lead_sentence(
        j[BELOW["can"]],
        "For this claim the {budget} models lead ({seeds} seeds of every system) over the {others}: {rule}.",
    )
    v["takeaway_sentence"] = takeaway(j["can-attn-below-balanced"].word, j["can-ffn-keeps-bleu"].word)
    v["order_sets"] = sets_sentence(
        j["can-above-can-attn"],
        (
            "Compress All tops Compress Attention on {met} of the {total} test sets",
            "trails or ties it on {missed}",
            "cannot be told from it on {open}",
        ),
        "Neither order of the two clears the seeds' spread on any of the {total} test sets.",
    )
    v["order_ffn_sets"] = sets_sentence(
        j["can-attn-below-can-ffn"],
        (
            "Compress Attention surely trails Compress FFN on {met} of the {total} test sets",
            "surely matches or beats it on {missed}",
            "cannot be placed on {open}",
        ),
        "No test set of the {total} orders Compress Attention and Compress FFN beyond the seeds' spread.",
    )
    same = (v["kernels_saved_attn"] > v["kernels_saved_ffn"]) == (v["paper_speed_attn"] > v["paper_speed_ffn"])
    v["kernel_order_word"] = "the way the paper measured them" if same else "otherwise than the paper measured them"
    return v


def cpu_values(store: Store) -> dict[str, Any]:
    """The sentences under the speed table, generated from its numbers: for which compressions the byte model's
    prediction lies inside the measured interval, and which order (the bytes', the kernels' or neither) the CPU's
    follows; a noisy run says so and reads nothing."""
    rows, prov = cpu_table(ABLATION_SYSTEMS, root=store.measurements)
    split = bytes_split(store, ABLATION_SYSTEMS, labels=PAPER_ROWS)
    if prov["noisy"] or split is None:
        instead = "The compressions' CPU speeds are left unread, and the table shows none."
        return {"cpu_sentence": noisy_sentence(prov, instead), "cpu_order": ""}
    inside, outside = split
    said = [f"The bytes account for the CPU's speed of {names(inside)}."] if inside else []
    if outside:
        said.append(
            f"For {names(outside)} the measured interval misses what the bytes predict: more than bytes sets it."
        )
    sentence = " ".join(said)
    kernels, guess = kernel_values(store), predicted(ABLATION_SYSTEMS)
    measured = sorted(ABLATION_SYSTEMS, key=lambda s: -rows[s]["ratio"])
    by_kernels = sorted(ABLATION_SYSTEMS, key=lambda s: kernels[f"kernels_{SYSTEMS.get(s, s)}"])
    by_bytes = sorted(ABLATION_SYSTEMS, key=lambda s: -round(guess[s], 3))
    follows = [name for name, order in (("the bytes'", by_bytes), ("the kernels'", by_kernels)) if order == measured]
    order = f"Fastest first, the stored CPU run measured {names([PAPER_ROWS[s] for s in measured])}: " + (
        f"{names(follows)} order." if follows else "neither the bytes' order nor the kernels'."
    )
    return {"cpu_sentence": sentence, "cpu_order": order}


def takeaway(attention: str, ffn: str) -> str:
    """The chapter's one sentence: which half of the compression costs BLEU, from the verdicts of its two halves."""
    attention_says = by_verdict(
        attention,
        "Compressing the attention alone costs BLEU against Balanced",
        "Compressing the attention alone costs no BLEU against Balanced",
        "Compress Attention's cost in BLEU against Balanced is not pinned down by these runs",
    )
    ffn_says = by_verdict(
        ffn,
        "folding the FFN in keeps Balanced's BLEU",
        "folding the FFN in loses more than half a point",
        "folding the FFN in may or may not keep Balanced's BLEU",
    )
    return f"{attention_says}; {ffn_says}."
