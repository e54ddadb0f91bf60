"""The values the beyond chapter glues into its prose: why CAN loses more BLEU here than in the paper, read from
the three studies' stored models (each as soon as its own models are stored) on the four evaluation sets.

Every contrast is judged by :mod:`canlib.studies.verdict`; the words come from the lists below. At a scale
whose models are not judged (tiny) only the plan is given (how many models, the commands): tiny models do
not translate, so no number of theirs is a result.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from canlib.studies import beyond, evidence as ev
from canlib.studies.chapters import results as results_chapter
from canlib.studies.chapters.results import provenance_values
from canlib.studies.paper import paper_numbers
from canlib.studies.scales import scale_spec
from canlib.studies.store import stored_path
from canlib.studies.verdict import FAILED, HELD, NOISE, PARTLY_HELD, QUALITY_SCALES, gap_word, word

EXPLAINS = {HELD: "supported: the gap narrows on every set", FAILED: "ruled out: the gap widens on every set",
            NOISE: "not ruled out", PARTLY_HELD: "not ruled out: the gap narrows on some sets, within noise on the others"}
TEST_ONLY = {HELD: "narrows", FAILED: "does not narrow", NOISE: "does not move beyond noise"}
ROSE = {HELD: "rose", FAILED: "fell", NOISE: "moved within noise"}  # a student trained on the teacher's output
LESS = {HELD: "hurts less on 6/6 than on 12/2", FAILED: "hurts more on 6/6 than on 12/2",
        NOISE: "hurts 6/6 and 12/2 alike within noise",
        PARTLY_HELD: "hurts less on 6/6 on some sets and alike within noise on the others"}
WITHIN = {HELD: "holds", FAILED: "does not hold", NOISE: "is within noise"}  # CAN within 0.5 BLEU of Balanced
CLOSES = {HELD: "closes", FAILED: "does not close", NOISE: "does not close"}
GAINS = {HELD: "adds BLEU", FAILED: "does not add BLEU", NOISE: "changes BLEU within noise",
         PARTLY_HELD: "adds BLEU on some sets"}


def plan_values(scale: str) -> dict[str, Any]:
    """What the studies train (true at every scale): models, seeds, updates and the commands."""
    runs = {n: beyond.study_runs(n) for n in beyond.STUDIES}
    return {"scale": scale, "models": sum(len(r) for r in runs.values()),
            "budget_models": len(runs["budget"]), "distill_models": len(runs["distill"]),
            "can66_models": len(runs["can-6-6"]), "students": len(beyond.STUDENTS),
            "distill_seeds": len(beyond.SEEDS["distill"]), "budget_seeds": len(beyond.SEEDS["budget"]),
            "updates_1x": scale_spec("small").train["max_steps"], "gpu_command": beyond.GPU_COMMAND}


def paper_values() -> dict[str, Any]:
    p = paper_numbers()
    t2, t4, f8 = p["table2_wmt14"]["en-de"], p["table4_kd_en-de"], p["fig8_curves_en-de"]["valid"]
    return {"paper_gap": t2["CAN"][0] - t2["Balanced"][0], "paper_can66": beyond.PAPER_CAN_ON["6/6"],
            "paper_can122": beyond.PAPER_CAN_ON["12/2"], "paper_kd_balanced": t4["Balanced"][1] - t4["Balanced"][0],
            "paper_kd_can": t4["CAN"][1] - t4["CAN"][0], "paper_kd_gap": t4["CAN"][1] - t4["Balanced"][1],
            "paper_fig8_first": f8["CAN"][0] - f8["Balanced"][0], "paper_fig8_last": f8["CAN"][-1] - f8["Balanced"][-1]}


def values(scale: str, root: Path | None = None, refs: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Everything the beyond chapter's prose quotes at ``scale`` (``refs``: each evaluation set's references,
    read from the corpus when not given): the plan and the paper's numbers always, the studies' results
    where their models are stored at a judged scale."""
    v = plan_values(scale) | paper_values()
    if scale not in QUALITY_SCALES:
        return v | conversion_values(root)
    s = beyond.stored(scale, root)
    shown = s.shown()
    v |= {f"{k.replace('-', '')}_shown": ok for k, ok in shown.items()}
    j = beyond.judgements(scale, root, refs, s)
    v |= j["main"].values("gap")
    v["gap_vs_paper"] = "larger than" if v["gap_test"] < v["paper_gap"] else "no larger than"
    v["can_test"], v["balanced_test"] = s.main["can"].mean("test"), s.main["balanced"].mean("test")
    v["main_seeds"] = len(s.main["can"].seeds)
    if shown["budget"]:
        v |= j["budget_x2"].values("gap_2x") | j["budget_x2_change"].values("change_2x")
        v["budget_word"] = word(j["budget_x2_change"], EXPLAINS)
        v["budget_test_word"] = word(j["budget_x2_change"].on("test").verdict, TEST_ONLY)
        v["budget_others_held"] = sum(o.verdict == HELD for o in j["budget_x2_change"].sets if o.split != "test")
        v["budget_seeds"] = min(len(r.seeds) for r in s.budget[2].values())
        v["budget_factors"] = len(s.budget) - 1
        for system in beyond.BUDGET_SYSTEMS:
            v |= j[f"budget_x2_gain_{system}"].values(f"gain_2x_{system}")
            v[f"gain_2x_{system}_word"] = word(j[f"budget_x2_gain_{system}"], GAINS)
        v |= {k: results_chapter.budget_values(scale, s.main, refs or ev.references(scale), root)[k]
              for k in ("loss_up", "runs_2x", "through_1x")}
        v |= _provenance(scale, list(s.budget[2].values()), root, "budget")
    if shown["distill"]:
        v |= j["kd"].values("gap_kd") | j["kd_change"].values("change_kd")
        v["kd_word"] = gap_word(j["kd"], j["kd_change"])
        v["kd_close_word"] = word(j["kd"], WITHIN)
        v["kd_closes_word"] = word(j["kd"], CLOSES)
        v["kd_explains"] = word(j["kd_change"], EXPLAINS)
        for system in beyond.STUDENTS:
            if f"kd_gain_{system}" in j and j[f"kd_gain_{system}"]:
                v |= j[f"kd_gain_{system}"].values(f"kd_gain_{system}")
                v[f"kd_{system}_test"] = s.kd[system].mean("test")
                v[f"real_{system}_test"] = s.main[system].mean("test")
        v["kd_balanced_word"] = word(j["kd_gain_balanced"], ROSE)
        v["kd_balanced_test_word"] = word(j["kd_gain_balanced"].on("test").verdict, ROSE)
        teacher = _teacher(scale, root)
        v |= {"teacher_test": teacher["teacher_bleu"]["test"]["tok_bleu"],
              "teacher_valid": teacher["teacher_bleu"]["valid"]["tok_bleu"], "teacher_seed": teacher["teacher_seed"],
              "teacher_pairs": teacher["pairs"], "teacher_empty": teacher["empty"], "teacher_beam": teacher["beam"],
              "distilled_length": teacher["mean_subwords"]["distilled"], "real_length": teacher["mean_subwords"]["real"]}
        v["teacher_minus_balanced"] = v["teacher_test"] - v["balanced_test"]
        v["balanced_test_sd"] = s.main["balanced"].sd("test")
        v["teacher_word"] = ("no better than its students" if v["teacher_minus_balanced"] <= v["balanced_test_sd"]
                             else "better than an average Balanced model")
        v |= _provenance(scale, [s.kd[x] for x in beyond.STUDENTS], root, "distill")
    if shown["can-6-6"]:
        v |= j["can66"].values("gap_66") | j["can66_change"].values("change_66")
        v["can66_word"] = word(j["can66_change"], LESS)
        v["can66_test"], v["baseline_test"] = s.can66.mean("test"), s.main["baseline"].mean("test")
        v |= _provenance(scale, [s.can66], root, "can66")
    v["closed_count"] = sum(j[k] is not None and j[k].verdict == HELD for k in ("budget_x2", "kd", "can66") if k in j)
    v |= conversion_values(root)
    return v


def conversion_values(root: Path | None = None) -> dict[str, Any]:
    """Whether the conversion study is stored at small, and otherwise the command that stores it."""
    stored_ = stored_path("conversion", "small", root).is_file()
    return {"conversion_stored": stored_, "conversion_status": "stored (the table below)" if stored_ else "not stored yet"}


def _teacher(scale: str, root: Path | None) -> dict[str, Any]:
    """The distilled corpus's provenance (its teacher, BLEU, pairs, lengths): from the study's summary, else
    from a student's stored result (every student records the corpus it trained on)."""
    files = ev.study_files(scale, "distill", root)
    summary = files[0].parents[2] / "distill.json"
    if summary.is_file():
        return json.loads(summary.read_text(encoding="utf-8"))["result"]["teacher"]
    student = next(f for f in files if "-kd-seed" in f.name)
    return json.loads(student.read_text(encoding="utf-8"))["result"]["distilled"]


def _provenance(scale: str, runs: list[Any], root: Path | None, prefix: str) -> dict[str, Any]:
    return provenance_values(scale, runs, root, prefix)
