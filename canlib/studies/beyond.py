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
# Each study is read from its stored models (through :mod:`canlib.studies.evidence`), as soon as they are
# stored: the budget study's x2 models count before its summary exists. Every verdict is the rule of
# :mod:`canlib.studies.verdict` on the four evaluation sets.

CLOSE_MARGIN = 0.5  # "on par": the scorecard's criterion for CAN against Balanced (ΔBLEU >= -0.5)


@dataclass(frozen=True)
class Stored:
    """The stored runs a study compares (each None where not stored): the main plan's (``main``), the distilled
    students (``kd``), CAN on 6/6 (``can66``), each budget factor's Balanced and CAN (``budget``, 1x = main)."""

    main: dict[str, Any]
    kd: dict[str, Any]
    can66: Any
    budget: dict[int, dict[str, Any]]

    def shown(self) -> dict[str, bool]:
        """Which study has its own models stored with at least two seeds of every system it compares."""
        from canlib.studies.verdict import MIN_SEEDS

        def enough(*runs: Any) -> bool:
            return all(r is not None and len(r.seeds) >= MIN_SEEDS for r in runs)

        main = enough(self.main.get("balanced"), self.main.get("can"))
        return {"budget": main and any(enough(*b.values()) for f, b in self.budget.items() if f > 1),
                "distill": main and enough(self.kd.get("balanced"), self.kd.get("can")),
                "can-6-6": main and enough(self.can66, self.main.get("baseline"))}


def stored(scale: str, root: Path | None = None) -> Stored:
    """Every stored run the chapter compares, at a scale whose models are judged (small/full)."""
    from canlib.studies import evidence as ev

    main = {s: ev.main_runs(scale, s, root=root) for s in ("baseline", *STUDENTS)}
    kd = {s: ev.study_runs(scale, "distill", s, "kd", root, label=f"{s} distilled") for s in STUDENTS}
    can66 = ev.study_runs(scale, "can-6-6", "can-6-6", root=root, label="can-6-6")
    budget = {f: {s: ev.budget_runs(scale, s, f, root) for s in BUDGET_SYSTEMS} for f in ev.budget_factors(scale, root)}
    return Stored(main, kd, can66, budget)


def default_scale(root: Path | None = None) -> str:
    """"small" once any study's own models (and the main runs it compares with) are stored at small, else
    "tiny", where the chapter shows what each study does and its command, not numbers."""
    return "small" if any(stored("small", root).shown().values()) else "tiny"


def contrasts(s: Stored) -> dict[str, tuple[list[tuple[float, Any]], Callable[[float], bool]]]:
    """The contrasts the chapter judges, each as (terms, criterion), where its runs are stored."""
    m, kd = s.main, s.kd
    gap = [(1.0, m["can"]), (-1.0, m["balanced"])]
    out = {"main": (gap, lambda d: d >= -CLOSE_MARGIN)}
    for f, runs in s.budget.items():
        if f == 1:
            continue
        at = [(1.0, runs["can"]), (-1.0, runs["balanced"])]
        out[f"budget_x{f}"] = (at, lambda d: d >= -CLOSE_MARGIN)
        out[f"budget_x{f}_change"] = (at + [(-w, r) for w, r in gap], lambda d: d > 0)
        for system in BUDGET_SYSTEMS:
            out[f"budget_x{f}_gain_{system}"] = ([(1.0, runs[system]), (-1.0, s.budget[1][system])], lambda d: d > 0)
    distilled = [(1.0, kd["can"]), (-1.0, kd["balanced"])]
    out["kd"] = (distilled, lambda d: d >= -CLOSE_MARGIN)
    out["kd_change"] = (distilled + [(-w, r) for w, r in gap], lambda d: d > 0)
    for system in STUDENTS:
        out[f"kd_gain_{system}"] = ([(1.0, kd[system]), (-1.0, m[system])], lambda d: d > 0)
    six = [(1.0, s.can66), (-1.0, m["baseline"])]
    out["can66"] = (six, lambda d: d >= -CLOSE_MARGIN)
    out["can66_change"] = (six + [(-w, r) for w, r in gap], lambda d: d > 0)
    return {k: v for k, v in out.items() if all(r is not None for _, r in v[0])}


def judgements(scale: str, root: Path | None = None, refs: dict[str, list[str]] | None = None,
               s: Stored | None = None) -> dict[str, Any]:
    """{contrast: Judgement (None with fewer than two seeds)} of :func:`contrasts` (``refs``: each evaluation
    set's references for the test-set intervals; read from the corpus when not given)."""
    from canlib.studies.evidence import references
    from canlib.studies.verdict import judge

    s = s or stored(scale, root)
    refs = references(scale) if refs is None else refs
    return {k: judge(terms, ok, refs) for k, (terms, ok) in contrasts(s).items()}


def contrast_table(judged: dict[str, Any], columns: dict[str, str]):
    """One row per evaluation set, one column per contrast (``columns``: {contrast: heading}): the contrast
    ± its seed interval (tokenized BLEU), the test-set interval and the set's verdict."""
    import pandas as pd

    from canlib.studies.verdict import split_name

    rows = {}
    for name, heading in columns.items():
        j = judged.get(name)
        if j is None:
            continue
        for on in j.sets:
            row = rows.setdefault(split_name(on.split), {})
            test = f" [{on.test_set.low:+.2f}, {on.test_set.high:+.2f}]" if on.test_set else ""
            row[heading] = f"{on.value:+.2f} ± {on.half_width:.2f}{test}: {on.verdict}"
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "evaluation set"
    return frame


def curves(scale: str, factor: int, root: Path | None = None) -> dict[str, dict[str, list[float]]]:
    """{system: {"step", "valid_loss", "valid_bleu"}} of the budget study's ``factor``x models, each validation
    point averaged over seeds (greedy valid sacreBLEU and the label-smoothed validation loss, from their logs)."""
    from canlib.studies import evidence as ev

    out = {}
    for system in BUDGET_SYSTEMS:
        runs = ev.budget_runs(scale, system, factor, root)
        if runs is None:
            continue
        by_step: dict[int, list[dict[str, Any]]] = {}
        for file in runs.files:
            log = ev.stored_log(scale, file, root)
            for point in log:
                if point.get("kind") == "valid":
                    by_step.setdefault(point["step"], []).append(point)
        steps = sorted(by_step)
        out[system] = {"step": steps, **{m: [statistics.fmean(p[m] for p in by_step[k]) for k in steps]
                                         for m in ("valid_loss", "valid_bleu")}}
    return out


def budget_figure(scale: str, factor: int = 2, root: Path | None = None, averaged: Sequence[int] = ()):
    """Left: greedy validation sacreBLEU of Balanced and CAN against updates (the ``factor``x models, mean over
    seeds); middle: their validation losses; right: CAN - Balanced validation loss in the paper's Fig. 8.
    ``averaged``: the updates whose checkpoints a 1x model averages, marked."""
    import matplotlib.pyplot as plt

    from canlib.studies.paper import paper_numbers

    c = curves(scale, factor, root)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for system, colour in (("balanced", "tab:red"), ("can", "tab:blue")):
        if system in c:
            label = f"{'Balanced' if system == 'balanced' else 'CAN'} ({factor}x)"
            axes[0].plot(c[system]["step"], c[system]["valid_bleu"], "o-", color=colour, label=label)
            axes[1].plot(c[system]["step"], c[system]["valid_loss"], "o-", color=colour, label=label)
    for ax in axes[:2]:
        for step in averaged:
            ax.axvline(step, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("updates")
        ax.legend(fontsize=8)
    axes[0].set(ylabel="valid sacreBLEU (greedy)", title=f"ours ({scale})")
    axes[1].set(ylabel="valid loss (label-smoothed)", title=f"ours ({scale})")
    f8 = paper_numbers()["fig8_curves_en-de"]
    axes[2].plot(f8["epochs"], [a - b for a, b in zip(f8["valid"]["CAN"], f8["valid"]["Balanced"])], "s-", color="black")
    axes[2].axhline(0, color="grey", lw=0.8)
    axes[2].set(xlabel="epoch", ylabel="valid loss: CAN − Balanced", title="paper, Fig. 8 (WMT14 En-De)")
    fig.tight_layout()
    return fig


# -- the scorecard's rows --------------------------------------------------------------------------

def claims(scale: str, root: Path | None = None, refs: dict[str, list[str]] | None = None,
           s: Stored | None = None) -> list:
    """The scorecard rows of these studies: Table 4 (with distillation CAN is on par with Balanced) and "CAN on
    6/6 hurts less than on 12/2", judged by the verdict rule on the four evaluation sets."""
    from canlib.studies.evidence import references
    from canlib.studies.paper import paper_numbers
    from canlib.studies.scorecard import QUALITY_SCALES, quality_claim

    t4 = paper_numbers()["table4_kd_en-de"]
    judged = scale in QUALITY_SCALES
    s = s or (stored(scale, root) if judged else Stored({}, {}, None, {}))
    refs = (references(scale) if refs is None else refs) if judged else None

    def command(study_name: str) -> str | None:
        return f"python -m canlib experiment --scale {scale} --studies {study_name}" if judged else None

    table4 = quality_claim("With distillation CAN is on par with Balanced (Table 4)",
                           f"{t4['CAN'][1] - t4['Balanced'][1]:+.2f} (Table 4, both distilled)", f"ΔBLEU >= -{CLOSE_MARGIN}",
                           lambda d: d >= -CLOSE_MARGIN, scale,
                           [(1.0, "CAN distilled", s.kd.get("can")), (-1.0, "Balanced distilled", s.kd.get("balanced"))],
                           refs, command=command("distill"))
    six = quality_claim("CAN on 6/6 hurts less than on 12/2 (Results)",
                        f"{PAPER_CAN_ON['6/6']:+.2f} vs {PAPER_CAN_ON['12/2']:+.2f} on average (Results)",
                        "(CAN 6/6 − Baseline) − (CAN − Balanced) > 0", lambda d: d > 0, scale,
                        [(1.0, "CAN 6/6", s.can66), (-1.0, "Baseline", s.main.get("baseline")),
                         (-1.0, "CAN", s.main.get("can")), (1.0, "Balanced", s.main.get("balanced"))],
                        refs, command=command("can-6-6"))
    return [replace(c, chapter="beyond") for c in (table4, six)]
