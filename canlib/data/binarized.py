"""Prepared corpora on disk: flat token arrays + offsets, memory-mapped on load.

Per split and side: ``<split>.<side>.tokens.npy`` (uint16 when the vocabulary fits, else
int32) holds every sentence's ids back to back and ``<split>.<side>.offsets.npy`` (int64,
n+1 entries) where each starts, so a 4.5M-pair corpus loads instantly with mmap.
``<split>.<side>.txt`` keeps the normalised text of valid/test lines as BLEU references.

Format 2 (this one) adds named extra test sets (``meta["test_splits"]``, e.g. Multi30k's
``test2017_flickr``), stored like ``test``; format-1 folders, which hold only ``test``, still load.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from canlib.data.vocab import Vocabulary

SPLITS = ("train", "valid", "test")  # every prepared folder has these; extra test sets follow
SIDES = ("src", "tgt")
FORMAT_VERSION = 2
READABLE_FORMATS = (1, 2)


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.int32)


@dataclass
class Encoded:
    """One side of a split as a flat token array and per-sentence lengths (no Python int lists)."""

    tokens: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)

    def select(self, keep: np.ndarray) -> Encoded:
        """The sentences where the boolean mask ``keep`` is true, in order."""
        return Encoded(self.tokens[np.repeat(keep, self.lengths)], self.lengths[keep])


def write_side(folder: Path, split: str, side: str, encoded: Encoded) -> None:
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(encoded.lengths, out=offsets[1:])
    np.save(folder / f"{split}.{side}.tokens.npy", encoded.tokens)
    np.save(folder / f"{split}.{side}.offsets.npy", offsets)


def write_text(folder: Path, split: str, side: str, lines: Sequence[str]) -> None:
    (folder / f"{split}.{side}.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


class ParallelSplit:
    """One split: ``split[i] -> (src_ids, tgt_ids)`` as int64 arrays without BOS/EOS."""

    def __init__(self, folder: Path, name: str) -> None:
        self.name = name
        self.folder = folder
        arrays = {}
        for side in SIDES:
            for kind in ("tokens", "offsets"):
                path = folder / f"{name}.{side}.{kind}.npy"
                if not path.is_file():
                    raise FileNotFoundError(f"{path}: missing from the prepared corpus")
                arrays[side, kind] = np.load(path, mmap_mode="r")
        self._src, self._src_off = arrays["src", "tokens"], np.asarray(arrays["src", "offsets"])
        self._tgt, self._tgt_off = arrays["tgt", "tokens"], np.asarray(arrays["tgt", "offsets"])
        if len(self._src_off) != len(self._tgt_off):
            raise ValueError(
                f"{folder}: split {name!r} has {len(self._src_off) - 1} source but "
                f"{len(self._tgt_off) - 1} target sentences"
            )
        self.src_lens = np.diff(self._src_off)
        self.tgt_lens = np.diff(self._tgt_off)
        self._text: dict[str, list[str]] = {}

    def __len__(self) -> int:
        return len(self.src_lens)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"split {self.name!r} has {len(self)} pairs, index {i} is out of range")
        i %= len(self)
        src = self._src[self._src_off[i] : self._src_off[i + 1]].astype(np.int64)
        tgt = self._tgt[self._tgt_off[i] : self._tgt_off[i + 1]].astype(np.int64)
        return src, tgt

    def _lines(self, side: str) -> list[str]:
        if side not in self._text:
            path = self.folder / f"{self.name}.{side}.txt"
            if not path.is_file():
                raise FileNotFoundError(f"{path}: the text of split {self.name!r} is not stored (only valid/test)")
            self._text[side] = path.read_text(encoding="utf-8").split("\n")[:-1]
        return self._text[side]

    @property
    def src_text(self) -> list[str]:
        return self._lines("src")

    @property
    def tgt_text(self) -> list[str]:
        return self._lines("tgt")


class PreparedCorpus:
    """A prepared folder: vocabulary, meta.json, train, valid and one or more test sets."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        meta_path = self.path / "meta.json"
        if not meta_path.is_file():
            raise FileNotFoundError(f"{meta_path}: not a prepared corpus (run `canlib data prepare`)")
        self.meta = json.loads(meta_path.read_text())
        if self.meta.get("format_version") not in READABLE_FORMATS:
            raise ValueError(
                f"{meta_path}: format_version {self.meta.get('format_version')!r}, this canlib reads "
                f"{READABLE_FORMATS}; prepare the corpus again (`canlib data prepare`)"
            )
        self.vocab = Vocabulary.load(self.path / "vocab.model")
        if self.vocab.id != self.meta["vocab_id"]:
            raise ValueError(
                f"{self.path / 'vocab.model'}: id {self.vocab.id} differs from meta.json's {self.meta['vocab_id']}"
            )
        self._splits: dict[str, ParallelSplit] = {}

    @property
    def test_splits(self) -> tuple[str, ...]:
        """Names of the test sets, ``"test"`` first (format 1 has only that one)."""
        return tuple(self.meta.get("test_splits", ("test",)))

    @property
    def splits(self) -> tuple[str, ...]:
        return ("train", "valid", *self.test_splits)

    @property
    def src_lang(self) -> str:
        return self.meta["src_lang"]

    @property
    def tgt_lang(self) -> str:
        return self.meta["tgt_lang"]

    def split(self, name: str) -> ParallelSplit:
        if name not in self.splits:
            raise ValueError(f"unknown split {name!r} in {self.path}; its splits are {self.splits}")
        if name not in self._splits:
            self._splits[name] = ParallelSplit(self.path, name)
        return self._splits[name]


def load_prepared(path: str | Path) -> PreparedCorpus:
    return PreparedCorpus(Path(path))
