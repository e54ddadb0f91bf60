"""BLEU as the paper reports it and as sacreBLEU reports it; no BLEU is reimplemented here.

- ``bleu``: sacreBLEU on detokenized text (13a tokenizer, with its signature).
- ``tok_bleu``: the paper's case-sensitive tokenized BLEU (multi-bleu.perl): hypothesis and
  reference are Moses-tokenized with sacremoses for the target language and scored by
  sacreBLEU with ``tokenize="none"``. ``escape=False``: Moses' XML escaping maps each special
  character to one entity inside the same token, so it cannot change which n-grams match.
- ``tok_bleu_compound``: the same after the WMT14 En-De compound split used by
  tensor2tensor's get_ende_bleu.sh (``(\\S)-(\\S)`` -> ``\\1 ##AT##-##AT## \\2``).
- ``sentence_statistics`` / ``bleu_of_statistics``: sacreBLEU's sufficient statistics per sentence, and the score
  of any sum of them, so that a resample of the sentences (a bootstrap) is scored without translating again.

Every scorer is built by ``_bleu`` through sacreBLEU's public API.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from canlib.io import require

if TYPE_CHECKING:
    from sacremoses import MosesTokenizer

_COMPOUND = re.compile(r"(\S)-(\S)")


def _bleu(**options: Any) -> Any:
    """A ``sacrebleu.metrics.BLEU`` scorer; sacreBLEU is imported here so that the speed benchmarks and the
    trainer, which import this package's CLI, run on a machine without it."""
    return require("sacrebleu.metrics", "BLEU").BLEU(**options)


@cache
def _tokenizer(lang: str) -> MosesTokenizer:
    return require("sacremoses", "tokenized BLEU (the Moses tokenizer)").MosesTokenizer(lang=lang)


def moses_tokenize(lines: list[str], lang: str) -> list[str]:
    tok = _tokenizer(lang)
    return [tok.tokenize(line, escape=False, return_str=True) for line in lines]


def split_compounds(line: str) -> str:
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


def corpus_scores(hyps: list[str], refs: list[str], lang: str = "de") -> dict:
    """sacreBLEU, tokenized BLEU and tokenized BLEU with compound splitting of one system output."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        raise ValueError("no sentences to score: the hypotheses and references are empty")
    detok = _bleu()
    score = detok.corpus_score(hyps, [refs])
    tok_hyps, tok_refs = moses_tokenize(hyps, lang), moses_tokenize(refs, lang)
    tok = _bleu(tokenize="none", force=True)
    tok_score = tok.corpus_score(tok_hyps, [tok_refs])
    compound = tok.corpus_score([split_compounds(h) for h in tok_hyps], [[split_compounds(r) for r in tok_refs]])
    return {
        "bleu": score.score,
        "signature": str(detok.get_signature()),
        "tok_bleu": tok_score.score,
        "tok_bleu_compound": compound.score,
        "tok_signature": str(tok.get_signature()),
        "precisions": score.precisions,
        "bp": score.bp,
        "sys_len": score.sys_len,
        "ref_len": score.ref_len,
        "sentences": len(hyps),
    }


STATISTICS = 10  # per sentence: hypothesis length, reference length, matched and total 1- to 4-grams


def sentence_statistics(hyps: Sequence[str], refs: Sequence[str], lang: str | None = None) -> list[list[int]]:
    """sacreBLEU's sufficient statistics of each sentence (13a, its defaults; with ``lang`` the paper's tokenized
    BLEU: Moses-tokenized for ``lang``, then no further tokenization, as ``tok_bleu``): ``[hypothesis length,
    reference length, matches of 1..4-grams, totals of 1..4-grams]``. Summed over any multiset of the sentences they
    give that multiset's corpus BLEU through :func:`bleu_of_statistics` (the two metrics differ in tokenization
    only, so one formula scores both)."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    metric = _bleu(tokenize="none", force=True) if lang else _bleu()
    if lang:
        hyps, refs = moses_tokenize(list(hyps), lang), _tokenized_refs(tuple(refs), lang)
    rows = []
    for hyp, ref in zip(hyps, refs):
        score = metric.corpus_score([hyp], [[ref]])
        rows.append([score.sys_len, score.ref_len, *score.counts, *score.totals])
    return rows


@cache
def _tokenized_refs(refs: tuple[str, ...], lang: str) -> list[str]:
    """The references Moses-tokenized, once per process: every run of a test set is scored against them."""
    return moses_tokenize(list(refs), lang)


def bleu_of_statistics(stats: Sequence[float]) -> float:
    """sacreBLEU (13a, its defaults) of summed sentence statistics (:func:`sentence_statistics`): the corpus BLEU of
    the sentences summed."""
    if len(stats) != STATISTICS:
        raise ValueError(f"{len(stats)} statistics: expected {STATISTICS} (lengths, then 4 matches and 4 totals)")
    metric = _bleu()
    order = metric.max_ngram_order
    return metric.compute_bleu(
        correct=[int(x) for x in stats[2 : 2 + order]],
        total=[int(x) for x in stats[2 + order :]],
        sys_len=int(stats[0]),
        ref_len=int(stats[1]),
        smooth_method=metric.smooth_method,
        smooth_value=metric.smooth_value,
        effective_order=metric.effective_order,
        max_ngram_order=order,
    ).score


def sentence_bleu(hyp: str, ref: str) -> float:
    """Smoothed sentence-level sacreBLEU (for per-sentence error analysis, not for reporting)."""
    return require("sacrebleu", "sentence BLEU").sentence_bleu(hyp, [ref]).score


def read_text(path: Path | str) -> list[str]:
    """Lines of a UTF-8 text: any readable path (``/dev/null``, a pipe, ``<(...)``) or ``-`` for
    stdin; a missing or unreadable file, or invalid UTF-8, names the file (and line)."""
    name = str(path)
    if name == "-":
        return _lines(sys.stdin.buffer, "<stdin>")
    try:
        with open(path, "rb") as f:
            return _lines(f, name)
    except FileNotFoundError:
        raise FileNotFoundError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{name}: is a directory, not a text file") from None
    except PermissionError:
        raise ValueError(f"{name}: permission denied") from None


def _lines(f: BinaryIO, name: str) -> list[str]:
    lines = []
    for lineno, raw in enumerate(f, 1):
        try:
            lines.append(raw.decode("utf-8").rstrip("\r\n"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"{name}:{lineno}: invalid UTF-8 ({exc.reason})") from None
    return lines


def moses_languages() -> list[str]:
    """The languages sacremoses has tokenization rules (nonbreaking prefixes) for; for another code it would
    tokenize silently with none."""
    corpus = require("sacremoses.corpus", "tokenized BLEU (the Moses tokenizer)")
    return sorted(set(corpus.NonbreakingPrefixes().available_langs.values()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("hyp", help="detokenized system output, one sentence a line ('-' = stdin)")
    parser.add_argument("ref", help="detokenized reference, line-aligned with HYP ('-' = stdin)")
    parser.add_argument(
        "--lang",
        help="target language of tokenized BLEU's Moses tokenizer (e.g. de, fr); default: the prepared corpus's, "
        "from --data or from the prepared folder REF is in",
    )
    parser.add_argument("--data", type=Path, help="a prepared corpus folder: its target language is --lang")


def target_language(args: argparse.Namespace) -> str:
    """--lang, else the target language of the prepared corpus (--data, or the folder REF is in); refused when
    neither says, when they disagree, or when the Moses tokenizer has no rules for it."""
    folder = args.data or (Path(args.ref).parent if args.ref != "-" else None)
    corpus_lang = None
    if folder is not None and (folder / "meta.json").is_file():
        corpus_lang = json.loads((folder / "meta.json").read_text(encoding="utf-8")).get("tgt_lang")
    elif args.data is not None:
        raise ValueError(f"--data {args.data}: not a prepared corpus folder (no meta.json)")
    lang = args.lang or corpus_lang
    if lang is None:
        raise ValueError(
            "--lang is needed: the target language (e.g. de or fr), or --data PREPARED_FOLDER to read it from"
        )
    if corpus_lang is not None and lang != corpus_lang:
        raise ValueError(f"--lang {lang}: the prepared corpus {folder} translates into {corpus_lang}")
    known = moses_languages()
    if lang not in known:
        raise ValueError(
            f"--lang {lang}: the Moses tokenizer has no rules for it (it knows {', '.join(known)}); "
            "tokenized BLEU needs one of those"
        )
    return lang


def run(args: argparse.Namespace) -> int:
    if args.hyp == args.ref == "-":
        raise ValueError("HYP and REF are both '-': only one of them can be read from stdin")
    lang = target_language(args)  # before the files are read
    hyps, refs = read_text(args.hyp), read_text(args.ref)
    if len(hyps) != len(refs):
        raise ValueError(f"{args.hyp} has {len(hyps)} lines but {args.ref} has {len(refs)}")
    if not hyps:
        raise ValueError(f"{args.hyp} and {args.ref} are empty: no sentences to score")
    scores = corpus_scores(hyps, refs, lang)
    print(f"sacreBLEU {scores['bleu']:.2f}  ({scores['signature']})")
    print(f"tokenized BLEU {scores['tok_bleu']:.2f}  (sacremoses {lang} + multi-bleu, case-sensitive)")
    print(f"tokenized BLEU, compounds split {scores['tok_bleu_compound']:.2f}")
    print(json.dumps(scores))
    return 0
