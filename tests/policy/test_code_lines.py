"""The sizes the two packages are held to, counted by ``scripts/code_lines.py``: a line counts when it holds code,
not when it is blank, a comment alone or part of a docstring."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import code_lines  # noqa: E402

CANLIB_MOST = 7_200  # about 7k: the library: data, model, decoding, training, bleu, io, export and the user's commands
REPRO_SHARE = 0.60  # the reproduction beside it, at most this share of the library

SAMPLE = '''"""A module docstring
over two lines."""

import os  # a comment after code counts

# a comment alone does not


def f(x):
    """A docstring."""
    text = """a string that spans
    three lines
    counts each one"""
    return (x +
            1)


class C:
    """Its docstring.

    Longer."""

    y = 1
'''
# counted by hand: import os; def f; text = (3 lines); return (2 lines); class C; y = 1
SAMPLE_LINES = 1 + 1 + 3 + 2 + 1 + 1


def test_a_line_counts_when_it_holds_code_outside_a_docstring() -> None:
    assert code_lines.code_lines(SAMPLE) == SAMPLE_LINES


def test_the_library_keeps_its_size_and_the_reproduction_its_share() -> None:
    canlib, repro = (code_lines.count(ROOT / name) for name in ("canlib", "repro"))
    assert canlib <= CANLIB_MOST, f"canlib has {canlib:,} code lines, more than {CANLIB_MOST:,}"
    assert repro <= REPRO_SHARE * canlib, f"repro has {repro:,} code lines, {repro / canlib:.0%} of canlib's {canlib:,}"
