"""The context chapter: what distillation did to the CAN - Balanced gap in this book's stored `small` runs, beside
the paper's Table 4 (tokenized BLEU on test2016, the paper's metric)."""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from canlib.io import results_dir
from canlib.studies.gpu_results import gpu_batch
from canlib.studies.results import load_result
from canlib.studies.scorecard import K_SPREAD, interval_verdict, seed_difference

METRIC = "tok_bleu"


def _scores(folder: Path, pattern: str) -> list[float]:
    return [float(load_result(p)[0]["scores"]["test"][METRIC]) for p in sorted(folder.glob(pattern))]


def values(root: Path | None = None) -> dict[str, Any]:
    """CAN - Balanced on real targets (the main plan's runs) and on the teacher's translations (the distillation
    study's students), each with K_SPREAD standard errors; the change and the verdict of "distillation narrows the
    gap" (the book's one rule over the change's interval); the teacher's score against its Balanced students'; and
    the size of the stored GPU batch sweep."""
    small = Path(root or results_dir()) / "small"
    real = {s: _scores(small / "runs" / "multi30k-en-de", f"{s}-seed*.json") for s in ("balanced", "can")}
    beyond = small / "beyond" / "runs" / "multi30k-en-de"
    kd = {s: _scores(beyond, f"distill-{s}-kd-seed*.json") for s in ("balanced", "can")}
    teacher = _scores(beyond, "distill-balanced-teacher-seed*.json")
    gap_real, se_real = seed_difference(real["can"], real["balanced"])
    gap_kd, se_kd = seed_difference(kd["can"], kd["balanced"])
    change, se_change = gap_kd - gap_real, math.sqrt(se_real ** 2 + se_kd ** 2)
    students = statistics.fmean(kd["balanced"])
    sweep, sweep_prov = gpu_batch()
    return {"batch_sizes": len(sweep["can"]), "batch_repeats": int(sweep_prov["settings"]["repeats"]),"real_gap": gap_real, "real_gap_2se": K_SPREAD * se_real, "kd_gap": gap_kd, "kd_gap_2se": K_SPREAD * se_kd,
            "kd_change": change, "kd_change_2se": K_SPREAD * se_change,
            "kd_narrows": interval_verdict(change - K_SPREAD * se_change, change + K_SPREAD * se_change, lambda d: d > 0),
            "kd_seeds": min(len(v) for v in kd.values()), "real_seeds": min(len(v) for v in real.values()),
            "teacher_bleu": teacher[0], "kd_balanced": students, "kd_balanced_sd": statistics.stdev(kd["balanced"]),
            "kd_can": statistics.fmean(kd["can"]), "real_balanced": statistics.fmean(real["balanced"]),
            "student_minus_teacher": students - teacher[0]}
