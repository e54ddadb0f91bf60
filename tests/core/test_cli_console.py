"""What the commands say while they work, run as a user runs them: the threads they compute with (``--threads``,
a notice on a busy machine), a training console a log file can read (a start-up summary, a row every
``--log-every`` updates with an ETA, one epoch numbering), and a resume that moves what does not change the recipe."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, prepare_toy_corpus, small_model, write_toy_corpus

from canlib import io as canlib_io

LINES = ["a dog runs in the park", "the cat sits on the mat", "zwei hunde spielen"]


def canlib(*args: str, cache: Path, **options) -> subprocess.CompletedProcess:
    """``python -m canlib ARGS`` as a user runs it (this checkout's canlib, no OMP_NUM_THREADS of the tests')."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env.update(PYTHONPATH=str(REPO), CANLIB_CACHE_DIR=str(cache))
    if "stdout" not in options:
        options.setdefault("capture_output", True)
    return subprocess.run(
        [sys.executable, "-m", "canlib", *args], text=True, env=env, timeout=600, check=False, **options
    )


def test_translate_computes_with_the_threads_asked_and_counts_its_lines(tmp_path):
    from canlib.data.vocab import Vocabulary
    from canlib.model.checkpoint import save_model

    vocab = Vocabulary.train(LINES * 30, vocab_size=40)
    vocab.save(tmp_path / "vocab.model")
    torch.manual_seed(0)
    save_model(small_model(vocab_size=vocab.size, dec_layers=1, max_len=64), tmp_path / "model.pt", vocab_id=vocab.id)
    source = tmp_path / "input.en"
    source.write_text("".join(line + "\n" for line in LINES))
    for threads in ("1", "2"):
        out = tmp_path / f"out{threads}.de"
        done = canlib("translate", "--checkpoint", str(tmp_path / "model.pt"), "--device", "cpu", "--input",
                      str(source), "--output", str(out), "--threads", threads, cache=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        said = [line for line in done.stderr.splitlines() if "translated" in line]
        assert said == [f"canlib translate: 3 lines translated to {out} (cpu, {threads} thread(s))"]
        assert len(out.read_text().splitlines()) == 3


def test_the_default_threads_are_the_cores_at_most_four_unless_omp_num_threads_says(monkeypatch):
    for available in (1, 2, 3, 4, 6, 64):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=available: set(range(n)))
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert canlib_io.default_threads() == min(available, 4)
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert canlib_io.default_threads() == 3


def test_a_busy_machine_is_noticed_once_its_load_exceeds_the_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    threads = torch.get_num_threads()
    try:
        monkeypatch.setattr(os, "getloadavg", lambda: (2.0, 0.0, 0.0))
        assert canlib_io.use_threads(2) == (2, None) and torch.get_num_threads() == 2
        monkeypatch.setattr(os, "getloadavg", lambda: (5.5, 0.0, 0.0))
        number, notice = canlib_io.use_threads(2)
        assert number == 2 and notice.startswith("note: the machine is busy (load average 5.5 on 2 core(s))")
        assert "--threads 1" in notice and "\n" not in notice
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return prepare_toy_corpus(tmp_path_factory.mktemp("console"), {"train": 300, "valid": 20, "test": 20}, canlib)


TRAIN = ["--preset", "tiny-baseline", "--max-tokens", "512", "--warmup", "4", "--valid-every", "6"]


def test_a_log_file_gets_a_startup_summary_rows_with_an_eta_and_one_epoch_numbering(prepared, tmp_path):
    """stdout to a file: the summary names the parameters (as many as the model has), the pairs, the updates per
    epoch, the device and threads; a row per update (--log-every 1) with loss, lr, tok/s and ETA, whose epochs are
    ceil(step / updates per epoch), as log.jsonl's are, and as the final line and the resume message say."""
    from canlib.model.config import preset
    from canlib.model.seq2seq import Seq2Seq

    run = tmp_path / "run"
    with open(tmp_path / "log.txt", "w") as log:
        done = canlib("train", *TRAIN, "--data", str(prepared), "--out", str(run), "--max-steps", "12",
                      "--log-every", "1", "--threads", "1", cache=tmp_path, stdout=log,
                      stderr=subprocess.PIPE)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "log.txt").read_text().splitlines()
    summary = "\n".join(lines[:4])
    params = sum(p.numel() for p in Seq2Seq(preset("tiny-baseline", vocab_size=60)).parameters())
    assert f"{params:,} parameters" in summary
    assert "300 training pairs, 20 validation pairs" in summary and "device cpu, 1 thread(s)" in summary
    per_epoch = int(re.search(r"(\d+) updates per epoch", summary).group(1))
    rows = [line for line in lines if line.startswith("train | step")]
    assert len(rows) >= 12
    by_step = {}
    for row in rows:
        found = re.match(r"train \| step (\d+) \| epoch (\d+) \| loss [\d.]+ \| nll [\d.]+ \| lr \S+ \| [\d,]+ tok/s"
                         r" \| eta \d+:\d\d:\d\d$", row)  # fmt: skip
        assert found, row
        by_step[int(found.group(1))] = int(found.group(2))
    assert by_step == {step: math.ceil(step / per_epoch) for step in range(1, 13)}
    logged = [json.loads(x) for x in (run / "log.jsonl").read_text().splitlines()]
    assert all(row["epoch"] == math.ceil(row["step"] / per_epoch) for row in logged)
    assert json.loads(lines[-1])["epoch"] == by_step[12]
    # a resume may move what does not change the recipe: the device, the rows' interval, the threads
    resumed = canlib("train", "--out", str(run), "--resume", "--max-steps", "13", "--log-every", "5",
                     "--threads", "2", "--device", "cpu", cache=tmp_path)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert f"(step 12, epoch {by_step[12]})" in resumed.stderr
    assert "device cpu, 2 thread(s)" in resumed.stdout and "a row every 5 updates" in resumed.stdout
    assert json.loads((run / "config.json").read_text())["train"]["log_every"] == 5


def test_data_prepare_encodes_on_the_threads_asked_with_the_same_ids(tmp_path):
    write_toy_corpus(tmp_path / "files", {"train": 300, "valid": 20, "test": 20})
    folders = {}
    for threads in ("1", "2"):
        out = tmp_path / f"t{threads}"
        done = canlib("data", "prepare", f"toy{threads}", "--files", str(tmp_path / "files"), "--src", "en", "--tgt",
                      "de", "--vocab-size", "60", "--out", str(out), "--threads", threads,
                      cache=tmp_path / "c")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"(encoded on {threads} thread(s))" in done.stdout
        folders[threads] = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix == ".npy"}
    assert folders["1"] and folders["1"] == folders["2"]
