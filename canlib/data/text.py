"""Reading parallel text: strict UTF-8, SGM test sets, whitespace normalisation, cleaning.

Every error names the file (and line), so a bad corpus is fixed at its source.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

_SPACE = re.compile(r"\s+")
_SEG = re.compile(r"<seg.*?>(.*)</seg>.*?")


def normalize(line: str) -> str:
    """Strip and collapse every run of (Unicode) whitespace to one space: sacrebleu's rule."""
    return _SPACE.sub(" ", line.strip())


def decode_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """Lines of a binary stream as str (without the newline); invalid UTF-8 names file and line."""
    for lineno, raw in enumerate(stream, 1):
        try:
            yield raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{name}:{lineno}: invalid UTF-8 ({exc.reason} at byte {exc.start})") from None


def sgm_segments(lines: Iterable[str]) -> Iterator[str]:
    """The text of each ``<seg ...>...</seg>`` line, as sacrebleu extracts WMT SGM files."""
    for line in lines:
        if line.startswith("<seg "):
            yield normalize(_SEG.sub(r"\1", line))


def read_lines(path: Path) -> list[str]:
    """All lines of a plain or .gz text file (the SGM rule for .sgm/.xml), not yet normalised."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            lines = list(decode_lines(f, str(path)))
    except (OSError, EOFError) as exc:  # truncated or corrupt gzip
        raise ValueError(f"{path}: unreadable ({exc})") from exc
    if path.name.removesuffix(".gz").endswith((".sgm", ".xml")):
        lines = list(sgm_segments(lines))
    return lines


def read_parallel(src_path: Path, tgt_path: Path, strict: bool = False) -> tuple[list[str], list[str]]:
    """Normalised, line-aligned source and target lines; unequal line counts are an error naming the first
    line without a partner. ``strict`` (a researcher's own files): an empty line on either side is an error
    naming its file and line too, where a registered corpus's empty pairs are dropped and counted."""
    src = [normalize(s) for s in read_lines(src_path)]
    tgt = [normalize(t) for t in read_lines(tgt_path)]
    if len(src) != len(tgt):
        longer, shorter = (src_path, tgt_path) if len(src) > len(tgt) else (tgt_path, src_path)
        raise ValueError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: the files are not aligned "
            f"({longer}:{min(len(src), len(tgt)) + 1} has no partner line in {shorter})"
        )
    if not src:
        raise ValueError(f"{src_path}: empty corpus (no lines)")
    if strict:
        for number, (s, t) in enumerate(zip(src, tgt), 1):
            if not s or not t:
                empty, other = (src_path, tgt_path) if not s else (tgt_path, src_path)
                raise ValueError(
                    f"{empty}:{number}: empty line (its partner {other}:{number} is "
                    f"{(t or s)[:60]!r}); a parallel corpus needs text on both sides of every line (in the "
                    "training files, --drop-empty leaves such pairs out)"
                )
    return src, tgt


def drop_empty(src: list[str], tgt: list[str]) -> tuple[list[str], list[str], int]:
    """Pairs where both sides have text, and how many pairs were dropped."""
    kept = [(s, t) for s, t in zip(src, tgt) if s and t]
    return [s for s, _ in kept], [t for _, t in kept], len(src) - len(kept)
