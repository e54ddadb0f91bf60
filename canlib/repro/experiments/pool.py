"""The one process pool that trains every run, how many runs share one GPU, and which to start before a time limit.

Training a ``small-*`` model is launch-bound: one process keeps one CPU core busy launching kernels and uses a
few percent of the card's arithmetic, so the card is filled by running several processes at once. The rule
(:func:`device_jobs`): one process per CPU core (each is bound by its core), at most as many as the card's memory
holds at ``RUN_GIB`` each, never more than there are runs. Workers are spawned, not forked (CUDA is not
fork-safe); with one job the runs train in this process, one after another.

The queue (:func:`run_queue`) starts runs in the order given, which is the order of their value (seed 1 of every
system first, see :func:`canlib.repro.experiments.run.plan`), except that a run waits for the run it needs (a student
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
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch

from canlib.repro.experiments.evaluate import evaluate
from canlib.repro.experiments.run import Run
from canlib.repro.experiments.train import train

# GPU memory one small-* training process needs at 8,192 tokens: the 1.6 GiB peak measured at 4,096 tokens on
# an H200 (book/results/gpu/h200-2026-11-26/training_small.json) doubled for twice the tokens, plus about 1 GiB
# of CUDA context per process, rounded up
RUN_GIB = 4.5
MEMORY_SHARE = 0.9  # of the card's memory, for the processes together


def device_jobs(
    runs: int, device: str, cores: int | None = None, memory_gib: float | None = None, run_gib: float = RUN_GIB
) -> int:
    """Concurrent training processes for ``runs`` runs on ``device`` (see the module docstring); 1 on a CPU.
    ``cores`` and ``memory_gib`` default to this machine's CPU cores and the first GPU's memory."""
    if device != "cuda" or runs <= 1:
        return 1
    cores = cores or os.cpu_count() or 1
    if memory_gib is None:
        memory_gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    by_memory = int(MEMORY_SHARE * memory_gib // run_gib)
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

    def left(self) -> float:
        return float("inf") if self.seconds is None else self.seconds - (self.clock() - self.start)

    def record(self, seconds: float) -> None:
        self.longest = seconds if self.longest is None else max(self.longest, seconds)

    def may_start(self) -> bool:
        return self.seconds is None or self.longest is None or self.left() >= self.longest


def run_queue(
    items: Sequence[Any],
    submit: Callable[[Any], Future],
    jobs: int,
    deadline: Deadline,
    on_done: Callable[[Any, Future], None],
    on_idle: Callable[[int, int], None] | None = None,
    status_every: float = 60.0,
    needs: Callable[[Any], Any] = lambda item: None,
) -> list[Any]:
    """Run ``items`` in order, at most ``jobs`` at a time, through ``submit`` (which returns a Future); an item
    whose ``needs(item)`` is another item of the queue starts only after that one succeeded, and fails with it.
    Call ``on_done(item, future)`` as each finishes and ``on_idle(finished, pending)`` every ``status_every``
    seconds without one. Returns the items not started because the deadline said they could not finish."""
    queue = list(items)
    pending: dict[Future, tuple[Any, float]] = {}
    done_ok: set[int] = set()
    failed: set[int] = set()
    finished = 0

    def ready(item: Any) -> bool:
        need = needs(item)
        return need is None or not any(need is q for q in items) or id(need) in done_ok

    def fill() -> None:  # the first wave starts unconditionally (nothing is measured yet); later runs when they fit
        nonlocal finished
        for item in [q for q in queue if needs(q) is not None and id(needs(q)) in failed]:
            queue.remove(item)
            failed.add(id(item))
            future: Future = Future()
            future.set_exception(RuntimeError("the run it needs failed"))
            finished += 1
            on_done(item, future)
        while len(pending) < jobs and deadline.may_start():
            item = next((q for q in queue if ready(q)), None)
            if item is None:
                return
            queue.remove(item)
            pending[submit(item)] = (item, deadline.clock())

    fill()
    while pending:
        done, _ = wait(list(pending), timeout=status_every, return_when=FIRST_COMPLETED)
        for future in done:
            item, started = pending.pop(future)
            deadline.record(deadline.clock() - started)
            (failed if future.exception() is not None else done_ok).add(id(item))
            finished += 1
            on_done(item, future)
        if done:
            fill()
        elif on_idle is not None:
            on_idle(finished, len(pending) + len(queue))
    return queue


class InProcess(Executor):
    """An executor that runs each task at once in this process (one job: a CPU, a test, a chapter)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(exc)
        return future


def set_worker_threads(threads: int) -> None:
    """Initializer of a spawned training worker: its share of the CPU threads, so concurrent runs do not
    oversubscribe the cores."""
    torch.set_num_threads(threads)


def train_and_store(run: Run, root: Path | None, store: bool = True) -> dict[str, Any]:
    """One task of the pool: train (or resume) ``run``, then evaluate and store it (``store=False``: a parent
    whose own result is stored already, trained again only for its weights); a summary line's numbers."""
    finished = train(run)
    if not store:
        return {"trained": finished.result.get("wall_s"), "device": run.device}
    result, prov = evaluate(run, root)
    return {
        "test": result["scores"]["test"]["bleu"],
        "valid": result["scores"]["valid"]["bleu"],
        "train_s": result["training"].get("wall_s"),
        "device": prov["device"],
    }


def needs_of(queue: Sequence[Run]) -> Callable[[Run], Run | None]:
    """What a queued run waits for: an earlier run of the queue training the same folder (two processes must never
    train one folder: the distillation teacher's row is the main run itself), else the run training its parent's
    folder (a student's teacher, a fine-tune's starting model); None when neither is queued."""
    folders = [q.folder for q in queue]

    def needs(run: Run) -> Run | None:
        here = next(i for i, q in enumerate(queue) if q is run)
        if folders[here] in folders[:here]:
            return queue[folders.index(folders[here])]
        parent = run.variant.parent
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
    root: Path | None,
    *,
    jobs: int = 1,
    time_limit: float | None = None,
    status_every: float = 60.0,
    log: Callable[[str], None] | None = print,
    train_only: Sequence[Run] = (),
) -> Outcome:
    """Train, evaluate and store ``runs`` with ``jobs`` processes, and before them train the runs of ``train_only``
    for their weights alone (a teacher whose result is stored but whose weights this machine lacks, the conversion
    study's fine-tunes). A run waits for the run it needs when both are queued; a failed run does not stop the
    others and is named in the outcome; ``log`` gets one line per finished run and a status line every
    ``status_every`` seconds."""
    queue = [*train_only, *runs]
    total, outcome, deadline = len(queue), Outcome(), Deadline(time_limit)
    only_weights = {id(p) for p in train_only}
    say = log or (lambda line: None)

    def done(run: Run, future: Future) -> None:
        count = len(outcome.stored) + len(outcome.failed) + 1
        if future.exception() is not None:
            exc = future.exception()
            outcome.failed.append(f"{run.name}: {type(exc).__name__}: {exc}")
            say(f"[{count}/{total}] {run.label} FAILED: {exc}")
            return
        outcome.stored.append(run)
        s = future.result()
        if id(run) in only_weights:
            say(f"[{count}/{total}] {run.label}: trained for its weights only ({s['trained']} s on {s['device']})")
        else:
            say(
                f"[{count}/{total}] {run.label}: test sacreBLEU {s['test']:.2f}, valid {s['valid']:.2f}, "
                f"{s['train_s']} s of training ({s['device']})"
            )

    def idle(count: int, waiting: int) -> None:
        say(
            f"status: {count}/{total} runs finished after {deadline.clock() - deadline.start:.0f} s, "
            f"{waiting} in progress or queued"
        )

    if jobs <= 1:
        pool: Executor = InProcess()
    else:
        pool = ProcessPoolExecutor(
            jobs,
            mp_context=get_context("spawn"),
            initializer=set_worker_threads,
            initargs=(max(1, (os.cpu_count() or 1) // jobs),),
        )
    with pool:
        outcome.skipped = run_queue(
            queue,
            lambda r: pool.submit(train_and_store, r, root, id(r) not in only_weights),
            jobs,
            deadline,
            done,
            idle,
            status_every,
            needs_of(queue),
        )
    outcome.seconds = deadline.clock() - deadline.start
    return outcome


def runs_per_minute(finished: int, seconds: float) -> float:
    """The throughput line ``gpu_small.sh`` ends with."""
    return finished / (seconds / 60) if seconds > 0 else float("nan")


def summary_line(finished: int, seconds: float, skipped: Sequence[Any]) -> str:
    text = f"trained {finished} run(s) in {seconds:.0f} s: {runs_per_minute(finished, seconds):.2f} runs per minute"
    if skipped:
        text += f"; {len(skipped)} not started (they could not finish in the time left; the next call trains them)"
    return text
