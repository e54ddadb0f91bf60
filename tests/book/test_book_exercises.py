"""The book's coding exercises: each page's checker accepts the page's own solution and rejects wrong answers, and
an unwritten answer (the stub returns None) is told to write it. The checkers and solutions are read from the pages'
cells, so a test runs what a reader runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jupytext
import pytest
import torch

BOOK = Path(__file__).resolve().parents[2] / "book"


def exercise(page: str, checker: str) -> dict:
    """The namespace of ``page``'s cell that defines ``checker`` and of the solution cell after it (the first cell
    that asserts it)."""
    cells = [c.source for c in jupytext.read(BOOK / page).cells if c.cell_type == "code"]
    start = next(i for i, c in enumerate(cells) if f"def {checker}(" in c)
    solution = next(c for c in cells[start + 1 :] if f"assert {checker}(" in c)
    namespace: dict = {"__name__": "exercise", "torch": torch}  # every page imports torch before its exercises
    for source in (cells[start], solution):
        exec(compile(source, str(BOOK / page), "exec"), namespace)
    return namespace


def solved(page: str, checker: str, answer: str) -> tuple[Callable, Callable]:
    """``page``'s checker and the page's own solution of ``answer``, which the checker must accept."""
    names = exercise(page, checker)
    check, solution = names[checker], names[answer]
    assert check(solution), f"{page}: {checker} rejects the page's solution"
    return check, solution


def assert_rejects(check: Callable, wrong_answers: tuple[Callable, ...], capsys) -> None:
    """``check`` rejects each wrong answer and an unwritten one (the stub's None), which it tells to write it."""

    def unwritten(*args, **kwargs):
        return None

    for wrong in wrong_answers:
        assert not check(wrong), wrong.__name__
    capsys.readouterr()  # what the page's cells and the wrong answers printed: the stub's own message is next
    assert not check(unwritten)
    assert "write it" in capsys.readouterr().out


def test_the_gate_checker_accepts_the_solution_and_rejects_wrong_gates(capsys):
    check, solution = solved("attention.md", "check_gate", "gate")

    def prefix_softmax_only(s_x, s_h):  # each block's own softmax: the prefix always holds one unit
        return s_x.softmax(-1).sum(-1)

    def swapped(s_x, s_h):  # the source's share
        return 1 - solution(s_x, s_h)

    def by_maxima(s_x, s_h):  # the largest scores, not the log-sum-exps
        return torch.sigmoid(s_x.amax(-1) - s_h.amax(-1))

    def kept_dim(s_x, s_h):  # (B, t, 1): the right numbers in the wrong shape
        return solution(s_x, s_h)[..., None]

    assert_rejects(check, (prefix_softmax_only, swapped, by_maxima, kept_dim), capsys)


def test_the_schedule_checker_accepts_the_solution_and_rejects_wrong_schedules(capsys):
    check, solution = solved("training.md", "check_lr_at", "lr_at")

    def from_zero(n, peak, warmup):  # counts updates from 0: one update late
        return solution(n + 1, peak, warmup)

    def no_decay(n, peak, warmup):
        return peak * min(n / warmup, 1.0)

    def inverted(n, peak, warmup):  # sqrt(n / w) after the warm-up
        return peak * min(n / warmup, (n / warmup) ** 0.5)

    assert_rejects(check, (from_zero, no_decay, inverted), capsys)


def test_the_loss_checker_accepts_the_solution_and_rejects_wrong_losses(capsys):
    check, solution = solved("training.md", "check_smoothed_loss", "smoothed_loss")

    def padding_counted(log_p, target, epsilon, pad_id):
        return solution(log_p, target, epsilon, pad_id=-100)

    def spread_over_the_others(log_p, target, epsilon, pad_id):  # eps / (V - 1) on the other words only
        keep = target != pad_id
        picked = log_p.gather(-1, target.clamp(min=0)[..., None])[..., 0]
        rest = (log_p.sum(-1) - picked) / (log_p.size(-1) - 1)
        return ((1 - epsilon) * -picked - epsilon * rest)[keep].sum()

    def mean_not_sum(log_p, target, epsilon, pad_id):
        return solution(log_p, target, epsilon, pad_id) / (target != pad_id).sum()

    def plain_nll(log_p, target, epsilon, pad_id):
        return solution(log_p, target, 0.0, pad_id)

    assert_rejects(check, (padding_counted, spread_over_the_others, mean_not_sum, plain_nll), capsys)


def test_the_backtrack_checker_accepts_the_solution_and_rejects_wrong_walks(capsys):
    check, solution = solved("decoding.md", "check_backtrack", "backtrack")

    def no_pointers(words, parents):  # reads each column down, as if no beam ever changed places
        return [words[:, b].tolist() for b in range(words.size(1))]

    def backwards(words, parents):  # the words in the order they were read, last first
        return [h[::-1] for h in solution(words, parents)]

    def pointer_one_step_late(words, parents):  # follows step t's pointer before reading step t's word
        steps, k = words.shape
        out = []
        for beam in range(k):
            seq = []
            for t in range(steps - 1, -1, -1):
                beam = int(parents[t, beam])
                seq.append(int(words[t, beam]))
            out.append(seq[::-1])
        return out

    assert_rejects(check, (no_pointers, backwards, pointer_one_step_late), capsys)


@pytest.mark.parametrize(
    ("page", "checker"),
    [
        ("compress.md", "check_joint_mask"),
        ("attention.md", "check_gate"),
        ("training.md", "check_lr_at"),
        ("training.md", "check_smoothed_loss"),
        ("decoding.md", "check_backtrack"),
    ],
)
def test_each_exercise_stub_is_unwritten_on_the_page(page, checker):
    """The reader's cell holds a stub that returns None, so the checker's first run asks for an answer."""
    cells = [c.source for c in jupytext.read(BOOK / page).cells if c.cell_type == "code"]
    assert "return None  # your code here" in next(c for c in cells if f"def {checker}(" in c)
