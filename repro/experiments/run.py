"""A run is a value: which model, on which corpus, with which seed, for how many updates, and where it lives.

:class:`Run` is frozen and is worked out once, by :func:`run` or :func:`plan`; everything below takes it:
:func:`repro.experiments.train.trainer` builds its Trainer, :func:`repro.experiments.evaluate.evaluate`
scores and stores it, :func:`load` reads what was stored. A :class:`Variant` says how a run departs from its scale's
recipe (the beyond studies of :mod:`repro.experiments.beyond`): more updates, distilled targets from a
teacher run, weights to start from, another decoder layer mix.

Where a run lives:

* its training folder ``cache_dir()/runs/<scale>/<corpus>/<system>...-<key>``: keyed by what changes the
  trained weights (preset, corpus, budget, decoder, parent run; at tiny also the code, cheap to redo), not
  by which study asks for it, so the distillation study's teacher *is* the main plan's Balanced seed 1;
* its stored result ``<root>/<scale>/<name>.json``, ``root`` and ``scale`` those of its
  :class:`~repro.results.layout.Where` (the one value that says where a call's results live), with its
  hypotheses beside it: ``runs/<corpus>/<system>-seed<k>`` for the main plan,
  ``beyond/runs/<corpus>/<study>-<system>[-<tag>]-seed<k>`` for a study's model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from canlib.catalogue import ALL_SYSTEMS, SYSTEMS, scale_spec
from canlib.data.corpora import registered_files
from canlib.io import cache_dir
from canlib.model.checkpoint import load_model
from canlib.model.config import MIXED, ModelConfig, preset
from canlib.model.seq2seq import Seq2Seq
from repro.results.files import load_result
from repro.results.layout import Where, code_version, experiment_command, key, model_name, run_name
from repro.results.plan import DIRECTION_SYSTEMS, Row, corpora, rows
from repro.results.studies import DISTILL_BEAM, REDUCED_PAIRS


@dataclass(frozen=True)
class Variant:
    """How a run departs from its scale's recipe; the default is the recipe itself (the main plan). A study states
    only the fields it changes, so that two studies asking for the same model share its training folder."""

    study: str = ""  # the study it belongs to ("" for the main plan)
    tag: str = ""  # its role in the study: "x2", "kd", "teacher"...
    budget_factor: int = 1  # multiplies the updates; the learning-rate schedule stays the recipe's
    targets: str = "real"  # "distilled": trains on ``parent``'s beam-4 translations of the training set
    # "converted": starts from ``parent`` turned into CAN (:func:`canlib.model.conversion.standard_to_can`);
    # "random-decoder": from ``parent``'s encoder and a fresh CAN decoder; "": a fresh initialisation
    init: str = ""
    parent: Run | None = None  # the run its distilled targets or its starting weights come from
    decoder: tuple[str, ...] = ()  # the decoder layer kinds, bottom first, instead of the system's
    valid_bleu: bool = False  # log greedy validation BLEU at every validation (the budget study's curves)
    # "last": evaluate the last step checkpoint alone instead of the average of the last ones (the training, and so
    # the folder, is the recipe's)
    weights: str = "average"
    recipe: str = ""  # the scale's recipe ("converged": canlib.catalogue.Scale.recipe, which refuses another)

    def __post_init__(self) -> None:
        object.__setattr__(self, "decoder", tuple(self.decoder))
        if self.weights not in ("average", "last"):
            raise ValueError(f"Variant.weights={self.weights!r}: choose average or last")
        if self.targets not in ("real", "distilled"):
            raise ValueError(f"Variant.targets={self.targets!r}: choose real or distilled")
        if self.init not in ("", "converted", "random-decoder"):
            raise ValueError(f"Variant.init={self.init!r}: choose converted or random-decoder (or nothing)")
        if (self.targets == "distilled" or bool(self.init)) != (self.parent is not None):
            raise ValueError("Variant: distilled targets and an init need the parent run they come from, and only they")
        if self.budget_factor < 1:
            raise ValueError(f"Variant.budget_factor={self.budget_factor}: must be >= 1")


MAIN = Variant()


@dataclass(frozen=True)
class Run:
    """One model to train and evaluate (see the module docstring). ``where``: the scale and the results folder it
    is stored in, and the reduced budget of an end-to-end test (recorded, never judged); ``budget`` holds the
    TrainConfig fields (the scale's recipe, the seed, the variant's updates); ``device`` and ``precision``: where
    and how it trains (bf16 on CUDA)."""

    system: str
    where: Where
    seed: int
    corpus: str
    preset: str
    budget: dict[str, Any] = field(hash=False)
    device: str = "cpu"
    precision: str = "fp32"
    variant: Variant = MAIN

    @property
    def scale(self) -> str:
        return self.where.scale

    @property
    def reduced(self) -> int | None:
        """The ``max_steps`` of an end-to-end test, None at the scale's own budget."""
        return self.where.reduced

    @property
    def name(self) -> str:
        """The stored result's name under ``<root>/<scale>/`` (without ``.json``)."""
        v = self.variant
        if not v.study:
            return run_name(self.system, self.seed, self.corpus)
        return f"beyond/runs/{self.corpus}/{model_name(v.study, self.system, v.tag, self.seed)}"

    @property
    def label(self) -> str:
        """A run in a few words, for a line of progress: ``multi30k-en-de can seed 1 (budget x2)``."""
        v = self.variant
        study = f" ({v.study}{' ' + v.tag if v.tag else ''})" if v.study else ""
        return f"{self.corpus} {self.system} seed {self.seed}{study}"

    @property
    def steps(self) -> int:
        return int(self.budget.get("max_steps") or 0)

    @property
    def folder(self) -> Path:
        """Its training folder: checkpoints, log.jsonl, average.pt, result.json."""
        v = self.variant
        identity = key(
            code_version() if self.scale == "tiny" else None,
            self.preset,
            self.corpus,
            scale_spec(self.scale).corpus_scale,
            self.budget,
            list(v.decoder),
            v.targets,
            v.init,
            v.parent.folder.name if v.parent else None,
            v.valid_bleu,
        )
        kind = "-".join(p for p in (v.init, "kd" if v.targets == "distilled" else "", "-".join(v.decoder)) if p)
        name = f"{self.system}{'-' + kind if kind else ''}-seed{self.seed}-{identity}"
        return cache_dir() / "runs" / self.scale / self.corpus / name

    @property
    def result_path(self) -> Path:
        """Its stored result: ``<root>/<scale>/<name>.json``."""
        return self.where.path(self.name)

    def model_config(self, vocab_size: int) -> ModelConfig:
        """Its architecture: the system's preset at the scale's width, with the variant's decoder layer kinds."""
        cfg = preset(self.preset, vocab_size=vocab_size)
        kinds = self.variant.decoder
        if not kinds:
            return cfg
        if len(set(kinds)) == 1:
            return cfg.replace(decoder_kind=kinds[0], dec_layers=len(kinds))
        return cfg.replace(decoder_kind=MIXED, decoder_layer_kinds=kinds, dec_layers=len(kinds))

    @property
    def config(self) -> dict[str, Any]:
        """The configuration stored in its result's provenance (a stored result trained with another budget is
        refused)."""
        spec, v = scale_spec(self.scale), self.variant
        out: dict[str, Any] = {
            **({"study": v.study} if v.study else {}),
            "system": self.system,
            "preset": self.preset,
            "corpus": f"{self.corpus}/{spec.corpus_scale}",
            "seed": self.seed,
            **({"tag": v.tag} if v.study else {}),
            "train": self.budget,
            "beam": spec.beam,
            "max_steps": self.reduced,
        }
        if v.valid_bleu:
            out["valid_bleu"] = "greedy (beam 1) sacreBLEU on valid at every validation"
        if v.targets == "distilled":
            out["distilled"] = {
                "teacher": v.parent.system,
                "teacher_seed": v.parent.seed,
                "beam": DISTILL_BEAM,
                "pairs": REDUCED_PAIRS if self.reduced is not None else "all",
            }
            if v.parent.variant != MAIN:
                out["distilled"]["teacher_run"] = v.parent.name
        if v.decoder:
            out["decoder_layers"] = list(v.decoder)
        if v.weights == "last":
            out["weights"] = "the last step checkpoint alone, not the average of the last ones"
        if v.init:
            out["init"] = {"from": v.parent.name, "how": v.init}
        return out

    @property
    def provenance(self) -> dict[str, Any]:
        """The top-level provenance keys of its stored result besides commit, date, device and config."""
        return {
            "seed": self.seed,
            "corpus": self.corpus,
            "budget": self.budget,
            "reduced_budget": self.reduced is not None,
            "precision": self.precision,
        }


# -- building runs ---------------------------------------------------------------------------------


def training_device(scale: str) -> tuple[str, str]:
    """(device, precision) a run of ``scale`` trains with here: CUDA in bf16 where there is one, except at tiny
    (CI's scale, CPU by definition), else the CPU in fp32."""
    return ("cuda", "bf16") if scale != "tiny" and torch.cuda.is_available() else ("cpu", "fp32")


def budget(
    scale: str, seed: int = 1, max_steps: int | None = None, factor: int = 1, recipe: str = ""
) -> dict[str, Any]:
    """The TrainConfig fields of a run: the scale's recipe (``recipe``: another of its recipes) and the seed;
    ``factor`` times its updates with the schedule unchanged; ``max_steps`` replaces its updates (an end-to-end
    test's reduced budget, a fine-tune; a factor then validates 4 times)."""
    train = {**scale_spec(scale).recipe(recipe), "seed": seed}
    if max_steps is not None:  # >= 1: Where.of checks a reduced budget
        train.update(
            max_steps=max_steps,
            max_epochs=0,
            patience=0,
            valid_every=min(train.get("valid_every") or max_steps, max_steps),
        )
    if factor != 1:
        steps = train["max_steps"] * factor
        train.update(max_steps=steps, valid_every=max(1, steps // 4) if max_steps is not None else train["valid_every"])
    return train


def run(
    system: str,
    where: Where,
    seed: int = 1,
    corpus: str | None = None,
    *,
    variant: Variant = MAIN,
    train: dict[str, Any] | None = None,
) -> Run:
    """The run of ``system`` with ``seed`` on ``corpus`` (default: the scale's own), stored ``where``, at the
    scale's budget (or the reduced one) times the variant's factor (``train``: another budget altogether, as the
    conversion study's fine-tunes)."""
    check_systems([system])
    scale = where.scale
    corpus = check_corpus(scale, corpus)
    device, precision = training_device(scale)
    train = train if train is not None else budget(scale, seed, where.reduced, variant.budget_factor, variant.recipe)
    return Run(system, where, seed, corpus, scale_spec(scale).preset(system), train, device, precision, variant)


def check_systems(systems: Sequence[str]) -> list[str]:
    """``systems`` as a list; an unknown name is an error that lists the known ones."""
    if unknown := sorted(set(systems) - set(ALL_SYSTEMS) - set(SYSTEMS)):  # the nine, and the catalogue's others
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(ALL_SYSTEMS)}")
    return list(systems)


def check_corpus(scale: str, name: str | None) -> str:
    """``name`` (default: the scale's main corpus) if the scale trains on it or it is a corpus of your own files
    (``canlib data prepare NAME --files FOLDER``), else a clear error."""
    known = corpora(scale)
    if name is None:
        return known[0]
    if name not in known and name not in registered_files():
        raise ValueError(
            f"corpus {name!r} is not trained at scale {scale!r}; choose from {', '.join(known)}, or "
            "register your own files first: `canlib data prepare NAME --files FOLDER --src xx --tgt yy`"
        )
    return name


def plan(
    where: Where,
    systems: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    corpora_: Sequence[str] | None = None,
) -> list[Run]:
    """Every run of a scale's main plan, in training order: each row of :func:`repro.results.plan.rows` (system,
    corpus, seeds), the main corpus's rows seed by seed (a plan cut short still leaves whole sets), then the
    further directions' rows seed by seed. ``seeds`` replaces each row's seeds; ``systems`` and ``corpora_`` narrow
    the plan. A corpus of your own files in ``corpora_`` gets ``systems`` (default Baseline, Balanced and CAN) x
    ``seeds`` (default 1)."""
    scale = where.scale
    main = scale_spec(scale).corpus

    def seeds_of(row: Row) -> tuple[int, ...]:  # the plan's seeds, or ``seeds`` in their place
        return tuple(seeds) if seeds is not None and row.seeds else row.seeds

    def seed_by_seed(rows_: list[Row]) -> list[tuple[str, int, str]]:
        order = sorted({k for r in rows_ for k in seeds_of(r)})
        return [(r.system, k, r.corpus) for k in order for r in rows_ if k in seeds_of(r)]

    if seeds is not None and any(int(k) < 1 for k in seeds):
        raise ValueError(f"seeds {list(seeds)}: every seed must be >= 1")
    planned = rows(scale)
    grid = seed_by_seed([r for r in planned if r.corpus == main])
    grid += seed_by_seed([r for r in planned if r.corpus != main])
    wanted = set(check_systems(systems)) if systems is not None else None
    if corpora_ is not None:
        chosen = [check_corpus(scale, c) for c in corpora_]
        own = [c for c in chosen if c not in corpora(scale)]
        grid = [g for g in grid if g[2] in chosen]
        grid += [(s, k, c) for c in own for k in (seeds or [1]) for s in (systems or DIRECTION_SYSTEMS)]
    if wanted is not None:
        grid = [g for g in grid if g[0] in wanted]
    return [run(s, where, k, c) for s, k, c in grid]


# -- reading what was stored ---------------------------------------------------------------------


def load(run_: Run) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result, provenance) of a run's stored evaluation; never trains: a missing one is an error naming the
    command that trains and stores it."""
    path = run_.result_path
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no stored result of {run_.label}; train and store it with `{command(run_)}`")
    return load_result(path)


def command(run_: Run) -> str:
    """The ``python -m repro experiment`` call that trains and stores ``run_``."""
    study = run_.variant.study  # a study's models are named by the study, a plan run by its system and corpus
    named = dict(studies=[study]) if study else dict(systems=[run_.system], corpora=[run_.corpus])
    return experiment_command(run_.scale, seeds=[run_.seed], reduced=run_.reduced, **named)


@dataclass(frozen=True)
class Trained:
    """A run whose training finished (in its folder) and the trainer's result.json (stop reason, steps, wall time,
    provenance)."""

    run: Run
    result: dict[str, Any] = field(hash=False)

    def model(self) -> Seq2Seq:
        """The averaged model (the paper averages the last checkpoints), in eval mode; the last step checkpoint
        alone where the run's variant asks for it (``weights="last"``)."""
        path = self.run.folder / "average.pt"
        if self.run.variant.weights == "last":  # a step checkpoint holds the model as average.pt does
            from canlib.training.state import list_checkpoints  # here only: loading a run never imports training

            path = list_checkpoints(self.run.folder / "checkpoints")[-1]
        return load_model(path).eval()

    def log(self) -> list[dict[str, Any]]:
        """The rows of the run's log.jsonl."""
        with open(self.run.folder / "log.jsonl", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]


def trained(run_: Run) -> Trained:
    """The finished training of ``run_``, from its folder; never trains (that is
    :func:`repro.experiments.pool.train_and_store`): an unfinished one is an error saying so."""
    path = run_.folder / "result.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_.folder}: {run_.label} is not trained on this machine; train it first (`" + command(run_) + "`)"
        )
    return Trained(run_, json.loads(path.read_text(encoding="utf-8")))
