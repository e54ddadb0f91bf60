"""The one reader of stored results: a :class:`Store` is a scale and a results folder.

Everything a chapter, a table or the claims registry reads comes through one ``Store``: the main plan's runs with
their logs and hypotheses, the beyond studies' models (found through a study's summary where it is stored and from
the run files alone where it is not), the stored analyses, the references a run is scored against, the GPU
measurements (a GPU run of the project's own scripts, stored by ``python -m repro ingest`` with its commit, date, device
and command) and the operator counts; where each lies is :mod:`repro.results.layout`'s.

The reduced-budget filter is applied here, once: a run trained with ``--max-steps`` (an end-to-end test) is never
read as evidence unless the store is opened with ``full_budget=False`` (what the end-to-end tests of such a folder
do). At ``tiny`` in the default folder a chapter reads seed 1, which its own explicit call trained (CPU minutes);
elsewhere every stored seed. Nothing here trains; a missing result is an error that names the command storing it
(:func:`repro.results.layout.experiment_command`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from canlib.catalogue import Scale, scale_spec
from canlib.io import results_dir
from repro.results.files import load_result
from repro.results.layout import (
    INGEST_COMMAND,
    OPS_COMMAND,
    Where,
    experiment_command,
    model_name,
    read_hypotheses,
    run_name,
)
from repro.studies.verdict import EVAL_SPLITS, QUALITY_SCALES, Runs

SEED = re.compile(r"^(?P<name>.+)-seed(?P<seed>\d+)\.json$")


class Store:
    """Stored results of one scale in one results folder (``root``: default the scale's own folder,
    :func:`repro.results.layout.default_root`; GPU and CPU measurements lie under ``root`` too, by default
    ``book/results``). ``full_budget=False`` reads runs of a reduced budget as well (an end-to-end test's folder);
    ``references``: {corpus: {split: reference lines}} given instead of read from the prepared corpus."""

    def __init__(
        self,
        scale: str,
        root: Path | str | None = None,
        *,
        full_budget: bool = True,
        references: dict[str, dict[str, list[str]]] | None = None,
    ) -> None:
        self.spec: Scale = scale_spec(scale)
        self.scale = scale
        self.corpus = self.spec.corpus  # the scale's main corpus
        self.judged = scale in QUALITY_SCALES  # whether its models translate well enough for a BLEU verdict
        self.explicit = root is not None
        self.where = Where.of(scale, root)  # where the results live: the engine's value, read here
        self.root, self.folder = self.where.root, self.where.folder  # the folder: ``<root>/<scale>``
        self.measurements = Path(root) if root is not None else results_dir()
        self.full_budget = full_budget
        self._references: dict[str, dict[str, list[str]]] = dict(references or {})

    def __repr__(self) -> str:
        return f"Store({self.scale!r}, {str(self.root)!r})"

    # -- any stored result -------------------------------------------------------------------------------

    def path(self, name: str) -> Path:
        """Where the result ``name`` (``runs/<corpus>/<system>-seed<k>``, ``errors``, ``beyond/budget``...) lies."""
        return self.where.path(name)

    def has(self, name: str) -> bool:
        return self.path(name).is_file()

    def result(self, file: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
        """(result, provenance) of a stored file, ``file`` relative to the scale's folder (as :attr:`Runs.files`
        names it)."""
        return _load(self.folder / file)

    # -- the main plan's runs ----------------------------------------------------------------------------

    def stored_seeds(self, system: str, corpus: str | None = None) -> list[int]:
        """Seeds of ``system`` whose results are stored (any budget), sorted."""
        folder = self.path(run_name(system, 1, corpus or self.corpus)).parent
        return sorted(
            int(m["seed"])
            for p in folder.glob(f"{system}-seed*.json")
            if (m := SEED.match(p.name)) and m["name"] == system
        )

    def seeds(self, system: str, corpus: str | None = None) -> list[int]:
        """The seeds of ``system`` a chapter reads: at tiny in the default folder seed 1 (what the chapter's own
        call trained), elsewhere every stored seed of the store's budget."""
        if self.scale == "tiny" and not self.explicit:
            return [1] if 1 in self.stored_seeds(system, corpus) else []
        return [k for k in self.stored_seeds(system, corpus) if self._kept(self.run(system, k, corpus)[1])]

    def run(self, system: str, seed: int = 1, corpus: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """(result, provenance) of one stored run; a missing one is an error naming the command that stores it."""
        corpus = corpus or self.corpus
        path = self.path(run_name(system, seed, corpus))
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: no stored {self.scale} result of {system} (seed {seed}); train and store it with "
                f"`{experiment_command(self.scale, systems=[system], seeds=[seed], corpora=[corpus])}`"
                + (" (on a GPU; at tiny a chapter's first cell does it)" if self.scale != "full" else "")
            )
        return _load(path)

    def runs(self, system: str, corpus: str | None = None) -> Runs | None:
        """The stored main-plan runs of ``system`` that this store reads (:meth:`seeds`) as :class:`Runs`: tokenized
        BLEU per seed on every evaluation set and each seed's hypotheses; None where none is stored."""
        corpus = corpus or self.corpus
        return self._runs([self.path(run_name(system, k, corpus)) for k in self.seeds(system, corpus)], system)

    def scores(
        self, systems: Sequence[str], split: str = "test", metric: str = "tok_bleu", corpus: str | None = None
    ) -> dict[str, list[float]]:
        """{system: score per read seed} on ``split`` (``metric``: ``tok_bleu``, the paper's, or ``bleu``,
        sacreBLEU); a system with no stored run is absent."""
        if metric not in ("bleu", "tok_bleu"):
            raise ValueError(f"metric={metric!r}: choose bleu (sacreBLEU) or tok_bleu (the paper's tokenized BLEU)")
        out = {}
        for system in systems:
            if runs := self.runs(system, corpus):
                if split not in runs.scores:
                    raise ValueError(f"split {split!r}: the runs of {system} were scored on {', '.join(runs.scores)}")
                out[system] = list(runs.scores[split]) if metric == "tok_bleu" else self.sacre(runs, split)
        return out

    def hypotheses(self, system: str, split: str = "test", seed: int = 1, corpus: str | None = None) -> list[str]:
        """The hypotheses of a stored run on ``split`` (read from the file beside its result)."""
        result, _ = self.run(system, seed, corpus)
        if split not in result["hyp_files"]:
            raise ValueError(
                f"split {split!r}: the run of {system} has hypotheses for {', '.join(result['hyp_files'])}"
            )
        path = self.path(run_name(system, seed, corpus or self.corpus))
        return list(_hypotheses(path.with_name(result["hyp_files"][split])))

    def logs(self, system: str, corpus: str | None = None) -> list[list[dict[str, Any]]]:
        """The training log of every read seed of ``system``."""
        return [self.run(system, seed, corpus)[0]["log"] for seed in self.seeds(system, corpus)]

    # -- the beyond studies' models ----------------------------------------------------------------------

    def study_files(self, study: str) -> list[Path]:
        """The model files of a beyond study: those its stored summary names, else every stored run of it."""
        summary = self.path(f"beyond/{study}")
        if summary.is_file():
            return [self.folder / f"{row['file']}.json" for row in _load(summary)[0]["runs"]]
        return sorted(p for p in (self.folder / "beyond").glob("runs/*/*.json") if p.name.startswith(f"{study}-"))

    def study_runs(self, study: str, system: str, tag: str = "") -> Runs | None:
        """The stored models of ``system`` in a beyond study (``tag``: "x2", "kd", ...); None where none is stored."""
        name = model_name(study, system, tag, 1).removesuffix("-seed1")
        files = [p for p in self.study_files(study) if (m := SEED.match(p.name)) and m["name"] == name]
        return self._runs(files, name)

    def budget_runs(self, system: str, factor: int) -> Runs | None:
        """``system`` trained for ``factor`` times the scale's updates: the main plan's runs at 1x, the budget
        study's models otherwise (read from their files, so they count before the study's summary exists)."""
        return self.runs(system) if factor == 1 else self.study_runs("budget", system, f"x{factor}")

    def budget_factors(self) -> list[int]:
        """The budget factors with stored models of every budget system (1, the main plan, first)."""
        found = {
            int(m["factor"])
            for p in self.study_files("budget")
            if (m := re.match(r"budget-\w+-x(?P<factor>\d+)-seed\d+\.json$", p.name))
        }
        return [1, *sorted(f for f in found if all(self.budget_runs(s, f) for s in ("balanced", "can")))]

    # -- what a Runs value came from ---------------------------------------------------------------------

    def provenances(self, runs: Iterable[Runs | None]) -> list[dict[str, Any]]:
        """The provenance of every run file behind ``runs`` (None entries skipped)."""
        return [self.result(f)[1] for r in runs if r is not None for f in r.files]

    def log(self, file: str) -> list[dict[str, Any]]:
        """The training log of a stored run file (relative to the scale's folder, as :attr:`Runs.files` names it)."""
        return self.result(file)[0]["log"]

    def sacre(self, runs: Runs, split: str = "test") -> list[float]:
        """sacreBLEU (13a) of each of ``runs``' seeds on ``split`` (Runs keep the paper's tokenized BLEU)."""
        return [float(self.result(f)[0]["scores"][split]["bleu"]) for f in runs.files]

    def references(self, corpus: str | None = None) -> dict[str, list[str]]:
        """The reference translations of each evaluation set (what the stored hypotheses are scored against), from
        the prepared corpus, read once per store (prepared from the data folder on first use: a verdict's bootstrap
        reads text, loading does not)."""
        corpus = corpus or self.corpus
        if corpus not in self._references:
            from canlib.data.preparation import prepared  # only here: reading stored results never prepares data

            data = prepared(corpus, self.spec.corpus_scale)
            scored = ("valid", *(getattr(data, "test_splits", None) or ("test",)))
            self._references[corpus] = {s: list(data.split(s).tgt_text) for s in EVAL_SPLITS if s in scored}
        return self._references[corpus]

    # -- analyses ----------------------------------------------------------------------------------------

    def analysis(self, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(result, provenance) of the stored analysis ``name``; a missing one names the call that computes it."""
        path = self.path(name)
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: the {name} study is not stored at {self.scale}; compute it with "
                f"`{experiment_command(self.scale, studies=[name])}` (a chapter: "
                f"repro.experiments.experiment.train_missing(SCALE, analyses_=[{name!r}]))"
            )
        return _load(path)

    # -- GPU and CPU measurements: under ``measurements``, not per scale -------------------------------------

    def gpu_runs_with(self, kind: str) -> list[str]:
        """The stored GPU runs that hold ``<kind>.json`` (``speed``, ``batch``, ``profile``...), by folder name."""
        return sorted(p.parent.name for p in (self.measurements / "gpu").glob(f"*/{kind}.json"))

    def gpu(self, kind: str, run: str, rows: str = "") -> tuple[Any, dict[str, Any]]:
        """(result, provenance) of one stored file of a GPU run; a missing one names the command that stores it.
        With ``rows``: that entry of the result, the file's settings (every other entry) joining the provenance."""
        path = self.measurements / "gpu" / run / f"{kind}.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no stored GPU result; store a GPU run's output with `{INGEST_COMMAND}`")
        result, prov = load_result(path)
        return (result[rows], {**prov, **{k: v for k, v in result.items() if k != rows}}) if rows else (result, prov)

    def gpu_speed(self, mode: str, run: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """Tokens/s of the Table 2 systems (fp16, batch 1, beam 4) in one GPU run, per system: the median repeat, its
        range and the figures of every interleaved repeat. ``mode``: ``eager`` (PyTorch launching every kernel, the
        paper's regime) or ``captured`` (decoder steps replayed from CUDA graphs)."""
        if mode not in ("eager", "captured"):
            raise ValueError(f"mode={mode!r}: choose 'eager' or 'captured'")
        systems, prov = self.gpu("speed", run, "systems")
        return {s: r[mode] for s, r in systems.items() if mode in r}, {**prov, "mode": mode}

    def gpu_batch(self, run: str) -> tuple[dict[str, dict[int, float]], dict[str, Any]]:
        """Eager tokens/s per batch size (the median of the timed repeats): {system: {batch: tok/s}}."""
        systems, prov = self.gpu("batch", run, "systems")
        return {s: {int(b): v for b, v in r["by_batch"].items()} for s, r in systems.items()}, prov

    def gpu_profile(self, run: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """The cases ``scripts/gpu_profile.sh`` profiled, per decoding step (``decode_*``) or update (``train_*``):
        {case: {wall_ms, cpu_ms, gpu_kernel_ms, gpu_busy_share, kernel_launches, host_syncs, ...}}; the provenance
        names the cases that failed (``errors``)."""
        return self.gpu("profile", run, "cases")

    def ops(self, name: str = "ops.json") -> tuple[dict[str, Any], dict[str, Any]]:
        """(result, provenance) of a stored operator count (``cpu/<name>``): ``result["systems"][system][path]``."""
        path = self.measurements / "cpu" / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no stored operator counts; run `{OPS_COMMAND}`")
        return load_result(path)

    def timed_ops(self, run: str) -> str | None:
        """The stored operator count (``cpu/ops*.json``) of the code the GPU run ``run`` timed: the count whose
        :func:`counted_code` holds the run's commit; None where none does."""
        commit = str(self.gpu("speed", run)[1]["commit"]).removesuffix("+dirty")
        names = sorted(p.name for p in (self.measurements / "cpu").glob("ops*.json"))
        return next((name for name in names if commit in counted_code(self.ops(name)[1])), None)

    # -- helpers -----------------------------------------------------------------------------------------

    def _kept(self, prov: dict[str, Any]) -> bool:
        """The reduced-budget filter, applied once: an end-to-end test's run is evidence only when asked for."""
        return not (self.full_budget and prov.get("reduced_budget"))

    def _runs(self, files: Sequence[Path], label: str) -> Runs | None:
        """The runs among ``files`` (one per seed) that this store reads, as :class:`Runs`; None if none is."""
        by_seed = sorted(files, key=lambda p: int(SEED.match(p.name)["seed"]))
        kept = [(p, _load(p)[0]) for p in by_seed if self._kept(_load(p)[1])]
        if not kept:
            return None
        scores, hyps = {}, {}
        for split in EVAL_SPLITS:
            if not all(split in r["scores"] for _, r in kept):
                continue
            scores[split] = tuple(float(r["scores"][split]["tok_bleu"]) for _, r in kept)
            if all(split in r.get("hyp_files", {}) for _, r in kept):
                hyps[split] = tuple(_hypotheses(p.with_name(r["hyp_files"][split])) for p, r in kept)
        seeds = tuple(int(SEED.match(p.name)["seed"]) for p, _ in kept)
        named = tuple(str(p.relative_to(self.folder)) if p.is_relative_to(self.folder) else str(p) for p, _ in kept)
        return Runs(label, seeds, scores, hyps, named, kept[0][1].get("tgt_lang", "de"))


def _load(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A stored result read once per process while its file is unchanged (chapters and the registry read the same
    runs many times; callers read it and never change it); a file without provenance is an error naming it."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such stored result")
    return _cached(load_result, str(path), path.stat().st_mtime_ns)


def _hypotheses(path: Path) -> tuple[str, ...]:
    if not path.is_file():
        raise ValueError(f"{path}: the hypotheses a stored run names are missing")
    return tuple(_cached(read_hypotheses, str(path), path.stat().st_mtime_ns))


@lru_cache(maxsize=1024)
def _cached(read: Callable[[Path], Any], path: str, _mtime: int) -> Any:
    """``read(path)`` once per process while the file is unchanged (its modification time is in the key)."""
    return read(Path(path))


# -- which scale the registry judges ---------------------------------------------------------------------------


def stored_scale(root: Path | None = None) -> str:
    """The scale the scorecard and the claims registry judge: ``small`` once any run is stored under
    ``<results>/small/runs`` (each claim is then judged as soon as its own seeds are in, and says ``not run yet``
    otherwise), else ``tiny``, where no quality claim is judged."""
    return "small" if any(Store("small", root).path(run_name("x", 1, "x")).parent.parent.glob("*/*.json")) else "tiny"


def counted_code(prov: dict[str, Any]) -> list[str]:
    """The commits whose decoding code an operator count counts: the commit it was counted at and those its
    provenance names as holding the same ``canlib/model`` and ``canlib/decoding`` (``same_code_as``, checked with git
    by the tests)."""
    return [str(prov["commit"]).removesuffix("+dirty"), *prov.get("same_code_as", [])]
