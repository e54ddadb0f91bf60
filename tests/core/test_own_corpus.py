"""A researcher's own corpus: README's own-corpus commands run as written (at the smallest presets, with the values a
toy corpus needs), and what ``canlib data prepare --files`` keeps, counts and registers, and which language
``canlib bleu`` scores in."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, write_toy_corpus

from canlib.cli import main

# -- README's path, end to end ---------------------------------------------------------------------------------------


def own_corpus_commands() -> list[str]:
    """The command lines of README's "Your own corpus" block."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("### Your own corpus", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip()]


# README's values for a real corpus -> a 14-word toy corpus trained for well under a minute
TOY_VALUES = {"--vocab-size": {"8000": "60"}, "--max-steps": {"4000": "60", "6000": "70"}, "--warmup": {"400": "10"}}
NEW_RUN = ["--max-tokens", "512", "--valid-every", "30", "--no-progress"]  # a new run's batches and validations


def at_toy_scale(argv: list[str]) -> list[str]:
    """README's arguments with the toy corpus's values: the tiny presets, a 60-piece vocabulary, 60 updates."""
    out = []
    for before, arg in zip(["", *argv], argv):
        if before in TOY_VALUES:
            arg = TOY_VALUES[before][arg]
        elif before == "--preset":
            arg = arg.replace("small-", "tiny-")
        out.append(arg)
    return out + (NEW_RUN if out[0] == "train" and "--resume" not in out else [])


def test_readme_own_corpus_path_runs_end_to_end(tmp_path, monkeypatch, capsys):
    """Prepare plain files, train CAN and Balanced, translate from a file and from a pipe, score, export Balanced to
    CTranslate2 and translate with it, then train CAN longer with --resume: every command as README writes it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    write_toy_corpus(tmp_path / "my-corpus", {"train": 300, "valid": 20, "test": 20})
    commands = own_corpus_commands()
    assert [c.split()[:3] for c in commands[:2]] == [["canlib", "data", "prepare"], ["canlib", "train", "--preset"]]
    printed = {}
    for line in commands:
        if line.startswith("cat "):  # a real pipe, through the shell
            shell = line.replace("canlib ", f"{shlex.quote(sys.executable)} -m canlib ")
            done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            continue
        argv = at_toy_scale(shlex.split(line)[1:])
        assert main(argv) == 0, line
        printed[" ".join(argv[:2])] = capsys.readouterr()

    assert "train: 300 of 300 pairs kept" in printed["data prepare"].out
    file_out = Path("can.de").read_text(encoding="utf-8").splitlines()
    assert len(file_out) == 20 and Path("can-piped.de").read_text(encoding="utf-8").splitlines() == file_out
    # the score: sacreBLEU's, in the prepared corpus's language (German: the tokenizer named in the output)
    sacrebleu = pytest.importorskip("sacrebleu")
    refs = Path("prepared/mine/test.tgt.txt").read_text(encoding="utf-8").splitlines()
    scores = json.loads(printed["bleu can.de"].out.splitlines()[-1])
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(file_out, [refs]).score, abs=1e-9)
    assert "(sacremoses de + multi-bleu" in printed["bleu can.de"].out
    # README's habits: validation BLEU, two systems compared, a run started from CAN's weights
    assert "valid_bleu" in json.loads(Path("runs/mine-can/result.json").read_text())["last_valid"]
    assert scores["compare"]["other"] == "balanced.de" and 0 < scores["compare"]["bleu"]["p_value"] <= 1
    tuned = json.loads(Path("runs/mine-can-tuned/config.json").read_text())
    assert tuned["init_from"] == str(Path("runs/mine-can/average.pt").resolve())
    # CTranslate2's translations are canlib's under its convention, and greedy ones are canlib's default
    ct2 = Path("balanced-ct2.de").read_text(encoding="utf-8").splitlines()
    common = ["translate", "--checkpoint", "runs/mine-balanced/average.pt", "--input", "my-corpus/test.en"]
    assert main([*common, "--renormalize", "--output", "renormalized.de"]) == 0
    assert Path("renormalized.de").read_text(encoding="utf-8").splitlines() == ct2
    assert main([*common, "--beam", "1", "--output", "greedy.de"]) == 0
    assert main(["translate", "--checkpoint", "balanced-ct2", "--input", "my-corpus/test.en", "--beam", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == Path("greedy.de").read_text(encoding="utf-8").splitlines()
    # CAN has no CTranslate2 layer: one line that says why
    assert main(["export", "ctranslate2", "--checkpoint", "runs/mine-can/average.pt", "--out", "can-ct2"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "CAN computes self-attention, cross-attention and the FFN as one compressed" in err[0]
    assert not Path("can-ct2").exists()
    # the resume moved the stop and trained on with the stored options
    assert "max_steps changed from 60 to 70" in printed["train --out"].err
    config = json.loads(Path("runs/mine-can/config.json").read_text())
    assert config["train"]["max_steps"] == 70 and config["train"]["warmup"] == 10 and config["preset"] == "tiny-can"
    assert torch.load("runs/mine-can/checkpoints/step_0000070.pt", weights_only=True)["step"] == 70


# -- data prepare --files ----------------------------------------------------------------------------------------


def prepare(files: Path, out: Path, *extra: str, name: str = "mine") -> int:
    args = ["--files", str(files), "--src", "en", "--tgt", "de", "--vocab-size", "60", "--out", str(out)]
    return main(["data", "prepare", name, *args, *extra])


def unbalanced_corpus(folder: Path) -> Path:
    """3,100 training pairs (more than a tiny scale's 3,000) of which 31 have a target three times as long,
    and 250 valid and test lines (more than its 200)."""
    write_toy_corpus(folder, {"train": 3100, "valid": 250, "test": 250})
    tgt = (folder / "train.de").read_text().splitlines()
    tgt = [" ".join([t] * 3) if i % 100 == 0 else t for i, t in enumerate(tgt)]
    (folder / "train.de").write_text("".join(t + "\n" for t in tgt))
    return folder


def test_a_corpus_of_files_keeps_every_line_and_names_each_pair_left_out(tmp_path, monkeypatch, capsys):
    from canlib.data import load_prepared
    from canlib.data.text import normalize
    from canlib.data.vocab import Vocabulary

    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    files = unbalanced_corpus(tmp_path / "files")
    assert prepare(files, tmp_path / "whole") == 0
    whole = load_prepared(tmp_path / "whole")
    assert [len(whole.split(s)) for s in ("train", "valid", "test")] == [3100, 250, 250]
    assert "train: 3,100 of 3,100 pairs kept; left out: 0 with an empty side, 0 by sampling" in capsys.readouterr().out
    # the length-ratio filter on: the pairs it leaves out, counted here from the vocabulary's own pieces
    vocab = Vocabulary.load(tmp_path / "whole" / "vocab.model")
    pairs = zip(*((files / f"train.{lang}").read_text().splitlines() for lang in ("en", "de")))
    lengths = [(len(vocab.encode(normalize(s))), len(vocab.encode(normalize(t)))) for s, t in pairs]
    over = sum(max(a, b) > 1.5 * min(a, b) for a, b in lengths)
    assert over >= 31
    assert prepare(files, tmp_path / "filtered", "--max-ratio", "1.5", "--force") == 0
    assert len(load_prepared(tmp_path / "filtered").split("train")) == 3100 - over
    assert f"{over:,} with one side over 1.5x the other's length" in capsys.readouterr().out
    assert prepare(files, tmp_path / "sampled", "--train-pairs", "1000", "--force") == 0
    assert len(load_prepared(tmp_path / "sampled").split("train")) == 1000
    assert "train: 1,000 of 3,100 pairs kept; left out: 0 with an empty side, 2,100 by sampling" in (
        capsys.readouterr().out
    )


def test_a_failed_preparation_registers_nothing_and_force_prepares_again(tmp_path, monkeypatch, capsys):
    from canlib.data.corpora import registered_files

    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    broken = write_toy_corpus(tmp_path / "broken", {"train": 60, "valid": 10, "test": 10})
    (broken / "valid.de").write_text("".join((broken / "valid.de").read_text().splitlines(True)[:-1]))
    assert prepare(broken, tmp_path / "a") == 2
    assert "valid.en has 10 lines but" in capsys.readouterr().err
    assert registered_files() == []
    fixed = write_toy_corpus(tmp_path / "fixed", {"train": 60, "valid": 10, "test": 10})
    assert prepare(fixed, tmp_path / "a") == 0  # the name was not taken by the failed attempt
    assert registered_files() == ["mine"]
    capsys.readouterr()
    assert prepare(fixed, tmp_path / "a", "--vocab-size", "50") == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "vocab_size 60 -> 50" in err[0] and "pass --force to prepare it again" in err[0]
    stamp = (tmp_path / "a" / "meta.json").stat().st_mtime_ns
    assert prepare(fixed, tmp_path / "a", "--force") == 0  # the same recipe, prepared again
    assert (tmp_path / "a" / "meta.json").stat().st_mtime_ns != stamp
    assert prepare(fixed, tmp_path / "a", "--vocab-size", "50", "--force") == 0
    assert json.loads((tmp_path / "cache" / "corpora" / "mine.json").read_text())["vocab_size"] == 50


def test_a_registered_corpus_names_the_valid_and_test_lines_its_scale_keeps(shared_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CANLIB_OFFLINE", "1")
    assert main(["data", "prepare", "multi30k-en-de", "--scale", "tiny", "--out", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "valid: the first 200 of 1,014 lines (the tiny scale's cap)" in out
    assert "test: the first 200 of 1,000 lines (the tiny scale's cap)" in out


# -- canlib bleu's language ---------------------------------------------------------------------------------------


def test_bleu_takes_the_language_of_the_prepared_corpus_or_of_the_references_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    files = write_toy_corpus(tmp_path / "files", {"train": 60, "valid": 10, "test": 10}, tgt="fr")
    args = ["--files", str(files), "--src", "en", "--tgt", "fr", "--vocab-size", "50", "--out", str(tmp_path / "p")]
    assert main(["data", "prepare", "enfr", *args]) == 0
    ref = tmp_path / "p" / "test.tgt.txt"
    capsys.readouterr()
    assert main(["bleu", str(ref), str(ref)]) == 0
    assert "(sacremoses fr + multi-bleu" in capsys.readouterr().out
    elsewhere = tmp_path / "ref.fr"
    elsewhere.write_text(ref.read_text())
    assert main(["bleu", str(ref), str(elsewhere), "--data", str(tmp_path / "p")]) == 0
    assert "(sacremoses fr + multi-bleu" in capsys.readouterr().out
    assert main(["bleu", str(ref), str(elsewhere)]) == 0  # the reference's suffix
    assert "(sacremoses fr + multi-bleu" in capsys.readouterr().out
    unnamed = tmp_path / "reference.txt"
    unnamed.write_text(ref.read_text())
    assert main(["bleu", str(ref), str(unnamed)]) == 0  # no language: sacreBLEU alone, and why
    assert "tokenized BLEU: not computed (no language: give --lang" in capsys.readouterr().out
    assert main(["bleu", str(ref), str(elsewhere), "--lang", "de", "--data", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--lang de: the prepared corpus" in err[0], err
