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

The command reads a file in length-sorted batches (a bar on stderr when it is a terminal); from a pipe or a
terminal it streams: each line is translated as soon as it arrives (with the lines already waiting, up to a batch)
and its translation written and flushed at once, as fairseq-interactive and marian-decoder do. A folder written by
``canlib export ctranslate2`` is translated by CTranslate2, with the same outputs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import select
import stat
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import torch

from canlib.bleu import read_text
from canlib.data.vocab import Vocabulary
from canlib.decoding.ctranslate import CT2Translator, token_names
from canlib.decoding.search import SearchResult, SearchSettings, beam_search, make_batch
from canlib.io import add_threads_option, device_option, option_type, require, same_file, tqdm, use_threads
from canlib.model.checkpoint import CheckpointError, load_model, safe_load
from canlib.model.config import ModelConfig
from canlib.model.seq2seq import Seq2Seq


def find_vocab(checkpoint: str | Path) -> Path:
    """``vocab.model`` beside the checkpoint, else in its parent folder."""
    checkpoint = Path(checkpoint)
    for folder in (checkpoint.parent, checkpoint.parent.parent):
        if (folder / "vocab.model").is_file():
            return folder / "vocab.model"
    raise FileNotFoundError(f"{checkpoint}: no vocab.model beside it or in {checkpoint.parent.parent}; pass --vocab")


def read_checkpoint(checkpoint: str | Path) -> dict[str, Any]:
    """A checkpoint's contents; a missing file, a folder or a file of another kind is a one-line error."""
    path = Path(checkpoint)
    if path.is_dir():
        raise ValueError(f"{checkpoint}: is a folder, not a checkpoint file (nor a `canlib export` folder)")
    if not path.is_file():
        raise FileNotFoundError(f"{checkpoint}: no such checkpoint file")
    try:
        return safe_load(path)
    except CheckpointError as exc:
        if exc.__cause__ is None:
            raise
        what = type(exc.__cause__).__name__
        raise CheckpointError(f"{checkpoint}: not a canlib checkpoint (PyTorch cannot read it: {what})") from None


def load_translator(
    checkpoint: str | Path,
    vocab: str | Path | None = None,
    device: str | torch.device = "cpu",
    ckpt: dict[str, Any] | None = None,
) -> tuple[Seq2Seq, Vocabulary]:
    """Model (eval mode, on ``device``) and its vocabulary (``vocab``, else :func:`find_vocab`'s); refuses a
    vocabulary whose id differs from the one the checkpoint was trained with (when the checkpoint records one).
    ``ckpt``: the checkpoint's contents, when already read with :func:`read_checkpoint`."""
    ckpt = read_checkpoint(checkpoint) if ckpt is None else ckpt  # read once: the vocabulary it records, the model
    vocabulary = Vocabulary.load(vocab if vocab is not None else find_vocab(checkpoint))
    expected = vocabulary.id if ckpt.get("vocab_id") else None
    model = load_model(checkpoint, expected_vocab_id=expected, map_location=device, ckpt=ckpt)
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


def encode_sources(
    vocab: Vocabulary, lines: Sequence[str], max_len: int, names: Sequence[str] | None = None
) -> list[list[int]]:
    """Subword ids of each line for a model whose position table has ``max_len`` rows; a line longer than that is
    truncated with a warning naming it (``names[i]``, default "input line i+1")."""
    limit = max_len - 1  # room for the source EOS
    ids = vocab.encode_batch([line.strip() for line in lines])
    for i, piece_ids in enumerate(ids):
        if len(piece_ids) > limit:
            name = names[i] if names is not None else f"input line {i + 1}"
            warnings.warn(f"{name}: {len(piece_ids)} subwords, truncated to the model's limit of {limit}")
            ids[i] = piece_ids[:limit]
    return ids


def translate_ids_nbest(
    model: Seq2Seq,
    vocab: Vocabulary,
    ids: list[list[int]],
    nbest: int,
    beam: int = 4,
    batch_size: int = 32,
    **search_options,
) -> list[list[tuple[str, float]]]:
    """The ``nbest`` best finished hypotheses of each tokenized sentence (at most ``beam``), best first, each with
    its score: the sum of its tokens' log-probabilities (EOS included) over (length + 1) ** len_penalty. An empty
    sentence gives one empty translation scored 0. Batched as :func:`translate_ids`."""
    if not 1 <= nbest <= beam:
        raise ValueError(f"nbest={nbest}: must be between 1 and the beam size ({beam})")
    settings = SearchSettings(beam=beam, return_all=True, **search_options)
    outputs: list[list[tuple[str, float]]] = [[("", 0.0)] for _ in ids]
    for chunk, result in searched_batches(model, ids, settings, batch_size, progress=False):
        for i, hypotheses in zip(chunk, result.hypotheses):
            outputs[i] = [(vocab.decode(tokens), float(score)) for tokens, score in hypotheses[:nbest]]
    return outputs


def searched_batches(
    model: Seq2Seq, ids: list[list[int]], settings: SearchSettings, batch_size: int, progress: bool
) -> Iterator[tuple[list[int], SearchResult]]:
    """The non-empty sentences of ``ids`` sorted longest first, cut into batches of ``batch_size`` and searched (the
    model in eval mode meanwhile): each batch's positions in ``ids`` and its result."""
    order = sorted((i for i, x in enumerate(ids) if x), key=lambda i: -len(ids[i]))
    was_training = model.training
    model.eval()
    bar = tqdm(total=len(order), unit="sent", desc="translate", disable=not progress)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src = make_batch([ids[i] for i in chunk], model.cfg.pad_id, model.cfg.eos_id, model.embed.weight.device)
        yield chunk, beam_search(model, src, settings)
        bar.update(len(chunk))
    bar.close()
    model.train(was_training)


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
    for chunk, result in searched_batches(model, ids, settings, batch_size, progress):
        for i, tokens in zip(chunk, result.tokens):
            outputs[i] = vocab.decode(tokens)
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
    ids = encode_sources(vocab, lines, model.cfg.max_len)
    return translate_ids(model, vocab, ids, beam, batch_size, progress, **search_options)


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
    names = [f"{name} line {i + 1}" for name, lines in sets.items() for i in range(len(lines))]
    flat = [line for lines in sets.values() for line in lines]
    outputs = translate_ids(
        model,
        vocab,
        encode_sources(vocab, flat, model.cfg.max_len, names),
        beam,
        evaluation_batch_size(model.embed.weight.device) if batch_size is None else batch_size,
        progress,
        **search_options,
    )
    rest = iter(outputs)
    return {name: list(itertools.islice(rest, len(lines))) for name, lines in sets.items()}


# -- the command ------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint",
        required=True,
        help="model checkpoint (.pt), a run folder (`canlib train --out`: its best.pt), or a folder "
        "`canlib export ctranslate2` wrote (translated by CTranslate2)",
    )
    parser.add_argument(
        "--vocab", help="SentencePiece model (default: vocab.model beside the checkpoint or one folder up)"
    )
    parser.add_argument(
        "--input",
        default="-",
        help="raw sentences, one a line ('-' = stdin); a pipe or terminal is translated line by line as it comes",
    )
    parser.add_argument("--output", default="-", help="where to write translations ('-' = stdout)")
    parser.add_argument("--beam", type=option_type(int, "at least 1"), default=4, help="beam size (default 4)")
    parser.add_argument(
        "--nbest",
        type=option_type(int, "at least 1"),
        default=None,
        help="write the N best translations of each line with their scores, N lines per input line, as Moses and "
        "Marian do: 'LINE ||| TRANSLATION ||| SCORE' (LINE: the input line counted from 0; SCORE: the sum of the "
        "tokens' log-probabilities, EOS included, over (length + 1)^len-penalty); N at most --beam",
    )
    parser.add_argument(
        "--batch-size", type=option_type(int, "at least 1"), default=32, help="sentences per batch (default 32)"
    )
    parser.add_argument(
        "--len-penalty",
        type=option_type(float, "finite"),
        default=1.0,
        help="alpha: a hypothesis scores sum(log p) / (length incl. EOS)^alpha (default 1)",
    )
    parser.add_argument(
        "--max-len-a",
        type=option_type(float, "nonnegative"),
        default=1.2,
        help="at most a * source length + b output tokens (default 1.2)",
    )
    parser.add_argument("--max-len-b", type=option_type(float, "nonnegative"), default=10, help="(default 10)")
    parser.add_argument(
        "--renormalize",
        action="store_true",
        help="normalise each step's probabilities over the tokens the search may emit (CTranslate2's convention, "
        "so a checkpoint gives its exported folder's translations); default: over the whole vocabulary",
    )
    parser.add_argument(
        "--device", type=device_option, default="cuda" if torch.cuda.is_available() else "cpu", help="cpu or cuda"
    )
    parser.add_argument("--fp32", action="store_true", help="keep float32 on CUDA (default there: half precision)")
    add_threads_option(parser)
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a bar on stderr while a file is translated (default: when stderr is a terminal)",
    )


def check_paths(input_: str, output: str) -> None:
    """The input can be read and the output written, checked before any model is loaded."""
    if input_ != "-":
        path = Path(input_)
        if path.is_dir():
            raise ValueError(f"--input {input_}: is a folder, not a text file")
        if not path.exists():
            raise FileNotFoundError(f"--input {input_}: no such file")
        if not os.access(path, os.R_OK):
            raise ValueError(f"--input {input_}: permission denied")
    if output != "-":
        if input_ != "-" and same_file(input_, output):
            raise ValueError(f"--output {output}: is the --input file; write the translations elsewhere")
        path = Path(output)
        if path.is_dir():
            raise ValueError(f"--output {output}: is a folder; give a file name")
        folder = path.parent
        if not folder.is_dir():
            raise ValueError(f"--output {output}: its folder {folder} does not exist")
        if not os.access(path, os.W_OK) if path.exists() else not os.access(folder, os.W_OK):
            raise ValueError(f"--output {output}: permission denied")


def streamed_lines(fd: int, name: str, most: int) -> Iterator[list[tuple[int, str]]]:
    """(line number, text) of the lines of ``fd`` as they come: waits for one line, then takes the lines already
    waiting, up to ``most``; invalid UTF-8 names the line."""
    pending, eof, number = b"", False, 0
    while True:
        while b"\n" not in pending and not eof:
            chunk = os.read(fd, 1 << 16)
            eof, pending = not chunk, pending + chunk
        while not eof and pending.count(b"\n") < most and select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 1 << 16)
            eof, pending = not chunk, pending + chunk
        lines = pending.split(b"\n")
        pending = lines.pop()
        if eof and pending:
            lines, pending = [*lines, pending], b""
        if not lines:
            return
        pending = b"\n".join([*lines[most:], pending]) if len(lines) > most else pending
        batch = []
        for raw in lines[:most]:
            number += 1
            try:
                batch.append((number, raw.decode("utf-8").rstrip("\r")))
            except UnicodeDecodeError as exc:
                raise ValueError(f"{name}:{number}: invalid UTF-8 ({exc.reason})") from None
        yield batch


Translate = Callable[[list[str], list[str], bool], list[str]]  # (lines, their names, progress) -> translations


def translator(args: argparse.Namespace) -> Translate:
    """The function that translates lines with the --checkpoint's model: canlib's search, or CTranslate2 for a
    `canlib export` folder."""
    limits = dict(len_penalty=args.len_penalty, max_len_a=args.max_len_a, max_len_b=args.max_len_b)
    folder = Path(args.checkpoint)
    if folder.is_dir() and (folder / "model.bin").is_file():
        if args.nbest:
            raise ValueError(f"--nbest: translating with a CTranslate2 folder ({folder}) gives the best only")
        if not (folder / "canlib.json").is_file():
            raise ValueError(f"{folder}: a CTranslate2 model, but not one `canlib export` wrote (no canlib.json)")
        require("ctranslate2", "translating with an exported CTranslate2 model")
        vocab = Vocabulary.load(args.vocab or folder / "vocab.model")
        cfg = ModelConfig.from_dict(json.loads((folder / "canlib.json").read_text(encoding="utf-8"))["model"])
        ct2 = CT2Translator(folder, token_names(cfg.vocab_size, vocab), device=torch.device(args.device).type)

        def translate_ct2(lines: list[str], names: list[str], progress: bool) -> list[str]:
            ids = encode_sources(vocab, lines, cfg.max_len, names)
            return ct2.translate_ids(vocab, ids, args.beam, args.batch_size, progress, cfg.max_len, **limits)

        return translate_ct2
    model, vocab = load_translator(args.checkpoint, args.vocab, args.device)
    if model.embed.weight.device.type == "cuda" and not args.fp32:
        model.half()

    def translate_canlib(lines: list[str], names: list[str], progress: bool) -> list[Any]:
        ids = encode_sources(vocab, lines, model.cfg.max_len, names)
        options = dict(limits, renormalize=args.renormalize)
        if args.nbest:
            return translate_ids_nbest(model, vocab, ids, args.nbest, args.beam, args.batch_size, **options)
        return translate_ids(model, vocab, ids, args.beam, args.batch_size, progress, **options)

    return translate_canlib


# input lines translated together when the input is a file: length-sorted inside, written in input order as each
# is done, so the output grows as it translates (Marian's maxi-batch); a sentence's tokens do not depend on it
BLOCK_BATCHES = 16


def open_output(output: str) -> TextIO:
    """Where translations go: stdout for '-', else the file opened for writing (a symlink is written through to its
    target; a named pipe or a device is written to, not replaced)."""
    return sys.stdout if output == "-" else open(output, "w", encoding="utf-8")  # noqa: SIM115


def run_checkpoint(path: str) -> str:
    """A run folder's checkpoint (its best.pt, said on stderr); any other path as given."""
    folder = Path(path)
    if folder.is_dir() and (folder / "config.json").is_file() and not (folder / "model.bin").is_file():
        best = folder / "checkpoints" / "best.pt"
        if not best.is_file():
            raise FileNotFoundError(f"--checkpoint {path}: a run folder with no checkpoints/best.pt yet")
        print(f"canlib translate: {path} is a run folder: translating with its {best}", file=sys.stderr)
        return str(best)
    return path


def run(args: argparse.Namespace) -> int:
    if args.nbest is not None and args.nbest > args.beam:
        raise ValueError(f"--nbest {args.nbest}: at most --beam ({args.beam}) translations per line")
    check_paths(args.input, args.output)
    args.checkpoint = run_checkpoint(args.checkpoint)
    threads, busy = use_threads(args.threads)
    translate = translator(args)
    fd = sys.stdin.fileno() if args.input == "-" else os.open(args.input, os.O_RDONLY)
    name = "<stdin>" if args.input == "-" else args.input
    done = 0
    if stat.S_ISREG(os.fstat(fd).st_mode):  # a file: read it whole, translate in length-sorted batches
        lines = read_text(args.input)  # invalid UTF-8 is an error naming the file and line
        progress = sys.stderr.isatty() if args.progress is None else args.progress
        block = args.batch_size * BLOCK_BATCHES
        batches: Iterator[list[tuple[int, str]]] = (
            [(n + 1, lines[n]) for n in range(start, min(start + block, len(lines)))]
            for start in range(0, len(lines), block)
        )
    else:
        progress, batches = False, streamed_lines(fd, name, args.batch_size)
    bar = tqdm(total=len(lines) if progress else None, unit="sent", desc="translate", disable=not progress)
    out = open_output(args.output)
    where = "stdout" if args.output == "-" else args.output
    try:
        for batch in batches:
            outputs = translate([line for _, line in batch], [f"{name}:{n}" for n, _ in batch], False)
            if args.nbest:
                outputs = [f"{n - 1} ||| {hyp} ||| {score:.6f}" for (n, _), hyps in zip(batch, outputs)
                           for hyp, score in hyps]  # fmt: skip
            out.write("".join(line + "\n" for line in outputs))
            out.flush()
            done += len(batch)
            bar.update(len(batch))
    except KeyboardInterrupt:
        print(f"canlib translate: {lines_count(done)} translated to {where} before the interrupt", file=sys.stderr)
        raise
    finally:
        bar.close()
        if out is not sys.stdout:
            out.close()
    how = torch.device(args.device).type + ("" if args.device.startswith("cuda") else f", {threads} thread(s)")
    print(f"canlib translate: {lines_count(done)} translated to {where} ({how})", file=sys.stderr)
    if busy and not args.device.startswith("cuda"):
        print(f"canlib translate: {busy}", file=sys.stderr)
    return 0


def lines_count(n: int) -> str:
    return f"{n:,} line" + ("" if n == 1 else "s")
