"""The packages hold no commit hash: which code a measurement timed is data stored beside the measurement, not a
constant of the library."""

from __future__ import annotations

import ast
import re
import subprocess

from conftest import REPO

HASH = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![0-9A-Za-z])")


def test_the_package_names_no_commit_of_its_own():
    """Which code a measurement timed is data stored beside it; no package names a commit (docstrings' examples
    aside): the library, the reproduction's readers or the pages' glue."""
    paths = sorted(p for folder in ("canlib", "repro", "book/_code") for p in (REPO / folder).rglob("*.py"))
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found += [
                    f"{path.relative_to(REPO)}:{node.lineno}: {m}" for m in HASH.findall(node.value) if own_commit(m)
                ]
    assert not found, "\n".join(found)


def own_commit(text: str) -> bool:
    """Whether ``text`` names a commit of this repository (an upstream snapshot pinned by hash, such as a corpus's,
    is no commit of ours)."""
    out = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{text}^{{commit}}"], capture_output=True
    )
    return out.returncode == 0


def test_the_hash_pattern_finds_a_commit_and_passes_words():
    assert HASH.findall("ops_c9736eb.json, run h100-2026-11-26-e19dd56") == ["c9736eb", "e19dd56"]
    assert HASH.findall("deadbeef is a word, 2026-11-26 a date, faced none") == []
