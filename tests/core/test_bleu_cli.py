"""``canlib bleu`` as a user runs it: sacreBLEU (13a) for any language, tokenized BLEU only where the Moses tokenizer
has rules (and said so), the language from the reference's suffix in any case, chrF and TER through sacreBLEU, and
``--compare``: sacreBLEU's own paired bootstrap, with the p-values its command line prints."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

sacrebleu = pytest.importorskip("sacrebleu")
WORDS = "the cat dog sees a house tree car bird man woman ball has likes finds".split()


def canlib(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "canlib", *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def systems(folder: Path, ref_name: str = "ref.txt") -> tuple[Path, Path, Path]:
    """A reference and two close systems (each word kept with probability 0.7 and 0.65): 80 made-up sentences."""
    rng = random.Random(3)
    refs, first, second = [], [], []
    for _ in range(80):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 12))]
        refs.append(" ".join(words))
        first.append(" ".join(w if rng.random() < 0.7 else rng.choice(WORDS) for w in words))
        second.append(" ".join(w if rng.random() < 0.65 else rng.choice(WORDS) for w in words))
    paths = folder / "a.hyp", folder / "b.hyp", folder / ref_name
    for path, lines in zip(paths, (first, second, refs)):
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return paths


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_any_language_gets_sacrebleu_and_tokenized_bleu_only_where_moses_has_rules(tmp_path):
    hyp, _, ref = systems(tmp_path)
    done = canlib("bleu", str(hyp), str(ref), "--lang", "ja")
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout.splitlines()[-1])
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(lines(hyp), [lines(ref)]).score, abs=1e-9)
    assert "tok:13a" in scores["signature"] and "tok_bleu" not in scores
    assert "tokenized BLEU: not computed (the Moses tokenizer has no rules for 'ja')" in done.stdout


def test_the_language_comes_from_the_references_suffix_and_any_case(tmp_path):
    hyp, _, ref = systems(tmp_path, "newstest.FR")
    done = canlib("bleu", str(hyp), str(ref))
    assert done.returncode == 0, done.stderr
    assert "(sacremoses fr + multi-bleu, case-sensitive)" in done.stdout
    assert json.loads(done.stdout.splitlines()[-1])["lang"] == "fr"
    upper = canlib("bleu", str(hyp), str(ref), "--lang", "DE")
    assert upper.returncode == 0 and "(sacremoses de + multi-bleu" in upper.stdout


def test_chrf_and_ter_are_sacrebleus(tmp_path):
    hyp, _, ref = systems(tmp_path)
    done = canlib("bleu", str(hyp), str(ref), "--lang", "en", "--metrics", "bleu,chrf,ter")
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout.splitlines()[-1])
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(lines(hyp), [lines(ref)]).score, abs=1e-9)
    assert scores["ter"] == pytest.approx(sacrebleu.corpus_ter(lines(hyp), [lines(ref)]).score, abs=1e-9)
    bad = canlib("bleu", str(hyp), str(ref), "--lang", "en", "--metrics", "bleu,meteor")
    assert bad.returncode == 2 and bad.stderr.splitlines() == [
        "canlib bleu: error: --metrics bleu,meteor: choose among bleu, chrf, ter (comma-separated)"
    ]


def test_compare_gives_the_p_values_of_sacrebleus_paired_bootstrap_command(tmp_path):
    first, second, ref = systems(tmp_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    theirs = subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(ref), "-i", str(first), str(second), "--paired-bs", "-m", "bleu",
         "chrf", "-f", "text"],
        capture_output=True, text=True, env=env, timeout=300, check=True,
    ).stdout  # fmt: skip
    their_p = [float(p) for p in re.findall(r"\(p = ([\d.]+)\)", theirs)]
    assert len(their_p) == 2 and 0.01 < min(their_p)  # close systems: a p-value off sacreBLEU's floor of 0.001
    done = canlib("bleu", str(first), str(ref), "--lang", "en", "--metrics", "bleu,chrf", "--compare", str(second))
    assert done.returncode == 0, done.stderr
    compared = json.loads(done.stdout.splitlines()[-1])["compare"]
    assert [round(compared[m]["p_value"], 4) for m in ("bleu", "chrf")] == their_p
    bleu_row = re.search(r"Baseline: \S+\s+│\s+([\d.]+) \(([\d.]+) ± ([\d.]+)\)", theirs).groups()
    base = compared["bleu"]["baseline"]
    assert [f"{base[k]:.1f}" for k in ("score", "mean", "ci")] == list(bleu_row)
    assert f"p = {compared['bleu']['p_value']:.4f}" in done.stdout
