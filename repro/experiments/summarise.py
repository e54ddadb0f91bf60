"""``python -m repro summarise``: a beyond study's summary (``beyond/<study>``), made from its stored models only, never
by training: the scores a chapter shows, the budget study's validation curves, the distilled corpus's provenance, each
with the provenance of the models it quotes (``python -m repro rescore`` checks that it quotes them exactly).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from repro.experiments import cli
from repro.experiments.beyond import study_runs
from repro.experiments.run import Run, load
from repro.experiments.run import run as plan_run
from repro.results.files import load_result, provenance, save_result
from repro.results.layout import Where, code_version
from repro.results.studies import Study, study_record


def scores(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    """BLEU and tokenized BLEU per split of a stored run: what a summary quotes (and the rescore rechecks)."""
    return {split: {k: result["scores"][split][k] for k in ("bleu", "tok_bleu")} for split in result["scores"]}


def row(r: Run, result: dict[str, Any], prov: dict[str, Any]) -> dict[str, Any]:
    """One model's line of a summary."""
    out = {
        "system": r.system,
        "seed": r.seed,
        "tag": r.variant.tag,
        "file": r.name,
        "reduced_budget": bool(prov.get("reduced_budget")),
        "scores": scores(result),
    }
    if r.variant.valid_bleu:
        out.update(
            factor=r.variant.budget_factor,
            steps=result["training"]["step"],
            curve=[
                {"step": p["step"], "valid_loss": p.get("valid_loss"), "valid_bleu": p.get("valid_bleu")}
                for p in result["log"]
                if p.get("kind") == "valid"
            ],
        )
    if r.variant.decoder:
        out["decoder_layers"] = list(r.variant.decoder)
    return out


Loaded = list[tuple[Run, dict[str, Any], dict[str, Any]]]  # the stored models: (run, result, provenance)


def budget_section(record: Study, where: Where, loaded: Loaded) -> dict[str, Any]:
    """The budget a study compares: its systems, factors, the 1x updates and how the schedule goes on."""
    return dict(
        systems=list(record.systems),
        factors=[record.factor],
        base_steps=plan_run("can", where).steps,
        schedule="peak lr and warm-up as at 1x, the inverse-square-root decay continued (not rescaled)",
        valid_bleu="greedy (beam 1) sacreBLEU on valid, logged at every validation",
    )


def teacher_section(record: Study, where: Where, loaded: Loaded) -> dict[str, Any]:
    """The teacher and its distilled corpus, as the students' results record them, and the students."""
    kd = [result["distilled"] for r, result, _ in loaded if r.variant.targets == "distilled"]
    return dict(teacher=kd[0] if kd else None, corpora=sorted({d["sha256"] for d in kd}), students=list(record.systems))


def layers_section(record: Study, where: Where, loaded: Loaded) -> dict[str, Any]:
    """The decoder layer kinds of each model, bottom first."""
    return {"layers": {r.variant.tag or r.system: list(r.variant.decoder) for r, _, _ in loaded}}


# what a summary adds to its rows, by the names of a study record's ``sections``
SECTIONS = {"budget": budget_section, "teacher": teacher_section, "layers": layers_section}


def summarise(
    name: str, where: Where, seeds: Sequence[int] | None = None
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Store the summary of study ``name`` (``beyond/<name>``) from those of its models that are stored (None when
    none is), with the provenance of this summary (the commit that summarised, here) and of the models (their
    commits, devices, dates). Nothing is trained."""
    runs = [r for r in study_runs(name, where, seeds) if r.result_path.is_file()]
    if not runs:
        return None
    loaded = [(r, *load(r)) for r in runs]
    out: dict[str, Any] = {"study": name, "runs": [row(r, result, prov) for r, result, prov in loaded]}
    for section in study_record(name).sections:
        out.update(SECTIONS[section](study_record(name), where, loaded))
    models = {
        key: sorted({str(prov[key])[:10] if key == "date" else prov[key] for _, _, prov in loaded})
        for key in ("commit", "device", "date")
    }
    config = {
        "study": name,
        "seeds": sorted({r.seed for r in runs if r.variant.tag != "teacher"}),
        "max_steps": where.reduced,
        "runs": [r.name.rsplit("/", 1)[1] for r in runs],
        "code_version": code_version(),
    }
    path = where.path(f"beyond/{name}")
    reduced = where.reduced is not None
    save_result(path, out, provenance(where.scale, config, "cpu", reduced_budget=reduced, models=models))
    return load_result(path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Store the summaries of the selected beyond studies (beyond/<study>.json) from their stored models only; "
        "train nothing."
    )
    cli.add_studies(parser)


def run(args: argparse.Namespace) -> int:
    """``python -m repro summarise``: one line per study, what was stored."""
    where = cli.where(args)
    for name in cli.studies(args):
        stored = summarise(name, where, args.seeds)
        print(
            f"beyond/{name}: "
            + (f"stored from {len(stored[0]['runs'])} stored models" if stored else "no model stored")
        )
    return 0
