"""The product speaks of the project alone: README, the book (stored results included), the library, the scripts
and the measurement notes say nothing of how the work on them was organised."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("README.md", "book", "canlib", "repro", "scripts", "measurements")
WORDS = re.compile(r"\b(sessions?|loans?|project lead)\b", re.IGNORECASE)
SUFFIXES = {".md", ".py", ".sh", ".json", ".txt", ".log", ".yml", ".yaml", ".cff", ".bib", ".css"}


def product_files() -> list[Path]:
    files = []
    for name in PRODUCT:
        path = REPO / name
        files += [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    return sorted(p for p in files if "__pycache__" not in p.parts)


def offending_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if WORDS.search(line)]


def test_the_word_scan_finds_what_it_looks_for():
    assert offending_lines("ok\nmeasured by the Project Lead's run\nin one session each\nloans\n") == [
        "measured by the Project Lead's run",
        "in one session each",
        "loans",
    ]
    assert offending_lines("sessional? no: obsession, loaner, session_id") == []


def test_no_product_file_speaks_of_how_the_work_was_organised():
    files = product_files()
    assert len(files) > 100 and any(p.suffix == ".json" for p in files)  # the scan reaches the stored results
    lines = {str(p.relative_to(REPO)): offending_lines(p.read_text(errors="replace")) for p in files}
    assert {name: found for name, found in lines.items() if found} == {}
