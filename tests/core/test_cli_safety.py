"""The command line never destroys what it did not make, run as a user runs it (a subprocess): an output that is an
input is refused, a folder of another corpus or kind is replaced only with ``--force`` (or not at all), and an
output that is not a regular file (a named pipe, a device, a symlink) is written to, not replaced; a translation
file grows as it is translated, so an interrupt keeps the lines done."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, write_toy_corpus
from conftest import TINY_LINES as LINES  # what the checkpoint fixture's vocabulary knows


def canlib(*args: str, cache: Path | None = None, **options) -> subprocess.CompletedProcess:
    """``python -m canlib ARGS`` as a user runs it (one thread, this checkout's canlib)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    if cache is not None:
        env["CANLIB_CACHE_DIR"] = str(cache)
    options.setdefault("capture_output", True)
    return subprocess.run(
        [sys.executable, "-m", "canlib", *args], text=True, env=env, timeout=300, check=False, **options
    )


@pytest.fixture
def source(tmp_path) -> Path:
    path = tmp_path / "input.en"
    path.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    return path


def expected_translations(checkpoint: Path, lines: list[str]) -> list[str]:
    """The model's translations, computed in this process (the reference a command's output must equal)."""
    from canlib.decoding.translate import load_translator, translate_lines

    model, vocab = load_translator(checkpoint)
    return translate_lines(model, vocab, lines)


def translate(checkpoint: Path, source: Path, output: str | Path, *more: str) -> subprocess.CompletedProcess:
    return canlib("translate", "--checkpoint", str(checkpoint), "--device", "cpu", "--input", str(source),
                  "--output", str(output), *more)  # fmt: skip


def test_an_output_equal_to_the_input_is_refused_and_the_input_kept(checkpoint, source):
    before = source.read_bytes()
    for spelling in (source, source.parent / ".." / source.parent.name / source.name):
        done = translate(checkpoint, source, spelling)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines() == [
            f"canlib translate: error: --output {spelling}: is the --input file; write the translations elsewhere"
        ]
        assert source.read_bytes() == before


def test_a_named_pipe_output_is_read_whole_by_its_reader_and_stays_a_pipe(checkpoint, source, tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = translate(checkpoint, source, fifo)
    reader.join(timeout=60)
    assert done.returncode == 0, done.stderr
    assert received and received[0].decode().splitlines() == expected_translations(checkpoint, LINES)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_symlinked_output_is_written_through_to_its_target(checkpoint, source, tmp_path):
    target = tmp_path / "elsewhere" / "translations.de"
    target.parent.mkdir()
    target.write_text("old text\n")
    link = tmp_path / "out.de"
    link.symlink_to(target)
    done = translate(checkpoint, source, link)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().splitlines() == expected_translations(checkpoint, LINES)


def test_a_device_output_is_written_to_not_replaced(checkpoint, source, tmp_path):
    """A character device (the null device) as --output: written to, still a device afterwards. As root, on a node
    of its own in the test's folder, so that a writer which replaces its output cannot break the machine's
    /dev/null; otherwise /dev/null itself (which such a writer, not root, cannot replace)."""
    device = Path("/dev/null")
    if os.geteuid() == 0:
        device = tmp_path / "null"
        try:
            os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except OSError as exc:
            pytest.skip(f"cannot make a device node here ({exc})")
    done = translate(checkpoint, source, device)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_an_interrupted_translation_keeps_the_lines_it_finished(checkpoint, tmp_path):
    """SIGINT once the output file holds lines: the command stops, and the file holds the first lines' translations
    (whole lines, in input order), not nothing."""
    lines = [LINES[i % 3] + f" {i}" for i in range(3000)]
    source = tmp_path / "many.en"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    output = tmp_path / "many.de"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "canlib", "translate", "--checkpoint", str(checkpoint), "--device", "cpu",
            "--input", str(source), "--output", str(output), "--batch-size", "2"]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (output.exists() and output.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    kept = output.read_text(encoding="utf-8")
    assert code == 130 and kept.endswith("\n")
    kept_lines = kept.splitlines()
    assert 0 < len(kept_lines) < len(lines)
    assert kept_lines == expected_translations(checkpoint, lines[: len(kept_lines)])


def test_preparing_over_another_corpus_is_refused_without_force(tmp_path):
    write_toy_corpus(tmp_path / "a", {"train": 60, "valid": 5, "test": 5})
    write_toy_corpus(tmp_path / "b", {"train": 80, "valid": 5, "test": 5})
    out = tmp_path / "prepared"
    common = ["--src", "en", "--tgt", "de", "--vocab-size", "40", "--out", str(out)]
    cache = tmp_path / "cache"
    assert canlib("data", "prepare", "first", "--files", str(tmp_path / "a"), *common, cache=cache).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    done = canlib("data", "prepare", "second", "--files", str(tmp_path / "b"), *common, cache=cache)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1
    assert f"{out}: holds another preparation (corpus first (asked: second)" in done.stderr
    assert "--force" in done.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    again = canlib("data", "prepare", "second", "--files", str(tmp_path / "b"), *common, "--force", cache=cache)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "meta.json").read_text())["corpus"] == "second"


def test_a_run_over_a_prepared_corpus_is_refused_even_with_overwrite(tmp_path):
    folder = tmp_path / "prepared"
    folder.mkdir()
    (folder / "meta.json").write_text("{}")
    (folder / "vocab.model").write_bytes(b"pieces")
    done = canlib("train", "--preset", "tiny-can", "--data", str(folder), "--out", str(folder), "--overwrite")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"canlib train: error: {folder}: holds a prepared corpus (meta.json), not a run; give the run a folder of "
        "its own"
    ]
    assert sorted(p.name for p in folder.iterdir()) == ["meta.json", "vocab.model"]


def test_the_library_writer_follows_a_symlink_and_writes_into_a_pipe(tmp_path):
    """``atomic_write_bytes`` (every JSON and checkpoint the commands store): a symlink's target gets the bytes and
    the link stays; a named pipe's reader gets them and the pipe stays."""
    from canlib.io import atomic_write_bytes

    target, link, fifo = tmp_path / "target.json", tmp_path / "link.json", tmp_path / "pipe"
    target.write_bytes(b"old")
    link.symlink_to(target)
    atomic_write_bytes(b"new", link)
    assert link.is_symlink() and target.read_bytes() == b"new"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    atomic_write_bytes(b"through the pipe", fifo)
    reader.join(timeout=30)
    assert received == [b"through the pipe"] and stat.S_ISFIFO(fifo.lstat().st_mode)
