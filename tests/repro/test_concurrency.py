"""Concurrency that fills the card: how many runs share a GPU, and which runs a time limit leaves for the next call."""

from __future__ import annotations

import pytest

from repro.experiments import cli, pool
from repro.experiments.pool import Deadline, Job, device_jobs, needs_of, run_queue, train_all
from repro.experiments.run import Variant, run
from repro.results.layout import Where

TINY = Where.of("tiny", reduced=4)


def test_jobs_are_one_per_core_as_memory_allows_and_one_on_a_cpu():
    # the rule written out: min(runs, cores, floor(0.9 x memory / 4.5 GiB)), at least 1
    assert device_jobs(53, "cuda", cores=16, memory_gib=80) == 16  # 0.9 x 80 / 4.5 = 16
    assert device_jobs(53, "cuda", cores=16, memory_gib=24) == 4  # 21.6 / 4.5 = 4.8
    assert device_jobs(53, "cuda", cores=8, memory_gib=141) == 8
    assert device_jobs(3, "cuda", cores=16, memory_gib=80) == 3
    assert device_jobs(53, "cuda", cores=16, memory_gib=2) == 1
    assert device_jobs(53, "cpu", cores=16, memory_gib=80) == 1


class FakeTime:
    """A clock that a task moves forward by its duration when it runs."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def run(self, seconds: float) -> float:
        self.now += seconds
        return seconds


def test_a_run_that_cannot_finish_in_the_time_left_is_not_started():
    clock = FakeTime()
    done: list[float] = []
    # limit 10 s, runs of 4 s one at a time: 4 and 8 s finish; at 8 s, 2 s are left < 4 s, so the rest wait
    left = run_queue([4.0, 4.0, 4.0, 4.0], clock.run, 1, Deadline(10, clock), lambda item, f: done.append(f.result()))
    assert done == [4.0, 4.0] and left == [4.0, 4.0] and clock.now == 8.0


def test_the_longest_finished_run_is_the_estimate_and_no_limit_runs_everything():
    clock = FakeTime()
    left = run_queue([1.0, 6.0, 1.0, 1.0, 1.0], clock.run, 1, Deadline(13, clock), lambda *a: None)
    assert left == [1.0, 1.0] and clock.now == 8.0  # at 8 s, 5 s left < the 6 s run (the last run took 1 s)
    clock = FakeTime()
    assert run_queue([5.0] * 6, clock.run, 2, Deadline(None, clock), lambda *a: None) == [] and clock.now == 30.0


def test_the_first_wave_starts_whatever_the_limit():
    clock = FakeTime()
    started: list[float] = []
    left = run_queue(
        [3.0, 2.0, 7.0], lambda s: (started.append(s), clock.run(s))[1], 2, Deadline(1, clock), lambda *a: None
    )
    assert started == [3.0, 2.0] and left == [7.0]


def test_a_time_limit_must_be_positive():
    with pytest.raises(ValueError, match="time limit 0 s: must be positive"):
        Deadline(0)


def test_experiment_reports_runs_per_minute_and_leaves_what_does_not_fit(monkeypatch, capsys):
    calls: list[str] = []

    def fake(job: Job):
        calls.append(job.run.name)
        return "test sacreBLEU 1.00, valid 2.00, 0.0 s of training (cpu)"

    monkeypatch.setattr(pool, "train_and_store", fake)
    runs = [run("can", TINY, seed) for seed in (1, 2, 3)]
    outcome = train_all(runs, jobs=1)
    assert len(calls) == 3 and len(outcome.stored) == 3 and not outcome.skipped
    assert pool.summary_line(3, 180, []) == "trained 3 run(s) in 180 s: 1.00 runs per minute"
    calls.clear()
    outcome = train_all(runs, jobs=1, time_limit=1e-9)  # the first run uses up the time: the rest wait
    assert calls == ["runs/multi30k-en-de/can-seed1"] and outcome.skipped == runs[1:]
    assert "2 not started" in pool.summary_line(1, 1.0, outcome.skipped)
    assert pool.summary_line(18, 470, []).endswith(": 2.30 runs per minute")  # 18 / (470 / 60) = 2.298
    assert pool.summary_line(0, 0.0, []).endswith(": nan runs per minute")


def test_a_student_waits_for_its_teacher_and_fails_with_it(monkeypatch):
    """A run that needs another queued run (a distilled student, its teacher) starts only after it, even where the
    student comes first in the queue; a run training the same folder waits too; a failed teacher fails its students."""
    order: list[str] = []
    teacher = run("balanced", TINY, 1)
    row = run("balanced", TINY, 1, variant=Variant("distill", "teacher"))  # the same folder as teacher
    student = run("can", TINY, 1, variant=Variant("distill", "kd", targets="distilled", parent=teacher))
    assert row.folder == teacher.folder and student.folder != teacher.folder

    def fake(job: Job):
        order.append(job.run.name)
        if job.run is teacher and broken:
            raise ValueError("diverged")
        return "test sacreBLEU 1.00, valid 2.00, 0.0 s of training (cpu)"

    monkeypatch.setattr(pool, "train_and_store", fake)
    broken = False
    outcome = train_all([student, teacher, row], jobs=1)
    assert order == [teacher.name, student.name, row.name] and not outcome.failed
    order.clear()
    broken = True
    outcome = train_all([student, teacher], jobs=1)
    assert order == [teacher.name] and len(outcome.failed) == 2 and "the run it needs failed" in outcome.failed[1]


def test_the_time_limit_is_the_flag_else_the_seconds_to_canlib_deadline(monkeypatch):
    import time

    assert cli.time_limit(5.0, str(time.time() + 1000)) == 5.0
    assert 990 < cli.time_limit(None, str(time.time() + 1000)) <= 1000
    assert cli.time_limit(None, str(time.time() - 50)) == 1e-6  # past: the first runs still start, no others
    monkeypatch.delenv("CANLIB_DEADLINE", raising=False)
    assert cli.time_limit(None) is None
    monkeypatch.setenv("CANLIB_DEADLINE", "soon")
    with pytest.raises(ValueError, match="CANLIB_DEADLINE='soon': not a UNIX time"):
        cli.time_limit(None)


def test_two_processes_never_train_one_folder_and_a_student_never_starts_before_its_teacher():
    """With two jobs the queue [student, teacher, teacher's own row] starts the teacher alone: the row trains the
    same folder and the student reads the teacher's weights, so both wait for it to finish."""
    teacher = run("balanced", TINY, 1)
    row = run("balanced", TINY, 1, variant=Variant("distill", "teacher"))
    student = run("can", TINY, 1, variant=Variant("distill", "kd", targets="distilled", parent=teacher))
    other = run("san", TINY, 1)
    queue = [Job(student), Job(teacher), Job(row), Job(other)]
    clock, started = FakeTime(), []
    run_queue(
        queue,
        lambda job: (started.append(job.run), clock.run(1.0))[1],
        2,
        Deadline(None, clock),
        lambda *a: None,
        needs=needs_of(queue),
    )
    assert started[:2] == [teacher, other] and set(started[2:]) == {student, row}


def test_the_memory_a_run_is_given_covers_twice_the_stored_peak_and_a_cuda_context():
    """RUN_GIB (a small-* run at 8,192 tokens) is at least twice the peak every stored small-* training measurement
    recorded at 4,096 tokens, plus 1 GiB of CUDA context, and within half a GiB of it (rounded up, not padded)."""
    import json
    from pathlib import Path

    stored = sorted((Path(__file__).resolve().parents[2] / "book" / "results" / "gpu").glob("*/training_small.json"))
    peaks = []
    for path in stored:
        result = json.loads(path.read_text())["result"]
        assert result["max_tokens"] == 4096, path
        peaks += [r["peak_memory_gib"] for r in result["runs"].values()]
    assert peaks, "no stored small-* training measurement"
    need = 2 * max(peaks) + 1
    assert need <= pool.RUN_GIB < need + 0.5
