"""The values the depths chapter (Figure 4) glues into its prose: BLEU over the four depths, how many seeds each
has, the claims registry's verdict of the 14/1 drop (its value, interval, strength and what would settle it), and the
speed of each depth from the stored CPU run and the stored GPU runs, each sentence about them generated from their
numbers.
"""

from __future__ import annotations

from typing import Any

from _code.cpu_speed import cpu_table, noisy_sentence
from _code.gpu_results import speed_reading
from _code.marks import marks
from _code.prose import by_verdict, names, sets_sentence
from _code.readers import requires_judged
from canlib.catalogue import DEPTH_SYSTEMS
from canlib.model.config import preset
from repro.results.layout import experiment_command
from repro.studies import paper
from repro.studies.claims import BY_ID, judged
from repro.studies.store import Store

DEPTHS = {"baseline": "6/6", "depth-9-4": "9/4", "balanced": "12/2", "depth-14-1": "14/1"}


def cpu_values(store: Store) -> dict[str, Any]:
    """The sentence under the speed table, generated from its numbers: whether every decoder layer moved to the
    encoder made the CPU's step faster (each depth's interval above the one before), and the fastest depth against
    6/6."""
    rows, prov = cpu_table(DEPTH_SYSTEMS, against="baseline", root=store.measurements)
    if prov["noisy"]:
        return {"cpu_sentence": noisy_sentence(prov, "No depth's CPU ratio is shown or read.")}
    order = sorted(DEPTH_SYSTEMS, key=lambda s: -preset(s).dec_layers)  # 6/6, 9/4, 12/2, 14/1
    spans = {s: rows[s]["interval"] or (rows[s]["low"], rows[s]["high"]) for s in order}
    not_rising = [DEPTHS[b] for a, b in zip(order, order[1:]) if spans[b][0] <= spans[a][1]]
    fastest = max(order, key=lambda s: rows[s]["ratio"])
    if not not_rising:
        head = "On the stored CPU run every decoder layer moved to the encoder makes the step faster"
    else:
        head = (
            "On the stored CPU run not every decoder layer moved to the encoder makes the step faster: "
            f"the intervals do not separate {names(not_rising)} from the depth before"
        )
    return {
        "cpu_sentence": f"{head}; the fastest, {DEPTHS[fastest]}, decodes {rows[fastest]['ratio']:.2f} times as fast "
        f"as the Baseline with {preset(fastest).dec_layers} of its {preset('baseline').dec_layers} decoder layers."
    }


def values(store: Store) -> dict[str, Any]:
    """Everything the depths chapter's prose quotes (a judged scale: the chapter presents stored runs)."""
    requires_judged(store, "the depths chapter")
    f4 = paper.figure4()
    runs = {s: store.runs(s) for s in DEPTHS}
    drop = judged(store)["depth-14-1-loses"]
    v: dict[str, Any] = {
        "balanced_bar": BY_ID["balanced-speed-1.90x"].evidence.ok.bound,
        "standard_seeds": drop.standard.seeds,
        "seeds_14_1": len(runs["depth-14-1"].seeds),
        "seeds_9_4": len(runs["depth-9-4"].seeds),
        "gap_9_4": runs["depth-9-4"].mean("test") - runs["baseline"].mean("test"),
        "paper_14_1": f4["14/1"]["bleu"] - f4["12/2"]["bleu"],
        "paper_9_4": f4["9/4"]["bleu"] - f4["6/6"]["bleu"],
        "gap_14_1": drop.value,  # the registry's number: 14/1 minus 12/2, means over every stored seed
        "drop_sets": sets_sentence(
            drop,
            (
                "14/1 scores surely below 12/2 on {met} of the {total} test sets",
                "surely level or above on {missed}",
                "too close to separate on {open}",
            ),
            "The two depths cannot be told apart on any of the {total} test sets.",
        ),
        "drop_settle": drop.settle.split(": `")[0] or drop.cost or "nothing: the evidence meets its standard",
        "drop_command": drop.command
        or experiment_command(store.scale, systems=["depth-14-1", "balanced"], seeds=range(1, drop.standard.seeds + 1)),
    }
    v["drop_low"], v["drop_high"] = drop.interval if drop.interval else (float("nan"), float("nan"))
    for mode, key in (("eager", "eager"), ("captured", "graphs")):
        reading = speed_reading(store, "balanced", "baseline", mode)
        v[f"{key}_12_2"] = reading["median"] if reading else float("nan")
    found = judged(store)
    v["takeaway_sentence"] = takeaway(found["balanced-speed-1.90x"].word, found["depth-14-1-loses"].word)
    return v | marks(store, ["depth-14-1-loses", "balanced-speed-1.90x"]) | cpu_values(store)


def takeaway(speed: str, deepest: str) -> str:
    """The chapter's one sentence, from the verdicts of the 12/2 speed-up and of the 14/1 drop."""
    speed_says = by_verdict(
        speed,
        "Moving decoder layers into the encoder buys at least the paper's speed-up from the Baseline to Balanced",
        "Moving decoder layers into the encoder buys less than the paper's speed-up from the Baseline to Balanced",
        "The runs leave open whether moving decoder layers into the encoder buys the paper's Baseline-to-Balanced "
        "speed-up",
    )
    deepest_says = by_verdict(
        deepest,
        "one step further, a single decoder layer scores below Balanced's two",
        "one step further, a single decoder layer does not score below Balanced's two",
        "what one step further, to a single decoder layer, costs in BLEU is undecided",
    )
    return f"{speed_says}; {deepest_says}."
