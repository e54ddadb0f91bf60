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


def corpus_scores(hyps: list[str], refs: list[str], lang: str | None = "de") -> dict:
    """sacreBLEU, tokenized BLEU and tokenized BLEU with compound splitting of one system output (``lang`` None:
    sacreBLEU alone, for a language the Moses tokenizer has no rules for)."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        raise ValueError("no sentences to score: the hypotheses and references are empty")
    detok = _bleu()
    score = detok.corpus_score(hyps, [refs])
    scores = {"bleu": score.score, "signature": str(detok.get_signature())}
    if lang is not None:
        tok_hyps, tok_refs = moses_tokenize(hyps, lang), moses_tokenize(refs, lang)
        tok = _bleu(tokenize="none", force=True)
        compound = tok.corpus_score([split_compounds(h) for h in tok_hyps], [[split_compounds(r) for r in tok_refs]])
        scores["tok_bleu"] = tok.corpus_score(tok_hyps, [tok_refs]).score
        scores["tok_bleu_compound"] = compound.score
        scores["tok_signature"] = str(tok.get_signature())
    return scores | {
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


METRICS = {"bleu": "BLEU", "chrf": "CHRF", "ter": "TER"}  # --metrics -> sacreBLEU's class in sacrebleu.metrics
LANGUAGE_SUFFIX = re.compile(r"[A-Za-z]{2,3}")  # test.fr, newstest2014.DE: a language code as the last suffix
FILE_SUFFIXES = {
    "txt",
    "tok",
    "out",
    "hyp",
    "ref",
    "raw",
    "src",
    "tgt",
    "sgm",
    "xml",
    "log",
    "tsv",
    "csv",
    "bpe",
    "spm",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("hyp", help="detokenized system output, one sentence a line ('-' = stdin)")
    parser.add_argument("ref", help="detokenized reference, line-aligned with HYP ('-' = stdin)")
    parser.add_argument(
        "--lang",
        help="target language (any case), for tokenized BLEU's Moses tokenizer; default: the prepared corpus's "
        "(--data, or the prepared folder REF is in), else REF's suffix (test.fr: fr). sacreBLEU (13a) scores any "
        "language; tokenized BLEU is computed only for a language the Moses tokenizer has rules for",
    )
    parser.add_argument("--data", type=Path, help="a prepared corpus folder: its target language is --lang")
    parser.add_argument(
        "--metrics",
        default="bleu",
        help="comma-separated sacreBLEU metrics: bleu, chrf, ter (default bleu)",
    )
    parser.add_argument(
        "--compare",
        metavar="OTHER",
        help="a second system's output for REF: sacreBLEU's paired bootstrap test (1000 resamples, seed 12345, "
        "as `sacrebleu REF -i HYP OTHER --paired-bs`) says whether OTHER differs from HYP",
    )


def metric_names(text: str) -> list[str]:
    """The --metrics list, each known to sacreBLEU here; in the order given, without repeats."""
    names = list(dict.fromkeys(name.strip().lower() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in METRICS]
    if unknown or not names:
        raise ValueError(f"--metrics {text}: choose among {', '.join(METRICS)} (comma-separated)")
    return names


def target_language(args: argparse.Namespace) -> str | None:
    """--lang (lower-cased), else the target language of the prepared corpus (--data, or the folder REF is in),
    else REF's language suffix; None when none says. Refused when --lang and the prepared corpus disagree."""
    folder = args.data or (Path(args.ref).parent if args.ref != "-" else None)
    corpus_lang = None
    if folder is not None and (folder / "meta.json").is_file():
        corpus_lang = json.loads((folder / "meta.json").read_text(encoding="utf-8")).get("tgt_lang")
    elif args.data is not None:
        raise ValueError(f"--data {args.data}: not a prepared corpus folder (no meta.json)")
    lang = args.lang.lower() if args.lang else None
    if lang is not None and corpus_lang is not None and lang != corpus_lang.lower():
        raise ValueError(f"--lang {args.lang}: the prepared corpus {folder} translates into {corpus_lang}")
    suffix = Path(args.ref).suffix[1:] if args.ref != "-" else ""
    from_name = suffix.lower() if LANGUAGE_SUFFIX.fullmatch(suffix) and suffix.lower() not in FILE_SUFFIXES else None
    return lang or (corpus_lang.lower() if corpus_lang else None) or from_name


def sacrebleu_metric(name: str) -> Any:
    """sacreBLEU's metric ``name`` (bleu, chrf, ter) with its defaults (BLEU: the 13a tokenizer)."""
    return getattr(require("sacrebleu.metrics", "sacreBLEU's metrics"), METRICS[name])()


def paired_bootstrap(
    hyps: list[str], other: list[str], refs: list[str], names: list[str], labels: tuple[str, str]
) -> dict[str, dict[str, Any]]:
    """sacreBLEU's own paired bootstrap test (``sacrebleu.significance.PairedTest``, its defaults: 1000 resamples,
    seed 12345 or ``$SACREBLEU_SEED``) of ``other`` against the baseline ``hyps``: per metric, each system's score,
    mean and 95% interval over the resamples, and the p-value of the difference."""
    significance = require("sacrebleu.significance", "the paired bootstrap test")
    metrics = {name: sacrebleu_metric(name) for name in names}
    test = significance.PairedTest(
        [(labels[0], hyps), (labels[1], other)], metrics, [refs], test_type="bs", n_samples=0
    )
    signatures, scores = test()
    out = {}
    for name, (key, results) in zip(names, [(k, v) for k, v in scores.items() if k != "System"]):
        base, second = results
        out[name] = {
            "metric": key,
            "signature": str(signatures[key]),
            "baseline": {"score": float(base.score), "mean": float(base.mean), "ci": float(base.ci)},
            "other": {"score": float(second.score), "mean": float(second.mean), "ci": float(second.ci)},
            "p_value": float(second.p_value),
        }
    return out


def run(args: argparse.Namespace) -> int:
    if [args.hyp, args.ref, args.compare].count("-") > 1:
        raise ValueError("HYP, REF and --compare: only one of them can be read from stdin ('-')")
    names = metric_names(args.metrics)
    lang = target_language(args)  # before the files are read
    hyps, refs = read_text(args.hyp), read_text(args.ref)
    if len(hyps) != len(refs):
        raise ValueError(f"{args.hyp} has {len(hyps)} lines but {args.ref} has {len(refs)}")
    if not hyps:
        raise ValueError(f"{args.hyp} and {args.ref} are empty: no sentences to score")
    other = read_text(args.compare) if args.compare else None
    if other is not None and len(other) != len(refs):
        raise ValueError(f"--compare {args.compare} has {len(other)} lines but {args.ref} has {len(refs)}")
    tokenized = lang in moses_languages()
    scores = corpus_scores(hyps, refs, lang if tokenized else None)
    print(f"sacreBLEU {scores['bleu']:.2f}  ({scores['signature']})")
    if tokenized:
        print(f"tokenized BLEU {scores['tok_bleu']:.2f}  (sacremoses {lang} + multi-bleu, case-sensitive)")
        print(f"tokenized BLEU, compounds split {scores['tok_bleu_compound']:.2f}")
    else:
        why = (
            f"the Moses tokenizer has no rules for {lang!r}"
            if lang
            else "no language: give --lang (REF's name and folder say none)"
        )
        print(f"tokenized BLEU: not computed ({why}); sacreBLEU's 13a scores any language")
    scores["lang"] = lang
    for name in names:
        if name == "bleu":
            continue
        metric = sacrebleu_metric(name)
        result = metric.corpus_score(hyps, [refs])
        scores[name], scores[f"{name}_signature"] = result.score, str(metric.get_signature())
        print(
            f"{metric.__class__.__name__ if name != 'chrf' else 'chrF'} {result.score:.2f}  "
            f"({scores[f'{name}_signature']})"
        )
    if other is not None:
        labels = (args.hyp, args.compare)
        compared = paired_bootstrap(hyps, other, refs, names, labels)
        for name, row in compared.items():
            base, second = row["baseline"], row["other"]
            print(
                f"paired bootstrap {row['metric']}: {labels[0]} {base['score']:.2f} ({base['mean']:.2f} +- "
                f"{base['ci']:.2f}), {labels[1]} {second['score']:.2f} ({second['mean']:.2f} +- {second['ci']:.2f}),"
                f" p = {row['p_value']:.4f}" + (" (a significant difference at 0.05)" if row["p_value"] < 0.05 else "")
            )
        scores["compare"] = {"other": args.compare, **compared}
    print(json.dumps(scores))
    return 0
