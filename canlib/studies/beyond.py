"""Beyond the paper: why does CAN lose more BLEU to Balanced here than in the paper? Three studies.

The paper itself points at three things that could explain a larger gap (the "beyond" chapter states the question):

* ``budget``: Balanced and CAN trained 2x and 4x longer than the scale's budget (2,400 and 4,800 updates
  at small), 2 seeds each. The learning-rate schedule is **not** rescaled: the same peak lr and warm-up, the
  inverse-square-root decay simply continued, so a longer run passes through the 1x run's schedule and the
  only change is "more updates". Every ``valid_every`` updates (400 at small) the trainer logs the validation
  loss and greedy (beam 1) validation sacreBLEU, so the chapter draws the gap against updates beside the
  paper's Fig. 8 (its loss curves). The final models are scored like every run (beam 4, valid and test).
* ``distill``: sequence-level knowledge distillation as in the paper's Table 4. The teacher is Balanced,
  the paper's choice ("The balanced baseline is used to generate the pseudo data for KD"), trained here with
  the scale's recipe (seed 1); it translates the training set with beam 4, and Balanced, SAN, AAN and CAN
  (3 seeds each) train on those targets and are scored against the real references. The distilled corpus
  itself is not stored; its provenance is (teacher, its BLEU, pairs, a hash of the targets).
* ``can-6-6``: CAN's decoder layers on the 6/6 Baseline (preset ``can-6-6``), 3 seeds, read beside the
  Baseline runs of the main plan: the paper reports -0.09 BLEU on average there against -0.25 on 12/2.

Every model is a run result like the main plan's, stored as ``beyond/runs/<corpus>/<run>`` with its
hypotheses beside it, so ``canlib experiment --rescore`` recomputes its sacreBLEU; each study's summary
(``beyond/<study>``) copies the scores a chapter shows, and :func:`recheck` verifies those copies.
"""
from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from canlib.studies.quality import check_stored_budget, evaluate, target_lang
from canlib.studies.runs import Run, budget, model_config, prepared, set_worker_threads, training_device
from canlib.studies.scales import scale_spec
from canlib.studies.store import code_version, key, result_path, stored_path, study

STUDIES = ("budget", "distill", "can-6-6")
BUDGET_SYSTEMS = ("balanced", "can")
BUDGET_FACTORS = (2, 4)
STUDENTS = ("balanced", "san", "aan", "can")
TEACHER = "balanced"  # the paper's teacher for Table 4
TEACHER_SEED = 1
DISTILL_BEAM = 4
REDUCED_PAIRS = 64  # an end-to-end test (``max_steps`` given) distils only the first pairs of the training set
SEEDS = {"budget": (1, 2), "distill": (1, 2, 3), "can-6-6": (1, 2, 3)}
REFERENCE_SYSTEMS = ("baseline", "balanced", "can")  # main-plan runs the chapter reads beside the studies
# quoted from the paper's Results section (not in a table): "applying CAN on the standard baseline hurt the
# performance less (-0.09 BLEU points on average) than on the balanced baseline (-0.25 BLEU points on average)"
PAPER_CAN_ON = {"6/6": -0.09, "12/2": -0.25}
GPU_COMMAND = "bash scripts/gpu_small.sh"


@dataclass(frozen=True)
class BeyondRun:
    """One model of a study: ``tag`` is "x2"/"x4" (budget), "kd" (a distilled student), "teacher" or ""."""

    study: str
    system: str
    seed: int
    tag: str = ""

    @property
    def name(self) -> str:
        return f"{self.study}-{self.system}{'-' + self.tag if self.tag else ''}-seed{self.seed}"

    @property
    def factor(self) -> int:
        return int(self.tag[1:]) if self.study == "budget" else 1


def study_runs(name: str, seeds: Sequence[int] | None = None) -> list[BeyondRun]:
    """The models of study ``name`` in training order (the teacher before its students)."""
    if name not in STUDIES:
        raise ValueError(f"study {name!r}: choose from {', '.join(STUDIES)}")
    seeds = list(seeds) if seeds is not None else list(SEEDS[name])
    if not seeds or any(int(k) < 1 for k in seeds):
        raise ValueError(f"seeds {seeds}: give at least one seed, every seed >= 1")
    if name == "budget":
        return [BeyondRun(name, s, k, f"x{f}") for f in BUDGET_FACTORS for k in seeds for s in BUDGET_SYSTEMS]
    if name == "distill":
        return [BeyondRun(name, TEACHER, TEACHER_SEED, "teacher")] + [
            BeyondRun(name, s, k, "kd") for k in seeds for s in STUDENTS]
    return [BeyondRun(name, "can-6-6", k) for k in seeds]


# -- one model -------------------------------------------------------------------------------------

def train_config(scale: str, run: BeyondRun, max_steps: int | None = None) -> dict[str, Any]:
    """The TrainConfig fields of ``run``: the scale's budget (``max_steps``: reduced, end-to-end tests),
    times the budget study's factor, the schedule unchanged; the budget runs validate 4 times when reduced."""
    cfg = budget(scale, run.seed, max_steps)
    if run.study == "budget":
        steps = cfg["max_steps"] * run.factor
        cfg.update(max_steps=steps, valid_every=max(1, steps // 4) if max_steps is not None else cfg["valid_every"])
    return cfg


def run_config(scale: str, run: BeyondRun, max_steps: int | None = None) -> dict[str, Any]:
    spec = scale_spec(scale)
    config = {"study": run.study, "system": run.system, "preset": spec.preset(run.system),
              "corpus": f"{spec.corpus}/{spec.corpus_scale}", "seed": run.seed, "tag": run.tag,
              "train": train_config(scale, run, max_steps), "beam": spec.beam, "max_steps": max_steps}
    if run.study == "budget":
        config["valid_bleu"] = "greedy (beam 1) sacreBLEU on valid at every validation"
    if run.tag == "kd":
        config["distilled"] = {"teacher": TEACHER, "teacher_seed": TEACHER_SEED, "beam": DISTILL_BEAM,
                               "pairs": REDUCED_PAIRS if max_steps is not None else "all"}
    return config


def run_name(scale: str, run: BeyondRun) -> str:
    """The stored result's name (relative to the scale's results folder, without ``.json``)."""
    return f"beyond/runs/{scale_spec(scale).corpus}/{run.name}"


def _run_dir(scale: str, config: dict[str, Any]) -> Path:
    from canlib.io import cache_dir

    data = prepared(scale)
    k = key(code_version() if scale == "tiny" else None, config, data.meta)
    return cache_dir() / "runs" / scale / scale_spec(scale).corpus / f"beyond-{config['study']}-{config['system']}-{config['tag'] or 'main'}-seed{config['seed']}-{k}"


def greedy_valid_bleu(scale: str) -> Callable[[Any], float]:
    """The trainer's validation hook of the budget study: greedy sacreBLEU of the validation split."""
    from canlib.bleu import corpus_scores
    from canlib.decoding.translate import translate_lines

    data = prepared(scale)
    valid = data.split("valid")
    src, refs, lang = list(valid.src_text), list(valid.tgt_text), target_lang(data)

    def score(model: Any) -> float:
        batch = 128 if next(model.parameters()).device.type == "cuda" else 32
        return corpus_scores(translate_lines(model, data.vocab, src, beam=1, batch_size=batch), refs, lang=lang)["bleu"]

    return score


def _train(scale: str, run: BeyondRun, folder: Path, train_cfg: dict[str, Any], train_split: Any) -> None:
    from canlib.training.trainer import TrainConfig, Trainer

    data = prepared(scale)
    device = training_device(scale)
    cfg = TrainConfig(**{"precision": "bf16" if device == "cuda" else "fp32", **train_cfg, "device": device})
    hook = greedy_valid_bleu(scale) if run.study == "budget" else None
    Trainer(model_config(run.system, scale), cfg, train_split, data.split("valid"), folder, vocab=data.vocab,
            valid_bleu=hook, data_path=str(data.path), resume=(folder / "checkpoints").exists()).fit()


def run_result(scale: str, run: BeyondRun, *, store: bool = False, root: Path | None = None,
               max_steps: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result, provenance) of one model, as :func:`canlib.studies.quality.run_result`: trained and
    evaluated when missing (``store=True``, or tiny), loaded otherwise."""
    config = run_config(scale, run, max_steps)
    name = run_name(scale, run)
    path = result_path(name, scale, config, store=store, root=root)
    if store and path.exists():
        check_stored_budget(path, config)

    def compute() -> dict[str, Any]:
        folder = _run_dir(scale, config)
        distilled = None
        split = prepared(scale).split("train")
        if run.tag == "kd":
            distilled = distilled_corpus(scale, max_steps)
            split = distilled.pop("split")
        if not (folder / "result.json").exists():
            _train(scale, run, folder, config["train"], split)
        trained = Run(run.system, scale, run.seed, scale_spec(scale).corpus, folder,
                      json.loads((folder / "result.json").read_text(encoding="utf-8")))
        out = evaluate(trained, path)
        out.update(study=run.study, tag=run.tag, factor=run.factor)
        if distilled is not None:
            out["distilled"] = distilled
        return out

    device = training_device(scale)
    extra = {"seed": run.seed, "corpus": scale_spec(scale).corpus, "budget": config["train"],
             "reduced_budget": max_steps is not None, "precision": "bf16" if device == "cuda" else "fp32"}
    return study(name, scale, config, compute, device, store=store, root=root, extra=extra)


# -- the distilled corpus --------------------------------------------------------------------------

def distill_targets(model: Any, sources: list[list[int]], beam: int = DISTILL_BEAM, batch_size: int = 128) -> list[list[int]]:
    """The model's beam-search translation (subword ids, no BOS/EOS) of each source, in order; sentences are
    batched longest first so that padding stays small."""
    import torch

    from canlib.decoding.search import beam_search, make_batch

    out: list[list[int]] = [[] for _ in sources]
    order = sorted((i for i, s in enumerate(sources) if len(s)), key=lambda i: -len(sources[i]))
    device = next(model.parameters()).device
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            src = make_batch([sources[i] for i in chunk], model.cfg.pad_id, model.cfg.eos_id, device)
            for i, tokens in zip(chunk, beam_search(model, src, beam=beam).tokens):
                out[i] = [int(t) for t in tokens]
    return out


def distilled_corpus(scale: str, max_steps: int | None = None) -> dict[str, Any]:
    """The training set with the teacher's beam-4 translations as targets (``split``: a PairList the trainer
    reads; pairs whose translation is empty are dropped) and its provenance: the teacher, its BLEU on valid and
    test measured on the model that translated, the pairs, the targets' lengths and a hash of them.
    Cached per teacher configuration; the teacher is trained here if its run folder is missing (a fresh machine)."""
    import numpy as np

    from canlib.bleu import corpus_scores
    from canlib.data.batching import PairList
    from canlib.io import atomic_write_bytes, cache_dir
    from canlib.model.checkpoint import load_model
    from canlib.studies.quality import translate_split

    teacher = BeyondRun("distill", TEACHER, TEACHER_SEED, "teacher")
    config = run_config(scale, teacher, max_steps)
    folder = _run_dir(scale, config)
    data = prepared(scale)
    train = data.split("train")
    pairs = min(len(train), REDUCED_PAIRS) if max_steps is not None else len(train)
    path = cache_dir() / "distill" / scale / f"{teacher.name}-{key(code_version() if scale == 'tiny' else None, config, pairs)}.json"
    sources = [train[i][0].tolist() for i in range(pairs)]
    if not path.exists():
        if not (folder / "result.json").exists():
            _train(scale, teacher, folder, config["train"], train)
        device = training_device(scale)
        model = load_model(folder / "average.pt").eval().to(device)
        batch = 128 if device == "cuda" else 32
        targets = distill_targets(model, sources, DISTILL_BEAM, batch)
        teacher_bleu = {split: {k: v for k, v in translate_split(model, data, split, scale_spec(scale).beam)[1].items()
                                if k in ("bleu", "tok_bleu")} for split in ("valid", "test")}
        refs = [data.vocab.decode(train[i][1].tolist()) for i in range(pairs)]
        hyps = [data.vocab.decode(t) for t in targets]
        record = {"targets": targets, "provenance": {
            "teacher": TEACHER, "teacher_seed": TEACHER_SEED, "teacher_preset": config["preset"],
            "teacher_train": config["train"], "teacher_bleu": teacher_bleu, "beam": DISTILL_BEAM, "pairs": pairs,
            "empty": sum(1 for t in targets if not t),
            "train_bleu_vs_real_targets": corpus_scores(hyps, refs, lang=target_lang(data))["bleu"],
            "mean_subwords": {"distilled": float(np.mean([len(t) for t in targets])),
                              "real": float(np.mean([len(train[i][1]) for i in range(pairs)]))},
            "sha256": hashlib.sha256(json.dumps(targets).encode()).hexdigest()}}
        atomic_write_bytes(json.dumps(record).encode(), path)
    record = json.loads(path.read_text(encoding="utf-8"))
    keep = [i for i, t in enumerate(record["targets"]) if t]
    split = PairList([sources[i] for i in keep], [record["targets"][i] for i in keep])
    return {**record["provenance"], "split": split}


# -- the studies -----------------------------------------------------------------------------------

def _scores(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {split: {k: result["scores"][split][k] for k in ("bleu", "tok_bleu")} for split in result["scores"]}


def _row(scale: str, run: BeyondRun, result: dict[str, Any], prov: dict[str, Any]) -> dict[str, Any]:
    row = {"system": run.system, "seed": run.seed, "tag": run.tag, "file": run_name(scale, run),
           "reduced_budget": bool(prov.get("reduced_budget")), "scores": _scores(result)}
    if run.study == "budget":
        row.update(factor=run.factor, steps=result["training"]["step"],
                   curve=[{"step": r["step"], "valid_loss": r.get("valid_loss"), "valid_bleu": r.get("valid_bleu")}
                          for r in result["log"] if r.get("kind") == "valid"])
    return row


def beyond_study(name: str, scale: str, *, seeds: Sequence[int] | None = None, max_steps: int | None = None,
                 store: bool = False, root: Path | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(summary, provenance) of study ``name`` (see the module docstring): its models' scores (and, for
    ``budget``, their validation curves; for ``distill``, the distilled corpus's provenance). Missing models are
    trained one after another (``run_studies`` trains them concurrently first)."""
    runs = study_runs(name, seeds)
    config = {"study": name, "seeds": sorted({r.seed for r in runs if r.tag != "teacher"}), "max_steps": max_steps,
              "runs": [r.name for r in runs]}

    def compute() -> dict[str, Any]:
        rows = []
        for run in runs:
            result, prov = run_result(scale, run, store=store, root=root, max_steps=max_steps)
            rows.append(_row(scale, run, result, prov))
        out: dict[str, Any] = {"study": name, "runs": rows}
        if name == "budget":
            out.update(systems=list(BUDGET_SYSTEMS), factors=list(BUDGET_FACTORS),
                       base_steps=budget(scale, 1, max_steps)["max_steps"],
                       schedule="peak lr and warm-up as at 1x, the inverse-square-root decay continued (not rescaled)",
                       valid_bleu="greedy (beam 1) sacreBLEU on valid, logged at every validation")
        elif name == "distill":
            kd = [run_result(scale, r, store=store, root=root, max_steps=max_steps)[0]["distilled"]
                  for r in runs if r.tag == "kd"]
            out.update(teacher=kd[0], corpora=sorted({d["sha256"] for d in kd}), students=list(STUDENTS))
        return out

    device = training_device(scale)
    return study(f"beyond/{name}", scale, config, compute, device, store=store, root=root,
                 extra={"reduced_budget": max_steps is not None})


def _task(scale: str, run: BeyondRun, root: Path | None, max_steps: int | None) -> str:
    run_result(scale, run, store=True, root=root, max_steps=max_steps)
    return run.name


def run_studies(scale: str, names: Sequence[str], *, seeds: Sequence[int] | None = None, max_steps: int | None = None,
                root: Path | None = None, jobs: int | None = None) -> list[str]:
    """Train, evaluate and store every model of the studies ``names`` (``jobs`` spawned processes, by default
    as many as ``canlib experiment`` uses for its runs; the
    students wait for their teacher), then store each study's summary; one printed line per model. Returns
    the failures (a failed model does not stop the others; its study's summary is then not stored)."""
    import os
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from multiprocessing import get_context

    runs = [r for n in names for r in study_runs(n, seeds)]
    todo = [r for r in runs if not stored_path(run_name(scale, r), scale, root).exists()]
    if jobs is None:
        from canlib.studies.runs import default_jobs

        jobs = default_jobs(len(todo), training_device(scale))
    print(f"{scale}: beyond studies {', '.join(names)}: {len(runs)} models, {len(runs) - len(todo)} already stored, "
          f"{len(todo)} to train with {jobs} process(es)", flush=True)
    failed: list[str] = []
    bad: set[str] = set()

    def report(run: BeyondRun, error: BaseException | None) -> None:
        if error is None:
            print(f"[beyond] {run.name}: stored", flush=True)
        else:
            bad.add(run.study)
            failed.append(f"{run.name}: {type(error).__name__}: {error}")
            print(f"[beyond] {run.name} FAILED: {error}", flush=True)

    teacher_first = sorted(todo, key=lambda r: r.tag != "teacher")  # the teacher gates 12 students: start it first
    if jobs <= 1:
        for run in teacher_first:
            try:
                _task(scale, run, root, max_steps)
                report(run, None)
            except Exception as exc:  # noqa: BLE001 - named, the others go on
                report(run, exc)
    else:
        waiting = [r for r in teacher_first if r.tag == "kd"]
        ready = [r for r in teacher_first if r.tag != "kd"]
        teacher_pending = any(r.tag == "teacher" for r in ready)
        threads = max(1, (os.cpu_count() or 1) // jobs)
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=set_worker_threads,
                                 initargs=(threads,)) as pool:
            pending = {pool.submit(_task, scale, r, root, max_steps): r for r in ready}
            if not teacher_pending:
                pending.update({pool.submit(_task, scale, r, root, max_steps): r for r in waiting})
                waiting = []
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    run = pending.pop(future)
                    error = future.exception()
                    report(run, error)
                    if run.tag == "teacher" and waiting:
                        if error is None:
                            pending.update({pool.submit(_task, scale, r, root, max_steps): r for r in waiting})
                        else:
                            for r in waiting:
                                report(r, RuntimeError("its teacher failed"))
                        waiting = []
    for name in names:
        if name in bad:
            print(f"beyond/{name}: not stored ({len(failed)} model(s) failed; run the command again)", flush=True)
            continue
        beyond_study(name, scale, seeds=seeds, max_steps=max_steps, store=True, root=root)
        print(f"beyond/{name}: stored", flush=True)
    return failed


def recheck(folder: Path) -> int:
    """Every stored study summary under ``folder`` must quote exactly the scores of the model results it
    names (whose sacreBLEU :func:`canlib.studies.quality.rescore` recomputes from their hypotheses); returns
    the scores checked, a ValueError names the first difference."""
    from canlib.studies.results import load_result

    checked = 0
    for path in sorted(Path(folder).rglob("beyond/*.json")):
        summary, _ = load_result(path)
        for row in summary.get("runs", []):
            run_path = path.parent.parent / f"{row['file']}.json"
            if not run_path.is_file():
                raise ValueError(f"{path}: names {row['file']}, which is not stored in {path.parent.parent}")
            result, _ = load_result(run_path)
            if row["scores"] != _scores(result):
                raise ValueError(f"{path}: the scores of {row['file']} differ from {run_path}")
            checked += sum(len(v) for v in row["scores"].values())
    return checked


# -- what the chapter reads ------------------------------------------------------------------------

def default_scale(root: Path | None = None) -> str:
    """"small" once the three study summaries and every seed of Baseline, Balanced and CAN are stored at
    small, else "tiny"."""
    from canlib.studies.quality import missing_results
    from canlib.studies.runs import plan

    runs = plan("small", REFERENCE_SYSTEMS, None, [scale_spec("small").corpus])
    return "tiny" if missing_results("small", runs, [f"beyond/{n}" for n in STUDIES], root) else "small"


# At tiny the book trains every model of this chapter on a CPU while it builds: one seed, and a quarter of the
# tiny budget (30 updates for a 1x run; the distilled corpus is the first REDUCED_PAIRS pairs), for the main
# runs it compares with too. Such models only show that the studies run end to end.
TINY_SEEDS = (1,)
TINY_STEPS = 30


def summaries(scale: str, root: Path | None = None) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """{study: (summary, provenance)}: loaded at small/full or from ``root``; trained on first use at tiny
    (``TINY_SEEDS``, ``TINY_STEPS``)."""
    if root is not None or scale != "tiny":
        return {n: _stored(n, scale, root) for n in STUDIES}
    return {n: beyond_study(n, scale, seeds=TINY_SEEDS, max_steps=TINY_STEPS) for n in STUDIES}


def _stored(name: str, scale: str, root: Path | None) -> tuple[dict[str, Any], dict[str, Any]]:
    from canlib.studies.results import load_result

    return load_result(stored_path(f"beyond/{name}", scale, root))


def _full(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if not r["reduced_budget"]]


def references(scale: str, root: Path | None = None, metric: str = "tok_bleu",
               systems: Sequence[str] = REFERENCE_SYSTEMS) -> dict[str, list[float]]:
    """Test BLEU per seed of the main plan's runs of ``systems`` (at tiny: seed 1 with ``TINY_STEPS`` updates,
    trained now, the budget of this chapter's tiny studies)."""
    from canlib.studies.quality import bleu_by_seed, run_result

    if scale == "tiny" and root is None:
        return {s: [float(run_result(s, scale, k, max_steps=TINY_STEPS)[0]["scores"]["test"][metric])]
                for s in systems for k in TINY_SEEDS}
    return bleu_by_seed(scale, list(systems), split="test", metric=metric, root=root, full_budget=scale != "tiny")


def scores_by(rows: list[dict[str, Any]], group: Callable[[dict[str, Any]], Any], metric: str = "tok_bleu",
              split: str = "test") -> dict[Any, list[float]]:
    """{group(row): [score per seed]} over the rows of a summary."""
    out: dict[Any, list[float]] = {}
    for row in rows:
        out.setdefault(group(row), []).append(float(row["scores"][split][metric]))
    return out


def _stats(values: list[float] | None) -> tuple[float, float, int]:
    if not values:
        return math.nan, math.nan, 0
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else math.nan, len(values)


def _cell(values: list[float] | None) -> str:
    mean, std, n = _stats(values)
    if not n:
        return "—"
    return f"{mean:.2f} ± {std:.2f} (n={n})" if n > 1 else f"{mean:.2f} (n=1)"


def _gap(a: list[float] | None, b: list[float] | None) -> str:
    if not a or not b:
        return "—"
    diff = statistics.fmean(a) - statistics.fmean(b)
    if len(a) > 1 and len(b) > 1:
        se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
        return f"{diff:+.2f} ± {2 * se:.2f}"
    return f"{diff:+.2f}"


def budget_table(scale: str, summary: dict[str, Any], refs: dict[str, list[float]], metric: str = "tok_bleu"):
    """One row per budget (1x: the main plan's runs): Balanced and CAN test BLEU (mean ± std over seeds) and
    CAN - Balanced (± 2 standard errors)."""
    import pandas as pd

    base = summary["base_steps"]
    by = scores_by(summary["runs"], lambda r: (r["system"], r["factor"]), metric)
    rows = [{"updates": base, "budget": "1x (main plan)", "Balanced": _cell(refs.get("balanced")),
             "CAN": _cell(refs.get("can")), "CAN − Balanced": _gap(refs.get("can"), refs.get("balanced"))}]
    for f in summary["factors"]:
        rows.append({"updates": base * f, "budget": f"{f}x", "Balanced": _cell(by.get(("balanced", f))),
                     "CAN": _cell(by.get(("can", f))), "CAN − Balanced": _gap(by.get(("can", f)), by.get(("balanced", f)))})
    return pd.DataFrame(rows).set_index("updates")


def distill_table(summary: dict[str, Any], real: dict[str, list[float]], metric: str = "tok_bleu"):
    """One row per student: test BLEU trained on real targets (main plan) and on distilled ones, beside the
    paper's Table 4 (before and after KD)."""
    import pandas as pd

    from canlib.model.config import LABELS
    from canlib.studies.paper import paper_numbers

    t4 = paper_numbers()["table4_kd_en-de"]
    kd = scores_by(summary["runs"], lambda r: r["system"] if r["tag"] == "kd" else None, metric)
    rows = []
    for s in summary["students"]:
        label = LABELS[s]
        rows.append({"system": label, "ours: real targets": _cell(real.get(s)), "ours: distilled": _cell(kd.get(s)),
                     "ours: distilled − real": _gap(kd.get(s), real.get(s)),
                     "paper: before KD": t4[label][0], "paper: after KD": t4[label][1]})
    return pd.DataFrame(rows).set_index("system")


def can66_table(summary: dict[str, Any], refs: dict[str, list[float]], metric: str = "tok_bleu"):
    """CAN against the model it compresses, on 6/6 and on 12/2: our test BLEU over seeds and the paper's average
    differences."""
    import pandas as pd

    can66 = scores_by(summary["runs"], lambda r: r["system"], metric).get("can-6-6")
    rows = [{"depth": "6/6", "standard decoder": _cell(refs.get("baseline")), "CAN decoder": _cell(can66),
             "CAN − standard": _gap(can66, refs.get("baseline")), "paper (average)": PAPER_CAN_ON["6/6"]},
            {"depth": "12/2", "standard decoder": _cell(refs.get("balanced")), "CAN decoder": _cell(refs.get("can")),
             "CAN − standard": _gap(refs.get("can"), refs.get("balanced")), "paper (average)": PAPER_CAN_ON["12/2"]}]
    return pd.DataFrame(rows).set_index("depth")


def curves(summary: dict[str, Any]) -> dict[tuple[str, int], dict[str, list[float]]]:
    """{(system, factor): {"step", "valid_loss", "valid_bleu"}}: each validation point averaged over seeds."""
    grouped: dict[tuple[str, int], dict[int, list[dict[str, Any]]]] = {}
    for row in summary["runs"]:
        for point in row["curve"]:
            grouped.setdefault((row["system"], row["factor"]), {}).setdefault(point["step"], []).append(point)
    out = {}
    for k, by_step in grouped.items():
        steps = sorted(by_step)
        out[k] = {"step": steps, **{m: [statistics.fmean(p[m] for p in by_step[s]) for s in steps]
                                     for m in ("valid_loss", "valid_bleu")}}
    return out


def budget_figure(summary: dict[str, Any], scale: str):
    """Left: greedy validation BLEU of Balanced and CAN against updates (the longest runs, mean over seeds);
    middle: CAN - Balanced validation loss against updates; right: the same gap in the paper's Fig. 8."""
    import matplotlib.pyplot as plt

    from canlib.studies.paper import paper_numbers

    c = curves(summary)
    longest = max(summary["factors"])
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for system, colour in (("balanced", "tab:red"), ("can", "tab:blue")):
        if (system, longest) in c:
            axes[0].plot(c[system, longest]["step"], c[system, longest]["valid_bleu"], "o-", color=colour,
                         label=f"{'Balanced' if system == 'balanced' else 'CAN'} ({longest}x)")
    axes[0].set(xlabel="updates", ylabel="valid sacreBLEU (greedy)", title=f"ours ({scale})")
    axes[0].legend(fontsize=8)
    for f in summary["factors"]:
        if ("can", f) in c and ("balanced", f) in c:
            gap = [a - b for a, b in zip(c["can", f]["valid_loss"], c["balanced", f]["valid_loss"])]
            axes[1].plot(c["can", f]["step"], gap, "o-", label=f"{f}x budget")
    axes[1].axhline(0, color="grey", lw=0.8)
    axes[1].set(xlabel="updates", ylabel="valid loss: CAN − Balanced", title=f"ours ({scale})")
    axes[1].legend(fontsize=8)
    f8 = paper_numbers()["fig8_curves_en-de"]
    axes[2].plot(f8["epochs"], [a - b for a, b in zip(f8["valid"]["CAN"], f8["valid"]["Balanced"])], "s-", color="black")
    axes[2].axhline(0, color="grey", lw=0.8)
    axes[2].set(xlabel="epoch", ylabel="valid loss: CAN − Balanced", title="paper, Fig. 8 (WMT14 En-De)")
    fig.tight_layout()
    return fig


# -- the scorecard's rows --------------------------------------------------------------------------

def study_scores(scale: str, root: Path | None = None, metric: str = "tok_bleu") -> dict[str, list[float]]:
    """Full-budget test BLEU per seed: "kd:<system>" for the distilled students, "can-6-6", and the main plan's
    Baseline, Balanced and CAN; empty at a scale whose models are not judged, or where nothing is stored."""
    from canlib.studies.scorecard import QUALITY_SCALES

    if scale not in QUALITY_SCALES:
        return {}
    out: dict[str, list[float]] = {}
    for name, prefix in (("distill", "kd:"), ("can-6-6", "")):
        path = stored_path(f"beyond/{name}", scale, root)
        if path.is_file():
            summary, _ = _stored(name, scale, root)
            for system, values in scores_by([r for r in _full(summary["runs"]) if r["tag"] != "teacher"],
                                            lambda r: r["system"], metric).items():
                out[prefix + system] = values
    out.update(references(scale, root, metric))
    return out


def claims(scale: str, root: Path | None = None, scores: dict[str, list[float]] | None = None) -> list:
    """The scorecard rows of these studies: Table 4 (with distillation CAN is on par with Balanced) and "CAN on
    6/6 hurts less than on 12/2", judged by the scorecard's rules (two seeds or more, 2 standard errors)."""
    from canlib.studies.paper import paper_numbers
    from canlib.studies.scorecard import (K_SPREAD, NOT_RUN, NOT_TESTED, QUALITY_SCALES, Claim, interval_verdict,
                                          quality_claim, seed_difference)

    def not_run(claim: Claim, study_name: str) -> Claim:
        return replace(claim, verdict=NOT_RUN, evidence=f"scale {scale}: the {study_name} study is not stored: "
                       f"`python -m canlib experiment --scale {scale} --studies {study_name}` (or `{GPU_COMMAND}`)")


    scores = study_scores(scale, root) if scores is None else scores
    t4 = paper_numbers()["table4_kd_en-de"]
    kd = {"can": scores.get("kd:can", []), "balanced": scores.get("kd:balanced", [])}
    table4 = quality_claim("With distillation CAN is on par with Balanced (Table 4)",
                           f"{t4['CAN'][1] - t4['Balanced'][1]:+.2f} (Table 4, both distilled)", "ΔBLEU >= -0.5",
                           lambda d: d >= -0.5, "can", "balanced", scale, kd)
    if table4.verdict != NOT_TESTED:
        table4 = replace(table4, evidence=table4.evidence.replace("(CAN - Balanced)", "(CAN - Balanced, both distilled)"))
    elif scale in QUALITY_SCALES and not (kd["can"] or kd["balanced"]):
        table4 = not_run(table4, "distill")
    name = "CAN on 6/6 hurts less than on 12/2 (Results)"
    paper = f"{PAPER_CAN_ON['6/6']:+.2f} vs {PAPER_CAN_ON['12/2']:+.2f} on average (Results)"
    criterion = "(CAN 6/6 − Baseline) − (CAN − Balanced) > 0"
    gate = [quality_claim(name, paper, criterion, lambda d: True, a, b, scale, scores)
            for a, b in (("can-6-6", "baseline"), ("can", "balanced"))]
    untested = next((g for g in gate if g.verdict == NOT_TESTED), None)
    if untested is not None:
        return [table4, not_run(untested, "can-6-6") if scale in QUALITY_SCALES and not scores.get("can-6-6") else untested]
    d66, se66 = seed_difference(scores["can-6-6"], scores["baseline"])
    d122, se122 = seed_difference(scores["can"], scores["balanced"])
    diff, se = d66 - d122, math.hypot(se66, se122)
    verdict = interval_verdict(diff - K_SPREAD * se, diff + K_SPREAD * se, lambda x: x > 0)
    evidence = (f"tok-BLEU, scale {scale}: CAN 6/6 − Baseline {d66:+.2f}, CAN − Balanced {d122:+.2f} "
                f"({len(scores['can-6-6'])}, {len(scores['baseline'])}, {len(scores['can'])}, {len(scores['balanced'])} seeds)")
    return [table4, Claim(name, "quality", paper, f"{diff:+.2f} ± {K_SPREAD * se:.2f} ({K_SPREAD:g} s.e.)", criterion,
                          evidence, verdict)]


# -- the answer ------------------------------------------------------------------------------------

CLOSE_MARGIN = 0.5  # "on par": the scorecard's criterion for CAN against Balanced (ΔBLEU >= -0.5)


@dataclass(frozen=True)
class Gap:
    """CAN minus its reference over seeds (``diff`` ± ``se``), and its change against the gap it is compared
    with (``change`` ± ``change_se``; NaN where there is none)."""

    diff: float
    se: float
    change: float = math.nan
    change_se: float = math.nan

    def verdict(self) -> str:
        """What this gap says about the explanation, by the scorecard's rule (2 standard errors)."""
        k = 2.0
        if self.diff - k * self.se >= -CLOSE_MARGIN:
            return "closes the gap"
        if math.isnan(self.change):
            return "leaves the gap open"
        if self.change - k * self.change_se > 0:
            return "narrows the gap"
        if self.change + k * self.change_se < 0:
            return "widens the gap"
        return "leaves the gap unchanged within noise"


def gap(a: list[float], b: list[float], a0: list[float] | None = None, b0: list[float] | None = None) -> Gap | None:
    """mean(a) - mean(b) with its standard error, and its change against mean(a0) - mean(b0); None with fewer
    than two seeds of any of them (no spread, no verdict)."""
    from canlib.studies.scorecard import MIN_SEEDS, seed_difference

    if any(v is not None and len(v) < MIN_SEEDS for v in (a, b, a0, b0)) or not a or not b:
        return None
    diff, se = seed_difference(a, b)
    if a0 is None or b0 is None:
        return Gap(diff, se)
    diff0, se0 = seed_difference(a0, b0)
    return Gap(diff, se, diff - diff0, math.hypot(se, se0))


def answer(scale: str, sums: dict[str, tuple[dict[str, Any], dict[str, Any]]], refs: dict[str, list[float]],
           metric: str = "tok_bleu") -> dict[str, Any]:
    """The gaps each study measures (full-budget runs only), each against the main plan's CAN - Balanced:
    {"main": Gap, "budget": {factor: Gap}, "distill": Gap, "can-6-6": Gap (CAN 6/6 - Baseline, its change
    against CAN - Balanced)}; a Gap is None where fewer than two seeds are stored."""
    can, bal = refs.get("can"), refs.get("balanced")
    out: dict[str, Any] = {"main": gap(can, bal)}
    budget_rows = scores_by(_full(sums["budget"][0]["runs"]), lambda r: (r["system"], r["factor"]), metric)
    out["budget"] = {f: gap(budget_rows.get(("can", f), []), budget_rows.get(("balanced", f), []), can, bal)
                     for f in sums["budget"][0]["factors"]}
    kd = scores_by(_full([r for r in sums["distill"][0]["runs"] if r["tag"] == "kd"]), lambda r: r["system"], metric)
    out["distill"] = gap(kd.get("can", []), kd.get("balanced", []), can, bal)
    c66 = scores_by(_full(sums["can-6-6"][0]["runs"]), lambda r: r["system"], metric).get("can-6-6", [])
    out["can-6-6"] = gap(c66, refs.get("baseline", []), can, bal)
    return out
