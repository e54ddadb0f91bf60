"""How many training runs share one GPU, and which runs of the queue to start before a time limit.

Training a ``small-*`` model is launch-bound: one process keeps one CPU core busy launching kernels and uses a
few percent of the card's arithmetic, so the card is filled by running several processes at once. The rule
(:func:`device_jobs`): one process per CPU core (each is bound by its core), at most as many as the card's memory
holds at ``RUN_GIB`` each, never more than there are runs.

The queue (:func:`run_queue`) starts runs in the plan's order, which is the order of their value (seed 1 of every
system first, see ``canlib.studies.runs.plan``). With a time limit, a run is started only when it can finish in
the time left, judged by the longest run finished so far (the first ``jobs`` runs start at once: nothing is known
yet, and they are the most valuable). A run that is stopped anyway (the caller's ``timeout``) leaves its
checkpoints, and the next call resumes it.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, TypeVar

T = TypeVar("T")

# GPU memory one small-* training process needs at 8,192 tokens: the 1.6 GiB peak measured at 4,096 tokens on
# an H200 (book/results/gpu/h200-2026-11-26/training_small.json) doubled for twice the tokens, plus about 1 GiB
# of CUDA context per process, rounded up
RUN_GIB = 4.5
MEMORY_SHARE = 0.9  # of the card's memory, for the processes together


def device_jobs(runs: int, device: str, cores: int | None = None, memory_gib: float | None = None,
                run_gib: float = RUN_GIB) -> int:
    """Concurrent training processes for ``runs`` runs on ``device`` (see the module docstring); 1 on a CPU.
    ``cores`` and ``memory_gib`` default to this machine's CPU cores and the first GPU's memory."""
    if device != "cuda" or runs <= 1:
        return 1
    cores = cores or os.cpu_count() or 1
    if memory_gib is None:
        import torch

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


def run_queue(items: Sequence[T], submit: Callable[[T], Future], jobs: int, deadline: Deadline,
              on_done: Callable[[T, Future], None], on_idle: Callable[[int, int], None] | None = None,
              status_every: float = 60.0) -> list[T]:
    """Run ``items`` in order, at most ``jobs`` at a time, through ``submit`` (which returns a Future); call
    ``on_done(item, future)`` as each finishes and ``on_idle(finished, pending)`` every ``status_every``
    seconds without one. Returns the items not started because the deadline said they could not finish."""
    queue = list(items)
    pending: dict[Future, tuple[T, float]] = {}
    finished = 0

    def fill() -> None:  # the first wave starts unconditionally (nothing is measured yet); later runs when they fit
        while queue and len(pending) < jobs and deadline.may_start():
            item = queue.pop(0)
            pending[submit(item)] = (item, deadline.clock())

    fill()
    while pending:
        done, _ = wait(list(pending), timeout=status_every, return_when=FIRST_COMPLETED)
        for future in done:
            item, started = pending.pop(future)
            deadline.record(deadline.clock() - started)
            finished += 1
            on_done(item, future)
        if done:
            fill()
        elif on_idle is not None:
            on_idle(finished, len(pending) + len(queue))
    return queue


def runs_per_minute(finished: int, seconds: float) -> float:
    """The throughput line ``gpu_small.sh`` ends with."""
    return finished / (seconds / 60) if seconds > 0 else float("nan")


def summary_line(finished: int, seconds: float, skipped: Sequence[Any]) -> str:
    text = f"trained {finished} run(s) in {seconds:.0f} s: {runs_per_minute(finished, seconds):.2f} runs per minute"
    if skipped:
        text += f"; {len(skipped)} not started (they could not finish in the time left; the next call trains them)"
    return text
