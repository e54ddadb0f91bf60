"""The values the beyond chapter glues into its prose: why CAN loses more BLEU here than in the paper, read from
the three studies' stored models (each as soon as its own models are stored) on the four evaluation sets.

Every verdict is the claims registry's (:mod:`repro.studies.claims`;
:data:`STUDY_CLAIMS`
names them), glued as its marked word. At a scale whose models are not judged (tiny) only the plan is given (how
many models, the commands): tiny models do not translate, so no number of theirs is a result.
"""

from __future__ import annotations

from typing import Any

from _code.marks import marks
from _code.prose import lead_sentence, names, sets_sentence
from _code.training import undertraining_values
from repro.results.layout import experiment_command
from repro.results.studies import BUDGET_SYSTEMS, NEXT, ORIGINAL, SEEDS, STUDENTS, STUDIES, study_record
from repro.studies import paper
from repro.studies.claims import PAPER_CAN_ON, judged
from repro.studies.store import Store
from repro.studies.verdict import FAILS, HOLDS, INCONCLUSIVE, MIXED, NOT_RUN, ON_PAR

# the claims (registry ids) each study answers, the main gap first
STUDY_CLAIMS = {
    "budget": ("can-within-0.5", "budget-narrows-gap", "budget-adds-balanced", "budget-adds-can"),
    "distill": ("kd-can-within-0.5", "kd-narrows-gap", *(f"kd-adds-{s}" for s in STUDENTS)),
    "can-6-6": ("can-6-6-within-0.5", "can-6-6-hurts-less"),
}


def shown(store: Store) -> dict[str, bool]:
    """Which study has its own models stored with at least two seeds of every system it compares (and the main
    plan's Balanced and CAN)."""

    def enough(*runs: Any) -> bool:
        return all(r is not None and len(r.seeds) >= 2 for r in runs)

    if not store.judged:
        return {name: False for name in STUDY_CLAIMS}
    main = enough(store.runs("balanced"), store.runs("can"))
    return {
        "budget": main
        and any(enough(*(store.budget_runs(s, f) for s in BUDGET_SYSTEMS)) for f in store.budget_factors() if f > 1),
        "distill": main
        and enough(store.study_runs("distill", "balanced", "kd"), store.study_runs("distill", "can", "kd")),
        "can-6-6": main and enough(store.study_runs("can-6-6", "can-6-6"), store.runs("baseline")),
    }


def default_scale(root: Any = None) -> str:
    """ "small" once any study's own models (and the main runs it compares with) are stored at small, else
    "tiny", where the chapter shows what each study does and its command, not numbers."""
    return "small" if any(shown(Store("small", root)).values()) else "tiny"


# what a verdict of a study's claim means for the explanation it tests (the verdict itself is glued, never typed)
READING = {
    HOLDS: "supports it as an explanation",
    FAILS: "rules it out as an explanation",
    MIXED: "neither supports nor rules it out: the sets disagree",
    INCONCLUSIVE: "neither supports nor rules it out yet",
    NOT_RUN: "has not been tested",
}

GPU_SCRIPT = "bash scripts/gpu_small.sh"  # the script that runs what is left of the small plan on one GPU


# per study: the glue-key suffix of its contrasts, the prefix of its reading and of its per-system gains
KEYS = {"budget": ("2x", "budget", "gain_2x"), "distill": ("kd", "kd", "kd_gain"), "can-6-6": ("66", "can66", "")}
CHANGE_SETS = {  # each study's sentence of where its intervals decide (prose.sets_sentence): decided, none decided
    "budget": (
        (
            "Across the {total} test sets, the longer budget's gap is surely narrower on {met}",
            "surely as wide or wider on {missed}",
            "unclear on {open}",
        ),
        "None of the {total} test sets shows a narrowing larger than its seeds' spread.",
    ),
    "distill": (
        (
            "Distillation surely narrows the gap on {met} of the {total} test sets",
            "surely keeps or widens it on {missed}",
            "leaves {open} in doubt",
        ),
        "On none of the {total} test sets is the distilled gap surely narrower or surely not.",
    ),
    "can-6-6": (
        (
            "CAN's cost is surely smaller at 6/6 on {met} of the {total} test sets",
            "surely as large or larger on {missed}",
            "unclear on {open}",
        ),
        "The seeds cannot order the two costs on any of the {total} test sets.",
    ),
}


def plan_values() -> dict[str, Any]:
    """What the studies train (true at every scale): models, seeds, updates and the commands."""
    models = {n: len(study_record(n).models()) for n in STUDIES}
    return {
        "models": sum(models.values()),
        "original_models": sum(models[n] for n in ORIGINAL),
        "next_models": sum(models[n] for n in NEXT),
        "original_command": experiment_command("small", corpora=["multi30k-en-de"], studies=ORIGINAL),
        "distill_seeds": len(SEEDS["distill"]),
        "updates_1x": Store("small").spec.train["max_steps"],
        "gpu_command": GPU_SCRIPT,
    }


def paper_values() -> dict[str, Any]:
    t2, t4 = paper.table2("en-de"), paper.table4()
    return {
        "paper_gap": t2["CAN"].test_bleu - t2["Balanced"].test_bleu,
        "paper_can66": PAPER_CAN_ON["6/6"],
        "paper_can122": PAPER_CAN_ON["12/2"],
        "paper_kd_balanced": t4["Balanced"].after_kd - t4["Balanced"].before_kd,
        "paper_kd_can": t4["CAN"].after_kd - t4["CAN"].before_kd,
        "paper_kd_gap": t4["CAN"].after_kd - t4["Balanced"].after_kd,
    }


def values(store: Store) -> dict[str, Any]:
    """Everything the beyond chapter's prose quotes: the plan and the paper's numbers always, the studies' results
    (numbers from the registry's judgements, verdicts as its marked words) where their models are stored at a
    judged scale."""
    v = plan_values() | paper_values() | {"margin": ON_PAR}
    # the solutions quote it at every scale; the budget study's logs replace it once they are stored
    v["continued_sentence"] = "Once the budget study is stored, its logs say whether they do."
    if not store.judged:
        v["takeaway_sentence"] = (
            "No model of this scale is judged, so the chapter sets out the three studies, what each would test and "
            "the commands that store them."
        )
        return v | conversion_values(store)
    ready = shown(store)
    v |= {f"{k.replace('-', '')}_shown": ok for k, ok in ready.items()}
    j = judged(store)
    gap = j["can-within-0.5"]
    main = {s: store.runs(s) for s in ("balanced", "can")}
    v |= gap.at(1).values("gap")
    v["gap_lead"] = lead_sentence(
        gap,
        "As on the results page, the verdict is that of the {budget} models ({seeds} seeds a system), not the "
        "{others}: {rule}.",
    )
    v["gap_sets"] = sets_sentence(
        gap,
        (
            "Its intervals put CAN inside the margin on {met} of its {total} test sets",
            "outside it on {missed}",
            "on the line on {open}",
        ),
        "Its intervals settle the margin on none of the {total} test sets.",
    )
    v["gap_vs_paper"] = "larger than" if v["gap_test"] < v["paper_gap"] else "no larger than"
    v["can_test"], v["balanced_test"] = main["can"].mean("test"), main["balanced"].mean("test")
    v["main_seeds"] = len(main["can"].seeds)
    for study, (suffix, reading, gain) in KEYS.items():
        if not ready[study]:
            continue
        claims = STUDY_CLAIMS[study]  # the study's gap, its change of the main gap, its gains per system
        closer, change = j[claims[0]], j[claims[1]]
        v |= marks(store, claims) | change.values(f"change_{suffix}")
        v |= (closer.at(2) if study == "budget" else closer).values(f"gap_{suffix}")
        v[f"change_{suffix}_sets"] = sets_sentence(change, *CHANGE_SETS[study])
        v[f"{reading}_reading"] = READING[change.word]
        for claim in claims[2:]:
            v |= j[claim].values(f"{gain}_{claim.rsplit('-', 1)[1]}")
    if ready["budget"]:
        change = j["budget-narrows-gap"]
        v["change_2x_test_set"] = change.judgement.on("test").verdict
        v["change_least_set"] = min(change.sets, key=lambda r: abs(r["value"]))["set"]
        undertraining = undertraining_values(store)
        v |= {k: undertraining[k] for k in ("loss_up", "budget_runs", "continued_sentence")}
    if ready["distill"]:
        teacher = teacher_record(store)
        v |= {
            "teacher_test": teacher["teacher_bleu"]["test"]["tok_bleu"],
            "teacher_seed": teacher["teacher_seed"],
            "teacher_pairs": teacher["pairs"],
            "teacher_empty": teacher["empty"],
            "teacher_beam": teacher["beam"],
            "distilled_length": teacher["mean_subwords"]["distilled"],
            "real_length": teacher["mean_subwords"]["real"],
        }
        v["teacher_minus_balanced"] = v["teacher_test"] - v["balanced_test"]
        v["balanced_test_sd"] = main["balanced"].sd("test")
        v["teacher_word"] = (
            "no better than its students"
            if v["teacher_minus_balanced"] <= v["balanced_test_sd"]
            else "better than an average Balanced model"
        )
    closers = [claims[0] for claims in STUDY_CLAIMS.values()]
    v["closed_count"] = sum(j[c].word == HOLDS for c, ok in zip(closers, ready.values()) if ok)
    # the seeds per system the studies' verdicts read
    v["study_seeds"] = ", ".join(sorted({str(n) for c in closers for n in j[c].seeds.values()}, key=int))
    words = {study: j[claims[1]].word if ready[study] else NOT_RUN for study, claims in STUDY_CLAIMS.items()}
    v["takeaway_sentence"] = takeaway(v["gap_test"], v["paper_gap"], v["gap_vs_paper"], words)
    return v | conversion_values(store)


CAUSES = {"budget": "a short budget", "distill": "training without a teacher", "can-6-6": "a two-layer decoder"}


def takeaway(gap: float, paper_gap: float, than: str, words: dict[str, str]) -> str:
    """The chapter's one sentence: CAN's gap here against the paper's, and which of the paper's three possible causes
    (each study's claim that it changes the gap, by its verdict word) the runs support, rule out or leave open."""
    supported = [CAUSES[s] for s, w in words.items() if w == HOLDS]
    ruled_out = [CAUSES[s] for s, w in words.items() if w == FAILS]
    left = [CAUSES[s] for s, w in words.items() if w not in (HOLDS, FAILS)]
    said = [f"support {names(supported)}"] if supported else []
    said += [f"rule out {names(ruled_out)}"] if ruled_out else []
    if left:
        said.append(f"leave {names(left)} open" if said else f"neither support nor rule out any yet ({names(left)})")
    return (
        f"Our CAN's gap to Balanced at the plan's budget, {gap:+.2f} tokenized BLEU on test2016, is {than} the "
        f"paper's {paper_gap:+.2f}; of the three causes the paper's own results suggest, these runs {names(said)}."
    )


def conversion_values(store: Store) -> dict[str, Any]:
    """Whether the conversion study is stored at small, and otherwise the command that stores it."""
    stored_ = Store("small", store.root if store.explicit else None).has("conversion")
    return {
        "conversion_stored": stored_,
        "conversion_status": "stored (the table below)" if stored_ else "not stored yet",
        "conversion_command": experiment_command("small", studies=["conversion"]),
    }


def teacher_record(store: Store) -> dict[str, Any]:
    """The distilled corpus's provenance (its teacher, BLEU, pairs, lengths): from the study's summary, else from a
    student's stored result (every student records the corpus it trained on)."""
    if store.has("beyond/distill"):
        return store.result("beyond/distill.json")[0]["teacher"]
    student = next(f for f in store.study_files("distill") if "-kd-seed" in f.name)
    return store.result(student.relative_to(store.folder))[0]["distilled"]
