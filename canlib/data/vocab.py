"""The joint source/target subword vocabulary: a SentencePiece model with canlib's special ids.

The paper uses one joint BPE vocabulary for En-De; we train SentencePiece (BPE by
default) on both sides with ids fixed to the model config's defaults
(pad=0, unk=1, bos=2, eos=3). ``Vocabulary.id`` is the sha256 of the serialized
model, stored in checkpoints so a model is never paired with the wrong vocabulary.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterable
from pathlib import Path

from canlib.io import atomic_write_bytes, require

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3  # the models' special token ids (the model config takes them from here)


class Vocabulary:
    """A loaded SentencePiece model plus the id that identifies it."""

    def __init__(self, model_proto: bytes, source: str = "<memory>") -> None:
        self.proto = model_proto
        self.source = source
        self.sp = require("sentencepiece", "a subword vocabulary").SentencePieceProcessor()
        try:
            self.sp.LoadFromSerializedProto(model_proto)
        except Exception as exc:
            raise ValueError(f"{source}: not a SentencePiece model ({exc})") from exc
        expected = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
        found = {"pad": self.sp.pad_id(), "unk": self.sp.unk_id(), "bos": self.sp.bos_id(), "eos": self.sp.eos_id()}
        if found != expected:
            raise ValueError(f"{source}: special ids {found} differ from canlib's {expected}")
        self.id = "spm-sha256:" + hashlib.sha256(model_proto).hexdigest()[:16]

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocabulary:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: vocabulary model not found")
        return cls(path.read_bytes(), str(path))

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int) -> Vocabulary:
        """Train a joint BPE model on ``sentences`` (both languages), deterministically, every character covered."""
        out = io.BytesIO()
        options = dict(
            sentence_iterator=iter(sentences),
            model_writer=out,
            vocab_size=vocab_size,
            model_type="bpe",
            character_coverage=1.0,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            num_threads=1,  # determinism: same corpus, same model, byte for byte
            minloglevel=2,
        )
        try:
            require("sentencepiece", "training a subword vocabulary").SentencePieceTrainer.train(**options)
        except RuntimeError as exc:
            raise ValueError(f"SentencePiece training failed with vocab_size={vocab_size}: {exc}") from exc
        return cls(out.getvalue())

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_bytes(self.proto, path)

    @property
    def size(self) -> int:
        return self.sp.get_piece_size()

    def __len__(self) -> int:
        return self.size

    def encode(self, text: str) -> list[int]:
        """Subword ids of one sentence, without BOS/EOS."""
        return self.sp.encode(text, out_type=int)

    def encode_batch(self, texts: list[str], threads: int | None = None) -> list[list[int]]:
        """Subword ids of each text, on ``threads`` threads (None: SentencePiece's default); the ids do not depend
        on them."""
        return self.sp.encode(texts, out_type=int, num_threads=threads)

    def decode(self, ids: Iterable[int]) -> str:
        """Detokenized text; special ids (pad/bos/eos) are dropped."""
        specials = (PAD_ID, BOS_ID, EOS_ID)
        return self.sp.decode([int(i) for i in ids if int(i) not in specials])
