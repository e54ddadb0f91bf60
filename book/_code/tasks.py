"""The values the tasks chapter glues into its prose: what the paper's Tables 2 and 3 say across its 14 tasks
(including what its own Table 3 says about its length-ratio explanation), which Multi30k directions are stored,
the claims registry's verdicts (the cross-task claim and the main direction's), and the command that trains the rest.
"""

from __future__ import annotations

from typing import Any

from _code.marks import marks
from _code.prose import by_verdict, count, names
from _code.results import corpus_values
from repro.results.layout import experiment_command
from repro.results.plan import DIRECTION_SYSTEMS, corpora
from repro.studies import paper
from repro.studies.claims import judged
from repro.studies.evidence import BLEU
from repro.studies.store import Store
from repro.studies.verdict import FAILS, ON_PAR


def paper_values() -> dict[str, Any]:
    """The paper's CAN/Balanced speed and BLEU gap over its 14 tasks, and the tasks its length-ratio argument names."""
    tasks = paper.tasks()
    speed = {name.replace(" ", "_"): rows["CAN"].speed / rows["Balanced"].speed for name, rows in tasks.items()}
    gaps = [rows["CAN"].test_bleu - rows["Balanced"].test_bleu for rows in tasks.values()]
    setup = paper.paper_numbers()["setup"]
    return {
        "tasks": len(speed),
        "speed_min": min(speed.values()),
        "speed_max": max(speed.values()),
        "gap_min": min(gaps),
        "gap_max": max(gaps),
        "speed_wmt14_de_en": speed["wmt14_de-en"],
        "speed_wmt17_de_en": speed["wmt17_de-en"],
        "speed_wmt14_en_fr": speed["wmt14_en-fr"],
        "ratio_de_en": setup["length_ratio_translation_to_source_de-en"],
        "ratio_en_fr": setup["length_ratio_translation_to_source_en-fr"],
        "wmt17_max": max(v for k, v in speed.items() if k.startswith("wmt17")),
    }


def values(store: Store) -> dict[str, Any]:
    """Everything the tasks chapter's prose quotes: the paper's numbers, the stored directions and the verdicts."""
    spec = store.spec
    directions = corpora(store.scale)
    stored = [
        c
        for c in directions
        if all((r := store.runs(s, c)) is not None and len(r.seeds) >= BLEU.seeds for s in ("balanced", "can"))
    ]
    missing = [c for c in directions if c not in stored]
    main = judged(store)["can-within-0.5"].at(1)
    v = paper_values() | {
        "directions": len(directions),
        "stored_directions": len(stored),
        "missing_directions": len(missing),
        "direction_seeds": BLEU.seeds,  # the standard's, what a direction needs to be judged
        "missing_runs": len(missing) * BLEU.seeds * len(DIRECTION_SYSTEMS),
        "stored_names": ", ".join(c.removeprefix("multi30k-") for c in stored),
        "missing_names": ", ".join(c.removeprefix("multi30k-") for c in missing),
        "tasks_command": experiment_command(
            store.scale, systems=DIRECTION_SYSTEMS, seeds=range(1, BLEU.seeds + 1), corpora=missing
        )
        if missing
        else "",
        "main_direction": spec.corpus.removeprefix("multi30k-"),
        "margin": ON_PAR,
    }
    v |= marks(store, ["can-within-0.5-tasks", "can-within-0.5"])
    failing = [r["set"] for r in judged(store)["can-within-0.5-tasks"].sets if r["verdict"] == FAILS]
    v["tasks_reason"] = (
        f"A claim on every direction fails on the first direction that misses the margin, and {names(failing)} "
        "already does, so"
        if failing
        else "The cross-task claim needs at least two directions, so"
    )
    main_runs = store.runs("can")
    v |= {"main_seeds": len(main_runs.seeds) if main_runs else 0, "updates": spec.train["max_steps"]}
    v |= corpus_values(store) | {"lead_budget": judged(store)["can-within-0.5"].budget or 1}
    if main is not None and main.value is not None:
        v["main_gap"], v["main_pm"] = main.value, main.values("main")["main_pm"]
    v["takeaway_sentence"] = takeaway(judged(store)["can-within-0.5-tasks"].word, v, failing)
    return v


def takeaway(word: str, v: dict[str, Any], failing: list[str]) -> str:
    """The chapter's one sentence: the paper's spread of CAN's gap over its tasks, how many of our directions are
    trained, and what the cross-task claim's verdict word says of them."""
    paper_gaps = f"{v['gap_min']:+.2f} to {v['gap_max']:+.2f} BLEU"
    trained = f"{count(v['stored_directions'])} of our {count(v['directions'])} Multi30k directions"
    return by_verdict(
        word,
        f"Like the paper's {v['tasks']} tasks ({paper_gaps}), each of the {count(v['stored_directions'])} Multi30k "
        f"directions we trained keeps CAN within {v['margin']} BLEU of Balanced.",
        f"CAN falls more than {v['margin']} BLEU behind Balanced on {names(failing)}, so the consistency the paper "
        f"reports over its {v['tasks']} tasks ({paper_gaps}) does not carry over to Multi30k.",
        f"The paper's {v['tasks']} tasks put CAN {paper_gaps} from Balanced, but with {trained} trained nothing here "
        "decides yet whether that consistency carries over to other language pairs.",
        f"CAN keeps within {v['margin']} BLEU of Balanced on some of the {count(v['stored_directions'])} Multi30k "
        f"directions we trained and not on others, unlike the paper's {v['tasks']} tasks ({paper_gaps}).",
    )
