"""The beyond studies as variants of the plan: which runs each study trains.

Each study of the study table (:mod:`repro.results.studies`, one record per study) is a list of
:class:`~repro.experiments.run.Run` values with a :class:`~repro.experiments.run.Variant` read off its
record, trained by the same pool as the main plan (:func:`repro.experiments.pool.train_all`, a student after its
teacher) and stored as ``beyond/runs/<corpus>/<study>-<system>[-<tag>]-seed<k>``. Its summary is
:mod:`repro.experiments.summarise`'s, what is left to train :mod:`repro.experiments.estimate`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from repro.experiments.run import MAIN, Run, Variant, run
from repro.results.layout import Where
from repro.results.studies import Study, study_record


def study_runs(name: str, where: Where, seeds: Sequence[int] | None = None) -> list[Run]:
    """The runs of study ``name`` (``seeds``: default the study's own), in training order, stored ``where``."""
    record = study_record(name)
    return [run(system, where, seed, variant=variant(record, tag, where)) for system, tag, seed in record.models(seeds)]


def variant(record: Study, tag: str, where: Where) -> Variant:
    """How a model of study ``record`` with role ``tag`` departs from the recipe (the record's fields, see
    :class:`repro.results.studies.Study`); the teacher's own row trains as the main plan does."""
    if tag == "teacher":
        return Variant(record.name, tag)
    parent = teacher(record, where) if record.teacher else None
    return Variant(
        record.name,
        tag,
        budget_factor=record.factor,
        targets="distilled" if parent is not None else "real",
        parent=parent,
        decoder=record.decoders.get(tag, ()),
        valid_bleu=record.valid_bleu,
        weights=record.weights,
        recipe=record.recipe,
    )


def teacher(record: Study, where: Where) -> Run:
    """The run whose translations are the distilled targets of study ``record``: a main-plan run, or a model of
    another study (``distill-x2``: the budget study's 2x Balanced)."""
    study, system, tag, seed = record.teacher
    return run(system, where, seed, variant=variant(study_record(study), tag, where) if study else MAIN)


def to_train(runs: Sequence[Run]) -> tuple[list[Run], list[Run]]:
    """(runs whose result is not stored, parents this machine must train again for their weights: not trained
    here, and needed by a run of the first list)."""
    todo = [r for r in runs if not r.result_path.is_file()]
    folders = {r.folder for r in todo}
    parents = []
    for r in todo:
        parent = r.variant.parent
        if parent is not None and parent.folder not in folders and not (parent.folder / "result.json").is_file():
            parents.append(parent)
            folders.add(parent.folder)
    return todo, parents
