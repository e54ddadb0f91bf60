"""The one process pool that trains every run, how many runs share one GPU, and which to start before a time limit.

Training a ``small-*`` model is launch-bound: one process keeps one CPU core busy launching kernels and uses a
few percent of the card's arithmetic, so the card is filled by running several processes at once. The rule
(:func:`device_jobs`): one process per CPU core (each is bound by its core), at most as many as the card's memory
holds at ``RUN_GIB`` each, never more than there are runs. Workers are spawned, not forked (CUDA is not
fork-safe); with one job the runs train in this process, one after another.

The queue (:func:`run_queue`) starts runs in the order given, which is the order of their value (seed 1 of every
system first, see :func:`repro.experiments.run.plan`), except that a run waits for the run it needs (a student
for its teacher, a fine-tune for the model it starts from). With a time limit, a run is started only when it can
finish in the time left, judged by the longest run finished so far (the first ``jobs`` runs start at once: nothing
is known yet, and they are the most valuable). A run that is stopped anyway (the caller's ``timeout``) leaves its
checkpoints, and the next call resumes it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

import torch

from repro.experiments.evaluate import evaluate
from repro.experiments.run import Run, trained
from repro.experiments.train import stacked_trainer, trainer

# GPU memory one small-* training process needs at 8,192 tokens: the peak a small-* run stored at 4,096 tokens
# (``peak_memory_gib`` of book/results/gpu/<run>/training_small.json) doubled for twice the tokens, plus about
# 1 GiB of CUDA context per process, rounded up (tests/repro/test_concurrency.py reads the stored peaks)
RUN_GIB = 4.5
MEMORY_SHARE = 0.9  # of the card's memory, for the processes together


def device_jobs(runs: int, device: str, cores: int | None = None, memory_gib: float | None = None) -> int:
    """Concurrent training processes for ``runs`` runs on ``device`` (see the module docstring); 1 on a CPU.
    ``cores`` and ``memory_gib`` default to this machine's CPU cores and the first GPU's memory."""
    if device != "cuda" or runs <= 1:
        return 1
    cores = cores or os.cpu_count() or 1
    if memory_gib is None:
        memory_gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    by_memory = int(MEMORY_SHARE * memory_gib // RUN_GIB)
    return max(1, min(runs, cores, by_memory))


class Deadline:
    """A time limit for starting runs: ``may_start()`` is True while the time left covers the longest run
    recorded so far (always True without a limit, and before any run has been recorded)."""

    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        if seconds is not None and seconds <= 0:
            raise ValueError(f"time limit {seconds} s: must be positive")
        self.seconds, self.clock = seconds, clock
        self.start = clock()
        self.longest: float | None = None

    def record(self, seconds: float) -> None:
        self.longest = seconds if self.longest is None else max(self.longest, seconds)

    def may_start(self) -> bool:
        return self.seconds is None or self.longest is None or self.clock() - self.start + self.longest <= self.seconds


def run_queue(
    items: Sequence[Any],
    task: Callable[[Any], Any],
    jobs: int,
    deadline: Deadline,
    on_done: Callable[[Any, Future], None],
    on_idle: Callable[[int, int], None] | None = None,
    status_every: float = 60.0,
    needs: Callable[[Any], Any] = lambda item: None,
    pool: Executor | None = None,
) -> list[Any]:
    """Run ``task(item)`` for each of ``items`` in order, at most ``jobs`` at a time, in ``pool`` (None: here, one
    after another); an item whose ``needs(item)`` is another item of the queue starts only after that one
    succeeded, and fails with it. Call ``on_done(item, future)`` as each finishes and ``on_idle(finished, pending)``
    every ``status_every`` seconds without one. Returns the items not started because the deadline said they could
    not finish."""
    queue = list(items)
    pending: dict[Future, tuple[Any, float]] = {}
    done_ok: set[int] = set()
    failed: set[int] = set()
    finished = 0

    def ready(item: Any) -> bool:
        need = needs(item)
        return need is None or not any(need is q for q in items) or id(need) in done_ok

    while True:
        for item in [q for q in queue if needs(q) is not None and id(needs(q)) in failed]:
            queue.remove(item)
            failed.add(id(item))
            future: Future = Future()
            future.set_exception(RuntimeError("the run it needs failed"))
            finished += 1
            on_done(item, future)
        # the first wave starts unconditionally (nothing is measured yet); later items when they fit
        while len(pending) < jobs and deadline.may_start():
            item = next((q for q in queue if ready(q)), None)
            if item is None:
                break
            queue.remove(item)
            started = deadline.clock()
            if pool is not None:
                future = pool.submit(task, item)
            else:  # here, at once: the task's own frame is the next on the stack
                future = Future()
                try:
                    future.set_result(task(item))
                except Exception as exc:  # noqa: BLE001 - handed to on_done through the future
                    future.set_exception(exc)
            pending[future] = (item, started)
        if not pending:
            return queue
        done, _ = wait(list(pending), timeout=status_every, return_when=FIRST_COMPLETED)
        for future in done:
            item, started = pending.pop(future)
            deadline.record(deadline.clock() - started)
            (failed if future.exception() is not None else done_ok).add(id(item))
            finished += 1
            on_done(item, future)
        if not done and on_idle is not None:
            on_idle(finished, len(pending) + len(queue))


@dataclass(frozen=True)
class Job:
    """One task of the pool: a run, and whether to evaluate and store it (False: a parent or a run an analysis
    reads, whose result is stored but whose weights this machine lacks, or a run an analysis trains for its own
    use: trained for its weights only)."""

    run: Run
    store: bool = True


def train_and_store(job: Job) -> str:
    """One task of the pool: train ``job.run`` (or resume it from its checkpoints) unless its training finished,
    then evaluate and store it unless only its weights are wanted; what its progress line says of it."""
    run = job.run
    if not (run.folder / "result.json").is_file():
        trainer(run).fit()
    if not job.store:
        return f"trained for its weights only ({trained(run).result.get('wall_s')} s on {run.device})"
    result, prov = evaluate(run)
    return (
        f"test sacreBLEU {result['scores']['test']['bleu']:.2f}, valid {result['scores']['valid']['bleu']:.2f}, "
        f"{result['training'].get('wall_s')} s of training ({prov['device']})"
    )


def stack_key(run: Run) -> tuple[Any, ...] | None:
    """What seeds must share to train as one stacked model (everything but the seed), or None when ``run`` cannot
    stack: trained already, started from or taught by another run, scored on validation BLEU while it trains, or
    a recipe with torch's dropout generator or a stop other than ``max_steps``."""
    b, v = run.budget, run.variant
    if (run.folder / "result.json").is_file() or v.parent is not None or v.valid_bleu:
        return None
    if b.get("dropout_rng") != "counter-hash" or not b.get("max_steps") or b.get("max_epochs") or b.get("patience"):
        return None
    rest = sorted((k, repr(value)) for k, value in b.items() if k != "seed")
    return (run.preset, run.corpus, run.device, run.precision, v.decoder, v.targets, tuple(rest))


def stack_groups(runs: Sequence[Run]) -> list[list[Run]]:
    """The runs that train as stacked models: the runs of each :func:`stack_key`, in queue order, where there are at
    least two (a lone seed trains as a separate run, the same thing)."""
    groups: dict[tuple[Any, ...], list[Run]] = {}
    for r in runs:
        key = stack_key(r)
        if key is not None and r.folder not in {g.folder for g in groups.get(key, [])}:
            groups.setdefault(key, []).append(r)
    return [g for g in groups.values() if len(g) > 1]


def train_stacked(runs: Sequence[Run], say: Callable[[str], None]) -> None:
    """Train the stackable seeds of ``runs`` (:func:`stack_groups`) one stack after another in this process; a stack
    that fails is said, and its seeds are left to the pool, which trains them one by one."""
    for group in stack_groups(runs):
        seeds = ",".join(str(r.seed) for r in group)
        name = group[0].label.rsplit(" seed ", 1)[0]
        tic = time.monotonic()
        try:
            stacked_trainer(group).fit()
        except Exception as exc:  # noqa: BLE001 - the pool retries each seed on its own
            say(f"stacked {name} seeds {seeds}: FAILED ({type(exc).__name__}: {exc}); they train one by one")
            continue
        say(f"stacked {name} seeds {seeds}: trained as one model in {time.monotonic() - tic:.0f} s")
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # the stack's memory back to the card, for the pool's processes


def needs_of(queue: Sequence[Job]) -> Callable[[Job], Job | None]:
    """What a queued job waits for: an earlier job of the queue training the same folder (two processes must never
    train one folder: the distillation teacher's row is the main run itself), else the job training its parent's
    folder (a student's teacher, a fine-tune's starting model); None when neither is queued."""
    folders = [q.run.folder for q in queue]

    def needs(job: Job) -> Job | None:
        here = next(i for i, q in enumerate(queue) if q is job)
        if folders[here] in folders[:here]:
            return queue[folders.index(folders[here])]
        parent = job.run.variant.parent
        return queue[folders.index(parent.folder)] if parent is not None and parent.folder in folders else None

    return needs


@dataclass
class Outcome:
    """What one call of :func:`train_all` did: runs stored, failures (named), runs the deadline left for later."""

    stored: list[Run] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[Run] = field(default_factory=list)
    seconds: float = 0.0


def train_all(
    runs: Sequence[Run],
    *,
    jobs: int = 1,
    time_limit: float | None = None,
    status_every: float = 60.0,
    log: Callable[[str], None] | None = print,
    train_only: Sequence[Run] = (),
    stack: bool = False,
) -> Outcome:
    """Train, evaluate and store ``runs`` with ``jobs`` processes, and before them train the runs of ``train_only``
    for their weights alone (a teacher whose result is stored but whose weights this machine lacks, the conversion
    study's fine-tunes). A run waits for the run it needs when both are queued; a failed run does not stop the
    others and is named in the outcome; ``log`` gets one line per finished run and a status line every
    ``status_every`` seconds. ``stack``: first train the seeds that stack as stacked models
    (:func:`train_stacked`), which the pool then evaluates and stores."""
    queue = [*(Job(r, store=False) for r in train_only), *(Job(r) for r in runs)]
    total, outcome, deadline = len(queue), Outcome(), Deadline(time_limit)
    say = log or (lambda line: None)
    if stack:
        train_stacked([job.run for job in queue], say)

    def done(job: Job, future: Future) -> None:
        run, count = job.run, len(outcome.stored) + len(outcome.failed) + 1
        if (exc := future.exception()) is not None:
            outcome.failed.append(f"{run.name}: {type(exc).__name__}: {exc}")
            say(f"[{count}/{total}] {run.label} FAILED: {exc}")
            return
        outcome.stored.append(run)
        say(f"[{count}/{total}] {run.label}: {future.result()}")

    def idle(count: int, waiting: int) -> None:
        say(
            f"status: {count}/{total} runs finished after {deadline.clock() - deadline.start:.0f} s, "
            f"{waiting} in progress or queued"
        )

    threads = max(1, (os.cpu_count() or 1) // jobs)  # each spawned worker's share, so runs do not oversubscribe
    spawn = dict(mp_context=get_context("spawn"), initializer=torch.set_num_threads, initargs=(threads,))
    pool = ProcessPoolExecutor(jobs, **spawn) if jobs > 1 else None  # one job: the runs train here, in turn
    with pool or nullcontext():
        left = run_queue(queue, train_and_store, jobs, deadline, done, idle, status_every, needs_of(queue), pool)
    outcome.skipped = [job.run for job in left]
    outcome.seconds = deadline.clock() - deadline.start
    return outcome


def summary_line(finished: int, seconds: float, skipped: Sequence[Any]) -> str:
    """What a call trained, at the throughput ``gpu_small.sh`` ends with, and what it left for the next call."""
    rate = finished / (seconds / 60) if seconds > 0 else float("nan")
    text = f"trained {finished} run(s) in {seconds:.0f} s: {rate:.2f} runs per minute"
    if skipped:
        text += f"; {len(skipped)} not started (they could not finish in the time left; the next call trains them)"
    return text
