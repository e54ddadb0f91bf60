"""Training runs: which runs a scale holds, where each one lives, and training one.

A run is one system trained with one seed on one corpus at the budget of a scale
(:mod:`canlib.studies.scales`). It lives in ``cache_dir()/runs/<scale>/<corpus>/`` under a key of its
configuration: tiny runs are keyed by the code too (cheap to redo), small and full runs are not, so an
interrupted ``canlib experiment`` resumes them from their checkpoints after a code change.

:func:`trained` returns a finished run; it trains a missing one at ``tiny`` or when the caller passes
``train=True`` (what ``canlib experiment`` does), and otherwise names the command that trains it.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from canlib.data.batching import collate, sorted_batches
from canlib.io import cache_dir, data_dir
from canlib.model.checkpoint import load_model
from canlib.model.config import ABLATION_SYSTEMS, ALL_SYSTEMS, PAPER_SYSTEMS, ModelConfig, preset
from canlib.model.seq2seq import Seq2Seq
from canlib.studies.scales import DIRECTION_SYSTEMS, scale_spec
from canlib.studies.store import code_version, key

SEEDED_SYSTEMS = tuple(dict.fromkeys(PAPER_SYSTEMS + ABLATION_SYSTEMS))  # trained with ScaleSpec.seeds seeds
# the seed-1 runs on a scale's main corpus that each stored analysis reads (canlib.studies.analyses)
ANALYSIS_RUNS = {"similarity": ("baseline",), "errors": ("balanced", "can"), "attention": ("balanced", "can"),
                 "conversion": ("balanced", "can")}


def check_systems(systems: Sequence[str]) -> list[str]:
    """``systems`` as a list; an unknown name is an error that lists the known ones."""
    unknown = sorted(set(systems) - set(ALL_SYSTEMS))
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(ALL_SYSTEMS)}")
    return list(systems)


def corpora(scale: str) -> tuple[str, ...]:
    """The corpora a scale trains on: its main corpus first, then its further directions."""
    spec = scale_spec(scale)
    return (spec.corpus, *spec.directions)


def check_corpus(scale: str, name: str | None) -> str:
    """``name`` (default: the scale's main corpus) if the scale trains on it, else a clear error."""
    known = corpora(scale)
    if name is None:
        return known[0]
    if name not in known:
        raise ValueError(f"corpus {name!r} is not trained at scale {scale!r}; choose from {', '.join(known)}")
    return name


def prepared(scale: str, name: str | None = None):
    """The prepared corpus ``name`` (default: the scale's own) at the scale's corpus size, prepared on
    first use (offline from ``CANLIB_DATA_DIR``), loaded once per data and cache folder."""
    return _prepared(scale, check_corpus(scale, name), str(data_dir()), str(cache_dir()))


@lru_cache(maxsize=None)
def _prepared(scale: str, name: str, data: str, cache: str):
    """The folders are part of the key: a process that points CANLIB_CACHE_DIR or CANLIB_DATA_DIR
    elsewhere (a test, a second experiment) never gets a corpus prepared under the old ones."""
    from canlib.data import load_prepared, prepare

    # progress bars in a terminal (`canlib experiment`), none in a chapter's output
    return load_prepared(prepare(name, scale_spec(scale).corpus_scale, progress=sys.stderr.isatty()))


def target_lang(data: Any) -> str:
    """The target language of a prepared corpus (Moses tokenization for BLEU follows it)."""
    lang = getattr(data, "tgt_lang", None) or data.meta.get("tgt_lang")
    if not lang:
        raise ValueError(f"{data.path}/meta.json: no tgt_lang")
    return lang


def test_splits(data: Any) -> tuple[str, ...]:
    """The test splits of a prepared corpus, "test" first (older prepared folders have only "test")."""
    return tuple(getattr(data, "test_splits", None) or ("test",))


@dataclass(frozen=True)
class RunSpec:
    """One run of a scale's plan."""

    system: str
    seed: int
    corpus: str

    @property
    def name(self) -> str:
        return f"{self.corpus}/{self.system}-seed{self.seed}"


def plan(scale: str, systems: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
         corpora_: Sequence[str] | None = None) -> list[RunSpec]:
    """Every run of a scale, in training order: Table 2 systems and ablations x ``ScaleSpec.seeds``, depth
    systems x ``depth_seeds`` on the main corpus, seed by seed; then Baseline, Balanced and CAN x
    ``direction_seeds`` on each further direction. ``seeds`` replaces those seed counts (every run gets
    exactly these seeds); ``systems`` and ``corpora_`` narrow the plan."""
    spec = scale_spec(scale)

    def pick(count: int) -> list[int]:
        return list(seeds) if seeds is not None else list(range(1, count + 1))

    if seeds is not None and any(int(k) < 1 for k in seeds):
        raise ValueError(f"seeds {list(seeds)}: every seed must be >= 1")
    # seed by seed, the main corpus first: a run cut short still leaves whole sets (seed 1 of every system first)
    seeded, depth = pick(spec.seeds), pick(spec.depth_seeds)
    runs = [RunSpec(s, k, spec.corpus) for k in sorted(set(seeded) | set(depth))
            for s in (*SEEDED_SYSTEMS, "depth-9-4", "depth-14-1") if k in (depth if s.startswith("depth-") else seeded)]
    runs += [RunSpec(s, k, c) for k in pick(spec.direction_seeds) for c in spec.directions for s in DIRECTION_SYSTEMS]
    if systems is not None:
        wanted = set(check_systems(systems))
        runs = [r for r in runs if r.system in wanted]
    if corpora_ is not None:
        wanted = {check_corpus(scale, c) for c in corpora_}
        runs = [r for r in runs if r.corpus in wanted]
    return runs


# -- one run ---------------------------------------------------------------------------------------

@dataclass
class Run:
    """A finished training run."""

    system: str
    scale: str
    seed: int
    corpus: str
    run_dir: Path
    result: dict[str, Any]  # the trainer's result.json (stop reason, steps, wall time, provenance)

    def model(self) -> Seq2Seq:
        """The averaged model (the paper averages the last checkpoints), in eval mode."""
        return load_model(self.run_dir / "average.pt").eval()

    def log(self) -> list[dict[str, Any]]:
        """The rows of the run's log.jsonl."""
        with open(self.run_dir / "log.jsonl", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]


def model_config(system: str, scale: str, corpus_name: str | None = None) -> ModelConfig:
    return preset(scale_spec(scale).preset(system), vocab_size=prepared(scale, corpus_name).vocab.size)


def training_device(scale: str) -> str:
    """CUDA where there is one, except at tiny (CI's scale, CPU by definition)."""
    return "cuda" if scale != "tiny" and torch.cuda.is_available() else "cpu"


def set_worker_threads(threads: int) -> None:
    """Initializer of a spawned training worker: its share of the CPU threads, so concurrent runs do not
    oversubscribe the cores."""
    import torch

    torch.set_num_threads(threads)


def default_jobs(runs: int, device: str) -> int:
    """Concurrent training processes: one per CPU core as the GPU's memory allows; one on a CPU
    (the rule: ``canlib.studies.concurrency.device_jobs``)."""
    from canlib.studies.concurrency import device_jobs

    return device_jobs(runs, device)


def budget(scale: str, seed: int = 1, max_steps: int | None = None) -> dict[str, Any]:
    """The TrainConfig fields of a run: the scale's budget, its seed, and a reduced ``max_steps``
    (end-to-end tests) when given."""
    train = {**scale_spec(scale).train, "seed": seed}
    if max_steps is not None:
        if max_steps < 1:
            raise ValueError(f"max_steps={max_steps}: must be >= 1")
        train.update(max_steps=max_steps, max_epochs=0, patience=0,
                     valid_every=min(train.get("valid_every") or max_steps, max_steps))
    return train


def run_dir(system: str, scale: str, corpus_name: str, train_cfg: dict[str, Any], init: str | None = None) -> Path:
    code = code_version() if scale == "tiny" else None
    k = key(code, model_config(system, scale, corpus_name).to_dict(), train_cfg, prepared(scale, corpus_name).meta, init)
    return cache_dir() / "runs" / scale / corpus_name / f"{system}{'-' + init if init else ''}-seed{train_cfg['seed']}-{k}"


def train(system: str, scale: str, corpus_name: str, folder: Path, train_cfg: dict[str, Any],
          init_weights: dict[str, torch.Tensor] | None = None) -> None:
    """Train (or resume from its checkpoints) one run into ``folder``."""
    from canlib.training.trainer import TrainConfig, Trainer

    data = prepared(scale, corpus_name)
    device = training_device(scale)
    cfg = TrainConfig(**{"precision": "bf16" if device == "cuda" else "fp32", **train_cfg, "device": device})
    trainer = Trainer(
        model_config(system, scale, corpus_name), cfg, data.split("train"), data.split("valid"), folder,
        vocab=data.vocab, data_path=str(data.path), resume=(folder / "checkpoints").exists(), init_weights=init_weights,
    )
    trainer.fit()


def trained(system: str, scale: str, seed: int = 1, corpus: str | None = None, *, train_now: bool = False,
            max_steps: int | None = None) -> Run:
    """The finished run of ``system`` with ``seed`` on ``corpus`` (default: the scale's corpus).

    A missing run is trained (or resumed) at ``tiny`` or with ``train_now=True``; otherwise it is an
    error naming the command that trains it.
    """
    check_systems([system])
    corpus_name = check_corpus(scale, corpus)
    cfg = budget(scale, seed, max_steps)
    folder = run_dir(system, scale, corpus_name, cfg)
    if not (folder / "result.json").exists():
        if scale != "tiny" and not train_now:
            raise FileNotFoundError(
                f"{folder}: no finished {scale} run of {system} (seed {seed}, {corpus_name}) on this machine; train it "
                f"with `python -m canlib experiment --scale {scale} --systems {system} --seeds {seed} --corpora {corpus_name}`")
        train(system, scale, corpus_name, folder, cfg)
    result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    return Run(system, scale, seed, corpus_name, folder, result)


def batches(split: Any, cfg: ModelConfig, max_tokens: int = 4096) -> Iterator[dict[str, Any]]:
    """Length-sorted batches of a whole split, in a fixed order."""
    for indices in sorted_batches(split, max_tokens):
        yield collate(split, indices.tolist(), cfg.pad_id, cfg.bos_id, cfg.eos_id)


def teacher_forced_batches(run: Run, split: str, max_tokens: int = 4096) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(src, tgt_in) batches of a split of the run's corpus."""
    cfg = model_config(run.system, run.scale, run.corpus)
    for batch in batches(prepared(run.scale, run.corpus).split(split), cfg, max_tokens):
        yield batch["src"], batch["tgt_in"]
