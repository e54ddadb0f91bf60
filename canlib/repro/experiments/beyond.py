"""The beyond studies as variants of the plan: which runs each study trains, and its summary.

Each study of the study table (:mod:`canlib.repro.results.studies`, which defines them as data) is a list of
:class:`~canlib.repro.experiments.run.Run` values with a :class:`~canlib.repro.experiments.run.Variant`, trained by the
same
pool as the main plan (:func:`canlib.repro.experiments.pool.train_all`, a student after its teacher) and stored as
``beyond/runs/<corpus>/<study>-<system>[-<tag>]-seed<k>``. A study's summary (``beyond/<study>``) is made from its
stored models only, never by training: the scores a chapter shows, the budget study's validation curves, the
distilled corpus's provenance.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from canlib.io import results_dir
from canlib.repro.experiments.run import Run, Variant, load, run
from canlib.repro.results import studies as defined
from canlib.repro.results.files import load_result, provenance, save_result
from canlib.repro.results.layout import code_version


def study_runs(name: str, scale: str, seeds: Sequence[int] | None = None, reduced: int | None = None) -> list[Run]:
    """The runs of study ``name`` (``seeds``: default the study's own), in training order."""
    out = []
    for system, tag, seed in defined.study_models(name, seeds):
        out.append(run(system, scale, seed, reduced=reduced, variant=variant(name, tag, scale, reduced)))
    return out


def variant(name: str, tag: str, scale: str, reduced: int | None = None) -> Variant:
    """How a model of study ``name`` with role ``tag`` departs from the recipe (see
    :mod:`canlib.repro.results.studies`)."""
    x2 = dict(budget_factor=defined.NEXT_FACTOR, valid_bleu=True)  # the next experiments: the 2x budget, its curves
    if name == "budget":
        return Variant(name, tag, budget_factor=int(tag[1:]), valid_bleu=True)
    if name == "distill" and tag == "kd":
        return Variant(
            name, tag, targets="distilled", parent=run(defined.TEACHER, scale, defined.TEACHER_SEED, reduced=reduced)
        )
    if name == "distill-x2":
        return Variant(name, tag, targets="distilled", parent=x2_teacher(scale, reduced), **x2)
    if name == "hybrid":
        return Variant(name, tag, decoder=defined.HYBRIDS[tag], **x2)
    if name == "can-residual":
        return Variant(name, tag, decoder=defined.RESIDUAL_LAYERS, **x2)
    if name == "averaging":  # the main plan's training (the same folder), its last checkpoint scored alone
        return Variant(name, tag, weights="last")
    return Variant(name, tag)  # can-6-6, and the distillation teacher's own row (the main plan's run itself)


def x2_teacher(scale: str, reduced: int | None = None) -> Run:
    """The stronger teacher of ``distill-x2``: Balanced seed 1 of the budget study (2x updates)."""
    return study_runs("budget", scale, [defined.TEACHER_SEED], reduced)[defined.BUDGET_SYSTEMS.index(defined.TEACHER)]


# -- summaries -------------------------------------------------------------------------------------


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


def summarise(
    name: str, scale: str, seeds: Sequence[int] | None = None, reduced: int | None = None, root: Path | None = None
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Store the summary of study ``name`` from those of its models that are stored (None when none is), with the
    provenance of this summary (the commit that summarised, here) and of the models (their commits, devices, dates).
    Nothing is trained."""
    runs = [r for r in study_runs(name, scale, seeds, reduced) if r.result_path(root).is_file()]
    if not runs:
        return None
    loaded = [(r, *load(r, root)) for r in runs]
    out: dict[str, Any] = {"study": name, "runs": [row(r, result, prov) for r, result, prov in loaded]}
    if name == "budget":
        out.update(
            systems=list(defined.BUDGET_SYSTEMS),
            factors=list(defined.BUDGET_FACTORS),
            base_steps=run("can", scale, reduced=reduced).steps,
            schedule="peak lr and warm-up as at 1x, the inverse-square-root decay continued (not rescaled)",
            valid_bleu="greedy (beam 1) sacreBLEU on valid, logged at every validation",
        )
    elif name in ("distill", "distill-x2"):
        kd = [result["distilled"] for r, result, _ in loaded if r.variant.tag == "kd"]
        out.update(
            teacher=kd[0] if kd else None,
            corpora=sorted({d["sha256"] for d in kd}),
            students=list(defined.STUDENTS if name == "distill" else defined.X2_STUDENTS),
        )
    elif name in ("hybrid", "can-residual"):
        out["layers"] = {r.variant.tag or r.system: list(r.variant.decoder) for r in runs}
    models = {
        key: sorted({str(prov[key])[:10] if key == "date" else prov[key] for _, _, prov in loaded})
        for key in ("commit", "device", "date")
    }
    config = {
        "study": name,
        "seeds": sorted({r.seed for r in runs if r.variant.tag != "teacher"}),
        "max_steps": reduced,
        "runs": [r.name.rsplit("/", 1)[1] for r in runs],
        "code_version": code_version(),
    }
    path = runs[0].result_path(root).parent.parent.parent / f"{name}.json"
    save_result(path, out, provenance(scale, config, "cpu", reduced_budget=reduced is not None, models=models))
    return load_result(path)


# -- what is left to train, in GPU-minutes --------------------------------------------------------


def measured_rate(root: Path | None = None) -> tuple[float, str]:
    """Updates per second in total of the small runs that trained concurrently on one GPU, from the budget study's
    stored 2x runs (each JSON's ``training.wall_s`` and ``step``): the sum of their updates over the longest wall
    time. Returns (rate, where it comes from)."""
    folder = (root or results_dir()) / "small" / "beyond" / "runs" / "multi30k-en-de"
    loaded = [load_result(p) for p in sorted(folder.glob("budget-*-x2-seed*.json"))]
    if not loaded:
        raise FileNotFoundError(f"{folder}: no stored 2x runs of the budget study to measure the rate from")
    steps = sum(r["training"]["step"] for r, _ in loaded)
    wall = max(r["training"]["wall_s"] for r, _ in loaded)
    devices = ", ".join(sorted({p["device"] for _, p in loaded}))
    commits = ", ".join(sorted({str(p["commit"])[:7] for _, p in loaded}))
    return (
        steps / wall,
        f"{len(loaded)} concurrent 2x runs on {devices} at commit {commits}: {steps:,} updates in {wall:.0f} s",
    )


def to_train(runs: Sequence[Run], root: Path | None = None) -> tuple[list[Run], list[Run]]:
    """(runs whose result is not stored, parents this machine must train again for their weights: stored, but
    not trained here, and needed by a run of the first list)."""
    todo = [r for r in runs if not r.result_path(root).is_file()]
    folders = {r.folder for r in todo}
    parents = []
    for r in todo:
        parent = r.variant.parent
        if parent is not None and parent.folder not in folders and not (parent.folder / "result.json").is_file():
            parents.append(parent)
            folders.add(parent.folder)
    return todo, parents


def estimate(
    names: Sequence[str],
    scale: str,
    seeds: Sequence[int] | None = None,
    root: Path | None = None,
    rate: float | None = None,
    reduced: int | None = None,
) -> list[str]:
    """One line per study: the models still to train (and parents to train again for their weights), their updates
    and the GPU-minutes they take at ``rate`` updates/s (default: :func:`measured_rate`; training only, evaluation
    not counted)."""
    where = ""
    if rate is None:
        rate, where = measured_rate()
    lines = []
    for name in names:
        todo, parents = to_train(study_runs(name, scale, seeds, reduced), root)
        updates = sum(r.steps for r in [*todo, *parents])
        again = f" + {len(parents)} teacher(s) trained again for their weights" if parents else ""
        lines.append(
            f"{name}: {len(todo)} model(s) to train{again}, {updates:,} updates: "
            f"~{updates / rate / 60:.1f} GPU-minutes at {rate:.0f} updates/s"
        )
    if where:
        lines.append(f"rate measured from {where} (training only; evaluation and distillation add a little)")
    return lines
