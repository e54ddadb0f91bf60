"""The context chapter: what distillation did to the CAN - Balanced gap in this book's stored `small` runs, beside
the paper's Table 4 (tokenized BLEU on test2016, the paper's metric), with the claims registry's verdict of
"distillation narrows CAN's gap to Balanced" (read on the four evaluation sets, as the beyond chapter reads it)."""

from __future__ import annotations

from typing import Any

from _code.beyond import teacher_record
from _code.marks import marks
from _code.prose import by_verdict, sets_sentence
from repro.studies.claims import judged
from repro.studies.store import Store

CLAIMS = ("kd-narrows-gap", "kd-can-within-0.5", "batch-gain-shrinks")


def values(store: Store) -> dict[str, Any]:
    """CAN - Balanced on real targets and on the teacher's translations on test2016 (each with its seed
    half-interval), the change, the registry's verdicts, the teacher's score against its Balanced students', and
    the size of the stored GPU batch sweep."""
    j = judged(store)
    students = store.study_runs("distill", "balanced", "kd")
    teacher = teacher_record(store)["teacher_bleu"]["test"]["tok_bleu"]
    out: dict[str, Any] = {
        "kd_seeds": min(len(store.study_runs("distill", s, "kd").seeds) for s in ("balanced", "can")),
        "teacher_bleu": teacher,
        "kd_balanced": students.mean("test"),
        "kd_balanced_sd": students.sd("test"),
        "student_minus_teacher": students.mean("test") - teacher,
        "kd_change_sets": sets_sentence(
            j["kd-narrows-gap"],
            (
                "Set by set, the teacher's targets narrow the gap beyond doubt on {met} of the {total} test sets",
                "widen or keep it on {missed}",
                "leave {open} open",
            ),
            "No test set of the {total} separates the distilled gap from the real one.",
        ),
    }
    gaps = {"real_gap": j["can-within-0.5"].at(1), "kd_gap": j["kd-can-within-0.5"], "kd_change": j["kd-narrows-gap"]}
    for key, claim in gaps.items():  # test2016's contrast and its seed half-interval
        test = claim.judgement.on("test")
        out |= {key: float(test.value), f"{key}_2se": float(test.half_width)}
    run = j["batch-gain-shrinks"].files[0] if j["batch-gain-shrinks"].files else None
    if run:
        sweep, prov = store.gpu_batch(run)
        out |= {"batch_sizes": len(sweep["can"]), "batch_repeats": int(prov["settings"]["repeats"]), "batch_run": run}
    out["takeaway_sentence"] = by_verdict(
        j["kd-narrows-gap"].word,
        "Trained on a teacher's translations, CAN closes part of its gap to Balanced, as the paper's Table 4 reports",
        "Trained on a teacher's translations, CAN does not close its gap to Balanced, unlike the paper's Table 4",
        "Distillation's effect on CAN's gap to Balanced is undecided in these runs",
    )
    out["takeaway_sentence"] += "; the rest of the chapter places CAN among related decoders and prices its cache."
    return out | marks(store, CLAIMS)


def kd_frame(store: Store):
    """CAN - Balanced on test2016 on the real targets and on the teacher's translations, and the change: each with
    half its 95 % seed interval (the registry's judgements, tokenized BLEU, Multi30k En-De at d=256)."""
    import pandas as pd

    v = values(store)
    rows = {
        "real targets": (v["real_gap"], v["real_gap_2se"]),
        "the teacher's translations": (v["kd_gap"], v["kd_gap_2se"]),
        "change (distilled - real)": (v["kd_change"], v["kd_change_2se"]),
    }
    frame = pd.DataFrame(
        {k: {"CAN − Balanced": f"{a:+.2f}", "± (95 % seed interval)": f"{b:.2f}"} for k, (a, b) in rows.items()}
    ).T
    frame.index.name = f"test2016, {v['kd_seeds']} seeds"
    return frame
