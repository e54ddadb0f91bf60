"""Translate raw text with a trained checkpoint: ``python -m canlib translate``.

Sentences are tokenized with the model's SentencePiece vocabulary, translated in
batches of similar length (sorted longest first, so padding stays small), detokenized
and written back in input order. :func:`translate_lines` is the same thing as a
function, for the trainer's validation BLEU and the book; :func:`translate_sets` translates
several sets (a run's validation and test sets) in one length-sorted pass, in the larger
batches of :func:`evaluation_batch_size` on a GPU.

Batching changes no output: the search treats the sentences of a batch independently (each has
its own beams, maximum length and stopping point; padding is masked), so a sentence gets the same
tokens in any batch, up to the last bits of the float sums (tests check the tokens).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from canlib.bleu import read_text
from canlib.data.vocab import Vocabulary
from canlib.decoding.search import SearchSettings, beam_search, make_batch
from canlib.io import tqdm
from canlib.model.checkpoint import model_from_checkpoint, safe_load
from canlib.model.seq2seq import Seq2Seq


def find_vocab(checkpoint: str | Path) -> Path:
    """``vocab.model`` beside the checkpoint, else in its parent folder."""
    checkpoint = Path(checkpoint)
    for folder in (checkpoint.parent, checkpoint.parent.parent):
        if (folder / "vocab.model").is_file():
            return folder / "vocab.model"
    raise FileNotFoundError(f"{checkpoint}: no vocab.model beside it or in {checkpoint.parent.parent}; pass --vocab")


def load_translator(
    checkpoint: str | Path, vocab: str | Path | None = None, device: str | torch.device = "cpu"
) -> tuple[Seq2Seq, Vocabulary]:
    """Model (eval mode, on ``device``) and its vocabulary; refuses a vocabulary whose id
    differs from the one the checkpoint was trained with (when the checkpoint records one)."""
    if not Path(checkpoint).is_file():
        raise FileNotFoundError(f"{checkpoint}: no such checkpoint file")
    vocabulary = Vocabulary.load(vocab if vocab is not None else find_vocab(checkpoint))
    ckpt = safe_load(checkpoint)  # read once: whether it records a vocabulary, then the model
    model = model_from_checkpoint(
        ckpt, checkpoint, expected_vocab_id=vocabulary.id if ckpt.get("vocab_id") else None, map_location=device
    )
    if vocabulary.size != model.cfg.vocab_size:
        raise ValueError(
            f"{vocabulary.source}: {vocabulary.size} pieces, but {checkpoint} has vocab_size={model.cfg.vocab_size}"
        )
    return model.eval(), vocabulary


# sentences per batch for evaluating a run: 32 on a CPU (what the stored tiny results used); more on a GPU, whose
# eager search steps wait on the host, so fewer, larger batches mean fewer steps (scripts/gpu_throughput.sh T5)
EVALUATION_BATCH = {"cpu": 32, "cuda": 1024}


def evaluation_batch_size(device: str | torch.device) -> int:
    """Sentences per batch when a run's sets are translated for its scores on ``device``."""
    return EVALUATION_BATCH.get(torch.device(device).type, EVALUATION_BATCH["cpu"])


def source_ids(
    model: Seq2Seq, vocab: Vocabulary, lines: Sequence[str], names: Sequence[str] | None = None
) -> list[list[int]]:
    """Subword ids of each line; a line longer than the model's position table is truncated with a
    warning naming it (``names[i]``, default "input line i+1")."""
    limit = model.cfg.max_len - 1  # room for the source EOS
    ids = vocab.encode_batch([line.strip() for line in lines])
    for i, piece_ids in enumerate(ids):
        if len(piece_ids) > limit:
            name = names[i] if names is not None else f"input line {i + 1}"
            warnings.warn(f"{name}: {len(piece_ids)} subwords, truncated to the model's limit of {limit}")
            ids[i] = piece_ids[:limit]
    return ids


def translate_ids(
    model: Seq2Seq,
    vocab: Vocabulary,
    ids: list[list[int]],
    beam: int = 4,
    batch_size: int = 32,
    progress: bool = False,
    **search_options,
) -> list[str]:
    """Translations of tokenized sentences in order: sorted longest first, cut into batches of
    ``batch_size``, searched, detokenized, put back in order. Empty sentences give empty outputs.
    ``search_options``: the other fields of :class:`~canlib.decoding.search.SearchSettings`."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}: must be at least 1")
    settings = SearchSettings(beam=beam, **search_options)
    outputs = [""] * len(ids)
    order = sorted((i for i, x in enumerate(ids) if x), key=lambda i: -len(ids[i]))
    device = model.embed.weight.device
    was_training = model.training
    model.eval()
    bar = tqdm(total=len(order), unit="sent", desc="translate", disable=not progress)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src = make_batch([ids[i] for i in chunk], model.cfg.pad_id, model.cfg.eos_id, device)
        result = beam_search(model, src, settings)
        for i, tokens in zip(chunk, result.tokens):
            outputs[i] = vocab.decode(tokens)
        bar.update(len(chunk))
    bar.close()
    model.train(was_training)
    return outputs


def translate_lines(
    model: Seq2Seq,
    vocab: Vocabulary,
    lines: list[str],
    beam: int = 4,
    batch_size: int = 32,
    progress: bool = False,
    **search_options,
) -> list[str]:
    """Translations of ``lines`` in order; empty lines give empty outputs.

    Inputs longer than the model's position table are truncated with a warning.
    ``search_options``: the other fields of :class:`canlib.decoding.search.SearchSettings` (len_penalty, ...).
    """
    return translate_ids(model, vocab, source_ids(model, vocab, lines), beam, batch_size, progress, **search_options)


def translate_sets(
    model: Seq2Seq,
    vocab: Vocabulary,
    sets: Mapping[str, Sequence[str]],
    beam: int = 4,
    batch_size: int | None = None,
    progress: bool = False,
    **search_options,
) -> dict[str, list[str]]:
    """Translations of several sets of lines (e.g. a run's validation and test sets), each in its own order.

    All their lines are sorted by length together and cut into batches of ``batch_size`` sentences
    (default: :func:`evaluation_batch_size` of the model's device), so that only the last batch is
    part-filled; each line gets the tokens :func:`translate_lines` gives it.
    """
    device = model.embed.weight.device
    names = [f"{name} line {i + 1}" for name, lines in sets.items() for i in range(len(lines))]
    flat = [line for lines in sets.values() for line in lines]
    outputs = translate_ids(
        model,
        vocab,
        source_ids(model, vocab, flat, names),
        beam,
        evaluation_batch_size(device) if batch_size is None else batch_size,
        progress,
        **search_options,
    )
    result, start = {}, 0
    for name, lines in sets.items():
        result[name] = outputs[start : start + len(lines)]
        start += len(lines)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True, help="model checkpoint (.pt)")
    parser.add_argument(
        "--vocab", help="SentencePiece model (default: vocab.model beside the checkpoint or one folder up)"
    )
    parser.add_argument("--input", default="-", help="file of raw sentences, one per line ('-' = stdin)")
    parser.add_argument("--output", default="-", help="where to write translations ('-' = stdout)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    parser.add_argument("--len-penalty", type=float, default=1.0, help="alpha: score / (length incl. EOS)^alpha")
    parser.add_argument("--max-len-a", type=float, default=1.2)
    parser.add_argument("--max-len-b", type=float, default=10)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--fp32", action="store_true", help="keep float32 on CUDA (default there: half precision)")


def run(args: argparse.Namespace) -> int:
    model, vocab = load_translator(args.checkpoint, args.vocab, args.device)
    if model.embed.weight.device.type == "cuda" and not args.fp32:
        model.half()
    lines = read_text(args.input)  # a missing file, or invalid UTF-8, is an error naming the file (and line)
    outputs = translate_lines(
        model,
        vocab,
        lines,
        beam=args.beam,
        batch_size=args.batch_size,
        progress=args.output != "-",
        len_penalty=args.len_penalty,
        max_len_a=args.max_len_a,
        max_len_b=args.max_len_b,
    )
    text = "".join(line + "\n" for line in outputs)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0
