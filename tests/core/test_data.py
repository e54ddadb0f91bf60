"""Preparing corpora offline from CANLIB_DATA_DIR: statistics, determinism, atomicity, bad input."""

from __future__ import annotations

import gzip
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import missing as missing_data

from canlib.cli import main
from canlib.data import binarized, load_prepared, prepare
from canlib.data.text import normalize


@pytest.fixture
def offline_env(shared_data, tmp_path, monkeypatch) -> Path:
    """Real data dir, a private cache, and downloading forbidden."""
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CANLIB_OFFLINE", "1")
    return shared_data


NEWS_FILES = ("train.detok", "newstest2008-2012", "newstest2013", "newstest2014", "newstest2015-2020")


@pytest.fixture
def news_env(offline_env) -> Path:
    """offline_env, skipped where the WMT news pool (local files only, no download) is absent."""
    missing = [
        f"{stem}.{lang}"
        for stem in NEWS_FILES
        for lang in ("en", "de")
        if not (offline_env / "wmt14-en-de" / f"{stem}.{lang}").is_file()
    ]
    if missing:
        missing_data(
            f"WMT news files not in {offline_env / 'wmt14-en-de'} (local only, no download): {', '.join(missing)}"
        )
    return offline_env


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "canlib", *args], capture_output=True, text=True, timeout=300, env=os.environ
    )


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_tiny_prepares_offline_and_prints_table1_statistics(news_env, tmp_path):
    offline_env = news_env
    out = run_cli("data", "prepare", "wmt14-en-de", "--scale", "tiny", "--out", str(tmp_path / "tiny"))
    assert out.returncode == 0, out.stderr
    assert "sent." in out.stdout and "en words" in out.stdout and "de words" in out.stdout
    corpus = load_prepared(tmp_path / "tiny")
    stats = corpus.meta["statistics"]
    for split, n in (("valid", 200), ("test", 200)):
        assert stats[split]["sentences"] == n == len(corpus.split(split))
        assert f"{split:<7}{n:>10,}{stats[split]['src_words']:>12,}" in out.stdout
    train = corpus.split("train")
    assert (
        2500
        <= len(train)
        <= 3000
        == corpus.meta["cleaning"]["raw_pairs"] - corpus.meta["cleaning"]["subsampled_out"] - 1
    )
    assert corpus.meta["counts"]["train"] == len(train) == stats["train"]["sentences"]
    assert 1800 <= corpus.vocab.size <= 2000
    # references are the first 200 raw lines of newstest2013 / newstest2014, whitespace-normalised
    valid, test = corpus.split("valid"), corpus.split("test")
    assert valid.tgt_text == [normalize(s) for s in lines(offline_env / "wmt14-en-de" / "newstest2013.de")[:200]]
    assert test.src_text == [normalize(s) for s in lines(offline_env / "wmt14-en-de" / "newstest2014.en")[:200]]
    # stored ids are the vocabulary's encoding, without BOS/EOS, and lengths agree
    src, tgt = test[0]
    assert src.dtype == np.int64 and src.tolist() == corpus.vocab.encode(test.src_text[0])
    assert tgt.tolist() == corpus.vocab.encode(test.tgt_text[0])
    assert test.src_lens.dtype == np.int64 and test.src_lens[0] == len(src) and test.tgt_lens[-1] == len(test[-1][1])
    assert sum(corpus.vocab.decode(test[i][1]) == test.tgt_text[i] for i in range(200)) >= 190
    assert stats["test"]["src_subwords"] == int(test.src_lens.sum())
    assert train.src_lens.max() <= 250 and np.all(
        np.maximum(train.src_lens, train.tgt_lens) <= 1.5 * np.minimum(train.src_lens, train.tgt_lens)
    )


def test_prepare_twice_gives_identical_vocabulary_and_ids(news_env, tmp_path):
    a = prepare("wmt14-en-de", "tiny", tmp_path / "a", progress=False)
    b = prepare("wmt14-en-de", "tiny", tmp_path / "b", progress=False)
    assert (a / "vocab.model").read_bytes() == (b / "vocab.model").read_bytes()
    arrays = sorted(p.name for p in a.glob("*.npy"))
    assert len(arrays) == 12
    for name in arrays:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    c = prepare("wmt14-en-de", "tiny", tmp_path / "c", seed=2, progress=False)
    assert (a / "train.src.tokens.npy").read_bytes() != (c / "train.src.tokens.npy").read_bytes()


def test_small_wmt14_is_the_37k_news_pool_with_full_newstest(news_env, tmp_path):
    corpus = load_prepared(prepare("wmt14-en-de", "small", tmp_path / "small", progress=False))
    meta = corpus.meta
    assert meta["cleaning"]["raw_pairs"] == 10000 + 13071 + 14585
    assert meta["cleaning"]["subsampled_out"] == 0
    kept = 37656 - sum(meta["cleaning"][k] for k in ("empty", "too_long", "ratio"))
    assert len(corpus.split("train")) == kept > 35000
    assert len(corpus.split("valid")) == 3000 and len(corpus.split("test")) == 3003
    assert corpus.vocab.size == 8000
    # the paper's Table 1 counts 110K words for newstest2013 and 114K for newstest2014 (both sides)
    for split, paper in (("valid", 110_000), ("test", 114_000)):
        s = meta["statistics"][split]
        assert abs(s["src_words"] + s["tgt_words"] - paper) < 1000


def test_multi30k_tiny_and_corpus_folder_as_data_dir(offline_env, tmp_path, monkeypatch):
    monkeypatch.setenv("CANLIB_DATA_DIR", str(offline_env / "multi30k-en-de"))
    corpus = load_prepared(prepare("multi30k-en-de", "tiny", tmp_path / "m", progress=False))
    assert len(corpus.split("valid")) == 200 and len(corpus.split("test")) == 200
    assert corpus.meta["cleaning"]["raw_pairs"] == 29000
    assert corpus.split("test").tgt_text[0] == normalize(
        lines(offline_env / "multi30k-en-de" / "test_2016_flickr.de")[0]
    )


def test_prepare_reuses_a_complete_folder_and_replaces_a_different_one_only_when_forced(offline_env, tmp_path):
    out = prepare("multi30k-en-de", "tiny", tmp_path / "m", progress=False)
    stamp = (out / "meta.json").stat().st_mtime_ns
    assert prepare("multi30k-en-de", "tiny", out, progress=False) == out
    assert (out / "meta.json").stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match=r"holds another preparation \(seed 1 \(asked: 3\)\); pass --force"):
        prepare("multi30k-en-de", "tiny", out, seed=3, progress=False)
    assert (out / "meta.json").stat().st_mtime_ns == stamp
    prepare("multi30k-en-de", "tiny", out, seed=3, progress=False, force=True)
    assert load_prepared(out).meta["seed"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no temp or old folder left, no download cache


def test_interrupted_prepare_leaves_no_folder(offline_env, tmp_path, monkeypatch):
    calls = []

    def failing_write(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_write(*args, **kwargs)

    real_write = binarized.write_side
    monkeypatch.setattr(importlib.import_module("canlib.data.preparation"), "write_side", failing_write)
    with pytest.raises(KeyboardInterrupt):
        prepare("multi30k-en-de", "tiny", tmp_path / "out" / "m", progress=False)
    assert list((tmp_path / "out").iterdir()) == []


# --- bad input: a small multi30k-shaped folder of real lines, then one file broken ---


@pytest.fixture
def small_multi30k(offline_env, tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "data" / "multi30k-en-de"
    folder.mkdir(parents=True)
    real = offline_env / "multi30k-en-de"
    for lang in ("en", "de"):
        with gzip.open(real / f"train.{lang}.gz", "rb") as f:
            train = f.read().split(b"\n")[:400]
        (folder / f"train.{lang}").write_bytes(b"\n".join(train) + b"\n")
        for split in ("val", "test_2016_flickr"):
            (folder / f"{split}.{lang}").write_bytes(b"".join((real / f"{split}.{lang}").open("rb").readlines()[:50]))
    monkeypatch.setenv("CANLIB_DATA_DIR", str(tmp_path / "data"))
    return folder


def expect_error(tmp_path: Path, *needles: str, error=ValueError) -> None:
    out = tmp_path / "out"
    with pytest.raises(error) as info:
        prepare("multi30k-en-de", "tiny", out / "m", progress=False)
    for needle in needles:
        assert needle in str(info.value)
    assert not out.exists() or list(out.iterdir()) == []


def test_bad_folder_fixture_prepares(small_multi30k, tmp_path):
    assert len(load_prepared(prepare("multi30k-en-de", "tiny", tmp_path / "ok", progress=False)).split("valid")) == 50


def test_misaligned_files_name_both_files(small_multi30k, tmp_path):
    path = small_multi30k / "val.de"
    path.write_bytes(b"".join(path.open("rb").readlines()[:-1]))
    expect_error(tmp_path, "val.en has 50 lines", "val.de has 49")


def test_invalid_utf8_names_file_and_line(small_multi30k, tmp_path):
    path = small_multi30k / "test_2016_flickr.en"
    rows = path.open("rb").readlines()
    rows[6] = b"A man \xff\xfe in a hat.\n"
    path.write_bytes(b"".join(rows))
    expect_error(tmp_path, "test_2016_flickr.en:7", "invalid UTF-8")


def test_empty_corpus_names_the_file(small_multi30k, tmp_path):
    (small_multi30k / "train.en").write_bytes(b"")
    (small_multi30k / "train.de").write_bytes(b"")
    expect_error(tmp_path, "train.en", "empty corpus")


def test_missing_file_is_named_when_offline(small_multi30k, tmp_path):
    (small_multi30k / "val.de").unlink()
    expect_error(tmp_path, "multi30k-en-de/val.de", "CANLIB_OFFLINE", error=FileNotFoundError)


def test_a_failed_download_names_the_data_folder_variable(small_multi30k, tmp_path, monkeypatch):
    """Without network a missing file fails with the download's error and the variable that points at a local copy."""
    (small_multi30k / "val.de").unlink()
    monkeypatch.delenv("CANLIB_OFFLINE")

    def no_network(remote, *args, **kwargs):
        raise RuntimeError(f"{remote.url}: download failed after 4 tries (<urlopen error no network>)")

    monkeypatch.setattr(importlib.import_module("canlib.data.preparation"), "fetch", no_network)
    expect_error(
        tmp_path, "download failed", "multi30k-en-de/val.de", f"CANLIB_DATA_DIR={tmp_path / 'data'}", error=RuntimeError
    )


def test_cli_reports_bad_input_and_unknown_names(small_multi30k, tmp_path, capsys):
    (small_multi30k / "val.de").unlink()
    assert main(["data", "prepare", "multi30k-en-de", "--scale", "tiny", "--out", str(tmp_path / "o")]) == 2
    assert "val.de" in capsys.readouterr().err
    assert main(["data", "prepare", "wmt14-en-xx"]) == 2
    assert "unknown corpus 'wmt14-en-xx'" in capsys.readouterr().err
    assert main(["data", "prepare", "multi30k-en-de", "--scale", "huge"]) == 2
    assert "no scale 'huge'" in capsys.readouterr().err
    assert main(["data", "list"]) == 0
    listing = capsys.readouterr().out
    for name in (
        "wmt14-en-de",
        "wmt14-en-fr",
        "wmt17-en-de",
        "wmt17-en-fi",
        "wmt17-en-lv",
        "wmt17-en-ru",
        "wmt17-en-cs",
        "multi30k-en-de",
        "multi30k-de-en",
        "multi30k-en-fr",
        "multi30k-fr-en",
        "multi30k-en-cs",
        "multi30k-cs-en",
    ):
        assert name in listing


def test_inspect_prints_statistics_and_iteration_speed(small_multi30k, tmp_path, capsys):
    out = prepare("multi30k-en-de", "tiny", tmp_path / "m", progress=False)
    assert main(["data", "inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"{'valid':<7}{50:>10,}" in text and re.search(r"iterating train: [\d,]+ sentence pairs/s", text)


# --- Multi30k directions and named extra test sets (format 2) ---


def test_reversed_direction_prepares_from_the_forward_folder_via_cli(offline_env, tmp_path):
    out = run_cli("data", "prepare", "multi30k-de-en", "--scale", "small", "--out", str(tmp_path / "de-en"))
    assert out.returncode == 0, out.stderr
    corpus = load_prepared(tmp_path / "de-en")
    assert (corpus.src_lang, corpus.tgt_lang) == ("de", "en") and corpus.meta["format_version"] == 2
    assert corpus.test_splits == ("test", "test2017_flickr", "test2017_mscoco")
    folder = offline_env / "multi30k-en-de"
    for split, stem, n in (
        ("test", "test_2016_flickr", 1000),
        ("test2017_flickr", "test_2017_flickr", 1000),
        ("test2017_mscoco", "test_2017_mscoco", 461),
    ):
        part = corpus.split(split)
        assert len(part) == n == corpus.meta["statistics"][split]["sentences"]
        assert part.src_text == [normalize(s) for s in lines(folder / f"{stem}.de")]
        assert part.tgt_text == [normalize(s) for s in lines(folder / f"{stem}.en")]
        assert f"{split:<16}{n:>10,}" in out.stdout  # a Table-1 row per test set
    assert "de words" in out.stdout and corpus.vocab.size == 8000
    assert len(corpus.split("valid")) == 1014 and corpus.meta["cleaning"]["raw_pairs"] == 29000


def test_czech_has_only_test2016_as_its_test_set(offline_env, tmp_path):
    corpus = load_prepared(prepare("multi30k-en-cs", "small", tmp_path / "cs", progress=False))
    assert corpus.test_splits == ("test",) and corpus.src_lang == "en" and corpus.tgt_lang == "cs"
    assert corpus.split("test").tgt_text[0] == normalize(
        lines(offline_env / "multi30k-en-cs" / "test_2016_flickr.cs")[0]
    )
    with pytest.raises(ValueError, match="unknown split 'test2017_flickr'.*'train', 'valid', 'test'"):
        corpus.split("test2017_flickr")


def test_a_format_1_folder_still_loads_with_test_as_its_only_test_set(offline_env, tmp_path):
    out = prepare("multi30k-en-de", "tiny", tmp_path / "m", progress=False)
    meta = load_prepared(out).meta
    del meta["test_splits"]
    meta["format_version"] = 1
    (out / "meta.json").write_text(json.dumps(meta))
    corpus = load_prepared(out)
    assert corpus.test_splits == ("test",) and len(corpus.split("test")) == 200
    meta["format_version"] = 3
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"meta\.json: format_version 3, this canlib reads \(1, 2\)"):
        load_prepared(out)


def test_a_corpus_another_process_renamed_into_place_first_is_kept_and_this_copy_dropped(tmp_path, monkeypatch):
    """Two workers of one experiment may prepare the same corpus at once: the second rename finds the folder
    filled (ENOTEMPTY); with the same recipe it keeps the first and drops its own, with another it raises."""
    from canlib.data import preparation

    out, tmp = tmp_path / "corpus", tmp_path / ".corpus.x.tmp"
    real_replace = os.replace

    def other_process_first(src, dst, recipe):
        if Path(dst) == out and not out.exists():  # the other worker renames its folder in between
            out.mkdir()
            (out / "meta.json").write_text(json.dumps({"recipe": recipe}))
            (out / "theirs").write_text("")
        return real_replace(src, dst)

    for ours, theirs, kept in (({"a": 1}, {"a": 1}, True), ({"a": 1}, {"a": 2}, False)):
        shutil.rmtree(out, ignore_errors=True)
        tmp.mkdir()
        (tmp / "meta.json").write_text(json.dumps({"recipe": ours}))
        monkeypatch.setattr(preparation.os, "replace", lambda s, d, r=theirs: other_process_first(s, d, r))
        if kept:
            preparation._swap_into_place(tmp, out)
            assert sorted(p.name for p in out.iterdir()) == ["meta.json", "theirs"] and not tmp.exists()
        else:
            with pytest.raises(OSError):
                preparation._swap_into_place(tmp, out)
            shutil.rmtree(tmp)
