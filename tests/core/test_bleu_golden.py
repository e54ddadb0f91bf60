"""Tokenized BLEU against the reference tools' own outputs, committed in tests/core/fixtures/bleu.

golden.txt holds what Moses' multi-bleu.perl printed for two system outputs of a 40-sentence
German fixture: tokenized by tokenizer.perl (the paper's tokenized BLEU) and after
tensor2tensor's get_ende_bleu.sh compound split; the *.tok.de files are tokenizer.perl's
output with -no-escape. tests/core/fixtures/bleu/README.md says how they were made. No real data
and no Perl are needed to run these tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from canlib.bleu import corpus_scores, moses_tokenize

FIXTURE = Path(__file__).parent / "fixtures" / "bleu"
SYSTEMS = ("hyp_a", "hyp_b")
LINE = re.compile(
    r"^(\w+) (\w+) BLEU = ([\d.]+), ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) "
    r"\(BP=([\d.]+), ratio=([\d.]+), hyp_len=(\d+), ref_len=(\d+)\)$"
)


def lines(name: str) -> list[str]:
    return (FIXTURE / name).read_text(encoding="utf-8").splitlines()


def golden() -> dict[tuple[str, str], dict]:
    """(system, kind) -> multi-bleu.perl's BLEU, precisions, BP, hyp_len and ref_len."""
    out = {}
    for line in lines("golden.txt"):
        m = LINE.match(line)
        assert m, f"golden.txt: unparsable line {line!r}"
        out[m[1], m[2]] = dict(
            bleu=float(m[3]),
            precisions=[float(m[i]) for i in range(4, 8)],
            bp=float(m[8]),
            hyp_len=int(m[10]),
            ref_len=int(m[11]),
        )
    assert len(out) == 3 * len(SYSTEMS)
    return out


def test_moses_tokenization_equals_tokenizer_perl_without_escaping():
    """Token for token, tokenizer.perl -l de -no-escape: hyphens, quotes, apostrophes, numbers,
    abbreviations and the characters XML escaping would turn into entities (& | < > [ ] ' ")."""
    for name in ("ref",) + SYSTEMS:
        ours, perl = moses_tokenize(lines(f"{name}.de"), "de"), lines(f"{name}.tok.de")
        assert len(ours) == len(perl) == 40
        for i, (a, b) in enumerate(zip(ours, perl), 1):
            assert a == b, f"{name}.de line {i}: {a!r} != tokenizer.perl's {b!r}"


@pytest.mark.parametrize("system", SYSTEMS)
def test_tokenized_bleu_equals_multi_bleu_perl(system):
    gold = golden()[system, "tokenized"]
    hyps, refs = lines(f"{system}.de"), lines("ref.de")
    assert corpus_scores(hyps, refs)["tok_bleu"] == pytest.approx(
        gold["bleu"], abs=0.005
    )  # multi-bleu prints 2 decimals
    assert sum(len(s.split()) for s in moses_tokenize(hyps, "de")) == gold["hyp_len"]
    assert sum(len(s.split()) for s in moses_tokenize(refs, "de")) == gold["ref_len"]
    # XML escaping (tokenizer.perl's default) maps characters inside tokens one to one: same score
    assert golden()[system, "tokenized_escaped"]["bleu"] == gold["bleu"]


@pytest.mark.parametrize("system", SYSTEMS)
def test_compound_split_bleu_equals_get_ende_bleu(system):
    gold = golden()[system, "compound_split"]
    scores = corpus_scores(lines(f"{system}.de"), lines("ref.de"))
    assert scores["tok_bleu_compound"] == pytest.approx(gold["bleu"], abs=0.005)
    assert abs(scores["tok_bleu_compound"] - scores["tok_bleu"]) > 0.2  # the split matters on this fixture


def test_the_fixture_tells_the_pipelines_apart():
    """Scoring untokenized text, or without the compound split, would miss the golden values."""
    from sacrebleu.metrics import BLEU

    refs = lines("ref.de")
    for system in SYSTEMS:
        raw = BLEU(tokenize="none", force=True).corpus_score(lines(f"{system}.de"), [refs]).score
        assert abs(raw - golden()[system, "tokenized"]["bleu"]) > 0.1  # 20 times the tolerance above
        assert abs(golden()[system, "compound_split"]["bleu"] - golden()[system, "tokenized"]["bleu"]) > 0.2
