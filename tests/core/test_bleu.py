"""BLEU: our scores equal the sacrebleu command line's (tokenized BLEU against multi-bleu.perl: test_bleu_golden.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from canlib.bleu import corpus_scores, sentence_bleu, split_compounds


@pytest.fixture
def hyp_ref(shared_data, tmp_path) -> tuple[Path, Path, list[str], list[str]]:
    """150 real newstest2014 German references and a 'system output' made by editing them."""
    refs = (shared_data / "wmt14-en-de" / "newstest2014.de").read_text(encoding="utf-8").split("\n")[:150]
    hyps = []
    for i, ref in enumerate(refs):
        words = ref.split()
        if i % 3 == 0:
            words = words[: max(1, len(words) * 2 // 3)]  # too short
        elif i % 3 == 1 and len(words) > 3:
            words[1], words[2] = words[2], words[1]  # reordered
            words[-1] = words[-1].lower()
        hyps.append(" ".join(words).replace(",", " ,", 1))  # a detokenization slip
    hyp_path, ref_path = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp_path.write_text("\n".join(hyps) + "\n", encoding="utf-8")
    ref_path.write_text("\n".join(refs) + "\n", encoding="utf-8")
    return hyp_path, ref_path, hyps, refs


def sacrebleu_cli(ref: Path, hyp: Path, *extra: str) -> float:
    out = subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(ref), "-i", str(hyp), "-m", "bleu", "-b", "-w", "6", *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return float(out.stdout.strip())


def test_bleu_equals_the_sacrebleu_command_line(hyp_ref):
    hyp_path, ref_path, hyps, refs = hyp_ref
    scores = corpus_scores(hyps, refs, lang="de")
    assert 20 < scores["bleu"] < 95
    assert scores["bleu"] == pytest.approx(sacrebleu_cli(ref_path, hyp_path), abs=1e-5)
    assert scores["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")


def test_compound_splitting_follows_the_wmt14_rule():
    assert (
        split_compounds("Ski-Weltcup in Berlin-Mitte - heute")
        == "Ski ##AT##-##AT## Weltcup in Berlin ##AT##-##AT## Mitte - heute"
    )
    # one hyphen compound wrong: splitting turns it into partial credit, so the score rises
    hyps, refs = ["Die Ski-Saison in Berlin beginnt heute ."], ["Die Ski-Weltcup-Saison in Berlin beginnt heute ."]
    scores = corpus_scores(hyps, refs)
    assert scores["tok_bleu_compound"] > scores["tok_bleu"]


def test_sentence_bleu_and_length_mismatch():
    assert sentence_bleu("Das ist ein kleiner Test .", "Das ist ein kleiner Test .") == pytest.approx(100.0)
    assert sentence_bleu("Heute regnet es in Berlin .", "Das ist ein kleiner Test .") < 20
    assert corpus_scores(["a b c d"], ["a b c d"])["bleu"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_scores(["a", "b"], ["a"])


def test_cli_prints_json_last_line(hyp_ref, tmp_path):
    hyp_path, ref_path, hyps, refs = hyp_ref
    out = subprocess.run(
        [sys.executable, "-m", "canlib", "bleu", str(hyp_path), str(ref_path), "--lang", "de"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "sacreBLEU" in out.stdout and "tokenized BLEU" in out.stdout
    last = json.loads(out.stdout.strip().split("\n")[-1])
    assert {"bleu", "tok_bleu", "tok_bleu_compound", "signature"} <= set(last)
    assert last["bleu"] == pytest.approx(corpus_scores(hyps, refs)["bleu"])
    short = tmp_path / "short.de"
    short.write_text("eine Zeile\n", encoding="utf-8")
    bad = subprocess.run(
        [sys.executable, "-m", "canlib", "bleu", str(short), str(ref_path), "--lang", "de"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "short.de has 1 lines" in bad.stderr


def test_summed_sentence_statistics_score_any_resample_as_sacrebleu_scores_it(hyp_ref, tmp_path):
    """A bootstrap resample scored from summed per-sentence statistics equals the sacrebleu command line's score of
    that resample written out as files (repeated sentences and all)."""
    import random

    from canlib.bleu import bleu_of_statistics, sentence_statistics

    _, _, hyps, refs = hyp_ref
    stats = sentence_statistics(hyps, refs)
    assert len(stats) == len(hyps) and all(len(row) == 10 for row in stats)
    draw = random.Random(7)
    for picks in (list(range(len(hyps))), [draw.randrange(len(hyps)) for _ in hyps]):
        summed = [sum(stats[i][k] for i in picks) for k in range(10)]
        hyp_path, ref_path = tmp_path / "resample.hyp", tmp_path / "resample.ref"
        hyp_path.write_text("".join(hyps[i] + "\n" for i in picks), encoding="utf-8")
        ref_path.write_text("".join(refs[i] + "\n" for i in picks), encoding="utf-8")
        assert bleu_of_statistics(summed) == pytest.approx(sacrebleu_cli(ref_path, hyp_path), abs=1e-5)
    with pytest.raises(ValueError, match="expected 10"):
        bleu_of_statistics(summed[:9])
